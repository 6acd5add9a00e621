//! Indexed directories (htree): finding a name through the index, adding
//! one (a full leaf split in two by hash, the index growing a level or an
//! index block splitting when it must), turning a full one-block directory
//! into an indexed one, and, when an index cannot take more, turning it
//! back into a linear directory (always valid, e2fsck -fD re-indexes).
//!
//! The layout is the kernel's (`fs/ext4/namei.c`): block 0 is the root
//! (`.`, `..` over the rest of the block, `dx_root_info`, entries), index
//! entries carry the lowest hash of their child and its logical block, a
//! hash shared across a split is marked by bit 0 of the next entry.

use super::dir::{block_records, blocks, dir_inode};
use super::node::info_of;
use super::{Shape, WriteFs};
use crate::error::{Error, Result};
use crate::object::htree::{descend, read_index, Frame, Hashing, Index};
use ext4r_format::dir::leaf::{self, Rec};
use ext4r_format::htree::{
    dx_limit, effective_hash_version, parse_dx_node, write_dx_node, write_dx_root, DxEntry, DxRoot,
    DX_NODE_COUNT_OFFSET, DX_ROOT_COUNT_OFFSET,
};
use ext4r_format::inode::InodeFlags;
use ext4r_format::InodeNr;

/// Splits a leaf's records (with the new one) by hash: the two halves and
/// the first hash of the second, or `None` when every name hashes alike.
#[allow(clippy::type_complexity)]
fn split(
    hashing: &Hashing,
    version: u8,
    recs: Vec<Rec>,
) -> Result<Option<(Vec<(Vec<u8>, u32, u8)>, Vec<(Vec<u8>, u32, u8)>, u32)>> {
    let mut keyed = Vec::with_capacity(recs.len());
    for r in recs.into_iter().filter(|r| r.ino != 0) {
        keyed.push((hashing.hash(version, &r.name)?, (r.name, r.ino, r.ftype)));
    }
    keyed.sort_by_key(|(h, _)| *h);
    let n = keyed.len();
    // The split nearest the middle where the hash changes.
    let mut best = None;
    for k in 1..n {
        if keyed[k].0 != keyed[k - 1].0 {
            let d = k.abs_diff(n / 2);
            if best.is_none_or(|(_, bd)| d < bd) {
                best = Some((k, d));
            }
        }
    }
    let Some((k, _)) = best else {
        return Ok(None);
    };
    let h = keyed[k].0;
    let right: Vec<_> = keyed.split_off(k).into_iter().map(|(_, e)| e).collect();
    let left: Vec<_> = keyed.into_iter().map(|(_, e)| e).collect();
    Ok(Some((left, right, h)))
}

