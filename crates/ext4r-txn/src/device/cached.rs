//! A device that keeps the blocks last read, as the kernel's buffer cache
//! keeps metadata: a long-running writer (a FUSE mount) reads the same
//! directory and inode-table blocks again and again — each lookup, each
//! unlink, each stat — and each read of the page cache is a system call
//! and a copy. Only reads of exactly one aligned block are kept; every
//! write, zeroout and discard goes to the device at once and updates or
//! drops the blocks it covers, so a read never returns anything but what
//! the device holds (the writers' lock keeps other writers out while the
//! filesystem is open). Nothing changes for durability: this layer holds
//! nothing that is not already written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{BlockDevice, IoStats};
use crate::error::Result;

/// The blocks kept and when each was last used.
#[derive(Debug, Default)]
struct Cache {
    blocks: HashMap<u64, (Box<[u8]>, u64)>,
    tick: u64,
    /// Changes made through this layer so far: a read that began before
    /// one and ends after it is not kept (it may hold the old bytes).
    changes: u64,
}

/// `inner` with the last `capacity` blocks of `unit` bytes read kept in
/// memory (the least recently used one goes first).
#[derive(Debug)]
pub struct Cached<D: BlockDevice + ?Sized> {
    inner: Arc<D>,
    unit: u64,
    capacity: usize,
    cache: Mutex<Cache>,
}

impl<D: BlockDevice + ?Sized> Cached<D> {
    /// Keeps up to `capacity` blocks of `unit` bytes (a power of two, the
    /// filesystem's block size) of `inner`; a unit that is not a power of
    /// two, or a capacity of 0, keeps nothing.
    pub fn new(inner: Arc<D>, unit: u32, capacity: usize) -> Self {
        let capacity = if unit.is_power_of_two() { capacity } else { 0 };
        Cached {
            inner,
            unit: u64::from(unit),
            capacity,
            cache: Mutex::new(Cache::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The block `offset..offset + len` is, when it is exactly one.
    fn single(&self, offset: u64, len: usize) -> Option<u64> {
        (self.capacity > 0 && len as u64 == self.unit && offset % self.unit == 0)
            .then(|| offset / self.unit)
    }

    /// After `offset..offset + len` changed on the device: blocks it covers
    /// whole take `data`'s bytes (when given), those it covers in part are
    /// dropped.
    fn changed(&self, offset: u64, len: u64, data: Option<&[u8]>) {
        if self.capacity == 0 || len == 0 {
            return;
        }
        let end = offset.saturating_add(len);
        let first = offset / self.unit;
        let last = (end - 1) / self.unit;
        let mut c = self.lock();
        c.changes += 1;
        if c.blocks.is_empty() {
            return;
        }
        let touched: Vec<u64> = if last - first < c.blocks.len() as u64 {
            (first..=last)
                .filter(|b| c.blocks.contains_key(b))
                .collect()
        } else {
            c.blocks
                .keys()
                .copied()
                .filter(|b| (first..=last).contains(b))
                .collect()
        };
        for b in touched {
            let (s, e) = (b * self.unit, (b + 1) * self.unit);
            match data {
                Some(d) if s >= offset && e <= end => {
                    let from = usize::try_from(s - offset).unwrap_or(usize::MAX);
                    let to = usize::try_from(e - offset).unwrap_or(usize::MAX);
                    match (d.get(from..to), c.blocks.get_mut(&b)) {
                        (Some(bytes), Some(slot)) => slot.0.copy_from_slice(bytes),
                        _ => {
                            c.blocks.remove(&b);
                        }
                    }
                }
                _ => {
                    c.blocks.remove(&b);
                }
            }
        }
    }
}

impl<D: BlockDevice + ?Sized> BlockDevice for Cached<D> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let Some(b) = self.single(offset, buf.len()) else {
            return self.inner.read_at(buf, offset);
        };
        let before = {
            let mut c = self.lock();
            c.tick += 1;
            let now = c.tick;
            if let Some((bytes, used)) = c.blocks.get_mut(&b) {
                buf.copy_from_slice(bytes);
                *used = now;
                return Ok(());
            }
            c.changes
        };
        // Read without the lock held: a write meanwhile (from another
        // thread) drops or updates what is kept, and this read, older
        // than it, must not be kept over it: it is kept only if no change
        // went through this layer while it was read. A change counts once
        // its write has reached the device, under the lock, so either it
        // is seen here or it comes after this block is kept and updates
        // it (whatever the device's own counters say).
        self.inner.read_at(buf, offset)?;
        let mut c = self.lock();
        if c.changes != before {
            return Ok(());
        }
        if c.blocks.len() >= self.capacity {
            if let Some(old) = c.blocks.iter().min_by_key(|(_, v)| v.1).map(|(&k, _)| k) {
                c.blocks.remove(&old);
            }
        }
        c.tick += 1;
        let now = c.tick;
        c.blocks.insert(b, (buf.to_vec().into_boxed_slice(), now));
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let r = self.inner.write_at(buf, offset);
        // A failed write may have changed part of the range: dropped.
        let data = r.is_ok().then_some(buf);
        self.changed(offset, buf.len() as u64, data);
        r
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn logical_sector_size(&self) -> u32 {
        self.inner.logical_sector_size()
    }
    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        let r = self.inner.discard(offset, len);
        self.changed(offset, len, None);
        r
    }
    fn discard_zeroes_data(&self) -> bool {
        self.inner.discard_zeroes_data()
    }
    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        let r = self.inner.zeroout(offset, len);
        self.changed(offset, len, None);
        r
    }
    fn read_fresh(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_fresh(buf, offset)
    }
    fn read_only(&self) -> bool {
        self.inner.read_only()
    }
    fn will_need(&self, offset: u64, len: u64) {
        self.inner.will_need(offset, len)
    }
    fn resident(&self, offset: u64, len: u64) -> Option<bool> {
        self.inner.resident(offset, len)
    }
    fn stats(&self) -> IoStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    fn dev() -> (Arc<MemDevice>, Cached<MemDevice>) {
        let m = Arc::new(MemDevice::new(64 * 4096));
        let c = Cached::new(Arc::clone(&m), 4096, 4);
        (m, c)
    }

