//! A write buffer that turns many block-sized writes into few large ones:
//! writes are collected, sorted by offset and merged where they touch, then
//! issued when the buffer fills or at the end.

use crate::device::BlockDevice;
use crate::error::Result;
use std::collections::BTreeMap;

/// Bytes buffered before a flush.
const BUFFER_LIMIT: usize = 1 << 20;
/// Largest single write issued.
const MAX_RUN: usize = 1 << 20;

pub(crate) struct RunWriter<'a> {
    dev: &'a dyn BlockDevice,
    pending: BTreeMap<u64, Vec<u8>>,
    bytes: usize,
    /// Bytes handed to the device so far.
    pub written: u64,
}

impl<'a> RunWriter<'a> {
    pub(crate) fn new(dev: &'a dyn BlockDevice) -> Self {
        RunWriter {
            dev,
            pending: BTreeMap::new(),
            bytes: 0,
            written: 0,
        }
    }

    /// Queues `data` at byte `offset`; a later write to the same offset
    /// replaces an earlier one.
    pub(crate) fn write(&mut self, offset: u64, data: Vec<u8>) -> Result<()> {
        self.bytes += data.len();
        if let Some(old) = self.pending.insert(offset, data) {
            self.bytes -= old.len();
        }
        if self.bytes >= BUFFER_LIMIT {
            self.flush()?;
        }
        Ok(())
    }

    /// Zeroes a byte range now (ranges are large; no buffering helps).
    pub(crate) fn zero(&mut self, offset: u64, len: u64) -> Result<()> {
        if len > 0 {
            self.flush()?;
            self.dev.zeroout(offset, len)?;
            self.written += len;
        }
        Ok(())
    }

    /// Issues every queued write, merging neighbours into single writes.
    pub(crate) fn flush(&mut self) -> Result<()> {
        let pending = std::mem::take(&mut self.pending);
        self.bytes = 0;
        let mut run_start = 0u64;
        let mut run: Vec<u8> = Vec::new();
        for (off, data) in pending {
            if !run.is_empty() && (run_start + run.len() as u64 != off || run.len() >= MAX_RUN) {
                self.dev.write_at(&run, run_start)?;
                self.written += run.len() as u64;
                run.clear();
            }
            if run.is_empty() {
                run_start = off;
            }
            run.extend_from_slice(&data);
        }
        if !run.is_empty() {
            self.dev.write_at(&run, run_start)?;
            self.written += run.len() as u64;
        }
        Ok(())
    }
}
