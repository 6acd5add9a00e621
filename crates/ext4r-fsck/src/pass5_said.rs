//! Pass 5's findings said as e2fsck's pass5.c says them. The comparison
//! (in [`crate::pass5`]) goes group by group; e2fsck goes bitmap by
//! bitmap, and within one bit by bit over the whole filesystem:
//!
//! 1. the block bitmap: each block in use in a `BLOCK_UNINIT` group that
//!    the bitmap leaves clear ("Group 1 block(s) in use but group is
//!    marked BLOCK_UNINIT", once per block while the flag stays: every
//!    time under `-n`, once when a repair clears it), then ONE "Block
//!    bitmap differences: " with the ranges of all groups (runs go on
//!    across group boundaries) and one question;
//! 2. each group's free block count, then the total;
//! 3. the same for inodes (each group's free inodes, then its
//!    directories), then the total;
//! 4. the padding past the bitmaps' ends, inodes first, once each;
//! 5. the bitmaps' checksums, inodes first, under the differences' latch
//!    ("Block bitmap differences: Group 0 block bitmap does not match
//!    checksum.  IGNORED."), unless the bitmap is rewritten anyway: every
//!    group under `-n`, the first (whose repair rewrites them all) in a
//!    repair.
//!
//! What is counted differs with the run, as e2fsck counts: a repair has
//! made the bitmaps what is in use before it counts, so the counts are of
//! what is in use; `-n` leaves the bitmaps as they are and counts them
//! ("Free blocks count wrong for group #0 (494, counted=472)" where the
//! bitmap marks 22 blocks that nothing uses).

use crate::codes::ProblemCode;
use crate::ctx::Ctx;
use crate::fix::Fix;
use crate::problem::Subject;

/// Most groups whose bitmap differences are spelled out.
pub(crate) const MAX_DIFF_REPORTS: usize = 64;

/// A run of bits that differ: (should be set, first, last), in cluster
/// or inode numbers.
pub(crate) type Run = (bool, u64, u64);

/// Which bitmap.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bitmap {
    Block,
    Inode,
}

impl Bitmap {
    pub(crate) fn fix(self, g: u32, bits: Vec<u64>) -> Fix {
        match self {
            Bitmap::Block => Fix::BlockBitmap(g, bits),
            Bitmap::Inode => Fix::InodeBitmap(g, bits),
        }
    }

    fn word(self) -> &'static str {
        match self {
            Bitmap::Block => "block",
            Bitmap::Inode => "inode",
        }
    }

    fn header(self) -> ProblemCode {
        match self {
            Bitmap::Block => ProblemCode::PR_5_BLOCK_BITMAP_HEADER,
            Bitmap::Inode => ProblemCode::PR_5_INODE_BITMAP_HEADER,
        }
    }
}

/// One group's counts: as stored in its descriptor, as shown ("counted=",
/// see the module docs), and as a repair sets them.
pub(crate) struct Counts {
    pub group: u32,
    pub stored_free: u64,
    pub shown_free: u64,
    pub free: u64,
    pub stored_dirs: u64,
    pub shown_dirs: u64,
    pub dirs: u64,
}

/// One bitmap's findings over all groups, gathered in group order.
pub(crate) struct Said {
    which: Bitmap,
    /// Numbers are multiplied by this when said (e2fsck names a cluster
    /// by its first block).
    shift: u32,
    runs: Vec<Run>,
    /// Groups whose differences are not spelled out (past the cap), and
    /// the repairs of all that differ.
    unspelled: u64,
    /// Groups whose differences are spelled out.
    spelled: usize,
    rewrites: Vec<Fix>,
    counts: Vec<Counts>,
    csums: Vec<(u32, Fix)>,
    /// Groups whose bitmap block has unset bits past the group's, or (for
    /// blocks) whose padding past the filesystem's end is unset, and the
    /// repairs.
    tails: Vec<Fix>,
    end_padding: bool,
    /// The differences or the padding were said: a repair rewrites the
    /// bitmap (and its checksum) for them.
    rewriting: bool,
    /// How far the repairs of this check move the superblock's stored
    /// free count before this pass's own (see `pass5::Planned`).
    sb_moved: i64,
}

