//! Where a file's blocks go: its runs laid out, in logical order, over the
//! free pieces allocated for them.
//!
//! The one rule that shapes this is bigalloc's: a logical cluster lives in
//! one physical cluster, at the same offset (the kernel's `ext4_map_blocks`
//! and e2fsck's pass 1 both rely on it). So the unit laid out is the
//! logical cluster: each distinct logical cluster the runs touch gets the
//! next physical cluster of the pieces, and a block goes to its cluster's
//! place plus its offset in the cluster. Without bigalloc a cluster is a
//! block and this is a plain back-to-back layout. Holes stay holes (no
//! cluster is spent on a logical cluster nothing maps) and unwritten runs
//! stay unwritten.

use ext4r::fs::Run;
use ext4r_txn::map::push_run;

/// One stretch of blocks to copy: `len` blocks from `from` to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Move {
    /// First source block.
    pub from: u64,
    /// First target block.
    pub to: u64,
    /// Blocks.
    pub len: u64,
    /// Unwritten: nothing to copy (it reads as zeros either way).
    pub unwritten: bool,
}

/// Distinct logical clusters of `ratio` blocks that `runs` (sorted by
/// logical block) touch: the physical clusters a layout needs.
pub(crate) fn clusters(runs: &[Run], ratio: u64) -> u64 {
    let r = ratio.max(1);
    let mut n = 0u64;
    let mut last: Option<u64> = None;
    for run in runs.iter().filter(|run| run.len > 0) {
        let (a, b) = (run.logical / r, (run.end() - 1) / r);
        let from = match last {
            Some(l) if l >= a => l + 1,
            _ => a,
        };
        if b >= from {
            n += b - from + 1;
        }
        last = Some(last.map_or(b, |l| l.max(b)));
    }
    n
}

fn push_move(out: &mut Vec<Move>, m: Move) {
    if let Some(last) = out.last_mut() {
        if last.from + last.len == m.from
            && last.to + last.len == m.to
            && last.unwritten == m.unwritten
        {
            last.len += m.len;
            return;
        }
    }
    out.push(m);
}

/// Lays `runs` (sorted by logical block, not overlapping) out over
/// `pieces` (`(first block, blocks)`, each starting on a cluster boundary),
/// filled in order. Returns the runs at their new places (merged where
/// they continue each other) and the copies that get them there; `None`
/// when the pieces hold fewer clusters than the runs need.
pub(crate) fn lay_out(
    runs: &[Run],
    ratio: u64,
    pieces: &[(u64, u64)],
) -> Option<(Vec<Run>, Vec<Move>)> {
    let r = ratio.max(1);
    let mut new: Vec<Run> = Vec::new();
    let mut moves: Vec<Move> = Vec::new();
    // The piece being filled and the clusters of it used so far.
    let (mut pi, mut used) = (0usize, 0u64);
    // The last logical cluster placed, and its physical cluster.
    let mut last: Option<(u64, u64)> = None;
    for run in runs.iter().filter(|run| run.len > 0) {
        let (mut l, end) = (run.logical, run.end());
        while l < end {
            let lc = l / r;
            let (pc, count) = match last {
                Some((llc, lpc)) if llc == lc => (lpc, 1),
                _ => {
                    while pi < pieces.len() && used >= pieces[pi].1 / r {
                        pi += 1;
                        used = 0;
                    }
                    let (start, len) = *pieces.get(pi)?;
                    debug_assert_eq!(start % r, 0, "pieces start on cluster boundaries");
                    let want = (end - 1) / r - lc + 1;
                    let count = (len / r - used).min(want);
                    let pc = start / r + used;
                    used += count;
                    (pc, count)
                }
            };
            let seg_end = end.min((lc + count) * r);
            let len = seg_end - l;
            let to = pc * r + l % r;
            push_move(
                &mut moves,
                Move {
                    from: run.physical + (l - run.logical),
                    to,
                    len,
                    unwritten: run.unwritten,
                },
            );
            push_run(
                &mut new,
                Run {
                    logical: l,
                    physical: to,
                    len,
                    unwritten: run.unwritten,
                },
            );
            let elc = (seg_end - 1) / r;
            last = Some((elc, pc + (elc - lc)));
            l = seg_end;
        }
    }
    Some((new, moves))
}

