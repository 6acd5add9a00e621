//! The defragmenter's error type.

use std::path::PathBuf;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call on a path failed.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The file, directory or device.
        path: PathBuf,
        /// What was being done, in words ("FIEMAP", "open").
        what: &'static str,
        /// The system error.
        source: std::io::Error,
    },
    /// Reading an unmounted filesystem failed (corrupt, unsupported, I/O).
    #[error("{path}: {source}")]
    Engine {
        /// The image or device.
        path: PathBuf,
        /// The engine's error.
        source: ext4r::Error,
    },
    /// The target is on no ext4 filesystem (e4defrag's "Filesystem is not
    /// ext4 filesystem").
    #[error("{0}: Filesystem is not ext4 filesystem")]
    NotExt4(PathBuf),
    /// An action that changes the filesystem was asked for on an unmounted
    /// image or device: that is offline defragmentation, which needs the
    /// allocator/journal crate.
    #[error(
        "{0} is not mounted: offline defragmentation (moving blocks on an unmounted \
         device) needs ext4r's allocator/journal crate and is not available yet; \
         mount it to defragment online, or use -c to score it without mounting"
    )]
    OfflineNotYet(PathBuf),
    /// Extents a file reported that cannot be right (overlapping ranges).
    #[error("{path}: {detail}")]
    BadExtents {
        /// The file.
        path: PathBuf,
        /// What overlaps.
        detail: String,
    },
    /// Arguments that cannot work.
    #[error("{0}")]
    InvalidArgument(String),
}

impl Error {
    /// A closure turning an `io::Error` into [`Error::Io`], for `map_err`.
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        what: &'static str,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, what, source }
    }

    /// The underlying errno, when there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
