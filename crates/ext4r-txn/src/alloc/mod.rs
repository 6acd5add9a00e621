//! The one block allocator.
//!
//! Every search for free blocks is written once here, over a
//! [`FreeSpace`]: a map of used blocks that can answer "first free",
//! "first used" and "end of the used run" questions. Three maps implement
//! it: the [`GroupTable`](crate::groups::GroupTable)'s bitmaps (a
//! filesystem being changed) and [`UsedBlocks`], sorted intervals, for
//! mkfs's plan (which has no device yet) and for a checker, whose map is
//! built from what the inodes claim because the on-disk bitmaps cannot be
//! trusted ([`UsedBlocks::from_runs`]).
//!
//! Two families of searches:
//!
//! - libext2fs' own ([`get_free_blocks`], [`new_block`], [`new_range`]),
//!   reproduced exactly, so that mkfs's layout and tune's journal and quota
//!   placement equal mke2fs's and tune2fs's block for block;
//! - [`best_run`], goal-directed as the kernel's mballoc: the first run long
//!   enough for the request at or after the goal, else the longest run
//!   found, for files written through the write API and for defrag.
//!
//! All of them work in blocks and respect clusters: with bigalloc a
//! candidate starts on a cluster boundary and a cluster is used as a whole.

mod inodes;
mod intervals;
mod limit;
mod used;

pub use inodes::{find_free_inode, InodeSpace};
pub use limit::Limited;
pub use used::UsedBlocks;

use crate::error::Result;
use ext4r_format::geometry::Geometry;

/// A map of which blocks are in use, as the searches need it.
pub trait FreeSpace {
    /// The first block that may be handed out.
    fn first_data_block(&self) -> u64;
    /// Blocks in the filesystem.
    fn blocks_count(&self) -> u64;
    /// Blocks per cluster minus one (0 without bigalloc).
    fn cluster_mask(&self) -> u64;
    /// The first free block in `[from, to]`.
    ///
    /// # Errors
    /// I/O or corruption errors of a map read from disk on demand.
    fn first_free(&self, from: u64, to: u64) -> Result<Option<u64>>;
    /// The first used block in `[from, to]`.
    ///
    /// # Errors
    /// As [`FreeSpace::first_free`].
    fn first_used(&self, from: u64, to: u64) -> Result<Option<u64>>;
    /// The end (exclusive) of the last used run that overlaps `[from, to]`
    /// (it may reach past `to`): how far a search for free space there can
    /// skip.
    ///
    /// # Errors
    /// As [`FreeSpace::first_free`].
    fn used_end(&self, from: u64, to: u64) -> Result<Option<u64>>;
}

/// The used runs overlapping `[from, to]`, clipped to it, in order.
///
/// # Errors
/// The map's read errors.
pub fn used_runs(space: &(impl FreeSpace + ?Sized), from: u64, to: u64) -> Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut b = from;
    while b <= to {
        let Some(s) = space.first_used(b, to)? else {
            break;
        };
        let e = space.used_end(s, s)?.unwrap_or(s + 1).min(to + 1);
        out.push((s, e));
        b = e;
    }
    Ok(out)
}

/// `ext2fs_get_free_blocks2`: the first `b` at or after `start`, stepping
/// by clusters and wrapping to the first data block unless `finish >
/// start`, such that `[b, b+num)` is free; the search ends at `finish`.
///
/// # Errors
/// The map's read errors.
pub fn get_free_blocks(
    space: &(impl FreeSpace + ?Sized),
    start: u64,
    finish: u64,
    num: u64,
) -> Result<Option<u64>> {
    let num = num.max(1);
    let mask = space.cluster_mask();
    let step = mask + 1;
    let fdb = space.first_data_block();
    let count = space.blocks_count();
    let mut b = if start == 0 { fdb } else { start };
    let finish = if finish == 0 { start } else { finish };
    b &= !mask;
    let finish = finish & !mask;
    let mut wrapped = false;
    loop {
        if b.saturating_add(num) > count {
            if finish > start || wrapped {
                return Ok(None);
            }
            b = fdb;
            wrapped = true;
        }
        if wrapped && b >= finish {
            return Ok(None);
        }
        match space.used_end(b, b + num - 1)? {
            None => return Ok(Some(b)),
            Some(end) => {
                // Skip past the last used run in the way in one step: every
                // start before its end overlaps it. (The checks below only
                // depend on where the steps land past `finish` or the end,
                // so larger steps end the search the same way.)
                let next = end.saturating_add(mask) & !mask;
                let old = b;
                b = next.max(b + step);
                if !wrapped && old < finish && b >= finish && finish > start {
                    return Ok(None);
                }
                if wrapped && b >= finish {
                    return Ok(None);
                }
            }
        }
    }
}

