//! The golden vectors of the wire (`tests/vectors/wire.json`): messages of every request and
//! every reply a client reads, each as its value (the shape `serde_json` gives it) and the bytes
//! this crate encodes it to. A client written in another language (the browser's TypeScript,
//! `browser/test/wire.test.ts`) encodes the same values to the same bytes and decodes the bytes to
//! the same values, so the two codecs cannot drift apart unseen.
//!
//! The file is checked in and this test fails when it is stale (`STAMPEDE_BLESS=1` rewrites it):
//! a change of the wire shows in review as a change of the vectors, and the other codecs' tests
//! fail until they follow. Every `Op`, `Outcome` and `WireError` variant has a vector, or is
//! named below as one a browser never reads; adding a variant fails to compile here until it is
//! placed. The file also names the operations whose lost reply ends a session (`holds_on_node`).

use std::path::Path;

use serde::Serialize;
use serde_json::{json, Value};

use stampede_core::{
    BudgetUse, ContainerInfo, Listed, Op, Outcome, Peer, Prefetch, Retention, Selector, Stats, INFINITY,
};
use stampede_wire::{
    encode, Consumed, DirectPath, Hello, ItemHeader, Opened, Reply, Request, RequestHeader, WireError, VERSION,
};

const SECRET: [u8; 16] = [7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 255];
const PEER: Peer = Peer { id: 0xfeed_beef_dead_0001, incarnation: 3 };

/// Every operation, one example each.
fn ops() -> Vec<Op> {
    let ops = vec![
        Op::CreateChannel {
            name: "camera/frames".into(),
            capacity: Some(30),
            bytes_max: None,
            retention: Retention::CurrentReaders,
            codec: Some("npy".into()),
            description: "the kiosk's camera".into(),
        },
        Op::CreateQueue { name: "work".into(), capacity: None, bytes_max: Some(1 << 20), description: String::new() },
        Op::Lookup { name: "camera/frames".into() },
        Op::Names { prefix: "camera".into() },
        Op::Listing { prefix: String::new() },
        Op::ContainerStats { container: 3 },
        Op::Destroy { container: 3 },
        Op::Task { virtual_time: INFINITY },
        Op::Spawn { task: 1, virtual_time: 40 },
        Op::SetVirtualTime { task: 1, virtual_time: 1_700_000_000_000 },
        Op::Times { task: 1 },
        Op::CloseTask { task: 1 },
        Op::SetTaskName { task: 1, name: "tracker ✓".into() },
        Op::Graph,
        Op::AttachInput { task: 1, container: 3, max_lag_items: Some(2), max_lag_ts: None, prefetch: Prefetch::Newest },
        Op::AttachOutput { task: 1, container: 3 },
        Op::Detach { connection: 4 },
        Op::Put { connection: 4, ts: 0, codec: "raw".into(), refcount: Some(2), wait_us: 1_000_000 },
        Op::Get { connection: 5, selector: Selector::At(-3), wait_us: 0 },
        Op::GetRange { connection: 5, t0: 10, t1: INFINITY - 1 },
        Op::Consume { connection: 5, ts: 300 },
        Op::ConsumeUntil { connection: 5, ts: 128 },
        Op::QueuePut { connection: 6, ts: 9, codec: "json".into(), wait_us: 250 },
        Op::QueueGet { connection: 7, wait_us: 1_000_000 },
        Op::QueueConsume { connection: 7, seq: Some(11), ts: 9 },
        Op::Timestamps { container: 3 },
        Op::PutLog { container: 3 },
        Op::Settledness { container: 3 },
        Op::CloseProducers { container: 3 },
        Op::Demand { connection: 4 },
        Op::WaitChanged { connection: 5, selector: Some(Selector::NewestUnseen), wait_us: 1_000_000 },
        Op::WaitProgress { wait_us: 5 },
        Op::TsMin,
        Op::Stats,
        Op::Collect,
        Op::TraceClock,
        Op::MeshTime,
        Op::CheckInvariants,
        Op::MoveTask { task: 1, to_node: "b".into(), to: PEER },
        Op::TakeOverTask { from_node: "a".into(), from: PEER, id: 2, to: PEER, virtual_time: 8, proof: SECRET },
        Op::OnReclaim { container: None },
    ];
    let mut seen = [false; 41];
    for op in &ops {
        // A new operation does not compile here until it has an example above and a place here.
        let index = match op {
            Op::CreateChannel { .. } => 0,
            Op::CreateQueue { .. } => 1,
            Op::Lookup { .. } => 2,
            Op::Names { .. } => 3,
            Op::Listing { .. } => 4,
            Op::ContainerStats { .. } => 5,
            Op::Destroy { .. } => 6,
            Op::Task { .. } => 7,
            Op::Spawn { .. } => 8,
            Op::SetVirtualTime { .. } => 9,
            Op::Times { .. } => 10,
            Op::CloseTask { .. } => 11,
            Op::SetTaskName { .. } => 12,
            Op::Graph => 13,
            Op::AttachInput { .. } => 14,
            Op::AttachOutput { .. } => 15,
            Op::Detach { .. } => 16,
            Op::Put { .. } => 17,
            Op::Get { .. } => 18,
            Op::GetRange { .. } => 19,
            Op::Consume { .. } => 20,
            Op::ConsumeUntil { .. } => 21,
            Op::QueuePut { .. } => 22,
            Op::QueueGet { .. } => 23,
            Op::QueueConsume { .. } => 24,
            Op::Timestamps { .. } => 25,
            Op::PutLog { .. } => 26,
            Op::Settledness { .. } => 27,
            Op::CloseProducers { .. } => 28,
            Op::Demand { .. } => 29,
            Op::WaitChanged { .. } => 30,
            Op::WaitProgress { .. } => 31,
            Op::TsMin => 32,
            Op::Stats => 33,
            Op::Collect => 34,
            Op::TraceClock => 35,
            Op::MeshTime => 36,
            Op::CheckInvariants => 37,
            Op::MoveTask { .. } => 38,
            Op::TakeOverTask { .. } => 39,
            Op::OnReclaim { .. } => 40,
        };
        seen[index] = true;
    }
    assert!(seen.iter().all(|&s| s), "every operation has an example");
    ops
}

