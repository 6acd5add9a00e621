//! Pass 1's walk of an inode's extent tree or block map: every block
//! claimed, every structural problem reported with e2fsck's wording, the
//! walk going on past a bad node where it can.

use std::collections::HashSet;

use ext4r_format::blockmap::{addr_per_block, IndirectBlock, NDIR_BLOCKS};
use ext4r_format::extent::{verify_extent_block_checksum, ExtentNode, MAX_EXTENT_DEPTH};
use ext4r_format::inode::{inode_csum_seed, Inode};
use ext4r_format::InodeNr;

use crate::ctx::Ctx;
use crate::fix::Fix;

/// What the walk learned about one inode.
#[derive(Debug, Default)]
pub(crate) struct MapResult {
    /// Blocks claimed: data (also unwritten) and tree/indirect blocks.
    pub blocks: u64,
    /// Highest logical block mapped, plus one (0: none).
    pub end_lblk: u64,
    /// Highest initialised logical block mapped, plus one (0: none).
    pub end_init_lblk: u64,
    /// (logical, physical, len) of written data, for directories.
    pub runs: Vec<(u64, u64, u64)>,
    /// Depth of the extent tree.
    pub depth: u16,
    /// More than one physical run.
    pub fragmented: bool,
    /// A problem was found in the mapping.
    pub bad: bool,
}

/// For a directory (`is_dir`), the logical block count past which it is
/// too big (2 GiB; e2fsck's PR_1_TOOBIG_DIR), unless largedir or a size
/// above 4 GiB lifts the limit.
fn dir_limit(c: &Ctx, inode: &Inode, is_dir: bool) -> Option<u64> {
    let largedir =
        c.sb.has_incompat(ext4r_format::features::Incompat::LARGEDIR);
    (is_dir && !largedir && inode.i_size_high.get() == 0)
        .then(|| 1u64 << (31 - c.geo.block_size.trailing_zeros()))
}

/// Walks an extent tree, claiming its blocks.
pub(crate) fn extents(c: &mut Ctx, ino: u32, inode: &Inode, want_runs: bool) -> MapResult {
    let mut w = ExtWalk {
        dir_limit: dir_limit(c, inode, want_runs),
        ino,
        seed: inode_csum_seed(c.sb.csum_seed(), InodeNr(ino), inode.generation()),
        res: MapResult::default(),
        want_runs,
        seen: HashSet::new(),
        last_phys_end: None,
        node_at: None,
    };
    let root = inode.i_block;
    w.node_at = None;
    match ExtentNode::parse(&root) {
        Ok(node) => {
            w.res.depth = node.depth();
            if node.depth() > MAX_EXTENT_DEPTH {
                c.p.error(
                    1,
                    "PR_1_EXTENT_BAD_MAX_DEPTH",
                    format!(
                        "Inode {ino} extent tree (at level 0) could be deeper than the maximum ({})",
                        node.depth()
                    ),
                );
                w.res.bad = true;
            } else {
                w.node(c, &node, 0, u64::MAX, 0);
            }
        }
        Err(e) => {
            c.p.error_fix(
                1,
                "PR_1_MISSING_EXTENT_HEADER",
                format!("Inode {ino} has EXTENTS_FL set but an invalid extent header: {e}."),
                crate::fix::Fix::ClearInode(ino),
            );
            w.res.bad = true;
        }
    }
    w.res
}

struct ExtWalk {
    /// See [`dir_limit`].
    dir_limit: Option<u64>,
    ino: u32,
    seed: u32,
    res: MapResult,
    want_runs: bool,
    seen: HashSet<u64>,
    last_phys_end: Option<u64>,
    /// The block of the node being walked (None: the root in the inode).
    node_at: Option<u64>,
}

