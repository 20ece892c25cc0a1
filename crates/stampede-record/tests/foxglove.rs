//! Recordings Foxglove draws (docs/RECORDING.md, "What viewers show"): with the recorder's
//! `foxglove` option, every `npy` frame, overlay and text line is written again, converted, on
//! `<name>/foxglove` with Foxglove's schema, and every other `npy` array as JSON on
//! `<name>#values/foxglove` (one schema per topic, as the live bridge) — beside the raw items,
//! never instead of them. An
//! MCAP reader that knows only Foxglove's schemas (the `mcap` crate and the SDK's protobuf
//! messages) decodes each image back to the frame that was put; our reader and replay see the
//! raw items alone, byte for byte.

#[path = "../../stampede/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;

use foxglove::messages::{ImageAnnotations, Log, RawImage};
use foxglove::Decode;
use stampede::{ChannelOptions, Codec, Parts, Runtime, Timestamp};
use stampede_record::{replay, Recorder, RecorderOptions, Recording, ReplayOptions};
use stampede_view::foxglove::Tick;
use support::with_watchdog;

const FRAMES: Timestamp = 12;
const HEIGHT: usize = 4;
const WIDTH: usize = 5;

fn pixels(ts: Timestamp) -> Vec<u8> {
    (0..HEIGHT * WIDTH * 3).map(|i| (i as i64 * 3 + ts) as u8).collect()
}

fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    [stampede::npy::encode_header(descr, shape).unwrap(), data.to_vec()].concat()
}

/// (topic, schema name, publish time, bytes) of every message in the file, read by the `mcap`
/// crate alone.
fn mcap_messages(path: &std::path::Path) -> Vec<(String, String, u64, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let stream = mcap::MessageStream::new(&bytes).unwrap();
    stream
        .map(|message| {
            let message = message.unwrap();
            let schema = message.channel.schema.as_ref().map_or(String::new(), |s| s.name.clone());
            (message.channel.topic.clone(), schema, message.publish_time, message.data.to_vec())
        })
        .collect()
}

/// (channel, ts, bytes) of every item our reader returns.
fn raw_items(path: &std::path::Path) -> Vec<(String, Timestamp, Vec<u8>)> {
    let mut items = Vec::new();
    let mut recording = Recording::open(path).unwrap();
    recording
        .for_each(|item| {
            items.push((item.channel.meta.name.clone(), item.ts, item.data));
            Ok(())
        })
        .unwrap();
    items.sort();
    items
}

/// The channels: frames, overlays, other JSON, text, and an `npy` channel of depth images and
/// arrays that are no image, in turn.
fn create_channels(rt: &Runtime) -> [stampede::Channel; 5] {
    let create = |name: &str, codec: Codec| {
        rt.create_channel(name, ChannelOptions { codec: Some(codec), ..ChannelOptions::default() }).unwrap()
    };
    [
        create("cam/frames", Codec::Npy),
        create("cam/boxes", Codec::Json),
        create("cam/blobs", Codec::Json),
        create("cam/log", Codec::Utf8),
        create("cam/depth", Codec::Npy),
    ]
}

