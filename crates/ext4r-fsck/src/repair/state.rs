//! What a repair run records about itself in the superblock, as e2fsck
//! 1.47 records it (e2fsck/unix.c at the end of `main`, util.c's
//! `preenhalt`), so that the next boot's check — ours or e2fsck's —
//! decides the same, and tune sees a "freshly checked" filesystem when
//! e2fsck would leave one:
//!
//! | how the run ended | `s_state` | `s_lastcheck` | `s_mnt_count` | error record |
//! |---|---|---|---|---|
//! | checked, nothing left (`-y`, `-p`, interactive; clean or fixed) | `VALID`, nothing else | now | 0 | cleared |
//! | checked, errors left (declined, or beyond this version) | `VALID` cleared, `ERROR` as it was | now | 0 | cleared |
//! | `-p` stopped at what it may not fix ("UNEXPECTED INCONSISTENCY") | `ERROR` added | kept | kept | kept |
//! | cancelled (SIGINT, SIGTERM) | kept | kept | kept | kept |
//! | aborted (the check could not go on: exit 8) | kept | kept | kept | kept |
//!
//! `-n` writes nothing, nor does a run that finds a filesystem clean
//! without `-f` (e2fsck's `check_if_skip` leaves before its bookkeeping).
//! Fixes made before a stop, a cancel or an abort stay written in every
//! case, as e2fsck flushes them. The error record is the kernel's
//! `s_error_count` and first/last error fields (see
//! [`ext4r_format::superblock::Superblock::clear_error_record`]).
//!
//! One difference from 1.47.0 on purpose: `s_lastcheck_hi` is set with the
//! low half (as e2fsprogs since 1.47.1 does), where 1.47.0 sets only the
//! low 32 bits; the two agree until 2106 unless the high byte held junk.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ext4r::device::BlockDevice;
use ext4r::fs::Filesystem;
use ext4r_format::superblock::{STATE_ERROR, STATE_VALID};

use crate::error::Error;
use crate::options::Options;
use crate::writer;

/// How a repair run ended, for its bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The passes ran to the end; `valid`: nothing is left that e2fsck
    /// would count against the filesystem (its `ext2fs_test_valid`).
    Checked { valid: bool },
    /// A preen run met a problem it may not fix alone.
    Halted,
    /// The caller asked the run to stop.
    Cancelled,
    /// The check could not be completed (exit 8).
    Aborted,
}

/// What a run's bookkeeping left.
pub(super) struct Recorded {
    /// The filesystem went from not valid to valid, which e2fsck counts
    /// as a change (exit 1).
    pub(super) marked_valid: bool,
    /// The superblock says errors as the run leaves it.
    pub(super) errors_flagged: bool,
}

/// Writes what `end` records (see the module docs) through `fs`, the
/// filesystem as the device holds it (or why it could not be opened).
pub(super) fn record(
    fs: Result<Arc<Filesystem>, Error>,
    end: End,
    opts: &Options,
) -> Result<Recorded, Error> {
    let valid = match end {
        End::Checked { valid } => valid,
        End::Halted => {
            flag_errors_on(&*fs?, opts.now)?;
            return Ok(Recorded {
                marked_valid: false,
                errors_flagged: true,
            });
        }
        End::Cancelled | End::Aborted => {
            // Nothing written: the state as found (false when the
            // filesystem cannot be read).
            let errors_flagged =
                fs.is_ok_and(|fs| fs.superblock().s_state.get() & STATE_ERROR != 0);
            return Ok(Recorded {
                marked_valid: false,
                errors_flagged,
            });
        }
    };
    let fs = fs?;
    let mut sb = fs.superblock().clone();
    let state = sb.s_state.get();
    // e2fsck assigns the state whole when it is valid: the error and
    // orphan bits (and anything else) go.
    sb.s_state.set(if valid {
        STATE_VALID
    } else {
        state & !STATE_VALID
    });
    if !opts.clock_insane {
        sb.set_lastcheck(opts.now);
    }
    sb.s_mnt_count.set(0);
    sb.clear_error_record();
    let errors_flagged = sb.s_state.get() & STATE_ERROR != 0;
    writer::write_superblock(&fs, sb, opts.now)?;
    Ok(Recorded {
        marked_valid: valid && state & STATE_VALID == 0,
        errors_flagged,
    })
}

/// e2fsck's `preenhalt`: the superblock says errors (`EXT2_ERROR_FS`), so
/// that the next boot checks the filesystem fully, and nothing else of the
/// state changes.
///
/// # Errors
/// The filesystem cannot be opened, or an I/O error writing it.
pub(crate) fn flag_errors(dev: &Arc<dyn BlockDevice>, now: i64) -> Result<(), Error> {
    flag_errors_on(&super::open(dev)?, now)
}

fn flag_errors_on(fs: &Filesystem, now: i64) -> Result<(), Error> {
    let mut sb = fs.superblock().clone();
    sb.s_state.set(sb.s_state.get() | STATE_ERROR);
    writer::write_superblock(fs, sb, now)?;
    Ok(())
}

/// Whether the caller has asked the run to stop.
pub(super) fn cancel_requested(opts: &Options) -> bool {
    opts.cancel
        .as_ref()
        .is_some_and(|f| f.load(Ordering::Relaxed))
}
