//! The disk tier (docs/RECORDING.md, "The disk tier: history beyond memory"): history beyond
//! memory, striped in extents over several directories, read back transparently; GC unchanged; a
//! crash loses nothing synced; a full disk or a missing directory is a clear error that loses
//! nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;

mod support;
use stampede::disk::{decode_records, HEADER_BYTES};
use stampede::{
    Channel, ChannelOptions, Codec, DiskTier, Error, Limits, Payload, PutOptions, Runtime, Timestamp, OLDEST_UNSEEN,
};

const NOW: Option<Duration> = Some(Duration::ZERO);
const EXTENT: u64 = DiskTier::EXTENT_BYTES_MIN;

/// Distinct bytes for the item at `ts`, `len` long.
fn frame(ts: Timestamp, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(31).wrapping_add(ts as u64 * 7919) as u8).collect()
}

fn tier(dirs: &[&Path], memory_items: usize) -> DiskTier {
    DiskTier { dirs: dirs.iter().map(|d| d.to_path_buf()).collect(), extent_bytes: EXTENT, memory_items }
}

fn tiered(rt: &Runtime, name: &str, tier: DiskTier) -> stampede::Result<Channel> {
    rt.create_channel(name, ChannelOptions { disk: Some(tier), ..ChannelOptions::default() })
}

/// The extent files under `dir`, recursively.
fn extents(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(extents(&path));
        } else if path.extension().is_some_and(|e| e == "extent") {
            found.push(path);
        }
    }
    found
}

/// Items beyond the newest `memory_items` live on disk, striped over every directory, and every
/// get — exact, wildcard, range — returns the same bytes and codec as were put.
#[test]
fn history_beyond_memory_reads_back_from_every_stripe() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let paths: Vec<&Path> = dirs.iter().map(|d| d.path()).collect();
    let rt = Runtime::new();
    let ch = tiered(&rt, "camera/left", tier(&paths, 4)).unwrap();
    let producer = rt.task(0).unwrap();
    let reader = producer.attach_input(&ch).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let codec = |ts: Timestamp| if ts % 2 == 0 { Codec::Raw } else { Codec::from_name("app/frame") };
    for ts in 0..60 {
        out.put(ts, Payload { data: frame(ts, 10_000 + ts as usize).into(), codec: codec(ts) }).unwrap();
    }
    let disk = ch.disk_stats().unwrap();
    assert_eq!((disk.items, disk.written), (56, 56), "all but the newest 4 are on disk: {disk:?}");
    assert_eq!(disk.bytes, (0..56).map(|ts| 10_000 + ts).sum::<usize>());
    for dir in &paths {
        let files = extents(dir);
        assert!(!files.is_empty(), "{} holds no extent: not striped", dir.display());
        assert!(files.iter().all(|f| f.parent().unwrap().ends_with("camera%left")), "{files:?}");
    }
    assert_eq!(ch.stats().live_items, 60);
    for ts in (0..60).rev().step_by(7) {
        let item = reader.get(ts, NOW).unwrap();
        assert_eq!(item.data().as_ref(), frame(ts, 10_000 + ts as usize), "ts={ts}");
        assert_eq!(item.codec(), &codec(ts));
    }
    let range = reader.get_range(10, 49).unwrap();
    assert_eq!(range.iter().map(|i| i.ts).collect::<Vec<_>>(), (10..=49).collect::<Vec<_>>());
    assert!(range.iter().all(|i| i.data().as_ref() == frame(i.ts, 10_000 + i.ts as usize)));
    assert_eq!(reader.get(OLDEST_UNSEEN, NOW).unwrap().data().as_ref(), frame(0, 10_000));
}

