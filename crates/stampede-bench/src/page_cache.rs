//! Making a disk tier cold again between measurements, and checking that it is.
//!
//! A channel's disk tier hands out views of a read-only shared mapping of its extent files, so
//! once a reader has touched a page it is mapped into this process, and the kernel will not drop
//! a mapped page from the page cache (neither `drop_caches` nor `posix_fadvise` evicts it). So
//! [`evict`] first unmaps this process's pages of the extents (`madvise(MADV_DONTNEED)`: for a
//! shared file mapping this only drops page-table entries; the next access faults the bytes back
//! in from the file, unchanged), then syncs and drops the pages from the page cache, and finally
//! asks `mincore` how much of the extents is still resident.
//!
//! Linux only; elsewhere nothing is evicted and everything reads as resident (a warm cache).

use std::io;
use std::path::{Path, PathBuf};

/// How a disk tier was made cold, and how cold it is.
#[derive(Clone, Debug)]
pub struct Eviction {
    /// `"drop_caches"`, `"fadvise"` (per extent file), or `"none"`; with the reason a global
    /// drop failed, if it did.
    pub method: String,
    /// Bytes of the extents' mappings in this process.
    pub mapped_bytes: u64,
    /// Of those, bytes still in the page cache afterwards.
    pub resident_bytes: u64,
}

/// Extent files (`*.extent`) under each of `dirs`, one channel directory deep.
pub fn extent_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for channel_dir in dirs.iter().filter_map(|dir| std::fs::read_dir(dir).ok()).flatten().flatten() {
        let Ok(entries) = std::fs::read_dir(channel_dir.path()) else { continue };
        files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "extent")));
    }
    files
}

/// Makes the extents under `dirs` cold: unmaps this process's pages of them, syncs, then drops
/// them from the page cache, globally (`/proc/sys/vm/drop_caches`, root only) when
/// `drop_caches`, otherwise (or if that fails) per extent file with `posix_fadvise`.
pub fn evict(dirs: &[PathBuf], drop_caches: bool) -> io::Result<Eviction> {
    let ranges = mapped_ranges(dirs)?;
    sys::unmap_pages(&ranges)?;
    sys::sync();
    let mut method = String::from("none");
    if sys::SUPPORTED {
        for file in extent_files(dirs) {
            sys::drop_file_pages(&file)?;
        }
        method = "fadvise".into();
        if drop_caches {
            method = match std::fs::write("/proc/sys/vm/drop_caches", "3") {
                Ok(()) => "drop_caches".into(),
                Err(e) => format!("fadvise (drop_caches failed: {e})"),
            };
        }
    }
    let mapped_bytes = ranges.iter().map(|r| (r.1 - r.0) as u64).sum();
    Ok(Eviction { method, mapped_bytes, resident_bytes: resident_bytes(&ranges)? })
}

/// Bytes of `ranges` (address ranges of this process) resident in the page cache.
pub fn resident_bytes(ranges: &[(usize, usize)]) -> io::Result<u64> {
    ranges.iter().map(|&(start, end)| sys::resident_bytes(start, end)).sum()
}

/// This process's mappings of extent files under any of `dirs` (`/proc/self/maps`), as
/// page-aligned address ranges.
pub fn mapped_ranges(dirs: &[PathBuf]) -> io::Result<Vec<(usize, usize)>> {
    if !sys::SUPPORTED {
        return Ok(Vec::new());
    }
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let parse = |line: &str| -> Option<(usize, usize)> {
        // `start-end perms offset dev inode   /path[ (deleted)]`: the path is the first `/` on.
        let path = line.find('/').map(|at| line[at..].trim_end_matches(" (deleted)"))?;
        let path = Path::new(path);
        if !dirs.iter().any(|dir| path.starts_with(dir)) || path.extension().is_none_or(|x| x != "extent") {
            return None;
        }
        let (start, end) = line.split_whitespace().next()?.split_once('-')?;
        Some((usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?))
    };
    Ok(maps.lines().filter_map(parse).collect())
}

#[cfg(target_os = "linux")]
mod sys {
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;
    use std::path::Path;

    use libc::{c_void, madvise, mincore, posix_fadvise, sysconf, _SC_PAGESIZE, MADV_DONTNEED, POSIX_FADV_DONTNEED};

    pub const SUPPORTED: bool = true;

    pub fn page_bytes() -> usize {
        // SAFETY: sysconf reads a constant of the system; no memory of ours is involved.
        usize::try_from(unsafe { sysconf(_SC_PAGESIZE) }).ok().filter(|&p| p > 0).unwrap_or(4096)
    }

    /// Drops this process's page-table entries for `ranges`, which must be shared read-only
    /// file mappings (the disk tier's extents); their bytes are faulted back in on next access.
    pub fn unmap_pages(ranges: &[(usize, usize)]) -> io::Result<()> {
        for &(start, end) in ranges {
            // SAFETY: `start..end` is a whole mapping listed in /proc/self/maps as a file under
            // the tier's directories, i.e. an extent mapped read-only and shared by the disk tier
            // (`memmap2::Mmap`), which nothing in this process writes. MADV_DONTNEED on such a
            // mapping leaves its contents as they are (they are the file's), so every `&[u8]`
            // into it keeps reading the same bytes.
            if unsafe { madvise(start as *mut c_void, end - start, MADV_DONTNEED) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Asks the kernel to drop `file`'s clean pages from the page cache.
    pub fn drop_file_pages(file: &Path) -> io::Result<()> {
        let file = File::open(file)?;
        // SAFETY: a valid open file descriptor; posix_fadvise touches no memory of ours.
        match unsafe { posix_fadvise(file.as_raw_fd(), 0, 0, POSIX_FADV_DONTNEED) } {
            0 => Ok(()),
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    /// Bytes of the mapping `start..end` (page-aligned) resident in the page cache.
    pub fn resident_bytes(start: usize, end: usize) -> io::Result<u64> {
        let page = page_bytes();
        let mut pages = vec![0u8; (end - start).div_ceil(page)];
        // SAFETY: `start..end` is a mapping of this process (from /proc/self/maps, page-aligned);
        // mincore writes one byte per page of it into `pages`, which has exactly that many.
        if unsafe { mincore(start as *mut c_void, end - start, pages.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(pages.iter().filter(|&&p| p & 1 != 0).count() as u64 * page as u64)
    }

    pub fn sync() {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::io;
    use std::path::Path;

    pub const SUPPORTED: bool = false;

    pub fn unmap_pages(_: &[(usize, usize)]) -> io::Result<()> {
        Ok(())
    }

    pub fn drop_file_pages(_: &Path) -> io::Result<()> {
        Ok(())
    }

    pub fn resident_bytes(start: usize, end: usize) -> io::Result<u64> {
        Ok((end - start) as u64)
    }

    pub fn sync() {}
}
