//! A [`Timeline`] as Chrome trace JSON, which ui.perfetto.dev and `chrome://tracing` open: one
//! track per thread (named after its process and thread), a complete slice (`"ph": "X"`) per
//! span, an instant per instant record, and a flow arrow from each item's first put to every get
//! that returned it (same channel name, same timestamp), across threads, processes and hosts. (A
//! remote put is logged twice, by the client and by the node that stores the item: the arrow
//! starts at the client's, which began first.)
//!
//! Guarantees: times are µs since the timeline's first event; every flow has its start (`"s"`)
//! inside the put's slice and its end (`"f"`, bound to the enclosing slice) inside the get's, on
//! their own tracks; a span left open ends at its thread's last event and says so
//! (`"unfinished": true`).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::merge::{Event, Timeline};
use crate::record::{Kind, Phase, NO_ITEM};

/// One span of one thread, on the reference clock.
struct Slice {
    process: usize,
    thread: usize,
    kind: Kind,
    name: String,
    begin: i128,
    end: i128,
    ts: u64,
    bytes: u64,
    unfinished: bool,
}

/// The trace, as a JSON value (`{"traceEvents": [...], "displayTimeUnit": "ns"}`).
pub fn export(timeline: &Timeline) -> Value {
    let origin = timeline.events.first().map_or(0, |e| e.t);
    let us = |t: i128| (t - origin) as f64 / 1e3;
    let mut events = Vec::new();
    for (p, process) in timeline.processes.iter().enumerate() {
        let label = format!("{} (pid {} on {})", process.name, process.pid, process.host);
        events.push(json!({"ph": "M", "name": "process_name", "pid": p, "args": {"name": label}}));
        for (th, thread) in process.threads.iter().enumerate() {
            let args = json!({"name": format!("{} (tid {})", thread.name, thread.tid)});
            events.push(json!({"ph": "M", "name": "thread_name", "pid": p, "tid": th, "args": args}));
        }
    }
    let slices = slices(timeline);
    for slice in &slices {
        let mut args = json!({"ts": slice.ts, "bytes": slice.bytes});
        if slice.unfinished {
            args["unfinished"] = json!(true);
        }
        let name = if slice.name.is_empty() {
            slice.kind.label().to_owned()
        } else {
            format!("{} {}", slice.kind.label(), slice.name)
        };
        events.push(json!({
            "ph": "X", "name": name, "cat": slice.kind.label(), "pid": slice.process, "tid": slice.thread,
            "ts": us(slice.begin), "dur": (slice.end - slice.begin) as f64 / 1e3, "args": args,
        }));
    }
    for event in timeline.events.iter().filter(|e| e.record.phase == Phase::Instant) {
        let name = format!("{} {}", event.record.kind.label(), timeline.name_of(event));
        events.push(json!({
            "ph": "i", "s": "t", "name": name.trim_end(), "cat": event.record.kind.label(), "pid": event.process,
            "tid": event.thread, "ts": us(event.t), "args": {"ts": event.record.ts, "bytes": event.record.bytes},
        }));
    }
    let mut puts: HashMap<(&str, u64), &Slice> = HashMap::new();
    for slice in slices.iter().filter(|s| s.kind == Kind::Put) {
        let first = puts.entry((slice.name.as_str(), slice.ts)).or_insert(slice);
        if slice.begin < first.begin {
            *first = slice;
        }
    }
    let mut id = 0u64;
    for get in slices.iter().filter(|s| s.kind == Kind::Get && !s.unfinished && s.ts != NO_ITEM) {
        if let Some(put) = puts.get(&(get.name.as_str(), get.ts)) {
            id += 1;
            events.push(json!({
                "ph": "s", "id": id, "name": "item", "cat": "item", "pid": put.process, "tid": put.thread, "ts": us(put.begin),
            }));
            events.push(json!({
                "ph": "f", "bp": "e", "id": id, "name": "item", "cat": "item", "pid": get.process, "tid": get.thread,
                "ts": us(get.end),
            }));
        }
    }
    json!({"traceEvents": events, "displayTimeUnit": "ns"})
}

