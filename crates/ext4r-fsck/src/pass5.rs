//! Pass 1b's overlap check and pass 5: the block and inode bitmaps and the
//! free counts against what passes 0–4 found in use. Groups flagged
//! uninitialised are compared with the bitmap the kernel would compute,
//! without reading anything; bitmaps are compared a word at a time.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use std::sync::atomic::{AtomicUsize, Ordering};

use ext4r_format::group_desc::GroupDesc;
use ext4r_format::num;
use ext4r_format::GroupNr;

use crate::claims::Claim;
use crate::ctx::Ctx;
use crate::ctx::GroupState;
use crate::ctx::Progress;
use crate::fix::Fix;
use crate::inode_map::BitsView;
use crate::pass5_said::{Bitmap, Counts, Run, Said, MAX_DIFF_REPORTS};

pub(crate) fn run(c: &mut Ctx, progress: Progress<'_>) {
    // Before the claims are consumed: a new orphan file takes free blocks.
    crate::orphan_file::check(c);
    let used = overlaps(c);
    let planned = Planned::of(c);
    let used = with_planned(used, &planned.blocks);
    // In e2fsck's order (see crate::pass5_said).
    let mut b = blocks(c, &used, &planned, progress);
    let mut i = inodes(c, &planned);
    i.say_padding(c);
    b.say_padding(c);
    i.say_csums(c);
    b.say_csums(c);
}

/// Sorts the claims, reports blocks claimed twice and returns the union as
/// sorted disjoint (start, end) ranges.
fn overlaps(c: &mut Ctx) -> Vec<(u64, u64)> {
    let claims = c.take_claims();
    if claims.regular() && c.bad_blocks().is_empty() {
        // Nothing claimed twice and no bad block to sort out: the union
        // is all there is (the claims are not read back).
        let union: Vec<(u64, u64)> = claims.runs().collect();
        drop(claims);
        return relocated(c, union);
    }
    let mut claims = claims.into_vec();
    crate::badblocks::sort_out(c, &mut claims);
    claims.sort_unstable();
    let mut union: Vec<(u64, u64)> = Vec::with_capacity(claims.len());
    let mut dups: Vec<(u32, u32, u64)> = Vec::new();
    let mut last: Option<Claim> = None;
    for cl in &claims {
        let end = cl.start + cl.len;
        match union.last_mut() {
            Some(u) if cl.start < u.1 => {
                if let Some(prev) = last {
                    dups.push((prev.owner, cl.owner, cl.start));
                }
                u.1 = u.1.max(end);
            }
            Some(u) if cl.start == u.1 => u.1 = end,
            _ => union.push((cl.start, end)),
        }
        if last.is_none_or(|l| l.start + l.len <= end) {
            last = Some(*cl);
        }
    }
    dups.sort_unstable();
    dups.dedup_by_key(|d| (d.0, d.1));
    if c.sb()
        .has_ro_compat(ext4r_format::features::RoCompat::SHARED_BLOCKS)
    {
        // Files may share blocks by design; only metadata must not.
        dups.retain(|d| d.0 == 0 || d.1 == 0);
    }
    for (a, b, blk) in dups.iter().take(100) {
        let who = |o: u32| {
            if o == 0 {
                "filesystem metadata".to_string()
            } else {
                format!("inode {o}")
            }
        };
        c.report(Subject::Shared(*blk, *a, *b)).error(
            1,
            ProblemCode::PR_1B_DUP_BLOCK,
            format!(
                "Multiply-claimed block(s): block {blk} claimed by {} and {}.",
                who(*a),
                who(*b)
            ),
        );
    }
    if !dups.is_empty() {
        crate::dup::plan(c, &claims, &union);
    }
    relocated(c, union)
}

