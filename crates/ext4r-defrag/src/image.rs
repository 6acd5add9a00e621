//! An unmounted image or device as a [`Source`], read through the engine
//! (`ext4r::fs`): nothing is mounted or written, a journal needing recovery
//! is replayed in memory.
//!
//! Extents are the read path's runs, which join records that continue each
//! other on disk and in the file with the same written state: what FIEMAP
//! reports on a mounted filesystem once the kernel's extent cache holds the
//! file (see [`crate::mounted`]).
//!
//! Directories are listed in the order the kernel's readdir returns them,
//! since that decides e4defrag's numbering and ranking ties: with dir_index
//! on, a directory with an htree, of exactly one block, or inline, comes out
//! sorted by name hash (fs/ext4/dir.c `is_dx_dir`, namei.c
//! `ext4_htree_fill_tree`); other directories in on-disk order. Casefolded
//! and encrypted directories hash names the read path cannot reproduce and
//! are listed in on-disk order.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ext4r::device::{BlockDevice, FileDevice, OpenMode};
use ext4r::fs::{DirEntryInfo, FileKind, Filesystem, InodeInfo};
use ext4r_format::features::Compat;
use ext4r_format::htree::{dx_hash, effective_hash_version, parse_dx_root};
use ext4r_format::inode::InodeFlags;
use ext4r_format::superblock::FLAGS_UNSIGNED_HASH;
use ext4r_format::InodeNr;

use crate::error::{Error, Result};
use crate::extent::{Extent, FileExtents};
use crate::freespace::FreeSpace;
use crate::mounted::DirOrder;
use crate::score::BestRule;
use crate::source::{join, Entry, Source, Walk};

/// An unmounted filesystem opened read-only.
pub struct ImageFs {
    fs: Filesystem,
    path: PathBuf,
    order: DirOrder,
    /// Where walks start (absolute, inside the filesystem).
    start: Vec<u8>,
}

impl core::fmt::Debug for ImageFs {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ImageFs")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ImageFs {
    /// Opens the image or device at `path` read-only.
    ///
    /// # Errors
    /// [`Error::Engine`] when it cannot be opened or holds no usable
    /// ext2/3/4 filesystem.
    pub fn open(path: &Path) -> Result<Self> {
        let engine = |source| Error::Engine {
            path: path.to_path_buf(),
            source,
        };
        let dev = FileDevice::open(path, OpenMode::default()).map_err(engine)?;
        let fs = Filesystem::open(dev).map_err(engine)?;
        Ok(ImageFs {
            fs,
            path: path.to_path_buf(),
            order: DirOrder::Readdir,
            start: b"/".to_vec(),
        })
    }

