//! Two nodes on the fabric share one ts_min (docs/PROTOCOL.md): a task held by a client of
//! node A keeps node B from reclaiming what that task could still get, and B follows as soon as
//! the task moves on or goes. The driver is `stampede_node::mesh`; the protocol docs/PROTOCOL.md.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use stampede::{Limits, INFINITY};
use support::{eventually, live, two_nodes, with_watchdog, CONNECT_TIMEOUT};

/// How long the mesh may take to reach a value (several message rounds on loopback: far less).
const SETTLE: Duration = Duration::from_secs(10);

#[test]
fn a_task_on_one_node_holds_the_other_nodes_ts_min() {
    with_watchdog("a_task_on_one_node_holds_the_other_nodes_ts_min", || {
        let (a, b, b_rt, _b_dir) = two_nodes();

        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let holder = client.task(5).unwrap();

        let ch = b_rt.create_channel("frames", Limits::unbounded()).unwrap();
        let producer = b_rt.task(5).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        for ts in 5..10 {
            out.put(ts, vec![ts as u8]).unwrap();
        }
        producer.set_virtual_time(INFINITY).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 5), "b's ts_min reaches 5, not past it: {}", b_rt.ts_min());
        // An absence cannot be awaited: ts_min must stay at 5; the pause gives a wrong advance time to show.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(b_rt.ts_min(), 5, "the task of a's client at 5 holds b's ts_min");
        assert_eq!(live(&b_rt, "frames"), 5, "nothing that task could get is reclaimed on b");

        holder.set_virtual_time(8).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 8), "b follows the task to 8: {}", b_rt.ts_min());
        // Observed from another thread: the sweep may still be running when ts_min shows.
        assert!(eventually(SETTLE, || live(&b_rt, "frames") == 2), "{}", live(&b_rt, "frames"));

        client.close();
        assert!(eventually(SETTLE, || b_rt.ts_min() == 10), "the client's session ended: {}", b_rt.ts_min());
        // Observed from another thread: the sweep may still be running when ts_min shows.
        assert!(eventually(SETTLE, || live(&b_rt, "frames") == 0), "{}", live(&b_rt, "frames"));
        let counters = b.mesh_counters().unwrap();
        assert_eq!(counters.malformed.load(Ordering::Relaxed) + counters.refused.load(Ordering::Relaxed), 0);
    })
}

#[test]
fn a_node_that_leaves_releases_what_it_held() {
    with_watchdog("a_node_that_leaves_releases_what_it_held", || {
        let (a, b, b_rt, _b_dir) = two_nodes();
        // A task on b's own runtime holds 3; a's ts_min stays there.
        let holder = b_rt.task(3).unwrap();
        let a_task = a.runtime.task(3).unwrap();
        a_task.set_virtual_time(INFINITY).unwrap();
        // An absence cannot be awaited: ts_min must stay at 0; the pause gives a wrong advance time to show.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(a.runtime.ts_min(), 0, "nothing put: the watermark holds ts_min at 0");
        let ch = a.runtime.create_channel("x", Limits::unbounded()).unwrap();
        let p = a.runtime.task(3).unwrap();
        p.attach_output(&ch).unwrap().put(7, vec![7]).unwrap();
        p.close();
        assert!(eventually(SETTLE, || a.runtime.ts_min() == 3), "b's task holds a at 3: {}", a.runtime.ts_min());
        // Node b leaves the fabric without closing its task: its token goes, a drops its claims.
        b.close();
        assert!(eventually(SETTLE, || a.runtime.ts_min() == 8), "b's claims went with b: {}", a.runtime.ts_min());
        drop(holder);
    })
}

