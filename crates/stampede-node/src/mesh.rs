//! The fabric driver of the distributed ts_min (`docs/PROTOCOL.md`): one [`Mesh`] participant
//! per node, linked to the node's runtime ([`MeshLink`]), its messages and liveliness on zenoh.
//!
//! **Keys.** A node in one life is `Peer { id: peer_id(name), incarnation }`, the incarnation
//! being its start time in microseconds (a restart is a larger one). Its liveliness token and its
//! publisher share the key `stampede/<name>/mesh/<incarnation>`; one publisher per node (zenoh is reliable by default; `CongestionControl::Block`: never dropped)
//! keeps its messages in order (the machine needs FIFO per sender, nothing more). A message is
//! `(to, Message)` in postcard; peers not in `to` ignore it.
//!
//! **Joining and doors.** A node learns every live node, then declares its token; it holds no
//! door. It opens one through a pause round (docs/PROTOCOL.md, "Doors") while it needs one —
//! while a client session is open, always when an application embeds its runtime
//! ([`Hooks::door_wanted`]), and after a restart until its claims are shown again — and gives
//! it back when nothing needs it any more, so a node used alone reclaims inside the operation
//! that made an item garbage, whatever other nodes its mesh has. A session's open waits for the
//! door (`Door::opened`).
//!
//! **Guarantees.** No byte from the fabric panics the driver: keys that do not parse, payloads
//! that do not decode, and messages the machine refuses are counted and dropped (a refused batch
//! stops its sender's stream, as the machine says). What the node does with its participant —
//! messages of a sender not reported yet kept for its token (at most [`EARLY_MESSAGES_MAX`] per
//! sender, [`EARLY_SENDERS_MAX`] senders), fenced senders reminded, the door, silent members,
//! restarts — is the sans-IO [`Steward`]'s (`stampede_engine::steward`), which the whole-path
//! simulation steps too; the driver thread only carries it over zenoh. Every wait is
//! bounded: the driver thread wakes at least every `TICK` (100 ms), a session waits for the door
//! at most the node's liveliness timeout.
//!
//! Here: the keys, the access control of the mesh's keys, the bounds, and [`MeshDriver`] (start,
//! stop). Beside it, `life` (one incarnation's declarations), `driver` (the driver thread that
//! carries the steward) and `clock` (mesh time: one clock and epoch for the mesh).

mod clock;
mod driver;
mod life;
mod seal;

pub(crate) use seal::Seal;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use stampede_engine::MeshLink;

use crate::mesh::driver::Driver;
use crate::session::Move;
use stampede_core::mesh::MoveId;
use stampede_core::{Error, Result};
use stampede_core::{Mesh, MeshLimits, MoveProof, Peer};
use stampede_engine::{Runtime, Steward};
use zenoh::Wait;

pub use stampede_engine::steward::{MeshCounters, EARLY_MESSAGES_MAX, EARLY_SENDERS_MAX};

/// Inputs waiting for the driver thread; a full inbox drops fabric messages (counted) — never
/// deaths or joins, which are retried from liveliness on the next tick.
const INBOX_MAX: usize = 4096;
/// The driver thread wakes at least this often (to look for events, to retry).
const TICK: Duration = Duration::from_millis(100);

/// A node's participant id: FNV-1a of its name (node names are unique in a mesh).
pub fn peer_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn mesh_key(name: &str, incarnation: u64) -> String {
    format!("stampede/{name}/mesh/{incarnation}")
}

/// The key of a node's mesh service `service` (its clock, its listing): one per node, whatever its
/// incarnation, under the mesh's keys (closed to clients with `--mesh-node-cn`).
pub(crate) fn service_key(node: &str, service: &str) -> String {
    format!("stampede/{node}/mesh/{service}")
}

/// The node whose service `service` a key `stampede/<node>/mesh/<service>` is (the key a reply to
/// a wildcard question comes under).
pub(crate) fn node_of_service<'k>(key: &'k str, service: &str) -> Option<&'k str> {
    let node = key.strip_prefix("stampede/")?.strip_suffix(service)?.strip_suffix("/mesh/")?;
    (!node.is_empty() && !node.contains('/')).then_some(node)
}

fn decline_key(name: &str, incarnation: u64) -> String {
    format!("{}/decline", mesh_key(name, incarnation))
}

fn owns_key(name: &str, incarnation: u64) -> String {
    format!("{}/owns", mesh_key(name, incarnation))
}

