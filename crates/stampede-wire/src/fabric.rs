//! What Stampede asks of Zenoh: session configurations for a node and a client, and the key
//! expressions a node answers on.
//!
//! - `stampede/<node>/rpc` — the node's queryable; every request is a query there.
//! - `stampede/<node>/session/<session-id>` — a client's liveliness token: the node closes the
//!   session when it disappears.
//! - `stampede/<node>/names` — the node's name changes ([`stampede_core::WatchEvent`]);
//!   `stampede/<node>/alive` — its liveliness token (nodes up and down).
//! - `stampede/<node>/reclaimed/<session-id>` — items reclaimed on the node for the session's GC
//!   handlers ([`crate::ReclaimEvent`]).
//!
//! Multicast scouting is off: nodes and clients find each other through explicit endpoints only.
//!
//! **TLS** (docs/SECURITY.md): a `tls/<host>:<port>` endpoint is zenoh's TLS transport over
//! TCP, a `quic/<host>:<port>` one its QUIC transport (TLS 1.3 inside, over UDP); both use rustls
//! and the same files, under `transport/link/tls/…`, from [`Tls`]: the files are checked
//! here (present, readable, PEM) so that a mistake is `InvalidArgument` naming the file, not a
//! failed handshake. See `docs/SECURITY.md`.

use std::path::Path;
use std::time::Duration;

use stampede_core::{Error, Result};
use zenoh::Config;

use crate::request::{REQUEST_HEADER_BYTES_MAX, SESSION_ID_BYTES_MAX};

/// How long after a client vanishes without closing its link (a crash, a host gone, a cable cut)
/// its session is closed, by default: the zenoh lease a client announces. Until then the session's
/// claims hold ts_min everywhere, so it is short; a live client's link is never silent that long
/// (zenoh sends a keep-alive four times per lease).
pub const LIVELINESS_TIMEOUT_DEFAULT: Duration = Duration::from_secs(3);

/// Longest zenoh waits to open a link, when the caller gives no shorter bound (zenoh's default).
pub const OPEN_TIMEOUT_MAX: Duration = Duration::from_secs(10);

/// Room zenoh allows in one message beyond the largest payload and request header.
const MESSAGE_SLACK_BYTES: usize = 64 * 1024;

/// How long a node's zenoh gives a new link to finish its handshake before closing it (zenoh's
/// default is 10 s: a socket that connects and never speaks held a place that long).
pub const ACCEPT_TIMEOUT: Duration = Duration::from_secs(2);

/// Links a node's zenoh holds in their handshake at once (zenoh's default is 100: 101 idle
/// sockets locked every newcomer out until they timed out). Past it a new link is refused.
pub const ACCEPT_PENDING_MAX: usize = 1024;

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

/// Where a node sends a session's put notices and pushed items (`PushEvent`, docs/PREFETCH.md).
pub fn push_key(node: &str, session: &str) -> String {
    format!("stampede/{node}/push/{session}")
}

/// Where a node publishes its runtime's name changes.
pub fn names_key(node: &str) -> String {
    format!("stampede/{node}/names")
}

/// A node's hello, a liveliness token that says which wire version it speaks and which access
/// policy it serves (the policy's digest in hex, or `none`): what a node joining the mesh
/// compares with its own.
pub fn hello_key(node: &str, version: u8, policy: &str) -> String {
    format!("stampede/{node}/hello/{version}/{policy}")
}

/// Every node's hello.
pub const HELLO_KEYS: &str = "stampede/*/hello/*/*";

