//! The map `-f` plans on: segments (stretches without immovable blocks),
//! free runs, the window to empty, and the holes outside it.

use std::collections::{BTreeMap, BTreeSet};

/// Free holes, by place and by size (best fit).
#[derive(Debug, Clone, Default)]
pub(super) struct Holes {
    by_start: BTreeMap<u64, u64>,
    by_len: BTreeSet<(u64, u64)>,
}

impl Holes {
    pub(super) fn insert(&mut self, s: u64, n: u64) {
        if n > 0 {
            self.by_start.insert(s, n);
            self.by_len.insert((n, s));
        }
    }

    pub(super) fn remove(&mut self, s: u64) -> Option<u64> {
        let n = self.by_start.remove(&s)?;
        self.by_len.remove(&(n, s));
        Some(n)
    }

    /// The smallest hole of at least `n` blocks, else the largest.
    pub(super) fn pick(&self, n: u64) -> Option<(u64, u64)> {
        self.by_len
            .range((n, 0)..)
            .next()
            .or_else(|| self.by_len.iter().next_back())
            .map(|&(len, s)| (s, len))
    }

    /// The first hole at or after `b` (else the first of all).
    pub(super) fn next_from(&self, b: u64) -> Option<(u64, u64)> {
        self.by_start
            .range(b..)
            .next()
            .or_else(|| self.by_start.iter().next())
            .map(|(&s, &n)| (s, n))
    }

    pub(super) fn total(&self) -> u64 {
        self.by_start.values().sum()
    }
}

/// `[s, e)` ranges of `a` minus those of `b` (both sorted, disjoint).
pub(super) fn subtract(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(s, e) in a {
        let mut cur = s;
        while j < b.len() && b[j].1 <= cur {
            j += 1;
        }
        let mut k = j;
        while cur < e {
            match b.get(k) {
                Some(&(bs, be)) if bs < e => {
                    if bs > cur {
                        out.push((cur, bs));
                    }
                    cur = cur.max(be);
                    k += 1;
                }
                _ => {
                    out.push((cur, e));
                    cur = e;
                }
            }
        }
    }
    out
}

/// `[s, e)` ranges merged where they touch or overlap.
pub(super) fn merge(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The window of `len` blocks inside `[a, b)` holding the most of `free`
/// (sorted `[s, e)` runs inside the segment): `(start, free inside)`. The
/// best start is where the window's start or end meets a run's edge.
pub(super) fn best_window(a: u64, b: u64, len: u64, free: &[(u64, u64)], ratio: u64) -> (u64, u64) {
    let prefix: Vec<u64> = std::iter::once(0)
        .chain(free.iter().scan(0u64, |acc, &(s, e)| {
            *acc += e - s;
            Some(*acc)
        }))
        .collect();
    // Free blocks before position x.
    let before = |x: u64| -> u64 {
        let i = free.partition_point(|&(_, e)| e <= x);
        prefix[i] + free.get(i).map_or(0, |&(s, _)| x.saturating_sub(s))
    };
    let clamp = |x: u64| -> u64 { (x.clamp(a, b - len) / ratio) * ratio };
    let mut best = (clamp(a), 0u64);
    for &(s, e) in free {
        for start in [clamp(s), clamp(e.saturating_sub(len))] {
            let got = before(start + len) - before(start);
            if got > best.1 {
                best = (start, got);
            }
        }
    }
    best
}

/// A window: `[start, start + len)` with `free` of its blocks free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Window {
    pub start: u64,
    pub len: u64,
    pub free: u64,
}

impl Window {
    pub(super) fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// Segments and free runs of the filesystem (`[s, e)`, sorted).
#[derive(Debug, Clone)]
pub(super) struct Space {
    pub segments: Vec<(u64, u64)>,
    pub free: Vec<(u64, u64)>,
    pub total_free: u64,
    pub ratio: u64,
}

impl Space {
    /// From the used runs of `[first, count)` and those of them that can
    /// move (whole clusters).
    pub(super) fn new(
        first: u64,
        count: u64,
        used: &[(u64, u64)],
        movable: Vec<(u64, u64)>,
        ratio: u64,
    ) -> Self {
        let immovable = subtract(used, &merge(movable));
        let all = [(first, count)];
        let free = subtract(&all, used);
        Space {
            segments: subtract(&all, &immovable),
            total_free: free.iter().map(|&(s, e)| e - s).sum(),
            free,
            ratio: ratio.max(1),
        }
    }

