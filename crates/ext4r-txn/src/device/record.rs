//! Recording every write and flush of a workload, then building what a
//! disk would hold had the power been cut at any point of it: the crash
//! tests' device (as xfstests' dm-log-writes and SQLite's crash VFS).
//!
//! A cut after write `n` keeps writes `0..n`. Those before the last flush
//! that precedes the cut are durable; each one after it may have reached
//! the disk or not (a volatile cache reorders freely), and one of them may
//! be torn (only some of its sectors written). [`Cut`] picks such a state
//! from a seed; [`Recorder::image`] builds it.

use super::{BlockDevice, IoStats, MemDevice};
use crate::error::Result;
use ext4r_format::num;
use std::sync::{Mutex, MutexGuard};

/// One recorded operation.
#[derive(Debug, Clone)]
pub enum Op {
    /// Bytes written at an offset (zeroouts and discards that zero are
    /// recorded as writes of zeros).
    Write {
        /// Byte offset.
        offset: u64,
        /// What was written.
        data: Vec<u8>,
    },
    /// A flush: everything before it is durable.
    Flush,
}

/// Wraps a device and records every write and flush (reads pass through).
#[derive(Debug)]
pub struct Recorder<D> {
    inner: D,
    log: Mutex<Vec<Op>>,
}

/// How a cut treats the writes after the last flush before it.
#[derive(Debug, Clone, Copy)]
pub struct Cut {
    /// Keep writes `0..writes` (flushes not counted).
    pub writes: usize,
    /// Drop a random subset of the unflushed writes.
    pub drop_unflushed: bool,
    /// Tear one unflushed write (some of its 512-byte sectors only).
    pub tear: bool,
    /// Seed of the choices.
    pub seed: u64,
}

/// Whether a write at `offset` of `len` bytes covers the primary
/// superblock (bytes 1024..2048): torn, no mount survives it, whoever
/// wrote it (the kernel writes it as one unit too); fsck repairs it from a
/// backup.
pub fn covers_superblock(offset: u64, len: usize) -> bool {
    offset < 2048 && offset + len as u64 > 1024
}

/// What a cut did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CutStats {
    /// Writes kept whole.
    pub applied: usize,
    /// Writes dropped.
    pub dropped: usize,
    /// Writes torn.
    pub torn: usize,
    /// The torn write's byte offset and length.
    pub torn_at: Option<(u64, usize)>,
    /// Flushes before the cut.
    pub flushes: usize,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

impl<D: BlockDevice> Recorder<D> {
    /// Starts recording on `inner`.
    pub fn new(inner: D) -> Self {
        Recorder {
            inner,
            log: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Op>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The operations so far.
    pub fn log(&self) -> Vec<Op> {
        self.lock().clone()
    }

    /// Writes recorded so far (flushes not counted).
    pub fn writes(&self) -> usize {
        self.lock()
            .iter()
            .filter(|o| matches!(o, Op::Write { .. }))
            .count()
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

/// Builds on `base` (the device before the workload, which is changed)
/// the state a cut leaves of `log`.
///
/// # Errors
/// A write to `base` fails (out of its range).
pub fn apply_cut(base: &MemDevice, log: &[Op], cut: Cut) -> Result<CutStats> {
    // Where the cut falls in the log, and the last flush before it.
    let mut writes = 0;
    let mut end = log.len();
    let mut last_flush = 0;
    let mut stats = CutStats::default();
    for (i, op) in log.iter().enumerate() {
        match op {
            Op::Write { .. } => {
                if writes == cut.writes {
                    end = i;
                    break;
                }
                writes += 1;
            }
            Op::Flush => {
                last_flush = i + 1;
                stats.flushes += 1;
            }
        }
    }
    let last_flush = last_flush.min(end);
    let mut rng = cut.seed | 1;
    let unflushed: Vec<usize> = (last_flush..end)
        .filter(|&i| matches!(log[i], Op::Write { .. }))
        .collect();
    let torn = if cut.tear && !unflushed.is_empty() {
        Some(unflushed[num::index(xorshift(&mut rng) % unflushed.len() as u64)])
    } else {
        None
    };
    for (i, op) in log[..end].iter().enumerate() {
        let Op::Write { offset, data } = op else {
            continue;
        };
        if i >= last_flush && cut.drop_unflushed && Some(i) != torn && xorshift(&mut rng) & 1 == 0 {
            stats.dropped += 1;
            continue;
        }
        if Some(i) == torn {
            // Some of its sectors, each with even odds.
            for (k, chunk) in data.chunks(512).enumerate() {
                if xorshift(&mut rng) & 1 == 1 {
                    base.write_at(chunk, offset + 512 * k as u64)?;
                }
            }
            stats.torn += 1;
            stats.torn_at = Some((*offset, data.len()));
            continue;
        }
        base.write_at(data, *offset)?;
        stats.applied += 1;
    }
    Ok(stats)
}

impl<D: BlockDevice> BlockDevice for Recorder<D> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut log = self.lock();
        self.inner.write_at(buf, offset)?;
        log.push(Op::Write {
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        let mut log = self.lock();
        self.inner.flush()?;
        log.push(Op::Flush);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn logical_sector_size(&self) -> u32 {
        self.inner.logical_sector_size()
    }

    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        // Recorded as what a reader sees afterwards: zeros if the device
        // promises them, otherwise nothing (the old contents may stay).
        let mut log = self.lock();
        let done = self.inner.discard(offset, len)?;
        if done && self.inner.discard_zeroes_data() {
            log.push(Op::Write {
                offset,
                data: vec![0; num::index(len)],
            });
        }
        Ok(done)
    }

    fn discard_zeroes_data(&self) -> bool {
        self.inner.discard_zeroes_data()
    }

    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        let mut log = self.lock();
        self.inner.zeroout(offset, len)?;
        log.push(Op::Write {
            offset,
            data: vec![0; num::index(len)],
        });
        Ok(())
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

    #[test]
    fn durable_writes_stay_and_unflushed_ones_may_go() {
        let dev = Recorder::new(MemDevice::new(8192));
        dev.write_at(&[1; 512], 0).unwrap();
        dev.flush().unwrap();
        dev.write_at(&[2; 512], 512).unwrap();
        dev.write_at(&[3; 1024], 1024).unwrap();
        let log = dev.log();
        assert_eq!(dev.writes(), 3);
        let mut seen_drop = false;
        for seed in 1..64 {
            let base = MemDevice::new(8192);
            let cut = Cut {
                writes: 3,
                drop_unflushed: true,
                tear: seed % 2 == 0,
                seed,
            };
            let st = apply_cut(&base, &log, cut).unwrap();
            let mut b = [0u8; 512];
            base.read_at(&mut b, 0).unwrap();
            assert_eq!(b, [1; 512], "the flushed write is always there");
            assert_eq!(st.applied + st.dropped + st.torn, 3);
            assert_eq!(st.flushes, 1);
            seen_drop |= st.dropped > 0;
        }
        assert!(seen_drop);
        // A cut after one write keeps only it.
        let base = MemDevice::new(8192);
        let st = apply_cut(
            &base,
            &log,
            Cut {
                writes: 1,
                drop_unflushed: false,
                tear: false,
                seed: 1,
            },
        )
        .unwrap();
        assert_eq!(st.applied, 1);
        let mut b = [9u8; 512];
        base.read_at(&mut b, 512).unwrap();
        assert_eq!(b, [0; 512]);
    }
}