/// GC is unchanged on disk: ts_min reclaims items on disk (GC handlers see their bytes), an
/// extent is deleted once everything in it is reclaimed, and destroying the channel leaves no
/// extent behind.
#[test]
fn ts_min_reclaims_on_disk_and_deletes_extents() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new();
    let ch = tiered(&rt, "history", tier(&[dir.path()], 2)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    ch.on_reclaim(move |item| log.lock().unwrap().push((item.ts, item.data().clone()))).unwrap();
    let producer = rt.task(0).unwrap();
    let reader = rt.task(0).unwrap();
    let input = reader.attach_input(&ch).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    for ts in 0..40 {
        out.put(ts, frame(ts, 20_000)).unwrap();
    }
    producer.set_virtual_time(40).unwrap();
    let before = ch.disk_stats().unwrap();
    assert!(before.extents >= 10, "20 KB items in 64 KiB extents: {before:?}");
    input.consume_until(29).unwrap();
    reader.set_virtual_time(stampede::INFINITY).unwrap();
    let after = ch.disk_stats().unwrap();
    assert_eq!(after.items, 8, "30..37 are on disk, 38..39 in memory: {after:?}");
    assert!(after.extents <= 4, "extents of reclaimed items are deleted: {after:?}");
    assert_eq!(extents(dir.path()).len(), after.extents);
    assert!(matches!(input.get(5, NOW), Err(Error::Reclaimed { .. })));
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.iter().map(|(ts, _)| *ts).collect::<Vec<_>>(), (0..30).collect::<Vec<_>>());
        assert!(seen.iter().all(|(ts, data)| data.as_ref() == frame(*ts, 20_000)));
    }
    ch.destroy().unwrap();
    assert!(extents(dir.path()).is_empty(), "destroying the channel reclaims its extents");
    // Its directories are free again: the name can be created with the same tier.
    tiered(&rt, "history", tier(&[dir.path()], 2)).unwrap();
}

/// Reference counts reclaim items on disk early, as in memory.
#[test]
fn refcounts_reclaim_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new();
    let ch = tiered(&rt, "counted", tier(&[dir.path()], 1)).unwrap();
    let task = rt.task(0).unwrap();
    let input = task.attach_input(&ch).unwrap();
    let out = task.attach_output(&ch).unwrap();
    for ts in 0..10 {
        out.put_with(ts, frame(ts, 30_000), PutOptions { refcount: Some(1), timeout: None }).unwrap();
    }
    assert_eq!(ch.disk_stats().unwrap().items, 9);
    for ts in 0..9 {
        assert_eq!(input.get(ts, NOW).unwrap().data().as_ref(), frame(ts, 30_000));
        input.consume(ts).unwrap();
    }
    assert_eq!(ch.disk_stats().unwrap().items, 0);
    assert!(extents(dir.path()).len() <= 1, "only the extent being written may stay");
    assert!(matches!(input.get(3, NOW), Err(Error::Reclaimed { .. })));
}

/// Environment variable telling the test binary it runs as the crashing child: the directory.
const CRASH_CHILD: &str = "STAMPEDE_DISK_CRASH_CHILD";
/// How many items the child's reader consumes (each put with reference count 1) before it aborts.
const CRASH_CONSUMED: &str = "STAMPEDE_DISK_CRASH_CONSUMED";
/// Items the child puts; all but the newest `memory_items` (4) are on disk when it aborts.
const CHILD_PUTS: i64 = 50;

/// The child of the crash tests: puts [`CHILD_PUTS`] items at `0, 10, 20, …` (a reader consumes
/// the first [`CRASH_CONSUMED`] of them, each put with reference count 1, so they are reclaimed),
/// then aborts without any cleanup.
#[test]
#[ignore = "run only as the child process of the crash tests"]
fn crash_child() {
    let Ok(dir) = std::env::var(CRASH_CHILD) else { return };
    let consumed: i64 = std::env::var(CRASH_CONSUMED).map_or(0, |n| n.parse().unwrap());
    let rt = Runtime::new();
    let ch = tiered(&rt, "crashy/frames", tier(&[Path::new(&dir)], 4)).unwrap();
    let task = rt.task(0).unwrap();
    let input = task.attach_input(&ch).unwrap();
    let out = task.attach_output(&ch).unwrap();
    let refcount = (consumed > 0).then_some(1);
    for ts in 0..CHILD_PUTS {
        let payload = Payload { data: frame(ts, 5_000).into(), codec: Codec::from_name("app/frame") };
        out.put_with(ts * 10, payload, PutOptions { refcount, timeout: None }).unwrap();
    }
    for ts in 0..consumed {
        input.get(ts * 10, NOW).unwrap();
        input.consume(ts * 10).unwrap();
    }
    // One more put writes the next batch, which syncs the dead marks of the consumed items.
    out.put(CHILD_PUTS * 10, frame(CHILD_PUTS, 5_000)).unwrap();
    std::process::abort();
}

