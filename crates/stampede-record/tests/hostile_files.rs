//! Any bytes given to the reader (and to replay) give items or a typed error: never a panic, a
//! hang or an allocation beyond the bounds. Property tests over a real recording with bytes
//! flipped, cut, and over random files.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use stampede::{Codec, Error, Limits, Parts, Runtime};
use stampede_record::{replay, RecordError, Recorder, RecorderOptions, Recording, ReplayOptions};

/// A small recording with several chunks, every codec, json schema: made once.
fn valid() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("valid.mcap");
        let rt = Runtime::new();
        let ch = rt.create_channel("a/b", Limits::unbounded()).unwrap();
        let options = RecorderOptions { chunk_bytes: 512, ..RecorderOptions::default() };
        let recorder = Recorder::start(&rt, &["a".into()], &path, options).unwrap();
        let producer = rt.task(0).unwrap();
        let out = producer.attach_output(&ch).unwrap();
        for ts in 0..40 {
            match ts % 3 {
                0 => out.put(ts, format!("text {ts}").as_str()).unwrap(),
                1 => {
                    out.put(ts, Parts { parts: &[format!("{{\"ts\":{ts}}}").as_bytes()], codec: Codec::Json }).unwrap()
                }
                _ => out.put(ts, vec![ts as u8; 100]).unwrap(),
            }
        }
        producer.close();
        recorder.stop().unwrap();
        std::fs::read(&path).unwrap()
    })
}

/// Reads `bytes` as a recording to the end; Ok with the items, or the typed error.
fn read(dir: &Path, bytes: &[u8]) -> Result<usize, RecordError> {
    let path = dir.join("hostile.mcap");
    std::fs::write(&path, bytes).unwrap();
    let mut recording = Recording::open(&path)?;
    let mut items = 0;
    recording.for_each(|_| {
        items += 1;
        Ok(())
    })?;
    Ok(items)
}

fn typed(result: Result<usize, RecordError>) {
    match result {
        Ok(_) | Err(RecordError::Corrupt { .. } | RecordError::UnknownCodec { .. }) => {}
        Err(e) => panic!("an unexpected error for hostile bytes: {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A valid recording with some bytes changed.
    #[test]
    fn flipped_bytes(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut bytes = valid().to_vec();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let dir = tempfile::tempdir().unwrap();
        typed(read(dir.path(), &bytes));
    }

    /// A valid recording cut and continued with garbage.
    #[test]
    fn cut_and_garbage(cut in any::<prop::sample::Index>(), tail in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut bytes = valid()[..cut.index(valid().len())].to_vec();
        bytes.extend(tail);
        let dir = tempfile::tempdir().unwrap();
        typed(read(dir.path(), &bytes));
    }

    /// Random files, some starting with the MCAP magic.
    #[test]
    fn random_files(magic in any::<bool>(), body in prop::collection::vec(any::<u8>(), 0..2000)) {
        let mut bytes = if magic { b"\x89MCAP0\r\n".to_vec() } else { Vec::new() };
        bytes.extend(body);
        let dir = tempfile::tempdir().unwrap();
        typed(read(dir.path(), &bytes));
    }
}

/// Replay of hostile bytes: a typed error or the items it could read, and the runtime stays
/// usable.
#[test]
fn replay_of_flipped_recordings_fails_typed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flipped.mcap");
    let rt = Runtime::new();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..64 {
        let mut bytes = valid().to_vec();
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed % bytes.len() as u64) as usize;
            bytes[at] = (seed >> 32) as u8;
        }
        std::fs::write(&path, &bytes).unwrap();
        let options =
            ReplayOptions { rate: None, remap: vec![("a".into(), format!("r{seed}"))], ..ReplayOptions::default() };
        match replay(&rt, &path, &options, &mut |_| true) {
            Ok(_) | Err(RecordError::Corrupt { .. } | RecordError::UnknownCodec { .. }) => {}
            // Flipped timestamps can repeat one already put or fall below ts_min, flipped codecs
            // can make a payload invalid for its channel's declared codec.
            Err(RecordError::TooLarge(_)) => {}
            Err(RecordError::Stampede(
                Error::DuplicateTimestamp { .. } | Error::BelowVisibility { .. } | Error::InvalidArgument { .. },
            )) => {}
            Err(e) => panic!("{e}"),
        }
    }
    rt.check_invariants();
}
