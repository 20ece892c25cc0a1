//! The MCAP side of the recorder: one MCAP channel per (Stampede channel, codec), one message
//! per item, as [`crate::format`] lays them out; and, when asked, what Foxglove draws of an item
//! in a channel of its own beside it. Or, asked for a ROS 2 bag, each item as its ROS 2 message
//! ([`mod@crate::ros2::write`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use mcap::records::MessageHeader;
use mcap::{WriteOptions, Writer};
use stampede::{Channel, Codec, Item};
use stampede_view::foxglove::{Kind, Tick};

use crate::error::{RecordError, RecordResult};
use crate::format::{
    ChannelMeta, CONVERTED_TOPIC_SUFFIX, JSON_SCHEMA, JSON_SCHEMA_ENCODING, JSON_SCHEMA_NAME, META_CONVERTED_FROM,
    PROFILE,
};
use crate::reader::RECORD_BYTES_MAX;
use crate::recorder::RecorderOptions;
use crate::ros2;

/// Largest item written: bigger ones could not be read back (the reader's record bound, less
/// room for a chunk's own headers). The recorder counts them as missed.
pub const ITEM_BYTES_MAX: usize = RECORD_BYTES_MAX - (1 << 20);

/// The MCAP writer and the channel ids given so far.
pub(crate) struct McapWriter {
    path: PathBuf,
    writer: Writer<BufWriter<File>>,
    /// The MCAP channel of each (Stampede channel, codec): a channel that declares no codec may
    /// carry several.
    channel_ids: HashMap<(String, Codec), u16>,
    sequences: HashMap<u16, u32>,
    json_schema: Option<u16>,
    /// Converting for Foxglove, with this tick ([`RecorderOptions::foxglove`]).
    foxglove: Option<Tick>,
    /// The MCAP channel of each (Stampede channel, Foxglove kind), and each kind's schema.
    converted_ids: HashMap<(String, Kind), u16>,
    foxglove_schemas: HashMap<Kind, u16>,
    /// Writing a ROS 2 bag instead, with this tick ([`RecorderOptions::ros2`]): the MCAP
    /// channel of each (Stampede channel, ROS 2 type) and each type's schema.
    ros2: Option<Tick>,
    ros2_ids: HashMap<(String, String), u16>,
    ros2_schemas: HashMap<String, u16>,
}

/// What became of an item's conversion for Foxglove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conversion {
    /// Not asked for, or nothing Foxglove draws.
    None,
    /// Written beside the item.
    Written,
    /// It looked convertible but is not (recorded raw only).
    Refused,
}

