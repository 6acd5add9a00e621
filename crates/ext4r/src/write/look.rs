//! Looking at a filesystem opened for writing: inodes, names, directory
//! listings and link targets as the running transaction has them (a
//! separate read-only handle would not see operations not yet written
//! home). The shell commands decide with these what to ask for.

use super::dir::{self, block_records, blocks, dir_inode};
use super::{htree, WriteFs};
use crate::error::{Error, Result};
use crate::fs::{DirEntryInfo, FileKind};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::InodeNr;

/// Longest symlink target returned (`PATH_MAX`).
const MAX_TARGET: u64 = 4096;

impl WriteFs {
    /// Inode `ino` as it stands, operations not yet committed included.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode number outside the filesystem or an
    /// unreadable record, read errors.
    pub fn stat(&self, ino: u32) -> Result<Inode> {
        self.inode(ino)
    }

    /// The inode `name` names in directory `dir`, if any.
    ///
    /// # Errors
    /// [`Error::NotADirectory`] when `dir` is not one, read errors.
    pub fn lookup(&self, dir: u32, name: &[u8]) -> Result<Option<u32>> {
        Ok(dir::lookup(&self.txn, &self.shape, dir, name)?.map(|(ino, _)| ino))
    }

    /// The entries of directory `dir` in on-disk order, `.` and `..`
    /// included.
    ///
    /// # Errors
    /// [`Error::NotADirectory`], [`Error::Corrupt`] for a damaged block,
    /// read errors.
    pub fn read_dir(&self, dir: u32) -> Result<Vec<DirEntryInfo>> {
        let inode = dir_inode(&self.txn, dir)?;
        let mut out = Vec::new();
        if inode.flags().contains(InodeFlags::INLINE_DATA) {
            // `.` and `..` are not stored inline: made up as a block
            // directory's first two entries.
            let (parent, recs) = super::inline::inline_dir(&self.txn, dir, &inode)?;
            let dot = |ino: u32, name: &[u8]| DirEntryInfo {
                ino: InodeNr(ino),
                kind: FileKind::Directory,
                name: name.to_vec(),
            };
            out.push(dot(dir, b"."));
            out.push(dot(parent, b".."));
            out.extend(recs.into_iter().map(|r| DirEntryInfo {
                ino: InodeNr(r.ino),
                kind: FileKind::from_dirent(r.ftype),
                name: r.name,
            }));
            return Ok(out);
        }
        for (_, nr) in blocks(&self.txn, dir, &inode)? {
            let b = super::dir::dir_block(&self.txn, dir, &inode, nr)?;
            if htree::is_index_block(&b, &self.shape) {
                continue;
            }
            for r in block_records(&b, dir, nr)? {
                if r.ino != 0 {
                    out.push(DirEntryInfo {
                        ino: InodeNr(r.ino),
                        kind: FileKind::from_dirent(r.ftype),
                        name: r.name,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Whether the filesystem keeps extended attributes (the `ext_attr`
    /// feature): without it e2fsck drops what is set, so copies leave
    /// them out (as mke2fs -d does).
    pub fn has_xattr_feature(&self) -> bool {
        self.txn
            .superblock()
            .has_compat(ext4r_format::features::Compat::EXT_ATTR)
    }

    /// The target of symlink `ino`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `ino` is not a symlink or its target
    /// is longer than `PATH_MAX`, read errors.
    pub fn read_link(&self, ino: u32) -> Result<Vec<u8>> {
        let i = self.inode(ino)?;
        if !i.is_symlink() {
            return Err(Error::InvalidArgument(format!(
                "inode {ino} is not a symlink"
            )));
        }
        if i.size() > MAX_TARGET {
            return Err(Error::InvalidArgument(format!(
                "inode {ino}: a symlink target of {} bytes",
                i.size()
            )));
        }
        super::file::read_all(&self.txn, &self.shape, ino, &i)
    }

    /// Whether directory `a` is directory `b` or holds it somewhere below
    /// (following `..` up from `b`): a rename of `a` into `b` would cut
    /// the tree off.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a `..` chain that never reaches the root,
    /// read errors.
    pub fn contains(&self, a: u32, b: u32) -> Result<bool> {
        self.is_ancestor(a, b)
    }
}
