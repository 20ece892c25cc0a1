//! One request and its reply: numbering (requests at most once), retries of a lost reply, the
//! exchange on the direct path or as a zenoh query, and the rule that decides what a reply means.
//!
//! A request that may hold something on the node is answered only within its deadline and
//! `LEASE_SHARE` of the lease, and while the session lives; else the call fails and the session
//! ends, so whatever the reply carried stays with the node (see the module doc of `client`).

use crate::trace::{self, Kind};
use std::borrow::Cow;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::{Error, Result};
use bytes::Bytes;
use zenoh::bytes::ZBytes;
use zenoh::query::ConsolidationMode;
use zenoh::Wait;

use crate::remote::direct::Direct;
use crate::remote::runtime::unexpected;
use crate::remote::{CLIENT_CLOSED, REPLY_LATE};
use stampede_wire::{
    decode_reply, decode_reply_passed, encode, Handle, Op, Outcome, Reply, Request, RequestHeader, WireOutcome,
};

use super::{blocking, Client};
use stampede_wire::session::{Answer, Call, Reports, Standing, Verdict, REPLY_GRACE};

/// What one try of a request brings: its reply (with the payload that follows it), or why none
/// came in time.
type Exchange = std::result::Result<(Reply, Bytes), String>;

impl Client {
    /// The header of a try of `call` (`None`: of a request no reply is waited for — a send, an
    /// open, a close), as the session protocol builds it: acknowledging the replies read since
    /// the last header said so, with the session's floor (its lowest call under way), the
    /// answers its prefetch caches gave and the consumes it deferred that no outcome confirmed
    /// yet (`push.rs`, `consumes.rs`).
    pub(super) fn header(&self, call: Option<&mut Call>, request: Request) -> RequestHeader {
        let secret = self.secret.get().copied().unwrap_or_default();
        let reports =
            Reports { opened: self.pending_opened(), consumed: self.carried_consumes(), ..Reports::default() };
        // Every header built is sent once (a try, a send, an open or a close).
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.protocol.lock().header(call, &self.session, secret, request, reports)
    }

    /// A new request, numbered, whose caller's timeout ends `deadline` from now, if it has one
    /// (`stampede_wire::session`'s rule).
    fn start(&self, request: &Request, wait: Duration, deadline: Option<Instant>) -> Call {
        let deadline = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        self.protocol.lock().call(request, wait, deadline)
    }

    /// How long the first try of `call` waits for its reply (`stampede_wire::session`'s rule).
    fn first_try(&self, call: &Call) -> Duration {
        self.protocol.lock().try_timeout(call, Duration::ZERO)
    }

    /// How long the next try of `call` waits for its reply after this try's `answer`, `taken`
    /// after its first send — `None`: the call concludes (`stampede_wire::session`'s rule).
    fn retry(&self, call: &mut Call, answer: &Exchange, taken: Duration) -> Option<Duration> {
        self.protocol.lock().retry(call, answer.is_err(), taken, self.is_closed())
    }

    /// `answer` to `op`, or a lost reply where a test's fault injection says so.
    fn injected(&self, op: &'static str, answer: Exchange) -> Exchange {
        #[cfg(feature = "faults")]
        if answer.is_ok() && self.lose_replies.as_ref().is_some_and(|lose| lose.lose(op)) {
            return Err(format!("the reply to {op} was lost on purpose (a test's fault)"));
        }
        let _ = op;
        answer
    }

    /// One request and its reply (with the payload that follows it). `wait` is how long the node
    /// may wait before answering. The node's errors come back unchanged; fabric trouble is
    /// `Unreachable`, and ends the session if the request may have taken items (a get is
    /// released instead: `stampede_wire::session`).
    pub(crate) fn call(&self, op: Op, payload: Option<Bytes>, wait: Duration) -> Result<(WireOutcome, Bytes)> {
        self.call_until(op, payload, wait, None)
    }

    /// [`call`](Self::call) for a caller whose timeout ends at `deadline` (`None`: none): its
    /// reply is waited for until `REPLY_GRACE` after it at the latest, whatever the node does.
    pub(crate) fn call_until(
        &self,
        op: Op,
        payload: Option<Bytes>,
        wait: Duration,
        deadline: Option<Instant>,
    ) -> Result<(WireOutcome, Bytes)> {
        let name = op.name();
        self.outcome(name, self.call_on(op.into(), payload, wait, self.direct_path(), deadline))
    }

