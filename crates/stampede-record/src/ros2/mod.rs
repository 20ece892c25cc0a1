//! ROS 2 bags, read and written without ROS installed (docs/RECORDING.md, "ROS 2 bags"):
//! rosbag2's MCAP storage, channels with `ros2msg` schemas and `cdr` messages, read as one file
//! or as a rosbag2 directory with its `metadata.yaml`, written as one file ([`mod@write`]).
//!
//! Each topic becomes a channel named like it (without the leading `/`). What an item holds:
//!
//! | ROS 2 type | item |
//! |---|---|
//! | `sensor_msgs/msg/Image`, `mono8`, `rgb8`, `bgr8`, `rgba8`, `bgra8` | an `npy` `uint8` frame, (H, W) or (H, W, 3|4), RGB(A) order, rows packed |
//! | `sensor_msgs/msg/Image`, another encoding | skipped and counted, with the reason |
//! | `std_msgs/msg/String` | `utf8` text |
//! | any other type (`CompressedImage`, `Imu`, `PointCloud2`, …) | the CDR bytes as they are, codec `ros2:<type>` |
//!
//! Timestamps ([`Ros2Time`]): the message's header stamp (messages whose first field is a
//! `std_msgs/Header`; others use the log time) or the log time, in nanoseconds, turned into
//! timestamps by a tick (nanoseconds as they are by default, or seconds per timestamp to get
//! frame numbers). Two messages of a topic at one timestamp: replay puts the first and skips and
//! counts the later ones.
//!
//! Decoding is [`cdr`]'s: bounded by the message's own bytes, never panicking; a message that is
//! not what its schema says is skipped and counted, the bag goes on.

pub mod cdr;
pub mod write;

use std::path::{Path, PathBuf};

use stampede::{Codec, Timestamp, TS_MAX};
use stampede_view::foxglove::Tick;
use stampede_view::image::{FRAME_BYTES_MAX, FRAME_SIDE_MAX};

use crate::error::{RecordError, RecordResult};
use cdr::{CdrError, CdrReader};

/// The profile of a ROS 2 bag's MCAP file.
pub const PROFILE: &str = "ros2";
/// The schema encoding of ROS 2 message definitions in MCAP.
pub const SCHEMA_ENCODING: &str = "ros2msg";
/// The message encoding of ROS 2 messages in MCAP.
pub const MESSAGE_ENCODING: &str = "cdr";
/// The image type converted to frames.
pub const IMAGE: &str = "sensor_msgs/msg/Image";
/// The text type converted to `utf8`.
pub const STRING: &str = "std_msgs/msg/String";
/// The codec prefix of items kept as CDR bytes.
pub const CODEC_PREFIX: &str = "ros2:";

/// Where an item's time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    /// The message's header stamp (the log time for a message without a header).
    Header,
    /// When the message was logged.
    Log,
}

/// How a ROS 2 message's time becomes an item's timestamp.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ros2Time {
    pub source: TimeSource,
    pub tick: Tick,
}

impl Default for Ros2Time {
    fn default() -> Self {
        Ros2Time { source: TimeSource::Header, tick: Tick::Nanos }
    }
}

impl Ros2Time {
    /// The timestamp of a message logged at `log_ns` with header stamp `header_ns`, if it has one.
    pub fn timestamp(&self, log_ns: u64, header_ns: Option<u64>) -> Timestamp {
        let ns = match self.source {
            TimeSource::Header => header_ns.unwrap_or(log_ns),
            TimeSource::Log => log_ns,
        };
        let ts = match self.tick {
            // Exact: nanoseconds since the epoch are beyond an f64's 53 bits.
            Tick::Nanos => Timestamp::try_from(ns).unwrap_or(TS_MAX),
            // The nearest timestamp: a camera's stamps, truncated to whole nanoseconds, land on
            // their own frame numbers (not one below); `as` saturates.
            Tick::Seconds(seconds) => (ns as f64 / (seconds * 1e9)).round() as Timestamp,
        };
        ts.clamp(0, TS_MAX)
    }
}

/// A channel's ROS 2 type, from its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ros2Type {
    /// `sensor_msgs/msg/Image`, …
    pub name: String,
    /// Its first field is a `std_msgs/Header` (whose stamp can time the item).
    pub has_header: bool,
}

impl Ros2Type {
    /// The type named `name` with the message definition `definition` (`ros2msg` text: the
    /// type's fields, then its dependencies after `===` lines).
    pub fn new(name: &str, definition: &str) -> Ros2Type {
        let first_field = definition
            .lines()
            .map(|line| line.split('#').next().unwrap_or("").trim())
            .take_while(|line| !line.starts_with("==="))
            .find(|line| !line.is_empty() && !line.contains('='));
        let has_header = first_field
            .and_then(|field| field.split_whitespace().next())
            .is_some_and(|ty| matches!(ty, "std_msgs/Header" | "std_msgs/msg/Header" | "Header"));
        Ros2Type { name: name.to_owned(), has_header }
    }