/// The union with the blocks pass 0's relocations move metadata to.
fn relocated(c: &mut Ctx, mut union: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let moved = crate::relocate::plan(c, &union);
    if !moved.is_empty() {
        // The new places are in use from now on (e2fsck marks them in its
        // found map), so this round's bitmaps already count them.
        union.extend(moved);
        union.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(union.len());
        for (s, e) in union {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        union = merged;
    }
    union
}

/// Whether the bytes of a bitmap block past its group's `nbits` are not
/// all ones (e2fsck's bitmap tail check, done a byte at a time).
fn tail_unset(raw: &[u8], nbits: u64) -> bool {
    let from = (nbits / 8) as usize;
    raw.get(from..)
        .is_some_and(|t| t.iter().any(|&b| b != 0xff))
}

/// Sets bits `[from, to)`, a word at a time (masks at the two ends).
fn set_bits(words: &mut [u64], from: u64, to: u64) {
    if from >= to {
        return;
    }
    let (fw, lw) = ((from / 64) as usize, ((to - 1) / 64) as usize);
    let first = !0u64 << (from % 64);
    let last = !0u64 >> (63 - (to - 1) % 64);
    if fw == lw {
        words[fw] |= first & last;
        return;
    }
    words[fw] |= first;
    words[fw + 1..lw].fill(!0);
    words[lw] |= last;
}

/// Sets (`on`) or clears bit `bit`, when the words hold it.
fn put_bit(words: &mut [u64], bit: u64, on: bool) {
    if let Some(w) = words.get_mut(num::index(bit / 64)) {
        if on {
            *w |= 1 << (bit % 64);
        } else {
            *w &= !(1 << (bit % 64));
        }
    }
}

/// Adds the cluster run `[s, e)` to sorted runs, merged with the last one
/// when they overlap or touch: runs built this way are disjoint and
/// non-adjacent, so two sets of bits are equal exactly when their runs are.
fn push_run(runs: &mut Vec<(u64, u64)>, s: u64, e: u64) {
    if s >= e {
        return;
    }
    match runs.last_mut() {
        Some(last) if s <= last.1 => last.1 = last.1.max(e),
        _ => runs.push((s, e)),
    }
}

/// Sorts runs and merges the ones that overlap or touch.
fn normalize(runs: &mut Vec<(u64, u64)>) {
    runs.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for &(s, e) in runs.iter() {
        push_run(&mut out, s, e);
    }
    *runs = out;
}

fn count_bits(words: &[u64]) -> u64 {
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

/// The bitmap's first `nbits` bits as words, into `w` (resized to them).
fn to_words(bytes: &[u8], nbits: u64, w: &mut Vec<u64>) {
    w.clear();
    w.resize(num::index(nbits.div_ceil(64)), 0);
    // Whole words as loads (a copy call per word was 8% of an empty
    // 15 TiB check), then a last partial word, zero-padded.
    let mut whole = bytes.chunks_exact(8);
    for (d, c) in w.iter_mut().zip(&mut whole) {
        *d = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    }
    let full = bytes.len() / 8;
    let rest = whole.remainder();
    if full < w.len() && !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        w[full] = u64::from_le_bytes(b);
    }
    // Bits past nbits are not compared.
    if nbits % 64 != 0 {
        if let Some(l) = w.last_mut() {
            *l &= (1u64 << (nbits % 64)) - 1;
        }
    }
}

/// Differences as e2fsck walks them: runs of bits that should be set
/// (`true`) or clear, numbered from `base`.
fn diff_runs(want: &[u64], have: &[u64], base: u64) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (wi, (w, h)) in want.iter().zip(have).enumerate() {
        let x = w ^ h;
        if x == 0 {
            continue;
        }
        for bit in 0..64 {
            if x & (1 << bit) == 0 {
                continue;
            }
            let i = base + wi as u64 * 64 + bit;
            let plus = w & (1 << bit) != 0;
            match out.last_mut() {
                Some(r) if r.0 == plus && r.2 + 1 == i => r.2 = i,
                _ => out.push((plus, i, i)),
            }
        }
    }
    out
}

/// Groups per item of the parallel comparison, at most: a thousand
/// bitmap reads, or a thousand uninitialised groups found as computed
/// (well under a microsecond each), against which handing an item over
/// costs little.
const GROUPS_PER_ITEM: u32 = 1024;

/// What comparing a group's bitmap needs, shared by the threads that
/// compare: read-only parts of the context (the context itself is not
/// `Sync`), borrowed field by field so that this thread can still raise
/// problems.
struct Groups<'a> {
    fs: &'a ext4r::fs::Filesystem,
    geo: &'a ext4r_format::geometry::Geometry,
    wide: bool,
    csum: bool,
    csums: ext4r_txn::csum::Checksums,
    bad_bitmaps: &'a [(bool, bool)],
    states: &'a [GroupState],
    /// Differences spelled out so far by this thread: once that is
    /// [`MAX_DIFF_REPORTS`] no worker writes the text of one (it only
    /// grows, so a text is there whenever it is needed).
    reports: AtomicUsize,
    /// Groups per item.
    per_item: u32,
    /// Blocks or inodes the repairs of this check take (`true`) or free
    /// with the allocation statistics, sorted (see [`Planned`]).
    planned: &'a Planned,
}

/// What the repairs of this check take and free with e2fsck's allocation
/// statistics (lost+found, the extent trees pass 1E rebuilds): counted as
/// the repair leaves them, in use and as stored, so that this pass says
/// what e2fsck's says after its own repairs changed bitmaps and counts.
#[derive(Default)]
struct Planned {
    /// (block, taken), sorted.
    blocks: Vec<(u64, bool)>,
    /// (inode, taken, a directory), sorted.
    inodes: Vec<(u32, bool, bool)>,
}

impl Planned {
    fn of(c: &Ctx) -> Self {
        let mut blocks = c.planned_blocks().to_vec();
        blocks.sort_unstable();
        let mut inodes = c.planned_inodes().to_vec();
        inodes.sort_unstable();
        Planned { blocks, inodes }
    }

    /// The planned blocks in `[from, to)`.
    fn blocks_in(&self, from: u64, to: u64) -> &[(u64, bool)] {
        let a = self.blocks.partition_point(|p| p.0 < from);
        let b = self.blocks.partition_point(|p| p.0 < to);
        &self.blocks[a..b]
    }

    /// The planned inodes in `[from, to)`.
    fn inodes_in(&self, from: u64, to: u64) -> &[(u32, bool, bool)] {
        let a = self.inodes.partition_point(|p| u64::from(p.0) < from);
        let b = self.inodes.partition_point(|p| u64::from(p.0) < to);
        &self.inodes[a..b]
    }
}

