//! What Stampede asks of Zenoh: session configurations for a node and a client, and the key
//! expressions a node answers on.
//!
//! - `stampede/<node>/rpc` — the node's queryable; every request is a query there.
//! - `stampede/<node>/session/<session-id>` — a client's liveliness token: the node closes the
//!   session when it disappears.
//! - `stampede/<node>/names` — the node's name changes ([`crate::WatchEvent`]);
//!   `stampede/<node>/alive` — its liveliness token (nodes up and down).
//! - `stampede/<node>/reclaimed/<session-id>` — items reclaimed on the node for the session's GC
//!   handlers ([`crate::remote::wire::ReclaimEvent`]).
//!
//! Multicast scouting is off: nodes and clients find each other through explicit endpoints only.

use std::time::Duration;

use crate::{Error, Result};
use zenoh::Config;

use crate::remote::wire::{REQUEST_HEADER_BYTES_MAX, SESSION_ID_BYTES_MAX};

/// Room zenoh allows in one message beyond the largest payload and request header.
const MESSAGE_SLACK_BYTES: usize = 64 * 1024;

/// The key a node's queryable answers on.
pub fn rpc_key(node: &str) -> String {
    format!("stampede/{node}/rpc")
}

/// The liveliness token of a client's session.
pub fn session_key(node: &str, session: &str) -> String {
    format!("stampede/{node}/session/{session}")
}

/// Where a node sends the items reclaimed for a session's GC handlers.
pub fn reclaimed_key(node: &str, session: &str) -> String {
    format!("stampede/{node}/reclaimed/{session}")
}

/// Where a node publishes its runtime's name changes.
pub fn names_key(node: &str) -> String {
    format!("stampede/{node}/names")
}

/// A node's liveliness token: it is up while the token exists.
pub fn alive_key(node: &str) -> String {
    format!("stampede/{node}/alive")
}

/// The node a liveliness key `stampede/<node>/alive` names.
pub fn node_of_alive(key: &str) -> Option<&str> {
    key.strip_prefix("stampede/")?.strip_suffix("/alive").filter(|node| !node.is_empty() && !node.contains('/'))
}

/// What a node's liveliness subscriber listens to.
pub fn sessions_key(node: &str) -> String {
    format!("stampede/{node}/session/*")
}

/// The session id at the end of a liveliness key, if it is one.
pub fn session_of(key: &str) -> Option<&str> {
    let id = key.rsplit('/').next()?;
    is_session_id(id).then_some(id)
}

/// `true` for a well-formed session id: 1 to [`SESSION_ID_BYTES_MAX`] lowercase hex digits.
pub fn is_session_id(id: &str) -> bool {
    (1..=SESSION_ID_BYTES_MAX).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The zenoh configuration of a node: a router listening on `listen`, connecting to `connect`,
/// with leases of `lease` and messages of at most `payload_bytes_max` plus a header.
pub fn node_config(listen: &[String], connect: &[String], lease: Duration, payload_bytes_max: usize) -> Result<Config> {
    let mut config = base_config("serve", "router", lease)?;
    insert(&mut config, "serve", "listen/endpoints", &json(listen))?;
    insert(&mut config, "serve", "connect/endpoints", &json(connect))?;
    let message_bytes_max = payload_bytes_max.saturating_add(REQUEST_HEADER_BYTES_MAX + MESSAGE_SLACK_BYTES);
    insert(&mut config, "serve", "transport/link/rx/max_message_size", &message_bytes_max.to_string())?;
    Ok(config)
}

/// The zenoh configuration of a client of the node at `endpoint`, announcing a lease of `lease`
/// (how long the node waits, after the client vanishes without closing its link, before its
/// session is closed).
pub fn client_config(endpoint: &str, lease: Duration) -> Result<Config> {
    let mut config = base_config("connect", "client", lease)?;
    insert(&mut config, "connect", "connect/endpoints", &json(&[endpoint.to_owned()]))?;
    Ok(config)
}

fn base_config(op: &'static str, mode: &str, lease: Duration) -> Result<Config> {
    let mut config = Config::default();
    insert(&mut config, op, "mode", &json(&mode))?;
    insert(&mut config, op, "scouting/multicast/enabled", "false")?;
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1);
    insert(&mut config, op, "transport/link/tx/lease", &lease_ms.to_string())?;
    Ok(config)
}

fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    // Strings and string lists always serialize.
    serde_json::to_string(value).expect("strings serialize to JSON")
}

fn insert(config: &mut Config, op: &'static str, key: &str, value: &str) -> Result<()> {
    config.insert_json5(key, value).map_err(|e| Error::InvalidArgument {
        op,
        name: value.to_owned(),
        reason: format!("zenoh refuses {key} = {value}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Session ids are short lowercase hex; anything else in a liveliness key is ignored.
    #[test]
    fn session_ids() {
        assert_eq!(session_of("stampede/n/session/0a1b"), Some("0a1b"));
        assert_eq!(session_of("stampede/n/session/0A1B"), None);
        assert_eq!(session_of("stampede/n/session/"), None);
        assert!(!is_session_id(&"a".repeat(SESSION_ID_BYTES_MAX + 1)));
    }

    /// Bad endpoints are refused as `InvalidArgument` naming them.
    #[test]
    fn configurations() {
        let lease = Duration::from_secs(1);
        assert!(node_config(&["tcp/127.0.0.1:7447".into()], &[], lease, 1 << 20).is_ok());
        assert!(client_config("unixsock-stream/tmp/x.sock", lease).is_ok());
        let e = node_config(&["nonsense".into()], &[], lease, 1 << 20).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    }
}
