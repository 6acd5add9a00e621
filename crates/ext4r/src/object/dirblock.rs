//! Directory blocks as stored: records, entry types, the block map, and
//! verified reads of a directory's blocks in order.

use ext4r_format::num;
use std::collections::HashSet;

use ext4r_format::dir::{ft, DirBlockIter};
use ext4r_format::inode::{mode, Inode};
use ext4r_format::{FormatError, InodeNr};
use ext4r_txn::csum::BlockKind;
use ext4r_txn::error::Location;
use ext4r_txn::map::Run;

use super::source::{meta_block, runs, verified, InodeInfo, Source};
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

/// One stored entry: the inode it names, its name, its file type byte as
/// recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub ino: u32,
    pub name: Vec<u8>,
    pub ftype: u8,
}

impl From<Entry> for DirEntryInfo {
    fn from(e: Entry) -> Self {
        DirEntryInfo {
            ino: InodeNr(e.ino),
            kind: FileKind::from_dirent(e.ftype),
            name: e.name,
        }
    }
}

/// The checksum kind of directory `info`'s blocks (a leaf or an htree
/// node, told apart by its contents).
pub(crate) fn kind_of(ino: u32, inode: &Inode) -> BlockKind {
    BlockKind::Dir {
        ino,
        generation: inode.generation(),
    }
}

/// Block `nr` of directory `dir` (record `inode`), verified.
///
/// # Errors
/// As [`meta_block`].
pub(crate) fn block(
    src: &(impl Source + ?Sized),
    dir: u32,
    inode: &Inode,
    nr: u64,
) -> Result<Vec<u8>> {
    meta_block(src, nr, kind_of(dir, inode))
}

/// A malformed directory block of `dir`.
pub(crate) fn untiled(dir: u32, nr: u64) -> Error {
    Error::corrupt(
        Location::inode(dir).of("directory block").at_block(nr),
        FormatError::invalid("directory block", "entries do not tile the block"),
    )
}

/// The used records of a directory region (a block, or a part of inline
/// data) appended to `out`, each checked: tiling, and an inode number
/// at most `max_ino`.
///
/// # Errors
/// [`Error::Corrupt`] at `place` and the record's offset.
pub(crate) fn parse_records(
    buf: &[u8],
    bs: u32,
    place: &dyn Fn() -> Location,
    max_ino: u32,
    out: &mut Vec<Entry>,
) -> Result<()> {
    for e in DirBlockIter::with_block_size(buf, bs) {
        let e = e.map_err(|e| Error::corrupt(place(), e.into()))?;
        if e.inode.0 == 0 {
            continue;
        }
        if e.inode.0 > max_ino {
            return Err(Error::corrupt(
                place().at_offset(e.offset as u64),
                FormatError::invalid("directory entry", format!("inode {}", e.inode.0)),
            ));
        }
        out.push(Entry {
            ino: e.inode.0,
            name: e.name.to_vec(),
            ftype: e.file_type,
        });
    }
    Ok(())
}

/// A directory's logical-to-physical map, kept as the runs its extent
/// tree or block map holds: one lookup is a binary search, and reading it
/// costs one walk of the map, not a record per block.
pub(crate) struct DirMap(Vec<Run>);

impl DirMap {
    /// The map of directory `info` (not an inline one).
    ///
    /// # Errors
    /// As [`runs`].
    pub(crate) fn read(src: &(impl Source + ?Sized), info: &InodeInfo) -> Result<Self> {
        let mut r = runs(src, info)?;
        r.sort_by_key(|r| r.logical);
        Ok(Self(r))
    }

    /// The physical block of logical block `logical`.
    pub(crate) fn get(&self, logical: u64) -> Option<u64> {
        let i = self.0.partition_point(|r| r.logical <= logical);
        let r = self.0.get(i.checked_sub(1)?)?;
        // Runs come from disk: compare offsets, never `logical + len`.
        let off = logical - r.logical;
        (off < r.len).then(|| r.physical.checked_add(off)).flatten()
    }
}

