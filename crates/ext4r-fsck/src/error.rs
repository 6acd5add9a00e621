//! What stops a check before it can be done (e2fsck's exit 8).

use crate::features::Unsupported;

/// What went wrong so that the check could not be done at all (e2fsck's
/// exit 8).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The filesystem could not be opened: no usable superblock or group
    /// descriptors, or features this checker does not know; also an error
    /// of the device or the engine that stopped the run later.
    #[error(transparent)]
    Open(#[from] ext4r::Error),
    /// Neither the primary superblock and descriptors nor any backup could
    /// be used (e2fsck's "while trying to open", with its advice to name a
    /// backup): nothing was checked or written.
    #[error(transparent)]
    NoFilesystem(ext4r::Error),
    /// The superblock has features this checker does not check (e2fsck's
    /// "has unsupported feature(s)"); nothing was checked or written.
    #[error("has unsupported feature(s): {}", .0.names.join(" "))]
    Unsupported(Unsupported),
    /// The superblock (its own checksum sound) has metadata_csum with a
    /// checksum algorithm other than CRC32C: libext2fs refuses to open it
    /// (`EXT2_ET_UNKNOWN_CSUM`) and e2fsck tries no backup; nothing was
    /// checked or written.
    #[error("Unknown checksum algorithm")]
    UnknownChecksum,
    /// A superblock value lies outside the range e2fsck holds it to (its
    /// `check_super_value`) and no backup superblock is inside them all:
    /// e2fsck's "Corruption found in superblock", exit 8. The text is
    /// "name = value"; nothing was checked or written.
    #[error("Corruption found in superblock.  ({0}).")]
    CorruptSuperblock(String),
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
