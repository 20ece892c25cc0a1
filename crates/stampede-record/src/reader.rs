//! Reads a recording item by item, streaming: memory holds one chunk, whatever the file's size.
//!
//! Any bytes give items or a typed error, never a panic or an unbounded allocation: record and
//! chunk lengths are bounded by [`RECORD_BYTES_MAX`], chunks' CRCs are checked, timestamps are
//! checked to be item timestamps, messages must name a channel seen before. A file that ends early — a recorder
//! killed before it finished — is read up to its last complete chunk and then reports
//! [`Recording::cut_off`] instead of failing: that is what a crash leaves, and the items before
//! it are good.
//!
//! A ROS 2 bag (rosbag2's MCAP storage: `ros2msg` schemas, `cdr` messages; a file or a rosbag2
//! directory) is read the same way, each message turned into an item as [`crate::ros2`] says.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcap::records::Record;
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};
use mcap::McapError;
use stampede::{Codec, Timestamp, TS_MAX};

use crate::error::{RecordError, RecordResult};
use crate::format::{ChannelMeta, META_CONVERTED_FROM};
use crate::ros2::{self, Ros2Time, Ros2Type};

/// Largest record (or decompressed chunk) read: a corrupt length cannot make the reader allocate
/// more. The recorder writes items up to a little less (`writer::ITEM_BYTES_MAX`).
pub const RECORD_BYTES_MAX: usize = 512 << 20;

/// A channel of the recording.
#[derive(Debug)]
pub struct RecordedChannel {
    /// Its MCAP channel id.
    pub id: u16,
    pub meta: ChannelMeta,
    /// Its ROS 2 type, for a channel of a ROS 2 bag.
    pub ros2: Option<Ros2Type>,
}

/// One recorded item.
#[derive(Clone, Debug)]
pub struct RecordedItem {
    pub channel: Arc<RecordedChannel>,
    /// The item's Stampede timestamp.
    pub ts: Timestamp,
    /// When it was recorded, in ns since the Unix epoch.
    pub log_time: u64,
    /// Its number in its channel.
    pub sequence: u32,
    pub data: Vec<u8>,
}

impl RecordedItem {
    /// The item's codec.
    pub fn codec(&self) -> &Codec {
        &self.channel.meta.codec
    }
}

/// An open recording, read front to back.
pub struct Recording {
    path: PathBuf,
    file: File,
    reader: LinearReader,
    decoder: Decoder,
    items: u64,
    cut_off: Option<String>,
    done: bool,
}

/// What turns records into items: the channels and schemas seen so far, how ROS 2 messages are
/// timed, and what was skipped.
struct Decoder {
    path: PathBuf,
    /// Each channel defined so far; `None` for one written for Foxglove beside the raw items
    /// (its messages are skipped).
    channels: HashMap<u16, Option<Arc<RecordedChannel>>>,
    /// Each schema's name, encoding and text (only `ros2msg` ones are kept).
    schemas: HashMap<u16, (String, String)>,
    ros2: Ros2Time,
    skipped: u64,
    skip_reason: Option<String>,
}

impl Recording {
    /// Opens `path` for reading: a recording, or a ROS 2 bag timed as [`Ros2Time::default`].
    pub fn open(path: impl AsRef<Path>) -> RecordResult<Recording> {
        Recording::open_with(path, Ros2Time::default())
    }

    /// Opens `path` for reading; a ROS 2 bag's messages are timed as `ros2` says. A rosbag2
    /// directory is read through the file its `metadata.yaml` lists.
    pub fn open_with(path: impl AsRef<Path>, ros2: Ros2Time) -> RecordResult<Recording> {
        let path = ros2::bag_file(path.as_ref())?;
        let file = File::open(&path).map_err(|e| RecordError::io(&path, e))?;
        let options =
            LinearReaderOptions::default().with_record_length_limit(RECORD_BYTES_MAX).with_validate_chunk_crcs(true);
        let decoder = Decoder {
            path: path.clone(),
            channels: HashMap::new(),
            schemas: HashMap::new(),
            ros2,
            skipped: 0,
            skip_reason: None,
        };
        Ok(Recording {
            path,
            file,
            reader: LinearReader::new_with_options(options),
            decoder,
            items: 0,
            cut_off: None,
            done: false,
        })
    }

