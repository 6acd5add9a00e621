//! Extended attributes and the `system.data` attribute that continues
//! inline data: the read face of [`crate::object::xattr`].

use super::volume::Filesystem;
use crate::error::Result;
use crate::object;
use crate::object::InodeInfo;

pub use crate::object::xattr::Xattr;

impl Filesystem {
    /// All extended attributes of an inode: those in the inode first, then
    /// those in its xattr block, each in stored order. The inline-data
    /// attribute (`system.data`) is included.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] naming the inode (and block) when the
    /// attribute area is malformed.
    pub fn xattrs(&self, info: &InodeInfo) -> Result<Vec<Xattr>> {
        object::xattr::list(self, info)
    }

    /// The contents of an inline-data inode: `i_block`, then the value of
    /// `system.data`, cut at the file size.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the size exceeds what the inode holds.
    pub(crate) fn inline_data(&self, info: &InodeInfo) -> Result<Vec<u8>> {
        object::inline::file(info)
    }
}
