//! One life of the node's participant on the fabric: what it declares (its publisher, the
//! subscribers of messages and liveliness, the decline and owns queryables, its token last), and
//! the live nodes it learns before it declares its token. It has no door yet: the driver opens
//! one through a pause round when the node needs it (docs/PROTOCOL.md, "Doors").

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::TrySendError;
use std::time::Duration;

use stampede_core::mesh::MoveId;
use stampede_core::{MoveProof, Peer};
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::qos::CongestionControl;
use zenoh::query::Queryable;
use zenoh::sample::SampleKind;
use zenoh::Wait;

use crate::mesh::{decline_key, mesh_key, owns_key, peer_of, Fabric, Input, Seal, MESH_KEYS};

/// What one incarnation of the node declared on the fabric; dropped, it leaves the fabric.
pub(super) struct Life {
    /// The other nodes' participants live when it began, learned before its token was declared.
    pub(super) live: Vec<Peer>,
    pub(super) publisher: Publisher<'static>,
    _messages: Subscriber<()>,
    _liveliness: Subscriber<()>,
    _decline: Queryable<()>,
    _owns: Queryable<()>,
    _token: LivelinessToken,
}

impl Fabric {
    /// Declares participant `peer` (the link's current one) on the fabric: subscribers and
    /// queryables first, so that the first messages of the nodes that learn it find it
    /// listening; then it learns every live node (they get its snapshot); its token last.
    pub(super) fn begin(&self, peer: Peer) -> std::result::Result<Life, String> {
        let zerr = |e: zenoh::Error| format!("zenoh refused the mesh's declarations: {e}");
        let zenoh = &self.zenoh;
        let key = mesh_key(&self.name, peer.incarnation);
        let publisher =
            zenoh.declare_publisher(key.clone()).congestion_control(CongestionControl::Block).wait().map_err(zerr)?;
        let messages = {
            let (inbox, counters, overflow) = (self.inbox.clone(), self.counters.clone(), self.overflow.clone());
            let seal = self.seal.clone();
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
                    let sealed = sample.payload().to_bytes();
                    // Not a node's (its tag does not verify): dropped as malformed.
                    let Some(bytes) = seal.open(&sealed) else {
                        counters.malformed.fetch_add(1, Ordering::Relaxed);
                        return;
                    };
                    match postcard::take_from_bytes::<Vec<Peer>>(bytes) {
                        Ok((to, _)) if !to.contains(&peer) => return,
                        Ok(_) => {}
                        Err(_) => {
                            counters.malformed.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                    let bytes = bytes.to_vec();
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
        let decline = {
            let link = self.link.clone();
            answer(
                (zenoh, &self.seal),
                decline_key(&self.name, peer.incarnation),
                "no move",
                move |(from, id): (Peer, MoveId)| {
                    // Refused when resolved already (taken over, or declined before), or when this
                    // life is over: fine.
                    Ok(vec![u8::from(link.decline_to(peer, from, id))])
                },
            )?
        };
        let owns = {
            let owns_move = self.owns_move.clone();
            let key = owns_key(&self.name, peer.incarnation);
            answer((zenoh, &self.seal), key, "no move", move |(to, id, proof): (Peer, MoveId, MoveProof)| {
                Ok(vec![u8::from(owns_move(to, id, &proof))])
            })?
        };
        let live = live_nodes(zenoh, peer, self.timeout)?.into_iter().map(|(_, other)| other).collect();
        let token = zenoh.liveliness().declare_token(key).wait().map_err(zerr)?;
        Ok(Life {
            live,
            publisher,
            _messages: messages,
            _liveliness: liveliness,
            _decline: decline,
            _owns: owns,
            _token: token,
        })
    }
}

/// Declares a queryable on `key` that answers a query carrying a `T` (postcard, sealed) with what
/// `respond` makes of it (sealed), or an error naming `what` the query lacks. Only a query on
/// this very key is answered: a wildcard one (`stampede/**`) passes the access control of the
/// mesh's keys (docs/SECURITY.md); and only one a node sealed.
fn answer<T: serde::de::DeserializeOwned>(
    (zenoh, seal): (&zenoh::Session, &Seal),
    key: String,
    what: &'static str,
    respond: impl Fn(T) -> std::result::Result<Vec<u8>, String> + Send + Sync + 'static,
) -> std::result::Result<Queryable<()>, String> {
    let seal = seal.clone();
    zenoh
        .declare_queryable(key.clone())
        .callback(move |query| {
            if query.key_expr().as_str() != key {
                return;
            }
            let asked = query.payload().map(|p| p.to_bytes());
            let asked = asked.as_deref().and_then(|p| seal.open(p)).and_then(|p| postcard::from_bytes::<T>(p).ok());
            let answer = asked.ok_or_else(|| format!("the query names {what}")).and_then(&respond);
            let _ = match answer {
                Ok(bytes) => query.reply(query.key_expr().clone(), seal.seal(bytes)).wait(),
                Err(reason) => query.reply_err(reason).wait(),
            };
        })
        .wait()
        .map_err(|e| format!("zenoh refused the mesh's declarations: {e}"))
}

/// The mesh keys and participants of every other node whose token is on the fabric.
pub(super) fn live_nodes(
    zenoh: &zenoh::Session,
    me: Peer,
    timeout: Duration,
) -> std::result::Result<Vec<(String, Peer)>, String> {
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