/// Every span of every thread: a begin matched with the innermost open begin of its kind; the
/// name and the put's timestamp from the begin, a get's item (timestamp, size) from its end.
fn slices(timeline: &Timeline) -> Vec<Slice> {
    let mut open: HashMap<(usize, usize), Vec<(Event, &str)>> = HashMap::new();
    let mut last: HashMap<(usize, usize), i128> = HashMap::new();
    let mut slices = Vec::new();
    for event in &timeline.events {
        let track = (event.process, event.thread);
        last.insert(track, event.t);
        let stack = open.entry(track).or_default();
        match event.record.phase {
            Phase::Begin => stack.push((*event, timeline.name_of(event))),
            Phase::End => {
                let Some(at) = stack.iter().rposition(|(begin, _)| begin.record.kind == event.record.kind) else {
                    continue;
                };
                let (begin, name) = stack.remove(at);
                let from_end = event.record.kind == Kind::Get;
                let item = if from_end { event.record } else { begin.record };
                slices.push(Slice {
                    process: event.process,
                    thread: event.thread,
                    kind: event.record.kind,
                    name: name.to_owned(),
                    begin: begin.t,
                    end: event.t,
                    ts: item.ts,
                    bytes: item.bytes,
                    unfinished: false,
                });
            }
            Phase::Instant => {}
        }
    }
    for (track, stack) in open {
        for (begin, name) in stack {
            slices.push(Slice {
                process: track.0,
                thread: track.1,
                kind: begin.record.kind,
                name: name.to_owned(),
                begin: begin.t,
                end: last[&track],
                ts: begin.record.ts,
                bytes: begin.record.bytes,
                unfinished: true,
            });
        }
    }
    slices.sort_by_key(|s| (s.process, s.thread, s.begin, std::cmp::Reverse(s.end)));
    slices
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ClockMap;
    use crate::merge::{ProcessLog, ThreadLog};
    use crate::record::Record;

    fn record(t: u64, kind: Kind, phase: Phase, ts: u64) -> Record {
        Record { t, kind, phase, name: 1, ts, bytes: 8 }
    }

    fn log(pid: u32, records: Vec<Record>) -> ProcessLog {
        ProcessLog {
            host: "h".into(),
            pid,
            name: format!("p{pid}"),
            names: vec![String::new(), "frames".into()],
            threads: vec![ThreadLog { tid: 7, name: "task".into(), records }],
            clock: ClockMap::IDENTITY,
            exchanges: Vec::new(),
        }
    }

    /// A put in one process, two gets of its item in two others, and a get of another item: two
    /// flows, each from inside the put's slice to inside a get's slice; a span left open is
    /// marked unfinished.
    #[test]
    fn flows_join_each_put_to_the_gets_of_its_item() {
        use Kind::*;
        use Phase::*;
        let producer = log(1, vec![record(1_000, Put, Begin, 41), record(3_000, Put, End, 41)]);
        let reader =
            log(2, vec![record(500, Get, Begin, 0), record(4_000, Get, End, 41), record(5_000, Get, Begin, 0)]);
        let other = log(
            3,
            vec![
                record(2_000, Get, Begin, 0),
                record(6_000, Get, End, 41),
                record(7_000, Get, Begin, 0),
                record(8_000, Get, End, 42),
            ],
        );
        let trace = export(&Timeline::merge(vec![producer, reader, other]));
        let events = trace["traceEvents"].as_array().unwrap();
        let of = |ph: &str| events.iter().filter(|e| e["ph"] == ph).collect::<Vec<_>>();
        let (starts, ends, slices) = (of("s"), of("f"), of("X"));
        assert_eq!((starts.len(), ends.len()), (2, 2), "{trace:#}");
        for flow_end in starts.iter().chain(&ends) {
            let inside = slices.iter().any(|s| {
                let (ts, from, dur) =
                    (flow_end["ts"].as_f64().unwrap(), s["ts"].as_f64().unwrap(), s["dur"].as_f64().unwrap());
                s["pid"] == flow_end["pid"] && s["tid"] == flow_end["tid"] && from <= ts && ts <= from + dur
            });
            assert!(inside, "{flow_end} lies in a slice of its track");
        }
        let ids = |list: &[&Value]| list.iter().map(|e| e["id"].as_u64().unwrap()).collect::<Vec<_>>();
        assert_eq!(ids(&starts), ids(&ends), "every flow has both ends");
        assert!(slices.iter().any(|s| s["args"]["unfinished"] == true), "the open get is unfinished");
        let text = serde_json::to_string(&trace).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), trace, "it is JSON");
    }
}
