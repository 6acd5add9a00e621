//! What a check answers: the problems found and the summary counts.

use std::time::Duration;

use crate::observe::Forced;
use crate::problem::Problems;

/// Counts for the summary line, as e2fsck prints them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Inodes in use.
    pub inodes_used: u64,
    /// Inodes in the filesystem.
    pub inodes_count: u64,
    /// Blocks in use.
    pub blocks_used: u64,
    /// Blocks in the filesystem.
    pub blocks_count: u64,
    /// Regular files.
    pub regular: u64,
    /// Directories.
    pub directories: u64,
    /// Symbolic links (fast ones among them).
    pub symlinks: u64,
    /// Fast symbolic links.
    pub fast_symlinks: u64,
    /// Character and block devices.
    pub devices: u64,
    /// FIFOs.
    pub fifos: u64,
    /// Sockets.
    pub sockets: u64,
    /// Inodes with more than one link.
    pub multiply_linked: u64,
    /// Files whose blocks are not contiguous.
    pub fragmented: u64,
    /// Files with an extent tree of depth > 0.
    pub deep_extents: u64,
}

/// The result of a check.
#[derive(Debug)]
pub struct Report {
    /// The volume label.
    pub label: String,
    /// Everything found.
    pub problems: Problems,
    /// Counts for the summary.
    pub summary: Summary,
    /// `Some(reason)` when the filesystem was found clean without a full
    /// check (no `-f`); nothing else was done.
    pub skipped_clean: Option<String>,
    /// Notes that are not problems (journal recovery skipped under -n...).
    pub notes: Vec<String>,
    /// Wall time per pass.
    pub pass_times: Vec<(&'static str, Duration)>,
    /// Set when the check could not be completed (exit 8), with the reason.
    pub fatal: Option<String>,
    /// The check stopped while it checked the journal, before anything
    /// else (e2fsck's "`fatal` while checking journal for DEV" and
    /// "Cannot proceed with file system check"; an empty `fatal` when
    /// e2fsck says nothing more than the problem). e2fsck has not marked
    /// the filesystem valid yet then: its exit is 12.
    pub fatal_journal: bool,
    /// Why a check without `-f` went on to the passes (e2fsck's "check
    /// forced"); `None` with `-f`, on a clean filesystem, and when a
    /// problem in the superblock or descriptors forced it.
    pub check_forced: Option<Forced>,
    /// The check stopped early because [`crate::Options::cancel`] was set: the
    /// problems are those found until then.
    pub cancelled: bool,
    /// The superblock's state says errors (`EXT2_ERROR_FS`, set by the
    /// kernel or by a preen run that stopped), as the check found it.
    pub errors_flagged: bool,
    /// The directories e2fsck would rebuild in its pass 3A after this
    /// check (see the "Pass 3A" heading among the problems).
    pub rehash: Vec<u32>,
    /// The check stopped to start again from pass 1 (e2fsck's "Restarting
    /// e2fsck from the beginning..."): the descriptor fixes it found make
    /// the next check read inodes this one did not.
    pub restarted: bool,
}

impl Report {
    /// Whether errors were found (the exit code is then 4).
    pub fn has_errors(&self) -> bool {
        self.problems.errors() > 0
    }
}
