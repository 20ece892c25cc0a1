//! The client's side of the no-lost-items rule (`docs/NODES.md`): when the reply to a request that
//! may have taken something never comes, even to its retry, the client ends its session — its
//! liveliness token goes, so a real node would release whatever the lost reply carried — and
//! says so on later calls; a get is released instead (its number rides on the next header, the
//! node gives back what it took) and its session lives on. A get given a timeout returns by the
//! timeout plus the grace, whatever the node does.
//!
//! The node here is a fake on raw zenoh that answers everything but drops the query of a get
//! without replying, the retry's too (zenoh then ends the query at once: a lost reply without a
//! timeout to wait).

mod support;

use std::sync::mpsc;
use std::time::Duration;

use stampede::connect;
use stampede::Retention;
use stampede::{Error, Limits};
use stampede_wire::{
    decode_request, encode, ContainerInfo, Hello, ItemHeader, Op, Outcome, Reply, Request, RequestHeader,
};
use support::with_watchdog;
use zenoh::sample::SampleKind;
use zenoh::Wait;

/// The fake's queryable: its queries, decoded, go to `respond` with the fake's zenoh id.
type Queryable = zenoh::query::Queryable<()>;

/// A fake node named `fake` on raw zenoh, a router listening on `endpoint`: each request, decoded,
/// goes to `respond` (with the query, which it answers, drops — zenoh then ends the query at once —
/// or keeps unanswered).
fn fake_node(
    endpoint: &str,
    respond: impl Fn(zenoh::query::Query, Request, &str) + Send + Sync + 'static,
) -> (zenoh::Session, Queryable) {
    fake_node_headers(endpoint, move |query, header, zid| respond(query, header.request, zid))
}

/// [`fake_node`] whose `respond` sees each request's whole header.
fn fake_node_headers(
    endpoint: &str,
    respond: impl Fn(zenoh::query::Query, RequestHeader, &str) + Send + Sync + 'static,
) -> (zenoh::Session, Queryable) {
    let mut config = zenoh::Config::default();
    config.insert_json5("mode", "\"router\"").unwrap();
    config.insert_json5("scouting/multicast/enabled", "false").unwrap();
    config.insert_json5("listen/endpoints", &format!("[\"{endpoint}\"]")).unwrap();
    let fake = zenoh::open(config).wait().unwrap();
    let zid = fake.zid().to_string();
    let queryable = fake
        .declare_queryable("stampede/fake/rpc")
        .callback(move |query| {
            let message = query.payload().map(|p| p.to_bytes().into_owned()).unwrap_or_default();
            let Ok((header, _)) = decode_request(&message) else { return };
            respond(query, header, &zid);
        })
        .wait()
        .unwrap();
    (fake, queryable)
}

/// The fake's hello, with its liveliness timeout (the session's lease).
fn hello(zid: &str, liveliness_timeout_ms: u64) -> Reply {
    Reply::Hello(Hello {
        node: "fake".into(),
        zid: zid.to_owned(),
        liveliness_timeout_ms,
        payload_bytes_max: 1 << 20,
        wait_slice_ms: 1_000,
        mesh: None,
        direct: Default::default(),
    })
}

/// The fake's channel (or `queue`) `name`, id 1, unbounded.
fn container(name: String, queue: bool) -> Reply {
    Reply::Outcome(Outcome::Container(ContainerInfo {
        id: 1,
        queue,
        name,
        capacity: None,
        bytes_max: None,
        retention: Retention::History,
        codec: None,
        description: String::new(),
    }))
}

/// A node that says hello and then never answers `Open`: `connect` fails `Unreachable` when its
/// timeout is up — not after the node's liveliness timeout plus the reply margin (15 s here).
/// The watchdog (4× the timeout) only catches a call that does not return.
#[test]
fn connect_returns_by_its_timeout_when_the_node_never_opens_the_session() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let holding = held.clone();
    let (fake, _queryable) = fake_node(&endpoint, move |query, request, zid| match request {
        Request::Hello => {
            let _ = query.reply(query.key_expr().clone(), encode(&hello(zid, 10_000))).wait();
        }
        // Kept unanswered as long as the fake lives.
        _ => holding.lock().unwrap().push(query),
    });
    let test = "connect_returns_by_its_timeout_when_the_node_never_opens_the_session";
    let e = support::with_watchdog_for(
        test,
        TIMEOUT * 4,
        || {},
        || connect(&endpoint, Some(TIMEOUT)).map(drop).unwrap_err(),
    );
    assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    assert!(!held.lock().unwrap().is_empty(), "the fake held the session's Open");
    fake.close().wait().unwrap();
}

