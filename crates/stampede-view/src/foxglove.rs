//! What a channel becomes in Foxglove, and each item's message (pure): what the live bridge
//! (`stampede_dashboard::foxglove`) sends and what a recording made for Foxglove holds beside
//! the raw items (`stampede_record`).
//!
//! A live channel's kind is chosen when it is advertised, from its declared codec and the
//! bridge's options ([`Kind::of`]):
//!
//! | channel | Foxglove schema | each item |
//! |---|---|---|
//! | codec `npy` | `foxglove.RawImage` (protobuf) | `uint8` (H, W), (H, W, 1), (H, W, 3), (H, W, 4) as `mono8`, `rgb8`, `rgba8`; any other array goes on its values topic instead (next row), and said once in a status |
//! | codec `npy`, its values topic `<name>#values` ([`Kind::Values`]) | schemaless JSON | the arrays that are no image, as `{"dtype", "shape", "values"}` when small, else by dtype, shape, size and why |
//! | codec `json`, named as an overlay | `foxglove.ImageAnnotations` (protobuf) | each box a closed polygon, its label a text |
//! | codec `utf8` | `foxglove.Log` (protobuf) | the text, level info, the channel as its name |
//! | codec `json`, or none declared | schemaless JSON | JSON as it is; text as `{"text"}`; `.npy` as `{"dtype", "shape", "values"}` when small ([`array`](crate::array)), else by dtype, shape, size and why; other codecs by name and size |
//! | another codec (`raw`, an application's own) | not advertised | listed in a status, with the reason |
//!
//! A recording converts item by item ([`Kind::of_item`]): `npy` frames, other `npy` arrays (as
//! JSON, on the values topic as live), JSON documents with `boxes`, and text; the rest is left as
//! it is.
//!
//! Timestamps go on Foxglove's timeline through a [`Tick`]: a frame number times a tick in
//! seconds, or nanoseconds as they are. Log time and each message's own timestamp are the same.

use std::collections::BTreeMap;

use foxglove::messages::{
    log, points_annotation, Color, ImageAnnotations, Log, Point2, PointsAnnotation, RawImage, TextAnnotation,
    Timestamp as FoxgloveTime,
};
use foxglove::Encode;
use serde_json::json;
use stampede::{Codec, Info, Item, Timestamp};

use crate::image::{decode_overlay, pixels, OVERLAY_BYTES_MAX};

/// How a channel's timestamps become Foxglove's nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tick {
    /// Timestamps are frame numbers, each this many seconds after the one before.
    Seconds(f64),
    /// Timestamps are nanoseconds already.
    Nanos,
}

impl Tick {
    /// Thirty frames a second: what cameras paced by `Pacer` number by default.
    pub const DEFAULT: Tick = Tick::Seconds(1.0 / 30.0);

    /// Nanoseconds on Foxglove's timeline of `ts` (timestamps below zero at zero, beyond the
    /// timeline at its end).
    pub fn nanos(self, ts: Timestamp) -> u64 {
        let ts = ts.max(0);
        match self {
            Tick::Nanos => ts as u64,
            // `as` saturates: a product beyond u64 lands at the end of the timeline.
            Tick::Seconds(seconds) => (ts as f64 * seconds * 1e9) as u64,
        }
    }

    /// Parses `ns` or a positive number of seconds.
    pub fn parse(text: &str) -> Result<Tick, String> {
        if text == "ns" {
            return Ok(Tick::Nanos);
        }
        match text.parse::<f64>() {
            Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(Tick::Seconds(seconds)),
            _ => Err(format!("tick \"{text}\": give seconds per timestamp (0.0333 for 30 fps) or ns")),
        }
    }
}

/// What a channel's values topic is named after it: a name never holds `#`, so no channel's
/// topic is another's values topic.
pub const VALUES_TOPIC_SUFFIX: &str = "#values";

/// What a channel is shown as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Image,
    /// The arrays of an `npy` channel that are no image, as JSON, on a topic of their own beside
    /// its images ([`Kind::beside`]): a Foxglove channel has one schema.
    Values,
    Annotations,
    Log,
    Json,
}