/// `used` (sorted disjoint `[start, end)` runs) with the planned blocks
/// taken and freed.
fn with_planned(used: Vec<(u64, u64)>, planned: &[(u64, bool)]) -> Vec<(u64, u64)> {
    if planned.is_empty() {
        return used;
    }
    let mut runs = used;
    let freed: std::collections::BTreeSet<u64> =
        planned.iter().filter(|p| !p.1).map(|p| p.0).collect();
    if !freed.is_empty() {
        let mut out = Vec::with_capacity(runs.len() + freed.len());
        for (s, e) in runs {
            let mut at = s;
            for &b in freed.range(s..e) {
                if b > at {
                    out.push((at, b));
                }
                at = b + 1;
            }
            if at < e {
                out.push((at, e));
            }
        }
        runs = out;
    }
    runs.extend(planned.iter().filter(|p| p.1).map(|p| (p.0, p.0 + 1)));
    normalize(&mut runs);
    runs
}

impl Groups<'_> {
    fn state(&self, g: u32) -> GroupState {
        self.states.get(g as usize).copied().unwrap_or_default()
    }

    /// Where this pass reads group `i`'s block bitmap (`i` past the
    /// groups: group `i - groups`'s inode bitmap), for [`crate::ahead`]:
    /// (0, 0) where the bitmap is computed or not compared. A hint only:
    /// a group whose checks stop early makes it a read not made.
    fn bitmap_span(&self, i: usize) -> (u64, u64) {
        let groups = self.geo.group_count as usize;
        let (g, inode) = if i < groups {
            (i, false)
        } else {
            (i - groups, true)
        };
        let Ok(d) = self.fs.group_desc(GroupNr(num::sat_u32(g))) else {
            return (0, 0);
        };
        let state = self.state(num::sat_u32(g));
        let bad = self.bad_bitmaps.get(g).copied().unwrap_or_default();
        let (uninit, bad, at) = if inode {
            (state.inode_uninit, bad.1, d.inode_bitmap(self.wide))
        } else {
            (state.block_uninit, bad.0, d.block_bitmap(self.wide))
        };
        let computed = uninit && !state.csum_bad;
        let bs = u64::from(self.geo.block_size);
        match at.checked_mul(bs) {
            Some(off) if !bad && !computed => (off, bs),
            _ => (0, 0),
        }
    }

    fn items(&self) -> usize {
        self.geo.group_count.div_ceil(self.per_item) as usize
    }

    /// The groups of item `i`.
    fn item(&self, i: usize) -> std::ops::Range<u32> {
        let first = num::sat_u32(i).saturating_mul(self.per_item);
        let end = first.saturating_add(self.per_item);
        first..end.min(self.geo.group_count)
    }

    /// Whether a worker writes the text of a difference, when `before`
    /// groups of its item differ before this one.
    fn spell_out(&self, before: usize) -> bool {
        before < MAX_DIFF_REPORTS && self.reports.load(Ordering::Relaxed) < MAX_DIFF_REPORTS
    }
}

/// What a worker found in one group, for this thread to raise in group
/// order.
#[derive(Default)]
struct Found {
    /// Free clusters or inodes counted, as the bitmap says, and as the
    /// descriptor says.
    free: u64,
    bitmap_free: u64,
    stored_free: u64,
    /// Directories counted, those the bitmap marks in use, and as the
    /// descriptor says (inodes only).
    dirs: u64,
    bitmap_dirs: u64,
    stored_dirs: u64,
    /// The bitmap could not be read.
    read_error: bool,
    csum_bad: bool,
    /// The padding past the last group's end is not set (blocks only).
    pad_bad: bool,
    /// The bits past the group's in the bitmap block are not all set.
    tail_bad: bool,
    /// Clusters or inodes in use that the bitmap of a group marked
    /// uninitialised leaves clear.
    uninit_hits: u64,
    differs: bool,
    /// How far the repairs' allocation statistics move the stored free
    /// count (inodes freed whose bit was set, less those taken).
    moved: i64,
    /// What the bitmap should be, when a repair writes it.
    want: Option<Vec<u64>>,
    /// The differences, while they may be spelled out.
    runs: Option<Vec<Run>>,
}

impl Found {
    fn repairs(&self) -> bool {
        self.csum_bad || self.pad_bad || self.tail_bad || self.differs
    }

    /// Whether there is anything to raise.
    fn any(&self) -> bool {
        self.stored_free != self.free
            || self.stored_free != self.bitmap_free
            || self.stored_dirs != self.dirs
            || self.stored_dirs != self.bitmap_dirs
            || self.read_error
            || self.uninit_hits > 0
            || self.repairs()
    }
}

/// What a worker found in the groups of one item: the groups with
/// something to raise and nothing for the others (most of them), so that
/// a clean filesystem's items carry a count and an empty list.
#[derive(Default)]
struct Item {
    /// Free clusters or inodes counted in its groups, and as their
    /// bitmaps say.
    free: u64,
    bitmap_free: u64,
    /// See [`Found::moved`], summed.
    moved: i64,
    /// The groups with something to raise, in order.
    found: Vec<(u32, Found)>,
    /// The first group without a descriptor: no group from it on is
    /// compared.
    end: Option<u32>,
}