/// Environment variable of [`crash_child_sizes`]: `<first ts>:<size>,<size>,...`.
const CRASH_SIZES: &str = "STAMPEDE_DISK_CRASH_SIZES";

/// Another child: puts one item per size of [`CRASH_SIZES`] at consecutive timestamps on a tier
/// keeping one item in memory, then aborts.
#[test]
#[ignore = "run only as the child process of the crash tests"]
fn crash_child_sizes() {
    let (Ok(dir), Ok(plan)) = (std::env::var(CRASH_CHILD), std::env::var(CRASH_SIZES)) else { return };
    let (first, sizes) = plan.split_once(':').unwrap();
    let rt = Runtime::new();
    let ch = tiered(&rt, "crashy/frames", tier(&[Path::new(&dir)], 1)).unwrap();
    let out = rt.task(0).unwrap().attach_output(&ch).unwrap();
    for (i, size) in sizes.split(',').enumerate() {
        let ts = first.parse::<i64>().unwrap() + i as i64;
        out.put(ts, frame(ts, size.parse().unwrap())).unwrap();
    }
    std::process::abort();
}

/// Runs [`crash_child`] on `dir` in a child process, under the watchdog.
fn crash_a_child(test: &'static str, dir: &Path, consumed: i64) {
    run_child(test, "crash_child", &[(CRASH_CHILD, dir.as_os_str()), (CRASH_CONSUMED, consumed.to_string().as_ref())]);
}

/// Runs the child test `child` with `env`, under the watchdog; it must abort.
fn run_child(test: &'static str, child: &str, env: &[(&str, &std::ffi::OsStr)]) {
    let status = support::with_watchdog(test, || {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args(["--exact", child, "--ignored", "--nocapture"]);
        env.iter().for_each(|(key, value)| {
            command.env(key, value);
        });
        command.status().unwrap()
    });
    assert!(!status.success(), "the child aborts");
}

/// Runs [`crash_child_sizes`] on `dir`.
fn crash_sizes(test: &'static str, dir: &Path, plan: &str) {
    run_child(test, "crash_child_sizes", &[(CRASH_CHILD, dir.as_os_str()), (CRASH_SIZES, plan.as_ref())]);
}

/// Recovered history has no holes: a byte bound keeps the newest items that fit, and drops every
/// older one from the first that does not fit (a smaller, older item would have fitted).
#[test]
fn a_byte_bound_keeps_the_newest_without_holes() {
    let dir = tempfile::tempdir().unwrap();
    crash_sizes("a_byte_bound_keeps_the_newest_without_holes", dir.path(), "0:40,50,60,1");
    let rt = Runtime::new();
    let _reader = rt.task(0).unwrap();
    let options = ChannelOptions {
        limits: Limits::unbounded().with_bytes(100),
        disk: Some(tier(&[dir.path()], 1)),
        ..ChannelOptions::default()
    };
    let ch = rt.create_channel("crashy/frames", options).unwrap();
    assert_eq!(ch.timestamps(), vec![2], "60 bytes fit, 50 more do not, and nothing older is kept");
}

