//! The client's side of the no-lost-items rule (`docs/NODES.md`): when the reply to a get that
//! may have taken an item never comes, even to its retry, the client ends its session — its
//! liveliness token goes, so a real node would release whatever the lost reply carried — and
//! says so on later calls.
//!
//! The node here is a fake on raw zenoh that answers everything but drops the query of a get
//! without replying, the retry's too (zenoh then ends the query at once: a lost reply without a
//! timeout to wait).

mod support;

use std::sync::mpsc;
use std::time::Duration;

use stampede::connect;
use stampede::{Error, Limits, OLDEST_UNSEEN};
use stampede_wire::{decode_request, encode, ContainerInfo, Hello, Reply, Request, WireRetention};
use support::with_watchdog;
use zenoh::sample::SampleKind;
use zenoh::Wait;

/// A get whose reply is lost fails `Unreachable`, withdraws the session's token, and every later
/// call fails `Unreachable` naming the lost reply.
#[test]
fn lost_get_reply_ends_the_session() {
    with_watchdog("lost_get_reply_ends_the_session", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = format!("unixsock-stream/{}", dir.path().join("fake.sock").display());
        let mut config = zenoh::Config::default();
        config.insert_json5("mode", "\"router\"").unwrap();
        config.insert_json5("scouting/multicast/enabled", "false").unwrap();
        config.insert_json5("listen/endpoints", &format!("[\"{endpoint}\"]")).unwrap();
        let fake = zenoh::open(config).wait().unwrap();
        let zid = fake.zid().to_string();
        let _queryable = fake
            .declare_queryable("stampede/fake/rpc")
            .callback(move |query| {
                let message = query.payload().map(|p| p.to_bytes().into_owned()).unwrap_or_default();
                let Ok((header, _)) = decode_request(&message) else { return };
                let reply = match header.request {
                    Request::Hello => Reply::Hello(Hello {
                        node: "fake".into(),
                        zid: zid.clone(),
                        liveliness_timeout_ms: 10_000,
                        payload_bytes_max: 1 << 20,
                        wait_slice_ms: 1_000,
                        mesh: None,
                        direct: Default::default(),
                    }),
                    Request::CreateChannel { name, .. } => Reply::Container(ContainerInfo {
                        id: 1,
                        queue: false,
                        name,
                        capacity: None,
                        bytes_max: None,
                        retention: WireRetention::History,
                        codec: None,
                        description: String::new(),
                    }),
                    Request::Open { .. } => Reply::Opened([1; 16]),
                    Request::Task { .. } | Request::AttachInput { .. } => Reply::Handle(2),
                    Request::Get { .. } => return, // the lost reply
                    _ => Reply::Done,
                };
                let _ = query.reply(query.key_expr().clone(), encode(&reply)).wait();
            })
            .wait()
            .unwrap();
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
        let inp = task.attach_input(&ch).unwrap();
        let lost = inp.get(OLDEST_UNSEEN, Some(Duration::from_secs(20)));
        assert!(matches!(lost, Err(Error::Unreachable { .. })), "{lost:?}");
        let key = token_gone.recv_timeout(Duration::from_secs(30)).expect("the session's token was withdrawn");
        assert!(key.starts_with("stampede/fake/session/"), "{key}");
        match rt.names("") {
            Err(Error::Unreachable { reason, .. }) => assert!(reason.contains("a reply to get was lost"), "{reason}"),
            other => panic!("expected Unreachable after the session ended, got {other:?}"),
        }
        rt.close();
        fake.close().wait().unwrap();
    });
}