/// Hostile bytes on the mesh's keys: payloads that do not decode, keys that name no participant,
/// and well-formed messages from an incarnation nobody reported. The node counts them, keeps at
/// most `EARLY_MESSAGES_MAX` of the unknown sender's, stays up, and its ts_min still follows its
/// own tasks.
#[test]
fn hostile_mesh_messages_are_counted_and_change_nothing() {
    with_watchdog("hostile_mesh_messages_are_counted_and_change_nothing", || {
        use stampede_core::mesh::{Batch, Message};
        use stampede_core::Peer;
        use zenoh::Wait;

        let (a, b, b_rt, _b_dir) = two_nodes();
        let config = stampede_wire::fabric::client_config(&a.endpoint, Duration::from_secs(10), None).unwrap();
        let evil = zenoh::open(config).wait().unwrap();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for i in 0..300u32 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let garbage: Vec<u8> = seed.to_le_bytes().iter().cycle().take((i % 40) as usize).copied().collect();
            evil.put("stampede/evil/mesh/7", garbage).wait().unwrap();
        }
        evil.put("stampede/evil/mesh/not-a-number", vec![1u8]).wait().unwrap();
        // Addressed to b's incarnation, read from its liveliness token: b holds them (an unknown
        // sender) up to the bound and drops the rest.
        let token = evil.liveliness().get("stampede/b/mesh/*").wait().unwrap().recv().unwrap();
        let key = token.result().unwrap().key_expr().as_str().to_owned();
        let incarnation = key.rsplit('/').next().unwrap().parse().unwrap();
        let me = Peer { id: stampede_node::mesh::peer_id("b"), incarnation };
        for seq in 1..=400u64 {
            let batch = Message::Batch(Batch { seq, watermark: 1 << 40, ..Batch::default() });
            let bytes = postcard::to_allocvec(&(vec![me], batch)).unwrap();
            evil.put("stampede/evil/mesh/9", bytes).wait().unwrap();
        }
        // One message each from 100 more unknown incarnations: at most EARLY_SENDERS_MAX senders
        // are kept.
        for incarnation in 1_000..1_100u64 {
            let batch = Message::Batch(Batch { seq: 1, ..Batch::default() });
            let bytes = postcard::to_allocvec(&(vec![me], batch)).unwrap();
            evil.put(format!("stampede/evil/mesh/{incarnation}"), bytes).wait().unwrap();
        }
        let counters = b.mesh_counters().unwrap();
        let (messages_max, senders_max) =
            (stampede_node::mesh::EARLY_MESSAGES_MAX as u64, stampede_node::mesh::EARLY_SENDERS_MAX as u64);
        let dropped_at_least = (400 - messages_max) + (100 - (senders_max - 1));
        assert!(
            eventually(SETTLE, || counters.malformed.load(Ordering::Relaxed) >= 200
                && counters.dropped.load(Ordering::Relaxed) >= dropped_at_least),
            "the garbage is counted, unknown senders' messages beyond the bounds dropped: {counters:?}"
        );
        let _ = evil.close().wait();

        // The node is up and its ts_min still follows its own tasks and a's.
        let task = b_rt.task(b_rt.ts_min()).unwrap();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let holder = client.task(b_rt.ts_min()).unwrap();
        task.close();
        let held = holder.virtual_time();
        assert!(eventually(SETTLE, || b_rt.ts_min() == held), "{} vs {held}", b_rt.ts_min());
        drop(holder);
        client.close();
    })
}

