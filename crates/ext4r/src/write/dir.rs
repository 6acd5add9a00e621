//! Directories: finding a name, adding and removing entries, growing a
//! directory by a block, repointing `..`. Linear directories are searched
//! block by block; indexed ones (htree) through their index (see
//! [`super::htree`]).

use super::node::info_of;
use super::{htree, WriteFs, ROOT_INO};
use crate::error::{Error, Result};
use ext4r_format::dir::leaf::{self, Rec};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_txn::csum::BlockKind;
use ext4r_txn::map;
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;

use crate::object::{self, InodeInfo, Source};
use ext4r_format::InodeNr;

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

/// Directory `ino`, loaded and verified: a live directory.
pub(crate) fn dir_info(t: &Transaction<Volume>, ino: u32) -> Result<InodeInfo> {
    let info = Source::inode(t, InodeNr(ino))?;
    if !info.inode.is_dir() {
        return Err(Error::NotADirectory(format!("inode {ino}")));
    }
    if info.inode.links_count() == 0 {
        return Err(Error::NotFound(format!("inode {ino} (deleted)")));
    }
    Ok(info)
}

pub(crate) fn dir_inode(t: &Transaction<Volume>, ino: u32) -> Result<Inode> {
    dir_info(t, ino).map(|i| i.inode)
}

/// Block `nr` of directory `dir` (record `inode`), its checksum verified
/// where the transaction verifies (a leaf's tail or an htree node's).
pub(crate) fn dir_block(
    t: &Transaction<Volume>,
    dir: u32,
    inode: &Inode,
    nr: u64,
) -> Result<Vec<u8>> {
    object::dir::block(t, dir, inode, nr)
}

/// The records of a directory block, or a corruption error naming it.
pub(crate) fn block_records(b: &[u8], dir: u32, nr: u64) -> Result<Vec<Rec>> {
    leaf::records(b).ok_or_else(|| object::dir::untiled(dir, nr))
}

/// `name`'s inode and file type in directory `dir` (one whose names this
/// layer can match: see [`names_readable`]).
pub(crate) fn lookup(t: &Transaction<Volume>, dir: u32, name: &[u8]) -> Result<Option<(u32, u8)>> {
    let info = dir_info(t, dir)?;
    names_readable(&info)?;
    object::dir::lookup(t, &info, name)
}

/// The parent of directory `dir` as its `..` records it, for every form of
/// directory (see [`object::dir::dot_entry`]): what the rename rules walk
/// up.
///
/// # Errors
/// [`Error::Corrupt`] when block 0 does not open with `.` and `..`,
/// [`Error::NotADirectory`], read errors.
pub(crate) fn parent(t: &Transaction<Volume>, dir: u32) -> Result<u32> {
    let info = dir_info(t, dir)?;
    object::dir::dot_entry(t, &info, b"..").map(|(ino, _)| ino)
}

/// Refuses a directory whose names this layer cannot match or write: an
/// encrypted one (its names are ciphertext, the key is the kernel's) and a
/// casefolded one (names match without case under Unicode folding, its
/// htree hashes the folded name). Every name operation goes through
/// [`lookup`] or [`resolve`], so each of them is refused there.
pub(crate) fn names_readable(dir: &InodeInfo) -> Result<()> {
    let flags = dir.inode.flags();
    let ino = dir.ino.0;
    if flags.contains(InodeFlags::ENCRYPT) {
        return Err(Error::Unsupported(format!(
            "directory inode {ino} is encrypted (feature encrypt): its names cannot be read or written without its key"
        )));
    }
    if flags.contains(InodeFlags::CASEFOLD) {
        return Err(Error::Unsupported(format!(
            "directory inode {ino} is casefolded (feature casefold): names in it are not changed here"
        )));
    }
    Ok(())
}

/// Follows an absolute path from the root (see
/// [`object::path::resolve`]), refusing directories whose names cannot
/// be matched.
pub(crate) fn resolve(t: &Transaction<Volume>, path: &[u8]) -> Result<u32> {
    object::path::resolve(t, InodeNr(ROOT_INO), path, &names_readable).map(|i| i.ino.0)
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
            if object::htree::is_index_block(&c, self.shape.csum) {
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
            if object::htree::is_index_block(&c, self.shape.csum) {
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
        let info = info_of(&self.txn, dir, inode)?;
        match object::htree::leaf_of(&self.txn, &info, name)? {
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
            if object::htree::is_index_block(&b, self.shape.csum) {
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
        let info = info_of(&self.txn, dir, &inode)?;
        let (nr, b) = object::dir::block0(&self.txn, &info)?;
        let [_, dotdot] = leaf::dots(&b).ok_or_else(|| object::dir::no_dots(dir, nr))?;
        let off = dotdot.off;
        // dots() found a record header at `off`, so this cannot miss.
        leaf::set_inode_at(self.txn.block_mut(nr, kind)?, off, parent);
        Ok(())
    }
}
