//! The simulated node: one incarnation of a node's engine and desk, serving request messages
//! with the node's own code — the wire codec, the desk's rules (which session, at most once) and
//! the engine's operations (`serve::execute::on_engine`) — and nothing of its fabric.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use stampede_core::{Error, Op, Result};
use stampede_engine::{Body, Runtime};
use stampede_wire::{decode_request, encode, Reply, Request, Secret, WireError};

use crate::desk::{Admitted, Desk};
use crate::serve::execute::on_engine;
use crate::serve::Served;
use crate::session::Session;

/// Bounds of a simulated node's sessions (small, so that they are reached).
const SESSIONS_MAX: usize = 16;
const SESSION_HANDLES_MAX: usize = 16;
const PAYLOAD_BYTES_MAX: usize = 1 << 16;

/// One incarnation of the node.
pub(super) struct SimNode {
    pub(super) incarnation: u32,
    pub(super) runtime: Runtime,
    pub(super) desk: Desk,
    /// Drives the engine's futures: every op the simulation sends waits 0, so each is ready at
    /// its first poll (a timer is never armed); the context is there for the engine's calls
    /// that look for one.
    tokio: tokio::runtime::Runtime,
}

/// What serving one request message did, beside its reply.
pub(super) struct Served1 {
    pub(super) reply: Vec<u8>,
    /// The session a request of an open session ran in, if it ran.
    pub(super) ran_in: Option<String>,
    /// The session `Open` listed.
    pub(super) opened: Option<String>,
}

impl SimNode {
    pub(super) fn new(incarnation: u32) -> SimNode {
        let tokio = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a tokio runtime");
        SimNode { incarnation, runtime: Runtime::new(), desk: Desk::new("sim", SESSIONS_MAX), tokio }
    }

    /// Serves one request message; `secret` is what an `Open` hands out.
    pub(super) fn serve(&self, message: &[u8], secret: Secret) -> Served1 {
        let mut ran_in = None;
        let mut opened = None;
        let served = self.respond(message, secret, &mut ran_in, &mut opened);
        let (reply, payloads) = served.unwrap_or_else(|e| (Reply::Error(WireError::from(&e)), Vec::new()));
        let mut bytes = encode(&reply);
        for payload in payloads {
            bytes.extend_from_slice(&payload);
        }
        Served1 { reply: bytes, ran_in, opened }
    }

    fn respond(
        &self,
        message: &[u8],
        secret: Secret,
        ran_in: &mut Option<String>,
        opened: &mut Option<String>,
    ) -> Result<Served> {
        let refuse = |reason: String| Error::InvalidArgument { op: "request", name: "sim".into(), reason };
        let (header, payload) = decode_request(message).map_err(|e| refuse(e.to_string()))?;
        match header.request {
            Request::Hello => Err(refuse("the simulation sends no hello".into())),
            Request::Open { .. } => {
                let id = header.session.clone();
                self.desk
                    .open(&id, || Ok(Session::new(id.clone(), SESSION_HANDLES_MAX, PAYLOAD_BYTES_MAX, secret, None)))?;
                *opened = Some(id);
                Ok((Reply::Opened(secret), Vec::new()))
            }
            Request::Close => {
                let session = self.desk.get(&header.session);
                if session.is_some_and(|s| crate::access::same_secret(&s.secret, &header.secret)) {
                    self.desk.close(&header.session);
                }
                Ok((Reply::Outcome(stampede_core::Outcome::Done), Vec::new()))
            }
            Request::Op(op) => {
                match self.desk.admit(&header.session, &header.secret, header.seq, header.floor, &header.acks)? {
                    Admitted::Run(session) => {
                        *ran_in = Some(session.id.clone());
                        let served = self.run(&session, op, Body::Inline(payload));
                        let served = served.unwrap_or_else(|e| (Reply::Error(WireError::from(&e)), Vec::new()));
                        self.desk.answered(&session, header.seq, &served);
                        Ok(served)
                    }
                    Admitted::Answered(served) => Ok(served),
                    // Every op is ready at its first poll: a repeat never finds its first under way.
                    Admitted::Wait => Err(refuse("a repeat found its first run under way".into())),
                    Admitted::Forgotten => {
                        self.desk.close(&header.session);
                        Err(crate::session::closed(&header.session))
                    }
                }
            }
        }
    }

    /// Runs `op` on the engine as the node does, to its end at the first poll.
    fn run(&self, session: &Arc<Session>, op: Op, body: Body<'_>) -> Result<Served> {
        let _context = self.tokio.enter();
        let future = std::pin::pin!(on_engine(&self.runtime, &self.desk, session, op, body));
        match future.poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(outcome) => outcome.map(|(outcome, payloads)| (Reply::Outcome(outcome), payloads)),
            Poll::Pending => panic!("an operation that waits 0 did not end at its first poll"),
        }
    }
}

impl Drop for SimNode {
    fn drop(&mut self) {
        self.desk.close_all();
    }
}

/// The payloads of a reply message, after its header (as the client reads them).
pub(super) fn reply_of(message: &[u8]) -> std::result::Result<(Reply, Bytes), String> {
    let (reply, payload) = stampede_wire::decode_reply(message).map_err(|e| e.to_string())?;
    Ok((reply, Bytes::copy_from_slice(payload)))
}