impl Kind {
    /// The kind of the channel `info` describes (`overlay`: named as one), or why it is not
    /// advertised.
    pub fn of(info: &Info, overlay: bool) -> Result<Kind, String> {
        if info.kind != "channel" {
            return Err(format!("\"{}\" is a queue: reading it would take its items from their consumers", info.name));
        }
        match (&info.codec, overlay) {
            (Some(Codec::Json), true) => Ok(Kind::Annotations),
            (_, true) => Err(format!("overlay \"{}\" must declare codec json", info.name)),
            (Some(Codec::Npy), false) => Ok(Kind::Image),
            (Some(Codec::Utf8), false) => Ok(Kind::Log),
            (Some(Codec::Json) | None, false) => Ok(Kind::Json),
            (Some(codec), false) => Err(format!(
                "\"{}\" carries codec \"{}\", which Foxglove cannot draw (npy images, json, utf8 are shown)",
                info.name,
                codec.name()
            )),
        }
    }

    /// The kind advertised beside a channel of this kind, on a topic of its own: an `npy`
    /// channel's values beside its images.
    pub fn beside(self) -> Option<Kind> {
        (self == Kind::Image).then_some(Kind::Values)
    }

    /// The topic of `channel`'s messages of this kind.
    pub fn topic(self, channel: &str) -> String {
        match self {
            Kind::Values => format!("{channel}{VALUES_TOPIC_SUFFIX}"),
            _ => channel.to_owned(),
        }
    }

    /// Whether `item` goes on this kind's topic: a values topic takes only the arrays that are
    /// no image (the images go on the image topic beside it); the others take every item.
    pub fn shows(self, item: &Item) -> bool {
        self != Kind::Values || pixels("image", "", item).is_err()
    }

    /// What a recording writes beside `item` for Foxglove to draw: an image for an `npy` frame,
    /// its values for another `npy` array ([`Kind::Values`], as live: JSON, the values if small,
    /// [`array`](crate::array)), annotations for a JSON document with `boxes`, a log line for
    /// text; `None` for anything else (Foxglove shows JSON as it is).
    pub fn of_item(item: &Item) -> Option<Kind> {
        match item.codec() {
            Codec::Npy if crate::image::pixels("image", "", item).is_err() => Some(Kind::Values),
            Codec::Npy => Some(Kind::Image),
            Codec::Utf8 => Some(Kind::Log),
            Codec::Json if item.data().len() <= OVERLAY_BYTES_MAX && has_boxes(item.data()) => Some(Kind::Annotations),
            _ => None,
        }
    }

    /// The Foxglove schema of its messages (`None`: schemaless JSON).
    pub fn schema(self) -> Option<foxglove::Schema> {
        match self {
            Kind::Image => RawImage::get_schema(),
            Kind::Annotations => ImageAnnotations::get_schema(),
            Kind::Log => Log::get_schema(),
            Kind::Json | Kind::Values => None,
        }
    }

    /// Its messages' encoding: `"protobuf"` or `"json"`.
    pub fn message_encoding(self) -> &'static str {
        match self {
            Kind::Json | Kind::Values => "json",
            _ => "protobuf",
        }
    }

    /// The message of `item` of `channel` for this kind, or why it is skipped.
    pub fn encode(self, channel: &str, item: &Item, tick: Tick) -> Result<Vec<u8>, String> {
        let time = foxglove_time(tick.nanos(item.ts));
        match self {
            Kind::Image => {
                // Where it is shown instead goes with the reason.
                let values = Kind::Values.topic(channel);
                let hint = format!("arrays that are no image are shown as JSON on topic \"{values}\"");
                let image = pixels("image", channel, item).map_err(|why| format!("{why}; {hint}"))?;
                let encoding = match image.channels {
                    1 => "mono8",
                    3 => "rgb8",
                    _ => "rgba8",
                };
                let message = RawImage {
                    timestamp: Some(time),
                    frame_id: channel.to_owned(),
                    // Sides are at most FRAME_SIDE_MAX (checked by `pixels`): they fit.
                    width: image.width as u32,
                    height: image.height as u32,
                    encoding: encoding.to_owned(),
                    step: (image.width * image.channels) as u32,
                    data: image.data,
                };
                Ok(protobuf(&message))
            }
            Kind::Annotations => {
                let (boxes, _dropped) = decode_overlay(channel, item)?;
                let mut message = ImageAnnotations { timestamp: Some(time), ..ImageAnnotations::default() };
                for b in boxes {
                    let color = b.color.as_deref().and_then(css_color).unwrap_or(GREEN);
                    let corners = [(b.x, b.y), (b.x + b.w, b.y), (b.x + b.w, b.y + b.h), (b.x, b.y + b.h)];
                    message.points.push(PointsAnnotation {
                        timestamp: Some(time),
                        r#type: points_annotation::Type::LineLoop as i32,
                        points: corners.iter().map(|&(x, y)| Point2 { x, y }).collect(),
                        outline_color: Some(color),
                        thickness: 2.0,
                        ..PointsAnnotation::default()
                    });
                    if let Some(label) = b.label {
                        message.texts.push(TextAnnotation {
                            timestamp: Some(time),
                            position: Some(Point2 { x: b.x, y: b.y }),
                            text: label,
                            font_size: 14.0,
                            text_color: Some(color),
                            background_color: Some(Color { r: 0.0, g: 0.0, b: 0.0, a: 0.6 }),
                            ..TextAnnotation::default()
                        });
                    }
                }
                Ok(protobuf(&message))
            }
            Kind::Log => {
                let text = std::str::from_utf8(item.data())
                    .map_err(|e| format!("\"{channel}\" ts={}: not UTF-8 text: {e}", item.ts))?;
                let message = Log {
                    timestamp: Some(time),
                    level: log::Level::Info as i32,
                    message: text.to_owned(),
                    name: channel.to_owned(),
                    ..Log::default()
                };
                Ok(protobuf(&message))
            }
            Kind::Json | Kind::Values => Ok(json_message(item)),
        }
    }
}

