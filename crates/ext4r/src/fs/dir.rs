//! Directories (linear, htree and inline), path lookup and symlinks.

use ext4r_format::dir::{ft, DirBlockIter};
use ext4r_format::inode::ino;
use ext4r_format::inode::{mode, InodeFlags, I_BLOCK_SIZE};
use ext4r_format::{FormatError, InodeNr};

use super::inode::InodeInfo;
use super::Filesystem;
use crate::error::{Error, Result};

/// The type of a file, from its mode or a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileKind {
    /// Regular file.
    Regular,
    /// Directory.
    Directory,
    /// Symbolic link.
    Symlink,
    /// Character device.
    CharDevice,
    /// Block device.
    BlockDevice,
    /// Named pipe.
    Fifo,
    /// Unix socket.
    Socket,
    /// Not recorded or not valid.
    Unknown,
}

impl FileKind {
    /// The kind given by an `i_mode`.
    pub fn from_mode(m: u16) -> Self {
        match m & mode::S_IFMT {
            mode::S_IFREG => FileKind::Regular,
            mode::S_IFDIR => FileKind::Directory,
            mode::S_IFLNK => FileKind::Symlink,
            mode::S_IFCHR => FileKind::CharDevice,
            mode::S_IFBLK => FileKind::BlockDevice,
            mode::S_IFIFO => FileKind::Fifo,
            mode::S_IFSOCK => FileKind::Socket,
            _ => FileKind::Unknown,
        }
    }

    /// The kind given by a directory entry's file type byte.
    pub fn from_dirent(t: u8) -> Self {
        match t {
            ft::REG_FILE => FileKind::Regular,
            ft::DIR => FileKind::Directory,
            ft::SYMLINK => FileKind::Symlink,
            ft::CHRDEV => FileKind::CharDevice,
            ft::BLKDEV => FileKind::BlockDevice,
            ft::FIFO => FileKind::Fifo,
            ft::SOCK => FileKind::Socket,
            _ => FileKind::Unknown,
        }
    }

    /// The file type byte a directory entry records for this kind
    /// (`ft::UNKNOWN` for `Unknown`).
    pub fn dirent_type(self) -> u8 {
        match self {
            FileKind::Regular => ft::REG_FILE,
            FileKind::Directory => ft::DIR,
            FileKind::Symlink => ft::SYMLINK,
            FileKind::CharDevice => ft::CHRDEV,
            FileKind::BlockDevice => ft::BLKDEV,
            FileKind::Fifo => ft::FIFO,
            FileKind::Socket => ft::SOCK,
            FileKind::Unknown => ft::UNKNOWN,
        }
    }

    /// The letter `ls -l` shows.
    pub fn letter(self) -> char {
        match self {
            FileKind::Regular => '-',
            FileKind::Directory => 'd',
            FileKind::Symlink => 'l',
            FileKind::CharDevice => 'c',
            FileKind::BlockDevice => 'b',
            FileKind::Fifo => 'p',
            FileKind::Socket => 's',
            FileKind::Unknown => '?',
        }
    }
}

/// A directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntryInfo {
    /// The inode it names.
    pub ino: InodeNr,
    /// The name bytes.
    pub name: Vec<u8>,
    /// The type recorded in the entry (`Unknown` without the filetype
    /// feature).
    pub kind: FileKind,
}

impl DirEntryInfo {
    /// The name as text, invalid UTF-8 replaced.
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// Whether this is `.` or `..`.
    pub fn is_dot(&self) -> bool {
        self.name == b"." || self.name == b".."
    }
}

/// Symlinks followed in one lookup before giving up (the kernel's
/// `MAXSYMLINKS`, which also counts the whole lookup).
const MAX_SYMLINKS: u32 = 40;
/// Longest symlink target read (`PATH_MAX`).
const MAX_TARGET: u64 = 4096;