/// A node its peers declare dead while it lives (a partition seen from one side, or a stream
/// they refused) is expelled: it learns it from the fence, keeps its client sessions — a task
/// that uses only the node's own channels carries on; what crossed through a shadow on the node
/// that fenced it fails `Closed`, saying why — and rejoins
/// as a new incarnation, opening its door through a pause round — its own runtime's claims (a task of the embedded
/// application, below what its peers reclaimed since) still hold its own ts_min, and its new
/// clients' tasks hold the other node's again. The fence comes from a third participant that
/// the test plays with the protocol machine itself.
#[test]
fn a_node_expelled_while_alive_rejoins_as_a_new_incarnation() {
    with_watchdog("a_node_expelled_while_alive_rejoins_as_a_new_incarnation", || {
        use stampede_core::{Mesh, MeshLimits, Peer};
        use zenoh::Wait;

        let (a, b, b_rt, _b_dir) = two_nodes();
        let embedded = a.runtime.task(3).unwrap();
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let old_task = client.task(5).unwrap();
        let here = client.create_channel("here", Limits::unbounded()).unwrap();
        let out_here = old_task.attach_output(&here).unwrap();
        out_here.put(5, vec![5]).unwrap();
        let on_b = stampede::ChannelOptions { node: Some("b".into()), ..stampede::ChannelOptions::default() };
        let there = client.create_channel("there", on_b).unwrap();
        let out_there = old_task.attach_output(&there).unwrap(); // through a shadow on b
        out_there.put(5, vec![5]).unwrap();

        // Participant x joins (it needs no door: it starts no task), then fences a.
        let config = stampede_wire::fabric::client_config(&a.endpoint, Duration::from_secs(10), None).unwrap();
        let fabric = zenoh::open(config).wait().unwrap();
        // A session just opened may ask before its router's tokens reached it: ask until one comes.
        let incarnation_of = |name: &str| -> u64 {
            let mut incarnation = None;
            let found = eventually(SETTLE, || {
                let replies = fabric.liveliness().get(format!("stampede/{name}/mesh/*")).wait().unwrap();
                incarnation = replies
                    .recv()
                    .ok()
                    .and_then(|reply| reply.result().ok()?.key_expr().as_str().rsplit('/').next()?.parse().ok());
                incarnation.is_some()
            });
            assert!(found, "node {name}'s mesh token is on the fabric");
            incarnation.unwrap()
        };
        let peer = |name: &str| Peer { id: stampede_node::mesh::peer_id(name), incarnation: incarnation_of(name) };
        let (a_peer, b_peer) = (peer("a"), peer("b"));
        let me = Peer { id: stampede_node::mesh::peer_id("x"), incarnation: 1 };
        let mut x = Mesh::new(me, MeshLimits::default());
        x.peer_joined(a_peer).unwrap();
        x.peer_joined(b_peer).unwrap();
        let _token = fabric.liveliness().declare_token("stampede/x/mesh/1").wait().unwrap();
        let send = |x: &mut Mesh| {
            while let Some(t) = x.poll_transmit() {
                fabric.put("stampede/x/mesh/1", postcard::to_allocvec(&(&t.to, &t.message)).unwrap()).wait().unwrap();
            }
        };
        send(&mut x);
        x.peer_dead(a_peer).unwrap();
        send(&mut x);

        let counters = a.node.mesh_counters().unwrap();
        assert!(
            eventually(SETTLE, || counters.restarts.load(Ordering::Relaxed) == 1),
            "a learns it was fenced and restarts once: {counters:?}"
        );
        // The session on a stays: its task's own channel works on.
        out_here.put(6, vec![6]).unwrap();
        let child = old_task.spawn(6).expect("the session of a's old incarnation stays");
        drop(child);
        // What crossed through b's shadow of the task fails, saying why (b fenced a's old
        // incarnation and closed the shadows of its tasks).
        let mut crossed = None;
        assert!(
            eventually(SETTLE, || {
                crossed = out_there.put(7, vec![7]).err();
                crossed.is_some()
            }),
            "the shadow on b closed"
        );
        match crossed {
            Some(stampede::Error::Closed { reason, .. }) => assert!(reason.contains("left the mesh"), "{reason}"),
            other => panic!("a put through a closed shadow: {other:?}"),
        }
        assert!(eventually(SETTLE, || peer("a").incarnation > a_peer.incarnation), "a joined again, anew");
        assert!(a.runtime.ts_min() <= 3, "the embedded task at 3 still holds a's own ts_min: {}", a.runtime.ts_min());
        // x leaves (it takes no part any more).
        drop(_token);
        let _ = fabric.close().wait();

        // A new client of a: its session opens once a's new incarnation has its door (a pause
        // round), and a root task starts at or above that door — the refusal names it.
        let client = stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)).unwrap();
        let mut vt = 10;
        let holder = loop {
            match client.task(vt) {
                Ok(task) => break task,
                Err(stampede::Error::BelowVisibility { limit, .. }) => vt = limit,
                Err(e) => panic!("a task on the rejoined node: {e}"),
            }
        };
        embedded.close();
        // The old session's task held on (raised to a's new door in the mesh): it goes too.
        drop((out_here, out_there));
        old_task.close();
        let ch = b_rt.create_channel("frames", Limits::unbounded()).unwrap();
        let producer = b_rt.task(b_rt.ts_min().max(vt)).unwrap();
        let start = producer.virtual_time();
        let out = producer.attach_output(&ch).unwrap();
        for ts in start..start + 20 {
            out.put(ts, vec![1]).unwrap();
        }
        producer.set_virtual_time(INFINITY).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == vt), "a's new client holds b at {vt}: {}", b_rt.ts_min());
        // An absence cannot be awaited: ts_min must stay at vt; the pause gives a wrong advance time to show.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(b_rt.ts_min(), vt, "a's new incarnation's claims are in b's view");
        assert_eq!(live(&b_rt, "frames"), 20, "nothing a's task could get is reclaimed on b");
        holder.set_virtual_time(INFINITY).unwrap();
        assert!(eventually(SETTLE, || b_rt.ts_min() == start + 20), "b follows: {}", b_rt.ts_min());
        assert!(eventually(SETTLE, || live(&b_rt, "frames") == 0), "{}", live(&b_rt, "frames"));
        client.close();
        drop(b);
    })
}

/// A member of the mesh that never answers (a token on the mesh's keys, and silence): a node
/// that needs a door for a new session waits for that member's answer at most its liveliness
/// timeout — a `connect` meanwhile fails `Unreachable` saying so, never hangs — and then declares
/// it dead, so that sessions open again while the silent member's token is still there.
#[test]
fn a_member_that_never_answers_a_pause_round_is_declared_dead() {
    with_watchdog("a_member_that_never_answers_a_pause_round_is_declared_dead", || {
        use zenoh::Wait;

        let a = support::TestNode::with(|o| {
            o.name = "a".into();
            o.serve_only = true; // a door only while a session is open
            o.liveliness_timeout = Duration::from_millis(500);
        });
        let config = stampede_wire::fabric::client_config(&a.endpoint, Duration::from_secs(10), None).unwrap();
        let fabric = zenoh::open(config).wait().unwrap();
        let _silent = fabric.liveliness().declare_token("stampede/x/mesh/1").wait().unwrap();
        let counters = a.node.mesh_counters().unwrap();
        // Every connect returns: refused while a waits for x, then open once x is declared dead.
        let mut refusals = Vec::new();
        let opened = eventually(SETTLE, || match stampede::connect(&a.endpoint, Some(CONNECT_TIMEOUT)) {
            Ok(client) => {
                client.close();
                counters.silent.load(Ordering::Relaxed) > 0
            }
            Err(e @ stampede::Error::Unreachable { .. }) => {
                refusals.push(e.to_string());
                false
            }
            Err(e) => panic!("connect: {e}"),
        });
        assert!(opened, "x declared dead, sessions open: {counters:?}, refusals {refusals:?}");
        assert!(refusals.iter().all(|r| r.contains("pause round")), "{refusals:?}");
        let _ = fabric.close().wait();
    })
}
