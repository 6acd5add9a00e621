//! Reading the fast-commit area after the log proper, and the hook through
//! which the layer that knows files and directories replays it.
//!
//! The split is jbd2's own: jbd2 scans the log and hands each fast-commit
//! block to a callback of the filesystem (`j_fc_replay_callback`), which
//! checks the records (scan) and applies them (replay). Here the scan is
//! [`ext4r_format::jbd2::fast_commit::FastCommitScan`] over the area's
//! blocks, run by [`super::Journal::recover`] right after the scan of the
//! log proper; the records it finds valid travel in
//! [`super::Recovery::fast_commit`]; and a [`FastCommitReplay`] given by
//! the caller turns them into blocks (the engine's implementation edits
//! inodes, extent trees, directories and bitmaps through a transaction).
//! A writer that gets a recovery with fast commits and no replayer refuses
//! rather than drop them.

use super::superblock::Journal;
use super::ReplayPlan;
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::jbd2::fast_commit::{records, FastCommitScan, FcRecord, FcStep, FcTag};
use ext4r_format::jbd2::JournalIncompat;
use ext4r_format::FormatError;
use std::sync::Arc;

/// One valid fast-commit record, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FcRecordBuf {
    /// The tag number.
    pub tag: u16,
    /// The value bytes.
    pub value: Vec<u8>,
    /// The fast-commit block it was read from (0 = the area's first).
    pub block: u32,
}

impl FcRecordBuf {
    /// The record decoded.
    ///
    /// # Errors
    /// [`FormatError`] for a value too short for its tag (the scan has
    /// checked lengths, so only a record built by hand gives one).
    pub fn decode(&self) -> std::result::Result<FcTag<'_>, FormatError> {
        FcRecord {
            tag: self.tag,
            value: &self.value,
            bytes: &self.value,
        }
        .decode()
    }
}

/// The records of a fast-commit area that the scan found valid: those up
/// to its last tail with the expected transaction id and a good CRC, in
/// order (head, pads and tails included, as the kernel counts them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastCommitLog {
    /// The transaction the fast commits belong to: the first one the log
    /// proper did not commit.
    pub tid: u32,
    /// The records to replay.
    pub records: Vec<FcRecordBuf>,
    /// Blocks of the area read by the scan.
    pub blocks_read: u32,
}

impl FastCommitLog {
    /// Fast commits (tails) in the log.
    pub fn commits(&self) -> usize {
        self.records
            .iter()
            .filter(|r| r.tag == ext4r_format::jbd2::fast_commit::tag::TAIL)
            .count()
    }
}

/// What a fast-commit replay changed.
#[derive(Debug)]
#[non_exhaustive]
pub struct FcReplayed {
    /// The blocks the replay wrote, with their final contents.
    pub blocks: ReplayPlan,
    /// Records applied (the valid ones before the first that failed).
    pub applied: usize,
    /// Why the replay stopped before the end, if it did: the filesystem
    /// then needs a full check (the kernel fails the mount instead).
    pub problem: Option<Error>,
}

impl FcReplayed {
    /// A replay result.
    pub fn new(blocks: ReplayPlan, applied: usize, problem: Option<Error>) -> Self {
        FcReplayed {
            blocks,
            applied,
            problem,
        }
    }
}

/// Applies fast-commit records on top of a filesystem, as the kernel's
/// `ext4_fc_replay` does: implemented by the layer above this crate.
pub trait FastCommitReplay: Send + Sync + std::fmt::Debug {
    /// Replays `log` on the filesystem `view` shows (the device with the
    /// log proper already replayed, and the filesystem superblock as
    /// recovery leaves it). Must not write to `view`: returns the blocks
    /// it would write.
    ///
    /// # Errors
    /// Errors that prevent any replay (I/O, an unusable superblock);
    /// problems with single records go in [`FcReplayed::problem`].
    fn replay(&self, view: Arc<dyn BlockDevice>, log: &FastCommitLog) -> Result<FcReplayed>;

