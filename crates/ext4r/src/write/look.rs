//! Looking at a filesystem opened for writing: inodes, names, directory
//! listings and link targets as the running transaction has them (a
//! separate read-only handle would not see operations not yet written
//! home). The shell commands decide with these what to ask for.

use super::dir;
use super::WriteFs;
use crate::error::Result;
use crate::object::dir::DirEntryInfo;
use crate::object::{self, Source};
use ext4r_format::inode::Inode;
use ext4r_format::InodeNr;

impl WriteFs {
    /// Inode `ino` as it stands, operations not yet committed included.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] for an inode number outside the filesystem or an
    /// unreadable record, read errors.
    pub fn stat(&self, ino: u32) -> Result<Inode> {
        self.inode(ino)
    }

    /// The inode `name` names in directory `dir`, if any.
    ///
    /// # Errors
    /// [`crate::Error::NotADirectory`] when `dir` is not one, read errors.
    pub fn lookup(&self, dir: u32, name: &[u8]) -> Result<Option<u32>> {
        Ok(dir::lookup(&self.txn, dir, name)?.map(|(ino, _)| ino))
    }

    /// The entries of directory `dir` in on-disk order, `.` and `..`
    /// included.
    ///
    /// # Errors
    /// [`crate::Error::NotADirectory`], [`crate::Error::Corrupt`] for a damaged block,
    /// read errors.
    pub fn read_dir(&self, dir: u32) -> Result<Vec<DirEntryInfo>> {
        let info = dir::dir_info(&self.txn, dir)?;
        Ok(object::dir::entries(&self.txn, &info)?
            .into_iter()
            .map(DirEntryInfo::from)
            .collect())
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
    /// [`crate::Error::InvalidArgument`] when `ino` is not a symlink,
    /// [`crate::Error::Corrupt`] when its target is longer than `PATH_MAX`,
    /// read errors.
    pub fn read_link(&self, ino: u32) -> Result<Vec<u8>> {
        let info = Source::inode(&self.txn, InodeNr(ino))?;
        object::path::read_link(&self.txn, &info)
    }

    /// Whether directory `a` is directory `b` or holds it somewhere below
    /// (following `..` up from `b`): a rename of `a` into `b` would cut
    /// the tree off.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] for a `..` chain that never reaches the root,
    /// read errors.
    pub fn contains(&self, a: u32, b: u32) -> Result<bool> {
        self.is_ancestor(a, b)
    }
}
