//! Recording and replay: every item comes back byte for byte with its timestamp and codec, on
//! the embedded runtime and through a node; the recorder's claim keeps what it has not written;
//! a file cut off is read up to its last chunk; bad files, names and options give typed errors.

#[path = "../../stampede/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::thread;
use std::time::Duration;

use stampede::{
    ChannelOptions, Codec, Error, Limits, Parts, QueueOptions, Runtime, Timestamp, INFINITY, OLDEST_UNSEEN,
};
use stampede_record::{replay, RecordError, Recorder, RecorderOptions, Recording, ReplayOptions};
use support::{eventually, with_watchdog};

const LONG: Option<Duration> = Some(Duration::from_secs(20));
/// Longest wait for the recorder to catch up with what a test did.
const EVENTUALLY: Duration = Duration::from_secs(20);

/// (channel, ts, codec, bytes) of every item, in the order read.
type Items = Vec<(String, Timestamp, String, Vec<u8>)>;

/// The items read from `path` until the end or an error, how the read ended, and whether the
/// file said it was cut off.
fn read_prefix(path: &Path) -> (Items, Result<(), RecordError>, Option<String>) {
    let mut recording = Recording::open(path).unwrap();
    let mut items = Vec::new();
    let read = recording.for_each(|item| {
        items.push((item.channel.meta.name.clone(), item.ts, item.codec().name().to_owned(), item.data));
        Ok(())
    });
    (items, read, recording.cut_off().map(str::to_owned))
}

fn read_all(path: &Path) -> Items {
    let (items, read, cut_off) = read_prefix(path);
    read.unwrap();
    assert_eq!(cut_off, None);
    items
}

fn sorted(mut items: Items) -> Items {
    items.sort();
    items
}

fn fast() -> ReplayOptions {
    ReplayOptions { rate: None, ..ReplayOptions::default() }
}

/// An npy frame of `n` bytes whose content depends on `ts`.
fn frame(ts: Timestamp, n: usize) -> Vec<u8> {
    let mut bytes = stampede::npy::encode_header("'|u1'", &[n]).unwrap();
    bytes.extend((0..n).map(|i| (i as i64 * 7 + ts) as u8));
    bytes
}

/// The scene's channels: frames (npy, declared, bounded), detections (json, declared), a log
/// (any codec).
fn scene_channels(rt: &Runtime) {
    let camera = ChannelOptions {
        codec: Some(Codec::Npy),
        description: "a camera".into(),
        ..Limits::items(16).with_bytes(1 << 20).into()
    };
    rt.create_channel("scene/camera", camera).unwrap();
    rt.create_channel("scene/boxes", ChannelOptions { codec: Some(Codec::Json), ..ChannelOptions::default() }).unwrap();
    rt.create_channel("scene/log", Limits::unbounded()).unwrap();
}

/// Puts `frames` steps of the scene into its channels: the log mixes utf8 and raw items, and
/// skipped frames come late, below detections already put. Returns what was put.
fn scene(rt: &Runtime, frames: Timestamp) -> Items {
    let producer = rt.task(rt.ts_min()).unwrap();
    let out = |name: &str| producer.attach_output(&rt.channel(name).unwrap()).unwrap();
    let (camera, boxes, log) = (out("scene/camera"), out("scene/boxes"), out("scene/log"));
    let mut put = Items::new();
    let mut record =
        |name: &str, ts: Timestamp, codec: &str, data: Vec<u8>| put.push((name.into(), ts, codec.into(), data));
    for ts in 0..frames {
        if ts % 4 != 1 {
            let data = frame(ts, 1000 + ts as usize);
            camera.put(ts, Parts { parts: &[&data], codec: Codec::Npy }).unwrap();
            record("scene/camera", ts, "npy", data);
        }
        let json = format!("{{\"ts\":{ts},\"x\":{}}}", ts * 3);
        boxes.put(ts, Parts { parts: &[json.as_bytes()], codec: Codec::Json }).unwrap();
        record("scene/boxes", ts, "json", json.into_bytes());
        if ts % 3 == 0 {
            log.put(ts, format!("line {ts}").as_str()).unwrap();
            record("scene/log", ts, "utf8", format!("line {ts}").into_bytes());
        } else if ts % 5 == 2 {
            let raw = vec![0u8, 1, 2, ts as u8];
            log.put(ts, &raw).unwrap();
            record("scene/log", ts, "raw", raw);
        }
        if ts % 4 == 3 {
            let late = ts - 2;
            let data = frame(late, 999);
            camera.put(late, Parts { parts: &[&data], codec: Codec::Npy }).unwrap();
            record("scene/camera", late, "npy", data);
        }
        producer.set_virtual_time((ts - 2).max(producer.virtual_time())).unwrap();
    }
    producer.close();
    put
}

