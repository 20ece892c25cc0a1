//! What Stampede's fuzz targets run: every decoder a peer or a file can feed, each as one
//! function over bytes ([`TARGETS`]), with the invariants checked on what it decodes.
//!
//! The coverage-guided fuzzer (libFuzzer through `cargo fuzz`, in the repository's `fuzz/`
//! directory; docs/CHECKS.md "Fuzzing") calls these functions with the inputs it evolves; the
//! tests of this crate replay the committed corpus (`fuzz/corpus/<target>`, seeds and every input
//! the fuzzer kept) and every finding (`fuzz/regressions/<target>`) on each run of the suite, so a
//! decoder that once failed keeps being checked without the fuzzer.
//!
//! **Guarantees a target checks**, besides "no panic, whatever the bytes" (a panic is the
//! fuzzer's finding): what decodes encodes back to the same bytes; the engine's ts_min never goes
//! back, whatever operations a session sends; a mesh message never makes a node's ts_min go back
//! either; every step ends (a wait is bounded and the fuzzer's timeout catches a hang).
//!
//! # Layout
//!
//! - [`steps`] — one input cut into a bounded sequence of tagged steps.
//! - [`wire`] — client ↔ node messages: requests, replies, events, pushes, name notices.
//! - [`engine`] — operations a client sends, run by the engine as a node runs them.
//! - [`mesh`] — messages between nodes, fed to a node's steward.
//! - [`files`] — what files feed: `.npy` headers, the disk tier's extents, trace logs, MCAP
//!   recordings and ROS 2 CDR messages.
//! - [`views`] — what viewers and items feed the dashboard and the Foxglove bridge.
//! - [`capi`] — what a C program passes to the C API: pointers, lengths, strings and numbers.
//! - [`seeds`] — the first inputs of each target's corpus, made from real encoders.

// Only the C API's target calls unsafe code (the C functions, as C does); each call says why
// its pointers are valid.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod capi;
pub mod engine;
pub mod files;
pub mod mesh;
pub mod seeds;
pub mod steps;
pub mod views;
pub mod wire;

/// Longest input the fuzzer gives a target (`-max_len`), in bytes: room for a few dozen requests
/// or a small recording, small enough for thousands of runs a second.
pub const INPUT_BYTES_MAX: usize = 64 << 10;

/// A fuzz target: what a peer or a file feeds, and the function that takes it.
pub struct Target {
    /// Its name: the binary in `fuzz/fuzz_targets` and its corpus directory.
    pub name: &'static str,
    /// Who or what feeds these bytes to Stampede.
    pub fed_by: &'static str,
    /// Runs one input; panics only on a finding.
    pub run: fn(&[u8]),
}

/// Every target, in the order `scripts/fuzz.sh` runs them.
pub const TARGETS: &[Target] = &[
    Target { name: "wire_request", fed_by: "a client, to a node", run: wire::request },
    Target { name: "wire_reply", fed_by: "a node, to a client", run: wire::reply },
    Target { name: "engine_ops", fed_by: "a client's operations, run by a node's engine", run: engine::ops },
    Target { name: "mesh_message", fed_by: "a node, to the other nodes of its mesh", run: mesh::messages },
    Target { name: "npy_header", fed_by: "a put's .npy payload", run: files::npy },
    Target { name: "disk_extent", fed_by: "the disk tier's extent files", run: files::disk_extent },
    Target { name: "trace_log", fed_by: "a process's trace log file", run: files::trace_log },
    Target { name: "mcap_recording", fed_by: "a recording or ROS 2 bag given to replay", run: files::mcap },
    Target { name: "ros2_cdr", fed_by: "a ROS 2 message in a bag", run: files::ros2_cdr },
    Target { name: "viewer_message", fed_by: "a Foxglove viewer, or a browser's login", run: views::viewer },
    Target { name: "item_views", fed_by: "any putter's item, drawn by the dashboard or Foxglove", run: views::items },
    Target { name: "c_api", fed_by: "a C program's pointers, lengths, strings and numbers", run: capi::calls },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