/// Extents of the same number in two directories (a disk used alone, then combined with
/// another) are both recovered and each freed on its own.
#[test]
fn extents_of_one_number_in_two_directories_stay_apart() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    crash_sizes("extents_of_one_number_in_two_directories_stay_apart", a.path(), "0:100,100,100,1");
    crash_sizes("extents_of_one_number_in_two_directories_stay_apart", b.path(), "100:100,100,100,1");
    let rt = Runtime::new();
    let reader = rt.task(0).unwrap();
    let ch = tiered(&rt, "crashy/frames", tier(&[a.path(), b.path()], 1)).unwrap();
    assert_eq!(ch.timestamps(), vec![0, 1, 2, 100, 101, 102]);
    assert_eq!(ch.disk_stats().unwrap().extents, 2);
    let input = reader.attach_input(&ch).unwrap();
    input.consume_until(2).unwrap();
    let producer = rt.task(0).unwrap();
    reader.set_virtual_time(stampede::INFINITY).unwrap();
    producer.set_virtual_time(50).unwrap();
    assert_eq!(ch.timestamps(), vec![100, 101, 102], "a's items reclaimed");
    assert_eq!(ch.disk_stats().unwrap().extents, 1);
    assert!(extents(a.path()).is_empty() && extents(b.path()).len() == 1, "a's extent went, b's stays");
    for ts in 100..103 {
        assert_eq!(input.get(ts, NOW).unwrap().data().as_ref(), frame(ts, 100));
    }
    ch.destroy().unwrap();
}

/// A recovered item the channel would refuse (a codec other than the declared one) fails the
/// creation and destroys nothing: created as it was, the channel gets its history back. Under
/// current-readers retention nothing comes back (no reader holds it).
#[test]
fn recovery_refuses_to_destroy_history_on_a_mistake() {
    let dir = tempfile::tempdir().unwrap();
    crash_a_child("recovery_refuses_to_destroy_history_on_a_mistake", dir.path(), 0);
    let rt = Runtime::new();
    let _reader = rt.task(0).unwrap();
    let typo = ChannelOptions {
        codec: Some(Codec::from_name("app/frmae")),
        disk: Some(tier(&[dir.path()], 4)),
        ..ChannelOptions::default()
    };
    let refused = rt.create_channel("crashy/frames", typo);
    assert!(matches!(&refused, Err(Error::InvalidArgument { .. })), "{refused:?}");
    assert!(rt.names("").unwrap().is_empty());
    let right = ChannelOptions { codec: Some(Codec::from_name("app/frame")), ..ChannelOptions::default() };
    let options = ChannelOptions { disk: Some(tier(&[dir.path()], 4)), ..right };
    let ch = rt.create_channel("crashy/frames", options).unwrap();
    assert_eq!(ch.timestamps().len(), 47);
    let current = Runtime::new();
    drop(ch);
    rt.close();
    let other = tempfile::tempdir().unwrap();
    crash_a_child("recovery_refuses_to_destroy_history_on_a_mistake", other.path(), 0);
    let _holder = current.task(0).unwrap();
    let options = ChannelOptions {
        retention: stampede::Retention::CurrentReaders,
        disk: Some(tier(&[other.path()], 4)),
        ..ChannelOptions::default()
    };
    assert!(current.create_channel("crashy/frames", options).unwrap().timestamps().is_empty());
}

/// Destroying a channel while other threads reclaim items on disk (reference counts) never trips
/// the tier, and the name can be created again on the same directories at once.
#[test]
fn destroy_races_reclamation() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..200 {
        let rt = Runtime::new();
        let ch = tiered(&rt, "race", tier(&[dir.path()], 1)).unwrap();
        let task = rt.task(0).unwrap();
        let input = task.attach_input(&ch).unwrap();
        let out = task.attach_output(&ch).unwrap();
        for ts in 0..8 {
            out.put_with(ts, frame(ts, 200), PutOptions { refcount: Some(1), timeout: None }).unwrap();
        }
        let consumer = std::thread::spawn(move || {
            for ts in 0..8 {
                let _ = input.consume(ts);
            }
        });
        if round % 2 == 0 {
            std::thread::yield_now();
        }
        ch.destroy().unwrap();
        consumer.join().unwrap();
        tiered(&rt, "race", tier(&[dir.path()], 1)).unwrap().destroy().unwrap();
    }
    assert!(extents(dir.path()).is_empty());
}

