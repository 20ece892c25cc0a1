//! One life of the node's participant on the fabric: what it declares (its publisher, the
//! subscribers of messages and liveliness, the sponsor and decline queryables, its token last)
//! and how it opens its door — by genesis when no other node is live, else through a live node
//! that sponsors it with a move of its own door.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::TrySendError;
use std::time::{Duration, Instant};

use stampede_core::mesh::MoveId;
use stampede_core::{MoveProof, Peer, Timestamp};
use stampede_engine::MeshLink;
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::qos::CongestionControl;
use zenoh::query::Queryable;
use zenoh::sample::SampleKind;
use zenoh::Wait;

use crate::mesh::{decline_key, mesh_key, owns_key, peer_of, sponsor_key, Fabric, Input, MESH_KEYS, SPONSOR_RETRY};

/// What one incarnation of the node declared on the fabric; dropped, it leaves the fabric.
pub(super) struct Life {
    pub(super) me: Peer,
    /// Its door was opened alone (`genesis`): an island that gives way when it meets the rest
    /// of the mesh (see [`Driver::flush`](super::driver::Driver::flush)).
    pub(super) alone: bool,
    pub(super) publisher: Publisher<'static>,
    _messages: Subscriber<()>,
    _liveliness: Subscriber<()>,
    _sponsor: Queryable<()>,
    _decline: Queryable<()>,
    _owns: Queryable<()>,
    _token: LivelinessToken,
}

impl Fabric {
    /// Declares participant `peer` (the link's current one) on the fabric and opens its door:
    /// subscribers and queryables first, so the sponsor's first messages find it listening;
    /// the token last, so every node with a token has a door.
    pub(super) fn begin(&self, peer: Peer) -> std::result::Result<Life, String> {
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
            let link = self.link.clone();
            answer(zenoh, sponsor_key(&self.name, peer.incarnation), "no participant", move |newcomer: Peer| {
                sponsor(&link, peer, newcomer).map(|door| postcard::to_allocvec(&door).unwrap_or_default())
            })?
        };
        let decline = {
            let link = self.link.clone();
            answer(zenoh, decline_key(&self.name, peer.incarnation), "no move", move |(from, id): (Peer, MoveId)| {
                // Refused when resolved already (taken over, or declined before), or when this
                // life is over: fine.
                Ok(vec![u8::from(link.peer() == peer && link.decline(from, id))])
            })?
        };
        let owns = {
            let owns_move = self.owns_move.clone();
            let key = owns_key(&self.name, peer.incarnation);
            answer(zenoh, key, "no move", move |(to, id, proof): (Peer, MoveId, MoveProof)| {
                Ok(vec![u8::from(owns_move(to, id, &proof))])
            })?
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
            _owns: owns,
            _token: token,
        })
    }
}

/// Declares a queryable on `key` that answers a query carrying a `T` (postcard) with what
/// `respond` makes of it, or an error naming `what` the query lacks. Only a query on this very
/// key is answered: a wildcard one (`stampede/**`) passes the access control of the mesh's keys
/// (docs/SECURITY.md).
fn answer<T: serde::de::DeserializeOwned>(
    zenoh: &zenoh::Session,
    key: String,
    what: &'static str,
    respond: impl Fn(T) -> std::result::Result<Vec<u8>, String> + Send + Sync + 'static,
) -> std::result::Result<Queryable<()>, String> {
    zenoh
        .declare_queryable(key.clone())
        .callback(move |query| {
            if query.key_expr().as_str() != key {
                return;
            }
            let asked = query.payload().and_then(|p| postcard::from_bytes::<T>(&p.to_bytes()).ok());
            let answer = asked.ok_or_else(|| format!("the query names {what}")).and_then(&respond);
            let _ = match answer {
                Ok(bytes) => query.reply(query.key_expr().clone(), bytes).wait(),
                Err(reason) => query.reply_err(reason).wait(),
            };
        })
        .wait()
        .map_err(|e| format!("zenoh refused the mesh's declarations: {e}"))
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