/// The node, wire version and policy a hello key names.
pub fn parse_hello(key: &str) -> Option<(&str, u8, &str)> {
    let mut parts = key.strip_prefix("stampede/")?.split('/');
    let (node, hello, version, policy) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (hello == "hello" && parts.next().is_none() && !node.is_empty()).then_some(())?;
    Some((node, version.parse().ok()?, policy))
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

/// The prefix of zenoh's TLS endpoints.
pub const TLS_PREFIX: &str = "tls/";
/// The prefix of zenoh's QUIC endpoints: TLS 1.3 too, configured with the same files.
pub const QUIC_PREFIX: &str = "quic/";

/// `true` for an endpoint secured by TLS: `tls/…` or `quic/…`.
pub fn is_tls(endpoint: &str) -> bool {
    endpoint.starts_with(TLS_PREFIX) || endpoint.starts_with(QUIC_PREFIX)
}

/// Whether `endpoint` reaches this machine only: a Unix socket, or an IP endpoint on a loopback
/// address (`127.0.0.0/8`, `::1`, `localhost`). A node serving anything else without an access
/// policy must be told so (`NodeOptions::allow_anonymous`).
pub fn is_local(endpoint: &str) -> bool {
    let Some((protocol, address)) = endpoint.split_once('/') else { return false };
    if protocol.starts_with("unixsock") {
        return true;
    }
    // `<host>:<port>`, then zenoh's `#option=…` if any.
    names_loopback(address.split('#').next().unwrap_or(""))
}

/// Whether `host` — a name or address with its port (`127.0.0.1:8080`, `[::1]:80`,
/// `localhost:7447`), as in an endpoint or an HTTP `Host` header — names this machine's loopback.
pub fn names_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The TLS files of a node or a client (paths to PEM files).
#[derive(Clone, Copy, Debug)]
pub struct Tls<'a> {
    /// The CA certificate(s) trusted: a client's, to check the node's certificate (besides the
    /// public web PKI roots zenoh always trusts); a node's, to check client certificates in mutual
    /// mode and the certificates of the nodes it connects to.
    pub root_ca: Option<&'a Path>,
    /// The certificate chain and private key presented: a node's to its clients (and to the nodes
    /// it connects to); a client's to a node in mutual mode.
    pub identity: Option<(&'a Path, &'a Path)>,
    /// A node's: clients must present a certificate signed by `root_ca` (a client presents
    /// `identity` when it has one).
    pub mutual: bool,
}

/// The zenoh configuration of a node: a router listening on `listen`, connecting to `connect`,
/// with leases of `lease` and messages of at most `payload_bytes_max` plus a header, and `tls`
/// for its `tls/` endpoints (required when it has one: its certificate and private key).
pub fn node_config(
    listen: &[String],
    connect: &[String],
    lease: Duration,
    payload_bytes_max: usize,
    tls: Option<Tls<'_>>,
) -> Result<Config> {
    let op = "serve";
    let mut config = base_config(op, "router", lease)?;
    insert(&mut config, op, "listen/endpoints", &json(listen))?;
    insert(&mut config, op, "connect/endpoints", &json(connect))?;
    let message_bytes_max = payload_bytes_max.saturating_add(REQUEST_HEADER_BYTES_MAX + MESSAGE_SLACK_BYTES);
    insert(&mut config, op, "transport/link/rx/max_message_size", &message_bytes_max.to_string())?;
    insert(&mut config, op, "transport/unicast/accept_timeout", &ACCEPT_TIMEOUT.as_millis().to_string())?;
    insert(&mut config, op, "transport/unicast/accept_pending", &ACCEPT_PENDING_MAX.to_string())?;
    let endpoints = listen.iter().chain(connect).map(String::as_str);
    let listen_tls = listen.iter().find(|e| is_tls(e));
    match (tls, listen_tls) {
        (None, Some(endpoint)) => {
            let reason = "a tls/ or quic/ endpoint needs the node's certificate and private key \
                          (--tls-certificate and --tls-private-key; NodeOptions::tls)"
                .to_owned();
            Err(Error::InvalidArgument { op, name: endpoint.clone(), reason })
        }
        (None, None) => Ok(config),
        (Some(tls), _) => {
            let Some((certificate, private_key)) = tls.identity else {
                return Err(tls_refused(op, "a node's TLS needs its certificate and private key"));
            };
            check_tls_endpoints(op, endpoints)?;
            if tls.mutual && tls.root_ca.is_none() {
                return Err(tls_refused(op, "mutual TLS needs the root CA that signs client certificates"));
            }
            let (certificate, private_key) =
                (pem_path(op, certificate, "certificate")?, pem_path(op, private_key, "key")?);
            insert(&mut config, op, "transport/link/tls/listen_certificate", &json(certificate))?;
            insert(&mut config, op, "transport/link/tls/listen_private_key", &json(private_key))?;
            // The node presents the same identity to the nodes it connects to (a mesh in mutual mode).
            insert(&mut config, op, "transport/link/tls/connect_certificate", &json(certificate))?;
            insert(&mut config, op, "transport/link/tls/connect_private_key", &json(private_key))?;
            if let Some(root_ca) = tls.root_ca {
                insert(
                    &mut config,
                    op,
                    "transport/link/tls/root_ca_certificate",
                    &json(pem_path(op, root_ca, "certificate")?),
                )?;
            }
            insert(&mut config, op, "transport/link/tls/enable_mtls", &tls.mutual.to_string())?;
            Ok(config)
        }
    }
}