fn record_scene(rt: &Runtime, path: &Path, frames: Timestamp, options: RecorderOptions) -> Items {
    let recorder = Recorder::start(rt, &["scene".into()], path, options).unwrap();
    let put = scene(rt, frames);
    let stats = recorder.stop().unwrap();
    assert_eq!(stats.items, put.len() as u64);
    assert_eq!(stats.channels.len(), 3);
    put
}

/// Every item put comes back from the file, and from a replay of it, with its timestamp, codec
/// and bytes; the late frames too.
#[test]
fn a_recording_and_its_replay_hold_every_item() {
    with_watchdog("a_recording_and_its_replay_hold_every_item", || {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first.mcap"), dir.path().join("second.mcap"));
        let rt = Runtime::new();
        scene_channels(&rt);
        let put = record_scene(&rt, &first, 80, RecorderOptions::default());
        let recorded = read_all(&first);
        assert_eq!(sorted(recorded.clone()), sorted(put));

        let target = Runtime::new();
        scene_channels(&target);
        let recorder = Recorder::start(&target, &["scene/".into()], &second, RecorderOptions::default()).unwrap();
        let stats = replay(&target, &first, &fast(), &mut |_| true).unwrap();
        assert_eq!((stats.items, stats.passes, stats.cut_off.clone()), (recorded.len() as u64, 1, None));
        recorder.stop().unwrap();
        assert_eq!(sorted(read_all(&second)), sorted(recorded));
    });
}

/// A replay into a runtime without the channels creates them as they were: codec, bounds,
/// description.
#[test]
fn a_replay_creates_channels_as_recorded() {
    with_watchdog("a_replay_creates_channels_as_recorded", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scene.mcap");
        let rt = Runtime::new();
        scene_channels(&rt);
        let put = record_scene(&rt, &path, 10, RecorderOptions::default());
        let target = Runtime::new();
        let keeper = target.task(0).unwrap(); // holds ts_min at 0: every replayed item stays
        replay(&target, &path, &fast(), &mut |_| true).unwrap();
        for name in ["scene/camera", "scene/boxes", "scene/log"] {
            let (was, is) = (rt.channel(name).unwrap().info(), target.channel(name).unwrap().info());
            assert_eq!((is.codec, is.limits, is.description), (was.codec, was.limits, was.description), "{name}");
            let mut expected: Vec<Timestamp> = put.iter().filter(|p| p.0 == name).map(|p| p.1).collect();
            expected.sort();
            assert_eq!(target.channel(name).unwrap().timestamps(), expected, "{name}");
        }
        keeper.close();
    });
}

