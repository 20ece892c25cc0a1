//! The bridge's WebSocket side: one task per viewer that tells it the catalog (advertise,
//! unadvertise, and a status listing what is not shown), takes its subscriptions, and sends
//! what the readers put in its outbox.
//!
//! Bounds: at most [`CLIENTS_MAX`] viewers (one more gets `503`), [`SUBSCRIPTIONS_MAX`]
//! subscriptions each, an outbox of [`super::OUTBOX_MESSAGES_MAX`] messages per subscription
//! (when it is full the oldest goes, counted, and the viewer is told once a second), a message that does not go into the socket within
//! [`SEND_TIMEOUT`] drops the viewer, and what a viewer sends is bounded by
//! [`CLIENT_MESSAGE_BYTES_MAX`]. A WebSocket upgrade from a web page neither allowed nor
//! the bridge's own is refused `403` (the dashboard's rule, `crate::origin`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::Notify;

use super::bridge::{Bridge, Catalog, Outbox, Outgoing, Subscriber};
use super::protocol::{ClientMessage, Level, ServerMessage, SUBPROTOCOL};
use super::{CLIENTS_MAX, SUBSCRIPTIONS_MAX};
use crate::server::admit;
use crate::{CLIENT_MESSAGE_BYTES_MAX, FRAME_BYTES_MAX, SEND_TIMEOUT};

/// How often a viewer is told how many items it skipped (when that changed).
const SKIPS_REPORTED_EVERY: Duration = Duration::from_secs(1);
/// WebSocket close code "going away".
const CLOSE_GOING_AWAY: u16 = 1001;

/// What the handler shares.
#[derive(Clone)]
pub(crate) struct State {
    pub bridge: Arc<Bridge>,
    pub clients: Arc<AtomicUsize>,
    pub next_client: Arc<AtomicU64>,
    pub allowed_origins: Arc<Vec<String>>,
    pub loopback: bool,
    pub server_name: Arc<str>,
    pub stop: tokio::sync::watch::Receiver<bool>,
}

/// Upgrades to a Foxglove WebSocket if the page asking may and a viewer slot is free.
pub(crate) async fn websocket(
    axum::extract::State(state): axum::extract::State<State>,
    headers: axum::http::HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let slot = match admit(&headers, state.loopback, &state.allowed_origins, &state.clients, CLIENTS_MAX) {
        Ok(slot) => slot,
        Err(refusal) => return refusal.into_response(),
    };
    upgrade
        .protocols([SUBPROTOCOL])
        .max_message_size(CLIENT_MESSAGE_BYTES_MAX)
        .max_frame_size(CLIENT_MESSAGE_BYTES_MAX)
        .max_write_buffer_size(FRAME_BYTES_MAX + (1 << 20))
        .on_upgrade(move |socket| async move {
            let _slot = slot;
            Viewer::new(&state).serve(socket, state.stop.clone()).await;
        })
}

/// One viewer: what it was told, what it subscribed to.
struct Viewer {
    bridge: Arc<Bridge>,
    id: u64,
    server_name: Arc<str>,
    /// Topics advertised to it, by id.
    told: BTreeMap<u64, String>,
    /// What it was told is not shown.
    refused_told: BTreeMap<String, String>,
    /// Its subscriptions: its id → (channel, outbox, skips reported).
    subscriptions: HashMap<u32, (u64, Arc<Outbox>, u64)>,
    /// Notified when a reader puts something in one of its outboxes.
    wake: Arc<Notify>,
}

type Sink = SplitSink<WebSocket, Message>;

impl Viewer {
    fn new(state: &State) -> Viewer {
        Viewer {
            bridge: state.bridge.clone(),
            id: state.next_client.fetch_add(1, Ordering::Relaxed),
            server_name: state.server_name.clone(),
            told: BTreeMap::new(),
            refused_told: BTreeMap::new(),
            subscriptions: HashMap::new(),
            wake: Arc::new(Notify::new()),
        }
    }

    async fn serve(mut self, socket: WebSocket, mut stop: tokio::sync::watch::Receiver<bool>) {
        let (mut sink, mut stream) = socket.split();
        let info = ServerMessage::ServerInfo {
            name: self.server_name.to_string(),
            capabilities: Vec::new(),
            supported_encodings: Vec::new(),
            metadata: BTreeMap::new(),
            session_id: format!("{}", self.id),
        };
        let mut catalog = self.bridge.catalog();
        catalog.mark_changed();
        let mut skips = tokio::time::interval(SKIPS_REPORTED_EVERY);
        let mut open = send_text(&mut sink, &info).await;
        while open {
            open = tokio::select! {
                changed = catalog.changed() => match changed {
                    Ok(()) => {
                        let now = catalog.borrow_and_update().clone();
                        self.tell(&mut sink, &now).await
                    }
                    Err(_) => false, // the bridge closed
                },
                _ = self.wake.notified() => self.drain(&mut sink).await,
                incoming = stream.next() => match incoming {
                    Some(Ok(Message::Text(text))) => self.handle(&mut sink, &text).await,
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => false,
                    Some(Ok(_)) => true, // pings are answered by the socket; binary is not served
                },
                _ = skips.tick() => self.report_skips(&mut sink).await,
                _ = stop.changed() => false, // the bridge is closing
            };
        }
        for (&subscription, &(channel, _, _)) in &self.subscriptions {
            self.bridge.unsubscribe(channel, self.id, subscription);
        }
        let close = CloseFrame { code: CLOSE_GOING_AWAY, reason: "the Foxglove bridge closed".into() };
        let _ = send(&mut sink, Message::Close(Some(close))).await;
    }