#[test]
fn a_recording_for_foxglove_holds_images_beside_the_raw_items() {
    with_watchdog("a_recording_for_foxglove_holds_images_beside_the_raw_items", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kiosk.mcap");
        let rt = Runtime::new();
        let channels = create_channels(&rt);
        let options = RecorderOptions { foxglove: Some(Tick::DEFAULT), ..RecorderOptions::default() };
        let recorder = Recorder::start(&rt, &["cam".into()], &path, options).unwrap();
        let producer = rt.task(0).unwrap();
        let outs: Vec<_> = channels.iter().map(|ch| producer.attach_output(ch).unwrap()).collect();
        let mut put = Vec::new();
        for ts in 0..FRAMES {
            let frame = npy("'|u1'", &[HEIGHT, WIDTH, 3], &pixels(ts));
            let boxes = format!(r#"{{"boxes": [{{"x": {ts}, "y": 1, "w": 2, "h": 3, "label": "p"}}]}}"#);
            let blobs = format!(r#"{{"blobs": [{ts}]}}"#);
            let line = format!("frame {ts}");
            let depth = match ts % 2 {
                0 => npy("'|u1'", &[HEIGHT, WIDTH], &pixels(ts)[..HEIGHT * WIDTH]),
                _ => npy("'<f4'", &[1], &[0, 0, 128, 63]), // not an image: its values as JSON
            };
            let items = [(Codec::Npy, frame), (Codec::Json, boxes.into_bytes()), (Codec::Json, blobs.into_bytes())];
            let items = items.into_iter().chain([(Codec::Utf8, line.into_bytes()), (Codec::Npy, depth)]);
            for ((codec, data), (out, ch)) in items.zip(outs.iter().zip(&channels)) {
                out.put(ts, Parts { parts: &[&data], codec }).unwrap();
                put.push((ch.name().to_owned(), ts, data));
            }
            producer.set_virtual_time(ts + 1).unwrap();
        }
        producer.close();
        let stats = recorder.stop().unwrap();
        assert_eq!(stats.items, put.len() as u64);
        assert_eq!((stats.converted, stats.not_converted), (4 * FRAMES as u64, 0));
        let messages = mcap_messages(&path);
        let mut schemas: BTreeMap<&str, &str> = BTreeMap::new();
        for (topic, schema, _, _) in &messages {
            let first = *schemas.entry(topic).or_insert(schema);
            assert_eq!(first, schema, "topic {topic} holds one schema");
        }

        // A reader knowing only Foxglove's schemas decodes every image back to the frame put.
        let mut converted: BTreeMap<String, usize> = BTreeMap::new();
        for (topic, schema, publish_time, data) in &messages {
            let ts = *publish_time as Timestamp;
            match (topic.as_str(), schema.as_str()) {
                ("cam/frames/foxglove", "foxglove.RawImage") => {
                    let image = RawImage::decode(&data[..]).unwrap();
                    assert_eq!(
                        (image.width, image.height, image.encoding.as_str()),
                        (WIDTH as u32, HEIGHT as u32, "rgb8")
                    );
                    assert_eq!(&image.data[..], &pixels(ts)[..], "frame {ts}");
                    assert_eq!(image.timestamp.unwrap().total_nanos(), Tick::DEFAULT.nanos(ts));
                }
                ("cam/boxes/foxglove", "foxglove.ImageAnnotations") => {
                    let annotations = ImageAnnotations::decode(&data[..]).unwrap();
                    assert_eq!(annotations.points[0].points[0].x, ts as f64);
                }
                ("cam/log/foxglove", "foxglove.Log") => {
                    assert_eq!(Log::decode(&data[..]).unwrap().message, format!("frame {ts}"));
                }
                ("cam/depth/foxglove", "foxglove.RawImage") => {
                    let image = RawImage::decode(&data[..]).unwrap();
                    assert_eq!((ts % 2, image.encoding.as_str()), (0, "mono8"), "the depth images alone");
                }
                ("cam/depth#values/foxglove", "") => {
                    assert_eq!(ts % 2, 1, "the depth arrays alone");
                    let shown: serde_json::Value = serde_json::from_slice(data).unwrap();
                    assert_eq!(shown, serde_json::json!({ "dtype": "<f4", "shape": [1], "values": [1.0] }));
                }
                (topic, _) => {
                    assert!(!topic.ends_with("/foxglove"), "{topic} converted with schema {schema:?}");
                    continue;
                }
            }
            *converted.entry(topic.clone()).or_default() += 1;
        }
        let half = FRAMES as usize / 2;
        let counts = [("cam/boxes/foxglove", FRAMES as usize), ("cam/depth#values/foxglove", half)];
        let counts = counts.into_iter().chain([("cam/depth/foxglove", half), ("cam/frames/foxglove", FRAMES as usize)]);
        let counts = counts.chain([("cam/log/foxglove", FRAMES as usize)]);
        let expected: BTreeMap<String, usize> = counts.map(|(topic, n)| (topic.to_owned(), n)).collect();
        assert_eq!(converted, expected);

        // Our reader, and so replay, see the raw items alone, byte for byte.
        put.sort();
        assert_eq!(raw_items(&path), put);
        let target = Runtime::new();
        create_channels(&target);
        let again = dir.path().join("again.mcap");
        let recorder = Recorder::start(&target, &["cam".into()], &again, RecorderOptions::default()).unwrap();
        replay(&target, &path, &ReplayOptions { rate: None, ..ReplayOptions::default() }, &mut |_| true).unwrap();
        recorder.stop().unwrap();
        assert_eq!(target.names("").unwrap().len(), channels.len(), "no channel made of the converted messages");
        assert_eq!(raw_items(&again), put);
    });
}