impl WriteFs {
    /// Adds `name` through the index; `Ok(false)` when the index cannot
    /// take it (the caller turns the directory linear).
    pub(crate) fn htree_insert(
        &mut self,
        dir: u32,
        name: &[u8],
        ino: u32,
        ftype: u8,
    ) -> Result<bool> {
        let sh = self.shape;
        let inode = dir_inode(&self.txn, dir)?;
        let hashing = Hashing::of(self.txn.superblock());
        // An index that cannot be followed is damage: the kernel refuses
        // the entry (EFSCORRUPTED) with metadata_csum and otherwise drops
        // the index; dropping it would hide the damage from e2fsck, so it
        // is refused here either way.
        let Some(ix) = read_index(&self.txn, &info_of(&self.txn, dir, &inode)?)? else {
            return Err(bad_index(dir, "its root cannot be read"));
        };
        let h = hashing.hash(ix.hash_version, name)?;
        let Some(mut frames) = descend(&self.txn, &ix, h)? else {
            return Err(bad_index(dir, "an index block cannot be followed"));
        };
        let Some(leaf_frame) = frames.last() else {
            return Err(bad_index(dir, "no path to a leaf"));
        };
        let leaf_l = u64::from(leaf_frame.entries[leaf_frame.pos].1);
        let Some(leaf_p) = ix.map.get(leaf_l) else {
            return Err(bad_index(dir, "a leaf past the directory's end"));
        };
        let kind = self.dir_kind(dir, &inode);
        let b = self.txn.read_block_checked(leaf_p, kind)?;
        let mut c = b.clone();
        if leaf::insert(&mut c, name, ino, ftype) {
            *self.txn.block_mut(leaf_p, kind)? = c;
            return Ok(true);
        }
        // Split the leaf by hash into it and a new block.
        let mut recs = block_records(&b, dir, leaf_p)?;
        recs.push(Rec {
            off: 0,
            rec_len: 0,
            ino,
            ftype,
            name: name.to_vec(),
        });
        let Some((left, right, split_hash)) = split(&hashing, ix.hash_version, recs)? else {
            return Ok(false);
        };
        if !leaf::fits(sh.bs, &left, sh.csum) || !leaf::fits(sh.bs, &right, sh.csum) {
            return Ok(false);
        }
        // Room in the index first: a new leaf needs a slot in its parent.
        if !self.make_room(dir, &ix, &mut frames)? {
            return Ok(false);
        }
        let (new_l, new_p) = self.dir_grow(dir)?;
        let lb = leaf::build(sh.bs, &left, sh.csum);
        let rb = leaf::build(sh.bs, &right, sh.csum);
        let (Some(lb), Some(rb)) = (lb, rb) else {
            return Ok(false);
        };
        let inode = dir_inode(&self.txn, dir)?;
        let kind = self.dir_kind(dir, &inode);
        *self.txn.block_mut(leaf_p, kind)? = lb;
        *self.txn.block_mut(new_p, kind)? = rb;
        let last = frames.len() - 1;
        let f = &mut frames[last];
        let at = f.pos + 1;
        f.entries.insert(at, (split_hash, dx_block(new_l)?));
        self.write_frame(dir, &ix, &frames[last])?;
        Ok(true)
    }

    /// Makes sure the lowest index block on the way has a free slot:
    /// growing the root by a level, or splitting a full interior block into
    /// two (its parent gains a slot); `false` when neither is possible.
    fn make_room(&mut self, dir: u32, ix: &Index, frames: &mut Vec<Frame>) -> Result<bool> {
        let sh = self.shape;
        let root_limit = usize::from(dx_limit(sh.bs, DX_ROOT_COUNT_OFFSET, sh.csum));
        let node_limit = usize::from(dx_limit(sh.bs, DX_NODE_COUNT_OFFSET, sh.csum));
        let limit_of = |k: usize| if k == 0 { root_limit } else { node_limit };
        let last = frames.len() - 1;
        if frames[last].entries.len() < limit_of(last) {
            return Ok(true);
        }
        let max_levels = if sh.largedir { 2 } else { 1 };
        // The highest full block on the way decides what happens.
        let mut k = last;
        while k > 0 && frames[k - 1].entries.len() >= limit_of(k - 1) {
            k -= 1;
        }
        if k == 0 {
            // The root is full (and everything below it): a new level.
            if usize::from(ix.levels) >= max_levels {
                return Ok(false);
            }
            let (node_l, node_p) = self.dir_grow(dir)?;
            let moved = std::mem::take(&mut frames[0].entries);
            let pos = frames[0].pos;
            frames[0].entries = vec![(0, dx_block(node_l)?)];
            frames[0].pos = 0;
            frames.insert(
                1,
                Frame {
                    logical: node_l,
                    entries: moved,
                    pos,
                },
            );
            self.write_node(dir, node_p, &frames[1].entries)?;
            self.write_root(dir, ix, &frames[0].entries, ix.levels + 1)?;
            return self.make_room(dir, &reread(self, dir)?, frames);
        }
        // frames[k] is full and its parent has room: split frames[k].
        let (new_l, new_p) = self.dir_grow(dir)?;
        let f = &mut frames[k];
        let half = f.entries.len() / 2;
        let right = f.entries.split_off(half);
        let right_hash = right[0].0;
        let went_right = f.pos >= half;
        let left = std::mem::take(&mut f.entries);
        self.write_node(dir, new_p, &right)?;
        let old_p = self.phys(dir, frames[k].logical)?;
        self.write_node(dir, old_p, &left)?;
        let parent = &mut frames[k - 1];
        parent
            .entries
            .insert(parent.pos + 1, (right_hash, dx_block(new_l)?));
        if went_right {
            parent.pos += 1;
        }
        self.write_frame(dir, ix, &frames[k - 1])?;
        let f = &mut frames[k];
        if went_right {
            f.entries = right;
            f.pos -= half;
            f.logical = new_l;
        } else {
            f.entries = left;
        }
        self.make_room(dir, &reread(self, dir)?, frames)
    }