    /// The outcome of the op `name`'s reply; a session-level reply to an op is the node's fault.
    fn outcome(&self, name: &'static str, reply: Result<(Reply, Bytes)>) -> Result<(WireOutcome, Bytes)> {
        match reply? {
            (Reply::Outcome(outcome), payload) => Ok((outcome, payload)),
            _ => Err(unexpected(name, self.node())),
        }
    }

    /// [`call`](Self::call) as a zenoh query, whatever path the session's requests take: the
    /// node serves it after the declarations this client made on zenoh before it (a watch's
    /// subscribers), which a request on the direct path may overtake.
    pub(crate) fn call_after_declarations(&self, op: Op) -> Result<(WireOutcome, Bytes)> {
        let name = op.name();
        self.outcome(name, self.call_on(op.into(), None, Duration::ZERO, None, None))
    }

    /// [`call`](Self::call) on `direct` (`None`: as a zenoh query), for a caller whose timeout
    /// ends at `deadline`, if it has one (a get's, a put's, a connect's): its reply is waited for
    /// until `REPLY_GRACE` after it at the latest.
    pub(super) fn call_on(
        &self,
        request: Request,
        payload: Option<Bytes>,
        wait: Duration,
        direct: Option<&Direct>,
        deadline: Option<Instant>,
    ) -> Result<(Reply, Bytes)> {
        let op = request.op();
        self.check_open(op)?;
        // Sends made before it are applied first, within the call's bound.
        if !blocking(|| self.finish_sends(deadline.map(|d| d + REPLY_GRACE))) {
            return Err(self.sends_unanswered(op));
        }
        let (call, answer) = blocking(|| {
            if direct.is_none() {
                self.finish_direct_sends();
            }
            // Numbered and timed from its first send: every try ends by the call's bound.
            let mut call = self.start(&request, wait, deadline);
            let sent = Instant::now();
            let mut timeout = self.first_try(&call);
            let answer = loop {
                // A direct path that just failed is cooling down: this try goes as a zenoh query,
                // after the sends written there.
                let on = direct.filter(|direct| direct.usable());
                if direct.is_some() && on.is_none() {
                    self.finish_direct_sends();
                }
                let answer = self.exchange(&mut call, request.clone(), payload.clone(), timeout, on);
                let answer = (self.injected(op, answer), sent.elapsed());
                match self.retry(&mut call, &answer.0, answer.1) {
                    Some(retry) => timeout = retry,
                    None => break answer,
                }
            };
            (call, answer)
        });
        let dispatch = self.reclaims.lock().clone();
        if let Some(dispatch) = dispatch {
            // The node sent the items this request reclaimed before its reply: run their
            // handlers before the call returns, as embedded.
            dispatch.barrier();
        }
        self.conclude(op, &call, answer)
    }

    /// A call's result from the exchange's (and how long after sending the request it ended),
    /// as the session protocol's [`conclude`](stampede_wire::session::ClientSession::conclude)
    /// decides: the node's error unchanged, fabric trouble as `Unreachable` (ending the session
    /// when the request may have taken items), and the reply of a request that may hold something
    /// on the node only while the session lives and within its deadline — else the call fails
    /// `Closed` and the session ends.
    fn conclude(&self, op: &'static str, call: &Call, (answer, taken): (Exchange, Duration)) -> Result<(Reply, Bytes)> {
        let read = match &answer {
            Ok((Reply::Error(_), _)) => Answer::Error,
            Ok(_) => Answer::Outcome,
            Err(_) => Answer::Lost,
        };
        // What the node applied, by the session protocol's rule (an outcome confirms what the
        // call's first try reported; what is not confirmed rides on).
        if let Some(Reports { opened, consumed, .. }) = call.confirmed(read) {
            self.confirm_opened(opened);
            self.confirm_consumed(consumed);
        }
        let standing = Standing { closed: self.is_closed(), ended: self.ended.lock().is_some() };
        let verdict = self.protocol.lock().conclude(call, read, taken, standing);
        let name = || self.node().to_owned();
        match (verdict, answer) {
            (Verdict::Late, _) => {
                self.end(format!("a reply to {op} was not read within {taken:?} of its request"));
                Err(Error::Closed { name: name(), reason: REPLY_LATE })
            }
            // Closed or ended by another thread meanwhile: the node gave back what the reply
            // carried, or will.
            (Verdict::ClientClosed, _) => Err(Error::Closed { name: name(), reason: CLIENT_CLOSED }),
            (Verdict::SessionEnded, _) => {
                Err(self.check_open(op).err().unwrap_or(Error::Closed { name: name(), reason: CLIENT_CLOSED }))
            }
            (Verdict::Released, _) => {
                let reason = format!(
                    "no reply in time ({taken:?} after the request; the call's timeout plus {REPLY_GRACE:?} at the \
                     most): whatever it took on the node is given back, and the session goes on; try again"
                );
                Err(Error::Unreachable { op, name: name(), reason })
            }
            (_, Ok((Reply::Error(e), _))) => Err(e.into()),
            (_, Ok(reply)) => Ok(reply),
            (verdict, Err(reason)) => {
                if verdict.ends_session() {
                    self.end(format!("a reply to {op} was lost ({reason})"));
                }
                Err(Error::Unreachable { op, name: name(), reason })
            }
        }
    }