impl Item {
    /// Adds group `g`'s findings (`None`: it has no descriptor).
    fn add(&mut self, g: u32, f: Option<Found>) -> bool {
        let Some(f) = f else {
            self.end = Some(g);
            return false;
        };
        self.free += f.free;
        self.bitmap_free += f.bitmap_free;
        self.moved += f.moved;
        if f.any() {
            self.found.push((g, f));
        }
        true
    }

    /// Group `g`'s findings, for the groups in order.
    fn take(
        found: &mut std::iter::Peekable<std::vec::IntoIter<(u32, Found)>>,
        g: u32,
    ) -> Option<Found> {
        found.next_if(|(h, _)| *h == g).map(|(_, f)| f)
    }
}

/// A worker's buffers, kept from group to group.
#[derive(Default)]
struct Scratch {
    raw: Vec<u8>,
    want: Vec<u64>,
    have: Vec<u64>,
    want_runs: Vec<(u64, u64)>,
    have_runs: Vec<(u64, u64)>,
}

/// Runs `work` for every item of `x` on `threads` workers (this thread
/// alone for one) and `take` on this thread in item order; see
/// [`crate::ordered::ordered`].
fn each_item(
    x: &Groups<'_>,
    threads: usize,
    work: impl Fn(&mut Scratch, std::ops::Range<u32>) -> Item + Sync,
    take: impl FnMut(usize, Item) -> bool,
) {
    let items = x.items();
    let workers = threads.clamp(1, items.max(1));
    let states: Vec<Scratch> = (0..workers).map(|_| Scratch::default()).collect();
    // A couple of items ahead per worker: each waiting item holds the
    // findings of its groups and the bitmaps their repairs would write.
    crate::ordered::ordered_or_here(
        items,
        states,
        2 * workers + 2,
        |s, i| work(s, x.item(i)),
        take,
    );
}

/// Groups per item for `threads` threads: several items per thread, so
/// that they share the work evenly, and small enough to be many on a
/// filesystem of a few dozen groups too (the same path as a large one).
fn per_item(groups: u32, threads: usize) -> u32 {
    let threads = u32::try_from(threads).unwrap_or(u32::MAX).max(1);
    groups
        .div_ceil(threads.saturating_mul(8))
        .clamp(1, GROUPS_PER_ITEM)
}

/// Most times a problem is said again for one group (e2fsck -n says
/// "in use but group is marked BLOCK_UNINIT" for every such block): the
/// report's cap is for all problems, not for one group's.
const MAX_UNINIT_REPEATS: u64 = 2048;

/// Raises what a worker found in group `g` as the groups come (a bitmap
/// that cannot be read; what is in use in an uninitialised group), and
/// gathers the rest for [`Said`].
fn gather(c: &mut Ctx, which: Bitmap, said: &mut Said, g: u32, f: Found) {
    let (word, uninit, unit, flag) = match which {
        Bitmap::Block => (
            "block",
            ProblemCode::PR_5_BLOCK_UNINIT,
            "BLOCK_UNINIT",
            ext4r_format::group_desc::BG_BLOCK_UNINIT,
        ),
        Bitmap::Inode => (
            "inode",
            ProblemCode::PR_5_INODE_UNINIT,
            "INODE_UNINIT",
            ext4r_format::group_desc::BG_INODE_UNINIT,
        ),
    };
    let repairing = c.repairing();
    if f.read_error {
        c.report(Subject::Group(g)).error(
            5,
            ProblemCode::EXT4R_5_READ_BITMAP,
            format!("Cannot read {word} bitmap of group {g}."),
        );
    }
    // e2fsck asks at each one; a repair's first yes clears the flag.
    let times = if repairing {
        f.uninit_hits.min(1)
    } else {
        f.uninit_hits.min(MAX_UNINIT_REPEATS)
    };
    for _ in 0..times {
        c.report(Subject::Group(g)).error_fix(
            5,
            uninit,
            format!("Group {g} {word}(s) in use but group is marked {unit}"),
            Fix::GroupDescFlags(g, flag, None),
        );
    }
    // Counted as e2fsck counts (see crate::pass5_said).
    let (shown_free, shown_dirs) = if repairing {
        (f.free, f.dirs)
    } else {
        (f.bitmap_free, f.bitmap_dirs)
    };
    said.counts(Counts {
        group: g,
        stored_free: f.stored_free,
        shown_free,
        free: f.free,
        stored_dirs: f.stored_dirs,
        shown_dirs,
        dirs: f.dirs,
    });
    if f.read_error {
        return;
    }
    if let Some(want) = f.want {
        let fix = which.fix(g, want);
        if f.differs {
            said.differs(f.runs, fix.clone());
        }
        if f.pad_bad || f.tail_bad {
            said.tail(fix.clone(), f.pad_bad);
        }
        if f.csum_bad {
            said.csum(g, fix);
        }
    }
}

