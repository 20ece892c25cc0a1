//! What viewers and items feed the dashboard and the Foxglove bridge: a Foxglove viewer's text
//! messages and a browser's `Authorization` header (before any check of who sends them); and any
//! putter's item, which the dashboard draws as a frame or boxes and the bridge and recordings
//! convert to Foxglove's messages.
//!
//! Checked on every input, besides "no panic": a frame message is its header and exactly its
//! pixels; an overlay keeps at most its bound of boxes.

use bytes::Bytes;
use stampede::{Codec, Item, Payload};
use stampede_dashboard::{decoders, foxglove, BOXES_MAX, FRAME_HEADER_BYTES};
use stampede_view::foxglove::{Kind, Tick};
use stampede_view::image::decode_overlay;

use crate::steps::steps;

/// A viewer's message (as text, if it is UTF-8) and an `Authorization` header's value.
pub fn viewer(input: &[u8]) {
    if let Ok(text) = std::str::from_utf8(input) {
        let _ = foxglove::read_client_message(text);
    }
    if let Some((user, _password)) = decoders::credentials(input) {
        assert!(!user.contains(':'), "a user name ends at the first colon");
    }
}

/// Items of every codec (one per step: the tag picks the codec, the body is the payload) as the
/// dashboard and the Foxglove bridge read them.
pub fn items(input: &[u8]) {
    const CODECS: [&str; 5] = ["npy", "json", "utf8", "raw", "x-other"];
    for (ts, (tag, data)) in steps(input).enumerate() {
        let codec = Codec::from_name(CODECS[usize::from(tag) % CODECS.len()]);
        let item = Item { ts: ts as i64, payload: Payload { data: Bytes::copy_from_slice(data), codec } };
        if let Ok(([width, height, channels], length)) = decoders::frame("fuzz", &item) {
            assert_eq!(length, FRAME_HEADER_BYTES + width * height * channels, "a frame is its header and its pixels");
        }
        if let Ok((boxes, _skipped)) = decode_overlay("fuzz", &item) {
            assert!(boxes.len() <= BOXES_MAX, "{} boxes kept", boxes.len());
        }
        for kind in [Kind::Image, Kind::Annotations, Kind::Log, Kind::Json] {
            let _ = kind.encode("fuzz", &item, Tick::Nanos);
        }
        if let Some(kind) = Kind::of_item(&item) {
            let _ = kind.encode("fuzz", &item, Tick::Nanos);
        }
    }
}
