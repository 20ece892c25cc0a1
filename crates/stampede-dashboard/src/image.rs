//! What the page draws: `.npy` frames turned into the binary WebSocket message, and overlay
//! items turned into boxes.
//!
//! A frame message is raw pixels after a 24-byte header, all little-endian:
//!
//! | bytes  | field |
//! |--------|-------|
//! | 0..4   | magic `STPF` |
//! | 4..12  | the frame's timestamp, i64 |
//! | 12..16 | width, u32 |
//! | 16..20 | height, u32 |
//! | 20     | channels: 1 (grey), 3 (RGB) or 4 (RGBA) |
//! | 21..24 | zero |
//! | 24..   | height × width × channels bytes, row-major |
//!
//! Raw rather than PNG: the page is meant for this machine or a LAN (a 640×480 RGB frame five
//! times a second is 4.6 MB/s), raw costs no encoding time on the sampling thread and no
//! dependency, and a test can compare the pixels byte for byte. The page expands them to RGBA.
//!
//! Decoding never panics: every refusal is a message naming the rule, shown on the page.

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use stampede::{Codec, Item, Timestamp};

use crate::{BOXES_MAX, FRAME_BYTES_MAX, FRAME_SIDE_MAX, OVERLAY_BYTES_MAX};

/// The first four bytes of a frame message.
pub const FRAME_MAGIC: &[u8; 4] = b"STPF";
/// Length of a frame message's header; the pixels follow.
pub const FRAME_HEADER_BYTES: usize = 24;

/// The dtypes accepted for a frame, as `.npy` writes them.
const UINT8_DESCRS: [&str; 3] = ["'|u1'", "'<u1'", "'>u1'"];
/// Longest label kept on a box, in characters.
const LABEL_CHARS_MAX: usize = 64;
/// Longest colour kept on a box, in bytes (CSS colours are short).
const COLOR_BYTES_MAX: usize = 32;

/// A decoded frame, ready to send.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    pub ts: Timestamp,
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    /// The whole WebSocket message: header and pixels.
    pub message: Bytes,
}

/// An image item's pixels: rows of `width` × `channels` bytes, top to bottom (a view of the
/// item's bytes, not a copy).
#[derive(Clone, Debug)]
pub(crate) struct Pixels {
    pub width: usize,
    pub height: usize,
    /// 1 (grey), 3 (RGB) or 4 (RGBA).
    pub channels: usize,
    pub data: Bytes,
}

/// Turns an image item into a frame message, or says why it cannot be shown.
pub(crate) fn decode_frame(channel: &str, item: &Item) -> Result<Frame, String> {
    let Pixels { width, height, channels, data } = pixels("image", channel, item)?;
    Ok(Frame { ts: item.ts, width, height, channels, message: frame_message(item.ts, width, height, channels, &data) })
}

/// The pixels of an image item of `channel` (`what` names its role in a refusal), or why it is
/// not a frame: `.npy` `uint8`, C order, (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), each side at
/// most [`FRAME_SIDE_MAX`], at most [`FRAME_BYTES_MAX`] of pixels.
pub(crate) fn pixels(what: &str, channel: &str, item: &Item) -> Result<Pixels, String> {
    let refuse = |why: String| format!("{what} \"{channel}\" ts={}: {why}", item.ts);
    if *item.codec() != Codec::Npy {
        return Err(refuse(format!(
            "codec \"{}\"; the image channel must carry npy uint8 arrays of shape (H, W), (H, W, 3) or (H, W, 4)",
            item.codec()
        )));
    }
    let data = item.data();
    stampede::npy::check_payload(data).map_err(|e| refuse(format!("not a valid .npy payload: {e}")))?;
    let header = stampede::npy::header(data).map_err(|e| refuse(format!("not a valid .npy payload: {e}")))?;
    if !UINT8_DESCRS.contains(&header.descr.as_str()) {
        return Err(refuse(format!("dtype {}; frames must be uint8 ('|u1')", header.descr)));
    }
    if header.fortran_order {
        return Err(refuse("Fortran order; frames must be C-contiguous (row-major)".into()));
    }
    let (height, width, channels) = match header.shape[..] {
        [h, w] => (h, w, 1),
        [h, w, c] if matches!(c, 1 | 3 | 4) => (h, w, c),
        _ => {
            return Err(refuse(format!(
                "shape {:?}; frames are (H, W), (H, W, 1), (H, W, 3) or (H, W, 4)",
                header.shape
            )))
        }
    };
    if height == 0 || width == 0 || height > FRAME_SIDE_MAX || width > FRAME_SIDE_MAX {
        return Err(refuse(format!("{width}×{height} pixels; each side must be 1..={FRAME_SIDE_MAX}")));
    }
    // Both sides are at most FRAME_SIDE_MAX and channels at most 4: no overflow.
    let pixel_bytes = height * width * channels;
    if pixel_bytes > FRAME_BYTES_MAX {
        return Err(refuse(format!("{pixel_bytes} bytes of pixels; at most {FRAME_BYTES_MAX} are shown")));
    }
    // check_payload made sure the payload is exactly header + data bytes.
    debug_assert_eq!(header.data_bytes, pixel_bytes);
    let data = data.slice(header.data_offset..header.data_offset + pixel_bytes);
    Ok(Pixels { width, height, channels, data })
}

