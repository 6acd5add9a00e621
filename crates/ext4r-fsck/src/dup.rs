//! Pass 1D's repair: blocks claimed more than once get copies.
//!
//! As e2fsck's "Clone multiply-claimed blocks", no data is dropped: each
//! inode that shares a block (in inode order) gets a copy of it at a free
//! block and its pointer moved there, until one claimant is left; a block
//! that is also filesystem metadata is always copied away from. A block-map
//! pointer covers one block; an extent covers a run, which is copied whole
//! to a free run of its length (no extent is split, so the tree keeps its
//! shape). Index and indirect blocks are copied as they are: the blocks
//! they point to are then shared by the two copies and copied in the next
//! round.
//!
//! Planning happens at check time, from the claims and the union of used
//! blocks pass 5 computes: the new blocks are chosen there, so the repair
//! itself is a plain list of copies and pointer updates.

use std::collections::{BTreeMap, HashSet};

use ext4r_format::blockmap::{IndirectBlock, NDIR_BLOCKS};
use ext4r_format::extent::{ExtentNode, MAX_EXTENT_DEPTH};
use ext4r_format::inode::{ino as special, Inode, InodeFlags};
use ext4r_format::InodeNr;

use ext4r::fs::Filesystem;

use crate::ctx::{Claim, Ctx};
use crate::fix::Fix;

/// Where a block pointer is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtrAt {
    /// `i_block[slot]` of a block-mapped inode.
    InodeSlot(usize),
    /// Entry `i` of an indirect block.
    Indirect(u64, usize),
    /// Leaf entry `i` of an extent node (None: the root in the inode).
    Extent(Option<u64>, usize),
    /// Index entry `i` of an extent node (None: the root in the inode).
    ExtentIndex(Option<u64>, usize),
}

/// One copy: `len` blocks from `old` to `new`, and the pointer at `at`
/// (which holds `old`) set to `new`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockCopy {
    /// The pointer to move.
    pub at: PtrAt,
    /// Where the blocks are now.
    pub old: u64,
    /// Where the copies go.
    pub new: u64,
    /// How many blocks.
    pub len: u64,
}

impl BlockCopy {
    /// The copied block is an extent tree node (its checksum tail is
    /// recomputed; the seed is the inode's, unchanged).
    pub fn is_extent_node(&self) -> bool {
        matches!(self.at, PtrAt::ExtentIndex(..))
    }
}

/// A block pointer: where it is, the first block, the run's length, and
/// the first logical block it maps ([`NODE`] for an index or indirect
/// block).
pub(crate) type Pointer = (PtrAt, u64, u64, u64);

/// The logical block of a pointer to a tree node (no file data).
pub(crate) const NODE: u64 = u64::MAX;

/// Most multiply-claimed blocks planned for one check; past this the
/// problems are only reported (bounded memory on a garbage volume).
const MAX_DUP_BLOCKS: u64 = 1 << 20;

/// How a multiply-claimed block is claimed.
#[derive(Debug, Clone, Copy, Default)]
struct Dup {
    /// Pointers from files still to it.
    files: u32,
    /// Also filesystem metadata (always copied away from).
    meta: bool,
}