/// The block bitmaps and counts, said up to the total (the padding and
/// the checksums are said after the inodes').
fn blocks(c: &mut Ctx, used: &[(u64, u64)], planned: &Planned, progress: Progress<'_>) -> Said {
    let cbits = c.geo().cluster_bits;
    let groups = c.geo().group_count;
    let mut found = Vec::new();
    let (mut total_free, mut total_bitmap_free) = (0u64, 0u64);
    let mut total_moved = 0i64;
    {
        let x = Groups {
            fs: c.fs(),
            geo: c.geo(),
            wide: c.wide(),
            csum: c.csum(),
            csums: ext4r_txn::csum::Checksums::new(c.sb()),
            bad_bitmaps: c.groups().unusable_bitmaps(),
            states: c.groups().states(),
            reports: AtomicUsize::new(0),
            per_item: per_item(groups, c.threads()),
            planned,
        };
        let mut reports = 0usize;
        // The bitmaps to read, told to the device a window ahead: the
        // inode bitmaps after the block bitmaps, as they are read
        // (`inodes` goes on with them).
        let ahead =
            crate::ahead::Ahead::new(x.fs.device(), 2 * groups as usize, |i| x.bitmap_span(i));
        let work = |s: &mut Scratch, range: std::ops::Range<u32>| {
            let mut item = Item::default();
            let mut ui = None;
            let mut diffs = 0usize;
            for g in range {
                ahead.reading(g as usize);
                let f = block_group(&x, used, g, s, &mut ui, diffs);
                diffs += usize::from(f.as_ref().is_some_and(|f| f.differs));
                if !item.add(g, f) {
                    break;
                }
            }
            item
        };
        let take = |i: usize, item: Item| {
            total_free += item.free;
            total_moved += item.moved;
            total_bitmap_free += item.bitmap_free;
            let mut more = item.found.into_iter().peekable();
            for g in x.item(i) {
                progress(5, u64::from(g), u64::from(groups));
                // No descriptor: the groups from here on are not compared.
                if item.end == Some(g) {
                    return false;
                }
                if let Some(f) = Item::take(&mut more, g) {
                    reports += usize::from(f.runs.is_some());
                    found.push((g, f));
                }
            }
            x.reports.store(reports, Ordering::Relaxed);
            true
        };
        each_item(&x, c.threads(), work, take);
    }
    let mut said = Said::new(Bitmap::Block, cbits);
    said.stored_moved(total_moved * (1i64 << cbits));
    for (g, f) in found {
        gather(c, Bitmap::Block, &mut said, g, f);
    }
    let shown = if c.repairing() {
        total_free
    } else {
        total_bitmap_free
    };
    said.say_counts(c, shown << cbits, total_free << cbits);
    said
}

/// Compares group `g`'s block bitmap with the blocks in use (`used`, from
/// `*ui` on: the first run not before the group, found by the first group
/// of an item), on a worker; `diffs` groups of the item before it differ.
/// `None` when the group has no descriptor.
fn block_group(
    x: &Groups<'_>,
    used: &[(u64, u64)],
    g: u32,
    s: &mut Scratch,
    ui: &mut Option<usize>,
    diffs: usize,
) -> Option<Found> {
    let d = x.fs.group_desc(GroupNr(g)).ok().copied()?;
    let geo = x.geo;
    let cbits = geo.cluster_bits;
    let cpg = geo.blocks_per_group >> cbits;
    let bs = u64::from(geo.block_size);
    let gs = geo.group_first_block(g);
    let nblocks = geo.group_blocks(g);
    let ge = gs + nblocks;
    let nclusters = nblocks.div_ceil(1 << cbits);
    let mut ui_now = ui.unwrap_or_else(|| used.partition_point(|u| u.1 <= gs));
    while ui_now < used.len() && used[ui_now].1 <= gs {
        ui_now += 1;
    }
    *ui = Some(ui_now);
    // The group's bits in use as cluster runs: counted, and compared with
    // an uninitialised group's computed bitmap, without filling, counting
    // and comparing the group's words (most of a large filesystem's
    // groups are BLOCK_UNINIT and match).
    s.want_runs.clear();
    let mut k = ui_now;
    while k < used.len() && used[k].0 < ge {
        let a = used[k].0.max(gs) - gs;
        let b = used[k].1.min(ge) - gs;
        push_run(
            &mut s.want_runs,
            a >> cbits,
            (b + (1 << cbits) - 1) >> cbits,
        );
        k += 1;
    }
    let used_clusters: u64 = s.want_runs.iter().map(|&(s, e)| e - s).sum();
    let free = nclusters - used_clusters.min(nclusters);
    let state = x.state(g);
    // The repairs' allocation statistics leave groups without a bitmap
    // alone (as the writer does).
    let planned = if state.block_uninit {
        &[][..]
    } else {
        x.planned.blocks_in(gs, ge)
    };
    let taken = planned.iter().filter(|p| p.1).count() as u64;
    let freed = planned.len() as u64 - taken;
    let mut f = Found {
        free,
        bitmap_free: free,
        stored_free: u64::from(d.free_blocks_count(x.wide))
            .saturating_add(freed)
            .saturating_sub(taken),
        moved: i64::try_from(freed).unwrap_or(0) - i64::try_from(taken).unwrap_or(0),
        ..Found::default()
    };
    if x.bad_bitmaps.get(g as usize).is_some_and(|b| b.0) {
        return Some(f);
    }
    let uninit = state.block_uninit;
    let computed = uninit && !state.csum_bad;
    if computed {
        uninit_runs(geo, x.wide, g, &d, &mut s.have_runs);
        if s.have_runs == s.want_runs {
            // The same bits: nothing in use beyond the computed bitmap,
            // and no difference to report.
            return Some(f);
        }
    }
    s.want.clear();
    s.want.resize(num::index(cpg.div_ceil(64)), 0);
    for &(a, b) in &s.want_runs {
        set_bits(&mut s.want, a, b);
    }
    if computed {
        uninit_bitmap(geo, x.wide, g, &d, cpg, &mut s.have_runs, &mut s.have);
    } else {
        s.raw.resize(num::index(bs), 0);
        let loc = d.block_bitmap(x.wide);
        if x.fs.device().read_at(&mut s.raw, loc * bs).is_err() {
            f.read_error = true;
            return Some(f);
        }
        f.csum_bad = x.csum && !x.csums.block_bitmap_ok(&d, &s.raw);
        if g + 1 == geo.group_count && nclusters < cpg {
            let mut all = Vec::new();
            to_words(&s.raw, cpg, &mut all);
            let mut pad = vec![0u64; all.len()];
            set_bits(&mut pad, nclusters, cpg);
            f.pad_bad = pad.iter().zip(&all).any(|(p, a)| p & a != *p);
        }
        f.tail_bad = tail_unset(&s.raw, cpg);
        to_words(&s.raw, nclusters, &mut s.have);
        for &(b, taken) in planned {
            put_bit(&mut s.have, (b - gs) >> cbits, taken);
        }
    }
    let have = &s.have;
    let w = &s.want[..have.len().min(s.want.len())];
    f.bitmap_free = nclusters.saturating_sub(count_bits(have));
    if uninit {
        f.uninit_hits = w
            .iter()
            .zip(have)
            .map(|(w, h)| u64::from((w & !h).count_ones()))
            .sum();
    }
    f.differs = w != have.as_slice();
    if f.differs && x.spell_out(diffs) {
        f.runs = Some(diff_runs(w, have, gs >> cbits));
    }
    if f.repairs() {
        f.want = Some(s.want.clone());
    }
    Some(f)
}

