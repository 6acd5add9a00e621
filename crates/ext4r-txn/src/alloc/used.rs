//! The usage map of a filesystem being planned or changed, as sorted
//! intervals: memory grows with the number of separate used runs (a few per
//! group at most for a new filesystem), never with the device size.

use super::intervals::Intervals;
use super::FreeSpace;
use crate::error::Result;

/// Allocated blocks as disjoint, non-adjacent `[start, end)` intervals.
#[derive(Debug, Clone, Default)]
pub struct UsedBlocks {
    runs: Intervals,
    /// Blocks per cluster minus one (bigalloc granularity mask).
    cluster_mask: u64,
    /// First block the allocator may hand out.
    first_data_block: u64,
    /// Blocks in the filesystem.
    blocks_count: u64,
}

impl UsedBlocks {
    /// An empty map of `blocks_count` blocks whose first usable block is
    /// `first_data_block`, in clusters of `cluster_ratio` blocks.
    pub fn new(first_data_block: u64, blocks_count: u64, cluster_ratio: u64) -> Self {
        UsedBlocks {
            runs: Intervals::default(),
            cluster_mask: cluster_ratio - 1,
            first_data_block,
            blocks_count,
        }
    }

    /// A map of the runs `(start, len)` (any order, overlaps allowed):
    /// what a checker's inodes and metadata claim.
    pub fn from_runs(
        first_data_block: u64,
        blocks_count: u64,
        cluster_ratio: u64,
        runs: impl IntoIterator<Item = (u64, u64)>,
    ) -> Self {
        let mut runs: Vec<(u64, u64)> = runs.into_iter().collect();
        runs.sort_unstable();
        let mut u = UsedBlocks::new(first_data_block, blocks_count, cluster_ratio);
        for (s, n) in runs {
            u.mark(s, n);
        }
        u
    }

    /// `ext2fs_convert_subcluster_bitmap`: from here on the map has one
    /// bit per cluster of `cluster_ratio` blocks, so a cluster holding any
    /// used block is used as a whole. mke2fs places the group tables on a
    /// block-granular map and converts it before allocating files.
    pub fn set_granularity(&mut self, cluster_ratio: u64) {
        if cluster_ratio - 1 == self.cluster_mask {
            return;
        }
        let old = self.runs.take_all();
        self.cluster_mask = cluster_ratio - 1;
        for (s, e) in old {
            self.mark(s, e - s);
        }
    }

    /// `[start, start+len)` widened to whole clusters. Arithmetic saturates:
    /// tune hands in block numbers read from a filesystem, which may be
    /// anything.
    fn cluster_span(&self, start: u64, len: u64) -> (u64, u64) {
        let s = start & !self.cluster_mask;
        let e = start.saturating_add(len).saturating_add(self.cluster_mask) & !self.cluster_mask;
        (s, e)
    }

    /// Marks `[start, start+len)` used (whole clusters with bigalloc).
    pub fn mark(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (s, e) = self.cluster_span(start, len);
        self.runs.insert(s, e);
    }

    /// Marks `[start, start+len)` free (whole clusters with bigalloc).
    pub fn unmark(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (s, e) = self.cluster_span(start, len);
        self.runs.remove(s, e);
    }

    /// Whether block `b` is used.
    pub fn is_used(&self, b: u64) -> bool {
        self.runs.last_starting_by(b).is_some_and(|(_, e)| b < e)
    }

    /// First free block in `[from, to]`.
    pub fn first_free(&self, from: u64, to: u64) -> Option<u64> {
        // Runs never touch, so the end of the run holding `from` is free.
        let b = match self.runs.last_starting_by(from) {
            Some((_, e)) if from < e => e,
            _ => from,
        };
        (b <= to).then_some(b)
    }

    /// First used block in `[from, to]`.
    pub fn first_used(&self, from: u64, to: u64) -> Option<u64> {
        self.runs
            .ending_after(from)
            .next()
            .map(|(s, _)| s.max(from))
            .filter(|&b| b <= to)
    }

    /// The end of the last used run overlapping `[from, to]`, if any: one
    /// lookup, and the furthest a search for free space there can skip.
    fn last_used_end(&self, from: u64, to: u64) -> Option<u64> {
        match self.runs.last_starting_by(to) {
            Some((_, e)) if e > from => Some(e),
            _ => None,
        }
    }

    /// Used blocks within `[from, to]`.
    pub fn count_used(&self, from: u64, to: u64) -> u64 {
        self.runs_in(from, to).map(|(lo, hi)| hi - lo).sum()
    }

    /// The used intervals overlapping `[from, to]`, clipped to it.
    pub fn runs_in(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs
            .ending_after(from)
            .take_while(move |&(s, _)| s <= to)
            .map(move |(s, e)| (s.max(from), e.min(to + 1)))
    }

    /// [`get_free_blocks`](super::get_free_blocks) on this map.
    pub fn get_free_blocks(&self, start: u64, finish: u64, num: u64) -> Option<u64> {
        infallible(super::get_free_blocks(self, start, finish, num))
    }

    /// [`new_block`](super::new_block) on this map.
    pub fn new_block(&self, goal: u64) -> Option<u64> {
        infallible(super::new_block(self, goal))
    }

    /// [`new_range`](super::new_range) on this map.
    pub fn new_range(&self, goal: u64, len: u64) -> Option<(u64, u64)> {
        infallible(super::new_range(self, goal, len))
    }
}

