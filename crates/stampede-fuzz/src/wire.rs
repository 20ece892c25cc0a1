//! Client ↔ node messages, as the other side decodes them: a node decodes requests (whole, by
//! their head before the rest arrives, or with the payload passed as a shared-memory segment); a
//! client decodes replies, reclaim events, pushes and name notices.
//!
//! Checked on every input: decoding returns a value or an error, never a panic; what decodes
//! encodes to bytes that decode to the same value (so a node and a client that re-encode what
//! they received agree with the sender).

use serde::de::DeserializeOwned;
use serde::Serialize;
use stampede_wire::{
    decode_event, decode_name_event, decode_push, decode_push_passed, decode_reply, decode_reply_passed,
    decode_request, decode_request_head, decode_request_passed, encode,
};

/// A request as a node receives it.
pub fn request(input: &[u8]) {
    if let Ok((header, _payload)) = decode_request(input) {
        stable(&header);
    }
    if let Ok(header) = decode_request_head(input) {
        stable(&header);
    }
    if let Ok(header) = decode_request_passed(input) {
        stable(&header);
    }
}

/// A reply, a reclaim event, a push or a name notice as a client receives it; the length of a
/// passed segment is taken from the input's last byte.
pub fn reply(input: &[u8]) {
    let passed = usize::from(input.last().copied().unwrap_or(0));
    if let Ok((reply, _payload)) = decode_reply(input) {
        stable(&reply);
    }
    if let Ok(reply) = decode_reply_passed(input, passed) {
        stable(&reply);
    }
    if let Ok((event, _payload)) = decode_event(input) {
        stable(&event);
    }
    if let Ok((event, _payload)) = decode_push(input) {
        stable(&event);
    }
    if let Ok(event) = decode_push_passed(input, passed) {
        stable(&event);
    }
    if let Ok(event) = decode_name_event(input) {
        stable(&event);
    }
}

/// Asserts that `value` encodes to bytes that decode to a value encoding the same way.
fn stable<T: Serialize + DeserializeOwned + std::fmt::Debug>(value: &T) {
    let bytes = encode(value);
    let again: T = postcard::from_bytes(&bytes[1..])
        .unwrap_or_else(|e| panic!("{value:?} encodes to bytes it does not decode from: {e}"));
    assert_eq!(encode(&again), bytes, "{value:?} does not survive its own encoding");
}