impl ExtWalk {
    /// Checks one node whose entries must lie in logical `[lo, hi)`.
    fn node(&mut self, c: &mut Ctx, node: &ExtentNode<'_>, lo: u64, hi: u64, level: u16) {
        let ino = self.ino;
        if let Some(exts) = node.extents() {
            let mut prev_end = lo;
            for (i, e) in exts.iter().enumerate() {
                let l = u64::from(e.ee_block.get());
                let n = u64::from(e.len());
                let p = e.start().0;
                if n == 0 || !c.valid_range(p, n) {
                    c.p.error_fix(
                        1,
                        "PR_1_EXTENT_BAD_START_BLK",
                        format!(
                            "Inode {ino} has an invalid extent\n\t(logical block {l}, invalid \
                             physical block {p}, len {n})"
                        ),
                        Fix::ExtentRemove(self.ino, self.node_at, i, self.seed),
                    );
                    self.res.bad = true;
                    continue;
                }
                if l < prev_end {
                    c.p.error_fix(
                        1,
                        "PR_1_OUT_OF_ORDER_EXTENTS",
                        format!(
                            "Inode {ino} has out of order extents\n\t(invalid logical block \
                             {l}, physical block {p}, len {n})"
                        ),
                        Fix::ExtentRemove(self.ino, self.node_at, i, self.seed),
                    );
                    self.res.bad = true;
                    continue;
                }
                if l + n > hi || l > u64::from(u32::MAX) {
                    c.p.error_fix(
                        1,
                        "PR_1_EXTENT_END_OUT_OF_BOUNDS",
                        format!(
                            "Inode {ino}, end of extent exceeds allowed value\n\t(logical \
                             block {l}, physical block {p}, len {n})"
                        ),
                        Fix::ExtentRemove(self.ino, self.node_at, i, self.seed),
                    );
                    self.res.bad = true;
                    continue;
                }
                if self.dir_limit.is_some_and(|m| l + n > m) {
                    c.p.error_fix(
                        1,
                        "PR_1_TOOBIG_DIR",
                        format!("Block #{l} ({p}) causes directory to be too big."),
                        Fix::ExtentRemove(self.ino, self.node_at, i, self.seed),
                    );
                    self.res.bad = true;
                    continue;
                }
                prev_end = l + n;
                c.claim(p, n, ino);
                self.res.blocks += n;
                self.res.end_lblk = self.res.end_lblk.max(l + n);
                if !e.is_unwritten() {
                    self.res.end_init_lblk = self.res.end_init_lblk.max(l + n);
                    if self.want_runs {
                        self.res.runs.push((l, p, n));
                    }
                }
                if self.last_phys_end.is_some_and(|x| x != p) {
                    self.res.fragmented = true;
                }
                self.last_phys_end = Some(p + n);
            }
            return;
        }
        let Some(idx) = node.indexes() else { return };
        let depth = node.depth();
        for (i, ix) in idx.iter().enumerate() {
            let l = u64::from(ix.ei_block.get());
            let next = idx
                .get(i + 1)
                .map_or(hi, |n| u64::from(n.ei_block.get()).min(hi));
            let child = ix.leaf().0;
            if l < lo || l >= next {
                c.p.error_fix(
                    1,
                    "PR_1_EXTENT_INDEX_START_INVALID",
                    format!(
                        "Inode {ino} extent tree (at level {level}) has an out of order or \
                         invalid index (logical block {l}, block {child})."
                    ),
                    Fix::ExtentRemove(self.ino, self.node_at, i, self.seed),
                );
                self.res.bad = true;
                continue;
            }
            if !c.valid_range(child, 1) || !self.seen.insert(child) {
                c.p.error_fix(
                    1,
                    "PR_1_EXTENT_BAD_START_BLK",
                    format!("Inode {ino} has an invalid extent node (blk {child}, lblk {l})"),
                    Fix::ExtentRemove(self.ino, self.node_at, i, self.seed),
                );
                self.res.bad = true;
                continue;
            }
            c.claim(child, 1, ino);
            self.res.blocks += 1;
            let mut buf = vec![0u8; c.geo.block_size as usize];
            if c.fs
                .device()
                .read_at(&mut buf, child * u64::from(c.geo.block_size))
                .is_err()
            {
                c.p.error(
                    1,
                    "PR_1_READ_EXTENT",
                    format!("Error while reading over extent tree in inode {ino} (block {child})"),
                );
                self.res.bad = true;
                continue;
            }
            let parsed = ExtentNode::parse(&buf);
            match parsed {
                Ok(n) if n.depth() + 1 == depth => {
                    if c.csum() && verify_extent_block_checksum(self.seed, &buf).is_err() {
                        c.p.error_fix(
                            1,
                            "PR_1_EXTENT_ONLY_CSUM_INVALID",
                            format!(
                                "Inode {ino} extent block passes checks, but checksum does not \
                                 match extent\n\t(logical block {l}, physical block {child})"
                            ),
                            crate::fix::Fix::ExtentBlockChecksum(child, self.seed),
                        );
                        self.res.bad = true;
                    }
                    let first = n
                        .extents()
                        .and_then(|e| e.first().map(|x| x.ee_block.get()))
                        .or_else(|| {
                            n.indexes()
                                .and_then(|x| x.first().map(|x| x.ei_block.get()))
                        });
                    if let Some(f) = first.filter(|&f| u64::from(f) != l) {
                        // As e2fsck: the index takes its node's first block.
                        c.p.error_fix(
                            1,
                            "PR_1_EXTENT_INDEX_START_INVALID",
                            format!(
                                "Interior extent node level {level} of inode {ino}:\nLogical \
                                 start {l} does not match logical start {f} at next level."
                            ),
                            Fix::ExtentIndexStart(self.ino, self.node_at, i, f, self.seed),
                        );
                        self.res.bad = true;
                    }
                    let saved = self.node_at.replace(child);
                    self.node(c, &n, l, next, level + 1);
                    self.node_at = saved;
                }
                _ => {
                    c.p.error_fix(
                        1,
                        "PR_1_EXTENT_HEADER_INVALID",
                        format!("Inode {ino} has an invalid extent node (blk {child}, lblk {l})"),
                        Fix::ExtentRemove(self.ino, self.node_at, i, self.seed),
                    );
                    self.res.bad = true;
                }
            }
        }
    }
}

