//! What happened to a file: why it was left alone ([`Skip`]) or what a
//! move did ([`Outcome`]), in words for the report.

use std::fmt;

/// Why a file was left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Skip {
    /// In lost+found.
    LostFound,
    /// Not a regular file.
    NotRegular,
    /// Size 0.
    Empty,
    /// No blocks (holes only, or inline data).
    NoBlocks,
    /// Immutable (`chattr +i`).
    Immutable,
    /// Append-only (`chattr +a`).
    AppendOnly,
    /// An active swap file.
    Swap,
    /// Mapped by indirect blocks (ext3 style): the kernel moves only
    /// extent-mapped files.
    BlockMapped,
    /// Encrypted: the kernel does not move encrypted files.
    Encrypted,
    /// Data journaling (`chattr +j` or `data=journal`): not movable online.
    DataJournaled,
    /// Data stored in the inode.
    InlineData,
    /// Another process holds a lock on it.
    Locked,
    /// Another process has it open for writing.
    OpenForWriting,
    /// It changed (replaced, or written) while we worked on it.
    Changed,
    /// It was written while its blocks were being moved: the kernel
    /// serialises the two, so the file holds what the writer wrote, but
    /// the layout may not be what was planned.
    WrittenDuringMove,
    /// Another process kept its pages busy (being written) through the
    /// kernel's retries.
    Busy,
    /// It disappeared.
    Vanished,
    /// Not enough free space for a donor copy.
    NoSpace {
        /// Blocks needed.
        need: u64,
        /// Blocks free.
        free: u64,
    },
    /// Owned by someone else and we are not root.
    NotOwner,
    /// Its extents could not be read.
    Unmappable(String),
    /// Its metadata disagrees with itself (a block count that does not
    /// match its mapping, blocks mapped past its size): left for fsck.
    Inconsistent(String),
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::LostFound => write!(f, "in lost+found"),
            Skip::NotRegular => write!(f, "not a regular file"),
            Skip::Empty => write!(f, "empty"),
            Skip::NoBlocks => write!(f, "no blocks"),
            Skip::Immutable => write!(f, "immutable"),
            Skip::AppendOnly => write!(f, "append-only"),
            Skip::Swap => write!(f, "an active swap file"),
            Skip::BlockMapped => write!(
                f,
                "block-mapped (ext3) file: the kernel moves only extent-mapped files \
                 (defragment it offline, on the unmounted device)"
            ),
            Skip::Encrypted => write!(f, "encrypted: the kernel cannot move it"),
            Skip::DataJournaled => write!(f, "data journaling: the kernel cannot move it"),
            Skip::InlineData => write!(f, "data inline in the inode"),
            Skip::Locked => write!(f, "locked by another process"),
            Skip::OpenForWriting => write!(f, "open for writing by another process"),
            Skip::Changed => write!(f, "changed while being examined"),
            Skip::WrittenDuringMove => write!(
                f,
                "written while being moved (the writer's data is kept; run again to finish)"
            ),
            Skip::Busy => write!(f, "its pages were kept busy by another process"),
            Skip::Vanished => write!(f, "no longer exists"),
            Skip::NoSpace { need, free } => write!(
                f,
                "not enough free space for a copy ({need} blocks needed, {free} free)"
            ),
            Skip::NotOwner => write!(f, "not our file and we are not root"),
            Skip::Unmappable(why) => write!(f, "extents unreadable: {why}"),
            Skip::Inconsistent(why) => {
                write!(f, "{why}: left alone (check it with fsck.ext4r -f)")
            }
        }
    }
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Fewer extents now.
    Improved {
        /// Extents before.
        before: u64,
        /// Extents after.
        after: u64,
    },
    /// Already at its best count when looked at again.
    AlreadyBest {
        /// Its extents.
        extents: u64,
    },
    /// The free space offered no better layout; nothing was moved.
    NoImprovement {
        /// The file's extents.
        extents: u64,
        /// Extents the donor space would have given.
        donor: u64,
    },
    /// Moved, but not into fewer extents.
    Unchanged {
        /// Extents before.
        before: u64,
        /// Extents after.
        after: u64,
    },
    /// The time limit struck in the middle of the file; what was moved
    /// stays moved (each range is moved whole by the kernel).
    Stopped {
        /// Extents before.
        before: u64,
        /// Extents now.
        after: u64,
    },
    /// Given an extent tree in place of its block map (offline, when
    /// asked), its blocks staying where they were.
    Converted {
        /// Extents before.
        before: u64,
        /// Extents after.
        after: u64,
    },
    /// Left alone.
    Skipped(Skip),
    /// Left alone for now; worth another try later in the run.
    Retry(Skip),
    /// An error stopped the move; the file's data is intact (the kernel
    /// swaps a range whole or not at all).
    Failed(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Improved { before, after } => write!(f, "{before} -> {after} extents"),
            Outcome::AlreadyBest { extents } => {
                write!(f, "{extents} extents: already as few as possible")
            }
            Outcome::NoImprovement { extents, donor } => write!(
                f,
                "{extents} extents: no improvement possible (free space gives {donor})"
            ),
            Outcome::Unchanged { before, after } => {
                write!(f, "{before} -> {after} extents: moved, not improved")
            }
            Outcome::Stopped { before, after } => {
                write!(f, "{before} -> {after} extents: stopped at the time limit")
            }
            Outcome::Converted { before, after } => {
                write!(
                    f,
                    "{before} -> {after} extents: block map converted to extents"
                )
            }
            Outcome::Skipped(s) => write!(f, "skipped: {s}"),
            Outcome::Retry(s) => write!(f, "skipped for now: {s}"),
            Outcome::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}
