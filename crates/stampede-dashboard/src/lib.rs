//! A live web dashboard of a Stampede runtime (issue 12): open its URL in a browser and watch
//! the camera image with the tracker's boxes drawn on it, the graph of tasks, connections and
//! channels with their live items, bytes, rates, ts_min, skips and fill bars, and each stage's
//! frames per second.
//!
//! ```no_run
//! use stampede::Runtime;
//! use stampede_dashboard::{Dashboard, DashboardOptions};
//!
//! let rt = Runtime::new();
//! let dashboard = Dashboard::serve(
//!     rt.clone(),
//!     DashboardOptions {
//!         image: Some("camera/left".into()),
//!         overlays: vec!["tracker/boxes".into()],
//!         ..DashboardOptions::default()
//!     },
//! )?;
//! println!("dashboard on {}", dashboard.url());
//! // ... run the pipeline; the page updates every `refresh` ...
//! dashboard.close();
//! # Ok::<(), stampede::Error>(())
//! ```
//!
//! The runtime may be embedded ([`stampede::Runtime::new`]) or a client of a node
//! ([`stampede::connect`]): the dashboard only uses the public API ([`Runtime::graph`], one task
//! of its own), so it shows a remote node's runtime as it shows its own.
//!
//! # Guarantees
//!
//! - **It does not hold GC back.** Its one task (named `dashboard`, virtual time `INFINITY`
//!   once attached) reads the image channel with `NEWEST_UNSEEN` and consumes up to the frame
//!   it got at once; overlay items are consumed up to the frame's timestamp at once and,
//!   whatever their timestamp, by the next refresh. It never waits on a get (timeout 0). When
//!   a channel it reads appears, it attaches from a new task created at ts_min (so that the
//!   frame already there is shown) and closes the old one.
//! - **Everything is bounded**: WebSocket clients ([`WS_CLIENTS_MAX`]), frame size
//!   ([`FRAME_BYTES_MAX`], [`FRAME_SIDE_MAX`]), overlays ([`OVERLAYS_MAX`], [`OVERLAY_BYTES_MAX`],
//!   [`BOXES_MAX`]), what a client may send ([`CLIENT_MESSAGE_BYTES_MAX`]), rows in a snapshot
//!   ([`ROWS_MAX`]). Each client sees only the newest update: a slow client skips updates and
//!   frames rather than queueing them, and one whose socket does not take a message within
//!   [`SEND_TIMEOUT`] is disconnected.
//! - **Bad input is shown, not fatal**: an image channel of another codec, dtype or shape, a
//!   queue, a missing channel or an overlay that is not the expected JSON puts a message on the
//!   page; nothing panics.
//! - **A login, if given, guards everything** ([`Dashboard::serve_with_login`]): every route
//!   (the page, its assets, `/api/snapshot`, `/ws`) asks for HTTP Basic credentials that the
//!   login function accepts, else answers `401` with no data. The function runs off the server's
//!   worker thread and accepted credentials are remembered (hashed, at most [`LOGINS_CACHED`];
//!   the header is at most [`AUTHORIZATION_BYTES_MAX`]). Basic credentials travel in clear: over
//!   plain HTTP they are safe only on this machine (the default host) or behind a TLS proxy —
//!   the dashboard has no TLS of its own. [`Dashboard::serve`] has no login.
//! - **Closing ends everything** ([`Dashboard::close`], or drop): the listener, every socket
//!   (each gets a Close frame), the sampling thread, and the dashboard's task (its connections
//!   detach, so its claims go).
//!
//! # Layout
//!
//! - this file — [`DashboardOptions`], [`Dashboard`] and the bounds.
//! - `sampler` — the sampling thread's state: the dashboard task, the image and overlay
//!   connections, rates between snapshots; produces each refresh's update.
//! - `snapshot` — the snapshot JSON (`GET /api/snapshot`, and each WebSocket text message) built
//!   from [`Runtime::graph`], with rates and fill ratios (format in `docs/DASHBOARD.md`).
//! - `image` — `.npy` frames to the binary WebSocket message; overlay JSON to boxes.
//! - `server` — the axum routes, the WebSocket clients and their bounds.
//! - `login` — HTTP Basic authentication in front of every route, and the accepted credentials.
//! - `assets` — the page (`web/`), compiled into the binary: no CDN, no files to install.
//! - [`foxglove`] — the live bridge to Foxglove: the same channels on the Foxglove WebSocket
//!   protocol, under the same listener rules (`stampede_wire::origin`, loopback by default).

mod assets;
pub mod foxglove;
mod image;
mod login;
mod sampler;
mod server;
mod snapshot;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use stampede::{Error, Result, Runtime};

pub use image::{FRAME_HEADER_BYTES, FRAME_MAGIC};

/// What a browser's or a putter's bytes reach first, for the fuzz targets (`stampede-fuzz`): not
/// an API.
#[doc(hidden)]
pub mod decoders {
    use axum::http::HeaderValue;

    /// The user and password of an `Authorization` header's value, as the login reads them.
    pub fn credentials(value: &[u8]) -> Option<(String, String)> {
        crate::login::credentials(&HeaderValue::from_bytes(value).ok()?)
    }