/// `runs` with `moved` (the same logical blocks at new places) put in
/// their place: the file's whole mapping after a partial move, merged.
pub(crate) fn replace(runs: &[Run], moved: &[Run]) -> Vec<Run> {
    // Cut the moved logical ranges out of the old runs, then merge both.
    let mut kept: Vec<Run> = Vec::new();
    let mut mi = 0usize;
    for run in runs {
        let (mut l, end) = (run.logical, run.end());
        while l < end {
            while mi < moved.len() && moved[mi].end() <= l {
                mi += 1;
            }
            let next_cut = moved.get(mi).map_or(end, |m| m.logical.max(l)).min(end);
            if next_cut > l {
                kept.push(Run {
                    logical: l,
                    physical: run.physical + (l - run.logical),
                    len: next_cut - l,
                    unwritten: run.unwritten,
                });
                l = next_cut;
            } else if let Some(m) = moved.get(mi) {
                l = m.end().min(end);
            }
        }
    }
    let mut all: Vec<Run> = kept.into_iter().chain(moved.iter().copied()).collect();
    all.sort_by_key(|r| r.logical);
    let mut out = Vec::with_capacity(all.len());
    for r in all {
        push_run(&mut out, r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logical: u64, physical: u64, len: u64) -> Run {
        Run {
            logical,
            physical,
            len,
            unwritten: false,
        }
    }

    #[test]
    fn one_piece_makes_one_run() {
        let runs = [run(0, 500, 3), run(3, 100, 5), run(8, 900, 2)];
        let (new, moves) = lay_out(&runs, 1, &[(2000, 10)]).expect("fits");
        assert_eq!(new, vec![run(0, 2000, 10)]);
        assert_eq!(moves.len(), 3);
        assert_eq!(
            moves[1],
            Move {
                from: 100,
                to: 2003,
                len: 5,
                unwritten: false
            }
        );
        assert!(lay_out(&runs, 1, &[(2000, 9)]).is_none());
    }

    #[test]
    fn pieces_fill_in_order_and_holes_stay() {
        let runs = [run(0, 500, 4), run(10, 100, 4)];
        let (new, _) = lay_out(&runs, 1, &[(50, 2), (70, 6)]).expect("fits");
        assert_eq!(new, vec![run(0, 50, 2), run(2, 70, 2), run(10, 72, 4)]);
        let mut u = runs;
        u[1].unwritten = true;
        let (new, moves) = lay_out(&u, 1, &[(50, 8)]).expect("fits");
        assert_eq!(new.len(), 2);
        assert!(new[1].unwritten && moves[1].unwritten);
    }

    #[test]
    fn bigalloc_keeps_each_logical_cluster_in_one_physical_cluster() {
        // Clusters of 4: logical 2..4 and 5..7 share logical cluster 0 and
        // 1; a hole inside cluster 1 (block 4) must not move block 5..7 to
        // another cluster.
        let runs = [run(2, 102, 2), run(5, 205, 2), run(12, 312, 1)];
        assert_eq!(clusters(&runs, 4), 3);
        let (new, _) = lay_out(&runs, 4, &[(400, 8), (800, 4)]).expect("fits");
        assert_eq!(new, vec![run(2, 402, 2), run(5, 405, 2), run(12, 800, 1)]);
        for r in &new {
            for k in 0..r.len {
                assert_eq!((r.logical + k) % 4, (r.physical + k) % 4);
            }
        }
        // Two runs in one logical cluster, apart in the file.
        let runs = [run(0, 100, 1), run(3, 203, 1)];
        assert_eq!(clusters(&runs, 4), 1);
        let (new, _) = lay_out(&runs, 4, &[(40, 4)]).expect("fits");
        assert_eq!(new, vec![run(0, 40, 1), run(3, 43, 1)]);
        // Pieces that are not whole clusters count only their whole ones.
        assert!(lay_out(&runs, 4, &[(40, 3)]).is_none());
    }

    #[test]
    fn replace_puts_moved_ranges_in_place() {
        let runs = [run(0, 100, 10), run(10, 300, 5)];
        let moved = [run(4, 900, 8)];
        assert_eq!(
            replace(&runs, &moved),
            vec![run(0, 100, 4), run(4, 900, 8), run(12, 302, 3)]
        );
        // Moving everything gives the moved runs.
        let all = [run(0, 50, 15)];
        assert_eq!(replace(&runs, &all), all.to_vec());
        // Moving nothing merges nothing new.
        assert_eq!(replace(&runs, &[]), runs.to_vec());
    }
}
