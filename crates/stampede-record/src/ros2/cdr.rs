//! CDR (XCDR1, little or big endian), the encoding of ROS 2 messages: a 4-byte encapsulation
//! header, then fields aligned to their own size from the end of that header. Only what the
//! message types of [`super`] need: integers, strings (a `u32` length counting the NUL, the
//! bytes, the NUL) and byte sequences (a `u32` count, the bytes). Decoding never panics and never
//! allocates more than the input holds: every length is checked against what is left.

/// Bytes of the encapsulation header.
const ENCAPSULATION_BYTES: usize = 4;
/// The encapsulation kinds read: plain CDR, big and little endian.
const CDR_BE: [u8; 2] = [0x00, 0x00];
const CDR_LE: [u8; 2] = [0x00, 0x01];

/// Why bytes are not the CDR message they should be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CdrError(pub String);

impl std::fmt::Display for CdrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A reader over one CDR message.
#[derive(Debug)]
pub struct CdrReader<'a> {
    body: &'a [u8],
    at: usize,
    little: bool,
}

impl<'a> CdrReader<'a> {
    /// Reads the encapsulation header of `message`.
    pub fn new(message: &'a [u8]) -> Result<CdrReader<'a>, CdrError> {
        if message.len() < ENCAPSULATION_BYTES {
            return Err(CdrError(format!("{} bytes: shorter than CDR's 4-byte header", message.len())));
        }
        let little = match [message[0], message[1]] {
            CDR_LE => true,
            CDR_BE => false,
            kind => return Err(CdrError(format!("encapsulation {kind:02x?}: only plain CDR (00 00, 00 01) is read"))),
        };
        Ok(CdrReader { body: &message[ENCAPSULATION_BYTES..], at: 0, little })
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CdrError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.body.len());
        let end =
            end.ok_or_else(|| CdrError(format!("{what}: {n} bytes wanted, {} left", self.body.len() - self.at)))?;
        let bytes = &self.body[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn align(&mut self, size: usize, what: &str) -> Result<(), CdrError> {
        let padding = (size - self.at % size) % size;
        self.take(padding, what).map(drop)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, CdrError> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, CdrError> {
        self.align(4, what)?;
        let bytes: [u8; 4] = self.take(4, what)?.try_into().expect("took 4");
        Ok(if self.little { u32::from_le_bytes(bytes) } else { u32::from_be_bytes(bytes) })
    }

    pub fn i32(&mut self, what: &str) -> Result<i32, CdrError> {
        self.u32(what).map(|v| v as i32)
    }

    /// A string: its length counts a NUL, which must be there; UTF-8.
    pub fn string(&mut self, what: &str) -> Result<String, CdrError> {
        let length = self.u32(what)? as usize;
        let bytes = self.take(length, what)?;
        let Some((&0, text)) = bytes.split_last() else {
            return Err(CdrError(format!("{what}: a string of {length} bytes without its NUL")));
        };
        String::from_utf8(text.to_vec()).map_err(|e| CdrError(format!("{what}: not UTF-8: {e}")))
    }

    /// A sequence of bytes, borrowed from the message.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], CdrError> {
        let count = self.u32(what)? as usize;
        self.take(count, what)
    }
}

/// A writer of one little-endian CDR message.
pub struct CdrWriter {
    message: Vec<u8>,
}

impl Default for CdrWriter {
    fn default() -> Self {
        CdrWriter { message: vec![CDR_LE[0], CDR_LE[1], 0, 0] }
    }
}

impl CdrWriter {
    fn align(&mut self, size: usize) {
        let at = self.message.len() - ENCAPSULATION_BYTES;
        self.message.resize(self.message.len() + (size - at % size) % size, 0);
    }

    pub fn u8(&mut self, value: u8) {
        self.message.push(value);
    }

    pub fn u32(&mut self, value: u32) {
        self.align(4);
        self.message.extend_from_slice(&value.to_le_bytes());
    }

    pub fn i32(&mut self, value: i32) {
        self.u32(value as u32);
    }

    /// A string; `None` if it is too long for CDR's 32-bit length.
    pub fn string(&mut self, text: &str) -> Option<()> {
        self.u32(u32::try_from(text.len() + 1).ok()?);
        self.message.extend_from_slice(text.as_bytes());
        self.message.push(0);
        Some(())
    }

    /// A sequence of bytes; `None` if it is too long for CDR's 32-bit count.
    pub fn bytes(&mut self, bytes: &[u8]) -> Option<()> {
        self.u32(u32::try_from(bytes.len()).ok()?);
        self.message.extend_from_slice(bytes);
        Some(())
    }

    pub fn finish(self) -> Vec<u8> {
        self.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the writer writes, the reader reads, alignment included.
    #[test]
    fn written_fields_read_back() {
        let mut w = CdrWriter::default();
        w.u8(7);
        w.string("rgb8").unwrap();
        w.u8(1);
        w.u32(640);
        w.bytes(&[1, 2, 3]).unwrap();
        w.i32(-5);
        let message = w.finish();
        let mut r = CdrReader::new(&message).unwrap();
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.string("b").unwrap(), "rgb8");
        assert_eq!(r.u8("c").unwrap(), 1);
        assert_eq!(r.u32("d").unwrap(), 640);
        assert_eq!(r.bytes("e").unwrap(), &[1, 2, 3]);
        assert_eq!(r.i32("f").unwrap(), -5);
        assert!(r.u8("end").is_err());
    }

    /// Big-endian messages read too; other encapsulations and short or lying lengths are errors.
    #[test]
    fn bad_messages_are_errors() {
        let mut r = CdrReader::new(&[0, 0, 0, 0, 0, 0, 0, 9]).unwrap();
        assert_eq!(r.u32("n").unwrap(), 9);
        assert!(CdrReader::new(&[0, 1]).unwrap_err().0.contains("header"));
        assert!(CdrReader::new(&[0, 7, 0, 0]).unwrap_err().0.contains("encapsulation"));
        let huge = [0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert!(CdrReader::new(&huge).unwrap().bytes("data").unwrap_err().0.contains("left"));
        let no_nul = [0, 1, 0, 0, 2, 0, 0, 0, b'a', b'b'];
        assert!(CdrReader::new(&no_nul).unwrap().string("s").unwrap_err().0.contains("NUL"));
    }

    proptest! {
        /// Any bytes: every read is a value or an error, never a panic.
        #[test]
        fn any_bytes_never_panic(message in proptest::collection::vec(any::<u8>(), 0..64), ops in proptest::collection::vec(0u8..4, 0..16)) {
            if let Ok(mut r) = CdrReader::new(&message) {
                for op in ops {
                    let _ = match op {
                        0 => r.u8("x").map(drop),
                        1 => r.u32("x").map(drop),
                        2 => r.string("x").map(drop),
                        _ => r.bytes("x").map(drop),
                    };
                }
            }
        }
    }
}
