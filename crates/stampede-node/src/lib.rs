//! Stampede nodes on the Eclipse Zenoh fabric (SPEC §7): a node serves its embedded
//! [`stampede::Runtime`] to clients in other processes and on other machines.
//!
//! See `docs/NODES.md` for the design: surrogate sessions, the fabric, failures, and why no item is
//! lost across the wire.
//!
//! # Layout
//!
//! - [`wire`] — the messages between a client and a node: a version byte, a postcard header, the
//!   payload raw; decoding hostile bytes is a typed error, never a panic.

pub mod wire;
