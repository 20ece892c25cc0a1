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
/// How often a fenced sender that keeps speaking is told it was fenced.
const REMIND_EVERY: Duration = Duration::from_secs(1);
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

/// What zenoh refuses on the mesh's keys to any link that is not a node's.
const MESH_MESSAGES: [&str; 9] = [
    "put",
    "delete",
    "declare_subscriber",
    "query",
    "declare_queryable",
    "reply",
    "liveliness_token",
    "declare_liveliness_subscriber",
    "liveliness_query",
];

/// Configures zenoh's access control so that only links presenting a certificate whose common
/// name is in `nodes` speak on the mesh's keys: every message on `stampede/*/mesh/**` that
/// arrives on another link (a client's) is refused, so no client can speak for a node, forge a
/// token, or ask for a sponsor or a decline. (Zenoh lets a link through when any subject it
/// matches allows: the nodes' subject allows what the catch-all one denies.) What zenoh checks is
/// the message's own key: a query on a wider one (`stampede/**`) passes, which is why the
/// queryables answer only queries on their exact keys. Outgoing messages are not filtered (a
/// client may listen on a wider key): refusing them made zenoh 1.10 undeclare a node's token at
/// the other nodes when a client's refused token went away.
pub(crate) fn keep_keys_to_nodes(config: &mut zenoh::Config, nodes: &[String]) -> Result<()> {
    let rule = |id: &str, permission: &str| {
        serde_json::json!({
            "id": id,
            "permission": permission,
            "flows": ["ingress"],
            "messages": MESH_MESSAGES,
            "key_exprs": ["stampede/*/mesh/**"],
        })
    };
    let acl = serde_json::json!({
        "enabled": true,
        "default_permission": "allow",
        "rules": [rule("mesh keys closed", "deny"), rule("mesh keys for nodes", "allow")],
        "subjects": [{ "id": "anyone" }, { "id": "nodes", "cert_common_names": nodes }],
        "policies": [
            { "rules": ["mesh keys closed"], "subjects": ["anyone"] },
            { "rules": ["mesh keys for nodes"], "subjects": ["nodes"] },
        ],
    });
    config.insert_json5("access_control", &acl.to_string()).map_err(|e| Error::InvalidArgument {
        op: "serve",
        name: "mesh_node_cn".into(),
        reason: format!("zenoh refused the access control of the mesh's keys: {e}"),
    })
}

/// What a node does when its participant's life changes (see [`MeshDriver::start`]); both run
/// on the driver thread.
#[derive(Clone)]
pub struct Hooks {
    /// Another node was reported dead (by the fabric, or fenced for a faulted stream) and is
    /// fenced: the node closes the shadows of its tasks.
    pub dead: Arc<dyn Fn(Peer) + Send + Sync>,
    /// This node was expelled and its participant replaced by a new incarnation, not joined
    /// yet: the node ends every client session (their clients see `Closed` and reconnect).
    pub expelled: Arc<dyn Fn() + Send + Sync>,
}

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
    /// Times this node was expelled and rejoined as a new incarnation.
    pub restarts: AtomicU64,
}

/// A node's running driver. Dropping it stops the thread and undeclares everything.
pub struct MeshDriver {
    pub(crate) counters: Arc<MeshCounters>,
    link: MeshLink,
    stop: Arc<AtomicBool>,
    inbox: SyncSender<Input>,
    thread: Option<JoinHandle<()>>,
}

/// What one incarnation of the node declared on the fabric; dropped, it leaves the fabric.
struct Life {
    me: Peer,
    /// Its door was opened alone (`genesis`): an island that gives way when it meets the rest
    /// of the mesh (see [`Driver::flush`]).
    alone: bool,
    publisher: Publisher<'static>,
    _messages: Subscriber<()>,
    _liveliness: Subscriber<()>,
    _sponsor: Queryable<()>,
    _decline: Queryable<()>,
    _token: LivelinessToken,
}

/// What every life of a node's participant shares.
struct Fabric {
    zenoh: zenoh::Session,
    link: MeshLink,
    name: String,
    /// How long joining (asking live nodes for a sponsor) may take.
    timeout: Duration,
    inbox: SyncSender<Input>,
    counters: Arc<MeshCounters>,
    /// A liveliness event found the inbox full: the driver reads liveliness again.
    resync: Arc<AtomicBool>,
    /// A message addressed to this participant found the inbox full: its sender's stream has a
    /// gap, so the driver restarts the participant.
    overflow: Arc<AtomicBool>,
}

/// A new incarnation: larger than `after`, from the clock when it can be (a restarted process
/// does not remember its last one).
fn incarnation_after(after: u64) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_micros() as u64);
    now.max(after + 1)
}

