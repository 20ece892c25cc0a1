//! The HTTP side: the page, `GET /api/snapshot`, and `GET /ws` — the WebSocket on which each
//! client gets a snapshot (text) every refresh and the frame (binary) whenever it changes.
//!
//! Bounds: at most [`WS_CLIENTS_MAX`] clients (one more gets `503`); each client holds at most
//! one pending update, the newest (a `watch` channel: a slow client skips updates and frames,
//! nothing queues); a message that does not go into the socket within [`SEND_TIMEOUT`] drops
//! the client; what a client sends is read (to see pings and its Close) and ignored, and
//! bounded by [`CLIENT_MESSAGE_BYTES_MAX`].
//!
//! With a login (`login`), a middleware in front of every route answers `401` to a request
//! without accepted credentials before any handler runs. A WebSocket upgrade from a page that
//! is neither the dashboard's own nor allowed is refused `403` (`origin`).
//!
//! The server runs on its own tokio runtime (one worker thread) on its own thread, so that the
//! dashboard works from any program, async or not. Stopping: the sampler's update sender goes
//! first, which makes every client task send a Close frame and end; then the listener stops
//! and the runtime shuts down, cancelling what is left after a grace period.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::watch;

use crate::assets;
use crate::login::{self, Gate};
use crate::sampler::{lock, Sampler, Update};
use crate::{CLIENT_MESSAGE_BYTES_MAX, FRAME_BYTES_MAX, SEND_TIMEOUT, WS_CLIENTS_MAX};
use stampede_wire::origin;

/// How long the server waits for HTTP connections to finish when stopping.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// WebSocket close code "going away".
const CLOSE_GOING_AWAY: u16 = 1001;

/// What the handlers share.
#[derive(Clone)]
pub(crate) struct State {
    sampler: Arc<Mutex<Sampler>>,
    updates: watch::Receiver<Option<Arc<Update>>>,
    /// WebSocket clients connected now (shown in the snapshot).
    clients: Arc<AtomicUsize>,
    /// Pages besides its own that may open the WebSocket, and whether it listens on loopback
    /// (`origin`).
    allowed_origins: Arc<Vec<String>>,
    loopback: bool,
}

impl State {
    pub(crate) fn new(
        sampler: Arc<Mutex<Sampler>>,
        updates: watch::Receiver<Option<Arc<Update>>>,
        clients: Arc<AtomicUsize>,
        allowed_origins: Vec<String>,
        loopback: bool,
    ) -> State {
        State { sampler, updates, clients, allowed_origins: Arc::new(allowed_origins), loopback }
    }
}

