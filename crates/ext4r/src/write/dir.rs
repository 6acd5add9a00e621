//! Directories: finding a name, adding and removing entries, growing a
//! directory by a block, repointing `..`. Linear directories are searched
//! block by block; indexed ones (htree) through their index (see
//! [`super::htree`]).

use super::{htree, Shape, WriteFs, ROOT_INO};
use crate::error::{Error, Result};
use ext4r_format::dir::leaf::{self, Rec};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_txn::csum::BlockKind;
use ext4r_txn::map;
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;

/// Symlinks followed in one path at most (the kernel's MAXSYMLINKS).
const MAX_SYMLINKS: usize = 40;

/// The directory's blocks in logical order, as (logical, physical).
pub(crate) fn blocks(t: &Transaction<Volume>, ino: u32, inode: &Inode) -> Result<Vec<(u64, u64)>> {
    if inode.flags().contains(InodeFlags::INLINE_DATA) {
        return Err(Error::Unsupported(format!(
            "inode {ino}: changing inline-data directories"
        )));
    }
    let runs = map::runs(t, ino, inode, false)?;
    Ok(runs
        .iter()
        .flat_map(|r| (0..r.len).map(move |k| (r.logical + k, r.physical + k)))
        .collect())
}

/// A directory's logical-to-physical map, kept as the runs its extent
/// tree or block map holds: one lookup is a binary search, and reading it
/// costs one walk of the map, not a record per block.
pub(crate) struct DirMap(Vec<ext4r_txn::map::Run>);

