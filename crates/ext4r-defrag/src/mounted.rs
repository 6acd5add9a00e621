//! A mounted filesystem as a [`Source`]: a directory walk with `lstat`, and
//! FIEMAP for extents.
//!
//! FIEMAP on ext4 reports what the kernel's extent status cache holds, and
//! that cache merges neighbouring extents that continue each other on disk
//! and in the file. The first FIEMAP of a file after it was last evicted
//! reports entries as the extent tree stores them (split at 32768 blocks and
//! at leaf boundaries), every later one the merged runs. e4defrag takes
//! whichever it gets, so its "now" for a big contiguous file differs between
//! a fresh mount and a second run. We map twice and keep the second, warm
//! answer: the same as e4defrag's on any run after the first, and the same
//! as the runs the read path finds in an unmounted image.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};

use ext4r::fs::FileKind;
use rustix::fs::{Mode, OFlags};

use crate::error::{Error, Result};
use crate::extent::{Extent, FileExtents};
use crate::freespace::FreeSpace;
use crate::score::BestRule;
use crate::source::{join, Entry, Source, Walk};
use crate::sys;

/// A mounted ext4 filesystem, or a part of one, to walk.
#[derive(Debug, Clone)]
pub struct MountedFs {
    /// Where the walk starts, as printed.
    root: Vec<u8>,
    /// `st_dev` of the start: the walk stays on it.
    dev: u64,
    /// The mount point.
    mountpoint: PathBuf,
    /// Block size (`st_blksize` of the start).
    block_size: u32,
    rule: BestRule,
    total_blocks: u64,
    order: DirOrder,
}

impl MountedFs {
    /// A walk from `root` (a directory, a regular file, or a mount point)
    /// on the filesystem mounted at `mountpoint` from `device`. The
    /// superblock is read from the device for e4defrag's best rule; when it
    /// cannot be (not root), every file's best is 1, as e4defrag's, and the
    /// reason is returned as the second value.
    ///
    /// # Errors
    /// [`Error::Io`] when `root` cannot be examined.
    pub fn new(root: &[u8], mountpoint: &Path, device: &Path) -> Result<(Self, Option<String>)> {
        let root_path = Path::new(OsStr::from_bytes(root));
        let meta = std::fs::symlink_metadata(root_path).map_err(Error::io(root_path, "lstat"))?;
        let (rule, total_blocks, warning) = match read_superblock(device) {
            Ok(sb) => (BestRule::from_superblock(&sb), sb.blocks_count(), None),
            Err(e) => (
                BestRule::default(),
                0,
                Some(format!(
                    "couldn't get file system details for {}: {e}",
                    device.display()
                )),
            ),
        };
        Ok((
            MountedFs {
                root: root.to_vec(),
                dev: meta.dev(),
                mountpoint: mountpoint.to_path_buf(),
                block_size: u32::try_from(meta.blksize()).unwrap_or(4096).max(1024),
                rule,
                total_blocks,
                order: DirOrder::Readdir,
            },
            warning,
        ))
    }

    /// The mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Lists directories in `order` instead of readdir's.
    pub fn with_order(mut self, order: DirOrder) -> Self {
        self.order = order;
        self
    }

    fn walk_dir(&self, dir: &[u8], visit: &mut dyn FnMut(&Entry) -> Walk) -> Walk {
        let Ok(rd) = std::fs::read_dir(OsStr::from_bytes(dir)) else {
            return Walk::Continue;
        };
        // An error part way is the end of the directory, as for readdir.
        let mut names: Vec<(Vec<u8>, u64)> = rd
            .map_while(|d| d.ok())
            .map(|d| (d.file_name().as_bytes().to_vec(), d.ino()))
            .collect();
        match self.order {
            DirOrder::Readdir => {}
            DirOrder::Name => names.sort(),
            DirOrder::Inode => names.sort_by_key(|n| n.1),
        }
        for (name, _) in names {
            let path = join(dir, &name);
            let Ok(meta) = std::fs::symlink_metadata(OsStr::from_bytes(&path)) else {
                continue;
            };
            // FTW_MOUNT: what lives on another filesystem is not visited.
            if meta.dev() != self.dev {
                continue;
            }
            let e = entry(path, &meta);
            if visit(&e) == Walk::Stop {
                return Walk::Stop;
            }
            if e.kind == FileKind::Directory && self.walk_dir(&e.path, visit) == Walk::Stop {
                return Walk::Stop;
            }
        }
        Walk::Continue
    }
}

