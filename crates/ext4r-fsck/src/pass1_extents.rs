//! Pass 1's walk of an extent tree, as e2fsck's `scan_extent_node` walks
//! it through libext2fs: by levels from the root (a node is a leaf when
//! it is the root's `eh_depth` levels down, whatever its own header says),
//! every block claimed, every entry that cannot be right removed, the walk
//! going on past a bad node where it can.
//!
//! A root deeper than the tree can usefully be (e2fsck's "could be more
//! shallow", `PR_1_EXTENT_BAD_MAX_DEPTH`) is walked all the same and its
//! tree rebuilt from the extents found (see [`crate::extent_rebuild`]):
//! the data stays.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use std::collections::HashSet;

use ext4r_format::extent::{verify_extent_block_checksum, Extent, EXTENT_MAGIC};
use ext4r_format::inode::Inode;
use ext4r_txn::map::walk::{self, Entry, Ptr, Step, Visitor};

use crate::ctx::Ctx;
use crate::extent_depth::{parse_at, stored};
use crate::fix::Fix;
use crate::pass1_map::{dir_limit, MapResult};

/// Levels walked at most: a deeper chain is not an extent tree (each level
/// needs a block of its own, and the kernel stops at 5).
const MAX_WALK_DEPTH: u16 = 32;

/// The deepest tree libext2fs considers useful for this block size
/// (`ext2fs_max_extent_depth`): enough levels to map 2^32 blocks from the
/// root's 4 slots.
fn max_useful_depth(block_size: u32) -> u16 {
    let per_block = u64::from(block_size.saturating_sub(12) / 12).max(2);
    let log2 = |x: u64| 63 - x.leading_zeros() as u64;
    // At most 30: a depth.
    ext4r_format::num::sat_u16(1 + (31 - log2(4)) / log2(per_block))
}

