//! The library's errors as the errno values a filesystem gives, as close
//! to what the kernel's ext4 answers for the same condition as the error
//! says.

use ext4r::Error;
use fuser::Errno;

/// `EUCLEAN`, which the kernel's ext4 returns as `EFSCORRUPTED`.
pub const EFSCORRUPTED: i32 = libc::EUCLEAN;

/// The errno for `e`.
pub fn errno_of(e: &Error) -> i32 {
    match e {
        Error::NotFound(_) => libc::ENOENT,
        Error::AlreadyExists(_) => libc::EEXIST,
        Error::IsADirectory(_) => libc::EISDIR,
        Error::NotADirectory(_) => libc::ENOTDIR,
        Error::DirectoryNotEmpty(_) => libc::ENOTEMPTY,
        Error::InvalidName(_) | Error::InvalidArgument(_) | Error::MoveIntoItself(_) => {
            libc::EINVAL
        }
        Error::TooManyLinks(_) => libc::EMLINK,
        Error::FileTooLarge(_) => libc::EFBIG,
        Error::NoSpace | Error::NoFreeInodes => libc::ENOSPC,
        // A transaction that cannot be made to fit: the kernel's jbd2 says
        // ENOSPC when it cannot reserve journal credits.
        Error::JournalFull | Error::TransactionTooLarge { .. } => libc::ENOSPC,
        Error::ReadOnly(_) => libc::EROFS,
        Error::Unsupported(_) => libc::EOPNOTSUPP,
        // A pointer past the end of the device is damage, as a bad checksum.
        Error::Corrupt { .. } | Error::OutOfRange { .. } => EFSCORRUPTED,
        Error::Io { source, .. } | Error::Open { source, .. } => {
            source.raw_os_error().unwrap_or(libc::EIO)
        }
        Error::Mounted { .. } | Error::InUse(_) | Error::Locked { .. } | Error::MmpInUse { .. } => {
            libc::EBUSY
        }
        Error::Cancelled(_) => libc::EINTR,
        _ => libc::EIO,
    }
}

/// `e` as fuser's errno.
pub(crate) fn errno(e: &Error) -> Errno {
    Errno::from_i32(errno_of(e))
}

/// Whether `e` says the image is damaged or the device failed: worth a
/// line in the log, unlike ENOENT and friends, which are answers.
pub(crate) fn is_fault(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupt { .. } | Error::OutOfRange { .. } | Error::Io { .. } | Error::ReadOnly(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_the_kernels() {
        assert_eq!(errno_of(&Error::NotFound("x".into())), libc::ENOENT);
        assert_eq!(errno_of(&Error::AlreadyExists("x".into())), libc::EEXIST);
        assert_eq!(
            errno_of(&Error::DirectoryNotEmpty("x".into())),
            libc::ENOTEMPTY
        );
        assert_eq!(errno_of(&Error::NoSpace), libc::ENOSPC);
        assert_eq!(errno_of(&Error::NoFreeInodes), libc::ENOSPC);
        assert_eq!(errno_of(&Error::ReadOnly("x".into())), libc::EROFS);
        assert_eq!(errno_of(&Error::MoveIntoItself("x".into())), libc::EINVAL);
        assert_eq!(errno_of(&Error::FileTooLarge("x".into())), libc::EFBIG);
        assert_eq!(errno_of(&Error::Unsupported("x".into())), libc::EOPNOTSUPP);
        let bad = Error::corrupt(
            "extent tree",
            ext4r::format::FormatError::invalid("extent header", "bad magic"),
        );
        assert_eq!(errno_of(&bad), libc::EUCLEAN);
        assert!(is_fault(&bad));
        let io = Error::Io {
            op: "read",
            offset: 0,
            source: std::io::Error::from_raw_os_error(libc::EIO),
        };
        assert_eq!(errno_of(&io), libc::EIO);
        assert!(!is_fault(&Error::NotFound("x".into())));
    }
}
