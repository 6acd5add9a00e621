//! The blocks of an orphan as e2fsck's `release_inode_blocks` meets them:
//! before a block is given back it must lie inside the filesystem
//! (PR_0_ORPHAN_ILLEGAL_BLOCK_NUM) and still be marked in use in the
//! block bitmap (PR_0_ORPHAN_ALREADY_CLEARED_BLOCK). Either one means the
//! orphan list cannot be trusted: the release stops there, the
//! filesystem is marked not clean, and the full check settles the rest.
//!
//! The walk is libext2fs's block iteration with depth-first traversal:
//! data blocks in logical order, a tree or indirect block after what it
//! maps (its "block number" is then -1, -2, -3 for the indirection
//! level; an extent tree node counts as -1). A block of the cluster just
//! seen is skipped. A tree block that cannot be followed stops the walk
//! without a problem code (e2fsck prints the library's error).

use crate::codes::ProblemCode;
use std::collections::{HashMap, HashSet};

use ext4r::fs::Filesystem;
use ext4r_format::extent::ExtentNode;
use ext4r_format::features::RoCompat;
use ext4r_format::group_desc::BG_BLOCK_UNINIT;
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::GroupNr;
use ext4r_txn::map::walk::{self, Entry, Ptr, Step, Visitor};

/// Why the release of an orphan stops: e2fsck's code and message, or
/// None for a tree it cannot walk.
pub(crate) type Stop = Option<(ProblemCode, String)>;

/// The block bitmap as the release sees it: the bitmaps on disk (an
/// uninitialised group's shows no data block in use) less what earlier
/// orphans gave back.
pub(crate) struct InUse<'a> {
    fs: &'a Filesystem,
    bitmaps: HashMap<u32, Option<Vec<u8>>>,
    freed: HashSet<u64>,
}

impl<'a> InUse<'a> {
    pub(crate) fn new(fs: &'a Filesystem) -> Self {
        InUse {
            fs,
            bitmaps: HashMap::new(),
            freed: HashSet::new(),
        }
    }

    /// Records blocks given back by an orphan released before.
    pub(crate) fn free(&mut self, runs: &[(u64, u64)]) {
        let bits = self.fs.geometry().cluster_bits;
        for &(b, n) in runs {
            for k in 0..n.min(1 << 20) {
                self.freed.insert((b + k) >> bits);
            }
        }
    }

    fn marked(&mut self, blk: u64) -> bool {
        let g = self.fs.geometry();
        if self.freed.contains(&(blk >> g.cluster_bits)) {
            return false;
        }
        let rel = blk - g.first_data_block;
        let Ok(group) = u32::try_from(rel / g.blocks_per_group) else {
            return false;
        };
        let bit = (rel % g.blocks_per_group) >> g.cluster_bits;
        let fs = self.fs;
        let map = self.bitmaps.entry(group).or_insert_with(|| {
            let d = fs.group_desc(GroupNr(group)).ok()?;
            let sb = fs.superblock();
            let csum =
                sb.has_ro_compat(RoCompat::GDT_CSUM) || sb.has_ro_compat(RoCompat::METADATA_CSUM);
            if csum && d.flags() & BG_BLOCK_UNINIT != 0 {
                return None;
            }
            let wide = sb.has_incompat(ext4r_format::features::Incompat::BIT64);
            let bs = u64::from(fs.block_size());
            let mut buf = vec![0u8; ext4r_format::num::index(bs)];
            fs.device()
                .read_at(&mut buf, d.block_bitmap(wide).checked_mul(bs)?)
                .ok()?;
            Some(buf)
        });
        map.as_ref()
            .and_then(|m| m.get((bit / 8) as usize))
            .is_some_and(|byte| byte & (1 << (bit % 8)) != 0)
    }
}