/// Serves the dashboard on `listener` from a new thread until `stop` turns true.
pub(crate) fn start(
    listener: std::net::TcpListener,
    state: State,
    gate: Option<Arc<Gate>>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<JoinHandle<()>> {
    let router = Router::new()
        .route("/", get(index))
        .route("/dashboard.js", get(script))
        .route("/dashboard.css", get(style))
        .route("/api/snapshot", get(snapshot))
        .route("/ws", get(websocket))
        .with_state(state);
    let router = match gate {
        Some(gate) => router.layer(axum::middleware::from_fn_with_state(gate, login::require)),
        None => router,
    };
    spawn("stampede-dashboard", listener, router, stop)
}

/// Serves `router` on `listener` from a thread of its own (named `name`, with a tokio runtime of
/// one worker, so that it works from any program, async or not) until `stop` turns true; then
/// waits up to [`SHUTDOWN_GRACE`] for connections to finish and cancels what is left.
pub(crate) fn spawn(
    name: &str,
    listener: std::net::TcpListener,
    router: Router,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(2)
        .thread_name(name)
        .enable_io()
        .enable_time()
        .build()?;
    let listener = {
        let _entered = runtime.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    std::thread::Builder::new().name(format!("{name}-server")).spawn(move || {
        runtime.block_on(async move {
            let mut graceful = stop.clone();
            let server = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = graceful.wait_for(|stopped| *stopped).await;
                })
                .into_future();
            let mut server = tokio::spawn(server);
            tokio::select! {
                _ = &mut server => {}
                _ = stop.wait_for(|stopped| *stopped) => {
                    let _ = tokio::time::timeout(SHUTDOWN_GRACE, server).await;
                }
            }
        });
        runtime.shutdown_timeout(SHUTDOWN_GRACE);
    })
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", assets::INDEX_HTML)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", assets::DASHBOARD_JS)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", assets::DASHBOARD_CSS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// A fresh snapshot, taken on a blocking thread (a remote runtime's graph is a round trip).
async fn snapshot(axum::extract::State(state): axum::extract::State<State>) -> Response {
    let sampler = state.sampler.clone();
    match tokio::task::spawn_blocking(move || lock(&sampler).snapshot_json()).await {
        Ok(json) => {
            ([(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")], json).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("the snapshot failed: {e}")).into_response(),
    }
}

/// Upgrades to a WebSocket if the page asking may (`origin`) and a client slot is free.
async fn websocket(
    axum::extract::State(state): axum::extract::State<State>,
    headers: axum::http::HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let slot = match admit(&headers, state.loopback, &state.allowed_origins, &state.clients, WS_CLIENTS_MAX) {
        Ok(slot) => slot,
        Err(refusal) => return refusal.into_response(),
    };
    let updates = state.updates.clone();
    upgrade
        .max_message_size(CLIENT_MESSAGE_BYTES_MAX)
        .max_frame_size(CLIENT_MESSAGE_BYTES_MAX)
        .max_write_buffer_size(FRAME_BYTES_MAX + (1 << 20))
        .on_upgrade(move |socket| client(socket, updates, slot))
}

/// Whether a WebSocket upgrade with `headers` may open, on a listener on loopback or not, with
/// `allowed` origins besides its own page (`origin`), and one of `max` client slots counted in
/// `clients` free: the slot, else the refusal (`403` naming the origin, `503` naming the bound).
pub(crate) fn admit(
    headers: &axum::http::HeaderMap,
    loopback: bool,
    allowed: &[String],
    clients: &Arc<AtomicUsize>,
    max: usize,
) -> Result<Slot, (StatusCode, String)> {
    let header = |name| headers.get(name).and_then(|value: &header::HeaderValue| value.to_str().ok());
    if let Err(reason) = origin::admits(header(header::ORIGIN), header(header::HOST), loopback, allowed) {
        return Err((StatusCode::FORBIDDEN, reason));
    }
    let taken = clients.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1));
    match taken {
        Ok(_) => Ok(Slot(clients.clone())),
        Err(_) => {
            let reason = format!("this listener serves at most {max} WebSocket clients at once");
            Err((StatusCode::SERVICE_UNAVAILABLE, reason))
        }
    }
}

/// One client slot, given back on drop (also when the upgrade fails).
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Sends each update to one client until it leaves, fails, or the dashboard closes.
async fn client(socket: WebSocket, mut updates: watch::Receiver<Option<Arc<Update>>>, _slot: Slot) {
    let (mut sink, mut stream) = socket.split();
    let mut frame_sent = None;
    updates.mark_changed(); // the newest update goes out at once
    loop {
        tokio::select! {
            changed = updates.changed() => {
                if changed.is_err() {
                    break; // the dashboard is closing
                }
                let Some(update) = updates.borrow_and_update().clone() else { continue };
                if !send(&mut sink, Message::Text(update.snapshot.clone())).await {
                    return;
                }
                if let Some(frame) = &update.frame {
                    if frame_sent != Some(frame.seq) {
                        if !send(&mut sink, Message::Binary(frame.message.clone())).await {
                            return;
                        }
                        frame_sent = Some(frame.seq);
                    }
                }
            }
            incoming = stream.next() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {} // the page sends nothing; pings are answered by the socket
            },
        }
    }
    let close = CloseFrame { code: CLOSE_GOING_AWAY, reason: "the dashboard closed".into() };
    let _ = send(&mut sink, Message::Close(Some(close))).await;
}

/// Sends one message within [`SEND_TIMEOUT`]; `false` if the client is gone or too slow.
async fn send(sink: &mut futures_util::stream::SplitSink<WebSocket, Message>, message: Message) -> bool {
    matches!(tokio::time::timeout(SEND_TIMEOUT, sink.send(message)).await, Ok(Ok(())))
}
