//! A device wrapper that cuts the power: after a chosen number of writes,
//! every later write is dropped with an error, as if the machine had died.
//! Crash tests run a workload, cut after write N for every N, then replay
//! and check what the wrapped device holds.

use super::{BlockDevice, IoStats};
use crate::error::{Error, Result};
use std::sync::{Mutex, MutexGuard};

/// What a logged operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// [`BlockDevice::write_at`].
    Write,
    /// [`BlockDevice::zeroout`].
    Zeroout,
    /// [`BlockDevice::discard`].
    Discard,
    /// [`BlockDevice::flush`]: a barrier, not counted as a write.
    Flush,
}

/// One entry of the write log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRecord {
    /// The operation.
    pub kind: WriteKind,
    /// Byte offset (0 for a flush).
    pub offset: u64,
    /// Length in bytes (0 for a flush).
    pub len: u64,
    /// Whether it reached the wrapped device (false once the power is cut,
    /// or when the wrapped device failed it).
    pub applied: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Writes attempted so far (writes, zeroouts and discards).
    writes: u64,
    /// Writes with this number (from 0) and later fail.
    fail_from: Option<u64>,
    log: Vec<WriteRecord>,
}

/// Wraps a device and fails writes from a chosen point on. Reads always
/// pass through, so a test can look at what survived.
#[derive(Debug)]
pub struct FaultDevice<D> {
    inner: D,
    state: Mutex<State>,
}

impl<D: BlockDevice> FaultDevice<D> {
    /// Wraps `inner`; no fault is armed.
    pub fn new(inner: D) -> Self {
        FaultDevice {
            inner,
            state: Mutex::new(State::default()),
        }
    }

    /// Lets the first `n` writes (counted from the wrapper's creation)
    /// through and fails the rest: write number `n` (from 0) and every
    /// later write, zeroout, discard and flush return an error and change
    /// nothing. `fail_after(0)` fails every write.
    pub fn fail_after(&self, n: u64) {
        self.lock().fail_from = Some(n);
    }

    /// Restores power: writes pass again.
    pub fn heal(&self) {
        self.lock().fail_from = None;
    }

    /// Whether the power is cut now (a write has been refused).
    pub fn is_cut(&self) -> bool {
        let s = self.lock();
        s.fail_from.is_some_and(|n| s.writes > n)
    }

    /// Writes attempted so far, refused ones included; running a workload
    /// once without a fault tells how many cut points a crash test has.
    pub fn writes(&self) -> u64 {
        self.lock().writes
    }

    /// The log of writes, zeroouts, discards and flushes, in order.
    pub fn log(&self) -> Vec<WriteRecord> {
        self.lock().log.clone()
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Unwraps the device.
    pub fn into_inner(self) -> D {
        self.inner
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one state-changing operation, unless the power is cut. The lock
    /// is held across it so that the numbering is the order of arrival.
    fn guarded<T>(
        &self,
        kind: WriteKind,
        offset: u64,
        len: u64,
        op: impl FnOnce(&D) -> Result<T>,
    ) -> Result<T> {
        let mut s = self.lock();
        let number = s.writes;
        // A write is refused from its number on; a flush once a write has
        // been refused.
        let cut = if kind == WriteKind::Flush {
            s.fail_from.is_some_and(|n| number > n)
        } else {
            s.writes += 1;
            s.fail_from.is_some_and(|n| number >= n)
        };
        let result = if cut {
            Err(Error::Io {
                op: "write",
                offset,
                source: std::io::Error::other(format!(
                    "injected fault: power cut before write {number}"
                )),
            })
        } else {
            op(&self.inner)
        };
        s.log.push(WriteRecord {
            kind,
            offset,
            len,
            applied: result.is_ok(),
        });
        result
    }
}

impl<D: BlockDevice> BlockDevice for FaultDevice<D> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.guarded(WriteKind::Write, offset, buf.len() as u64, |d| {
            d.write_at(buf, offset)
        })
    }

    fn flush(&self) -> Result<()> {
        self.guarded(WriteKind::Flush, 0, 0, |d| d.flush())
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn logical_sector_size(&self) -> u32 {
        self.inner.logical_sector_size()
    }

    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        self.guarded(WriteKind::Discard, offset, len, |d| d.discard(offset, len))
    }

    fn discard_zeroes_data(&self) -> bool {
        self.inner.discard_zeroes_data()
    }

    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        self.guarded(WriteKind::Zeroout, offset, len, |d| d.zeroout(offset, len))
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

    fn workload(d: &dyn BlockDevice) -> Result<()> {
        for i in 0..5u8 {
            d.write_at(&[i + 1; 16], u64::from(i) * 512)?;
        }
        d.flush()?;
        d.zeroout(4096, 512)?;
        d.write_at(b"last", 8192)
    }

    #[test]
    fn writes_after_the_cut_fail_and_change_nothing() {
        let d = FaultDevice::new(MemDevice::new(1 << 20));
        workload(&d).unwrap();
        let total = d.writes();
        assert_eq!(total, 7);
        assert!(!d.is_cut());
        for n in 0..=total {
            let d = FaultDevice::new(MemDevice::new(1 << 20));
            d.fail_after(n);
            assert_eq!(workload(&d).is_ok(), n == total);
            assert_eq!(d.inner().stats().write_calls, n);
            assert_eq!(d.is_cut(), n < total);
            let applied = d.log().iter().filter(|r| r.applied).count();
            // Writes before the cut, plus the flush when it came before it.
            assert_eq!(applied as u64, n + u64::from(n >= 5));
            let mut b = [0u8; 1];
            for i in 0..5u64 {
                d.read_at(&mut b, i * 512).unwrap();
                assert_eq!(b[0] != 0, i < n, "write {i} with cut at {n}");
            }
        }
    }

    #[test]
    fn log_records_order_and_heal_restores() {
        let d = FaultDevice::new(MemDevice::new(1 << 20));
        d.fail_after(1);
        d.write_at(b"a", 10).unwrap();
        assert!(d.write_at(b"b", 20).is_err());
        assert!(d.flush().is_err());
        assert!(d.discard(0, 512).is_err());
        d.heal();
        d.zeroout(512, 512).unwrap();
        let rec = |kind, offset, len, applied| WriteRecord {
            kind,
            offset,
            len,
            applied,
        };
        assert_eq!(
            d.log(),
            vec![
                rec(WriteKind::Write, 10, 1, true),
                rec(WriteKind::Write, 20, 1, false),
                rec(WriteKind::Flush, 0, 0, false),
                rec(WriteKind::Discard, 0, 512, false),
                rec(WriteKind::Zeroout, 512, 512, true),
            ]
        );
        assert_eq!(d.writes(), 4);
        let inner = d.into_inner();
        let mut b = [0u8; 1];
        inner.read_at(&mut b, 20).unwrap();
        assert_eq!(b[0], 0);
    }
}
