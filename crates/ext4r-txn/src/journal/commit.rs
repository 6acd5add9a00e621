//! Writing transactions to a jbd2 journal, in the kernel's format, so that
//! the kernel, e2fsck and our own recovery replay what we leave behind.
//!
//! A transaction is written as jbd2's `jbd2_journal_commit_transaction`
//! writes one: revoke blocks first, then descriptor blocks each followed by
//! the blocks its tags name (a block that starts with the jbd2 magic is
//! written with its first four bytes zeroed and the `ESCAPE` flag set), a
//! flush, the commit block, a flush. Checksums follow the journal
//! superblock: v1 (`COMPAT_CHECKSUM`, a CRC32 of the descriptor and data
//! blocks in the commit block), v2 or v3 (block tails, tag checksums, the
//! commit block's). Tags are 32 or 64 bits wide as `INCOMPAT_64BIT` says.
//!
//! The log starts at `s_first` whenever the journal is empty; the journal
//! superblock's `s_start` and `s_sequence` are written (and flushed) before
//! the first transaction's blocks, as jbd2 does, so that a crash after the
//! commit block finds the transaction. Transaction ids continue from the
//! superblock's `s_sequence` plus one: a transaction cut short in an
//! earlier life may have left blocks with `s_sequence` itself in the log,
//! which must never look like ours (the kernel skips an id for the same
//! reason).

use super::superblock::{byte_offset, Journal};
use super::JournalLocation;
use crate::csum::Checksums;
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::checksum::crc32_be;
use ext4r_format::jbd2::{
    self, checksum_type, data_block_checksum, CommitHeader, DescriptorTag, DescriptorWriter,
    JournalCompat, JournalIncompat, JournalSuperblock, RevokeWriter, TagFlags, HEADER_SIZE,
};
use ext4r_format::num;
use ext4r_format::{BlockNr, FormatError};

/// Room taken by the UUID after the first tag of a descriptor block.
const UUID_SIZE: usize = 16;

fn format(e: FormatError) -> Error {
    Error::corrupt("journal", e)
}

/// A journal opened for writing.
#[derive(Debug)]
pub struct JournalWriter {
    location: JournalLocation,
    block_size: u32,
    sb: JournalSuperblock,
    /// The log proper: `first..last`.
    first: u64,
    last: u64,
    /// The next log block to write.
    head: u64,
    /// The first log block still needed (the oldest transaction not yet
    /// checkpointed); equal to `head` when nothing is.
    tail: u64,
    /// Log blocks in use (`tail..head`, wrapping).
    used: u64,
    /// The id of the next transaction.
    next_seq: u32,
    /// Whether `s_start` on disk is 0.
    empty: bool,
    /// The filesystem is 64bit: tags need the high half.
    fs_64bit: bool,
}

impl JournalWriter {
    /// Opens `journal` for writing. It must be empty (recovered first).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the journal still needs recovery.
    pub fn open<D: BlockDevice>(journal: &Journal<D>, fs_64bit: bool) -> Result<Self> {
        if journal.needs_recovery() {
            return Err(Error::InvalidArgument(
                "the journal needs recovery before anything is written to it".into(),
            ));
        }
        let sb = journal.sb.clone();
        Ok(JournalWriter {
            location: journal.location.clone(),
            block_size: journal.block_size,
            next_seq: sb.s_sequence.get().wrapping_add(1),
            sb,
            first: journal.first,
            last: journal.last,
            head: journal.first,
            tail: journal.first,
            used: 0,
            empty: true,
            fs_64bit,
        })
    }

    /// The id the next transaction gets.
    pub fn next_sequence(&self) -> u32 {
        self.next_seq
    }

    /// Blocks of the log proper.
    pub fn log_blocks(&self) -> u64 {
        self.last - self.first
    }

    /// Log blocks free for new transactions.
    pub fn free_blocks(&self) -> u64 {
        self.log_blocks().saturating_sub(self.used)
    }

