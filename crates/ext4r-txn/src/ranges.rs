//! A set of blocks as sorted, disjoint, non-adjacent `[start, end)`
//! ranges in one vector: what a transaction took, and what it freed that
//! the committed filesystem still had in use (see
//! [`crate::txn::Transaction::free_blocks`]).

/// Sorted, disjoint, non-adjacent ranges, end exclusive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RangeSet(Vec<(u64, u64)>);

impl RangeSet {
    /// The ranges, ascending (as [`crate::alloc::Limited`] takes them).
    pub(crate) fn ranges(&self) -> &[(u64, u64)] {
        &self.0
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// Adds `[s, e)`, merged with what it overlaps or touches.
    pub(crate) fn insert(&mut self, mut s: u64, mut e: u64) {
        if s >= e {
            return;
        }
        // The ranges from the first ending at or after `s` to the last
        // starting at or before `e` touch `[s, e)`.
        let i = self.0.partition_point(|&(_, re)| re < s);
        let j = self.0.partition_point(|&(rs, _)| rs <= e);
        if i < j {
            s = s.min(self.0[i].0);
            e = e.max(self.0[j - 1].1);
        }
        self.0.splice(i..j, std::iter::once((s, e)));
    }

    /// Removes `[s, e)`; returns the parts of it that were in the set,
    /// ascending.
    pub(crate) fn remove(&mut self, s: u64, e: u64) -> Vec<(u64, u64)> {
        if s >= e {
            return Vec::new();
        }
        let i = self.0.partition_point(|&(_, re)| re <= s);
        let j = self.0.partition_point(|&(rs, _)| rs < e);
        if i >= j {
            return Vec::new();
        }
        let mut removed = Vec::with_capacity(j - i);
        let mut kept = Vec::with_capacity(2);
        for &(rs, re) in &self.0[i..j] {
            removed.push((rs.max(s), re.min(e)));
            if rs < s {
                kept.push((rs, s));
            }
            if re > e {
                kept.push((e, re));
            }
        }
        self.0.splice(i..j, kept);
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merges_and_remove_splits() {
        let mut r = RangeSet::default();
        r.insert(10, 20);
        r.insert(30, 40);
        r.insert(20, 25);
        assert_eq!(r.ranges(), &[(10, 25), (30, 40)]);
        r.insert(24, 31);
        assert_eq!(r.ranges(), &[(10, 40)]);
        assert_eq!(r.remove(15, 18), vec![(15, 18)]);
        assert_eq!(r.ranges(), &[(10, 15), (18, 40)]);
        assert_eq!(r.remove(0, 12), vec![(10, 12)]);
        assert_eq!(r.remove(13, 50), vec![(13, 15), (18, 40)]);
        assert_eq!(r.ranges(), &[(12, 13)]);
        assert!(r.remove(100, 200).is_empty());
        r.insert(5, 5);
        assert_eq!(r.ranges(), &[(12, 13)]);
    }
}
