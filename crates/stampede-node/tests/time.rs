//! Time across hosts (docs/NODES.md): the nodes of a mesh keep one mesh time and one epoch, so
//! pacers made from `Runtime::epoch` on clients of different nodes number the same instant
//! alike — even when a node's clock is off by seconds (a skew injected into its base clock), and
//! after the node the others took their time from goes.

mod support;

use std::time::{Duration, Instant};

use stampede::{Epoch, Pacer, Runtime};
use stampede_node::{Node, NodeOptions};
use support::{eventually, with_watchdog, TestNode, CONNECT_TIMEOUT};

/// A 30 fps camera's tick.
const TICK: Duration = Duration::from_nanos(33_333_333);
/// How far two estimates of the same epoch may be apart: far below one frame, far above a
/// loopback round trip (the estimate's error is half the least one).
const AGREE_NS: i128 = 10_000_000;
/// Longer than two looks at the peers' clocks (`LOOK_EVERY`, 2 s).
const SETTLE: Duration = Duration::from_secs(10);

/// A node named `name` that joins `connect`, its base clock off by `skew`.
fn node(name: &str, connect: Option<&str>, skew: Duration, ahead: bool) -> (Node, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unixsock-stream/{}", dir.path().join("node.sock").display());
    let mut options = NodeOptions::listen(&endpoint);
    options.name = name.into();
    options.connect = connect.into_iter().map(str::to_owned).collect();
    let skew_ns = i64::try_from(skew.as_nanos()).unwrap();
    options.clock_skew_ns = if ahead { skew_ns } else { -skew_ns };
    let node = Node::serve(Runtime::new().engine().unwrap(), options).expect("the node serves");
    (node, endpoint, dir)
}

/// The mesh time since the epoch, ns, that `epoch` says for the instant `now`.
fn since(epoch: &Epoch, now: Instant) -> i128 {
    epoch.since_at(now)
}

fn epoch_of(endpoint: &str) -> Epoch {
    let client = stampede::connect(endpoint, Some(CONNECT_TIMEOUT)).unwrap();
    let epoch = client.epoch().expect("the node's clock is synced once it serves");
    client.close();
    epoch
}

#[test]
fn paced_sources_on_nodes_with_clocks_seconds_apart_number_frames_alike() {
    with_watchdog("paced_sources_on_nodes_with_clocks_seconds_apart_number_frames_alike", || {
        let (a, a_end, _a_dir) = node("a", None, Duration::ZERO, true);
        // Started a second later, 5 s ahead and 3 s behind: founding their own time, or
        // ignoring the offset, would put them 30 and 150 frames apart.
        std::thread::sleep(Duration::from_secs(1));
        let (b, b_end, _b_dir) = node("b", Some(&a_end), Duration::from_secs(5), true);
        let (c, c_end, _c_dir) = node("c", Some(&a_end), Duration::from_secs(3), false);

        // A node that meets its peers takes their time before it serves; one that met nobody
        // yet (the fabric's routes still forming) founds, then follows at its next look.
        let mut epochs = [Epoch::now(); 3];
        let agree = eventually(SETTLE, || {
            epochs = [epoch_of(&a_end), epoch_of(&b_end), epoch_of(&c_end)];
            let now = Instant::now();
            let [sa, sb, sc] = epochs.map(|e| since(&e, now));
            (sa - sb).abs() < AGREE_NS && (sa - sc).abs() < AGREE_NS
        });
        let [sa, sb, sc] = epochs.map(|e| since(&e, Instant::now()));
        assert!(agree, "a {sa} ns, b {sb} ns, c {sc} ns");
        // Well past the first second: b and c took a's epoch, not their own start.
        assert!(sa > 1_000_000_000, "{sa}");

        let pacers = epochs.map(|e| Pacer::since(e, TICK, Duration::ZERO).unwrap());
        let frames = pacers.each_ref().map(Pacer::vt_now);
        assert!(frames.iter().max().unwrap() - frames.iter().min().unwrap() <= 1, "{frames:?}");
        // The same frame is due at the same instant on every host (within the estimate's error).
        let due = pacers.each_ref().map(|p| p.due_at(frames[0] + 3).unwrap());
        let spread = due.iter().max().unwrap().duration_since(*due.iter().min().unwrap());
        assert!(spread < Duration::from_nanos(AGREE_NS as u64), "{spread:?}");

        // The reference goes: b takes over, its time already the mesh's; c follows it.
        drop(a);
        let before = epochs[2];
        // An absence cannot be awaited: b and c agree already, and the looks that follow a's
        // going (every 2 s) must not move their time; the pause lets two happen first.
        std::thread::sleep(SETTLE / 2);
        assert!(
            eventually(SETTLE, || {
                let (eb, ec) = (epoch_of(&b_end), epoch_of(&c_end));
                let now = Instant::now();
                (since(&eb, now) - since(&ec, now)).abs() < AGREE_NS
                    && (since(&ec, now) - since(&before, now)).abs() < AGREE_NS
            }),
            "after a went, b and c keep the mesh's time"
        );
        drop((b, c));
    })
}

#[test]
fn a_node_alone_founds_its_time_and_an_embedded_runtime_has_its_own() {
    with_watchdog("a_node_alone_founds_its_time_and_an_embedded_runtime_has_its_own", || {
        let rt = Runtime::new();
        let epoch = rt.epoch().unwrap();
        assert!((0..1_000_000_000).contains(&since(&epoch, Instant::now())), "made just now: {epoch:?}");

        let node = TestNode::with(|o| o.clock_skew_ns = -7_000_000_000);
        let remote = epoch_of(&node.endpoint);
        let local = node.runtime.epoch().unwrap();
        let now = Instant::now();
        assert!((since(&remote, now) - since(&local, now)).abs() < AGREE_NS, "{remote:?} vs {local:?}");
        assert!(since(&local, now) >= 0, "the epoch is the node's start: behind us");
    })
}
