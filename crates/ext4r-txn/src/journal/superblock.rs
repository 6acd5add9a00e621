//! Opening a journal (reading and checking its superblock the way e2fsck's
//! `e2fsck_journal_load` does), marking it empty after recovery, and the
//! filesystem superblock changes that go with recovery.

use super::location::JournalLocation;
use super::recover::Recovery;
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::features::Incompat;
use ext4r_format::jbd2::{
    checksum_type, JournalCompat, JournalIncompat, JournalSuperblock, JOURNAL_SUPERBLOCK_SIZE,
    MIN_JOURNAL_BLOCKS,
};
use ext4r_format::superblock::{Superblock, STATE_ERROR, STATE_VALID};
use ext4r_format::{BlockNr, FormatError};

/// An opened journal: its device, where its blocks are, and its checked
/// superblock.
#[derive(Debug)]
pub struct Journal<J> {
    pub(crate) dev: J,
    pub(crate) location: JournalLocation,
    pub(crate) block_size: u32,
    pub(crate) sb: JournalSuperblock,
    /// First block of the log (`s_first`).
    pub(crate) first: u64,
    /// One past the last block of the log proper (`j_last`).
    pub(crate) last: u64,
}

fn bad(what: &'static str, detail: impl Into<String>) -> Error {
    Error::corrupt("journal superblock", FormatError::invalid(what, detail))
}

impl<J: BlockDevice> Journal<J> {
    /// Reads the journal superblock from `dev` at `location` and checks it:
    /// magic and type, known features, exclusive checksum versions and the
    /// checksum type, the v2/v3 superblock checksum, block size equal to
    /// the filesystem's, `s_maxlen` within the blocks the location
    /// provides, a fast-commit area leaving at least 1024 log blocks, and
    /// `s_first` inside the log. A journal shared by several filesystems
    /// (`s_nr_users` > 1) is refused, as e2fsck does.
    ///
    /// `dev` is the filesystem device for an internal journal, the journal
    /// device for an external one.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the first failed check, or I/O errors.
    pub fn open(dev: J, location: JournalLocation, fs_block_size: u32) -> Result<Self> {
        if !(1024..=65536).contains(&fs_block_size) || !fs_block_size.is_power_of_two() {
            return Err(Error::InvalidArgument(format!(
                "block size {fs_block_size} is not a power of two in 1024..=65536"
            )));
        }
        let sb_index = location.superblock_index();
        let Some(at) = location.device_block(sb_index) else {
            return Err(bad(
                "location",
                "the journal superblock block is not mapped",
            ));
        };
        let mut buf = [0u8; JOURNAL_SUPERBLOCK_SIZE];
        dev.read_at(&mut buf, byte_offset(at, fs_block_size)?)?;
        let sb =
            JournalSuperblock::parse(&buf).map_err(|e| Error::corrupt("journal superblock", e))?;
        if sb.unknown_incompat() != 0 {
            return Err(bad(
                "s_feature_incompat",
                format!("unknown features {:#x}", sb.unknown_incompat()),
            ));
        }
        if sb.unknown_ro_compat() != 0 {
            return Err(bad(
                "s_feature_ro_compat",
                format!("unknown features {:#x}", sb.unknown_ro_compat()),
            ));
        }
        let inc = sb.incompat();
        if inc.contains(JournalIncompat::CSUM_V2 | JournalIncompat::CSUM_V3) {
            return Err(bad("s_feature_incompat", "both checksum v2 and v3"));
        }
        let v2or3 = sb.layout().has_csum_v2or3();
        if v2or3 && sb.compat().contains(JournalCompat::CHECKSUM) {
            return Err(bad("s_feature_compat", "checksum v1 together with v2/v3"));
        }
        if v2or3 && sb.s_checksum_type != checksum_type::CRC32C {
            return Err(bad("s_checksum_type", format!("{}", sb.s_checksum_type)));
        }
        sb.verify_checksum()
            .map_err(|e| Error::corrupt("journal superblock", e))?;
        if sb.version() >= 2 && sb.s_nr_users.get() > 1 {
            return Err(bad(
                "s_nr_users",
                format!("{} filesystems share this journal", sb.s_nr_users.get()),
            ));
        }
        if sb.s_blocksize.get() != fs_block_size {
            return Err(bad(
                "s_blocksize",
                format!("{} (filesystem: {fs_block_size})", sb.s_blocksize.get()),
            ));
        }
        let maxlen = u64::from(sb.s_maxlen.get());
        if maxlen > location.len() {
            return Err(bad(
                "s_maxlen",
                format!("{maxlen} blocks but the journal has {}", location.len()),
            ));
        }
        let last = u64::from(sb.log_end().unwrap_or(0));
        if inc.contains(JournalIncompat::FAST_COMMIT) && last < u64::from(MIN_JOURNAL_BLOCKS) {
            return Err(bad(
                "s_num_fc_blks",
                format!("{} of {maxlen} blocks", sb.num_fc_blocks()),
            ));
        }
        // e2fsck does not check s_first; the kernel does, and a log that
        // starts at the superblock or past its end cannot be walked.
        let first = u64::from(sb.s_first.get());
        if first == 0 || first >= last || (first <= sb_index && sb_index < last) {
            return Err(bad("s_first", format!("{first} (log ends at {last})")));
        }
        Ok(Journal {
            dev,
            location,
            block_size: fs_block_size,
            sb,
            first,
            last,
        })
    }

