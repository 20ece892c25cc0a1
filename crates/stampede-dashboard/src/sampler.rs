//! The sampling thread: each refresh it takes the newest image frame, finds the overlays for
//! it, reads the runtime's graph, and publishes the result for the WebSocket clients.
//!
//! It runs on a plain thread, not on tokio, because a remote runtime's calls block. Its reads
//! never wait (timeout 0), and it never holds GC back for long: the frame gotten is consumed
//! at once (`consume_until` its timestamp, skipping older ones), and on each overlay channel
//! everything up to the frame's timestamp is consumed at once and everything present at one
//! refresh is consumed by the next. The frame's pixels stay readable after the consume: the
//! dashboard keeps its own reference to the payload (zero-copy embedded, a copy remotely).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::Utf8Bytes;
use bytes::Bytes;
use stampede::{Channel, ChannelInput, Container, Error, Item, Runtime, Selector, Task, Timestamp, INFINITY, TS_MAX};

use crate::image::{decode_frame, Frame};
use crate::snapshot::{build, Context, ImageState, OverlayState, Rates, Ts, RATE_WINDOW_MIN};
use crate::DashboardOptions;
use stampede_view::image::decode_overlay;

/// The name of the dashboard's task, as tools show it.
pub(crate) const TASK_NAME: &str = "dashboard";

/// What the clients are sent at each refresh.
pub(crate) struct Update {
    /// The snapshot JSON.
    pub snapshot: Utf8Bytes,
    /// The frame shown, if any; a client sends it again only when `seq` changes.
    pub frame: Option<FrameMessage>,
}

#[derive(Clone)]
pub(crate) struct FrameMessage {
    /// Counts the frames taken; one per distinct frame.
    pub seq: u64,
    pub message: Bytes,
}

/// A channel the dashboard reads, and its connection.
struct Source {
    name: String,
    /// The channel once looked up (`None`: not yet, or destroyed since).
    channel: Option<Channel>,
    /// The dashboard task's input connection on it.
    input: Option<ChannelInput>,
    /// `"waiting"`, `"ok"` or `"error"`, and what is wrong or awaited.
    status: &'static str,
    message: Option<String>,
}

impl Source {
    fn new(name: &str) -> Source {
        Source {
            name: name.to_owned(),
            channel: None,
            input: None,
            status: "waiting",
            message: Some(format!("waiting for channel \"{name}\" to be created")),
        }
    }

    fn set(&mut self, status: &'static str, message: Option<String>) {
        (self.status, self.message) = (status, message);
    }

    /// Forgets the channel after `Closed` or `NotFound`: it is looked up again next refresh.
    fn lost(&mut self, e: &Error) {
        (self.channel, self.input) = (None, None);
        self.set("waiting", Some(format!("{e}; waiting for it to be created again")));
    }
}

/// An overlay channel and the boxes drawn from it.
struct OverlaySource {
    source: Source,
    state: OverlayState,
    /// The newest timestamp present at the previous refresh: consumed at this one.
    newest_seen: Option<Timestamp>,
}

pub(crate) struct Sampler {
    runtime: Runtime,
    refresh: Duration,
    /// WebSocket clients connected now (counted by the server).
    clients: Arc<AtomicUsize>,
    rates: Rates,
    /// The dashboard's task (virtual time INFINITY), once it reads something.
    task: Option<Task>,
    image: Option<Source>,
    overlays: Vec<OverlaySource>,
    /// The frame shown and its sequence number.
    frame: Option<(Frame, u64)>,
    frames_taken: u64,
}

impl Sampler {
    pub(crate) fn new(runtime: Runtime, options: &DashboardOptions, clients: Arc<AtomicUsize>) -> Sampler {
        let overlays = options
            .overlays
            .iter()
            .map(|name| OverlaySource {
                source: Source::new(name),
                state: OverlayState { channel: name.clone(), ..OverlayState::default() },
                newest_seen: None,
            })
            .collect();
        Sampler {
            runtime,
            refresh: options.refresh,
            clients,
            rates: Rates::new(options.refresh.max(RATE_WINDOW_MIN)),
            task: None,
            image: options.image.as_deref().map(Source::new),
            overlays,
            frame: None,
            frames_taken: 0,
        }
    }

    /// One refresh: the newest frame, its overlays, a snapshot.
    pub(crate) fn tick(&mut self) -> Update {
        self.attach_missing();
        self.poll_image();
        self.poll_overlays();
        let frame = self.frame.as_ref().map(|(frame, seq)| FrameMessage { seq: *seq, message: frame.message.clone() });
        Update { snapshot: self.snapshot_json().into(), frame }
    }