/// A reader consuming at once would let items be reclaimed before a slower recorder sees them;
/// the recorder's connection holds them until written, so a bounded channel makes the producer
/// wait instead, and nothing is missed.
#[test]
fn the_recorder_misses_nothing_a_fast_consumer_lets_go() {
    with_watchdog("the_recorder_misses_nothing_a_fast_consumer_lets_go", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fast.mcap");
        let rt = Runtime::new();
        let ch = rt.create_channel("fast", Limits::items(4)).unwrap();
        let consumer = thread::spawn({
            let (rt, ch) = (rt.clone(), ch.clone());
            let reader = rt.task(INFINITY).unwrap();
            let input = reader.attach_input(&ch).unwrap();
            move || {
                for _ in 0..300 {
                    let item = input.get(OLDEST_UNSEEN, LONG).unwrap();
                    input.consume(item.ts).unwrap();
                }
                reader.close();
            }
        });
        let recorder = Recorder::start(&rt, &["fast".into()], &path, RecorderOptions::default()).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        for ts in 0..300 {
            out.put(ts, format!("{ts}").as_str()).unwrap();
            producer.set_virtual_time(ts + 1).unwrap();
        }
        consumer.join().unwrap();
        let stats = recorder.stop().unwrap();
        assert_eq!(stats.items, 300);
        let ts: Vec<Timestamp> = read_all(&path).iter().map(|item| item.1).collect();
        assert_eq!(ts, (0..300).collect::<Vec<_>>());
        assert!(ch.stats().live_items <= 1, "reclaimed once written: {:?}", ch.stats());
    });
}

/// The replay's producer follows the lowest timestamp still to come: a bounded channel whose
/// consumer takes items keeps room. (With the producer held at the first timestamp nothing would
/// be reclaimed and the fifth put would wait forever.)
#[test]
fn a_replay_lets_the_target_reclaim_as_it_goes() {
    with_watchdog("a_replay_lets_the_target_reclaim_as_it_goes", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.mcap");
        let rt = Runtime::new();
        scene_channels(&rt);
        let put = record_scene(&rt, &path, 200, RecorderOptions::default());
        let target = Runtime::new();
        let ch = target.create_channel("scene/camera", Limits::items(4)).unwrap();
        let frames = put.iter().filter(|p| p.0 == "scene/camera").count();
        let consumer = thread::spawn({
            let reader = target.task(INFINITY).unwrap();
            let input = reader.attach_input(&ch).unwrap();
            move || {
                let mut seen = Vec::new();
                while seen.len() < frames {
                    let item = input.get(OLDEST_UNSEEN, LONG).unwrap();
                    input.consume(item.ts).unwrap();
                    seen.push(item.ts);
                }
                seen
            }
        });
        let stats = replay(&target, &path, &fast(), &mut |_| true).unwrap();
        assert_eq!(stats.channels["scene/camera"], frames as u64);
        assert_eq!(consumer.join().unwrap().len(), frames);
    });
}

/// Loops shift each pass by the recording's span; remaps rename channels and their children;
/// an offset replays above a runtime's ts_min.
#[test]
fn loops_remaps_and_offsets() {
    with_watchdog("loops_remaps_and_offsets", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loop.mcap");
        let rt = Runtime::new();
        let ch = rt.create_channel("cam/a", Limits::unbounded()).unwrap();
        let recorder = Recorder::start(&rt, &["cam".into()], &path, RecorderOptions::default()).unwrap();
        let producer = rt.task(10).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        for ts in [10, 12, 11, 14] {
            out.put(ts, format!("{ts}").as_str()).unwrap();
        }
        producer.close();
        recorder.stop().unwrap();

        let target = Runtime::new();
        let keeper = target.task(0).unwrap();
        let options =
            ReplayOptions { passes: Some(3), remap: vec![("cam".into(), "copy/cam".into())], offset: 100, ..fast() };
        let stats = replay(&target, &path, &options, &mut |_| true).unwrap();
        assert_eq!((stats.items, stats.passes, stats.items_per_pass), (12, 3, 4));
        let expected: Vec<Timestamp> = (0..3).flat_map(|pass| [110, 111, 112, 114].map(|ts| ts + pass * 5)).collect();
        assert_eq!(target.channel("copy/cam/a").unwrap().timestamps(), expected);
        keeper.close();

        // Below ts_min: refused, saying which offset would do.
        let late = Runtime::new();
        let mover = late.task(0).unwrap();
        let out = mover.attach_output(&late.create_channel("other", Limits::unbounded()).unwrap()).unwrap();
        out.put(50, "x").unwrap();
        mover.close();
        let e = replay(&late, &path, &fast(), &mut |_| true).unwrap_err();
        assert!(matches!(&e, RecordError::TooLarge(m) if m.contains("offset of at least 41")), "{e}");
        assert_eq!(stampede_record::replay::remapped("cam", &options.remap), "copy/cam");
        assert_eq!(stampede_record::replay::remapped("camera", &options.remap), "camera");
    });
}

