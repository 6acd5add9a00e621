//! Moving a file of a mounted filesystem through the kernel, as e4defrag
//! does: a donor file gets fresh blocks (`fallocate`), and
//! `EXT4_IOC_MOVE_EXT` swaps them with the file's, copying the data through
//! the page cache under the kernel's locks. The donor is an unnamed
//! `O_TMPFILE` in the file's directory (so its inode, and the allocator's
//! goal, is where the file's would be), and closing it frees the file's old
//! blocks; a crash leaves it on the orphan list, freed at the next mount.
//!
//! Unlike e4defrag we check the file first (flags, swap, locks, other
//! writers), prepare the page cache so that no page forces a journal
//! commit (see `pagecache`), move large ranges per call, stop between
//! ranges at the time limit, and report what FIEMAP says afterwards.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rustix::fs::{FallocateFlags, Mode, OFlags};

use super::{pagecache, Candidate, Mover, Outcome, Skip};
use crate::extent::FileExtents;
use crate::mounted::{fiemap_extents, open_for_map};
use crate::score::BestRule;
use crate::source::Entry;
use crate::sys;

/// `EXT4_IMMUTABLE_FL` and friends, as FS_IOC_GETFLAGS returns them.
const FL_IMMUTABLE: u32 = 0x10;
const FL_APPEND: u32 = 0x20;
const FL_ENCRYPT: u32 = 0x800;
const FL_JOURNAL_DATA: u32 = 0x4000;
const FL_EXTENTS: u32 = 0x8_0000;
const FL_INLINE_DATA: u32 = 0x1000_0000;

/// Bytes moved per `EXT4_IOC_MOVE_EXT` call: large enough that calls cost
/// nothing, small enough that the page cache holds one range at a time and
/// a time limit is honoured within a fraction of a second.
pub const DEFAULT_RANGE_BYTES: u64 = 64 << 20;

/// The online mover.
#[derive(Debug)]
pub struct KernelMover {
    rule: BestRule,
    block_size: u32,
    root: bool,
    range_blocks: u64,
    swaps: HashSet<(u64, u64)>,
    buf: Vec<u8>,
    /// Whether moves freed blocks the journal has not committed yet.
    freed_since_commit: bool,
}

impl KernelMover {
    /// A mover for a filesystem of `block_size`-byte blocks, best counts by
    /// `rule`. `root` decides whether reserved blocks count as free (as
    /// e4defrag's free-space check).
    pub fn new(rule: BestRule, block_size: u32, root: bool) -> Self {
        KernelMover {
            rule,
            block_size,
            root,
            range_blocks: (DEFAULT_RANGE_BYTES / u64::from(block_size)).max(1),
            swaps: active_swap_files(),
            buf: Vec::new(),
            freed_since_commit: false,
        }
    }

    /// Sets the blocks moved per call.
    pub fn with_range_blocks(mut self, blocks: u64) -> Self {
        self.range_blocks = blocks.max(1);
        self
    }

    fn bs(&self) -> u64 {
        u64::from(self.block_size)
    }
}

/// `(st_dev, st_ino)` of the swap files in use, from `/proc/swaps`.
pub(crate) fn active_swap_files() -> HashSet<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let text = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| std::fs::metadata(p.replace("\\040", " ")).ok())
        .filter(|m| m.is_file())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

pub(crate) fn io_outcome(what: &str, e: &io::Error) -> Outcome {
    match e.raw_os_error() {
        Some(libc::ENOENT) => Outcome::Skipped(Skip::Vanished),
        Some(libc::ETXTBSY) => Outcome::Skipped(Skip::Swap),
        Some(libc::EBUSY | libc::EAGAIN) => Outcome::Retry(Skip::OpenForWriting),
        _ => Outcome::Failed(format!("{what}: {e}")),
    }
}

/// The donor: an unnamed file in `dir`, or where `O_TMPFILE` is refused, a
/// named one unlinked at once (e4defrag's `<file>.defrag`).
pub(crate) fn donor_in(dir: &Path, file: &Path) -> io::Result<OwnedFd> {
    match rustix::fs::open(
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    ) {
        Ok(fd) => return Ok(fd),
        Err(e) if e != rustix::io::Errno::OPNOTSUPP && e != rustix::io::Errno::ISDIR => {
            return Err(e.into())
        }
        Err(_) => {}
    }
    let mut name = file.as_os_str().to_os_string();
    name.push(".defrag");
    let fd = rustix::fs::open(
        &name,
        OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::RUSR,
    )?;
    rustix::fs::unlink(&name)?;
    Ok(fd)
}

