//! Getting a file's page cache into the one state in which
//! `EXT4_IOC_MOVE_EXT` runs at disk speed.
//!
//! The kernel moves a file one page at a time (fs/ext4/move_extent.c,
//! `move_extent_per_page`). Before swapping a page's blocks it must release
//! the page's buffers, and after the swap it dirties the page so that its
//! data is written to the new blocks. Since ext4 caches files in large
//! folios, the pages of a cached file share folios: once the first page of
//! a folio is moved the folio holds dirty buffers, releasing it for the next
//! page fails with EBUSY, and the kernel forces a journal commit and retries
//! — for every page of the folio. That is e4defrag's stall (a 48 MiB file:
//! 7–12 s with its pages cached, measured here). With the pages dropped
//! instead, the kernel creates a small folio per page but reads every block
//! synchronously, one at a time (1.7–2.8 s for the same file).
//!
//! So before moving a range we write it back and drop it (so no large folio
//! is left), then read it ourselves with readahead switched off on our file
//! description (`POSIX_FADV_RANDOM`): the page cache then fills with
//! single-page folios, in reads as large as our buffer. The kernel finds
//! every page up to date and releasable and never waits (0.14–0.23 s for
//! the 48 MiB file). After the move the range is written back and dropped
//! again, so memory use stays at one range.

use ext4r_format::num;
use std::os::fd::AsFd;

use rustix::fs::Advice;

use crate::sys;

/// Bytes read at a time while filling the cache.
const READ_CHUNK: usize = 1 << 20;

/// Writes back and drops `[offset, offset + len)` of the file's cache.
pub(crate) fn flush_and_drop(fd: impl AsFd, offset: u64, len: u64) -> std::io::Result<()> {
    let fd = fd.as_fd();
    sys::write_back(fd, offset, len)?;
    rustix::fs::fadvise(fd, offset, std::num::NonZeroU64::new(len), Advice::DontNeed)?;
    Ok(())
}

/// Prepares `[offset, offset + len)` for a move: written back, dropped, and
/// read again as single-page folios. `buf` is reused between calls.
pub(crate) fn prepare(
    fd: impl AsFd,
    offset: u64,
    len: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    let fd = fd.as_fd();
    flush_and_drop(fd, offset, len)?;
    // Per open file description: it affects only our reads.
    rustix::fs::fadvise(fd, 0, None, Advice::Random)?;
    buf.resize(READ_CHUNK, 0);
    let end = offset.saturating_add(len);
    let mut at = offset;
    while at < end {
        let n = num::index(end - at).min(READ_CHUNK);
        match rustix::io::pread(fd, &mut buf[..n], at) {
            Ok(0) => break,
            Ok(k) => at += k as u64,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
