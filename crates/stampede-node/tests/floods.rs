//! Floods from peers that never open a session leave a node's memory flat and its clients served
//! (docs/SECURITY.md, "Nothing before a session costs the node much"): half-sent frames that each
//! announce 60 MiB, and idle connections far past the bound on unproven ones. The node runs in this
//! test's process, so the process's resident memory is the node's (plus the test's own, measured
//! before the flood).

mod support;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use stampede_node::direct::UNPROVEN_CONNECTIONS_MAX;
use stampede_wire::{encode, Op, Request, RequestHeader};
use support::{direct_connection, raw_connection, with_watchdog, TestNode};

/// What a flood may add to the process's resident memory: a small fraction of what it offers to
/// make the node hold (16 × 60 MiB frames; thousands of connections).
const RSS_GROWTH_MAX: u64 = 64 << 20;

/// Half-sent frames at once, each announcing [`FRAME_ANNOUNCED`] bytes.
const HALF_SENT_FRAMES: usize = 16;
const FRAME_ANNOUNCED: u32 = 60 << 20;

/// Idle connections held at once: four times the bound on unproven ones.
const IDLE_CONNECTIONS: usize = 4 * UNPROVEN_CONNECTIONS_MAX;

/// This process's resident memory, in bytes (`VmRSS`).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmRSS in kB");
    kib * 1024
}

/// A client connects and is served; its runtime, to close.
fn client_served(node: &TestNode) -> stampede::Runtime {
    let rt = stampede::connect(&node.endpoint, Some(Duration::from_secs(5))).expect("a client connects");
    assert!(rt.names("").is_ok(), "and is served");
    rt
}

/// A node that has served a client (so that what serving allocates once is there), its hello, and
/// this process's resident memory then.
fn node_before_a_flood() -> (TestNode, stampede_wire::Hello, u64) {
    let node = TestNode::new();
    let (hello, first) = raw_connection(&node);
    drop(first);
    client_served(&node).close();
    let before = rss_bytes();
    (node, hello, before)
}

fn assert_flat(before: u64, what: &str) {
    let after = rss_bytes();
    let grown = after.saturating_sub(before);
    println!("{what}: resident memory {} MiB → {} MiB", before >> 20, after >> 20);
    assert!(grown < RSS_GROWTH_MAX, "{what} grew the node's memory by {} MiB", grown >> 20);
}

/// Sixteen connections that name no session each announce a 60 MiB frame and send as much of it
/// as the node takes: the node reads each header, refuses it and closes, buffering none of the
/// 960 MiB; a client is served throughout.
#[test]
fn half_sent_frames_leave_the_nodes_memory_flat() {
    with_watchdog("half_sent_frames_leave_the_nodes_memory_flat", || {
        let (node, hello, before) = node_before_a_flood();
        let header = encode(&RequestHeader::new("0123abcd", [7; 16], Request::Op(Op::Stats)));
        let senders: Vec<_> = (0..HALF_SENT_FRAMES)
            .map(|_| {
                let mut stream = direct_connection(&hello);
                let header = header.clone();
                std::thread::spawn(move || send_half(&mut stream, &header))
            })
            .collect();
        let rt = client_served(&node);
        let sent: usize = senders.into_iter().map(|s| s.join().expect("a sender")).sum();
        println!("{HALF_SENT_FRAMES} half-sent frames: the node took {} KiB of them", sent >> 10);
        assert_flat(before, "half-sent frames");
        assert!(rt.names("").is_ok(), "the client is served after the flood");
        rt.close();
    })
}

/// Announces [`FRAME_ANNOUNCED`] bytes after `header` and sends zeros in 1 MiB writes until the
/// node closes the connection; returns how many bytes it took.
fn send_half(stream: &mut UnixStream, header: &[u8]) -> usize {
    stream.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sent = 0;
    let mut frame = FRAME_ANNOUNCED.to_le_bytes().to_vec();
    frame.extend_from_slice(header);
    if stream.write_all(&frame).is_err() {
        return sent;
    }
    let chunk = vec![0u8; 1 << 20];
    while sent < FRAME_ANNOUNCED as usize {
        match stream.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => sent += n,
        }
    }
    sent
}

/// A thousand connections that never send anything are held open at once: the node keeps at most
/// its bound of them, closes the rest at once and those at the handshake deadline, without
/// growing; a client connects and is served meanwhile.
#[test]
fn idle_connections_leave_the_nodes_memory_flat() {
    with_watchdog("idle_connections_leave_the_nodes_memory_flat", || {
        let (node, hello, before) = node_before_a_flood();
        let idle: Vec<UnixStream> = (0..IDLE_CONNECTIONS).map(|_| direct_connection(&hello)).collect();
        let rt = client_served(&node);
        assert_flat(before, "idle connections");
        rt.close();
        drop(idle);
    })
}