/// A file cut off anywhere (a recorder killed) reads as a prefix of the full recording, in
/// order, and says it was cut off; a replay of it puts that prefix.
#[test]
fn a_cut_off_recording_reads_up_to_its_last_chunk() {
    with_watchdog("a_cut_off_recording_reads_up_to_its_last_chunk", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("full.mcap");
        let rt = Runtime::new();
        scene_channels(&rt);
        let options = RecorderOptions { chunk_bytes: 8 << 10, ..RecorderOptions::default() };
        record_scene(&rt, &path, 60, options);
        let full = read_all(&path);
        let bytes = std::fs::read(&path).unwrap();
        let cut = dir.path().join("cut.mcap");
        let mut longest = 0;
        for len in (0..bytes.len()).step_by(bytes.len() / 97 + 1) {
            std::fs::write(&cut, &bytes[..len]).unwrap();
            let (prefix, read, cut_off) = read_prefix(&cut);
            match read {
                Ok(()) => assert!(cut_off.is_some(), "a file cut at {len} of {} says so", bytes.len()),
                Err(e) => assert!(len < 8 && matches!(e, RecordError::Corrupt { .. }), "cut at {len}: {e}"),
            }
            assert_eq!(prefix[..], full[..prefix.len()], "cut at {len}");
            longest = longest.max(prefix.len());
        }
        assert!(longest > full.len() / 2, "chunks are closed as the recording goes: {longest} of {}", full.len());
        std::fs::write(&cut, &bytes[..bytes.len() * 3 / 4]).unwrap();
        let stats = replay(&Runtime::new(), &cut, &fast(), &mut |_| true).unwrap();
        assert!(stats.cut_off.is_some() && stats.items > 0 && stats.items < full.len() as u64, "{stats:?}");
    });
}

/// Files that are not recordings, foreign encodings, queues, unknown names, bad rates and
/// missing directories: each a typed error saying what is wrong.
#[test]
fn bad_input_gives_typed_errors() {
    with_watchdog("bad_input_gives_typed_errors", || {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new();
        let nowhere = |e: RecordError| e;
        let missing = dir.path().join("missing.mcap");
        assert!(matches!(nowhere(Recording::open(&missing).err().unwrap()), RecordError::Io { .. }));
        let text = dir.path().join("text.mcap");
        std::fs::write(&text, "this is not a recording\n").unwrap();
        let e = replay(&rt, &text, &fast(), &mut |_| true).unwrap_err();
        assert!(matches!(e, RecordError::Corrupt { .. }), "{e}");

        // A file another tool wrote, with an encoding Stampede does not put back.
        let foreign = dir.path().join("foreign.mcap");
        let mut writer = mcap::Writer::new(std::io::BufWriter::new(std::fs::File::create(&foreign).unwrap())).unwrap();
        let id = writer.add_channel(0, "/tf", "ros1", &BTreeMap::new()).unwrap();
        let header = mcap::records::MessageHeader { channel_id: id, sequence: 0, log_time: 1, publish_time: 1 };
        writer.write_to_known_channel(&header, b"\x01\x02").unwrap();
        writer.finish().unwrap();
        drop(writer);
        let e = replay(&rt, &foreign, &fast(), &mut |_| true).unwrap_err();
        assert!(matches!(&e, RecordError::UnknownCodec { encoding, .. } if encoding == "ros1"), "{e}");

        rt.create_queue("jobs", QueueOptions::default()).unwrap();
        rt.create_channel("cam/x", Limits::unbounded()).unwrap();
        let out = dir.path().join("out.mcap");
        let e = Recorder::start(&rt, &["jobs".into()], &out, RecorderOptions::default()).err().unwrap();
        assert!(matches!(e, RecordError::Stampede(Error::InvalidArgument { .. })), "{e}");
        let e = Recorder::start(&rt, &["nothing".into()], &out, RecorderOptions::default()).err().unwrap();
        assert!(matches!(e, RecordError::Stampede(Error::NotFound { .. })), "{e}");
        let e = Recorder::start(&rt, &["cam".into()], dir.path().join("no/such/dir.mcap"), RecorderOptions::default())
            .err()
            .unwrap();
        assert!(matches!(e, RecordError::Io { .. }), "{e}");

        let recorder = Recorder::start(&rt, &["cam".into()], &out, RecorderOptions::default()).unwrap();
        recorder.stop().unwrap();
        for rate in [0.0, -1.0, f64::NAN, 1e9] {
            let e = replay(&rt, &out, &ReplayOptions { rate: Some(rate), ..fast() }, &mut |_| true).unwrap_err();
            assert!(matches!(e, RecordError::Stampede(Error::InvalidArgument { .. })), "{rate}: {e}");
        }
        // A replay into a queue of the recorded name.
        let empty_rt = Runtime::new();
        let ch = rt.channel("cam/x").unwrap();
        let recorder = Recorder::start(&rt, &["cam".into()], &out, RecorderOptions::default()).unwrap();
        let producer = rt.task(rt.ts_min()).unwrap();
        producer.attach_output(&ch).unwrap().put(rt.ts_min(), "x").unwrap();
        producer.close();
        recorder.stop().unwrap();
        empty_rt.create_queue("cam/x", QueueOptions::default()).unwrap();
        let e = replay(&empty_rt, &out, &fast(), &mut |_| true).unwrap_err();
        assert!(matches!(e, RecordError::Stampede(Error::InvalidArgument { .. })), "{e}");
        // Stopped by the caller.
        let e = replay(&Runtime::new(), &out, &fast(), &mut |_| false).unwrap_err();
        assert!(matches!(e, RecordError::Stopped), "{e}");
    });
}

