//! The node's side of watching (docs/NODES.md, "The name service"; `stampede::watch`): a liveliness
//! token `stampede/<node>/alive` while the node serves, and its runtime's name changes published on
//! `stampede/<node>/names` by a thread that follows the runtime's own watch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use stampede::{Error, Runtime, WatchEvent};
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
        let mut watch = runtime.watch("", None).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let (zenoh, key, node, stopping) = (zenoh.clone(), fabric::names_key(node), node.to_owned(), stop.clone());
        let publisher = std::thread::Builder::new().name("stampede-names".into()).spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                let event = match watch.next_event(Some(STOP_CHECK)) {
                    Ok(event) => event,
                    Err(e) if e.is_transient() => continue,
                    Err(Error::Closed { .. }) | Err(_) => return,
                };
                let event = match event {
                    WatchEvent::Created { name, kind, .. } => {
                        WatchEvent::Created { name, kind, node: Some(node.clone()) }
                    }
                    WatchEvent::Destroyed { name, kind, .. } => {
                        WatchEvent::Destroyed { name, kind, node: Some(node.clone()) }
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
