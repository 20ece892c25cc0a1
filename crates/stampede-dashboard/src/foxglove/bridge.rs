//! The bridge's side toward the runtime: the catalog of channels it advertises (kept by a
//! watcher thread following the name service) and one reader per channel some viewer
//! subscribes to.
//!
//! A channel may be advertised on two topics (an `npy` channel's images, and beside them its
//! arrays that are no image: `Kind::beside`); one reader serves both, so the channel is read
//! once whatever its viewers subscribe to.
//!
//! A reader exists only while a subscription to its channel does. It reads from a task of its
//! own (created at ts_min so that nothing still readable is consumed by the attach, then moved
//! to `INFINITY`), gets `OLDEST_UNSEEN` and consumes each item at once, so it holds ts_min back
//! only for the item in hand; its input is bounded by lag ([`READER_LAG_ITEMS`]), so a reader
//! that stalls lets older items go rather than hold them. Each item is encoded once and put in
//! every subscription's [`Outbox`] without waiting: a full one (a viewer behind) lets its oldest
//! message go for that viewer alone and counts it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use stampede::{Container, Error, InputOptions, Runtime, WatchEvent, INFINITY, OLDEST_UNSEEN};
use tokio::sync::{watch, Notify};

use stampede_view::foxglove::{Kind, Tick};

use super::protocol::{message_data, Advertised};
use super::{FoxgloveOptions, CHANNELS_MAX, OUTBOX_MESSAGES_MAX, READER_LAG_ITEMS};
use crate::sampler::task_at_ts_min;

/// The name of every reader's task (in the graph, `stampede ls`, the dashboard).
const TASK_NAME: &str = "foxglove";
/// How long a reader or the watcher waits on the runtime before it looks whether to stop.
const POLL: Duration = Duration::from_millis(100);

/// A channel as advertised.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub name: String,
    pub kind: Kind,
    pub tick: Tick,
    pub advertised: Advertised,
}

/// What the bridge shows now: the channels advertised, by id, and the channels it does not
/// show, with why.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Catalog {
    pub channels: BTreeMap<u64, Entry>,
    pub refused: BTreeMap<String, String>,
}

/// What goes to one viewer: a binary message, or a status (its id, level, text).
pub(crate) enum Outgoing {
    Data(Vec<u8>),
    Warning { id: String, message: String },
}

/// One subscription's messages waiting for its viewer, at most [`OUTBOX_MESSAGES_MAX`]: when it
/// is full the oldest goes (counted as skipped), so a viewer behind gets the newest, in order.
/// Pushing never waits.
pub(crate) struct Outbox {
    messages: Mutex<VecDeque<Outgoing>>,
    skipped: AtomicU64,
    /// The viewer's wake-up: notified on every push (a permit is kept if it is not waiting).
    wake: Arc<Notify>,
}

impl Outbox {
    pub(crate) fn new(wake: Arc<Notify>) -> Outbox {
        Outbox { messages: Mutex::default(), skipped: AtomicU64::new(0), wake }
    }

    fn push(&self, message: Outgoing) {
        {
            let mut messages = lock(&self.messages);
            if messages.len() >= OUTBOX_MESSAGES_MAX {
                messages.pop_front();
                self.skipped.fetch_add(1, Ordering::Relaxed);
            }
            messages.push_back(message);
        }
        self.wake.notify_one();
    }

    pub(crate) fn pop(&self) -> Option<Outgoing> {
        lock(&self.messages).pop_front()
    }

    /// Messages skipped so far because the viewer was behind.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
}

/// A viewer's subscription as a reader sees it.
#[derive(Clone)]
pub(crate) struct Subscriber {
    pub client: u64,
    pub subscription: u32,
    pub outbox: Arc<Outbox>,
}

/// Who a reader serves: each subscriber with the kind of the topic it subscribed to.
type Subscribers = Mutex<Vec<(Kind, Subscriber)>>;

struct Reader {
    subscribers: Arc<Subscribers>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The catalog, the readers, and what they share.
pub(crate) struct Bridge {
    runtime: Runtime,
    options: FoxgloveOptions,
    catalog: watch::Sender<Arc<Catalog>>,
    /// By the name of the channel each reads.
    readers: Mutex<HashMap<String, Reader>>,
    next_id: AtomicU64,
    closing: Arc<AtomicBool>,
}

/// Locks `mutex`, also when a thread panicked holding it (the data stay consistent: every
/// critical section here is a plain update).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Bridge {
    pub(crate) fn new(runtime: Runtime, options: FoxgloveOptions) -> Arc<Bridge> {
        Arc::new(Bridge {
            runtime,
            options,
            catalog: watch::Sender::new(Arc::default()),
            readers: Mutex::default(),
            next_id: AtomicU64::new(1),
            closing: Arc::default(),
        })
    }