    /// The time to record for what the replay writes (seconds and
    /// nanoseconds since the epoch); the system clock when `None`.
    fn now(&self) -> Option<(i64, u32)> {
        None
    }
}

impl<J: BlockDevice> Journal<J> {
    /// Journal block index of fast-commit block 0: the kernel's
    /// `j_fc_first`, one past `j_last`.
    fn fc_first(&self) -> u64 {
        self.last + 1
    }

    /// Scans the fast-commit area for records of transaction
    /// `expected_tid`, on a filesystem with `inode_size`-byte inodes.
    /// `None` when the journal has no fast-commit area or the area holds
    /// nothing to replay.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the area must be refused as a whole (see
    /// [`ext4r_format::jbd2::fast_commit::FcScanError`]); the whole
    /// recovery then fails, as in the kernel.
    pub(crate) fn scan_fast_commits(
        &self,
        expected_tid: u32,
        inode_size: usize,
    ) -> Result<Option<FastCommitLog>> {
        if !self.sb.incompat().contains(JournalIncompat::FAST_COMMIT) {
            return Ok(None);
        }
        let maxlen = u64::from(self.sb.s_maxlen.get());
        let mut scan = FastCommitScan::new(expected_tid, inode_size);
        let mut log = FastCommitLog {
            tid: expected_tid,
            ..FastCommitLog::default()
        };
        let mut buf = vec![0u8; self.block_size as usize];
        let mut index = self.fc_first();
        let mut k = 0u32;
        // The scan ends with the area's last block (`s_maxlen - 1`), the
        // last one jbd2's writer uses. jbd2's own scan reads on to block
        // `s_maxlen`, one past the journal, when every block up to there
        // said "continue" (fast commits filling the area before the full
        // commit that resets it); that read fails, and with it the whole
        // recovery and the mount (e2fsck 1.47, sharing recovery.c, then
        // discards the journal). ext4_fc_replay_scan's rule is that the
        // records up to the last good tail are replayed: that is kept here
        // rather than the failure, which would lose every fsync'd commit.
        while index < maxlen {
            let Ok(at) = self.block_offset(index) else {
                break;
            };
            if self.dev.read_at(&mut buf, at).is_err() {
                break;
            }
            log.blocks_read += 1;
            let step = scan.feed(&buf);
            // Keep this block's records in the order the scan counted
            // them; the count of valid ones cuts the list afterwards.
            for rec in records(&buf, inode_size).map_while(|r| r.ok()) {
                log.records.push(FcRecordBuf {
                    tag: rec.tag,
                    value: rec.value.to_vec(),
                    block: k,
                });
            }
            match step {
                FcStep::Continue => {}
                FcStep::Stop => break,
                FcStep::Failed(e) => {
                    return Err(Error::corrupt(
                        format!("fast-commit block {k} (journal block {index})"),
                        FormatError::invalid("fast-commit area", e.to_string()),
                    ))
                }
            }
            index += 1;
            k += 1;
        }
        let n = usize::try_from(scan.tags()).unwrap_or(usize::MAX);
        log.records.truncate(n);
        Ok((!log.records.is_empty()).then_some(log))
    }

    /// Zeroes fast-commit block 0 when it starts with a head record, so
    /// that no fast commit left there can ever be replayed on top of what
    /// is written after it (a later recovery would otherwise take a stale
    /// area whose transaction id happens to come round again). Flushes.
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn void_fast_commits(&self) -> Result<()> {
        if !self.sb.incompat().contains(JournalIncompat::FAST_COMMIT) {
            return Ok(());
        }
        let Ok(at) = self.block_offset(self.fc_first()) else {
            return Ok(());
        };
        let mut head = [0u8; 2];
        self.dev.read_at(&mut head, at)?;
        if !ext4r_format::jbd2::fast_commit::starts_with_head(&head) {
            return Ok(());
        }
        self.dev
            .write_at(&vec![0u8; self.block_size as usize], at)?;
        self.dev.flush()
    }
}