impl Mover for KernelMover {
    fn defrag(&mut self, c: &Candidate, deadline: Option<Instant>) -> Outcome {
        let path = PathBuf::from(OsStr::from_bytes(&c.entry.path));
        match open_checked(&c.entry, &self.swaps) {
            Ok(fd) => self.move_file(&fd, &path, deadline),
            Err(o) => o,
        }
    }
}

/// Opens a file seen in the walk for moving, after the checks that can
/// leave it alone: still the same file, not a swap file, no flag the kernel
/// refuses (immutable, append-only, encrypted, data journaling, inline
/// data, block-mapped), no other process's lock, no other writer. It is
/// looked at read-only first: a lease, which tells of writers, needs a
/// descriptor not open for writing.
pub(crate) fn open_checked(entry: &Entry, swaps: &HashSet<(u64, u64)>) -> Result<OwnedFd, Outcome> {
    let path = PathBuf::from(OsStr::from_bytes(&entry.path));
    let probe = open_for_map(&path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => Outcome::Skipped(Skip::Vanished),
        Some(libc::EAGAIN) => Outcome::Retry(Skip::OpenForWriting),
        _ => Outcome::Failed(ext4r::error::chain(&e)),
    })?;
    check_same(&probe, entry)?;
    if swaps.contains(&(entry.dev, entry.ino)) {
        return Err(Outcome::Skipped(Skip::Swap));
    }
    let flags = rustix::fs::ioctl_getflags(&probe)
        .map_err(|e| io_outcome("FS_IOC_GETFLAGS", &e.into()))?
        .bits();
    for (bit, why) in [
        (FL_IMMUTABLE, Skip::Immutable),
        (FL_APPEND, Skip::AppendOnly),
        (FL_ENCRYPT, Skip::Encrypted),
        (FL_JOURNAL_DATA, Skip::DataJournaled),
        (FL_INLINE_DATA, Skip::InlineData),
    ] {
        if flags & bit != 0 {
            return Err(Outcome::Skipped(why));
        }
    }
    if flags & FL_EXTENTS == 0 {
        return Err(Outcome::Skipped(Skip::BlockMapped));
    }
    if sys::locked_by_other(&probe).map_err(|e| io_outcome("F_GETLK", &e))? {
        return Err(Outcome::Retry(Skip::Locked));
    }
    if sys::open_for_writing_elsewhere(&probe).map_err(|e| io_outcome("F_SETLEASE", &e))?
        == Some(true)
    {
        return Err(Outcome::Retry(Skip::OpenForWriting));
    }
    drop(probe);
    let fd = rustix::fs::open(
        &path,
        OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| io_outcome("open", &e.into()))?;
    check_same(&fd, entry)?;
    Ok(fd)
}

fn check_same(fd: impl AsFd, entry: &Entry) -> Result<(), Outcome> {
    let st = rustix::fs::fstat(fd).map_err(|e| io_outcome("fstat", &e.into()))?;
    if st.st_ino == entry.ino && st.st_dev == entry.dev {
        Ok(())
    } else {
        Err(Outcome::Skipped(Skip::Changed))
    }
}