/// Walks an extent tree, claiming its blocks.
pub(crate) fn extents(c: &mut Ctx, ino: u32, inode: &Inode, want_runs: bool) -> MapResult {
    let mut w = ExtWalk {
        dir_limit: dir_limit(c, inode, want_runs),
        ino,
        owner: crate::fix::Owner::of(ino, inode),
        res: MapResult::default(),
        want_runs,
        seen: None,
        last_phys_end: None,
        start: 0,
        rebuild: None,
        last_mapped: None,
        eof: blocks_to(inode.size(), c.geo().block_size),
        verity: inode
            .flags()
            .contains(ext4r_format::inode::InodeFlags::VERITY),
        next_lblk: 0,
        csum_pending: Vec::new(),
        last_entry: (0, 0, 0),
        levels: [(0, 0); MAX_LEVELS],
        levels_used: 0,
        collect: None,
    };
    let mut root = inode.i_block;
    // A root whose stored depth contradicts its entries is read at the
    // depth they show (and the field repaired), where libext2fs would
    // read every entry as the wrong kind and drop it.
    if let Some(d) = crate::extent_depth::root_depth(c, &root) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::EXT4R_1_EXTENT_ROOT_DEPTH,
            format!(
                "Inode {ino} extent tree root says depth {}, its entries show depth {d}.",
                stored(&root)
            ),
            Fix::ExtentDepth(ino, None, d, w.owner),
        );
        root[6..8].copy_from_slice(&d.to_le_bytes());
    }
    let depth = stored(&root);
    // Every block size allows at least 2 levels: the division in
    // `max_useful_depth` (a tenth of this function's time when done for
    // every inode) is skipped for the roots nearly all files have.
    if depth > 1 && depth <= MAX_WALK_DEPTH && depth > max_useful_depth(c.geo().block_size) {
        w.rebuild = Some(crate::extent_rebuild::Collected::default());
    }
    // A tree of more than a root may be rebuilt for its shape: its
    // extents and nodes are kept while it is walked (directories are left
    // to pass 3A, which rewrites their blocks).
    if depth >= 1 && w.rebuild.is_none() && c.repairing() && c.optimize_extents() && !inode.is_dir()
    {
        w.collect = Some(crate::extent_rebuild::Collected::default());
    }
    let problems_before = c.problems().mark();
    let mut copy = root;
    let walkable = depth <= MAX_WALK_DEPTH;
    match parse_at(&mut copy, depth.min(1)).ok().filter(|_| walkable) {
        Some(_) => {
            w.res.depth = depth;
            // libext2fs ends the root's last index entry at the block
            // i_size reaches: what lies under it past that is out of
            // bounds (a leaf root has no such end).
            let end = if depth == 0 { u64::MAX } else { w.eof };
            // The root's entries are walked as `copy` holds them (its
            // depth field set to the kind they are read as).
            w.count_node(0, &copy);
            let mut v = Check { c, w: &mut w };
            // A root with no entries (an empty file's) has nothing to
            // walk: the call is left out for the many that are.
            if copy[2..4] != [0, 0] {
                let Ok(_) = walk::extent_tree(&mut copy, depth, end, &mut v);
            }
        }
        None => {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_MISSING_EXTENT_HEADER,
                format!("Inode {ino} has corrupt extent header."),
                crate::fix::Fix::ClearInode(ino),
            );
            w.res.bad = true;
            // Cleared in a repair: pass 2 finds the inode unused, as
            // e2fsck's does.
            w.res.cleared = c.repairing();
        }
    }
    // A tree rebuilt for its depth is not judged again (e2fsck's
    // force_rebuild, set only when that rebuild is accepted).
    let judge = (w.rebuild.is_none() || !c.repairing()) && w.levels_used > 0;
    if let Some(found) = w.rebuild.take() {
        let useful = max_useful_depth(c.geo().block_size);
        let msg = format!(
            "Inode {ino} extent tree could be more shallow ({depth}; could be <= {useful})"
        );
        // PR_NO_OK: left as it is, the tree is still sound.
        let fix = crate::extent_rebuild::plan_accounted(c, ino, w.owner, found);
        c.report(Subject::Inode(ino)).harmless_or_fix(
            1,
            ProblemCode::PR_1_EXTENT_BAD_MAX_DEPTH,
            msg,
            fix,
        );
    }
    if judge && c.optimize_extents() {
        if let Some((code, msg)) = could_be_smaller(c, ino, &w.levels[..w.levels_used], depth) {
            // Rebuilt only from a walk that found nothing wrong (a tree
            // being repaired is judged again by the next check).
            let sound = !w.res.bad && c.problems().mark() == problems_before;
            let fix = match w.collect.take() {
                Some(found) if sound => {
                    crate::extent_rebuild::plan_accounted(c, ino, w.owner, found)
                }
                _ => None,
            };
            c.report(Subject::Inode(ino))
                .harmless_or_fix(1, code, msg, fix);
        }
    }
    w.res
}

struct ExtWalk {
    /// See [`dir_limit`].
    dir_limit: Option<u64>,
    ino: u32,
    /// The inode, as the write layer stamps its tree blocks.
    owner: crate::fix::Owner,
    res: MapResult,
    want_runs: bool,
    /// Tree blocks met so far; made at the first index entry (most roots
    /// are leaves, and a set made per inode was a per-inode thread-local
    /// lookup for its hasher's keys).
    seen: Option<HashSet<u64>>,
    last_phys_end: Option<u64>,
    /// e2fsck's start_block in the leaf being walked: the node's start,
    /// then the last block of the extent before (out of order below it;
    /// from it on, a collision with what the file maps already).
    start: u64,
    /// The tree is rebuilt: its extents and blocks are collected, and its
    /// nodes' own fields are not repaired.
    rebuild: Option<crate::extent_rebuild::Collected>,
    /// The last (logical, physical) block mapped so far.
    last_mapped: Option<(u64, u64)>,
    /// Blocks up to the end of i_size: unwritten extents past it may lie
    /// beyond an index entry's range (fallocate with KEEP_SIZE).
    eof: u64,
    /// fs-verity keeps its Merkle tree past i_size.
    verity: bool,
    /// One past the highest logical block mapped so far (e2fsck's
    /// next_lblock).
    next_lblk: u64,
    /// Per node entered, its block when its checksum is bad and only said
    /// once its entries have been walked, as e2fsck says it.
    csum_pending: Vec<Option<u64>>,
    /// The last entry walked, (logical, physical, length): what e2fsck's
    /// problem context holds when it says a node's checksum is bad.
    last_entry: (u64, u64, u64),
    /// Per level of the tree (0: the root), the entries its nodes hold
    /// and could hold (e2fsck's `extent_tree_level`): in place, for a
    /// list allocated and freed per inode was 3% of the CPU of a check
    /// of the 2M-file image.
    levels: [(u64, u64); MAX_LEVELS],
    /// The levels of [`ExtWalk::levels`] met so far.
    levels_used: usize,
    /// The tree's extents and node blocks, kept for a rebuild of its
    /// shape (e2fsck's pass 1E) when it turns out to need one.
    collect: Option<crate::extent_rebuild::Collected>,
}