    /// The codec of its items.
    pub fn codec(&self) -> Codec {
        match self.name.as_str() {
            IMAGE => Codec::Npy,
            STRING => Codec::Utf8,
            other => Codec::from_name(&format!("{CODEC_PREFIX}{other}")),
        }
    }

    /// A message of this type as an item's payload, and its header stamp in nanoseconds if it
    /// has one; or why it cannot be.
    pub fn item(&self, message: &[u8]) -> Result<(Vec<u8>, Option<u64>), CdrError> {
        match self.name.as_str() {
            IMAGE => image(message),
            STRING => Ok((CdrReader::new(message)?.string("data")?.into_bytes(), None)),
            _ => {
                let stamp = if self.has_header { Some(stamp(&mut CdrReader::new(message)?)?) } else { None };
                Ok((message.to_vec(), stamp))
            }
        }
    }
}

/// A `std_msgs/Header`'s stamp in nanoseconds (negative times at 0); its `frame_id` is read past.
fn stamp(r: &mut CdrReader<'_>) -> Result<u64, CdrError> {
    let seconds = r.i32("header.stamp.sec")?;
    let nanos = r.u32("header.stamp.nanosec")?;
    r.string("header.frame_id")?;
    Ok(u64::try_from(seconds).unwrap_or(0).saturating_mul(1_000_000_000).saturating_add(u64::from(nanos)))
}

/// A `sensor_msgs/msg/Image` as an `npy` frame in RGB(A) order, rows packed.
fn image(message: &[u8]) -> Result<(Vec<u8>, Option<u64>), CdrError> {
    let mut r = CdrReader::new(message)?;
    let stamp = stamp(&mut r)?;
    let height = r.u32("height")? as usize;
    let width = r.u32("width")? as usize;
    let encoding = r.string("encoding")?;
    let _big_endian = r.u8("is_bigendian")?; // bytes of 8-bit channels have no order
    let step = r.u32("step")? as usize;
    let data = r.bytes("data")?;
    let (channels, swap) = match encoding.as_str() {
        "mono8" => (1, false),
        "rgb8" => (3, false),
        "bgr8" => (3, true),
        "rgba8" => (4, false),
        "bgra8" => (4, true),
        other => {
            return Err(CdrError(format!("image encoding {other:?}: mono8, rgb8, bgr8, rgba8 and bgra8 become frames")))
        }
    };
    if height == 0 || width == 0 || height > FRAME_SIDE_MAX || width > FRAME_SIDE_MAX {
        return Err(CdrError(format!("{width}×{height} pixels: each side must be 1..={FRAME_SIDE_MAX}")));
    }
    // Both sides are at most FRAME_SIDE_MAX and channels at most 4: no overflow.
    let row = width * channels;
    if row * height > FRAME_BYTES_MAX || step < row || data.len() < step * (height - 1) + row {
        return Err(CdrError(format!(
            "{width}×{height} {encoding} with step {step} and {} bytes of data: not a whole image (at most \
             {FRAME_BYTES_MAX} bytes)",
            data.len()
        )));
    }
    let shape: &[usize] = if channels == 1 { &[height, width] } else { &[height, width, channels] };
    let mut frame = stampede::npy::encode_header("'|u1'", shape).map_err(|e| CdrError(e.to_string()))?;
    frame.reserve(row * height);
    for y in 0..height {
        let pixels = &data[y * step..y * step + row];
        if swap {
            for pixel in pixels.chunks_exact(channels) {
                frame.extend_from_slice(&[pixel[2], pixel[1], pixel[0]]);
                frame.extend_from_slice(&pixel[3..]);
            }
        } else {
            frame.extend_from_slice(pixels);
        }
    }
    Ok((frame, Some(stamp)))
}

/// The MCAP file of `path`: itself, or for a rosbag2 directory the one its `metadata.yaml`
/// lists (or the one `.mcap` file in it).
pub fn bag_file(path: &Path) -> RecordResult<PathBuf> {
    if !path.is_dir() {
        return Ok(path.to_owned());
    }
    let metadata = path.join("metadata.yaml");
    let listed: Vec<PathBuf> = match std::fs::read_to_string(&metadata) {
        Ok(text) => relative_file_paths(&text).into_iter().map(|file| path.join(file)).collect(),
        Err(_) => Vec::new(),
    };
    let files = if listed.is_empty() {
        let entries = std::fs::read_dir(path).map_err(|e| RecordError::io(path, e))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|file| file.extension().is_some_and(|ext| ext == "mcap"))
            .collect();
        files.sort();
        files
    } else {
        listed
    };
    match files.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(RecordError::corrupt(path, "a directory with no .mcap file (rosbag2's sqlite3 storage is not read: convert it with `ros2 bag convert` to mcap)")),
        more => Err(RecordError::TooLarge(format!(
            "{}: a bag split into {} files; replay each file in turn",
            path.display(),
            more.len()
        ))),
    }
}

