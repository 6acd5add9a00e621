//! The error type of the format crate.

#[allow(unused_imports)]
use crate::prelude::*;

/// What went wrong while parsing or validating on-disk bytes.
///
/// Every variant names the structure it concerns (`what`), so that callers
/// which know the location (group, inode, block) can wrap it in their own
/// error with that location attached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The buffer is shorter than the structure it should hold.
    #[error("{what}: need {need} bytes, have {have}")]
    Truncated {
        /// The structure being parsed.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A magic number does not match.
    #[error("{what}: bad magic {found:#x} (expected {expected:#x})")]
    BadMagic {
        /// The structure being parsed.
        what: &'static str,
        /// The magic found on disk.
        found: u32,
        /// The magic the format requires.
        expected: u32,
    },
    /// A stored checksum does not match the computed one.
    #[error("{what}: checksum {stored:#x} does not match computed {computed:#x}")]
    BadChecksum {
        /// The structure being checked.
        what: &'static str,
        /// The checksum stored on disk.
        stored: u32,
        /// The checksum computed over the bytes.
        computed: u32,
    },
    /// A field holds a value the format does not allow.
    #[error("{what}: {detail}")]
    Invalid {
        /// The structure or field concerned.
        what: &'static str,
        /// A description of the problem, with the offending value.
        detail: String,
    },
    /// A feature name (as in `mke2fs -O`) that is not known.
    #[error("unknown feature '{0}'")]
    UnknownFeature(String),
}

/// Shorthand for results of this crate.
pub type Result<T, E = FormatError> = core::result::Result<T, E>;

impl FormatError {
    /// Builds an [`FormatError::Invalid`] error.
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> Self {
        FormatError::Invalid {
            what,
            detail: detail.into(),
        }
    }
}

/// Returns an error unless `bytes` holds at least `need` bytes.
///
/// # Errors
/// [`FormatError::Truncated`] when the buffer is short.
pub fn need(what: &'static str, bytes: &[u8], need: usize) -> Result<()> {
    if bytes.len() < need {
        return Err(FormatError::Truncated {
            what,
            need,
            have: bytes.len(),
        });
    }
    Ok(())
}
