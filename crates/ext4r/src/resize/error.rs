//! Why a resize was refused before anything was written, and the errors
//! of one that failed.

use crate::error::Error;

/// A resize refused before anything was written: the filesystem is as it
/// was. Each says what resize2fs would say, so that a tool can print it in
/// resize2fs's words.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The filesystem is not known to be consistent: errors recorded, not
    /// cleanly unmounted, not checked since it was last mounted, an
    /// orphan list or a journal to recover (resize2fs: "Please run
    /// 'e2fsck -f DEVICE' first.").
    NeedsCheck(String),
    /// The new size cannot hold what the filesystem holds.
    BelowMinimum {
        /// The smallest size (blocks) a shrink can reach.
        minimum: u64,
    },
    /// The new size is past what the filesystem's format can express.
    TooLarge(String),
    /// The device is smaller than the new size.
    DeviceTooSmall {
        /// Blocks the device holds.
        device_blocks: u64,
        /// Blocks asked for.
        requested: u64,
    },
    /// The filesystem already has the size asked for (after the last
    /// group is rounded as resize2fs rounds it).
    NothingToDo {
        /// Its size in blocks.
        blocks: u64,
    },
    /// A shrink of a filesystem whose inode numbers may not change.
    StableInodes,
    /// A feature or state this version cannot resize safely.
    Unsupported(String),
    /// Shrinking a mounted filesystem.
    MountedShrink,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NeedsCheck(why) => write!(f, "the filesystem needs checking first ({why})"),
            Refusal::BelowMinimum { minimum } => {
                write!(f, "New size smaller than minimum ({minimum})")
            }
            Refusal::TooLarge(why) => f.write_str(why),
            Refusal::DeviceTooSmall {
                device_blocks,
                requested,
            } => write!(
                f,
                "the device holds {device_blocks} blocks, {requested} were asked for"
            ),
            Refusal::NothingToDo { blocks } => {
                write!(f, "the filesystem is already {blocks} blocks long")
            }
            Refusal::StableInodes => f.write_str(
                "Cannot shrink this filesystem because it has the stable_inodes feature flag.",
            ),
            Refusal::Unsupported(why) => f.write_str(why),
            Refusal::MountedShrink => f.write_str("On-line shrinking not supported"),
        }
    }
}

/// What a resize returns instead of its result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResizeError {
    /// Refused before anything was written.
    #[error("{0}")]
    Refused(Refusal),
    /// The engine failed (I/O, corruption found on the way). Every step
    /// committed before leaves a consistent filesystem: the old size with
    /// some files moved, or the new size.
    #[error(transparent)]
    Engine(#[from] Error),
}

impl From<Refusal> for ResizeError {
    fn from(r: Refusal) -> Self {
        ResizeError::Refused(r)
    }
}

/// A resize's result type.
pub type Result<T> = std::result::Result<T, ResizeError>;