    pub(super) fn largest_segment(&self) -> u64 {
        self.segments.iter().map(|&(a, b)| b - a).max().unwrap_or(0)
    }

    /// The window to empty with `reserve` blocks of the free space kept
    /// for other needs: the longest possible (a whole segment, or the free
    /// space less the reserve), then the one holding the most free blocks.
    pub(super) fn window(&self, reserve: u64) -> Option<Window> {
        let r = self.ratio;
        let want = self.total_free.saturating_sub(reserve);
        let mut choice: Option<Window> = None;
        let mut fi = 0;
        for &(a, b) in &self.segments {
            while fi < self.free.len() && self.free[fi].1 <= a {
                fi += 1;
            }
            let mut fj = fi;
            while fj < self.free.len() && self.free[fj].0 < b {
                fj += 1;
            }
            let len = (want.min(b - a) / r) * r;
            if len == 0 {
                continue;
            }
            let (start, free) = best_window(a, b, len, &self.free[fi..fj], r);
            let better = choice.is_none_or(|c| len > c.len || (len == c.len && free > c.free));
            if better {
                choice = Some(Window { start, len, free });
            }
        }
        choice
    }

    /// The free runs outside `w`, as holes.
    pub(super) fn holes_outside(&self, w: &Window) -> Holes {
        let mut h = Holes::default();
        for (s, e) in subtract(&self.free, &[(w.start, w.end())]) {
            h.insert(s, e - s);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_subtract_and_merge() {
        assert_eq!(
            subtract(&[(0, 100)], &[(10, 20), (50, 60)]),
            vec![(0, 10), (20, 50), (60, 100)]
        );
        assert_eq!(
            subtract(&[(0, 10), (20, 30)], &[(5, 25)]),
            vec![(0, 5), (25, 30)]
        );
        assert_eq!(subtract(&[(0, 10)], &[]), vec![(0, 10)]);
        assert_eq!(merge(vec![(5, 8), (0, 5), (9, 10)]), vec![(0, 8), (9, 10)]);
    }

    #[test]
    fn the_window_holds_the_most_free_space() {
        // Free: 0..10, 40..70, 80..90 in a segment 0..100; a window of 40.
        let free = [(0, 10), (40, 70), (80, 90)];
        let (start, got) = best_window(0, 100, 40, &free, 1);
        // [30, 70), [40, 80) and [50, 90) hold 30 free blocks each.
        assert_eq!(got, 30);
        assert!((30..=50).contains(&start), "{start}");
        // Clusters of 8: the start is aligned.
        let (start, _) = best_window(0, 100, 40, &free, 8);
        assert_eq!(start % 8, 0);
    }

    #[test]
    fn segments_end_at_immovable_blocks() {
        // Used 0..10 (immovable), 30..40 (movable), 60..62 (immovable).
        let s = Space::new(0, 100, &[(0, 10), (30, 40), (60, 62)], vec![(30, 40)], 1);
        assert_eq!(s.segments, vec![(10, 60), (62, 100)]);
        assert_eq!(s.total_free, 78);
        assert_eq!(s.largest_segment(), 50);
        // The free space (78) is more than a segment: the whole of 10..60.
        let w = s.window(0).expect("a window");
        assert_eq!((w.start, w.len, w.free), (10, 50, 40));
        // With 40 reserved, 38 blocks: the run 62..100 already holds them.
        let w = s.window(40).expect("a window");
        assert_eq!((w.len, w.free), (38, 38));
        let h = s.holes_outside(&s.window(0).expect("a window"));
        assert_eq!(h.total(), 38);
    }

    #[test]
    fn holes_fit_best_then_largest() {
        let mut h = Holes::default();
        h.insert(0, 10);
        h.insert(100, 4);
        h.insert(200, 6);
        assert_eq!(h.pick(5), Some((200, 6)));
        assert_eq!(h.pick(20), Some((0, 10)));
        assert_eq!(h.next_from(150), Some((200, 6)));
        assert_eq!(h.next_from(300), Some((0, 10)));
        assert_eq!(h.remove(100), Some(4));
        assert_eq!(h.total(), 16);
    }
}
