//! The node's front desk: its clients' sessions, and the session protocol's rules applied to each
//! request before it runs — which live session it belongs to (its secret proves the sender),
//! the replies the client acknowledged forgotten, a numbered request run at most once and a late
//! copy of one the client concluded never run (`stampede_wire::session::Replies`), what a get the
//! client released took given back (`release.rs`), and the bound on sessions.
//!
//! Sans-IO: no fabric, no clock, no waiting. The node's request handler (`serve.rs`) does the
//! I/O around it, and the whole-path simulation (`sim/`, tests) drives the same desk through
//! in-memory links on a virtual clock.
//!
//! **Guarantees.** A request is served only for a listed session that is not being ended and
//! whose secret it carries (a wrong secret reads as no session: the id is public). A numbered
//! request runs once; a repeat gets the first reply ([`Admitted::Answered`]), even after the
//! session's other requests ran. A session being ended serves nothing more, not even a repeat
//! from its kept replies: what such a reply carried is going back. At most `sessions_max`
//! sessions are listed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use stampede_core::mesh::MoveId;
use stampede_core::mutation::Switch;
use stampede_core::{Error, MoveProof, Peer, Result};
use stampede_wire::session::{Mutation, Turn};
use stampede_wire::{fabric, Secret};

use crate::access;
use crate::release::Taking;
use crate::serve::Served;
use crate::session::{self, Move, Session};

/// The node's sessions, by id.
pub(crate) struct Desk {
    /// The node's name, in errors.
    node: String,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    sessions_max: usize,
    mutation: Switch<Mutation>,
}

/// The numbers a request's header carries for the session protocol beside its own.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Numbers<'a> {
    /// Requests the client released (`RequestHeader::released`).
    pub(crate) released: &'a [u64],
    /// The client's floor (`RequestHeader::floor`).
    pub(crate) floor: u64,
    /// Replies the client read (`RequestHeader::acks`).
    pub(crate) acks: &'a [u64],
}

/// What to do with a request of an open session.
pub(crate) enum Admitted {
    /// Run it in `session`, then [`Desk::answered`].
    Run(Arc<Session>),
    /// A repeat of a request answered: this is its first reply.
    Answered(Served),
    /// A repeat of a request still under way: ask again once it may have ended.
    Wait,
    /// A repeat of a request the session forgot (past `REPLIES_KEPT_MAX`): it may have run and
    /// taken what nobody will see, so the session ends ([`Desk::close`]) and the request fails
    /// `Closed`.
    Forgotten,
}

impl Desk {
    pub(crate) fn new(node: &str, sessions_max: usize) -> Desk {
        debug_assert!(sessions_max > 0);
        Desk { node: node.to_owned(), sessions: Mutex::default(), sessions_max, mutation: Switch::default() }
    }

    /// Switches `mutation` on (the whole-path simulation's checks of its checker only).
    #[cfg(all(test, feature = "mutations"))]
    pub(crate) fn mutate(&mut self, mutation: Mutation) {
        self.mutation.set(mutation);
    }

    /// The node's name.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// The live session `id`, if `secret` is its secret.
    pub(crate) fn proven(&self, id: &str, secret: &Secret) -> Option<Arc<Session>> {
        let session = self.sessions.lock().get(id).cloned();
        session.filter(|s| access::same_secret(&s.secret, secret) && !s.ended())
    }

    /// Admits an operation of session `id` numbered `seq` (0: not numbered), whose header
    /// carries `secret`, the requests the client `released` (what they took is given back
    /// first), the client's `floor` and acknowledges the replies `acks` (all taken in first):
    /// `Closed` unless it comes from a live session of this node; `InvalidArgument`, not run, for
    /// a late copy of a request the client concluded.
    pub(crate) fn admit(&self, id: &str, secret: &Secret, seq: u64, header: Numbers<'_>) -> Result<Admitted> {
        let session = self.proven(id, secret).ok_or_else(|| session::closed(id))?;
        let (turn, given) = {
            let mut replies = session.replies.lock();
            let given: Vec<_> = header.released.iter().filter_map(|&seq| replies.release(seq)?.1).collect();
            replies.advance(header.floor);
            replies.acknowledge(header.acks);
            let turn = match seq {
                0 => Turn::Run,
                seq => replies.turn(seq),
            };
            (turn, given)
        };
        for given in &given {
            session.give_back(given);
        }
        Ok(match turn {
            Turn::Run => Admitted::Run(session),
            Turn::Answered((served, _)) => Admitted::Answered(served),
            Turn::Wait => Admitted::Wait,
            Turn::Forgotten => Admitted::Forgotten,
            Turn::Stale => {
                let reason = format!(
                    "request #{seq} of this session was answered and its call ended: a late copy of it is not run \
                     again (docs/NODES.md, \"Requests at most once\")"
                );
                return Err(Error::InvalidArgument { op: "request", name: self.node.clone(), reason });
            }
        })
    }

