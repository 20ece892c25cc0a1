//! Frames and overlay boxes read from items, as every viewer of the project draws them (the
//! dashboard's page, Foxglove). Pure, and it never panics: every refusal is a message naming the
//! rule, for the viewer to show.
//!
//! - A **frame** is an `.npy` `uint8` array, C order, of shape (H, W), (H, W, 1) (grey), (H, W, 3)
//!   (RGB) or (H, W, 4) (RGBA), each side at most [`FRAME_SIDE_MAX`], at most [`FRAME_BYTES_MAX`]
//!   of pixels ([`pixels`]).
//! - An **overlay** item is the JSON `{"boxes": [{"x", "y", "w", "h", "label", "color"}]}` in the
//!   image's pixel coordinates, at most [`OVERLAY_BYTES_MAX`], with at most [`BOXES_MAX`] boxes
//!   kept ([`decode_overlay`]).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use stampede::{Codec, Item};

/// Largest image frame read, in pixel bytes (height × width × channels): 4K RGBA fits.
pub const FRAME_BYTES_MAX: usize = 32 << 20;
/// Largest image height or width read.
pub const FRAME_SIDE_MAX: usize = 8192;
/// Largest overlay item read, in bytes.
pub const OVERLAY_BYTES_MAX: usize = 256 << 10;
/// Most boxes kept from one overlay item (the rest are dropped and counted).
pub const BOXES_MAX: usize = 256;
/// The dtypes accepted for a frame, as `.npy` writes them.
const UINT8_DESCRS: [&str; 3] = ["'|u1'", "'<u1'", "'>u1'"];
/// Longest label kept on a box, in characters.
const LABEL_CHARS_MAX: usize = 64;
/// Longest colour kept on a box, in bytes (CSS colours are short).
const COLOR_BYTES_MAX: usize = 32;

/// An image item's pixels: rows of `width` × `channels` bytes, top to bottom (a view of the
/// item's bytes, not a copy).
#[derive(Clone, Debug)]
pub struct Pixels {
    pub width: usize,
    pub height: usize,
    /// 1 (grey), 3 (RGB) or 4 (RGBA).
    pub channels: usize,
    pub data: Bytes,
}

/// The pixels of an image item of `channel` (`what` names its role in a refusal), or why it is
/// not a frame: `.npy` `uint8`, C order, (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), each side at
/// most [`FRAME_SIDE_MAX`], at most [`FRAME_BYTES_MAX`] of pixels.
pub fn pixels(what: &str, channel: &str, item: &Item) -> Result<Pixels, String> {
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

/// One box over the image, in the image's pixel coordinates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverlayBox {
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
pub fn decode_overlay(channel: &str, item: &Item) -> Result<(Vec<OverlayBox>, usize), String> {
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
        let data = stampede::npy::encode(descr, shape, data).unwrap().into();
        Item { ts: 7, payload: Payload { data, codec: Codec::Npy } }
    }

    /// A frame's pixels are a view of the item's, unchanged.
    #[test]
    fn a_frames_pixels_are_the_items() {
        let data: Vec<u8> = (0..2 * 3 * 3).collect();
        let image = pixels("image", "cam", &npy("'|u1'", &[2, 3, 3], &data)).unwrap();
        assert_eq!((image.width, image.height, image.channels), (3, 2, 3));
        assert_eq!(&image.data[..], &data[..]);
    }

    /// Other dtypes, shapes and codecs are refused with a message naming the rule.
    #[test]
    fn wrong_frames_are_refused_with_a_reason() {
        let float = pixels("image", "cam", &npy("'<f4'", &[1, 1], &[0; 4])).unwrap_err();
        assert!(float.contains("uint8"), "{float}");
        let shape = pixels("image", "cam", &npy("'|u1'", &[1, 1, 2], &[0; 2])).unwrap_err();
        assert!(shape.contains("shape"), "{shape}");
        let raw = Item { ts: 1, payload: Payload::from(&b"hello"[..]) };
        assert!(pixels("image", "cam", &raw).unwrap_err().contains("codec \"raw\""));
        let short = pixels("image", "cam", &npy("'|u1'", &[2, 2], &[0; 3])).unwrap_err();
        assert!(short.contains(".npy"), "{short}");
    }
}
