//! The engine's error type.

use std::path::PathBuf;

/// What went wrong in the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error, with what was being done and where.
    #[error("{op} at byte {offset}: {source}")]
    Io {
        /// The operation (read, write, discard, ...).
        op: &'static str,
        /// Byte offset on the device.
        offset: u64,
        /// The system error.
        source: std::io::Error,
    },
    /// Opening or inspecting a device failed.
    #[error("{path}: {source}")]
    Open {
        /// The device or image path.
        path: PathBuf,
        /// The system error.
        source: std::io::Error,
    },
    /// On-disk data that does not follow the format.
    #[error("{location}: {source}")]
    Corrupt {
        /// Where (group, inode, block, offset) in words.
        location: String,
        /// What is wrong.
        source: ext4r_format::FormatError,
    },
    /// The device is mounted.
    #[error("{device} is mounted on {mountpoint}")]
    Mounted {
        /// The device or image.
        device: PathBuf,
        /// Where it is mounted.
        mountpoint: String,
    },
    /// The device is in use by the system (busy, swap, held open).
    #[error("{0} is apparently in use by the system")]
    InUse(PathBuf),
    /// An access beyond the end of the device.
    #[error("access of {len} bytes at {offset} is beyond the device size {size}")]
    OutOfRange {
        /// Byte offset.
        offset: u64,
        /// Length.
        len: u64,
        /// Device size.
        size: u64,
    },
    /// Options or parameters that cannot work together.
    #[error("{0}")]
    InvalidArgument(String),
    /// The filesystem uses features this code cannot handle (named as
    /// `mke2fs -O` names them).
    #[error("unsupported filesystem features: {0}")]
    Unsupported(String),
    /// No free block or inode is left for what was asked.
    #[error("no space left on the filesystem")]
    NoSpace,
    /// No free inode is left for a new file.
    #[error("no free inodes left on the filesystem")]
    NoFreeInodes,
    /// A directory moved into its own subtree.
    #[error("cannot move {0} into a subdirectory of itself")]
    MoveIntoItself(String),
    /// The filesystem may not be written: marked read-only (its
    /// `read-only` feature) or on a device opened without write access.
    #[error("read-only filesystem: {0}")]
    ReadOnly(String),
    /// The journal has no room for another transaction until the ones in
    /// it are written home (checkpointed).
    #[error("the journal is full")]
    JournalFull,
    /// A transaction larger than the whole journal.
    #[error("a transaction of {blocks} journal blocks does not fit in a journal of {journal}")]
    TransactionTooLarge {
        /// Log blocks the transaction needs.
        blocks: u64,
        /// Log blocks the journal has.
        journal: u64,
    },
    /// A path or name that does not exist.
    #[error("{0}: no such file or directory")]
    NotFound(String),
    /// A name that exists already where a new one was to be made.
    #[error("{0}: file exists")]
    AlreadyExists(String),
    /// A directory where a non-directory was expected.
    #[error("{0}: is a directory")]
    IsADirectory(String),
    /// A directory that still holds entries.
    #[error("{0}: directory not empty")]
    DirectoryNotEmpty(String),
    /// A name longer than 255 bytes, or empty, or holding '/' or NUL.
    #[error("{0:?}: invalid file name (1 to 255 bytes, no '/' or NUL)")]
    InvalidName(String),
    /// Too many links to an inode.
    #[error("{0}: too many links")]
    TooManyLinks(String),
    /// A path component that is not a directory.
    #[error("{0}: not a directory")]
    NotADirectory(String),
}

impl Error {
    /// A closure turning an `io::Error` into [`Error::Io`] for `op` at
    /// `offset`, for `map_err`.
    pub(crate) fn io(op: &'static str, offset: u64) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Io { op, offset, source }
    }

    /// A corruption found at `location` (group, inode, block or offset in words).
    pub fn corrupt(location: impl Into<String>, source: ext4r_format::FormatError) -> Error {
        Error::Corrupt {
            location: location.into(),
            source,
        }
    }
}

/// Results of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_place() {
        let e = Error::io("read", 4096)(std::io::Error::other("boom"));
        assert_eq!(e.to_string(), "read at byte 4096: boom");
        let e = Error::Mounted {
            device: "/tmp/img".into(),
            mountpoint: "/mnt".into(),
        };
        assert_eq!(e.to_string(), "/tmp/img is mounted on /mnt");
        let e = Error::OutOfRange {
            offset: 10,
            len: 5,
            size: 12,
        };
        assert!(e.to_string().contains("beyond the device size 12"));
    }
}