/// A crash loses nothing acknowledged to the disk: after a process aborts, creating the channel
/// again with the same directories restores every item that had moved to disk, byte for byte.
/// Restored items count as put: a task created before the channel holds ts_min below them, so a
/// reader attached then reads them all; the newest `memory_items` were in memory only.
#[test]
fn a_crash_loses_nothing_synced() {
    let dir = tempfile::tempdir().unwrap();
    crash_a_child("a_crash_loses_nothing_synced", dir.path(), 0);
    let rt = Runtime::new();
    let reader = rt.task(0).unwrap();
    let ch = tiered(&rt, "crashy/frames", tier(&[dir.path()], 4)).unwrap();
    let disk = ch.disk_stats().unwrap();
    assert_eq!((disk.recovered, disk.items, disk.written), (47, 47, 0), "{disk:?}");
    assert_eq!(ch.timestamps(), (0..47).map(|ts| ts * 10).collect::<Vec<_>>());
    assert_eq!(ch.stats().ts_min, 0, "the reader task holds ts_min");
    let input = reader.attach_input(&ch).unwrap();
    for ts in 0..47 {
        let item = input.get(OLDEST_UNSEEN, NOW).unwrap();
        assert_eq!((item.ts, item.codec()), (ts * 10, &Codec::from_name("app/frame")));
        assert_eq!(item.data().as_ref(), frame(ts, 5_000));
    }
    // A runtime using the same directories for the same channel is refused while this one does.
    let other = Runtime::new();
    let refused = tiered(&other, "crashy/frames", tier(&[dir.path()], 4));
    assert!(matches!(&refused, Err(Error::Storage { .. })), "{refused:?}");
    assert!(refused.unwrap_err().to_string().contains("another runtime"));
}

/// Reclaimed stays reclaimed: items consumed (reference count reached) before the crash do not
/// come back, though their extents also held live items.
#[test]
fn reclaimed_items_do_not_come_back() {
    let dir = tempfile::tempdir().unwrap();
    crash_a_child("reclaimed_items_do_not_come_back", dir.path(), 20);
    let rt = Runtime::new();
    let _reader = rt.task(0).unwrap();
    let ch = tiered(&rt, "crashy/frames", tier(&[dir.path()], 4)).unwrap();
    assert_eq!(ch.timestamps(), (20..47).map(|ts| ts * 10).collect::<Vec<_>>());
}

