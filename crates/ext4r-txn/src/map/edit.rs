//! Storing a mapping: an inode's runs written out as an extent tree of the
//! depth they need, or as an ext2/3 block map (direct, indirect, double
//! and triple indirect blocks), inside a transaction.
//!
//! The whole mapping is stored each time: the tree blocks the inode had
//! are reused where the new tree needs blocks (rewritten in place, so the
//! tree does not wander), extra ones are freed (and revoked from the
//! journal), missing ones allocated near the goal. Data blocks are the
//! caller's: taking and freeing them is not done here. Cost is linear in
//! the runs of the file (extents) or its blocks (block maps), which is what
//! a rewrite of one file's mapping costs the kernel too when its tree
//! reshapes.

use super::{BlockSource, Run};
use crate::csum::BlockKind;
use crate::error::{Error, Result};
use crate::txn::Transaction;
use crate::volume::Volume;
use ext4r_format::blockmap::{
    self, addr_per_block, DIND_BLOCK, IND_BLOCK, NDIR_BLOCKS, TIND_BLOCK,
};
use ext4r_format::extent::{
    max_entries, write_index, write_leaf, Extent, ExtentIdx, EXT_INIT_MAX_LEN,
    EXT_UNWRITTEN_MAX_LEN, MAX_EXTENT_DEPTH,
};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::num;
use ext4r_format::{BlockNr, FormatError};
use std::borrow::BorrowMut;

fn bad(what: &str, detail: String) -> Error {
    Error::corrupt(what.to_string(), FormatError::invalid("mapping", detail))
}

fn tree(e: FormatError) -> Error {
    Error::corrupt("extent tree", e)
}

/// The mapping blocks (tree nodes, indirect blocks) inode `ino` holds now.
fn mapping_blocks<V: BorrowMut<Volume>>(
    t: &Transaction<V>,
    ino: u32,
    inode: &Inode,
) -> Result<Vec<u64>> {
    let flags = inode.flags();
    if flags.contains(InodeFlags::INLINE_DATA) {
        return Ok(Vec::new());
    }
    if !flags.contains(InodeFlags::EXTENTS) {
        let mut m = Vec::new();
        collect_indirect(t, inode, &mut m)?;
        return Ok(m);
    }
    // The tree's node blocks, less any that a (corrupt) tree also maps as
    // data: those are neither reused nor freed. Linear in the extents, not
    // in the file's blocks (listing every data block made each write of a
    // growing file cost its whole size: quadratic, and memory to match).
    let (data, nodes) = super::read::extent_tree(t, ino, inode)?;
    let mut spans: Vec<(u64, u64)> = data
        .iter()
        .map(|r| (r.physical, r.physical + r.len))
        .collect();
    spans.sort_unstable();
    // reach[i]: the furthest end among the first i + 1 spans.
    let reach: Vec<u64> = spans
        .iter()
        .scan(0u64, |m, &(_, end)| {
            *m = (*m).max(end);
            Some(*m)
        })
        .collect();
    let is_data = |b: u64| {
        let i = spans.partition_point(|&(start, _)| start <= b);
        i > 0 && reach[i - 1] > b
    };
    Ok(nodes.into_iter().filter(|&b| !is_data(b)).collect())
}

fn collect_indirect<S: BlockSource + ?Sized>(
    src: &S,
    inode: &Inode,
    out: &mut Vec<u64>,
) -> Result<()> {
    fn walk<S: BlockSource + ?Sized>(
        src: &S,
        b: u32,
        level: u32,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        if b == 0 {
            return Ok(());
        }
        let (_, count) = src.block_range();
        if out.len() as u64 > count {
            return Err(bad(
                "block map",
                "more indirect blocks than the filesystem".into(),
            ));
        }
        out.push(u64::from(b));
        if level == 1 {
            return Ok(());
        }
        let buf = src.read_block(u64::from(b), "indirect block")?;
        for w in ext4r_format::blockmap::words(&buf) {
            walk(src, w, level - 1, out)?;
        }
        Ok(())
    }
    let w = inode.block_words();
    for (slot, level) in [(IND_BLOCK, 1), (DIND_BLOCK, 2), (TIND_BLOCK, 3)] {
        walk(src, w[slot], level, out)?;
    }
    Ok(())
}

