//! Growing a mounted filesystem: the kernel does it (`EXT4_IOC_RESIZE_FS`,
//! as resize2fs asks it), adding groups and moving to meta_bg as it needs.
//! The one `unsafe` block of the resize code is the ioctl call: a
//! pointer to the new block count as a `u64` (fs/ext4/ioctl.c).
#![allow(unsafe_code)]

use crate::error::Error;
use std::path::Path;

/// `_IOW('f', 16, __u64)`: fs/ext4/ext4.h's `EXT4_IOC_RESIZE_FS`.
const RESIZE_FS: rustix::ioctl::Opcode = rustix::ioctl::opcode::write::<u64>(b'f', 16);

/// Asks the kernel to grow the filesystem mounted on `mountpoint` to
/// `blocks` blocks.
///
/// # Errors
/// [`Error::Open`] when the mount point cannot be opened; [`Error::Io`]
/// with the kernel's answer (EPERM without the privilege, EINVAL for a
/// size it refuses, ENOTTY without online resize).
pub fn online_grow(mountpoint: &Path, blocks: u64) -> Result<(), Error> {
    let dir = std::fs::File::open(mountpoint).map_err(|source| Error::Open {
        path: mountpoint.to_path_buf(),
        source,
    })?;
    // SAFETY: RESIZE_FS takes a pointer to a u64, which Setter passes
    // (and nothing is read back); `dir` is an open descriptor.
    let r = unsafe {
        let call = rustix::ioctl::Setter::<RESIZE_FS, u64>::new(blocks);
        rustix::ioctl::ioctl(&dir, call)
    };
    r.map_err(|e| Error::Io {
        op: "EXT4_IOC_RESIZE_FS",
        offset: 0,
        source: e.into(),
    })
}
