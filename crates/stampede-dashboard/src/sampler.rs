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
use stampede::{ChannelInput, Container, Error, Item, Runtime, Selector, Task, Timestamp, INFINITY, TS_MAX};

use crate::image::{decode_frame, decode_overlay, Frame};
use crate::snapshot::{build, Context, ImageState, OverlayState, Rates, Ts};
use crate::DashboardOptions;

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

/// The image channel and what was last seen on it.
struct ImageSource {
    name: String,
    input: Option<ChannelInput>,
    status: &'static str,
    message: Option<String>,
}

/// An overlay channel and the boxes drawn from it.
struct OverlaySource {
    input: Option<ChannelInput>,
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
    /// The dashboard's task (virtual time INFINITY), if it reads an image or overlays.
    task: Option<Task>,
    image: Option<ImageSource>,
    overlays: Vec<OverlaySource>,
    /// The frame shown and its sequence number.
    frame: Option<(Frame, u64)>,
    frames_taken: u64,
}

impl Sampler {
    pub(crate) fn new(
        runtime: Runtime,
        options: &DashboardOptions,
        clients: Arc<AtomicUsize>,
    ) -> stampede::Result<Sampler> {
        let reads = options.image.is_some() || !options.overlays.is_empty();
        let task = if reads { Some(runtime.task(INFINITY)?) } else { None };
        if let Some(task) = &task {
            task.set_name(TASK_NAME)?;
        }
        let image = options.image.as_ref().map(|name| ImageSource {
            name: name.clone(),
            input: None,
            status: "waiting",
            message: Some(format!("waiting for channel \"{name}\"")),
        });
        let overlays = options
            .overlays
            .iter()
            .map(|name| OverlaySource {
                input: None,
                state: OverlayState { channel: name.clone(), ..OverlayState::default() },
                newest_seen: None,
            })
            .collect();
        Ok(Sampler {
            runtime,
            refresh: options.refresh,
            clients,
            rates: Rates::new(options.refresh / 2),
            task,
            image,
            overlays,
            frame: None,
            frames_taken: 0,
        })
    }

