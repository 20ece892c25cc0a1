//! The fabric driver of the distributed ts_min (`docs/PROTOCOL.md`): one [`Mesh`] participant
//! per node, linked to the node's runtime ([`MeshLink`]), its messages and liveliness on zenoh.
//!
//! **Keys.** A node in one life is `Peer { id: peer_id(name), incarnation }`, the incarnation
//! being its start time in microseconds (a restart is a larger one). Its liveliness token and its
//! publisher share the key `stampede/<name>/mesh/<incarnation>`; one publisher per node (zenoh is reliable by default; `CongestionControl::Block`: never dropped)
//! keeps its messages in order (the machine needs FIFO per sender, nothing more). A message is
//! `(to, Message)` in postcard; peers not in `to` ignore it.
//!
//! **Joining.** A node opens its door before it declares its token or serves anyone: alone (no
//! token on the fabric) by `genesis`, else through a sponsor — any live node, asked on
//! `stampede/<name>/mesh/<incarnation>/sponsor`, which learns the newcomer from the query,
//! `send_move`s its door to it and replies with the move. So every node with a token has a door,
//! and a node never has to wait for a door later.
//!
//! **Guarantees.** No byte from the fabric panics the driver: keys that do not parse, payloads
//! that do not decode, and messages the machine refuses are counted and dropped (a refused batch
//! stops its sender's stream, as the machine says). Messages from a sender the fabric has not
//! reported yet wait, at most [`EARLY_MESSAGES_MAX`] per sender and [`EARLY_SENDERS_MAX`]
//! senders, for its token. Every wait is
//! bounded: the driver thread wakes at least every `TICK` (100 ms), joining gives up after the node's
//! liveliness timeout.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use stampede::mesh_link::MeshLink;

use crate::session::Move;
use stampede::{Error, Result, Runtime};
use stampede_core::mesh::{Event, Message, MoveId};
use stampede_core::{Mesh, MeshLimits, MeshRefusal, Peer, Timestamp};
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::qos::CongestionControl;
use zenoh::query::Queryable;
use zenoh::sample::SampleKind;
use zenoh::Wait;

/// Messages of one sender kept while the fabric has not reported it (its token may come after
/// its first message); beyond it they are dropped and counted.
pub const EARLY_MESSAGES_MAX: usize = 256;
/// Senders not reported yet whose messages are kept; messages of more are dropped and counted.
pub const EARLY_SENDERS_MAX: usize = 64;
/// Inputs waiting for the driver thread; a full inbox drops fabric messages (counted) — never
/// deaths or joins, which are retried from liveliness on the next tick.
const INBOX_MAX: usize = 4096;
/// The driver thread wakes at least this often (to look for events, to retry).
const TICK: Duration = Duration::from_millis(100);
/// Between two rounds of asking live nodes to sponsor this one.
const SPONSOR_RETRY: Duration = Duration::from_millis(50);

/// A node's participant id: FNV-1a of its name (node names are unique in a mesh).
pub fn peer_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn mesh_key(name: &str, incarnation: u64) -> String {
    format!("stampede/{name}/mesh/{incarnation}")
}

fn sponsor_key(name: &str, incarnation: u64) -> String {
    format!("{}/sponsor", mesh_key(name, incarnation))
}

fn decline_key(name: &str, incarnation: u64) -> String {
    format!("{}/decline", mesh_key(name, incarnation))
}

/// How long a node waits for another to confirm it declined a move.
const DECLINE_WAIT: Duration = Duration::from_secs(5);

/// Asks node `to_node` (participant `to`) to decline this node's move `id` if it did not take it
/// over: the move of a task whose client went away between `MoveTask` and `TakeOverTask`.
/// Nothing to do once the move is resolved; a node that does not answer is left to the mesh
/// (its death resolves the move).
pub(crate) fn decline_there(zenoh: &zenoh::Session, link: &MeshLink, taken: &Move) {
    if !link.is_move_open(taken.to, taken.id) {
        return;
    }
    let payload = postcard::to_allocvec(&(link.peer(), taken.id)).unwrap_or_default();
    let key = decline_key(&taken.to_node, taken.to.incarnation);
    if let Ok(replies) = zenoh.get(key).payload(payload).timeout(DECLINE_WAIT).wait() {
        let _ = replies.recv();
    }
}

/// What a node does when the fabric reports another node dead (see [`MeshDriver::start`]).
pub type DeadHook = Arc<dyn Fn(Peer) + Send + Sync>;

/// Set in a node's environment, its driver says on standard error what it learns and refuses.
pub const DEBUG_ENV: &str = "STAMPEDE_MESH_DEBUG";

/// Every node's mesh key.
const MESH_KEYS: &str = "stampede/*/mesh/*";

