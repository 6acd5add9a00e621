//! Directories (linear, htree and inline), path lookup and symlinks: the
//! read face of the object model ([`crate::object`]).

use ext4r_format::inode::ino;
use ext4r_format::InodeNr;

use super::volume::Filesystem;
use crate::error::Result;
use crate::object;
use crate::object::InodeInfo;

pub use crate::object::dir::{DirEntryInfo, FileKind};

impl Filesystem {
    /// The entries of a directory in on-disk order, `.` and `..` included
    /// (for an inline directory they are made up from the stored parent, as
    /// the kernel's readdir does). Deleted records and htree index blocks
    /// (which look like one empty record) yield nothing.
    ///
    /// # Errors
    /// [`crate::Error::NotADirectory`] for another kind of inode;
    /// [`crate::Error::Corrupt`] naming the inode, block and offset of a
    /// malformed entry.
    pub fn read_dir(&self, dir: &InodeInfo) -> Result<Vec<DirEntryInfo>> {
        Ok(object::dir::entries(self, dir)?
            .into_iter()
            .map(DirEntryInfo::from)
            .collect())
    }

    /// Finds `name` in a directory: through its index when it has one (as
    /// the kernel does), else block by block.
    ///
    /// # Errors
    /// As [`Filesystem::read_dir`].
    pub fn lookup(&self, dir: &InodeInfo, name: &[u8]) -> Result<Option<InodeNr>> {
        Ok(object::dir::lookup(self, dir, name)?.map(|(n, _)| InodeNr(n)))
    }

    /// Resolves an absolute path (relative paths start at the root too),
    /// following symlinks in every component but the last.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`], [`crate::Error::NotADirectory`], or an
    /// error from reading the directories on the way.
    pub fn resolve(&self, path: &str) -> Result<InodeInfo> {
        object::path::resolve(self, InodeNr(ino::ROOT), path.as_bytes(), &|_| Ok(()))
    }

    /// The entries of the directory at `path`.
    ///
    /// # Errors
    /// As [`Filesystem::resolve`] and [`Filesystem::read_dir`].
    pub fn read_dir_path(&self, path: &str) -> Result<Vec<DirEntryInfo>> {
        let dir = self.resolve(path)?;
        self.read_dir(&dir)
    }

    /// The target of a symlink: in `i_block` for a fast symlink, inline
    /// data, or the first data block.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for something that is not a
    /// symlink; [`crate::Error::Corrupt`] when the target cannot be read.
    pub fn read_link(&self, info: &InodeInfo) -> Result<Vec<u8>> {
        object::path::read_link(self, info)
    }

    /// A fast symlink keeps its target in `i_block` (see
    /// [`object::is_fast_symlink`]).
    pub(crate) fn is_fast_symlink(&self, info: &InodeInfo) -> bool {
        object::is_fast_symlink(&self.sb, &info.inode)
    }
}
