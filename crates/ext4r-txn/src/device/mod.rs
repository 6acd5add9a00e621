//! Block devices: the small trait every engine component reads and writes
//! through, with a file/block-device implementation, an in-memory one, a
//! window of another device ([`OffsetDevice`]: a partition of a disk
//! image), a fault-injecting wrapper for crash tests, and a wrapper that
//! keeps the blocks last read ([`Cached`]).
//!
//! All I/O is positioned and takes `&self`, so one device can be shared by
//! threads (scans of flex groups in parallel) without a lock around a file
//! offset.

mod cached;
mod fault;
mod file;
pub mod lock;
mod mem;
mod offset;
mod record;
mod staged;
mod unflushed;

pub use cached::Cached;
pub use fault::{FaultDevice, WriteKind, WriteRecord};
pub use file::{FileDevice, OpenMode};
pub use lock::{writer_of, LockHolder};
pub use mem::MemDevice;
pub use offset::{partitions, OffsetDevice};
pub use record::{apply_cut, covers_superblock, Cut, CutStats, Op, Recorder};
pub use staged::Staged;
pub use unflushed::Unflushed;

use crate::error::{Error, Result};
use ext4r_format::num;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Size of the zero buffer used when zeroing by writing.
const ZERO_CHUNK: u64 = 1 << 20;

/// Positioned I/O on a device or image. All methods take `&self` so that a
/// device can be shared between threads.
pub trait BlockDevice: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a read past the end, [`Error::Io`] when the
    /// device fails.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;

    /// Writes all of `buf` at `offset`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a write past the end, [`Error::Io`] when the
    /// device fails.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;

    /// Makes written data durable (fsync; a cache flush on block devices).
    ///
    /// # Errors
    /// [`Error::Io`].
    fn flush(&self) -> Result<()>;

    /// Size in bytes.
    fn size(&self) -> u64;

    /// Logical sector size in bytes: the unit of direct I/O, discard and
    /// zeroout on a block device.
    fn logical_sector_size(&self) -> u32 {
        512
    }

    /// Tells the device a range is unused. Returns whether anything was
    /// done; `false` when the device does not support it. The range need not
    /// read back as zeros afterwards unless [`discard_zeroes_data`] says so.
    ///
    /// [`discard_zeroes_data`]: BlockDevice::discard_zeroes_data
    ///
    /// # Errors
    /// [`Error::OutOfRange`], or I/O errors other than "not supported".
    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        check_range(offset, len, self.size())?;
        Ok(false)
    }

    /// Whether a successful [`discard`](BlockDevice::discard) leaves the
    /// range reading as zeros (true for holes punched in image files; not
    /// promised by block devices, as mke2fs also assumes).
    fn discard_zeroes_data(&self) -> bool {
        false
    }

    /// Makes a range read back as zeros. The default writes zeros in 1 MiB
    /// chunks; implementations use cheaper means where they have them.
    ///
    /// # Errors
    /// [`Error::OutOfRange`], or [`Error::Io`] when the device fails.
    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        zeroout_by_writing(self, offset, len)
    }

    /// Reads as [`read_at`](BlockDevice::read_at) does, but from the
    /// medium, past any cache of this host: what another node sharing the
    /// device wrote a moment ago (the multiple-mount protection block).
    /// The default is `read_at`: right for memory and image files, where
    /// every writer goes through this host's page cache.
    ///
    /// # Errors
    /// As [`BlockDevice::read_at`].
    fn read_fresh(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.read_at(buf, offset)
    }

    /// Whether writes are refused: a device opened for reading only. A
    /// writer asks at open ([`Error::ReadOnly`] there), rather than
    /// failing at its first commit half way through a change. The default
    /// says writable.
    fn read_only(&self) -> bool {
        false
    }

    /// Says that `len` bytes at `offset` will be read soon, so that the
    /// device can start fetching them (into the host's page cache) while
    /// the caller works on what it has: the read-ahead of a reader that
    /// knows where it will read. A hint, never an error: a read returns
    /// the same bytes with or without it. The default does nothing
    /// (memory needs no fetching).
    fn will_need(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }

    /// Whether the `len` bytes at `offset` are in this host's memory now
    /// (its page cache), so that reading them waits on no disk: `None`
    /// when the device cannot tell, or when it is memory (the default).
    /// A look, never an error, and it reads nothing in. A reader uses it
    /// to choose between working for a cold disk and for a warm cache.
    fn resident(&self, offset: u64, len: u64) -> Option<bool> {
        let _ = (offset, len);
        None
    }

    /// Counters of the I/O done so far.
    fn stats(&self) -> IoStats;
}