/// Recording and replay through a node: the recorder and the replay are clients.
#[test]
fn recording_and_replay_work_through_a_node() {
    with_watchdog("recording_and_replay_work_through_a_node", || {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = format!("unixsock-stream/{}", dir.path().join("node.sock").display());
        let hosted = Runtime::new();
        let _node = stampede_node::Node::serve(hosted.engine().unwrap(), stampede_node::NodeOptions::listen(&endpoint))
            .unwrap();
        let client = stampede::connect(&endpoint, Some(Duration::from_secs(20))).unwrap();
        let path = dir.path().join("remote.mcap");
        scene_channels(&hosted);
        let recorder = Recorder::start(&client, &["scene".into()], &path, RecorderOptions::default()).unwrap();
        let put = scene(&hosted, 12);
        let stats = recorder.stop().unwrap();
        assert_eq!(stats.items, put.len() as u64);
        let recorded = read_all(&path);
        assert_eq!(sorted(recorded.clone()), sorted(put));

        let target = Runtime::new();
        let target_endpoint = format!("unixsock-stream/{}", dir.path().join("target.sock").display());
        let _target_node =
            stampede_node::Node::serve(target.engine().unwrap(), stampede_node::NodeOptions::listen(&target_endpoint))
                .unwrap();
        let keeper = target.task(0).unwrap();
        let target_client = stampede::connect(&target_endpoint, Some(Duration::from_secs(20))).unwrap();
        let stats = replay(&target_client, &path, &fast(), &mut |_| true).unwrap();
        assert_eq!(stats.items, recorded.len() as u64);
        for name in ["scene/camera", "scene/boxes", "scene/log"] {
            let mut expected: Vec<Timestamp> = recorded.iter().filter(|p| p.0 == name).map(|p| p.1).collect();
            expected.sort();
            assert_eq!(target.channel(name).unwrap().timestamps(), expected, "{name}");
        }
        keeper.close();
        client.close();
        target_client.close();
    });
}