impl McapWriter {
    pub(crate) fn create(path: &Path, options: &RecorderOptions) -> RecordResult<McapWriter> {
        let file = File::create(path).map_err(|e| RecordError::io(path, e))?;
        let profile = if options.ros2.is_some() { ros2::PROFILE } else { PROFILE };
        let writer = WriteOptions::new()
            .profile(profile)
            .library(format!("stampede-record {}", env!("CARGO_PKG_VERSION")))
            .compression(options.compression.mcap())
            .chunk_size(Some(options.chunk_bytes))
            .create(BufWriter::new(file));
        let writer = writer.map_err(|e| failed(path, e))?;
        Ok(McapWriter {
            path: path.to_owned(),
            writer,
            channel_ids: HashMap::new(),
            sequences: HashMap::new(),
            json_schema: None,
            foxglove: options.foxglove,
            converted_ids: HashMap::new(),
            foxglove_schemas: HashMap::new(),
            ros2: options.ros2,
            ros2_ids: HashMap::new(),
            ros2_schemas: HashMap::new(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one item of `channel`, then what Foxglove draws of it if asked for; or, writing a
    /// ROS 2 bag, its ROS 2 message (`Refused`: it has none, and is not in the bag).
    pub(crate) fn write(&mut self, channel: &Channel, item: &Item) -> RecordResult<Conversion> {
        if let Some(tick) = self.ros2 {
            return self.write_ros2(channel.name(), item, tick);
        }
        let header = self.write_raw(channel, item)?;
        let (Some(tick), Some(kind)) = (self.foxglove, Kind::of_item(item)) else { return Ok(Conversion::None) };
        let Ok(message) = kind.encode(channel.name(), item, tick) else { return Ok(Conversion::Refused) };
        let id = self.converted_channel(channel.name(), kind)?;
        self.emit(id, header.log_time, header.publish_time, &message)?;
        Ok(Conversion::Written)
    }

    /// `item` of channel `name` as a ROS 2 message on topic `/<name>`, timed by `tick`.
    fn write_ros2(&mut self, name: &str, item: &Item, tick: Tick) -> RecordResult<Conversion> {
        let Ok(message) = ros2::write::message(name, item, tick) else { return Ok(Conversion::Refused) };
        let key = (name.to_owned(), message.type_name.clone());
        let id = match self.ros2_ids.get(&key) {
            Some(&id) => id,
            None => {
                let schema = match self.ros2_schemas.get(&message.type_name) {
                    Some(&id) => id,
                    None => {
                        let (encoding, definition) = (ros2::SCHEMA_ENCODING, message.definition.as_bytes());
                        let id = self.writer.add_schema(&message.type_name, encoding, definition);
                        let id = id.map_err(|e| failed(&self.path, e))?;
                        self.ros2_schemas.insert(message.type_name.clone(), id);
                        id
                    }
                };
                let topic = format!("/{name}");
                let id = self.writer.add_channel(schema, &topic, ros2::MESSAGE_ENCODING, &BTreeMap::new());
                let id = id.map_err(|e| failed(&self.path, e))?;
                self.ros2_ids.insert(key, id);
                id
            }
        };
        self.emit(id, now_ns(), tick.nanos(item.ts), &message.data)?;
        Ok(Conversion::Written)
    }

    /// Writes `data` on MCAP channel `id` with the next sequence number of that channel.
    fn emit(&mut self, id: u16, log_time: u64, publish_time: u64, data: &[u8]) -> RecordResult<MessageHeader> {
        let sequence = self.sequences.entry(id).or_default();
        let header = MessageHeader { channel_id: id, sequence: *sequence, log_time, publish_time };
        *sequence = sequence.wrapping_add(1);
        self.writer.write_to_known_channel(&header, data).map_err(|e| failed(&self.path, e))?;
        Ok(header)
    }

    /// The MCAP channel of `name`'s messages of `kind` for Foxglove: topic `<topic>/foxglove`
    /// where `<topic>` is the live bridge's (`<name>`, or `<name>#values` for an `npy` channel's
    /// arrays that are no image: one schema per topic), the kind's schema, metadata naming the channel it was converted from (what tells a reader
    /// to skip it: [`META_CONVERTED_FROM`]).
    fn converted_channel(&mut self, name: &str, kind: Kind) -> RecordResult<u16> {
        if let Some(&id) = self.converted_ids.get(&(name.to_owned(), kind)) {
            return Ok(id);
        }
        let schema = match (self.foxglove_schemas.get(&kind), kind.schema()) {
            (Some(&id), _) => id,
            (None, Some(schema)) => {
                let id = self.writer.add_schema(&schema.name, &schema.encoding, &schema.data);
                let id = id.map_err(|e| failed(&self.path, e))?;
                self.foxglove_schemas.insert(kind, id);
                id
            }
            (None, None) => 0,
        };
        let metadata = BTreeMap::from([(META_CONVERTED_FROM.to_owned(), name.to_owned())]);
        let topic = format!("{}{CONVERTED_TOPIC_SUFFIX}", kind.topic(name));
        let id = self.writer.add_channel(schema, &topic, kind.message_encoding(), &metadata);
        let id = id.map_err(|e| failed(&self.path, e))?;
        self.converted_ids.insert((name.to_owned(), kind), id);
        Ok(id)
    }

    /// Writes `item` of `channel` as it is; returns its message header.
    fn write_raw(&mut self, channel: &Channel, item: &Item) -> RecordResult<MessageHeader> {
        let key = (channel.name().to_owned(), item.codec().clone());
        let id = match self.channel_ids.get(&key) {
            Some(&id) => id,
            None => {
                let meta = ChannelMeta::new(&channel.info(), item.codec().clone());
                let schema = if *item.codec() == Codec::Json { self.json_schema()? } else { 0 };
                let id = self.writer.add_channel(schema, &meta.name, meta.encoding(), &meta.metadata());
                let id = id.map_err(|e| failed(&self.path, e))?;
                self.channel_ids.insert(key, id);
                id
            }
        };
        let publish_time = u64::try_from(item.ts).expect("items live at 0 ..= TS_MAX");
        self.emit(id, now_ns(), publish_time, item.data())
    }

    fn json_schema(&mut self) -> RecordResult<u16> {
        if let Some(id) = self.json_schema {
            return Ok(id);
        }
        let id = self.writer.add_schema(JSON_SCHEMA_NAME, JSON_SCHEMA_ENCODING, JSON_SCHEMA.as_bytes());
        let id = id.map_err(|e| failed(&self.path, e))?;
        self.json_schema = Some(id);
        Ok(id)
    }

    /// Closes the current chunk and writes it out.
    pub(crate) fn flush(&mut self) -> RecordResult<()> {
        self.writer.flush().map_err(|e| failed(&self.path, e))
    }

    /// Writes the summary and indexes, and flushes the file.
    pub(crate) fn finish(mut self) -> RecordResult<()> {
        self.writer.finish().map_err(|e| failed(&self.path, e))?;
        let mut file = self.writer.into_inner();
        std::io::Write::flush(&mut file).map_err(|e| RecordError::io(&self.path, e))
    }
}

/// An error of the MCAP writer: the file's I/O error, or what the format could not hold (e.g.
/// more than 65 535 channels).
fn failed(path: &Path, e: mcap::McapError) -> RecordError {
    match e {
        mcap::McapError::Io(e) => RecordError::io(path, e),
        e => RecordError::Write { path: path.to_owned(), reason: e.to_string() },
    }
}

/// Nanoseconds since the Unix epoch (0 on a clock before it).
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
