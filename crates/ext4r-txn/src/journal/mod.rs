//! jbd2 journal recovery: find the committed transactions a crash left in
//! the journal, and write their blocks home.
//!
//! The algorithm is the one the kernel (`fs/jbd2/recovery.c`) and e2fsck
//! share, three passes over the log from `s_start`:
//!
//! 1. **scan** for the end of the log: follow descriptor, revoke and commit
//!    blocks while their sequence numbers are the expected ones, checking
//!    commit (v1 CRC32, v2/v3 CRC32C) and block-tail checksums;
//! 2. **revoke**: collect every revoke record with the transaction that wrote
//!    it;
//! 3. **replay**: for each descriptor tag of a complete transaction, the
//!    block is kept unless a revoke record of the same or a later
//!    transaction names it, or (v2/v3) its data checksum is wrong.
//!
//! Nothing is written while recovering: [`Journal::recover`] returns a
//! [`Recovery`] whose [`ReplayPlan`] maps filesystem blocks to their final
//! contents. A writer then calls [`ReplayPlan::apply`],
//! [`Journal::mark_empty`] and [`finish_fs_superblock`] (or all three via
//! [`recover_filesystem`]); a read-only open wraps the device in a
//! [`JournalOverlay`] instead.
//!
//! Where the kernel and e2fsck 1.47 differ, we follow e2fsck (its results
//! are the oracle of our tests), except where noted in the code: the log
//! wraps at the end of the log proper, never into the fast-commit area, and
//! a scan that would go round the log forever stops with an error.
//!
//! ```
//! use ext4r_txn::device::MemDevice;
//! use ext4r_txn::journal::{Journal, JournalLocation};
//!
//! // A device without a journal superblock: opening fails with a typed error.
//! let dev = MemDevice::new(1 << 20);
//! let loc = JournalLocation::internal((0..1024).map(ext4r_format::BlockNr).collect());
//! assert!(Journal::open(&dev, loc, 1024).is_err());
//! ```

mod apply;
mod commit;
mod fast_commit;
mod location;
mod overlay;
mod recover;
mod revoke;
mod superblock;

#[cfg(test)]
mod testlog;
#[cfg(test)]
mod tests;

pub use apply::{
    recover_filesystem, recover_filesystem_with, replay_fast_commits, ApplyStats, ReplayPlan,
};
pub use commit::JournalWriter;
pub use fast_commit::{FastCommitLog, FastCommitReplay, FcRecordBuf, FcReplayed};
pub use location::{write_external_superblock, BlockRuns, JournalLocation, EXTERNAL_SB_OFFSET};
pub use overlay::JournalOverlay;
pub use recover::Recovery;
pub use superblock::{finish_fs_superblock, Journal};

/// Whether transaction id `a` is at or after `b`, modulo 2^32 (`tid_geq`).
pub(crate) fn tid_geq(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) as i32 >= 0
}

/// Whether transaction id `a` is after `b`, modulo 2^32 (`tid_gt`).
pub(crate) fn tid_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}
