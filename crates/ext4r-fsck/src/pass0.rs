//! Pass 0: the superblock, the group descriptors and the journal
//! superblock — everything the other passes trust to find their way.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::group_desc::GroupDescCsum;
use ext4r_format::inode::ino;
use ext4r_format::{GroupNr, InodeNr};

use crate::ctx::Ctx;
use crate::ctx::Progress;
use crate::fix::Fix;

pub(crate) fn run(c: &mut Ctx, _progress: Progress<'_>) {
    let start = c.problems().mark();
    superblock(c);
    crate::super_rules::check(c);
    descriptors(c);
    bitmap_conflicts(c);
    if c.groups().any_table_misplaced() && c.geo().group_count == 1 && !c.repairing() {
        // No backup descriptors to fall back on, and no relocation under
        // -n: e2fsck cannot go on either.
        c.fail("Group descriptors look bad and there is no backup to use; cannot proceed.");
        return;
    }
    quota_and_orphan(c);
    crate::mmp::check(c);
    // e2fsck judges the journal before the superblock and descriptors:
    // its findings are said first, and a journal that stops the check
    // stops it before the rest is looked at.
    // (Its inode's backup and move are check_super_block's, said in
    // their place.)
    let before = c.problems().mark();
    crate::journal_check::check(c);
    let after = c.problems().mark();
    let (later, journal): (Vec<_>, Vec<_>) = c
        .reorder_problems()
        .take_range(before..after)
        .into_iter()
        .partition(|p| {
            matches!(
                p.code,
                ProblemCode::PR_0_BACKUP_JNL | ProblemCode::PR_0_MOVE_JOURNAL
            )
        });
    if c.failed_in_journal() {
        let end = c.problems().mark();
        c.reorder_problems().take_range(start..end);
        c.reorder_problems().insert_at(start, journal);
        return;
    }
    let end = c.problems().mark();
    c.reorder_problems().insert_at(end, later);
    c.reorder_problems().insert_at(start, journal);
    crate::journal_hint::check(c);
    crate::quota_hide::check(c);
}

/// `s_creator_os` of the GNU Hurd.
const OS_HURD: u32 = 1;

fn superblock(c: &mut Ctx) {
    let sb = c.sb().clone();
    // e2fsck asks only when it may write (never under -n).
    if c.repairing() && sb.s_creator_os.get() == OS_HURD && sb.has_incompat(Incompat::FILETYPE) {
        c.report(Subject::Filesystem).error_fix(
            0,
            ProblemCode::PR_0_HURD_CLEAR_FILETYPE,
            "The Hurd does not support the filetype feature.".into(),
            crate::fix::Fix::ClearIncompat(Incompat::FILETYPE.bits()),
        );
        // As e2fsck, which clears it in memory before pass 2: the entries
        // are judged as the repair leaves the superblock (their file
        // types are not set, only to be cleared in the next round).
        c.judge_without_filetype();
    }
    if sb.has_ro_compat(RoCompat::METADATA_CSUM) && sb.has_ro_compat(RoCompat::GDT_CSUM) {
        c.report(Subject::Filesystem).harmless(
            0,
            ProblemCode::PR_0_META_AND_GDT_CSUM_SET,
            "Superblock has metadata_csum and uninit_bg both set.".into(),
        );
    }
    let want = u64::from(c.geo().inodes_per_group) * u64::from(c.geo().group_count);
    if u64::from(sb.s_inodes_count.get()) != want {
        c.report(Subject::Filesystem).error(
            0,
            ProblemCode::PR_0_INODE_COUNT_WRONG,
            format!(
                "Inode count in superblock is {}, should be {want}.",
                sb.s_inodes_count.get()
            ),
        );
    }
    if sb.r_blocks_count() > sb.blocks_count() {
        c.report(Subject::Filesystem).error(
            0,
            ProblemCode::PR_0_SB_CORRUPT,
            format!(
                "Reserved blocks count {} is larger than the block count {}.",
                sb.r_blocks_count(),
                sb.blocks_count()
            ),
        );
    }
    let isize = u32::from(sb.inode_size());
    if sb.s_rev_level.get() > 0 && isize > 128 {
        // As e2fsck: room for i_extra_isize and i_checksum_hi at least,
        // within the record, a multiple of 4; a bad value becomes the
        // size of the fields this format defines (32).
        let bad = |v: u32| v != 0 && (v < 4 || 128 + v > isize || v % 4 != 0);
        let min = u32::from(sb.s_min_extra_isize.get());
        if bad(min) {
            c.report(Subject::Filesystem).error_fix(
                0,
                ProblemCode::PR_0_BAD_MIN_EXTRA_ISIZE,
                format!("Bad required extra isize in superblock ({min})."),
                Fix::SuperExtraIsize(false, 32),
            );
        }
        let wanted = u32::from(sb.s_want_extra_isize.get());
        if bad(wanted) {
            c.report(Subject::Filesystem).error_fix(
                0,
                ProblemCode::PR_0_BAD_WANT_EXTRA_ISIZE,
                format!("Bad desired extra isize in superblock ({wanted})."),
                Fix::SuperExtraIsize(true, 32),
            );
        }
    }
}

