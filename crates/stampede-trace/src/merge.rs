//! The logs of several threads, processes and hosts as one timeline on a reference clock.
//!
//! The logs of one host share its monotonic clock ([`crate::file::read`]); [`reconcile`] maps
//! each other host's clock onto the reference host's through the exchanges the logs hold (a
//! client's with its node), composing maps along a chain of hosts where no direct exchange was
//! made.
//!
//! Guarantees: the timeline holds every record of every log once, ordered by its time on the
//! reference clock (ties: process, thread, then the record's place in its thread's log, so a
//! thread's records keep their order); a name index a log does not have reads as
//! [`UNKNOWN_NAME`], never a panic.

use crate::clock::{ClockMap, Exchange};
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
    /// Its timestamp exchanges with other hosts.
    pub exchanges: Vec<PeerExchange>,
}

/// One timestamp exchange of a log with another host.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerExchange {
    /// The other host.
    pub peer: String,
    /// Made at the end of the run (else at its start).
    pub at_end: bool,
    pub exchange: Exchange,
}

/// Sets every log's clock map onto the reference host's clock: the host the logs exchanged with
/// most (a node), else the first log's. A host with no chain of exchanges to the reference keeps
/// the identity (its logs are taken as on the reference clock): returned, after the reference,
/// so that the caller can say so. The reference host's own logs keep the identity.
pub fn reconcile(processes: &mut [ProcessLog]) -> Unreconciled {
    let mut hosts: Vec<String> = Vec::new();
    for process in processes.iter() {
        for host in std::iter::once(&process.host).chain(process.exchanges.iter().map(|e| &e.peer)) {
            if !hosts.contains(host) {
                hosts.push(host.clone());
            }
        }
    }
    let index = |host: &str| hosts.iter().position(|h| *h == host).expect("every host is listed");
    // The best map of each (host, peer) pair: the least error among the logs that exchanged.
    let mut edges: Vec<(usize, usize, ClockMap)> = Vec::new();
    for process in processes.iter() {
        let mut peers: Vec<&str> = process.exchanges.iter().map(|e| e.peer.as_str()).collect();
        peers.sort_unstable();
        peers.dedup();
        for peer in peers.into_iter().filter(|peer| *peer != process.host) {
            let of = |at_end: bool| -> Vec<Exchange> {
                process.exchanges.iter().filter(|e| e.peer == peer && e.at_end == at_end).map(|e| e.exchange).collect()
            };
            let Some(map) = ClockMap::estimate(&of(false), &of(true)) else { continue };
            let (from, to) = (index(&process.host), index(peer));
            match edges.iter_mut().find(|(f, t, _)| (*f, *t) == (from, to)) {
                Some(edge) if edge.2.error_ns > map.error_ns => edge.2 = map,
                Some(_) => {}
                None => edges.push((from, to, map)),
            }
        }
    }
    let mut peered = vec![0usize; hosts.len()];
    for (_, to, _) in &edges {
        peered[*to] += 1;
    }
    let reference = (0..hosts.len()).max_by_key(|h| (peered[*h], std::cmp::Reverse(*h))).unwrap_or(0);
    let mut maps: Vec<Option<ClockMap>> = vec![None; hosts.len()];
    if let Some(map) = maps.get_mut(reference) {
        *map = Some(ClockMap::IDENTITY);
    }
    // Each pass maps at least one more host, or ends.
    loop {
        let mut grew = false;
        for (from, to, map) in &edges {
            match (maps[*from], maps[*to]) {
                (None, Some(onward)) => maps[*from] = Some(map.then(&onward)),
                (Some(onward), None) => maps[*to] = Some(map.inverse().then(&onward)),
                _ => continue,
            }
            grew = true;
        }
        if !grew {
            break;
        }
    }
    for process in processes.iter_mut() {
        process.clock = maps[index(&process.host)].unwrap_or(ClockMap::IDENTITY);
    }
    let hosts_with_logs: Vec<&String> = processes.iter().map(|p| &p.host).collect();
    Unreconciled {
        reference: hosts.get(reference).cloned().unwrap_or_default(),
        hosts: (0..hosts.len())
            .filter(|h| maps[*h].is_none() && hosts_with_logs.contains(&&hosts[*h]))
            .map(|h| hosts[h].clone())
            .collect(),
    }
}

/// The hosts [`reconcile`] could not map onto the reference host (no chain of exchanges).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unreconciled {
    pub reference: String,
    pub hosts: Vec<String>,
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
            exchanges: Vec::new(),
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

    /// Exchanges as a log on a clock `offset` ns behind its peer's would record them (20 µs each
    /// way), at `t0` of its own clock.
    fn exchanges(peer: &str, offset: i128, at: &[(u64, bool)]) -> Vec<PeerExchange> {
        let on_peer = |t: u64| (t as i128 + offset) as u64;
        at.iter()
            .map(|&(t0, at_end)| PeerExchange {
                peer: peer.into(),
                at_end,
                exchange: Exchange { t0, t1: on_peer(t0 + 20_000), t2: on_peer(t0 + 21_000), t3: t0 + 41_000 },
            })
            .collect()
    }

    /// A node's host is the reference (both clients exchanged with it); a host that exchanged
    /// only with a client's host is mapped through it; logs of one host share its map.
    #[test]
    fn hosts_reconcile_onto_the_node_through_chains_of_exchanges() {
        let on = |host: &str, pid, exchanges| ProcessLog {
            host: host.into(),
            exchanges,
            ..process(pid, ClockMap::IDENTITY, vec![])
        };
        let ends = [(1_000_000_000, false), (9_000_000_000, true)];
        let mut logs = vec![
            on("a", 1, exchanges("node", 2_000_000, &ends)),
            on("node", 2, vec![]),
            on("b", 3, exchanges("node", -5_000_000, &ends)),
            on("c", 4, exchanges("a", 7_000_000, &ends[..1])),
            on("a", 5, vec![]),
            on("lonely", 6, vec![]),
        ];
        let unreconciled = reconcile(&mut logs);
        assert_eq!(unreconciled, Unreconciled { reference: "node".into(), hosts: vec!["lonely".into()] });
        let at = |p: usize, t: u64| logs[p].clock.to_reference(t);
        assert_eq!(at(1, 123), 123, "the node's host is the reference");
        assert_eq!(at(0, 5_000_000_000), 5_002_000_000);
        assert_eq!(at(4, 5_000_000_000), 5_002_000_000, "another log of host a");
        assert_eq!(at(2, 5_000_000_000), 4_995_000_000);
        assert_eq!(at(3, 5_000_000_000), 5_009_000_000, "c → a → node");
        assert_eq!(at(5, 77), 77, "no chain: the identity");
    }

    #[test]
    fn a_name_the_log_lacks_reads_unknown() {
        let mut log = process(1, ClockMap::IDENTITY, vec![record(1, Kind::User, Phase::Instant)]);
        log.threads[0].records[0].name = 99;
        let timeline = Timeline::merge(vec![log]);
        assert_eq!(timeline.name_of(&timeline.events[0]), UNKNOWN_NAME);
    }
}
