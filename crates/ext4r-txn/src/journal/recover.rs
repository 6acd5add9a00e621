//! The three recovery passes over the log (scan, revoke, replay), producing
//! a [`ReplayPlan`] instead of writing.

use super::apply::ReplayPlan;
use super::fast_commit::FastCommitLog;
use super::revoke::RevokeTable;
use super::superblock::Journal;
use super::tid_geq;
use crate::device::BlockDevice;
use crate::error::{Error, Location, Result};
use ext4r_format::checksum::crc32_be;
use ext4r_format::jbd2::{
    self, block_type, checksum_type, verify_block_tail_checksum, verify_commit_block_checksum,
    CommitHeader, DescriptorBlock, JournalCompat, JournalHeader, JournalIncompat, JournalLayout,
    RevokeBlock, TagFlags,
};
use ext4r_format::FormatError;

/// What a recovery found: the blocks to write and the journal state to
/// leave behind.
#[derive(Debug)]
#[non_exhaustive]
pub struct Recovery {
    /// The blocks to write home, with their final contents.
    pub plan: ReplayPlan,
    /// The first transaction of the log (`s_sequence`).
    pub start_transaction: u32,
    /// The first transaction not replayed: the replayed ones are
    /// `start_transaction..end_transaction` (modulo 2^32).
    pub end_transaction: u32,
    /// The `s_sequence` to store when marking the journal empty: past
    /// `end_transaction` after a clean recovery, the old `s_sequence` after
    /// a failed one (both as e2fsck).
    pub next_sequence: u32,
    /// A transaction whose commit block failed its checksum: the log ends
    /// before it (or, with async commit, after it), and the filesystem is
    /// to be marked with errors.
    pub failed_commit: Option<u32>,
    /// `s_errno` of the journal superblock: an error the kernel recorded.
    pub journal_errno: i32,
    /// Why recovery is incomplete, if it is: a scan or revoke pass that
    /// failed (nothing is replayed), or replay errors such as a data block
    /// with a bad checksum (that block is skipped, the rest replayed). The
    /// filesystem then needs a full check.
    pub problem: Option<Error>,
    /// The filesystem blocks whose journal copy failed its checksum and
    /// was skipped, in the order the replay met them (e2fsck says "JBD2:
    /// Invalid checksum recovering data block N in log" for each).
    pub bad_copies: Vec<u64>,
    /// The recovery failed on a checksum: a copy skipped, or a transaction
    /// whose descriptor failed its checksum though its commit is not
    /// stale (e2fsck's `EFSBADCRC`: "Journal checksum error found").
    pub checksum_error: bool,
    /// Journal copies replayed (one block may be replayed several times;
    /// the plan keeps the last).
    pub replayed: u64,
    /// Revoke records read.
    pub revoke_records: u64,
    /// Journal copies skipped because a revoke cancelled them.
    pub revoke_hits: u64,
    /// Tagged blocks past the end of the filesystem, not replayed.
    pub out_of_range: u64,
    /// The fast commits of transaction `end_transaction` that the scan
    /// found valid, to be replayed after the plan (by a
    /// [`super::FastCommitReplay`]); `None` when there are none.
    pub fast_commit: Option<FastCommitLog>,
    /// Fast-commit records the replay applied (set by
    /// [`super::replay_fast_commits`]).
    pub fast_commit_applied: usize,
    /// The log block after the last transaction the scan found complete:
    /// where a transaction appended to this log goes.
    pub log_head: u64,
    /// Log blocks from `s_start` to `log_head` (wrapping): the log's
    /// length.
    pub log_used: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Scan,
    Revoke,
    Replay,
}

/// State carried between the passes (the kernel's `recovery_info` plus
/// the revoke table and the plan).
struct Walker<'j, J> {
    j: &'j Journal<J>,
    layout: JournalLayout,
    seed: u32,
    v1: bool,
    v2or3: bool,
    async_commit: bool,
    fs_blocks: u64,
    end: Option<u32>,
    failed_commit: Option<u32>,
    revokes: RevokeTable,
    plan: ReplayPlan,
    problem: Option<Error>,
    /// See [`Recovery::bad_copies`].
    bad_copies: Vec<u64>,
    /// The pass that failed failed on a checksum.
    failed_on_checksum: bool,
    replayed: u64,
    revoke_records: u64,
    revoke_hits: u64,
    out_of_range: u64,
    /// Log block after the last complete transaction of the scan.
    head: u64,
}

