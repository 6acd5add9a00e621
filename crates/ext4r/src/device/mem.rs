//! A sparse in-memory device for tests and fuzzing: untouched areas read as
//! zeros and cost nothing.

use super::{check_range, BlockDevice, Counters, IoStats};
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Mutex;

const CHUNK: u64 = 64 * 1024;

/// An in-memory device of a fixed size.
#[derive(Debug)]
pub struct MemDevice {
    size: u64,
    chunks: Mutex<HashMap<u64, Box<[u8]>>>,
    counters: Counters,
}

impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: u64) -> Self {
        MemDevice {
            size,
            chunks: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }

    /// Bytes actually stored (touched chunks).
    pub fn allocated(&self) -> u64 {
        self.chunks.lock().map_or(0, |c| c.len() as u64 * CHUNK)
    }
}

impl BlockDevice for MemDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len(), self.size)?;
        let chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = 0usize;
        while done < buf.len() {
            let pos = offset + done as u64;
            let (idx, within) = (pos / CHUNK, (pos % CHUNK) as usize);
            let n = (CHUNK as usize - within).min(buf.len() - done);
            match chunks.get(&idx) {
                Some(c) => buf[done..done + n].copy_from_slice(&c[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
        self.counters.read(buf.len() as u64);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len(), self.size)?;
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = 0usize;
        while done < buf.len() {
            let pos = offset + done as u64;
            let (idx, within) = (pos / CHUNK, (pos % CHUNK) as usize);
            let n = (CHUNK as usize - within).min(buf.len() - done);
            let c = chunks
                .entry(idx)
                .or_insert_with(|| vec![0u8; CHUNK as usize].into_boxed_slice());
            c[within..within + n].copy_from_slice(&buf[done..done + n]);
            done += n;
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

    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        self.zeroout(offset, len)?;
        Ok(true)
    }

    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        check_range(offset, len as usize, self.size)?;
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        let end = offset + len;
        let mut pos = offset;
        while pos < end {
            let (idx, within) = (pos / CHUNK, (pos % CHUNK) as usize);
            let n = (CHUNK - within as u64).min(end - pos) as usize;
            if within == 0 && n == CHUNK as usize {
                chunks.remove(&idx);
            } else if let Some(c) = chunks.get_mut(&idx) {
                c[within..within + n].fill(0);
            }
            pos += n as u64;
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
    }
}
