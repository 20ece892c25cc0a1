//! The logs of several threads, processes and hosts as one timeline on a reference clock.
//!
//! Guarantees: the timeline holds every record of every log once, ordered by its time on the
//! reference clock (ties: process, thread, then the record's place in its thread's log, so a
//! thread's records keep their order); a name index a log does not have reads as
//! [`UNKNOWN_NAME`], never a panic.

use crate::clock::ClockMap;
use crate::record::Record;

/// What a record's name reads as when its log's name table has no such entry.
pub const UNKNOWN_NAME: &str = "?";

/// One thread's records, in the order it wrote them.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadLog {
    /// The thread's id in its process.
    pub tid: u64,
    /// Its name (the task's, where one is known), for tracks and tables.
    pub name: String,
    pub records: Vec<Record>,
}

/// One process's log.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessLog {
    /// Its host and process id, and a name for tracks and tables.
    pub host: String,
    pub pid: u32,
    pub name: String,
    /// The name table the records' `name` fields index.
    pub names: Vec<String>,
    pub threads: Vec<ThreadLog>,
    /// Its clock on the reference clock ([`ClockMap::IDENTITY`] for the reference's own log).
    pub clock: ClockMap,
}

impl ProcessLog {
    /// The name `index` stands for.
    pub fn name_of(&self, index: u32) -> &str {
        self.names.get(index as usize).map_or(UNKNOWN_NAME, String::as_str)
    }
}

/// One record on the timeline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    /// Its time on the reference clock, ns.
    pub t: i128,
    /// Indices into [`Timeline::processes`] and that process's threads.
    pub process: usize,
    pub thread: usize,
    pub record: Record,
}

/// Every record of every log, on the reference clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    pub processes: Vec<ProcessLog>,
    /// Ordered by `t`, then process, thread and place in the thread's log.
    pub events: Vec<Event>,
}

impl Timeline {
    /// The logs merged.
    pub fn merge(processes: Vec<ProcessLog>) -> Timeline {
        let mut keyed = Vec::new();
        for (p, process) in processes.iter().enumerate() {
            for (th, thread) in process.threads.iter().enumerate() {
                for (i, record) in thread.records.iter().enumerate() {
                    let t = process.clock.to_reference(record.t);
                    keyed.push(((t, p, th, i), Event { t, process: p, thread: th, record: *record }));
                }
            }
        }
        keyed.sort_by_key(|(key, _)| *key);
        Timeline { processes, events: keyed.into_iter().map(|(_, event)| event).collect() }
    }

    /// The name `event`'s record names.
    pub fn name_of(&self, event: &Event) -> &str {
        self.processes[event.process].name_of(event.record.name)
    }

    /// The events of one thread, in order.
    pub fn thread_events(&self, process: usize, thread: usize) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(move |e| e.process == process && e.thread == thread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Exchange;
    use crate::record::{Kind, Phase};

    fn record(t: u64, kind: Kind, phase: Phase) -> Record {
        Record { t, kind, phase, name: 1, ts: 0, bytes: 0 }
    }

    fn process(pid: u32, clock: ClockMap, records: Vec<Record>) -> ProcessLog {
        let thread = ThreadLog { tid: 1, name: "main".into(), records };
        ProcessLog {
            host: "h".into(),
            pid,
            name: format!("p{pid}"),
            names: vec![String::new(), "frames".into()],
            threads: vec![thread],
            clock,
        }
    }

    /// Two processes whose clocks are 1 s apart: once reconciled from an exchange, a put at
    /// reference 10 ms and a get at reference 10.05 ms come out in that order, at those times.
    #[test]
    fn logs_with_a_known_offset_merge_in_reference_order() {
        let offset = 1_000_000_000u64; // the consumer's clock is 1 s behind the reference
        let exchange =
            Exchange { t0: 5_000_000, t1: 5_000_000 + offset + 20_000, t2: 5_000_000 + offset + 21_000, t3: 5_041_000 };
        let consumer_clock = ClockMap::estimate(&[exchange], &[]).unwrap();
        let producer = process(1, ClockMap::IDENTITY, vec![record(offset + 10_000_000, Kind::Put, Phase::Begin)]);
        let consumer = process(
            2,
            consumer_clock,
            vec![record(10_050_000, Kind::Get, Phase::End), record(9_000_000, Kind::Get, Phase::Begin)],
        );
        let timeline = Timeline::merge(vec![consumer, producer]);
        let order: Vec<_> = timeline.events.iter().map(|e| (e.process, e.record.phase, e.t)).collect();
        assert_eq!(
            order,
            vec![
                (0, Phase::Begin, (offset + 9_000_000) as i128),
                (1, Phase::Begin, (offset + 10_000_000) as i128),
                (0, Phase::End, (offset + 10_050_000) as i128),
            ]
        );
        assert_eq!(timeline.name_of(&timeline.events[0]), "frames");
    }

    #[test]
    fn a_name_the_log_lacks_reads_unknown() {
        let mut log = process(1, ClockMap::IDENTITY, vec![record(1, Kind::User, Phase::Instant)]);
        log.threads[0].records[0].name = 99;
        let timeline = Timeline::merge(vec![log]);
        assert_eq!(timeline.name_of(&timeline.events[0]), UNKNOWN_NAME);
    }
}
