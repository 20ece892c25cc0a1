//! The dashboard end to end on loopback: an embedded runtime (and a remote one through a node)
//! with a producer of `.npy` frames, the dashboard served on a free port, and plain HTTP and
//! WebSocket clients checking what the page would receive.
//!
//! Every wait is bounded by [`WAIT`] and every test runs under the shared watchdog.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;

use futures_util::StreamExt;
use serde_json::Value;
use stampede::{Codec, Error, Limits, Payload, Runtime, Selector, INFINITY};
use stampede_dashboard::{Dashboard, DashboardOptions, AUTHORIZATION_BYTES_MAX, FRAME_HEADER_BYTES, FRAME_MAGIC};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

#[path = "../../stampede/tests/support/mod.rs"]
mod shared;
use shared::with_watchdog;

/// Longest wait for a condition or a message.
const WAIT: Duration = Duration::from_secs(30);
/// A fast refresh, so that tests do not wait long for the next update.
const REFRESH: Duration = Duration::from_millis(30);

/// A `.npy` payload of a `uint8` array of `shape` holding `data`.
fn npy(shape: &[usize], data: &[u8]) -> Payload {
    npy_of("'|u1'", shape, data)
}

/// A `.npy` payload of dtype `descr`.
fn npy_of(descr: &str, shape: &[usize], data: &[u8]) -> Payload {
    let mut bytes = stampede::npy::encode_header(descr, shape).unwrap();
    bytes.extend_from_slice(data);
    Payload { data: bytes.into(), codec: Codec::Npy }
}

/// An RGB test pattern of `height × width` that differs per `seed`.
fn pattern(height: usize, width: usize, seed: u8) -> Vec<u8> {
    (0..height * width * 3).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)).collect()
}

fn options(image: Option<&str>, overlays: &[&str]) -> DashboardOptions {
    DashboardOptions {
        image: image.map(str::to_owned),
        overlays: overlays.iter().map(|s| s.to_string()).collect(),
        refresh: REFRESH,
        ..DashboardOptions::default()
    }
}

/// `GET path` over HTTP/1.1: the status code and the body.
fn http_get(address: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    http_get_as(address, path, None).map(|(status, _, body)| (status, body))
}

/// `GET path` with an `Authorization` header if given: the status code, the headers (lower
/// case) and the body.
fn http_get_as(address: SocketAddr, path: &str, authorization: Option<&str>) -> std::io::Result<(u16, String, String)> {
    let mut stream = TcpStream::connect_timeout(&address, WAIT)?;
    stream.set_read_timeout(Some(WAIT))?;
    let authorization = authorization.map_or(String::new(), |value| format!("Authorization: {value}\r\n"));
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\n{authorization}Connection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok((status, head.to_ascii_lowercase(), body.to_owned()))
}

/// `Basic base64(user:password)`.
fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

/// A dashboard of `rt` whose login admits `viewer` with `secret`, and the count of the login
/// function's calls.
fn dashboard_with_login(rt: &Runtime) -> (Dashboard, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let login = Arc::new(move |user: &str, password: &str| {
        counted.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20)); // as slow as a (cheap) password hash
        user == "viewer" && password == "secret"
    });
    (Dashboard::serve_with_login(rt.clone(), options(None, &[]), login).unwrap(), calls)
}

fn snapshot(address: SocketAddr) -> Value {
    let (status, body) = http_get(address, "/api/snapshot").expect("GET /api/snapshot");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("the snapshot is JSON")
}

/// Polls the snapshot until `ready` holds (bounded by [`WAIT`]).
fn snapshot_when(address: SocketAddr, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = snapshot(address);
        if ready(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "waited {WAIT:?} for {what}; last snapshot: {s}");
        // The dashboard refreshes on its own clock: poll the snapshot once per refresh (bounded by WAIT).
        std::thread::sleep(REFRESH);
    }
}