/// The clusters a BLOCK_UNINIT group's computed bitmap sets (see
/// [`uninit_bitmap`]), as sorted, merged runs.
fn uninit_runs(
    geo: &ext4r_format::geometry::Geometry,
    wide: bool,
    g: u32,
    d: &GroupDesc,
    out: &mut Vec<(u64, u64)>,
) {
    let cbits = geo.cluster_bits;
    let gs = geo.group_first_block(g);
    let ge = gs + geo.group_blocks(g);
    out.clear();
    let mut mark = |a: u64, n: u64| {
        let a2 = a.max(gs);
        let b2 = a.saturating_add(n).min(ge);
        if a2 < b2 {
            out.push(((a2 - gs) >> cbits, (b2 - gs + (1 << cbits) - 1) >> cbits));
        }
    };
    let m = geo.group_meta(g);
    if let Some(s) = m.super_block {
        mark(s, 1);
    }
    if let Some((f, n)) = m.old_desc {
        mark(f, n);
    }
    if let Some(b) = m.meta_desc {
        mark(b, 1);
    }
    mark(d.block_bitmap(wide), 1);
    mark(d.inode_bitmap(wide), 1);
    mark(d.inode_table(wide), u64::from(geo.inode_blocks_per_group()));
    normalize(out);
}

/// The bitmap the kernel computes for a BLOCK_UNINIT group, into `w`: its
/// own superblock copy and descriptors, and its own bitmaps and inode
/// table when they lie inside the group ([`uninit_runs`], into `runs`, as
/// bits).
fn uninit_bitmap(
    geo: &ext4r_format::geometry::Geometry,
    wide: bool,
    g: u32,
    d: &GroupDesc,
    cpg: u64,
    runs: &mut Vec<(u64, u64)>,
    w: &mut Vec<u64>,
) {
    let nclusters = geo.group_blocks(g).div_ceil(1 << geo.cluster_bits);
    uninit_runs(geo, wide, g, d, runs);
    w.clear();
    w.resize(num::index(cpg.div_ceil(64)), 0);
    for &(s, e) in runs.iter() {
        set_bits(w, s, e);
    }
    w.truncate(num::index(nclusters.div_ceil(64)));
    if nclusters % 64 != 0 {
        if let Some(l) = w.last_mut() {
            *l &= (1u64 << (nclusters % 64)) - 1;
        }
    }
}

/// What counting a group's inodes needs besides [`Groups`]: the in-use
/// inodes and directories pass 1 found, and the others in use.
struct InUse<'a> {
    used: BitsView<'a>,
    dirs: BitsView<'a>,
    /// In use besides pass 1's (journal, quota, orphan file), sorted.
    extra: &'a [u32],
    first_ino: u64,
}

