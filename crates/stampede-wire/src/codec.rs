//! Encoding and decoding messages: the version byte, then the postcard header, then the payload
//! raw. Decoding never panics, whatever the bytes; every failure is a [`DecodeError`].

use serde::{Deserialize, Serialize};
use stampede_core::{Outcome, WatchEvent};

use crate::reply::{PushEvent, ReclaimEvent, Reply};
use crate::request::{RequestHeader, REQUEST_HEADER_BYTES_MAX};
use crate::VERSION;

/// Why a message could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// No bytes at all.
    Empty,
    /// The sender speaks another version of this format.
    Version { found: u8 },
    /// The header is malformed (postcard's reason).
    Header(String),
    /// The header is longer than the bound for its kind of message.
    HeaderTooLarge { bytes: usize, bytes_max: usize },
    /// Bytes follow a header that carries no payload, or item lengths do not add up to the payload.
    Payload(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Empty => f.write_str("an empty message"),
            DecodeError::Version { found } => write!(
                f,
                "wire version mismatch: the other side speaks version {found}, this side speaks {VERSION}; run the \
                 same Stampede release on the node and its clients"
            ),
            DecodeError::Header(reason) => write!(f, "a malformed header ({reason})"),
            DecodeError::HeaderTooLarge { bytes, bytes_max } => {
                write!(f, "a request header of {bytes} bytes (at most {bytes_max})")
            }
            DecodeError::Payload(reason) => write!(f, "a malformed payload ({reason})"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Encodes a header: the version byte, then postcard. The payload, if any, is appended by the
/// caller (without a copy).
pub fn encode<T: Serialize>(header: &T) -> Vec<u8> {
    let out = vec![VERSION];
    // The wire types are plain structs and enums of integers, strings, options and vectors, all of
    // which postcard serializes into a growable Vec: this cannot fail.
    postcard::to_extend(header, out).expect("postcard serializes every wire type into a Vec")
}

/// Decodes a request: its header and the payload that follows. Refuses a header longer than
/// [`REQUEST_HEADER_BYTES_MAX`], and a payload after a request that carries none.
pub fn decode_request(message: &[u8]) -> Result<(RequestHeader, &[u8]), DecodeError> {
    let (header, payload): (RequestHeader, _) = decode(message)?;
    let header_bytes = message.len() - payload.len();
    if header_bytes > REQUEST_HEADER_BYTES_MAX {
        return Err(DecodeError::HeaderTooLarge { bytes: header_bytes, bytes_max: REQUEST_HEADER_BYTES_MAX });
    }
    if !payload.is_empty() && !header.request.carries_payload() {
        return Err(DecodeError::Payload(format!("{} bytes after a {} request", payload.len(), header.request.op())));
    }
    Ok((header, payload))
}

/// Decodes the header of a request from the start of its message (`head`: at most
/// [`REQUEST_HEADER_BYTES_MAX`] bytes of it, the payload possibly cut off), so that a node can
/// check who sends a request before it reads the rest.
pub fn decode_request_head(head: &[u8]) -> Result<RequestHeader, DecodeError> {
    let (header, rest): (RequestHeader, _) = decode(head)?;
    let header_bytes = head.len() - rest.len();
    if header_bytes > REQUEST_HEADER_BYTES_MAX {
        return Err(DecodeError::HeaderTooLarge { bytes: header_bytes, bytes_max: REQUEST_HEADER_BYTES_MAX });
    }
    Ok(header)
}

/// Decodes a reply: its header and the payload that follows, checked against the item lengths
/// the header declares.
pub fn decode_reply(message: &[u8]) -> Result<(Reply, &[u8]), DecodeError> {
    let (reply, payload): (Reply, _) = decode(message)?;
    check_reply_payload(&reply, payload.len())?;
    Ok((reply, payload))
}

/// Decodes the header of a request whose payload was passed as a shared-memory segment
/// ([`crate::shared`]) rather than after the header: nothing may follow the header, and the request
/// must be one that carries a payload.
pub fn decode_request_passed(message: &[u8]) -> Result<RequestHeader, DecodeError> {
    let (header, payload) = decode_request(message)?;
    if !payload.is_empty() {
        return Err(DecodeError::Payload(format!("{} bytes after a request whose payload was passed", payload.len())));
    }
    if !header.request.carries_payload() {
        return Err(DecodeError::Payload(format!("a payload passed with a {} request", header.request.op())));
    }
    Ok(header)
}

/// Decodes a reply whose payload, `passed_bytes` long, was passed as a shared-memory segment:
/// nothing may follow the header, which must declare that many bytes.
pub fn decode_reply_passed(message: &[u8], passed_bytes: usize) -> Result<Reply, DecodeError> {
    let (reply, payload): (Reply, _) = decode(message)?;
    if !payload.is_empty() {
        return Err(DecodeError::Payload(format!("{} bytes after a reply whose payload was passed", payload.len())));
    }
    if !matches!(reply, Reply::Outcome(Outcome::Item(_) | Outcome::QueueItem { .. })) {
        return Err(DecodeError::Payload("a payload passed with a reply that carries no item".into()));
    }
    check_reply_payload(&reply, passed_bytes)?;
    Ok(reply)
}

/// Checks `payload_bytes` against the item lengths `reply` declares.
fn check_reply_payload(reply: &Reply, payload_bytes: usize) -> Result<(), DecodeError> {
    let declared = match reply {
        Reply::Outcome(Outcome::Item(item) | Outcome::QueueItem { item, .. }) => Some(item.len),
        Reply::Outcome(Outcome::Items(items)) => Some(
            items
                .iter()
                .try_fold(0u64, |sum, item| sum.checked_add(item.len))
                .ok_or_else(|| DecodeError::Payload("item lengths overflow".into()))?,
        ),
        _ => None,
    };
    let actual = payload_bytes as u64;
    match declared {
        Some(n) if n != actual => {
            Err(DecodeError::Payload(format!("the header declares {n} payload bytes, {actual} follow")))
        }
        None if actual != 0 => Err(DecodeError::Payload(format!("{actual} bytes after a reply that carries none"))),
        _ => Ok(()),
    }
}

/// Decodes a name change a node published.
pub fn decode_name_event(message: &[u8]) -> Result<WatchEvent, DecodeError> {
    let (event, rest): (WatchEvent, _) = decode(message)?;
    if !rest.is_empty() {
        return Err(DecodeError::Payload(format!("{} bytes after a name event", rest.len())));
    }
    Ok(event)
}

/// Decodes a reclaim event: its header and the item's payload, checked against its length.
pub fn decode_event(message: &[u8]) -> Result<(ReclaimEvent, &[u8]), DecodeError> {
    let (event, payload): (ReclaimEvent, _) = decode(message)?;
    let (declared, actual) = (event.item.len, payload.len() as u64);
    if declared != actual {
        return Err(DecodeError::Payload(format!("the event declares {declared} payload bytes, {actual} follow")));
    }
    Ok((event, payload))
}

/// Decodes a push event: its header and the pushed item's payload, checked against its length.
pub fn decode_push(message: &[u8]) -> Result<(PushEvent, &[u8]), DecodeError> {
    let (event, payload): (PushEvent, _) = decode(message)?;
    let declared = match &event {
        PushEvent::Put { notice, item: Some(item), .. } if notice.pushed && item.ts == notice.ts => item.len,
        PushEvent::Put { item: None, notice, .. } if !notice.pushed => 0,
        PushEvent::Reset { .. } => 0,
        PushEvent::Put { .. } => return Err(DecodeError::Payload("a notice and its item disagree".into())),
    };
    let actual = payload.len() as u64;
    if declared != actual {
        return Err(DecodeError::Payload(format!("the push declares {declared} payload bytes, {actual} follow")));
    }
    Ok((event, payload))
}

/// [`decode_push`] for an event whose pushed payload came apart from `message` (a shared-memory
/// segment passed on the direct path): `message` is the event alone, its item `passed_len` long.
pub fn decode_push_passed(message: &[u8], passed_len: usize) -> Result<PushEvent, DecodeError> {
    let (event, rest): (PushEvent, _) = decode(message)?;
    match &event {
        PushEvent::Put { notice, item: Some(item), .. }
            if notice.pushed && item.ts == notice.ts && item.len == passed_len as u64 && rest.is_empty() =>
        {
            Ok(event)
        }
        _ => Err(DecodeError::Payload(format!("a passed push of {passed_len} bytes that its event does not declare"))),
    }
}

fn decode<'a, T: Deserialize<'a>>(message: &'a [u8]) -> Result<(T, &'a [u8]), DecodeError> {
    let (&version, rest) = message.split_first().ok_or(DecodeError::Empty)?;
    if version != VERSION {
        return Err(DecodeError::Version { found: version });
    }
    postcard::take_from_bytes(rest).map_err(|e| DecodeError::Header(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reply;

    /// Another version's message is a clear error, whatever follows the version byte.
    #[test]
    fn version_mismatch_is_clear() {
        let mut message = encode(&Reply::Outcome(Outcome::Done));
        message[0] = VERSION + 1;
        let e = decode_reply(&message).unwrap_err();
        assert_eq!(e, DecodeError::Version { found: VERSION + 1 });
        let text = e.to_string();
        assert!(text.contains(&format!("speaks version {}", VERSION + 1)), "{text}");
        assert!(
            text.contains(&format!("this side speaks {VERSION}")) && text.contains("same Stampede release"),
            "{text}"
        );
    }
}
