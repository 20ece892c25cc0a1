//! How Stampede channels and items are written in MCAP — the one place the recorder and the
//! reader agree on it.
//!
//! - The file's profile is [`PROFILE`]; its library names this crate's version.
//! - One MCAP channel per Stampede channel: topic = the channel's name, message encoding = the
//!   codec's name (`json`, `utf8`, `npy`, `raw` or an application's own), so a viewer that knows
//!   the encoding can show it: Foxglove decodes `json` (with the permissive JSON schema
//!   [`JSON_SCHEMA`]) and shows the fields; the others are shown as bytes. Metadata keeps what a
//!   replay needs to re-create the channel: [`META_CODEC`], and when the channel declared them,
//!   [`META_DECLARED_CODEC`], [`META_CAPACITY`], [`META_BYTES_MAX`], [`META_DESCRIPTION`].
//! - One MCAP message per item: `publish_time` = the item's Stampede timestamp (`0 ..= TS_MAX`),
//!   `log_time` = when the recorder got it (ns since the Unix epoch, the time viewers plot and
//!   replay paces by), `sequence` = the item's number in its channel (wrapping at 2³²), data =
//!   the payload's bytes, unchanged.
//! - With a recorder's `foxglove` option, beside them: what Foxglove draws of an item (an image,
//!   annotations, a log line; `stampede_view::foxglove`) on topic `<name>/foxglove`
//!   ([`CONVERTED_TOPIC_SUFFIX`]; an `npy` channel's arrays that are no image on
//!   `<name>#values/foxglove`, as the live bridge's values topic) with the Foxglove schema, the same times, and metadata
//!   [`META_CONVERTED_FROM`], which readers and replay skip.

use std::collections::BTreeMap;

use stampede::{Codec, Info, Limits};

/// The MCAP profile of Stampede recordings.
pub const PROFILE: &str = "stampede";
/// Channel metadata: the codec of the channel's items.
pub const META_CODEC: &str = "stampede.codec";
/// Channel metadata: the codec the channel requires of every put, when it declares one.
pub const META_DECLARED_CODEC: &str = "stampede.declared_codec";
/// Channel metadata: the channel's capacity in items, when bounded.
pub const META_CAPACITY: &str = "stampede.capacity";
/// Channel metadata: the channel's bound on payload bytes, when bounded.
pub const META_BYTES_MAX: &str = "stampede.max_bytes";
/// Channel metadata: the channel's description, when it has one.
pub const META_DESCRIPTION: &str = "stampede.description";
/// The schema of `json` channels: any JSON document (Foxglove wants a schema for `json`).
pub const JSON_SCHEMA: &str = "{}";
/// The name of that schema.
pub const JSON_SCHEMA_NAME: &str = "stampede.json";
/// The encoding of that schema.
pub const JSON_SCHEMA_ENCODING: &str = "jsonschema";
/// Metadata of a channel written for Foxglove beside the raw items: the Stampede channel it was
/// converted from. Readers (and so replay) skip such a channel: the raw items are the record.
pub const META_CONVERTED_FROM: &str = "stampede.converted_from";
/// What follows a channel's name in the topic of its messages for Foxglove.
pub const CONVERTED_TOPIC_SUFFIX: &str = "/foxglove";

/// What a recording says about one Stampede channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelMeta {
    /// The channel's name when recorded.
    pub name: String,
    /// The codec of its items.
    pub codec: Codec,
    /// The codec the channel required, if it declared one.
    pub declared_codec: Option<Codec>,
    pub limits: Limits,
    pub description: String,
}

impl ChannelMeta {
    /// What to record for a channel described by `info`; `codec` is its items' codec when the
    /// channel declares none (taken from its first item).
    pub fn new(info: &Info, codec: Codec) -> ChannelMeta {
        ChannelMeta {
            name: info.name.clone(),
            codec: info.codec.clone().unwrap_or(codec),
            declared_codec: info.codec.clone(),
            limits: info.limits,
            description: info.description.clone(),
        }
    }