fn corrupt_at(index: u64, e: FormatError) -> Error {
    Error::corrupt(Location::block(index).of("journal block"), e)
}

impl<J: BlockDevice> Journal<J> {
    /// Runs the scan, revoke and replay passes over the log and returns
    /// the plan; writes nothing. `fs_blocks` bounds the filesystem blocks a
    /// tag may name (the device or `s_blocks_count`); `inode_size` is the
    /// filesystem's (fast-commit inode records are checked against it).
    ///
    /// After the scan of the log proper, a journal with a fast-commit area
    /// has it scanned for fast commits of the first transaction the log
    /// did not commit (the kernel's `fc_do_one_pass`): the valid records
    /// are returned in [`Recovery::fast_commit`], for the caller to replay
    /// after the plan. An area refused as a whole fails the recovery, as
    /// in the kernel (nothing is replayed).
    ///
    /// A journal that needs no recovery gives an empty plan. Corruption
    /// found on the way does not abort: as in e2fsck, the scan stops at the
    /// first block that does not continue the log, and errors are reported
    /// in [`Recovery::problem`] with whatever could be replayed. Memory is
    /// bounded by the log: every pass reads at most its length in blocks.
    pub fn recover(&self, fs_blocks: u64, inode_size: usize) -> Recovery {
        let sb = &self.sb;
        let seq = sb.s_sequence.get();
        let inc = sb.incompat();
        let mut w = Walker {
            j: self,
            layout: sb.layout(),
            seed: sb.csum_seed(),
            v1: sb.compat().contains(JournalCompat::CHECKSUM),
            v2or3: sb.layout().has_csum_v2or3(),
            async_commit: inc.contains(JournalIncompat::ASYNC_COMMIT),
            fs_blocks,
            end: None,
            failed_commit: None,
            revokes: RevokeTable::default(),
            plan: ReplayPlan::new(self.block_size),
            problem: None,
            bad_copies: Vec::new(),
            failed_on_checksum: false,
            replayed: 0,
            revoke_records: 0,
            revoke_hits: 0,
            out_of_range: 0,
            head: u64::from(sb.s_start.get()),
        };
        let start = u64::from(sb.s_start.get());
        let mut fast_commit = None;
        let result = if start == 0 {
            // Clean: jbd2 still moves to the next sequence number.
            w.end = Some(seq);
            Ok(())
        } else if start >= self.last {
            Err(corrupt_at(
                start,
                FormatError::invalid("s_start", format!("past the log end {}", self.last)),
            ))
        } else {
            w.pass(Pass::Scan)
                .and_then(|()| {
                    let end = w.end.unwrap_or(seq);
                    fast_commit = self.scan_fast_commits(end, inode_size)?;
                    Ok(())
                })
                .and_then(|()| w.pass(Pass::Revoke))
                .and_then(|()| w.pass(Pass::Replay))
        };
        // Fast commits are replayed after a replay with soft problems (a
        // skipped block), as the kernel's last pass does, not after a
        // failed one.
        let hard = result.err();
        // e2fsck's recovery returns the error of the pass that failed, else
        // EFSBADCRC when a copy was skipped.
        let checksum_error = if hard.is_some() {
            w.failed_on_checksum
        } else {
            !w.bad_copies.is_empty()
        };
        let fast_commit = if hard.is_none() { fast_commit } else { None };
        let problem = hard.or(w.problem);
        let end = w.end.unwrap_or(seq);
        let log_used = if start == 0 {
            0
        } else if w.head >= start {
            w.head - start
        } else {
            (self.last - start) + (w.head - self.first)
        };
        Recovery {
            next_sequence: if problem.is_none() {
                end.wrapping_add(1)
            } else {
                seq
            },
            plan: w.plan,
            start_transaction: seq,
            end_transaction: end,
            failed_commit: w.failed_commit,
            journal_errno: sb.s_errno.get(),
            problem,
            bad_copies: w.bad_copies,
            checksum_error,
            replayed: w.replayed,
            revoke_records: w.revoke_records,
            revoke_hits: w.revoke_hits,
            out_of_range: w.out_of_range,
            fast_commit,
            fast_commit_applied: 0,
            log_head: w.head,
            log_used,
        }
    }
}