    /// Whether the log holds transactions not yet checkpointed.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    fn layout(&self) -> ext4r_format::jbd2::JournalLayout {
        self.sb.layout()
    }

    /// Tags one descriptor block holds (the first tag also carries the
    /// UUID).
    fn tags_per_descriptor(&self) -> u64 {
        let l = self.layout();
        let room = self.block_size as usize - HEADER_SIZE - l.tail_bytes() - UUID_SIZE;
        (room / l.tag_bytes()).max(1) as u64
    }

    fn revokes_per_block(&self) -> u64 {
        let l = self.layout();
        let room = self.block_size as usize - 16 - l.tail_bytes();
        (room / l.revoke_record_bytes()).max(1) as u64
    }

    /// Log blocks a transaction of `blocks` metadata blocks and `revokes`
    /// revoke records takes.
    pub fn blocks_for(&self, blocks: u64, revokes: u64) -> u64 {
        blocks
            + blocks.div_ceil(self.tags_per_descriptor())
            + revokes.div_ceil(self.revokes_per_block())
            + 1
    }

    fn device_offset(&self, index: u64) -> Result<u64> {
        let b = self.location.device_block(index).ok_or_else(|| {
            Error::corrupt(
                "journal",
                FormatError::invalid("journal block", format!("{index} is not mapped")),
            )
        })?;
        byte_offset(b, self.block_size)
    }

    /// Writes one log block at the head and moves the head on.
    fn put(&mut self, dev: &dyn BlockDevice, data: &[u8]) -> Result<()> {
        let at = self.device_offset(self.head)?;
        dev.write_at(data, at)?;
        self.head += 1;
        if self.head >= self.last {
            self.head = self.first;
        }
        self.used += 1;
        Ok(())
    }

    fn write_superblock(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        Checksums::stamp_journal_superblock(&mut self.sb);
        let at = self.device_offset(self.location.superblock_index())?;
        dev.write_at(&self.sb.to_bytes(), at)?;
        dev.flush()
    }

    /// Starts the log at `s_first` with the next transaction id, turning on
    /// the features the kernel turns on when it mounts (revoke records,
    /// 64-bit tags on a 64bit filesystem).
    fn start_log(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        let mut inc = self.sb.s_feature_incompat.get() | JournalIncompat::REVOKE.bits();
        if self.fs_64bit {
            inc |= JournalIncompat::BIT64.bits();
        }
        self.sb.s_feature_incompat.set(inc);
        self.void_fast_commits(dev)?;
        self.head = self.first;
        self.tail = self.first;
        self.used = 0;
        // s_first, read from the u32 field of the same superblock.
        self.sb.s_start.set(num::sat_u32(self.first));
        self.sb.s_sequence.set(self.next_seq);
        self.write_superblock(dev)?;
        self.empty = false;
        Ok(())
    }

    /// Zeroes the fast-commit area's first block when it holds a head, so
    /// that fast commits left from before this log can never be replayed
    /// on top of it (their transaction id could come round again); made
    /// durable by the superblock write that follows.
    fn void_fast_commits(&self, dev: &dyn BlockDevice) -> Result<()> {
        if !self.sb.incompat().contains(JournalIncompat::FAST_COMMIT) {
            return Ok(());
        }
        let Ok(at) = self.device_offset(self.last + 1) else {
            return Ok(());
        };
        let mut head = [0u8; 2];
        dev.read_at(&mut head, at)?;
        if ext4r_format::jbd2::fast_commit::starts_with_head(&head) {
            dev.write_at(&vec![0u8; self.block_size as usize], at)?;
        }
        Ok(())
    }

    /// Writes one transaction: `blocks` (filesystem block number and its
    /// new contents, one block each) and `revokes` (metadata blocks freed
    /// by it, which must not be replayed from earlier transactions), ending
    /// with a durable commit block. Returns its id.
    ///
    /// # Errors
    /// [`Error::JournalFull`] when the free log space is too small (the
    /// caller checkpoints and tries again), [`Error::TransactionTooLarge`]
    /// when even an empty log is, I/O errors.
    pub fn commit(
        &mut self,
        dev: &dyn BlockDevice,
        blocks: &[(u64, &[u8])],
        revokes: &[u64],
        time: (u64, u32),
    ) -> Result<u32> {
        let need = self.blocks_for(blocks.len() as u64, revokes.len() as u64);
        if need > self.log_blocks() {
            return Err(Error::TransactionTooLarge {
                blocks: need,
                journal: self.log_blocks(),
            });
        }
        if need > self.free_blocks() {
            return Err(Error::JournalFull);
        }
        if self.empty {
            self.start_log(dev)?;
        }
        let seq = self.next_seq;
        let layout = self.layout();
        let seed = self.sb.csum_seed();
        let bs = self.block_size as usize;
        let mut buf = vec![0u8; bs];
        for chunk in revokes.chunks(num::index(self.revokes_per_block())) {
            let mut w = RevokeWriter::new(&mut buf, layout, seq).map_err(format)?;
            for &b in chunk {
                w.push(BlockNr(b)).map_err(format)?;
            }
            w.finish(seed).map_err(format)?;
            self.put(dev, &buf)?;
        }
        let v1 = self.sb.compat().contains(JournalCompat::CHECKSUM);
        let mut crc = !0u32;
        let mut data = vec![0u8; bs];
        for chunk in blocks.chunks(num::index(self.tags_per_descriptor())) {
            let mut desc = vec![0u8; bs];
            let mut escaped = Vec::with_capacity(chunk.len());
            {
                let mut w = DescriptorWriter::new(&mut desc, layout, seq).map_err(format)?;
                for (k, &(target, contents)) in chunk.iter().enumerate() {
                    if contents.len() != bs {
                        return Err(Error::InvalidArgument(format!(
                            "journal block for {target} is {} bytes, not {bs}",
                            contents.len()
                        )));
                    }
                    let escape = jbd2::needs_escape(contents);
                    let mut flags = TagFlags::empty();
                    if escape {
                        flags |= TagFlags::ESCAPE;
                    }
                    let uuid = (k == 0).then_some(self.sb.s_uuid);
                    let mut tag = DescriptorTag::new(layout, BlockNr(target), flags, uuid);
                    // The tag's checksum covers the block as logged.
                    data.copy_from_slice(contents);
                    if escape {
                        jbd2::escape(&mut data);
                    }
                    tag.set_checksum(layout, data_block_checksum(seed, seq, &data));
                    if !w.push(&tag).map_err(format)? {
                        return Err(Error::InvalidArgument("journal descriptor overflow".into()));
                    }
                    escaped.push(escape);
                }
                w.finish(seed).map_err(format)?;
            }
            if v1 {
                crc = crc32_be(crc, &desc);
            }
            self.put(dev, &desc)?;
            for (&(_, contents), escape) in chunk.iter().zip(escaped) {
                data.copy_from_slice(contents);
                if escape {
                    jbd2::escape(&mut data);
                }
                if v1 {
                    crc = crc32_be(crc, &data);
                }
                self.put(dev, &data)?;
            }
        }
        // Everything before the commit block is on disk before it is.
        dev.flush()?;
        let mut commit = vec![0u8; bs];
        let mut header = CommitHeader::new(seq, time.0, time.1);
        if v1 {
            header.h_chksum_type = checksum_type::CRC32;
            header.h_chksum_size = 4;
            header.h_chksum[0].set(crc);
        }
        commit[..ext4r_format::jbd2::COMMIT_HEADER_SIZE].copy_from_slice(&header.to_bytes());
        if layout.has_csum_v2or3() {
            Checksums::stamp_journal_commit(seed, &mut commit)?;
        }
        self.put(dev, &commit)?;
        dev.flush()?;
        self.next_seq = seq.wrapping_add(1);
        Ok(seq)
    }

    /// Marks the journal empty once every transaction in it has been
    /// written home (and flushed): `s_start` 0, `s_sequence` the next id.
    ///
    /// # Errors
    /// I/O errors.
    pub fn mark_empty(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        if self.empty {
            return Ok(());
        }
        self.sb.s_start.set(0);
        self.sb.s_sequence.set(self.next_seq);
        self.write_superblock(dev)?;
        self.empty = true;
        self.head = self.first;
        self.tail = self.first;
        self.used = 0;
        Ok(())
    }
}

