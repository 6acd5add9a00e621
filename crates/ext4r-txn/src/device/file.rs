//! Image files and block devices.

use super::{check_range, zeroout_by_writing, BlockDevice, Counters, IoStats};
use crate::error::{Error, Result};
use ext4r_format::num;
use rustix::fs::{FallocateFlags, FileType, OFlags};
use rustix::io::Errno;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How to open a device.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenMode {
    /// Open for writing, taking the writers' lock for as long as the
    /// device lives (see [`super::lock`]); without it the open takes no
    /// lock at all.
    pub write: bool,
    /// For block devices opened for writing: `O_EXCL`, so the open fails
    /// while the kernel (a mount, md, dm, swap) holds the device. No effect
    /// on image files.
    pub exclusive: bool,
    /// For image files: create the file if missing and grow it to this many
    /// bytes if it is smaller (never shrink). Needs `write`; ignored for
    /// block devices.
    pub create_size: Option<u64>,
    /// With `write`: how long to wait for another writer to finish (the
    /// writers' lock, see [`super::lock`]); `None` refuses at once with
    /// [`Error::Locked`].
    pub lock_wait: Option<std::time::Duration>,
}

/// A block device or an image file. Opened for writing, it holds the
/// writers' lock on it for as long as it lives (see [`super::lock`]).
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    path: PathBuf,
    size: u64,
    block_device: bool,
    sector: u32,
    /// Opened without `write`.
    read_only: bool,
    counters: Counters,
    /// The disk under this device (its own number for a block device,
    /// its filesystem's for an image file), for [`hint_unit`].
    disk: u64,
    /// The largest read-ahead one `posix_fadvise` call starts, found at
    /// the first hint (see [`hint_unit`]).
    hint_unit: std::sync::OnceLock<u64>,
}

fn open_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Open {
        path: path.to_path_buf(),
        source,
    }
}

fn not_supported(e: Errno) -> bool {
    // ENOTTY: not a block device after all; EINVAL: a range the device
    // refuses; EOPNOTSUPP: no such feature.
    e == Errno::OPNOTSUPP || e == Errno::NOTTY || e == Errno::INVAL
}