    /// The snapshot as JSON text, without reading the image or overlays (for
    /// `GET /api/snapshot`: it shows the counters as they are now).
    pub(crate) fn snapshot_json(&mut self) -> String {
        let graph = self.runtime.graph().map_err(|e| e.to_string());
        let ts_min = if graph.is_err() { self.runtime.ts_min() } else { 0 };
        let context = Context {
            task_id: self.task.as_ref().map(Task::id),
            ts_min,
            refresh_ms: self.refresh.as_millis() as u64,
            clients: self.clients.load(Ordering::Relaxed),
            image: self.image_state(),
            budget: self.runtime.stats().budget,
        };
        let snapshot = build(graph, &mut self.rates, context);
        serde_json::to_string(&snapshot)
            .unwrap_or_else(|e| format!("{{\"error\": \"cannot write the snapshot: {e}\"}}"))
    }

    /// Closes the dashboard's task: its connections detach and its claims go.
    pub(crate) fn close(&mut self) {
        for source in self.sources() {
            source.input = None;
        }
        if let Some(task) = self.task.take() {
            task.close();
        }
    }

    fn sources(&mut self) -> impl Iterator<Item = &mut Source> {
        self.image.iter_mut().chain(self.overlays.iter_mut().map(|overlay| &mut overlay.source))
    }

    fn image_state(&self) -> Option<ImageState> {
        let image = self.image.as_ref()?;
        let frame = self.frame.as_ref().map(|(frame, _)| frame);
        let overlays = self
            .overlays
            .iter()
            .map(|o| OverlayState { message: o.source.message.clone(), ..o.state.clone() })
            .collect();
        Some(ImageState {
            channel: image.name.clone(),
            status: image.status,
            message: image.message.clone(),
            ts: frame.map(|f| Ts(f.ts)),
            width: frame.map_or(0, |f| f.width),
            height: frame.map_or(0, |f| f.height),
            channels: frame.map_or(0, |f| f.channels),
            frames: self.frames_taken,
            overlays,
        })
    }

    /// Looks up the channels not attached yet; if any is found, attaches every channel known
    /// to a new task.
    ///
    /// A new task because of the attach rule (docs/SEMANTICS.md, "Channels"): attaching consumes,
    /// on the new connection, every item below the task's visibility — all of them for a task at
    /// INFINITY, so a frame already in the channel would never be shown. So the task is created at
    /// the current ts_min (where attaching consumes nothing that can still be gotten), attaches,
    /// then moves to INFINITY; the old task, if any, is closed after.
    fn attach_missing(&mut self) {
        let runtime = self.runtime.clone();
        let mut found = false;
        for source in self.sources().filter(|source| source.input.is_none()) {
            match lookup(&runtime, &source.name) {
                Ok(channel) => {
                    source.channel = Some(channel);
                    found = true;
                }
                Err((status, message)) => source.set(status, Some(message)),
            }
        }
        if !found {
            return;
        }
        let task = match task_at_ts_min(&runtime, TASK_NAME) {
            Ok(task) => task,
            Err(e) => {
                for source in self.sources().filter(|source| source.input.is_none()) {
                    source.set("error", Some(format!("cannot start the dashboard's task: {e}")));
                }
                return;
            }
        };
        for source in self.sources() {
            let Some(channel) = &source.channel else { continue };
            match task.attach_input(channel) {
                Ok(input) => {
                    source.input = Some(input);
                    if source.status == "waiting" {
                        source.set("waiting", Some(format!("no item in \"{}\" yet", source.name)));
                    }
                }
                Err(e) => source.lost(&e),
            }
        }
        for overlay in &mut self.overlays {
            overlay.newest_seen = None;
        }
        if let Err(e) = task.set_virtual_time(INFINITY) {
            // Cannot happen (nothing is open on a new task); if it does, do not hold ts_min.
            task.close();
            for source in self.sources() {
                source.input = None;
                source.set("error", Some(format!("the dashboard's task: {e}")));
            }
            return;
        }
        if let Some(old) = self.task.replace(task) {
            old.close();
        }
    }

    /// Takes the newest unseen frame, if any, and consumes everything up to it.
    fn poll_image(&mut self) {
        let Some(image) = &mut self.image else { return };
        let Some(input) = &image.input else { return };
        let item = match input.get(Selector::NewestUnseen, Some(Duration::ZERO)) {
            Ok(item) => item,
            Err(Error::NotAvailable { .. }) => return,
            Err(e @ (Error::Closed { .. } | Error::NotFound { .. })) => return image.lost(&e),
            Err(e) => return image.set("error", Some(e.to_string())),
        };
        let consumed = input.consume_until(item.ts);
        match decode_frame(&image.name, &item) {
            Ok(frame) => {
                self.frames_taken += 1;
                self.frame = Some((frame, self.frames_taken));
                image.set("ok", None);
            }
            Err(why) => {
                self.frame = None;
                image.set("error", Some(why));
            }
        }
        if let Err(e) = consumed {
            image.set("error", Some(e.to_string()));
        }
    }

    /// For each overlay channel: the item at the frame's timestamp (else the newest below it),
    /// then consumes what it may.
    fn poll_overlays(&mut self) {
        let frame_ts = self.frame.as_ref().map(|(frame, _)| frame.ts);
        for overlay in &mut self.overlays {
            if let Some(ts) = frame_ts {
                overlay.read_for(ts);
            }
            overlay.release(frame_ts);
        }
    }
}

