//! Splitter/joiner helpers for data parallelism over queues (docs/SEMANTICS.md, "Queues").
//!
//! A splitter puts K fragments of one frame into a work queue under the frame's timestamp;
//! workers each take fragments, process them, and put results into a result queue under the same
//! timestamp; a joiner [`Gather`]s K results per timestamp. The gathered items stay open on the
//! joiner's connection until it consumes them, so its visibility stays at the timestamp and it can
//! put the joined result there.

use std::collections::BTreeMap;
use std::time::Duration;

use stampede_core::{Error, QueueItem, Result, Timestamp};

use crate::payload::IntoPayload;

use crate::queue::{QueueInput, QueueOutput};

/// Puts each fragment into the queue at `ts`, in order; returns how many were put.
pub fn split<P: IntoPayload>(
    out: &QueueOutput,
    ts: Timestamp,
    fragments: impl IntoIterator<Item = P>,
) -> Result<usize> {
    let mut count = 0;
    for fragment in fragments {
        out.put(ts, fragment, None)?;
        count += 1;
    }
    Ok(count)
}

/// Collects results per timestamp until `k` have arrived for one of them.
pub struct Gather {
    k: usize,
    partial: BTreeMap<Timestamp, Vec<QueueItem>>,
}

impl Gather {
    /// A gatherer of `k` results per timestamp (`InvalidArgument` for `k == 0`: nothing could
    /// ever be gathered).
    pub fn new(k: usize) -> Result<Gather> {
        if k == 0 {
            return Err(Error::InvalidArgument {
                op: "Gather",
                name: "gather".into(),
                reason: "k must be at least 1 (the number of results per timestamp)".into(),
            });
        }
        Ok(Gather { k, partial: BTreeMap::new() })
    }

    /// Gets from `inp` until some timestamp has `k` results, and returns them in arrival order
    /// (still open: consume each with [`QueueInput::consume`] after putting the joined result).
    /// `timeout` bounds each wait for one more result.
    pub fn next(&mut self, inp: &QueueInput, timeout: Option<Duration>) -> Result<(Timestamp, Vec<QueueItem>)> {
        loop {
            let item = inp.get(timeout)?;
            let ts = item.item.ts;
            let results = self.partial.entry(ts).or_default();
            results.push(item);
            if results.len() == self.k {
                let results = self.partial.remove(&ts).unwrap_or_default();
                return Ok((ts, results));
            }
        }
    }

    /// Timestamps with some but not all results, and how many each has.
    pub fn pending(&self) -> Vec<(Timestamp, usize)> {
        self.partial.iter().map(|(&ts, v)| (ts, v.len())).collect()
    }
}