fn descriptors(c: &mut Ctx) {
    let wide = c.wide();
    let flex = c.sb().has_incompat(Incompat::FLEX_BG);
    let csum = if c.csum() {
        Some(GroupDescCsum::Crc32c {
            seed: c.sb().csum_seed(),
        })
    } else if c.sb().has_ro_compat(RoCompat::GDT_CSUM) {
        Some(GroupDescCsum::Crc16 {
            uuid: c.sb().s_uuid,
        })
    } else {
        None
    };
    let itb = u64::from(c.geo().inode_blocks_per_group());
    let dsize = c.geo().desc_size as usize;
    for g in 0..c.geo().group_count {
        let Ok(d) = c.fs().group_desc(GroupNr(g)).copied() else {
            break;
        };
        // Metadata outside the group is allowed only with flex_bg.
        let (lo, hi) = if flex {
            (c.geo().first_data_block, c.geo().blocks_count)
        } else {
            (
                c.geo().group_first_block(g),
                c.geo().group_last_block(g) + 1,
            )
        };
        let inside = |b: u64, n: u64| b >= lo && b.checked_add(n).is_some_and(|e| e <= hi);
        let mut bad = false;
        for (what, code, b, n) in [
            (
                "Block bitmap",
                ProblemCode::PR_0_BB_NOT_GROUP,
                d.block_bitmap(wide),
                1,
            ),
            (
                "Inode bitmap",
                ProblemCode::PR_0_IB_NOT_GROUP,
                d.inode_bitmap(wide),
                1,
            ),
            (
                "Inode table",
                ProblemCode::PR_0_ITABLE_NOT_GROUP,
                d.inode_table(wide),
                itb,
            ),
        ] {
            if !inside(b, n) {
                c.report(Subject::Group(g)).error(
                    0,
                    code,
                    format!("{what} for group {g} is not in group.  (block {b})"),
                );
                let meta = match code {
                    ProblemCode::PR_0_BB_NOT_GROUP => crate::fix::plan::Meta::BlockBitmap,
                    ProblemCode::PR_0_IB_NOT_GROUP => crate::fix::plan::Meta::InodeBitmap,
                    _ => crate::fix::plan::Meta::InodeTable,
                };
                c.misplaced(g, meta);
                if meta == crate::fix::plan::Meta::InodeTable {
                    bad = true;
                }
            } else {
                c.claim(b, n, 0);
            }
        }
        if bad {
            c.mark_table_unusable(g);
        }
        let mut csum_ok = true;
        let mut sums = (0, 0);
        if let Some(cs) = &csum {
            if let Ok(want) = d.compute_checksum(g, dsize, cs) {
                csum_ok = want == d.bg_checksum.get();
                sums = (d.bg_checksum.get(), want);
            }
        }
        let at = c.problems().mark();
        let fix = crate::gdesc::judge(c, g, &d, csum_ok);
        if !csum_ok {
            // Said before what the descriptor's other fields show (as
            // e2fsck's check_super_block, group by group), under the
            // latch asked once for all the descriptors.
            c.report(Subject::Group(g)).harmless_fix(
                0,
                ProblemCode::PR_0_GDT_CSUM,
                format!(
                    "Group descriptor {g} checksum is {:#06x}, should be {:#06x}.",
                    sums.0, sums.1
                ),
                fix,
            );
            c.latch_last(
                ProblemCode::PR_0_GDT_CSUM_LATCH,
                "One or more block group descriptor checksums are invalid.".into(),
            );
            c.reorder_problems().move_last_to(at);
        }
        // The superblock copy and descriptor blocks of this group.
        let m = c.geo().group_meta(g);
        if let Some(s) = m.super_block {
            c.claim(s, 1, 0);
        }
        if let Some((first, n)) = m.old_desc {
            if n > 0 {
                c.claim(first, n, 0);
            }
        }
        if let Some(b) = m.meta_desc {
            c.claim(b, 1, 0);
        }
    }
}

