//! Rebuilding an extent tree from its extents, as e2fsck's pass 1E does
//! for a tree deeper than it needs to be: the same extents, packed into the
//! fewest levels (the root's 4 slots, then full leaves, then index blocks
//! over them). The blocks of the old tree serve the new one first; more
//! are taken from free space only when the old ones do not suffice. Old
//! blocks the new tree does not use are no longer claimed, so the next
//! round's pass 5 frees them (and pass 1 sets `i_blocks`).
//!
//! Planned at check time; the repair writes the given bytes.

use ext4r_format::extent::{max_entries, write_index, write_leaf, Extent, ExtentIdx};
use ext4r_format::BlockNr;

use crate::ctx::Ctx;
use crate::fix::plan::ExtentTree;
use crate::fix::{Fix, Owner};

/// What the walk of the old tree found: its valid extents in logical
/// order, and its node blocks.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub extents: Vec<Extent>,
    pub blocks: Vec<u64>,
}

/// The repair that rewrites inode `ino`'s tree from `found`; None when no
/// block can be had for it.
pub(crate) fn plan(c: &mut Ctx, ino: u32, owner: Owner, found: Collected) -> Option<Fix> {
    plan_tree(c, ino, owner, found).map(|t| Fix::RebuildExtents(Box::new(t.tree)))
}

/// A rebuilt tree and the blocks it changes hands.
pub(crate) struct Planned {
    pub tree: ExtentTree,
    /// Free blocks it takes (when the old tree's do not suffice).
    pub taken: Vec<u64>,
    /// Blocks of the old tree it does not use.
    pub unused: Vec<u64>,
}

/// [`plan`], with the blocks taken and left over.
pub(crate) fn plan_tree(c: &mut Ctx, ino: u32, owner: Owner, found: Collected) -> Option<Planned> {
    let bs = c.geo().block_size as usize;
    let per_block = usize::from(max_entries(bs));
    let mut taken = Vec::new();
    let mut spare = found.blocks.into_iter();
    // Nodes of the level being built: (first logical block, the node's
    // bytes) — entries are packed into as few nodes as hold them.
    let mut level: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut blocks: Vec<(u64, Vec<u8>)> = Vec::new();
    let extents = found.extents;
    if extents.len() <= 4 {
        let mut root = [0u8; 60];
        write_leaf(&mut root, &extents).ok()?;
        return Some(done(ino, owner, root, blocks, taken, spare.collect()));
    }
    for chunk in extents.chunks(per_block) {
        let mut buf = vec![0u8; bs];
        write_leaf(&mut buf, chunk).ok()?;
        level.push((chunk.first()?.ee_block.get(), buf));
    }
    let mut depth = 1u16;
    loop {
        // Place this level's nodes and index them.
        let mut idx = Vec::with_capacity(level.len());
        for (first, buf) in level.drain(..) {
            let b = match spare.next() {
                Some(b) => b,
                None => {
                    let b = *crate::lost_found::reserve_blocks(c, 1).first()?;
                    taken.push(b);
                    b
                }
            };
            idx.push(ExtentIdx::new(first, BlockNr(b)));
            blocks.push((b, buf));
        }
        if idx.len() <= 4 {
            let mut root = [0u8; 60];
            write_index(&mut root, depth, &idx).ok()?;
            return Some(done(ino, owner, root, blocks, taken, spare.collect()));
        }
        for chunk in idx.chunks(per_block) {
            let mut buf = vec![0u8; bs];
            write_index(&mut buf, depth, chunk).ok()?;
            level.push((chunk.first()?.ei_block.get(), buf));
        }
        depth += 1;
    }
}

fn done(
    ino: u32,
    owner: Owner,
    root: [u8; 60],
    blocks: Vec<(u64, Vec<u8>)>,
    taken: Vec<u64>,
    unused: Vec<u64>,
) -> Planned {
    Planned {
        tree: ExtentTree {
            ino,
            owner,
            root,
            blocks,
            accounted: None,
        },
        taken,
        unused,
    }
}

/// Plans the rebuild with the allocation statistics of this round: the
/// blocks the new tree takes are counted in use and the old tree's it
/// does not use free, in pass 5 now and by the repair (which sets
/// `i_blocks` to match), as e2fsck's pass 1E leaves them. None on
/// bigalloc, whose clusters the statistics do not follow here.
pub(crate) fn plan_accounted(c: &mut Ctx, ino: u32, owner: Owner, found: Collected) -> Option<Fix> {
    if c.geo().cluster_ratio() > 1 {
        return plan(c, ino, owner, found);
    }
    let mut p = plan_tree(c, ino, owner, found)?;
    for &b in &p.taken {
        c.plan_block(b, true);
    }
    for &b in &p.unused {
        c.plan_block(b, false);
    }
    p.tree.accounted = Some((p.taken, p.unused));
    Some(Fix::RebuildExtents(Box::new(p.tree)))
}