impl Filesystem {
    /// The entries of a directory in on-disk order, `.` and `..` included
    /// (for an inline directory they are made up from the stored parent, as
    /// the kernel's readdir does). Deleted records and htree index blocks
    /// (which look like one empty record) yield nothing.
    ///
    /// # Errors
    /// [`Error::NotADirectory`] for another kind of inode; [`Error::Corrupt`]
    /// naming the inode, block and offset of a malformed entry.
    pub fn read_dir(&self, dir: &InodeInfo) -> Result<Vec<DirEntryInfo>> {
        if !dir.inode.is_dir() {
            return Err(Error::NotADirectory(format!("inode {}", dir.ino.0)));
        }
        let mut out = Vec::new();
        let bs = self.block_size();
        if dir.inode.flags().contains(InodeFlags::INLINE_DATA) {
            let data = self.inline_data(dir)?;
            let place = format!("inode {}, inline directory", dir.ino.0);
            let parent = ext4r_format::dir::inline_dir_parent(&data).ok_or_else(|| {
                Error::corrupt(
                    &place,
                    FormatError::invalid("inline directory", "too short"),
                )
            })?;
            out.push(dot(dir.ino, b"."));
            out.push(dot(parent, b".."));
            // The entries in i_block after the parent, then the xattr part.
            let split = data.len().min(I_BLOCK_SIZE);
            for part in [&data[4..split], &data[split..]] {
                self.parse_entries(part, bs, &place, &mut out)?;
            }
            return Ok(out);
        }
        let runs = self.runs(dir)?;
        let size_blocks = dir.inode.size().div_ceil(u64::from(bs));
        // Entries are collected, so a block mapped at many logical offsets
        // (extents overlapping on disk) would multiply them without bound:
        // a directory block belongs to one place in one directory.
        let mut seen = std::collections::HashSet::new();
        let mut buf = Vec::new();
        let kind = ext4r_txn::csum::BlockKind::Dir {
            ino: dir.ino.0,
            generation: dir.inode.generation(),
        };
        for r in runs.iter().filter(|r| !r.unwritten) {
            // Blocks of a run in one read (up to 1 MiB at a time).
            let n = r.len.min(size_blocks.saturating_sub(r.logical));
            let per_read = (1u64 << 20) / u64::from(bs);
            let mut k = 0;
            while k < n {
                let m = per_read.min(n - k);
                let first = r.physical + k;
                let place = format!("inode {}, directory block {first}", dir.ino.0);
                buf.resize((m * u64::from(bs)) as usize, 0);
                self.read_blocks(first, &mut buf, &place)?;
                for (j, block) in buf.chunks(bs as usize).enumerate() {
                    let nr = first + j as u64;
                    let place = format!("inode {}, directory block {nr}", dir.ino.0);
                    if !seen.insert(nr) {
                        return Err(Error::corrupt(
                            place,
                            FormatError::invalid("directory", "block mapped twice"),
                        ));
                    }
                    if self.verify() && !self.checksums.block_ok(kind, nr, block) {
                        return Err(Error::corrupt(
                            place,
                            FormatError::invalid("directory block", "checksum does not match"),
                        ));
                    }
                    self.parse_entries(block, bs, &place, &mut out)?;
                }
                k += m;
            }
        }
        Ok(out)
    }

    fn parse_entries(
        &self,
        buf: &[u8],
        bs: u32,
        place: &str,
        out: &mut Vec<DirEntryInfo>,
    ) -> Result<()> {
        let max_ino = self.sb.s_inodes_count.get();
        for e in DirBlockIter::with_block_size(buf, bs) {
            let e = e.map_err(|e| Error::corrupt(place, e.into()))?;
            if e.inode.0 == 0 {
                continue;
            }
            if e.inode.0 > max_ino {
                return Err(Error::corrupt(
                    format!("{place}, offset {}", e.offset),
                    FormatError::invalid("directory entry", format!("inode {}", e.inode.0)),
                ));
            }
            out.push(DirEntryInfo {
                ino: e.inode,
                name: e.name.to_vec(),
                kind: FileKind::from_dirent(e.file_type),
            });
        }
        Ok(())
    }

    /// Finds `name` in a directory.
    ///
    /// # Errors
    /// As [`Filesystem::read_dir`].
    pub fn lookup(&self, dir: &InodeInfo, name: &[u8]) -> Result<Option<InodeNr>> {
        Ok(self
            .read_dir(dir)?
            .into_iter()
            .find(|e| e.name == name)
            .map(|e| e.ino))
    }

