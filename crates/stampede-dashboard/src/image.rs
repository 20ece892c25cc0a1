//! What the page draws: `.npy` frames turned into the binary WebSocket message (the frames and
//! overlay boxes themselves are read by `stampede_view::image`).
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

use bytes::{BufMut, Bytes, BytesMut};
use stampede::{Item, Timestamp};
use stampede_view::image::{pixels, Pixels};

/// The first four bytes of a frame message.
pub const FRAME_MAGIC: &[u8; 4] = b"STPF";
/// Length of a frame message's header; the pixels follow.
pub const FRAME_HEADER_BYTES: usize = 24;

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

/// Turns an image item into a frame message, or says why it cannot be shown.
pub(crate) fn decode_frame(channel: &str, item: &Item) -> Result<Frame, String> {
    let Pixels { width, height, channels, data } = pixels("image", channel, item)?;
    Ok(Frame { ts: item.ts, width, height, channels, message: frame_message(item.ts, width, height, channels, &data) })
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

#[cfg(test)]
mod tests {
    use super::*;
    use stampede::{Codec, Payload};

    fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Item {
        let data = stampede::npy::encode(descr, shape, data).unwrap().into();
        Item { ts: 7, payload: Payload { data, codec: Codec::Npy } }
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

    /// A frame that is not one is refused with the rule it breaks.
    #[test]
    fn wrong_frames_are_refused_with_a_reason() {
        let float = decode_frame("cam", &npy("'<f4'", &[1, 1], &[0; 4])).unwrap_err();
        assert!(float.starts_with("image \"cam\" ts=7") && float.contains("uint8"), "{float}");
    }
}
