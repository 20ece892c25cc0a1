//! A process's log file: a header, then chunks appended as the writer flushes its buffers, so
//! that a log cut by a crash holds every chunk flushed before it.
//!
//! ```text
//! file   := MAGIC header chunk*
//! header := host (u16 length + UTF-8) | pid: u32 | process name (u16 length + UTF-8)
//! chunk  := tag: u8 | length: u32 | body
//!   Records  (1): tid: u64 | records (a multiple of RECORD_BYTES)
//!   Thread   (2): tid: u64 | name (UTF-8, to the end)
//!   Name     (3): index: u32 (the next in order, from 0) | name (UTF-8, to the end)
//!   Exchange (4): u8 (0 at the run's start, 1 at its end) | t0 t1 t2 t3: u64 | peer host (UTF-8)
//!   Clock    (5): ticks: u64 | ns: u64 (the writer's counter and the host's monotonic clock, read
//!                 together)
//! ```
//!
//! Records carry the writer's counter (`t`); [`read`] puts them on the host's monotonic clock
//! through the log's clock readings ([`TickMap`]), so that the logs of one host share a clock.
//! An exchange's `t0` and `t3` are this host's monotonic clock, `t1` and `t2` the peer host's.
//!
//! Guarantees: [`read`] of any bytes is a log or a typed [`FileError`], never a panic, and never
//! allocates more than the bytes it was given; a chunk cut short at the end (the crash) is
//! dropped, a chunk longer than [`CHUNK_BYTES_MAX`] or of an unknown tag is refused.

use crate::clock::{ClockMap, Exchange, Reading, TickMap};
use crate::merge::{PeerExchange, ProcessLog, ThreadLog};
use crate::record::{DecodeError, Record, RECORD_BYTES};

/// The file's first bytes.
pub const MAGIC: &[u8; 8] = b"STMPTRC2";

/// Longest chunk a reader accepts (a writer's buffer is far smaller).
pub const CHUNK_BYTES_MAX: usize = 64 << 20;

/// What a chunk holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chunk {
    /// Records a thread wrote, in order.
    Records { tid: u64, records: Vec<Record> },
    /// A thread's name.
    Thread { tid: u64, name: String },
    /// One entry of the name table.
    Name { index: u32, name: String },
    /// A timestamp exchange with another host's clock (`peer`), at the run's start or end.
    Exchange { at_end: bool, peer: String, exchange: Exchange },
    /// The writer's counter and the host's monotonic clock, read together.
    Clock(Reading),
}

/// Why bytes are not a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileError {
    NotALog,
    /// The header is cut short or not UTF-8.
    Header,
    UnknownTag {
        offset: usize,
        tag: u8,
    },
    ChunkTooLong {
        offset: usize,
        length: usize,
    },
    /// A chunk's body does not hold what its tag says.
    Chunk {
        offset: usize,
        reason: String,
    },
    Record {
        offset: usize,
        error: DecodeError,
    },
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::NotALog => {
                write!(f, "not a Stampede trace log of this release (no {:?} at its start; read a log with the release that wrote it)", std::str::from_utf8(MAGIC).unwrap_or(""))
            }
            FileError::Header => write!(f, "the log's header is cut short or damaged"),
            FileError::UnknownTag { offset, tag } => write!(f, "byte {offset}: unknown chunk tag {tag}"),
            FileError::ChunkTooLong { offset, length } => {
                write!(f, "byte {offset}: a chunk of {length} bytes (at most {CHUNK_BYTES_MAX})")
            }
            FileError::Chunk { offset, reason } => write!(f, "byte {offset}: {reason}"),
            FileError::Record { offset, error } => write!(f, "byte {offset}: {error}"),
        }
    }
}

impl std::error::Error for FileError {}

/// The file's first bytes: the magic and the header.
pub fn header(host: &str, pid: u32, name: &str) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    put_text(&mut out, host);
    out.extend_from_slice(&pid.to_le_bytes());
    put_text(&mut out, name);
    out
}

/// Texts in the header are cut at `u16::MAX` bytes (on a character boundary).
fn put_text(out: &mut Vec<u8>, text: &str) {
    let mut end = text.len().min(u16::MAX as usize);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_le_bytes());
    out.extend_from_slice(&text.as_bytes()[..end]);
}