/// The participant a key `stampede/<name>/mesh/<incarnation>` names.
fn peer_of(key: &str) -> Option<Peer> {
    let mut parts = key.split('/');
    let (Some("stampede"), Some(name), Some("mesh"), Some(inc), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    Some(Peer { id: peer_id(name), incarnation: inc.parse().ok()? })
}

/// What reaches the driver thread.
enum Input {
    Message {
        from: Peer,
        bytes: Vec<u8>,
    },
    Joined(Peer),
    Dead(Peer),
    /// The runtime changed claims: there may be something to send.
    Wake,
}

/// Counters of what the driver dropped (for `docs/PROTOCOL.md`'s "what can hold ts_min" and for
/// tests).
#[derive(Debug, Default)]
pub struct MeshCounters {
    /// Messages that did not decode, or came from a key that does not name a participant.
    pub malformed: AtomicU64,
    /// Messages the machine refused (duplicates, stale or dead senders, bounds).
    pub refused: AtomicU64,
    /// Messages dropped because the inbox or a sender's early queue was full.
    pub dropped: AtomicU64,
}

/// A node's running driver. Dropping it stops the thread and undeclares everything.
pub struct MeshDriver {
    pub(crate) counters: Arc<MeshCounters>,
    link: MeshLink,
    stop: Arc<AtomicBool>,
    inbox: SyncSender<Input>,
    thread: Option<JoinHandle<()>>,
    _declared: Declared,
}

struct Declared {
    _messages: Subscriber<()>,
    _liveliness: Subscriber<()>,
    _sponsor: Queryable<()>,
    _decline: Queryable<()>,
    _token: LivelinessToken,
}

impl MeshDriver {
    /// Links `runtime` to a new participant for node `name`, opens its door (alone, or through a
    /// live node within `timeout`) and starts the driver thread. `Unreachable` if no live node
    /// sponsors it in time.
    ///
    /// `dead` runs on the driver thread for each node the fabric reports dead, after the mesh
    /// fenced it (the node closes the shadows of its tasks).
    pub fn start(
        zenoh: &zenoh::Session,
        runtime: &Runtime,
        name: &str,
        timeout: Duration,
        dead: DeadHook,
    ) -> Result<MeshDriver> {
        let unreachable = |reason: String| Error::Unreachable { op: "serve", name: name.to_owned(), reason };
        let zerr = |e: zenoh::Error| unreachable(format!("zenoh refused the mesh's declarations: {e}"));
        let incarnation = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_micros() as u64);
        let peer = Peer { id: peer_id(name), incarnation };
        let (inbox, rx) = mpsc::sync_channel(INBOX_MAX);
        let wake = inbox.clone();
        let link = MeshLink::attach(
            runtime,
            Mesh::new(peer, MeshLimits::default()),
            Arc::new(move || {
                // Full: a wake is already queued.
                let _ = wake.try_send(Input::Wake);
            }),
        )?;
        let counters = Arc::new(MeshCounters::default());
        let key = mesh_key(name, incarnation);
        let publisher =
            zenoh.declare_publisher(key.clone()).congestion_control(CongestionControl::Block).wait().map_err(zerr)?;
        let messages = {
            let (inbox, counters) = (inbox.clone(), counters.clone());
            zenoh
                .declare_subscriber(MESH_KEYS)
                .callback(move |sample| {
                    let Some(from) = peer_of(sample.key_expr().as_str()) else {
                        counters.malformed.fetch_add(1, Ordering::Relaxed);
                        return;
                    };
                    if from == peer {
                        return;
                    }
                    let bytes = sample.payload().to_bytes().into_owned();
                    if let Err(TrySendError::Full(_)) = inbox.try_send(Input::Message { from, bytes }) {
                        counters.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .wait()
                .map_err(zerr)?
        };
        let liveliness = {
            let inbox = inbox.clone();
            zenoh
                .liveliness()
                .declare_subscriber(MESH_KEYS)
                .history(true)
                .callback(move |sample| {
                    let Some(p) = peer_of(sample.key_expr().as_str()).filter(|p| *p != peer) else { return };
                    let input = if sample.kind() == SampleKind::Delete { Input::Dead(p) } else { Input::Joined(p) };
                    // Blocking: a death must not be lost (the inbox drains continuously).
                    let _ = inbox.send(input);
                })
                .wait()
                .map_err(zerr)?
        };
        let sponsor = {
            let link = link.clone();
            zenoh
                .declare_queryable(sponsor_key(name, incarnation))
                .callback(move |query| {
                    let newcomer = query.payload().and_then(|p| postcard::from_bytes::<Peer>(&p.to_bytes()).ok());
                    let answer = match newcomer {
                        Some(newcomer) => sponsor(&link, newcomer),
                        None => Err("the query names no participant".to_owned()),
                    };
                    let _ = match answer {
                        Ok(door) => query
                            .reply(query.key_expr().clone(), postcard::to_allocvec(&door).unwrap_or_default())
                            .wait(),
                        Err(reason) => query.reply_err(reason).wait(),
                    };
                })
                .wait()
                .map_err(zerr)?
        };
        let decline = {
            let link = link.clone();
            zenoh
                .declare_queryable(decline_key(name, incarnation))
                .callback(move |query| {
                    let asked =
                        query.payload().and_then(|p| postcard::from_bytes::<(Peer, MoveId)>(&p.to_bytes()).ok());
                    let _ = match asked {
                        // Refused when resolved already (taken over, or declined before): fine.
                        Some((from, id)) => {
                            let declined = link.decline(from, id);
                            query.reply(query.key_expr().clone(), [u8::from(declined)]).wait()
                        }
                        None => query.reply_err("the query names no move").wait(),
                    };
                })
                .wait()
                .map_err(zerr)?
        };
        open_door(zenoh, &link, peer, timeout).map_err(unreachable)?;
        let token = zenoh.liveliness().declare_token(key).wait().map_err(zerr)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (link, counters, stop, zenoh) = (link.clone(), counters.clone(), stop.clone(), zenoh.clone());
            std::thread::Builder::new()
                .name(format!("stampede-mesh-{name}"))
                .spawn(move || {
                    let debug = std::env::var_os(DEBUG_ENV).is_some();
                    let early = HashMap::new();
                    Driver { link, me: peer, publisher, counters, early, zenoh, debug, dead }.run(&rx, &stop)
                })
                .map_err(|e| unreachable(format!("the mesh thread could not start: {e}")))?
        };
        let _declared = Declared {
            _messages: messages,
            _liveliness: liveliness,
            _sponsor: sponsor,
            _decline: decline,
            _token: token,
        };
        Ok(MeshDriver { counters, link, stop, inbox, thread: Some(thread), _declared })
    }

    /// The node's participant, linked to its runtime.
    pub fn link(&self) -> &MeshLink {
        &self.link
    }
}

impl Drop for MeshDriver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.inbox.try_send(Input::Wake);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A newcomer asks this node for a door: learn it (its token may not be out yet), then hand it
/// a move of this node's door.
fn sponsor(link: &MeshLink, newcomer: Peer) -> std::result::Result<(MoveId, Timestamp), String> {
    link.with(|mesh| {
        mesh.peer_joined(newcomer).map_err(|e| e.to_string())?;
        let door = mesh.join_floor().ok_or("this node has no door yet")?;
        let id = mesh.send_move(newcomer, door).map_err(|e| e.to_string())?;
        Ok((id, door))
    })
}

/// Opens this node's door: by genesis when no other node's token is on the fabric, else through
/// the first live node that sponsors it. Learns every live node first (they get its snapshot).
fn open_door(zenoh: &zenoh::Session, link: &MeshLink, me: Peer, timeout: Duration) -> std::result::Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let live = live_nodes(zenoh, me, timeout)?;
        if live.is_empty() {
            return link.with(|mesh| mesh.genesis().map(drop).map_err(|e| format!("cannot open the mesh: {e}")));
        }
        for (key, peer) in &live {
            // Known already, or dead: asking it is still harmless.
            let _ = link.with(|mesh| mesh.peer_joined(*peer));
            let sponsor_key = format!("{key}/sponsor");
            let Ok(replies) = zenoh
                .get(sponsor_key)
                .payload(postcard::to_allocvec(&me).unwrap_or_default())
                .timeout(timeout.min(deadline.saturating_duration_since(Instant::now())).max(Duration::from_millis(1)))
                .wait()
            else {
                continue;
            };
            while let Ok(reply) = replies.recv() {
                let Ok(sample) = reply.result() else { continue };
                let Ok((id, door)) = postcard::from_bytes::<(MoveId, Timestamp)>(&sample.payload().to_bytes()) else {
                    continue;
                };
                if link.with(|mesh| mesh.join(*peer, id, door)).is_ok() {
                    return Ok(());
                }
                let _ = link.with(|mesh| mesh.decline_move(*peer, id));
            }
        }
        if Instant::now() >= deadline {
            let names: Vec<&str> = live.iter().map(|(k, _)| k.as_str()).collect();
            return Err(format!(
                "no live node sponsored this one into the mesh within {timeout:?} (asked {names:?}); \
                 check that they run this version of stampede"
            ));
        }
        std::thread::sleep(SPONSOR_RETRY);
    }
}