/// Blocks for the new mapping: the old ones first, then new ones near
/// `goal`; the old ones left over are freed.
struct Blocks {
    reuse: Vec<u64>,
    goal: u64,
}

impl Blocks {
    fn take<V: BorrowMut<Volume>>(&mut self, t: &mut Transaction<V>) -> Result<u64> {
        if let Some(b) = self.reuse.pop() {
            return Ok(b);
        }
        let (b, _) = t.alloc_run(self.goal, 1)?.ok_or(Error::NoSpace)?;
        self.goal = b + 1;
        Ok(b)
    }

    fn release<V: BorrowMut<Volume>>(self, t: &mut Transaction<V>) -> Result<()> {
        for b in self.reuse {
            t.free_blocks(b, 1)?;
        }
        Ok(())
    }
}

/// Stores `runs` (sorted by logical block, not overlapping) as inode
/// `ino`'s mapping in `inode` (its `i_block` and flags; the caller writes
/// the record, sets the size and counts `i_blocks`), reusing the mapping
/// blocks the inode had and taking new ones near `goal`. The inode's
/// `EXTENTS_FL` chooses the form. Returns the mapping blocks the new
/// mapping uses (for `i_blocks`).
///
/// # Errors
/// [`Error::NoSpace`] when no block is left for the tree, [`Error::Corrupt`]
/// for runs that overlap, go past 2^32 logical blocks or past what a block
/// map addresses, and the errors of reading the old mapping.
pub fn store<V: BorrowMut<Volume>>(
    t: &mut Transaction<V>,
    ino: u32,
    inode: &mut Inode,
    runs: &[Run],
    goal: u64,
) -> Result<u64> {
    for w in runs.windows(2) {
        if w[1].logical < w[0].end() {
            return Err(bad("runs", format!("{:?} overlaps {:?}", w[1], w[0])));
        }
    }
    let mut old = mapping_blocks(t, ino, inode)?;
    old.sort_unstable_by(|a, b| b.cmp(a));
    let mut blocks = Blocks { reuse: old, goal };
    let used = if inode.flags().contains(InodeFlags::EXTENTS) {
        store_extents(t, ino, inode, runs, &mut blocks)?
    } else {
        store_block_map(t, inode, runs, &mut blocks)?
    };
    blocks.release(t)?;
    Ok(used)
}

/// The runs cut into extents no longer than an extent may be.
fn extents_of(runs: &[Run]) -> Result<Vec<Extent>> {
    let mut out = Vec::new();
    for r in runs {
        let max = u64::from(if r.unwritten {
            EXT_UNWRITTEN_MAX_LEN
        } else {
            EXT_INIT_MAX_LEN
        });
        let mut done = 0;
        while done < r.len {
            // At most 32768: fits ee_len.
            let n = (r.len - done).min(max);
            let l = u32::try_from(r.logical + done)
                .map_err(|_| bad("runs", format!("logical block {} past 2^32", r.logical)))?;
            if u64::from(l) + n > 1 << 32 {
                return Err(bad("runs", format!("logical block {l}+{n} past 2^32")));
            }
            out.push(
                Extent::new(l, BlockNr(r.physical + done), num::sat_u16(n), r.unwritten)
                    .map_err(tree)?,
            );
            done += n;
        }
    }
    Ok(out)
}

