//! Items: an immutable payload plus its codec (docs/SEMANTICS.md, "Terms" and
//! "Payloads and codecs").
//!
//! The payload is a reference-counted [`Bytes`]: it is copied once on the way in (`put` is
//! copy-in) and every `get` hands out another reference to the same read-only buffer, so a reader
//! can never change what others see and a 6 MB frame is never copied on the way out.

use bytes::Bytes;
use std::sync::Arc;

use crate::time::Timestamp;

/// Longest codec name, in bytes (a put or a declared codec with a longer one is refused).
pub const CODEC_NAME_BYTES_MAX: usize = 256;

/// How an item's bytes are to be read (docs/SEMANTICS.md, "Payloads and codecs"). The standard
/// codecs are understood by every client; any other name is carried through untouched.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Opaque bytes.
    Raw,
    /// UTF-8 text.
    Utf8,
    /// A JSON document in UTF-8.
    Json,
    /// NumPy's `.npy` format: header with dtype and shape, then the array data.
    Npy,
    /// An application-defined codec name.
    Other(Arc<str>),
}

impl Codec {
    /// The codec's name as written in recordings and on the wire.
    pub fn name(&self) -> &str {
        match self {
            Codec::Raw => "raw",
            Codec::Utf8 => "utf8",
            Codec::Json => "json",
            Codec::Npy => "npy",
            Codec::Other(name) => name,
        }
    }

    /// The codec called `name`; standard names map to their variants.
    pub fn from_name(name: &str) -> Codec {
        match name {
            "raw" => Codec::Raw,
            "utf8" => Codec::Utf8,
            "json" => Codec::Json,
            "npy" => Codec::Npy,
            other => Codec::Other(other.into()),
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a `put` stores: bytes plus codec. Cloning is cheap (a reference count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    /// The read-only bytes.
    pub data: Bytes,
    /// How to read them.
    pub codec: Codec,
}

impl Payload {
    /// A payload that copies `data` once, as `put`'s copy-in semantics require.
    pub fn copy_from(data: &[u8], codec: Codec) -> Payload {
        Payload { data: Bytes::copy_from_slice(data), codec }
    }

    /// Size counted against a channel's byte bound.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// `true` for a zero-length payload.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl From<&[u8]> for Payload {
    fn from(data: &[u8]) -> Self {
        Payload::copy_from(data, Codec::Raw)
    }
}

impl From<&str> for Payload {
    fn from(text: &str) -> Self {
        Payload::copy_from(text.as_bytes(), Codec::Utf8)
    }
}

impl From<Vec<u8>> for Payload {
    /// Takes ownership of the vector without copying it.
    fn from(data: Vec<u8>) -> Self {
        Payload { data: Bytes::from(data), codec: Codec::Raw }
    }
}

impl From<Bytes> for Payload {
    fn from(data: Bytes) -> Self {
        Payload { data, codec: Codec::Raw }
    }
}

/// An item as a getter sees it: its timestamp and a read-only view of its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The item's timestamp.
    pub ts: Timestamp,
    /// The stored payload (shared, never copied on get).
    pub payload: Payload,
}

impl Item {
    /// The item's bytes (zero-copy view).
    pub fn data(&self) -> &Bytes {
        &self.payload.data
    }

    /// The item's codec.
    pub fn codec(&self) -> &Codec {
        &self.payload.codec
    }
}
