//! The system calls rustix does not wrap: FIEMAP, EXT4_IOC_MOVE_EXT,
//! FS_IOC_GETFSMAP, sync_file_range and fcntl's F_GETLK and F_SETLEASE.
//! Every `unsafe` block of the crate is here; each passes a buffer of the
//! layout the kernel's uapi headers give (linux/fiemap.h, linux/fsmap.h,
//! fs/ext4/ext4.h) and sized as the call says.
#![allow(unsafe_code)]

use ext4r_format::num;
use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// `_IOWR(type, nr, size)` as asm-generic/ioctl.h encodes it.
const fn iowr(ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    // The size field has 14 bits (checked when the constant is built).
    assert!(size < 1 << 14);
    #[allow(clippy::cast_possible_truncation)] // size < 2^14, asserted above
    let size = size as u32;
    ((3 << 30) | (size << 16) | ((ty as u32) << 8) | nr as u32) as libc::c_ulong
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapHeader {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

const _: () = assert!(std::mem::size_of::<FiemapHeader>() == 32);
const _: () = assert!(std::mem::size_of::<FiemapExtent>() == 56);

const FS_IOC_FIEMAP: libc::c_ulong = iowr(b'f', 11, std::mem::size_of::<FiemapHeader>());
const FIEMAP_FLAG_SYNC: u32 = 0x1;
const FIEMAP_EXTENT_LAST: u32 = 0x1;
/// Delayed allocation or unknown location: no physical block yet.
const FIEMAP_EXTENT_UNKNOWN: u32 = 0x2;
const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
/// Records per call, as e4defrag asks for (`EXTENT_MAX_COUNT`).
const FIEMAP_BATCH: usize = 512;

/// One FIEMAP record, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MapRecord {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub unwritten: bool,
    /// No physical location yet (delayed allocation).
    pub unknown: bool,
}

#[repr(C)]
struct FiemapBuf {
    head: FiemapHeader,
    ext: [FiemapExtent; FIEMAP_BATCH],
}

/// The FIEMAP records of an open file (flushed first, `FIEMAP_FLAG_SYNC`),
/// in batches of 512 as e4defrag reads them.
pub(crate) fn fiemap(fd: impl AsFd) -> io::Result<Vec<MapRecord>> {
    let mut buf = Box::new(FiemapBuf {
        head: FiemapHeader::default(),
        ext: [FiemapExtent::default(); FIEMAP_BATCH],
    });
    let mut out = Vec::new();
    let mut pos = 0u64;
    loop {
        buf.head = FiemapHeader {
            fm_start: pos,
            fm_length: u64::MAX - pos,
            fm_flags: FIEMAP_FLAG_SYNC,
            fm_extent_count: num::sat_u32(FIEMAP_BATCH),
            ..FiemapHeader::default()
        };
        // SAFETY: `buf` is a fiemap header followed by room for
        // fm_extent_count records, which is what the kernel fills.
        let r = unsafe {
            libc::ioctl(
                fd.as_fd().as_raw_fd(),
                FS_IOC_FIEMAP,
                std::ptr::addr_of_mut!(*buf),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = (buf.head.fm_mapped_extents as usize).min(FIEMAP_BATCH);
        let mut last = n == 0;
        for e in &buf.ext[..n] {
            out.push(MapRecord {
                logical: e.fe_logical,
                physical: e.fe_physical,
                length: e.fe_length,
                unwritten: e.fe_flags & FIEMAP_EXTENT_UNWRITTEN != 0,
                unknown: e.fe_flags & FIEMAP_EXTENT_UNKNOWN != 0,
            });
            last |= e.fe_flags & FIEMAP_EXTENT_LAST != 0;
        }
        if last || n < FIEMAP_BATCH {
            return Ok(out);
        }
        let next = buf.ext[n - 1]
            .fe_logical
            .saturating_add(buf.ext[n - 1].fe_length);
        if next <= pos {
            // A kernel that reported nothing past where we asked: stop
            // rather than loop.
            return Ok(out);
        }
        pos = next;
    }
}

#[repr(C)]
#[derive(Default)]
struct MoveExtent {
    reserved: u32,
    donor_fd: u32,
    orig_start: u64,
    donor_start: u64,
    len: u64,
    moved_len: u64,
}

const _: () = assert!(std::mem::size_of::<MoveExtent>() == 40);
const EXT4_IOC_MOVE_EXT: libc::c_ulong = iowr(b'f', 15, std::mem::size_of::<MoveExtent>());

/// `EXT4_IOC_MOVE_EXT`: exchanges `len` blocks of `orig` from `orig_start`
/// with the donor's from `donor_start`. Returns the blocks moved and the
/// error that stopped the kernel, if any (it may have moved part first).
pub(crate) fn move_ext(
    orig: impl AsFd,
    donor: impl AsFd,
    orig_start: u64,
    donor_start: u64,
    len: u64,
) -> (u64, Option<io::Error>) {
    let donor_fd = donor.as_fd().as_raw_fd();
    let mut m = MoveExtent {
        donor_fd: donor_fd as u32,
        orig_start,
        donor_start,
        len,
        ..MoveExtent::default()
    };
    // SAFETY: `m` is the kernel's struct move_extent, read and written.
    let r = unsafe {
        libc::ioctl(
            orig.as_fd().as_raw_fd(),
            EXT4_IOC_MOVE_EXT,
            std::ptr::addr_of_mut!(m),
        )
    };
    let err = (r < 0).then(io::Error::last_os_error);
    (m.moved_len, err)
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Fsmap {
    fmr_device: u32,
    fmr_flags: u32,
    fmr_physical: u64,
    fmr_owner: u64,
    fmr_offset: u64,
    fmr_length: u64,
    fmr_reserved: [u64; 3],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FsmapHead {
    fmh_iflags: u32,
    fmh_oflags: u32,
    fmh_count: u32,
    fmh_entries: u32,
    fmh_reserved: [u64; 6],
    fmh_keys: [Fsmap; 2],
}

const _: () = assert!(std::mem::size_of::<Fsmap>() == 64);
const _: () = assert!(std::mem::size_of::<FsmapHead>() == 192);
const FS_IOC_GETFSMAP: libc::c_ulong = iowr(b'X', 59, std::mem::size_of::<FsmapHead>());
const FMR_OF_SPECIAL_OWNER: u32 = 0x10;
const FMR_OF_LAST: u32 = 0x20;
const FMR_OWN_FREE: u64 = 1;
const FSMAP_BATCH: usize = 1024;

#[repr(C)]
struct FsmapBuf {
    head: FsmapHead,
    recs: [Fsmap; FSMAP_BATCH],
}

/// The free-space records of a mounted filesystem from `FS_IOC_GETFSMAP`
/// (opened on any file or directory of it), as `(byte offset, bytes)`.
pub(crate) fn getfsmap_free(fd: impl AsFd) -> io::Result<Vec<(u64, u64)>> {
    let mut buf = Box::new(FsmapBuf {
        head: FsmapHead::default(),
        recs: [Fsmap::default(); FSMAP_BATCH],
    });
    buf.head.fmh_count = num::sat_u32(FSMAP_BATCH);
    buf.head.fmh_keys[1] = Fsmap {
        fmr_device: u32::MAX,
        fmr_flags: u32::MAX,
        fmr_physical: u64::MAX,
        fmr_owner: u64::MAX,
        fmr_offset: u64::MAX,
        ..Fsmap::default()
    };
    let mut out = Vec::new();
    loop {
        // SAFETY: a fsmap_head followed by room for fmh_count records.
        let r = unsafe {
            libc::ioctl(
                fd.as_fd().as_raw_fd(),
                FS_IOC_GETFSMAP,
                std::ptr::addr_of_mut!(*buf),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = (buf.head.fmh_entries as usize).min(FSMAP_BATCH);
        if n == 0 {
            return Ok(out);
        }
        for rec in &buf.recs[..n] {
            if rec.fmr_flags & FMR_OF_SPECIAL_OWNER != 0 && rec.fmr_owner == FMR_OWN_FREE {
                out.push((rec.fmr_physical, rec.fmr_length));
            }
        }
        let last = buf.recs[n - 1];
        if last.fmr_flags & FMR_OF_LAST != 0 {
            return Ok(out);
        }
        // Continue after the last record (fsmap_advance in linux/fsmap.h).
        buf.head.fmh_keys[0] = last;
    }
}

/// `sync_file_range(fd, offset, len, WAIT_BEFORE | WRITE | WAIT_AFTER)`:
/// writes the range back and waits, without forcing a journal commit as
/// fsync would.
pub(crate) fn write_back(fd: impl AsFd, offset: u64, len: u64) -> io::Result<()> {
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    let off = i64::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let n = i64::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: plain integer arguments.
    let r = unsafe { libc::sync_file_range(fd.as_fd().as_raw_fd(), off, n, flags) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether another process holds a POSIX lock on any part of the file
/// (`F_GETLK` for a whole-file write lock, as e4defrag's `file_check`).
pub(crate) fn locked_by_other(fd: impl AsFd) -> io::Result<bool> {
    // SAFETY: an all-zero flock is a valid value to fill in.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    #[allow(clippy::cast_possible_truncation)] // F_WRLCK and SEEK_SET are 1 and 0
    let (l_type, l_whence) = (
        libc::F_WRLCK as libc::c_short,
        libc::SEEK_SET as libc::c_short,
    );
    fl.l_type = l_type;
    fl.l_whence = l_whence;
    // SAFETY: F_GETLK reads and writes the flock passed.
    let r = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_GETLK, &mut fl) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(libc::c_int::from(fl.l_type) != libc::F_UNLCK)
}

/// Whether some process has the file open for writing: a read lease
/// (`F_SETLEASE`, `F_RDLCK`) is only granted when nobody does. `fd` must be
/// open read-only; the lease, when granted, is dropped at once. `Ok(None)`
/// when leases are not available (disabled, or not the owner without
/// CAP_LEASE), so the answer is unknown.
///
/// A process that opens the file for writing while the lease is held makes
/// the kernel send the holder SIGIO, whose default action ends the program.
/// So the lease is taken only when the program ignores or handles SIGIO
/// (`e4defrag-r` ignores it); otherwise the answer is unknown too.
pub(crate) fn open_for_writing_elsewhere(fd: impl AsFd) -> io::Result<Option<bool>> {
    if !sigio_harmless()? {
        return Ok(None);
    }
    let raw = fd.as_fd().as_raw_fd();
    // SAFETY: F_SETLEASE takes an integer argument.
    let r = unsafe { libc::fcntl(raw, libc::F_SETLEASE, libc::F_RDLCK) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) => Ok(Some(true)),
            Some(libc::EACCES | libc::EPERM | libc::EINVAL | libc::ENOLCK) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: as above.
    let r = unsafe { libc::fcntl(raw, libc::F_SETLEASE, libc::F_UNLCK) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some(false))
}

/// The page size (the kernel moves data a page at a time).
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf takes and returns integers.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Whether SIGIO arriving now would leave the process running: its
/// disposition is "ignore" or a handler, not the default (terminate).
fn sigio_harmless() -> io::Result<bool> {
    // SAFETY: an all-zero sigaction is a valid value for the kernel to fill.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `old`.
    let r = unsafe { libc::sigaction(libc::SIGIO, std::ptr::null(), &mut old) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old.sa_sigaction != libc::SIG_DFL)
}

/// Ignores SIGIO for the whole process, so that the lease
/// `open_for_writing_elsewhere` takes can be broken by a writer's open
/// without ending the program. For a program's `main`, before threads start.
///
/// # Errors
/// The `signal` call's error.
pub fn ignore_sigio() -> io::Result<()> {
    // SAFETY: SIG_IGN installs no handler code; nothing else in the
    // process relies on SIGIO.
    let r = unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
    if r == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn ioctl_numbers_are_the_kernels() {
        assert_eq!(FS_IOC_FIEMAP, 0xC020_660B);
        assert_eq!(EXT4_IOC_MOVE_EXT, 0xC028_660F);
        assert_eq!(FS_IOC_GETFSMAP, 0xC0C0_583B);
    }

    /// A writer opening the file while the lease is held breaks it with
    /// SIGIO: with SIGIO at its default the check must not take the lease
    /// (the signal would end the process), and once ignored the check runs
    /// through opens racing it. (One test: the disposition is process-wide.)
    #[test]
    fn racing_writers_do_not_end_the_process() {
        let dir = std::env::temp_dir().join(format!("ext4r-sigio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"x").unwrap();
        let probe = std::fs::File::open(&path).unwrap();
        if !sigio_harmless().unwrap() {
            assert_eq!(open_for_writing_elsewhere(&probe).unwrap(), None);
        }
        ignore_sigio().unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let answers = std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // A non-blocking open fails with EWOULDBLOCK while a
                    // lease is being broken; either way the lease breaks.
                    let _ = std::fs::OpenOptions::new()
                        .write(true)
                        .custom_flags(libc::O_NONBLOCK)
                        .open(&path);
                }
            });
            let mut answers = [0u32; 3];
            for _ in 0..20_000 {
                let a = open_for_writing_elsewhere(&probe).unwrap();
                answers[match a {
                    Some(true) => 0,
                    Some(false) => 1,
                    None => 2,
                }] += 1;
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            answers
        });
        std::fs::remove_dir_all(&dir).unwrap();
        // Leases may be unavailable here (unknown every time); otherwise
        // every check answered, and the process is still here.
        assert!(
            answers[2] == 20_000 || answers[0] + answers[1] == 20_000,
            "{answers:?}"
        );
    }
}
