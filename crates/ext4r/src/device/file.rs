//! Image files and block devices.

use super::{check_range, BlockDevice, Counters, IoStats};
use crate::error::{Error, Result};
use rustix::fs::{FallocateFlags, FileType};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How to open a device.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenMode {
    /// Open for writing.
    pub write: bool,
    /// For block devices opened for writing: O_EXCL, so the open fails
    /// while the kernel (a mount, md, dm) holds the device.
    pub exclusive: bool,
    /// For image files: create the file if missing and grow it to this many
    /// bytes if it is smaller (never shrink).
    pub create_size: Option<u64>,
}

/// A block device or an image file.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    path: PathBuf,
    size: u64,
    block_device: bool,
    sector: u32,
    counters: Counters,
}

fn open_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Open {
        path: path.to_path_buf(),
        source,
    }
}

impl FileDevice {
    /// Opens `path`.
    ///
    /// # Errors
    /// [`Error::Open`] when the file cannot be opened or sized,
    /// [`Error::InUse`] when an exclusive open of a block device is refused.
    pub fn open(path: &Path, mode: OpenMode) -> Result<Self> {
        let mut oo = OpenOptions::new();
        oo.read(true).write(mode.write);
        let exists = path.exists();
        if mode.create_size.is_some() && !exists {
            oo.create(true);
        }
        let is_blk = exists
            && rustix::fs::stat(path)
                .map(|st| FileType::from_raw_mode(st.st_mode) == FileType::BlockDevice)
                .unwrap_or(false);
        if is_blk && mode.write && mode.exclusive {
            oo.custom_flags(libc_o_excl());
        }
        let mut file = oo.open(path).map_err(|e| {
            if is_blk && e.raw_os_error() == Some(16) {
                Error::InUse(path.to_path_buf())
            } else {
                open_err(path)(e)
            }
        })?;
        let size;
        let mut sector = 512;
        if is_blk {
            size = file.seek(SeekFrom::End(0)).map_err(open_err(path))?;
            if let Ok(s) = rustix::fs::ioctl_blksszget(&file) {
                sector = s;
            }
        } else {
            let mut len = file.metadata().map_err(open_err(path))?.len();
            if let Some(want) = mode.create_size {
                if want > len {
                    file.set_len(want).map_err(open_err(path))?;
                    len = want;
                }
            }
            size = len;
        }
        Ok(FileDevice {
            file,
            path: path.to_path_buf(),
            size,
            block_device: is_blk,
            sector,
            counters: Counters::default(),
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
}

/// O_EXCL's value on Linux (the same on every architecture Rust supports).
fn libc_o_excl() -> i32 {
    0o200
}

impl BlockDevice for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len(), self.size)?;
        self.file
            .read_exact_at(buf, offset)
            .map_err(|source| Error::Io {
                op: "read",
                offset,
                source,
            })?;
        self.counters.read(buf.len() as u64);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len(), self.size)?;
        self.file
            .write_all_at(buf, offset)
            .map_err(|source| Error::Io {
                op: "write",
                offset,
                source,
            })?;
        self.counters.wrote(buf.len() as u64);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.file.sync_all().map_err(|source| Error::Io {
            op: "flush",
            offset: 0,
            source,
        })
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn logical_sector_size(&self) -> u32 {
        self.sector
    }

    /// Image files: punches a hole (the range then reads as zeros). Block
    /// devices: not attempted (BLKDISCARD needs an ioctl this crate does
    /// not issue yet), so mkfs zeroes what it must instead.
    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        if self.block_device || len == 0 {
            return Ok(false);
        }
        let len = len.min(self.size.saturating_sub(offset));
        match rustix::fs::fallocate(
            &self.file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        ) {
            Ok(()) => Ok(true),
            Err(e) if e == rustix::io::Errno::OPNOTSUPP => Ok(false),
            Err(e) => Err(Error::Io {
                op: "discard",
                offset,
                source: e.into(),
            }),
        }
    }

    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        check_range(offset, len as usize, self.size)?;
        if !self.block_device && self.discard(offset, len)? {
            self.counters.wrote(len);
            return Ok(());
        }
        let chunk = vec![0u8; (1 << 20).min(len as usize)];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            self.write_at(&chunk[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }

    fn stats(&self) -> IoStats {
        self.counters.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_file_is_created_grown_and_punched() {
        let dir = std::env::temp_dir().join(format!("ext4r-dev-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("img");
        let mode = OpenMode {
            write: true,
            exclusive: true,
            create_size: Some(1 << 20),
        };
        let d = FileDevice::open(&p, mode).unwrap();
        assert_eq!(d.size(), 1 << 20);
        assert!(!d.is_block_device());
        d.write_at(&[9u8; 4096], 8192).unwrap();
        let mut b = [0u8; 4096];
        d.read_at(&mut b, 8192).unwrap();
        assert_eq!(b, [9u8; 4096]);
        d.zeroout(8192, 4096).unwrap();
        d.read_at(&mut b, 8192).unwrap();
        assert_eq!(b, [0u8; 4096]);
        assert!(d.read_at(&mut b, (1 << 20) - 10).is_err());
        assert_eq!(d.stats().write_calls, 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
