//! File contents as `std::io::Read + Seek`.

use ext4r_format::num;
use std::io::{self, Read, Seek, SeekFrom};

use ext4r_format::inode::InodeFlags;

use super::volume::Filesystem;
use crate::error::Result;
use crate::object::InodeInfo;
use ext4r_txn::map::Run;

/// Reads a file's contents: mapped blocks from the device in runs as long
/// as the caller's buffer, holes and unwritten extents as zeros, inline
/// data from the inode.
pub struct FileReader<'a> {
    fs: &'a Filesystem,
    runs: Vec<Run>,
    inline: Option<Vec<u8>>,
    size: u64,
    pos: u64,
}

impl core::fmt::Debug for FileReader<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FileReader")
            .field("size", &self.size)
            .field("pos", &self.pos)
            .field("runs", &self.runs.len())
            .finish_non_exhaustive()
    }
}

impl Filesystem {
    /// A reader over the contents of an inode (a regular file, or the
    /// target of a slow symlink, or a directory's raw blocks).
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the block mapping is broken.
    pub fn open_file(&self, info: &InodeInfo) -> Result<FileReader<'_>> {
        let inline = if info.inode.flags().contains(InodeFlags::INLINE_DATA) {
            Some(self.inline_data(info)?)
        } else if self.is_fast_symlink(info) {
            // The target, in i_block (shorter than it, by definition).
            Some(info.inode.i_block[..num::index(info.inode.size())].to_vec())
        } else {
            None
        };
        let runs = if inline.is_some() {
            Vec::new()
        } else {
            self.runs(info)?
        };
        Ok(FileReader {
            fs: self,
            runs,
            inline,
            size: info.inode.size(),
            pos: 0,
        })
    }
}

impl FileReader<'_> {
    /// The file size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The runs of mapped blocks.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// Fills `buf` from the current position, which is below the size.
    fn read_mapped(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let bs = u64::from(self.fs.block_size());
        let lblk = self.pos / bs;
        let in_block = self.pos % bs;
        let left = (self.size - self.pos).min(buf.len() as u64);
        // The first run ending after lblk.
        let i = self.runs.partition_point(|r| r.end() <= lblk);
        let n = match self.runs.get(i) {
            Some(r) if r.logical <= lblk => {
                let avail = (r.end() - lblk) * bs - in_block;
                let n = num::index(left.min(avail));
                if r.unwritten {
                    buf[..n].fill(0);
                } else {
                    let off = (r.physical + (lblk - r.logical)) * bs + in_block;
                    self.fs
                        .device()
                        .read_at(&mut buf[..n], off)
                        .map_err(io::Error::other)?;
                }
                n
            }
            next => {
                // A hole up to the next run or the end.
                let hole_end = next.map_or(u64::MAX, |r| r.logical.saturating_mul(bs));
                let n = num::index(left.min(hole_end - self.pos));
                buf[..n].fill(0);
                n
            }
        };
        Ok(n)
    }
}

impl Read for FileReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let n = if let Some(data) = &self.inline {
            let start = num::index(self.pos);
            let n = (data.len() - start).min(buf.len());
            buf[..n].copy_from_slice(&data[start..start + n]);
            n
        } else {
            self.read_mapped(buf)?
        };
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for FileReader<'_> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let new = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.size.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match new {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing position",
            )),
        }
    }
}
