//! The Foxglove bridge end to end on loopback: an embedded runtime holding the kiosk's channels
//! (frames, decisions drawn as boxes, blobs, a log), the bridge on a free port, and a client of
//! the Foxglove WebSocket protocol that subscribes and decodes what a viewer would draw.
//!
//! Every wait is bounded by [`WAIT`] and every test runs under the shared watchdog.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use foxglove::messages::{ImageAnnotations, Log, RawImage};
use foxglove::Decode;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use stampede::{ChannelOptions, Codec, Payload, QueueOptions, Runtime, INFINITY};
use stampede_dashboard::foxglove::{Foxglove, FoxgloveOptions, SUBPROTOCOL};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

#[path = "../../stampede/tests/support/mod.rs"]
mod shared;
use shared::with_watchdog;

/// Longest wait for a message or a condition.
const WAIT: Duration = Duration::from_secs(30);
const FRAMES: i64 = 5;
const HEIGHT: usize = 3;
const WIDTH: usize = 4;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn frame(ts: i64) -> Payload {
    let pixels: Vec<u8> = (0..HEIGHT * WIDTH * 3).map(|i| (i as u8).wrapping_add(ts as u8)).collect();
    let mut bytes = stampede::npy::encode_header("'|u1'", &[HEIGHT, WIDTH, 3]).unwrap();
    bytes.extend_from_slice(&pixels);
    Payload { data: bytes.into(), codec: Codec::Npy }
}

/// The tracker's state at `ts`: an array that is no image.
fn state(ts: i64) -> Payload {
    let values: Vec<u8> = [ts as f32, 0.5].iter().flat_map(|v| v.to_le_bytes()).collect();
    Payload { data: stampede::npy::encode("'<f4'", &[2], &values).unwrap().into(), codec: Codec::Npy }
}

/// The kiosk's channels, `FRAMES` items in each (among them an `npy` channel of arrays that are
/// no image), and a raw channel and a queue it cannot show.
fn kiosk(rt: &Runtime) -> stampede::Task {
    let create = |name: &str, codec: &str| {
        let options = ChannelOptions { codec: Some(Codec::from_name(codec)), ..ChannelOptions::default() };
        rt.create_channel(name, options).unwrap()
    };
    let frames = create("kiosk/frames", "npy");
    let decisions = create("kiosk/decisions", "json");
    let blobs = create("kiosk/blobs", "json");
    let log = create("kiosk/log", "utf8");
    let tracks = create("kiosk/tracks", "npy");
    create("kiosk/raw", "raw");
    rt.create_queue("kiosk/jobs", QueueOptions::default()).unwrap();
    let producer = rt.task(0).unwrap();
    let outputs: Vec<_> =
        [&frames, &decisions, &blobs, &log, &tracks].iter().map(|ch| producer.attach_output(*ch).unwrap()).collect();
    for ts in 0..FRAMES {
        outputs[0].put(ts, frame(ts)).unwrap();
        let boxes = json!({"boxes": [{"x": ts, "y": 1, "w": 2, "h": 3, "label": format!("p{ts}"), "color": "#00f"}]});
        outputs[1].put(ts, Payload { data: boxes.to_string().into_bytes().into(), codec: Codec::Json }).unwrap();
        outputs[2]
            .put(ts, Payload { data: json!({"blobs": ts}).to_string().into_bytes().into(), codec: Codec::Json })
            .unwrap();
        outputs[3].put(ts, Payload { data: format!("frame {ts}").into_bytes().into(), codec: Codec::Utf8 }).unwrap();
        outputs[4].put(ts, state(ts)).unwrap();
    }
    producer
}

async fn open(url: &str, origin: Option<&str>) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", SUBPROTOCOL.parse().unwrap());
    if let Some(origin) = origin {
        request.headers_mut().insert("origin", origin.parse().unwrap());
    }
    let (socket, response) = tokio_tungstenite::connect_async(request).await?;
    assert_eq!(response.headers()["sec-websocket-protocol"], SUBPROTOCOL, "the server selects the subprotocol");
    Ok(socket)
}

/// The next message, within [`WAIT`].
async fn next(socket: &mut Socket) -> Message {
    tokio::time::timeout(WAIT, socket.next()).await.expect("a message in time").expect("open").expect("readable")
}

/// Text messages until one with `op` (others are skipped; binary ones are kept in `data`).
async fn until_op(socket: &mut Socket, op: &str, data: &mut Vec<Vec<u8>>) -> Value {
    loop {
        match next(socket).await {
            Message::Text(text) => {
                let value: Value = serde_json::from_str(&text).unwrap();
                if value["op"] == op {
                    return value;
                }
            }
            Message::Binary(bytes) => data.push(bytes.to_vec()),
            _ => {}
        }
    }
}