/// Zeroes `len` bytes at `offset` with ordinary writes of at most 1 MiB: the
/// fallback of every [`BlockDevice::zeroout`].
///
/// # Errors
/// [`Error::OutOfRange`], or the device's write errors.
pub fn zeroout_by_writing<D: BlockDevice + ?Sized>(dev: &D, offset: u64, len: u64) -> Result<()> {
    check_range(offset, len, dev.size())?;
    if len == 0 {
        return Ok(());
    }
    let chunk = vec![0u8; len.min(ZERO_CHUNK) as usize];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(chunk.len() as u64);
        dev.write_at(&chunk[..num::index(n)], offset + done)?;
        done += n;
    }
    Ok(())
}

/// I/O counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Bytes written (a zeroout or a discard counts as writing its range).
    pub bytes_written: u64,
    /// Write calls (one per write, zeroout or discard call).
    pub write_calls: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Read calls.
    pub read_calls: u64,
}

/// Atomic counters behind [`IoStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    bytes_written: AtomicU64,
    write_calls: AtomicU64,
    bytes_read: AtomicU64,
    read_calls: AtomicU64,
}

impl Counters {
    pub(crate) fn wrote(&self, n: u64) {
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
        self.write_calls.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn read(&self, n: u64) {
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
        self.read_calls.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> IoStats {
        IoStats {
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            write_calls: self.write_calls.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            read_calls: self.read_calls.load(Ordering::Relaxed),
        }
    }
}

/// [`Error::OutOfRange`] unless `offset..offset + len` lies within `size`.
pub(crate) fn check_range(offset: u64, len: u64, size: u64) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::OutOfRange { offset, len, size }),
    }
}

/// Forwards every method, defaults included, so that a wrapper behaves
/// exactly as the device it holds.
macro_rules! forward_block_device {
    ($($ty:ty),*) => {$(
        impl<T: BlockDevice + ?Sized> BlockDevice for $ty {
            fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
                (**self).read_at(buf, offset)
            }
            fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
                (**self).write_at(buf, offset)
            }
            fn flush(&self) -> Result<()> {
                (**self).flush()
            }
            fn size(&self) -> u64 {
                (**self).size()
            }
            fn logical_sector_size(&self) -> u32 {
                (**self).logical_sector_size()
            }
            fn discard(&self, offset: u64, len: u64) -> Result<bool> {
                (**self).discard(offset, len)
            }
            fn discard_zeroes_data(&self) -> bool {
                (**self).discard_zeroes_data()
            }
            fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
                (**self).zeroout(offset, len)
            }
            fn read_fresh(&self, buf: &mut [u8], offset: u64) -> Result<()> {
                (**self).read_fresh(buf, offset)
            }
            fn read_only(&self) -> bool {
                (**self).read_only()
            }
            fn will_need(&self, offset: u64, len: u64) {
                (**self).will_need(offset, len)
            }
            fn resident(&self, offset: u64, len: u64) -> Option<bool> {
                (**self).resident(offset, len)
            }
            fn stats(&self) -> IoStats {
                (**self).stats()
            }
        }
    )*};
}