impl FileDevice {
    /// Opens `path`, a block device or an image file.
    ///
    /// # Errors
    /// [`Error::Open`] when the file cannot be opened, created or sized,
    /// [`Error::InUse`] when an exclusive open of a block device is refused
    /// as busy, [`Error::Locked`] when another writer (another process, or
    /// another write open in this one) holds the image or device,
    /// [`Error::InvalidArgument`] for a path that is neither a block
    /// device nor a regular file, or `create_size` without `write`.
    pub fn open(path: impl AsRef<Path>, mode: OpenMode) -> Result<Self> {
        let path = path.as_ref();
        if mode.create_size.is_some() && !mode.write {
            return Err(Error::InvalidArgument(format!(
                "{}: creating an image needs write access",
                path.display()
            )));
        }
        let kind = match std::fs::metadata(path) {
            Ok(m) => Some(FileType::from_raw_mode(m.mode())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && mode.create_size.is_some() => {
                None
            }
            Err(e) => return Err(open_err(path)(e)),
        };
        let is_blk = kind == Some(FileType::BlockDevice);
        if !matches!(
            kind,
            None | Some(FileType::BlockDevice | FileType::RegularFile)
        ) {
            return Err(not_a_device(path));
        }
        let mut oo = OpenOptions::new();
        oo.read(true).write(mode.write);
        if is_blk {
            if mode.write && mode.exclusive {
                // O_EXCL without O_CREAT claims a block device (open(2)).
                oo.custom_flags(OFlags::EXCL.bits() as i32);
            }
        } else if mode.create_size.is_some() {
            oo.create(true);
        }
        let file = oo.open(path).map_err(|e| {
            if is_blk && e.raw_os_error() == Some(Errno::BUSY.raw_os_error()) {
                Error::InUse(path.to_path_buf())
            } else {
                open_err(path)(e)
            }
        })?;
        // Judge what was opened, not what the path named a moment before.
        let meta = file.metadata().map_err(open_err(path))?;
        let opened = FileType::from_raw_mode(meta.mode());
        if opened != FileType::RegularFile && (opened != FileType::BlockDevice || !is_blk) {
            return Err(not_a_device(path));
        }
        if mode.write {
            // Before anything is read or sized: what another writer is
            // doing is not to be looked at, let alone changed.
            super::lock::lock_exclusive(&file, path, mode.lock_wait)?;
        }
        if is_blk && mode.write && blk::read_only(&file).unwrap_or(false) {
            // Refused at open, as e2fsprogs' tools are, not at the first
            // write half way through a change.
            return Err(open_err(path)(std::io::Error::from_raw_os_error(
                Errno::ROFS.raw_os_error(),
            )));
        }
        let (size, sector) = if is_blk {
            let size = blk::size(&file).map_err(|e| open_err(path)(e.into()))?;
            (size, rustix::fs::ioctl_blksszget(&file).unwrap_or(512))
        } else {
            let mut len = meta.len();
            if let Some(want) = mode.create_size.filter(|&w| w > len) {
                file.set_len(want).map_err(open_err(path))?;
                len = want;
            }
            (len, 512)
        };
        Ok(FileDevice {
            file,
            path: path.to_path_buf(),
            size,
            block_device: is_blk,
            sector: sector.max(1),
            read_only: !mode.write,
            counters: Counters::default(),
            disk: if is_blk { meta.rdev() } else { meta.dev() },
            hint_unit: std::sync::OnceLock::new(),
        })
    }

    /// Whether this is a block device (not an image file).
    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sector-aligned part of a range (discard and zeroout ioctls refuse
    /// unaligned ones with EINVAL).
    fn aligned(&self, offset: u64, len: u64) -> (u64, u64) {
        let s = u64::from(self.sector);
        let start = offset.div_ceil(s) * s;
        let end = (offset + len) / s * s;
        (start, end.saturating_sub(start))
    }
}

fn not_a_device(path: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{}: not a block device or regular file",
        path.display()
    ))
}

