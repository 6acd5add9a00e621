//! What a check tells its caller while it runs, so that a tool can print
//! e2fsck's pass headings and problems as they happen instead of at the
//! end.

use std::time::Duration;

use crate::problem::Problem;

/// Why a filesystem that is not checked with `-f` gets a full check
/// anyway, as e2fsck's `check_if_skip` says it after the device name
/// ("IMG was not cleanly unmounted, check forced.").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Forced {
    /// The error flag is set, the filesystem is marked not valid, or its
    /// summary counts exceed its totals.
    Errors,
    /// The valid flag is clear: not cleanly unmounted.
    NotClean,
    /// The mount count reached the maximum.
    MountCount(u32),
    /// The last check is in the future while a check interval is set.
    FutureLastCheck,
    /// The check interval passed: days since the last check.
    Interval(u64),
}

impl std::fmt::Display for Forced {
    /// e2fsck's words, to follow the device name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Forced::Errors => f.write_str("contains a file system with errors"),
            Forced::NotClean => f.write_str("was not cleanly unmounted"),
            Forced::MountCount(n) => write!(f, "has been mounted {n} times without being checked"),
            Forced::FutureLastCheck => {
                f.write_str("has filesystem last checked time in the future")
            }
            Forced::Interval(days) => write!(f, "has gone {days} days without being checked"),
        }
    }
}

/// A journal replayed before the check (e2fsck's "recovering journal").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct JournalRecovered {
    /// The first transaction of the log.
    pub first: u32,
    /// The first transaction not replayed (`first..end` were).
    pub end: u32,
    /// Fast commits replayed after the log (their tails).
    pub fast_commits: usize,
    /// Fast-commit records applied.
    pub fast_commit_records: usize,
    /// Why the recovery is incomplete, if it is.
    pub problem: Option<String>,
    /// Filesystem blocks whose journal copy failed its checksum and was
    /// not replayed, in the order met (e2fsck: "JBD2: Invalid checksum
    /// recovering data block N in log").
    pub bad_copies: Vec<u64>,
    /// The recovery failed on a checksum (e2fsck: "Journal checksum error
    /// found in DEVICE").
    pub checksum_error: bool,
    /// The transaction whose commit block failed its checksum, where the
    /// replay stopped (e2fsck's `j_failed_commit`, said when the recovery
    /// itself succeeded).
    pub failed_commit: Option<u32>,
    /// The revoke pass met a revoke block whose `r_count` runs past the
    /// block: recovery stopped there, where e2fsck's stops with EINVAL
    /// (its only one), said as "Invalid argument while recovering journal".
    pub invalid_argument: bool,
}

impl JournalRecovered {
    pub(crate) fn of(r: &ext4r::journal::Recovery) -> Self {
        JournalRecovered {
            first: r.start_transaction,
            end: r.end_transaction,
            fast_commits: r.fast_commit.as_ref().map_or(0, |l| {
                l.records
                    .iter()
                    .take(r.fast_commit_applied)
                    .filter(|rec| rec.tag == ext4r_format::jbd2::fast_commit::tag::TAIL)
                    .count()
            }),
            fast_commit_records: r.fast_commit_applied,
            problem: r.problem.as_ref().map(|e| ext4r::error::chain(e)),
            bad_copies: r.bad_copies.clone(),
            checksum_error: r.checksum_error,
            failed_commit: r.failed_commit.filter(|_| r.problem.is_none()),
            invalid_argument: matches!(
                &r.problem,
                Some(ext4r::error::Error::Corrupt {
                    source: ext4r_format::FormatError::Invalid {
                        what: "r_count",
                        ..
                    },
                    ..
                })
            ),
        }
    }
}

/// What is done about a problem, as the caller should show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// A read-only check: nothing is done (e2fsck `-n`'s "Fix? no").
    Report,
    /// It will be fixed without asking (`-y`, `-p`, or after "yes to all").
    Fix,
    /// The question was asked through the caller's [`crate::repair::Ask`] (which
    /// showed it and the answer); nothing more to show.
    Asked,
    /// An error this version cannot fix.
    Unfixable,
    /// A harmless finding a repair leaves alone.
    Left,
}

/// Receives a check's events in the order they happen. Every method has
/// an empty default; a closure `FnMut(pass, done, total)` is an observer
/// that only takes progress.
pub trait Observer {
    /// Pass `pass` (1–5) starts. Pass 0 (superblock, descriptors, journal
    /// superblock) has no heading, as in e2fsck.
    fn pass_started(&mut self, pass: u8) {
        let _ = pass;
    }
    /// Progress within a pass: `done` of `total`.
    fn progress(&mut self, pass: u8, done: u64, total: u64) {
        let _ = (pass, done, total);
    }
    /// A pass ended after `elapsed`.
    fn pass_finished(&mut self, pass: u8, elapsed: Duration) {
        let _ = (pass, elapsed);
    }
    /// A problem was found, and what is done about it. A pass's problems
    /// arrive when the pass ends (its parallel workers' findings merged
    /// in order), before the next pass starts.
    fn problem(&mut self, p: &Problem, action: Action) {
        let _ = (p, action);
    }
    /// A note that is not a problem ("Journal is in inode 8.", a backup
    /// superblock used), before pass 1.
    fn note(&mut self, note: &str) {
        let _ = note;
    }
    /// The filesystem was opened and its superblock says this volume
    /// label (empty without one): first thing, before the journal is
    /// replayed and before anything else is said. e2fsck names the
    /// filesystem by its label from here on. A repair opens it again after
    /// a replay and for every round: the first call is the one e2fsck
    /// keeps.
    fn opened(&mut self, label: &str) {
        let _ = label;
    }
    /// The full check runs without `-f`, for this reason; before pass 1.
    fn check_forced(&mut self, why: &Forced) {
        let _ = why;
    }
    /// The journal was replayed (before pass 1, or between rounds when a
    /// round found one to run).
    fn journal_recovered(&mut self, what: &JournalRecovered) {
        let _ = what;
    }
}

impl<F: FnMut(u8, u64, u64)> Observer for F {
    fn progress(&mut self, pass: u8, done: u64, total: u64) {
        self(pass, done, total);
    }
}

/// An observer that wants nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Observer for Quiet {}