    /// Follows the catalog (each viewer diffs it against what it was told).
    pub(crate) fn catalog(&self) -> watch::Receiver<Arc<Catalog>> {
        self.catalog.subscribe()
    }

    /// Starts the thread that keeps the catalog, from the names there now on.
    pub(crate) fn start_watcher(self: &Arc<Bridge>) -> std::io::Result<JoinHandle<()>> {
        let bridge = self.clone();
        std::thread::Builder::new().name("stampede-foxglove-names".into()).spawn(move || bridge.watch_names())
    }

    fn watch_names(&self) {
        let mut watch = match self.runtime.watch("", None) {
            Ok(watch) => watch,
            Err(e) => return self.refuse("(names)", format!("cannot follow the name service: {e}")),
        };
        while !self.closing.load(Ordering::Acquire) {
            match watch.next_event(Some(POLL)) {
                Ok(WatchEvent::Created { name, .. }) => self.add(&name),
                Ok(WatchEvent::Destroyed { name, .. }) => self.remove(&name),
                Ok(WatchEvent::Lagged { .. }) => self.resync(),
                Ok(_) | Err(Error::NotAvailable { .. }) => {}
                Err(_) => break, // the runtime closed
            }
        }
    }

    fn selected(&self, name: &str) -> bool {
        let names = &self.options.names;
        names.is_empty() || names.iter().any(|prefix| stampede::name::under(name, prefix))
    }

    /// Advertises `name` if it is selected, new and shown; else records why not.
    fn add(&self, name: &str) {
        if !self.selected(name) || self.catalog.borrow().channels.values().any(|e| e.name == name) {
            return;
        }
        let info = match self.runtime.lookup(name) {
            Ok(Container::Channel(channel)) => channel.info(),
            Ok(Container::Queue(queue)) => queue.info(),
            Err(_) => return, // destroyed meanwhile: its event follows
        };
        let overlay = self.options.overlays.iter().any(|o| o == name);
        let kind = match Kind::of(&info, overlay) {
            Ok(kind) => kind,
            Err(reason) => return self.refuse(name, reason),
        };
        let tick = self.options.ticks.iter().rev().find(|(n, _)| n == name).map_or(self.options.tick, |&(_, t)| t);
        let kinds: Vec<Kind> = std::iter::once(kind).chain(kind.beside()).collect();
        let entries: Vec<Entry> = kinds
            .into_iter()
            .map(|kind| {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                let advertised = Advertised::of(kind, id, &kind.topic(name));
                Entry { name: name.to_owned(), kind, tick, advertised }
            })
            .collect();
        self.catalog.send_modify(|catalog| {
            if catalog.channels.len() + entries.len() > CHANNELS_MAX {
                let reason = format!("the bridge advertises at most {CHANNELS_MAX} topics (CHANNELS_MAX)");
                Arc::make_mut(catalog).refused.insert(name.to_owned(), reason);
                return;
            }
            let catalog = Arc::make_mut(catalog);
            catalog.refused.remove(name);
            catalog.channels.extend(entries.into_iter().map(|entry| (entry.advertised.id, entry)));
        });
    }

    fn refuse(&self, name: &str, reason: String) {
        self.catalog.send_modify(|catalog| {
            Arc::make_mut(catalog).refused.insert(name.to_owned(), reason);
        });
    }

    /// Forgets `name`: viewers unadvertise its topics, its reader stops.
    fn remove(&self, name: &str) {
        self.catalog.send_if_modified(|catalog| {
            let catalog = Arc::make_mut(catalog);
            let advertised = catalog.channels.len();
            catalog.channels.retain(|_, e| e.name != name);
            catalog.refused.remove(name).is_some() || catalog.channels.len() != advertised
        });
        if let Some(reader) = lock(&self.readers).remove(name) {
            reader.stop.store(true, Ordering::Release);
        }
    }

    /// After the watcher fell behind: the names there now are what counts.
    fn resync(&self) {
        let Ok(names) = self.runtime.names("") else { return };
        let known: Vec<String> = self.catalog.borrow().channels.values().map(|e| e.name.clone()).collect();
        known.iter().filter(|name| !names.contains(name)).for_each(|name| self.remove(name));
        names.iter().for_each(|name| self.add(name));
    }

    /// Adds `subscriber` to the reader of topic `id`'s channel, starting it if it is the first;
    /// `false` when the topic is not advertised (any more).
    pub(crate) fn subscribe(self: &Arc<Bridge>, id: u64, subscriber: Subscriber) -> bool {
        let Some(entry) = self.catalog.borrow().channels.get(&id).cloned() else { return false };
        let mut readers = lock(&self.readers);
        if let Some(reader) = readers.get(&entry.name) {
            lock(&reader.subscribers).push((entry.kind, subscriber));
            return true;
        }
        let subscribers = Arc::new(Mutex::new(vec![(entry.kind, subscriber)]));
        let stop = Arc::new(AtomicBool::new(false));
        let (runtime, closing) = (self.runtime.clone(), self.closing.clone());
        let (them, halt, name) = (subscribers.clone(), stop.clone(), entry.name.clone());
        let thread = std::thread::Builder::new()
            .name("stampede-foxglove-reader".into())
            .spawn(move || read(&runtime, &entry, &them, &halt, &closing));
        match thread {
            Ok(thread) => {
                readers.insert(name, Reader { subscribers, stop, thread: Some(thread) });
                true
            }
            Err(_) => false,
        }
    }