/// Plans the copies for the claims (sorted) over the used blocks `used`
/// (sorted disjoint `[start, end)` ranges) and records one problem with
/// its fix per inode that gets copies.
pub(crate) fn plan(c: &mut Ctx, claims: &[Claim], used: &[(u64, u64)]) {
    let Some(dups) = dup_blocks(claims) else {
        return;
    };
    if dups.is_empty() {
        return;
    }
    let mut owners: Vec<u32> = claims
        .iter()
        .filter(|cl| cl.owner > special::BAD && cl.owner != special::RESIZE)
        .filter(|cl| dups.range(cl.start..cl.start + cl.len).next().is_some())
        .map(|cl| cl.owner)
        .collect();
    owners.sort_unstable();
    owners.dedup();
    let mut dups = dups;
    // With bigalloc the copies take whole free clusters, each block at
    // the same offset in its cluster as before (as the format requires).
    let cluster = 1u64 << c.geo.cluster_bits;
    let mut free = c.usage_map(used.iter().copied());
    let fdb = c.geo.first_data_block;
    for ino in owners {
        let Some((owner, ptrs)) = pointers(&c.fs, ino) else {
            continue;
        };
        let mut copies = Vec::new();
        // What this file takes, given back if it cannot have it all.
        let mut taken: Vec<(u64, u64)> = Vec::new();
        let mut no_room = false;
        let must = |dups: &BTreeMap<u64, Dup>, old: u64, len: u64| {
            dups.range(old..old + len)
                .any(|(_, d)| d.meta || d.files > 1)
        };
        // Bigalloc: the physical cluster each logical cluster of the file
        // already has (from the data that stays where it is).
        let bits = c.geo.cluster_bits;
        let mut placed: BTreeMap<u64, u64> = BTreeMap::new();
        if bits > 0 {
            for &(_, old, len, lblk) in &ptrs {
                if lblk != NODE && !must(&dups, old, len) {
                    place(&mut placed, lblk, old, len, bits);
                }
            }
        }
        for &(at, old, len, lblk) in &ptrs {
            if !must(&dups, old, len) {
                continue;
            }
            // As libext2fs' clone_file_block: a run inside one logical
            // cluster that the file already has a physical cluster for
            // goes there (the "implied cluster allocation").
            let implied = (bits > 0 && lblk != NODE && lblk >> bits == (lblk + len - 1) >> bits)
                .then(|| placed.get(&(lblk >> bits)).copied())
                .flatten()
                .filter(|&pc| pc != old >> bits)
                .map(|pc| (pc << bits) + (lblk % cluster));
            // Else a free run: on bigalloc a data block sits at its
            // logical block's offset in its cluster (the old place may
            // have been misaligned), a node block at the start of one.
            let skew = if lblk == NODE { 0 } else { lblk % cluster };
            let span = (skew + len).div_ceil(cluster) * cluster;
            let new = implied.or_else(|| {
                // First fit, as the allocator's libext2fs search.
                let b = free.get_free_blocks(fdb, 0, span)?;
                free.mark(b, span);
                taken.push((b, span));
                Some(b + skew)
            });
            let Some(new) = new else {
                no_room = true;
                break;
            };
            if bits > 0 && lblk != NODE {
                place(&mut placed, lblk, new, len, bits);
            }
            for (_, d) in dups.range_mut(old..old + len) {
                d.files = d.files.saturating_sub(1);
            }
            copies.push(BlockCopy { at, old, new, len });
        }
        if no_room {
            // As e2fsck when a clone cannot be allocated: the file goes,
            // and with it its claims on the shared blocks.
            for &(b, n) in &taken {
                free.unmark(b, n);
            }
            for c in &copies {
                for (_, d) in dups.range_mut(c.old..c.old + c.len) {
                    d.files += 1;
                }
            }
            for &(_, old, len, _) in &ptrs {
                for (_, d) in dups.range_mut(old..old + len) {
                    d.files = d.files.saturating_sub(1);
                }
            }
            c.p.error_fix(
                1,
                "PR_1D_CLONE_ERROR",
                format!(
                    "Couldn't clone file (inode {ino}): Could not allocate block in ext2 \
                     filesystem.  Delete file."
                ),
                Fix::ClearInode(ino),
            );
            continue;
        }
        if copies.is_empty() {
            continue;
        }
        let n: u64 = copies.iter().map(|x| x.len).sum();
        c.p.error_fix(
            1,
            "PR_1D_CLONE_QUESTION",
            format!("Inode {ino} has {n} multiply-claimed block(s) to clone."),
            Fix::CloneBlocks(ino, owner, copies),
        );
    }
}

/// Records the physical cluster of each logical cluster a run of `len`
/// blocks from logical `lblk` at physical `p` covers (first one wins).
fn place(placed: &mut BTreeMap<u64, u64>, lblk: u64, p: u64, len: u64, bits: u32) {
    let (first, last) = (lblk >> bits, (lblk + len.max(1) - 1) >> bits);
    for lc in first..=last {
        let l0 = (lc << bits).max(lblk);
        placed.entry(lc).or_insert((p + (l0 - lblk)) >> bits);
    }
}

