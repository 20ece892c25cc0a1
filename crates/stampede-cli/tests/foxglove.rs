//! `stampede serve --foxglove <port>` and `stampede foxglove --connect <endpoint>` as real
//! processes: each prints `foxglove on <url>`, a client of the Foxglove WebSocket protocol sees
//! the node's channel advertised, subscribes, and decodes the item a client of the node put;
//! SIGTERM ends it with status 0; `--foxglove` beside `--access` is refused, saying what to do.
//!
//! Every wait is bounded by [`WAIT`]; every process is killed when its guard drops, and by the
//! watchdog before it aborts a hung test.

use std::net::TcpStream;
use std::process::Command;

use foxglove::messages::Log;
use foxglove::Decode;
use serde_json::{json, Value};
use stampede::{ChannelOptions, Codec};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Message, WebSocket};

mod process;
use process::{client, serve, unix_endpoint, with_watchdog, Process, WAIT};

type Socket = WebSocket<tokio_tungstenite::tungstenite::stream::MaybeTlsStream<TcpStream>>;

/// The URL in the process's next line, `foxglove on ws://<address>`.
fn foxglove_url(process: &Process) -> String {
    let line = process.line(|line| line.starts_with("foxglove on "));
    line.strip_prefix("foxglove on ").unwrap().to_owned()
}

/// Opens the bridge at `url` as Foxglove does (its subprotocol), reads bounded by [`WAIT`].
fn open(url: &str) -> Socket {
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "foxglove.websocket.v1".parse().unwrap());
    let (socket, _) = tokio_tungstenite::tungstenite::connect(request).expect("the bridge accepts");
    if let tokio_tungstenite::tungstenite::stream::MaybeTlsStream::Plain(stream) = socket.get_ref() {
        stream.set_read_timeout(Some(WAIT)).unwrap();
    }
    socket
}

/// The `messageData` payload of the first item of `topic`: subscribes when it is advertised.
fn first_item_of(socket: &mut Socket, topic: &str) -> Vec<u8> {
    loop {
        match socket.read().expect("a message in time") {
            Message::Text(text) => {
                let value: Value = serde_json::from_str(&text).unwrap();
                let advertised = value["op"] == "advertise";
                let channels = value["channels"].as_array().cloned().unwrap_or_default();
                if let Some(channel) = channels.iter().find(|c| advertised && c["topic"] == topic) {
                    assert_eq!(channel["schemaName"], "foxglove.Log");
                    let subscribe =
                        json!({"op": "subscribe", "subscriptions": [{"id": 9, "channelId": channel["id"]}]});
                    socket.send(Message::Text(subscribe.to_string().into())).unwrap();
                }
            }
            Message::Binary(bytes) => {
                assert_eq!((bytes[0], u32::from_le_bytes(bytes[1..5].try_into().unwrap())), (1, 9));
                return bytes[13..].to_vec();
            }
            _ => {}
        }
    }
}

/// A node with a text channel holding "hello" at timestamp 0.
fn node_with_text(dir: &tempfile::TempDir, args: &[&str]) -> (Process, String, stampede::Runtime, stampede::Task) {
    let endpoint = unix_endpoint(dir);
    let node = serve(&endpoint, args);
    let rt = client(&endpoint);
    let options = ChannelOptions { codec: Some(Codec::Utf8), ..ChannelOptions::default() };
    let channel = rt.create_channel("cam/log", options).unwrap();
    let task = rt.task(0).unwrap();
    task.attach_output(&channel).unwrap().put(0, "hello").unwrap();
    (node, endpoint, rt, task)
}

#[test]
fn serve_with_a_foxglove_bridge() {
    with_watchdog("serve_with_a_foxglove_bridge", || {
        let dir = tempfile::tempdir().unwrap();
        let (mut node, _endpoint, _rt, _task) = node_with_text(&dir, &["--foxglove", "0"]);
        let mut socket = open(&foxglove_url(&node));
        assert_eq!(Log::decode(&first_item_of(&mut socket, "cam/log")[..]).unwrap().message, "hello");
        node.signal("TERM");
        assert!(node.wait().success());
    });
}

#[test]
fn foxglove_connects_to_a_node() {
    with_watchdog("foxglove_connects_to_a_node", || {
        let dir = tempfile::tempdir().unwrap();
        let (_node, endpoint, _rt, _task) = node_with_text(&dir, &[]);
        let mut bridge = Process::spawn(Command::new(env!("CARGO_BIN_EXE_stampede")).args([
            "foxglove",
            "cam",
            "--connect",
            &endpoint,
            "--port",
            "0",
            "--tick",
            "cam/log=ns",
        ]));
        let mut socket = open(&foxglove_url(&bridge));
        let log = Log::decode(&first_item_of(&mut socket, "cam/log")[..]).unwrap();
        assert_eq!((log.message.as_str(), log.timestamp.unwrap().total_nanos()), ("hello", 0));
        bridge.signal("TERM");
        assert!(bridge.wait().success());
    });
}

#[test]
fn foxglove_beside_an_access_policy_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["serve", "--listen", "tcp/127.0.0.1:0", "--access", "policy.toml", "--foxglove", "0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("stampede foxglove") && stderr.contains("--user"), "{stderr}");
}