fn channel<'a>(snapshot: &'a Value, name: &str) -> &'a Value {
    let channels = snapshot["channels"].as_array().expect("channels");
    channels.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no row for {name} in {snapshot}"))
}

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// The page and its assets are served, and `/api/snapshot` reports what `stats()`, `limits()`
/// and `ts_min()` say, with the tasks and their connections.
#[test]
fn page_and_snapshot_match_the_runtime() {
    with_watchdog("page_and_snapshot_match_the_runtime", || {
        let rt = Runtime::new();
        let frames = rt.create_channel("camera/frames", Limits::items(8)).unwrap();
        let producer = rt.task(0).unwrap();
        producer.set_name("digitizer").unwrap();
        let out = producer.attach_output(&frames).unwrap();
        let reader = rt.task(INFINITY).unwrap();
        let inp = reader.attach_input(&frames).unwrap();
        for ts in 0..3 {
            out.put(ts, npy(&[2, 2, 3], &pattern(2, 2, ts as u8))).unwrap();
        }
        producer.set_virtual_time(3).unwrap();
        inp.get(Selector::At(2), Some(Duration::ZERO)).unwrap();
        inp.consume_until(1).unwrap();

        let dashboard = Dashboard::serve(rt.clone(), options(None, &[])).unwrap();
        assert!(dashboard.url().starts_with("http://127.0.0.1:"), "{}", dashboard.url());
        let address = dashboard.address();
        let (status, page) = http_get(address, "/").unwrap();
        assert_eq!(status, 200);
        for id in
            ["id=\"image\"", "id=\"ts-min\"", "id=\"held-by\"", "id=\"frame-ts\"", "id=\"channels\"", "id=\"tasks\""]
        {
            assert!(page.contains(id), "the page has {id}");
        }
        for asset in ["/dashboard.js", "/dashboard.css"] {
            let (status, body) = http_get(address, asset).unwrap();
            assert_eq!((status, body.is_empty()), (200, false), "{asset}");
        }
        assert_eq!(http_get(address, "/nowhere").unwrap().0, 404);

        let s = snapshot(address);
        let stats = frames.stats();
        let row = channel(&s, "camera/frames");
        assert_eq!(row["kind"], "channel");
        assert_eq!(row["capacity"], 8);
        assert_eq!(row["max_bytes"], Value::Null);
        assert_eq!(row["live_items"], stats.live_items as u64);
        assert_eq!(row["live_bytes"], stats.live_bytes as u64);
        assert_eq!(row["puts"], stats.puts);
        assert_eq!(row["gets"], stats.gets);
        assert_eq!(row["reclaimed"], stats.reclaimed);
        assert_eq!(row["claim"], stats.claim.unwrap());
        assert_eq!((row["inputs"].as_u64(), row["outputs"].as_u64()), (Some(1), Some(1)));
        assert_eq!(row["fill_items"].as_f64(), Some(stats.live_items as f64 / 8.0));
        assert_eq!(s["ts_min"], rt.ts_min());
        // Frame 2 is open on the reader's connection: that holds ts_min at 2.
        let held_by: Vec<&str> = s["held_by"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let reader_holds = format!("of task {} on camera/frames", reader.id());
        assert!(
            held_by.len() == 1 && held_by[0].starts_with("connection ") && held_by[0].ends_with(&reader_holds),
            "{s}"
        );
        assert_eq!(s["image"], Value::Null);

        let tasks = s["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 2, "no dashboard task without an image: {s}");
        let digitizer = tasks.iter().find(|t| t["name"] == "digitizer").expect("the named task");
        assert_eq!(digitizer["virtual_time"], 3);
        assert_eq!(digitizer["connections"][0]["kind"], "output");
        assert_eq!(digitizer["connections"][0]["items"], 3);
        let tracker = tasks.iter().find(|t| t["id"] == reader.id()).unwrap();
        assert_eq!(tracker["virtual_time"], "INFINITY");
        assert_eq!(tracker["connections"][0]["items"], 1);
        dashboard.close();
    });
}

/// Over the WebSocket a client gets snapshots (text) and the frame (binary) whose pixels are
/// exactly those put; the overlay at the frame's timestamp comes with it; closing the
/// dashboard sends Close and ends the connection, and closes the dashboard's task.
#[test]
fn websocket_delivers_snapshots_frames_and_overlays_then_closes() {
    with_watchdog("websocket_delivers_snapshots_frames_and_overlays_then_closes", || {
        let rt = Runtime::new();
        let frames = rt.create_channel("camera", Limits::unbounded()).unwrap();
        let boxes = rt.create_channel("tracker/boxes", Limits::unbounded()).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&frames).unwrap();
        let box_out = producer.attach_output(&boxes).unwrap();
        let (height, width) = (4, 5);
        let pixels = pattern(height, width, 9);
        out.put(10, npy(&[height, width, 3], &pixels)).unwrap();
        let overlay = r##"{"boxes": [{"x": 1, "y": 1, "w": 2, "h": 2, "label": "blob", "color": "#ff0000"}]}"##;
        box_out.put(10, Payload::copy_from(overlay.as_bytes(), Codec::Json)).unwrap();

        let dashboard = Dashboard::serve(rt.clone(), options(Some("camera"), &["tracker/boxes"])).unwrap();
        let url = format!("ws://{}/ws", dashboard.address());
        tokio().block_on(async {
            let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str()).await.expect("the WebSocket opens");
            let (mut frame, mut last_snapshot) = (None, None);
            let deadline = tokio::time::Instant::now() + WAIT;
            while frame.is_none() || last_snapshot.is_none() {
                let message =
                    tokio::time::timeout_at(deadline, ws.next()).await.expect("the frame and snapshot in time");
                match message.expect("the socket stays open").expect("a message") {
                    Message::Binary(data) => frame = Some(data),
                    Message::Text(text) => {
                        let s: Value = serde_json::from_str(&text).unwrap();
                        let counted = s["clients"] == 1; // the first update may predate this client
                        if counted && s["image"]["ts"] == 10 && s["image"]["overlays"][0]["exact"] == true {
                            last_snapshot = Some(s);
                        }
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            let frame = frame.unwrap();
            assert_eq!(&frame[..4], FRAME_MAGIC);
            assert_eq!(i64::from_le_bytes(frame[4..12].try_into().unwrap()), 10);
            assert_eq!(u32::from_le_bytes(frame[12..16].try_into().unwrap()), width as u32);
            assert_eq!(u32::from_le_bytes(frame[16..20].try_into().unwrap()), height as u32);
            assert_eq!(frame[20], 3);
            assert_eq!(&frame[FRAME_HEADER_BYTES..], &pixels[..], "the pixels put");
            let s = last_snapshot.unwrap();
            assert_eq!(s["image"]["status"], "ok");
            assert_eq!((s["image"]["width"].as_u64(), s["image"]["height"].as_u64()), (Some(5), Some(4)));
            let drawn = &s["image"]["overlays"][0]["boxes"][0];
            assert_eq!((drawn["label"].as_str(), drawn["w"].as_f64()), (Some("blob"), Some(2.0)));
            let own = s["tasks"].as_array().unwrap().iter().find(|t| t["dashboard"] == true).expect("its task");
            assert_eq!((own["name"].as_str(), own["virtual_time"].as_str()), (Some("dashboard"), Some("INFINITY")));

            // Closing from another thread while the client reads: a Close frame, then the end.
            let closer = std::thread::spawn(move || {
                dashboard.close();
                dashboard.close(); // idempotent
                dashboard
            });
            let deadline = tokio::time::Instant::now() + WAIT;
            let mut closed = false;
            loop {
                match tokio::time::timeout_at(deadline, ws.next()).await.expect("the connection ends in time") {
                    Some(Ok(Message::Close(_))) => closed = true,
                    Some(Ok(_)) => {}
                    None | Some(Err(_)) => break,
                }
            }
            assert!(closed, "the server said Close");
            let dashboard = closer.join().unwrap();
            assert!(dashboard.is_closed());
            assert!(http_get(dashboard.address(), "/").is_err(), "nothing listens any more");
        });
        let graph = rt.graph().unwrap();
        assert!(graph.tasks.iter().all(|t| t.name.as_deref() != Some("dashboard")), "its task is closed");
        assert_eq!(boxes.stats().inputs, 0, "its connections detached");
    });
}

/// An image channel of another codec (or dtype) shows a message naming the rule; the server
/// goes on serving, and a good frame afterwards is shown.
#[test]
fn a_wrong_image_is_a_message_not_a_crash() {
    with_watchdog("a_wrong_image_is_a_message_not_a_crash", || {
        let rt = Runtime::new();
        let frames = rt.create_channel("camera", Limits::unbounded()).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&frames).unwrap();
        let dashboard = Dashboard::serve(rt.clone(), options(Some("camera"), &[])).unwrap();
        let address = dashboard.address();
        out.put(0, b"not an image".to_vec()).unwrap();
        let s = snapshot_when(address, "the error", |s| s["image"]["status"] == "error");
        let message = s["image"]["message"].as_str().unwrap();
        assert!(message.contains("codec \"raw\"") && message.contains("npy"), "{message}");

        out.put(1, npy(&[2, 2], &[1, 2, 3, 4])).unwrap(); // grey: accepted
        snapshot_when(address, "the grey frame", |s| s["image"]["status"] == "ok" && s["image"]["ts"] == 1);
        out.put(2, npy_of("'<f4'", &[1, 1], &[0; 4])).unwrap();
        let s = snapshot_when(address, "the dtype's error", |s| s["image"]["status"] == "error");
        assert!(s["image"]["message"].as_str().unwrap().contains("uint8"), "{s}");
        assert_eq!(http_get(address, "/").unwrap().0, 200, "still serving");
        drop(dashboard);
    });
}

/// A queue named as the image is refused with a message; a channel created after the dashboard
/// starts is picked up.
#[test]
fn the_image_channel_may_come_later_and_a_queue_is_refused() {
    with_watchdog("the_image_channel_may_come_later_and_a_queue_is_refused", || {
        let rt = Runtime::new();
        rt.create_queue("work", Limits::unbounded()).unwrap();
        let dashboard = Dashboard::serve(rt.clone(), options(Some("camera"), &["work"])).unwrap();
        let address = dashboard.address();
        let s = snapshot_when(address, "the queue's message", |s| !s["image"]["overlays"][0]["message"].is_null());
        assert!(s["image"]["overlays"][0]["message"].as_str().unwrap().contains("is a queue"), "{s}");
        assert_eq!(s["image"]["status"], "waiting");

        let frames = rt.create_channel("camera", Limits::unbounded()).unwrap();
        let producer = rt.task(0).unwrap();
        producer.attach_output(&frames).unwrap().put(5, npy(&[1, 1, 4], &[1, 2, 3, 4])).unwrap();
        snapshot_when(address, "the frame", |s| s["image"]["ts"] == 5 && s["image"]["channels"] == 4);
    });
}

/// The dashboard does not hold GC back: once the pipeline's own reader has consumed, ts_min
/// passes the frames and the overlays within a refresh or two, and nothing stays live.
#[test]
fn the_dashboard_does_not_hold_gc_back() {
    with_watchdog("the_dashboard_does_not_hold_gc_back", || {
        let rt = Runtime::new();
        let frames = rt.create_channel("camera", Limits::unbounded()).unwrap();
        let boxes = rt.create_channel("boxes", Limits::unbounded()).unwrap();
        let dashboard = Dashboard::serve(rt.clone(), options(Some("camera"), &["boxes"])).unwrap();
        // Wait until the dashboard is attached to both channels.
        snapshot_when(dashboard.address(), "the dashboard's connections", |s| {
            channel(s, "camera")["inputs"] == 1 && channel(s, "boxes")["inputs"] == 1
        });

        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&frames).unwrap();
        let box_out = producer.attach_output(&boxes).unwrap();
        let tracker = rt.task(INFINITY).unwrap();
        let inp = tracker.attach_input(&frames).unwrap();
        let box_inp = tracker.attach_input(&boxes).unwrap();
        for round in 0..3 {
            let first = round * 10;
            for ts in first..first + 10 {
                out.put(ts, npy(&[2, 2, 3], &pattern(2, 2, ts as u8))).unwrap();
                box_out.put(ts + 5, Payload::copy_from(br#"{"boxes": []}"#, Codec::Json)).unwrap();
            }
            producer.set_virtual_time(first + 10).unwrap();
            inp.consume_until(first + 9).unwrap();
            box_inp.consume_until(first + 14).unwrap();
            // Without the dashboard ts_min would be first + 10 now; it must get there.
            let deadline = Instant::now() + WAIT;
            while rt.ts_min() < first + 10 {
                assert!(Instant::now() < deadline, "ts_min stuck at {} (want {})", rt.ts_min(), first + 10);
                // ts_min advances in the runtime with no signal to the test: poll it (bounded by WAIT).
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert_eq!(frames.stats().live_items, 0);
        dashboard.close();
    });
}

/// A dashboard of a remote runtime (a client of a node) shows that node's channels and image.
#[test]
fn a_dashboard_of_a_remote_runtime() {
    with_watchdog("a_dashboard_of_a_remote_runtime", || {
        let dir = std::env::temp_dir().join(format!("stampede-dashboard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let endpoint = format!("unixsock-stream/{}", dir.join("node.sock").display());
        let hosted = Runtime::new();
        let node = stampede_node::Node::serve(hosted.engine().unwrap(), stampede_node::NodeOptions::listen(&endpoint))
            .unwrap();
        let remote = stampede::connect(&endpoint, Some(WAIT)).unwrap();
        let frames = hosted.create_channel("camera", Limits::unbounded()).unwrap();
        let producer = hosted.task(0).unwrap();
        let pixels = pattern(3, 2, 1);
        producer.attach_output(&frames).unwrap().put(4, npy(&[3, 2, 3], &pixels)).unwrap();

        let dashboard = Dashboard::serve(remote.clone(), options(Some("camera"), &[])).unwrap();
        let s = snapshot_when(dashboard.address(), "the remote frame", |s| s["image"]["ts"] == 4);
        assert_eq!(s["node"], "node");
        assert_eq!(channel(&s, "camera")["puts"], 1);
        // Through a node: the byte budgets' use against the budgets (the node's own puts are not
        // charged, so nothing is live in them).
        let budget = &s["budget"];
        assert!(budget["node_max_bytes"].as_u64().is_some_and(|max| max > 0), "{budget}");
        assert_eq!(budget["session_live_bytes"], 0);
        dashboard.close();
        remote.close();
        node.close();
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// With a login every route answers `401` with `WWW-Authenticate` and no data unless the
/// request carries credentials the login accepts; with them, the page and the snapshot.
#[test]
fn a_login_guards_every_route() {
    with_watchdog("a_login_guards_every_route", || {
        let rt = Runtime::new();
        rt.create_channel("camera/secret", Limits::unbounded()).unwrap();
        let (dashboard, _) = dashboard_with_login(&rt);
        let address = dashboard.address();
        let refusals = [
            None,
            Some(basic("viewer", "wrong")),
            Some(basic("someone", "secret")),
            Some("Bearer c2VjcmV0".to_owned()),
            Some("Basic not-base64!".to_owned()),
            Some(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("viewer"))),
        ];
        for path in ["/", "/dashboard.js", "/dashboard.css", "/api/snapshot", "/ws"] {
            for authorization in &refusals {
                let (status, head, body) = http_get_as(address, path, authorization.as_deref()).unwrap();
                assert_eq!(status, 401, "{path} with {authorization:?}: {head}");
                assert!(head.contains("www-authenticate: basic realm=\"stampede\""), "{path}: {head}");
                assert!(!body.contains("camera/secret") && !body.contains("<html"), "{path}: no data: {body}");
            }
        }
        let right = basic("viewer", "secret");
        let (status, _, page) = http_get_as(address, "/", Some(&right)).unwrap();
        assert!(status == 200 && page.contains("id=\"channels\""), "{status} {page}");
        let (status, head, body) = http_get_as(address, "/api/snapshot", Some(&right)).unwrap();
        assert_eq!(status, 200, "{head} {body}");
        assert!(head.contains("content-type: application/json"), "{head}");
        let s: Value = serde_json::from_str(&body).expect("the snapshot is JSON");
        assert_eq!(channel(&s, "camera/secret")["kind"], "channel");
        dashboard.close();
    });
}

/// The WebSocket upgrade without credentials (or with wrong ones) is refused `401`; with the
/// right ones it opens and delivers snapshots.
#[test]
fn a_login_guards_the_websocket() {
    with_watchdog("a_login_guards_the_websocket", || {
        let rt = Runtime::new();
        let (dashboard, _) = dashboard_with_login(&rt);
        let url = format!("ws://{}/ws", dashboard.address());
        let request = |authorization: Option<String>| {
            let mut request = url.as_str().into_client_request().unwrap();
            if let Some(value) = authorization {
                request.headers_mut().insert("authorization", value.parse().unwrap());
            }
            request
        };
        tokio().block_on(async {
            for authorization in [None, Some(basic("viewer", "wrong"))] {
                match tokio_tungstenite::connect_async(request(authorization.clone())).await {
                    Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                        assert_eq!(response.status(), 401, "{authorization:?}");
                        assert_eq!(response.headers()["www-authenticate"], "Basic realm=\"stampede\"");
                    }
                    Err(other) => panic!("{authorization:?}: refused otherwise: {other}"),
                    Ok(_) => panic!("{authorization:?}: the WebSocket opened"),
                }
            }
            let (mut ws, _) = tokio_tungstenite::connect_async(request(Some(basic("viewer", "secret"))))
                .await
                .expect("the WebSocket opens with the right credentials");
            let message = tokio::time::timeout(WAIT, ws.next()).await.expect("a snapshot in time");
            match message.expect("the socket stays open").expect("a message") {
                Message::Text(text) => assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}"),
                other => panic!("unexpected {other:?}"),
            }
        });
        dashboard.close();
    });
}

/// Accepted credentials are remembered: the login function runs once for many requests with
/// them; refused ones run it each time; a header over the bound never reaches it.
#[test]
fn accepted_credentials_are_checked_once() {
    with_watchdog("accepted_credentials_are_checked_once", || {
        let rt = Runtime::new();
        let (dashboard, calls) = dashboard_with_login(&rt);
        let address = dashboard.address();
        let right = basic("viewer", "secret");
        for _ in 0..5 {
            assert_eq!(http_get_as(address, "/api/snapshot", Some(&right)).unwrap().0, 200);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the login ran once for the same credentials");
        let wrong = basic("viewer", "guess");
        for _ in 0..3 {
            assert_eq!(http_get_as(address, "/api/snapshot", Some(&wrong)).unwrap().0, 401);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 4, "refusals are not remembered");
        let long = basic("viewer", &"x".repeat(AUTHORIZATION_BYTES_MAX));
        assert_eq!(http_get_as(address, "/api/snapshot", Some(&long)).unwrap().0, 401);
        assert_eq!(calls.load(Ordering::SeqCst), 4, "a header over the bound is refused unread");
        assert_eq!(http_get_as(address, "/", Some(&right)).unwrap().0, 200);
        assert_eq!(calls.load(Ordering::SeqCst), 4, "still remembered");
        dashboard.close();
    });
}

/// Without a login (`serve`) nothing asks for credentials, as before.
#[test]
fn without_a_login_nothing_is_asked() {
    with_watchdog("without_a_login_nothing_is_asked", || {
        let dashboard = Dashboard::serve(Runtime::new(), options(None, &[])).unwrap();
        let (status, head, _) = http_get_as(dashboard.address(), "/api/snapshot", None).unwrap();
        assert_eq!(status, 200);
        assert!(!head.contains("www-authenticate"), "{head}");
    });
}

/// A page of another origin cannot open the WebSocket (`403`, naming how to allow it); the
/// dashboard's own page and an allowed origin can, and so can a client that is no browser (no
/// `Origin`).
#[test]
fn only_its_own_page_and_allowed_origins_open_the_websocket() {
    with_watchdog("only_its_own_page_and_allowed_origins_open_the_websocket", || {
        let rt = Runtime::new();
        let allowed = "https://viewer.example";
        let options = DashboardOptions { allowed_origins: vec![allowed.into()], ..options(None, &[]) };
        let dashboard = Dashboard::serve(rt.clone(), options).unwrap();
        let url = format!("ws://{}/ws", dashboard.address());
        let own = format!("http://{}", dashboard.address());
        let request = |origin: Option<&str>| {
            let mut request = url.as_str().into_client_request().unwrap();
            if let Some(origin) = origin {
                request.headers_mut().insert("origin", origin.parse().unwrap());
            }
            request
        };
        tokio().block_on(async {
            match tokio_tungstenite::connect_async(request(Some("http://evil.example"))).await {
                Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                    assert_eq!(response.status(), 403);
                    let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).into_owned();
                    assert!(body.contains("--allow-origin http://evil.example"), "{body}");
                }
                Err(other) => panic!("refused otherwise: {other}"),
                Ok(_) => panic!("a page of another origin opened the WebSocket"),
            }
            for origin in [Some(own.as_str()), Some(allowed), None] {
                let opened = tokio_tungstenite::connect_async(request(origin)).await;
                assert!(opened.is_ok(), "{origin:?}: {:?}", opened.err());
            }
        });
        dashboard.close();
    });
}

/// A dashboard on an address other machines reach, without a login, is refused before it
/// listens, saying how to proceed; with `allow_anonymous` (or a login, or on loopback) the rule
/// lets it through. (192.0.2.1 is a documentation address: binding it then fails, which is
/// another error.)
#[test]
fn a_dashboard_beyond_loopback_needs_a_login_or_allow_anonymous() {
    let rt = Runtime::new();
    let beyond = "192.0.2.1".parse().unwrap();
    let refused_for_anonymity = |options: DashboardOptions| match Dashboard::serve(rt.clone(), options) {
        Err(Error::InvalidArgument { reason, .. }) if reason.contains("--allow-anonymous") => true,
        Ok(dashboard) => {
            dashboard.close();
            false
        }
        Err(_) => false,
    };
    assert!(refused_for_anonymity(DashboardOptions { host: beyond, ..options(None, &[]) }));
    assert!(!refused_for_anonymity(DashboardOptions { host: beyond, allow_anonymous: true, ..options(None, &[]) }));
    assert!(!refused_for_anonymity(options(None, &[])), "on loopback");
}
