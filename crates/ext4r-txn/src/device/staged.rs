//! A device whose writes stay in memory: reads see them, the device
//! underneath never gets them. What a change would write is then taken as
//! a list of whole blocks (the fast-commit replay stages its result this
//! way, to be journaled before it goes home; a dry run can diff it).

use super::{check_range, BlockDevice, Counters, IoStats};
use crate::error::Result;
use ext4r_format::num;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// `inner` with every write kept in memory in whole blocks of
/// `block_size` bytes. Flushes do nothing.
pub struct Staged {
    inner: Arc<dyn BlockDevice>,
    block_size: u64,
    blocks: Mutex<BTreeMap<u64, Box<[u8]>>>,
    counters: Counters,
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged")
            .field("block_size", &self.block_size)
            .field("blocks", &self.len())
            .finish_non_exhaustive()
    }
}

impl Staged {
    /// Stages writes to `inner` in blocks of `block_size` bytes (a power
    /// of two).
    pub fn new(inner: Arc<dyn BlockDevice>, block_size: u32) -> Self {
        Staged {
            inner,
            block_size: u64::from(block_size.max(512)),
            blocks: Mutex::new(BTreeMap::new()),
            counters: Counters::default(),
        }
    }

    fn blocks(&self) -> MutexGuard<'_, BTreeMap<u64, Box<[u8]>>> {
        self.blocks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The blocks written, in ascending order, with their contents.
    pub fn take(&self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut *self.blocks())
            .into_iter()
            .map(|(b, d)| (b, d.into_vec()))
            .collect()
    }

    /// Number of blocks written.
    pub fn len(&self) -> usize {
        self.blocks().len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.blocks().is_empty()
    }
}

impl BlockDevice for Staged {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.size())?;
        self.inner.read_at(buf, offset)?;
        if !buf.is_empty() {
            let bs = self.block_size;
            let end = offset + buf.len() as u64;
            for (&b, data) in self.blocks().range(offset / bs..=(end - 1) / bs) {
                let start = b * bs;
                let from = offset.max(start);
                let to = end.min(start + bs);
                buf[num::index(from - offset)..num::index(to - offset)]
                    .copy_from_slice(&data[num::index(from - start)..num::index(to - start)]);
            }
        }
        self.counters.read(buf.len() as u64);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.size())?;
        let bs = self.block_size;
        let end = offset + buf.len() as u64;
        let mut at = offset;
        while at < end {
            let b = at / bs;
            let start = b * bs;
            let to = end.min(start + bs);
            let mut block = match self.blocks().get(&b) {
                Some(d) => d.clone(),
                None => {
                    let mut d = vec![0u8; num::index(bs)].into_boxed_slice();
                    // A block past the device's end stays zeros.
                    let n = num::index(bs.min(self.size() - start));
                    self.inner.read_at(&mut d[..n], start)?;
                    d
                }
            };
            block[num::index(at - start)..num::index(to - start)]
                .copy_from_slice(&buf[num::index(at - offset)..num::index(to - offset)]);
            self.blocks().insert(b, block);
            at = to;
        }
        self.counters.wrote(buf.len() as u64);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn logical_sector_size(&self) -> u32 {
        self.inner.logical_sector_size()
    }

    // What is not staged is read from `inner`: the hints are its.
    fn will_need(&self, offset: u64, len: u64) {
        self.inner.will_need(offset, len)
    }
    fn resident(&self, offset: u64, len: u64) -> Option<bool> {
        self.inner.resident(offset, len)
    }

    fn stats(&self) -> IoStats {
        self.counters.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    #[test]
    fn reads_see_staged_writes_and_inner_stays() {
        let mem = Arc::new(MemDevice::new(16 << 10));
        mem.write_at(&[7u8; 4096], 4096).unwrap();
        let s = Staged::new(mem.clone(), 4096);
        s.write_at(&[1u8; 100], 4096 + 50).unwrap();
        s.write_at(&[2u8; 5000], 8000).unwrap();
        let mut buf = vec![0u8; 8192];
        s.read_at(&mut buf, 4096).unwrap();
        assert_eq!(buf[..50], [7u8; 50]);
        assert_eq!(buf[50..150], [1u8; 100]);
        assert_eq!(buf[150..3904], [7u8; 3754][..]);
        assert_eq!(buf[3904..8192], vec![2u8; 4288][..]);
        let mut inner = vec![0u8; 4096];
        mem.read_at(&mut inner, 4096).unwrap();
        assert_eq!(inner, vec![7u8; 4096]);
        let blocks = s.take();
        assert_eq!(
            blocks.iter().map(|b| b.0).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert!(blocks.iter().all(|b| b.1.len() == 4096));
    }
}