    fn read(c: &Cached<MemDevice>, block: u64) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        c.read_at(&mut b, block * 4096).unwrap();
        b
    }

    #[test]
    fn a_block_read_twice_is_read_from_the_device_once() {
        let (m, c) = dev();
        m.write_at(&[7u8; 4096], 3 * 4096).unwrap();
        let before = m.stats().read_calls;
        assert_eq!(read(&c, 3), vec![7u8; 4096]);
        assert_eq!(read(&c, 3), vec![7u8; 4096]);
        assert_eq!(m.stats().read_calls, before + 1);
        // Reads of other shapes go through, and are not kept.
        let mut two = vec![0u8; 8192];
        c.read_at(&mut two, 3 * 4096).unwrap();
        c.read_at(&mut two, 3 * 4096).unwrap();
        let mut odd = vec![0u8; 4096];
        c.read_at(&mut odd, 3 * 4096 + 512).unwrap();
        assert_eq!(m.stats().read_calls, before + 4);
    }

    #[test]
    fn writes_zeroouts_and_discards_keep_reads_true() {
        let (_m, c) = dev();
        for b in 0..4 {
            read(&c, b);
        }
        // A write over two blocks and part of a third.
        c.write_at(&[1u8; 2 * 4096 + 100], 0).unwrap();
        assert_eq!(read(&c, 0), vec![1u8; 4096]);
        assert_eq!(read(&c, 1), vec![1u8; 4096]);
        let third = read(&c, 2);
        assert_eq!(&third[..100], &[1u8; 100]);
        assert!(third[100..].iter().all(|&x| x == 0));
        c.zeroout(4096, 4096).unwrap();
        assert_eq!(read(&c, 1), vec![0u8; 4096]);
        c.write_at(&[9u8; 4096], 3 * 4096).unwrap();
        assert_eq!(read(&c, 3), vec![9u8; 4096]);
        c.discard(3 * 4096, 4096).unwrap();
        // A discard that does not zero keeps the bytes on a memory
        // device; what matters is that the read is the device's.
        let mut direct = vec![0u8; 4096];
        c.inner.read_at(&mut direct, 3 * 4096).unwrap();
        assert_eq!(read(&c, 3), direct);
    }

    /// A device that counts nothing, and whose first read of a block
    /// lets a write through the cache land after the old bytes were read
    /// (another thread's write, racing the read).
    #[derive(Debug)]
    struct Racing {
        mem: MemDevice,
        cache: std::sync::OnceLock<std::sync::Weak<Cached<Racing>>>,
        raced: std::sync::atomic::AtomicBool,
    }

    impl BlockDevice for Racing {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            self.mem.read_at(buf, offset)?;
            let first = !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst);
            if let Some(c) = self.cache.get().and_then(std::sync::Weak::upgrade) {
                if first {
                    c.write_at(&[5u8; 4096], offset)?;
                }
            }
            Ok(())
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
            self.mem.write_at(buf, offset)
        }
        fn flush(&self) -> Result<()> {
            Ok(())
        }
        fn size(&self) -> u64 {
            self.mem.size()
        }
        fn stats(&self) -> IoStats {
            IoStats::default()
        }
    }

    #[test]
    fn a_read_raced_by_a_write_is_not_kept_whatever_the_device_counts() {
        let inner = Arc::new(Racing {
            mem: MemDevice::new(16 * 4096),
            cache: std::sync::OnceLock::new(),
            raced: std::sync::atomic::AtomicBool::new(false),
        });
        let c = Arc::new(Cached::new(Arc::clone(&inner), 4096, 4));
        inner.cache.set(Arc::downgrade(&c)).unwrap();
        let mut b = vec![0u8; 4096];
        // This read returns the bytes from before the write...
        c.read_at(&mut b, 2 * 4096).unwrap();
        assert_eq!(b, vec![0u8; 4096]);
        // ...and is not kept over it.
        c.read_at(&mut b, 2 * 4096).unwrap();
        assert_eq!(b, vec![5u8; 4096]);
    }

    #[test]
    fn the_least_recently_used_block_goes_first() {
        let (m, c) = dev();
        for b in 0..4 {
            read(&c, b);
        }
        read(&c, 0); // 1 is now the oldest
        read(&c, 10); // evicts 1
        let before = m.stats().read_calls;
        read(&c, 0);
        read(&c, 2);
        read(&c, 10);
        assert_eq!(m.stats().read_calls, before);
        read(&c, 1);
        assert_eq!(m.stats().read_calls, before + 1);
    }
}