    /// [`call_until`](Self::call_until) without blocking a thread.
    pub(crate) async fn call_async(
        &self,
        op: Op,
        payload: Option<Bytes>,
        wait: Duration,
        deadline: Option<Instant>,
    ) -> Result<(WireOutcome, Bytes)> {
        let name = op.name();
        self.outcome(name, self.request_async(op.into(), payload, wait, deadline).await)
    }

    async fn request_async(
        &self,
        request: Request,
        payload: Option<Bytes>,
        wait: Duration,
        deadline: Option<Instant>,
    ) -> Result<(Reply, Bytes)> {
        let op = request.op();
        self.check_open(op)?;
        // A call given a timeout waits for its sends within its bound: a short block at most, in
        // the usual case (their replies came long ago).
        let finished = match deadline {
            Some(deadline) => blocking(|| self.finish_sends(Some(deadline + REPLY_GRACE))),
            None => {
                self.finish_sends_async().await;
                true
            }
        };
        if !finished {
            return Err(self.sends_unanswered(op));
        }
        // Reads replies that came long ago, in the usual case: a short block at most.
        blocking(|| self.finish_direct_sends());
        let mut call = self.start(&request, wait, deadline);
        let sent = Instant::now();
        let mut timeout = self.first_try(&call);
        let answer = loop {
            let answer = self.exchange_async(&mut call, request.clone(), payload.clone(), timeout).await;
            let answer = (self.injected(op, answer), sent.elapsed());
            match self.retry(&mut call, &answer.0, answer.1) {
                Some(next) => timeout = next,
                None => break answer,
            }
        };
        let dispatch = self.reclaims.lock().clone();
        if let Some(dispatch) = dispatch {
            dispatch.barrier_async().await;
        }
        self.conclude(op, &call, answer)
    }

    /// The error of a call `op` not sent because requests sent before it without waiting were
    /// not answered within its bound.
    fn sends_unanswered(&self, op: &'static str) -> Error {
        let reason = format!(
            "requests sent before it without waiting (consumes, drops) were not answered by its timeout plus \
             {REPLY_GRACE:?}: it was not sent, so that it cannot overtake them; try again"
        );
        Error::Unreachable { op, name: self.node().to_owned(), reason }
    }

    /// A request answered by a new handle (a task, a connection).
    pub(crate) fn handle(&self, op: Op) -> Result<Handle> {
        let name = op.name();
        match self.call(op, None, Duration::ZERO)?.0 {
            Outcome::Handle(handle) => Ok(handle),
            _ => Err(unexpected(name, self.node())),
        }
    }

    /// A request answered by `Done`.
    pub(crate) fn done(&self, op: Op) -> Result<()> {
        let name = op.name();
        match self.call(op, None, Duration::ZERO)?.0 {
            Outcome::Done => Ok(()),
            _ => Err(unexpected(name, self.node())),
        }
    }