/// Inode tables and bitmaps sitting on other metadata (a superblock or
/// descriptor copy, an earlier table or bitmap) are moved, their content
/// copied, as e2fsck's `mark_table_blocks`: group by group, its
/// superblock and descriptors, then its inode table, block bitmap and
/// inode bitmap, each against what came before ("conflicts with some
/// other fs block.  Relocate?").
fn bitmap_conflicts(c: &mut Ctx) {
    use crate::fix::plan::Meta;
    if !any_overlap(c) {
        // Every range the walk below takes is apart from every other:
        // nothing it checks can conflict (the usual case, found in one
        // sort where the walk's map cost ~20% of an empty 15 TiB check).
        return;
    }
    let wide = c.wide();
    let itb = u64::from(c.geo().inode_blocks_per_group());
    let mut ranges = Taken::default();
    for g in 0..c.geo().group_count {
        let m = c.geo().group_meta(g);
        if let Some(s) = m.super_block {
            ranges.insert(s, s + 1);
        }
        if let Some((first, n)) = m.old_desc {
            ranges.insert(first, first + n);
        }
        if let Some(b) = m.meta_desc {
            ranges.insert(b, b + 1);
        }
        if c.groups().table_unusable(g) {
            continue;
        }
        let Ok(d) = c.fs().group_desc(GroupNr(g)).copied() else {
            break;
        };
        let it = d.inode_table(wide);
        if let Some(b) = ranges.first_in(it, it + itb) {
            c.report(Subject::Group(g)).error(
                1,
                ProblemCode::PR_1_ITABLE_CONFLICT,
                format!("Group {g}'s inode table at {b} conflicts with some other fs block."),
            );
            c.relocate_later(g, Meta::InodeTable, true);
        }
        ranges.insert(it, it + itb);
        let (bad_bb, bad_ib) = c.groups().bitmaps_unusable(g);
        for pick in [Meta::BlockBitmap, Meta::InodeBitmap] {
            // A bitmap outside its group is already to be relocated.
            if (pick == Meta::BlockBitmap && bad_bb) || (pick == Meta::InodeBitmap && bad_ib) {
                continue;
            }
            let (b, what, code) = match pick {
                Meta::BlockBitmap => (
                    d.block_bitmap(wide),
                    "block bitmap",
                    ProblemCode::PR_1_BB_CONFLICT,
                ),
                _ => (
                    d.inode_bitmap(wide),
                    "inode bitmap",
                    ProblemCode::PR_1_IB_CONFLICT,
                ),
            };
            if ranges.contains(b) {
                c.report(Subject::Group(g)).error(
                    1,
                    code,
                    format!("Group {g}'s {what} at {b} conflicts with some other fs block."),
                );
                c.relocate_later(g, pick, true);
            } else {
                ranges.insert(b, b + 1);
            }
        }
    }
}

/// Whether any two of the ranges [`bitmap_conflicts`] takes (when none
/// conflicts) overlap: the same groups, ranges and skips as its walk.
fn any_overlap(c: &Ctx) -> bool {
    let wide = c.wide();
    let itb = u64::from(c.geo().inode_blocks_per_group());
    // One list per kind: each usually ascends with the group number, so
    // the stable sort below only merges four runs.
    let mut kinds: [Vec<(u64, u64)>; 4] = Default::default();
    let groups = c.geo().group_count as usize;
    for k in &mut kinds[1..] {
        k.reserve(groups);
    }
    let mut push = |k: usize, s: u64, n: u64| {
        if n > 0 {
            kinds[k].push((s, s.saturating_add(n)));
        }
    };
    for g in 0..c.geo().group_count {
        let m = c.geo().group_meta(g);
        if let Some(s) = m.super_block {
            push(0, s, 1);
        }
        if let Some((first, n)) = m.old_desc {
            push(0, first, n);
        }
        if let Some(b) = m.meta_desc {
            push(0, b, 1);
        }
        if c.groups().table_unusable(g) {
            continue;
        }
        let Ok(d) = c.fs().group_desc(GroupNr(g)) else {
            break;
        };
        push(1, d.inode_table(wide), itb);
        let (bad_bb, bad_ib) = c.groups().bitmaps_unusable(g);
        if !bad_bb {
            push(2, d.block_bitmap(wide), 1);
        }
        if !bad_ib {
            push(3, d.inode_bitmap(wide), 1);
        }
    }
    let [mut all, it, bb, ib] = kinds;
    all.extend(it);
    all.extend(bb);
    all.extend(ib);
    all.sort();
    let mut end = 0u64;
    for (s, e) in all {
        if s < end {
            return true;
        }
        end = end.max(e);
    }
    false
}