fn requests() -> Vec<(String, RequestHeader)> {
    let mut requests = vec![
        ("hello".to_owned(), RequestHeader::new("", [0; 16], Request::Hello)),
        (
            "open".to_owned(),
            RequestHeader::new(
                "0123456789abcdef0123456789abcdef",
                [0; 16],
                Request::Open { user: Some("ana".into()), password: Some("s3cret é".into()) },
            ),
        ),
        ("open_anonymous".to_owned(), RequestHeader::new("ab", [0; 16], Request::Open { user: None, password: None })),
        ("close".to_owned(), RequestHeader::new("ab", SECRET, Request::Close)),
        ("pushes".to_owned(), RequestHeader::new("ab", SECRET, Request::Pushes)),
    ];
    for (i, op) in ops().into_iter().enumerate() {
        let name = format!("op_{}", serde_json::to_value(&op).ok().and_then(variant).unwrap_or_default());
        let mut header = RequestHeader::new("ab", SECRET, Request::Op(op));
        header.seq = 1000 + i as u64;
        header.floor = 990;
        header.acks = if i % 3 == 0 { vec![4, 200, 70_000] } else { Vec::new() };
        if i % 5 == 0 {
            header.opened = vec![Opened { connection: 5, ts: 12, ago_us: 333 }];
            header.consumed = vec![
                Consumed { connection: 5, ts: 12, until: false, number: 1 },
                Consumed { connection: 6, ts: 20, until: true, number: 2 },
            ];
        }
        if i % 7 == 0 {
            header.released = vec![3, 1 << 40];
        }
        requests.push((name, header));
    }
    requests
}

/// The name of an externally tagged enum value's variant.
fn variant(value: Value) -> Option<String> {
    match value {
        Value::String(name) => Some(name),
        Value::Object(map) => map.keys().next().cloned(),
        _ => None,
    }
}

