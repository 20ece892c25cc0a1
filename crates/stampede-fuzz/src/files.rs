//! What files and payloads feed: a `.npy` header (any putter's payload with codec `npy`), the disk
//! tier's extent files, trace logs (`stampede trace` merges several), MCAP recordings and ROS 2
//! bags (`stampede replay`), and the CDR messages inside a bag.
//!
//! Checked on every input, besides "no panic": what is accepted is consistent with itself — a
//! `.npy` header re-encoded parses to the same array, extent records lie inside the extent in
//! order, a recording's items are read to the end or refused with a typed error, a ROS 2 image
//! becomes a `.npy` payload the engine accepts.

use std::path::PathBuf;

use stampede_engine::disk::decode_records;
use stampede_engine::npy;
use stampede_record::ros2::{Ros2Type, IMAGE, STRING};
use stampede_record::Recording;
use stampede_trace::file::read;
use stampede_trace::merge::{reconcile, Timeline};

use crate::steps::steps;

/// A `.npy` payload as a put's check and a reader parse it.
pub fn npy(input: &[u8]) {
    let Ok(header) = npy::header(input) else { return };
    assert!(header.data_offset <= input.len(), "the data starts past the payload: {header:?}");
    if npy::check_payload(input).is_ok() {
        assert_eq!(header.data_offset + header.data_bytes, input.len(), "an accepted payload's size");
    }
    // The same array written again by the engine's own encoder parses alike.
    if let Ok(again) = npy::encode_header(&header.descr, &header.shape) {
        let reparsed = npy::header(&again).expect("a header the engine wrote parses");
        assert_eq!((reparsed.shape, reparsed.itemsize), (header.shape, header.itemsize), "{}", header.descr);
    }
}

/// An extent file of the disk tier, as a restarted runtime scans it.
pub fn disk_extent(input: &[u8]) {
    let mut end = 0;
    for record in decode_records(input) {
        assert!(record.at >= end, "records overlap or go back: {record:?}");
        assert!(record.at <= record.payload.start, "a payload before its record: {record:?}");
        assert!(record.payload.start <= record.payload.end && record.payload.end <= input.len(), "{record:?}");
        end = record.payload.end;
    }
}

/// Trace logs of several processes (one per step), merged and exported as `stampede trace` does.
pub fn trace_log(input: &[u8]) {
    let mut logs: Vec<_> = steps(input).filter_map(|(_, log)| read(log).ok()).collect();
    if logs.is_empty() {
        return;
    }
    reconcile(&mut logs);
    let timeline = Timeline::merge(logs);
    assert!(timeline.events.windows(2).all(|w| w[0].t <= w[1].t), "the merged events are in time order");
    stampede_trace::perfetto::export(&timeline);
}

/// A recording (or ROS 2 bag) file, read to its end as `stampede replay` reads it.
pub fn mcap(input: &[u8]) {
    let path = scratch_file();
    std::fs::write(&path, input).expect("the fuzz scratch file is writable");
    if let Ok(mut recording) = Recording::open(&path) {
        let mut items = 0u64;
        let read = recording.for_each(|_| {
            items += 1;
            Ok(())
        });
        if read.is_ok() {
            assert_eq!(recording.items_read(), items, "items read and items counted");
        }
    }
}

/// A CDR message of a bag's topic, converted as replay converts it; the body of each step is one
/// message, the step's tag picks its type.
pub fn ros2_cdr(input: &[u8]) {
    let types = [
        Ros2Type::new(IMAGE, "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding"),
        Ros2Type::new(STRING, "string data"),
        Ros2Type::new("geometry_msgs/msg/PointStamped", "std_msgs/Header header\ngeometry_msgs/Point point"),
        Ros2Type::new("std_msgs/msg/UInt8", "uint8 data"),
    ];
    for (tag, message) in steps(input) {
        let ros2 = &types[usize::from(tag) % types.len()];
        if let Ok((payload, _stamp)) = ros2.item(message) {
            if ros2.name == IMAGE {
                npy::check_payload(&payload).expect("a converted image is a .npy payload the engine accepts");
            }
        }
    }
}

/// This process's scratch file for inputs that must be files.
fn scratch_file() -> PathBuf {
    std::env::temp_dir().join(format!("stampede-fuzz-{}.mcap", std::process::id()))
}
