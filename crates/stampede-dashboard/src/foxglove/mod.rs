//! A live bridge to Foxglove (and its open fork Lichtblick): the runtime's channels served on the
//! Foxglove WebSocket protocol (`foxglove.websocket.v1`), so that a viewer draws the camera,
//! its boxes and the text and JSON beside them as they are put (docs/FOXGLOVE.md).
//!
//! ```no_run
//! use stampede::Runtime;
//! use stampede_dashboard::foxglove::{Foxglove, FoxgloveOptions};
//!
//! let rt = Runtime::new();
//! let bridge = Foxglove::serve(
//!     rt.clone(),
//!     FoxgloveOptions { overlays: vec!["kiosk/decisions".into()], ..FoxgloveOptions::default() },
//! )?;
//! println!("foxglove on {}", bridge.url()); // ws://127.0.0.1:8765: "Open connection" in Foxglove
//! // ... run the pipeline ...
//! bridge.close();
//! # Ok::<(), stampede::Error>(())
//! ```
//!
//! # Guarantees
//!
//! - **Every channel is advertised as it appears** (the name service's watch) and unadvertised
//!   when destroyed; what it becomes (image, annotations, log, JSON) follows its codec
//!   (`stampede_view::foxglove::Kind`); an `npy` channel is two topics, its images and beside
//!   them its arrays that are no image (`<name>#values`), read by one reader; a channel not
//!   shown is listed, with why, in a status message.
//! - **A channel is read only while a viewer subscribes to it, and never holds GC back**: its
//!   reader's task consumes each item as soon as it has it, and its input is bounded by lag
//!   ([`READER_LAG_ITEMS`]) (`bridge`).
//! - **Every item put meanwhile is sent, in order, unless the viewer falls behind**: then the
//!   oldest of a subscription's waiting messages ([`OUTBOX_MESSAGES_MAX`]) go for that viewer
//!   alone, so the newest is sent; the skips are counted and said in a status message once a
//!   second; no producer ever waits for a viewer.
//! - **Protected as every listener of the project**: on 127.0.0.1 unless told; beyond loopback
//!   only with `allow_anonymous` (Foxglove's WebSocket client sends no credentials); a web page
//!   of another origin than those allowed is refused (`403`).
//! - **Bounded**: viewers ([`CLIENTS_MAX`]), subscriptions ([`SUBSCRIPTIONS_MAX`]), channels
//!   advertised ([`CHANNELS_MAX`]), what a viewer may send; a viewer whose socket takes no message
//!   within [`crate::SEND_TIMEOUT`] is dropped; hostile messages get a status, never a panic.
//! - **Closing ends everything**: every viewer gets a Close frame, readers close their tasks.
//!
//! # Layout
//!
//! - this file — [`FoxgloveOptions`], [`Foxglove`] and the bounds.
//! - `protocol` — the protocol's messages (pure).
//! - what each channel becomes, each item's message and the timeline ([`Tick`]) are
//!   `stampede_view::foxglove`'s (pure), shared with recordings made for Foxglove.
//! - `bridge` — the catalog watcher and the readers.
//! - `server` — the WebSocket and each viewer's task.

mod bridge;
mod protocol;
mod server;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::thread::JoinHandle;

use stampede::{Error, Result, Runtime};

pub use protocol::SUBPROTOCOL;

/// A viewer's text message as the bridge reads it: `Ok` for one it serves, else the status text
/// the viewer gets. For the fuzz targets (`stampede-fuzz`), not an API.
#[doc(hidden)]
pub fn read_client_message(text: &str) -> std::result::Result<(), String> {
    protocol::ClientMessage::parse(text).map(drop)
}
pub use stampede_view::foxglove::Tick;

/// Most viewers served at once; one more is answered `503 Service Unavailable`.
pub const CLIENTS_MAX: usize = 16;
/// Most subscriptions of one viewer.
pub const SUBSCRIPTIONS_MAX: usize = 256;
/// Most channels advertised; the others are listed as not shown.
pub const CHANNELS_MAX: usize = 1024;
/// Messages of one subscription waiting for its viewer; beyond it the oldest is skipped.
pub const OUTBOX_MESSAGES_MAX: usize = 8;
/// Unseen items a reader's input keeps at most: older ones are let go (counted as skipped on
/// its connection), so a stalled reader cannot hold GC back.
pub const READER_LAG_ITEMS: usize = 16;
/// The origin of Foxglove's web app, allowed by default.
pub const FOXGLOVE_APP_ORIGIN: &str = "https://app.foxglove.dev";
/// Foxglove's default port.
pub const PORT_DEFAULT: u16 = 8765;