/// Asks node `from_node` (participant `from`) whether its move `id` to `to` was made by the
/// client that presents `proof`: `false` when it says no, or does not answer within `timeout`.
pub(crate) async fn owned_there(
    (zenoh, seal): (&zenoh::Session, &Seal),
    from_node: &str,
    from: Peer,
    (to, id, proof): (Peer, MoveId, MoveProof),
    timeout: Duration,
) -> bool {
    let payload = seal.seal(postcard::to_allocvec(&(to, id, proof)).unwrap_or_default());
    let Ok(replies) = zenoh.get(owns_key(from_node, from.incarnation)).payload(payload).timeout(timeout).await else {
        return false;
    };
    match replies.recv_async().await {
        Ok(reply) => reply.result().is_ok_and(|sample| seal.open(&sample.payload().to_bytes()) == Some(&[1][..])),
        Err(_) => false,
    }
}

/// How long a node waits for another to confirm it declined a move.
pub(crate) const DECLINE_WAIT: Duration = Duration::from_secs(5);

/// Asks node `to_node` (participant `to`) to decline this node's move `id` if it did not take it
/// over: the move of a task whose client went away between `MoveTask` and `TakeOverTask`.
/// Nothing to do once the move is resolved; a node that does not answer is left to the mesh
/// (its death resolves the move).
pub(crate) fn decline_there((zenoh, seal): (&zenoh::Session, &Seal), link: &MeshLink, taken: &Move) {
    if !link.is_move_open(taken.to, taken.id) {
        return;
    }
    let payload = seal.seal(postcard::to_allocvec(&(link.peer(), taken.id)).unwrap_or_default());
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
/// name is in `nodes` speak on the mesh's keys: every message on `stampede/*/mesh/**` and on the
/// nodes' hellos (`stampede/*/hello/*/*`, what a joining node checks: docs/SECURITY.md) that
/// arrives on another link (a client's) is refused, so no client can speak for a node, forge a
/// token or a hello, or ask for a decline. (Zenoh lets a link through when any subject it
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
            "key_exprs": ["stampede/*/mesh/**", stampede_wire::fabric::HELLO_KEYS],
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

/// What a node does when its participant's life changes (see `MeshDriver::start`); both run
/// on the driver thread.
#[derive(Clone)]
pub struct Hooks {
    /// Another node was reported dead (by the fabric, or fenced for a faulted stream) and is
    /// fenced, at the driver's time given: the node closes the shadows of its tasks.
    pub dead: Arc<dyn Fn(Peer, Duration) + Send + Sync>,
    /// This node was expelled and its participant replaced by a new incarnation, not joined
    /// yet, at the driver's time given: the node closes every shadow on it and forgets its
    /// sessions' moves; the sessions and their own tasks stay.
    pub expelled: Arc<dyn Fn(Duration) + Send + Sync>,
    /// The driver's look at its participant, at the driver's time given (at least every tick):
    /// the node settles what waits for a time (shadows closing).
    pub look: Arc<dyn Fn(Duration) + Send + Sync>,
    /// Whether one of the node's sessions made move `id` to `to` and handed out `proof` for it
    /// (asked by the move's target before a takeover): runs on a zenoh thread.
    pub owns_move: OwnsMove,
    /// Whether the node needs a door now: a client session is open, or an application embeds
    /// the runtime (its root tasks may come at any time). Runs on the driver thread, often.
    pub door_wanted: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// The node's door as its sessions see it: whether it is open, and a way to tell the driver that
/// what needs one changed.
pub struct Door {
    open: tokio::sync::watch::Sender<bool>,
    /// The same, for a thread that blocks (the node's start).
    open_now: parking_lot::Mutex<bool>,
    opened_now: parking_lot::Condvar,
    inbox: SyncSender<Input>,
}

impl Door {
    /// Tells the sessions and threads waiting whether the door is open (the driver thread).
    fn set(&self, open: bool) {
        self.open.send_replace(open);
        *self.open_now.lock() = open;
        if open {
            self.opened_now.notify_all();
        }
    }

    /// [`opened`](Self::opened), blocking the thread.
    fn opened_blocking(&self, timeout: Duration) -> bool {
        let mut open = self.open_now.lock();
        let deadline = std::time::Instant::now() + timeout;
        while !*open {
            if self.opened_now.wait_until(&mut open, deadline).timed_out() {
                break;
            }
        }
        *open
    }

    /// What needs the door changed (a session opened or closed): the driver looks again.
    pub(crate) fn changed(&self) {
        let _ = self.inbox.try_send(Input::Wake);
    }

    /// Whether the door is open, or opens within `timeout` (a pause round: one message round
    /// to every node of the mesh).
    pub(crate) async fn opened(&self, timeout: Duration) -> bool {
        let mut open = self.open.subscribe();
        let opened = tokio::time::timeout(timeout, open.wait_for(|open| *open)).await.is_ok_and(|r| r.is_ok());
        opened
    }
}

/// [`Hooks::owns_move`]: whether the node made move `id` to `to` for the client presenting the proof.
pub type OwnsMove = Arc<dyn Fn(Peer, MoveId, &MoveProof) -> bool + Send + Sync>;

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

/// A node's running driver. Dropping it stops the thread and undeclares everything.
pub struct MeshDriver {
    pub(crate) counters: Arc<MeshCounters>,
    link: MeshLink,
    stop: Arc<AtomicBool>,
    inbox: SyncSender<Input>,
    door: Arc<Door>,
    thread: Option<JoinHandle<()>>,
    _clock: clock::ClockSync,
}

/// What every life of a node's participant shares.
struct Fabric {
    zenoh: zenoh::Session,
    link: MeshLink,
    name: String,
    /// How long asking the fabric who is live may take.
    timeout: Duration,
    inbox: SyncSender<Input>,
    counters: Arc<MeshCounters>,
    /// A liveliness event found the inbox full: the driver reads liveliness again.
    resync: Arc<AtomicBool>,
    /// A message addressed to this participant found the inbox full: its sender's stream has a
    /// gap, so the driver restarts the participant.
    overflow: Arc<AtomicBool>,
    /// [`Hooks::owns_move`], for the queryable each life declares.
    owns_move: OwnsMove,
    /// Whether the door is open, for the sessions waiting for it.
    door: Arc<Door>,
    /// Tags every payload on the mesh's keys, and checks the tags of those that come.
    seal: Seal,
}

/// A new incarnation: larger than `after`, from the clock when it can be (a restarted process
/// does not remember its last one).
fn incarnation_after(after: u64) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_micros() as u64);
    now.max(after + 1)
}

