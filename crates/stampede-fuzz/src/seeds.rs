//! The first inputs of each target's corpus, made by the project's own encoders and writers (so
//! the fuzzer starts from what real peers and files hold, not from noise): `cargo run -p
//! stampede-fuzz --bin seeds` writes them under `fuzz/corpus/<target>/`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stampede_core::prefetch::Prefetch;
use stampede_core::watch::WatchEvent;
use stampede_core::{Mesh, MeshLimits, Notice, Op, Outcome, Payload, Retention, Selector};
use stampede_engine::steward::Action;
use stampede_engine::{npy, Body, MeshLink, Runtime, Session, Steward, Unrestricted};
use stampede_record::ros2::cdr::CdrWriter;
use stampede_record::{Recorder, RecorderOptions};
use stampede_trace::file::{header, Chunk};
use stampede_trace::record::{Kind, Phase, Record};
use stampede_view::foxglove::Tick;
use stampede_wire::{encode, ItemHeader, PushEvent, ReclaimEvent, Reply, Request, RequestHeader};

use crate::engine::request;
use crate::mesh::{tag, ME, OTHERS};
use crate::steps::encode as steps;

/// The seeds of target `name` (none for a name no target has).
pub fn of(name: &str) -> Vec<Vec<u8>> {
    match name {
        "wire_request" => wire_requests(),
        "wire_reply" => wire_replies(),
        "engine_ops" => vec![engine_session()],
        "mesh_message" => vec![mesh_conversation()],
        "npy_header" => npy_payloads(),
        "disk_extent" => vec![disk_extent()],
        "trace_log" => vec![trace_logs()],
        "mcap_recording" => recordings(),
        "ros2_cdr" => vec![ros2_messages()],
        "viewer_message" => viewer_messages(),
        "item_views" => vec![items()],
        "c_api" => vec![c_calls()],
        _ => Vec::new(),
    }
}

fn wire_requests() -> Vec<Vec<u8>> {
    let put = Op::Put { connection: 1, ts: 7, codec: "raw".into(), refcount: None, wait_us: 1000 };
    let get = Op::Get { connection: 2, selector: Selector::NewestUnseen, wait_us: 1000 };
    vec![
        encode(&RequestHeader::new("", [0; 16], Request::Hello)),
        encode(&RequestHeader::new("ab12", [0; 16], Request::Close)),
        request(1, put, b"payload"),
        request(2, get, b""),
    ]
}

fn wire_replies() -> Vec<Vec<u8>> {
    let item = ItemHeader { ts: 3, codec: "raw".into(), len: 4 };
    let with_payload = |mut message: Vec<u8>| {
        message.extend_from_slice(b"abcd");
        message
    };
    let notice = Notice { ts: 3, newest: 3, pushed: true };
    vec![
        encode(&Reply::Opened([7; 16])),
        with_payload(encode(&Reply::Outcome(Outcome::Item(item.clone())))),
        with_payload(encode(&ReclaimEvent { container: Some(1), name: "c".into(), item: item.clone() })),
        with_payload(encode(&PushEvent::Put { seq: 0, connection: 2, notice, item: Some(item) })),
        encode(&WatchEvent::Created { name: "c".into(), container_kind: "channel".into(), node: None }),
    ]
}