impl Said {
    pub(crate) fn new(which: Bitmap, shift: u32) -> Self {
        Said {
            which,
            shift,
            runs: Vec::new(),
            unspelled: 0,
            spelled: 0,
            rewrites: Vec::new(),
            counts: Vec::new(),
            csums: Vec::new(),
            tails: Vec::new(),
            end_padding: false,
            rewriting: false,
            sb_moved: 0,
        }
    }

    /// The superblock's stored free count is taken as moved by `delta`
    /// (the repairs' allocation statistics, applied before this pass's).
    pub(crate) fn stored_moved(&mut self, delta: i64) {
        self.sb_moved = delta;
    }

    /// A group's differences: its runs (`None`: past the cap, not spelled
    /// out) and its repair.
    pub(crate) fn differs(&mut self, runs: Option<Vec<Run>>, fix: Fix) {
        // The first groups in order, however many threads wrote texts
        // for (a worker may spell out one past the cap).
        match runs.filter(|_| self.spelled < MAX_DIFF_REPORTS) {
            Some(runs) => {
                self.spelled += 1;
                for r in runs {
                    match self.runs.last_mut() {
                        Some(last) if last.0 == r.0 && last.2 + 1 == r.1 => last.2 = r.2,
                        _ => self.runs.push(r),
                    }
                }
            }
            None => self.unspelled += 1,
        }
        self.rewrites.push(fix);
    }

    pub(crate) fn counts(&mut self, c: Counts) {
        self.counts.push(c);
    }

    pub(crate) fn csum(&mut self, g: u32, fix: Fix) {
        self.csums.push((g, fix));
    }

    pub(crate) fn tail(&mut self, fix: Fix, end_padding: bool) {
        self.tails.push(fix);
        self.end_padding |= end_padding;
    }

    /// In a repair, the checksum fixes of every group whose checksum is
    /// wrong, taken to go with a rewrite of the bitmap: e2fsck writes a
    /// bitmap it changed whole, every group's checksum stamped, and says
    /// nothing of the checksums. Those of groups the repair did not touch
    /// are wrong when the check took a backup's descriptors.
    fn restamps(&mut self, repairing: bool) -> Vec<Fix> {
        if !repairing {
            return Vec::new();
        }
        std::mem::take(&mut self.csums)
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    }

    /// Whether a repair rewrites the bitmap for what was said.
    fn rewritten(&self, repairing: bool) -> bool {
        repairing && self.rewriting
    }