/// Calls `f` with each block of directory `dir` in logical order (up to
/// its size; unwritten extents skipped), each verified, until it answers.
/// Blocks of a run are read together, up to 1 MiB at a time; a run of one
/// block, or one the source holds itself (a transaction's own changes:
/// every directory a populate writes into), is taken block by block from
/// the source, without a device read or a zeroed buffer: a lookup while
/// populating reads a directory per name.
///
/// # Errors
/// [`Error::Corrupt`] for a block mapped twice or failing its checksum,
/// and what `f` returns.
pub(crate) fn for_each_block<T>(
    src: &(impl Source + ?Sized),
    dir: &InodeInfo,
    mut f: impl FnMut(u64, &[u8]) -> Result<Option<T>>,
) -> Result<Option<T>> {
    let bs = src.block_size();
    let size_blocks = dir.inode.size().div_ceil(u64::from(bs));
    let kind = kind_of(dir.ino.0, &dir.inode);
    let place = |nr: u64| {
        Location::inode(dir.ino.0)
            .of("directory block")
            .at_block(nr)
    };
    // A block mapped at many logical offsets (extents overlapping on
    // disk) would be visited without bound: a directory block belongs to
    // one place in one directory.
    // Blocks of one run are distinct: only a directory of several runs
    // needs the set.
    let mut seen = HashSet::new();
    let per_read = ((1u64 << 20) / u64::from(bs)).max(1);
    let runs = runs(src, dir)?;
    let several = runs.iter().filter(|r| !r.unwritten).nth(1).is_some();
    let mut visit = |nr: u64, b: &[u8]| -> Result<Option<T>> {
        if several && !seen.insert(nr) {
            return Err(Error::corrupt(
                place(nr),
                FormatError::invalid("directory", "block mapped twice"),
            ));
        }
        verified(src, kind, nr, b)?;
        f(nr, b)
    };
    let mut buf = Vec::new();
    for r in runs.iter().filter(|r| !r.unwritten) {
        let n = r.len.min(size_blocks.saturating_sub(r.logical));
        let mut k = 0;
        while k < n {
            let m = per_read.min(n - k);
            let first = r.physical + k;
            k += m;
            // The bounds error names the directory and block; the name is
            // built only then.
            if src.check_blocks(first, m, "").is_err() {
                src.check_blocks(first, m, &place(first).to_string())?;
            }
            if m == 1 || (first..first + m).all(|nr| src.trusted(nr)) {
                for nr in first..first + m {
                    let b = src.read_block(nr, "directory block")?;
                    if let Some(v) = visit(nr, &b)? {
                        return Ok(Some(v));
                    }
                }
                continue;
            }
            buf.resize(num::index(m * u64::from(bs)), 0);
            src.read_run(first, &mut buf, &|| place(first).to_string())?;
            for (j, b) in buf.chunks(bs as usize).enumerate() {
                if let Some(v) = visit(first + j as u64, b)? {
                    return Ok(Some(v));
                }
            }
        }
    }
    Ok(None)
}

/// Block 0 of a block-mapped directory: its number and contents.
///
/// # Errors
/// [`Error::Corrupt`] when it is not mapped; as [`meta_block`].
pub(crate) fn block0(src: &(impl Source + ?Sized), dir: &InodeInfo) -> Result<(u64, Vec<u8>)> {
    let Some(nr) = DirMap::read(src, dir)?.get(0) else {
        return Err(Error::corrupt(
            Location::inode(dir.ino.0),
            FormatError::invalid("directory", "no block 0"),
        ));
    };
    Ok((nr, block(src, dir.ino.0, &dir.inode, nr)?))
}

/// Block 0 of `dir` lacks `.` and `..`.
pub(crate) fn no_dots(dir: u32, nr: u64) -> Error {
    Error::corrupt(
        Location::inode(dir).of("directory block").at_block(nr),
        FormatError::invalid("directory", "block 0 does not open with '.' and '..'"),
    )
}