impl ExtWalk {
    /// Counts a node walked at `level` into [`ExtWalk::levels`], as
    /// e2fsck's `scan_extent_node`: below the root a node not full holds
    /// one entry fewer than it could ("splitting extent blocks when
    /// appending will leave the old block with one free entry", so such
    /// a tree is not rebuilt again and again).
    fn count_node(&mut self, level: u16, node: &[u8]) {
        let level = usize::from(level);
        if level >= MAX_LEVELS {
            return;
        }
        let entries = crate::extent_depth::u16_at(node, 2);
        let mut max = crate::extent_depth::u16_at(node, 4);
        if level > 0 && entries < max {
            max -= 1;
        }
        self.levels_used = self.levels_used.max(level + 1);
        self.levels[level].0 += entries;
        self.levels[level].1 += max;
    }
}

/// Levels e2fsck keeps statistics for (`MAX_EXTENT_DEPTH_COUNT`).
const MAX_LEVELS: usize = 8;

/// e2fsck's `e2fsck_should_rebuild_extents`: a tree whose levels hold
/// fewer entries than one level less (or fewer nodes) could is worth
/// rebuilding (e2fsck's pass 1E): said, never an error; the caller plans
/// the rebuild. The problem to say, if any.
fn could_be_smaller(
    c: &Ctx,
    ino: u32,
    levels: &[(u64, u64)],
    depth: u16,
) -> Option<(ProblemCode, String)> {
    let per_block = u64::from((c.geo().block_size - 12) / 12);
    let mut said = None;
    if usize::from(depth) > MAX_LEVELS - 1 {
        said = Some((
            ProblemCode::PR_1E_CAN_COLLAPSE_EXTENT_TREE,
            "shorter",
            usize::from(depth),
        ));
    }
    'levels: for (i, &(num, max)) in levels.iter().enumerate().take(usize::from(depth) + 1) {
        if said.is_some() {
            break;
        }
        if max.saturating_sub(num) > per_block {
            said = Some((ProblemCode::PR_1E_CAN_NARROW_EXTENT_TREE, "narrower", i));
            break;
        }
        for &(_, above_max) in &levels[..i] {
            if num < above_max {
                said = Some((ProblemCode::PR_1E_CAN_COLLAPSE_EXTENT_TREE, "shorter", i));
                break 'levels;
            }
        }
    }
    let (code, how, level) = said?;
    Some((
        code,
        format!("Inode {ino} extent tree (at level {level}) could be {how}."),
    ))
}

/// Blocks of `block_size` (a power of two) that `bytes` take, rounded
/// up: `div_ceil` by a shift, for it runs for every extent-mapped inode.
fn blocks_to(bytes: u64, block_size: u32) -> u64 {
    let bits = block_size.trailing_zeros();
    (bytes >> bits) + u64::from(bytes & (u64::from(block_size) - 1) != 0)
}