/// The mesh keys and participants of every other node whose token is on the fabric.
fn live_nodes(zenoh: &zenoh::Session, me: Peer, timeout: Duration) -> std::result::Result<Vec<(String, Peer)>, String> {
    let replies = zenoh
        .liveliness()
        .get(MESH_KEYS)
        .timeout(timeout)
        .wait()
        .map_err(|e| format!("cannot ask the fabric who is live: {e}"))?;
    let mut live = BTreeMap::new();
    while let Ok(reply) = replies.recv() {
        if let Ok(sample) = reply.result() {
            let key = sample.key_expr().as_str().to_owned();
            if let Some(peer) = peer_of(&key).filter(|p| *p != me) {
                live.insert(key, peer);
            }
        }
    }
    Ok(live.into_iter().collect())
}

/// The driver thread's state.
struct Driver {
    link: MeshLink,
    me: Peer,
    publisher: Publisher<'static>,
    counters: Arc<MeshCounters>,
    /// Messages of senders not reported yet, in arrival order.
    early: HashMap<Peer, Vec<Message>>,
    zenoh: zenoh::Session,
    /// `STAMPEDE_MESH_DEBUG` is set: joins, deaths, refusals and events go to standard error.
    debug: bool,
    dead: DeadHook,
}

impl Driver {
    fn log(&self, what: impl FnOnce() -> String) {
        if self.debug {
            eprintln!("stampede mesh {:?}: {}", self.me, what());
        }
    }

