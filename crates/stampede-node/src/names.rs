//! The node's side of watching (docs/NODES.md, "The name service"; `stampede::watch`): a liveliness
//! token `stampede/<node>/alive` while the node serves, and its runtime's name changes published on
//! `stampede/<node>/names` by a thread that follows the runtime's own watch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stampede_core::WatchEvent;
use stampede_engine::Runtime;
use stampede_wire::{self as wire, fabric};
use zenoh::liveliness::LivelinessToken;
use zenoh::qos::CongestionControl;
use zenoh::Wait;

/// How often the publisher looks whether the node is closing.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// The token and the publishing thread; [`stop`](Self::stop) ends both.
pub(crate) struct Names {
    _alive: LivelinessToken,
    stop: Arc<AtomicBool>,
    publisher: Option<JoinHandle<()>>,
}

impl Names {
    pub(crate) fn start(zenoh: &zenoh::Session, node: &str, runtime: &Runtime) -> zenoh::Result<Names> {
        let alive = zenoh.liveliness().declare_token(fabric::alive_key(node)).wait()?;
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
        Ok(Names { _alive: alive, stop, publisher: Some(publisher) })
    }

    /// Ends the publishing thread (within [`STOP_CHECK`]) and withdraws the token.
    pub(crate) fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(publisher) = self.publisher.take() {
            let _ = publisher.join();
        }
    }
}
