//! Pass 1's walk of an inode's block map (extent trees: see
//! [`crate::pass1_extents`]): every block claimed, every structural
//! problem reported with e2fsck's wording, the walk going on past a bad
//! pointer where it can.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::blockmap::IndirectBlock;
use ext4r_format::inode::Inode;
use ext4r_txn::map::walk::{self, Ptr, Step, Visitor};

use crate::ctx::Ctx;

/// The bad block list's inode (its blocks are no file's).
const BAD_INO: u32 = ext4r_format::inode::ino::BAD;
const RESIZE_INO: u32 = ext4r_format::inode::ino::RESIZE;
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
    /// The inode is cleared (too many illegal blocks): nothing more to
    /// check.
    pub cleared: bool,
    /// The highest logical block whose pointer is illegal, plus one (0:
    /// none): a repair clears it, and e2fsck then gives a directory a new
    /// block there in pass 2.
    pub illegal_end: u64,
}

/// For a directory (`is_dir`), the logical block count past which it is
/// too big (2 GiB; e2fsck's PR_1_TOOBIG_DIR), unless largedir or a size
/// above 4 GiB lifts the limit.
pub(crate) fn dir_limit(c: &Ctx, inode: &Inode, is_dir: bool) -> Option<u64> {
    let largedir = c
        .sb()
        .has_incompat(ext4r_format::features::Incompat::LARGEDIR);
    (is_dir && !largedir && inode.i_size_high.get() == 0)
        .then(|| 1u64 << (31 - c.geo().block_size.trailing_zeros()))
}

/// Walks an ext2/3 block map, claiming data and indirect blocks.
pub(crate) fn blockmap(c: &mut Ctx, ino: u32, inode: &Inode, want_runs: bool) -> MapResult {
    let limit = dir_limit(c, inode, want_runs);
    let bs = c.geo().block_size;
    let max_blocks = 1u64 << (31 - (bs.trailing_zeros() - 10));
    let mut w = MapCheck {
        limit,
        max_blocks,
        c,
        ino,
        is_dir: inode.is_dir(),
        is_reg: inode.is_reg(),
        want_runs,
        res: MapResult::default(),
        last_phys_end: None,
        illegal: 0,
        bb_walk: crate::bb_tree::Walk::default(),
    };
    let mut words = inode.i_block;
    let Ok(_) = walk::block_map(&mut words, bs, &mut w);
    w.res
}

/// Pass 1's judgement of each pointer of a block map, as the walk meets
/// them.
struct MapCheck<'a> {
    c: &'a mut Ctx,
    ino: u32,
    /// See [`dir_limit`].
    limit: Option<u64>,
    is_dir: bool,
    is_reg: bool,
    want_runs: bool,
    /// e2fsck's size limit for a regular file, in blocks.
    max_blocks: u64,
    res: MapResult,
    last_phys_end: Option<u64>,
    illegal: u32,
    /// The bad block inode's own checks (see [`crate::bb_tree`]).
    bb_walk: crate::bb_tree::Walk,
}

impl MapCheck<'_> {
    /// Repair as e2fsck: the pointer is cleared.
    fn clear(&self, p: &Ptr) -> Fix {
        match p.slot.block {
            None => Fix::InodeBlockSlot(self.ino, p.slot.index),
            Some(blk) => Fix::IndirectEntry(blk, p.slot.index),
        }
    }
}

