//! A refused connection's close that lets the refusal arrive (what HTTP servers call a lingering
//! close). The node may refuse a message after reading only its start (one beyond a bound, one
//! without a session). A TCP socket dropped with bytes still unread is reset, and a peer still
//! writing that message then gets an error for its write: a client that writes its whole request
//! before it reads (most do; tungstenite flushes before every read) never reads the refusal
//! queued behind it. So before the node drops such a connection it shuts its write half (the
//! peer reads the refusal, then the end) and reads and drops what the peer still sends, until
//! the peer closes, [`LINGER`] passes or [`LINGER_BYTES_MAX`] bytes came.
//!
//! Guarantees: a lingering connection costs the node one task for at most [`LINGER`] and a
//! buffer of [`SINK_BYTES`]; a peer that sends on or never closes is reset when either bound is
//! reached, which costs it the refusal and the node nothing more.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long a refused connection is read from before it is dropped.
pub const LINGER: Duration = Duration::from_secs(2);

/// Bytes read from a refused connection, and dropped, before it is dropped.
pub const LINGER_BYTES_MAX: usize = 64 << 20;

/// Bytes read at a time while lingering.
const SINK_BYTES: usize = 16 << 10;

/// Shuts the write half of `stream` (after the refusal was written) and reads what its peer still
/// sends, within [`LINGER`] and [`LINGER_BYTES_MAX`]; the caller then drops it.
pub(crate) async fn linger(stream: &mut (impl AsyncRead + AsyncWrite + Unpin)) {
    let _ = tokio::time::timeout(LINGER, async {
        stream.shutdown().await?;
        let mut sink = [0; SINK_BYTES];
        let mut dropped = 0;
        while dropped < LINGER_BYTES_MAX {
            match stream.read(&mut sink).await? {
                0 => break,
                read => dropped += read,
            }
        }
        std::io::Result::Ok(())
    })
    .await;
}
