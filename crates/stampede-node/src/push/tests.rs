//! The sender's choice of way for one event, on real sockets and a real (listening-nowhere) zenoh
//! session: the session's stream while it takes the event, the fabric once it cannot.

use std::io::Read;
use std::time::Duration;

use zenoh::Wait;

use super::*;

/// A sender's ways for a session: `stream` waiting to be taken, and a zenoh session that listens
/// and connects nowhere (a publication goes to no one).
fn ways(stream: tokio::net::UnixStream) -> Fabric {
    let config = stampede_wire::fabric::node_config(&[], &[], Duration::from_secs(10), 1 << 20, None).unwrap();
    let zenoh = zenoh::open(config).wait().unwrap();
    let stream = Arc::new(Mutex::new(Some(EventStream::Unix(stream))));
    Fabric { zenoh, key: "stampede/test/push/session".into(), stream, streamed: Arc::default() }
}

/// Zenoh needs a multi-threaded runtime (so the bound below is waited for in real time: 1 s).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

/// Runs `test` with a sender's ways whose stream's other end, the client's, it is given.
fn on_a_stream<F: std::future::Future<Output = ()>>(test: impl FnOnce(Fabric, std::os::unix::net::UnixStream) -> F) {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    runtime().block_on(async { test(ways(tokio::net::UnixStream::from_std(ours).unwrap()), theirs).await });
}

/// An event goes on the stream that arrived, as a frame; once the client's end is gone, the next
/// goes on the fabric and the stream is dropped.
#[test]
fn a_stream_carries_events_until_it_breaks_then_the_fabric_does() {
    on_a_stream(|mut to, theirs| async move {
        let mut open = None;
        to.publish(&mut open, b"first".to_vec(), Some(Bytes::from_static(b"!"))).await.unwrap();
        assert!(open.is_some(), "the stream that arrived carries the event");
        assert_eq!(to.streamed.load(Ordering::Relaxed), 1, "counted as streamed");
        let mut frame = [0u8; 10];
        (&theirs).read_exact(&mut frame).unwrap();
        assert_eq!(&frame[..4], &6u32.to_le_bytes(), "a frame: its length");
        assert_eq!(&frame[4..], b"first!", "then the event and its payload");
        drop(theirs);
        to.publish(&mut open, b"second".to_vec(), None).await.unwrap();
        assert!(open.is_none(), "a broken stream is dropped; the fabric took the event");
        assert_eq!(to.streamed.load(Ordering::Relaxed), 1, "not counted as streamed");
    });
}

/// A client that stops reading holds the sender at most `STREAM_WRITE_MAX` per event: then the
/// stream is dropped and the fabric carries the event.
#[test]
fn a_stream_nobody_reads_gives_way_after_its_bound() {
    on_a_stream(|mut to, theirs| async move {
        // The client's end stays open, and is never read.
        let _unread = theirs;
        let mut open = None;
        let payload = Bytes::from(vec![7u8; 64 * 1024]);
        // The socket's buffers take a few events; a write that would wait longer than the bound
        // ends the stream.
        let mut written = 0;
        while open.is_some() || written == 0 {
            to.publish(&mut open, b"event".to_vec(), Some(payload.clone())).await.unwrap();
            written += 1;
            assert!(written < 200, "12.8 MB and the stream never filled");
        }
        assert!(written > 1, "the first events went on the stream");
    });
}
