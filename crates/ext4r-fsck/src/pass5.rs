//! Pass 1b's overlap check and pass 5: the block and inode bitmaps and the
//! free counts against what passes 0–4 found in use. Groups flagged
//! uninitialised are compared with the bitmap the kernel would compute,
//! without reading anything; bitmaps are compared a word at a time.

use ext4r_format::group_desc::GroupDesc;
use ext4r_format::GroupNr;

use crate::ctx::{Claim, Ctx};
use crate::fix::Fix;
use crate::Progress;

/// Most groups whose bitmap differences are spelled out.
const MAX_DIFF_REPORTS: usize = 64;

pub(crate) fn run(c: &mut Ctx, progress: Progress<'_>) {
    // Before the claims are consumed: a new orphan file takes free blocks.
    crate::orphan_file::check(c);
    let used = overlaps(c);
    blocks(c, &used, progress);
    inodes(c);
}

/// Sorts the claims, reports blocks claimed twice and returns the union as
/// sorted disjoint (start, end) ranges.
fn overlaps(c: &mut Ctx) -> Vec<(u64, u64)> {
    let claims = std::mem::take(&mut c.claims);
    if claims.regular() && c.bad_blocks.is_empty() {
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
    if c.sb
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
        c.p.error(
            1,
            "PR_1B_DUP_BLOCK",
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

fn to_words(bytes: &[u8], nbits: u64) -> Vec<u64> {
    let mut w = vec![0u64; nbits.div_ceil(64) as usize];
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
    w
}

/// Differences as e2fsck prints them: `+a-b` for bits that should be set,
/// `-a` for bits that should be clear, numbers offset by `base`.
fn diff_text(want: &[u64], have: &[u64], base: u64) -> (String, u64) {
    let mut out = String::new();
    let mut n = 0u64;
    let mut run: Option<(bool, u64, u64)> = None;
    let flush = |out: &mut String, r: Option<(bool, u64, u64)>| {
        if let Some((plus, a, b)) = r {
            if out.len() < 400 {
                let s = if plus { '+' } else { '-' };
                if a == b {
                    out.push_str(&format!(" {s}{}", base + a));
                } else {
                    out.push_str(&format!(" {s}({}--{})", base + a, base + b));
                }
            }
        }
    };
    for (wi, (w, h)) in want.iter().zip(have).enumerate() {
        let x = w ^ h;
        if x == 0 {
            continue;
        }
        for bit in 0..64 {
            if x & (1 << bit) == 0 {
                continue;
            }
            n += 1;
            let i = wi as u64 * 64 + bit;
            let plus = w & (1 << bit) != 0;
            match run {
                Some((p, a, b)) if p == plus && b + 1 == i => run = Some((p, a, i)),
                r => {
                    flush(&mut out, r);
                    run = Some((plus, i, i));
                }
            }
        }
    }
    flush(&mut out, run);
    (out, n)
}

fn blocks(c: &mut Ctx, used: &[(u64, u64)], progress: Progress<'_>) {
    let wide = c.wide();
    let cbits = c.geo.cluster_bits;
    let bpg = c.geo.blocks_per_group;
    let cpg = bpg >> cbits;
    let bs = u64::from(c.geo.block_size);
    let csums = ext4r_txn::csum::Checksums::new(&c.sb);
    let mut total_free = 0u64;
    let mut total_used_blocks = 0u64;
    let mut reports = 0usize;
    let mut ui = 0usize;
    let mut want = vec![0u64; cpg.div_ceil(64) as usize];
    // The group's bits in use as cluster runs: counted, and compared with
    // an uninitialised group's computed bitmap, without filling, counting
    // and comparing the group's words (most of a large filesystem's
    // groups are BLOCK_UNINIT and match).
    let mut want_runs: Vec<(u64, u64)> = Vec::new();
    let mut have_runs: Vec<(u64, u64)> = Vec::new();
    let mut raw = vec![0u8; bs as usize];
    let groups = c.geo.group_count;
    for g in 0..groups {
        progress(5, u64::from(g), u64::from(groups));
        let Ok(d) = c.fs.group_desc(GroupNr(g)).copied() else {
            break;
        };
        let gs = c.geo.group_first_block(g);
        let nblocks = c.geo.group_blocks(g);
        let ge = gs + nblocks;
        let nclusters = nblocks.div_ceil(1 << cbits);
        while ui < used.len() && used[ui].1 <= gs {
            ui += 1;
        }
        want_runs.clear();
        let mut k = ui;
        while k < used.len() && used[k].0 < ge {
            let a = used[k].0.max(gs) - gs;
            let b = used[k].1.min(ge) - gs;
            push_run(&mut want_runs, a >> cbits, (b + (1 << cbits) - 1) >> cbits);
            k += 1;
        }
        let used_clusters: u64 = want_runs.iter().map(|&(s, e)| e - s).sum();
        total_used_blocks += used_clusters << cbits;
        let free = nclusters - used_clusters.min(nclusters);
        total_free += free;
        let stored_free = u64::from(d.free_blocks_count(wide));
        if stored_free != free {
            c.p.error_fix(
                5,
                "PR_5_FREE_BLOCK_COUNT_GROUP",
                format!("Free blocks count wrong for group #{g} ({stored_free}, counted={free})."),
                Fix::GroupFreeBlocks(g, free as u32),
            );
        }
        if c.bad_bitmaps[g as usize].0 {
            continue;
        }
        let uninit = c.group_state(g).block_uninit;
        let computed = uninit && !c.group_state(g).csum_bad;
        if computed {
            uninit_runs(c, g, &d, &mut have_runs);
            if have_runs == want_runs {
                // The same bits: nothing in use beyond the computed
                // bitmap, and no difference to report.
                continue;
            }
        }
        want.fill(0);
        for &(s, e) in &want_runs {
            set_bits(&mut want, s, e);
        }
        let have = if computed {
            uninit_bitmap(c, g, &d, cpg)
        } else {
            let loc = d.block_bitmap(wide);
            if c.fs.device().read_at(&mut raw, loc * bs).is_err() {
                c.p.error(
                    5,
                    "EXT4R_5_READ_BITMAP",
                    format!("Cannot read block bitmap of group {g}."),
                );
                continue;
            }
            if c.csum() && !csums.block_bitmap_ok(&d, &raw) {
                c.p.error_fix(
                    5,
                    "PR_5_BLOCK_BITMAP_CSUM_INVALID",
                    format!("Block bitmap for group {g} has an invalid checksum."),
                    Fix::BlockBitmap(g, want.clone()),
                );
            }
            if g + 1 == groups && nclusters < cpg {
                let all = to_words(&raw, cpg);
                let mut pad = vec![0u64; all.len()];
                set_bits(&mut pad, nclusters, cpg);
                if pad.iter().zip(&all).any(|(p, a)| p & a != *p) {
                    c.p.error_fix(
                        5,
                        "PR_5_BLOCK_BMAP_PADDING",
                        "Padding at end of block bitmap is not set.".into(),
                        Fix::BlockBitmap(g, want.clone()),
                    );
                }
            }
            if tail_unset(&raw, cpg) {
                c.p.error_fix(
                    5,
                    "PR_5_BLOCK_BMAP_PADDING",
                    format!("Padding at end of block bitmap is not set.  (group {g})"),
                    Fix::BlockBitmap(g, want.clone()),
                );
            }
            to_words(&raw, nclusters)
        };
        let w = &want[..have.len().min(want.len())];
        if uninit && w.iter().zip(&have).any(|(w, h)| w & !h != 0) {
            // Blocks in use where the descriptor says none are: its flag
            // goes (the bitmap is then written in full).
            c.p.error_fix(
                5,
                "PR_5_BLOCK_UNINIT",
                format!("Group {g} block(s) in use but group is marked BLOCK_UNINIT"),
                Fix::GroupDescFlags(g, ext4r_format::group_desc::BG_BLOCK_UNINIT, None),
            );
        }
        if w != have.as_slice() && reports < MAX_DIFF_REPORTS {
            reports += 1;
            let (text, _) = diff_text(w, &have, gs >> cbits);
            c.p.error_fix(
                5,
                "PR_5_BLOCK_BITMAP_HEADER",
                format!("Block bitmap differences:  {}", text.trim()),
                Fix::BlockBitmap(g, want.clone()),
            );
        } else if w != have.as_slice() {
            c.p.error_fix(
                5,
                "PR_5_BLOCK_BITMAP_HEADER",
                format!("Block bitmap differences in group {g}"),
                Fix::BlockBitmap(g, want.clone()),
            );
        }
    }
    let _ = total_used_blocks;
    c.stats.blocks_used = c.geo.blocks_count.saturating_sub(total_free << cbits);
    let sb_free = c.sb.free_blocks_count() >> cbits;
    c.free_blocks_total = total_free << cbits;
    if sb_free != total_free {
        c.p.harmless(
            5,
            "PR_5_FREE_BLOCK_COUNT",
            format!(
                "Free blocks count wrong ({}, counted={}).",
                c.sb.free_blocks_count(),
                total_free << cbits
            ),
        );
    }
}

/// The clusters a BLOCK_UNINIT group's computed bitmap sets (see
/// [`uninit_bitmap`]), as sorted, merged runs.
fn uninit_runs(c: &Ctx, g: u32, d: &GroupDesc, out: &mut Vec<(u64, u64)>) {
    let wide = c.wide();
    let cbits = c.geo.cluster_bits;
    let gs = c.geo.group_first_block(g);
    let ge = gs + c.geo.group_blocks(g);
    out.clear();
    let mut mark = |a: u64, n: u64| {
        let a2 = a.max(gs);
        let b2 = a.saturating_add(n).min(ge);
        if a2 < b2 {
            out.push(((a2 - gs) >> cbits, (b2 - gs + (1 << cbits) - 1) >> cbits));
        }
    };
    let m = c.geo.group_meta(g);
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
    mark(
        d.inode_table(wide),
        u64::from(c.geo.inode_blocks_per_group()),
    );
    normalize(out);
}

/// The bitmap the kernel computes for a BLOCK_UNINIT group: its own
/// superblock copy and descriptors, and its own bitmaps and inode table
/// when they lie inside the group ([`uninit_runs`] as bits).
fn uninit_bitmap(c: &Ctx, g: u32, d: &GroupDesc, cpg: u64) -> Vec<u64> {
    let nclusters = c.geo.group_blocks(g).div_ceil(1 << c.geo.cluster_bits);
    let mut runs = Vec::new();
    uninit_runs(c, g, d, &mut runs);
    let mut w = vec![0u64; cpg.div_ceil(64) as usize];
    for (s, e) in runs {
        set_bits(&mut w, s, e);
    }
    w.truncate(nclusters.div_ceil(64) as usize);
    if nclusters % 64 != 0 {
        if let Some(l) = w.last_mut() {
            *l &= (1u64 << (nclusters % 64)) - 1;
        }
    }
    w
}

fn inodes(c: &mut Ctx) {
    let wide = c.wide();
    let ipg = u64::from(c.geo.inodes_per_group);
    let bs = u64::from(c.geo.block_size);
    let csums = ext4r_txn::csum::Checksums::new(&c.sb);
    let first_ino = u64::from(c.sb.first_ino());
    // In use: reserved inodes, pass 1's inodes, the special ones (a few,
    // merged in order; pass 1's are read from its bitmaps, not copied).
    let mut extra = c.extra_used.clone();
    extra.sort_unstable();
    extra.dedup();
    let mut ei = 0usize;
    let mut raw = vec![0u8; bs as usize];
    let mut total_free = 0u64;
    let mut reports = 0usize;
    for g in 0..c.geo.group_count {
        let Ok(d) = c.fs.group_desc(GroupNr(g)).copied() else {
            break;
        };
        let base = u64::from(g) * ipg; // inode number of bit 0, minus 1
        let mut want = vec![0u64; ipg.div_ceil(64) as usize];
        let res_end = first_ino.saturating_sub(1).saturating_sub(base).min(ipg);
        if base < first_ino.saturating_sub(1) {
            set_bits(&mut want, 0, res_end);
        }
        let mut dirs = 0u64;
        let mut mark = |ino: u32| {
            let bit = u64::from(ino) - 1 - base;
            want[(bit / 64) as usize] |= 1 << (bit % 64);
        };
        let first = u32::try_from(base + 1).unwrap_or(u32::MAX);
        let mut next = c.inodes.next(first);
        while let Some(ino) = next.filter(|&i| u64::from(i) <= base + ipg) {
            mark(ino);
            if c.inodes.is_dir(ino) {
                dirs += 1;
            }
            next = ino.checked_add(1).and_then(|i| c.inodes.next(i));
        }
        while ei < extra.len() && u64::from(extra[ei]) <= base + ipg {
            if u64::from(extra[ei]) > base {
                mark(extra[ei]);
            }
            ei += 1;
        }
        let used_n = count_bits(&want);
        let free = ipg - used_n;
        total_free += free;
        if u64::from(d.free_inodes_count(wide)) != free {
            c.p.error_fix(
                5,
                "PR_5_FREE_INODE_COUNT_GROUP",
                format!(
                    "Free inodes count wrong for group #{g} ({}, counted={free}).",
                    d.free_inodes_count(wide)
                ),
                Fix::GroupFreeInodes(g, free as u32),
            );
        }
        if u64::from(d.used_dirs_count(wide)) != dirs {
            c.p.error_fix(
                5,
                "PR_5_FREE_DIR_COUNT_GROUP",
                format!(
                    "Directories count wrong for group #{g} ({}, counted={dirs}).",
                    d.used_dirs_count(wide)
                ),
                Fix::GroupUsedDirs(g, dirs as u32),
            );
        }
        if c.bad_bitmaps[g as usize].1 {
            continue;
        }
        let uninit = c.group_state(g).inode_uninit;
        let computed = uninit && !c.group_state(g).csum_bad;
        if computed && used_n == 0 {
            // The computed bitmap is empty, as is what is in use.
            continue;
        }
        let have = if computed {
            vec![0u64; want.len()]
        } else {
            if c.fs
                .device()
                .read_at(&mut raw, d.inode_bitmap(wide) * bs)
                .is_err()
            {
                c.p.error(
                    5,
                    "EXT4R_5_READ_BITMAP",
                    format!("Cannot read inode bitmap of group {g}."),
                );
                continue;
            }
            if c.csum() && !csums.inode_bitmap_ok(&d, &raw) {
                c.p.error_fix(
                    5,
                    "PR_5_INODE_BITMAP_CSUM_INVALID",
                    format!("Inode bitmap for group {g} has an invalid checksum."),
                    Fix::InodeBitmap(g, want.clone()),
                );
            }
            if tail_unset(&raw, ipg) {
                c.p.error_fix(
                    5,
                    "PR_5_INODE_BMAP_PADDING",
                    format!("Padding at end of inode bitmap is not set.  (group {g})"),
                    Fix::InodeBitmap(g, want.clone()),
                );
            }
            to_words(&raw, ipg)
        };
        if uninit && want.iter().any(|&w| w != 0) {
            c.p.error_fix(
                5,
                "PR_5_INODE_UNINIT",
                format!("Group {g} inode(s) in use but group is marked INODE_UNINIT"),
                Fix::GroupDescFlags(g, ext4r_format::group_desc::BG_INODE_UNINIT, None),
            );
        }
        if want != have {
            if reports < MAX_DIFF_REPORTS {
                reports += 1;
                let (text, _) = diff_text(&want, &have, base + 1);
                c.p.error_fix(
                    5,
                    "PR_5_INODE_BITMAP_HEADER",
                    format!("Inode bitmap differences:  {}", text.trim()),
                    Fix::InodeBitmap(g, want.clone()),
                );
            } else {
                c.p.error_fix(
                    5,
                    "PR_5_INODE_BITMAP_HEADER",
                    format!("Inode bitmap differences in group {g}"),
                    Fix::InodeBitmap(g, want.clone()),
                );
            }
        }
    }
    c.stats.inodes_used = u64::from(c.sb.s_inodes_count.get()).saturating_sub(total_free);
    if u64::from(c.sb.s_free_inodes_count.get()) != total_free {
        c.p.harmless(
            5,
            "PR_5_FREE_INODE_COUNT",
            format!(
                "Free inodes count wrong ({}, counted={total_free}).",
                c.sb.s_free_inodes_count.get()
            ),
        );
    }
    // One repair for both summary counts; harmless under -n, still
    // corrected by a repair run as e2fsck does.
    let blocks = c.free_blocks_total;
    if blocks != c.sb.free_blocks_count() || u64::from(c.sb.s_free_inodes_count.get()) != total_free
    {
        c.p.harmless_fix(
            5,
            "EXT4R_5_SUMMARY_COUNTS",
            format!("Superblock free counts set to {blocks} blocks, {total_free} inodes."),
            Fix::SuperblockCounts(blocks, total_free),
        );
    }
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
        let w = to_words(&[0xff; 16], 70);
        assert_eq!(w, vec![!0, 0b11_1111]);
        // A last partial word is zero-padded; words past the bytes are 0.
        let w = to_words(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 256);
        assert_eq!(w, vec![0x0807_0605_0403_0201, 0x0a09, 0, 0]);
    }

    #[test]
    fn differences_read_like_e2fsck() {
        let want = vec![0b0111u64];
        let have = vec![0b1100u64];
        let (text, n) = diff_text(&want, &have, 100);
        assert_eq!(n, 3);
        assert_eq!(text.trim(), "+(100--101) -103");
    }
}
