//! One event of the log: a fixed-size binary record ([`RECORD_BYTES`], little-endian), so that a
//! writer appends it with one copy into a per-thread buffer and a reader finds record `i` at
//! `i * RECORD_BYTES`.
//!
//! ```text
//! [t: u64][kind: u16][phase: u8][reserved: u8][name: u32][ts: u64][bytes: u64]
//! ```
//!
//! - `t`: the writer's clock in ns (its own epoch; [`crate::clock`] maps it onto a reference).
//! - `kind`: what happened ([`Kind`]); `phase`: a span's begin or end, or an instant.
//! - `name`: an index into the log's name table (a channel's, a queue's, a user span's name).
//! - `ts`, `bytes`: the item's timestamp and size where the kind has them, else 0.
//!
//! Guarantees: [`Record::decode`] of any 32 bytes is a record or a typed [`DecodeError`]; a
//! record encodes and decodes to itself.

/// A get's `ts` when it returned no item (no timestamp is that large).
pub const NO_ITEM: u64 = u64::MAX;

/// Bytes of one encoded record.
pub const RECORD_BYTES: usize = 32;

/// What an event is. Spans (a [`Phase::Begin`] and its [`Phase::End`]) measure time; instants
/// mark a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A channel or queue `put` call (span; `name`, `ts`, `bytes`).
    Put,
    /// A `get` call (span; `name`, and at its end the `ts` and `bytes` of the item got, or
    /// [`NO_ITEM`] when it got none).
    Get,
    /// Waiting inside a call for an item or for room (span, nested in a call).
    Wait,
    /// A `consume` (span; `name`, `ts`).
    Consume,
    /// A claim on ts_min moved (span; `ts`: the virtual time set, `u64::MAX` for a task closed).
    Claim,
    /// A GC sweep (span, inside the call that triggered it).
    GcSweep,
    /// An item reclaimed (instant; `name`, `ts`, `bytes`).
    Reclaim,
    /// A GC handler running (span; `name`, `ts`).
    GcHandler,
    /// A pacer sleeping until its next tick (span; `ts`: the virtual time it waits for).
    PacerSleep,
    /// A frame later than its tick (instant; `ts`: the virtual time, `bytes`: how late, ns).
    LateFrame,
    /// A temporal join matching a tuple (span; `name`: the join's, `ts`).
    Join,
    /// Allocation inside the runtime (span).
    Alloc,
    /// Waiting for a lock inside the runtime (span).
    Lock,
    /// A request sent to a node (span; `bytes`).
    Send,
    /// A reply received from a node (span; `bytes`).
    Receive,
    /// Encoding or decoding a message (span; `bytes`).
    Serialise,
    /// A span of the application's own (`with stampede.span("track")`; `name`).
    User,
}

/// Every kind, in code order: `Kind::ALL[code]` is the kind encoded as `code`.
const ALL: [Kind; 17] = [
    Kind::Put,
    Kind::Get,
    Kind::Wait,
    Kind::Consume,
    Kind::Claim,
    Kind::GcSweep,
    Kind::Reclaim,
    Kind::GcHandler,
    Kind::PacerSleep,
    Kind::LateFrame,
    Kind::Join,
    Kind::Alloc,
    Kind::Lock,
    Kind::Send,
    Kind::Receive,
    Kind::Serialise,
    Kind::User,
];

impl Kind {
    /// The kind's code on the wire.
    pub fn code(self) -> u16 {
        ALL.iter().position(|k| *k == self).expect("every kind is in ALL") as u16
    }

    /// The kind encoded as `code`, if any.
    pub fn from_code(code: u16) -> Option<Kind> {
        ALL.get(code as usize).copied()
    }

    /// A short lower-case name, for tables and traces.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Put => "put",
            Kind::Get => "get",
            Kind::Wait => "wait",
            Kind::Consume => "consume",
            Kind::Claim => "claim",
            Kind::GcSweep => "gc sweep",
            Kind::Reclaim => "reclaim",
            Kind::GcHandler => "gc handler",
            Kind::PacerSleep => "pacer sleep",
            Kind::LateFrame => "late frame",
            Kind::Join => "join",
            Kind::Alloc => "alloc",
            Kind::Lock => "lock",
            Kind::Send => "send",
            Kind::Receive => "receive",
            Kind::Serialise => "serialise",
            Kind::User => "span",
        }
    }
}

/// Where a record sits in its span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Begin,
    End,
    Instant,
}