impl MeshDriver {
    /// Links `runtime` to a new participant for node `name`, declares it on the fabric (asking
    /// who is live within `timeout`) and starts the driver thread; every payload on the mesh's
    /// keys is tagged and checked with `seal`. `Unreachable` if the fabric
    /// refuses a declaration or does not answer.
    ///
    /// When its peers expel the node (they declared it dead while it lived: a partition, a
    /// stream they refused), the driver runs `hooks.expelled`, replaces the participant by a new
    /// incarnation ([`MeshLink::restart`]) and joins again, retrying until it is stopped.
    pub(crate) fn start(
        zenoh: &zenoh::Session,
        runtime: &Runtime,
        name: &str,
        timeout: Duration,
        hooks: Hooks,
        seal: Seal,
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
        let door = Arc::new(Door {
            open: tokio::sync::watch::Sender::new(false),
            open_now: parking_lot::Mutex::new(false),
            opened_now: parking_lot::Condvar::new(),
            inbox: inbox.clone(),
        });
        let fabric = Fabric {
            zenoh: zenoh.clone(),
            link: link.clone(),
            name: name.to_owned(),
            timeout,
            inbox: inbox.clone(),
            counters: counters.clone(),
            resync: Arc::new(AtomicBool::new(false)),
            overflow: Arc::new(AtomicBool::new(false)),
            owns_move: hooks.owns_move.clone(),
            door: door.clone(),
            seal: seal.clone(),
        };
        let life = fabric.begin(peer).map_err(unreachable)?;
        // After `begin`, which asked the fabric who is live: the others' clocks answer by now.
        let clock = clock::ClockSync::start((zenoh, &seal), name, runtime.clock().clone()).map_err(unreachable)?;
        let hooks_door_wanted = hooks.door_wanted.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, link, counters) = (stop.clone(), link.clone(), counters.clone());
            std::thread::Builder::new()
                .name(format!("stampede-mesh-{name}"))
                .spawn(move || {
                    let debug = std::env::var_os(DEBUG_ENV).is_some();
                    let mut steward = Steward::new(link, timeout, incarnation_after, counters, debug);
                    steward.began(&life.live);
                    let origin = std::time::Instant::now();
                    Driver { fabric, steward, life: Some(life), woken, debug, origin, hooks }.run(&rx, &stop)
                })
                .map_err(|e| unreachable(format!("the mesh thread could not start: {e}")))?
        };
        // An application that embeds the runtime may start a root task as soon as the node
        // serves: the door opens first (a pause round), or the start fails. The driver looks at
        // once, not after its first tick.
        let _ = inbox.try_send(Input::Wake);
        if (hooks_door_wanted)() && !door.opened_blocking(timeout) {
            stop.store(true, Ordering::Release);
            let _ = inbox.try_send(Input::Wake);
            let _ = thread.join();
            return Err(unreachable(format!(
                "this node could not open its door to its mesh within {timeout:?}: a node of the mesh did not \
                 answer its pause round (docs/PROTOCOL.md, \"Doors\"); check that every node runs"
            )));
        }
        Ok(MeshDriver { counters, link, stop, inbox, door, thread: Some(thread), _clock: clock })
    }

    /// The node's participant, linked to its runtime.
    pub fn link(&self) -> &MeshLink {
        &self.link
    }

    /// The node's door, for its sessions.
    pub(crate) fn door(&self) -> &Arc<Door> {
        &self.door
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