/// The zenoh configuration of a client of the node at `endpoint`, announcing a lease of `lease`
/// (how long the node waits, after the client vanishes without closing its link, before its
/// session is closed), with `tls` for a `tls/` endpoint (`None`: trust the public web PKI roots
/// only, present no certificate).
pub fn client_config(endpoint: &str, lease: Duration, tls: Option<Tls<'_>>) -> Result<Config> {
    let op = "connect";
    let mut config = base_config(op, "client", lease)?;
    insert(&mut config, op, "connect/endpoints", &json(&[endpoint.to_owned()]))?;
    let Some(tls) = tls else { return Ok(config) };
    check_tls_endpoints(op, std::iter::once(endpoint))?;
    if let Some(root_ca) = tls.root_ca {
        insert(
            &mut config,
            op,
            "transport/link/tls/root_ca_certificate",
            &json(pem_path(op, root_ca, "certificate")?),
        )?;
    }
    if let Some((certificate, private_key)) = tls.identity {
        let (certificate, private_key) = (pem_path(op, certificate, "certificate")?, pem_path(op, private_key, "key")?);
        insert(&mut config, op, "transport/link/tls/connect_certificate", &json(certificate))?;
        insert(&mut config, op, "transport/link/tls/connect_private_key", &json(private_key))?;
        insert(&mut config, op, "transport/link/tls/enable_mtls", "true")?;
    }
    Ok(config)
}

/// What to check when a TLS connection fails: zenoh logs the handshake's error but returns only
/// "unable to connect".
pub const TLS_HANDSHAKE_HINT: &str = "TLS: check that the node listens on tls/ at this address, that the root CA \
     given (--tls-root-ca, tls_root_ca=, ClientTls::root_ca) signed the node's certificate, that the certificate names \
     this host (IP address or DNS name) and has not expired, and, when the node requires mutual TLS, that a client \
     certificate signed by the node's CA and its private key are given";

/// Refuses TLS files given with no `tls/` endpoint to use them on.
fn check_tls_endpoints<'a>(op: &'static str, mut endpoints: impl Iterator<Item = &'a str>) -> Result<()> {
    if endpoints.any(is_tls) {
        return Ok(());
    }
    Err(tls_refused(op, "TLS files are given but no endpoint is tls/<host>:<port> or quic/<host>:<port>"))
}

fn tls_refused(op: &'static str, reason: &str) -> Error {
    Error::InvalidArgument { op, name: "tls".to_owned(), reason: reason.to_owned() }
}

/// `path` as a string for zenoh, once it is known to be a readable PEM file holding a
/// `what` (`"certificate"`: `-----BEGIN CERTIFICATE-----`; `"key"`: `… PRIVATE KEY-----`).
fn pem_path<'a>(op: &'static str, path: &'a Path, what: &str) -> Result<&'a str> {
    let refuse = |reason: String| Error::InvalidArgument { op, name: path.display().to_string(), reason };
    let text = std::fs::read_to_string(path).map_err(|e| refuse(format!("cannot read this TLS file: {e}")))?;
    let found = match what {
        "key" => text.lines().any(|l| l.starts_with("-----BEGIN") && l.ends_with("PRIVATE KEY-----")),
        _ => text.lines().any(|l| l.trim_end() == "-----BEGIN CERTIFICATE-----"),
    };
    if !found {
        let expected = if what == "key" {
            "a PEM private key (-----BEGIN PRIVATE KEY-----)"
        } else {
            "a PEM certificate (-----BEGIN CERTIFICATE-----)"
        };
        return Err(refuse(format!("this TLS file does not hold {expected}")));
    }
    path.to_str().ok_or_else(|| refuse("a TLS file's path must be UTF-8".into()))
}