/// Blocks taken by metadata, as disjoint half-open ranges keyed by their
/// start: lookups and inserts in O(log n), where a list scanned per bitmap
/// made pass 0 quadratic in the number of groups (32 s on 15 TiB).
#[derive(Default)]
struct Taken(std::collections::BTreeMap<u64, u64>);

impl Taken {
    fn contains(&self, b: u64) -> bool {
        self.0.range(..=b).next_back().is_some_and(|(_, &e)| b < e)
    }

    /// The first taken block in `[s, e)`: two lookups, where asking
    /// block by block made an empty 15 TiB check spend 3 s here (an
    /// inode table is hundreds of blocks, in each of 120,000 groups).
    fn first_in(&self, s: u64, e: u64) -> Option<u64> {
        if s >= e {
            return None;
        }
        if self.contains(s) {
            return Some(s);
        }
        self.0.range(s..e).next().map(|(&k, _)| k)
    }

    /// Adds `[s, e)`, merging it with the ranges it touches.
    fn insert(&mut self, mut s: u64, mut e: u64) {
        if s >= e {
            return;
        }
        if let Some((&ps, &pe)) = self.0.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
            }
        }
        while let Some((&k, &ke)) = self.0.range(s..=e).next() {
            self.0.remove(&k);
            e = e.max(ke);
        }
        self.0.insert(s, e);
    }
}