    /// Sends what waits in its outboxes, one message of each subscription in turn, until all
    /// are empty.
    async fn drain(&mut self, sink: &mut Sink) -> bool {
        loop {
            let mut sent = false;
            for (_, outbox, _) in self.subscriptions.values() {
                let open = match outbox.pop() {
                    None => continue,
                    Some(Outgoing::Data(message)) => send(sink, Message::Binary(message.into())).await,
                    Some(Outgoing::Warning { id, message }) => {
                        send_text(sink, &ServerMessage::status(Level::Warning, &id, message)).await
                    }
                };
                if !open {
                    return false;
                }
                sent = true;
            }
            if !sent {
                return true;
            }
        }
    }

    /// Tells the viewer what changed in the catalog; drops its subscriptions to channels gone.
    async fn tell(&mut self, sink: &mut Sink, catalog: &Catalog) -> bool {
        let gone: Vec<u64> = self.told.keys().filter(|id| !catalog.channels.contains_key(id)).copied().collect();
        let new: Vec<_> =
            catalog.channels.iter().filter(|(id, _)| !self.told.contains_key(id)).map(|(_, e)| e).collect();
        if !gone.is_empty() {
            gone.iter().for_each(|id| drop(self.told.remove(id)));
            self.subscriptions.retain(|_, (channel, _, _)| !gone.contains(channel));
            if !send_text(sink, &ServerMessage::Unadvertise { channel_ids: gone }).await {
                return false;
            }
        }
        if !new.is_empty() {
            new.iter().for_each(|e| drop(self.told.insert(e.advertised.id, e.advertised.topic.clone())));
            let channels = new.into_iter().map(|e| e.advertised.clone()).collect();
            if !send_text(sink, &ServerMessage::Advertise { channels }).await {
                return false;
            }
        }
        if catalog.refused != self.refused_told {
            self.refused_told = catalog.refused.clone();
            let listed: Vec<String> = self.refused_told.iter().map(|(name, why)| format!("{name}: {why}")).collect();
            let message = format!("not shown: {}", listed.join("; "));
            if !listed.is_empty() && !send_text(sink, &ServerMessage::status(Level::Info, "not-shown", message)).await {
                return false;
            }
        }
        true
    }

    /// Serves a subscribe or unsubscribe; anything else is answered with a status.
    async fn handle(&mut self, sink: &mut Sink, text: &str) -> bool {
        let refusal = match ClientMessage::parse(text) {
            Ok(ClientMessage::Subscribe { subscriptions }) => {
                let mut refused = Vec::new();
                for s in subscriptions {
                    if self.subscriptions.len() >= SUBSCRIPTIONS_MAX {
                        refused.push(format!("at most {SUBSCRIPTIONS_MAX} subscriptions per viewer"));
                        break;
                    }
                    if self.subscriptions.contains_key(&s.id) {
                        refused.push(format!("subscription {} exists already", s.id));
                        continue;
                    }
                    let outbox = Arc::new(Outbox::new(self.wake.clone()));
                    let subscriber = Subscriber { client: self.id, subscription: s.id, outbox: outbox.clone() };
                    match self.bridge.subscribe(s.channel_id, subscriber) {
                        true => drop(self.subscriptions.insert(s.id, (s.channel_id, outbox, 0))),
                        false => refused.push(format!("channel {} is not advertised", s.channel_id)),
                    }
                }
                refused
            }
            Ok(ClientMessage::Unsubscribe { subscription_ids }) => {
                for id in subscription_ids {
                    if let Some((channel, _, _)) = self.subscriptions.remove(&id) {
                        self.bridge.unsubscribe(channel, self.id, id);
                    }
                }
                Vec::new()
            }
            Err(reason) => vec![reason],
        };
        match refusal.is_empty() {
            true => true,
            false => send_text(sink, &ServerMessage::status(Level::Error, "request", refusal.join("; "))).await,
        }
    }

    /// A status per subscription that skipped items since the last report.
    async fn report_skips(&mut self, sink: &mut Sink) -> bool {
        for (channel, outbox, reported) in self.subscriptions.values_mut() {
            let now = outbox.skipped();
            if now == *reported {
                continue;
            }
            *reported = now;
            let name = self.told.get(channel).map_or("?", String::as_str);
            let message = format!("{name}: {now} items skipped so far (this viewer is behind: the oldest waiting go, the newest are sent)");
            if !send_text(sink, &ServerMessage::status(Level::Warning, &format!("skips/{name}"), message)).await {
                return false;
            }
        }
        true
    }
}

async fn send_text(sink: &mut Sink, message: &ServerMessage) -> bool {
    send(sink, Message::Text(message.to_json().into())).await
}

/// Sends one message within [`SEND_TIMEOUT`]; `false` if the viewer is gone or too slow.
async fn send(sink: &mut Sink, message: Message) -> bool {
    matches!(tokio::time::timeout(SEND_TIMEOUT, sink.send(message)).await, Ok(Ok(())))
}