/// Whether a JSON document has a `boxes` array at its top (an overlay).
fn has_boxes(data: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(data).is_ok_and(|doc| doc.get("boxes").is_some_and(|b| b.is_array()))
}

/// The colour boxes without one (or with one not written `#rgb` or `#rrggbb`) are drawn in.
const GREEN: Color = Color { r: 0.0, g: 1.0, b: 0.0, a: 1.0 };

/// A CSS colour written `#rgb` or `#rrggbb`, or a few common names.
fn css_color(text: &str) -> Option<Color> {
    let named = BTreeMap::from([
        ("red", "#f00"),
        ("lime", "#0f0"),
        ("green", "#080"),
        ("blue", "#00f"),
        ("yellow", "#ff0"),
        ("cyan", "#0ff"),
        ("magenta", "#f0f"),
        ("white", "#fff"),
        ("black", "#000"),
        ("orange", "#ffa500"),
    ]);
    let hex = named.get(text.to_ascii_lowercase().as_str()).copied().unwrap_or(text).strip_prefix('#')?;
    let digits: Vec<u8> = hex.chars().map(|c| c.to_digit(16).map(|d| d as u8)).collect::<Option<_>>()?;
    let (r, g, b) = match digits[..] {
        [r, g, b] => (r * 17, g * 17, b * 17),
        [r1, r2, g1, g2, b1, b2] => (r1 * 16 + r2, g1 * 16 + g2, b1 * 16 + b2),
        _ => return None,
    };
    Some(Color { r: f64::from(r) / 255.0, g: f64::from(g) / 255.0, b: f64::from(b) / 255.0, a: 1.0 })
}

/// `nanos` as Foxglove's timestamp (seconds beyond u32 saturate: year 2106).
fn foxglove_time(nanos: u64) -> FoxgloveTime {
    let seconds = u32::try_from(nanos / 1_000_000_000).unwrap_or(u32::MAX);
    FoxgloveTime::new(seconds, (nanos % 1_000_000_000) as u32)
}

/// `message` in protobuf (an image's pixels are copied once, here).
fn protobuf(message: &impl Encode) -> Vec<u8> {
    let mut buf = Vec::with_capacity(message.encoded_len().unwrap_or(256));
    // Encoding into a growable buffer cannot run out of room.
    message.encode(&mut buf).expect("a growable buffer takes any message");
    buf
}