/// An attach whose reply is lost fails `Unreachable`, withdraws the session's token (the node gives
/// back the connection it may have made with the session), and every later call fails
/// `Unreachable` naming the lost reply.
#[test]
fn lost_attach_reply_ends_the_session() {
    with_watchdog("lost_attach_reply_ends_the_session", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
        let (fake, _queryable) = fake_node(&endpoint, |query, request, zid| {
            let reply = match request {
                Request::Hello => hello(zid, 10_000),
                Request::Op(Op::CreateChannel { name, .. }) => container(name, false),
                Request::Open { .. } => Reply::Opened([1; 16]),
                Request::Op(Op::Task { .. }) => Reply::Outcome(Outcome::Handle(2)),
                Request::Op(Op::AttachInput { .. }) => return, // the lost reply
                _ => Reply::Outcome(Outcome::Done),
            };
            let _ = query.reply(query.key_expr().clone(), encode(&reply)).wait();
        });
        let (gone, token_gone) = mpsc::channel();
        let _tokens = fake
            .liveliness()
            .declare_subscriber("stampede/fake/session/*")
            .callback(move |sample| {
                if sample.kind() == SampleKind::Delete {
                    let _ = gone.send(sample.key_expr().to_string());
                }
            })
            .wait()
            .unwrap();

        let rt = connect(&endpoint, Some(Duration::from_secs(20))).unwrap();
        let ch = rt.create_channel("frames", Limits::unbounded()).unwrap();
        let task = rt.task(0).unwrap();
        let lost = task.attach_input(&ch).map(drop);
        assert!(matches!(lost, Err(Error::Unreachable { .. })), "{lost:?}");
        let key = token_gone.recv_timeout(Duration::from_secs(30)).expect("the session's token was withdrawn");
        assert!(key.starts_with("stampede/fake/session/"), "{key}");
        match rt.names("") {
            Err(Error::Unreachable { reason, .. }) => {
                assert!(reason.contains("a reply to attach_input was lost"), "{reason}")
            }
            other => panic!("expected Unreachable after the session ended, got {other:?}"),
        }
        rt.close();
        fake.close().wait().unwrap();
    });
}

/// A fake node with the session's lease `lease_ms` that holds every queue get unanswered as long
/// as it lives (the numbers of those it held in the list returned), answers `names` saying which
/// gets the request's header released (on the channel returned), and everything else as a node
/// would.
#[allow(clippy::type_complexity)]
fn holding_gets(
    endpoint: &str,
    lease_ms: u64,
) -> (
    zenoh::Session,
    Queryable,
    std::sync::Arc<std::sync::Mutex<Vec<(u64, zenoh::query::Query)>>>,
    mpsc::Receiver<Vec<u64>>,
) {
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (holding, (released, said)) = (held.clone(), mpsc::channel());
    let (fake, queryable) = fake_node_headers(endpoint, move |query, header, zid| {
        let reply = match header.request {
            Request::Hello => hello(zid, lease_ms),
            Request::Open { .. } => Reply::Opened([1; 16]),
            Request::Op(Op::Task { .. }) | Request::Op(Op::AttachInput { .. }) => Reply::Outcome(Outcome::Handle(2)),
            Request::Op(Op::CreateQueue { name, .. }) => container(name, true),
            Request::Op(Op::QueueGet { .. }) => return holding.lock().unwrap().push((header.seq, query)),
            Request::Op(Op::Names { .. }) => {
                let _ = released.send(header.released);
                Reply::Outcome(Outcome::Names(vec!["jobs".into()]))
            }
            _ => Reply::Outcome(Outcome::Done),
        };
        let _ = query.reply(query.key_expr().clone(), encode(&reply)).wait();
    });
    (fake, queryable, held, said)
}

/// A client of the fake on zenoh alone, with an input connection to its queue `jobs`.
fn queue_client(endpoint: &str) -> (stampede::Runtime, stampede::QueueInput) {
    let options = stampede::ConnectOptions {
        timeout: Some(Duration::from_secs(20)),
        zenoh_only: true,
        ..stampede::ConnectOptions::default()
    };
    let rt = stampede::connect_with(endpoint, &options).unwrap();
    let jobs = rt.create_queue("jobs", Limits::unbounded()).unwrap();
    let input = rt.task(stampede::INFINITY).unwrap().attach_input(&jobs).unwrap();
    (rt, input)
}

/// A get whose first try has no reply within its deadline is not sent again: the deadline of a
/// request that may hold something on the node runs from its first send, not from a retry's, so
/// a retry could only bring a reply too late to take (the node may be ending the session by then).
/// The call fails `Unreachable` and the node saw the get once. (Timed from each try, the client
/// sent it again half a lease later and took a reply read a whole lease after the first send.)
#[test]
fn a_get_whose_reply_missed_its_deadline_is_not_sent_again() {
    with_watchdog("a_get_whose_reply_missed_its_deadline_is_not_sent_again", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
        let (fake, _queryable, held, _) = holding_gets(&endpoint, 2_000);
        let (rt, input) = queue_client(&endpoint);
        let missed = input.get(Some(Duration::from_secs(20)));
        assert!(matches!(missed, Err(Error::Unreachable { .. })), "{missed:?}");
        assert_eq!(held.lock().unwrap().len(), 1, "the get was sent once, not retried past its deadline");
        rt.close();
        fake.close().wait().unwrap();
    });
}

