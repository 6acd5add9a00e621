//! How a check is asked to run.

use std::sync::Arc;

use ext4r::device::BlockDevice;

/// How to check.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// Check even when the filesystem is marked clean (`-f`).
    pub force: bool,
    /// Superblock copy to use (`-b`).
    pub superblock: Option<u64>,
    /// Block size with `superblock` (`-B`).
    pub block_size: Option<u32>,
    /// The current time, to judge the check interval and times in the
    /// future (seconds since the epoch).
    pub now: i64,
    /// A repair run: superblock and descriptor problems that would be
    /// fixed force the full check, as e2fsck's "problems fixed" does.
    pub repairing: bool,
    /// Rebuild the hash index of every directory in a repair (`-D`,
    /// e2fsck's pass 3A for all directories).
    pub rehash: bool,
    /// Leave extent trees that could be shorter or narrower as they are,
    /// unsaid (`-E no_optimize_extents`, and `-E fixes_only`); by default
    /// they are said and a repair rebuilds them (e2fsck's pass 1E).
    pub no_optimize_extents: bool,
    /// The journal device of a filesystem with an external journal (`-j`).
    pub external_journal: Option<ExternalJournal>,
    /// Threads the passes may use (`-m`): 0 for the available cores, 1 for
    /// a check on the calling thread alone. The findings, their order and
    /// the repairs do not depend on it.
    pub threads: usize,
    /// The device as the tool names it: written into the MMP block while a
    /// repair holds an `mmp` filesystem (see [`crate::repair()`]).
    pub device_name: String,
    /// The waits of multiple-mount protection in a repair (twice the check
    /// interval and a second); `std::thread::sleep` when `None`.
    pub mmp_sleep: Option<fn(std::time::Duration)>,
    /// Set (by a signal handler, another thread) to stop the run, as
    /// e2fsck's SIGINT and SIGTERM do: the check stops within the pass in
    /// progress (pass 1 after its current chunk, the others when they
    /// end) with [`crate::Report::cancelled`]; a repair applies nothing more and
    /// leaves the superblock's state, check time and mount count as they
    /// are ([`crate::RepairReport::cancelled`], exit 32).
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// [`Options::now`] is the system's clock and reads before 2010
    /// (e2fsck's `E2F_FLAG_TIME_INSANE`, never set when `E2FSCK_TIME`
    /// gives the time): a repair then leaves `s_lastcheck` alone.
    pub clock_insane: bool,
    /// Check fully even when the filesystem looks clean, without counting
    /// as `-f` (a repair's rounds, once it knows a check is due): the
    /// checks e2fsck makes only under `-f` (superblock times in the
    /// future) follow [`Options::force`] alone.
    pub(crate) full: bool,
}

impl Options {
    /// [`Options::threads`] resolved: at least 1, the available cores for 0.
    pub fn thread_count(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        }
    }
}

/// The device given with `-j`.
#[derive(Clone)]
pub struct ExternalJournal(pub Arc<dyn BlockDevice>);

impl std::fmt::Debug for ExternalJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExternalJournal({} bytes)", self.0.size())
    }
}