impl MeshDriver {
    /// Links `runtime` to a new participant for node `name`, opens its door (alone, or through a
    /// live node within `timeout`) and starts the driver thread. `Unreachable` if no live node
    /// sponsors it in time.
    ///
    /// When its peers expel the node (they declared it dead while it lived: a partition, a
    /// stream they refused), the driver runs `hooks.expelled`, replaces the participant by a new
    /// incarnation ([`MeshLink::restart`]) and joins again, retrying until it is stopped.
    pub fn start(
        zenoh: &zenoh::Session,
        runtime: &Runtime,
        name: &str,
        timeout: Duration,
        hooks: Hooks,
    ) -> Result<MeshDriver> {
        let unreachable = |reason: String| Error::Unreachable { op: "serve", name: name.to_owned(), reason };
        let peer = Peer { id: peer_id(name), incarnation: incarnation_after(0) };
        let (inbox, rx) = mpsc::sync_channel(INBOX_MAX);
        let (wake, woken) = (inbox.clone(), Arc::new(AtomicBool::new(false)));
        let pending = woken.clone();
        let link = MeshLink::attach(
            runtime,
            Mesh::new(peer, MeshLimits::default()),
            Arc::new(move || {
                // At most one wake queued: the driver clears the flag as it takes it.
                if !pending.swap(true, Ordering::AcqRel) && wake.try_send(Input::Wake).is_err() {
                    pending.store(false, Ordering::Release);
                }
            }),
        )?;
        let counters = Arc::new(MeshCounters::default());
        let fabric = Fabric {
            zenoh: zenoh.clone(),
            link: link.clone(),
            name: name.to_owned(),
            timeout,
            inbox: inbox.clone(),
            counters: counters.clone(),
            resync: Arc::new(AtomicBool::new(false)),
            overflow: Arc::new(AtomicBool::new(false)),
        };
        let life = fabric.begin(peer).map_err(unreachable)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("stampede-mesh-{name}"))
                .spawn(move || {
                    let debug = std::env::var_os(DEBUG_ENV).is_some();
                    let (early, reminded) = (HashMap::new(), HashMap::new());
                    let early_lost = std::collections::HashSet::new();
                    Driver { fabric, life: Some(life), early, early_lost, reminded, woken, debug, hooks }
                        .run(&rx, &stop)
                })
                .map_err(|e| unreachable(format!("the mesh thread could not start: {e}")))?
        };
        Ok(MeshDriver { counters, link, stop, inbox, thread: Some(thread) })
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