    /// Resolves an absolute path (relative paths start at the root too),
    /// following symlinks in every component but the last.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::NotADirectory`], or an error from
    /// reading the directories on the way.
    pub fn resolve(&self, path: &str) -> Result<InodeInfo> {
        let mut links = 0;
        self.resolve_in(path, InodeNr(ino::ROOT), &mut links)
    }

    /// Resolves `path` from directory `start` (from the root when it is
    /// absolute). `..` follows the stored entry, as the kernel does after
    /// a symlink. `links` counts the symlinks followed in the whole lookup,
    /// nested or not: a per-depth limit would let targets of many
    /// components, each a symlink with such a target, cost 2000^40 lookups.
    fn resolve_in(&self, path: &str, start: InodeNr, links: &mut u32) -> Result<InodeInfo> {
        let comps: Vec<&str> = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        let mut cur = self.inode(if path.starts_with('/') {
            InodeNr(ino::ROOT)
        } else {
            start
        })?;
        for (i, c) in comps.iter().enumerate() {
            if !cur.inode.is_dir() {
                return Err(Error::NotADirectory(comps[..i].join("/")));
            }
            let ino = self
                .lookup(&cur, c.as_bytes())?
                .ok_or_else(|| Error::NotFound(comps[..=i].join("/")))?;
            let next = self.inode(ino)?;
            if next.inode.is_symlink() && i + 1 < comps.len() {
                *links += 1;
                if *links > MAX_SYMLINKS {
                    return Err(Error::InvalidArgument(format!(
                        "{}: too many levels of symbolic links",
                        comps[..=i].join("/")
                    )));
                }
                let target = String::from_utf8_lossy(&self.read_link(&next)?).into_owned();
                cur = self.resolve_in(&target, cur.ino, links)?;
                continue;
            }
            cur = next;
        }
        Ok(cur)
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
    /// [`Error::InvalidArgument`] for something that is not a symlink;
    /// [`Error::Corrupt`] when the target cannot be read.
    pub fn read_link(&self, info: &InodeInfo) -> Result<Vec<u8>> {
        if !info.inode.is_symlink() {
            return Err(Error::InvalidArgument(format!(
                "inode {} is not a symbolic link",
                info.ino.0
            )));
        }
        let size = info.inode.size();
        let place = format!("inode {}, symlink", info.ino.0);
        if size > MAX_TARGET {
            return Err(Error::corrupt(
                place,
                FormatError::invalid("symlink", format!("target length {size}")),
            ));
        }
        if self.is_fast_symlink(info) {
            return Ok(info.inode.i_block[..size as usize].to_vec());
        }
        let mut buf = vec![0u8; size as usize];
        std::io::Read::read_exact(&mut self.open_file(info)?, &mut buf).map_err(|e| {
            Error::corrupt(
                &place,
                FormatError::invalid("symlink", crate::error::chain(&e)),
            )
        })?;
        Ok(buf)
    }

    /// A fast symlink keeps its target in `i_block`: no extent or inline
    /// flag, and no data blocks (an xattr block may be counted in
    /// `i_blocks`, as the kernel's `ext4_inode_is_fast_symlink` allows).
    pub(crate) fn is_fast_symlink(&self, info: &InodeInfo) -> bool {
        let flags = info.inode.flags();
        if !info.inode.is_symlink()
            || flags.intersects(InodeFlags::EXTENTS | InodeFlags::INLINE_DATA)
        {
            return false;
        }
        let huge = self
            .sb
            .has_ro_compat(ext4r_format::features::RoCompat::HUGE_FILE);
        let sectors = info.inode.blocks_count(huge, self.block_size());
        let ea = if info.inode.file_acl(self.is_64bit()).0 != 0 {
            u64::from(self.block_size() / 512)
        } else {
            0
        };
        sectors.saturating_sub(ea) == 0 && info.inode.size() < I_BLOCK_SIZE as u64
    }
}

fn dot(ino: InodeNr, name: &[u8]) -> DirEntryInfo {
    DirEntryInfo {
        ino,
        name: name.to_vec(),
        kind: FileKind::Directory,
    }
}
