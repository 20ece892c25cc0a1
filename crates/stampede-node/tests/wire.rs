//! The wire format on random, mutated and hostile messages: every well-formed message decodes to
//! what was encoded, and no byte string makes decoding panic (docs/SEMANTICS.md, "Errors": hostile
//! fabric input is a clear error, never a crash of the node).

use proptest::prelude::*;
use stampede::graph::Holder;
use stampede::{ConnectionKind, ConnectionView, ContainerView, Graph, TaskView};
use stampede_core::{BudgetUse, Retention, Selector, Stats};
use stampede_wire::{
    decode_push, decode_reply, decode_request, encode, Consumed, ContainerInfo, DecodeError, DirectPath, Hello,
    ItemHeader, Op, Opened, Outcome, PushEvent, Reply, Request, RequestHeader, WireError, WireOutcome, ACKS_MAX,
    CONSUMED_MAX, OPENED_MAX, REQUEST_HEADER_BYTES_MAX, VERSION,
};

fn ts() -> impl Strategy<Value = i64> {
    prop_oneof![0i64..100, any::<i64>()]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z/]{0,12}", any::<String>()]
}

fn selector() -> impl Strategy<Value = Selector> {
    prop_oneof![
        ts().prop_map(Selector::At),
        Just(Selector::Oldest),
        Just(Selector::Newest),
        Just(Selector::OldestUnseen),
        Just(Selector::NewestUnseen),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        Just(Request::Hello),
        (proptest::option::of(text()), proptest::option::of(text()))
            .prop_map(|(user, password)| Request::Open { user, password }),
        Just(Request::Close),
        Just(Request::Pushes),
        op().prop_map(Request::Op),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let bound = || proptest::option::of(any::<u64>());
    let retention = prop_oneof![Just(Retention::History), Just(Retention::CurrentReaders)];
    prop_oneof![
        (text(), bound(), bound(), retention, proptest::option::of(text()), text()).prop_map(
            |(name, capacity, bytes_max, retention, codec, description)| {
                Op::CreateChannel { name, capacity, bytes_max, retention, codec, description }
            }
        ),
        (text(), bound(), bound(), text()).prop_map(|(name, capacity, bytes_max, description)| {
            Op::CreateQueue { name, capacity, bytes_max, description }
        }),
        text().prop_map(|name| Op::Lookup { name }),
        text().prop_map(|prefix| Op::Names { prefix }),
        any::<u64>().prop_map(|container| Op::ContainerStats { container }),
        any::<u64>().prop_map(|container| Op::Destroy { container }),
        ts().prop_map(|virtual_time| Op::Task { virtual_time }),
        (any::<u64>(), ts()).prop_map(|(task, virtual_time)| Op::Spawn { task, virtual_time }),
        (any::<u64>(), ts()).prop_map(|(task, virtual_time)| Op::SetVirtualTime { task, virtual_time }),
        any::<u64>().prop_map(|task| Op::Times { task }),
        any::<u64>().prop_map(|task| Op::CloseTask { task }),
        (any::<u64>(), any::<u64>(), any::<Option<u64>>(), any::<Option<u64>>(), 0..3usize).prop_map(
            |(task, container, max_lag_items, max_lag_ts, prefetch)| Op::AttachInput {
                task,
                container,
                max_lag_items,
                max_lag_ts,
                prefetch: stampede_core::Prefetch::ALL[prefetch],
            }
        ),
        (any::<u64>(), any::<u64>()).prop_map(|(task, container)| Op::AttachOutput { task, container }),
        any::<u64>().prop_map(|connection| Op::Detach { connection }),
        (any::<u64>(), ts(), text(), proptest::option::of(any::<u32>()), any::<u64>()).prop_map(
            |(connection, ts, codec, refcount, wait_us)| Op::Put { connection, ts, codec, refcount, wait_us }
        ),
        (any::<u64>(), selector(), any::<u64>()).prop_map(|(connection, selector, wait_us)| Op::Get {
            connection,
            selector,
            wait_us
        }),
        (any::<u64>(), ts(), ts()).prop_map(|(connection, t0, t1)| Op::GetRange { connection, t0, t1 }),
        (any::<u64>(), ts()).prop_map(|(connection, ts)| Op::Consume { connection, ts }),
        (any::<u64>(), ts()).prop_map(|(connection, ts)| Op::ConsumeUntil { connection, ts }),
        (any::<u64>(), ts(), text(), any::<u64>()).prop_map(|(connection, ts, codec, wait_us)| Op::QueuePut {
            connection,
            ts,
            codec,
            wait_us
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(connection, wait_us)| Op::QueueGet { connection, wait_us }),
        (any::<u64>(), proptest::option::of(any::<u64>()), ts()).prop_map(|(connection, seq, ts)| Op::QueueConsume {
            connection,
            seq,
            ts
        }),
        Just(Op::TsMin),
        Just(Op::Stats),
        Just(Op::Collect),
        Just(Op::TraceClock),
        Just(Op::MeshTime),
        Just(Op::CheckInvariants),
        any::<u64>().prop_map(|container| Op::Timestamps { container }),
        any::<u64>().prop_map(|container| Op::Settledness { container }),
        any::<u64>().prop_map(|container| Op::CloseProducers { container }),
        any::<u64>().prop_map(|connection| Op::Demand { connection }),
        (any::<u64>(), proptest::option::of(selector()), any::<u64>())
            .prop_map(|(connection, selector, wait_us)| Op::WaitChanged { connection, selector, wait_us }),
        any::<u64>().prop_map(|wait_us| Op::WaitProgress { wait_us }),
        (any::<u64>(), text()).prop_map(|(task, name)| Op::SetTaskName { task, name }),
        Just(Op::Graph),
        (any::<u64>(), text(), peer()).prop_map(|(task, to_node, to)| Op::MoveTask { task, to_node, to }),
        (peer(), any::<u64>(), peer(), any::<i64>()).prop_map(|(from, id, to, virtual_time)| Op::TakeOverTask {
            from_node: "a".into(),
            from,
            id,
            to,
            virtual_time,
            proof: [id as u8; 16],
        }),
    ]
}

fn peer() -> impl Strategy<Value = stampede_core::Peer> {
    (any::<u64>(), any::<u64>()).prop_map(|(id, incarnation)| stampede_core::Peer { id, incarnation })
}

fn graph() -> impl Strategy<Value = Graph> {
    let connection = (any::<u64>(), text(), any::<bool>(), any::<u64>(), any::<u64>()).prop_map(
        |(id, container, input, items, skipped)| {
            let kind = if input { ConnectionKind::Input } else { ConnectionKind::Output };
            // An input's tape on its node: one access that says what was read.
            let tape = input.then(|| {
                let mut tape = stampede_core::Tape::default();
                let got = (items % 2 == 0).then_some(skipped as i64);
                let selector = stampede_core::Selector::At(skipped as i64);
                tape.record(stampede_core::tape::Access::Get { selector, got }, items);
                tape
            });
            let prefetch = input.then(|| {
                let policy = stampede_core::Prefetch::ALL[(items % 3) as usize];
                stampede_core::prefetch::Pushes { policy, notices: items, pushed: items, used: skipped.min(items) }
            });
            ConnectionView { id, container, kind, items, skipped, tape, prefetch }
        },
    );
    let task = (
        any::<u64>(),
        proptest::option::of(text()),
        proptest::option::of(text()),
        ts(),
        ts(),
        proptest::collection::vec(connection, 0..3),
    )
        .prop_map(|(id, name, session, virtual_time, visibility, connections)| TaskView {
            id,
            name,
            session,
            virtual_time,
            visibility,
            connections,
        });
    let holder = (0u8..4, any::<u64>(), text()).prop_map(|(kind, id, name)| match kind {
        0 => Holder::Task { id },
        1 => Holder::Connection { id },
        2 => Holder::Queue { name },
        _ => Holder::Node { peer: id },
    });
    let container = (text(), proptest::option::of(any::<u64>()), proptest::option::of(text()), any::<u64>()).prop_map(
        |(name, capacity, codec, n)| ContainerView {
            name,
            kind: "channel".into(),
            capacity,
            max_bytes: capacity,
            codec,
            description: String::new(),
            live_items: n,
            live_bytes: n,
            puts: n,
            gets: n,
            reclaimed: n,
            dropped: n,
            claim: None,
        },
    );
    (
        proptest::option::of(text()),
        ts(),
        proptest::collection::vec(task, 0..3),
        proptest::collection::vec(container, 0..3),
        proptest::collection::vec(holder, 0..3),
    )
        .prop_map(|(node, ts_min, tasks, containers, held_by)| Graph { node, ts_min, tasks, containers, held_by })
}

fn item_header() -> impl Strategy<Value = ItemHeader> {
    (ts(), text(), 0u64..64).prop_map(|(ts, codec, len)| ItemHeader { ts, codec, len })
}

fn wire_error() -> impl Strategy<Value = WireError> {
    prop_oneof![
        (text(), text(), ts(), text(), ts()).prop_map(|(op, name, ts, what, limit)| WireError::BelowVisibility {
            op,
            name,
            ts,
            what,
            limit
        }),
        (text(), ts()).prop_map(|(name, ts)| WireError::DuplicateTimestamp { name, ts }),
        (text(), text(), any::<bool>()).prop_map(|(name, reason, can_never_fit)| WireError::Full {
            name,
            ts: 1,
            reason,
            can_never_fit
        }),
        (text(), selector(), proptest::option::of(ts()), proptest::option::of(ts()), any::<bool>()).prop_map(
            |(name, selector, previous, next, settled)| WireError::NotAvailable {
                op: "get".into(),
                name,
                selector,
                previous,
                next,
                settled
            }
        ),
        (text(), text()).prop_map(|(name, reason)| WireError::Closed { name, reason }),
        (text(), text(), text()).prop_map(|(op, name, reason)| WireError::Unreachable { op, name, reason }),
        (text(), text(), text(), text()).prop_map(|(op, name, right, reason)| WireError::PermissionDenied {
            op,
            name,
            right,
            reason
        }),
        (text(), text(), text()).prop_map(|(op, name, reason)| WireError::Storage { op, name, reason }),
    ]
}

fn stats() -> impl Strategy<Value = Stats> {
    (any::<u64>(), any::<u64>(), proptest::option::of(ts()), ts()).prop_map(|(a, b, claim, ts_min)| Stats {
        live_items: a as usize,
        live_bytes: b as usize,
        reclaimed: a ^ b,
        puts: a,
        gets: b,
        inputs: 1,
        outputs: 2,
        tombstones: 3,
        tombstone_runs: 4,
        claim,
        ts_min,
    })
}

/// A reply and a payload consistent with it.
fn reply() -> impl Strategy<Value = (Reply, Vec<u8>)> {
    let plain = prop_oneof![
        (
            (text(), text(), any::<u64>(), any::<u64>(), any::<u64>(), proptest::option::of(peer())),
            (proptest::option::of(text()), proptest::collection::vec(any::<(u16, u16)>(), 0..3))
        )
            .prop_map(
                |((node, zid, liveliness_timeout_ms, payload_bytes_max, wait_slice_ms, mesh), (unix, tcp))| {
                    Reply::Hello(Hello {
                        node,
                        zid,
                        liveliness_timeout_ms,
                        payload_bytes_max,
                        wait_slice_ms,
                        mesh,
                        direct: DirectPath { unix, tcp },
                    })
                }
            ),
        any::<[u8; 16]>().prop_map(Reply::Opened),
        wire_error().prop_map(Reply::Error),
        outcome().prop_map(Reply::Outcome),
    ]
    .prop_map(|reply| (reply, Vec::new()));
    let carrying = prop_oneof![
        item_header().prop_map(Outcome::Item),
        proptest::collection::vec(item_header(), 0..4).prop_map(Outcome::Items),
        (any::<u64>(), item_header()).prop_map(|(seq, item)| Outcome::QueueItem { seq, item }),
    ]
    .prop_map(|outcome| {
        let len = match &outcome {
            Outcome::Item(item) | Outcome::QueueItem { item, .. } => item.len,
            Outcome::Items(items) => items.iter().map(|i| i.len).sum(),
            _ => 0,
        };
        let payload = (0..len).map(|i| i as u8).collect();
        (Reply::Outcome(outcome), payload)
    });
    prop_oneof![plain, carrying]
}

/// An outcome that carries no item.
fn outcome() -> impl Strategy<Value = WireOutcome> {
    prop_oneof![
        (peer(), any::<u64>(), any::<i64>(), any::<[u8; 16]>())
            .prop_map(|(from, id, visibility, proof)| Outcome::Moved { from, id, visibility, proof }),
        Just(Outcome::Done),
        (".{0,20}", any::<u64>(), any::<u64>()).prop_map(|(host, received_ns, replied_ns)| Outcome::TraceClock {
            host,
            received_ns,
            replied_ns
        }),
        proptest::collection::vec((text(), any::<bool>(), proptest::option::of(text())), 0..4).prop_map(|listing| {
            Outcome::Listing(
                listing.into_iter().map(|(name, queue, node)| stampede_core::Listed { name, queue, node }).collect(),
            )
        }),
        (any::<[u64; 3]>(), any::<bool>()).prop_map(|([received_ns, replied_ns, epoch_ns], synced)| {
            Outcome::MeshTime(stampede_core::ClockReading { received_ns, replied_ns, epoch_ns, synced })
        }),
        (any::<u64>(), any::<bool>(), text(), proptest::option::of(any::<u64>())).prop_map(
            |(id, queue, name, capacity)| Outcome::Container(ContainerInfo {
                id,
                queue,
                name,
                capacity,
                bytes_max: None,
                retention: if queue { Retention::History } else { Retention::CurrentReaders },
                codec: (!queue).then(|| "npy".to_owned()),
                description: String::new(),
            })
        ),
        any::<u64>().prop_map(Outcome::Handle),
        (ts(), ts()).prop_map(|(virtual_time, visibility)| Outcome::Times { virtual_time, visibility }),
        proptest::collection::vec(text(), 0..5).prop_map(Outcome::Names),
        proptest::collection::vec(ts(), 0..5).prop_map(Outcome::Timestamps),
        (ts(), any::<bool>())
            .prop_map(|(settled_below, producers_closed)| Outcome::Settledness { settled_below, producers_closed }),
        ts().prop_map(Outcome::Timestamp),
        stats().prop_map(Outcome::Stats),
        (ts(), any::<u64>(), any::<u64>(), proptest::option::of(any::<[u64; 4]>())).prop_map(
            |(ts_min, containers, claims, budget)| Outcome::RuntimeStats {
                ts_min,
                containers,
                claims,
                budget: budget.map(|[node_live_bytes, node_max_bytes, session_live_bytes, session_max_bytes]| {
                    BudgetUse { node_live_bytes, node_max_bytes, session_live_bytes, session_max_bytes }
                }),
            }
        ),
        any::<u64>().prop_map(Outcome::Count),
        graph().prop_map(Outcome::Graph),
    ]
}

/// A byte-level change to a message: flip, truncate, insert or overwrite.
#[derive(Clone, Debug)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Truncate { at: usize },
    Insert { at: usize, byte: u8 },
    Set { at: usize, byte: u8 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
    ]
}

fn mutate(message: &mut Vec<u8>, mutations: &[Mutation]) {
    for m in mutations {
        let len = message.len().max(1);
        match *m {
            Mutation::Flip { at, bit } => {
                if let Some(b) = message.get_mut(at % len) {
                    *b ^= 1 << bit;
                }
            }
            Mutation::Truncate { at } => message.truncate(at % len),
            Mutation::Insert { at, byte } => message.insert(at % (message.len() + 1), byte),
            Mutation::Set { at, byte } => {
                if let Some(b) = message.get_mut(at % len) {
                    *b = byte;
                }
            }
        }
    }
}

fn with_payload(header: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    let mut message = header;
    message.extend_from_slice(payload);
    message
}

proptest! {
    // PROPTEST_CASES=n runs longer (docs/CHECKS.md).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every request decodes to what was encoded, with its payload (if it carries one) intact.
    #[test]
    fn requests_round_trip(session in "[0-9a-f]{0,32}", secret in any::<[u8; 16]>(), seq in any::<u64>(), floor in any::<u64>(), acks in proptest::collection::vec(any::<u64>(), 0..ACKS_MAX), request in request(), payload in proptest::collection::vec(any::<u8>(), 0..32)) {
        let opened = acks.iter().take(OPENED_MAX).map(|&n| Opened { connection: n, ts: n as i64, ago_us: n / 3 }).collect();
        let consumed =
            acks.iter().take(CONSUMED_MAX).map(|&n| Consumed { connection: n / 5, ts: -(n as i64), until: n % 2 == 0, number: n }).collect();
        let header = RequestHeader { seq, acks, floor, opened, consumed, ..RequestHeader::new(session, secret, request) };
        let payload = if header.request.carries_payload() { payload } else { Vec::new() };
        let message = with_payload(encode(&header), &payload);
        let (decoded, rest) = decode_request(&message).expect("a well-formed request decodes");
        prop_assert_eq!(decoded, header);
        prop_assert_eq!(rest, &payload[..]);
    }

    /// Every reply decodes to what was encoded, with its payload intact.
    #[test]
    fn replies_round_trip((reply, payload) in reply()) {
        let message = with_payload(encode(&reply), &payload);
        let (decoded, rest) = decode_reply(&message).expect("a well-formed reply decodes");
        prop_assert_eq!(decoded, reply);
        prop_assert_eq!(rest, &payload[..]);
    }

    /// Mutated requests and replies decode to something or to a typed error; never a panic. A
    /// decoded request always respects the header bound and the payload rule.
    #[test]
    fn mutated_messages_never_panic(request in request(), (reply, payload) in reply(),
                                    mutations in proptest::collection::vec(mutation(), 1..6)) {
        let header = RequestHeader::new("ab12", [7; 16], request);
        let mut message = with_payload(encode(&header), if header.request.carries_payload() { &payload } else { &[] });
        mutate(&mut message, &mutations);
        if let Ok((decoded, rest)) = decode_request(&message) {
            prop_assert!(message.len() - rest.len() <= REQUEST_HEADER_BYTES_MAX);
            prop_assert!(rest.is_empty() || decoded.request.carries_payload());
        }
        let mut message = with_payload(encode(&reply), &payload);
        mutate(&mut message, &mutations);
        let _ = decode_reply(&message);
    }

    /// Push events round trip with their pushed payload; mutated, they decode to something or to
    /// a typed error, never a panic, and what decodes has the payload its header declares.
    #[test]
    fn push_events_round_trip_and_never_panic(connection in any::<u64>(), ts in any::<i64>(), newest in any::<i64>(), payload in proptest::collection::vec(any::<u8>(), 0..64), pushed: bool, mutations in proptest::collection::vec(mutation(), 1..6)) {
        let notice = stampede_core::Notice { ts, newest, pushed };
        let item = pushed.then(|| ItemHeader { ts, codec: "raw".into(), len: payload.len() as u64 });
        let payload = if pushed { payload } else { Vec::new() };
        let event = PushEvent::Put { seq: connection / 2, connection, notice, item };
        let mut message = with_payload(encode(&event), &payload);
        let (decoded, rest) = decode_push(&message).expect("a well-formed push decodes");
        prop_assert_eq!(decoded, event);
        prop_assert_eq!(rest, &payload[..]);
        mutate(&mut message, &mutations);
        if let Ok((PushEvent::Put { item, .. }, rest)) = decode_push(&message) {
            prop_assert_eq!(item.map_or(0, |item| item.len), rest.len() as u64);
        }
    }

    /// Random bytes (with the right version byte or not) never make decoding panic.
    #[test]
    fn random_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..256), versioned: bool) {
        if versioned && !bytes.is_empty() {
            bytes[0] = VERSION;
        }
        if let Err(DecodeError::Version { found }) = decode_request(&bytes) {
            prop_assert_ne!(found, VERSION);
        }
        let _ = decode_reply(&bytes);
        let _ = decode_push(&bytes);
    }
}

