//! A sparse in-memory device for tests and fuzzing: untouched areas read as
//! zeros and cost nothing, so a "1 TiB" device is cheap.

use super::{check_range, BlockDevice, Counters, IoStats};
use crate::error::{Error, Result};
use ext4r_format::num;
use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// Storage is allocated in chunks of this many bytes, on first write.
const CHUNK: u64 = 64 * 1024;

type Chunks = HashMap<u64, Box<[u8]>>;

/// An in-memory device of a fixed size.
#[derive(Debug)]
pub struct MemDevice {
    size: u64,
    sector: u32,
    chunks: Mutex<Chunks>,
    counters: Counters,
}

impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: u64) -> Self {
        MemDevice {
            size,
            sector: 512,
            chunks: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }

    /// A device holding a copy of `bytes` (an image to check or fuzz).
    /// All-zero chunks are not stored.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut chunks = HashMap::new();
        for (i, c) in bytes.chunks(num::index(CHUNK)).enumerate() {
            if c.iter().any(|&b| b != 0) {
                let mut b = vec![0u8; num::index(CHUNK)].into_boxed_slice();
                b[..c.len()].copy_from_slice(c);
                chunks.insert(i as u64, b);
            }
        }
        MemDevice {
            chunks: Mutex::new(chunks),
            ..MemDevice::new(bytes.len() as u64)
        }
    }

    /// The same device reporting `sector` as its logical sector size.
    #[must_use]
    pub fn with_sector_size(mut self, sector: u32) -> Self {
        self.sector = sector.max(1);
        self
    }

    /// A copy of the current contents (with fresh counters): the state to
    /// return to, or to compare with, in crash tests.
    pub fn snapshot(&self) -> MemDevice {
        MemDevice {
            size: self.size,
            sector: self.sector,
            chunks: Mutex::new(self.lock().clone()),
            counters: Counters::default(),
        }
    }

    /// The whole contents as one buffer (for small devices).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the size does not fit in memory's
    /// address space.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let len = usize::try_from(self.size)
            .map_err(|_| Error::InvalidArgument(format!("{} bytes: too large", self.size)))?;
        let mut out = vec![0u8; len];
        for (&idx, c) in self.lock().iter() {
            let start = num::index(idx * CHUNK);
            let n = c.len().min(len - start);
            out[start..start + n].copy_from_slice(&c[..n]);
        }
        Ok(out)
    }

    /// Writes the contents to a new sparse image file at `path` (for the
    /// e2fsprogs oracles), replacing any file there.
    ///
    /// # Errors
    /// [`Error::Open`] or [`Error::Io`] from the file system.
    pub fn save(&self, path: &Path) -> Result<()> {
        let open_err = |source| Error::Open {
            path: path.to_path_buf(),
            source,
        };
        let f = std::fs::File::create(path).map_err(open_err)?;
        f.set_len(self.size).map_err(open_err)?;
        for (&idx, c) in self.lock().iter() {
            let off = idx * CHUNK;
            let n = c.len().min(num::index(self.size - off));
            f.write_all_at(&c[..n], off)
                .map_err(Error::io("write", off))?;
        }
        f.sync_all().map_err(Error::io("flush", 0))
    }

    /// Bytes actually stored (touched chunks).
    pub fn allocated(&self) -> u64 {
        self.lock().len() as u64 * CHUNK
    }

    fn lock(&self) -> MutexGuard<'_, Chunks> {
        // A panic while holding the lock leaves bytes, not broken invariants.
        self.chunks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Splits `offset..offset + len` at chunk boundaries: (chunk index, offset
/// within the chunk, position in the caller's buffer, length).
fn pieces(offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut done = 0u64;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let pos = offset + done;
        let within = pos % CHUNK;
        let n = (CHUNK - within).min(len - done);
        let piece = (
            pos / CHUNK,
            within as usize,
            num::index(done),
            num::index(n),
        );
        done += n;
        Some(piece)
    })
}