    fn phys(&self, dir: u32, logical: u64) -> Result<u64> {
        let inode = dir_inode(&self.txn, dir)?;
        crate::object::dir::DirMap::read(&self.txn, &info_of(&self.txn, dir, &inode)?)?
            .get(logical)
            .ok_or_else(|| {
                Error::corrupt(
                    format!("inode {dir}"),
                    ext4r_format::FormatError::invalid(
                        "htree",
                        format!("logical block {logical} unmapped"),
                    ),
                )
            })
    }

    fn write_frame(&mut self, dir: u32, ix: &Index, f: &Frame) -> Result<()> {
        if f.logical == 0 {
            let levels = reread(self, dir)?.levels.max(ix.levels);
            self.write_root(dir, ix, &f.entries, levels)
        } else {
            let p = self.phys(dir, f.logical)?;
            self.write_node(dir, p, &f.entries)
        }
    }

    fn write_root(
        &mut self,
        dir: u32,
        ix: &Index,
        entries: &[(u32, u32)],
        levels: u8,
    ) -> Result<()> {
        let sh = self.shape;
        let mut root = ix.root;
        root.info.indirect_levels = levels;
        let dx: Vec<DxEntry> = entries.iter().map(|&(h, b)| DxEntry::new(h, b)).collect();
        let p = self.phys(dir, 0)?;
        let inode = dir_inode(&self.txn, dir)?;
        let kind = self.dir_kind(dir, &inode);
        let blk = self.txn.block_mut(p, kind)?;
        write_dx_root(blk, &root, &dx, sh.csum).map_err(|e| Error::corrupt("htree root", e))
    }

    fn write_node(&mut self, dir: u32, p: u64, entries: &[(u32, u32)]) -> Result<()> {
        let sh = self.shape;
        let dx: Vec<DxEntry> = entries.iter().map(|&(h, b)| DxEntry::new(h, b)).collect();
        let inode = dir_inode(&self.txn, dir)?;
        let kind = self.dir_kind(dir, &inode);
        let blk = self.txn.block_mut(p, kind)?;
        blk.fill(0);
        write_dx_node(blk, &dx, sh.csum).map_err(|e| Error::corrupt("htree node", e))
    }

    /// Turns a full one-block directory into an indexed one: its entries
    /// split by hash into two new leaves, block 0 the root over them.
    pub(crate) fn make_indexed(&mut self, dir: u32) -> Result<()> {
        let sh = self.shape;
        let mut inode = dir_inode(&self.txn, dir)?;
        let list = blocks(&self.txn, dir, &inode)?;
        let [(0, b0)] = list[..] else {
            return Ok(());
        };
        let parent = super::dir::parent(&self.txn, dir)?;
        let recs = block_records(&super::dir::dir_block(&self.txn, dir, &inode, b0)?, dir, b0)?;
        let others: Vec<Rec> = recs
            .into_iter()
            .filter(|r| r.ino != 0 && r.name != b"." && r.name != b"..")
            .collect();
        let version = effective_hash_version(sh.hash_version, sh.hash_unsigned);
        let hashing = Hashing::of(self.txn.superblock());
        let Some((left, right, h)) = split(&hashing, version, others)? else {
            return Ok(());
        };
        let (l1, p1) = self.dir_grow(dir)?;
        let (l2, p2) = self.dir_grow(dir)?;
        let (Some(lb), Some(rb)) = (
            leaf::build(sh.bs, &left, sh.csum),
            leaf::build(sh.bs, &right, sh.csum),
        ) else {
            return Ok(());
        };
        inode = dir_inode(&self.txn, dir)?;
        let kind = self.dir_kind(dir, &inode);
        *self.txn.block_mut(p1, kind)? = lb;
        *self.txn.block_mut(p2, kind)? = rb;
        let root = DxRoot::new(InodeNr(dir), InodeNr(parent), sh.bs32, sh.hash_version, 0)
            .map_err(|e| Error::corrupt("htree root", e))?;
        let dx = [
            DxEntry::new(0, dx_block(l1)?),
            DxEntry::new(h, dx_block(l2)?),
        ];
        let blk = self.txn.block_mut(b0, kind)?;
        blk.fill(0);
        write_dx_root(blk, &root, &dx, sh.csum).map_err(|e| Error::corrupt("htree root", e))?;
        inode.set_flags(inode.flags() | InodeFlags::INDEX);
        self.put_inode(dir, &inode)
    }

