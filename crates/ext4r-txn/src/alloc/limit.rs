//! A ceiling on what the searches hand out: a filesystem about to shrink
//! must not take blocks or inodes in the part that goes away (see
//! [`Volume::set_alloc_limits`](crate::volume::Volume::set_alloc_limits)).

use super::{FreeSpace, InodeSpace};
use crate::error::Result;

/// `space` seen as if it ended at block `end`, held `groups` groups of
/// inodes, and had the ranges `avoid` in use: blocks at or past `end`, in
/// `avoid`, and inodes of later groups are never found free.
#[derive(Debug, Clone, Copy)]
pub struct Limited<'a, S: ?Sized> {
    space: &'a S,
    end: u64,
    groups: u32,
    /// Sorted, disjoint `(start, end)` ranges, end exclusive.
    avoid: &'a [(u64, u64)],
}

impl<'a, S: ?Sized> Limited<'a, S> {
    /// `space` capped at block `end` and `groups` inode groups (`u64::MAX`
    /// and `u32::MAX`: no cap), with the sorted, disjoint ranges `avoid`
    /// (`(start, end)`, end exclusive) counted as used.
    pub fn new(space: &'a S, end: u64, groups: u32, avoid: &'a [(u64, u64)]) -> Self {
        Limited {
            space,
            end,
            groups,
            avoid,
        }
    }

    /// The avoided range holding `b`.
    fn avoided(&self, b: u64) -> Option<(u64, u64)> {
        let i = self.avoid.partition_point(|&(_, e)| e <= b);
        self.avoid.get(i).copied().filter(|&(s, _)| s <= b)
    }

    /// The first avoided block in `[from, to]`.
    fn first_avoided(&self, from: u64, to: u64) -> Option<u64> {
        let i = self.avoid.partition_point(|&(_, e)| e <= from);
        self.avoid
            .get(i)
            .map(|&(s, _)| s.max(from))
            .filter(|&b| b <= to)
    }
}

impl<S: FreeSpace + ?Sized> FreeSpace for Limited<'_, S> {
    fn first_data_block(&self) -> u64 {
        self.space.first_data_block()
    }
    fn blocks_count(&self) -> u64 {
        self.space.blocks_count().min(self.end)
    }
    fn cluster_mask(&self) -> u64 {
        self.space.cluster_mask()
    }
    fn first_free(&self, from: u64, to: u64) -> Result<Option<u64>> {
        let to = to.min(self.blocks_count().saturating_sub(1));
        let mut b = from;
        while b <= to {
            let Some(f) = self.space.first_free(b, to)? else {
                return Ok(None);
            };
            match self.avoided(f) {
                Some((_, e)) => b = e,
                None => return Ok(Some(f)),
            }
        }
        Ok(None)
    }
    fn first_used(&self, from: u64, to: u64) -> Result<Option<u64>> {
        let used = self.space.first_used(from, to)?;
        let avoided = self.first_avoided(from, to);
        Ok(match (used, avoided) {
            (Some(u), Some(a)) => Some(u.min(a)),
            (u, a) => u.or(a),
        })
    }
    fn used_end(&self, from: u64, to: u64) -> Result<Option<u64>> {
        // The last run overlapping [from, to], the avoided ranges counted
        // as used; then on through whatever continues it.
        let used = self.space.used_end(from, to)?;
        let last_avoided = {
            let i = self.avoid.partition_point(|&(s, _)| s <= to);
            i.checked_sub(1)
                .and_then(|k| self.avoid.get(k))
                .filter(|&&(_, e)| e > from)
                .map(|&(_, e)| e)
        };
        let Some(mut end) = used.max(last_avoided) else {
            return Ok(None);
        };
        loop {
            if let Some((_, e)) = self.avoided(end) {
                end = e;
                continue;
            }
            if end < self.space.blocks_count() && self.space.first_used(end, end)? == Some(end) {
                end = self
                    .space
                    .used_end(end, end)?
                    .unwrap_or(end + 1)
                    .max(end + 1);
                continue;
            }
            return Ok(Some(end));
        }
    }
}

impl<S: InodeSpace + ?Sized> InodeSpace for Limited<'_, S> {
    fn inodes_per_group(&self) -> u32 {
        self.space.inodes_per_group()
    }
    fn group_count(&self) -> u32 {
        self.space.group_count().min(self.groups)
    }
    fn first_ino(&self) -> u32 {
        self.space.first_ino()
    }
    fn may_hold(&self, g: u32) -> bool {
        g < self.groups && self.space.may_hold(g)
    }
    fn first_free_in(&self, g: u32, from: u32) -> Result<Option<u32>> {
        self.space.first_free_in(g, from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{best_run, new_block, Search, UsedBlocks};

    #[test]
    fn searches_stay_below_the_end_and_out_of_avoided_ranges() {
        let mut u = UsedBlocks::new(0, 1000, 1);
        u.mark(0, 100);
        let avoid = [(100, 120), (300, 310)];
        let l = Limited::new(&u, 500, u32::MAX, &avoid);
        assert_eq!(new_block(&l, 0).unwrap(), Some(120));
        assert_eq!(new_block(&l, 305).unwrap(), Some(310));
        assert_eq!(new_block(&l, 499).unwrap(), Some(499));
        // A run never crosses an avoided range, and never reaches 500.
        assert_eq!(
            best_run(&l, 200, 150, Search::default()).unwrap(),
            Some((310, 150))
        );
        // From 400 only 100 blocks are left below the end: it wraps.
        assert_eq!(
            best_run(&l, 400, 150, Search::default()).unwrap(),
            Some((120, 150))
        );
        let full = Limited::new(&u, 100, u32::MAX, &[]);
        assert_eq!(new_block(&full, 0).unwrap(), None);
        // used_end runs on through an avoided range right after a used run.
        assert_eq!(l.used_end(50, 50).unwrap(), Some(120));
    }
}
