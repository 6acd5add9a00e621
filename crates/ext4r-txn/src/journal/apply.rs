//! The replay plan and writing it home.

use super::recover::Recovery;
use super::superblock::{byte_offset, finish_fs_superblock, Journal};
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::superblock::{Superblock, STATE_ERROR, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ext4r_format::BlockNr;
use std::collections::BTreeMap;

/// Largest single write when coalescing adjacent blocks.
const MAX_WRITE: usize = 1 << 20;

/// Filesystem blocks and the contents recovery gives them, in block order.
/// Holds at most one entry per block, and only blocks copied from the log,
/// so it is never larger than the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayPlan {
    block_size: u32,
    blocks: BTreeMap<BlockNr, Box<[u8]>>,
}

/// What [`ReplayPlan::apply`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyStats {
    /// Blocks written.
    pub blocks: u64,
    /// Write calls (runs of adjacent blocks are written together).
    pub writes: u64,
}

impl ReplayPlan {
    /// An empty plan for blocks of `block_size` bytes.
    pub fn new(block_size: u32) -> Self {
        ReplayPlan {
            block_size,
            blocks: BTreeMap::new(),
        }
    }

    /// Sets the contents of `block` (a later copy replaces an earlier one,
    /// as replaying the log in order does). `data` is one block.
    pub(crate) fn insert(&mut self, block: BlockNr, data: Vec<u8>) {
        debug_assert_eq!(data.len(), self.block_size as usize);
        self.blocks.insert(block, data.into_boxed_slice());
    }

    /// The block size.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Number of blocks to write.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The recovered contents of `block`, if recovery changes it.
    pub fn get(&self, block: BlockNr) -> Option<&[u8]> {
        self.blocks.get(&block).map(|b| &b[..])
    }

    /// The blocks and their contents, in ascending block order.
    pub fn iter(&self) -> impl Iterator<Item = (BlockNr, &[u8])> + '_ {
        self.blocks.iter().map(|(b, d)| (*b, &d[..]))
    }

    /// The planned blocks from `first` to `last` inclusive.
    pub(crate) fn iter_range(
        &self,
        first: BlockNr,
        last: BlockNr,
    ) -> impl Iterator<Item = (BlockNr, &[u8])> + '_ {
        self.blocks.range(first..=last).map(|(b, d)| (*b, &d[..]))
    }

    /// Writes the plan to the filesystem device in ascending block order,
    /// each run of adjacent blocks as one write (up to 1 MiB), then
    /// flushes. Replaying is idempotent: applying again, whole or after an
    /// interrupted attempt, gives the same result.
    ///
    /// # Errors
    /// The device's write and flush errors, or a block whose byte offset
    /// overflows.
    pub fn apply<D: BlockDevice + ?Sized>(&self, dev: &D) -> Result<ApplyStats> {
        let mut stats = ApplyStats::default();
        let mut run: Vec<u8> = Vec::new();
        let mut run_start = BlockNr(0);
        let mut run_end = 0u64;
        let mut flush_run = |run: &mut Vec<u8>, start: BlockNr| -> Result<()> {
            if !run.is_empty() {
                dev.write_at(run, byte_offset(start, self.block_size)?)?;
                stats.writes += 1;
                run.clear();
            }
            Ok(())
        };
        for (&block, data) in &self.blocks {
            if run.is_empty() || block.0 != run_end || run.len() + data.len() > MAX_WRITE {
                flush_run(&mut run, run_start)?;
                run_start = block;
            }
            run.extend_from_slice(data);
            run_end = block.0.saturating_add(1);
            stats.blocks += 1;
        }
        flush_run(&mut run, run_start)?;
        dev.flush()?;
        Ok(stats)
    }
}

/// Recovers a filesystem in place, in e2fsck's order: computes the plan,
/// writes it, marks the journal empty, then updates the primary
/// superblock of `fs_dev` with [`finish_fs_superblock`] (backups are not
/// touched, as e2fsck leaves them). `fs_dev` and the journal's device are
/// the same device for an internal journal.
///
/// A crash at any point leaves a filesystem on which running this again
/// gives the same result: the journal stays full until its blocks are home.
///
/// # Errors
/// I/O errors, or [`Error::Corrupt`] when the primary superblock cannot be
/// parsed. Problems of the journal itself are not errors: see
/// [`Recovery::problem`].
pub fn recover_filesystem<D, J>(fs_dev: &D, journal: &Journal<J>) -> Result<Recovery>
where
    D: BlockDevice + ?Sized,
    J: BlockDevice,
{
    let before = read_superblock(fs_dev)?;
    let fs_blocks = fs_dev.size() / u64::from(journal.block_size);
    let recovery = journal.recover(fs_blocks);
    recovery.plan.apply(fs_dev)?;
    // A journal already empty keeps its sequence: e2fsck would move it on
    // again, but then a crash between marking the journal and writing the
    // superblock would make the rerun differ from an uninterrupted run.
    if journal.needs_recovery() || journal.superblock().s_errno.get() != 0 {
        journal.mark_empty(&recovery)?;
    }
    let mut sb = read_superblock(fs_dev)?;
    let error_before = before.s_state.get() & STATE_ERROR != 0;
    finish_fs_superblock(&mut sb, &recovery, error_before);
    crate::flush::write_primary(fs_dev, &mut sb)?;
    Ok(recovery)
}

fn read_superblock<D: BlockDevice + ?Sized>(dev: &D) -> Result<Superblock> {
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET)?;
    Superblock::parse(&buf).map_err(|e| Error::corrupt("primary superblock", e))
}
