//! Recordings of Stampede channels in MCAP files, and their replay (docs/RECORDING.md).
//!
//! - [`Recorder`] follows channels of a runtime (embedded or a client of a node) and writes every
//!   item to an MCAP file: one MCAP channel per Stampede channel, the timestamp and the codec
//!   kept ([`mod@format`]). Its input connections' claims keep every item it has not yet written from
//!   being reclaimed, so **a recording is complete by construction**: when the disk is slower
//!   than the producers, items wait in their channels and bounded channels slow their producers
//!   down; nothing is dropped. The file is chunked and indexed; a chunk is closed at least every
//!   flush interval, so a recorder killed mid-run leaves a file readable up to its last chunk.
//! - [`replay()`](replay::replay) puts a recording's items back into channels of the same (or remapped) names,
//!   paced at the original timing, scaled, or as fast as possible, with a producer whose virtual
//!   time follows the lowest timestamp still to come (so the target runtime keeps reclaiming).
//! - [`reader`] reads recordings, whole or cut off by a crash, with typed errors for any bytes;
//!   and ROS 2 bags ([`ros2`]: rosbag2's MCAP storage, CDR decoded without ROS), which
//!   [`replay()`](replay::replay) puts into channels like a recording.

pub mod error;
pub mod follow;
pub mod format;
pub mod reader;
pub mod recorder;
pub mod replay;
pub mod ros2;
pub mod writer;

pub use error::{RecordError, RecordResult};
pub use reader::{RecordedChannel, RecordedItem, Recording};
pub use recorder::{Compression, Recorder, RecorderOptions, RecorderStats};
pub use replay::{replay, ReplayOptions, ReplayStats};
