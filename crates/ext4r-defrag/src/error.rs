//! The defragmenter's error type.

use std::path::PathBuf;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call on a path failed.
    #[error("{path}: {what}")]
    Io {
        /// The file, directory or device.
        path: PathBuf,
        /// What was being done, in words ("FIEMAP", "open").
        what: &'static str,
        /// The system error.
        source: std::io::Error,
    },
    /// Reading an unmounted filesystem failed (corrupt, unsupported, I/O).
    #[error("{path}")]
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
    /// An offline action (moving blocks on the device itself) was asked
    /// for on a mounted filesystem.
    #[error(
        "{path} is mounted on {mountpoint}: offline defragmentation writes to the \
         device itself and needs it unmounted (name the mount point to defragment online)"
    )]
    Mounted {
        /// The device or image.
        path: PathBuf,
        /// Where it is mounted.
        mountpoint: String,
    },
    /// An action that exists only offline (`-f`, `--to-extents`) was asked
    /// for on a mounted filesystem.
    #[error("{path}: {what} works on an unmounted device or image only; unmount it first")]
    OfflineOnly {
        /// The target.
        path: PathBuf,
        /// The action, in words.
        what: &'static str,
    },
    /// An offline-only action was asked for on a regular file that lies on
    /// a mounted ext4: without `--image` such a file is a file to
    /// defragment online (as e4defrag takes it), even when it holds a
    /// filesystem image.
    #[error(
        "{path} is a file on the ext4 mounted at {mountpoint}; {what} works on an unmounted \
         device or image only: add --image to take the file as a filesystem image"
    )]
    OfflineOnlyFile {
        /// The target.
        path: PathBuf,
        /// The action, in words.
        what: &'static str,
        /// Where the filesystem holding the file is mounted.
        mountpoint: PathBuf,
    },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cause is said once: in the message or as `source()`, not both.
    #[test]
    fn causes_are_not_repeated() {
        let errors = [
            Error::io("/tmp/f", "FIEMAP")(std::io::Error::other("the io cause")),
            Error::Engine {
                path: "/tmp/img".into(),
                source: ext4r::Error::Io {
                    op: "read",
                    offset: 4096,
                    source: std::io::Error::other("the io cause"),
                },
            },
        ];
        for e in &errors {
            let text = ext4r::error::chain(e);
            let cause = std::error::Error::source(e)
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(!cause.is_empty(), "{e:?} has no source");
            assert!(!e.to_string().contains(&cause), "{text}");
            assert_eq!(text.matches("the io cause").count(), 1, "{text}");
        }
        assert_eq!(
            ext4r::error::chain(&errors[0]),
            "/tmp/f: FIEMAP: the io cause"
        );
        assert_eq!(
            ext4r::error::chain(&errors[1]),
            "/tmp/img: read at byte 4096: the io cause"
        );
    }
}