impl OverlaySource {
    /// Reads the overlay for the frame at `frame_ts`, unless it already has it.
    fn read_for(&mut self, frame_ts: Timestamp) {
        let Some(input) = &self.source.input else { return };
        if self.state.exact && self.state.ts == Some(Ts(frame_ts)) {
            return;
        }
        match input.get(Selector::At(frame_ts), Some(Duration::ZERO)) {
            Ok(item) => self.show(&item, true),
            Err(Error::NotAvailable { previous: Some(previous), .. }) => {
                let newer = !matches!(self.state.ts, Some(Ts(shown)) if shown >= previous);
                if newer {
                    if let Ok(item) = input.get(Selector::At(previous), Some(Duration::ZERO)) {
                        self.show(&item, false);
                    }
                }
            }
            Err(Error::NotAvailable { .. } | Error::AlreadyConsumed { .. } | Error::Reclaimed { .. }) => {}
            Err(e @ (Error::Closed { .. } | Error::NotFound { .. })) => self.source.lost(&e),
            Err(e) => self.source.set("error", Some(e.to_string())),
        }
    }

    fn show(&mut self, item: &Item, exact: bool) {
        match decode_overlay(&self.source.name, item) {
            Ok((boxes, dropped)) => {
                self.state.boxes = boxes;
                self.state.dropped = dropped;
                self.source.set("ok", None);
            }
            Err(why) => {
                self.state.boxes.clear();
                self.source.set("error", Some(why));
            }
        }
        self.state.ts = Some(Ts(item.ts));
        self.state.exact = exact;
    }

    /// Consumes up to the frame's timestamp and what was present at the previous refresh, then
    /// notes the newest timestamp present now.
    fn release(&mut self, frame_ts: Option<Timestamp>) {
        let Some(input) = &self.source.input else { return };
        let consumed = frame_ts.max(self.newest_seen).map_or(Ok(()), |upto| input.consume_until(upto));
        // The newest item present and not consumed here: the neighbour below TS_MAX.
        self.newest_seen = match input.get(Selector::At(TS_MAX), Some(Duration::ZERO)) {
            Ok(item) => Some(item.ts),
            Err(Error::NotAvailable { previous, .. }) => previous,
            Err(_) => None,
        };
        if let Err(e) = consumed {
            self.source.set("error", Some(e.to_string()));
        }
    }
}

/// The channel called `name`, or (status, message) saying why not.
fn lookup(runtime: &Runtime, name: &str) -> Result<Channel, (&'static str, String)> {
    match runtime.lookup(name) {
        Ok(Container::Channel(channel)) => Ok(channel),
        Ok(Container::Queue(_)) => Err((
            "error",
            format!("\"{name}\" is a queue; the dashboard reads channels (a queue's items go to one getter)"),
        )),
        Err(Error::NotFound { .. }) => Err(("waiting", format!("waiting for channel \"{name}\" to be created"))),
        Err(e) => Err(("error", e.to_string())),
    }
}

/// Most attempts at creating a task at ts_min while ts_min moves.
const TASK_ATTEMPTS_MAX: usize = 8;

/// A new task named `name` at the current ts_min (retried if ts_min moves past it meanwhile; at
/// INFINITY if it keeps moving): a reader's task that attaches without consuming anything still
/// readable.
pub(crate) fn task_at_ts_min(runtime: &Runtime, name: &str) -> stampede::Result<Task> {
    let mut task = None;
    for _ in 0..TASK_ATTEMPTS_MAX {
        match runtime.task(runtime.ts_min()) {
            Ok(created) => {
                task = Some(created);
                break;
            }
            Err(Error::BelowVisibility { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    let task = match task {
        Some(task) => task,
        None => runtime.task(INFINITY)?,
    };
    if let Err(e) = task.set_name(name) {
        task.close();
        return Err(e);
    }
    Ok(task)
}

/// The sampling loop: one tick per `refresh` until `stop` says so (or its sender is gone);
/// then closes the dashboard's task. Dropping `updates` on return tells every client.
pub(crate) fn run(
    sampler: &Mutex<Sampler>,
    refresh: Duration,
    stop: &mpsc::Receiver<()>,
    updates: &tokio::sync::watch::Sender<Option<Arc<Update>>>,
) {
    let mut next = Instant::now();
    loop {
        let update = lock(sampler).tick();
        updates.send_replace(Some(Arc::new(update)));
        next += refresh;
        let now = Instant::now();
        if next < now {
            next = now; // late (a slow remote graph): do not try to catch up
        }
        match stop.recv_timeout(next - now) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    lock(sampler).close();
}

/// The sampler, even if a panic poisoned its lock (its state stays usable: every field is
/// valid on its own).
pub(crate) fn lock(sampler: &Mutex<Sampler>) -> std::sync::MutexGuard<'_, Sampler> {
    sampler.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
