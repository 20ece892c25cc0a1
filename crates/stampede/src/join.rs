//! Temporal correlation (docs/CORRELATION.md): exact and approximate joins over channels.
//!
//! Both joins are built on the public connection API (`get`, `consume`) plus settledness
//! ([`Channel::settled_below`](crate::Channel::settled_below)), so they work unchanged wherever a channel lives.
//!
//! A join pulls every unseen item of its input connections into per-channel buffers (the items
//! are open on the join's connections, so they cannot be reclaimed under it). A tuple it returns
//! stays open until the next call, so the joining task's visibility stays at the tuple's
//! timestamp and it can put results there; the next call consumes it.
//!
//! Nothing is dropped silently: every partial tuple, skipped timestamp and late item (one that
//! arrives at or below a timestamp already released) is counted in [`JoinStats`] and passed to
//! the optional `on_incomplete` callback.

use std::collections::BTreeMap;
use std::time::Duration;

use stampede_core::{Error, Item, Result, Selector, Timestamp};

use crate::channel::{Channel, ChannelInput};
use crate::wait;

/// What an exact join does with a timestamp that is missing in some channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinPolicy {
    /// Release a timestamp only when every channel has it; wait as long as that takes.
    WaitAll,
    /// Once every missing part is settled (can never be put), release the tuple with `None`
    /// for the missing parts.
    Partial,
    /// Once every missing part is settled, drop the timestamp (counted, reported).
    Skip,
}

/// Why a timestamp was not released complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incomplete {
    /// Released with some parts missing ([`JoinPolicy::Partial`]).
    Partial,
    /// Dropped because some parts are settled missing ([`JoinPolicy::Skip`]).
    Skipped,
    /// An item arrived at or below a timestamp already released; it was consumed unused.
    Late,
}

/// Counters of a join.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinStats {
    /// Tuples released with every part.
    pub complete: u64,
    /// Tuples released with missing parts.
    pub partial: u64,
    /// Timestamps dropped because parts were settled missing.
    pub skipped: u64,
    /// Items that arrived too late to be joined.
    pub late: u64,
}

/// Called with the timestamp, which channels had a part, and what happened.
pub type IncompleteHandler = Box<dyn FnMut(Timestamp, &[bool], Incomplete) + Send>;

/// A tuple of items sharing one timestamp (in the order of the join's inputs).
#[derive(Clone, Debug)]
pub struct Joined {
    pub ts: Timestamp,
    pub items: Vec<Option<Item>>,
}

/// One pivot item and, per other channel, its best match within the tolerance.
#[derive(Clone, Debug)]
pub struct Matched {
    pub pivot: Item,
    pub matches: Vec<Option<Item>>,
}

/// The machinery both joins share: inputs, buffers of open items, stats, reporting.
struct Inputs {
    inputs: Vec<ChannelInput>,
    buffers: Vec<BTreeMap<Timestamp, Item>>,
    stats: JoinStats,
    on_incomplete: Option<IncompleteHandler>,
    /// A channel of the join's runtime, whose progress (any put or claim change) it waits for.
    progress: Channel,
    /// Highest timestamp released (or skipped); items arriving at or below it are late.
    released_through: Option<Timestamp>,
    /// The timestamp of the output handed out last, consumed at the next call.
    outstanding: Option<Timestamp>,
}

impl Inputs {
    fn new(inputs: Vec<ChannelInput>) -> Result<Inputs> {
        let Some(first) = inputs.first() else {
            return Err(Error::InvalidArgument {
                op: "join",
                name: String::new(),
                reason: "no input connections".into(),
            });
        };
        let first = first.channel().clone();
        if let Some(foreign) = inputs.iter().find(|i| !i.channel().same_runtime(&first)) {
            return Err(Error::InvalidArgument {
                op: "join",
                name: foreign.channel().name().to_owned(),
                reason: "the join's channels belong to different runtimes; join channels of one runtime".into(),
            });
        }
        let buffers = inputs.iter().map(|_| BTreeMap::new()).collect();
        Ok(Inputs {
            inputs,
            buffers,
            stats: JoinStats::default(),
            on_incomplete: None,
            progress: first,
            released_through: None,
            outstanding: None,
        })
    }