    /// An image item of `channel` as the dashboard's binary frame message — its width, height,
    /// channels and the message's length — or why it is none.
    pub fn frame(channel: &str, item: &stampede::Item) -> Result<([usize; 3], usize), String> {
        let frame = crate::image::decode_frame(channel, item)?;
        Ok(([frame.width, frame.height, frame.channels], frame.message.len()))
    }
}
/// The bounds on what is read from an image or overlay item (largest frame in pixel bytes and
/// per side, largest overlay item, most boxes kept), as every viewer of the project reads them.
pub use stampede_view::image::{BOXES_MAX, FRAME_BYTES_MAX, FRAME_SIDE_MAX, OVERLAY_BYTES_MAX};

/// Most WebSocket clients served at once; one more is answered `503 Service Unavailable`.
pub const WS_CLIENTS_MAX: usize = 16;
/// Most overlay channels.
pub const OVERLAYS_MAX: usize = 8;
/// Largest message a client may send (the page sends none; this bounds a hostile one).
pub const CLIENT_MESSAGE_BYTES_MAX: usize = 64 << 10;
/// Most channels or tasks listed in a snapshot (the snapshot says when it is truncated).
pub const ROWS_MAX: usize = 1000;
/// How long one message may take to go into a client's socket before the client is dropped.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Shortest refresh period accepted.
pub const REFRESH_MIN: Duration = Duration::from_millis(20);
/// Longest refresh period accepted.
pub const REFRESH_MAX: Duration = Duration::from_secs(60);
/// Longest `Authorization` header read, in bytes; a longer one is refused unread (`401`).
pub const AUTHORIZATION_BYTES_MAX: usize = 4 << 10;
/// Most accepted credentials remembered (as salted hashes) so that the login function does not
/// run on every request; the oldest is forgotten first.
pub const LOGINS_CACHED: usize = 64;

/// Who may see a dashboard: `login(user, password)` is `true` if this user, with this password,
/// may. It may be slow (it runs on a blocking thread), and must not panic (a panic refuses).
pub type Login = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// A login that accepts exactly `user` with `password`: for the dashboard of a client runtime,
/// which shows what that user may read, so whoever views it must know that user's password.
/// Compared as BLAKE2s hashes, so the time a comparison takes tells nothing of the password.
pub fn login_as(user: &str, password: &str) -> Login {
    let hash = |user: &str, password: &str| {
        use blake2::{Blake2s256, Digest};
        Blake2s256::new().chain_update(user.len().to_le_bytes()).chain_update(user).chain_update(password).finalize()
    };
    let expected = hash(user, password);
    Arc::new(move |user, password| hash(user, password) == expected)
}

/// What a dashboard serves and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DashboardOptions {
    /// Address to listen on (default `127.0.0.1`: this machine only).
    pub host: IpAddr,
    /// Port to listen on (`0`: any free port; see [`Dashboard::url`]).
    pub port: u16,
    /// A channel of `.npy` `uint8` frames of shape `(H, W)`, `(H, W, 1)`, `(H, W, 3)` (RGB) or
    /// `(H, W, 4)` (RGBA) to show, if any. It may be created after the dashboard starts.
    pub image: Option<String>,
    /// Channels of JSON `{"boxes": [{"x", "y", "w", "h", "label", "color"}]}` drawn over the
    /// image: for each frame, the item at its timestamp, else the newest one below it.
    pub overlays: Vec<String>,
    /// How often the page is updated (between [`REFRESH_MIN`] and [`REFRESH_MAX`]).
    pub refresh: Duration,
    /// Web origins (`https://viewer.example`) besides the dashboard's own page whose pages may
    /// open its WebSocket; others are refused `403` (default: none).
    pub allowed_origins: Vec<String>,
    /// Serve without a login on an address other machines reach (`--allow-anonymous`): anyone
    /// who reaches it then sees every task and channel. Off by default: such a dashboard is
    /// refused unless it has a login ([`Dashboard::serve_with_login`]).
    pub allow_anonymous: bool,
}

impl Default for DashboardOptions {
    fn default() -> Self {
        DashboardOptions {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            image: None,
            overlays: Vec::new(),
            refresh: Duration::from_millis(200),
            allowed_origins: Vec::new(),
            allow_anonymous: false,
        }
    }
}

/// A dashboard being served: an HTTP server on its own tokio runtime (one worker thread) and a
/// sampling thread. [`close`](Dashboard::close) or drop stops both.
pub struct Dashboard {
    address: SocketAddr,
    /// `None` once closed; a `Mutex` so that `close(&self)` is idempotent from any thread.
    running: Mutex<Option<Running>>,
}

/// The threads of a dashboard and how to stop them.
struct Running {
    /// Dropping it (or sending) ends the sampling thread's wait.
    sampler_stop: mpsc::Sender<()>,
    sampler_thread: JoinHandle<()>,
    /// Ends the server: stops accepting, then its runtime shuts down.
    server_stop: tokio::sync::watch::Sender<bool>,
    server_thread: JoinHandle<()>,
}