/// `ext2fs_new_block2`: the first free block at or after `goal`, wrapping
/// around once.
///
/// # Errors
/// The map's read errors.
pub fn new_block(space: &(impl FreeSpace + ?Sized), goal: u64) -> Result<Option<u64>> {
    let fdb = space.first_data_block();
    let count = space.blocks_count();
    if count == 0 {
        return Ok(None);
    }
    let goal = if goal == 0 || goal >= count {
        fdb
    } else {
        goal
    } & !space.cluster_mask();
    if let Some(b) = space.first_free(goal, count - 1)? {
        return Ok(Some(b));
    }
    if goal > fdb {
        return space.first_free(fdb, goal - 1);
    }
    Ok(None)
}

/// `ext2fs_new_range` without flags: the first free run at or after `goal`
/// (wrapping once), up to `len` blocks long.
///
/// # Errors
/// The map's read errors.
pub fn new_range(
    space: &(impl FreeSpace + ?Sized),
    goal: u64,
    len: u64,
) -> Result<Option<(u64, u64)>> {
    let count = space.blocks_count();
    let goal = if goal == 0 || goal >= count {
        space.first_data_block()
    } else {
        goal
    };
    let Some(start) = new_block(space, goal)? else {
        return Ok(None);
    };
    let last = (start + len.max(1) - 1).min(count - 1);
    let end = space.first_used(start, last)?.unwrap_or(last + 1);
    Ok(Some((start, end - start)))
}

/// How far [`best_run`] looks for a run as long as the request before it
/// settles for the longest one seen.
#[derive(Debug, Clone, Copy)]
pub struct Search {
    /// Blocks to search, from the goal, wrapping once (`u64::MAX`: all).
    pub span: u64,
}

impl Default for Search {
    fn default() -> Self {
        Search { span: u64::MAX }
    }
}

/// A free run for a file: the first run of `len` blocks at or after
/// `goal` (wrapping once), else the longest run found — the caller takes
/// what it gets and asks again for the rest, so a file is spread over as
/// few runs as the free space allows. Runs start on cluster boundaries.
/// `None` when nothing is free.
///
/// # Errors
/// The map's read errors.
pub fn best_run(
    space: &(impl FreeSpace + ?Sized),
    goal: u64,
    len: u64,
    how: Search,
) -> Result<Option<(u64, u64)>> {
    let count = space.blocks_count();
    let fdb = space.first_data_block();
    let mask = space.cluster_mask();
    if count <= fdb || len == 0 {
        return Ok(None);
    }
    let goal = if goal < fdb || goal >= count {
        fdb
    } else {
        goal
    } & !mask;
    let mut best: Option<(u64, u64)> = None;
    let mut searched = 0u64;
    // Two legs: goal..end, then the start..goal.
    for (lo, hi) in [(goal, count), (fdb, goal)] {
        let mut b = lo;
        while b < hi && searched < how.span {
            let Some(s) = space.first_free(b, hi - 1)? else {
                break;
            };
            let s = s.saturating_add(mask) & !mask;
            if s >= hi {
                break;
            }
            let want_end = s.saturating_add(len).min(hi);
            let e = space.first_used(s, want_end - 1)?.unwrap_or(want_end);
            let run = e - s;
            if run >= len {
                return Ok(Some((s, len)));
            }
            if run > 0 && best.is_none_or(|(_, l)| run > l) {
                best = Some((s, run));
            }
            searched = searched.saturating_add(e.saturating_sub(b));
            // Past the used run that ended this one.
            b = space.used_end(e, e)?.unwrap_or(e + 1).max(e + 1);
        }
    }
    Ok(best)
}