    /// Request `seq` of `session` (0: not numbered), `taking` what it may give out, ran and got
    /// `served`: kept for its repeats, or — released while it ran — what it gave out given back.
    pub(crate) fn answered(&self, session: &Session, seq: u64, taking: Taking, served: &Served) {
        if seq == 0 {
            return;
        }
        let given = taking.given(served);
        let released = session.replies.lock().answered(seq, (served.clone(), given));
        if let Some((_, Some(given))) = released {
            session.give_back(&given);
        }
    }

    /// Request `seq` of `session` stopped before its reply (the node closing): a repeat runs it.
    pub(crate) fn abandoned(&self, session: &Session, seq: u64) {
        if seq != 0 {
            session.replies.lock().abandoned(seq);
        }
    }

    /// Lists the session `id`, which `make` makes once the id is known to be free and within the
    /// bound: `InvalidArgument` for an id that is not a session id, one open already, or past
    /// `sessions_max`.
    pub(crate) fn open(&self, id: &str, make: impl FnOnce() -> Result<Session>) -> Result<Arc<Session>> {
        let refuse = |reason: String| Error::InvalidArgument { op: "connect", name: self.node.clone(), reason };
        if !fabric::is_session_id(id) {
            return Err(refuse(format!("{id:?} is not a session id (lowercase hex, a zenoh id)")));
        }
        let mut sessions = self.sessions.lock();
        if sessions.contains_key(id) {
            return Err(refuse("this session is open already (a client opens its session once)".into()));
        }
        if sessions.len() >= self.sessions_max {
            return Err(refuse(format!(
                "the node serves {} sessions, its sessions_max; close a client or raise the bound",
                sessions.len()
            )));
        }
        let session = Arc::new(make()?);
        sessions.insert(id.to_owned(), session.clone());
        debug_assert!(sessions.len() <= self.sessions_max);
        Ok(session)
    }

    /// The session a `Close` of session `id` proving `secret` ends, if it is listed (`None`:
    /// closed already, the close succeeds). `Closed` for a wrong secret: the id is public.
    pub(crate) fn closing(&self, id: &str, secret: &Secret) -> Result<Option<Arc<Session>>> {
        match self.get(id) {
            Some(session) if !access::same_secret(&session.secret, secret) => Err(session::closed(id)),
            listed => Ok(listed),
        }
    }

    /// The session `id` if listed (live or being ended).
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.lock().get(id).cloned()
    }

    /// Ends the session `id`, if listed: its tasks are closed (claims released, open items
    /// back), its connections detached, and it is no longer listed. It is closed while still
    /// listed, so that the items its closing reclaims reach its outbox. Returns its moves to
    /// other nodes, for the caller to decline those still open; `None` if it was not listed.
    pub(crate) fn close(&self, id: &str) -> Option<Vec<Move>> {
        let session = self.get(id)?;
        let mut moves = session.close();
        self.sessions.lock().remove(id);
        if self.mutation.is(Mutation::DeclineOthersMoves) {
            moves.extend(self.sessions().iter().flat_map(|other| other.moves()));
        }
        Some(moves)
    }

    /// Ends every session (the node stops serving).
    pub(crate) fn close_all(&self) {
        let sessions: Vec<_> = self.sessions.lock().drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.close();
        }
    }

    /// Whether one of the sessions made the move `id` to `to` with `proof` (what a takeover on
    /// `to` presents).
    pub(crate) fn owns_move(&self, to: Peer, id: MoveId, proof: &MoveProof) -> bool {
        self.sessions().iter().any(|session| session.owns_move(to, id, proof))
    }

    /// Every listed session, for the caller to look at outside the desk's lock.
    pub(crate) fn sessions(&self) -> Vec<Arc<Session>> {
        self.sessions.lock().values().cloned().collect()
    }

    /// How many sessions are listed.
    pub(crate) fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    /// `home`, another node, was declared dead here: every session closes its shadows of tasks
    /// of `home` at `until` (the reply hold: `Session::close_shadows_of`).
    pub(crate) fn close_shadows_of(&self, home: Peer, until: Duration) {
        for session in self.sessions() {
            session.close_shadows_of(home, until);
        }
    }

    /// This node was expelled from its mesh: every session keeps its own tasks and loses its
    /// moves, and its shadows at `until` ([`Session::leave_mesh`]).
    pub(crate) fn leave_mesh(&self, until: Duration) {
        for session in self.sessions() {
            session.leave_mesh(until);
        }
    }

    /// Closes the shadows whose reply hold ended by `now` ([`Session::settle`]).
    pub(crate) fn settle(&self, now: Duration) {
        for session in self.sessions() {
            session.settle(now);
        }
    }
}