/// The end (exclusive) of the logical range libext2fs gives an index
/// entry starting at `l` whose next sibling (or the end of its parent's
/// range) is `next`: `e_len` is their difference in 32 bits, and an
/// end of 0 means no end (e2fsck's `end_block && ...`), quirks and all.
fn entry_bound(l: u64, next: u64) -> u64 {
    if next == u64::MAX {
        return u64::MAX;
    }
    let len = u64::from(ext4r_format::num::lo32(next.wrapping_sub(l)));
    let last = l.wrapping_add(len).wrapping_sub(1);
    if last == 0 || last == u64::MAX {
        u64::MAX
    } else {
        last + 1
    }
}

/// libext2fs' `has_unaligned_cluster_map` (bigalloc): a block must sit at
/// its logical block's offset in its cluster, and blocks of one logical
/// cluster in one physical cluster.
fn misaligned(c: &Ctx, last: Option<(u64, u64)>, l: u64, p: u64) -> bool {
    let bits = c.geo().cluster_bits;
    if bits == 0 {
        return false;
    }
    let mask = (1u64 << bits) - 1;
    if l & mask != p & mask {
        return true;
    }
    last.is_some_and(|(ll, lp)| l & mask != 0 && l >> bits == ll >> bits && p >> bits != lp >> bits)
}

/// The walk's visitor: pass 1's checks with the context they report to.
struct Check<'a> {
    c: &'a mut Ctx,
    w: &'a mut ExtWalk,
}

impl Visitor for Check<'_> {
    type Error = std::convert::Infallible;

    fn pointer(&mut self, p: &Ptr) -> Result<Step, Self::Error> {
        Ok(match p.entry {
            Entry::Extent(e) => {
                self.w.extent(self.c, p, e);
                Step::Next
            }
            _ => self.w.index(self.c, p),
        })
    }

    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>, Self::Error> {
        Ok(self.w.enter(self.c, p))
    }

    fn leave(&mut self, _: &Ptr, _: Vec<u8>, _: bool) -> Result<Step, Self::Error> {
        self.w.leave(self.c);
        Ok(Step::Next)
    }

    fn node_end(&self, p: &Ptr) -> u64 {
        entry_bound(p.logical, p.next)
    }

    fn node_start(&self, p: &Ptr, child: &[u8]) -> u64 {
        // The node under an index starts where its first entry does, as
        // e2fsck passes it on (see `ExtWalk::enter`).
        let count = child
            .get(2..4)
            .map_or(0, |x| u16::from_le_bytes([x[0], x[1]]));
        match child.get(12..16) {
            Some(x) if count > 0 => u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]])),
            _ => p.logical,
        }
    }
}

impl ExtWalk {
    /// After a node's entries: its bad checksum, said with the last entry
    /// walked below it (e2fsck's problem context then: the last extent of
    /// the node's subtree).
    fn leave(&mut self, c: &mut Ctx) {
        if let Some(Some(child)) = self.csum_pending.pop() {
            let (l, p, n) = self.last_entry;
            c.report(Subject::Block(child)).error_fix(
                1,
                ProblemCode::PR_1_EXTENT_ONLY_CSUM_INVALID,
                format!(
                    "Inode {} extent block passes checks, but checksum does not match \
                     extent\n\t(logical block {l}, physical block {p}, len {n})",
                    self.ino
                ),
                crate::fix::Fix::ExtentBlockChecksum(child, self.owner),
            );
            self.res.bad = true;
        }
    }

    /// A fix to an entry of the node being walked rewrites the node, and
    /// so its checksum: its bad checksum is not said on its own (e2fsck
    /// clears `failed_csum` after such a fix; not when only checking, the
    /// fix declined).
    fn node_rewritten(&mut self, repairing: bool) {
        if let Some(top) = self.csum_pending.last_mut().filter(|_| repairing) {
            *top = None;
        }
    }

    fn remove(&self, p: &Ptr) -> Fix {
        Fix::ExtentRemove(self.ino, p.slot.block, p.slot.index, self.owner)
    }