/// Where a block pointer is stored.
#[derive(Clone, Copy)]
enum Ptr {
    /// `i_block[slot]`.
    Inode(usize),
    /// Entry `i` of an indirect block.
    Indirect(u64, usize),
}

/// Walks an ext2/3 block map, claiming data and indirect blocks.
pub(crate) fn blockmap(c: &mut Ctx, ino: u32, inode: &Inode, want_runs: bool) -> MapResult {
    let mut res = MapResult::default();
    let limit = dir_limit(c, inode, want_runs);
    let words = inode.block_words();
    let apb = u64::from(addr_per_block(c.geo.block_size));
    let mut last_phys_end: Option<u64> = None;
    let mut illegal = 0u32;
    // (block, level, first logical, where the pointer is) to visit;
    // level 0 = data block.
    let mut stack: Vec<(u32, u32, u64, Ptr)> = Vec::new();
    let mut base = NDIR_BLOCKS as u64;
    for (slot, level) in [(12usize, 1u32), (13, 2), (14, 3)] {
        stack.push((words[slot], level, base, Ptr::Inode(slot)));
        base += apb.pow(level);
    }
    stack.reverse();
    for (i, &w) in words.iter().enumerate().take(NDIR_BLOCKS).rev() {
        stack.push((w, 0, i as u64, Ptr::Inode(i)));
    }
    while let Some((b, level, l, at)) = stack.pop() {
        if b == 0 {
            continue;
        }
        let b64 = u64::from(b);
        if !c.valid_range(b64, 1) {
            illegal += 1;
            // Repair as e2fsck: the pointer is cleared.
            let fix = match at {
                Ptr::Inode(slot) => Fix::InodeBlockSlot(ino, slot),
                Ptr::Indirect(blk, i) => Fix::IndirectEntry(blk, i),
            };
            let msg = format!("Illegal block #{l} ({b}) in inode {ino}.");
            c.p.error_fix(1, "PR_1_ILLEGAL_BLOCK_NUM", msg, fix);
            res.bad = true;
            if illegal > 256 {
                // e2fsck gives up on the inode here too; a garbage indirect
                // block must not cost millions of reads.
                break;
            }
            continue;
        }
        if level == 0 && limit.is_some_and(|m| l > m) {
            let fix = match at {
                Ptr::Inode(slot) => Fix::InodeBlockSlot(ino, slot),
                Ptr::Indirect(blk, i) => Fix::IndirectEntry(blk, i),
            };
            let msg = format!("Block #{l} ({b}) causes directory to be too big.");
            c.p.error_fix(1, "PR_1_TOOBIG_DIR", msg, fix);
            res.bad = true;
            continue;
        }
        c.claim(b64, 1, ino);
        res.blocks += 1;
        if level == 0 {
            res.end_lblk = res.end_lblk.max(l + 1);
            res.end_init_lblk = res.end_lblk;
            if want_runs {
                match res.runs.last_mut() {
                    Some(r) if r.0 + r.2 == l && r.1 + r.2 == b64 => r.2 += 1,
                    _ => res.runs.push((l, b64, 1)),
                }
            }
            if last_phys_end.is_some_and(|x| x != b64) {
                res.fragmented = true;
            }
            last_phys_end = Some(b64 + 1);
            continue;
        }
        let mut buf = vec![0u8; c.geo.block_size as usize];
        if c.fs
            .device()
            .read_at(&mut buf, b64 * u64::from(c.geo.block_size))
            .is_err()
        {
            res.bad = true;
            continue;
        }
        let Ok(ind) = IndirectBlock::parse(&buf) else {
            continue;
        };
        let span = apb.pow(level - 1);
        let children: Vec<(u32, u32, u64, Ptr)> = ind
            .iter()
            .enumerate()
            .map(|(i, x)| {
                (
                    u32::try_from(x.0).unwrap_or(u32::MAX),
                    level - 1,
                    l + i as u64 * span,
                    Ptr::Indirect(b64, i),
                )
            })
            .collect();
        stack.extend(children.into_iter().rev());
    }
    if illegal > 12 {
        c.p.error(
            1,
            "PR_1_TOO_MANY_BAD_BLOCKS",
            format!("Too many illegal blocks in inode {ino} ({illegal})."),
        );
    }
    res
}