/// The inode bitmaps and counts, said up to the total.
fn inodes(c: &mut Ctx, planned: &Planned) -> Said {
    let groups = c.geo().group_count;
    // In use: reserved inodes, pass 1's inodes, the special ones (a few,
    // merged in order; pass 1's are read from its sets, not copied).
    let mut extra = c.extra_used().to_vec();
    extra.sort_unstable();
    extra.dedup();
    let (used, dirs) = c.inodes().views();
    let u = InUse {
        used,
        dirs,
        extra: &extra,
        first_ino: u64::from(c.sb().first_ino()),
    };
    let x = Groups {
        fs: c.fs(),
        geo: c.geo(),
        wide: c.wide(),
        csum: c.csum(),
        csums: ext4r_txn::csum::Checksums::new(c.sb()),
        bad_bitmaps: c.groups().unusable_bitmaps(),
        states: c.groups().states(),
        reports: AtomicUsize::new(0),
        per_item: per_item(groups, c.threads()),
        planned,
    };
    let mut found = Vec::new();
    let (mut total_free, mut total_bitmap_free) = (0u64, 0u64);
    let mut total_moved = 0i64;
    let mut reports = 0usize;
    let ahead = crate::ahead::Ahead::new(x.fs.device(), groups as usize, |g| {
        x.bitmap_span(groups as usize + g)
    });
    let work = |s: &mut Scratch, range: std::ops::Range<u32>| {
        let mut item = Item::default();
        let mut diffs = 0usize;
        for g in range {
            ahead.reading(g as usize);
            let f = inode_group(&x, &u, g, s, diffs);
            diffs += usize::from(f.as_ref().is_some_and(|f| f.differs));
            if !item.add(g, f) {
                break;
            }
        }
        item
    };
    let take = |i: usize, item: Item| {
        total_free += item.free;
        total_bitmap_free += item.bitmap_free;
        total_moved += item.moved;
        let mut more = item.found.into_iter().peekable();
        for g in x.item(i) {
            if item.end == Some(g) {
                return false;
            }
            if let Some(f) = Item::take(&mut more, g) {
                reports += usize::from(f.runs.is_some());
                found.push((g, f));
            }
        }
        x.reports.store(reports, Ordering::Relaxed);
        true
    };
    each_item(&x, c.threads(), work, take);
    let mut said = Said::new(Bitmap::Inode, 0);
    said.stored_moved(total_moved);
    for (g, f) in found {
        gather(c, Bitmap::Inode, &mut said, g, f);
    }
    let shown = if c.repairing() {
        total_free
    } else {
        total_bitmap_free
    };
    said.say_counts(c, shown, total_free);
    said
}