/// The searches on an interval map never fail: it is all in memory.
fn infallible<T>(r: Result<Option<T>>) -> Option<T> {
    r.ok().flatten()
}

impl FreeSpace for UsedBlocks {
    #[inline]
    fn first_data_block(&self) -> u64 {
        self.first_data_block
    }
    #[inline]
    fn blocks_count(&self) -> u64 {
        self.blocks_count
    }
    #[inline]
    fn cluster_mask(&self) -> u64 {
        self.cluster_mask
    }
    #[inline]
    fn first_free(&self, from: u64, to: u64) -> Result<Option<u64>> {
        Ok(UsedBlocks::first_free(self, from, to))
    }
    #[inline]
    fn first_used(&self, from: u64, to: u64) -> Result<Option<u64>> {
        Ok(UsedBlocks::first_used(self, from, to))
    }
    #[inline]
    fn used_end(&self, from: u64, to: u64) -> Result<Option<u64>> {
        Ok(self.last_used_end(from, to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_merge_and_count() {
        let mut u = UsedBlocks::new(0, 1000, 1);
        u.mark(10, 5);
        u.mark(15, 5);
        u.mark(30, 1);
        u.mark(8, 3);
        assert_eq!(u.count_used(0, 999), 13);
        assert_eq!(u.first_free(8, 100), Some(20));
        assert_eq!(u.first_used(0, 100), Some(8));
        assert_eq!(u.runs_in(0, 999).collect::<Vec<_>>(), [(8, 20), (30, 31)]);
    }

    #[test]
    fn get_free_blocks_wraps_only_without_finish_above_start() {
        let mut u = UsedBlocks::new(0, 100, 1);
        u.mark(0, 50);
        u.mark(60, 40);
        assert_eq!(u.get_free_blocks(55, 0, 5), Some(55));
        assert_eq!(u.get_free_blocks(55, 0, 6), Some(50));
        assert_eq!(u.get_free_blocks(0, 99, 10), Some(50));
        assert_eq!(u.get_free_blocks(0, 99, 11), None);
        assert_eq!(u.get_free_blocks(70, 0, 10), Some(50));
    }

    #[test]
    fn new_range_takes_the_first_run() {
        let mut u = UsedBlocks::new(0, 100, 1);
        u.mark(10, 10);
        assert_eq!(u.new_range(5, 20), Some((5, 5)));
        assert_eq!(u.new_range(12, 200), Some((20, 80)));
    }

    #[test]
    fn converting_to_clusters_rounds_runs_out() {
        let mut u = UsedBlocks::new(0, 1000, 1);
        u.mark(9, 1);
        u.mark(25, 1);
        u.mark(41, 30);
        u.set_granularity(16);
        assert_eq!(u.runs_in(0, 999).collect::<Vec<_>>(), [(0, 80)]);
        assert_eq!(u.new_block(3), Some(80));
        assert_eq!(u.get_free_blocks(81, 0, 16), Some(80));
    }

    /// `ext2fs_get_free_blocks2` as e2fsprogs writes it: one candidate
    /// per cluster step, on a plain bitmap.
    fn naive_get_free_blocks(
        used: &[bool],
        fdb: u64,
        mask: u64,
        start: u64,
        finish: u64,
        num: u64,
    ) -> Option<u64> {
        let count = used.len() as u64;
        let num = num.max(1);
        let mut b = if start == 0 { fdb } else { start } & !mask;
        let finish = if finish == 0 { start } else { finish } & !mask;
        for _ in 0..4 * count {
            if b + num > count {
                if finish > start {
                    return None;
                }
                b = fdb;
            }
            if (b..b + num).all(|x| !used[x as usize]) {
                return Some(b);
            }
            b += mask + 1;
            if b == finish {
                return None;
            }
        }
        None
    }

    #[test]
    fn agrees_with_a_plain_bitmap() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..200 {
            let count = 64 + rand(400);
            let ratio = [1, 1, 4, 16][(round % 4) as usize];
            let fdb = u64::from(ratio == 1 && round % 8 == 1);
            let mut u = UsedBlocks::new(fdb, count, ratio);
            let mut model = vec![false; count as usize];
            for _ in 0..rand(40) {
                let s = rand(count);
                let n = 1 + rand(count - s).min(12);
                u.mark(s, n);
                let lo = s & !(ratio - 1);
                let hi = ((s + n + ratio - 1) & !(ratio - 1)).min(count);
                model[lo as usize..hi as usize].fill(true);
            }
            for b in 0..count {
                assert_eq!(u.is_used(b), model[b as usize]);
                let ff = (b..count).find(|&x| !model[x as usize]);
                assert_eq!(u.first_free(b, count - 1), ff);
            }
            let used = model.iter().filter(|&&x| x).count() as u64;
            assert_eq!(u.count_used(0, count - 1), used);
            for _ in 0..50 {
                let start = rand(count) & !(ratio - 1);
                let finish = if rand(3) == 0 { 0 } else { rand(count) };
                if finish != 0 && finish & !(ratio - 1) <= fdb {
                    // A search that wraps onto its own finish: e2fsprogs
                    // tests that block too, or never ends; mkfs never asks.
                    continue;
                }
                let num = 1 + rand(20);
                assert_eq!(
                    u.get_free_blocks(start, finish, num),
                    naive_get_free_blocks(&model, fdb, ratio - 1, start, finish, num),
                    "start {start} finish {finish} num {num} ratio {ratio}"
                );
            }
        }
    }
}