/// Restored items are admitted as puts are: within the channel's bounds (the newest first), at
/// or above ts_min; without a task holding ts_min they are reclaimed at once; a bounded channel
/// they fill drains once readers let them go.
#[test]
fn restored_items_obey_bounds_and_ts_min() {
    let dir = tempfile::tempdir().unwrap();
    crash_a_child("restored_items_obey_bounds_and_ts_min", dir.path(), 0);
    let bounded =
        ChannelOptions { limits: Limits::items(5), disk: Some(tier(&[dir.path()], 4)), ..ChannelOptions::default() };
    {
        let rt = Runtime::new();
        let task = rt.task(0).unwrap();
        let ch = rt.create_channel("crashy/frames", bounded.clone()).unwrap();
        assert_eq!(ch.timestamps(), vec![420, 430, 440, 450, 460], "the newest 5 of 47");
        assert_eq!(ch.disk_stats().unwrap().items, 5);
        let input = task.attach_input(&ch).unwrap();
        let out = task.attach_output(&ch).unwrap();
        let full = out.put_with(470, frame(47, 10), PutOptions { refcount: None, timeout: NOW });
        assert!(matches!(full, Err(Error::Full { .. })), "{full:?}");
        input.consume_until(460).unwrap();
        task.set_virtual_time(470).unwrap();
        out.put(470, frame(47, 10)).unwrap();
        assert_eq!(ch.timestamps(), vec![470], "the restored items drained");
        // Dropped without close: like a crash, the extents stay.
    }
    {
        let rt = Runtime::new();
        let ch = rt.create_channel("crashy/frames", bounded.clone()).unwrap();
        assert!(ch.timestamps().is_empty(), "no task held ts_min: reclaimed at once");
        assert_eq!(ch.disk_stats().unwrap().items, 0);
    }
    let late = tempfile::tempdir().unwrap();
    crash_a_child("restored_items_obey_bounds_and_ts_min", late.path(), 0);
    let rt = Runtime::new();
    let elsewhere = rt.create_channel("elsewhere", Limits::unbounded()).unwrap();
    rt.task(0).unwrap().attach_output(&elsewhere).unwrap().put(999, &b"x"[..]).unwrap();
    let _holder = rt.task(1000).unwrap();
    assert_eq!(rt.ts_min(), 1000);
    let ch = tiered(&rt, "crashy/frames", tier(&[late.path()], 4)).unwrap();
    assert!(ch.timestamps().is_empty(), "everything recovered is below ts_min");
    assert!(extents(late.path()).is_empty(), "and its extents are deleted");
}

/// A corrupt record ends recovery of its extent there: the records before it come back, none
/// after it in that extent, other extents unaffected, and nothing panics.
#[test]
fn recovery_stops_at_a_corrupt_record() {
    let dir = tempfile::tempdir().unwrap();
    crash_a_child("recovery_stops_at_a_corrupt_record", dir.path(), 0);
    let mut files = extents(dir.path());
    files.sort();
    let first = std::fs::read(&files[0]).unwrap();
    let records = decode_records(&first);
    assert!(records.len() > 5, "{} records", records.len());
    let mut damaged = first.clone();
    damaged[records[3].payload.start + 100] ^= 0xff;
    std::fs::write(&files[0], &damaged).unwrap();
    let rt = Runtime::new();
    let _reader = rt.task(0).unwrap();
    let ch = tiered(&rt, "crashy/frames", tier(&[dir.path()], 4)).unwrap();
    let restored = ch.timestamps();
    assert_eq!(&restored[..3], &[0, 10, 20]);
    for record in &records[3..] {
        assert!(!restored.contains(&record.ts), "ts={} follows the damaged record", record.ts);
    }
    let later = decode_records(&std::fs::read(&files[1]).unwrap());
    assert!(later.iter().all(|record| restored.contains(&record.ts)), "other extents are unaffected");
}

/// The bytes of a real extent: 12 records of various sizes and codecs, then preallocated zeros.
fn real_extent() -> &'static [u8] {
    static EXTENT_BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    EXTENT_BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new();
        let ch = tiered(&rt, "real", tier(&[dir.path()], 1)).unwrap();
        let out = rt.task(0).unwrap().attach_output(&ch).unwrap();
        for ts in 0..13 {
            let codec = if ts % 3 == 0 { Codec::Utf8 } else { Codec::from_name("x") };
            let data = vec![b'a' + ts as u8; 100 + 300 * ts as usize];
            out.put(ts * 3, Payload { data: data.into(), codec }).unwrap();
        }
        let bytes = std::fs::read(&extents(dir.path())[0]).unwrap();
        assert_eq!(decode_records(&bytes).len(), 12);
        bytes
    })
}