/// The binary WebSocket message of a frame (format in the module doc).
pub(crate) fn frame_message(ts: Timestamp, width: usize, height: usize, channels: usize, pixels: &[u8]) -> Bytes {
    assert_eq!(pixels.len(), width * height * channels, "pixels must fill the frame");
    let mut message = BytesMut::with_capacity(FRAME_HEADER_BYTES + pixels.len());
    message.put_slice(FRAME_MAGIC);
    message.put_i64_le(ts);
    message.put_u32_le(u32::try_from(width).expect("width is bounded by FRAME_SIDE_MAX"));
    message.put_u32_le(u32::try_from(height).expect("height is bounded by FRAME_SIDE_MAX"));
    message.put_u8(u8::try_from(channels).expect("channels is 1, 3 or 4"));
    message.put_slice(&[0; 3]);
    debug_assert_eq!(message.len(), FRAME_HEADER_BYTES);
    message.put_slice(pixels);
    message.freeze()
}

/// One box over the image, in the image's pixel coordinates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct OverlayBox {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    #[serde(default)]
    pub label: Option<String>,
    /// A CSS colour (`"#ff0000"`, `"lime"`); the page picks one when absent.
    #[serde(default)]
    pub color: Option<String>,
}

/// An overlay item as its producer writes it (other keys are ignored).
#[derive(Deserialize)]
struct OverlayDocument {
    #[serde(default)]
    boxes: Vec<OverlayBox>,
}

/// The boxes of an overlay item, at most [`BOXES_MAX`] (the second value: how many were
/// dropped), or why it cannot be read.
pub(crate) fn decode_overlay(channel: &str, item: &Item) -> Result<(Vec<OverlayBox>, usize), String> {
    let refuse = |why: String| format!("overlay \"{channel}\" ts={}: {why}", item.ts);
    let data = item.data();
    if data.len() > OVERLAY_BYTES_MAX {
        return Err(refuse(format!("{} bytes; at most {OVERLAY_BYTES_MAX} are read", data.len())));
    }
    let document: OverlayDocument = serde_json::from_slice(data).map_err(|e| {
        refuse(format!(
            "not the JSON {{\"boxes\": [{{\"x\", \"y\", \"w\", \"h\", \"label\", \"color\"}}]}} expected: {e}"
        ))
    })?;
    let mut boxes = document.boxes;
    let dropped = boxes.len().saturating_sub(BOXES_MAX);
    boxes.truncate(BOXES_MAX);
    for b in &mut boxes {
        if let Some(label) = &mut b.label {
            if label.chars().count() > LABEL_CHARS_MAX {
                *label = label.chars().take(LABEL_CHARS_MAX).collect();
            }
        }
        if b.color.as_ref().is_some_and(|c| c.len() > COLOR_BYTES_MAX) {
            b.color = None;
        }
    }
    Ok((boxes, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede::Payload;

    fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Item {
        let mut bytes = stampede::npy::encode_header(descr, shape).unwrap();
        bytes.extend_from_slice(data);
        Item { ts: 7, payload: Payload { data: bytes.into(), codec: Codec::Npy } }
    }

    /// An RGB frame becomes the header then its pixels, unchanged.
    #[test]
    fn rgb_frame_keeps_its_pixels() {
        let pixels: Vec<u8> = (0..2 * 3 * 3).collect();
        let frame = decode_frame("cam", &npy("'|u1'", &[2, 3, 3], &pixels)).unwrap();
        assert_eq!((frame.width, frame.height, frame.channels, frame.ts), (3, 2, 3, 7));
        assert_eq!(&frame.message[..4], FRAME_MAGIC);
        assert_eq!(i64::from_le_bytes(frame.message[4..12].try_into().unwrap()), 7);
        assert_eq!(&frame.message[FRAME_HEADER_BYTES..], &pixels[..]);
    }

    /// Other dtypes, shapes and codecs are refused with a message naming the rule.
    #[test]
    fn wrong_frames_are_refused_with_a_reason() {
        let float = decode_frame("cam", &npy("'<f4'", &[1, 1], &[0; 4])).unwrap_err();
        assert!(float.contains("uint8"), "{float}");
        let shape = decode_frame("cam", &npy("'|u1'", &[1, 1, 2], &[0; 2])).unwrap_err();
        assert!(shape.contains("shape"), "{shape}");
        let raw = Item { ts: 1, payload: Payload::from(&b"hello"[..]) };
        assert!(decode_frame("cam", &raw).unwrap_err().contains("codec \"raw\""));
        let short = decode_frame("cam", &npy("'|u1'", &[2, 2], &[0; 3])).unwrap_err();
        assert!(short.contains(".npy"), "{short}");
    }

    /// Overlays keep their boxes, bounded; anything else is a message.
    #[test]
    fn overlays_are_parsed_and_bounded() {
        let text = r#"{"boxes": [{"x": 1, "y": 2, "w": 3, "h": 4, "label": "face", "color": "red"}]}"#;
        let item = Item { ts: 3, payload: Payload::from(text) };
        let (boxes, dropped) = decode_overlay("boxes", &item).unwrap();
        assert_eq!((boxes.len(), dropped, boxes[0].label.as_deref()), (1, 0, Some("face")));
        let many = format!("{{\"boxes\": [{}]}}", vec![r#"{"x":0,"y":0,"w":1,"h":1}"#; BOXES_MAX + 5].join(","));
        let (boxes, dropped) = decode_overlay("boxes", &Item { ts: 3, payload: Payload::from(many.as_str()) }).unwrap();
        assert_eq!((boxes.len(), dropped), (BOXES_MAX, 5));
        let bad = Item { ts: 3, payload: Payload::from("[1, 2]") };
        assert!(decode_overlay("boxes", &bad).is_err());
    }
}
