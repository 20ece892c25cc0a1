//! The event log's writer (`stampede::trace`) end to end, in its own test process (tracing is
//! per process): a producer and a consumer thread log their puts, gets, waits, consumes and
//! spans; the file reads back whole, its flows join every put to its get, and each thread's
//! breakdown adds up. A process that aborts keeps every record it flushed.

use std::path::Path;
use std::time::Duration;

use stampede::{Limits, Runtime, INFINITY, OLDEST_UNSEEN};
use stampede_trace::breakdown::Breakdown;
use stampede_trace::file;
use stampede_trace::merge::Timeline;
use stampede_trace::perfetto;
use stampede_trace::record::{Kind, Phase};

/// Set in the child process of the crash test: the directory it logs into.
const CRASH_CHILD: &str = "STAMPEDE_TEST_TRACE_CRASH_CHILD";

/// Records the crash test's child flushes before it aborts.
const FLUSHED: usize = 3 * stampede::trace::RECORDS_PER_BUFFER + 17;

fn only_log(dir: &Path) -> stampede_trace::merge::ProcessLog {
    let files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    file::read(&std::fs::read(&files[0]).unwrap()).unwrap()
}

#[test]
fn a_traced_pipeline_reads_back_with_its_flows_and_breakdowns() {
    if let Some(dir) = std::env::var_os(CRASH_CHILD) {
        return crash_child(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    stampede::trace::enable(dir.path()).unwrap();
    let rt = Runtime::new();
    let frames = rt.create_channel("camera/frames", Limits::items(8)).unwrap();
    let count = 2_000u64;
    let consumer = {
        let input = rt.task(INFINITY).unwrap().attach_input(&frames).unwrap();
        std::thread::Builder::new()
            .name("tracker".into())
            .spawn(move || {
                for _ in 0..count {
                    let item = input.get(OLDEST_UNSEEN, Some(Duration::from_secs(20))).unwrap();
                    let _track = stampede::trace::user_span("track");
                    input.consume(item.ts).unwrap();
                }
                stampede::trace::flush();
            })
            .unwrap()
    };
    let producer = {
        let task = rt.task(0).unwrap();
        let output = task.attach_output(&frames).unwrap();
        std::thread::Builder::new()
            .name("digitizer".into())
            .spawn(move || {
                for ts in 0..count as i64 {
                    output.put(ts, vec![7u8; 1000]).unwrap();
                    task.set_virtual_time(ts + 1).unwrap();
                }
                stampede::trace::flush();
            })
            .unwrap()
    };
    producer.join().unwrap();
    consumer.join().unwrap();
    rt.close();
    assert_eq!(stampede::trace::dropped(), 0);

    let timeline = Timeline::merge(vec![only_log(dir.path())]);
    let process = &timeline.processes[0];
    let thread = |name: &str| process.threads.iter().position(|t| t.name == name).unwrap_or_else(|| panic!("{name}"));
    let (digitizer, tracker) = (thread("digitizer"), thread("tracker"));
    let count_of = |th: usize, kind: Kind, phase: Phase| {
        timeline.thread_events(0, th).filter(|e| e.record.kind == kind && e.record.phase == phase).count() as u64
    };
    assert_eq!(count_of(digitizer, Kind::Put, Phase::Begin), count);
    assert_eq!(count_of(digitizer, Kind::Put, Phase::End), count);
    assert_eq!(count_of(tracker, Kind::Get, Phase::End), count);
    assert_eq!(count_of(tracker, Kind::Consume, Phase::End), count);
    assert_eq!(count_of(tracker, Kind::User, Phase::Begin), count);
    let names: Vec<&str> = timeline
        .thread_events(0, tracker)
        .filter(|e| e.record.kind == Kind::User)
        .map(|e| timeline.name_of(e))
        .collect();
    assert!(names.iter().all(|n| *n == "track"), "user spans are named");
    let reclaims = timeline.events.iter().filter(|e| e.record.kind == Kind::Reclaim).count() as u64;
    assert!(reclaims > 0 && reclaims <= count, "reclaims: {reclaims}");

    let trace = perfetto::export(&timeline);
    let flows = trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "f").count() as u64;
    assert_eq!(flows, count, "one flow from each put to the get of its item");

    for (th, t) in process.threads.iter().enumerate() {
        let records: Vec<_> = timeline.thread_events(0, th).map(|e| e.record).collect();
        let b = Breakdown::of_thread(&records);
        assert_eq!(b.sum(), b.wall, "{}", t.name);
        assert_eq!(b.unbalanced, 0, "{}: every span ends", t.name);
    }
}

/// The child: logs, flushes [`FLUSHED`] records, logs a few more (left in its buffer) and aborts.
fn crash_child(dir: &Path) {
    stampede::trace::enable(dir).unwrap();
    for i in 0..FLUSHED {
        stampede::trace::event(Kind::Claim, Phase::Instant, 0, i as u64, 0);
    }
    stampede::trace::flush();
    for i in 0..100 {
        stampede::trace::event(Kind::Claim, Phase::Instant, 0, i, 0);
    }
    std::process::abort();
}

#[test]
fn a_process_that_aborts_keeps_every_record_it_flushed() {
    if std::env::var_os(CRASH_CHILD).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_traced_pipeline_reads_back_with_its_flows_and_breakdowns", "--nocapture"])
        .env(CRASH_CHILD, dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child aborts");
    let log = only_log(dir.path());
    let records: usize = log.threads.iter().map(|t| t.records.len()).sum();
    assert_eq!(records, FLUSHED, "every flushed record, none of the ones left in the buffer");
    let ts: Vec<u64> = log.threads.iter().flat_map(|t| t.records.iter().map(|r| r.ts)).collect();
    assert_eq!(ts, (0..FLUSHED as u64).collect::<Vec<_>>(), "in order");
}
