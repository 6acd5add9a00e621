//! A regular file's contents: the source's data ranges written, its holes
//! left unmapped, and with [`super::CopyOptions::zeros_as_holes`] blocks of
//! zeros left unmapped too (as mke2fs -d's copy_file_chunk does).

use super::{Copier, Op, PopulateError, Result};
use ext4r_format::num;
use std::io::Read;
use std::path::Path;

impl Copier<'_> {
    /// Writes what `r` yields (at most `len` bytes) at byte `at` of file
    /// `ino`. Returns the end of what was read (`at` + bytes read: short
    /// when the source shrank).
    pub(crate) fn write_stream(
        &mut self,
        ino: u32,
        r: &mut dyn Read,
        at: u64,
        len: u64,
        src: &Path,
        path: &str,
    ) -> Result<u64> {
        let bs = self.fs.block_size();
        let mut buf = std::mem::take(&mut self.buf);
        let mut off = at;
        let end = at.saturating_add(len);
        let out = (|| {
            while off < end {
                let want = num::index((end - off).min(buf.len() as u64));
                let got = fill(r, &mut buf[..want]).map_err(|e| PopulateError::Source {
                    path: src.to_path_buf(),
                    source: e,
                })?;
                if got == 0 {
                    break;
                }
                self.write_chunk(ino, off, &buf[..got], bs, path)?;
                off += got as u64;
            }
            Ok(off)
        })();
        self.buf = buf;
        out
    }

    /// Writes `data` at `off`, without its all-zero blocks when zeros are
    /// to be holes (block boundaries counted from the file's start).
    fn write_chunk(&mut self, ino: u32, off: u64, data: &[u8], bs: u64, path: &str) -> Result<()> {
        let wr = |fs: &mut crate::write::WriteFs, at: u64, d: &[u8]| {
            fs.write(ino, at, d)
                .map_err(|e| PopulateError::image(Op::Write, path, e))
        };
        self.note_pending(data.len() as u64, path)?;
        if !self.opts.zeros_as_holes {
            wr(self.fs, off, data)?;
            self.changed = true;
            self.stats.bytes += data.len() as u64;
            return Ok(());
        }
        // Runs of blocks holding a non-zero byte, written one run at a time.
        let mut i = 0usize;
        let mut run: Option<usize> = None;
        while i < data.len() {
            let next = ((off + i as u64) / bs + 1) * bs;
            let j = num::index(next - off).min(data.len());
            let zero = data[i..j].iter().all(|&b| b == 0);
            match (zero, run) {
                (false, None) => run = Some(i),
                (true, Some(s)) => {
                    wr(self.fs, off + s as u64, &data[s..i])?;
                    self.changed = true;
                    self.stats.bytes += (i - s) as u64;
                    run = None;
                }
                _ => {}
            }
            i = j;
        }
        if let Some(s) = run {
            wr(self.fs, off + s as u64, &data[s..])?;
            self.changed = true;
            self.stats.bytes += (data.len() - s) as u64;
        }
        Ok(())
    }

    /// Gives file `ino` its full `size` when the data written stopped
    /// short of it (a hole at the end, or nothing but holes).
    pub(crate) fn set_size(&mut self, ino: u32, size: u64, path: &str) -> Result<()> {
        let now = self
            .fs
            .stat(ino)
            .map_err(|e| PopulateError::image(Op::Write, path, e))?
            .size();
        if now < size {
            self.fs
                .truncate(ino, size)
                .map_err(|e| PopulateError::image(Op::Write, path, e))?;
            self.changed = true;
        }
        Ok(())
    }
}

/// Reads until `buf` is full or the end; the bytes read.
fn fill(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
