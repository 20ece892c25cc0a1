//! Runtimes linked to mesh participants (`stampede::mesh_link`), with the fabric replaced by
//! direct delivery: what a node's driver does, without zenoh. Shows that a runtime's ts_min is
//! the mesh's — another node's task holds it — that a runtime alone still reclaims inside the
//! operation, that root tasks start at or above the node's door, and that a dead node's claims
//! go.

use std::sync::Arc;

use stampede::mesh_link::MeshLink;
use stampede::{Container, Error, Limits, Runtime, Timestamp, INFINITY};
use stampede_core::{Mesh, MeshLimits, Peer};

struct Node {
    peer: Peer,
    rt: Runtime,
    link: MeshLink,
}

fn node(id: u64) -> Node {
    let peer = Peer { id, incarnation: 1 };
    let rt = Runtime::new();
    let link = MeshLink::attach(&rt, Mesh::new(peer, MeshLimits::default()), Arc::new(|| {})).unwrap();
    Node { peer, rt, link }
}

/// Delivers every message until none is left (FIFO per sender, as zenoh does).
fn pump(nodes: &[&Node]) {
    loop {
        let mut sent = Vec::new();
        for n in nodes {
            let transmits: Vec<_> = n.link.with(|m| std::iter::from_fn(|| m.poll_transmit()).collect());
            sent.extend(transmits.into_iter().map(|t| (n.peer, t)));
        }
        if sent.is_empty() {
            return;
        }
        for (from, transmit) in sent {
            for n in nodes.iter().filter(|n| transmit.to.contains(&n.peer)) {
                n.link.with(|m| m.handle_message(from, transmit.message.clone())).unwrap();
            }
        }
    }
}

/// Every node learns every other and opens its door through a pause round.
fn mesh(nodes: &[&Node]) {
    for (i, n) in nodes.iter().enumerate() {
        for other in &nodes[i + 1..] {
            n.link.with(|m| m.peer_joined(other.peer)).unwrap();
            other.link.with(|m| m.peer_joined(n.peer)).unwrap();
        }
    }
    for n in nodes {
        n.link.with(|m| m.open_door()).unwrap();
    }
    pump(nodes);
    assert!(nodes.iter().all(|n| n.link.read(|m| m.join_floor()).is_some()));
}

fn live(rt: &Runtime, name: &str) -> usize {
    match rt.lookup(name).unwrap() {
        Container::Channel(ch) => ch.stats().live_items,
        Container::Queue(_) => unreachable!("{name} is a channel"),
    }
}

#[test]
fn a_node_alone_reclaims_inside_the_operation() {
    let a = node(1);
    mesh(&[&a]);
    let ch = a.rt.create_channel("frames", Limits::unbounded()).unwrap();
    let producer = a.rt.task(0).unwrap();
    let reader = a.rt.task(INFINITY).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let inp = reader.attach_input(&ch).unwrap();
    for ts in 0..4 {
        out.put(ts, vec![ts as u8]).unwrap();
    }
    producer.set_virtual_time(10).unwrap();
    inp.consume_until(3).unwrap();
    assert_eq!(a.rt.ts_min(), 4, "the mesh's ts_min follows at once: no peer to wait for");
    assert_eq!(live(&a.rt, "frames"), 0, "reclaimed inside consume_until");
}

#[test]
fn another_nodes_task_holds_ts_min_until_it_goes() {
    let (a, b) = (node(1), node(2));
    mesh(&[&a, &b]);
    let holder = b.rt.task(5).unwrap();
    pump(&[&a, &b]);
    let ch = a.rt.create_channel("frames", Limits::unbounded()).unwrap();
    let producer = a.rt.task(5).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    for ts in 5..10 {
        out.put(ts, vec![ts as u8]).unwrap();
    }
    producer.set_virtual_time(INFINITY).unwrap();
    pump(&[&a, &b]);
    assert_eq!(a.rt.ts_min(), 5, "node b's task at 5 holds node a's ts_min");
    assert_eq!(live(&a.rt, "frames"), 5, "nothing a task at 5 could still get is reclaimed");

    holder.set_virtual_time(8).unwrap();
    pump(&[&a, &b]);
    assert_eq!(a.rt.ts_min(), 8);
    assert_eq!(live(&a.rt, "frames"), 2, "items 5..8 reclaimed once b's task moved past them");

    holder.close();
    pump(&[&a, &b]);
    assert_eq!(a.rt.ts_min(), 10, "the watermark: 1 + the highest put");
    assert_eq!(live(&a.rt, "frames"), 0);
}

