//! `stampede tail <name> --connect <endpoint>`: follows a channel on a node, one line per item —
//! its timestamp, size and codec, then the text of a `utf8`/`json` item or the dtype and shape of
//! an `npy` one, with its values when they fit on the line (`stampede_view::array`). It reads `NEWEST_UNSEEN` (a slow terminal skips items rather than falling
//! behind) and consumes what it read at once, so it never holds the channel's ts_min back.

use std::io::Write;

use stampede::{Codec, ConnectOptions, Item, Runtime, INFINITY, NEWEST_UNSEEN};

/// Most characters of a text item shown on its line.
const TEXT_SHOWN_MAX: usize = 120;

/// What to follow and for how long.
pub struct Options {
    pub name: String,
    pub endpoint: String,
    /// Stop after this many items (`None`: until Ctrl-C, or the channel is destroyed).
    pub count: Option<u64>,
    /// The timeout, the node the channel is on (reached through `endpoint`) and TLS files.
    pub connect: ConnectOptions,
}

/// Connects, follows, prints; returns when `count` items were shown, on Ctrl-C, or when the
/// channel goes.
pub fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let rt = stampede::connect_with(&options.endpoint, &options.connect)?;
    let followed = follow(&rt, &options);
    rt.close();
    followed
}

fn follow(rt: &Runtime, options: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let channel = rt.channel(&options.name)?;
    let reader = rt.task(INFINITY)?;
    let input = reader.attach_input(&channel)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "following {} on node {}", options.name, rt.node().unwrap_or("?"))?;
    out.flush()?;
    let signals = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let mut shown = 0;
    while options.count.is_none_or(|count| shown < count) {
        let next = signals.block_on(async {
            tokio::select! {
                item = input.get_async(NEWEST_UNSEEN, None) => Some(item),
                _ = tokio::signal::ctrl_c() => None,
            }
        });
        let item = match next {
            None => break,
            Some(Err(stampede::Error::Closed { .. })) => {
                writeln!(out, "{} is gone", options.name)?;
                break;
            }
            Some(item) => item?,
        };
        input.consume_until(item.ts)?;
        writeln!(out, "{}", line(&item))?;
        out.flush()?;
        shown += 1;
    }
    Ok(())
}

/// One item's line: `ts=… size=… codec=…` and what its codec lets us show.
pub fn line(item: &Item) -> String {
    let head = format!("ts={} size={} codec={}", item.ts, item.data().len(), item.codec().name());
    let detail = match item.codec() {
        Codec::Utf8 | Codec::Json => {
            let text = String::from_utf8_lossy(item.data());
            let shown: String = text.chars().take(TEXT_SHOWN_MAX).collect();
            let more = if shown.len() < text.len() { "…" } else { "" };
            format!(" {shown:?}{more}")
        }
        Codec::Npy => match stampede::npy::header(item.data()) {
            Ok(header) => {
                // A small array's values, as JSON nested by its shape, when they fit on the line.
                let values = stampede_view::array::values(item.data()).ok().map(|shown| shown["values"].to_string());
                let values =
                    values.filter(|v| v.len() <= TEXT_SHOWN_MAX).map_or(String::new(), |v| format!(" values={v}"));
                format!(" dtype={} shape={:?}{values}", header.descr, header.shape)
            }
            Err(e) => format!(" (unreadable npy header: {e})"),
        },
        _ => String::new(),
    };
    head + &detail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small array shows its values; one whose values would not fit on the line shows its
    /// dtype and shape alone.
    #[test]
    fn an_arrays_values_are_shown_when_they_fit() {
        let bytes = |shape: &[usize], data: &[u8]| stampede::npy::encode("'|u1'", shape, data).unwrap();
        let item = |data: Vec<u8>| Item { ts: 7, payload: stampede::Payload { data: data.into(), codec: Codec::Npy } };
        let small = line(&item(bytes(&[3], &[1, 2, 3])));
        assert!(small.ends_with(" dtype='|u1' shape=[3] values=[1,2,3]"), "{small}");
        let large = line(&item(bytes(&[100], &[200; 100])));
        assert!(large.ends_with(" dtype='|u1' shape=[100]"), "{large}");
    }
}
