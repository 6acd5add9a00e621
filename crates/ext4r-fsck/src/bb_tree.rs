//! The bad block inode's own indirect blocks, as e2fsck's
//! `process_bad_block` judges them: one that lies on filesystem metadata
//! (superblocks, descriptors, bitmaps, inode tables) is cut off
//! (PR_1_BB_FS_BLOCK), and a listed bad block that is one of the inode's
//! own indirect blocks leaves the list (PR_1_BBINODE_BAD_METABLOCK).
//! Either means the list has probably been corrupted: e2fsck asks whether
//! to go on, which a read-only check declines, stopping there.

use crate::codes::ProblemCode;
use crate::ctx::Ctx;
use crate::fix::Fix;
use crate::problem::Subject;

/// What the walk of the bad block inode does with a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Claimed and followed as usual.
    Usual,
    /// Neither claimed nor followed (a repair cuts it off).
    Skip,
    /// Not claimed, but followed (a read-only check: the pointer stays).
    Follow,
}

/// What the walk has met so far.
#[derive(Default)]
pub(crate) struct Walk {
    /// The metadata ranges, sorted (made when first needed).
    meta: Option<Vec<(u64, u64)>>,
    /// Blocks already met (listed or indirect), in walk order: direct
    /// entries, then each indirect block before what it lists.
    seen: std::collections::HashSet<u64>,
}

/// Judges pointer `fix` to block `b` at indirection `level` (0: a listed
/// bad block) of the bad block inode.
pub(crate) fn judge(c: &mut Ctx, b: u64, level: u32, fix: Fix, w: &mut Walk) -> Verdict {
    if level > 0 {
        let ranges = w.meta.get_or_insert_with(|| {
            let mut r = crate::guard::metadata_ranges(c.fs());
            r.sort_unstable();
            r
        });
        if crate::guard::covers(ranges, b) {
            c.report(Subject::Block(b)).error_fix(
                1,
                ProblemCode::PR_1_BB_FS_BLOCK,
                format!(
                    "Bad block inode has an indirect block ({b}) that conflicts with\n\
                     filesystem metadata."
                ),
                fix,
            );
            c.mark_bb_corrupt();
            return if c.repairing() {
                Verdict::Skip
            } else {
                Verdict::Follow
            };
        }
    }
    // A block met before: an indirect block that is also listed as bad
    // (whichever comes second loses its pointer, as in e2fsck's walk).
    if !w.seen.insert(b) {
        c.report(Subject::Block(b)).error_fix(
            1,
            ProblemCode::PR_1_BBINODE_BAD_METABLOCK,
            format!("Bad block {b} used as bad block inode indirect block."),
            fix,
        );
        c.mark_bb_corrupt();
        return Verdict::Skip;
    }
    Verdict::Usual
}

/// After the walk: a read-only check stops where e2fsck's "Continue?" is
/// answered no.
pub(crate) fn finish(c: &mut Ctx) {
    if c.bb_corrupt() && !c.repairing() {
        c.fail(
            "The bad block inode has probably been corrupted.  You probably\n\
             should stop now and run e2fsck -c to scan for bad blocks\n\
             in the filesystem."
                .to_string(),
        );
    }
}
