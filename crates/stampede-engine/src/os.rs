//! The engine's calls into the operating system and the processor that Rust cannot check: the
//! one module of this crate allowed `unsafe` (the crate denies it everywhere else). Each call
//! says why it is sound under `SAFETY`; callers get safe functions with the conditions they rely
//! on in their docs.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Maps an extent file of the disk tier read-only and shared: writes through the file are visible
/// in the mapping. Only for extents the disk tier created or recovered under its channel
/// directory's lock (`disk/store.rs`).
pub(crate) fn map_extent(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the mapping is of an extent file the disk tier created or recovered under the
    // channel directory's lock; records are only appended past what is mapped into items, and
    // this process never truncates an extent (deleting unlinks it; the mapping stays valid). The
    // lock is advisory: another process truncating an extent would make reads fault (SIGBUS),
    // so the directories must belong to the runtime (docs/RECORDING.md).
    unsafe { memmap2::Mmap::map(file) }
}

/// Reserves `size` bytes for `file` on its disk (`posix_fallocate`), so a full disk fails here.
/// An extent larger than the disk's free space fails `ENOSPC` before anything is reserved: a
/// failing `posix_fallocate` may keep what it reserved until the file is removed, and would fill
/// the disk for every other writer meanwhile (seen: a 1 TiB extent's refusal made the tests
/// beside it fail `ENOSPC`).
pub(crate) fn allocate(file: &File, size: u64) -> io::Result<()> {
    if size > free_bytes(file)? {
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
    let size = libc::off_t::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: a valid open file descriptor; posix_fallocate touches no memory of ours.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size) } {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Bytes free for an unprivileged writer on `file`'s file system.
fn free_bytes(file: &File) -> io::Result<u64> {
    // SAFETY: plain data the call fills in; zeroes are a valid `statvfs`.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid open file descriptor, and a `statvfs` of ours for the call to fill in.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
}

/// Takes an exclusive `flock` on `file` without waiting; `WouldBlock` when another holds it.
pub(crate) fn lock_exclusive(file: &File) -> io::Result<()> {
    // SAFETY: a valid open file descriptor; flock touches no memory of ours.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The processor's cycle counter (x86_64 only).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn cycle_counter() -> u64 {
    // SAFETY: `rdtsc` has no preconditions; every x86_64 has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Runs `f` when the process exits normally (`atexit`).
pub(crate) fn at_exit(f: extern "C" fn()) {
    // SAFETY: `f` is a plain function with no arguments, which atexit runs once during exit.
    unsafe { libc::atexit(f) };
}
