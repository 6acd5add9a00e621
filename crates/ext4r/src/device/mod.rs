//! Block devices: the small trait every engine component reads and writes
//! through, with a file/block-device implementation and an in-memory one.

mod file;
mod mem;

pub use file::{FileDevice, OpenMode};
pub use mem::MemDevice;

use crate::error::Result;
use std::sync::atomic::{AtomicU64, Ordering};

/// Positioned I/O on a device or image. All methods take `&self` so that a
/// device can be shared between threads.
pub trait BlockDevice: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`.
    ///
    /// # Errors
    /// I/O errors, or a read past the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Writes all of `buf` at `offset`.
    ///
    /// # Errors
    /// I/O errors, or a write past the end.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Makes written data durable.
    ///
    /// # Errors
    /// I/O errors.
    fn flush(&self) -> Result<()>;
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Logical sector size in bytes.
    fn logical_sector_size(&self) -> u32 {
        512
    }
    /// Tells the device a range is unused. Returns whether it was done.
    ///
    /// # Errors
    /// I/O errors other than "not supported".
    fn discard(&self, _offset: u64, _len: u64) -> Result<bool> {
        Ok(false)
    }
    /// Makes a range read back as zeros.
    ///
    /// # Errors
    /// I/O errors.
    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        let chunk = vec![0u8; (1 << 20).min(len as usize)];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            self.write_at(&chunk[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }
    /// Counters of the I/O done so far.
    fn stats(&self) -> IoStats;
}

/// I/O counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Bytes written (zeroout counts as written).
    pub bytes_written: u64,
    /// Write calls.
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

pub(crate) fn check_range(offset: u64, len: usize, size: u64) -> Result<()> {
    let end = offset.checked_add(len as u64);
    if end.is_none_or(|e| e > size) {
        return Err(crate::Error::OutOfRange {
            offset,
            len: len as u64,
            size,
        });
    }
    Ok(())
}