    /// Turns an indexed directory linear: the flag cleared, the root's
    /// `..` over the rest of block 0, interior blocks made empty leaves.
    pub(crate) fn unindex(&mut self, dir: u32) -> Result<()> {
        let sh = self.shape;
        let mut inode = dir_inode(&self.txn, dir)?;
        let kind = self.dir_kind(dir, &inode);
        let ix = read_index(&self.txn, &info_of(&self.txn, dir, &inode)?)?;
        if let Some(ix) = &ix {
            // Interior blocks (levels 1 and 2).
            let mut nodes: Vec<u64> = Vec::new();
            let mut level: Vec<u64> = ix.root_entries.iter().map(|&(_, b)| u64::from(b)).collect();
            for _ in 0..ix.levels {
                let mut next = Vec::new();
                for lb in &level {
                    if let Some(pb) = ix.map.get(*lb) {
                        nodes.push(pb);
                        if let Ok(n) = parse_dx_node(&self.txn.read_block_checked(pb, kind)?) {
                            next.extend(n.iter().map(|(_, b)| u64::from(b)));
                        }
                    }
                }
                level = next;
            }
            for pb in nodes {
                let b = leaf::build(sh.bs, &[], sh.csum)
                    .ok_or_else(|| Error::InvalidArgument("empty block".into()))?;
                *self.txn.block_mut(pb, kind)? = b;
            }
            if let Some(b0) = ix.map.get(0) {
                let parent = ix.root.dotdot.inode.get();
                let ents = [
                    (b".".to_vec(), dir, ftype_dir(&sh)),
                    (b"..".to_vec(), parent, ftype_dir(&sh)),
                ];
                let b = leaf::build(sh.bs, &ents, sh.csum)
                    .ok_or_else(|| Error::InvalidArgument("block 0".into()))?;
                *self.txn.block_mut(b0, kind)? = b;
            }
        }
        inode.set_flags(inode.flags() - InodeFlags::INDEX);
        self.put_inode(dir, &inode)
    }
}

fn ftype_dir(sh: &Shape) -> u8 {
    if sh.filetype {
        ext4r_format::dir::ft::DIR
    } else {
        0
    }
}

fn reread(w: &WriteFs, dir: u32) -> Result<Index> {
    let inode = dir_inode(&w.txn, dir)?;
    read_index(&w.txn, &info_of(&w.txn, dir, &inode)?)?.ok_or_else(|| {
        Error::corrupt(
            format!("inode {dir}"),
            ext4r_format::FormatError::invalid("htree", "index vanished"),
        )
    })
}

/// [`WriteFs::htree_insert`] for the directory module.
pub(crate) fn insert(w: &mut WriteFs, dir: u32, name: &[u8], ino: u32, ftype: u8) -> Result<bool> {
    w.htree_insert(dir, name, ino, ftype)
}

/// [`WriteFs::make_indexed`] for the directory module.
pub(crate) fn make_indexed(w: &mut WriteFs, dir: u32) -> Result<()> {
    w.make_indexed(dir)
}

/// [`WriteFs::unindex`] for the directory module.
pub(crate) fn unindex(w: &mut WriteFs, dir: u32) -> Result<()> {
    w.unindex(dir)
}

/// Directory `dir`'s htree index is damaged (`what`).
fn bad_index(dir: u32, what: &'static str) -> Error {
    Error::corrupt(
        ext4r_txn::error::Location::inode(dir).of("htree index"),
        ext4r_format::FormatError::invalid("htree index", what),
    )
}

/// A directory's logical block as the 32 bits an htree entry holds; a
/// directory grown past that cannot be indexed, so it reports no space
/// (as the kernel does) instead of pointing at the wrong block.
fn dx_block(l: u64) -> Result<u32> {
    u32::try_from(l).map_err(|_| Error::NoSpace)
}