/// Channels created under a recorded prefix after the recorder started are followed, and one
/// destroyed and created anew again; what such a channel let go before the recorder attached is
/// counted as missed, so recorded + missed is every put.
#[test]
fn channels_created_later_are_followed_and_gaps_counted() {
    with_watchdog("channels_created_later_are_followed_and_gaps_counted", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.mcap");
        let rt = Runtime::new();
        rt.create_channel("tracks/0", Limits::unbounded()).unwrap();
        let recorder = Recorder::start(&rt, &["tracks".into()], &path, RecorderOptions::default()).unwrap();
        let producer = rt.task(0).unwrap();
        let mut puts = 0;
        for round in 1..=3 {
            let name = format!("tracks/{round}");
            let ch = rt.create_channel(&name, Limits::unbounded()).unwrap();
            let out = producer.attach_output(&ch).unwrap();
            // Put and let go at once (nothing holds these), then wait for the recorder to attach.
            let ts = producer.virtual_time();
            out.put(ts, "early").unwrap();
            producer.set_virtual_time(ts + 1).unwrap();
            puts += 1;
            assert!(eventually(EVENTUALLY, || recorder.stats().channels.contains_key(&name)), "{name} followed");
            for k in 0..5 {
                let ts = producer.virtual_time();
                out.put(ts, format!("{round}.{k}").as_str()).unwrap();
                producer.set_virtual_time(ts + 1).unwrap();
                puts += 1;
            }
            if round == 2 {
                out.detach();
                ch.destroy().unwrap();
                let again = rt.create_channel(&name, Limits::unbounded()).unwrap();
                let out = producer.attach_output(&again).unwrap();
                assert!(
                    eventually(EVENTUALLY, || {
                        let ts = producer.virtual_time();
                        out.put(ts, "again").unwrap();
                        producer.set_virtual_time(ts + 1).unwrap();
                        puts += 1;
                        recorder.stats().channels[&name].items >= 7
                    }),
                    "{:?}",
                    recorder.stats()
                );
            }
        }
        producer.close();
        let stats = recorder.stop().unwrap();
        let missed: u64 = stats.channels.values().map(|c| c.missed).sum();
        assert_eq!(stats.items + missed, puts, "{stats:?}");
        assert!(stats.items >= 15, "{stats:?}");
        assert_eq!(read_all(&path).len() as u64, stats.items);
    });
}

/// Items put with a reference count that another reader uses up before the recorder gets them
/// are reclaimed early; the recorder counts them as missed: items + missed is every put.
#[test]
fn refcounted_items_another_reader_used_up_are_counted_missed() {
    with_watchdog("refcounted_items_another_reader_used_up_are_counted_missed", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refcount.mcap");
        let rt = Runtime::new();
        let ch = rt.create_channel("jobs", Limits::unbounded()).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let input = reader.attach_input(&ch).unwrap();
        let recorder = Recorder::start(&rt, &["jobs".into()], &path, RecorderOptions::default()).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        for ts in 0..200 {
            out.put_with(ts, format!("{ts}").as_str(), stampede::PutOptions { refcount: Some(1), timeout: None })
                .unwrap();
            // The other reader takes it at once (or finds the recorder took it first).
            if input.get(ts, Some(Duration::ZERO)).is_ok() {
                let _ = input.consume(ts);
            }
        }
        producer.close();
        let stats = recorder.stop().unwrap();
        let missed = stats.channels["jobs"].missed;
        assert_eq!(stats.items + missed, 200, "{stats:?}");
        assert_eq!(read_all(&path).len() as u64, stats.items);
        reader.close();
    });
}