/// Compares group `g`'s inode bitmap with the inodes in use, on a worker;
/// `diffs` groups of the item before it differ. `None` when the group has
/// no descriptor.
fn inode_group(
    x: &Groups<'_>,
    u: &InUse<'_>,
    g: u32,
    s: &mut Scratch,
    diffs: usize,
) -> Option<Found> {
    let d = x.fs.group_desc(GroupNr(g)).ok().copied()?;
    let ipg = u64::from(x.geo.inodes_per_group);
    let bs = u64::from(x.geo.block_size);
    let base = u64::from(g) * ipg; // inode number of bit 0, minus 1
    let want = &mut s.want;
    want.clear();
    want.resize(num::index(ipg.div_ceil(64)), 0);
    let res_end = u.first_ino.saturating_sub(1).saturating_sub(base).min(ipg);
    if base < u.first_ino.saturating_sub(1) {
        set_bits(want, 0, res_end);
    }
    // Bit `i` is inode `base + 1 + i`.
    let (from, to) = (base + 1, base + ipg + 1);
    u.used
        .runs(from, to, |a, b| set_bits(want, a - from, b - from));
    let mut dirs = 0u64;
    u.dirs.runs(from, to, |a, b| dirs += b - a);
    let first = u.extra.partition_point(|&i| u64::from(i) < from);
    for &ino in u.extra[first..].iter().take_while(|&&i| u64::from(i) < to) {
        let bit = u64::from(ino) - from;
        want[(bit / 64) as usize] |= 1 << (bit % 64);
    }
    let state = x.state(g);
    // The repairs' allocation statistics, in a group with a bitmap.
    let planned = if state.inode_uninit {
        &[][..]
    } else {
        x.planned.inodes_in(from, to)
    };
    let (mut taken, mut taken_dirs, mut freed_dirs) = (0u64, 0u64, 0u64);
    for &(ino, t, dir) in planned {
        put_bit(want, u64::from(ino) - from, t);
        taken += u64::from(t);
        taken_dirs += u64::from(t && dir);
        freed_dirs += u64::from(!t && dir);
    }
    let dirs = (dirs + taken_dirs).saturating_sub(freed_dirs);
    let used_n = count_bits(want);
    // Taken: counted in use and as stored whatever the bit was (the
    // writer's `alloc_stats_inode`); freed: counted free, and as stored
    // only where the bitmap has the bit set (the writer's `free_inode`),
    // when it is read below.
    let mut f = Found {
        free: ipg - used_n,
        bitmap_free: ipg - used_n,
        stored_free: u64::from(d.free_inodes_count(x.wide)).saturating_sub(taken),
        dirs,
        bitmap_dirs: dirs,
        stored_dirs: u64::from(d.used_dirs_count(x.wide)) + taken_dirs,
        moved: -i64::try_from(taken).unwrap_or(i64::MAX),
        ..Found::default()
    };
    if x.bad_bitmaps.get(g as usize).is_some_and(|b| b.1) {
        return Some(f);
    }
    let uninit = state.inode_uninit;
    let computed = uninit && !state.csum_bad;
    if computed && used_n == 0 {
        // The computed bitmap is empty, as is what is in use.
        return Some(f);
    }
    if computed {
        s.have.clear();
        s.have.resize(want.len(), 0);
    } else {
        s.raw.resize(num::index(bs), 0);
        if x.fs
            .device()
            .read_at(&mut s.raw, d.inode_bitmap(x.wide) * bs)
            .is_err()
        {
            f.read_error = true;
            return Some(f);
        }
        f.csum_bad = x.csum && !x.csums.inode_bitmap_ok(&d, &s.raw);
        f.tail_bad = tail_unset(&s.raw, ipg);
        to_words(&s.raw, ipg, &mut s.have);
        for &(ino, t, dir) in planned {
            let bit = u64::from(ino) - from;
            let was = s
                .have
                .get(num::index(bit / 64))
                .is_some_and(|w| w & (1 << (bit % 64)) != 0);
            if !t && was {
                f.stored_free += 1;
                f.moved += 1;
                f.stored_dirs = f.stored_dirs.saturating_sub(u64::from(dir));
            }
            put_bit(&mut s.have, bit, t);
        }
    }
    if uninit {
        f.uninit_hits = want
            .iter()
            .zip(&s.have)
            .map(|(w, h)| u64::from((w & !h).count_ones()))
            .sum();
    }
    f.differs = *want != s.have;
    if f.differs {
        // As the bitmap says: its free inodes, and the directories among
        // the inodes it marks.
        f.bitmap_free = ipg.saturating_sub(count_bits(&s.have));
        let mut dw = vec![0u64; want.len()];
        u.dirs
            .runs(from, to, |a, b| set_bits(&mut dw, a - from, b - from));
        for &(ino, t, dir) in planned {
            if dir {
                put_bit(&mut dw, u64::from(ino) - from, t);
            }
        }
        f.bitmap_dirs = dw
            .iter()
            .zip(&s.have)
            .map(|(d, h)| u64::from((d & h).count_ones()))
            .sum();
        if x.spell_out(diffs) {
            f.runs = Some(diff_runs(want, &s.have, base + 1));
        }
    }
    if f.repairs() {
        f.want = Some(want.clone());
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_ranges_fill_words_and_count() {
        let mut w = vec![0u64; 3];
        set_bits(&mut w, 3, 130);
        assert_eq!(count_bits(&w), 127);
        assert_eq!(w[0], !0u64 << 3);
        assert_eq!(w[1], !0);
        assert_eq!(w[2], 0b11);
    }

    #[test]
    fn bit_ranges_agree_with_one_bit_at_a_time() {
        for from in 0..200u64 {
            for to in from..200 {
                let mut w = vec![0u64; 4];
                set_bits(&mut w, from, to);
                let mut slow = vec![0u64; 4];
                for i in from..to {
                    slow[(i / 64) as usize] |= 1 << (i % 64);
                }
                assert_eq!(w, slow, "[{from}, {to})");
            }
        }
    }

    #[test]
    fn planned_blocks_are_taken_and_freed_in_the_runs() {
        let used = vec![(10, 20), (30, 31)];
        // Freed at a run's start, middle and end; taken alone and next to
        // a run; nothing planned leaves the runs as they are.
        let planned = [
            (10, false),
            (15, false),
            (19, false),
            (25, true),
            (31, true),
        ];
        assert_eq!(
            with_planned(used.clone(), &planned),
            vec![(11, 15), (16, 19), (25, 26), (30, 32)]
        );
        assert_eq!(with_planned(used.clone(), &[]), used);
        assert_eq!(with_planned(vec![(5, 6)], &[(5, false)]), vec![]);
    }

    #[test]
    fn runs_are_equal_exactly_when_bits_are() {
        let mut a = Vec::new();
        for (s, e) in [(0, 3), (3, 5), (7, 9), (8, 12), (20, 20)] {
            push_run(&mut a, s, e);
        }
        assert_eq!(a, [(0, 5), (7, 12)]);
        let mut b = vec![(7, 10), (0, 2), (10, 12), (2, 5), (9, 11)];
        normalize(&mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn bytes_become_words_cut_at_the_bit_count() {
        let mut w = vec![7; 9];
        to_words(&[0xff; 16], 70, &mut w);
        assert_eq!(w, vec![!0, 0b11_1111]);
        // A last partial word is zero-padded; words past the bytes are 0.
        to_words(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 256, &mut w);
        assert_eq!(w, vec![0x0807_0605_0403_0201, 0x0a09, 0, 0]);
    }

    #[test]
    fn differences_read_like_e2fsck() {
        let want = vec![0b0111u64];
        let have = vec![0b1100u64];
        assert_eq!(
            diff_runs(&want, &have, 100),
            vec![(true, 100, 101), (false, 103, 103)]
        );
    }
}