impl BlockDevice for MemDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.size)?;
        let chunks = self.lock();
        for (idx, within, at, n) in pieces(offset, buf.len() as u64) {
            match chunks.get(&idx) {
                Some(c) => buf[at..at + n].copy_from_slice(&c[within..within + n]),
                None => buf[at..at + n].fill(0),
            }
        }
        self.counters.read(buf.len() as u64);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.size)?;
        let mut chunks = self.lock();
        for (idx, within, at, n) in pieces(offset, buf.len() as u64) {
            let c = chunks
                .entry(idx)
                .or_insert_with(|| vec![0u8; num::index(CHUNK)].into_boxed_slice());
            c[within..within + n].copy_from_slice(&buf[at..at + n]);
        }
        self.counters.wrote(buf.len() as u64);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn logical_sector_size(&self) -> u32 {
        self.sector
    }

    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        self.zeroout(offset, len)?;
        Ok(true)
    }

    fn discard_zeroes_data(&self) -> bool {
        true
    }

    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        check_range(offset, len, self.size)?;
        let mut chunks = self.lock();
        for (idx, within, _, n) in pieces(offset, len) {
            if n == num::index(CHUNK) {
                chunks.remove(&idx);
            } else if let Some(c) = chunks.get_mut(&idx) {
                c[within..within + n].fill(0);
            }
        }
        self.counters.wrote(len);
        Ok(())
    }

    fn stats(&self) -> IoStats {
        self.counters.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    #[test]
    fn sparse_reads_and_writes() {
        let d = MemDevice::new(1 << 30);
        d.write_at(&[7u8; 100], CHUNK - 50).unwrap();
        let mut b = [0u8; 200];
        d.read_at(&mut b, CHUNK - 100).unwrap();
        assert_eq!(&b[..50], &[0; 50]);
        assert_eq!(&b[50..150], &[7; 100]);
        assert_eq!(d.allocated(), 2 * CHUNK);
        d.zeroout(0, 2 * CHUNK).unwrap();
        assert_eq!(d.allocated(), 0);
        assert!(d.write_at(&[0], 1 << 30).is_err());
        assert!(d.read_at(&mut b, (1 << 30) - 100).is_err());
        let s = d.stats();
        assert_eq!((s.write_calls, s.bytes_written), (2, 100 + 2 * CHUNK));
        assert_eq!((s.read_calls, s.bytes_read), (1, 200));
    }

    #[test]
    fn partial_zeroout_keeps_the_rest() {
        let d = MemDevice::new(4 * CHUNK);
        d.write_at(&vec![1u8; 3 * CHUNK as usize], 0).unwrap();
        d.zeroout(10, 2 * CHUNK).unwrap();
        let v = d.to_vec().unwrap();
        assert!(v[..10].iter().all(|&x| x == 1));
        assert!(v[10..10 + 2 * CHUNK as usize].iter().all(|&x| x == 0));
        assert!(v[10 + 2 * CHUNK as usize..3 * CHUNK as usize]
            .iter()
            .all(|&x| x == 1));
        // The whole middle chunk was dropped, not filled.
        assert_eq!(d.allocated(), 2 * CHUNK);
    }

    #[test]
    fn snapshot_from_bytes_and_save_round_trip() {
        let mut img = vec![0u8; 3 * CHUNK as usize + 100];
        img[5] = 1;
        img[3 * CHUNK as usize + 99] = 2;
        let d = MemDevice::from_bytes(&img).with_sector_size(4096);
        assert_eq!(d.size(), img.len() as u64);
        assert_eq!(d.allocated(), 2 * CHUNK);
        assert_eq!(d.logical_sector_size(), 4096);
        let snap = d.snapshot();
        d.write_at(b"later", 1000).unwrap();
        assert_eq!(snap.to_vec().unwrap(), img);
        assert_eq!(snap.stats(), IoStats::default());
        let dir = TempDir::new("mem");
        let p = dir.join("img");
        snap.save(&p).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), img);
    }
}