/// Bounds the time zenoh takes to open the link of `config` (its TCP, TLS or QUIC connection and
/// zenoh's handshake) by `timeout` (at most [`OPEN_TIMEOUT_MAX`]): against a listener that accepts
/// and never speaks, a connect returns when its caller's timeout is up.
pub fn bound_open(config: &mut Config, timeout: Duration) -> Result<()> {
    let ms = u64::try_from(timeout.min(OPEN_TIMEOUT_MAX).as_millis()).unwrap_or(u64::MAX).max(1);
    insert(config, "connect", "transport/unicast/open_timeout", &ms.to_string())
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

    #[test]
    fn local_endpoints_are_unix_sockets_and_loopback_addresses() {
        for local in [
            "unixsock-stream/tmp/n.sock",
            "tcp/127.0.0.1:7447",
            "tcp/127.8.0.1:7447",
            "tls/localhost:7448",
            "tcp/[::1]:7447",
            "quic/127.0.0.1:7449#iface=lo",
        ] {
            assert!(is_local(local), "{local}");
        }
        for beyond in ["tcp/0.0.0.0:7447", "tcp/192.168.1.2:7447", "tls/kiosk.lan:7448", "tcp/[::]:7447", "nonsense"] {
            assert!(!is_local(beyond), "{beyond}");
        }
    }

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
        assert!(node_config(&["tcp/127.0.0.1:7447".into()], &[], lease, 1 << 20, None).is_ok());
        assert!(client_config("unixsock-stream/tmp/x.sock", lease, None).is_ok());
        let e = node_config(&["nonsense".into()], &[], lease, 1 << 20, None).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    }

    /// TLS mistakes are `InvalidArgument` before zenoh sees them: a tls/ listener without
    /// certificates, a missing file, a file that is not PEM, TLS files with no tls/ endpoint.
    #[test]
    fn tls_configurations() {
        let lease = Duration::from_secs(1);
        let listen = ["tls/127.0.0.1:7447".to_owned()];
        let invalid = |r: Result<Config>| matches!(r, Err(Error::InvalidArgument { .. }));
        assert!(invalid(node_config(&listen, &[], lease, 1 << 20, None)));
        let dir = std::env::temp_dir().join(format!("stampede-fabric-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key, junk) = (dir.join("c.pem"), dir.join("k.pem"), dir.join("junk.pem"));
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n").unwrap();
        std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n").unwrap();
        std::fs::write(&junk, "hello").unwrap();
        fn tls<'a>(certificate: &'a Path, private_key: &'a Path) -> Tls<'a> {
            Tls { root_ca: None, identity: Some((certificate, private_key)), mutual: false }
        }
        let (c, k, j) = (cert.as_path(), key.as_path(), junk.as_path());
        assert!(node_config(&listen, &[], lease, 1 << 20, Some(tls(c, k))).is_ok());
        assert!(invalid(node_config(&listen, &[], lease, 1 << 20, Some(tls(j, k)))));
        assert!(invalid(node_config(&listen, &[], lease, 1 << 20, Some(tls(c, Path::new("/nonexistent/k.pem"))))));
        assert!(invalid(node_config(&["tcp/127.0.0.1:7447".into()], &[], lease, 1 << 20, Some(tls(c, k)))));
        let mutual = Tls { mutual: true, ..tls(c, k) };
        assert!(invalid(node_config(&listen, &[], lease, 1 << 20, Some(mutual))));
        let client = Tls { root_ca: Some(c), identity: None, mutual: false };
        assert!(client_config("tls/127.0.0.1:7447", lease, Some(client)).is_ok());
        assert!(invalid(client_config("tcp/127.0.0.1:7447", lease, Some(client))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