    fn run(mut self, rx: &Receiver<Input>, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            match rx.recv_timeout(TICK) {
                Ok(input) => self.input(input),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            // Drain what else is waiting before sending: one batch for many inputs.
            while let Ok(input) = rx.try_recv() {
                self.input(input);
            }
            self.flush();
        }
    }

    fn input(&mut self, input: Input) {
        match &input {
            Input::Joined(p) => self.log(|| format!("joined {p:?}")),
            Input::Dead(p) => self.log(|| format!("dead {p:?}")),
            Input::Message { .. } | Input::Wake => {}
        }
        match input {
            Input::Message { from, bytes } => self.message(from, &bytes),
            Input::Joined(peer) => {
                if self.link.with(|mesh| mesh.peer_joined(peer)).is_ok() {
                    for message in self.early.remove(&peer).unwrap_or_default() {
                        self.deliver(peer, message);
                    }
                }
            }
            Input::Dead(peer) => {
                self.early.remove(&peer);
                let _ = self.link.with(|mesh| mesh.peer_dead(peer));
                (self.dead)(peer);
            }
            Input::Wake => {}
        }
    }

    fn message(&mut self, from: Peer, bytes: &[u8]) {
        let Ok((to, message)) = postcard::from_bytes::<(Vec<Peer>, Message)>(bytes) else {
            self.counters.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if to.contains(&self.me) {
            self.deliver(from, message);
        }
    }

    fn deliver(&mut self, from: Peer, message: Message) {
        match self.link.with(|mesh| mesh.handle_message(from, message.clone())) {
            Ok(()) => {}
            Err(MeshRefusal::UnknownPeer { .. }) => {
                let room = self.early.contains_key(&from) || self.early.len() < EARLY_SENDERS_MAX;
                match room.then(|| self.early.entry(from).or_default()) {
                    Some(early) if early.len() < EARLY_MESSAGES_MAX => early.push(message),
                    _ => {
                        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Err(refusal) => {
                self.log(|| format!("refused a message from {from:?}: {refusal}"));
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sends what the machine has to send and acts on its events.
    fn flush(&mut self) {
        let (transmits, events) = self.link.with(|mesh| {
            let transmits: Vec<_> = std::iter::from_fn(|| mesh.poll_transmit()).collect();
            let events: Vec<_> = std::iter::from_fn(|| mesh.poll_event()).collect();
            (transmits, events)
        });
        for transmit in transmits {
            match postcard::to_allocvec(&(&transmit.to, &transmit.message)) {
                Ok(bytes) => {
                    let _ = self.publisher.put(bytes).wait();
                }
                Err(_) => {
                    self.counters.malformed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        for event in events {
            if self.debug {
                let (ts_min, complete) = self.link.with(|m| (m.ts_min(), m.is_complete()));
                self.log(|| format!("event {event:?} (ts_min {ts_min}, complete {complete})"));
            }
            match event {
                Event::AskLiveliness { peer } => self.ask_liveliness(peer),
                // A faulted sender holds ts_min until the fabric declares it dead; a node found
                // expelled refuses every input (its clients fail) until it is restarted — see
                // docs/NODES.md.
                Event::Faulted { .. } | Event::Finalized { .. } | Event::Expelled => {}
            }
        }
    }

    /// Reports `peer` joined if its token is on the fabric now, dead otherwise.
    fn ask_liveliness(&mut self, peer: Peer) {
        let Ok(live) = live_nodes(&self.zenoh, self.me, TICK * 10) else { return };
        let input = if live.iter().any(|(_, p)| *p == peer) { Input::Joined(peer) } else { Input::Dead(peer) };
        self.input(input);
    }
}