    /// Messages of a ROS 2 bag that were not what their schema says (skipped), and why the
    /// first one was not.
    pub fn skipped(&self) -> (u64, Option<&str>) {
        (self.decoder.skipped, self.decoder.skip_reason.as_deref())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Items read so far.
    pub fn items_read(&self) -> u64 {
        self.items
    }

    /// Why the file ended before its proper end (`None`: not cut off, or not at the end yet).
    pub fn cut_off(&self) -> Option<&str> {
        self.cut_off.as_deref()
    }

    /// The next item; `None` at the end of the file (see [`cut_off`](Self::cut_off) for whether
    /// it ended early).
    pub fn next_item(&mut self) -> RecordResult<Option<RecordedItem>> {
        while !self.done {
            let event = match self.reader.next_event() {
                None => {
                    self.done = true;
                    break;
                }
                Some(Err(McapError::UnexpectedEof)) => {
                    self.done = true;
                    self.cut_off = Some(format!("the file ends early, after {} items", self.items));
                    break;
                }
                Some(Err(e)) => return Err(RecordError::corrupt(&self.path, e)),
                Some(Ok(event)) => event,
            };
            match event {
                LinearReadEvent::ReadRequest(need) => {
                    let buffer = self.reader.insert(need);
                    let read = self.file.read(buffer).map_err(|e| RecordError::io(&self.path, e))?;
                    self.reader.notify_read(read);
                }
                LinearReadEvent::Record { opcode, data } => {
                    let record = mcap::parse_record(opcode, data).map_err(|e| RecordError::corrupt(&self.path, e))?;
                    if let Some(item) = self.decoder.accept(record)? {
                        self.items += 1;
                        return Ok(Some(item));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Reads the rest of the file, calling `each` with every item: the recording's items in order.
    pub fn for_each(&mut self, mut each: impl FnMut(RecordedItem) -> RecordResult<()>) -> RecordResult<()> {
        while let Some(item) = self.next_item()? {
            each(item)?;
        }
        Ok(())
    }
}

impl Decoder {
    /// Takes one record in: schemas and channels are registered, messages become items, the
    /// rest is skipped.
    fn accept(&mut self, record: Record<'_>) -> RecordResult<Option<RecordedItem>> {
        let path = &self.path;
        match record {
            Record::Schema { header, data } if header.encoding == ros2::SCHEMA_ENCODING => {
                let text = String::from_utf8_lossy(&data).into_owned();
                self.schemas.insert(header.id, (header.name, text));
                Ok(None)
            }
            Record::Channel(channel) if channel.metadata.contains_key(META_CONVERTED_FROM) => {
                // Written for Foxglove beside the raw items, which are the record.
                self.channels.insert(channel.id, None);
                Ok(None)
            }
            Record::Channel(channel) => {
                let ros2 = (channel.message_encoding == ros2::MESSAGE_ENCODING)
                    .then(|| self.schemas.get(&channel.schema_id))
                    .flatten()
                    .map(|(name, definition)| Ros2Type::new(name, definition));
                let meta = match &ros2 {
                    Some(ty) => Some(ChannelMeta {
                        name: channel.topic.trim_start_matches('/').to_owned(),
                        codec: ty.codec(),
                        declared_codec: None,
                        limits: stampede::Limits::default(),
                        description: format!("ROS 2 {} from {}", ty.name, channel.topic),
                    }),
                    None => ChannelMeta::parse(&channel.topic, &channel.message_encoding, &channel.metadata)
                        .map_err(|reason| RecordError::corrupt(path, reason))?,
                };
                let meta = meta.ok_or_else(|| RecordError::UnknownCodec {
                    path: path.to_owned(),
                    topic: channel.topic.clone(),
                    encoding: channel.message_encoding.clone(),
                })?;
                if let Some(known) = self.channels.get(&channel.id) {
                    if known.as_ref().is_none_or(|known| known.meta != meta) {
                        return Err(RecordError::corrupt(
                            path,
                            format!("channel id {} is defined twice, differently", channel.id),
                        ));
                    }
                    return Ok(None);
                }
                self.channels.insert(channel.id, Some(Arc::new(RecordedChannel { id: channel.id, meta, ros2 })));
                Ok(None)
            }
            Record::Message { header, data } => {
                let channel = self.channels.get(&header.channel_id).ok_or_else(|| {
                    RecordError::corrupt(
                        path,
                        format!("a message names channel id {} before it is defined", header.channel_id),
                    )
                })?;
                let Some(channel) = channel.clone() else { return Ok(None) }; // converted for Foxglove
                let (ts, data) = match &channel.ros2 {
                    Some(ty) => match ty.item(&data) {
                        Ok((payload, stamp)) => (self.ros2.timestamp(header.log_time, stamp), payload),
                        Err(why) => {
                            self.skipped += 1;
                            self.skip_reason.get_or_insert_with(|| format!("{}: {why}", channel.meta.name));
                            return Ok(None);
                        }
                    },
                    None => {
                        let ts = Timestamp::try_from(header.publish_time).ok().filter(|ts| *ts <= TS_MAX);
                        let ts = ts.ok_or_else(|| {
                            RecordError::corrupt(
                                path,
                                format!("message timestamp {} is not an item timestamp", header.publish_time),
                            )
                        })?;
                        (ts, data.into_owned())
                    }
                };
                Ok(Some(RecordedItem { channel, ts, log_time: header.log_time, sequence: header.sequence, data }))
            }
            _ => Ok(None),
        }
    }
}