fn store_extents<V: BorrowMut<Volume>>(
    t: &mut Transaction<V>,
    ino: u32,
    inode: &mut Inode,
    runs: &[Run],
    blocks: &mut Blocks,
) -> Result<u64> {
    let bs = t.geometry().block_size as usize;
    let kind = BlockKind::Extent {
        ino,
        generation: inode.generation(),
    };
    let extents = extents_of(runs)?;
    let root_max = usize::from(max_entries(60));
    let node_max = usize::from(max_entries(bs));
    let mut root = [0u8; 60];
    if extents.len() <= root_max {
        write_leaf(&mut root, &extents).map_err(tree)?;
        inode.i_block = root;
        return Ok(0);
    }
    let mut used = 0u64;
    // Leaves, then index levels until the root holds the top.
    let mut level: Vec<ExtentIdx> = Vec::new();
    for chunk in extents.chunks(node_max) {
        let b = blocks.take(t)?;
        let mut buf = vec![0u8; bs];
        write_leaf(&mut buf, chunk).map_err(tree)?;
        t.write_block(b, kind, buf)?;
        used += 1;
        level.push(ExtentIdx::new(chunk[0].ee_block.get(), BlockNr(b)));
    }
    let mut depth = 1u16;
    while level.len() > root_max {
        if depth >= MAX_EXTENT_DEPTH {
            return Err(bad("extent tree", "deeper than the format allows".into()));
        }
        let mut up = Vec::new();
        for chunk in level.chunks(node_max) {
            let b = blocks.take(t)?;
            let mut buf = vec![0u8; bs];
            write_index(&mut buf, depth, chunk).map_err(tree)?;
            t.write_block(b, kind, buf)?;
            used += 1;
            up.push(ExtentIdx::new(chunk[0].ei_block.get(), BlockNr(b)));
        }
        level = up;
        depth += 1;
    }
    write_index(&mut root, depth, &level).map_err(tree)?;
    inode.i_block = root;
    Ok(used)
}

fn store_block_map<V: BorrowMut<Volume>>(
    t: &mut Transaction<V>,
    inode: &mut Inode,
    runs: &[Run],
    blocks: &mut Blocks,
) -> Result<u64> {
    let bs = t.geometry().block_size;
    let apb = u64::from(addr_per_block(bs));
    let limits = [NDIR_BLOCKS as u64, apb, apb * apb, apb * apb * apb];
    let total: u64 = limits.iter().sum();
    // (logical, physical) of every mapped block, in order.
    let mut map: Vec<(u64, u32)> = Vec::new();
    for r in runs {
        if r.end() > total {
            return Err(bad(
                "runs",
                format!("logical block {} past a block map's reach", r.end()),
            ));
        }
        for k in 0..r.len {
            let p = u32::try_from(r.physical + k)
                .map_err(|_| bad("runs", "a block map holds 32-bit block numbers".into()))?;
            map.push((r.logical + k, p));
        }
    }
    let mut words = [0u32; 15];
    let mut used = 0u64;
    let mut i = 0usize;
    while i < map.len() && map[i].0 < NDIR_BLOCKS as u64 {
        words[num::index(map[i].0)] = map[i].1;
        i += 1;
    }
    let mut base = NDIR_BLOCKS as u64;
    for (slot, level) in [(IND_BLOCK, 1u32), (DIND_BLOCK, 2), (TIND_BLOCK, 3)] {
        let span = apb.pow(level);
        let end = base + span;
        let start = i;
        while i < map.len() && map[i].0 < end {
            i += 1;
        }
        if i > start {
            words[slot] = indirect(t, &map[start..i], base, level, apb, blocks, &mut used)?;
        }
        base = end;
    }
    inode.set_block_words(&words);
    Ok(used)
}

/// Builds an indirect block of `level` for the mapped blocks `map`, which
/// all lie in its span from `base`; returns its block number.
fn indirect<V: BorrowMut<Volume>>(
    t: &mut Transaction<V>,
    map: &[(u64, u32)],
    base: u64,
    level: u32,
    apb: u64,
    blocks: &mut Blocks,
    used: &mut u64,
) -> Result<u32> {
    let bs = t.geometry().block_size as usize;
    let b = blocks.take(t)?;
    *used += 1;
    let mut buf = vec![0u8; bs];
    let child_span = apb.pow(level - 1);
    let mut i = 0;
    while i < map.len() {
        let slot = num::index((map[i].0 - base) / child_span);
        let ptr = if level == 1 {
            let p = map[i].1;
            i += 1;
            p
        } else {
            let child_base = base + slot as u64 * child_span;
            let start = i;
            while i < map.len() && map[i].0 < child_base + child_span {
                i += 1;
            }
            indirect(t, &map[start..i], child_base, level - 1, apb, blocks, used)?
        };
        blockmap::set_word(&mut buf, slot, ptr);
    }
    t.write_block(b, BlockKind::Plain, buf)?;
    u32::try_from(b).map_err(|_| bad("block map", format!("indirect block {b} past 2^32")))
}