fn quota_and_orphan(c: &mut Ctx) {
    let sb = c.sb().clone();
    let max = sb.s_inodes_count.get();
    for ((what, inum, std), qtype) in [
        ("user", sb.s_usr_quota_inum.get(), ino::USR_QUOTA),
        ("group", sb.s_grp_quota_inum.get(), ino::GRP_QUOTA),
        ("project", sb.s_prj_quota_inum.get(), 0),
    ]
    .into_iter()
    .zip(0u8..)
    {
        if inum != 0 && (inum > max || (inum < sb.first_ino() && inum != std)) {
            c.report(Subject::Quota(qtype)).error_fix(
                0,
                ProblemCode::PR_0_INVALID_QUOTA_INO,
                format!("Invalid {what} quota inode {inum}."),
                Fix::ClearQuotaInode(qtype),
            );
        }
    }
    let inum = sb.s_orphan_file_inum.get();
    if !sb.has_compat(Compat::ORPHAN_FILE) {
        if sb.has_ro_compat(RoCompat::ORPHAN_PRESENT) {
            c.report(Subject::Filesystem).error_fix(
                0,
                ProblemCode::PR_6_ORPHAN_PRESENT_NO_FILE,
                "Feature orphan_present is set but feature orphan_file is not.".into(),
                Fix::ClearOrphanPresent,
            );
        }
        return;
    }
    if !sb.has_compat(Compat::HAS_JOURNAL) {
        // No point in an orphan file without a journal (e2fsck): the
        // feature goes, and the inode is then emptied by pass 1.
        c.report(Subject::Filesystem).error_fix(
            0,
            ProblemCode::PR_6_ORPHAN_FILE_WITHOUT_JOURNAL,
            "Superblock has orphan file without journal.".into(),
            Fix::Superblock(crate::fix::super_edit::SuperEdit::NoOrphanFile),
        );
        return;
    }
    if inum == 0 {
        return;
    }
    let Ok(info) = c.fs().inode(InodeNr(inum)) else {
        return;
    };
    let Ok(runs) = c.fs().runs(&info) else { return };
    let bs = c.geo().block_size as usize;
    let mut entries = 0u64;
    let mut dirty = false;
    let mut buf = vec![0u8; bs];
    let gen = info.inode.generation();
    for r in &runs {
        for k in 0..r.len.min(1 << 16) {
            if c.fs()
                .device()
                .read_at(&mut buf, (r.physical + k) * bs as u64)
                .is_err()
            {
                continue;
            }
            // Entries are 32-bit inode numbers before the 8-byte tail.
            let n = buf[..bs - 8]
                .chunks(4)
                .filter(|w| *w != [0, 0, 0, 0])
                .count() as u64;
            // e2fsck's check_init_orphan_file compares the whole block
            // with an empty one: free slots, the magic, and (with
            // metadata_csum) the checksum for this block.
            let mut empty = vec![0u8; bs];
            let _ = ext4r_format::orphan::init_orphan_block(&mut empty);
            if c.csum() {
                let phys = ext4r_format::BlockNr(r.physical + k);
                let seed = c.sb().csum_seed();
                if let Ok(sum) = ext4r_format::orphan::orphan_block_checksum(
                    seed,
                    InodeNr(inum),
                    gen,
                    phys,
                    &empty,
                ) {
                    empty[bs - 4..].copy_from_slice(&sum.to_le_bytes());
                }
            }
            // A check that changes nothing stops at the first such block
            // (e2fsck's declined "Clear?" ends its walk).
            if buf != empty && (!dirty || c.repairing()) {
                dirty = true;
                // As e2fsck after releasing the orphans (pass 1 gives the
                // deleted ones their deletion time): the block is emptied.
                c.report(Subject::InodeAt(inum, r.logical + k)).error_fix(
                    6,
                    ProblemCode::PR_6_ORPHAN_BLOCK_DIRTY,
                    format!(
                        "Orphan file (inode {inum}) block {} is not clean.",
                        r.logical + k
                    ),
                    Fix::OrphanBlockClear(r.physical + k, inum, gen),
                );
            }
            entries += n;
        }
    }
    if dirty && !c.repairing() {
        // The block left as it is, e2fsck cannot use the file and asks to
        // make it anew.
        c.report(Subject::Inode(inum)).error(
            6,
            ProblemCode::PR_6_ORPHAN_FILE_CORRUPTED,
            "Failed to initialize orphan file.".into(),
        );
    }
    // These e2fsck says after pass 5 (its check_init_orphan_file, in
    // main once the passes have run): pass 6 here.
    if entries == 0 && sb.has_ro_compat(RoCompat::ORPHAN_PRESENT) {
        c.report(Subject::Filesystem).error_fix(
            6,
            ProblemCode::PR_6_ORPHAN_PRESENT_CLEAN_FILE,
            "Feature orphan_present is set but orphan file is clean.".into(),
            crate::fix::Fix::ClearOrphanPresent,
        );
    }
}

#[cfg(test)]
mod taken_tests {
    use super::Taken;

    #[test]
    fn ranges_merge_and_answer() {
        let mut t = Taken::default();
        t.insert(10, 20);
        t.insert(30, 31);
        t.insert(15, 30);
        assert!(t.contains(10) && t.contains(29) && t.contains(30));
        assert!(!t.contains(9) && !t.contains(31));
        t.insert(0, 5);
        assert!(t.contains(4) && !t.contains(5));
        assert_eq!(t.0.len(), 2);
    }
}

#[cfg(test)]
mod tests {
    use super::Taken;

    #[test]
    fn first_taken_block_of_a_range() {
        let mut t = Taken::default();
        t.insert(10, 20);
        t.insert(30, 31);
        assert_eq!(t.first_in(0, 10), None);
        assert_eq!(t.first_in(0, 11), Some(10));
        assert_eq!(t.first_in(15, 40), Some(15));
        assert_eq!(t.first_in(20, 30), None);
        assert_eq!(t.first_in(20, 35), Some(30));
        assert_eq!(t.first_in(31, 1000), None);
        // Brute force agrees on every small range.
        for s in 0..40 {
            for e in s..40 {
                let slow = (s..e).find(|&b| t.contains(b));
                assert_eq!(t.first_in(s, e), slow, "[{s}, {e})");
            }
        }
    }
}