/// The order a walk lists a directory in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DirOrder {
    /// As readdir returns entries (hash order on ext4 with dir_index): the
    /// order of nftw, find, tar, cp -r.
    #[default]
    Readdir,
    /// By name, bytewise (ls, rsync, git).
    Name,
    /// By inode number (tar --sort=inode, and fts for large directories).
    Inode,
}

/// The entry `lstat` describes.
pub(crate) fn entry(path: Vec<u8>, meta: &std::fs::Metadata) -> Entry {
    Entry {
        path,
        kind: FileKind::from_mode((meta.mode() & 0xffff) as u16),
        size: meta.size(),
        sectors: meta.blocks(),
        uid: meta.uid(),
        ino: meta.ino(),
        dev: meta.dev(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    }
}

fn read_superblock(
    device: &Path,
) -> std::result::Result<ext4r_format::superblock::Superblock, String> {
    use ext4r::device::{BlockDevice, FileDevice, OpenMode};
    use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
    let dev = FileDevice::open(device, OpenMode::default()).map_err(|e| ext4r::error::chain(&e))?;
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET)
        .map_err(|e| ext4r::error::chain(&e))?;
    let sb = Superblock::parse(&buf).map_err(|e| ext4r::error::chain(&e))?;
    sb.validate().map_err(|e| ext4r::error::chain(&e))?;
    Ok(sb)
}

/// Opens a file to map it: read-only, not following a symlink put there
/// since the walk, and without waiting for a lease holder.
pub(crate) fn open_for_map(path: &Path) -> Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| Error::io(path, "open")(e.into()))
}

/// A file's extents from FIEMAP, mapped twice (see the module comment).
pub(crate) fn fiemap_extents(fd: &OwnedFd, path: &Path, block_size: u32) -> Result<FileExtents> {
    sys::fiemap(fd).map_err(Error::io(path, "FIEMAP"))?;
    let recs = sys::fiemap(fd).map_err(Error::io(path, "FIEMAP"))?;
    let bs = u64::from(block_size);
    let extents = recs
        .iter()
        .map(|r| Extent {
            logical: r.logical / bs,
            physical: r.physical / bs,
            len: r.length / bs,
            unwritten: r.unwritten,
        })
        .collect();
    FileExtents::new(path, extents)
}

impl Source for MountedFs {
    fn walk(&self, visit: &mut dyn FnMut(&Entry) -> Walk) -> Result<()> {
        let root = Path::new(OsStr::from_bytes(&self.root));
        let meta = std::fs::symlink_metadata(root).map_err(Error::io(root, "lstat"))?;
        let e = entry(self.root.clone(), &meta);
        if visit(&e) == Walk::Stop {
            return Ok(());
        }
        if e.kind == FileKind::Directory {
            self.walk_dir(&self.root, visit);
        }
        Ok(())
    }

    fn extents(&self, entry: &Entry) -> Result<FileExtents> {
        let path = Path::new(OsStr::from_bytes(&entry.path));
        let fd = open_for_map(path)?;
        fiemap_extents(&fd, path, self.block_size)
    }

    fn free_space(&self) -> Result<FreeSpace> {
        let fd = rustix::fs::open(
            &self.mountpoint,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(&self.mountpoint, "open")(e.into()))?;
        let total = if self.total_blocks != 0 {
            self.total_blocks
        } else {
            rustix::fs::fstatfs(&fd).map(|s| s.f_blocks).unwrap_or(0)
        };
        FreeSpace::from_fsmap(&fd, self.block_size, total)
            .map_err(Error::io(&self.mountpoint, "FS_IOC_GETFSMAP"))
    }

    fn best_rule(&self) -> BestRule {
        self.rule
    }

    fn block_size(&self) -> u32 {
        self.block_size
    }
}
