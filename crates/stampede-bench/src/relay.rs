//! A TCP relay that can cut its link the way a dead cable or a partition does: after
//! [`Relay::cut`] it keeps every connection open and reads what comes, but forwards nothing either
//! way and sends no reset — the peer on each side sees silence, not an error.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use crate::BoxResult;

/// Bytes read per copy.
const CHUNK_BYTES: usize = 64 * 1024;

/// Listens on a loopback port and relays each connection to `upstream`.
pub struct Relay {
    /// `tcp/127.0.0.1:<port>`: connect here instead of upstream.
    pub endpoint: String,
    cut: Arc<AtomicBool>,
}

impl Relay {
    /// A relay to `upstream` (`host:port`), its threads detached (they end with the process, or
    /// when both sides close).
    pub fn to(upstream: &str) -> BoxResult<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let endpoint = format!("tcp/{}", listener.local_addr()?);
        let cut = Arc::new(AtomicBool::new(false));
        let (upstream, cutting) = (upstream.to_owned(), cut.clone());
        thread::Builder::new().name("relay-accept".into()).spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                for (from, to) in [(&client, &server), (&server, &client)] {
                    if let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) {
                        let cut = cutting.clone();
                        let _ = thread::Builder::new().name("relay-copy".into()).spawn(move || copy(from, to, &cut));
                    }
                }
            }
        })?;
        Ok(Relay { endpoint, cut })
    }

    /// From now on nothing crosses, and nobody is told.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::Release);
    }
}

/// Copies `from` to `to` until either side closes; once `cut`, reads and drops.
fn copy(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool) {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) if !cut.load(Ordering::Acquire) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Ok(_) => {}
        }
    }
}