/// A producer and a consumer in one session: made by running each operation on an engine, so
/// that the handles later requests name are those the engine gave.
fn engine_session() -> Vec<u8> {
    let tokio = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let runtime = Runtime::new();
    let session = Session::new("fuzz".into(), 64, 1 << 20);
    let mut messages = Vec::new();
    let mut run = |op: Op, payload: &[u8]| {
        messages.push((0, request(messages.len() as u64 + 1, op.clone(), payload)));
        match tokio.block_on(runtime.execute(&session, &Unrestricted, op, Body::Inline(payload))) {
            Ok(Outcome::Handle(handle)) => handle,
            Ok(Outcome::Container(info)) => info.id,
            _ => 0,
        }
    };
    let create = Op::CreateChannel {
        name: "cam".into(),
        capacity: Some(4),
        bytes_max: None,
        retention: Retention::default(),
        codec: None,
        description: String::new(),
    };
    let channel = run(create, b"");
    let queue =
        run(Op::CreateQueue { name: "jobs".into(), capacity: Some(4), bytes_max: None, description: "".into() }, b"");
    let producer = run(Op::Task { virtual_time: 0 }, b"");
    let consumer = run(Op::Task { virtual_time: 0 }, b"");
    let output = run(Op::AttachOutput { task: producer, container: channel }, b"");
    let attach_input = |container| Op::AttachInput {
        task: consumer,
        container,
        max_lag_items: None,
        max_lag_ts: None,
        prefetch: Prefetch::Off,
    };
    let input = run(attach_input(channel), b"");
    let queue_out = run(Op::AttachOutput { task: producer, container: queue }, b"");
    let queue_in = run(attach_input(queue), b"");
    for ts in 0..3 {
        run(Op::Put { connection: output, ts, codec: "raw".into(), refcount: None, wait_us: 0 }, b"frame");
        run(Op::QueuePut { connection: queue_out, ts, codec: "raw".into(), wait_us: 0 }, b"job");
    }
    run(Op::Get { connection: input, selector: Selector::OldestUnseen, wait_us: 0 }, b"");
    run(Op::GetRange { connection: input, t0: 0, t1: 2 }, b"");
    run(Op::Consume { connection: input, ts: 0 }, b"");
    run(Op::ConsumeUntil { connection: input, ts: 1 }, b"");
    run(Op::QueueGet { connection: queue_in, wait_us: 0 }, b"");
    run(Op::QueueConsume { connection: queue_in, seq: None, ts: 0 }, b"");
    run(Op::SetVirtualTime { task: producer, virtual_time: 5 }, b"");
    run(Op::SetVirtualTime { task: consumer, virtual_time: 2 }, b"");
    run(Op::Settledness { container: channel }, b"");
    run(Op::Demand { connection: input }, b"");
    run(Op::Collect, b"");
    run(Op::Detach { connection: input }, b"");
    run(Op::CloseTask { task: producer }, b"");
    run(Op::Destroy { container: channel }, b"");
    session.close();
    steps(&messages)
}

/// Another node's real messages to the fuzzed node: two stewards, the fuzzed node's as the target
/// makes it and another with a task of its own, talk until the other's door is open and its task
/// moves; what the other sends the fuzzed node are the steps, in order.
fn mesh_conversation() -> Vec<u8> {
    let steward = |peer| {
        let runtime = Runtime::new();
        let link = MeshLink::attach(&runtime, Mesh::new(peer, MeshLimits::default()), Arc::new(|| {})).unwrap();
        (runtime, Steward::new(link, Duration::from_millis(100), |i| i + 1, Default::default(), false))
    };
    let (other, (_, mut me), (other_runtime, mut them)) = (OTHERS[0], steward(ME), steward(OTHERS[0]));
    me.began(&[]);
    me.joined(other, Duration::ZERO);
    them.began(&[ME]);
    let mut out = vec![(tag::JOINED, vec![0])];
    let mut task = None;
    for round in 0..20u64 {
        let now = Duration::from_millis(round);
        them.look(true, now);
        if them.look(true, now) {
            let task = task.get_or_insert_with(|| other_runtime.task(10).unwrap());
            let _ = task.set_virtual_time(10 + round as i64);
        }
        them.flush();
        while let Some(action) = them.poll_action() {
            match action {
                Action::Send(transmit) => {
                    let mut body = vec![0];
                    body.extend(postcard::to_allocvec(&(&transmit.to, &transmit.message)).unwrap());
                    out.push((tag::MESSAGE, body));
                    me.message(other, &transmit.to, transmit.message, now);
                }
                Action::AskLiveliness(peer) => them.reported(peer, true, now),
                _ => {}
            }
        }
        me.flush();
        while let Some(action) = me.poll_action() {
            match action {
                Action::Send(transmit) => them.message(ME, &transmit.to, transmit.message, now),
                Action::AskLiveliness(peer) => me.reported(peer, true, now),
                _ => {}
            }
        }
        out.push((tag::TIME, 1u16.to_le_bytes().to_vec()));
    }
    out.push((tag::DEAD, vec![0]));
    steps(&out)
}

