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
    #[error("{}: {source}", path.display())]
    Open {
        /// The device or image path.
        path: PathBuf,
        /// The system error.
        source: std::io::Error,
    },
    /// On-disk data that does not follow the format.
    #[error("{location}: {source}")]
    Corrupt {
        /// Where: group, inode, block and byte offset as numbers where
        /// known, and the structure in words (boxed: errors stay small).
        location: Box<Location>,
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
    /// Another writer holds the image or device: the writers' lock every
    /// open for writing takes (see [`crate::device::lock`]).
    #[error("{} is in use by {holder}", path.display())]
    Locked {
        /// The device or image.
        path: PathBuf,
        /// Who has it.
        holder: crate::device::LockHolder,
    },
    /// Multiple-mount protection says another host, a mount or e2fsck has
    /// the filesystem (see [`crate::mmp`]).
    #[error(
        "MMP: {why} (node {}, device {}, updated at {} s since the epoch)",
        info.node,
        info.device,
        info.time
    )]
    MmpInUse {
        /// What the MMP block said.
        why: crate::mmp::MmpBusy,
        /// Who it names, and when it was last written.
        info: crate::mmp::MmpInfo,
    },
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
    /// A file that would grow past the largest size the filesystem gives
    /// a file (`EFBIG`).
    #[error("{0}: file too large")]
    FileTooLarge(String),
    /// The caller declined to go on where a tool asks first (mke2fs's
    /// "Proceed anyway?"); names what was declined.
    #[error("cancelled: {0}")]
    Cancelled(String),
}

impl Error {
    /// A closure turning an `io::Error` into [`Error::Io`] for `op` at
    /// `offset`, for `map_err`.
    pub(crate) fn io(op: &'static str, offset: u64) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Io { op, offset, source }
    }

    /// A corruption found at `location`: a typed [`Location`], or words.
    pub fn corrupt(location: impl Into<Location>, source: ext4r_format::FormatError) -> Error {
        Error::Corrupt {
            location: Box::new(location.into()),
            source,
        }
    }

    /// Where a corruption was found, for [`Error::Corrupt`].
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Corrupt { location, .. } => Some(location),
            _ => None,
        }
    }
}

/// Where on disk a corruption was found: the numbers a caller can act on
/// (repair the inode, skip the block, check the group) and the structure
/// in words. Displayed as "group G, inode I, WHAT BLOCK, offset O", the
/// parts known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Location {
    /// The block group.
    pub group: Option<u32>,
    /// The inode.
    pub inode: Option<u32>,
    /// The filesystem (or journal) block.
    pub block: Option<u64>,
    /// The byte offset inside the block or record.
    pub offset: Option<u64>,
    /// The structure, in words ("directory block", "extent tree").
    pub what: String,
}

impl Location {
    /// In inode `ino`.
    pub fn inode(ino: u32) -> Self {
        Location {
            inode: Some(ino),
            ..Location::default()
        }
    }

    /// At block `nr`.
    pub fn block(nr: u64) -> Self {
        Location {
            block: Some(nr),
            ..Location::default()
        }
    }

    /// In group `g`.
    pub fn group(g: u32) -> Self {
        Location {
            group: Some(g),
            ..Location::default()
        }
    }

    /// The same place, at block `nr`.
    #[must_use]
    pub fn at_block(mut self, nr: u64) -> Self {
        self.block = Some(nr);
        self
    }

    /// The same place, at byte `off`.
    #[must_use]
    pub fn at_offset(mut self, off: u64) -> Self {
        self.offset = Some(off);
        self
    }

    /// The same place, naming the structure.
    #[must_use]
    pub fn of(mut self, what: impl Into<String>) -> Self {
        self.what = what.into();
        self
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(g) = self.group {
            parts.push(format!("group {g}"));
        }
        if let Some(i) = self.inode {
            parts.push(format!("inode {i}"));
        }
        match (self.what.is_empty(), self.block) {
            (false, Some(b)) => parts.push(format!("{} {b}", self.what)),
            (true, Some(b)) => parts.push(format!("block {b}")),
            (false, None) => parts.push(self.what.clone()),
            (true, None) => {}
        }
        if let Some(o) = self.offset {
            parts.push(format!("offset {o}"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// A place known only in words.
impl From<String> for Location {
    fn from(what: String) -> Self {
        Location {
            what,
            ..Location::default()
        }
    }
}

impl From<&str> for Location {
    fn from(what: &str) -> Self {
        Location::from(what.to_string())
    }
}

impl From<&String> for Location {
    fn from(what: &String) -> Self {
        Location::from(what.clone())
    }
}

/// Results of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `e`'s message followed by each of its causes (`source()`), joined by
/// ": ", for places that keep an error only as text. An error here says
/// its cause either in its message or as its `source()`, never both, so
/// `to_string()` alone would lose the cause.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        // Errors that say their cause already (ours do) are not repeated.
        let c_text = c.to_string();
        if !text.ends_with(&c_text) {
            text.push_str(": ");
            text.push_str(&c_text);
        }
        cause = c.source();
    }
    text
}

impl From<Error> for std::io::Error {
    /// The error as `std::io::Error` (its `ErrorKind` the nearest one), so
    /// that code written against `std::io` passes ours on.
    fn from(e: Error) -> Self {
        use std::io::ErrorKind as K;
        let kind = match &e {
            Error::Io { source, .. } | Error::Open { source, .. } => source.kind(),
            Error::Corrupt { .. } => K::InvalidData,
            Error::Mounted { .. }
            | Error::InUse(_)
            | Error::Locked { .. }
            | Error::MmpInUse { .. } => K::ResourceBusy,
            Error::OutOfRange { .. } => K::UnexpectedEof,
            Error::InvalidArgument(_) | Error::InvalidName(_) | Error::MoveIntoItself(_) => {
                K::InvalidInput
            }
            Error::Unsupported(_) => K::Unsupported,
            Error::NoSpace | Error::NoFreeInodes => K::StorageFull,
            Error::ReadOnly(_) => K::ReadOnlyFilesystem,
            Error::NotFound(_) => K::NotFound,
            Error::AlreadyExists(_) => K::AlreadyExists,
            Error::IsADirectory(_) => K::IsADirectory,
            Error::DirectoryNotEmpty(_) => K::DirectoryNotEmpty,
            Error::TooManyLinks(_) => K::TooManyLinks,
            Error::NotADirectory(_) => K::NotADirectory,
            Error::FileTooLarge(_) => K::FileTooLarge,
            Error::Cancelled(_) => K::Interrupted,
            Error::JournalFull | Error::TransactionTooLarge { .. } => K::Other,
        };
        std::io::Error::new(kind, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_place() {
        let e = Error::io("read", 4096)(std::io::Error::other("boom"));
        assert_eq!(chain(&e), "read at byte 4096: boom");
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

    /// Each error's message says its cause (so that `{e}` alone is
    /// enough), and [`chain`] says it once, not again from `source()`.
    #[test]
    fn causes_are_not_repeated() {
        let io = || std::io::Error::other("the io cause");
        let errors = [
            Error::io("read", 4096)(io()),
            Error::Open {
                path: "/tmp/img".into(),
                source: io(),
            },
            Error::corrupt(
                Location::inode(12).of("extent tree"),
                ext4r_format::FormatError::invalid("extent header", "the format cause"),
            ),
        ];
        for e in &errors {
            let text = chain(e);
            let cause = std::error::Error::source(e)
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(!cause.is_empty(), "{e:?} has no source");
            assert_eq!(text.matches(cause.as_str()).count(), 1, "{text}");
            assert!(e.to_string().contains(&cause), "{text}");
        }
    }
}