    /// One entry of a leaf covering `[p.lo, p.hi)`.
    fn extent(&mut self, c: &mut Ctx, at: &Ptr, e: Extent) {
        let ino = self.ino;
        let hi = at.hi;
        let start = self.start;
        let l = u64::from(e.ee_block.get());
        let n = u64::from(e.len());
        let p = e.start().0;
        let total = c.geo().blocks_count;
        self.last_entry = (l, p, n);
        // Only built for a problem: this runs for every extent.
        let place = || format!("(logical block {l}, physical block {p}, len {n})");
        let bad = if p == 0 || p < c.geo().first_data_block || p >= total {
            Some((
                ProblemCode::PR_1_EXTENT_BAD_START_BLK,
                format!(
                    "Inode {ino} has an invalid extent\n\t(logical block {l}, invalid \
                         physical block {p}, len {n})"
                ),
            ))
        } else if l < start {
            Some((
                ProblemCode::PR_1_OUT_OF_ORDER_EXTENTS,
                format!(
                    "Inode {ino} has out of order extents\n\t(invalid logical block {l}, \
                     physical block {p}, len {n})"
                ),
            ))
        } else if (l + n > hi && !((e.is_unwritten() || self.verity) && l + n > self.eof))
            || l > u64::from(u32::MAX)
        {
            Some((
                ProblemCode::PR_1_EXTENT_END_OUT_OF_BOUNDS,
                format!(
                    "Inode {ino}, end of extent exceeds allowed value\n\t{}",
                    place()
                ),
            ))
        } else if n == 0 {
            Some((
                ProblemCode::PR_1_EXTENT_LENGTH_ZERO,
                format!(
                    "Inode {ino} has zero length extent\n\t(invalid logical block {l}, \
                     physical block {p})"
                ),
            ))
        } else if p + n > total {
            Some((
                ProblemCode::PR_1_EXTENT_ENDS_BEYOND,
                format!(
                    "Inode {ino} has an invalid extent\n\t(logical block {l}, physical \
                     block {p}, invalid len {n})"
                ),
            ))
        } else if self.dir_limit.is_some_and(|m| l + n > m) {
            Some((
                ProblemCode::PR_1_TOOBIG_DIR,
                format!("Block #{l} ({p}) causes directory to be too big."),
            ))
        } else if l < self.next_lblk {
            Some((
                ProblemCode::PR_1_EXTENT_COLLISION,
                format!(
                    "Inode {ino} has a duplicate extent mapping\n\t(logical block {l}, \
                     invalid physical block {p}, len {n})"
                ),
            ))
        } else {
            None
        };
        if let Some((code, msg)) = bad {
            // A tree being rebuilt leaves the entry out instead.
            if self.rebuild.is_some() {
                c.report(Subject::pointer(ino, at.slot)).error(1, code, msg);
            } else {
                c.report(Subject::pointer(ino, at.slot))
                    .error_fix(1, code, msg, self.remove(at));
                self.node_rewritten(c.repairing());
            }
            if code == ProblemCode::PR_1_TOOBIG_DIR {
                c.latch_last(
                    ProblemCode::PR_1_INODE_TOOBIG,
                    format!("Inode {ino} is too big."),
                );
            }
            self.res.bad = true;
            return;
        }
        self.start = l + n - 1;
        self.next_lblk = self.next_lblk.max(l + n);
        // Unwritten blocks in a directory are read as written (e2fsck
        // clears the flag and then judges what they hold).
        let mut e = e;
        if self.want_runs && e.is_unwritten() && self.rebuild.is_none() {
            c.report(Subject::pointer(ino, at.slot)).error_fix(
                1,
                ProblemCode::PR_1_UNINIT_DBLOCK,
                format!("Directory inode {ino} has an unwritten extent at block {l}."),
                Fix::ExtentWritten(self.ino, at.slot.block, at.slot.index, self.owner),
            );
            self.node_rewritten(c.repairing());
            if c.repairing() {
                let len = e.len();
                let _ = e.set_len(len, false);
            }
        }
        let e = &e;
        if let Some(r) = self.rebuild.as_mut().or(self.collect.as_mut()) {
            r.extents.push(*e);
        }
        c.claim(p, n, ino);
        if misaligned(c, self.last_mapped, l, p) {
            // As e2fsck: claimed twice, so that pass 1D gives the
            // extent a copy where its blocks sit as the format wants.
            c.report(Subject::InodeAt(ino, l)).error(
                1,
                ProblemCode::PR_1_MISALIGNED_CLUSTER,
                format!(
                    "Inode {ino} logical block {l} (physical block {p}) violates cluster \
                         allocation rules.\nWill fix in pass 1B."
                ),
            );
            c.claim(p, n, ino);
        }
        self.last_mapped = Some((l + n - 1, p + n - 1));
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

    /// One index entry, in a node `p.level` below the root: claimed and
    /// entered when it can be right.
    fn index(&mut self, c: &mut Ctx, p: &Ptr) -> Step {
        let ino = self.ino;
        let (lo, next, level) = (p.lo, p.next, p.level);
        let fixing = self.rebuild.is_none();
        let l = p.logical;
        let child = p.physical;
        // e2fsck's scan_extent_node holds an index entry to its node's
        // start and, below the root, to the end its parent gives it (the
        // root has none: an entry there starting past i_size is not
        // invalid; its start is set from the node under it).
        let bad = if l < lo || (level > 0 && l >= next) {
            Some((
                ProblemCode::PR_1_EXTENT_INDEX_START_INVALID,
                format!(
                    "Inode {ino} extent tree (at level {level}) has an out of order or \
                     invalid index (logical block {l}, block {child})."
                ),
            ))
        } else if child == 0
            || !c.valid_range(child, 1)
            || !self.seen.get_or_insert_with(HashSet::new).insert(child)
        {
            Some((
                ProblemCode::PR_1_EXTENT_BAD_START_BLK,
                format!("Inode {ino} has an invalid extent node (blk {child}, lblk {l})"),
            ))
        } else {
            None
        };
        if let Some((code, msg)) = bad {
            if fixing {
                c.report(Subject::pointer(ino, p.slot))
                    .error_fix(1, code, msg, self.remove(p));
            } else {
                c.report(Subject::pointer(ino, p.slot)).error(1, code, msg);
            }
            self.res.bad = true;
            return Step::Next;
        }
        c.claim(child, 1, ino);
        self.res.blocks += 1;
        if let Some(r) = self.rebuild.as_mut().or(self.collect.as_mut()) {
            r.blocks.push(child);
        }
        Step::Descend
    }

    /// Reads and judges the node index entry `p` names; its bytes, read
    /// at the depth its place implies, when its entries are to be walked.
    fn enter(&mut self, c: &mut Ctx, p: &Ptr) -> Option<Vec<u8>> {
        let ino = self.ino;
        let fixing = self.rebuild.is_none();
        let (l, child, level, i) = (p.logical, p.physical, p.level, p.slot.index);
        let mut buf = vec![0u8; c.geo().block_size as usize];
        if c.fs()
            .device()
            .read_at(&mut buf, child * u64::from(c.geo().block_size))
            .is_err()
        {
            c.report(Subject::pointer(ino, p.slot)).error(
                1,
                ProblemCode::PR_1_READ_EXTENT,
                format!("Error while reading over extent tree in inode {ino} (block {child})"),
            );
            self.res.bad = true;
            return None;
        }
        // The child is a node one level down, whatever its own
        // eh_depth says (libext2fs walks levels from the root); a
        // wrong one is rewritten, which the kernel needs to read it.
        let own = stored(&buf);
        let want = p.levels;
        if fixing && own != want && buf.get(..2) == Some(&EXTENT_MAGIC.to_le_bytes()[..]) {
            c.report(Subject::pointer(ino, p.slot)).harmless_fix(
                1,
                ProblemCode::EXT4R_1_EXTENT_NODE_DEPTH,
                format!(
                    "Inode {ino} extent block {child} (level {}) says depth {own}, should \
                     be {want}.",
                    level + 1
                ),
                Fix::ExtentDepth(self.ino, Some(child), want, self.owner),
            );
        }
        // The inode's seed is worked out here, for the few inodes with
        // tree blocks (two CRCs an inode when done for every one).
        let csum_bad = c.csum()
            && verify_extent_block_checksum(self.owner.seed(c.sb().csum_seed()), &buf).is_err();
        // A node below the root with no entries (left so by a repair
        // that cleared all it held, or written so): libext2fs cannot go
        // down into it, and e2fsck clears the whole inode ("Failed to
        // iterate extents ... No 'down' extent"). Only the index entry
        // naming it goes here, as for a node with a bad header: the rest
        // of the file is kept.
        let empty = buf.get(..2) == Some(&EXTENT_MAGIC.to_le_bytes()[..])
            && buf.get(2..4) == Some(&[0, 0][..]);
        match parse_at(&mut buf, want.min(1)).ok().filter(|_| !empty) {
            Some(n) => {
                // Said when the node's entries have been walked (see
                // `ExtWalk::leave`).
                self.csum_pending
                    .push((csum_bad && fixing).then_some(child));
                let first = n
                    .extents()
                    .and_then(|e| e.first().map(|x| x.ee_block.get()))
                    .or_else(|| {
                        n.indexes()
                            .and_then(|x| x.first().map(|x| x.ei_block.get()))
                    });
                if let Some(f) = first.filter(|&f| u64::from(f) != l && fixing) {
                    // As e2fsck: the index takes its node's first block.
                    c.report(Subject::pointer(ino, p.slot)).error_fix(
                        1,
                        ProblemCode::PR_1_EXTENT_INDEX_START_INVALID,
                        format!(
                            "Interior extent node level {level} of inode {ino}:\nLogical \
                             start {l} does not match logical start {f} at next level."
                        ),
                        Fix::ExtentIndexStart(self.ino, p.slot.block, i, f, self.owner),
                    );
                    self.res.bad = true;
                }
                // A leaf's extents start where its first does (e2fsck goes
                // down, then passes that on), not where a damaged index
                // says.
                self.start = first.map_or(l, u64::from);
                self.count_node(level + 1, &buf);
                Some(buf)
            }
            None => {
                let msg = format!("Inode {ino} has an invalid extent node (blk {child}, lblk {l})");
                if fixing {
                    c.report(Subject::pointer(ino, p.slot)).error_fix(
                        1,
                        ProblemCode::PR_1_EXTENT_HEADER_INVALID,
                        msg,
                        self.remove(p),
                    );
                } else {
                    c.report(Subject::pointer(ino, p.slot)).error(
                        1,
                        ProblemCode::PR_1_EXTENT_HEADER_INVALID,
                        msg,
                    );
                }
                self.res.bad = true;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ranges_end_as_libext2fs_computes_them() {
        assert_eq!(entry_bound(0, 10), 10);
        assert_eq!(entry_bound(5, u64::MAX), u64::MAX);
        // An end of block 0 is no end.
        assert_eq!(entry_bound(0, 1), u64::MAX);
        assert_eq!(entry_bound(0, 0), u64::MAX);
        // i_size before the entry's start: the length wraps to 2^32 less.
        assert_eq!(entry_bound(10, 4), (1 << 32) + 4);
        // i_size ending where the entry starts: nothing under it fits.
        assert_eq!(entry_bound(10, 10), 10);
    }

    #[test]
    fn blocks_round_up_as_div_ceil() {
        for bs in [1024u32, 4096, 65536] {
            for bytes in [
                0u64,
                1,
                1023,
                1024,
                1025,
                4096,
                65537,
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(blocks_to(bytes, bs), bytes.div_ceil(u64::from(bs)));
            }
        }
    }

    #[test]
    fn useful_depth_is_libext2fs_s() {
        // 84 entries per 1 KiB block: 1 + 29 / 6; 340 per 4 KiB: 1 + 29 / 8.
        assert_eq!(max_useful_depth(1024), 5);
        assert_eq!(max_useful_depth(4096), 4);
    }
}