impl<J: BlockDevice> Walker<'_, J> {
    /// The next log block after `b`, wrapping from the end of the log proper
    /// to `s_first`. (e2fsck 1.47.0 wraps at the end of the fast-commit area
    /// instead, which reads fast commits as log; the kernel writer never
    /// puts log blocks there.)
    fn wrap(&self, b: u64) -> u64 {
        let (first, last) = (self.j.first, self.j.last);
        if b >= last {
            first + (b - first) % (last - first)
        } else {
            b
        }
    }

    /// Counts `n` log blocks against the pass's budget: a log cannot be
    /// longer than the journal, so a walk that goes further is going round
    /// a corrupt log (where e2fsck would loop forever).
    fn consume(&self, budget: &mut u64, n: u64, at: u64) -> Result<()> {
        *budget = budget.checked_sub(n).ok_or_else(|| {
            corrupt_at(
                at,
                FormatError::invalid("log", "does not end within the journal"),
            )
        })?;
        Ok(())
    }

    fn read(&self, index: u64) -> Result<Vec<u8>> {
        let at = self.j.block_offset(index)?;
        let mut buf = vec![0u8; self.j.block_size as usize];
        self.j.dev.read_at(&mut buf, at)?;
        Ok(buf)
    }

    fn note(&mut self, e: Error) {
        self.problem.get_or_insert(e);
    }

    /// One pass from `s_start`. `Err` is a failure that ends recovery;
    /// softer problems are noted and the pass goes on.
    fn pass(&mut self, pass: Pass) -> Result<()> {
        let sb = &self.j.sb;
        let mut next_id = sb.s_sequence.get();
        let mut blk = u64::from(sb.s_start.get());
        let mut budget = self.j.last - self.j.first + 1;
        // Set when a descriptor or revoke block failed its checksum: the
        // transaction is either corrupt or a stale leftover, which the
        // commit time tells apart.
        let mut check_commit_time = false;
        let mut last_commit_time = 0u64;
        let mut crc = !0u32;
        loop {
            if let (false, Some(end)) = (pass == Pass::Scan, self.end) {
                if tid_geq(next_id, end) {
                    break;
                }
            }
            let here = blk;
            self.consume(&mut budget, 1, here)?;
            let block = self.read(here)?;
            blk = self.wrap(blk + 1);
            let Ok(header) = JournalHeader::parse(&block) else {
                break;
            };
            if header.sequence() != next_id {
                break;
            }
            match header.blocktype() {
                block_type::DESCRIPTOR => {
                    let desc = DescriptorBlock::parse(&block, self.layout)
                        .map_err(|e| corrupt_at(here, e))?;
                    if self.v2or3 && desc.verify_checksum(self.seed).is_err() {
                        if pass != Pass::Scan {
                            self.failed_on_checksum = true;
                            return Err(corrupt_at(
                                here,
                                FormatError::invalid("descriptor block", "bad checksum"),
                            ));
                        }
                        check_commit_time = true;
                    }
                    let n = desc.tags().count() as u64;
                    match pass {
                        Pass::Scan if self.v1 && !check_commit_time && self.end.is_none() => {
                            crc = crc32_be(crc, &block);
                            self.consume(&mut budget, n, here)?;
                            let mut ended = false;
                            for _ in 0..n {
                                let io = blk;
                                blk = self.wrap(blk + 1);
                                match self.read(io) {
                                    Ok(data) => crc = crc32_be(crc, &data),
                                    Err(_) => {
                                        ended = true;
                                        break;
                                    }
                                }
                            }
                            if ended {
                                break;
                            }
                        }
                        Pass::Scan | Pass::Revoke => {
                            self.consume(&mut budget, n, here)?;
                            blk = self.wrap(blk + n);
                        }
                        Pass::Replay => {
                            self.consume(&mut budget, n, here)?;
                            blk = self.replay_tags(&desc, next_id, blk);
                        }
                    }
                }
                block_type::COMMIT => {
                    // The magic and type were read: a whole journal block
                    // always holds the header.
                    let head = CommitHeader::parse(&block).ok();
                    let commit_time = head.map_or(0, |h| h.h_commit_sec.get());
                    if check_commit_time {
                        if commit_time >= last_commit_time {
                            self.failed_on_checksum = true;
                            return Err(corrupt_at(
                                here,
                                FormatError::invalid(
                                    "transaction",
                                    format!("{next_id} has a block with a bad checksum"),
                                ),
                            ));
                        }
                        // Older than the transaction before: a stale
                        // leftover, the end of the log.
                        break;
                    }
                    let mut bad = false;
                    if pass == Pass::Scan && self.v1 {
                        if let Some(end) = self.end {
                            self.failed_commit = Some(end);
                            break;
                        }
                        let (found, ty, size) = head.map_or((0, 0, 0), |h| {
                            (h.h_chksum[0].get(), h.h_chksum_type, h.h_chksum_size)
                        });
                        let matches = crc == found && ty == checksum_type::CRC32 && size == 4;
                        let unused = ty == 0 && size == 0 && found == 0;
                        if matches || unused {
                            crc = !0;
                        } else {
                            bad = true;
                        }
                    }
                    if !bad
                        && pass == Pass::Scan
                        && self.v2or3
                        && verify_commit_block_checksum(self.seed, &block).is_err()
                    {
                        bad = true;
                    }
                    if bad {
                        if commit_time < last_commit_time {
                            break;
                        }
                        self.end = Some(next_id);
                        if !self.async_commit {
                            self.failed_commit = Some(next_id);
                            break;
                        }
                    }
                    if pass == Pass::Scan {
                        last_commit_time = commit_time;
                        self.head = blk;
                    }
                    next_id = next_id.wrapping_add(1);
                }
                block_type::REVOKE => {
                    if pass == Pass::Scan
                        && self.v2or3
                        && verify_block_tail_checksum(self.seed, &block).is_err()
                    {
                        check_commit_time = true;
                    }
                    if pass == Pass::Revoke {
                        let rb = RevokeBlock::parse(&block, self.layout)
                            .map_err(|e| corrupt_at(here, e))?;
                        for r in rb.records() {
                            self.revokes.insert(r.0, next_id);
                            self.revoke_records += 1;
                        }
                    }
                }
                _ => break,
            }
        }
        match (pass, self.end) {
            (Pass::Scan, None) => self.end = Some(next_id),
            (Pass::Scan, Some(_)) => {}
            (_, end) if end != Some(next_id) => self.note(Error::corrupt(
                "journal",
                FormatError::invalid(
                    "log",
                    format!("a recovery pass ended at transaction {next_id}, not {end:?}"),
                ),
            )),
            _ => {}
        }
        Ok(())
    }

    /// Replays the data blocks a descriptor's tags describe, starting at
    /// log block `blk`; returns the log block after them.
    fn replay_tags(&mut self, desc: &DescriptorBlock<'_>, tid: u32, mut blk: u64) -> u64 {
        for tag in desc.tags() {
            let io = blk;
            blk = self.wrap(blk + 1);
            let mut data = match self.read(io) {
                Ok(d) => d,
                Err(e) => {
                    self.note(e);
                    continue;
                }
            };
            let target = tag.blocknr(self.layout);
            if self.revokes.is_revoked(target.0, tid) {
                self.revoke_hits += 1;
                continue;
            }
            // e2fsck skips a block whose checksum is wrong and replays the
            // rest; the recovery then counts as failed.
            if let Err(e) = tag.verify_data(self.layout, self.seed, tid, &data) {
                self.bad_copies.push(target.0);
                self.note(Error::corrupt(
                    format!("journal block {io} (copy of {target}, transaction {tid})"),
                    e,
                ));
                continue;
            }
            if tag.flags().contains(TagFlags::ESCAPE) {
                jbd2::unescape(&mut data);
            }
            if target.0 >= self.fs_blocks {
                self.out_of_range += 1;
                continue;
            }
            self.replayed += 1;
            self.plan.insert(target, data);
        }
        blk
    }
}
