//! Two synthetic processes on hosts whose clocks differ by a known offset and drift (the
//! consumer's records in ticks of a counter running at 2.5 per ns), written as log files, read
//! back, reconciled and merged (issue 13 item 5): every get comes after the put
//! of its item on the reference clock, each flow joins them, and every thread's breakdown adds
//! up to its wall time.

use stampede_trace::breakdown::Breakdown;
use stampede_trace::clock::{Exchange, Reading};
use stampede_trace::file::{self, Chunk};
use stampede_trace::merge::{self, Timeline};
use stampede_trace::perfetto;
use stampede_trace::record::{Kind, Phase, Record};

/// The consumer host's clock: 3.7 s behind the reference, gaining 40 ppm.
const OFFSET_NS: f64 = -3.7e9;
const DRIFT: f64 = 40e-6;

fn consumer_clock(reference: f64) -> u64 {
    ((reference + OFFSET_NS) * (1.0 + DRIFT)) as u64
}

/// The consumer's counter at `ns` of its host's monotonic clock.
fn ticks(ns: u64) -> u64 {
    ns * 5 / 2
}

fn record(t: u64, kind: Kind, phase: Phase, ts: u64) -> Record {
    Record { t, kind, phase, name: 1, ts, bytes: 230_400 }
}

/// Exchanges as the consumer would make them around `reference` (symmetric 30 µs delays).
fn exchange(reference: f64) -> Exchange {
    let (t0, t3) = (consumer_clock(reference - 30e3), consumer_clock(reference + 31e3));
    Exchange { t0, t1: reference as u64, t2: reference as u64 + 1_000, t3 }
}

#[test]
fn logs_from_two_hosts_reconcile_merge_and_break_down() {
    let base = 10e9;
    let frames = 200u64;
    let (mut puts, mut gets) = (Vec::new(), Vec::new());
    for i in 0..frames {
        // The producer puts frame i at base + i ms for 50 µs; the consumer waits, gets it 120 µs
        // after the put began, and spends 300 µs of its own code on it.
        let t = base + i as f64 * 1e6;
        puts.push(record(t as u64, Kind::Put, Phase::Begin, i));
        puts.push(record((t + 50e3) as u64, Kind::Put, Phase::End, i));
        gets.push(record(ticks(consumer_clock(t - 500e3)), Kind::Get, Phase::Begin, 0));
        gets.push(record(ticks(consumer_clock(t - 490e3)), Kind::Wait, Phase::Begin, 0));
        gets.push(record(ticks(consumer_clock(t + 110e3)), Kind::Wait, Phase::End, 0));
        gets.push(record(ticks(consumer_clock(t + 120e3)), Kind::Get, Phase::End, i));
        gets.push(record(ticks(consumer_clock(t + 120e3)), Kind::User, Phase::Begin, 0));
        gets.push(record(ticks(consumer_clock(t + 420e3)), Kind::User, Phase::End, 0));
    }
    let names = [Chunk::Name { index: 0, name: String::new() }, Chunk::Name { index: 1, name: "camera/frames".into() }];
    let mut producer = file::header("host-a", 1, "camera");
    for chunk in names.iter().cloned().chain([Chunk::Records { tid: 1, records: puts }]) {
        producer.extend(chunk.encode());
    }
    let mut consumer = file::header("host-b", 2, "tracker");
    let end = base + frames as f64 * 1e6;
    let chunks = names.iter().cloned().chain([
        Chunk::Records { tid: 5, records: gets },
        Chunk::Clock(Reading { ticks: ticks(consumer_clock(base - 2e9)), ns: consumer_clock(base - 2e9) }),
        Chunk::Clock(Reading { ticks: ticks(consumer_clock(end + 2e9)), ns: consumer_clock(end + 2e9) }),
        Chunk::Exchange { at_end: false, peer: "host-a".into(), exchange: exchange(base - 1e9) },
        Chunk::Exchange { at_end: true, peer: "host-a".into(), exchange: exchange(end + 1e9) },
    ]);
    for chunk in chunks {
        consumer.extend(chunk.encode());
    }
    let mut logs = vec![file::read(&producer).unwrap(), file::read(&consumer).unwrap()];
    assert!(merge::reconcile(&mut logs).hosts.is_empty());
    let timeline = Timeline::merge(logs);

    // Reconciled: each get ends 120 µs after its put began, within 1 µs.
    let times = |kind: Kind, phase: Phase| -> Vec<i128> {
        timeline.events.iter().filter(|e| e.record.kind == kind && e.record.phase == phase).map(|e| e.t).collect()
    };
    let (put_begins, get_ends) = (times(Kind::Put, Phase::Begin), times(Kind::Get, Phase::End));
    assert_eq!((put_begins.len(), get_ends.len()), (frames as usize, frames as usize));
    for (put, get) in put_begins.iter().zip(&get_ends) {
        assert!((get - put - 120_000).abs() <= 1_000, "put {put}, get {get}: {} ns apart", get - put);
    }

    let trace = perfetto::export(&timeline);
    let flows = trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "f").count();
    assert_eq!(flows, frames as usize, "one flow per frame, from its put to its get");

    for (p, process) in timeline.processes.iter().enumerate() {
        for (th, thread) in process.threads.iter().enumerate() {
            let records: Vec<Record> = timeline.thread_events(p, th).map(|e| e.record).collect();
            let b = Breakdown::of_thread(&records);
            assert_eq!(b.sum(), b.wall, "{} / {}", process.name, thread.name);
            if process.name == "tracker" {
                // Per frame: 10 µs runtime + 600 µs wait + 10 µs runtime + 300 µs own code, then
                // 80 µs outside any span until the next get (own code too).
                let share = |part: u64| part as f64 / b.wall as f64;
                assert!((share(b.blocking) - 0.6).abs() < 0.01, "{b:?}");
                assert!((share(b.application) - 0.38).abs() < 0.01, "{b:?}");
            }
        }
    }
}
