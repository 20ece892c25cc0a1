//! The node's WebSocket endpoint (docs/BROWSER.md) from Rust, for what the browser package's tests
//! (`browser/test/`, in Node.js) cannot set up: `wss://` with the node's certificate, a client
//! that does not trust it, protected-by-default for an endpoint beyond loopback, and a message
//! beyond the node's payload bound on an open session. The browser package's tests cover the
//! operations, origins, pings and hostile messages before a session.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use stampede::{Error, Runtime};
use stampede_node::{Node, NodeOptions};
use stampede_wire::{decode_reply, encode, Reply, Request, RequestHeader};
use support::pki::Pki;
use support::with_watchdog;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

/// How long a test waits for one exchange.
const EXCHANGE: Duration = Duration::from_secs(10);

fn node(adjust: impl FnOnce(&mut NodeOptions)) -> (Node, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut options = NodeOptions::listen(&format!("unixsock-stream/{}", dir.path().join("node.sock").display()));
    options.websocket = Some("0".into());
    adjust(&mut options);
    (Node::serve(Runtime::new().engine().unwrap(), options).expect("the node serves"), dir)
}

fn block_on<T>(body: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(body)
}

/// A call's message: its number, then the request.
fn call(number: u32, header: &RequestHeader, payload: &[u8]) -> Message {
    let mut message = number.to_le_bytes().to_vec();
    message.extend(encode(header));
    message.extend_from_slice(payload);
    Message::Binary(message.into())
}

/// The next reply's call number, error text and reply.
async fn reply<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>) -> (u32, String, Reply)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let message = tokio::time::timeout(EXCHANGE, ws.next()).await.expect("a reply in time");
        let bytes = match message {
            Some(Ok(Message::Binary(bytes))) => bytes,
            // Pings, pongs and the node's close frame come with replies; nothing else may.
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("the socket failed before its reply came: {e}"),
            None => panic!("the socket ended before its reply came"),
        };
        let number = u32::from_le_bytes(bytes[..4].try_into().unwrap());
        let length = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        let text = String::from_utf8(bytes[8..8 + length].to_vec()).unwrap();
        let (reply, _) = decode_reply(&bytes[8 + length..]).expect("a reply decodes");
        return (number, text, reply);
    }
}

fn tls_client(pki: &Pki, ca: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(pki.path(ca)).unwrap();
    for certificate in rustls_pemfile::certs(&mut pem.as_slice()) {
        roots.add(certificate.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

#[test]
fn a_node_with_tls_serves_wss_with_its_certificate() {
    with_watchdog("a_node_with_tls_serves_wss_with_its_certificate", || {
        let pki = Pki::new();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let (node, _dir) = node(|options| {
            options.listen = vec![format!("tls/127.0.0.1:{port}")];
            options.tls = Some(pki.node(false));
        });
        let url = node.websocket_url().expect("an endpoint");
        assert!(url.starts_with("wss://"), "{url}");
        let address = node.websocket_address().unwrap();
        block_on(async {
            let tcp = TcpStream::connect(address).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let tls =
                tls_client(&pki, "ca.pem").connect(name.clone(), tcp).await.expect("the node's certificate is trusted");
            let (mut ws, _) = tokio_tungstenite::client_async(format!("wss://localhost:{}/", address.port()), tls)
                .await
                .expect("the upgrade over TLS");
            ws.send(call(1, &RequestHeader::new("", [0; 16], Request::Hello), b"")).await.unwrap();
            let (number, text, reply) = reply(&mut ws).await;
            assert_eq!((number, text.as_str()), (1, ""));
            assert!(matches!(reply, Reply::Hello(hello) if hello.payload_bytes_max > 0));

            let tcp = TcpStream::connect(address).await.unwrap();
            let refused = tls_client(&pki, "other-ca.pem").connect(name, tcp).await;
            assert!(refused.is_err(), "a client that trusts another CA does not get through the handshake");
            let plain = TcpStream::connect(address).await.unwrap();
            let upgrade = tokio_tungstenite::client_async(format!("ws://localhost:{}/", address.port()), plain);
            let plain = tokio::time::timeout(EXCHANGE, upgrade).await.expect("refused in time");
            assert!(plain.is_err(), "a plain WebSocket on a TLS endpoint is refused");
        });
    });
}

#[test]
fn an_endpoint_beyond_loopback_needs_a_policy_or_allow_anonymous() {
    with_watchdog("an_endpoint_beyond_loopback_needs_a_policy_or_allow_anonymous", || {
        let dir = tempfile::tempdir().unwrap();
        let mut options = NodeOptions::listen(&format!("unixsock-stream/{}", dir.path().join("n.sock").display()));
        options.websocket = Some("0.0.0.0:0".into());
        let refused = Node::serve(Runtime::new().engine().unwrap(), options.clone()).expect_err("refused");
        assert!(
            matches!(&refused, Error::InvalidArgument { reason, .. } if reason.contains("websocket 0.0.0.0:0") && reason.contains("--allow-anonymous")),
            "{refused}"
        );
        options.websocket = Some("not an address".into());
        let refused = Node::serve(Runtime::new().engine().unwrap(), options.clone()).expect_err("refused");
        assert!(refused.to_string().contains("neither a port nor an address"), "{refused}");
        options.websocket = Some("0.0.0.0:0".into());
        options.allow_anonymous = true;
        let node = Node::serve(Runtime::new().engine().unwrap(), options).expect("allowed when asked for");
        assert!(node.websocket_address().is_some_and(|a| a.ip().is_unspecified()));
    });
}

#[test]
fn a_message_beyond_the_payload_bound_is_refused_and_the_node_stays_up() {
    with_watchdog("a_message_beyond_the_payload_bound_is_refused_and_the_node_stays_up", || {
        let (node, _dir) = node(|options| options.payload_bytes_max = 4096);
        let address = node.websocket_address().unwrap();
        block_on(async {
            let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{address}/")).await.unwrap();
            let open = RequestHeader::new("ab12", [0; 16], Request::Open { user: None, password: None });
            ws.send(call(1, &open, b"")).await.unwrap();
            let (_, _, opened) = reply(&mut ws).await;
            let Reply::Opened(secret) = opened else { panic!("opened: {opened:?}") };
            let mut ts_min = RequestHeader::new("ab12", secret, Request::Op(stampede_core::Op::TsMin));
            ts_min.seq = 1;
            ws.send(call(2, &ts_min, &[0; 64 << 10])).await.unwrap();
            let (number, text, refusal) = reply(&mut ws).await;
            assert_eq!(number, 0, "no call could be read");
            assert!(matches!(refusal, Reply::Error(_)), "{refusal:?}");
            assert!(text.contains("could not be read"), "{text}");
            // Another client is served as before.
            let (mut other, _) = tokio_tungstenite::connect_async(format!("ws://{address}/")).await.unwrap();
            other.send(call(7, &RequestHeader::new("", [0; 16], Request::Hello), b"")).await.unwrap();
            assert!(matches!(reply(&mut other).await, (7, _, Reply::Hello(_))));
        });
    });
}
