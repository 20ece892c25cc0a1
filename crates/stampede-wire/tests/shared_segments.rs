//! Shared-memory segments (`stampede_wire::shared`) in one process: what a segment holds,
//! and the bound on how many a process keeps (past it a received one is copied and its
//! descriptor closed; none is made).

use std::os::fd::OwnedFd;

use stampede_wire::shared::{self, SEALS, SEGMENTS_MAX, SHARED_BYTES_MIN};

/// A sealed memfd holding `len` bytes of `byte`.
fn sealed(len: usize, byte: u8) -> OwnedFd {
    use rustix::fs::MemfdFlags;
    let fd = rustix::fs::memfd_create("test", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::io::write(&fd, &vec![byte; len]).unwrap();
    rustix::fs::fcntl_add_seals(&fd, SEALS).unwrap();
    fd
}

#[test]
fn segments_hold_their_parts_and_a_process_keeps_at_most_segments_max() {
    let parts: [&[u8]; 2] = [&[1u8; 1000], &vec![2u8; SHARED_BYTES_MIN]];
    let segment = shared::make(&parts).expect("a segment");
    assert_eq!(segment.as_ref(), parts.concat(), "a segment holds its parts, concatenated");
    assert!(shared::descriptor(&segment).is_some(), "a whole segment has its descriptor");
    assert!(shared::descriptor(&segment.slice(1..)).is_none(), "a slice of one does not");
    let (_, same) = shared::share(&segment).unwrap();
    assert_eq!(same.as_ptr(), segment.as_ptr(), "sharing a segment passes it, not a copy");
    drop(same);

    let mut held = vec![segment];
    while held.len() < SEGMENTS_MAX {
        held.push(shared::make(&[&[3u8; SHARED_BYTES_MIN]]).expect("room for another segment"));
    }
    assert_eq!(shared::segments(), SEGMENTS_MAX);
    assert!(shared::make(&[&[4u8; SHARED_BYTES_MIN]]).is_none(), "no segment past the bound");
    let received = shared::map(sealed(SHARED_BYTES_MIN, 5), usize::MAX).unwrap();
    assert_eq!(received.as_ref(), vec![5u8; SHARED_BYTES_MIN], "past the bound a segment is copied");
    assert!(shared::descriptor(&received).is_none(), "and its descriptor not kept");
    assert_eq!(shared::segments(), SEGMENTS_MAX);

    held.clear();
    assert_eq!(shared::segments(), 0, "a segment goes with its last reference");
    let received = shared::map(sealed(SHARED_BYTES_MIN, 6), usize::MAX).unwrap();
    assert!(shared::descriptor(&received).is_some(), "below the bound a received segment is kept");
    assert_eq!(shared::map(sealed(0, 0), usize::MAX).unwrap().len(), 0, "an empty segment is no payload");
}