impl DirMap {
    pub(crate) fn read(t: &Transaction<Volume>, ino: u32, inode: &Inode) -> Result<Self> {
        if inode.flags().contains(InodeFlags::INLINE_DATA) {
            return Err(Error::Unsupported(format!(
                "inode {ino}: changing inline-data directories"
            )));
        }
        let mut runs = map::runs(t, ino, inode, false)?;
        runs.sort_by_key(|r| r.logical);
        Ok(Self(runs))
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

pub(crate) fn dir_inode(t: &Transaction<Volume>, ino: u32) -> Result<Inode> {
    let rec = t.read_inode_checked(ino)?;
    let i = Inode::parse(&rec).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
    if !i.is_dir() {
        return Err(Error::NotADirectory(format!("inode {ino}")));
    }
    if i.links_count() == 0 {
        return Err(Error::NotFound(format!("inode {ino} (deleted)")));
    }
    Ok(i)
}

/// Block `nr` of directory `dir` (record `inode`), its checksum verified
/// where the transaction verifies (a leaf's tail or an htree node's).
pub(crate) fn dir_block(
    t: &Transaction<Volume>,
    dir: u32,
    inode: &Inode,
    nr: u64,
) -> Result<Vec<u8>> {
    t.read_block_checked(
        nr,
        BlockKind::Dir {
            ino: dir,
            generation: inode.generation(),
        },
    )
}

/// The records of a directory block, or a corruption error naming it.
pub(crate) fn block_records(b: &[u8], dir: u32, nr: u64) -> Result<Vec<Rec>> {
    leaf::records(b).ok_or_else(|| {
        Error::corrupt(
            ext4r_txn::error::Location::inode(dir)
                .of("directory block")
                .at_block(nr),
            ext4r_format::FormatError::invalid("directory block", "entries do not tile the block"),
        )
    })
}

/// `name` in one leaf block of directory `dir` (block `nr`), or a
/// corruption error naming it.
pub(crate) fn find_in(b: &[u8], name: &[u8], dir: u32, nr: u64) -> Result<Option<(u32, u8)>> {
    leaf::find(b, name).ok_or_else(|| {
        Error::corrupt(
            format!("inode {dir}, directory block {nr}"),
            ext4r_format::FormatError::invalid("directory block", "entries do not tile the block"),
        )
    })
}

/// `name`'s inode and file type in directory `dir`.
pub(crate) fn lookup(
    t: &Transaction<Volume>,
    sh: &Shape,
    dir: u32,
    name: &[u8],
) -> Result<Option<(u32, u8)>> {
    let inode = dir_inode(t, dir)?;
    names_readable(dir, &inode)?;
    if name == b"." || name == b".." {
        return dot_entry(t, sh, dir, &inode, name).map(Some);
    }
    if inode.flags().contains(InodeFlags::INLINE_DATA) {
        let (_, recs) = super::inline::inline_dir(t, dir, &inode)?;
        return Ok(recs
            .into_iter()
            .find(|r| r.name == name)
            .map(|r| (r.ino, r.ftype)));
    }
    if let Some(found) = htree::lookup(t, sh, dir, &inode, name)? {
        return Ok(found);
    }
    for (_, nr) in blocks(t, dir, &inode)? {
        let b = dir_block(t, dir, &inode, nr)?;
        if htree::is_index_block(&b, sh) {
            continue;
        }
        if let Some(found) = find_in(&b, name, dir, nr)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// `.` or `..` of directory `dir`, read where the kernel reads them and
/// nowhere else: the first two records of block 0 (its
/// `__ext4_find_entry` searches only block 0 for these two names, linear
/// or indexed: in an htree they sit in the root, and hashing `..` would
/// lead to a leaf that does not hold it), or for an inline directory the
/// inode itself and the parent stored in the first 4 bytes of `i_block`.
fn dot_entry(
    t: &Transaction<Volume>,
    sh: &Shape,
    dir: u32,
    inode: &Inode,
    name: &[u8],
) -> Result<(u32, u8)> {
    if inode.flags().contains(InodeFlags::INLINE_DATA) {
        let ft = super::node::ftype(ext4r_format::inode::mode::S_IFDIR, sh);
        let ino = if name == b"." {
            dir
        } else {
            inline_parent(inode)
        };
        return Ok((ino, ft));
    }
    let (nr, b) = block0(t, dir, inode)?;
    let [dot, dotdot] = leaf::dots(&b).ok_or_else(|| no_dots(dir, nr))?;
    let r = if name == b"." { dot } else { dotdot };
    Ok((r.ino, r.ftype))
}

/// The parent of directory `dir` as its `..` records it, for every form of
/// directory (see [`dot_entry`]): what the rename rules walk up.
///
/// # Errors
/// [`Error::Corrupt`] when block 0 does not open with `.` and `..`,
/// [`Error::NotADirectory`], read errors.
pub(crate) fn parent(t: &Transaction<Volume>, sh: &Shape, dir: u32) -> Result<u32> {
    let inode = dir_inode(t, dir)?;
    dot_entry(t, sh, dir, &inode, b"..").map(|(ino, _)| ino)
}

/// An inline directory's parent: the first 4 bytes of `i_block`
/// (`EXT4_INLINE_DOTDOT_SIZE`), where its `..` would be.
fn inline_parent(inode: &Inode) -> u32 {
    ext4r_format::dir::inline_dir_parent(&inode.i_block).map_or(0, |p| p.0)
}

/// Block 0 of a block-mapped directory: its number and contents.
fn block0(t: &Transaction<Volume>, dir: u32, inode: &Inode) -> Result<(u64, Vec<u8>)> {
    let runs = map::runs(t, dir, inode, false)?;
    let Some(r) = runs.iter().find(|r| r.logical == 0 && r.len > 0) else {
        return Err(Error::corrupt(
            format!("inode {dir}"),
            ext4r_format::FormatError::invalid("directory", "no block 0"),
        ));
    };
    Ok((r.physical, dir_block(t, dir, inode, r.physical)?))
}

fn no_dots(dir: u32, nr: u64) -> Error {
    Error::corrupt(
        ext4r_txn::error::Location::inode(dir)
            .of("directory block")
            .at_block(nr),
        ext4r_format::FormatError::invalid("directory", "block 0 does not open with '.' and '..'"),
    )
}

/// Refuses a directory whose names this layer cannot match or write: an
/// encrypted one (its names are ciphertext, the key is the kernel's) and a
/// casefolded one (names match without case under Unicode folding, its
/// htree hashes the folded name). Every name operation goes through
/// [`lookup`], so each of them is refused there.
pub(crate) fn names_readable(dir: u32, inode: &Inode) -> Result<()> {
    if inode.flags().contains(InodeFlags::ENCRYPT) {
        return Err(Error::Unsupported(format!(
            "directory inode {dir} is encrypted (feature encrypt): its names cannot be read or written without its key"
        )));
    }
    if inode.flags().contains(InodeFlags::CASEFOLD) {
        return Err(Error::Unsupported(format!(
            "directory inode {dir} is casefolded (feature casefold): names in it are not changed here"
        )));
    }
    Ok(())
}

/// Follows an absolute path from the root.
pub(crate) fn resolve(t: &Transaction<Volume>, sh: &Shape, path: &[u8]) -> Result<u32> {
    let mut todo: Vec<Vec<u8>> = path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .rev()
        .map(<[u8]>::to_vec)
        .collect();
    let mut cur = ROOT_INO;
    let mut stack = vec![ROOT_INO];
    let mut links = 0;
    while let Some(c) = todo.pop() {
        if c == b"." {
            continue;
        }
        if c == b".." {
            stack.pop();
            cur = *stack.last().unwrap_or(&ROOT_INO);
            if stack.is_empty() {
                stack.push(ROOT_INO);
            }
            continue;
        }
        let shown = String::from_utf8_lossy(&c).into_owned();
        let Some((ino, _)) = lookup(t, sh, cur, &c)? else {
            return Err(Error::NotFound(shown));
        };
        let rec = t.read_inode_checked(ino)?;
        let i = Inode::parse(&rec).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
        if i.is_symlink() && !todo.is_empty() {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(Error::InvalidArgument(format!(
                    "{}: too many symlinks",
                    String::from_utf8_lossy(path)
                )));
            }
            let target = super::file::read_all(t, sh, ino, &i)?;
            if target.first() == Some(&b'/') {
                cur = ROOT_INO;
                stack = vec![ROOT_INO];
            }
            for comp in target.split(|&b| b == b'/').filter(|c| !c.is_empty()).rev() {
                todo.push(comp.to_vec());
            }
            continue;
        }
        if !todo.is_empty() && !i.is_dir() {
            return Err(Error::NotADirectory(shown));
        }
        cur = ino;
        stack.push(ino);
    }
    Ok(cur)
}

/// A name a directory may hold.
pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty()
        || name.len() > 255
        || name.contains(&b'/')
        || name.contains(&0)
        || name == b"."
        || name == b".."
    {
        return Err(Error::InvalidName(
            String::from_utf8_lossy(name).into_owned(),
        ));
    }
    Ok(())
}

impl WriteFs {
    pub(crate) fn dir_kind(&self, dir: u32, i: &Inode) -> BlockKind {
        BlockKind::Dir {
            ino: dir,
            generation: i.generation(),
        }
    }

    /// Adds `name` -> `ino` to directory `dir` (the caller checked the
    /// name is new).
    pub(crate) fn dir_insert(&mut self, dir: u32, name: &[u8], ino: u32, ftype: u8) -> Result<()> {
        let sh = self.shape;
        let inode = dir_inode(&self.txn, dir)?;
        if inode.flags().contains(InodeFlags::INLINE_DATA) {
            let fitted =
                self.inline_dir_edit(dir, |r| leaf::insert(r, name, ino, ftype).then_some(()))?;
            if fitted.is_some() {
                return Ok(());
            }
            // Full: the directory moves out into a block.
            self.uninline(dir)?;
        }
        let inode = dir_inode(&self.txn, dir)?;
        if inode.flags().contains(InodeFlags::INDEX) && sh.dir_index {
            if htree::insert(self, dir, name, ino, ftype)? {
                return Ok(());
            }
            // The index cannot take it: the directory goes on linear.
            htree::unindex(self, dir)?;
        }
        let inode = dir_inode(&self.txn, dir)?;
        let kind = self.dir_kind(dir, &inode);
        let list = blocks(&self.txn, dir, &inode)?;
        for &(_, nr) in &list {
            let b = dir_block(&self.txn, dir, &inode, nr)?;
            let mut c = b.clone();
            if leaf::insert(&mut c, name, ino, ftype) {
                *self.txn.block_mut(nr, kind)? = c;
                return Ok(());
            }
        }
        // A one-block directory that is full becomes indexed, as the
        // kernel's make_indexed_dir does.
        if list.len() == 1 && sh.dir_index && !sh.casefold && !sh.encrypt {
            htree::make_indexed(self, dir)?;
            if htree::insert(self, dir, name, ino, ftype)? {
                return Ok(());
            }
            htree::unindex(self, dir)?;
        }
        let (_, nr) = self.dir_grow(dir)?;
        let mut b = self.txn.read_block(nr)?;
        if !leaf::insert(&mut b, name, ino, ftype) {
            return Err(Error::InvalidArgument(
                "a new directory block refused an entry".into(),
            ));
        }
        let inode = dir_inode(&self.txn, dir)?;
        let kind = self.dir_kind(dir, &inode);
        *self.txn.block_mut(nr, kind)? = b;
        Ok(())
    }

    /// Appends an empty block to directory `dir`: (logical, physical).
    pub(crate) fn dir_grow(&mut self, dir: u32) -> Result<(u64, u64)> {
        let sh = self.shape;
        let mut inode = dir_inode(&self.txn, dir)?;
        let mut runs = map::runs(&self.txn, dir, &inode, false)?;
        let logical = inode.size() / sh.bs as u64;
        let goal = runs
            .last()
            .map_or_else(|| self.goal_for(dir), |r| r.physical + r.len);
        let (nr, _) = self.alloc_data(goal, 1)?;
        runs.push(ext4r_txn::map::Run {
            logical,
            physical: nr,
            len: 1,
            unwritten: false,
        });
        let tree = map::store(&mut self.txn, dir, &mut inode, &runs, goal)?;
        inode.set_size((logical + 1) * sh.bs as u64);
        self.set_blocks(dir, &mut inode, &runs, tree)?;
        self.put_inode(dir, &inode)?;
        let b = leaf::build(sh.bs, &[], sh.csum)
            .ok_or_else(|| Error::InvalidArgument("empty directory block".into()))?;
        let kind = self.dir_kind(dir, &inode);
        self.txn.write_block(nr, kind, b)?;
        Ok((logical, nr))
    }

    /// Takes `name` out of directory `dir`; returns its inode.
    pub(crate) fn dir_remove(&mut self, dir: u32, name: &[u8]) -> Result<u32> {
        let inode = dir_inode(&self.txn, dir)?;
        if inode.flags().contains(InodeFlags::INLINE_DATA) {
            return self
                .inline_dir_edit(dir, |r| leaf::remove(r, name))?
                .ok_or_else(|| Error::NotFound(String::from_utf8_lossy(name).into_owned()));
        }
        let kind = self.dir_kind(dir, &inode);
        for nr in self.leaves_for(dir, &inode, name)? {
            let mut c = dir_block(&self.txn, dir, &inode, nr)?;
            if htree::is_index_block(&c, &self.shape) {
                continue;
            }
            if let Some(ino) = leaf::remove(&mut c, name) {
                *self.txn.block_mut(nr, kind)? = c;
                return Ok(ino);
            }
        }
        Err(Error::NotFound(String::from_utf8_lossy(name).into_owned()))
    }

    /// Points `name` in `dir` at `ino` (a rename over an existing name).
    pub(crate) fn dir_retarget(
        &mut self,
        dir: u32,
        name: &[u8],
        ino: u32,
        ftype: u8,
    ) -> Result<()> {
        let inode = dir_inode(&self.txn, dir)?;
        if inode.flags().contains(InodeFlags::INLINE_DATA) {
            return self
                .inline_dir_edit(dir, |r| leaf::retarget(r, name, ino, ftype).then_some(()))?
                .ok_or_else(|| Error::NotFound(String::from_utf8_lossy(name).into_owned()));
        }
        let kind = self.dir_kind(dir, &inode);
        for nr in self.leaves_for(dir, &inode, name)? {
            let mut c = dir_block(&self.txn, dir, &inode, nr)?;
            if htree::is_index_block(&c, &self.shape) {
                continue;
            }
            if leaf::retarget(&mut c, name, ino, ftype) {
                *self.txn.block_mut(nr, kind)? = c;
                return Ok(());
            }
        }
        Err(Error::NotFound(String::from_utf8_lossy(name).into_owned()))
    }

    /// The blocks (physical) of directory `dir` to search for `name`: in
    /// an htree directory the one leaf its index leads to (none when the
    /// index says the name is absent), otherwise every block in logical
    /// order (the caller skips index blocks). Removing or retargeting one name among tens of
    /// thousands then reads a few blocks, as the kernel's does, not the
    /// whole directory.
    fn leaves_for(&self, dir: u32, inode: &Inode, name: &[u8]) -> Result<Vec<u64>> {
        match htree::leaf_of(&self.txn, &self.shape, dir, inode, name)? {
            Some(Some((nr, _))) => return Ok(vec![nr]),
            Some(None) => return Ok(Vec::new()),
            None => {}
        }
        Ok(blocks(&self.txn, dir, inode)?
            .into_iter()
            .map(|(_, nr)| nr)
            .collect())
    }

    /// Whether directory `dir` holds nothing but `.` and `..`.
    pub(crate) fn dir_is_empty(&self, dir: u32) -> Result<bool> {
        let inode = dir_inode(&self.txn, dir)?;
        if inode.flags().contains(InodeFlags::INLINE_DATA) {
            let (_, recs) = super::inline::inline_dir(&self.txn, dir, &inode)?;
            return Ok(recs.is_empty());
        }
        for (_, nr) in blocks(&self.txn, dir, &inode)? {
            let b = dir_block(&self.txn, dir, &inode, nr)?;
            if htree::is_index_block(&b, &self.shape) {
                continue;
            }
            for r in block_records(&b, dir, nr)? {
                if r.ino != 0 && r.name != b"." && r.name != b".." {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Points directory `dir`'s `..` at `parent` (the record
    /// [`parent`] reads).
    pub(crate) fn dir_set_dotdot(&mut self, dir: u32, parent: u32) -> Result<()> {
        let inode = dir_inode(&self.txn, dir)?;
        if inode.flags().contains(InodeFlags::INLINE_DATA) {
            return self.inline_set_parent(dir, parent);
        }
        let kind = self.dir_kind(dir, &inode);
        let (nr, b) = block0(&self.txn, dir, &inode)?;
        let [_, dotdot] = leaf::dots(&b).ok_or_else(|| no_dots(dir, nr))?;
        let off = dotdot.off;
        self.txn.block_mut(nr, kind)?[off..off + 4].copy_from_slice(&parent.to_le_bytes());
        Ok(())
    }
}