/// The accounting that goes with taking blocks, as libext2fs'
/// `ext2fs_block_alloc_stats*` keeps it: what mkfs's layout (on a
/// [`UsedBlocks`] plan) and a filesystem being changed (its
/// [`GroupTable`](crate::groups::GroupTable)) both offer, so that the
/// journal and quota files are placed by one piece of code for mkfs, tune
/// and fsck.
pub trait BlockAlloc {
    /// The usage map the searches run on.
    type Space: FreeSpace + ?Sized;
    /// The usage map.
    fn space(&self) -> &Self::Space;
    /// The filesystem's geometry.
    fn geo(&self) -> &Geometry;
    /// `s_log_groups_per_flex` (0 without flex_bg).
    fn log_groups_per_flex(&self) -> u32;
    /// A group's free count as `ext2fs_bg_free_blocks_count` reads it.
    fn group_free(&self, g: u32) -> i64;
    /// `ext2fs_block_alloc_stats_range(+1)` of a free range.
    ///
    /// # Errors
    /// The map's read errors.
    fn take_range(&mut self, start: u64, len: u64) -> Result<()>;
    /// `ext2fs_new_block2` then `ext2fs_block_alloc_stats2(+1)`.
    ///
    /// # Errors
    /// [`Error::NoSpace`](crate::Error::NoSpace) when no block is free, or
    /// the map's read errors.
    fn alloc_block(&mut self, goal: u64) -> Result<u64>;
    /// `ext2fs_find_inode_goal` for an inode without blocks: the first
    /// block of its (flex) group.
    fn inode_goal(&self, ino: u32) -> u64 {
        let geo = self.geo();
        let mut group = (ino - 1) / geo.inodes_per_group;
        let log_flex = self.log_groups_per_flex();
        if log_flex != 0 {
            group &= !((1 << log_flex) - 1);
        }
        geo.group_first_block(group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(count: u64, used: &[(u64, u64)]) -> UsedBlocks {
        let mut u = UsedBlocks::new(0, count, 1);
        for &(s, n) in used {
            u.mark(s, n);
        }
        u
    }

    #[test]
    fn best_run_takes_the_first_fit_from_the_goal() {
        let u = map(1000, &[(0, 100), (110, 10), (300, 50)]);
        assert_eq!(
            best_run(&u, 0, 20, Search::default()).unwrap(),
            Some((120, 20))
        );
        assert_eq!(
            best_run(&u, 105, 5, Search::default()).unwrap(),
            Some((105, 5))
        );
        assert_eq!(
            best_run(&u, 360, 20, Search::default()).unwrap(),
            Some((360, 20))
        );
        // Wraps to the start when nothing after the goal fits.
        let u = map(1000, &[(0, 100), (150, 850)]);
        assert_eq!(
            best_run(&u, 500, 20, Search::default()).unwrap(),
            Some((100, 20))
        );
    }

    #[test]
    fn best_run_falls_back_to_the_longest_run() {
        let u = map(100, &[(0, 10), (15, 10), (32, 60)]);
        assert_eq!(
            best_run(&u, 0, 50, Search::default()).unwrap(),
            Some((92, 8))
        );
        let full = map(100, &[(0, 100)]);
        assert_eq!(best_run(&full, 0, 5, Search::default()).unwrap(), None);
    }

    #[test]
    fn best_run_respects_clusters() {
        let mut u = UsedBlocks::new(0, 1024, 16);
        u.mark(0, 33);
        assert_eq!(
            best_run(&u, 1, 16, Search::default()).unwrap(),
            Some((48, 16))
        );
    }
}
