//! Deterministic simulation of the distributed ts_min protocol (`stampede_core::mesh`,
//! docs/PROTOCOL.md), in the manner of TigerBeetle's VOPR: every seed builds a small world — 1–3
//! nodes and 0–3 client sessions, each holding the real `Mesh` and the real `Progress` — and
//! drives it through a random workload (root tasks, spawns, `set_virtual_time`, puts here and on
//! other nodes, gets of items hosted here and elsewhere so that claims move between participants,
//! consumes, tasks ending) over a fabric that delays, interleaves senders (FIFO per sender),
//! duplicates, and loses the undelivered tail of a crashed sender; participants crash, restart as
//! new incarnations, and are declared dead to each participant at its own time. In half of the
//! seeds, live participants are also falsely suspected — one participant declares a live peer
//! dead, or stops its stream over a corrupted batch (`Event::Faulted`, which its driver answers
//! by declaring the sender dead); the fenced peer runs on until a fence or a reminder of it
//! (`Mesh::remind`) reaches it, and, expelled, rejoins as a new incarnation
//! (`mesh_sim/suspicion.rs`).
//!
//! After **every** step an omniscient oracle computes the true minimum (every claim a live
//! participant holds and every move in flight its receiver may still take over, capped by `1 +`
//! the highest put; for a participant some peers fenced, only what can still reach it) and
//! checks that no participant's ts_min is above it and that none went back; any other refusal on
//! this traffic, or any panic, fails the seed. At the end the world quiesces — deaths declared,
//! everything delivered, round after round — and every view must be complete, hold no live peer
//! fenced, and equal the truth within `LIVENESS_ROUNDS_MAX` rounds, once with the claims left and
//! once after every claim is released.
//!
//! ```text
//! cargo test -p stampede-core --test mesh_simulation                         # STAMPEDE_MESH_SEEDS (default 2000)
//! STAMPEDE_MESH_SEED=1234 cargo test -p stampede-core --test mesh_simulation  # one seed, replayed exactly
//! STAMPEDE_MESH_UNFIXED=1 …                                                   # without the stand-in for a core fix (suspicion.rs)
//! cargo test -p stampede-core --features mutations --test mesh_simulation     # and the mutations it must catch
//! ```

mod mesh_sim;
#[path = "../../stampede/tests/support/mod.rs"]
mod support;

use std::panic::{catch_unwind, AssertUnwindSafe};

use mesh_sim::{Counts, Failure, World, LIVENESS_ROUNDS_MAX};
use support::with_watchdog;

/// Seeds run by default (CI runs them in a debug build: about 10 s); `STAMPEDE_MESH_SEEDS`
/// overrides (from `STAMPEDE_MESH_SEEDS_FROM`, 0 by default: shards of a long run), and
/// `STAMPEDE_MESH_SEED` replays one.
const SEEDS_DEFAULT: u64 = 2000;

fn seeds() -> Vec<u64> {
    let var = |name| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    match (var("STAMPEDE_MESH_SEED"), var("STAMPEDE_MESH_SEEDS")) {
        (Some(seed), _) => vec![seed],
        (None, count) => {
            let from = var("STAMPEDE_MESH_SEEDS_FROM").unwrap_or(0);
            (from..from.saturating_add(count.unwrap_or(SEEDS_DEFAULT))).collect()
        }
    }
}

/// Runs one seed; a panic in the protocol (or the simulation) is a failure of the seed too.
fn run(seed: u64, prepare: impl FnOnce(&mut World)) -> (Result<(), Failure>, usize, Counts) {
    let mut world = World::new(seed);
    prepare(&mut world);
    let result = with_watchdog("mesh simulation seed", || catch_unwind(AssertUnwindSafe(|| world.run())));
    let (rounds, counts) = (world.rounds_max, world.counts);
    let result = result.unwrap_or_else(|panic| {
        let text =
            panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
        Err(Failure::Protocol(format!("panic: {}", text.unwrap_or_default())))
    });
    (result, rounds, counts)
}

/// Safety after every step and liveness at the end hold for every seed; a failure names its seed.
#[test]
fn ts_min_is_safe_and_live_under_delays_duplicates_and_crashes() {
    let (mut rounds_max, mut total) = (0, Counts::default());
    let seeds = seeds();
    for &seed in &seeds {
        let (result, rounds, counts) = run(seed, |_| {});
        if let Err(failure) = result {
            panic!("seed {seed} failed (replay: STAMPEDE_MESH_SEED={seed}): {failure}");
        }
        rounds_max = rounds_max.max(rounds);
        total += counts;
    }
    support::say(&format!(
        "mesh simulation: {} seeds passed (from seed {}); quiescence took at most {rounds_max} of {LIVENESS_ROUNDS_MAX} \
         rounds; {total:?}",
        seeds.len(),
        seeds.first().copied().unwrap_or_default()
    ));
}

/// The checker has teeth: with a protocol fault switched on, the oracle reports a safety
/// violation within a few seeds.
#[cfg(feature = "mutations")]
mod mutations {
    use super::*;
    use stampede_core::mesh::Mutation;

    /// Seeds each mutation gets to be caught in.
    const SEEDS: u64 = 2000;

    fn caught(mutation: Mutation) -> u64 {
        let mut caught = None;
        for seed in 0..SEEDS {
            match run(seed, |world| world.mutate(mutation)).0 {
                Err(Failure::Safety(what)) => {
                    eprintln!("{mutation:?}: seed {seed}: {what}");
                    caught = Some(seed);
                    break;
                }
                Err(other) => eprintln!("{mutation:?}: seed {seed} failed otherwise: {other}"),
                Ok(()) => {}
            }
        }
        caught.unwrap_or_else(|| panic!("{mutation:?} went unnoticed for {SEEDS} seeds"))
    }

    /// Dropping a dead peer's claims without waiting for every live peer's fence loses claims
    /// that moved from it to a live participant.
    #[test]
    fn finalizing_without_fences_is_caught() {
        caught(Mutation::FinalizeWithoutFences);
    }

    /// A door opened at the opener's own ts_min, without a pause round, lies below a view that
    /// is ahead of it.
    #[test]
    fn opening_a_door_without_pausing_is_caught() {
        caught(Mutation::OpenWithoutPause);
    }

    // Applying a carry's release before the takeover it waits for: a unit test of its own
    // (`mesh::tests::ignoring_dependencies_is_caught`), the order it needs being too rare here.
}