    /// One refresh: the newest frame, its overlays, a snapshot.
    pub(crate) fn tick(&mut self) -> Update {
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
        };
        let snapshot = build(graph, &mut self.rates, context);
        serde_json::to_string(&snapshot)
            .unwrap_or_else(|e| format!("{{\"error\": \"cannot write the snapshot: {e}\"}}"))
    }

    /// Closes the dashboard's task: its connections detach and its claims go.
    pub(crate) fn close(&mut self) {
        self.image.iter_mut().for_each(|image| image.input = None);
        self.overlays.iter_mut().for_each(|overlay| overlay.input = None);
        if let Some(task) = self.task.take() {
            task.close();
        }
    }

    fn image_state(&self) -> Option<ImageState> {
        let image = self.image.as_ref()?;
        let frame = self.frame.as_ref().map(|(frame, _)| frame);
        Some(ImageState {
            channel: image.name.clone(),
            status: image.status,
            message: image.message.clone(),
            ts: frame.map(|f| Ts(f.ts)),
            width: frame.map_or(0, |f| f.width),
            height: frame.map_or(0, |f| f.height),
            channels: frame.map_or(0, |f| f.channels),
            frames: self.frames_taken,
            overlays: self.overlays.iter().map(|o| o.state.clone()).collect(),
        })
    }

    /// Takes the newest unseen frame, if any, and consumes everything up to it.
    fn poll_image(&mut self) {
        let (Some(task), Some(image)) = (&self.task, &mut self.image) else { return };
        if image.input.is_none() {
            match attach(&self.runtime, task, &image.name) {
                Ok(input) => image.input = Some(input),
                Err((status, message)) => {
                    (image.status, image.message) = (status, Some(message));
                    return;
                }
            }
        }
        let Some(input) = &image.input else { return };
        let item = match input.get(Selector::NewestUnseen, Some(Duration::ZERO)) {
            Ok(item) => item,
            Err(Error::NotAvailable { .. }) => {
                if self.frame.is_none() && image.status == "waiting" {
                    image.message = Some(format!("no frame in \"{}\" yet", image.name));
                }
                return;
            }
            Err(e @ (Error::Closed { .. } | Error::NotFound { .. })) => {
                image.input = None;
                (image.status, image.message) = ("waiting", Some(format!("{e}; waiting for it to be created again")));
                return;
            }
            Err(e) => {
                (image.status, image.message) = ("error", Some(e.to_string()));
                return;
            }
        };
        let consumed = input.consume_until(item.ts);
        match decode_frame(&image.name, &item) {
            Ok(frame) => {
                self.frames_taken += 1;
                self.frame = Some((frame, self.frames_taken));
                (image.status, image.message) = ("ok", None);
            }
            Err(why) => {
                self.frame = None;
                (image.status, image.message) = ("error", Some(why));
            }
        }
        if let Err(e) = consumed {
            (image.status, image.message) = ("error", Some(e.to_string()));
        }
    }

    /// For each overlay channel: the item at the frame's timestamp (else the newest below it),
    /// then consumes what it may.
    fn poll_overlays(&mut self) {
        let Some(task) = &self.task else { return };
        let frame_ts = self.frame.as_ref().map(|(frame, _)| frame.ts);
        for overlay in &mut self.overlays {
            if overlay.input.is_none() {
                match attach(&self.runtime, task, &overlay.state.channel) {
                    Ok(input) => overlay.input = Some(input),
                    Err((_, message)) => {
                        overlay.state.message = Some(message);
                        continue;
                    }
                }
            }
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
        let Some(input) = &self.input else { return };
        if self.state.exact && self.state.ts == Some(Ts(frame_ts)) {
            return;
        }
        match input.get(Selector::At(frame_ts), Some(Duration::ZERO)) {
            Ok(item) => self.show(&item, true),
            Err(Error::NotAvailable { previous: Some(previous), .. }) => {
                let newer = self.state.ts.map_or(true, |Ts(shown)| shown < previous);
                if newer {
                    if let Ok(item) = input.get(Selector::At(previous), Some(Duration::ZERO)) {
                        self.show(&item, false);
                    }
                }
            }
            Err(Error::NotAvailable { .. } | Error::AlreadyConsumed { .. } | Error::Reclaimed { .. }) => {}
            Err(e @ (Error::Closed { .. } | Error::NotFound { .. })) => {
                self.input = None;
                self.state.message = Some(format!("{e}; waiting for it to be created again"));
            }
            Err(e) => self.state.message = Some(e.to_string()),
        }
    }

    fn show(&mut self, item: &Item, exact: bool) {
        match decode_overlay(&self.state.channel, item) {
            Ok((boxes, dropped)) => {
                self.state.boxes = boxes;
                self.state.dropped = dropped;
                self.state.message = None;
            }
            Err(why) => {
                self.state.boxes.clear();
                self.state.message = Some(why);
            }
        }
        self.state.ts = Some(Ts(item.ts));
        self.state.exact = exact;
    }

    /// Consumes up to the frame's timestamp and what was present at the previous refresh, then
    /// notes the newest timestamp present now.
    fn release(&mut self, frame_ts: Option<Timestamp>) {
        let Some(input) = &self.input else { return };
        if let Some(upto) = frame_ts.max(self.newest_seen) {
            if let Err(e) = input.consume_until(upto) {
                self.state.message = Some(e.to_string());
            }
        }
        // The newest item present and not consumed here: the neighbour below TS_MAX.
        self.newest_seen = match input.get(Selector::At(TS_MAX), Some(Duration::ZERO)) {
            Ok(item) => Some(item.ts),
            Err(Error::NotAvailable { previous, .. }) => previous,
            Err(_) => None,
        };
    }
}

/// An input connection of the dashboard's task on the channel `name`, or (status, message).
fn attach(runtime: &Runtime, task: &Task, name: &str) -> Result<ChannelInput, (&'static str, String)> {
    match runtime.lookup(name) {
        Ok(Container::Channel(channel)) => task.attach_input(&channel).map_err(|e| ("error", e.to_string())),
        Ok(Container::Queue(_)) => Err((
            "error",
            format!("\"{name}\" is a queue; the dashboard reads channels (a queue's items go to one getter)"),
        )),
        Err(Error::NotFound { .. }) => Err(("waiting", format!("waiting for channel \"{name}\" to be created"))),
        Err(e) => Err(("error", e.to_string())),
    }
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
