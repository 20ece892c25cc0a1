//! The Foxglove WebSocket protocol (`foxglove.websocket.v1`), the part a live viewer needs: the
//! server's `serverInfo`, `advertise`, `unadvertise` and `status` (JSON text messages) and its
//! binary `messageData`; the client's `subscribe` and `unsubscribe`. Pure: no socket here.
//!
//! Why not the Foxglove SDK's own server: it cannot refuse a WebSocket upgrade by its `Origin`
//! header, and a page of any web site could then read a bridge on the user's loopback (the rule
//! every listener of the project keeps, docs/SECURITY.md). The SDK still gives the schemas and
//! their encoding (`stampede_view::foxglove`).

use base64::Engine;
use serde::{Deserialize, Serialize};
use stampede_view::foxglove::Kind;

/// The WebSocket subprotocol Foxglove and Lichtblick ask for.
pub const SUBPROTOCOL: &str = "foxglove.websocket.v1";

/// Opcode of a binary `messageData` message.
const MESSAGE_DATA: u8 = 0x01;
/// Bytes of a `messageData` message before its payload: opcode, subscription id, log time.
pub(crate) const MESSAGE_DATA_HEADER_BYTES: usize = 1 + 4 + 8;

/// A channel as the server advertises it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Advertised {
    pub id: u64,
    pub topic: String,
    /// `"protobuf"` or `"json"`.
    pub encoding: String,
    pub schema_name: String,
    /// Protobuf: the base64 `FileDescriptorSet`; JSON: empty (schemaless).
    pub schema: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_encoding: Option<String>,
}

impl Advertised {
    /// Channel `id` on `topic`, of `kind`: protobuf with its schema (a binary
    /// `FileDescriptorSet`), or schemaless JSON.
    pub(crate) fn of(kind: Kind, id: u64, topic: &str) -> Advertised {
        let schema = kind.schema();
        let schema = schema.as_ref();
        Advertised {
            id,
            topic: topic.to_owned(),
            encoding: kind.message_encoding().to_owned(),
            schema_name: schema.map_or_else(|| topic.to_owned(), |s| s.name.clone()),
            schema: schema.map_or_else(String::new, |s| base64::engine::general_purpose::STANDARD.encode(&s.data)),
            schema_encoding: schema.map(|s| s.encoding.clone()),
        }
    }
}

/// How serious a status message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Info = 0,
    Warning = 1,
    Error = 2,
}

/// What the server sends as text.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub(crate) enum ServerMessage {
    #[serde(rename_all = "camelCase")]
    ServerInfo {
        name: String,
        capabilities: Vec<String>,
        supported_encodings: Vec<String>,
        metadata: std::collections::BTreeMap<String, String>,
        session_id: String,
    },
    Advertise {
        channels: Vec<Advertised>,
    },
    #[serde(rename_all = "camelCase")]
    Unadvertise {
        channel_ids: Vec<u64>,
    },
    Status {
        level: u8,
        message: String,
        id: String,
    },
}

impl ServerMessage {
    /// A status message (`id` lets a later one replace it in the viewer).
    pub(crate) fn status(level: Level, id: &str, message: String) -> ServerMessage {
        ServerMessage::Status { level: level as u8, message, id: id.to_owned() }
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("server messages are plain data")
    }
}

/// One subscription a client asks for: its own id for it, and the channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Subscription {
    pub id: u32,
    pub channel_id: u64,
}

/// What a client sends as text (other ops are answered with a status, not an error).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub(crate) enum ClientMessage {
    Subscribe {
        subscriptions: Vec<Subscription>,
    },
    #[serde(rename_all = "camelCase")]
    Unsubscribe {
        subscription_ids: Vec<u32>,
    },
}

impl ClientMessage {
    /// The message in `text`, or why it is none the server serves.
    pub(crate) fn parse(text: &str) -> Result<ClientMessage, String> {
        serde_json::from_str(text).map_err(|e| {
            let op = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.get("op").and_then(|op| op.as_str()).map(str::to_owned));
            match op {
                Some(op) => format!("\"{op}\" is not served here (only subscribe and unsubscribe): {e}"),
                None => format!("not a Foxglove WebSocket message: {e}"),
            }
        })
    }
}

/// The binary `messageData` message of `payload` for `subscription`, logged at `log_time_ns`.
pub(crate) fn message_data(subscription: u32, log_time_ns: u64, payload: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(MESSAGE_DATA_HEADER_BYTES + payload.len());
    message.push(MESSAGE_DATA);
    message.extend_from_slice(&subscription.to_le_bytes());
    message.extend_from_slice(&log_time_ns.to_le_bytes());
    debug_assert_eq!(message.len(), MESSAGE_DATA_HEADER_BYTES);
    message.extend_from_slice(payload);
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's messages are the protocol's JSON, field for field.
    #[test]
    fn server_messages_are_the_protocols_json() {
        let advertised = Advertised::of(Kind::Json, 3, "kiosk/blobs");
        let json = ServerMessage::Advertise { channels: vec![advertised] }.to_json();
        assert_eq!(
            json,
            r#"{"op":"advertise","channels":[{"id":3,"topic":"kiosk/blobs","encoding":"json","schemaName":"kiosk/blobs","schema":""}]}"#
        );
        let gone = ServerMessage::Unadvertise { channel_ids: vec![3] }.to_json();
        assert_eq!(gone, r#"{"op":"unadvertise","channelIds":[3]}"#);
        let status = ServerMessage::status(Level::Warning, "skips", "behind".into()).to_json();
        assert_eq!(status, r#"{"op":"status","level":1,"message":"behind","id":"skips"}"#);
    }

    /// Subscribe and unsubscribe are read; anything else says what it is and what is served.
    #[test]
    fn client_messages_are_read_or_refused_with_a_reason() {
        let subscribe = ClientMessage::parse(r#"{"op":"subscribe","subscriptions":[{"id":7,"channelId":3}]}"#);
        assert_eq!(
            subscribe,
            Ok(ClientMessage::Subscribe { subscriptions: vec![Subscription { id: 7, channel_id: 3 }] })
        );
        let unsubscribe = ClientMessage::parse(r#"{"op":"unsubscribe","subscriptionIds":[7]}"#);
        assert_eq!(unsubscribe, Ok(ClientMessage::Unsubscribe { subscription_ids: vec![7] }));
        let other = ClientMessage::parse(r#"{"op":"advertise","channels":[]}"#).unwrap_err();
        assert!(other.contains("\"advertise\" is not served"), "{other}");
        assert!(ClientMessage::parse("{{{").unwrap_err().contains("not a Foxglove"));
    }

    /// A message's header: opcode 1, the subscription id and the log time, little-endian.
    #[test]
    fn message_data_has_the_protocols_header() {
        let message = message_data(0x0102_0304, 5, b"xy");
        assert_eq!(message, [1, 4, 3, 2, 1, 5, 0, 0, 0, 0, 0, 0, 0, b'x', b'y']);
    }
}
