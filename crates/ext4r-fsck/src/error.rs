//! What stops a check before it can be done (e2fsck's exit 8).

use crate::features::Unsupported;

/// What went wrong so that the check could not be done at all (e2fsck's
/// exit 8).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The filesystem could not be opened: no usable superblock or group
    /// descriptors, or features this checker does not know.
    #[error(transparent)]
    Open(#[from] ext4r::Error),
    /// The superblock has features this checker does not check (e2fsck's
    /// "has unsupported feature(s)"); nothing was checked or written.
    #[error("has unsupported feature(s): {}", .0.names.join(" "))]
    Unsupported(Unsupported),
}

#[cfg(test)]
mod error_tests {
    /// The open failure is said once: its message is the engine's, its
    /// causes the engine's causes.
    #[test]
    fn causes_are_not_repeated() {
        let e = crate::error::Error::from(ext4r::Error::Open {
            path: "/tmp/img".into(),
            source: std::io::Error::other("the io cause"),
        });
        let text = ext4r::error::chain(&e);
        assert_eq!(text, "/tmp/img: the io cause");
    }
}