/// The entries of `relative_file_paths:` in a rosbag2 `metadata.yaml` (a list of plain
/// scalars, as rosbag2 writes it).
fn relative_file_paths(yaml: &str) -> Vec<String> {
    let mut lines = yaml.lines().skip_while(|line| line.trim() != "relative_file_paths:").skip(1);
    let mut files = Vec::new();
    while let Some(item) = lines.next().and_then(|line| line.trim().strip_prefix("- ")) {
        files.push(item.trim().trim_matches(['"', '\'']).to_owned());
    }
    files
}

#[cfg(test)]
mod tests {
    use super::cdr::CdrWriter;
    use super::*;

    fn image_message(encoding: &str, width: u32, height: u32, step: u32, data: &[u8]) -> Vec<u8> {
        let mut w = CdrWriter::default();
        w.i32(3);
        w.u32(500);
        w.string("camera").unwrap();
        w.u32(height);
        w.u32(width);
        w.string(encoding).unwrap();
        w.u8(0);
        w.u32(step);
        w.bytes(data).unwrap();
        w.finish()
    }

    /// A bgr8 image with padded rows becomes a packed RGB frame, timed by its header.
    #[test]
    fn a_bgr_image_becomes_an_rgb_frame() {
        let data = [1, 2, 3, 4, 5, 6, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0]; // 2×2, step 8
        let (frame, stamp) = Ros2Type::new(IMAGE, "").item(&image_message("bgr8", 2, 2, 8, &data)).unwrap();
        let header = stampede::npy::header(&frame).unwrap();
        assert_eq!(header.shape, [2, 2, 3]);
        assert_eq!(&frame[header.data_offset..], &[3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10]);
        assert_eq!(stamp, Some(3_000_000_500));
        let short = image_message("rgb8", 2, 2, 6, &[0; 11]);
        assert!(Ros2Type::new(IMAGE, "").item(&short).unwrap_err().0.contains("not a whole image"));
        let yuv = image_message("yuv422", 2, 2, 4, &[0; 8]);
        assert!(Ros2Type::new(IMAGE, "").item(&yuv).unwrap_err().0.contains("yuv422"));
    }

    /// A type with a header is timed by it; its bytes stay as they are, under `ros2:<type>`.
    #[test]
    fn other_types_keep_their_bytes() {
        let imu = Ros2Type::new(
            "sensor_msgs/msg/Imu",
            "# IMU\nstd_msgs/Header header\nfloat64 x\n===\nMSG: std_msgs/Header\n",
        );
        assert!(imu.has_header);
        assert_eq!(imu.codec().name(), "ros2:sensor_msgs/msg/Imu");
        let mut w = CdrWriter::default();
        w.i32(1);
        w.u32(2);
        w.string("imu").unwrap();
        let message = w.finish();
        assert_eq!(imu.item(&message).unwrap(), (message.clone(), Some(1_000_000_002)));
        let plain = Ros2Type::new("geometry_msgs/msg/Point", "float64 x\nfloat64 y\n");
        assert!(!plain.has_header && plain.item(&message).unwrap().1.is_none());
    }

    /// Times: the header's or the log's, in nanoseconds or frame numbers.
    #[test]
    fn times_become_timestamps() {
        let header = Ros2Time::default();
        assert_eq!(header.timestamp(9, Some(5)), 5);
        assert_eq!(header.timestamp(9, None), 9);
        // Stamps since the epoch stay exact in nanoseconds (an f64 would round them to 256 ns).
        assert_eq!(header.timestamp(0, Some(1_700_000_000_123_456_789)), 1_700_000_000_123_456_789);
        let frames = Ros2Time { source: TimeSource::Log, tick: Tick::Seconds(0.1) };
        assert_eq!(frames.timestamp(240_000_000, Some(1)), 2);
        // Stamps truncated to whole nanoseconds still land on their frames (1/30 s: 33333333 ns).
        let thirtieths = Ros2Time { source: TimeSource::Header, tick: Tick::Seconds(1.0 / 30.0) };
        assert_eq!(
            (1..=90).map(|n| thirtieths.timestamp(0, Some(n * 1_000_000_000 / 30))).collect::<Vec<_>>(),
            (1..=90).collect::<Vec<_>>()
        );
    }

    proptest::proptest! {
        /// Any bytes as any type's message: an item or an error, never a panic (the decoder's
        /// fuzz target; `PROPTEST_CASES` runs more).
        #[test]
        fn any_message_never_panics(message in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96), kind in 0usize..3) {
            let ty = [IMAGE, STRING, "sensor_msgs/msg/Imu"][kind];
            let _ = Ros2Type::new(ty, "std_msgs/Header header").item(&message);
            // A well-formed prefix followed by anything: the lengths inside still bound it.
            let mut prefixed = image_message("rgb8", 2, 2, 6, &[]);
            prefixed.extend_from_slice(&message);
            let _ = Ros2Type::new(IMAGE, "").item(&prefixed);
        }
    }

    #[test]
    fn metadata_lists_the_bags_files() {
        let yaml = "rosbag2_bagfile_information:\n  relative_file_paths:\n    - run_0.mcap\n  duration:\n";
        assert_eq!(relative_file_paths(yaml), ["run_0.mcap"]);
    }
}