proptest! {
    /// A real extent with bytes flipped and cut anywhere decodes without a panic to some of its
    /// records, in order (a damaged record and everything after it are dropped, a record whose
    /// state byte reads dead is skipped; none is ever misread), each inside the extent.
    #[test]
    fn damaged_extents_decode_to_a_prefix(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 0..4),
        cut in any::<prop::sample::Index>(),
        cut_it in any::<bool>(),
    ) {
        let original = real_extent();
        let mut bytes = original.to_vec();
        for (at, mask) in &flips {
            bytes[at.index(original.len())] ^= mask;
        }
        if cut_it {
            bytes.truncate(cut.index(original.len()));
        }
        let good = decode_records(original);
        let mut expected = good.iter();
        for record in decode_records(&bytes) {
            // A flipped state byte may mark a record dead: skipped, the rest still read.
            prop_assert!(expected.any(|e| *e == record), "{:?} is not an original record, in order", record);
            prop_assert!(record.payload.end <= bytes.len());
            prop_assert_eq!(&bytes[record.payload.clone()], &original[record.payload.clone()]);
        }
    }

    /// Any bytes at all decode without a panic, to records inside them.
    #[test]
    fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4096), magic in any::<bool>()) {
        let mut bytes = bytes;
        if magic && bytes.len() >= HEADER_BYTES {
            bytes[..4].copy_from_slice(b"STX1");
        }
        for record in decode_records(&bytes) {
            prop_assert!(record.payload.end <= bytes.len());
        }
    }
}

/// Bad settings and a missing directory are clear errors, before anything is created.
#[test]
fn bad_settings_and_missing_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new();
    let cases = [
        DiskTier { dirs: vec![], ..tier(&[dir.path()], 4) },
        DiskTier { memory_items: 0, ..tier(&[dir.path()], 4) },
        DiskTier { extent_bytes: 1, ..tier(&[dir.path()], 4) },
    ];
    for bad in cases {
        let refused = tiered(&rt, "bad", bad.clone());
        assert!(matches!(refused, Err(Error::InvalidArgument { .. })), "{bad:?}: {refused:?}");
    }
    let missing = dir.path().join("not-there");
    let refused = tiered(&rt, "bad", tier(&[dir.path(), &missing], 4)).unwrap_err();
    assert!(matches!(refused, Error::Storage { .. }), "{refused:?}");
    assert!(refused.to_string().contains("not-there"), "{refused}");
    assert!(rt.names("").unwrap().is_empty(), "nothing was created");
    tiered(&rt, "good", tier(&[dir.path()], 4)).unwrap();
    let again = tiered(&rt, "good", tier(&[dir.path()], 4));
    assert!(matches!(again, Err(Error::AlreadyExists { .. })), "{again:?}");
}

/// An extent the disk cannot hold is refused when it is opened: the put fails `Storage`, and
/// every item the channel held is still there, in memory; later puts that fit succeed.
#[test]
fn an_extent_the_disk_cannot_hold_refuses_the_put_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    if free_bytes(dir.path()) >= DiskTier::EXTENT_BYTES_MAX / 2 {
        eprintln!("skipped: this disk has room for a 1 TiB extent; the tmpfs test covers a full disk");
        return;
    }
    let rt = Runtime::new();
    let huge = DiskTier { extent_bytes: DiskTier::EXTENT_BYTES_MAX, ..tier(&[dir.path()], 2) };
    let ch = tiered(&rt, "huge", huge).unwrap();
    let task = rt.task(0).unwrap();
    let input = task.attach_input(&ch).unwrap();
    let out = task.attach_output(&ch).unwrap();
    out.put(0, frame(0, 100)).unwrap();
    out.put(1, frame(1, 100)).unwrap();
    let refused = out.put(2, frame(2, 100)).unwrap_err();
    assert!(matches!(refused, Error::Storage { .. }), "{refused:?}");
    assert!(refused.to_string().contains("allocate"), "{refused}");
    assert_eq!(ch.timestamps(), vec![0, 1], "the refused put stored nothing, the rest stays");
    assert_eq!(input.get(0, NOW).unwrap().data().as_ref(), frame(0, 100));
    assert!(extents(dir.path()).is_empty(), "the extent that could not be allocated is removed");
}

