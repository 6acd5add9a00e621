//! Looking at a filesystem opened for writing: inodes, names, directory
//! listings and link targets as the running transaction has them (a
//! separate read-only handle would not see operations not yet written
//! home). The shell commands decide with these what to ask for.

use super::dir::{self, block_records, blocks, dir_inode};
use super::{htree, WriteFs};
use crate::error::{Error, Result};
use crate::fs::{DirEntryInfo, FileKind};
use ext4r_format::inode::Inode;
use ext4r_format::InodeNr;

/// Longest symlink target returned (`PATH_MAX`).
const MAX_TARGET: u64 = 4096;

impl WriteFs {
    /// The filesystem's block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.shape.bs as u32
    }

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
    /// [`Error::Unsupported`] for an inline-data directory, read errors.
    pub fn read_dir(&self, dir: u32) -> Result<Vec<DirEntryInfo>> {
        let inode = dir_inode(&self.txn, dir)?;
        let mut out = Vec::new();
        for (_, nr) in blocks(&self.txn, dir, &inode)? {
            let b = self.txn.read_block(nr)?;
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
