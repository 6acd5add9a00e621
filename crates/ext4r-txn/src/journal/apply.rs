//! The replay plan and writing it home.

use super::fast_commit::FastCommitReplay;
use super::overlay::JournalOverlay;
use super::recover::Recovery;
use super::superblock::{byte_offset, finish_fs_superblock, Journal};
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::num;
use ext4r_format::superblock::{Superblock, STATE_ERROR, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ext4r_format::BlockNr;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `s_state` bit the kernel and e2fsck set while a fast-commit replay is
/// under way (`EXT4_FC_REPLAY`).
const STATE_FC_REPLAY: u16 = 0x0020;

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

    /// A plan of `blocks` (block number and contents, one block each; a
    /// later entry for a block replaces an earlier one).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for contents that are not one block.
    pub fn from_blocks(
        block_size: u32,
        blocks: impl IntoIterator<Item = (u64, Vec<u8>)>,
    ) -> Result<Self> {
        let mut plan = ReplayPlan::new(block_size);
        for (b, d) in blocks {
            if d.len() != block_size as usize {
                return Err(Error::InvalidArgument(format!(
                    "block {b} has {} bytes, not {block_size}",
                    d.len()
                )));
            }
            plan.insert(BlockNr(b), d);
        }
        Ok(plan)
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
/// replays the fast commits (when the journal has any, through `fc`),
/// writes everything home, marks the journal empty, then updates the
/// primary superblock of `fs_dev` with [`finish_fs_superblock`] (backups
/// are not touched, as e2fsck leaves them). `fs_dev` and the journal's
/// device are the same device for an internal journal.
///
/// A crash at any point leaves a filesystem on which running this again
/// gives the same result: the journal stays full until its blocks are
/// home. Fast commits are not block copies: replaying them again over a
/// half-written result would not give the same result, so the blocks
/// their replay changes are first committed to the log as one more
/// transaction (the fast commits' own id, which retires them), and only
/// then written home. When the log has no room for that transaction the
/// blocks are written in place with the superblock marked as having
/// errors until the end, as e2fsck does (a crash then leaves a
/// filesystem that asks for a full check).
///
/// # Errors
/// I/O errors, [`Error::Corrupt`] when the primary superblock cannot be
/// parsed, [`Error::Unsupported`] when the journal holds fast commits
/// (nothing is written then: use [`recover_filesystem_with`]). Problems of
/// the journal itself are not errors: see [`Recovery::problem`].
pub fn recover_filesystem<D, J>(fs_dev: &D, journal: &Journal<J>) -> Result<Recovery>
where
    D: BlockDevice + ?Sized,
    J: BlockDevice,
{
    recover_in_place(fs_dev, journal, None, |r| {
        let none: Option<&dyn FastCommitReplay> = None;
        replay_on(None, r, none)
    })
}

/// [`recover_filesystem`] with the fast commits the journal holds
/// replayed through `fc`.
///
/// # Errors
/// As [`recover_filesystem`], and the errors of
/// [`FastCommitReplay::replay`].
pub fn recover_filesystem_with<J: BlockDevice>(
    fs_dev: &Arc<dyn BlockDevice>,
    journal: &Journal<J>,
    fc: &dyn FastCommitReplay,
) -> Result<Recovery> {
    recover_in_place(fs_dev.as_ref(), journal, fc.now(), |r| {
        replay_on(Some(fs_dev), r, Some(fc))
    })
}

fn recover_in_place<D, J>(
    fs_dev: &D,
    journal: &Journal<J>,
    now: Option<(i64, u32)>,
    replay: impl FnOnce(&mut Recovery) -> Result<Option<ReplayPlan>>,
) -> Result<Recovery>
where
    D: BlockDevice + ?Sized,
    J: BlockDevice,
{
    let before = read_superblock(fs_dev)?;
    let fs_blocks = fs_dev.size() / u64::from(journal.block_size);
    let mut recovery = journal.recover(fs_blocks, usize::from(before.inode_size()));
    let error_before = before.s_state.get() & STATE_ERROR != 0;
    let extra = replay(&mut recovery)?;
    let mut marked = false;
    if let Some(extra) = extra.as_ref().filter(|e| !e.is_empty()) {
        // The commit time of the replay's transaction: the caller's clock
        // (a checker's E2FSCK_TIME) or the system's.
        let time = match now {
            Some((s, ns)) => (u64::try_from(s).unwrap_or(0), ns),
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or((0, 0), |d| (d.as_secs(), d.subsec_nanos())),
        };
        if journal.append_replay(&recovery, extra, time)? {
            // The fast commits' transaction is now in the log: a rerun
            // replays it as a block transaction and finds them stale.
            recovery.next_sequence = recovery.end_transaction.wrapping_add(2);
            // Their head goes at once: e2fsck (1.47) fails a whole
            // recovery on a head whose transaction id is not the next
            // one, where the kernel only stops.
            journal.void_fast_commits()?;
        } else {
            let mut sb = before.clone();
            sb.s_state
                .set(sb.s_state.get() | STATE_ERROR | STATE_FC_REPLAY);
            crate::flush::write_primary(fs_dev, &mut sb)?;
            marked = true;
        }
    }
    recovery.plan.apply(fs_dev)?;
    if let Some(extra) = &extra {
        extra.apply(fs_dev)?;
    }
    // A journal already empty keeps its sequence: e2fsck would move it on
    // again, but then a crash between marking the journal and writing the
    // superblock would make the rerun differ from an uninterrupted run.
    if journal.needs_recovery() || journal.superblock().s_errno.get() != 0 {
        journal.mark_empty(&recovery)?;
    }
    journal.void_fast_commits()?;
    let mut sb = read_superblock(fs_dev)?;
    if marked {
        // Our own marks come off: finishing puts back what the recovery
        // and the state before it call for.
        sb.s_state
            .set(sb.s_state.get() & !(STATE_ERROR | STATE_FC_REPLAY));
    }
    finish_fs_superblock(&mut sb, &recovery, error_before);
    crate::flush::write_primary(fs_dev, &mut sb)?;
    Ok(recovery)
}

/// Replays the fast commits `recovery` found, through `fc`, on the
/// filesystem on `fs_dev` as the plan leaves it; returns the blocks that
/// replay changes (`None` when there were no fast commits). The recovery's
/// [`Recovery::fast_commit_applied`] and [`Recovery::problem`] say how it
/// went. Nothing is written.
///
/// # Errors
/// The errors of [`FastCommitReplay::replay`].
pub fn replay_fast_commits(
    fs_dev: &Arc<dyn BlockDevice>,
    recovery: &mut Recovery,
    fc: &dyn FastCommitReplay,
) -> Result<Option<ReplayPlan>> {
    replay_on(Some(fs_dev), recovery, Some(fc))
}

fn replay_on(
    fs_dev: Option<&Arc<dyn BlockDevice>>,
    recovery: &mut Recovery,
    fc: Option<&dyn FastCommitReplay>,
) -> Result<Option<ReplayPlan>> {
    let Some(log) = recovery.fast_commit.as_ref() else {
        return Ok(None);
    };
    let (Some(fs_dev), Some(fc)) = (fs_dev, fc) else {
        return Err(Error::Unsupported(format!(
            "the journal holds {} fast commits of transaction {}, which this caller cannot replay (recover through the ext4r engine)",
            log.commits(),
            log.tid
        )));
    };
    let bs = recovery.plan.block_size();
    let plan = Arc::new(std::mem::replace(&mut recovery.plan, ReplayPlan::new(bs)));
    let marks = JournalOverlay::marks(fs_dev, recovery)?;
    let view: Arc<dyn BlockDevice> = Arc::new(JournalOverlay::finished(
        Arc::clone(fs_dev),
        Arc::clone(&plan),
        marks,
    )?);
    let replayed = fc.replay(view, log);
    recovery.plan = Arc::try_unwrap(plan).unwrap_or_else(|p| (*p).clone());
    let replayed = replayed?;
    recovery.fast_commit_applied = replayed.applied;
    if let Some(p) = replayed.problem {
        recovery.problem.get_or_insert(p);
    }
    let mut blocks = replayed.blocks;
    keep_needs_recovery(&mut blocks);
    Ok(Some(blocks))
}

fn read_superblock<D: BlockDevice + ?Sized>(dev: &D) -> Result<Superblock> {
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET)?;
    Superblock::parse(&buf).map_err(|e| Error::corrupt("primary superblock", e))
}

/// Sets `needs_recovery` again in the primary superblock the fast-commit
/// replay wrote, if it wrote it: the replay ran on a view whose superblock
/// recovery had already finished, but on disk the flag must stay until the
/// journal is marked empty (a kernel or e2fsck that finds it clear with a
/// full journal discards the journal rather than replaying it).
fn keep_needs_recovery(blocks: &mut ReplayPlan) {
    let bs = u64::from(blocks.block_size());
    let nr = BlockNr(SUPERBLOCK_OFFSET / bs);
    let within = num::index(SUPERBLOCK_OFFSET % bs);
    let Some(block) = blocks.get(nr) else {
        return;
    };
    let mut block = block.to_vec();
    let Ok(mut sb) = Superblock::parse(&block[within..within + SUPERBLOCK_SIZE]) else {
        return;
    };
    sb.s_feature_incompat
        .set(sb.s_feature_incompat.get() | ext4r_format::features::Incompat::RECOVER.bits());
    crate::csum::Checksums::stamp_superblock(&mut sb);
    block[within..within + SUPERBLOCK_SIZE].copy_from_slice(&sb.to_bytes());
    blocks.insert(nr, block);
}