forward_block_device!(&T, Box<T>, Arc<T>);

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest device: only the required methods, so the defaults run.
    struct Plain(MemDevice);

    impl BlockDevice for Plain {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            self.0.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
            self.0.write_at(buf, offset)
        }
        fn flush(&self) -> Result<()> {
            Ok(())
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn stats(&self) -> IoStats {
            self.0.stats()
        }
    }

    #[test]
    fn default_zeroout_writes_in_chunks() {
        let d = Plain(MemDevice::new(4 << 20));
        d.write_at(&[0xAB; 4096], (3 << 20) - 100).unwrap();
        let len = (2 << 20) + 10;
        d.zeroout(1 << 20, len).unwrap();
        let mut b = vec![1u8; 4096];
        d.read_at(&mut b, (3 << 20) - 100).unwrap();
        assert!(b[..110].iter().all(|&x| x == 0));
        assert!(b[110..].iter().all(|&x| x == 0xAB));
        let s = d.stats();
        assert_eq!(s.write_calls, 1 + 3);
        assert_eq!(s.bytes_written, 4096 + len);
        assert!(!d.discard(0, 4096).unwrap());
        assert!(d.discard(0, 5 << 20).is_err());
        assert!(d.zeroout(4 << 20, 1).is_err());
        d.zeroout(4 << 20, 0).unwrap();
    }

    #[test]
    fn ranges_that_overflow_are_refused() {
        assert!(check_range(u64::MAX, 2, u64::MAX).is_err());
        assert!(check_range(10, 0, 10).is_ok());
        assert!(check_range(11, 0, 10).is_err());
    }

    #[test]
    fn hints_reach_the_device_through_every_wrapper() {
        let told = Arc::new(crate::testutil::HintRecorder::new(1 << 20));
        let shared: Arc<dyn BlockDevice> = told.clone();
        // The default does nothing, and says nothing.
        Plain(MemDevice::new(4096)).will_need(0, 4096);
        let boxed: Box<dyn BlockDevice> = Box::new(shared.clone());
        boxed.will_need(4096, 8192);
        Unflushed(shared.clone()).will_need(1, 2);
        Staged::new(shared.clone(), 4096).will_need(3, 4);
        Recorder::new(shared.clone()).will_need(5, 6);
        FaultDevice::new(shared.clone()).will_need(7, 8);
        // A window moves the range and cuts it at its end.
        let w = OffsetDevice::new(shared.clone(), 1 << 19, 1 << 18).unwrap();
        w.will_need(4096, 4096);
        w.will_need((1 << 18) - 512, 4096);
        w.will_need(1 << 18, 4096);
        assert_eq!(
            told.hints(),
            [
                (4096, 8192),
                (1, 2),
                (3, 4),
                (5, 6),
                (7, 8),
                ((1 << 19) + 4096, 4096),
                ((1 << 19) + (1 << 18) - 512, 512),
            ]
        );
    }

    #[test]
    fn wrappers_forward_everything() {
        let mem = Arc::new(MemDevice::new(1 << 20));
        let boxed: Box<dyn BlockDevice> = Box::new(Arc::clone(&mem));
        let by_ref: &dyn BlockDevice = &boxed;
        by_ref.write_at(b"abc", 100).unwrap();
        assert!(by_ref.discard(0, 4096).unwrap());
        assert!(by_ref.discard_zeroes_data());
        by_ref.write_at(b"xyz", 200).unwrap();
        let mut b = [0u8; 3];
        mem.read_at(&mut b, 200).unwrap();
        assert_eq!(&b, b"xyz");
        assert_eq!(boxed.size(), 1 << 20);
        assert_eq!(mem.stats().write_calls, 3);
        // Shared between threads through an Arc.
        std::thread::scope(|s| {
            for i in 0..4u64 {
                let m = Arc::clone(&mem);
                s.spawn(move || m.write_at(&[i as u8; 512], i * 512).unwrap());
            }
        });
        assert_eq!(mem.stats().write_calls, 7);
    }
}