/// A `messageData` message: subscription id, log time, payload.
fn message_data(bytes: &[u8]) -> (u32, u64, &[u8]) {
    assert_eq!(bytes[0], 1, "opcode messageData");
    (
        u32::from_le_bytes(bytes[1..5].try_into().unwrap()),
        u64::from_le_bytes(bytes[5..13].try_into().unwrap()),
        &bytes[13..],
    )
}

/// The kiosk's frames, boxes, blobs and log arrive decoded as a viewer draws them, each item once
/// and in order with its place on the timeline; an `npy` channel's arrays that are no image go as
/// JSON on its values topic, its images do not; what cannot be shown is listed with why; the
/// bridge's readers do not hold GC back; a destroyed channel is unadvertised; nonsense gets a
/// status, not a closed socket; closing sends a Close frame.
#[test]
fn a_viewer_draws_the_kiosks_channels() {
    with_watchdog("a_viewer_draws_the_kiosks_channels", || {
        let rt = Runtime::new();
        let producer = kiosk(&rt);
        let options =
            FoxgloveOptions { port: 0, overlays: vec!["kiosk/decisions".into()], ..FoxgloveOptions::default() };
        let bridge = Foxglove::serve(rt.clone(), options).unwrap();
        let url = bridge.url();
        tokio().block_on(async {
            let mut socket = open(&url, None).await.unwrap();
            let mut data = Vec::new();
            let info = until_op(&mut socket, "serverInfo", &mut data).await;
            assert!(info["name"].as_str().unwrap().starts_with("stampede"));
            let mut channels = BTreeMap::new();
            while channels.len() < 7 {
                for ch in until_op(&mut socket, "advertise", &mut data).await["channels"].as_array().unwrap() {
                    channels.insert(ch["topic"].as_str().unwrap().to_owned(), ch.clone());
                }
            }
            let schema = |topic: &str| channels[topic]["schemaName"].as_str().unwrap().to_owned();
            assert_eq!(schema("kiosk/frames"), "foxglove.RawImage");
            assert_eq!(schema("kiosk/decisions"), "foxglove.ImageAnnotations");
            assert_eq!(schema("kiosk/log"), "foxglove.Log");
            assert_eq!(channels["kiosk/blobs"]["encoding"], "json");
            assert_eq!(schema("kiosk/tracks"), "foxglove.RawImage");
            assert_eq!(
                (channels["kiosk/tracks#values"]["encoding"].as_str(), schema("kiosk/frames#values")),
                (Some("json"), "kiosk/frames#values".into())
            );
            assert!(!channels.contains_key("kiosk/raw") && !channels.contains_key("kiosk/jobs"));
            let not_shown = until_op(&mut socket, "status", &mut data).await;
            let text = not_shown["message"].as_str().unwrap();
            assert!(text.contains("kiosk/raw") && text.contains("codec \"raw\""), "{text}");
            assert!(text.contains("kiosk/jobs") && text.contains("queue"), "{text}");

            let topics = [
                "kiosk/frames",
                "kiosk/decisions",
                "kiosk/blobs",
                "kiosk/log",
                "kiosk/tracks#values",
                "kiosk/frames#values",
                "kiosk/tracks",
            ];
            let subscriptions: Vec<Value> =
                topics.iter().enumerate().map(|(i, t)| json!({"id": i, "channelId": channels[*t]["id"]})).collect();
            let subscribe = json!({"op": "subscribe", "subscriptions": subscriptions}).to_string();
            socket.send(Message::Text(subscribe.into())).await.unwrap();
            let deadline = Instant::now() + WAIT;
            let mut skipped_said = None;
            while data.len() < 5 * FRAMES as usize || skipped_said.is_none() {
                assert!(Instant::now() < deadline, "{} of {} messages, {skipped_said:?}", data.len(), 5 * FRAMES);
                match next(&mut socket).await {
                    Message::Binary(bytes) => data.push(bytes.to_vec()),
                    Message::Text(text) if text.contains("read/kiosk/tracks\"") => skipped_said = Some(text),
                    _ => {}
                }
            }
            let skipped_said = skipped_said.unwrap();
            assert!(skipped_said.contains("shown as JSON on topic \\\"kiosk/tracks#values"), "{skipped_said}");
            let mut seen: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
            for bytes in &data {
                let (subscription, log_time, payload) = message_data(bytes);
                seen.entry(subscription).or_default().push(log_time);
                let ts = (log_time as f64 * 30.0 / 1e9).round() as i64;
                assert_eq!(log_time, (ts as f64 / 30.0 * 1e9) as u64, "frame numbers at 1/30 s");
                match subscription {
                    0 => {
                        let image = RawImage::decode(payload).unwrap();
                        assert_eq!(
                            (image.width as usize, image.height as usize, image.encoding.as_str()),
                            (WIDTH, HEIGHT, "rgb8")
                        );
                        let frame = frame(ts);
                        assert_eq!(&image.data[..], &frame.data[frame.data.len() - HEIGHT * WIDTH * 3..], "ts={ts}");
                        assert_eq!(image.timestamp.unwrap().total_nanos(), log_time);
                    }
                    1 => {
                        let boxes = ImageAnnotations::decode(payload).unwrap();
                        assert_eq!(boxes.points[0].points[0].x, ts as f64);
                        assert_eq!(boxes.texts[0].text, format!("p{ts}"));
                    }
                    2 => assert_eq!(serde_json::from_slice::<Value>(payload).unwrap(), json!({"blobs": ts})),
                    4 => assert_eq!(
                        serde_json::from_slice::<Value>(payload).unwrap(),
                        json!({"dtype": "<f4", "shape": [2], "values": [ts as f64, 0.5]})
                    ),
                    5 | 6 => {
                        panic!("subscription {subscription}: an image on a values topic, or no image on an image topic")
                    }
                    _ => assert_eq!(Log::decode(payload).unwrap().message, format!("frame {ts}")),
                }
            }
            assert_eq!(seen.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
            // A channel is read once, whichever of its topics are subscribed: a task per channel.
            let readers = rt.graph().unwrap().tasks.iter().filter(|t| t.name.as_deref() == Some("foxglove")).count();
            assert_eq!(readers, 5, "one reader per channel");
            for (subscription, times) in &seen {
                assert_eq!(times.len(), FRAMES as usize, "subscription {subscription}: each item once");
                assert!(times.windows(2).all(|w| w[0] < w[1]), "subscription {subscription}: in order");
            }

            // The readers consumed what they sent: once the producer moves on, everything goes.
            producer.set_virtual_time(INFINITY).unwrap();
            let frames = rt.channel("kiosk/frames").unwrap();
            let deadline = Instant::now() + WAIT;
            while frames.stats().live_items > 0 {
                assert!(Instant::now() < deadline, "the bridge holds items: {:?}", frames.stats());
                tokio::time::sleep(Duration::from_millis(10)).await; // GC follows the readers' consumes
            }

            // Nonsense gets an error status; the socket stays open.
            socket.send(Message::Text("{\"op\":\"fly\"}".into())).await.unwrap();
            let refusal = until_op(&mut socket, "status", &mut data).await;
            assert_eq!(refusal["level"], 2);
            assert!(refusal["message"].as_str().unwrap().contains("\"fly\" is not served"), "{refusal}");

            // A destroyed channel is unadvertised.
            rt.channel("kiosk/log").unwrap().destroy().unwrap();
            let gone = until_op(&mut socket, "unadvertise", &mut data).await;
            assert_eq!(gone["channelIds"], json!([channels["kiosk/log"]["id"]]));

            // Unsubscribing stops the reader: its task goes.
            let unsubscribe = json!({"op": "unsubscribe", "subscriptionIds": [0, 1, 2, 4, 5, 6]}).to_string();
            socket.send(Message::Text(unsubscribe.into())).await.unwrap();
            let deadline = Instant::now() + WAIT;
            while rt.graph().unwrap().tasks.iter().any(|t| t.name.as_deref() == Some("foxglove")) {
                assert!(Instant::now() < deadline, "a reader's task outlived its subscriptions");
                tokio::time::sleep(Duration::from_millis(10)).await; // readers look every 100 ms
            }

            let closer = std::thread::spawn(move || bridge.close());
            loop {
                match tokio::time::timeout(WAIT, socket.next()).await.expect("closed in time") {
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                }
            }
            closer.join().unwrap();
        });
    });
}

/// A page of another origin is refused naming how to allow it; Foxglove's web app and clients
/// that send no origin are admitted; beyond loopback the bridge needs `allow_anonymous`.
#[test]
fn the_bridge_is_protected_by_default() {
    with_watchdog("the_bridge_is_protected_by_default", || {
        let rt = Runtime::new();
        let bridge = Foxglove::serve(rt.clone(), FoxgloveOptions { port: 0, ..FoxgloveOptions::default() }).unwrap();
        let url = bridge.url();
        tokio().block_on(async {
            match open(&url, Some("http://evil.example")).await {
                Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                    assert_eq!(response.status(), 403);
                    let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).into_owned();
                    assert!(body.contains("--allow-origin http://evil.example"), "{body}");
                }
                other => panic!("not refused: {:?}", other.map(|_| ())),
            }
            for origin in [Some("https://app.foxglove.dev"), None] {
                assert!(open(&url, origin).await.is_ok(), "{origin:?}");
            }
        });
        bridge.close();
        let open_host = FoxgloveOptions { host: "0.0.0.0".parse().unwrap(), port: 0, ..FoxgloveOptions::default() };
        let refused = Foxglove::serve(rt.clone(), open_host).err().expect("refused beyond loopback");
        assert!(refused.to_string().contains("--allow-anonymous"), "{refused}");
    });
}