impl Dashboard {
    /// Starts serving a dashboard of `runtime` on `options.host:options.port`. Returns once the
    /// port is bound (so [`url`](Dashboard::url) answers at once). `InvalidArgument` for options
    /// out of bounds or an address that cannot be bound. No login: anyone who reaches the
    /// address sees the dashboard (see [`serve_with_login`](Dashboard::serve_with_login)).
    pub fn serve(runtime: Runtime, options: DashboardOptions) -> Result<Dashboard> {
        Dashboard::start(runtime, options, None)
    }

    /// As [`serve`](Dashboard::serve), but every route asks for HTTP Basic credentials that
    /// `login` accepts, and answers `401 Unauthorized` (with `WWW-Authenticate: Basic
    /// realm="stampede"`) otherwise.
    pub fn serve_with_login(runtime: Runtime, options: DashboardOptions, login: Login) -> Result<Dashboard> {
        Dashboard::start(runtime, options, Some(login))
    }

    fn start(runtime: Runtime, options: DashboardOptions, login: Option<Login>) -> Result<Dashboard> {
        check(&options)?;
        if login.is_none() && !options.allow_anonymous && !options.host.is_loopback() {
            let reason = format!(
                "the dashboard would listen on {} with no login: anyone who reaches it sees every task and channel. \
                 Keep it on 127.0.0.1, give it a login (stampede serve --access policy.toml), or accept that with \
                 --allow-anonymous (Python: allow_anonymous=True)",
                options.host
            );
            return Err(Error::InvalidArgument { op: "dashboard", name: options.host.to_string(), reason });
        }
        let requested = SocketAddr::new(options.host, options.port);
        let refused = |reason: String| Error::InvalidArgument { op: "dashboard", name: requested.to_string(), reason };
        let listener = std::net::TcpListener::bind(requested).map_err(|e| refused(format!("cannot listen: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| refused(e.to_string()))?;
        let address = listener.local_addr().map_err(|e| refused(e.to_string()))?;
        let gate = login.map(login::Gate::new).transpose().map_err(refused)?.map(Arc::new);

        let clients = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let sampler = Arc::new(Mutex::new(sampler::Sampler::new(runtime, &options, clients.clone())));
        let (updates_tx, updates_rx) = tokio::sync::watch::channel(None);
        let (sampler_stop, stop_rx) = mpsc::channel();
        let sampler_thread = {
            let sampler = sampler.clone();
            std::thread::Builder::new()
                .name("stampede-dashboard-sampler".into())
                .spawn(move || sampler::run(&sampler, options.refresh, &stop_rx, &updates_tx))
                .map_err(|e| refused(format!("cannot start the sampling thread: {e}")))?
        };
        let (server_stop, server_stopped) = tokio::sync::watch::channel(false);
        let state =
            server::State::new(sampler, updates_rx, clients, options.allowed_origins, address.ip().is_loopback());
        let server_thread = match server::start(listener, state, gate, server_stopped) {
            Ok(thread) => thread,
            Err(e) => {
                drop(sampler_stop);
                let _ = sampler_thread.join();
                return Err(refused(format!("cannot start the server: {e}")));
            }
        };
        let running = Running { sampler_stop, sampler_thread, server_stop, server_thread };
        Ok(Dashboard { address, running: Mutex::new(Some(running)) })
    }

    /// Where the page is: `http://<host>:<port>/` (an IPv6 host in brackets).
    pub fn url(&self) -> String {
        format!("http://{}/", self.address)
    }

    /// The address the server listens on (the actual port when `port` was 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops serving: the sampling thread ends and closes the dashboard's task (its connections
    /// detach), every WebSocket client gets a Close frame, the listener closes. Returns once
    /// the threads have ended. Idempotent.
    pub fn close(&self) {
        let running = self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        let Some(running) = running else { return };
        let _ = running.sampler_stop.send(());
        // The sampler drops the update sender as it ends: every socket task sees it and closes.
        let _ = running.sampler_thread.join();
        let _ = running.server_stop.send(true);
        let _ = running.server_thread.join();
    }

    /// `true` once [`close`](Dashboard::close) has run.
    pub fn is_closed(&self) -> bool {
        self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_none()
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard").field("url", &self.url()).field("closed", &self.is_closed()).finish()
    }
}

/// Options within their bounds.
fn check(options: &DashboardOptions) -> Result<()> {
    let refused = |reason: String| Error::InvalidArgument { op: "dashboard", name: "options".into(), reason };
    if !(REFRESH_MIN..=REFRESH_MAX).contains(&options.refresh) {
        return Err(refused(format!(
            "refresh {:?} is out of bounds: between {REFRESH_MIN:?} and {REFRESH_MAX:?}",
            options.refresh
        )));
    }
    if options.overlays.len() > OVERLAYS_MAX {
        return Err(refused(format!("{} overlays: at most {OVERLAYS_MAX}", options.overlays.len())));
    }
    let names = options.image.iter().chain(options.overlays.iter());
    if let Some(empty) = names.into_iter().find(|name| name.is_empty()) {
        return Err(refused(format!("channel name {empty:?} is empty")));
    }
    Ok(())
}