/// Bytes free for an unprivileged file on `dir`'s file system.
fn free_bytes(dir: &Path) -> u64 {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string and a zeroed statvfs for the call to fill in.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut stat) }, 0, "statvfs {}", dir.display());
    stat.f_bavail as u64 * stat.f_frsize as u64
}

/// A codec name longer than `CODEC_NAME_BYTES_MAX` is refused at the put (a record could not
/// hold it), and the channel goes on.
#[test]
fn a_long_codec_name_is_refused_at_the_put() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new();
    let ch = tiered(&rt, "codecs", tier(&[dir.path()], 1)).unwrap();
    let out = rt.task(0).unwrap().attach_output(&ch).unwrap();
    let long = Codec::from_name(&"c".repeat(stampede::CODEC_NAME_BYTES_MAX + 1));
    let refused = out.put(0, Payload { data: frame(0, 10).into(), codec: long });
    assert!(matches!(refused, Err(Error::InvalidArgument { .. })), "{refused:?}");
    let longest = Codec::from_name(&"c".repeat(stampede::CODEC_NAME_BYTES_MAX));
    for ts in 1..4 {
        out.put(ts, Payload { data: frame(ts, 10).into(), codec: longest.clone() }).unwrap();
    }
    assert_eq!(ch.disk_stats().unwrap().items, 2);
}

/// A full disk (a 1 MiB tmpfs, mounted by the test when it may): the put that needs a new extent
/// is refused with `Storage` naming the directory, nothing held is lost, and once reclamation
/// frees extents, puts succeed again. Skipped, saying why, where mounting is not allowed.
#[test]
fn a_full_disk_refuses_the_put_and_recovers_after_gc() {
    let dir = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "stampede-full-disk"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a small tmpfs here (needs root); the huge-extent test covers the error path");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(dir.path());
    let rt = Runtime::new();
    let ch = tiered(&rt, "full", tier(&[dir.path()], 1)).unwrap();
    let producer = rt.task(0).unwrap();
    let reader = rt.task(0).unwrap();
    let input = reader.attach_input(&ch).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let mut ts = 0;
    let refused = loop {
        match out.put(ts, frame(ts, 30_000)) {
            Ok(()) => ts += 1,
            Err(e) => break e,
        }
        assert!(ts < 100, "a 1 MiB disk must fill");
    };
    assert!(matches!(refused, Error::Storage { .. }), "{refused:?}");
    assert!(refused.to_string().contains("No space left"), "{refused}");
    assert_eq!(ch.timestamps(), (0..ts).collect::<Vec<_>>(), "nothing held was lost");
    for t in 0..ts {
        assert_eq!(input.get(t, NOW).unwrap().data().as_ref(), frame(t, 30_000));
    }
    input.consume_until(ts - 1).unwrap();
    reader.set_virtual_time(stampede::INFINITY).unwrap();
    producer.set_virtual_time(ts).unwrap();
    out.put(ts, frame(ts, 30_000)).unwrap();
    out.put(ts + 1, frame(ts + 1, 30_000)).unwrap();
    assert_eq!(input.get(ts, NOW).unwrap().data().as_ref(), frame(ts, 30_000));
}

/// Bounds count items on disk as well: a bounded channel with a tier still refuses past its
/// capacity.
#[test]
fn bounds_count_items_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new();
    let options =
        ChannelOptions { limits: Limits::items(5), disk: Some(tier(&[dir.path()], 1)), ..ChannelOptions::default() };
    let ch = rt.create_channel("bounded", options).unwrap();
    let task = rt.task(0).unwrap();
    let _input = task.attach_input(&ch).unwrap();
    let out = task.attach_output(&ch).unwrap();
    for ts in 0..5 {
        out.put(ts, frame(ts, 1000)).unwrap();
    }
    let full = out.put_with(5, frame(5, 1000), PutOptions { refcount: None, timeout: NOW });
    assert!(matches!(full, Err(Error::Full { .. })), "{full:?}");
    assert_eq!(ch.timestamps(), (0..5).collect::<Vec<_>>());
}
