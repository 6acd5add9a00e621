//! Directories as stored — linear, indexed (htree) and inline — read
//! through a [`Source`]: listing, finding a name (through the index where
//! there is one, as the kernel's `ext4_find_entry` does), `.` and `..`.

use ext4r_format::dir::{ft, leaf};
use ext4r_format::inode::InodeFlags;
use ext4r_txn::error::Location;

pub(crate) use super::dirblock::{block, block0, no_dots, untiled, DirMap, Entry};
use super::dirblock::{for_each_block, parse_records};
pub use super::dirblock::{DirEntryInfo, FileKind};
use super::source::{InodeInfo, Source};
use super::{htree, inline};
use crate::error::{Error, Result};

fn not_a_dir(info: &InodeInfo) -> Error {
    Error::NotADirectory(format!("inode {}", info.ino.0))
}

/// The file type a directory's `.` and `..` carry on this filesystem.
fn dir_ftype(src: &(impl Source + ?Sized)) -> u8 {
    if src
        .superblock()
        .has_incompat(ext4r_format::features::Incompat::FILETYPE)
    {
        ft::DIR
    } else {
        ft::UNKNOWN
    }
}

/// The entries of a directory in stored order, `.` and `..` included
/// (for an inline directory they are made up from the stored parent, as
/// the kernel's readdir does). Unused records and htree index blocks
/// (which read as one unused record) yield nothing.
///
/// # Errors
/// [`Error::NotADirectory`] for another kind of inode; [`Error::Corrupt`]
/// naming the inode, block and offset of a malformed entry.
pub(crate) fn entries(src: &(impl Source + ?Sized), dir: &InodeInfo) -> Result<Vec<Entry>> {
    if !dir.inode.is_dir() {
        return Err(not_a_dir(dir));
    }
    let bs = src.block_size();
    let max_ino = src.superblock().s_inodes_count.get();
    if dir.inode.flags().contains(InodeFlags::INLINE_DATA) {
        let (parent, recs) = inline::dir(dir, bs, max_ino)?;
        let ft = ft::DIR;
        let mut out = vec![
            Entry {
                ino: dir.ino.0,
                name: b".".to_vec(),
                ftype: ft,
            },
            Entry {
                ino: parent,
                name: b"..".to_vec(),
                ftype: ft,
            },
        ];
        out.extend(recs);
        return Ok(out);
    }
    let mut out = Vec::new();
    for_each_block(src, dir, |nr, b| {
        let place = || {
            Location::inode(dir.ino.0)
                .of("directory block")
                .at_block(nr)
        };
        parse_records(b, bs, &place, max_ino, &mut out)?;
        Ok(None::<()>)
    })?;
    Ok(out)
}

/// `name`'s inode and file type in directory `dir`. `.` and `..` are read
/// where the kernel reads them ([`dot_entry`]); an indexed directory is
/// searched through its index (a bad index is passed over for a linear
/// scan, as the kernel falls back); an encrypted or casefolded one
/// linearly for the bytes as stored.
///
/// # Errors
/// [`Error::NotADirectory`]; [`Error::Corrupt`] naming a damaged block.
pub(crate) fn lookup(
    src: &(impl Source + ?Sized),
    dir: &InodeInfo,
    name: &[u8],
) -> Result<Option<(u32, u8)>> {
    if !dir.inode.is_dir() {
        return Err(not_a_dir(dir));
    }
    if name == b"." || name == b".." {
        return dot_entry(src, dir, name).map(Some);
    }
    let flags = dir.inode.flags();
    if flags.contains(InodeFlags::INLINE_DATA) {
        let max_ino = src.superblock().s_inodes_count.get();
        let (_, recs) = inline::dir(dir, src.block_size(), max_ino)?;
        return Ok(recs
            .into_iter()
            .find(|r| r.name == name)
            .map(|r| (r.ino, r.ftype)));
    }
    if !flags.intersects(InodeFlags::ENCRYPT | InodeFlags::CASEFOLD) {
        if let Some(found) = htree::leaf_of(src, dir, name)? {
            return Ok(found.map(|(_, hit)| hit));
        }
    }
    let csum = htree::Hashing::of(src.superblock()).csum;
    for_each_block(src, dir, |nr, b| {
        if htree::is_index_block(b, csum) {
            return Ok(None);
        }
        leaf::find(b, name).ok_or_else(|| untiled(dir.ino.0, nr))
    })
}

/// `.` or `..` of directory `dir`, read where the kernel reads them and
/// nowhere else: the first two records of block 0 (its
/// `__ext4_find_entry` searches only block 0 for these two names, linear
/// or indexed: in an htree they sit in the root, and hashing `..` would
/// lead to a leaf that does not hold it), or for an inline directory the
/// inode itself and the parent stored in the first 4 bytes of `i_block`.
///
/// # Errors
/// [`Error::Corrupt`] when block 0 does not open with `.` and `..`.
pub(crate) fn dot_entry(
    src: &(impl Source + ?Sized),
    dir: &InodeInfo,
    name: &[u8],
) -> Result<(u32, u8)> {
    if dir.inode.flags().contains(InodeFlags::INLINE_DATA) {
        let ino = if name == b"." {
            dir.ino.0
        } else {
            ext4r_format::dir::inline_dir_parent(&dir.inode.i_block).map_or(0, |p| p.0)
        };
        return Ok((ino, dir_ftype(src)));
    }
    let (nr, b) = block0(src, dir)?;
    let [dot, dotdot] = leaf::dots(&b).ok_or_else(|| no_dots(dir.ino.0, nr))?;
    let r = if name == b"." { dot } else { dotdot };
    Ok((r.ino, r.ftype))
}
