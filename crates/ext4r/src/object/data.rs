//! Whole contents of small objects: a symlink's target, a value kept in
//! an EA inode.

use ext4r_format::inode::InodeFlags;
use ext4r_format::num;
use ext4r_format::FormatError;
use ext4r_txn::error::Location;

use super::inline;
use super::source::{is_fast_symlink, runs, InodeInfo, Source};
use crate::error::{Error, Result};

/// The whole contents of a small object (a symlink's target, a value in
/// an EA inode): `i_block` for a fast symlink, inline data, or its
/// mapped blocks (holes and unwritten extents read as zeros). The caller
/// bounds the size.
///
/// # Errors
/// [`Error::Corrupt`] when the mapping or the inline data is broken;
/// I/O errors.
pub(crate) fn read_small(src: &(impl Source + ?Sized), info: &InodeInfo) -> Result<Vec<u8>> {
    let size = info.inode.size();
    if is_fast_symlink(src.superblock(), &info.inode) {
        return Ok(info.inode.i_block[..num::index(size)].to_vec());
    }
    if info.inode.flags().contains(InodeFlags::INLINE_DATA) {
        return inline::file(info);
    }
    let len = usize::try_from(size).map_err(|_| {
        Error::corrupt(
            Location::inode(info.ino.0),
            FormatError::invalid("i_size", format!("{size} bytes")),
        )
    })?;
    let mut out = vec![0u8; len];
    let bs = u64::from(src.block_size());
    let what = || format!("inode {}, data", info.ino.0);
    for r in runs(src, info)?.iter().filter(|r| !r.unwritten) {
        let start = r.logical.saturating_mul(bs);
        if start >= size {
            break;
        }
        let end = r.end().saturating_mul(bs).min(size);
        let n = (end - start).div_ceil(bs) * bs;
        let mut buf = vec![0u8; num::index(n)];
        src.read_run(r.physical, &mut buf, &what)?;
        out[num::index(start)..num::index(end)].copy_from_slice(&buf[..num::index(end - start)]);
    }
    Ok(out)
}
