//! Every fuzz target over its committed corpus (`fuzz/corpus/<target>`: the seeds and what the
//! fuzzer kept) and its findings (`fuzz/regressions/<target>`: each input that once failed), so
//! that each decoder keeps being checked on every run of the suite, fuzzer or not.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files under `dir`, sorted (none if it does not exist).
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.expect("a readable directory entry").path()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

#[test]
fn every_target_passes_its_corpus_and_its_regressions() {
    for target in stampede_fuzz::TARGETS {
        let corpus = inputs(&fuzz_dir().join("corpus").join(target.name));
        assert!(
            !corpus.is_empty(),
            "{}: no corpus (cargo run -p stampede-fuzz --bin seeds writes its seeds)",
            target.name
        );
        let regressions = inputs(&fuzz_dir().join("regressions").join(target.name));
        for input in corpus.iter().chain(&regressions) {
            let bytes = std::fs::read(input).expect("a readable input");
            assert!(
                bytes.len() <= stampede_fuzz::INPUT_BYTES_MAX,
                "{} is longer than the fuzzer gives",
                input.display()
            );
            (target.run)(&bytes);
        }
        println!("{:<16} {} inputs, {} regressions", target.name, corpus.len(), regressions.len());
    }
}

#[test]
fn the_committed_seeds_are_those_the_encoders_make() {
    for target in stampede_fuzz::TARGETS {
        let seeds = stampede_fuzz::seeds::of(target.name);
        assert!(!seeds.is_empty(), "{} has seeds", target.name);
        let corpus: Vec<Vec<u8>> =
            inputs(&fuzz_dir().join("corpus").join(target.name)).iter().map(|p| std::fs::read(p).unwrap()).collect();
        // A recording holds the times it was written at: its seeds differ each time.
        for seed in seeds.iter().filter(|_| target.name != "mcap_recording") {
            assert!(corpus.contains(seed), "{}: a seed is not in the corpus; run the seeds binary again", target.name);
        }
    }
}

#[test]
fn every_target_has_a_fuzz_binary() {
    for target in stampede_fuzz::TARGETS {
        let binary = fuzz_dir().join("fuzz_targets").join(format!("{}.rs", target.name));
        let text = std::fs::read_to_string(&binary).unwrap_or_else(|_| panic!("{} is missing", binary.display()));
        assert!(text.contains(&format!("\"{}\"", target.name)), "{} runs its own target", binary.display());
    }
}
