//! Where files and their extents come from: a mounted filesystem (a
//! directory walk and FIEMAP, [`crate::mounted`]) or an unmounted image or
//! device read through the engine ([`crate::image`]). Scoring and planning
//! see only this interface, so the same code scores both and an offline
//! mover can later plan over the image source.

use ext4r::fs::FileKind;

use crate::error::Result;
use crate::extent::FileExtents;
use crate::freespace::FreeSpace;
use crate::score::BestRule;

/// One entry of a walk, with what `lstat` says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The path as printed (bytes: names need not be UTF-8).
    pub path: Vec<u8>,
    /// The file type.
    pub kind: FileKind,
    /// Size in bytes.
    pub size: u64,
    /// Space used, in 512-byte units (`st_blocks`).
    pub sectors: u64,
    /// Owner.
    pub uid: u32,
    /// Inode number.
    pub ino: u64,
    /// Device of the filesystem holding it (`st_dev`; 0 for an image).
    pub dev: u64,
    /// Last data change, in nanoseconds since the epoch.
    pub mtime_ns: i128,
}

impl Entry {
    /// The path for messages.
    pub fn display(&self) -> String {
        String::from_utf8_lossy(&self.path).into_owned()
    }
}

/// What a walk does after an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// Go on.
    Continue,
    /// Stop the walk (a time limit, an output error).
    Stop,
}

/// A filesystem (or part of one) to score or defragment.
pub trait Source {
    /// Visits every entry in e4defrag's order: the start itself, then
    /// depth first, each directory before its entries, entries in the order
    /// the kernel's readdir returns them, staying on one filesystem and not
    /// following symlinks (`nftw(FTW_PHYS | FTW_MOUNT)`).
    ///
    /// # Errors
    /// Only errors that end the whole walk; an unreadable directory is
    /// visited and its contents skipped.
    fn walk(&self, visit: &mut dyn FnMut(&Entry) -> Walk) -> Result<()>;

    /// The extents of a regular file seen in the walk.
    ///
    /// # Errors
    /// The file cannot be opened or mapped.
    fn extents(&self, entry: &Entry) -> Result<FileExtents>;

    /// The free space of the filesystem.
    ///
    /// # Errors
    /// Bitmaps or the free-space map cannot be read.
    fn free_space(&self) -> Result<FreeSpace>;

    /// The rule for the best extent count.
    fn best_rule(&self) -> BestRule;

    /// The block size (FIEMAP offsets are divided by it; e4defrag takes
    /// `st_blksize`).
    fn block_size(&self) -> u32;
}

/// e4defrag's lost+found test: a path is skipped when it starts with this
/// prefix, compared bytewise (so with the prefix `/mnt/lost+found`, a file
/// `/mnt/lost+found2` is skipped too, as e4defrag does when the target is
/// the mount point).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LostFound(pub Option<Vec<u8>>);

impl LostFound {
    /// Whether `path` is inside it.
    pub fn contains(&self, path: &[u8]) -> bool {
        self.0.as_deref().is_some_and(|p| path.starts_with(p))
    }
}

/// Joins a directory path and a name as nftw does (one slash between).
pub(crate) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    p.extend_from_slice(dir);
    if p.last() != Some(&b'/') {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_found_prefix_is_bytewise() {
        let lf = LostFound(Some(b"/mnt/lost+found".to_vec()));
        assert!(lf.contains(b"/mnt/lost+found/x"));
        assert!(lf.contains(b"/mnt/lost+found2"));
        assert!(!lf.contains(b"/mnt/other"));
        assert!(!LostFound::default().contains(b"/mnt/lost+found"));
        assert_eq!(join(b"/", b"a"), b"/a");
        assert_eq!(join(b"/mnt", b"a"), b"/mnt/a");
    }
}