/// What the bridge serves and where.
#[derive(Clone, Debug, PartialEq)]
pub struct FoxgloveOptions {
    /// Address to listen on (default `127.0.0.1`: this machine only).
    pub host: IpAddr,
    /// Port to listen on (default [`PORT_DEFAULT`]; `0`: any free port, see [`Foxglove::url`]).
    pub port: u16,
    /// Name prefixes to serve (hierarchical: `"kiosk"` selects `kiosk/frames`); empty: all.
    pub names: Vec<String>,
    /// Channels of JSON boxes (`{"boxes": [{"x", "y", "w", "h", "label", "color"}]}`) shown as
    /// `foxglove.ImageAnnotations`.
    pub overlays: Vec<String>,
    /// How timestamps go on Foxglove's timeline (default [`Tick::DEFAULT`], 1/30 s per timestamp).
    pub tick: Tick,
    /// Channels with a timeline of their own (the last one given for a name counts).
    pub ticks: Vec<(String, Tick)>,
    /// Web origins whose pages may connect (default: Foxglove's web app,
    /// [`FOXGLOVE_APP_ORIGIN`]); others are refused. Clients that send no origin (Foxglove's
    /// desktop app, scripts) are not browsers' pages and are admitted.
    pub allowed_origins: Vec<String>,
    /// Listen beyond loopback although viewers give no credentials.
    pub allow_anonymous: bool,
}

impl Default for FoxgloveOptions {
    fn default() -> FoxgloveOptions {
        FoxgloveOptions {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: PORT_DEFAULT,
            names: Vec::new(),
            overlays: Vec::new(),
            tick: Tick::DEFAULT,
            ticks: Vec::new(),
            allowed_origins: vec![FOXGLOVE_APP_ORIGIN.to_owned()],
            allow_anonymous: false,
        }
    }
}

/// A running bridge; [`close`](Self::close) (or drop) stops it.
pub struct Foxglove {
    address: SocketAddr,
    bridge: Arc<bridge::Bridge>,
    stop: tokio::sync::watch::Sender<bool>,
    /// The server's and the watcher's threads, until closed.
    threads: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl Foxglove {
    /// Serves `runtime`'s channels to Foxglove viewers, from now until closed.
    pub fn serve(runtime: Runtime, options: FoxgloveOptions) -> Result<Foxglove> {
        let host = options.host.to_string();
        let refused = |reason: String| Error::InvalidArgument { op: "foxglove", name: host.clone(), reason };
        if !options.allow_anonymous && !options.host.is_loopback() {
            return Err(refused(format!(
                "the Foxglove bridge would listen on {} and Foxglove's viewers give no credentials: anyone who reaches \
                 it sees every channel. Keep it on 127.0.0.1 (reach it through an SSH tunnel), or accept that with \
                 --allow-anonymous (Python: allow_anonymous=True)",
                options.host
            )));
        }
        let listener = std::net::TcpListener::bind(SocketAddr::new(options.host, options.port))
            .map_err(|e| refused(format!("cannot listen on port {}: {e}", options.port)))?;
        listener.set_nonblocking(true).map_err(|e| refused(e.to_string()))?;
        let address = listener.local_addr().map_err(|e| refused(e.to_string()))?;
        let server_name = format!("stampede {}", runtime.node().unwrap_or("(embedded)"));
        let allowed_origins = Arc::new(options.allowed_origins.clone());
        let bridge = bridge::Bridge::new(runtime, options);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let state = server::State {
            bridge: bridge.clone(),
            clients: Arc::new(AtomicUsize::new(0)),
            next_client: Arc::new(AtomicU64::new(1)),
            allowed_origins,
            loopback: address.ip().is_loopback(),
            server_name: server_name.into(),
            stop: stopped,
        };
        let foxglove = Foxglove { address, bridge: bridge.clone(), stop, threads: Default::default() };
        let started = start(listener, state).and_then(|server| {
            foxglove.threads().push(server);
            bridge.start_watcher()
        });
        match started {
            Ok(watcher) => foxglove.threads().push(watcher),
            Err(e) => return Err(refused(format!("cannot start: {e}"))), // dropping it stops what started
        }
        Ok(foxglove)
    }

    /// The address viewers connect to: `ws://host:port`.
    pub fn url(&self) -> String {
        format!("ws://{}", self.address)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Stops serving: every viewer gets a Close frame, every reader closes its task. Idempotent.
    pub fn close(&self) {
        let _ = self.stop.send(true);
        self.bridge.close();
        let threads: Vec<JoinHandle<()>> = self.threads().drain(..).collect();
        for thread in threads {
            let _ = thread.join();
        }
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Foxglove {
    fn drop(&mut self) {
        self.close();
    }
}

/// Serves the WebSocket on `listener` until `state.stop` turns true.
fn start(listener: std::net::TcpListener, state: server::State) -> std::io::Result<JoinHandle<()>> {
    let stop = state.stop.clone();
    let router = axum::Router::new().fallback(server::websocket).with_state(state);
    crate::server::spawn("stampede-foxglove", listener, router, stop)
}
