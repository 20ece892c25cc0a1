//! What a channel's items look like to a viewer (pure: no I/O, no threads): frames and overlay
//! boxes read from items ([`image`]), and each item as a Foxglove message ([`foxglove`]). The
//! dashboard, the live Foxglove bridge and recordings made for Foxglove all read items through
//! it, so every viewer draws the same frame and the same boxes.
//!
//! # Layout
//!
//! - [`image`] — `.npy` frames to pixels, overlay JSON to boxes, and their bounds.
//! - [`array`] — a small `.npy` array's values as JSON.
//! - [`foxglove`] — what a channel becomes in Foxglove, each item's message, the timeline.

#![forbid(unsafe_code)]

pub mod array;
pub mod foxglove;
pub mod image;
