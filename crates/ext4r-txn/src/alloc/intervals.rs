//! Disjoint, non-adjacent `[start, end)` block intervals kept sorted in a
//! gap buffer: two vectors meeting where the last interval was added.
//!
//! mkfs marks blocks almost always next to the previous mark (group tables
//! one after another, files block by block), and asks about blocks near
//! it. Around the gap both are constant time; elsewhere a lookup is a
//! binary search and a mark moves the gap, which costs the intervals it
//! passes. A balanced tree costs several node visits on every call, and
//! placing a 15 TiB filesystem's tables takes a million calls.

/// The intervals: `low` ascending, then `high` descending (its last element
/// is the first interval after the gap).
#[derive(Debug, Clone, Default)]
pub(super) struct Intervals {
    low: Vec<(u64, u64)>,
    high: Vec<(u64, u64)>,
}

impl Intervals {
    /// The interval with the greatest start at or before `b`.
    pub(super) fn last_starting_by(&self, b: u64) -> Option<(u64, u64)> {
        match self.high.last() {
            Some(&(s, _)) if s <= b => {
                // Past the gap: the elements starting at or before `b`
                // form a suffix of `high`; its first is the one wanted.
                let i = self.high.partition_point(|r| r.0 > b);
                Some(self.high[i])
            }
            _ => match self.low.last() {
                Some(&r) if r.0 <= b => Some(r),
                _ => {
                    let i = self.low.partition_point(|r| r.0 <= b);
                    i.checked_sub(1).map(|i| self.low[i])
                }
            },
        }
    }

    /// The intervals ending after `b`, ascending.
    pub(super) fn ending_after(&self, b: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let i = self.low.partition_point(|r| r.1 <= b);
        let j = if i < self.low.len() {
            self.high.len()
        } else {
            // The elements of `high` ending after `b` form a prefix.
            self.high.partition_point(|r| r.1 > b)
        };
        self.low[i..]
            .iter()
            .chain(self.high[..j].iter().rev())
            .copied()
    }

    /// Adds `[s, e)`, merging the intervals it overlaps or touches.
    pub(super) fn insert(&mut self, mut s: u64, mut e: u64) {
        self.move_gap(e);
        // Every interval starting at or before `e` is in `low` now; those
        // reaching `s` are merged (they are at its end, the intervals
        // being disjoint), and none after the gap can touch `[s, e)`.
        while let Some(&(ls, le)) = self.low.last() {
            if le < s {
                break;
            }
            s = s.min(ls);
            e = e.max(le);
            self.low.pop();
        }
        self.low.push((s, e));
    }

    /// Removes `[s, e)`, splitting the intervals it cuts (tune frees a
    /// journal or quota file this way).
    pub(super) fn remove(&mut self, s: u64, e: u64) {
        if s >= e {
            return;
        }
        self.move_gap(e);
        // The intervals overlapping [s, e) start before e: they are at the
        // end of `low`.
        let mut keep = Vec::new();
        while let Some(&(ls, le)) = self.low.last() {
            if le <= s {
                break;
            }
            self.low.pop();
            if le > e {
                keep.push((e, le));
            }
            if ls < s {
                keep.push((ls, s));
            }
        }
        keep.sort_unstable();
        self.low.extend(keep);
    }

    /// Moves the gap to after the last interval starting at or before `b`.
    fn move_gap(&mut self, b: u64) {
        while let Some(&r) = self.high.last() {
            if r.0 > b {
                break;
            }
            self.low.push(r);
            self.high.pop();
        }
        while let Some(&r) = self.low.last() {
            if r.0 <= b {
                break;
            }
            self.high.push(r);
            self.low.pop();
        }
    }

    /// Takes every interval out, ascending.
    pub(super) fn take_all(&mut self) -> Vec<(u64, u64)> {
        let mut all = std::mem::take(&mut self.low);
        all.extend(self.high.drain(..).rev());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_on_both_sides_of_the_gap() {
        let mut v = Intervals::default();
        for (s, e) in [(10, 20), (30, 40), (50, 60), (70, 80)] {
            v.insert(s, e);
        }
        // Move the gap to the middle.
        v.insert(32, 35);
        for b in 0..90 {
            let want = [(10, 20), (30, 40), (50, 60), (70, 80)]
                .into_iter()
                .rfind(|r| r.0 <= b);
            assert_eq!(v.last_starting_by(b), want, "{b}");
        }
        assert_eq!(v.ending_after(45).collect::<Vec<_>>(), [(50, 60), (70, 80)]);
        assert_eq!(v.ending_after(35).next(), Some((30, 40)));
        v.insert(20, 30);
        v.insert(0, 5);
        assert_eq!(v.take_all(), [(0, 5), (10, 40), (50, 60), (70, 80)]);
    }

    #[test]
    fn removal_splits_and_drops() {
        let mut v = Intervals::default();
        for (s, e) in [(10, 20), (30, 40), (50, 60)] {
            v.insert(s, e);
        }
        v.remove(15, 35);
        v.remove(50, 60);
        v.remove(0, 1);
        assert_eq!(v.take_all(), [(10, 15), (35, 40)]);
    }
}
