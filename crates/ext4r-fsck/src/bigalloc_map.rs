//! A block-mapped file on a bigalloc filesystem (e2fsck's
//! PR_1_NO_BIGALLOC_BLOCKMAP_FILES): the kernel will not allocate
//! clusters to a block map, so a regular file or directory holding data
//! that way is rewritten as an extent tree over the same blocks. Its
//! indirect blocks serve as the tree's nodes when it needs any; the rest
//! are no longer claimed and the next round's pass 5 frees them (see
//! [`crate::extent_rebuild`]). Symlinks are left alone: they are never
//! rewritten.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r::fs::FileKind;
use ext4r_format::extent::Extent;
use ext4r_format::features::RoCompat;
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::BlockNr;

use crate::ctx::Ctx;
use crate::extent_rebuild::Collected;
use crate::fix::{Fix, Owner};

/// Longest initialised extent.
const MAX_LEN: u64 = 32_768;

/// Checks inode `ino` once pass 1 has walked its block map (`bad`: the
/// walk found problems, which are repaired first; the rebuild then waits
/// for the next round).
pub(crate) fn check(c: &mut Ctx, ino: u32, inode: &Inode, kind: FileKind, bad: bool) {
    if !c.sb().has_ro_compat(RoCompat::BIGALLOC)
        || !matches!(kind, FileKind::Regular | FileKind::Directory)
        || inode
            .flags()
            .intersects(InodeFlags::EXTENTS | InodeFlags::INLINE_DATA)
        || !(ino == ext4r_format::inode::ino::ROOT || ino >= c.sb().first_ino())
        || inode.block_words().iter().all(|&w| w == 0)
        || bad
    {
        return;
    }
    let Some((_, ptrs)) = crate::dup::pointers(c.fs(), ino) else {
        return;
    };
    let mut found = Collected::default();
    // (logical, physical, length) of the run being gathered.
    let mut run: Option<(u64, u64, u64)> = None;
    let mut data = false;
    for &(_, blk, n, lblk) in &ptrs {
        if lblk == crate::dup::NODE {
            found.blocks.push(blk);
            continue;
        }
        data = true;
        run = match run {
            Some((l, p, len)) if l + len == lblk && p + len == blk && len + n <= MAX_LEN => {
                Some((l, p, len + n))
            }
            prev => {
                if let Some(r) = prev {
                    if !push(&mut found, r) {
                        return;
                    }
                }
                Some((lblk, blk, n))
            }
        };
    }
    if let Some(r) = run {
        if !push(&mut found, r) {
            return;
        }
    }
    if !data {
        return;
    }
    found.extents.sort_by_key(|e| e.ee_block.get());
    let owner = Owner::of(ino, inode);
    let msg = format!("Inode {ino} on bigalloc filesystem cannot be block mapped.");
    match crate::extent_rebuild::plan(c, ino, owner, found) {
        Some(Fix::RebuildExtents(t)) => {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_NO_BIGALLOC_BLOCKMAP_FILES,
                msg,
                Fix::ExtentsFromMap(t),
            );
        }
        Some(_) => {}
        None => c.report(Subject::Inode(ino)).error(
            1,
            ProblemCode::PR_1_NO_BIGALLOC_BLOCKMAP_FILES,
            msg,
        ),
    }
}

/// Adds a run as an extent; false when it cannot be one (a logical
/// block past what an extent addresses).
fn push(found: &mut Collected, (l, p, n): (u64, u64, u64)) -> bool {
    let (Ok(l), Ok(n)) = (u32::try_from(l), u16::try_from(n)) else {
        return false;
    };
    match Extent::new(l, BlockNr(p), n, false) {
        Ok(e) => {
            found.extents.push(e);
            true
        }
        Err(_) => false,
    }
}
