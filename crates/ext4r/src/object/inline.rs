//! inline_data as stored: the 60 bytes of `i_block`, continued in the
//! value of the in-inode attribute `system.data`. Files and symlinks read
//! it cut at their size; a directory keeps its parent in the first 4
//! bytes (`EXT4_INLINE_DOTDOT_SIZE`) and its entries after them.

use ext4r_format::inode::I_BLOCK_SIZE;
use ext4r_format::num;
use ext4r_format::FormatError;
use ext4r_txn::error::Location;

use super::dirblock::{parse_records, Entry};
use super::source::InodeInfo;
use super::xattr_raw::{in_inode, RawVal};
use crate::error::{Error, Result};

fn corrupt(ino: u32, what: String) -> Error {
    Error::corrupt(
        Location::inode(ino).of("inline data"),
        FormatError::invalid("inline data", what),
    )
}

/// The inline bytes of an inode: `i_block`, then the value of
/// `system.data`, not cut at the size.
///
/// # Errors
/// [`Error::Corrupt`] naming the inode when its attribute area is
/// malformed or `system.data` lives in an EA inode (the kernel keeps it
/// in the inode).
pub(crate) fn bytes(info: &InodeInfo) -> Result<Vec<u8>> {
    let mut data = info.inode.i_block[..I_BLOCK_SIZE].to_vec();
    for a in in_inode(info)? {
        if a.is_system_data() {
            match a.value {
                RawVal::Here(v) => data.extend_from_slice(&v),
                RawVal::Ea { .. } => {
                    return Err(corrupt(
                        info.ino.0,
                        "system.data kept in an EA inode".into(),
                    ))
                }
            }
        }
    }
    Ok(data)
}

/// The contents of an inline file or symlink, cut at its size.
///
/// # Errors
/// As [`bytes`]; [`Error::Corrupt`] when the size exceeds what the inode
/// holds.
pub(crate) fn file(info: &InodeInfo) -> Result<Vec<u8>> {
    let mut data = bytes(info)?;
    let size = info.inode.size();
    if size > data.len() as u64 {
        return Err(corrupt(
            info.ino.0,
            format!("size {size} exceeds the {} bytes held inline", data.len()),
        ));
    }
    data.truncate(num::index(size));
    Ok(data)
}

/// An inline directory: its parent (the stored `..`) and its entries
/// (`.` and `..` are not stored), unused records left out.
///
/// # Errors
/// As [`bytes`]; [`Error::Corrupt`] naming the inode when the records do
/// not tile their regions or name an inode past `max_ino`.
pub(crate) fn dir(info: &InodeInfo, bs: u32, max_ino: u32) -> Result<(u32, Vec<Entry>)> {
    let data = bytes(info)?;
    let parent = ext4r_format::dir::inline_dir_parent(&data)
        .ok_or_else(|| corrupt(info.ino.0, "inline directory too short".into()))?
        .0;
    let place = || Location::inode(info.ino.0).of("inline directory");
    let mut out = Vec::new();
    let split = data.len().min(I_BLOCK_SIZE);
    for part in [&data[4..split], &data[split..]] {
        parse_records(part, bs, &place, max_ino, &mut out)?;
    }
    Ok((parent, out))
}