    /// One try of `call`'s exchange with the node, on `direct` or else as a zenoh query: `Err`
    /// with the reason when no decodable reply came within `timeout`.
    fn exchange(
        &self,
        call: &mut Call,
        request: Request,
        payload: Option<Bytes>,
        timeout: Duration,
        direct: Option<&Direct>,
    ) -> Exchange {
        // In the event log: encoding and decoding are serialisation; the round trip is messaging,
        // or blocking when the node may park the request waiting for an item or a change (a put
        // parked for room, rarer, counts as messaging).
        let waits_for_items = matches!(
            request,
            Request::Op(Op::Get { .. } | Op::QueueGet { .. } | Op::WaitChanged { .. } | Op::WaitProgress { .. })
        );
        let round_trip = if waits_for_items && !call.wait.is_zero() { Kind::Wait } else { Kind::Send };
        let serialise = trace::span(Kind::Serialise, 0, 0, 0);
        let header = self.header(Some(call), request);
        if let Some(direct) = direct {
            let header = encode(&header);
            drop(serialise);
            // A large payload to a node on this host goes as a shared-memory segment.
            let passed = payload.as_ref().and_then(|payload| direct.segment_of(payload));
            let parts: &[&[u8]] = match (&payload, &passed) {
                (Some(payload), None) => &[&header, payload],
                _ => &[&header],
            };
            let bytes = parts.iter().map(|part| part.len() as u64).sum();
            let (message, shared) = {
                let _trip = trace::span(round_trip, 0, 0, bytes);
                direct.exchange_or_cool(parts, passed.as_ref().map(|(d, _)| d.as_fd()), timeout)?
            };
            let _decode = trace::span(Kind::Serialise, 0, 0, message.len() as u64);
            return match shared {
                Some(shared) => {
                    let reply = decode_reply_passed(&message, shared.len())
                        .map_err(|e| format!("the node's reply is unreadable: {e}"))?;
                    Ok((reply, shared))
                }
                None => reply_of(message),
            };
        }
        let query = self.query(header, payload, timeout);
        drop(serialise);
        let reply = {
            let _trip = trace::span(round_trip, 0, 0, 0);
            query.wait().map_err(|e| format!("zenoh refused the query: {e}"))?.recv().ok()
        };
        let _decode = trace::span(Kind::Serialise, 0, 0, 0);
        answer(reply, timeout)
    }

    /// [`exchange`](Self::exchange) without blocking a thread.
    async fn exchange_async(
        &self,
        call: &mut Call,
        request: Request,
        payload: Option<Bytes>,
        timeout: Duration,
    ) -> Exchange {
        let header = self.header(Some(call), request);
        let replies =
            self.query(header, payload, timeout).await.map_err(|e| format!("zenoh refused the query: {e}"))?;
        answer(replies.recv_async().await.ok(), timeout)
    }

    /// The query carrying `header` (and the payload after it), answered within `timeout`.
    pub(super) fn query(
        &self,
        header: RequestHeader,
        payload: Option<Bytes>,
        timeout: Duration,
    ) -> zenoh::session::SessionGetBuilder<'_, '_, zenoh::handlers::DefaultHandler> {
        let mut message = ZBytes::writer();
        message.append(ZBytes::from(encode(&header)));
        if let Some(payload) = payload {
            message.append(ZBytes::from(payload));
        }
        self.zenoh.get(&self.rpc_key).payload(message.finish()).consolidation(ConsolidationMode::None).timeout(timeout)
    }
}

/// The reply a query received (`None`: none within `timeout`), decoded, with its payload.
fn answer(reply: Option<zenoh::query::Reply>, timeout: Duration) -> std::result::Result<(Reply, Bytes), String> {
    let reply = reply.ok_or_else(|| format!("no reply from the node (waited at most {timeout:?})"))?;
    let sample = reply.into_result().map_err(|e| format!("the fabric answered with an error: {e:?}"))?;
    let bytes = match sample.payload().to_bytes() {
        Cow::Owned(bytes) => Bytes::from(bytes),
        Cow::Borrowed(bytes) => Bytes::copy_from_slice(bytes),
    };
    reply_of(bytes)
}

/// A reply message decoded, with its payload (a slice of `bytes`, not a copy).
fn reply_of(bytes: Bytes) -> std::result::Result<(Reply, Bytes), String> {
    let (reply, payload) = decode_reply(&bytes).map_err(|e| format!("the node's reply is unreadable: {e}"))?;
    let payload = bytes.slice_ref(payload);
    Ok((reply, payload))
}