fn item(ts: i64, len: u64) -> ItemHeader {
    ItemHeader { ts, codec: "npy".into(), len }
}

/// Every reply a browser client reads, and one it does not (it must refuse it cleanly).
fn replies() -> Vec<(String, Reply)> {
    let stats = Stats {
        live_items: 3,
        live_bytes: 6_220_800,
        reclaimed: 1 << 40,
        puts: 9,
        gets: 8,
        inputs: 2,
        outputs: 1,
        tombstones: 0,
        tombstone_runs: 0,
        claim: Some(7),
        ts_min: INFINITY,
    };
    let budget = BudgetUse { node_live_bytes: 1, node_max_bytes: 2, session_live_bytes: 3, session_max_bytes: 4 };
    let container = ContainerInfo {
        id: 3,
        queue: false,
        name: "camera/frames".into(),
        capacity: None,
        bytes_max: Some(64 << 20),
        retention: Retention::History,
        codec: None,
        description: "frames".into(),
    };
    let outcomes: Vec<(&str, Outcome<ItemHeader>)> = vec![
        ("done", Outcome::Done),
        ("container", Outcome::Container(container)),
        ("handle", Outcome::Handle(77)),
        ("times", Outcome::Times { virtual_time: INFINITY, visibility: 5 }),
        ("item", Outcome::Item(item(5, 6))),
        ("items", Outcome::Items(vec![item(1, 0), item(2, 3)])),
        ("items_none", Outcome::Items(Vec::new())),
        ("queue_item", Outcome::QueueItem { seq: 4, item: item(9, 2) }),
        ("names", Outcome::Names(vec!["a".into(), "b/c".into()])),
        ("listing", Outcome::Listing(vec![Listed { name: "q".into(), queue: true, node: Some("b".into()) }])),
        ("timestamp", Outcome::Timestamp(-1)),
        ("timestamps", Outcome::Timestamps(vec![0, 5, INFINITY - 1])),
        ("settledness", Outcome::Settledness { settled_below: 12, producers_closed: true }),
        ("stats", Outcome::Stats(stats)),
        ("runtime_stats", Outcome::RuntimeStats { ts_min: 0, containers: 2, claims: 1, budget: Some(budget) }),
        ("runtime_stats_unbudgeted", Outcome::RuntimeStats { ts_min: 4, containers: 0, claims: 0, budget: None }),
        ("count", Outcome::Count(12)),
    ];
    for (_, outcome) in &outcomes {
        // A new outcome does not compile here until it is read (a vector above) or not.
        match outcome {
            Outcome::Done
            | Outcome::Container(_)
            | Outcome::Handle(_)
            | Outcome::Times { .. }
            | Outcome::Item(_)
            | Outcome::Items(_)
            | Outcome::QueueItem { .. }
            | Outcome::Names(_)
            | Outcome::Listing(_)
            | Outcome::Timestamp(_)
            | Outcome::Timestamps(_)
            | Outcome::Settledness { .. }
            | Outcome::Stats(_)
            | Outcome::RuntimeStats { .. }
            | Outcome::Count(_) => {}
            // Not read by the browser client: no operation it sends returns them.
            Outcome::PutLog(_)
            | Outcome::Graph(_)
            | Outcome::Moved { .. }
            | Outcome::TraceClock { .. }
            | Outcome::MeshTime(_) => unreachable!("not a vector"),
        }
    }
    let errors = vec![
        WireError::BelowVisibility { op: "put".into(), name: "c".into(), ts: 1, what: "ts_min".into(), limit: 4 },
        WireError::DuplicateTimestamp { name: "c".into(), ts: 2 },
        WireError::InvalidTimestamp { op: "get".into(), name: "c".into(), ts: -5 },
        WireError::Full { name: "c".into(), ts: 3, reason: "30 items".into(), can_never_fit: false },
        WireError::NotAvailable {
            op: "get".into(),
            name: "c".into(),
            selector: Selector::OldestUnseen,
            previous: None,
            next: Some(9),
            settled: true,
        },
        WireError::AlreadyConsumed { name: "c".into(), ts: 4 },
        WireError::Reclaimed { name: "c".into(), ts: 5, reason: "below ts_min".into() },
        WireError::Closed { name: "c".into(), reason: "destroyed".into() },
        WireError::NotFound { name: "nope".into() },
        WireError::AlreadyExists { name: "c".into() },
        WireError::InvalidArgument { op: "put".into(), name: "c".into(), reason: "refcount 0".into() },
        WireError::Unreachable { op: "connect".into(), name: "n".into(), reason: "gone".into() },
        WireError::PermissionDenied { op: "get".into(), name: "c".into(), right: "read".into(), reason: "ana".into() },
        WireError::Storage { op: "put".into(), name: "c".into(), reason: "disk full".into() },
    ];
    let hello = Hello {
        node: "kiosk".into(),
        zid: "d1e7ee3b29d14f19b45b6ec40afa0795".into(),
        liveliness_timeout_ms: 3000,
        payload_bytes_max: 64 << 20,
        wait_slice_ms: 1000,
        mesh: Some(PEER),
        direct: DirectPath { unix: Some("stampede/d1e7".into()), tcp: vec![(7447, 40001)] },
    };
    let mut replies = vec![("hello".to_owned(), Reply::Hello(hello)), ("opened".to_owned(), Reply::Opened(SECRET))];
    replies.extend(outcomes.into_iter().map(|(name, outcome)| (format!("outcome_{name}"), Reply::Outcome(outcome))));
    replies.extend(errors.into_iter().map(|e| {
        let name = format!("error_{}", serde_json::to_value(&e).ok().and_then(variant).unwrap_or_default());
        (name, Reply::Error(e))
    }));
    replies
}