/// `stop()` returns while a producer keeps putting: it writes what the channels held when it
/// was called (at least), not everything that comes after.
#[test]
fn stop_returns_while_producers_go_on() {
    with_watchdog("stop_returns_while_producers_go_on", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.mcap");
        let rt = Runtime::new();
        let ch = rt.create_channel("busy", Limits::items(64)).unwrap();
        let recorder = Recorder::start(&rt, &["busy".into()], &path, RecorderOptions::default()).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let producer = thread::spawn({
            let (rt, ch, done) = (rt.clone(), ch.clone(), done.clone());
            move || {
                let task = rt.task(0).unwrap();
                let out = task.attach_output(&ch).unwrap();
                let mut ts = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    match out.put_with(ts, vec![7u8; 4096], stampede::PutOptions { refcount: None, timeout: LONG }) {
                        Ok(()) => {
                            task.set_virtual_time(ts + 1).unwrap();
                            ts += 1;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                ts
            }
        });
        assert!(eventually(EVENTUALLY, || recorder.stats().items > 100));
        let at_stop = ch.timestamps().last().copied().unwrap_or(0);
        let stats = recorder.stop().unwrap(); // with the producer still putting
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let put = producer.join().unwrap();
        assert!(stats.channels["busy"].last_ts.unwrap() >= at_stop, "{stats:?}");
        assert!(stats.items < put as u64 || put as u64 == stats.items, "{stats:?} of {put}");
        let ts: Vec<Timestamp> = read_all(&path).iter().map(|item| item.1).collect();
        assert_eq!(ts, (0..ts.len() as Timestamp).collect::<Vec<_>>(), "a prefix, in order");
    });
}

/// Channels created and destroyed under the recorded prefix as fast as possible: the recorder
/// keeps running (a channel gone before it could attach is counted, not fatal), and every put is
/// recorded or counted missed.
#[test]
fn channels_that_come_and_go_do_not_stop_the_recorder() {
    with_watchdog("channels_that_come_and_go_do_not_stop_the_recorder", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("churn.mcap");
        let rt = Runtime::new();
        rt.create_channel("t/base", Limits::unbounded()).unwrap();
        let recorder = Recorder::start(&rt, &["t".into()], &path, RecorderOptions::default()).unwrap();
        let producer = rt.task(0).unwrap();
        let mut puts = 0u64;
        for round in 0..400 {
            let ch = rt.create_channel(&format!("t/x{}", round % 7), Limits::unbounded()).unwrap();
            let out = producer.attach_output(&ch).unwrap();
            for _ in 0..round % 3 {
                let ts = producer.virtual_time();
                out.put(ts, "x").unwrap();
                producer.set_virtual_time(ts + 1).unwrap();
                puts += 1;
            }
            if round % 50 == 0 {
                thread::sleep(Duration::from_millis(60)); // let the recorder attach to some
            }
            out.detach();
            ch.destroy().unwrap();
        }
        assert!(!recorder.is_finished(), "the recorder died: {:?}", recorder.stats());
        let stats = recorder.stop().unwrap();
        let missed: u64 = stats.channels.values().map(|c| c.missed).sum();
        // Channels that vanished between two looks are counted, not their puts.
        assert!(stats.items + missed <= puts, "{stats:?}");
        assert!(stats.items + missed == puts || stats.vanished > 0, "{stats:?}");
        assert!(stats.items + missed > 0 && stats.channels.len() > 1, "it followed some: {stats:?}");
    });
}

/// A replay held up by a full channel (here by its own order: a file whose later item is below
/// the earlier ones keeps the producer's virtual time, so nothing is reclaimed) still hears a
/// stop; a file that changes under a replay is an error, not a panic.
#[test]
fn a_blocked_replay_stops_and_a_changed_file_is_an_error() {
    with_watchdog("a_blocked_replay_stops_and_a_changed_file_is_an_error", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("order.mcap");
        let mut writer = mcap::Writer::new(std::io::BufWriter::new(std::fs::File::create(&path).unwrap())).unwrap();
        let meta = BTreeMap::from([("stampede.codec".to_owned(), "raw".to_owned())]);
        let a = writer.add_channel(0, "a", "raw", &meta).unwrap();
        let b = writer.add_channel(0, "b", "raw", &meta).unwrap();
        for (channel_id, ts) in [(a, 10), (a, 11), (a, 12), (b, 0)] {
            let header = mcap::records::MessageHeader { channel_id, sequence: 0, log_time: 1, publish_time: ts };
            writer.write_to_known_channel(&header, b"x").unwrap();
        }
        writer.finish().unwrap();
        drop(writer);
        let rt = Runtime::new();
        rt.create_channel("a", Limits::items(2)).unwrap();
        let started = std::time::Instant::now();
        let e = replay(&rt, &path, &fast(), &mut |_| started.elapsed() < Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, RecordError::Stopped), "{e}");

        let other = dir.path().join("other.mcap");
        let source = Runtime::new();
        let ch = source.create_channel("renamed", Limits::unbounded()).unwrap();
        let recorder = Recorder::start(&source, &["renamed".into()], &other, RecorderOptions::default()).unwrap();
        let t = source.task(0).unwrap();
        let out = t.attach_output(&ch).unwrap();
        for ts in 0..4 {
            out.put(ts, "y").unwrap();
        }
        t.close();
        recorder.stop().unwrap();
        let mut swapped = false;
        let e = replay(&Runtime::new(), &path, &fast(), &mut |_| {
            if !swapped {
                std::fs::copy(&other, &path).unwrap();
                swapped = true;
            }
            true
        })
        .unwrap_err();
        assert!(matches!(&e, RecordError::Corrupt { reason, .. } if reason.contains("changed")), "{e}");
    });
}