/// Every block claimed more than once, with how; None past the cap.
fn dup_blocks(claims: &[Claim]) -> Option<BTreeMap<u64, Dup>> {
    let mut out: BTreeMap<u64, Dup> = BTreeMap::new();
    // Claims still covering the sweep position: (end, owner).
    let mut active: Vec<(u64, u32)> = Vec::new();
    let mut bounds: Vec<u64> = claims
        .iter()
        .flat_map(|c| [c.start, c.start + c.len])
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut next = 0usize;
    let mut total = 0u64;
    for w in bounds.windows(2) {
        let (a, b) = (w[0], w[1]);
        active.retain(|&(end, _)| end > a);
        while next < claims.len() && claims[next].start <= a {
            let cl = claims[next];
            if cl.start + cl.len > a {
                active.push((cl.start + cl.len, cl.owner));
            }
            next += 1;
        }
        if active.len() < 2 {
            continue;
        }
        total += b - a;
        if total > MAX_DUP_BLOCKS {
            return None;
        }
        let meta = active.iter().any(|&(_, o)| o == 0);
        let files = active.iter().filter(|&&(_, o)| o != 0).count() as u32;
        for blk in a..b {
            out.insert(blk, Dup { files, meta });
        }
    }
    Some(out)
}

/// An inode's block pointers in logical order: (where, first block, run
/// length), node and indirect blocks before what they point to; with the
/// inode as the owner of its tree blocks. Pointers that are not valid are
/// left out (other problems repair them).
pub(crate) fn pointers(fs: &Filesystem, ino: u32) -> Option<(crate::fix::Owner, Vec<Pointer>)> {
    let rec = fs.inode_record(InodeNr(ino)).ok()?;
    let inode = Inode::parse(&rec).ok()?;
    let owner = crate::fix::Owner::of(ino, &inode);
    let c = Area::of(fs);
    let flags = inode.flags();
    if flags.contains(InodeFlags::INLINE_DATA) {
        return None;
    }
    let mut out = Vec::new();
    if flags.contains(InodeFlags::EXTENTS) {
        let root = inode.i_block;
        let node = ExtentNode::parse(&root).ok()?;
        let mut seen = HashSet::new();
        extent_ptrs(&c, &node, None, 0, &mut seen, &mut out);
    } else {
        blockmap_ptrs(&c, &inode, &mut out);
    }
    Some((owner, out))
}

/// The blocks an inode held in memory maps (data and tree or indirect
/// blocks), as (first block, count) runs.
pub(crate) fn mapped_blocks(fs: &Filesystem, inode: &Inode) -> Vec<(u64, u64)> {
    let c = Area::of(fs);
    let mut out = Vec::new();
    let flags = inode.flags();
    if flags.contains(InodeFlags::INLINE_DATA) {
        return Vec::new();
    }
    if flags.contains(InodeFlags::EXTENTS) {
        let root = inode.i_block;
        let Ok(node) = ExtentNode::parse(&root) else {
            return Vec::new();
        };
        let mut seen = HashSet::new();
        extent_ptrs(&c, &node, None, 0, &mut seen, &mut out);
    } else {
        blockmap_ptrs(&c, inode, &mut out);
    }
    out.into_iter().map(|(_, b, n, _)| (b, n.max(1))).collect()
}

/// What the walks need of the filesystem.
struct Area<'a> {
    fs: &'a Filesystem,
    first: u64,
    end: u64,
    bs: u32,
}

impl<'a> Area<'a> {
    fn of(fs: &'a Filesystem) -> Self {
        let g = fs.geometry();
        Area {
            fs,
            first: g.first_data_block,
            end: g.blocks_count,
            bs: g.block_size,
        }
    }

    fn valid_range(&self, b: u64, n: u64) -> bool {
        n > 0 && b >= self.first && b.checked_add(n).is_some_and(|e| e <= self.end)
    }
}