/// An item of a schemaless JSON channel: JSON as it is, anything else described.
fn json_message(item: &Item) -> Vec<u8> {
    let data = item.data();
    let described = match item.codec() {
        Codec::Json if serde_json::from_slice::<serde::de::IgnoredAny>(data).is_ok() => return data.to_vec(),
        Codec::Utf8 => match std::str::from_utf8(data) {
            Ok(text) => json!({ "text": text }),
            Err(_) => json!({ "codec": "utf8", "bytes": data.len(), "shown": "not UTF-8" }),
        },
        Codec::Npy => match (crate::array::values(data), stampede::npy::header(data)) {
            (Ok(shown), _) => shown,
            (Err(why), Ok(header)) => {
                json!({ "dtype": header.plain_descr(), "shape": header.shape, "bytes": data.len(), "shown": why })
            }
            (Err(why), Err(_)) => json!({ "codec": "npy", "bytes": data.len(), "shown": why }),
        },
        codec => json!({ "codec": codec.name(), "bytes": data.len() }),
    };
    described.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use foxglove::Decode;
    use stampede::{Limits, Payload};

    fn info(codec: Option<Codec>) -> Info {
        Info {
            name: "cam".into(),
            kind: "channel",
            node: None,
            limits: Limits::unbounded(),
            codec,
            description: String::new(),
        }
    }

    fn item(ts: Timestamp, data: Vec<u8>, codec: Codec) -> Item {
        Item { ts, payload: Payload { data: data.into(), codec } }
    }

    /// A channel's codec chooses its schema; a queue or an opaque codec is refused with why.
    #[test]
    fn a_channels_codec_chooses_its_schema() {
        assert_eq!(Kind::of(&info(Some(Codec::Npy)), false), Ok(Kind::Image));
        assert_eq!(Kind::of(&info(Some(Codec::Json)), true), Ok(Kind::Annotations));
        assert_eq!(Kind::of(&info(Some(Codec::Utf8)), false), Ok(Kind::Log));
        assert_eq!(Kind::of(&info(None), false), Ok(Kind::Json));
        assert!(Kind::of(&info(Some(Codec::Raw)), false).unwrap_err().contains("codec \"raw\""));
        assert!(Kind::of(&info(Some(Codec::Npy)), true).unwrap_err().contains("codec json"));
        let queue = Info { kind: "queue", ..info(Some(Codec::Json)) };
        assert!(Kind::of(&queue, false).unwrap_err().contains("queue"));
        let schema = Kind::Image.schema().unwrap();
        assert_eq!((schema.name.as_str(), Kind::Image.message_encoding()), ("foxglove.RawImage", "protobuf"));
        assert!(!schema.data.is_empty() && Kind::Json.schema().is_none());
    }

    /// An RGB frame becomes a RawImage with its pixels, its size and its time.
    #[test]
    fn an_rgb_frame_becomes_a_raw_image() {
        let pixels: Vec<u8> = (0..2 * 3 * 3).collect();
        let mut data = stampede::npy::encode_header("'|u1'", &[2, 3, 3]).unwrap();
        data.extend_from_slice(&pixels);
        let message = Kind::Image.encode("cam", &item(45, data, Codec::Npy), Tick::DEFAULT).unwrap();
        let image = RawImage::decode(&message[..]).unwrap();
        assert_eq!((image.width, image.height, image.step, image.encoding.as_str()), (3, 2, 9, "rgb8"));
        assert_eq!(&image.data[..], &pixels[..]);
        assert_eq!(image.timestamp.unwrap().total_nanos(), 1_500_000_000);
        let float = stampede::npy::encode_header("'<f4'", &[1, 1]).unwrap();
        let refused = Kind::Image.encode("cam", &item(1, [float, vec![0; 4]].concat(), Codec::Npy), Tick::Nanos);
        let refused = refused.unwrap_err();
        assert!(refused.contains("uint8") && refused.contains("topic \"cam#values\""), "{refused}");
    }

    /// An `npy` channel's arrays that are no image go on its values topic beside its images, as
    /// JSON; its images do not.
    #[test]
    fn arrays_that_are_no_image_go_on_the_values_topic() {
        assert_eq!(Kind::Image.beside(), Some(Kind::Values));
        assert!([Kind::Values, Kind::Annotations, Kind::Log, Kind::Json].iter().all(|k| k.beside().is_none()));
        assert_eq!((Kind::Image.topic("cam"), Kind::Values.topic("cam")), ("cam".into(), "cam#values".into()));
        assert!(stampede::name::check_name("test", "cam#values").is_err(), "a values topic is never a channel's name");
        let frame = item(0, stampede::npy::encode("'|u1'", &[1, 1], &[7]).unwrap(), Codec::Npy);
        let state = item(1, stampede::npy::encode("'<f4'", &[2], &[0, 0, 128, 63, 0, 0, 0, 64]).unwrap(), Codec::Npy);
        assert!(Kind::Image.shows(&frame) && Kind::Image.shows(&state));
        assert!(!Kind::Values.shows(&frame) && Kind::Values.shows(&state));
        assert!(Kind::Values.schema().is_none() && Kind::Values.message_encoding() == "json");
        let message = Kind::Values.encode("cam", &state, Tick::Nanos).unwrap();
        let shown: serde_json::Value = serde_json::from_slice(&message).unwrap();
        assert_eq!(shown, serde_json::json!({ "dtype": "<f4", "shape": [2], "values": [1.0, 2.0] }));
    }

    /// Boxes become closed polygons in their colour, labels texts.
    #[test]
    fn boxes_become_annotations() {
        let text = r##"{"boxes": [{"x": 1, "y": 2, "w": 3, "h": 4, "label": "face", "color": "#f00"}]}"##;
        let message = Kind::Annotations.encode("boxes", &item(7, text.into(), Codec::Json), Tick::Nanos).unwrap();
        let annotations = ImageAnnotations::decode(&message[..]).unwrap();
        let polygon = &annotations.points[0];
        assert_eq!(
            polygon.points.iter().map(|p| (p.x, p.y)).collect::<Vec<_>>(),
            [(1., 2.), (4., 2.), (4., 6.), (1., 6.)]
        );
        assert_eq!(polygon.outline_color, Some(Color { r: 1.0, g: 0.0, b: 0.0, a: 1.0 }));
        assert_eq!(annotations.texts[0].text, "face");
        assert_eq!(annotations.timestamp.unwrap().total_nanos(), 7);
    }

    /// JSON goes as it is; text and arrays in a schemaless channel are described in JSON.
    #[test]
    fn schemaless_json_shows_every_payload() {
        let doc = br#"{"a": 1}"#.to_vec();
        assert_eq!(Kind::Json.encode("c", &item(1, doc.clone(), Codec::Json), Tick::Nanos).unwrap(), doc);
        let text = Kind::Json.encode("c", &item(1, b"hi".to_vec(), Codec::Utf8), Tick::Nanos).unwrap();
        assert_eq!(text, br#"{"text":"hi"}"#);
        let mut npy = stampede::npy::encode_header("'<f4'", &[2]).unwrap();
        npy.extend_from_slice(&[0, 0, 128, 63, 0, 0, 0, 64]);
        let shown = |npy| -> serde_json::Value {
            serde_json::from_slice(&Kind::Json.encode("c", &item(1, npy, Codec::Npy), Tick::Nanos).unwrap()).unwrap()
        };
        assert_eq!(shown(npy), serde_json::json!({ "dtype": "<f4", "shape": [2], "values": [1.0, 2.0] }));
        let mut large = stampede::npy::encode_header("'|u1'", &[crate::array::VALUES_MAX + 1]).unwrap();
        large.resize(large.len() + crate::array::VALUES_MAX + 1, 0);
        let described = shown(large);
        assert_eq!((described["dtype"].as_str(), described["values"].is_null()), (Some("|u1"), true));
        assert!(described["shown"].as_str().unwrap().contains("at most"), "{described}");
        let log = Log::decode(&Kind::Log.encode("c", &item(1, b"ok".to_vec(), Codec::Utf8), Tick::Nanos).unwrap()[..]);
        assert_eq!(log.unwrap().message, "ok");
    }

    /// A recording converts frames, overlays and text, and leaves other JSON and bytes as they are.
    #[test]
    fn a_recording_converts_what_foxglove_draws() {
        let npy = stampede::npy::encode_header("'|u1'", &[1, 1]).unwrap();
        assert_eq!(Kind::of_item(&item(0, [npy, vec![0]].concat(), Codec::Npy)), Some(Kind::Image));
        let state = stampede::npy::encode_header("'<f4'", &[1]).unwrap();
        assert_eq!(Kind::of_item(&item(0, [state, vec![0; 4]].concat(), Codec::Npy)), Some(Kind::Values));
        assert_eq!(Kind::of_item(&item(0, br#"{"boxes": []}"#.to_vec(), Codec::Json)), Some(Kind::Annotations));
        assert_eq!(Kind::of_item(&item(0, br#"{"blobs": []}"#.to_vec(), Codec::Json)), None);
        assert_eq!(Kind::of_item(&item(0, b"[1]".to_vec(), Codec::Json)), None);
        assert_eq!(Kind::of_item(&item(0, b"hi".to_vec(), Codec::Utf8)), Some(Kind::Log));
        assert_eq!(Kind::of_item(&item(0, b"hi".to_vec(), Codec::Raw)), None);
    }

    /// Ticks: frame numbers times seconds, or nanoseconds; anything else is refused.
    #[test]
    fn ticks_map_timestamps_to_nanoseconds() {
        assert_eq!(Tick::parse("0.5").unwrap().nanos(3), 1_500_000_000);
        assert_eq!(Tick::parse("ns").unwrap().nanos(42), 42);
        assert_eq!(Tick::Nanos.nanos(-5), 0);
        assert_eq!(Tick::Seconds(1e9).nanos(i64::MAX), u64::MAX);
        for bad in ["0", "-1", "NaN", "inf", "fast"] {
            assert!(Tick::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(css_color("lime"), Some(Color { r: 0.0, g: 1.0, b: 0.0, a: 1.0 }));
        assert_eq!(css_color("#zzz"), None);
    }
}
