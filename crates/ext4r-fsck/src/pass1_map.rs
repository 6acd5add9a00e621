//! Pass 1's walk of an inode's block map (extent trees: see
//! [`crate::pass1_extents`]): every block claimed, every structural
//! problem reported with e2fsck's wording, the walk going on past a bad
//! pointer where it can.

use ext4r_format::blockmap::{addr_per_block, IndirectBlock, NDIR_BLOCKS};
use ext4r_format::inode::Inode;

use crate::ctx::Ctx;

/// The bad block list's inode (its blocks are no file's).
const BAD_INO: u32 = ext4r_format::inode::ino::BAD;
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
}

/// For a directory (`is_dir`), the logical block count past which it is
/// too big (2 GiB; e2fsck's PR_1_TOOBIG_DIR), unless largedir or a size
/// above 4 GiB lifts the limit.
pub(crate) fn dir_limit(c: &Ctx, inode: &Inode, is_dir: bool) -> Option<u64> {
    let largedir =
        c.sb.has_incompat(ext4r_format::features::Incompat::LARGEDIR);
    (is_dir && !largedir && inode.i_size_high.get() == 0)
        .then(|| 1u64 << (31 - c.geo.block_size.trailing_zeros()))
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
    let is_dir = inode.is_dir();
    let is_reg = inode.is_reg();
    let max_blocks = 1u64 << (31 - (c.geo.block_size.trailing_zeros() - 10));
    let mut last_phys_end: Option<u64> = None;
    let mut illegal = 0u32;
    let mut bb_walk = crate::bb_tree::Walk::default();
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
            if too_many(c, ino, illegal, &mut res) {
                break;
            }
            // Repair as e2fsck: the pointer is cleared.
            let fix = match at {
                Ptr::Inode(slot) => Fix::InodeBlockSlot(ino, slot),
                Ptr::Indirect(blk, i) => Fix::IndirectEntry(blk, i),
            };
            if ino == BAD_INO {
                // e2fsck's process_bad_block.
                let msg = format!("Illegal block #{l} ({b}) in bad block inode.");
                c.p.error_fix(1, "PR_1_BB_ILLEGAL_BLOCK_NUM", msg, fix);
            } else {
                let msg = format!("Illegal block #{l} ({b}) in inode {ino}.");
                c.p.error_fix(1, "PR_1_ILLEGAL_BLOCK_NUM", msg, fix);
            }
            res.bad = true;
            if illegal > 256 {
                // e2fsck gives up on the inode here too; a garbage indirect
                // block must not cost millions of reads.
                break;
            }
            continue;
        }
        let mut follow_only = false;
        if ino == BAD_INO {
            let fix = match at {
                Ptr::Inode(slot) => Fix::InodeBlockSlot(ino, slot),
                Ptr::Indirect(blk, i) => Fix::IndirectEntry(blk, i),
            };
            match crate::bb_tree::judge(c, b64, level, fix, &mut bb_walk) {
                crate::bb_tree::Verdict::Usual => {}
                crate::bb_tree::Verdict::Skip => continue,
                crate::bb_tree::Verdict::Follow => follow_only = true,
            }
        }
        // e2fsck's limits by kind: a symlink (or other non-file) maps one
        // block at most; a file fewer than 2^31 bytes' worth of blocks
        // per 1 KiB of block size.
        let too_big = if level == 0 && !is_dir && !is_reg && l > 0 && ino != BAD_INO {
            Some("PR_1_TOOBIG_SYMLINK")
        } else if is_reg && res.blocks + 1 >= max_blocks {
            Some("PR_1_TOOBIG_REG")
        } else {
            None
        };
        if let Some(code) = too_big {
            illegal += 1;
            if too_many(c, ino, illegal, &mut res) {
                break;
            }
            let fix = match at {
                Ptr::Inode(slot) => Fix::InodeBlockSlot(ino, slot),
                Ptr::Indirect(blk, i) => Fix::IndirectEntry(blk, i),
            };
            let what = if is_reg { "file" } else { "symlink" };
            let msg = format!("Block #{l} ({b}) causes {what} to be too big.");
            c.p.error_fix(1, code, msg, fix);
            res.bad = true;
            continue;
        }
        if level == 0 && limit.is_some_and(|m| l > m) {
            illegal += 1;
            if too_many(c, ino, illegal, &mut res) {
                break;
            }
            let fix = match at {
                Ptr::Inode(slot) => Fix::InodeBlockSlot(ino, slot),
                Ptr::Indirect(blk, i) => Fix::IndirectEntry(blk, i),
            };
            let msg = format!("Block #{l} ({b}) causes directory to be too big.");
            c.p.error_fix(1, "PR_1_TOOBIG_DIR", msg, fix);
            res.bad = true;
            continue;
        }
        if !follow_only {
            c.claim(b64, 1, ino);
            res.blocks += 1;
        }
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
    res
}

/// e2fsck's process_block: every twelfth bad pointer asks "Too many
/// illegal blocks in inode.  Clear inode?"; a repair clears it there and
/// the walk stops (returns true). A read-only check says it once and
/// goes on.
fn too_many(c: &mut Ctx, ino: u32, illegal: u32, res: &mut MapResult) -> bool {
    if illegal != 12 && !(c.repairing && illegal % 12 == 0) {
        return false;
    }
    if ino == BAD_INO {
        return false;
    }
    c.p.error_fix(
        1,
        "PR_1_TOO_MANY_BAD_BLOCKS",
        format!("Too many illegal blocks in inode {ino}."),
        Fix::ClearInode(ino),
    );
    if c.repairing {
        res.cleared = true;
        res.bad = true;
        return true;
    }
    false
}