impl Chunk {
    /// The chunk's bytes, to append to the file.
    pub fn encode(&self) -> Vec<u8> {
        let (tag, body) = match self {
            Chunk::Records { tid, records } => {
                let mut body = tid.to_le_bytes().to_vec();
                body.reserve(records.len() * RECORD_BYTES);
                for record in records {
                    body.extend_from_slice(&record.encode());
                }
                (1u8, body)
            }
            Chunk::Thread { tid, name } => (2, [&tid.to_le_bytes()[..], name.as_bytes()].concat()),
            Chunk::Name { index, name } => (3, [&index.to_le_bytes()[..], name.as_bytes()].concat()),
            Chunk::Exchange { at_end, peer, exchange } => {
                let mut body = vec![u8::from(*at_end)];
                for t in [exchange.t0, exchange.t1, exchange.t2, exchange.t3] {
                    body.extend_from_slice(&t.to_le_bytes());
                }
                body.extend_from_slice(peer.as_bytes());
                (4, body)
            }
            Chunk::Clock(reading) => (5, [reading.ticks.to_le_bytes(), reading.ns.to_le_bytes()].concat()),
        };
        let mut out = Vec::with_capacity(5 + body.len());
        out.push(tag);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }
}

/// A log's bytes as one process's log: its records on its host's monotonic clock, its exchanges
/// with other hosts kept for [`crate::merge::reconcile`] (its clock map is the identity until then).
pub fn read(bytes: &[u8]) -> Result<ProcessLog, FileError> {
    let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or(FileError::NotALog)?;
    let mut at = Cursor { bytes: rest, offset: MAGIC.len() };
    let host = at.text().ok_or(FileError::Header)?;
    let pid = at.u32().ok_or(FileError::Header)?;
    let name = at.text().ok_or(FileError::Header)?;
    let mut log = ProcessLog {
        host,
        pid,
        name,
        names: Vec::new(),
        threads: Vec::new(),
        clock: ClockMap::IDENTITY,
        exchanges: Vec::new(),
    };
    let mut readings = Vec::new();
    while !at.bytes.is_empty() {
        let offset = at.offset;
        let (Some(tag), Some(length)) = (at.u8(), at.u32()) else { break };
        let length = length as usize;
        if length > CHUNK_BYTES_MAX {
            return Err(FileError::ChunkTooLong { offset, length });
        }
        let Some(body) = at.take(length) else { break }; // cut by a crash: the chunks before stand
        let malformed = |reason: &str| FileError::Chunk { offset, reason: reason.to_owned() };
        let (head, tail) = body.split_at(body.len().min(8));
        match tag {
            1 => {
                let tid =
                    u64::from_le_bytes(head.try_into().map_err(|_| malformed("a records chunk without its thread"))?);
                if tail.len() % RECORD_BYTES != 0 {
                    return Err(malformed("a records chunk that is not whole records"));
                }
                let records = Record::decode_all(tail)
                    .map_err(|(i, error)| FileError::Record { offset: offset + 13 + i * RECORD_BYTES, error })?;
                thread(&mut log, tid).records.extend(records);
            }
            2 => {
                let tid =
                    u64::from_le_bytes(head.try_into().map_err(|_| malformed("a thread chunk without its thread"))?);
                thread(&mut log, tid).name = utf8(tail).ok_or_else(|| malformed("a thread name that is not UTF-8"))?;
            }
            3 => {
                let index = body.get(..4).ok_or_else(|| malformed("a name chunk without its index"))?;
                let index = u32::from_le_bytes(index.try_into().expect("4 bytes")) as usize;
                let name = utf8(&body[4..]).ok_or_else(|| malformed("a name that is not UTF-8"))?;
                // The writer numbers names in order: a table is never grown by more than one entry.
                match index.cmp(&log.names.len()) {
                    std::cmp::Ordering::Less => log.names[index] = name,
                    std::cmp::Ordering::Equal => log.names.push(name),
                    std::cmp::Ordering::Greater => return Err(malformed("a name index past the table's end")),
                }
            }
            4 => {
                if body.len() < 33 {
                    return Err(malformed("an exchange chunk is at least 33 bytes"));
                }
                let t = |i: usize| u64::from_le_bytes(body[1 + 8 * i..9 + 8 * i].try_into().expect("8 bytes"));
                let exchange = Exchange { t0: t(0), t1: t(1), t2: t(2), t3: t(3) };
                let peer = utf8(&body[33..]).ok_or_else(|| malformed("a peer host that is not UTF-8"))?;
                log.exchanges.push(PeerExchange { peer, at_end: body[0] != 0, exchange });
            }
            5 => {
                let fields: [u8; 16] = body.try_into().map_err(|_| malformed("a clock chunk is 16 bytes"))?;
                let (ticks, ns) = fields.split_at(8);
                let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
                readings.push(Reading { ticks: u64_of(ticks), ns: u64_of(ns) });
            }
            tag => return Err(FileError::UnknownTag { offset, tag }),
        }
    }
    let ticks = TickMap::new(readings);
    for record in log.threads.iter_mut().flat_map(|thread| thread.records.iter_mut()) {
        record.t = ticks.ns(record.t);
    }
    Ok(log)
}