    /// Steps 1–3 of the module docs (the uninit messages were said as
    /// the groups came): the differences, the groups' counts, the total.
    /// `free` is the total as shown, `set` as a repair sets it.
    pub(crate) fn say_counts(&mut self, c: &mut Ctx, free: u64, set: u64) {
        let which = self.which;
        if !self.rewrites.is_empty() {
            let mut msg = format!(
                "{} bitmap differences: ",
                if which == Bitmap::Block {
                    "Block"
                } else {
                    "Inode"
                }
            );
            for &(plus, a, b) in &self.runs {
                let s = if plus { '+' } else { '-' };
                let (a, b) = (a << self.shift, b << self.shift);
                if a == b {
                    msg += &format!(" {s}{a}");
                } else {
                    msg += &format!(" {s}({a}--{b})");
                }
            }
            if self.unspelled > 0 {
                msg += &format!(" (and the differences of {} more groups)", self.unspelled);
            }
            let mut fixes = std::mem::take(&mut self.rewrites);
            fixes.extend(self.restamps(c.repairing()));
            c.report(Subject::Filesystem)
                .error_fix(5, which.header(), msg, Fix::Each(fixes));
            self.rewriting = true;
        }
        let sb_free = match which {
            Bitmap::Block => c.sb().free_blocks_count(),
            Bitmap::Inode => u64::from(c.sb().s_free_inodes_count.get()),
        };
        let sb_free = sb_free.saturating_add_signed(self.sb_moved);
        for k in std::mem::take(&mut self.counts) {
            let g = k.group;
            if k.stored_free != k.shown_free {
                let (code, msg, fix) = match which {
                    Bitmap::Block => (
                        ProblemCode::PR_5_FREE_BLOCK_COUNT_GROUP,
                        format!(
                            "Free blocks count wrong for group #{g} ({}, counted={}).",
                            k.stored_free, k.shown_free
                        ),
                        Fix::GroupFreeBlocks(g, ext4r_format::num::sat_u32(k.free)),
                    ),
                    Bitmap::Inode => (
                        ProblemCode::PR_5_FREE_INODE_COUNT_GROUP,
                        format!(
                            "Free inodes count wrong for group #{g} ({}, counted={}).",
                            k.stored_free, k.shown_free
                        ),
                        Fix::GroupFreeInodes(g, ext4r_format::num::sat_u32(k.free)),
                    ),
                };
                c.report(Subject::Group(g)).error_fix(5, code, msg, fix);
            }
            if which == Bitmap::Inode && k.stored_dirs != k.shown_dirs {
                c.report(Subject::Group(g)).error_fix(
                    5,
                    ProblemCode::PR_5_FREE_DIR_COUNT_GROUP,
                    format!(
                        "Directories count wrong for group #{g} ({}, counted={}).",
                        k.stored_dirs, k.shown_dirs
                    ),
                    Fix::GroupUsedDirs(g, ext4r_format::num::sat_u32(k.dirs)),
                );
            }
        }
        // Harmless (e2fsck's PR_NO_OK): the kernel leaves these stale.
        if sb_free != free {
            let (code, msg, fix) = match which {
                Bitmap::Block => (
                    ProblemCode::PR_5_FREE_BLOCK_COUNT,
                    format!("Free blocks count wrong ({sb_free}, counted={free})."),
                    Fix::SuperFreeBlocks(set),
                ),
                Bitmap::Inode => (
                    ProblemCode::PR_5_FREE_INODE_COUNT,
                    format!("Free inodes count wrong ({sb_free}, counted={free})."),
                    Fix::SuperFreeInodes(set),
                ),
            };
            c.report(Subject::Filesystem)
                .harmless_fix(5, code, msg, fix);
        }
    }

    /// Step 4: the padding, said once.
    pub(crate) fn say_padding(&mut self, c: &mut Ctx) {
        if self.tails.is_empty() {
            return;
        }
        // The padding past the end is set by a repair that rewrites the
        // bitmap; the bits past a group's in its block are looked at
        // when the bitmap is read, and said anyway.
        let only_end = self.tails.len() == 1 && self.end_padding;
        if only_end && self.rewritten(c.repairing()) {
            return;
        }
        let code = match self.which {
            Bitmap::Block => ProblemCode::PR_5_BLOCK_BMAP_PADDING,
            Bitmap::Inode => ProblemCode::PR_5_INODE_BMAP_PADDING,
        };
        let mut fixes = std::mem::take(&mut self.tails);
        fixes.extend(self.restamps(c.repairing()));
        let fix = Fix::Each(fixes);
        c.report(Subject::Filesystem).error_fix(
            5,
            code,
            format!("Padding at end of {} bitmap is not set.", self.which.word()),
            fix,
        );
        self.rewriting = true;
    }

    /// Step 5: the checksums.
    pub(crate) fn say_csums(&mut self, c: &mut Ctx) {
        if self.csums.is_empty() || self.rewritten(c.repairing()) {
            return;
        }
        let which = self.which;
        let (code, title) = match which {
            Bitmap::Block => (ProblemCode::PR_5_BLOCK_BITMAP_CSUM_INVALID, "Block"),
            Bitmap::Inode => (ProblemCode::PR_5_INODE_BITMAP_CSUM_INVALID, "Inode"),
        };
        let csums = std::mem::take(&mut self.csums);
        let latch = format!("{title} bitmap differences: ");
        let said = |c: &mut Ctx, g: u32, fix: Fix| {
            c.report(Subject::Group(g)).error_fix(
                5,
                code,
                format!("Group {g} {} bitmap does not match checksum.", which.word()),
                fix,
            );
            c.latch_last(which.header(), latch.clone());
        };
        if c.repairing() {
            // One rewrite stamps every checksum.
            let g = csums[0].0;
            said(c, g, Fix::Each(csums.into_iter().map(|(_, f)| f).collect()));
        } else {
            for (g, fix) in csums {
                said(c, g, fix);
            }
        }
    }
}