impl BlockDevice for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.size)?;
        self.file
            .read_exact_at(buf, offset)
            .map_err(Error::io("read", offset))?;
        self.counters.read(buf.len() as u64);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.size)?;
        self.file
            .write_all_at(buf, offset)
            .map_err(Error::io("write", offset))?;
        self.counters.wrote(buf.len() as u64);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.file.sync_all().map_err(Error::io("flush", 0))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn logical_sector_size(&self) -> u32 {
        self.sector
    }

    /// Image files: punches a hole, so the range reads as zeros and stops
    /// taking space. Block devices: BLKDISCARD on the sector-aligned part.
    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        check_range(offset, len, self.size)?;
        let done = if self.block_device {
            let (start, n) = self.aligned(offset, len);
            n > 0
                && blk::discard(&self.file, start, n)
                    .or_else(unsupported_is_false("discard", start))?
        } else {
            len > 0
                && punch_hole(&self.file, offset, len)
                    .or_else(unsupported_is_false("discard", offset))?
        };
        if done {
            self.counters.wrote(len);
        }
        Ok(done)
    }

    fn discard_zeroes_data(&self) -> bool {
        !self.block_device
    }

    /// Image files: a punched hole (zero range where holes are not
    /// supported). Block devices: BLKZEROOUT, which lets the device zero
    /// without data transfer when it can. Writing zeros is the fallback.
    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        check_range(offset, len, self.size)?;
        if len == 0 {
            return Ok(());
        }
        if self.block_device {
            let (start, n) = self.aligned(offset, len);
            let zeroed = n > 0
                && blk::zeroout(&self.file, start, n)
                    .or_else(unsupported_is_false("zeroout", start))?;
            if zeroed {
                // Unaligned head and tail, if any, by writing.
                zeroout_by_writing(self, offset, start - offset)?;
                zeroout_by_writing(self, start + n, offset + len - (start + n))?;
                self.counters.wrote(n);
                return Ok(());
            }
        } else {
            let zeroed = punch_hole(&self.file, offset, len)
                .or_else(|e| {
                    if not_supported(e) {
                        zero_range(&self.file, offset, len)
                    } else {
                        Err(e)
                    }
                })
                .or_else(unsupported_is_false("zeroout", offset))?;
            if zeroed {
                self.counters.wrote(len);
                return Ok(());
            }
        }
        zeroout_by_writing(self, offset, len)
    }

    /// Block devices: through a descriptor of its own opened `O_DIRECT`,
    /// as e2fsprogs reads the MMP block, so that another node's write is
    /// seen rather than this host's cached copy. Image files: `read_at`
    /// (every writer of a file goes through this host's page cache).
    fn read_fresh(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if !self.block_device {
            return self.read_at(buf, offset);
        }
        check_range(offset, buf.len() as u64, self.size)?;
        let fail = |e: Errno| Error::io("direct read", offset)(e.into());
        let fd = rustix::fs::open(
            &self.path,
            OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(fail)?;
        // Whole sectors into a sector-aligned buffer: what O_DIRECT takes.
        let s = u64::from(self.sector);
        let start = offset / s * s;
        let end = (offset + buf.len() as u64).div_ceil(s) * s;
        let len = num::index(end - start);
        let mut raw = vec![0u8; len + self.sector as usize];
        let shift = raw.as_ptr().align_offset(self.sector as usize);
        let aligned = &mut raw[shift..shift + len];
        let mut done = 0;
        while done < len {
            let n =
                rustix::io::pread(&fd, &mut aligned[done..], start + done as u64).map_err(fail)?;
            if n == 0 {
                return Err(fail(Errno::IO));
            }
            done += n;
        }
        let at = num::index(offset - start);
        buf.copy_from_slice(&aligned[at..at + buf.len()]);
        self.counters.read(buf.len() as u64);
        Ok(())
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    /// `posix_fadvise(WILLNEED)`: the kernel starts reading the range into
    /// the page cache and returns; the reads that follow find it there or
    /// wait for it. The file's pages are the cache, so a hint costs this
    /// process no memory. Linux starts at most one read-ahead window per
    /// call (the larger of the disk's `read_ahead_kb` and `max_sectors_kb`)
    /// and drops the rest, so a long range is told in pieces of that size.
    /// Failures (a range past the end) are ignored, as a hint's are.
    fn will_need(&self, offset: u64, len: u64) {
        let unit = *self.hint_unit.get_or_init(|| hint_unit(self.disk));
        let end = offset.saturating_add(len).min(self.size);
        let mut at = offset;
        while at < end {
            let piece = unit.min(end - at);
            if let Some(n) = std::num::NonZeroU64::new(piece) {
                let _ = rustix::fs::fadvise(&self.file, at, Some(n), rustix::fs::Advice::WillNeed);
            }
            at += piece;
        }
    }

    /// `preadv2(RWF_NOWAIT)` of a byte in each of up to 16 pages spread
    /// over the range: the kernel returns `EAGAIN` rather than go to the
    /// disk for a page not in its cache, so the look reads nothing in.
    /// `None` where the file's filesystem does not take the flag (tmpfs:
    /// memory anyway) or the kernel is older than 4.14.
    fn resident(&self, offset: u64, len: u64) -> Option<bool> {
        const PAGE: u64 = 4096;
        const LOOKS: u64 = 16;
        let end = offset.saturating_add(len).min(self.size);
        if offset >= end {
            return Some(true);
        }
        let pages = (end - 1) / PAGE - offset / PAGE + 1;
        let step = pages.div_ceil(LOOKS);
        let mut byte = [0u8; 1];
        let mut page = offset / PAGE;
        while page * PAGE < end {
            let at = (page * PAGE).max(offset);
            let bufs = &mut [std::io::IoSliceMut::new(&mut byte)];
            match rustix::io::preadv2(&self.file, bufs, at, rustix::io::ReadWriteFlags::NOWAIT) {
                Ok(1) => {}
                Ok(_) | Err(Errno::AGAIN) => return Some(false),
                Err(_) => return None,
            }
            page += step;
        }
        Some(true)
    }

    fn stats(&self) -> IoStats {
        self.counters.get()
    }
}

/// Bytes one `posix_fadvise(WILLNEED)` call reads ahead at most on the disk
/// numbered `disk`: Linux caps it at the larger of the read-ahead window
/// (`queue/read_ahead_kb`) and the largest request (`queue/max_sectors_kb`),
/// found in sysfs under the disk or, for a partition, its parent. 128 KiB,
/// the kernel's default window, where they cannot be read (a filesystem
/// with no disk under it, such as tmpfs, which needs no hints anyway).
fn hint_unit(disk: u64) -> u64 {
    const DEFAULT: u64 = 128 << 10;
    let (major, minor) = (rustix::fs::major(disk), rustix::fs::minor(disk));
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let kib = |name: &str| -> Option<u64> {
        [base.join("queue"), base.join("../queue")]
            .iter()
            .find_map(|q| std::fs::read_to_string(q.join(name)).ok())
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    let window = kib("read_ahead_kb")
        .unwrap_or(0)
        .max(kib("max_sectors_kb").unwrap_or(0));
    if window == 0 {
        DEFAULT
    } else {
        window.saturating_mul(1024)
    }
}

/// `Ok(false)` for "not supported here", the error otherwise.
fn unsupported_is_false(op: &'static str, offset: u64) -> impl FnOnce(Errno) -> Result<bool> {
    move |e| {
        if not_supported(e) {
            Ok(false)
        } else {
            Err(Error::io(op, offset)(e.into()))
        }
    }
}

fn punch_hole(file: &File, offset: u64, len: u64) -> std::result::Result<bool, Errno> {
    let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    rustix::fs::fallocate(file, flags, offset, len).map(|()| true)
}

fn zero_range(file: &File, offset: u64, len: u64) -> std::result::Result<bool, Errno> {
    let flags = FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE;
    rustix::fs::fallocate(file, flags, offset, len).map(|()| true)
}

/// The block-device ioctls rustix has no safe wrapper for. Each is one
/// `ioctl` call whose argument type matches the kernel's
/// `include/uapi/linux/fs.h` definition.
#[allow(unsafe_code)]
mod blk {
    use rustix::io::Errno;
    use rustix::ioctl::{ioctl, opcode, Getter, Opcode, Setter};
    use std::fs::File;

    /// `BLKGETSIZE64`: `_IOR(0x12, 114, size_t)`, though the kernel always
    /// stores a `u64`.
    const BLKGETSIZE64: Opcode = opcode::read::<usize>(0x12, 114);
    /// `BLKDISCARD`: `_IO(0x12, 119)` with a pointer to `u64[2]`.
    const BLKDISCARD: Opcode = opcode::none(0x12, 119);
    /// `BLKZEROOUT`: `_IO(0x12, 127)` with a pointer to `u64[2]`.
    const BLKZEROOUT: Opcode = opcode::none(0x12, 127);

    /// `BLKROGET`: `_IO(0x12, 94)` with a pointer to an `int`.
    const BLKROGET: Opcode = opcode::none(0x12, 94);

    /// Whether the block device `file` is read-only (`blockdev --setro`,
    /// `losetup -r`): the kernel lets it be opened for writing and then
    /// fails each write.
    pub(super) fn read_only(file: &File) -> Result<bool, Errno> {
        // SAFETY: BLKROGET writes exactly one int through the pointer,
        // which Getter provides and then reads back.
        let ro = unsafe { ioctl(file, Getter::<BLKROGET, std::ffi::c_int>::new()) }?;
        Ok(ro != 0)
    }

    /// Size in bytes of the block device `file`.
    pub(super) fn size(file: &File) -> Result<u64, Errno> {
        // SAFETY: BLKGETSIZE64 writes exactly one u64 through the pointer,
        // which Getter provides and then reads back.
        unsafe { ioctl(file, Getter::<BLKGETSIZE64, u64>::new()) }
    }

    /// Discards `len` bytes at `offset` (both sector-aligned).
    pub(super) fn discard(file: &File, offset: u64, len: u64) -> Result<bool, Errno> {
        // SAFETY: BLKDISCARD only reads a u64[2] {start, length} through the
        // pointer, which Setter keeps alive for the call.
        unsafe { ioctl(file, Setter::<BLKDISCARD, [u64; 2]>::new([offset, len])) }?;
        Ok(true)
    }

    /// Zeroes `len` bytes at `offset` (both sector-aligned).
    pub(super) fn zeroout(file: &File, offset: u64, len: u64) -> Result<bool, Errno> {
        // SAFETY: BLKZEROOUT only reads a u64[2] {start, length} through the
        // pointer, which Setter keeps alive for the call.
        unsafe { ioctl(file, Setter::<BLKZEROOUT, [u64; 2]>::new([offset, len])) }?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{loop_unavailable, LoopDev, TempDir};

    #[test]
    fn hints_change_no_read() {
        let dir = TempDir::new("file-hint");
        let path = dir.join("img");
        let d = FileDevice::open(&path, rw(Some(1 << 20))).unwrap();
        let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        d.write_at(&data, 4096).unwrap();
        // Inside, across the end, past it, empty: all quietly taken.
        d.will_need(0, 1 << 20);
        d.will_need(1 << 19, 1 << 20);
        d.will_need(2 << 20, 4096);
        d.will_need(4096, 0);
        let mut back = vec![0u8; 8192];
        d.read_at(&mut back, 4096).unwrap();
        assert_eq!(back, data);
        // Somewhere between a page and anything sane.
        let unit = *d.hint_unit.get().unwrap();
        assert!((4096..=1 << 32).contains(&unit), "{unit}");
        // No disk under dev_t 0: the kernel's default window.
        assert_eq!(hint_unit(0), 128 << 10);
    }

    #[test]
    fn resident_says_what_the_page_cache_holds_without_reading_it_in() {
        let dir = TempDir::new("file-resident");
        let path = dir.join("img");
        let d = FileDevice::open(&path, rw(Some(1 << 20))).unwrap();
        d.write_at(&vec![7u8; 256 << 10], 0).unwrap();
        let mut back = vec![0u8; 256 << 10];
        d.read_at(&mut back, 0).unwrap();
        let Some(warm) = d.resident(0, 256 << 10) else {
            // The directory's filesystem does not take RWF_NOWAIT (tmpfs).
            return;
        };
        assert!(warm);
        // Empty and past-the-end ranges hold nothing to wait for.
        assert_eq!(d.resident(4 << 20, 4096), Some(true));
        assert_eq!(d.resident(0, 0), Some(true));
        // Written back and dropped from the cache: not resident, and the
        // look did not read it in.
        d.file.sync_all().unwrap();
        let all = std::num::NonZeroU64::new(1 << 20);
        rustix::fs::fadvise(&d.file, 0, all, rustix::fs::Advice::DontNeed).unwrap();
        assert_eq!(d.resident(0, 256 << 10), Some(false));
        assert_eq!(d.resident(128 << 10, 4096), Some(false));
        d.read_at(&mut back[..4096], 128 << 10).unwrap();
        assert_eq!(back[0], 7);
        assert_eq!(d.resident(128 << 10, 4096), Some(true));
    }

    fn rw(create_size: Option<u64>) -> OpenMode {
        OpenMode {
            write: true,
            exclusive: true,
            create_size,
            lock_wait: None,
        }
    }

    #[test]
    fn image_file_is_created_grown_never_shrunk() {
        let dir = TempDir::new("file");
        let p = dir.join("img");
        let d = FileDevice::open(&p, rw(Some(1 << 20))).unwrap();
        assert_eq!(d.size(), 1 << 20);
        assert!(!d.is_block_device());
        assert_eq!(d.logical_sector_size(), 512);
        assert_eq!(d.path(), p);
        drop(d);
        let d = FileDevice::open(&p, rw(Some(2 << 20))).unwrap();
        assert_eq!(d.size(), 2 << 20);
        drop(d);
        let d = FileDevice::open(&p, rw(Some(4096))).unwrap();
        assert_eq!(d.size(), 2 << 20);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 2 << 20);
        let ro = FileDevice::open(&p, OpenMode::default()).unwrap();
        assert_eq!(ro.size(), 2 << 20);
        assert!(ro.write_at(&[1], 0).is_err());
    }

    #[test]
    fn one_writer_at_a_time_readers_untouched() {
        let dir = TempDir::new("file-lock");
        let p = dir.join("img");
        let w = FileDevice::open(&p, rw(Some(1 << 20))).unwrap();
        // A second write open, even in this process, is refused and says
        // who holds the image.
        match FileDevice::open(&p, rw(None)) {
            Err(Error::Locked { path, holder }) => {
                assert_eq!(path, p);
                assert_eq!(holder.pid, Some(std::process::id()));
                assert!(holder.this_process);
                assert_eq!(crate::device::writer_of(&p), Some(holder));
            }
            other => panic!("{other:?}"),
        }
        // Readers take no lock and are not kept out.
        let r = FileDevice::open(&p, OpenMode::default()).unwrap();
        drop(w);
        // The lock goes with the writer's descriptor. Another test thread
        // spawning a program can hold a copy of it for an instant (a
        // child between fork and exec, where O_CLOEXEC closes it).
        let gone = std::time::Instant::now();
        while crate::device::writer_of(&p).is_some()
            && gone.elapsed() < std::time::Duration::from_secs(5)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(crate::device::writer_of(&p), None);
        let w = FileDevice::open(&p, rw(None)).unwrap();
        drop((w, r));
        // Waiting: a holder that lets go within the limit is waited for.
        let w = FileDevice::open(&p, rw(None)).unwrap();
        let waiting = OpenMode {
            lock_wait: Some(std::time::Duration::from_secs(20)),
            ..rw(None)
        };
        let started = std::time::Instant::now();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(w);
        });
        FileDevice::open(&p, waiting).unwrap();
        assert!(started.elapsed() >= std::time::Duration::from_millis(250));
        t.join().unwrap();
        let w = FileDevice::open(&p, rw(None)).unwrap();
        let short = OpenMode {
            lock_wait: Some(std::time::Duration::from_millis(100)),
            ..rw(None)
        };
        assert!(matches!(
            FileDevice::open(&p, short),
            Err(Error::Locked { .. })
        ));
        drop(w);
    }

    /// Another process holding the lock is named by pid and command: here
    /// util-linux flock(1), which takes the same flock lock.
    #[test]
    fn another_process_is_named() {
        let Some(flock) = crate::testutil::tool("flock") else {
            println!("skipped: flock(1) not found");
            return;
        };
        let dir = TempDir::new("file-lock-other");
        let p = dir.join("img");
        std::fs::File::create(&p).unwrap().set_len(1 << 20).unwrap();
        // -o: the lock stays with flock itself, not with the command it
        // runs, so that killing flock releases it.
        let mut child = std::process::Command::new(flock)
            .arg("-o")
            .arg(&p)
            .args(["sleep", "10"])
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while crate::device::writer_of(&p).is_none() && t0.elapsed().as_secs() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let r = FileDevice::open(&p, rw(None));
        let _ = child.kill();
        let _ = child.wait();
        match r {
            Err(e @ Error::Locked { .. }) => {
                let Error::Locked { holder, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(holder.pid, Some(child.id()));
                assert_eq!(holder.command.as_deref(), Some("flock"));
                assert!(!holder.this_process);
                assert_eq!(
                    e.to_string(),
                    format!("{} is in use by flock (pid {})", p.display(), child.id())
                );
            }
            other => panic!("{other:?}"),
        }
        // Its death released it: at once, or (when flock was killed
        // between its fork and its child's closing of the file) as soon as
        // the child has closed it.
        let t0 = std::time::Instant::now();
        while let Err(e) = FileDevice::open(&p, rw(None)) {
            assert!(
                t0.elapsed().as_secs() < 10,
                "still locked after flock's death: {e}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn bad_opens_are_refused() {
        let dir = TempDir::new("file-bad");
        let p = dir.join("missing");
        assert!(matches!(
            FileDevice::open(&p, OpenMode::default()),
            Err(Error::Open { .. })
        ));
        let ro_create = OpenMode {
            create_size: Some(4096),
            ..OpenMode::default()
        };
        assert!(matches!(
            FileDevice::open(&p, ro_create),
            Err(Error::InvalidArgument(_))
        ));
        assert!(!p.exists());
        assert!(matches!(
            FileDevice::open(dir.join(""), OpenMode::default()),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn image_file_io_zeroout_discard_and_stats() {
        let dir = TempDir::new("file-io");
        let d = FileDevice::open(dir.join("img"), rw(Some(1 << 20))).unwrap();
        d.write_at(&[9u8; 8192], 8192).unwrap();
        let mut b = [0u8; 8192];
        d.read_at(&mut b, 8192).unwrap();
        assert_eq!(b, [9u8; 8192]);
        // Unaligned zeroout inside written data.
        d.zeroout(8192 + 100, 1000).unwrap();
        d.read_at(&mut b, 8192).unwrap();
        assert!(b[..100].iter().all(|&x| x == 9));
        assert!(b[100..1100].iter().all(|&x| x == 0));
        assert!(b[1100..].iter().all(|&x| x == 9));
        assert!(d.discard_zeroes_data());
        assert!(d.discard(8192, 4096).unwrap());
        d.read_at(&mut b, 8192).unwrap();
        assert!(b[..4096].iter().all(|&x| x == 0));
        assert!(b[4096..].iter().all(|&x| x == 9));
        // Exact reads: a read past the end is an error, not a short read.
        assert!(matches!(
            d.read_at(&mut b, (1 << 20) - 10),
            Err(Error::OutOfRange { .. })
        ));
        assert!(d.zeroout((1 << 20) - 10, 11).is_err());
        assert!(d.discard(1 << 20, 1).is_err());
        d.flush().unwrap();
        let s = d.stats();
        assert_eq!(s.write_calls, 3);
        assert_eq!(s.bytes_written, 8192 + 1000 + 4096);
        assert_eq!((s.read_calls, s.bytes_read), (3, 3 * 8192));
    }

    #[test]
    fn loop_block_device_ioctls() {
        if let Some(why) = loop_unavailable() {
            println!("skipped: {why}");
            return;
        }
        let dir = TempDir::new("file-blk");
        let img = dir.join("img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(4 << 20)
            .unwrap();
        let lo = match LoopDev::attach(&img) {
            Ok(l) => l,
            Err(e) => {
                println!("skipped: cannot attach a loop device: {e}");
                return;
            }
        };
        let d = FileDevice::open(&lo.0, rw(None)).unwrap();
        assert!(d.is_block_device());
        assert_eq!(d.size(), 4 << 20);
        assert_eq!(d.logical_sector_size(), 512);
        assert!(!d.discard_zeroes_data());
        // A second exclusive open of the same device is refused as busy.
        assert!(matches!(
            FileDevice::open(&lo.0, rw(None)),
            Err(Error::InUse(_))
        ));
        d.write_at(&[7u8; 8192], 4096).unwrap();
        d.zeroout(4096 + 100, 2000).unwrap();
        let mut b = [0u8; 8192];
        d.read_at(&mut b, 4096).unwrap();
        assert!(b[..100].iter().all(|&x| x == 7));
        assert!(b[100..2100].iter().all(|&x| x == 0));
        assert!(b[2100..].iter().all(|&x| x == 7));
        // A fresh read sees what the device holds, unaligned too.
        let mut f = [0u8; 100];
        d.read_fresh(&mut f, 4096 + 2100 + 7).unwrap();
        assert!(f.iter().all(|&x| x == 7));
        // Loop devices over a file system that punches holes discard.
        assert!(d.discard(4096 + 100, 8000).unwrap());
        assert!(d.read_at(&mut b, (4 << 20) - 100).is_err());
        d.flush().unwrap();
        drop(d);
        // What went through the loop device reached the image.
        let f = std::fs::File::open(&img).unwrap();
        f.read_exact_at(&mut b[..100], 4096).unwrap();
        assert!(b[..100].iter().all(|&x| x == 7));
    }
}
