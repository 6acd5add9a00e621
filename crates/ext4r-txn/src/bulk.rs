//! Streamed writes to a filesystem being made (mkfs): no transaction, no
//! journal, nothing to undo, only speed. A write buffer turns many
//! block-sized writes into few large ones: writes are collected, sorted by
//! offset and merged where they touch, then issued when the buffer fills
//! or at the end. Large writes that need no merging go straight to the
//! device. Changes to an existing filesystem go through
//! [`Transaction`](crate::txn::Transaction) instead.

use crate::device::BlockDevice;
use crate::error::Result;
use std::collections::BTreeMap;

/// Bytes buffered before a flush. mkfs's small writes are bitmaps and a
/// few object blocks, mostly isolated; where a flex group's bitmaps are all
/// written they still merge 16 blocks at a time, and more buffering only
/// adds to the peak memory (a quarter of it at 1 TiB).
const BUFFER_LIMIT: usize = 64 << 10;
/// Largest single merged write issued.
const MAX_RUN: usize = 64 << 10;

/// The write buffer.
pub struct RunWriter<'a> {
    dev: &'a dyn BlockDevice,
    pending: BTreeMap<u64, Vec<u8>>,
    bytes: usize,
    /// Where merged runs are assembled; kept to avoid regrowing it.
    run: Vec<u8>,
    /// Bytes handed to the device so far.
    pub written: u64,
}

impl<'a> RunWriter<'a> {
    /// A buffer writing to `dev`.
    pub fn new(dev: &'a dyn BlockDevice) -> Self {
        RunWriter {
            dev,
            pending: BTreeMap::new(),
            bytes: 0,
            run: Vec::new(),
            written: 0,
        }
    }

    /// Queues `data` at byte `offset`; a later write to the same offset
    /// replaces an earlier one.
    ///
    /// # Errors
    /// The device's write error when the queue, full, is flushed.
    pub fn write(&mut self, offset: u64, data: Vec<u8>) -> Result<()> {
        self.bytes += data.len();
        if let Some(old) = self.pending.insert(offset, data) {
            self.bytes -= old.len();
        }
        if self.bytes >= BUFFER_LIMIT {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes `data` at `offset` now, without copying it: for large buffers
    /// written to several places (the descriptor table and its backups).
    /// Queued writes that overlap it go first, so later still wins.
    ///
    /// # Errors
    /// The device's write error (of this write or of the queued ones).
    pub fn write_slice(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let end = offset + data.len() as u64;
        let overlaps = self
            .pending
            .range(..end)
            .next_back()
            .is_some_and(|(&o, d)| o + d.len() as u64 > offset);
        if overlaps {
            self.flush()?;
        }
        self.dev.write_at(data, offset)?;
        self.written += data.len() as u64;
        Ok(())
    }

    /// Tells the device the whole of `[offset, offset + len)` is unused
    /// (mke2fs's discard before formatting); whether it did anything.
    ///
    /// # Errors
    /// I/O errors other than "not supported".
    pub fn discard_range(&mut self, offset: u64, len: u64) -> Result<bool> {
        self.flush()?;
        self.dev.discard(offset, len)
    }

    /// Zeroes a byte range now (ranges are large; no buffering helps).
    ///
    /// # Errors
    /// The device's error for the queued writes or the zeroing.
    pub fn zero(&mut self, offset: u64, len: u64) -> Result<()> {
        if len > 0 {
            self.flush()?;
            self.dev.zeroout(offset, len)?;
            self.written += len;
        }
        Ok(())
    }

    /// Issues every queued write, merging neighbours into single writes.
    ///
    /// # Errors
    /// The device's write error; the writes not yet issued are dropped.
    pub fn flush(&mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        self.bytes = 0;
        let mut iter = pending.into_iter().peekable();
        while let Some((off, data)) = iter.next() {
            let touches = |next: Option<&(u64, Vec<u8>)>, end: u64, len: usize| {
                next.is_some_and(|(o, d)| *o == end && len + d.len() <= MAX_RUN)
            };
            let end = off + data.len() as u64;
            if !touches(iter.peek(), end, data.len()) {
                // Alone: straight from its own buffer.
                self.dev.write_at(&data, off)?;
                self.written += data.len() as u64;
                continue;
            }
            self.run.clear();
            self.run.extend_from_slice(&data);
            while touches(iter.peek(), off + self.run.len() as u64, self.run.len()) {
                if let Some((_, d)) = iter.next() {
                    self.run.extend_from_slice(&d);
                }
            }
            self.dev.write_at(&self.run, off)?;
            self.written += self.run.len() as u64;
        }
        Ok(())
    }
}
