//! The node's side of the name service (docs/NODES.md, "The name service"; `stampede::watch`): a
//! liveliness token `stampede/<node>/alive` while the node serves, its runtime's name changes
//! published on `stampede/<node>/names` by a thread that follows the runtime's own watch, and its
//! listing answered to the other nodes of its mesh on `stampede/<node>/mesh/names` (a mesh key:
//! with `--mesh-node-cn` only nodes ask there). A session's `names()` and watch start from every
//! node's listing ([`on_other_nodes`]), filtered by what its user may see.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stampede_core::{Listed, WatchEvent};
use stampede_engine::Runtime;
use stampede_wire::{self as wire, fabric};
use zenoh::liveliness::LivelinessToken;
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, Queryable};
use zenoh::Wait;

use crate::mesh::Seal;

/// How often the publisher looks whether the node is closing.
const STOP_CHECK: Duration = Duration::from_millis(200);
/// Longest a node waits for the other nodes' listings; a node that has not answered by then is
/// left out of that answer.
pub const LISTING_WAIT: Duration = Duration::from_millis(500);

/// The mesh service a node's listing answers on.
const LISTING: &str = "names";

fn listing_key(node: &str) -> String {
    crate::mesh::service_key(node, LISTING)
}

/// The names under `prefix` on every node of the mesh but `me`, each with its node (every name:
/// the caller filters by its user's rights).
pub(crate) async fn on_other_nodes((zenoh, seal): (&zenoh::Session, &Seal), me: &str, prefix: &str) -> Vec<Listed> {
    let Ok(payload) = postcard::to_allocvec(prefix).map(|p| seal.seal(p)) else { return Vec::new() };
    let asked =
        zenoh.get(listing_key("*")).payload(payload).consolidation(ConsolidationMode::None).timeout(LISTING_WAIT);
    let Ok(replies) = asked.await else { return Vec::new() };
    let mut listed = Vec::new();
    while let Ok(reply) = replies.recv_async().await {
        let Ok(sample) = reply.into_result() else { continue };
        let Some(node) = crate::mesh::node_of_service(sample.key_expr().as_str(), LISTING).filter(|node| *node != me)
        else {
            continue;
        };
        // Anything that does not decode, or that no node of this mesh sealed, is skipped.
        let bytes = sample.payload().to_bytes();
        let Some(Ok(names)) = seal.open(&bytes).map(postcard::from_bytes::<Vec<Listed>>) else { continue };
        listed.extend(names.into_iter().map(|l| Listed { node: Some(node.to_owned()), ..l }));
    }
    listed
}

/// The token, the publishing thread and the listing's queryable; [`stop`](Self::stop) ends them.
pub(crate) struct Names {
    _alive: LivelinessToken,
    _listing: Queryable<()>,
    stop: Arc<AtomicBool>,
    publisher: Option<JoinHandle<()>>,
}

impl Names {
    pub(crate) fn start(zenoh: &zenoh::Session, seal: &Seal, node: &str, runtime: &Runtime) -> zenoh::Result<Names> {
        let alive = zenoh.liveliness().declare_token(fabric::alive_key(node)).wait()?;
        let listing = {
            let (runtime, key, seal) = (runtime.clone(), listing_key(node), seal.clone());
            zenoh
                .declare_queryable(key.clone())
                .callback(move |query| {
                    let asked = query.payload().map(|p| p.to_bytes());
                    let prefix = asked
                        .as_deref()
                        .and_then(|p| seal.open(p))
                        .and_then(|p| postcard::from_bytes::<String>(p).ok());
                    let Some(prefix) = prefix else { return };
                    if let Ok(bytes) = postcard::to_allocvec(&runtime.listing(&prefix)) {
                        // Under its own key (the question is a wildcard): it names the node.
                        let _ = query.reply(&key, seal.seal(bytes)).wait();
                    }
                })
                .wait()?
        };
        let (snapshot, mut feed) = runtime.watch("");
        let stop = Arc::new(AtomicBool::new(false));
        let (zenoh, key, node, stopping) = (zenoh.clone(), fabric::names_key(node), node.to_owned(), stop.clone());
        let publisher = std::thread::Builder::new().name("stampede-names".into()).spawn(move || {
            let mut snapshot = snapshot.into_iter();
            while !stopping.load(Ordering::SeqCst) {
                // The names there when the node started, then each change as it comes.
                let next = match snapshot.next() {
                    Some(event) => Ok(Some(event)),
                    None => feed.next(Instant::now().checked_add(STOP_CHECK)),
                };
                let event = match next {
                    Ok(Some(event)) => event,
                    Ok(None) => continue,
                    Err(_) => return, // the runtime closed
                };
                let event = match event {
                    WatchEvent::Created { name, container_kind, .. } => {
                        WatchEvent::Created { name, container_kind, node: Some(node.clone()) }
                    }
                    WatchEvent::Destroyed { name, container_kind, .. } => {
                        WatchEvent::Destroyed { name, container_kind, node: Some(node.clone()) }
                    }
                    other => other,
                };
                let _ = zenoh.put(&key, wire::encode(&event)).congestion_control(CongestionControl::Block).wait();
            }
        })?;
        Ok(Names { _alive: alive, _listing: listing, stop, publisher: Some(publisher) })
    }

    /// Ends the publishing thread (within [`STOP_CHECK`]) and withdraws the token.
    pub(crate) fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(publisher) = self.publisher.take() {
            let _ = publisher.join();
        }
    }
}