#[test]
fn a_root_task_starts_at_or_above_the_door() {
    let (a, b) = (node(1), node(2));
    let early: Result<_, Error> = b.rt.task(0);
    assert!(matches!(early, Err(Error::Unreachable { .. })), "no door yet: no root task (try again)");
    mesh(&[&a, &b]);
    let keep = a.rt.task(3).unwrap();
    a.rt.task(0).unwrap().close();
    pump(&[&a, &b]);
    let floor: Timestamp = b.link.with(|m| m.join_floor().unwrap());
    assert!(floor <= 3, "b's door follows what it knows: a's task at 3");
    assert!(b.rt.task(floor).is_ok());
    drop(keep);
}

#[test]
fn a_dead_nodes_claims_go_once_every_live_node_fenced_it() {
    let (a, b, c) = (node(1), node(2), node(3));
    mesh(&[&a, &b, &c]);
    let holder = b.rt.task(2).unwrap();
    pump(&[&a, &b, &c]);
    let ch = a.rt.create_channel("frames", Limits::unbounded()).unwrap();
    let producer = a.rt.task(2).unwrap();
    producer.attach_output(&ch).unwrap().put(4, vec![4]).unwrap();
    producer.close();
    pump(&[&a, &b, &c]);
    assert_eq!(a.rt.ts_min(), 2);
    // Node b crashes: its task never closes. The fabric tells a and c.
    std::mem::forget(holder);
    a.link.with(|m| m.peer_dead(b.peer)).unwrap();
    c.link.with(|m| m.peer_dead(b.peer)).unwrap();
    pump(&[&a, &c]);
    assert_eq!(a.rt.ts_min(), 5, "b's claim at 2 went with b");
    assert_eq!(live(&a.rt, "frames"), 0);
}

/// A node its peers declared dead while it runs is expelled: its mesh takes nothing any more, and
/// the runtime keeps no claim change for it (it used to keep every one, growing with each
/// operation); its ts_min stays where it was.
#[test]
fn an_expelled_node_keeps_nothing_for_its_mesh() {
    let (a, b) = (node(1), node(2));
    mesh(&[&a, &b]);
    // The fabric tells b that b is dead (its own token gone: a partition, a missed lease).
    a.link.with(|m| m.peer_dead(b.peer)).unwrap();
    let _ = b.link.with(|m| m.peer_dead(b.peer));
    let events: Vec<_> = b.link.with(|m| std::iter::from_fn(|| m.poll_event()).collect());
    assert!(events.contains(&stampede_core::mesh::Event::Expelled), "{events:?}");
    let ts_min = b.rt.ts_min();
    let ch = b.rt.create_channel("frames", Limits::unbounded()).unwrap();
    let producer = b.rt.task(INFINITY).unwrap();
    let task = b.rt.task(INFINITY).unwrap();
    let out = task.attach_output(&ch).unwrap();
    for _ in 0..1000 {
        let child = producer.spawn(INFINITY).unwrap();
        child.close();
    }
    drop(out);
    assert_eq!(b.link.stashed(), 0, "nothing kept for a mesh that takes nothing");
    assert_eq!(b.rt.ts_min(), ts_min, "ts_min stays where the expelled mesh left it");
}

/// A takeover refused for an invalid virtual time declines the move, as every refusal does: the
/// mover's carry goes at once (it used to stay until the client's home session ended, holding
/// every node's ts_min at the moved task's visibility).
#[test]
fn a_refused_takeover_declines_the_move() {
    let (a, b) = (node(1), node(2));
    mesh(&[&a, &b]);
    let ch = a.rt.create_channel("frames", Limits::unbounded()).unwrap();
    let task = a.rt.task(2).unwrap();
    task.attach_output(&ch).unwrap().put(5, vec![5]).unwrap();
    pump(&[&a, &b]);
    let (_, id, visibility) = a.link.move_task(&task, b.peer).unwrap();
    assert_eq!(visibility, 2);
    let refused = b.link.take_over_task(a.peer, id, b.peer, -1);
    assert!(matches!(refused, Err(Error::InvalidTimestamp { .. })), "{refused:?}");
    pump(&[&a, &b]);
    assert!(!a.link.is_move_open(b.peer, id), "the refusal declined the move");
    task.close();
    pump(&[&a, &b]);
    assert_eq!((a.rt.ts_min(), b.rt.ts_min()), (6, 6), "no carry holds ts_min: 1 + the highest put");
    let late = b.link.take_over_task(a.peer, id, b.peer, 2);
    assert!(matches!(late, Err(Error::Unreachable { .. })), "a declined move is never taken over: {late:?}");
}