fn npy_payloads() -> Vec<Vec<u8>> {
    let array = |descr: &str, shape: &[usize], bytes: usize| {
        let mut payload = npy::encode_header(descr, shape).unwrap();
        payload.resize(payload.len() + bytes, 1);
        payload
    };
    vec![array("'|u1'", &[4, 4, 3], 48), array("'<f4'", &[2], 8), array("[('x', '<f8'), ('y', '<i2')]", &[3], 30)]
}

fn disk_extent() -> Vec<u8> {
    let mut extent = Vec::new();
    for (ts, data) in [(1, &b"first"[..]), (2, b"second item"), (9, b"")] {
        extent.extend(stampede_engine::disk::encode_record(ts, b"raw", data).0);
    }
    extent
}

/// Two processes' logs, each with a thread, names, records and a clock exchange.
fn trace_logs() -> Vec<u8> {
    let log = |host: &str, pid: u32| {
        let mut bytes = header(host, pid, "kiosk");
        let records = (0..4)
            .map(|i| Record { t: 1000 * i, kind: Kind::Put, phase: Phase::Begin, name: 1, ts: i, bytes: 16 })
            .collect();
        for chunk in [
            Chunk::Thread { tid: 1, name: "camera".into() },
            Chunk::Name { index: 1, name: "cam".into() },
            Chunk::Records { tid: 1, records },
        ] {
            bytes.extend(chunk.encode());
        }
        bytes
    };
    steps(&[(0, log("a", 1)), (0, log("b", 2))])
}

/// A recording, a ROS 2 bag and a recording with Foxglove's schemas, each of a frame, boxes and
/// text, written by the recorder.
fn recordings() -> Vec<Vec<u8>> {
    let options = [
        RecorderOptions::default(),
        RecorderOptions { ros2: Some(Tick::Nanos), ..RecorderOptions::default() },
        RecorderOptions { foxglove: Some(Tick::DEFAULT), ..RecorderOptions::default() },
    ];
    options
        .into_iter()
        .map(|options| {
            let rt = stampede::Runtime::new();
            let path = std::env::temp_dir().join(format!("stampede-seed-{}.mcap", std::process::id()));
            let task = rt.task(0).unwrap();
            let items = items_of_each_kind();
            let outputs: Vec<_> = items
                .iter()
                .map(|(name, _, _)| {
                    task.attach_output(&rt.create_channel(name, stampede::Limits::unbounded()).unwrap())
                })
                .collect::<stampede::Result<_>>()
                .unwrap();
            // Channels first, so that the recorder follows each from its start.
            let recorder = Recorder::start(&rt, &[String::new()], &path, options).unwrap();
            for (output, (_, codec, data)) in outputs.iter().zip(items) {
                output.put(1, Payload { data: Bytes::from(data), codec: stampede::Codec::from_name(codec) }).unwrap();
            }
            task.close();
            recorder.stop().unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            bytes
        })
        .collect()
}

/// A 2×2 RGB frame, an overlay with one box, and a line of text.
fn items_of_each_kind() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut frame = npy::encode_header("'|u1'", &[2, 2, 3]).unwrap();
    frame.extend([200; 12]);
    let boxes = br#"{"boxes": [{"x": 0, "y": 0, "w": 1, "h": 1, "label": "person"}]}"#.to_vec();
    vec![("cam", "npy", frame), ("boxes", "json", boxes), ("log", "utf8", b"hello".to_vec())]
}

