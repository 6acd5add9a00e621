//! Damage met while the filesystem is in use: what the filesystem asks
//! to be done about it (`s_errors`, set by `mke2fs -e` and `tune2fs -e`),
//! and its record in the superblock, as the kernel's `ext4_error` keeps
//! it, so that the next boot's `e2fsck -p` checks the filesystem instead
//! of trusting its clean state.

use super::WriteFs;
use crate::error::{Error, Result};
use ext4r_format::superblock::{ERRORS_PANIC, ERRORS_RO, ERR_EFSBADCRC, ERR_EFSCORRUPTED, ERR_EIO};
use ext4r_format::FormatError;

/// What a driver does when an operation meets damage (`s_errors`, or a
/// mount's `errors=` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnError {
    /// Report the damage to the operation that met it and go on.
    Continue,
    /// Stop changing the filesystem: what was done before stays, every
    /// change after is refused.
    RemountReadOnly,
    /// Stop at once, without writing what is pending.
    Panic,
}

impl WriteFs {
    /// What the superblock asks to be done on damage (`s_errors`): any
    /// value but remount-ro and panic reads as continue, as the kernel
    /// reads it.
    pub fn on_error(&self) -> OnError {
        match self.txn.superblock().s_errors.get() {
            ERRORS_RO => OnError::RemountReadOnly,
            ERRORS_PANIC => OnError::Panic,
            _ => OnError::Continue,
        }
    }

    /// Records in the superblock that `e` was met (if it is damage or an
    /// I/O error; other errors are not the filesystem's and record
    /// nothing): the error state, the error count, and the first and
    /// last error's time, inode, block and code, as the kernel's
    /// `ext4_error` does. `func` names the operation. The record goes
    /// into the running transaction, and so to the image at the next
    /// commit; it records nothing on a handle that cannot change the
    /// filesystem.
    ///
    /// Returns whether anything was recorded.
    ///
    /// # Errors
    /// As any operation: refused after a failed commit.
    pub fn record_error(&mut self, e: &Error, func: &str) -> Result<bool> {
        let Some(code) = error_code(e) else {
            return Ok(false);
        };
        if self.read_only_view || self.poisoned.is_some() {
            return Ok(false);
        }
        let (ino, block) = e
            .location()
            .map_or((0, 0), |l| (l.inode.unwrap_or(0), l.block.unwrap_or(0)));
        let now = self.now().secs;
        self.op(|w| {
            w.txn
                .superblock_mut()
                .record_error(now, ino, block, func, code);
            Ok(())
        })?;
        Ok(true)
    }
}

/// Whether `e` is what a driver's `errors=` is about: damage found, or an
/// I/O error (not an answer such as "not found" or "read-only").
pub fn is_damage(e: &Error) -> bool {
    error_code(e).is_some()
}

/// The superblock's error code for `e`, when it is damage or an I/O error.
fn error_code(e: &Error) -> Option<u8> {
    Some(match e {
        Error::Corrupt {
            source: FormatError::BadChecksum { .. },
            ..
        } => ERR_EFSBADCRC,
        Error::Corrupt { .. } | Error::OutOfRange { .. } => ERR_EFSCORRUPTED,
        Error::Io { .. } => ERR_EIO,
        _ => return None,
    })
}