impl<J: BlockDevice> Journal<J> {
    /// Appends `blocks` to the log `recovery` scanned, as one more
    /// transaction with the id the log would give next
    /// (`recovery.end_transaction`), written after its last complete
    /// transaction and committed (flushed). The log's own transactions are
    /// left as they are: a recovery run after this replays them and then
    /// this one. Returns `false`, having written nothing, when the log has
    /// no room for it (or the journal's tags cannot name its blocks).
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn append_replay(
        &self,
        recovery: &super::Recovery,
        blocks: &super::ReplayPlan,
        time: (u64, u32),
    ) -> Result<bool> {
        if !self.needs_recovery()
            || recovery.log_head < self.first
            || recovery.log_head >= self.last
        {
            return Ok(false);
        }
        let wide = self.sb.layout().is_64bit();
        if !wide && blocks.iter().any(|(b, _)| b.0 > u64::from(u32::MAX)) {
            return Ok(false);
        }
        let mut w = JournalWriter {
            location: self.location.clone(),
            block_size: self.block_size,
            sb: self.sb.clone(),
            first: self.first,
            last: self.last,
            head: recovery.log_head,
            tail: u64::from(self.sb.s_start.get()),
            used: recovery.log_used,
            next_seq: recovery.end_transaction,
            empty: false,
            fs_64bit: wide,
        };
        let list: Vec<(u64, &[u8])> = blocks.iter().map(|(b, d)| (b.0, d)).collect();
        match w.commit(&self.dev, &list, &[], time) {
            Ok(_) => Ok(true),
            Err(Error::JournalFull | Error::TransactionTooLarge { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