fn extent_ptrs(
    c: &Area<'_>,
    node: &ExtentNode<'_>,
    at: Option<u64>,
    level: u16,
    seen: &mut HashSet<u64>,
    out: &mut Vec<Pointer>,
) {
    if let Some(exts) = node.extents() {
        for (i, e) in exts.iter().enumerate() {
            let (p, n) = (e.start().0, u64::from(e.len()));
            if p != 0 && c.valid_range(p, n) {
                out.push((PtrAt::Extent(at, i), p, n, u64::from(e.ee_block.get())));
            }
        }
        return;
    }
    let Some(idx) = node.indexes() else { return };
    if level >= MAX_EXTENT_DEPTH {
        return;
    }
    for (i, ix) in idx.iter().enumerate() {
        let child = ix.leaf().0;
        if !c.valid_range(child, 1) || !seen.insert(child) {
            continue;
        }
        out.push((PtrAt::ExtentIndex(at, i), child, 1, NODE));
        let mut buf = vec![0u8; c.bs as usize];
        if c.fs
            .device()
            .read_at(&mut buf, child * u64::from(c.bs))
            .is_err()
        {
            continue;
        }
        // One level down whatever its own eh_depth says, as pass 1 walks.
        let want = node.depth().saturating_sub(1);
        if let Ok(n) = crate::extent_depth::parse_at(&mut buf, want) {
            extent_ptrs(c, &n, Some(child), level + 1, seen, out);
        }
    }
}

fn blockmap_ptrs(c: &Area<'_>, inode: &Inode, out: &mut Vec<Pointer>) {
    let words = inode.block_words();
    let bs = c.bs;
    let apb = u64::from(bs / 4);
    // (block, indirection level, where its pointer is, first logical
    // block under it), depth first.
    let mut stack: Vec<(u32, u32, PtrAt, u64)> = Vec::new();
    let mut base = NDIR_BLOCKS as u64;
    let mut tops = Vec::new();
    for (slot, level) in [(12usize, 1u32), (13, 2), (14, 3)] {
        tops.push((words[slot], level, PtrAt::InodeSlot(slot), base));
        base = base.saturating_add(apb.saturating_pow(level));
    }
    stack.extend(tops.into_iter().rev());
    for (i, &w) in words.iter().enumerate().take(NDIR_BLOCKS).rev() {
        stack.push((w, 0, PtrAt::InodeSlot(i), i as u64));
    }
    let mut seen = HashSet::new();
    while let Some((b, level, at, lblk)) = stack.pop() {
        let b64 = u64::from(b);
        if b == 0 || !c.valid_range(b64, 1) {
            continue;
        }
        out.push((at, b64, 1, if level == 0 { lblk } else { NODE }));
        if level == 0 || !seen.insert(b64) {
            continue;
        }
        let mut buf = vec![0u8; bs as usize];
        if c.fs
            .device()
            .read_at(&mut buf, b64 * u64::from(bs))
            .is_err()
        {
            continue;
        }
        let Ok(ind) = IndirectBlock::parse(&buf) else {
            continue;
        };
        let span = apb.saturating_pow(level - 1);
        let children: Vec<(u32, u32, PtrAt, u64)> = ind
            .iter()
            .enumerate()
            .map(|(i, x)| {
                (
                    u32::try_from(x.0).unwrap_or(0),
                    level - 1,
                    PtrAt::Indirect(b64, i),
                    lblk.saturating_add(i as u64 * span),
                )
            })
            .collect();
        stack.extend(children.into_iter().rev());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cl(start: u64, len: u64, owner: u32) -> Claim {
        Claim { start, len, owner }
    }

    #[test]
    fn overlapping_claims_give_per_block_counts() {
        let claims = vec![cl(10, 4, 12), cl(12, 4, 13), cl(13, 1, 0)];
        let d = dup_blocks(&claims).unwrap_or_default();
        let keys: Vec<u64> = d.keys().copied().collect();
        assert_eq!(keys, vec![12, 13]);
        assert_eq!(d[&12].files, 2);
        assert!(!d[&12].meta);
        assert_eq!(d[&13].files, 2);
        assert!(d[&13].meta);
    }
}
