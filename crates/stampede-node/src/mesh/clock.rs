//! Mesh time between nodes (docs/NODES.md, "Time across hosts"; the rule and the estimate:
//! `stampede_core::mesh_time`). Each node answers clock questions on `stampede/<name>/mesh/clock`
//! — a mesh key, so with mutual TLS and `--mesh-node-cn` only nodes answer there — with its mesh
//! time on receipt and on reply, its epoch and whether it is synced. A node *looks* once before it
//! serves and then every [`LOOK_EVERY`]: it asks every node's clock at once, then founds, follows
//! its reference through [`EXCHANGES`] exchanges, or keeps its time.
//!
//! **Guarantees.** Every question is bounded by [`ASK_TIMEOUT`]; a reply that does not decode,
//! or a reference that stops answering mid-round, changes nothing; a round with no exchange
//! changes nothing. The thread stops within [`LOOK_EVERY`]'s slice ([`STOP_CHECK`]) of
//! [`ClockSync::stop`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stampede_core::mesh_time::{Exchange, TimeStep};
use stampede_core::ClockReading;
use stampede_engine::MeshClock;
use zenoh::query::{ConsolidationMode, Queryable};
use zenoh::Wait;

use super::Seal;

/// How often a node looks at its peers' clocks again (a new node, a reference gone, drift).
pub const LOOK_EVERY: Duration = Duration::from_secs(2);
/// Exchanges with the reference per look; the least-delay one sets the offset.
pub const EXCHANGES: usize = 8;
/// Longest a clock question waits for its answers.
pub const ASK_TIMEOUT: Duration = Duration::from_millis(500);
/// How often the looking thread checks whether it should stop.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// The mesh service a node's clock answers on.
const CLOCK: &str = "clock";

fn clock_key(name: &str) -> String {
    super::service_key(name, CLOCK)
}

/// A node's clock queryable and its looking thread.
pub(crate) struct ClockSync {
    _queryable: Queryable<()>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ClockSync {
    /// Answers clock questions for `clock`, looks once (so the clock is synced before the node
    /// serves anyone, unless a lower-named peer has yet to found), then keeps looking on a thread.
    pub(crate) fn start(
        (zenoh, seal): (&zenoh::Session, &Seal),
        name: &str,
        clock: Arc<MeshClock>,
    ) -> Result<ClockSync, String> {
        let queryable = {
            let (clock, key, sealing) = (clock.clone(), clock_key(name), seal.clone());
            zenoh
                .declare_queryable(key.clone())
                .callback(move |query| {
                    let received = clock.base_ns();
                    let reading = clock.reading(received);
                    if let Ok(bytes) = postcard::to_allocvec(&reading) {
                        // Under its own key (the question may be a wildcard): it names the node.
                        let _ = query.reply(&key, sealing.seal(bytes)).wait();
                    }
                })
                .wait()
                .map_err(|e| format!("zenoh refused the clock's queryable: {e}"))?
        };
        // A node starting alone founds now; one that meets peers takes their time.
        clock.set(stampede_core::MeshTime::UNSYNCED);
        look((zenoh, seal), name, &clock);
        let stop = Arc::new(AtomicBool::new(false));
        let (zenoh, seal, name, stopping) = (zenoh.clone(), seal.clone(), name.to_owned(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("stampede-clock".into())
            .spawn(move || {
                let mut next = Instant::now() + LOOK_EVERY;
                while !stopping.load(Ordering::Acquire) {
                    std::thread::sleep(STOP_CHECK.min(next.saturating_duration_since(Instant::now())));
                    if Instant::now() >= next {
                        look((&zenoh, &seal), &name, &clock);
                        next = Instant::now() + LOOK_EVERY;
                    }
                }
            })
            .map_err(|e| format!("cannot start the clock's thread: {e}"))?;
        Ok(ClockSync { _queryable: queryable, stop, thread: Some(thread) })
    }

    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ClockSync {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One look: every other node's reading, then what the rule says.
fn look(fabric: (&zenoh::Session, &Seal), me: &str, clock: &MeshClock) {
    let peers: Vec<(String, bool)> = ask(fabric, &clock_key("*"))
        .into_iter()
        .filter(|(name, _)| name != me)
        .map(|(name, reading)| (name, reading.synced))
        .collect();
    let mut time = clock.time();
    match time.decide(me, &peers) {
        TimeStep::Keep => return,
        TimeStep::Found => time.found(clock.base_ns()),
        TimeStep::Follow(reference) => {
            let key = clock_key(reference);
            let (mut exchanges, mut epoch) = (Vec::with_capacity(EXCHANGES), None);
            for _ in 0..EXCHANGES {
                let t0 = clock.base_ns();
                let Some((_, reading)) = ask(fabric, &key).into_iter().next() else { break };
                let t3 = clock.base_ns();
                if !reading.synced {
                    return; // it lost its time meanwhile: look again later
                }
                epoch = Some(reading.epoch_ns);
                exchanges.push(Exchange { t0, t1: reading.received_ns, t2: reading.replied_ns, t3 });
            }
            let Some(epoch) = epoch else { return };
            if !time.follow(&exchanges, epoch) {
                return;
            }
        }
    }
    clock.set(time);
}

/// The readings of the clocks `key` selects (those a node sealed), with their nodes' names.
fn ask((zenoh, seal): (&zenoh::Session, &Seal), key: &str) -> Vec<(String, ClockReading)> {
    let Ok(replies) = zenoh.get(key).consolidation(ConsolidationMode::None).timeout(ASK_TIMEOUT).wait() else {
        return Vec::new();
    };
    let mut readings = Vec::new();
    while let Ok(reply) = replies.recv() {
        let Ok(sample) = reply.into_result() else { continue };
        let Some(name) = super::node_of_service(sample.key_expr().as_str(), CLOCK) else { continue };
        let bytes = sample.payload().to_bytes();
        if let Some(Ok(reading)) = seal.open(&bytes).map(postcard::from_bytes::<ClockReading>) {
            readings.push((name.to_owned(), reading));
        }
    }
    readings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_keys_name_their_node() {
        use super::super::node_of_service;
        assert_eq!(node_of_service(&clock_key("a"), CLOCK), Some("a"));
        assert_eq!(node_of_service("stampede/a/b/mesh/clock", CLOCK), None);
        assert_eq!(node_of_service("stampede//mesh/clock", CLOCK), None);
        assert_eq!(node_of_service("stampede/a/mesh/7", CLOCK), None);
        assert_eq!(node_of_service("stampede/a/mesh/names", "names"), Some("a"));
    }
}