impl Fabric {
    /// Declares participant `peer` (the link's current one) on the fabric and opens its door:
    /// subscribers and queryables first, so the sponsor's first messages find it listening;
    /// the token last, so every node with a token has a door.
    fn begin(&self, peer: Peer) -> std::result::Result<Life, String> {
        let zerr = |e: zenoh::Error| format!("zenoh refused the mesh's declarations: {e}");
        let zenoh = &self.zenoh;
        let key = mesh_key(&self.name, peer.incarnation);
        let publisher =
            zenoh.declare_publisher(key.clone()).congestion_control(CongestionControl::Block).wait().map_err(zerr)?;
        let messages = {
            let (inbox, counters, overflow) = (self.inbox.clone(), self.counters.clone(), self.overflow.clone());
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
                    // Only what is addressed to this participant is queued: the other nodes'
                    // traffic among themselves would fill the inbox while it joins.
                    let bytes = sample.payload().to_bytes();
                    match postcard::take_from_bytes::<Vec<Peer>>(&bytes) {
                        Ok((to, _)) if !to.contains(&peer) => return,
                        Ok(_) => {}
                        Err(_) => {
                            counters.malformed.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                    let bytes = bytes.into_owned();
                    if let Err(TrySendError::Full(_)) = inbox.try_send(Input::Message { from, bytes }) {
                        // A message of a sender's stream lost: that stream can never be applied
                        // past it. The participant starts over (`Driver::run`).
                        counters.dropped.fetch_add(1, Ordering::Relaxed);
                        overflow.store(true, Ordering::Release);
                    }
                })
                .wait()
                .map_err(zerr)?
        };
        let liveliness = {
            let (inbox, resync) = (self.inbox.clone(), self.resync.clone());
            zenoh
                .liveliness()
                .declare_subscriber(MESH_KEYS)
                .history(true)
                .callback(move |sample| {
                    let Some(p) = peer_of(sample.key_expr().as_str()).filter(|p| *p != peer) else { return };
                    let input = if sample.kind() == SampleKind::Delete { Input::Dead(p) } else { Input::Joined(p) };
                    // Never blocking zenoh's thread: a join or death that finds the inbox full
                    // is not lost, the driver reads liveliness again (`resync`).
                    if inbox.try_send(input).is_err() {
                        resync.store(true, Ordering::Release);
                    }
                })
                .wait()
                .map_err(zerr)?
        };
        let sponsor = {
            let (link, key) = (self.link.clone(), sponsor_key(&self.name, peer.incarnation));
            zenoh
                .declare_queryable(key.clone())
                .callback(move |query| {
                    // Only a query on this very key: a wildcard one (`stampede/**`) passes the
                    // access control of the mesh's keys (docs/SECURITY.md).
                    if query.key_expr().as_str() != key {
                        return;
                    }
                    let newcomer = query.payload().and_then(|p| postcard::from_bytes::<Peer>(&p.to_bytes()).ok());
                    let answer = match newcomer {
                        Some(newcomer) => sponsor(&link, peer, newcomer),
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
            let (link, key) = (self.link.clone(), decline_key(&self.name, peer.incarnation));
            zenoh
                .declare_queryable(key.clone())
                .callback(move |query| {
                    // As for the sponsor: only a query on this very key.
                    if query.key_expr().as_str() != key {
                        return;
                    }
                    let asked =
                        query.payload().and_then(|p| postcard::from_bytes::<(Peer, MoveId)>(&p.to_bytes()).ok());
                    let _ = match asked {
                        // Refused when resolved already (taken over, or declined before), or
                        // when this life is over: fine.
                        Some((from, id)) => {
                            let declined = link.peer() == peer && link.decline(from, id);
                            query.reply(query.key_expr().clone(), [u8::from(declined)]).wait()
                        }
                        None => query.reply_err("the query names no move").wait(),
                    };
                })
                .wait()
                .map_err(zerr)?
        };
        let alone = open_door(zenoh, &self.link, peer, self.timeout)?;
        let token = zenoh.liveliness().declare_token(key).wait().map_err(zerr)?;
        Ok(Life {
            me: peer,
            alone,
            publisher,
            _messages: messages,
            _liveliness: liveliness,
            _sponsor: sponsor,
            _decline: decline,
            _token: token,
        })
    }
}

/// A newcomer asks this node for a door: learn it (its token may not be out yet), then hand it
/// a move of this node's door.
fn sponsor(link: &MeshLink, me: Peer, newcomer: Peer) -> std::result::Result<(MoveId, Timestamp), String> {
    link.with(|mesh| {
        if mesh.me() != me {
            return Err("this incarnation of the node was expelled; ask its new one".to_owned());
        }
        mesh.peer_joined(newcomer).map_err(|e| e.to_string())?;
        let door = mesh.join_floor().ok_or("this node has no door yet")?;
        let id = mesh.send_move(newcomer, door).map_err(|e| e.to_string())?;
        Ok((id, door))
    })
}

/// Opens this node's door: by genesis when no other node's token is on the fabric (returns
/// `true`: alone), else through the first live node that sponsors it. Learns every live node
/// first (they get its snapshot).
fn open_door(
    zenoh: &zenoh::Session,
    link: &MeshLink,
    me: Peer,
    timeout: Duration,
) -> std::result::Result<bool, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let live = live_nodes(zenoh, me, timeout)?;
        if live.is_empty() {
            return link.with(|mesh| mesh.genesis().map(|_| true).map_err(|e| format!("cannot open the mesh: {e}")));
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
                    return Ok(false);
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
    fabric: Fabric,
    /// The participant's declarations; `None` while an expelled node has not joined again.
    life: Option<Life>,
    /// Messages of senders not reported yet, in arrival order.
    early: HashMap<Peer, Vec<Message>>,
    /// Senders not reported yet some of whose messages were dropped (at most
    /// [`EARLY_SENDERS_MAX`]).
    early_lost: std::collections::HashSet<Peer>,
    /// Fenced senders told so lately (at most [`EARLY_SENDERS_MAX`]), and when.
    reminded: HashMap<Peer, Instant>,
    /// A wake is queued (the runtime's claims changed); cleared as it is taken.
    woken: Arc<AtomicBool>,
    /// `STAMPEDE_MESH_DEBUG` is set: joins, deaths, refusals and events go to standard error.
    debug: bool,
    hooks: Hooks,
}

impl Driver {
    fn log(&self, what: impl FnOnce() -> String) {
        if self.debug {
            eprintln!("stampede mesh {:?}: {}", self.fabric.link.peer(), what());
        }
    }

    fn run(mut self, rx: &Receiver<Input>, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            if self.life.is_none() {
                self.rejoin(stop);
                continue;
            }
            if self.fabric.resync.swap(false, Ordering::AcqRel) {
                self.resync();
            }
            if self.fabric.overflow.swap(false, Ordering::AcqRel) {
                self.log(|| "a message addressed to it was dropped (inbox full): it starts over".to_owned());
                self.restart();
                continue;
            }
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

    /// Declares the link's current participant and opens its door; on failure (no sponsor
    /// answered) waits a tick and leaves it to the next round.
    fn rejoin(&mut self, stop: &AtomicBool) {
        let peer = self.fabric.link.peer();
        match self.fabric.begin(peer) {
            Ok(life) => {
                self.log(|| "joined the mesh again".to_owned());
                self.life = Some(life);
            }
            Err(reason) => {
                self.log(|| format!("could not join again: {reason}"));
                if !stop.load(Ordering::Acquire) {
                    std::thread::sleep(TICK);
                }
            }
        }
    }

    /// This node was expelled: leave the fabric, end every client session, and replace the
    /// participant by a new incarnation (joined by [`rejoin`](Self::rejoin)).
    fn restart(&mut self) {
        // Leaving the fabric first: its token gone, the old incarnation is dead to everyone.
        let Some(old) = self.life.take() else { return };
        let peer = Peer { id: old.me.id, incarnation: incarnation_after(old.me.incarnation) };
        drop(old);
        self.early.clear();
        self.early_lost.clear();
        self.reminded.clear();
        // A larger incarnation of this participant with no door: never refused.
        let _ = self.fabric.link.restart(Mesh::new(peer, MeshLimits::default()));
        self.fabric.counters.restarts.fetch_add(1, Ordering::Relaxed);
        (self.hooks.expelled)();
    }

    fn input(&mut self, input: Input) {
        match &input {
            Input::Joined(p) => self.log(|| format!("joined {p:?}")),
            Input::Dead(p) => self.log(|| format!("dead {p:?}")),
            Input::Message { .. } | Input::Wake => {}
        }
        match input {
            Input::Message { from, bytes } => self.message(from, &bytes),
            Input::Joined(peer) => match self.fabric.link.with(|mesh| mesh.peer_joined(peer)) {
                // Messages of it were dropped before it was reported: its stream to this
                // participant can never be applied past them, so the participant starts over.
                Ok(()) if self.early_lost.remove(&peer) => {
                    self.log(|| format!("messages of {peer:?} were dropped before it joined: it starts over"));
                    self.restart();
                }
                Ok(()) => {
                    for message in self.early.remove(&peer).unwrap_or_default() {
                        self.deliver(peer, message);
                    }
                }
                // Its token is (back) on the fabric, but this node fenced it: it may not know.
                Err(MeshRefusal::DeadIncarnation { .. }) => self.remind(peer),
                Err(_) => {}
            },
            Input::Dead(peer) => {
                self.early.remove(&peer);
                self.early_lost.remove(&peer);
                let _ = self.fabric.link.with(|mesh| mesh.peer_dead(peer));
                (self.hooks.dead)(peer);
            }
            Input::Wake => self.woken.store(false, Ordering::Release),
        }
    }

    fn message(&mut self, from: Peer, bytes: &[u8]) {
        let Ok((to, message)) = postcard::from_bytes::<(Vec<Peer>, Message)>(bytes) else {
            self.fabric.counters.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if self.life.as_ref().is_some_and(|life| to.contains(&life.me)) {
            self.deliver(from, message);
        }
    }

    fn deliver(&mut self, from: Peer, message: Message) {
        match self.fabric.link.with(|mesh| mesh.handle_message(from, message.clone())) {
            Ok(()) => {}
            Err(MeshRefusal::UnknownPeer { .. }) => {
                let room = self.early.contains_key(&from) || self.early.len() < EARLY_SENDERS_MAX;
                match room.then(|| self.early.entry(from).or_default()) {
                    Some(early) if early.len() < EARLY_MESSAGES_MAX => early.push(message),
                    _ => {
                        self.fabric.counters.dropped.fetch_add(1, Ordering::Relaxed);
                        // Should the sender turn out real, its stream has a gap (see `input`).
                        if self.early_lost.len() < EARLY_SENDERS_MAX {
                            self.early_lost.insert(from);
                        }
                    }
                }
            }
            Err(refusal) => {
                self.log(|| format!("refused a message from {from:?}: {refusal}"));
                self.fabric.counters.refused.fetch_add(1, Ordering::Relaxed);
                if let MeshRefusal::DeadIncarnation { peer } | MeshRefusal::Faulted { peer } = refusal {
                    if peer == from {
                        self.remind(from);
                    }
                }
            }
        }
    }

    /// `from` speaks although this node fenced it: it does not know it was expelled. Tell it
    /// ([`Mesh::remind`]), at most once per [`REMIND_EVERY`] per sender.
    fn remind(&mut self, from: Peer) {
        let now = Instant::now();
        if self.reminded.get(&from).is_some_and(|at| now.duration_since(*at) < REMIND_EVERY) {
            return;
        }
        if self.reminded.len() >= EARLY_SENDERS_MAX {
            self.reminded.retain(|_, at| now.duration_since(*at) < REMIND_EVERY);
        }
        if self.reminded.len() < EARLY_SENDERS_MAX && self.fabric.link.with(|mesh| mesh.remind(from)) {
            self.log(|| format!("told {from:?} it was fenced"));
            self.reminded.insert(from, now);
        }
    }

    /// Sends what the machine has to send and acts on its events.
    fn flush(&mut self) {
        // Between a restart and the new life's declarations, what the new participant has to
        // say stays queued in it: sent now, it would be lost, and a stream with a gap never heals.
        let Some(life) = &self.life else { return };
        let (transmits, events) = self.fabric.link.with(|mesh| {
            let transmits: Vec<_> = std::iter::from_fn(|| mesh.poll_transmit()).collect();
            let events: Vec<_> = std::iter::from_fn(|| mesh.poll_event()).collect();
            (transmits, events)
        });
        for transmit in transmits {
            match postcard::to_allocvec(&(&transmit.to, &transmit.message)) {
                Ok(bytes) => {
                    let _ = life.publisher.put(bytes).wait();
                }
                Err(_) => {
                    self.fabric.counters.malformed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        for event in events {
            if self.debug {
                let (ts_min, complete) = self.fabric.link.read(|m| (m.ts_min(), m.is_complete()));
                self.log(|| format!("event {event:?} (ts_min {ts_min}, complete {complete})"));
            }
            match event {
                Event::AskLiveliness { peer } => self.ask_liveliness(peer),
                // A peer's stream the machine refused holds ts_min until that peer is declared
                // dead: this node declares it (fences it). Its peers follow the fence, and the
                // peer, learning it was expelled, rejoins as a new incarnation — so a stream
                // broken by a partition that healed, or by a restarted node that opened its
                // door alone, does not hold the mesh for ever.
                //
                // Unless this node opened its door alone after that peer started (it restarted
                // while cut off: incarnations are start times) and finds the peer's claims below
                // its own ts_min: then it is the island, and gives way — it restarts and joins
                // through the others — rather than expel the rest of the mesh. (A node that opened
                // alone before, the mesh's first, fences a newcomer that did.)
                Event::Faulted { peer, refusal: MeshRefusal::BelowFrontier { .. } }
                    if self.life.as_ref().is_some_and(|life| life.alone && life.me.incarnation > peer.incarnation) =>
                {
                    self.log(|| "opened alone, it meets a mesh below its ts_min: it gives way".to_owned());
                    self.restart();
                    return;
                }
                Event::Faulted { peer, .. } => self.input(Input::Dead(peer)),
                Event::Expelled => {
                    // What else the old participant said is about a life that is over.
                    self.restart();
                    return;
                }
                Event::Finalized { .. } => {}
            }
        }
    }

    /// Reads liveliness again after a join or death was dropped (inbox full): every token on
    /// the fabric is reported joined, every live member without one dead.
    fn resync(&mut self) {
        let Some(live) = self.live_on_fabric() else {
            self.fabric.resync.store(true, Ordering::Release);
            return;
        };
        let members = self.fabric.link.read(Mesh::live_peers);
        for gone in members.into_iter().filter(|p| !live.contains(p)) {
            self.input(Input::Dead(gone));
        }
        for peer in live {
            self.input(Input::Joined(peer));
        }
    }

    /// Reports `peer` joined if its token is on the fabric now, dead otherwise.
    fn ask_liveliness(&mut self, peer: Peer) {
        let Some(live) = self.live_on_fabric() else { return };
        self.input(if live.contains(&peer) { Input::Joined(peer) } else { Input::Dead(peer) });
    }

    /// The other nodes' participants whose tokens are on the fabric now; `None` if the fabric
    /// does not answer.
    fn live_on_fabric(&self) -> Option<Vec<Peer>> {
        let live = live_nodes(&self.fabric.zenoh, self.fabric.link.peer(), TICK * 10).ok()?;
        Some(live.into_iter().map(|(_, peer)| peer).collect())
    }
}