impl KernelMover {
    fn move_file(&mut self, fd: &OwnedFd, path: &Path, deadline: Option<Instant>) -> Outcome {
        let start = match rustix::fs::fstat(fd) {
            Ok(s) => s,
            Err(e) => return io_outcome("fstat", &e.into()),
        };
        let ext = match fiemap_extents(fd, path, self.block_size) {
            Ok(x) => x,
            Err(e) => return Outcome::Skipped(Skip::Unmappable(ext4r::error::chain(&e))),
        };
        let before = ext.count();
        let blocks = ext.blocks();
        if before <= self.rule.best(blocks) {
            return Outcome::AlreadyBest { extents: before };
        }
        let free = match rustix::fs::fstatfs(fd) {
            Ok(s) if self.root => s.f_bfree,
            Ok(s) => s.f_bavail,
            Err(e) => return io_outcome("fstatfs", &e.into()),
        };
        if free < blocks {
            return Outcome::Skipped(Skip::NoSpace { need: blocks, free });
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let ranges = ext.data_ranges();
        let mut donor = match self.allocate_donor(dir, path, &ranges, blocks, free) {
            Ok(d) => d,
            Err(o) => return o,
        };
        if donor.1.physical_count() > self.rule.best(blocks) && self.freed_since_commit {
            // Blocks freed by earlier moves return to the allocator only
            // when the journal commits them: when the donor is not as good
            // as can be, commit and ask again.
            drop(donor);
            if let Err(e) = rustix::fs::syncfs(fd) {
                return io_outcome("syncfs", &e.into());
            }
            self.freed_since_commit = false;
            donor = match self.allocate_donor(dir, path, &ranges, blocks, free) {
                Ok(d) => d,
                Err(o) => return o,
            };
        }
        let (donor, donor_ext) = donor;
        // e4defrag's test: the donor must form fewer runs than the file.
        if donor_ext.physical_count() >= ext.physical_count() {
            return Outcome::NoImprovement {
                extents: before,
                donor: donor_ext.count(),
            };
        }
        // Closing the donor frees the file's old blocks.
        self.freed_since_commit = true;
        let mut stopped = false;
        let mut failure = None;
        'ranges: for &(l, n) in &ranges {
            let mut at = l;
            while at < l + n {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    stopped = true;
                    break 'ranges;
                }
                let k = self.range_blocks.min(l + n - at);
                if let Err(e) = self.move_range(fd, &donor, at, k) {
                    failure = Some(e);
                    break 'ranges;
                }
                at += k;
            }
        }
        let after = match fiemap_extents(fd, path, self.block_size) {
            Ok(x) => x.count(),
            Err(e) => return Outcome::Failed(format!("after moving: {}", ext4r::error::chain(&e))),
        };
        if let Some(e) = failure {
            if e.raw_os_error() == Some(libc::EBUSY) {
                // A writer dirtied the pages faster than the kernel could
                // release them; what was moved stays moved.
                return Outcome::Retry(Skip::Busy);
            }
            return Outcome::Failed(format!(
                "EXT4_IOC_MOVE_EXT: {} ({before} -> {after} extents, data intact)",
                ext4r::error::chain(&e)
            ));
        }
        match rustix::fs::fstat(fd) {
            Ok(end)
                if end.st_mtime != start.st_mtime
                    || end.st_mtime_nsec != start.st_mtime_nsec
                    || end.st_size != start.st_size =>
            {
                // Written meanwhile: the kernel serialised the writes with
                // the moves, so the data is the writer's; look again later.
                return Outcome::Retry(Skip::WrittenDuringMove);
            }
            Ok(_) => {}
            Err(e) => return io_outcome("fstat", &e.into()),
        }
        if stopped {
            Outcome::Stopped { before, after }
        } else if after < before {
            Outcome::Improved { before, after }
        } else {
            Outcome::Unchanged { before, after }
        }
    }

    /// A donor with blocks at the file's data ranges, and its extents.
    fn allocate_donor(
        &self,
        dir: &Path,
        path: &Path,
        ranges: &[(u64, u64)],
        blocks: u64,
        free: u64,
    ) -> Result<(OwnedFd, FileExtents), Outcome> {
        let bs = self.bs();
        let donor = donor_in(dir, path).map_err(|e| io_outcome("donor file", &e))?;
        for &(l, n) in ranges {
            match rustix::fs::fallocate(&donor, FallocateFlags::empty(), l * bs, n * bs) {
                Ok(()) => {}
                Err(rustix::io::Errno::NOSPC) => {
                    return Err(Outcome::Skipped(Skip::NoSpace { need: blocks, free }))
                }
                Err(e) => return Err(io_outcome("fallocate", &e.into())),
            }
        }
        let x = fiemap_extents(&donor, path, self.block_size)
            .map_err(|e| Outcome::Failed(ext4r::error::chain(&e)))?;
        Ok((donor, x))
    }

    /// Moves blocks `[at, at + k)` into the donor's same blocks.
    fn move_range(&mut self, fd: &OwnedFd, donor: &OwnedFd, at: u64, k: u64) -> io::Result<()> {
        move_blocks(fd, donor, at, at, k, self.bs(), &mut self.buf)
    }
}

/// Prepares the page cache and moves `k` blocks of `fd` from `orig` into the
/// donor's blocks from `donor_at`. The kernel already retries a busy page
/// four times with a forced commit; a range still busy is tried once more.
pub(crate) fn move_blocks(
    fd: &OwnedFd,
    donor: &OwnedFd,
    orig: u64,
    donor_at: u64,
    k: u64,
    bs: u64,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let (off, len) = (orig * bs, k * bs);
    let mut done = 0;
    for attempt in 0..2 {
        pagecache::prepare(fd, off + done * bs, len - done * bs, buf)?;
        let (moved, err) = sys::move_ext(fd, donor, orig + done, donor_at + done, k - done);
        done += moved.min(k - done);
        pagecache::flush_and_drop(fd, off, len)?;
        match err {
            // All moved, or the file ends earlier than planned (truncated
            // meanwhile; the caller sees the change in its size).
            None if done >= k || moved == 0 => return Ok(()),
            None => {}
            Some(e) if e.raw_os_error() == Some(libc::ENODATA) => return Ok(()),
            Some(e) if e.raw_os_error() == Some(libc::EBUSY) && attempt == 0 => {}
            Some(e) => return Err(e),
        }
    }
    Ok(())
}