impl Phase {
    fn code(self) -> u8 {
        match self {
            Phase::Begin => 1,
            Phase::End => 2,
            Phase::Instant => 3,
        }
    }

    fn from_code(code: u8) -> Option<Phase> {
        match code {
            1 => Some(Phase::Begin),
            2 => Some(Phase::End),
            3 => Some(Phase::Instant),
            _ => None,
        }
    }
}

/// One event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The writer's clock, ns.
    pub t: u64,
    pub kind: Kind,
    pub phase: Phase,
    /// Index into the log's name table (0 when the kind has no name).
    pub name: u32,
    /// The item's timestamp, where the kind has one.
    pub ts: u64,
    /// The payload's size, where the kind has one.
    pub bytes: u64,
}

/// Why bytes are not a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer than [`RECORD_BYTES`] bytes.
    Short {
        bytes: usize,
    },
    UnknownKind {
        code: u16,
    },
    UnknownPhase {
        code: u8,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Short { bytes } => write!(f, "a record of {bytes} bytes (a record is {RECORD_BYTES})"),
            DecodeError::UnknownKind { code } => write!(f, "unknown event kind {code}"),
            DecodeError::UnknownPhase { code } => write!(f, "unknown phase {code}"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl Record {
    /// The record's bytes.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        out[0..8].copy_from_slice(&self.t.to_le_bytes());
        out[8..10].copy_from_slice(&self.kind.code().to_le_bytes());
        out[10] = self.phase.code();
        out[12..16].copy_from_slice(&self.name.to_le_bytes());
        out[16..24].copy_from_slice(&self.ts.to_le_bytes());
        out[24..32].copy_from_slice(&self.bytes.to_le_bytes());
        out
    }

    /// The record in the first [`RECORD_BYTES`] of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Record, DecodeError> {
        let Some(bytes) = bytes.get(..RECORD_BYTES) else {
            return Err(DecodeError::Short { bytes: bytes.len() });
        };
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let code = u16::from_le_bytes([bytes[8], bytes[9]]);
        let kind = Kind::from_code(code).ok_or(DecodeError::UnknownKind { code })?;
        let phase = Phase::from_code(bytes[10]).ok_or(DecodeError::UnknownPhase { code: bytes[10] })?;
        let name = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
        Ok(Record { t: u64_at(0), kind, phase, name, ts: u64_at(16), bytes: u64_at(24) })
    }

    /// Every whole record of `bytes`, in order; the first that does not decode ends it with its
    /// index. A partial record at the end (a log cut by a crash mid-write) is ignored.
    pub fn decode_all(bytes: &[u8]) -> Result<Vec<Record>, (usize, DecodeError)> {
        bytes
            .chunks_exact(RECORD_BYTES)
            .enumerate()
            .map(|(i, chunk)| Record::decode(chunk).map_err(|e| (i, e)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_record() -> impl Strategy<Value = Record> {
        (any::<u64>(), 0..ALL.len(), 0..3u8, any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |(t, kind, phase, name, ts, bytes)| Record {
                t,
                kind: ALL[kind],
                phase: Phase::from_code(phase + 1).unwrap(),
                name,
                ts,
                bytes,
            },
        )
    }

    proptest! {
        #[test]
        fn a_record_decodes_to_itself(record in any_record()) {
            prop_assert_eq!(Record::decode(&record.encode()), Ok(record));
        }

        #[test]
        fn any_bytes_decode_or_fail_typed(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = Record::decode(&bytes);
            let _ = Record::decode_all(&bytes);
        }
    }

    #[test]
    fn hostile_records_are_typed_errors() {
        let mut bytes = Record { t: 1, kind: Kind::Put, phase: Phase::Begin, name: 0, ts: 0, bytes: 0 }.encode();
        assert_eq!(Record::decode(&bytes[..31]), Err(DecodeError::Short { bytes: 31 }));
        bytes[8] = 200;
        assert_eq!(Record::decode(&bytes), Err(DecodeError::UnknownKind { code: 200 }));
        bytes[8] = 0;
        bytes[10] = 9;
        assert_eq!(Record::decode(&bytes), Err(DecodeError::UnknownPhase { code: 9 }));
    }

    #[test]
    fn a_log_cut_mid_record_keeps_its_whole_records() {
        let record = Record { t: 7, kind: Kind::Get, phase: Phase::End, name: 3, ts: 41, bytes: 8 };
        let mut log = [record.encode(), record.encode()].concat();
        log.extend_from_slice(&[1, 2, 3]);
        assert_eq!(Record::decode_all(&log), Ok(vec![record, record]));
    }
}