/// The variants of the operations whose lost reply leaves the node holding what the client does
/// not know of (`Op::holds_on_node`): a client in another language ends its session on them as
/// the Rust client does, and its tests hold its list to this one.
fn holds_on_node() -> Vec<String> {
    let held = ops().into_iter().filter(Op::holds_on_node);
    let mut names: Vec<String> = held.filter_map(|op| serde_json::to_value(&op).ok().and_then(variant)).collect();
    names.sort();
    names
}

/// `value` with every integer JavaScript cannot hold exactly as a decimal string.
fn js_exact(value: Value) -> Value {
    const SAFE: u64 = (1 << 53) - 1;
    match value {
        Value::Number(n) if n.as_u64().is_some_and(|n| n > SAFE) || n.as_i64().is_some_and(|n| n < -(SAFE as i64)) => {
            Value::String(n.to_string())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(js_exact).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, js_exact(v))).collect()),
        other => other,
    }
}

fn vectors<T: Serialize>(messages: Vec<(String, T)>) -> Vec<Value> {
    messages
        .into_iter()
        .map(|(name, message)| {
            let hex: String = encode(&message).iter().map(|b| format!("{b:02x}")).collect();
            json!({ "name": name, "value": js_exact(serde_json::to_value(&message).unwrap()), "hex": hex })
        })
        .collect()
}

#[test]
fn the_golden_vectors_are_current() {
    let unread = Reply::Outcome(Outcome::Moved { from: PEER, id: 1, visibility: 2, proof: SECRET });
    let golden = json!({
        "about": "Golden vectors of Stampede's wire: written by crates/stampede-wire/tests/golden.rs \
                  (STAMPEDE_BLESS=1 cargo test -p stampede-wire --test golden), read by every codec's tests. \
                  Integers beyond 2^53 are decimal strings.",
        "version": VERSION,
        "requests": vectors(requests()),
        "replies": vectors(replies()),
        "unread_replies": vectors(vec![("outcome_moved".to_owned(), unread)]),
        "holds_on_node": holds_on_node(),
    });
    let fresh = serde_json::to_string_pretty(&golden).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/wire.json");
    if std::env::var_os("STAMPEDE_BLESS").is_some() {
        std::fs::write(&path, fresh).expect("the vectors can be written");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "{} is stale: regenerate it with STAMPEDE_BLESS=1 cargo test -p stampede-wire --test golden, review the diff, \
         and make the other codecs (browser/src/wire.ts) follow",
        path.display()
    );
}
