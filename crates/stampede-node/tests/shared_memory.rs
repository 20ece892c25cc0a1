//! Large payloads through shared memory on the direct Unix socket (`stampede_wire::shared`):
//! a large item is passed as a sealed segment from the putting client to the node and from the
//! node to the getting client, never copied on the way; every segment goes once nothing holds
//! its item; hostile descriptors get a typed error and the node serves on.

mod support;

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use stampede::{ConnectOptions, Container, Error, InputOptions, Limits, Payload, Prefetch, INFINITY};
use stampede_wire::shared::{self, SEALS, SHARED_BYTES_MIN};
use stampede_wire::{decode_reply, encode, Op, Reply, Request, RequestHeader, FRAME_LENGTH_BYTES};
use support::{direct_connection, raw_connection, with_watchdog, TestNode, CONNECT_TIMEOUT};

/// A 6 MB frame, a borrowed one copied in, a small one and a queue's item from one client to
/// another on the node's host: the large ones arrive as segments (what the getter holds is a mapping it was
/// passed), equal to what was put; the small one and a zenoh-only getter's copy are bytes. Once
/// every item is consumed and reclaimed and the items are dropped, no segment is left.
#[test]
fn a_large_item_is_passed_as_shared_memory_from_putter_to_getter() {
    with_watchdog("a_large_item_is_passed_as_shared_memory_from_putter_to_getter", || {
        let node = TestNode::new();
        let baseline = shared::segments();
        let producer = node.client();
        let consumer = node.client();
        let zenoh_only = ConnectOptions { timeout: Some(CONNECT_TIMEOUT), zenoh_only: true, ..Default::default() };
        let remote_reader = stampede::connect_with(&node.endpoint, &zenoh_only).unwrap();
        let frames = producer.create_channel("frames", Limits::unbounded()).unwrap();
        let reader = consumer.task(INFINITY).unwrap();
        let inp = reader.attach_input(&channel(&consumer, "frames")).unwrap();
        let remote_task = remote_reader.task(INFINITY).unwrap();
        let remote_channel = channel(&remote_reader, "frames");
        let remote_inp = remote_task.attach_input(&remote_channel).unwrap();
        let ts0 = producer.ts_min();
        let writer = producer.task(ts0).unwrap();
        let out = writer.attach_output(&frames).unwrap();
        let frame: Vec<u8> = (0..6 * 1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
        let borrowed: Vec<u8> = (0..SHARED_BYTES_MIN as u32).map(|i| (i % 13) as u8).collect();
        // How many of the puts and gets came on the direct path: a request that came through zenoh
        // carries bytes, never a segment (said when the check below fails).
        let before_puts = node.node.direct_requests();
        out.put(ts0, frame.clone()).unwrap();
        out.put(ts0 + 1, &borrowed[..]).unwrap();
        out.put(ts0 + 2, vec![7u8; SHARED_BYTES_MIN - 1]).unwrap();
        let direct_puts = node.node.direct_requests() - before_puts;
        drop((out, writer));

        let mut held = Vec::new();
        for (ts, expected, passed) in [(ts0, &frame, true), (ts0 + 1, &borrowed, true), (ts0 + 2, &vec![7u8; 0], false)]
        {
            let before_get = node.node.direct_requests();
            let item = inp.get(ts, Some(CONNECT_TIMEOUT)).unwrap();
            let direct_during_get = node.node.direct_requests() - before_get;
            if passed {
                assert_eq!(item.data().as_ref(), &expected[..], "ts {ts}: the bytes put");
            }
            assert_eq!(
                shared::descriptor(item.data()).is_some(),
                passed,
                "ts {ts}: passed as a segment (direct requests: {direct_puts} of the 3 puts, {direct_during_get} while \
                 the get ran; process segments {})",
                shared::segments()
            );
            let again = inp.get(ts, Some(CONNECT_TIMEOUT)).unwrap();
            assert_eq!(again.data(), item.data(), "a segment never changes");
            let copy = remote_inp.get(ts, Some(CONNECT_TIMEOUT)).unwrap();
            assert_eq!(copy.data(), item.data(), "over zenoh: the same bytes");
            assert!(shared::descriptor(copy.data()).is_none(), "over zenoh: bytes, not a segment");
            held.push(item);
            inp.consume(ts).unwrap();
            remote_inp.consume(ts).unwrap();
        }
        // A queue's item too, both ways.
        let jobs = producer.create_queue("jobs", Limits::unbounded()).unwrap();
        let job: Vec<u8> = (0..SHARED_BYTES_MIN as u32).map(|i| (i % 7) as u8).collect();
        let tq = producer.ts_min();
        producer.task(tq).unwrap().attach_output(&jobs).unwrap().put(tq, &job[..], None).unwrap();
        let worker = consumer.task(INFINITY).unwrap();
        let queue = match consumer.lookup("jobs").unwrap() {
            Container::Queue(queue) => queue,
            Container::Channel(_) => panic!("jobs is a queue"),
        };
        let jobs_in = worker.attach_input(&queue).unwrap();
        let taken = jobs_in.get(Some(CONNECT_TIMEOUT)).unwrap();
        assert_eq!(taken.item.data().as_ref(), &job[..], "the queue's item");
        assert!(shared::descriptor(taken.item.data()).is_some(), "a queue's large item is passed as a segment");
        jobs_in.consume(&taken).unwrap();
        drop((taken, jobs_in, worker));
        assert!(shared::segments() > baseline, "segments are held while their items are");
        drop(held);
        drop((inp, reader, remote_inp, remote_task));
        // The node reclaims the consumed items: their segments go with them.
        let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
        while shared::segments() > baseline && std::time::Instant::now() < deadline {
            producer.collect();
            // Reclaiming and dropping segments has no signal to the test: poll (bounded by the deadline).
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(shared::segments(), baseline, "every segment goes once its item is reclaimed and dropped");
        for rt in [producer, consumer, remote_reader] {
            rt.close();
        }
    })
}

/// A large frame pushed to a reader with prefetch reaches its cache on the direct path as a
/// shared-memory segment (the cache's answer maps the segment the producer put: no copy on the
/// way); a reader whose requests are zenoh queries is pushed the same bytes through the fabric.
#[test]
fn a_large_pushed_item_reaches_the_cache_as_a_segment() {
    with_watchdog("a_large_pushed_item_reaches_the_cache_as_a_segment", || {
        let node = TestNode::new();
        let producer = node.client();
        let frames = producer.create_channel("frames", Limits::unbounded()).unwrap();
        let mut ts = producer.ts_min();
        let writer = producer.task(ts).unwrap();
        let out = writer.attach_output(&frames).unwrap();
        let frame: Vec<u8> = (0..2 * SHARED_BYTES_MIN as u32).map(|i| (i % 241) as u8).collect();
        let newest = InputOptions { prefetch: Some(Prefetch::Newest), ..InputOptions::default() };
        let zenoh_only = ConnectOptions { timeout: Some(CONNECT_TIMEOUT), zenoh_only: true, ..Default::default() };
        let readers = [(node.client(), true), (stampede::connect_with(&node.endpoint, &zenoh_only).unwrap(), false)];
        for (rt, passed) in &readers {
            let reader = rt.task(INFINITY).unwrap();
            let inp = reader.attach_input_with(&channel(rt, "frames"), newest).unwrap();
            let answered = (0..20).find_map(|_| {
                out.put(ts, frame.clone()).unwrap();
                ts += 1;
                // Time for the push to arrive (a get before it asks the node, and the loop goes on).
                std::thread::sleep(Duration::from_millis(50));
                let before = support::pushes_used(rt, &reader);
                let item = inp.get(stampede::NEWEST_UNSEEN, Some(CONNECT_TIMEOUT)).unwrap();
                inp.consume_until(item.ts).unwrap();
                (support::pushes_used(rt, &reader) > before).then_some(item)
            });
            let item = answered.expect("a get answered by the cache within 20 frames");
            assert_eq!(item.data().as_ref(), &frame[..], "the frame put");
            assert_eq!(shared::descriptor(item.data()).is_some(), *passed, "a segment on the direct path only");
            if *passed {
                assert!(node.node.streamed_pushes() > 0, "pushed on the session's stream on the Unix socket");
            }
        }
    })
}

/// Sends `message` as a frame with `passed` descriptors; `None` when the node ended the
/// connection, else its reply.
fn exchange(stream: &mut UnixStream, message: &[u8], passed: &[&OwnedFd]) -> Option<Reply> {
    let mut frame = (message.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(message);
    if passed.is_empty() {
        stream.write_all(&frame).ok()?;
    } else {
        let fds: Vec<_> = passed.iter().map(|fd| fd.as_fd()).collect();
        let mut space = vec![std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
        assert!(control.push(rustix::net::SendAncillaryMessage::ScmRights(&fds)));
        let io = [std::io::IoSlice::new(&frame)];
        let sent = rustix::net::sendmsg(&*stream, &io, &mut control, rustix::net::SendFlags::NOSIGNAL).ok()?;
        stream.write_all(&frame[sent..]).ok()?;
    }
    let mut prefix = [0u8; FRAME_LENGTH_BYTES];
    stream.read_exact(&mut prefix).ok()?;
    let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(decode_reply(&body).expect("the node's reply decodes").0)
}

/// A memfd of `len` bytes, with `seals`.
fn memfd(len: usize, seals: rustix::fs::SealFlags) -> OwnedFd {
    use rustix::fs::MemfdFlags;
    let fd = rustix::fs::memfd_create("hostile", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, len as u64).unwrap();
    rustix::fs::fcntl_add_seals(&fd, seals).unwrap();
    fd
}

fn invalid_argument(reply: Option<Reply>, mentions: &str) {
    match reply.map(error) {
        Some(Some(Error::InvalidArgument { reason, .. })) => {
            assert!(reason.contains(mentions), "{reason:?} should mention {mentions:?}");
        }
        other => panic!("expected InvalidArgument mentioning {mentions:?}: {other:?}"),
    }
}

/// The error a reply carries.
fn error(reply: Reply) -> Option<Error> {
    match reply {
        Reply::Error(e) => Some(Error::from(e)),
        _ => None,
    }
}

fn channel(rt: &stampede::Runtime, name: &str) -> stampede::Channel {
    match rt.lookup(name).unwrap() {
        Container::Channel(channel) => channel,
        Container::Queue(_) => panic!("{name} is a channel"),
    }
}

/// Every descriptor a node cannot trust is refused before it is mapped, with a typed error on
/// the same connection: another kind of file, a memfd without the seals (its sender could
/// change or shrink it under readers), one larger than the node's payload bound, one passed
/// with a request that carries no payload or beside payload bytes. Two descriptors with one
/// frame end the connection; a stream of push events is refused to a session the node does not
/// have. The node serves on.
#[test]
fn hostile_descriptors_get_typed_errors_and_the_node_serves_on() {
    with_watchdog("hostile_descriptors_get_typed_errors_and_the_node_serves_on", || {
        let node = TestNode::with(|options| options.payload_bytes_max = 1 << 20);
        let (offered, mut stream) = raw_connection(&node);
        let put = |payload: &[u8]| {
            let request =
                Request::Op(Op::Put { connection: 1, ts: 5, codec: "raw".into(), refcount: None, wait_us: 0 });
            let mut message = encode(&RequestHeader::new("ab", [0; 16], request));
            message.extend_from_slice(payload);
            message
        };
        let hello = encode(&RequestHeader::new("", [0; 16], Request::Hello));
        let (socket, _peer) = UnixStream::pair().unwrap();
        invalid_argument(exchange(&mut stream, &put(b""), &[&OwnedFd::from(socket)]), "not a sealed memfd");
        let unsealed = memfd(4096, rustix::fs::SealFlags::empty());
        invalid_argument(exchange(&mut stream, &put(b""), &[&unsealed]), "not sealed");
        let shrinkable = memfd(4096, rustix::fs::SealFlags::WRITE | rustix::fs::SealFlags::GROW);
        invalid_argument(exchange(&mut stream, &put(b""), &[&shrinkable]), "not sealed");
        invalid_argument(exchange(&mut stream, &put(b""), &[&memfd(2 << 20, SEALS)]), "at most 1048576");
        let sealed = memfd(4096, SEALS);
        invalid_argument(exchange(&mut stream, &hello, &[&sealed]), "a payload passed with a hello request");
        invalid_argument(exchange(&mut stream, &put(b"xyz"), &[&sealed]), "3 bytes after a request");
        match exchange(&mut stream, &put(b""), &[&sealed]).map(error) {
            Some(Some(Error::Closed { .. })) => {}
            other => panic!("a well-formed passed put of no session: Closed, got {other:?}"),
        }
        assert!(exchange(&mut stream, &put(b""), &[&sealed, &memfd(4096, SEALS)]).is_none(), "two descriptors");
        // A stream of push events opens only for a live session of the node.
        let pushes = encode(&RequestHeader::new("ab", [0; 16], Request::Pushes));
        match exchange(&mut direct_connection(&offered), &pushes, &[]).map(error) {
            Some(Some(Error::Closed { .. })) => {}
            other => panic!("a stream of pushes for no session: Closed, got {other:?}"),
        }
        let rt = node.client();
        let frames = rt.create_channel("after", Limits::unbounded()).unwrap();
        let out = rt.task(rt.ts_min()).unwrap().attach_output(&frames).unwrap();
        out.put(rt.ts_min(), Payload::from(vec![1u8; SHARED_BYTES_MIN])).unwrap();
        rt.close();
    })
}