    /// The MCAP channel's metadata.
    pub fn metadata(&self) -> BTreeMap<String, String> {
        let mut meta = BTreeMap::from([(META_CODEC.to_owned(), self.codec.name().to_owned())]);
        if let Some(codec) = &self.declared_codec {
            meta.insert(META_DECLARED_CODEC.to_owned(), codec.name().to_owned());
        }
        if let Some(capacity) = self.limits.capacity {
            meta.insert(META_CAPACITY.to_owned(), capacity.to_string());
        }
        if let Some(bytes_max) = self.limits.bytes_max {
            meta.insert(META_BYTES_MAX.to_owned(), bytes_max.to_string());
        }
        if !self.description.is_empty() {
            meta.insert(META_DESCRIPTION.to_owned(), self.description.clone());
        }
        meta
    }

    /// The MCAP channel's message encoding.
    pub fn encoding(&self) -> &str {
        self.codec.name()
    }

    /// Reads what [`metadata`](Self::metadata) wrote; a channel without [`META_CODEC`] (a file
    /// another tool wrote) takes its codec from a `json` encoding, and is `Ok(None)` with any
    /// other. `Err` says what is malformed. (A channel written for Foxglove,
    /// [`META_CONVERTED_FROM`], is skipped before this.)
    pub fn parse(
        topic: &str,
        encoding: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<Option<ChannelMeta>, String> {
        let codec = match metadata.get(META_CODEC) {
            Some(name) if !name.is_empty() => Codec::from_name(name),
            Some(_) => return Err(format!("channel {topic:?}: empty {META_CODEC}")),
            None if encoding == Codec::Json.name() => Codec::Json,
            None => return Ok(None),
        };
        let bound = |key: &str| -> Result<Option<usize>, String> {
            metadata
                .get(key)
                .map(|text| {
                    text.parse::<usize>().map_err(|_| format!("channel {topic:?}: {key} is {text:?}, not a count"))
                })
                .transpose()
        };
        Ok(Some(ChannelMeta {
            name: topic.to_owned(),
            codec,
            declared_codec: metadata.get(META_DECLARED_CODEC).map(|name| Codec::from_name(name)),
            limits: Limits { capacity: bound(META_CAPACITY)?, bytes_max: bound(META_BYTES_MAX)? },
            description: metadata.get(META_DESCRIPTION).cloned().unwrap_or_default(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips() {
        let meta = ChannelMeta {
            name: "camera/left".into(),
            codec: Codec::Npy,
            declared_codec: Some(Codec::Npy),
            limits: Limits { capacity: Some(8), bytes_max: Some(1 << 20) },
            description: "left camera".into(),
        };
        assert_eq!(ChannelMeta::parse("camera/left", meta.encoding(), &meta.metadata()), Ok(Some(meta)));
        let custom = ChannelMeta {
            name: "x".into(),
            codec: Codec::from_name("protobuf:Pose"),
            declared_codec: None,
            limits: Limits::default(),
            description: String::new(),
        };
        assert_eq!(ChannelMeta::parse("x", custom.encoding(), &custom.metadata()), Ok(Some(custom)));
    }

    #[test]
    fn foreign_channels_need_a_known_encoding() {
        let none = BTreeMap::new();
        assert_eq!(ChannelMeta::parse("t", "json", &none).map(|m| m.map(|m| m.codec)), Ok(Some(Codec::Json)));
        assert_eq!(ChannelMeta::parse("t", "ros1", &none), Ok(None));
        let bad =
            BTreeMap::from([(META_CODEC.to_owned(), "json".to_owned()), (META_CAPACITY.to_owned(), "-3".to_owned())]);
        assert!(ChannelMeta::parse("t", "json", &bad).unwrap_err().contains("-3"));
    }
}
