//! One fuzz input cut into a sequence of tagged steps, so that one input can drive a stateful
//! target (a session's operations, a node's mesh) through many events:
//!
//! ```text
//! [tag: u8][length: u16 little-endian][body: length bytes] ...
//! ```
//!
//! A body cut short by the end of the input is taken as it is; at most [`STEPS_MAX`] steps are
//! taken from one input. [`encode`] writes steps in this form (the seeds use it).

/// Most steps taken from one input: bounds a run's work whatever the input.
pub const STEPS_MAX: usize = 256;

/// Bytes before each step's body.
const STEP_HEADER_BYTES: usize = 3;

/// The steps of `input`, in order.
pub fn steps(input: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut rest = input;
    std::iter::from_fn(move || {
        let (header, body) = rest.split_at_checked(STEP_HEADER_BYTES)?;
        let length = usize::from(u16::from_le_bytes([header[1], header[2]]));
        let (step, after) = body.split_at(length.min(body.len()));
        rest = after;
        Some((header[0], step))
    })
    .take(STEPS_MAX)
}

/// `steps` in the form [`steps`] reads; a body longer than a step holds is cut.
pub fn encode(steps: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (tag, body) in steps {
        let body = &body[..body.len().min(usize::from(u16::MAX))];
        out.push(*tag);
        out.extend_from_slice(&(body.len() as u16).to_le_bytes());
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_and_a_short_tail_is_taken_as_it_is() {
        let written = vec![(1, vec![1, 2, 3]), (7, Vec::new()), (255, vec![9; 300])];
        let bytes = encode(&written);
        let read: Vec<(u8, Vec<u8>)> = steps(&bytes).map(|(t, b)| (t, b.to_vec())).collect();
        assert_eq!(read, written);
        let cut: Vec<_> = steps(&bytes[..bytes.len() - 100]).collect();
        assert_eq!(cut.last().map(|(t, b)| (*t, b.len())), Some((255, 200)));
        assert_eq!(steps(&[1, 2]).count(), 0, "fewer bytes than a header: no step");
    }

    #[test]
    fn at_most_the_bound_of_steps_is_taken() {
        let bytes = vec![0; STEP_HEADER_BYTES * (STEPS_MAX + 10)];
        assert_eq!(steps(&bytes).count(), STEPS_MAX);
    }
}