/// `stop()` returns while a producer keeps putting below an item already held (the stop writes
/// what the channel held when it was called, by exact gets, not "everything below the newest").
/// The producer stops only after `stop()` returned: a stop that waited for it would hang (the
/// watchdog fails the test).
#[test]
fn stop_returns_while_a_producer_puts_below_what_is_held() {
    with_watchdog("stop_returns_while_a_producer_puts_below_what_is_held", || {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new();
        let ch = rt.create_channel("c", Limits::unbounded()).unwrap();
        let slow = rt.task(0).unwrap(); // first, so that ts_min stays at 0 for it
        let ahead = rt.task(1_000_000).unwrap();
        ahead.attach_output(&ch).unwrap().put(1_000_000, "far").unwrap();
        let recorder =
            Recorder::start(&rt, &["c".into()], dir.path().join("a.mcap"), RecorderOptions::default()).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let producer = thread::spawn({
            let (task, ch, done) = (slow, ch.clone(), done.clone());
            move || {
                let out = task.attach_output(&ch).unwrap();
                let mut ts = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    out.put(ts, "x").unwrap();
                    ts += 1;
                    task.set_virtual_time(ts).unwrap();
                }
                ts
            }
        });
        assert!(eventually(EVENTUALLY, || recorder.stats().items > 100));
        let stats = recorder.stop().unwrap();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let put = producer.join().unwrap();
        assert!(stats.items <= put as u64 + 1 && stats.channels["c"].last_ts == Some(1_000_000), "{stats:?}");
        assert_eq!(stats.channels["c"].missed, 0, "{stats:?}");
    });
}

/// A channel destroyed while the recorder holds its next item: the end is counted once, and
/// items + missed never exceeds what was put.
#[test]
fn a_channel_destroyed_mid_drain_is_counted_once() {
    with_watchdog("a_channel_destroyed_mid_drain_is_counted_once", || {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let rt = Runtime::new();
            let a = rt.create_channel("a", Limits::unbounded()).unwrap();
            let b = rt.create_channel("b", Limits::unbounded()).unwrap();
            let task = rt.task(0).unwrap();
            let (out_a, out_b) = (task.attach_output(&a).unwrap(), task.attach_output(&b).unwrap());
            for ts in 1000..1011 {
                out_b.put(ts, "b").unwrap();
            }
            for ts in 0..3000 {
                out_a.put(ts, vec![1u8; 256]).unwrap();
            }
            out_b.detach();
            let names = ["a".to_owned(), "b".to_owned()];
            let recorder = Recorder::start(&rt, &names, dir.path().join("d.mcap"), RecorderOptions::default()).unwrap();
            // The instant of the destroy relative to the recorder's start is the subject: each round moves it later.
            thread::sleep(Duration::from_micros(300 * round));
            b.destroy().unwrap();
            task.close();
            let stats = recorder.stop().unwrap();
            let b = &stats.channels["b"];
            assert_eq!(b.items + b.missed, 11, "round {round}: {b:?}");
            assert_eq!(stats.channels["a"].items, 3000, "round {round}");
        }
    });
}