    /// Reads the filesystem on `dev` (an offline run's own device, shared
    /// with its writer), `path` naming it in messages.
    ///
    /// # Errors
    /// [`Error::Engine`] when it holds no usable ext2/3/4 filesystem.
    pub fn from_device(dev: Arc<dyn BlockDevice>, path: &Path) -> Result<Self> {
        let fs = Filesystem::open(dev).map_err(|source| Error::Engine {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(ImageFs {
            fs,
            path: path.to_path_buf(),
            order: DirOrder::Readdir,
            start: b"/".to_vec(),
        })
    }

    /// Lists directories in `order` instead of readdir's.
    pub fn with_order(mut self, order: DirOrder) -> Self {
        self.order = order;
        self
    }

    /// Starts walks at `dir` (an absolute path inside the filesystem)
    /// instead of the root.
    ///
    /// # Errors
    /// [`Error::Engine`] when `dir` does not exist.
    pub fn with_start(mut self, dir: &str) -> Result<Self> {
        self.fs.resolve(dir).map_err(|e| self.engine(e))?;
        let trimmed = dir.trim_end_matches('/');
        self.start = if trimmed.is_empty() {
            b"/".to_vec()
        } else {
            trimmed.as_bytes().to_vec()
        };
        Ok(self)
    }

    /// The inode walks start at.
    ///
    /// # Errors
    /// [`Error::Engine`] when it cannot be looked up.
    pub fn start_inode(&self) -> Result<u32> {
        self.fs
            .resolve(&String::from_utf8_lossy(&self.start))
            .map(|i| i.ino.0)
            .map_err(|e| self.engine(e))
    }

    /// The filesystem.
    pub fn fs(&self) -> &Filesystem {
        &self.fs
    }

    fn engine(&self, source: ext4r::Error) -> Error {
        Error::Engine {
            path: self.path.clone(),
            source,
        }
    }

    fn entry(&self, path: Vec<u8>, info: &InodeInfo) -> Entry {
        let m = self.fs.metadata(info);
        Entry {
            path,
            kind: m.kind,
            size: m.size,
            sectors: m.sectors,
            uid: m.uid,
            ino: u64::from(m.ino),
            dev: 0,
            mtime_ns: i128::from(m.mtime.secs) * 1_000_000_000 + i128::from(m.mtime.nsecs),
        }
    }

    fn walk_dir(
        &self,
        dir: &InodeInfo,
        path: &[u8],
        seen: &mut HashSet<u32>,
        visit: &mut dyn FnMut(&Entry) -> Walk,
    ) -> Walk {
        if !seen.insert(dir.ino.0) {
            return Walk::Continue;
        }
        let Ok(entries) = self.fs.read_dir(dir) else {
            return Walk::Continue;
        };
        let mut entries = self.readdir_order(dir, entries);
        match self.order {
            DirOrder::Readdir => {}
            DirOrder::Name => entries.sort_by(|a, b| a.name.cmp(&b.name)),
            DirOrder::Inode => entries.sort_by_key(|e| e.ino.0),
        }
        for de in entries {
            if de.is_dot() {
                continue;
            }
            let Ok(info) = self.fs.inode(de.ino) else {
                continue;
            };
            let e = self.entry(join(path, &de.name), &info);
            if visit(&e) == Walk::Stop {
                return Walk::Stop;
            }
            if e.kind == FileKind::Directory
                && self.walk_dir(&info, &e.path, seen, visit) == Walk::Stop
            {
                return Walk::Stop;
            }
        }
        Walk::Continue
    }

    /// The entries of `dir` in the order the kernel's readdir gives them.
    pub fn readdir_order(
        &self,
        dir: &InodeInfo,
        mut entries: Vec<DirEntryInfo>,
    ) -> Vec<DirEntryInfo> {
        let sb = self.fs.superblock();
        let flags = dir.inode.flags();
        let bs = u64::from(self.fs.block_size());
        let hashed = sb.has_compat(Compat::DIR_INDEX)
            && (flags.contains(InodeFlags::INDEX)
                || dir.inode.size() / bs == 1
                || flags.contains(InodeFlags::INLINE_DATA));
        if !hashed || flags.intersects(InodeFlags::ENCRYPT | InodeFlags::CASEFOLD) {
            return entries;
        }
        let mut stored = sb.s_def_hash_version;
        if flags.contains(InodeFlags::INDEX) {
            if let Some(v) = self.root_hash_version(dir) {
                stored = v;
            }
        }
        let version = effective_hash_version(stored, sb.s_flags.get() & FLAGS_UNSIGNED_HASH != 0);
        let seed = sb.hash_seed();
        // An htree lists "." and ".." first (hashes 0 and 2); the rest by
        // (major, minor) hash. A stable sort keeps equal hashes in disk order.
        entries.sort_by_cached_key(|e| match e.name.as_slice() {
            b"." => (0, 0, 0),
            b".." => (0, 2, 0),
            name => match dx_hash(version, name, &seed) {
                Ok(h) => (1, h.major, h.minor),
                Err(_) => (2, 0, 0),
            },
        });
        entries
    }

    fn root_hash_version(&self, dir: &InodeInfo) -> Option<u8> {
        let runs = self.fs.runs(dir).ok()?;
        let first = runs.first().filter(|r| r.logical == 0 && !r.unwritten)?;
        let mut block = vec![0u8; self.fs.block_size() as usize];
        self.fs
            .device()
            .read_at(&mut block, first.physical * u64::from(self.fs.block_size()))
            .ok()?;
        parse_dx_root(&block).ok().map(|r| r.root.info.hash_version)
    }
}

impl Source for ImageFs {
    fn walk(&self, visit: &mut dyn FnMut(&Entry) -> Walk) -> Result<()> {
        let root = if self.start == b"/" {
            self.fs.inode(InodeNr(ext4r_format::inode::ino::ROOT))
        } else {
            self.fs.resolve(&String::from_utf8_lossy(&self.start))
        }
        .map_err(|e| self.engine(e))?;
        let e = self.entry(self.start.clone(), &root);
        if visit(&e) == Walk::Stop {
            return Ok(());
        }
        if e.kind != FileKind::Directory {
            return Ok(());
        }
        let mut seen = HashSet::new();
        let prefix: &[u8] = if self.start == b"/" { b"" } else { &self.start };
        self.walk_dir(&root, prefix, &mut seen, visit);
        Ok(())
    }

    fn extents(&self, entry: &Entry) -> Result<FileExtents> {
        let ino = u32::try_from(entry.ino)
            .map_err(|_| Error::InvalidArgument(format!("inode {} out of range", entry.ino)))?;
        let info = self.fs.inode(InodeNr(ino)).map_err(|e| self.engine(e))?;
        let runs = self.fs.runs(&info).map_err(|e| self.engine(e))?;
        let path = PathBuf::from(entry.display());
        FileExtents::new(&path, runs.into_iter().map(Extent::from).collect())
    }

    fn free_space(&self) -> Result<FreeSpace> {
        FreeSpace::from_bitmaps(&self.fs).map_err(|e| self.engine(e))
    }

    fn best_rule(&self) -> BestRule {
        BestRule::from_superblock(self.fs.superblock())
    }

    fn block_size(&self) -> u32 {
        self.fs.block_size()
    }
}