impl Visitor for MapCheck<'_> {
    type Error = std::convert::Infallible;

    fn pointer(&mut self, p: &Ptr) -> Result<Step, Self::Error> {
        let (c, ino) = (&mut *self.c, self.ino);
        let (b, l, b64) = (p.physical, p.logical, p.physical);
        if !c.valid_range(b64, 1) {
            self.illegal += 1;
            if too_many(c, ino, self.illegal, &mut self.res) {
                return Ok(Step::Stop);
            }
            let fix = self.clear(p);
            let c = &mut *self.c;
            let what = block_desc(p);
            if ino == BAD_INO {
                // e2fsck's process_bad_block.
                let msg = format!("Illegal {what} ({b}) in bad block inode.");
                c.report(Subject::pointer(ino, p.slot)).error_fix(
                    1,
                    ProblemCode::PR_1_BB_ILLEGAL_BLOCK_NUM,
                    msg,
                    fix,
                );
                c.latch_last(
                    ProblemCode::PR_1_INODE_BBLOCK_LATCH,
                    "Bad block inode has illegal block(s).".into(),
                );
            } else {
                let msg = format!("Illegal {what} ({b}) in inode {ino}.");
                c.report(Subject::pointer(ino, p.slot)).error_fix(
                    1,
                    ProblemCode::PR_1_ILLEGAL_BLOCK_NUM,
                    msg,
                    fix,
                );
                c.latch_last(
                    ProblemCode::PR_1_INODE_BLOCK_LATCH,
                    format!("Inode {ino} has illegal block(s)."),
                );
                if p.levels == 0 {
                    self.res.illegal_end = self.res.illegal_end.max(l + 1);
                }
            }
            self.res.bad = true;
            if self.illegal > 256 {
                // e2fsck gives up on the inode here too; a garbage indirect
                // block must not cost millions of reads.
                return Ok(Step::Stop);
            }
            return Ok(Step::Next);
        }
        let mut follow_only = false;
        if ino == BAD_INO {
            let fix = match p.slot.block {
                None => Fix::InodeBlockSlot(ino, p.slot.index),
                Some(blk) => Fix::IndirectEntry(blk, p.slot.index),
            };
            let level = u32::from(p.levels);
            match crate::bb_tree::judge(c, b64, level, fix, &mut self.bb_walk) {
                crate::bb_tree::Verdict::Usual => {}
                crate::bb_tree::Verdict::Skip => return Ok(Step::Next),
                crate::bb_tree::Verdict::Follow => follow_only = true,
            }
        }
        // e2fsck's limits by kind: a symlink (or other non-file) maps one
        // block at most; a file fewer than 2^31 bytes' worth of blocks
        // per 1 KiB of block size.
        let (is_dir, is_reg) = (self.is_dir, self.is_reg);
        let too_big = if p.levels == 0 && !is_dir && !is_reg && l > 0 && ino != BAD_INO {
            Some(ProblemCode::PR_1_TOOBIG_SYMLINK)
        } else if is_reg && self.res.blocks + 1 >= self.max_blocks {
            Some(ProblemCode::PR_1_TOOBIG_REG)
        } else {
            None
        };
        if let Some(code) = too_big {
            self.illegal += 1;
            if too_many(c, ino, self.illegal, &mut self.res) {
                return Ok(Step::Stop);
            }
            let fix = self.clear(p);
            let what = if is_reg { "file" } else { "symlink" };
            let msg = format!("{} ({b}) causes {what} to be too big.", cap(&block_desc(p)));
            self.c
                .report(Subject::pointer(ino, p.slot))
                .error_fix(1, code, msg, fix);
            self.c.latch_last(
                ProblemCode::PR_1_INODE_TOOBIG,
                format!("Inode {ino} is too big."),
            );
            self.res.bad = true;
            return Ok(Step::Next);
        }
        if p.levels == 0 && self.limit.is_some_and(|m| l > m) {
            self.illegal += 1;
            if too_many(c, ino, self.illegal, &mut self.res) {
                return Ok(Step::Stop);
            }
            let fix = self.clear(p);
            let msg = format!(
                "{} ({b}) causes directory to be too big.",
                cap(&block_desc(p))
            );
            self.c.report(Subject::pointer(ino, p.slot)).error_fix(
                1,
                ProblemCode::PR_1_TOOBIG_DIR,
                msg,
                fix,
            );
            self.c.latch_last(
                ProblemCode::PR_1_INODE_TOOBIG,
                format!("Inode {ino} is too big."),
            );
            self.res.bad = true;
            return Ok(Step::Next);
        }
        let res = &mut self.res;
        if !follow_only {
            c.claim(b64, 1, ino);
            res.blocks += 1;
        }
        // e2fsck's chain of blocks for its fragmentation check: every
        // block in the order the map is walked, an indirect block before
        // those it maps (the resize inode's map is not a file's).
        if ino != RESIZE_INO {
            if self.last_phys_end.is_some_and(|x| x != b64) {
                res.fragmented = true;
            }
            self.last_phys_end = Some(b64 + 1);
        }
        if p.levels > 0 {
            return Ok(Step::Descend);
        }
        res.end_lblk = res.end_lblk.max(l + 1);
        res.end_init_lblk = res.end_lblk;
        if self.want_runs {
            match res.runs.last_mut() {
                Some(r) if r.0 + r.2 == l && r.1 + r.2 == b64 => r.2 += 1,
                _ => res.runs.push((l, b64, 1)),
            }
        }
        Ok(Step::Next)
    }

    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>, Self::Error> {
        let bs = self.c.geo().block_size;
        let mut buf = vec![0u8; bs as usize];
        if self
            .c
            .fs()
            .device()
            .read_at(&mut buf, p.physical * u64::from(bs))
            .is_err()
        {
            self.res.bad = true;
            return Ok(None);
        }
        Ok(IndirectBlock::parse(&buf).is_ok().then_some(buf))
    }
}

/// e2fsck's process_block: every twelfth bad pointer asks "Too many
/// illegal blocks in inode.  Clear inode?"; a repair clears it there and
/// the walk stops (returns true). A read-only check says it once and
/// goes on.
/// e2fsck's `%B`: which block of the inode a pointer holds ("block #7",
/// or the indirect block it is).
fn block_desc(p: &Ptr) -> String {
    match p.levels {
        0 => format!("block #{}", p.logical),
        1 => "indirect block".into(),
        2 => "double indirect block".into(),
        _ => "triple indirect block".into(),
    }
}

/// `%B` at the start of a message: capitalised.
fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

fn too_many(c: &mut Ctx, ino: u32, illegal: u32, res: &mut MapResult) -> bool {
    if illegal != 12 && !(c.repairing() && illegal % 12 == 0) {
        return false;
    }
    if ino == BAD_INO {
        return false;
    }
    c.report(Subject::Inode(ino)).error_fix(
        1,
        ProblemCode::PR_1_TOO_MANY_BAD_BLOCKS,
        format!("Too many illegal blocks in inode {ino}."),
        Fix::ClearInode(ino),
    );
    if c.repairing() {
        res.cleared = true;
        res.bad = true;
        return true;
    }
    false
}