/// Walks the orphan's blocks; the first that stops its release, if any.
pub(crate) fn check(
    fs: &Filesystem,
    ino: u32,
    inode: &Inode,
    used: &mut InUse<'_>,
) -> Option<Stop> {
    let flags = inode.flags();
    let wide = fs
        .superblock()
        .has_incompat(ext4r_format::features::Incompat::BIT64);
    if flags.contains(InodeFlags::INLINE_DATA) || !crate::pass1_rules::has_valid_blocks(inode, wide)
    {
        return None;
    }
    let mut w = Walk {
        fs,
        ino,
        used,
        last_cluster: None,
        bs: u64::from(fs.block_size()),
    };
    let mut root = inode.i_block;
    let r = if flags.contains(InodeFlags::EXTENTS) {
        match ExtentNode::parse(&root).map(|n| n.depth()) {
            // libext2fs walks at most five levels of index.
            Ok(depth) if depth <= 5 => walk::extent_tree(&mut root, depth, u64::MAX, &mut w),
            _ => Err(None),
        }
    } else {
        walk::block_map(&mut root, fs.block_size(), &mut w)
    };
    r.err()
}

struct Walk<'a, 'b> {
    fs: &'a Filesystem,
    ino: u32,
    used: &'a mut InUse<'b>,
    last_cluster: Option<u64>,
    bs: u64,
}

impl Walk<'_, '_> {
    /// One block met; `count` is its logical number, or -1..-3 for a
    /// tree block.
    fn block(&mut self, blk: u64, count: i64) -> Result<(), Stop> {
        if blk == 0 {
            return Ok(());
        }
        let g = self.fs.geometry();
        let cluster = blk >> g.cluster_bits;
        if self.last_cluster == Some(cluster) {
            return Ok(());
        }
        self.last_cluster = Some(cluster);
        let what = match count {
            -1 => "indirect block".to_string(),
            -2 => "double indirect block".to_string(),
            -3 => "triple indirect block".to_string(),
            n => format!("block #{n}"),
        };
        let ino = self.ino;
        if blk < g.first_data_block || blk >= g.blocks_count {
            return Err(Some((
                ProblemCode::PR_0_ORPHAN_ILLEGAL_BLOCK_NUM,
                format!("Illegal {what} ({blk}) found in orphaned inode {ino}."),
            )));
        }
        if !self.used.marked(blk) {
            return Err(Some((
                ProblemCode::PR_0_ORPHAN_ALREADY_CLEARED_BLOCK,
                format!("Already cleared {what} ({blk}) found in orphaned inode {ino}."),
            )));
        }
        Ok(())
    }

    fn read(&self, blk: u64) -> Result<Vec<u8>, Stop> {
        let g = self.fs.geometry();
        if blk < g.first_data_block || blk >= g.blocks_count {
            return Err(None);
        }
        let mut buf = vec![0u8; ext4r_format::num::index(self.bs)];
        self.fs
            .device()
            .read_at(&mut buf, blk * self.bs)
            .map_err(|_| None)?;
        Ok(buf)
    }
}

/// The walk over the inode's pointers (`ext4r_txn::map::walk`), in
/// libext2fs's depth-first order: each data block as it comes, a tree or
/// indirect block after what it maps.
impl Visitor for Walk<'_, '_> {
    type Error = Stop;

    fn pointer(&mut self, p: &Ptr) -> Result<Step, Stop> {
        if p.is_node() {
            return Ok(Step::Descend);
        }
        for k in 0..p.len {
            self.block(p.physical + k, (p.logical + k) as i64)?;
        }
        Ok(Step::Next)
    }

    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>, Stop> {
        let mut buf = self.read(p.physical)?;
        if let Entry::Index(_) = p.entry {
            // Read at the depth its place gives it, as libext2fs does.
            crate::extent_depth::parse_at(&mut buf, p.levels).map_err(|_| None)?;
        }
        Ok(Some(buf))
    }

    fn leave(&mut self, p: &Ptr, _buf: Vec<u8>, _changed: bool) -> Result<Step, Stop> {
        // An extent tree node counts as -1; an indirect block as its level.
        let count = match p.entry {
            Entry::Index(_) => -1,
            _ => -i64::from(p.levels),
        };
        self.block(p.physical, count)?;
        Ok(Step::Next)
    }
}