    /// The journal superblock as read.
    pub fn superblock(&self) -> &JournalSuperblock {
        &self.sb
    }

    /// Where the journal's blocks are.
    pub fn location(&self) -> &JournalLocation {
        &self.location
    }

    /// The journal device.
    pub fn device(&self) -> &J {
        &self.dev
    }

    /// Whether the log holds anything (`s_start` is not 0).
    pub fn needs_recovery(&self) -> bool {
        self.sb.s_start.get() != 0
    }

    /// Marks the journal empty as e2fsck does after a recovery, successful
    /// or not: `s_start` 0, `s_sequence` the recovery's next sequence,
    /// `s_errno` 0 (its value, and a failed commit, are carried to the
    /// filesystem by [`finish_fs_superblock`]), checksum updated. The rest
    /// of the superblock block is left as it is on disk.
    ///
    /// # Errors
    /// I/O errors.
    pub fn mark_empty(&self, recovery: &Recovery) -> Result<()> {
        let mut sb = self.sb.clone();
        sb.s_start.set(0);
        sb.s_sequence.set(recovery.next_sequence);
        sb.s_errno.set(0);
        crate::csum::Checksums::stamp_journal_superblock(&mut sb);
        let at = self.block_offset(self.location.superblock_index())?;
        self.dev.write_at(&sb.to_bytes(), at)?;
        self.dev.flush()
    }

    /// Byte offset on the journal device of journal block `index`.
    pub(crate) fn block_offset(&self, index: u64) -> Result<u64> {
        let b = self.location.device_block(index).ok_or_else(|| {
            bad(
                "journal block",
                format!("{index} is outside the journal or unmapped"),
            )
        })?;
        byte_offset(b, self.block_size)
    }
}

pub(crate) fn byte_offset(block: BlockNr, block_size: u32) -> Result<u64> {
    block
        .0
        .checked_mul(u64::from(block_size))
        .ok_or_else(|| Error::InvalidArgument(format!("{block} overflows a byte offset")))
}

/// The filesystem superblock changes of a recovery, as e2fsck makes them:
/// `needs_recovery` cleared; the filesystem marked not clean when the
/// recovery had a problem (a full check is needed); marked with errors when
/// a commit failed its checksum or the journal recorded an error
/// (`s_errno`), or when the superblock in use before the replay had errors
/// (`error_before`, which a replayed older copy would otherwise hide — the
/// behaviour of e2fsck 1.47.1 and the kernel); checksum updated.
///
/// Call it on the superblock as it reads after [`super::ReplayPlan::apply`].
/// `s_wtime` and `s_kbytes_written` are left to the writer.
pub fn finish_fs_superblock(sb: &mut Superblock, recovery: &Recovery, error_before: bool) {
    SuperblockMarks::of(recovery, error_before).apply(sb);
}

/// What a recovery changes in the filesystem superblock, apart from the
/// plan (so that it can be kept when the plan moves elsewhere).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SuperblockMarks {
    not_clean: bool,
    errors: bool,
}

impl SuperblockMarks {
    pub(crate) fn of(recovery: &Recovery, error_before: bool) -> Self {
        // e2fsck records a failed commit only when recovery otherwise
        // succeeded (it skips that step on error).
        let failed = recovery.problem.is_none() && recovery.failed_commit.is_some();
        SuperblockMarks {
            not_clean: recovery.problem.is_some(),
            errors: failed || recovery.journal_errno != 0 || error_before,
        }
    }

    pub(crate) fn apply(self, sb: &mut Superblock) {
        let inc = sb.s_feature_incompat.get() & !Incompat::RECOVER.bits();
        sb.s_feature_incompat.set(inc);
        let mut state = sb.s_state.get();
        if self.not_clean {
            state &= !STATE_VALID;
        }
        if self.errors {
            state |= STATE_ERROR;
        }
        sb.s_state.set(state);
        crate::csum::Checksums::stamp_superblock(sb);
    }
}