/// A header longer than the bound is refused, even when it is otherwise well formed.
#[test]
fn oversized_request_header_is_refused() {
    let header = RequestHeader::new("ab", [0; 16], Op::Lookup { name: "x".repeat(20_000) }.into());
    assert!(matches!(decode_request(&encode(&header)), Err(DecodeError::HeaderTooLarge { .. })));
}

/// Bytes after a request that carries no payload, or item lengths that do not add up, are refused.
#[test]
fn stray_payload_is_refused() {
    let header = RequestHeader::new("ab", [0; 16], Op::TsMin.into());
    assert!(matches!(decode_request(&with_payload(encode(&header), b"x")), Err(DecodeError::Payload(_))));
    let reply = Reply::Outcome(Outcome::Item(ItemHeader { ts: 1, codec: "raw".into(), len: 3 }));
    assert!(matches!(decode_reply(&with_payload(encode(&reply), b"ab")), Err(DecodeError::Payload(_))));
    let items = Reply::Outcome(Outcome::Items(vec![
        ItemHeader { ts: 1, codec: "raw".into(), len: u64::MAX },
        ItemHeader { ts: 2, codec: "raw".into(), len: 2 },
    ]));
    assert!(matches!(decode_reply(&encode(&items)), Err(DecodeError::Payload(_))));
}