    /// Takes `client`'s `subscription` off topic `id`; the reader stops with its last one. (A
    /// topic no longer advertised has no reader: `remove` stopped it.)
    pub(crate) fn unsubscribe(&self, id: u64, client: u64, subscription: u32) {
        let Some(name) = self.catalog.borrow().channels.get(&id).map(|e| e.name.clone()) else { return };
        let mut readers = lock(&self.readers);
        let Some(reader) = readers.get(&name) else { return };
        let empty = {
            let mut subscribers = lock(&reader.subscribers);
            subscribers.retain(|(_, s)| (s.client, s.subscription) != (client, subscription));
            subscribers.is_empty()
        };
        if empty {
            if let Some(reader) = readers.remove(&name) {
                // Not joined here: the caller may be the server's async task. It ends within POLL.
                reader.stop.store(true, Ordering::Release);
            }
        }
    }

    /// Stops the watcher and every reader, and waits for the readers (each within [`POLL`]).
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Release);
        let readers: Vec<Reader> = lock(&self.readers).drain().map(|(_, reader)| reader).collect();
        for mut reader in readers {
            reader.stop.store(true, Ordering::Release);
            if let Some(thread) = reader.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// A reader: every item of `entry`'s channel to each subscriber of a topic that shows it, until
/// stopped.
fn read(runtime: &Runtime, entry: &Entry, subscribers: &Subscribers, stop: &AtomicBool, closing: &AtomicBool) {
    // To the subscribers of one kind's topic, or of all (`None`).
    let warn = |to: Option<Kind>, message: String| {
        for (kind, s) in lock(subscribers).iter().filter(|(kind, _)| to.is_none_or(|to| to == *kind)) {
            let id = format!("read/{}", kind.topic(&entry.name));
            s.outbox.push(Outgoing::Warning { id, message: message.clone() });
        }
    };
    let task = match task_at_ts_min(runtime, TASK_NAME) {
        Ok(task) => task,
        Err(e) => return warn(None, format!("cannot read \"{}\": {e}", entry.name)),
    };
    let lag = InputOptions { max_lag_items: Some(READER_LAG_ITEMS), max_lag_ts: None, ..Default::default() };
    let input = match runtime.channel(&entry.name).and_then(|ch| task.attach_input_with(&ch, lag)) {
        Ok(input) => input,
        Err(e) => {
            task.close();
            return warn(None, format!("cannot read \"{}\": {e}", entry.name));
        }
    };
    if let Err(e) = task.set_virtual_time(INFINITY) {
        task.close();
        return warn(None, format!("cannot read \"{}\": {e}", entry.name));
    }
    // Kinds whose subscribers were told of an item skipped: said once per reader, as a channel
    // of the wrong kind would say it for every item.
    let mut warned: Vec<Kind> = Vec::new();
    while !stop.load(Ordering::Acquire) && !closing.load(Ordering::Acquire) {
        let item = match input.get(OLDEST_UNSEEN, Some(POLL)) {
            Ok(item) => item,
            Err(Error::NotAvailable { .. }) => continue,
            Err(Error::Closed { .. }) => break, // destroyed, or the runtime closed
            Err(e) => {
                warn(None, format!("reading \"{}\": {e}", entry.name));
                std::thread::sleep(POLL); // an error that may repeat: do not spin on it
                continue;
            }
        };
        // Consumed at once: the bridge holds ts_min back only for the item in hand.
        let _ = input.consume(item.ts);
        let log_time = entry.tick.nanos(item.ts);
        // Each kind's message is made once, for all its subscribers (at most two kinds).
        let mut kinds: Vec<Kind> = Vec::new();
        for (kind, _) in lock(subscribers).iter() {
            if !kinds.contains(kind) && kind.shows(&item) {
                kinds.push(*kind);
            }
        }
        for kind in kinds {
            match kind.encode(&entry.name, &item, entry.tick) {
                Ok(payload) => {
                    for (_, s) in lock(subscribers).iter().filter(|(k, _)| *k == kind) {
                        s.outbox.push(Outgoing::Data(message_data(s.subscription, log_time, &payload)));
                    }
                }
                Err(reason) if !warned.contains(&kind) => {
                    warned.push(kind);
                    warn(Some(kind), format!("{reason} (such items are skipped)"));
                }
                Err(_) => {}
            }
        }
    }
    task.close();
}
