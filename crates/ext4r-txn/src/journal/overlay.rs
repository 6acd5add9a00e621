//! A read-only view of a filesystem as recovery would leave it, without
//! writing: what a read-only open of a filesystem with a full journal
//! needs (the kernel's `norecovery` aside, it replays in memory too).

use super::apply::ReplayPlan;
use super::recover::Recovery;
use super::superblock::SuperblockMarks;
use crate::device::{check_range, BlockDevice, Counters, IoStats};
use crate::error::{Error, Result};
use ext4r_format::num;
use ext4r_format::superblock::{Superblock, STATE_ERROR, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ext4r_format::BlockNr;
use std::sync::Arc;

/// A device that reads as `inner` with a replay plan applied, and over it
/// a second plan (the superblock as recovery finishes it, the blocks a
/// fast-commit replay changes). Writes are refused; flushing does nothing.
#[derive(Debug)]
pub struct JournalOverlay<D> {
    inner: D,
    plan: Arc<ReplayPlan>,
    over: ReplayPlan,
    counters: Counters,
}

impl<D: BlockDevice> JournalOverlay<D> {
    /// `inner` as `plan` would leave it.
    pub fn new(inner: D, plan: ReplayPlan) -> Self {
        Self::shared(inner, Arc::new(plan))
    }

    /// `inner` as `plan` would leave it, the plan shared with the caller.
    pub fn shared(inner: D, plan: Arc<ReplayPlan>) -> Self {
        let over = ReplayPlan::new(plan.block_size());
        JournalOverlay {
            inner,
            plan,
            over,
            counters: Counters::default(),
        }
    }

    /// `inner` as [`super::recover_filesystem`] would leave it: the plan
    /// applied and the primary superblock finished (`needs_recovery`
    /// cleared, state flags as e2fsck sets them), so that a reader sees a
    /// consistent, recovered filesystem. The journal itself still reads as
    /// full.
    ///
    /// # Errors
    /// Read errors of `inner`, or [`Error::Corrupt`] when the superblock
    /// (as replayed) cannot be parsed.
    pub fn recovered(inner: D, recovery: Recovery) -> Result<Self> {
        let marks = Self::marks(&inner, &recovery)?;
        Self::finished(inner, Arc::new(recovery.plan), marks)
    }

    /// The superblock marks of `recovery` on `inner`.
    pub(crate) fn marks(inner: &D, recovery: &Recovery) -> Result<SuperblockMarks> {
        let mut before = [0u8; SUPERBLOCK_SIZE];
        inner.read_at(&mut before, SUPERBLOCK_OFFSET)?;
        let error_before =
            Superblock::parse(&before).is_ok_and(|sb| sb.s_state.get() & STATE_ERROR != 0);
        Ok(SuperblockMarks::of(recovery, error_before))
    }

    /// `inner` with `plan` applied and the primary superblock finished
    /// with `marks`.
    pub(crate) fn finished(
        inner: D,
        plan: Arc<ReplayPlan>,
        marks: SuperblockMarks,
    ) -> Result<Self> {
        let bs = plan.block_size();
        let mut this = JournalOverlay::shared(inner, plan);
        // The block holding the superblock: block 1 with 1 KiB blocks.
        let sb_block = BlockNr(SUPERBLOCK_OFFSET / u64::from(bs));
        let within = num::index(SUPERBLOCK_OFFSET % u64::from(bs));
        let mut block = vec![0u8; bs as usize];
        this.read_at(&mut block, sb_block.0 * u64::from(bs))?;
        let bytes = &mut block[within..within + SUPERBLOCK_SIZE];
        let mut sb =
            Superblock::parse(bytes).map_err(|e| Error::corrupt("primary superblock", e))?;
        marks.apply(&mut sb);
        bytes.copy_from_slice(&sb.to_bytes());
        this.over.insert(sb_block, block);
        Ok(this)
    }

    /// Shows `blocks` over what the overlay showed (a fast-commit replay's
    /// result).
    pub fn add(&mut self, blocks: &ReplayPlan) {
        for (b, d) in blocks.iter() {
            self.over.insert(b, d.to_vec());
        }
    }

    /// The replay plan the overlay shows (without the superblock and the
    /// blocks added over it).
    pub fn plan(&self) -> &ReplayPlan {
        &self.plan
    }

    /// The device underneath.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Unwraps the device underneath.
    pub fn into_inner(self) -> D {
        self.inner
    }
}

impl<D: BlockDevice> BlockDevice for JournalOverlay<D> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.inner.size())?;
        self.inner.read_at(buf, offset)?;
        let bs = u64::from(self.plan.block_size());
        let end = offset + buf.len() as u64;
        if !buf.is_empty() {
            let (first, last) = (offset / bs, (end - 1) / bs);
            let base = self.plan.iter_range(BlockNr(first), BlockNr(last));
            let over = self.over.iter_range(BlockNr(first), BlockNr(last));
            for (block, data) in base.chain(over) {
                let b_start = block.0 * bs;
                let from = offset.max(b_start);
                let to = end.min(b_start + bs);
                buf[num::index(from - offset)..num::index(to - offset)]
                    .copy_from_slice(&data[num::index(from - b_start)..num::index(to - b_start)]);
            }
        }
        self.counters.read(buf.len() as u64);
        Ok(())
    }

    fn write_at(&self, _buf: &[u8], offset: u64) -> Result<()> {
        Err(Error::Io {
            op: "write",
            offset,
            source: std::io::Error::new(
                std::io::ErrorKind::ReadOnlyFilesystem,
                "the journal overlay is read-only",
            ),
        })
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

    fn discard(&self, offset: u64, _len: u64) -> Result<bool> {
        self.write_at(&[], offset).map(|()| false)
    }

    fn zeroout(&self, offset: u64, _len: u64) -> Result<()> {
        self.write_at(&[], offset)
    }

    // Replayed blocks come from memory, the rest from `inner`.
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