/// The thread `tid` of `log`, added (unnamed) if it is new.
fn thread(log: &mut ProcessLog, tid: u64) -> &mut ThreadLog {
    let at = match log.threads.iter().position(|t| t.tid == tid) {
        Some(at) => at,
        None => {
            log.threads.push(ThreadLog { tid, name: format!("thread {tid}"), records: Vec::new() });
            log.threads.len() - 1
        }
    };
    &mut log.threads[at]
}

fn utf8(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).ok().map(str::to_owned)
}

/// Reads little-endian fields off the front of a byte slice.
struct Cursor<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.bytes.get(..n)?, &self.bytes[n..]);
        self.bytes = rest;
        self.offset += n;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    fn text(&mut self) -> Option<String> {
        let length = self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))?;
        utf8(self.take(length as usize)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Kind, Phase};
    use proptest::prelude::*;

    fn sample() -> Vec<u8> {
        let record = |t| Record { t, kind: Kind::Put, phase: Phase::Instant, name: 1, ts: t, bytes: 8 };
        let mut file = header("host-a", 42, "camera");
        for chunk in [
            Chunk::Name { index: 0, name: String::new() },
            Chunk::Name { index: 1, name: "camera/frames".into() },
            Chunk::Thread { tid: 7, name: "digitizer".into() },
            Chunk::Records { tid: 7, records: vec![record(10), record(20)] },
            Chunk::Records { tid: 8, records: vec![record(15)] },
            Chunk::Records { tid: 7, records: vec![record(30)] },
            Chunk::Exchange {
                at_end: false,
                peer: "host-b".into(),
                exchange: Exchange { t0: 100, t1: 1_100, t2: 1_100, t3: 100 },
            },
            Chunk::Clock(Reading { ticks: 0, ns: 1_000 }),
            Chunk::Clock(Reading { ticks: 100, ns: 1_200 }),
        ] {
            file.extend(chunk.encode());
        }
        file
    }

    #[test]
    fn a_log_reads_back_as_written() {
        let log = read(&sample()).unwrap();
        assert_eq!((log.host.as_str(), log.pid, log.name.as_str()), ("host-a", 42, "camera"));
        assert_eq!(log.name_of(1), "camera/frames");
        let threads: Vec<_> = log.threads.iter().map(|t| (t.tid, t.name.as_str(), t.records.len())).collect();
        assert_eq!(threads, vec![(7, "digitizer", 3), (8, "thread 8", 1)]);
        // A tick is 2 ns, tick 0 is 1 000 ns on the host's monotonic clock.
        assert_eq!(log.threads[0].records.iter().map(|r| r.t).collect::<Vec<_>>(), vec![1_020, 1_040, 1_060]);
        assert_eq!(log.exchanges.len(), 1);
        assert_eq!((log.exchanges[0].peer.as_str(), log.exchanges[0].exchange.offset()), ("host-b", 1_000));
    }

    /// Cut anywhere after the header, the log keeps every chunk written whole before the cut.
    #[test]
    fn a_log_cut_by_a_crash_keeps_its_whole_chunks() {
        let file = sample();
        let whole = read(&file).unwrap();
        let header_bytes = header("host-a", 42, "camera").len();
        for cut in header_bytes..file.len() {
            let log = read(&file[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            let records: usize = log.threads.iter().map(|t| t.records.len()).sum();
            assert!(records <= 4 && log.threads.len() <= whole.threads.len(), "cut at {cut}");
        }
    }

    #[test]
    fn hostile_logs_are_typed_errors() {
        assert_eq!(read(b"not a log at all"), Err(FileError::NotALog));
        assert_eq!(read(MAGIC), Err(FileError::Header));
        let mut long = header("h", 1, "p");
        long.push(1);
        long.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(read(&long), Err(FileError::ChunkTooLong { .. })));
        let mut unknown = header("h", 1, "p");
        unknown.extend([9, 0, 0, 0, 0]);
        assert!(matches!(read(&unknown), Err(FileError::UnknownTag { tag: 9, .. })));
        let mut partial = header("h", 1, "p");
        partial.extend(Chunk::Records { tid: 1, records: vec![] }.encode());
        partial.extend([1, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5]);
        assert!(matches!(read(&partial), Err(FileError::Chunk { .. })));
    }

    proptest! {
        #[test]
        fn any_bytes_read_or_fail_typed(tail in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut file = header("h", 1, "p");
            file.extend(tail);
            let _ = read(&file);
        }
    }
}
