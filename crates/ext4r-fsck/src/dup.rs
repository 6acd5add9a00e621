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

use crate::codes::ProblemCode;
use crate::problem::Subject;
use std::collections::{BTreeMap, HashSet};

use ext4r_format::blockmap::IndirectBlock;
use ext4r_format::extent::{ExtentNode, MAX_EXTENT_DEPTH};
use ext4r_format::inode::{ino as special, Inode, InodeFlags};
use ext4r_format::InodeNr;
use ext4r_txn::map::walk::{self, Entry, Ptr, Step, Visitor};

use ext4r::fs::Filesystem;

use crate::claims::Claim;
use crate::ctx::Ctx;
use crate::fix::plan::{BlockCopy, PtrAt};
use crate::fix::Fix;

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
    let cluster = 1u64 << c.geo().cluster_bits;
    let mut free = c.usage_map(used.iter().copied());
    let fdb = c.geo().first_data_block;
    for ino in owners {
        let Some((owner, ptrs)) = pointers(c.fs(), ino) else {
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
        let bits = c.geo().cluster_bits;
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
            copies.push(BlockCopy {
                at,
                old,
                new,
                len,
                node: lblk == NODE,
            });
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
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1D_CLONE_ERROR,
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
        // The copies' blocks are taken with the allocation statistics, as
        // libext2fs' clone_file_block takes them (see the writer's
        // CloneBlocks); on bigalloc the next check counts them.
        if bits == 0 {
            for cp in &copies {
                for b in cp.new..cp.new + cp.len {
                    c.plan_block(b, true);
                }
            }
        }
        let n: u64 = copies.iter().map(|x| x.len).sum();
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1D_CLONE_QUESTION,
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
        let files = ext4r_format::num::sat_u32(active.iter().filter(|&&(_, o)| o != 0).count());
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
    Some((owner, walk_ptrs(&c, &inode)?))
}

/// The blocks an inode held in memory maps (data and tree or indirect
/// blocks), as (first block, count) runs.
pub(crate) fn mapped_blocks(fs: &Filesystem, inode: &Inode) -> Vec<(u64, u64)> {
    let c = Area::of(fs);
    if inode.flags().contains(InodeFlags::INLINE_DATA) {
        return Vec::new();
    }
    let out = walk_ptrs(&c, inode).unwrap_or_default();
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

/// The valid pointers of an inode's extent tree (None: its root does not
/// parse) or block map.
fn walk_ptrs(c: &Area<'_>, inode: &Inode) -> Option<Vec<Pointer>> {
    let mut v = Ptrs {
        c,
        seen: HashSet::new(),
        out: Vec::new(),
    };
    let mut root = inode.i_block;
    if inode.flags().contains(InodeFlags::EXTENTS) {
        let depth = ExtentNode::parse(&root).ok()?.depth();
        let Ok(_) = walk::extent_tree(&mut root, depth, u64::MAX, &mut v);
    } else {
        let Ok(_) = walk::block_map(&mut root, c.bs, &mut v);
    }
    Some(v.out)
}

/// Collects the pointers the walk meets; invalid ones are left out, and
/// a tree or indirect block reached twice is not entered again.
struct Ptrs<'a, 'f> {
    c: &'a Area<'f>,
    /// Tree or indirect blocks entered.
    seen: HashSet<u64>,
    out: Vec<Pointer>,
}

impl Visitor for Ptrs<'_, '_> {
    type Error = std::convert::Infallible;

    fn pointer(&mut self, p: &Ptr) -> Result<Step, Self::Error> {
        let (b, n) = (p.physical, p.len);
        Ok(match p.entry {
            Entry::Extent(_) => {
                if b != 0 && self.c.valid_range(b, n) {
                    let at = PtrAt::Extent(p.slot.block, p.slot.index);
                    self.out.push((at, b, n, p.logical));
                }
                Step::Next
            }
            Entry::Index(_) => {
                if p.level >= MAX_EXTENT_DEPTH || !self.c.valid_range(b, 1) || !self.seen.insert(b)
                {
                    return Ok(Step::Next);
                }
                let at = PtrAt::ExtentIndex(p.slot.block, p.slot.index);
                self.out.push((at, b, 1, NODE));
                Step::Descend
            }
            Entry::Word => {
                if !self.c.valid_range(b, 1) {
                    return Ok(Step::Next);
                }
                let at = match p.slot.block {
                    None => PtrAt::InodeSlot(p.slot.index),
                    Some(blk) => PtrAt::Indirect(blk, p.slot.index),
                };
                let lblk = if p.levels == 0 { p.logical } else { NODE };
                self.out.push((at, b, 1, lblk));
                if p.levels == 0 || !self.seen.insert(b) {
                    return Ok(Step::Next);
                }
                Step::Descend
            }
        })
    }

    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>, Self::Error> {
        let bs = self.c.bs;
        let mut buf = vec![0u8; bs as usize];
        if self
            .c
            .fs
            .device()
            .read_at(&mut buf, p.physical * u64::from(bs))
            .is_err()
        {
            return Ok(None);
        }
        Ok(match p.entry {
            // One level down whatever its own eh_depth says, as pass 1
            // walks.
            Entry::Index(_) => crate::extent_depth::parse_at(&mut buf, p.levels)
                .is_ok()
                .then_some(buf),
            _ => IndirectBlock::parse(&buf).is_ok().then_some(buf),
        })
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
