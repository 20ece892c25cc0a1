//! Items as ROS 2 messages, for a recording written as a ROS 2 bag (`stampede record --ros2`):
//!
//! | item | message |
//! |---|---|
//! | `npy` `uint8` frame (H, W), (H, W, 1), (H, W, 3), (H, W, 4) | `sensor_msgs/msg/Image`, `mono8`, `rgb8`, `rgba8`; header stamp = the timestamp times the tick, `frame_id` = the channel's name |
//! | `json`, `utf8` | `std_msgs/msg/String` |
//! | `ros2:<type>` | the CDR bytes as they are, typed `<type>` (its definition is not known here: the schema is empty) |
//! | anything else (`raw`, other arrays, an application's codec) | not written; counted |

use stampede::{Codec, Item};
use stampede_view::foxglove::Tick;
use stampede_view::image::pixels;

use super::cdr::CdrWriter;
use super::{CODEC_PREFIX, IMAGE, STRING};

/// The `ros2msg` definition of `sensor_msgs/msg/Image` with its dependencies, as rosbag2 writes it.
pub const IMAGE_DEFINITION: &str = "std_msgs/Header header
uint32 height
uint32 width
string encoding
uint8 is_bigendian
uint32 step
uint8[] data

================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id

================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
";

/// The `ros2msg` definition of `std_msgs/msg/String`.
pub const STRING_DEFINITION: &str = "string data\n";

/// A ROS 2 message made of an item.
#[derive(Debug)]
pub struct Message {
    /// Its type, `sensor_msgs/msg/Image`, …
    pub type_name: String,
    /// The type's `ros2msg` definition (empty when not known).
    pub definition: &'static str,
    /// The CDR message.
    pub data: Vec<u8>,
}

/// `item` of channel `name` as a ROS 2 message, timed by `tick`; or why it has none.
pub fn message(name: &str, item: &Item, tick: Tick) -> Result<Message, String> {
    match item.codec() {
        Codec::Npy => {
            let image = pixels("image", name, item)?;
            let encoding = match image.channels {
                1 => "mono8",
                3 => "rgb8",
                _ => "rgba8",
            };
            let nanos = tick.nanos(item.ts);
            let mut w = CdrWriter::default();
            // Seconds beyond i32 (year 2038) saturate: ROS 2's Time cannot say more.
            w.i32(i32::try_from(nanos / 1_000_000_000).unwrap_or(i32::MAX));
            w.u32((nanos % 1_000_000_000) as u32);
            w.string(name).ok_or("the channel's name is too long for CDR")?;
            // Sides are bounded by FRAME_SIDE_MAX (checked by `pixels`): they fit.
            w.u32(image.height as u32);
            w.u32(image.width as u32);
            w.string(encoding).expect("a short literal");
            w.u8(0);
            w.u32((image.width * image.channels) as u32);
            w.bytes(&image.data).ok_or("more pixels than CDR can count")?;
            Ok(Message { type_name: IMAGE.to_owned(), definition: IMAGE_DEFINITION, data: w.finish() })
        }
        Codec::Json | Codec::Utf8 => {
            let text =
                std::str::from_utf8(item.data()).map_err(|e| format!("{name} ts={}: not UTF-8: {e}", item.ts))?;
            let mut w = CdrWriter::default();
            w.string(text).ok_or("a text too long for CDR")?;
            Ok(Message { type_name: STRING.to_owned(), definition: STRING_DEFINITION, data: w.finish() })
        }
        Codec::Other(codec) if codec.starts_with(CODEC_PREFIX) => Ok(Message {
            type_name: codec[CODEC_PREFIX.len()..].to_owned(),
            definition: "",
            data: item.data().to_vec(),
        }),
        codec => Err(format!("codec {:?} has no ROS 2 message", codec.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Ros2Type;
    use super::*;
    use stampede::Payload;

    /// What is written reads back: a frame, a text, a ROS 2 message kept as bytes.
    #[test]
    fn messages_read_back_as_the_items() {
        let mut frame = stampede::npy::encode_header("'|u1'", &[2, 3, 4]).unwrap();
        frame.extend(0..24u8);
        let item = Item { ts: 3, payload: Payload { data: frame.clone().into(), codec: Codec::Npy } };
        let image = message("cam", &item, Tick::Seconds(0.5)).unwrap();
        let (back, stamp) = Ros2Type::new(&image.type_name, image.definition).item(&image.data).unwrap();
        assert_eq!((back, stamp), (frame, Some(1_500_000_000)));
        let text = Item { ts: 1, payload: Payload::from("hi") };
        let string = message("log", &text, Tick::Nanos).unwrap();
        assert_eq!(Ros2Type::new(STRING, "").item(&string.data).unwrap().0, b"hi");
        let imu = Item {
            ts: 1,
            payload: Payload { data: vec![0, 1, 0, 0, 9].into(), codec: Codec::from_name("ros2:sensor_msgs/msg/Imu") },
        };
        let kept = message("imu", &imu, Tick::Nanos).unwrap();
        assert_eq!((kept.type_name.as_str(), &kept.data[..]), ("sensor_msgs/msg/Imu", &[0, 1, 0, 0, 9][..]));
        let raw = Item { ts: 1, payload: Payload::from(&b"\x00"[..]) };
        assert!(message("x", &raw, Tick::Nanos).unwrap_err().contains("raw"));
    }
}