/// A get whose node never answers it (a cut link: the request is held, no reply, no word) returns
/// `Unreachable` by its timeout plus the grace — the watchdog, at 4× the timeout, catches the
/// 1.5 s (half the lease) it used to wait — and the session lives on: the next request's header
/// carries the get's number as released, so that the node gives back what the get took.
#[test]
fn a_get_never_answered_returns_by_its_timeout_and_is_released() {
    const TIMEOUT: Duration = Duration::from_millis(300);
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
    let (fake, _queryable, held, said) = holding_gets(&endpoint, 3_000);
    let (rt, input) = queue_client(&endpoint);
    let test = "a_get_never_answered_returns_by_its_timeout_and_is_released";
    let missed = support::with_watchdog_for(test, TIMEOUT * 4, || {}, || input.get(Some(TIMEOUT)).map(drop));
    match missed {
        Err(Error::Unreachable { reason, .. }) => assert!(reason.contains("given back"), "{reason}"),
        other => panic!("expected Unreachable, got {other:?}"),
    }
    let seq = held.lock().unwrap().first().map(|(seq, _)| *seq).expect("the fake held the get");
    assert_eq!(rt.names("").unwrap(), vec!["jobs".to_owned()], "the session lives on");
    let carried = said.recv_timeout(Duration::from_secs(10)).expect("the next request reached the fake");
    assert_eq!(carried, vec![seq], "the next header carries the get's number as released");
    rt.close();
    fake.close().wait().unwrap();
}

/// A get made after a consume sent without waiting (a send) that the node never answers — a link
/// cut just after it — returns by its timeout plus the grace too: the client waits for its sends
/// to be applied before a call only until the call's bound, then fails the call `Unreachable`
/// without sending it. The watchdog, at 4× the timeout, catches the 5 s (`QUERY_MARGIN`) the
/// wait for the send used to take.
#[test]
fn a_call_after_a_send_never_answered_returns_by_its_timeout() {
    const TIMEOUT: Duration = Duration::from_millis(300);
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let holding = held.clone();
    let (fake, _queryable) = fake_node(&endpoint, move |query, request, zid| {
        let reply = match request {
            Request::Hello => hello(zid, 3_000),
            Request::Open { .. } => Reply::Opened([1; 16]),
            Request::Op(Op::Task { .. }) | Request::Op(Op::AttachInput { .. }) => Reply::Outcome(Outcome::Handle(2)),
            Request::Op(Op::CreateChannel { name, .. }) => container(name, false),
            Request::Op(Op::Get { .. }) => {
                Reply::Outcome(Outcome::Item(ItemHeader { ts: 1, codec: "raw".into(), len: 0 }))
            }
            // The consume's send: held unanswered as long as the fake lives.
            Request::Op(Op::Consume { .. }) => return holding.lock().unwrap().push(query),
            _ => Reply::Outcome(Outcome::Done),
        };
        let _ = query.reply(query.key_expr().clone(), encode(&reply)).wait();
    });
    let options = stampede::ConnectOptions {
        timeout: Some(Duration::from_secs(20)),
        zenoh_only: true,
        ..stampede::ConnectOptions::default()
    };
    let rt = stampede::connect_with(&endpoint, &options).unwrap();
    let frames = rt.create_channel("frames", Limits::unbounded()).unwrap();
    let input = rt.task(0).unwrap().attach_input(&frames).unwrap();
    assert_eq!(input.get(stampede::OLDEST_UNSEEN, Some(TIMEOUT)).unwrap().ts, 1);
    input.consume(1).unwrap();
    let test = "a_call_after_a_send_never_answered_returns_by_its_timeout";
    let next = support::with_watchdog_for(
        test,
        TIMEOUT * 4,
        || {},
        || input.get(stampede::OLDEST_UNSEEN, Some(TIMEOUT)).map(drop),
    );
    // The same for its async form, on a runtime of the caller's (the send is still unanswered).
    let next_async = support::with_watchdog_for(
        test,
        TIMEOUT * 4,
        || {},
        || {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
            runtime.block_on(input.get_async(stampede::OLDEST_UNSEEN, Some(TIMEOUT))).map(drop)
        },
    );
    for next in [next, next_async] {
        match next {
            Err(Error::Unreachable { reason, .. }) => assert!(reason.contains("without waiting"), "{reason}"),
            other => panic!("expected Unreachable, got {other:?}"),
        }
    }
    assert_eq!(held.lock().unwrap().len(), 1, "the fake held the consume");
    rt.close();
    fake.close().wait().unwrap();
}