    /// The join's name in messages: its channels' names, in order ("left, right").
    fn name(&self) -> String {
        self.inputs.iter().map(|i| i.channel().name()).collect::<Vec<_>>().join(", ")
    }

    /// Fails unless every channel's producer set is closed: with an open producer set any task,
    /// even the joining one, could still put a missing part, so it would never be settled.
    fn require_closed_producers(&self, policy: &str) -> Result<()> {
        for input in &self.inputs {
            let channel = input.channel();
            if !channel.producers_closed() {
                return Err(Error::InvalidArgument {
                    op: "join",
                    name: channel.name().to_owned(),
                    reason: format!(
                        "{policy} needs settledness: call close_producers() on this channel first (with an open \
                         producer set any task could still put a missing part)"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Settled horizons per channel, read *before* pulling, so "absent after the pull and
    /// below the horizon" means "never".
    fn horizons(&self) -> Vec<Timestamp> {
        self.inputs.iter().map(|i| i.channel().settled_below()).collect()
    }

    /// Moves every unseen item into the buffers; items at or below `late_through[i]` are late.
    fn pull(&mut self, late_through: impl Fn(usize) -> Option<Timestamp>) -> Result<()> {
        for i in 0..self.inputs.len() {
            loop {
                let item = match self.inputs[i].get(Selector::OldestUnseen, Some(Duration::ZERO)) {
                    Ok(item) => item,
                    Err(Error::NotAvailable { .. }) => break,
                    Err(e) => return Err(e),
                };
                if late_through(i).is_some_and(|t| item.ts <= t) {
                    self.inputs[i].consume(item.ts)?;
                    let mut present = vec![false; self.inputs.len()];
                    present[i] = true;
                    self.report(item.ts, &present, Incomplete::Late);
                } else {
                    self.buffers[i].insert(item.ts, item);
                }
            }
        }
        Ok(())
    }

    /// Consumes and forgets the buffered item at `ts` on input `i`, if any.
    fn release(&mut self, i: usize, ts: Timestamp) -> Result<Option<Item>> {
        match self.buffers[i].remove(&ts) {
            Some(item) => {
                self.inputs[i].consume(ts)?;
                Ok(Some(item))
            }
            None => Ok(None),
        }
    }

    fn report(&mut self, ts: Timestamp, present: &[bool], what: Incomplete) {
        match what {
            Incomplete::Partial => self.stats.partial += 1,
            Incomplete::Skipped => self.stats.skipped += 1,
            Incomplete::Late => self.stats.late += 1,
        }
        if let Some(handler) = self.on_incomplete.as_mut() {
            handler(ts, present, what);
        }
    }

    /// Runs `step` until it yields, waiting for progress (any put or claim change in the
    /// runtime) in between. `NotAvailable` when `timeout` expires.
    fn wait<T>(
        &mut self,
        timeout: Option<Duration>,
        mut step: impl FnMut(&mut Inputs) -> Result<Option<T>>,
    ) -> Result<T> {
        let deadline = wait::deadline(timeout);
        loop {
            let waiter = self.progress.progressed();
            if let Some(value) = step(self)? {
                return Ok(value);
            }
            let progressed = {
                let _waiting = crate::trace::span(crate::trace::Kind::Wait, 0, 0, 0);
                waiter.wait(deadline)
            };
            if !progressed {
                return step(self)?.ok_or_else(|| Error::NotAvailable {
                    op: "join",
                    name: self.name(),
                    selector: Selector::Oldest,
                    previous: None,
                    next: None,
                    settled: false,
                });
            }
        }
    }
}

/// Exact join over N channels: tuples of items with the same timestamp, in timestamp order.
pub struct ExactJoin {
    core: Inputs,
    policy: JoinPolicy,
}

impl ExactJoin {
    /// A join over `inputs` (the joining task's input connections). `Partial` and `Skip` need
    /// every channel's producer set closed ([`Channel::close_producers`]).
    ///
    /// [`Channel::close_producers`]: crate::Channel::close_producers
    pub fn new(inputs: Vec<ChannelInput>, policy: JoinPolicy) -> Result<ExactJoin> {
        let core = Inputs::new(inputs)?;
        if policy != JoinPolicy::WaitAll {
            core.require_closed_producers(&format!("{policy:?}"))?;
        }
        Ok(ExactJoin { core, policy })
    }

    /// Sets the callback told about every partial, skipped or late timestamp.
    pub fn on_incomplete(&mut self, handler: impl FnMut(Timestamp, &[bool], Incomplete) + Send + 'static) {
        self.core.on_incomplete = Some(Box::new(handler));
    }

    /// Counters so far.
    pub fn stats(&self) -> &JoinStats {
        &self.core.stats
    }

    /// The next tuple, waiting up to `timeout` (`None`: as long as it takes). Consumes the
    /// previous tuple first.
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Joined> {
        let span = crate::trace::span(crate::trace::Kind::Join, 0, 0, 0);
        if let Some(ts) = self.core.outstanding.take() {
            for i in 0..self.core.inputs.len() {
                self.core.release(i, ts)?;
            }
        }
        let policy = self.policy;
        let joined = self.core.wait(timeout, |core| step(core, policy))?;
        self.core.outstanding = Some(joined.ts);
        span.end_with(joined.ts as u64, 0);
        Ok(joined)
    }
}

/// One attempt of an exact join: `Some` when a tuple is ready.
fn step(core: &mut Inputs, policy: JoinPolicy) -> Result<Option<Joined>> {
    let horizons = core.horizons();
    let late = core.released_through;
    core.pull(|_| late)?;
    loop {
        let Some(ts) = core.buffers.iter().filter_map(|b| b.keys().next().copied()).min() else { return Ok(None) };
        let present: Vec<bool> = core.buffers.iter().map(|b| b.contains_key(&ts)).collect();
        let complete = present.iter().all(|&p| p);
        if policy != JoinPolicy::WaitAll {
            // In order: no lower timestamp may still arrive anywhere, and missing parts must be
            // settled.
            let ordered = horizons.iter().all(|&h| ts <= h);
            let missing_settled = present.iter().zip(&horizons).all(|(&p, &h)| p || ts < h);
            if !(ordered && missing_settled) {
                return Ok(None);
            }
        } else if !complete {
            return Ok(None);
        }
        core.released_through = Some(ts);
        if complete {
            core.stats.complete += 1;
        } else if policy == JoinPolicy::Skip {
            for i in 0..core.inputs.len() {
                core.release(i, ts)?;
            }
            core.report(ts, &present, Incomplete::Skipped);
            continue;
        } else {
            core.report(ts, &present, Incomplete::Partial);
        }
        let items = core.buffers.iter().map(|b| b.get(&ts).cloned()).collect();
        return Ok(Some(Joined { ts, items }));
    }
}

/// Approximate join: for each item of the pivot channel (input 0), in timestamp order, the item
/// of every other channel closest in timestamp within `tolerance` (ties: the earlier one), or
/// `None` if there is none.
///
/// Release rule: a pivot item at `t` is released when (1) no pivot item below `t` can still
/// arrive (`t <= settled_below(pivot)`), and (2) for every other channel, no better match can
/// still arrive: with a best match at distance `d`, every timestamp closer than `d` is settled
/// (`t + d <= settled_below(channel)`); with no match yet, the whole window is settled
/// (`t + tolerance < settled_below(channel)`). Items of other channels may match several pivot
/// items. All channels need a closed producer set.
pub struct ApproxJoin {
    core: Inputs,
    tolerance: Timestamp,
}

impl ApproxJoin {
    /// A join of `inputs[0]` (pivot) with `inputs[1..]`, `tolerance >= 0` in timestamp units.
    pub fn new(inputs: Vec<ChannelInput>, tolerance: Timestamp) -> Result<ApproxJoin> {
        let core = Inputs::new(inputs)?;
        if tolerance < 0 || core.inputs.len() < 2 {
            return Err(Error::InvalidArgument {
                op: "approx_join",
                name: core.inputs[0].channel().name().to_owned(),
                reason: "needs a pivot and at least one other channel, and tolerance >= 0".into(),
            });
        }
        core.require_closed_producers("an approximate join")?;
        Ok(ApproxJoin { core, tolerance })
    }

    /// Sets the callback told about late pivot items and unmatched channels (as `Partial`).
    pub fn on_incomplete(&mut self, handler: impl FnMut(Timestamp, &[bool], Incomplete) + Send + 'static) {
        self.core.on_incomplete = Some(Box::new(handler));
    }

    /// Counters so far (`partial` counts pivot items released with some channel unmatched).
    pub fn stats(&self) -> &JoinStats {
        &self.core.stats
    }

    /// The next pivot item with its matches, waiting up to `timeout`.
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Matched> {
        let _span = crate::trace::span(crate::trace::Kind::Join, 0, 0, 0);
        if let Some(ts) = self.core.outstanding.take() {
            self.core.release(0, ts)?;
            // No later pivot (> ts) can match anything at or below ts - tolerance.
            let stale = ts.saturating_sub(self.tolerance);
            for i in 1..self.core.inputs.len() {
                let old: Vec<Timestamp> = self.core.buffers[i].range(..=stale).map(|(&t, _)| t).collect();
                for t in old {
                    self.core.release(i, t)?;
                }
            }
        }
        let tolerance = self.tolerance;
        let matched = self.core.wait(timeout, |core| approx_step(core, tolerance))?;
        self.core.outstanding = Some(matched.pivot.ts);
        Ok(matched)
    }
}

fn approx_step(core: &mut Inputs, tolerance: Timestamp) -> Result<Option<Matched>> {
    let horizons = core.horizons();
    let late = core.released_through;
    // Only the pivot has late items; others' old items are released by `next`.
    core.pull(|i| if i == 0 { late } else { None })?;
    let Some((&t, pivot)) = core.buffers[0].iter().next() else { return Ok(None) };
    if t > horizons[0] {
        return Ok(None);
    }
    let mut matches = Vec::with_capacity(core.inputs.len() - 1);
    for (buffer, &horizon) in core.buffers.iter().zip(&horizons).skip(1) {
        let window = buffer.range(t.saturating_sub(tolerance)..=t.saturating_add(tolerance));
        // Closest first; on a tie the earlier timestamp wins (it comes first in the range).
        let best = window.min_by_key(|(&ts, _)| (ts - t).abs());
        // An exact match (distance 0) is final at once: nothing can beat it, and a tie needs an
        // equal distance.
        let decided = match best {
            Some((&ts, _)) => ts == t || t.saturating_add((ts - t).abs()) <= horizon,
            None => t.saturating_add(tolerance) < horizon,
        };
        if !decided {
            return Ok(None);
        }
        matches.push(best.map(|(_, item)| item.clone()));
    }
    let pivot = pivot.clone();
    core.released_through = Some(t);
    if matches.iter().all(Option::is_some) {
        core.stats.complete += 1;
    } else {
        let present: Vec<bool> = std::iter::once(true).chain(matches.iter().map(Option::is_some)).collect();
        core.report(t, &present, Incomplete::Partial);
    }
    Ok(Some(Matched { pivot, matches }))
}