/// A ROS 2 image (tag 0) and string (tag 1), and a stamped point (tag 2).
fn ros2_messages() -> Vec<u8> {
    let stamped = |w: &mut CdrWriter| {
        w.i32(1);
        w.u32(500);
        w.string("camera");
    };
    let mut image = CdrWriter::default();
    stamped(&mut image);
    image.u32(2);
    image.u32(2);
    image.string("rgb8");
    image.u8(0);
    image.u32(6);
    image.bytes(&[9; 12]);
    let mut text = CdrWriter::default();
    text.string("hello");
    let mut point = CdrWriter::default();
    stamped(&mut point);
    steps(&[(0, image.finish()), (1, text.finish()), (2, point.finish())])
}

fn viewer_messages() -> Vec<Vec<u8>> {
    [
        r#"{"op":"subscribe","subscriptions":[{"id":1,"channelId":3}]}"#,
        r#"{"op":"unsubscribe","subscriptionIds":[1]}"#,
        r#"{"op":"advertise","channels":[]}"#,
        "Basic YW5uOnBhOnNz",
    ]
    .map(|text| text.as_bytes().to_vec())
    .to_vec()
}

/// An item of each kind, tagged with its codec as [`crate::views::items`] reads tags.
fn items() -> Vec<u8> {
    let tags = [("npy", 0), ("json", 1), ("utf8", 2)];
    let of_each = items_of_each_kind();
    let steps_of: Vec<(u8, Vec<u8>)> =
        of_each.into_iter().map(|(_, codec, data)| (tags.iter().find(|(c, _)| *c == codec).unwrap().1, data)).collect();
    steps(&steps_of)
}

/// A C program's calls (steps of `crate::capi`): a channel and a queue, a task with connections
/// to both, puts (raw and `.npy`), gets by each selector, a range, consumes, a `.npy` header, the
/// counters, a watch, names, GC handlers, a task's name and time, and a destroy.
fn c_calls() -> Vec<u8> {
    let ts = |t: i16| {
        let [low, high] = t.to_le_bytes();
        vec![0, low, high]
    };
    let text = |t: &[u8]| [&[t.len() as u8][..], t].concat();
    let npy_item = npy_payloads().swap_remove(1);
    let step = |tag: u8, parts: &[&[u8]]| (tag, parts.concat());
    steps(&[
        step(0, &[&[0, 0xFF, 0xFF], &text(b"cam")]),
        step(1, &[&[0, 4, 0xFF], &text(b"cam/tracks")]),
        step(3, &[&[0], &ts(0)]),
        step(4, &[&[6, 0, 0, 0]]),
        step(4, &[&[0, 0, 0, 0]]),
        step(4, &[&[1, 0, 0, 0]]),
        step(4, &[&[3, 0, 0, 0]]),
        step(5, &[&[0], &ts(1), &[0xFF, 0, 0], &text(b"raw"), b"frame one"]),
        step(5, &[&[0], &ts(2), &[2, 0, 0], &text(b"npy"), &npy_item]),
        step(6, &[&[0, 0], &ts(1), &[0, 0]]),
        step(6, &[&[0, 2], &ts(0), &[0, 0]]),
        step(7, &[&[0], &ts(0), &ts(10), &[0]]),
        step(8, &[&[0, 0], &ts(1), &[0]]),
        step(8, &[&[0, 1], &ts(2), &[0]]),
        step(9, &[&[0, 0], &ts(5), &[0, 0], &text(b"raw"), b"box"]),
        step(9, &[&[1, 0], &ts(0), &[0, 0]]),
        step(9, &[&[2, 0], &ts(0), &[0, 0, 3]]),
        step(9, &[&[3, 0], &ts(5), &[0, 0]]),
        step(10, &[&[0, 16, 4], &npy_item]),
        step(11, &[&[0, 0, 0, 0]]),
        step(13, &[&[0, 0, 0], &text(b"")]),
        step(13, &[&[1, 0, 0], &text(b""), &[0]]),
        step(13, &[&[2, 0, 0], &text(b"cam")]),
        step(13, &[&[3, 0, 0xF1], &text(b""), &[0, 0]]),
        step(3, &[&[2], &ts(3), &[0]]),
        step(3, &[&[3], &ts(0), &[0], &text(b"main"), &[0]]),
        step(12, &[&[9, 0, 0]]),
        step(12, &[&[7, 0]]),
    ])
}
