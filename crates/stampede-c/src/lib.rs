//! `libstampede.so` and `libstampede.a`, Stampede's C library (docs/C.md): the `stp_` functions
//! of `stampede-capi`, exported as C symbols, and their header `include/stampede.h`, which
//! cbindgen generates from that crate's source (`header.rs` says how and why it is checked in).
//!
//! The functions live in `stampede-capi`, a Rust library, so that Rust code can call them as C
//! does (the C API's fuzz target); a crate of this one's kind (`cdylib`, `staticlib`) cannot be a
//! dependency. Linking the library is what exports them: `make -C c symbols` checks that every
//! exported symbol is an `stp_` one.

pub use stampede_capi::*;

#[cfg(test)]
mod header;
