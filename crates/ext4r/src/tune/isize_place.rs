//! Where the larger inode tables go (see [`super::inode_size`] for the
//! whole change): a run of `new_ibpg` blocks per group that does not
//! overlap any table in use, so that the new tables can be written while
//! the old ones still describe the filesystem.
//!
//! The choice, group by group:
//!
//! 1. A free run. Without flex_bg it must lie in the group itself (the
//!    kernel's `ext4_check_descriptors` and e2fsck want a group's tables
//!    inside it); with flex_bg anywhere, first fit from the flex group's
//!    first block, and the whole flex group's tables back to back when
//!    such a run exists (one read per flex group, as mke2fs lays them out).
//! 2. Otherwise a window that holds no metadata, only free blocks and
//!    blocks of files, with as few file blocks as possible: those are
//!    moved out by [`super::isize_move`] before the table is written
//!    there. This is tune2fs's `get_move_bitmaps`, which always clears the
//!    blocks after each table; here the window is wherever moving costs
//!    least.
//!
//! Nothing is written here: the windows are taken in [`Meta`]'s in-memory
//! bitmaps (their free parts; their file blocks stay in use and change
//! owner when moved), so a refusal leaves the device alone.

use crate::meta::Meta;
use ext4r_format::num;
use ext4r_txn::alloc::UsedBlocks;

/// The chosen places.
pub(super) struct Placement {
    /// First block of each group's new table.
    pub dest: Vec<u64>,
    /// Blocks in the new tables' places that files hold now.
    pub to_move: UsedBlocks,
    /// Blocks in `to_move`.
    pub move_count: u64,
}

/// No place for some group's table.
pub(super) struct NoSpace;

/// Chooses the new tables' places. `fixed` holds every block that cannot
/// move (group metadata, the old tables, blocks of reserved inodes and the
/// journal); the places chosen are added to it.
pub(super) fn place_tables(
    meta: &mut Meta,
    fixed: &mut UsedBlocks,
    new_ibpg: u64,
) -> Result<Placement, NoSpace> {
    let geo = meta.geo.clone();
    let groups = geo.group_count;
    let flex = geo.log_groups_per_flex.map(|l| 1u32 << l);
    let mut dest: Vec<Option<u64>> = vec![None; groups as usize];
    let take = |meta: &mut Meta, fixed: &mut UsedBlocks, b: u64, n: u64| {
        fixed.mark(b, n);
        meta.take_range_free(b, n).map_err(|_| NoSpace)
    };
    // 1. Free runs.
    for g in 0..groups {
        if dest[g as usize].is_some() {
            continue;
        }
        let first = geo.group_first_block(g);
        let last = geo.group_last_block(g);
        match flex {
            None => {
                let found = meta
                    .get_free_blocks(first, last + 1, new_ibpg)
                    .filter(|&b| b >= first && b + new_ibpg - 1 <= last);
                if let Some(b) = found {
                    take(meta, fixed, b, new_ibpg)?;
                    dest[g as usize] = Some(b);
                }
            }
            Some(per) => {
                let start = g / per * per;
                let goal = geo.group_first_block(start);
                let n = (start + per).min(groups) - g;
                if g == start {
                    if let Some(b) = meta.get_free_blocks(goal, 0, n as u64 * new_ibpg) {
                        take(meta, fixed, b, n as u64 * new_ibpg)?;
                        for k in 0..n {
                            dest[(g + k) as usize] = Some(b + u64::from(k) * new_ibpg);
                        }
                        continue;
                    }
                }
                if let Some(b) = meta.get_free_blocks(goal, 0, new_ibpg) {
                    take(meta, fixed, b, new_ibpg)?;
                    dest[g as usize] = Some(b);
                }
            }
        }
    }
    // 2. Windows of free and movable blocks.
    let mut to_move = UsedBlocks::new(geo.first_data_block, geo.blocks_count, 1);
    let mut move_count = 0;
    for g in 0..groups {
        if dest[g as usize].is_some() {
            continue;
        }
        let candidates: Vec<u32> = match flex {
            None => vec![g],
            Some(per) => {
                let start = g / per * per;
                (start..groups).chain(0..start).collect()
            }
        };
        let mut best: Option<(u64, u64)> = None;
        for c in candidates {
            let first = geo.group_first_block(c);
            let last = geo.group_last_block(c);
            let used = meta.used_runs(first, last).map_err(|_| NoSpace)?;
            if let Some((b, cost)) = cheapest_window(&used, fixed, first, last, new_ibpg) {
                if best.is_none_or(|(_, bc)| cost < bc) {
                    best = Some((b, cost));
                }
            }
        }
        let (b, cost) = best.ok_or(NoSpace)?;
        for (s, e) in meta.used_runs(b, b + new_ibpg - 1).map_err(|_| NoSpace)? {
            to_move.mark(s, e - s);
        }
        move_count += cost;
        take(meta, fixed, b, new_ibpg)?;
        dest[g as usize] = Some(b);
    }
    if move_count > meta.free_blocks() {
        return Err(NoSpace);
    }
    Ok(Placement {
        dest: dest.into_iter().map(|d| d.unwrap_or(0)).collect(),
        to_move,
        move_count,
    })
}

/// The window of `len` blocks in `[first, last]` without a fixed block and
/// with the fewest used ones (the first such): its start and that count.
fn cheapest_window(
    used: &[(u64, u64)],
    fixed: &UsedBlocks,
    first: u64,
    last: u64,
    len: u64,
) -> Option<(u64, u64)> {
    if last + 1 < first + len {
        return None;
    }
    let n = num::index(last + 1 - first);
    // Per block: fixed (a barrier) or the used count so far.
    let mut barrier = vec![false; n];
    for (s, e) in fixed.runs_in(first, last) {
        barrier[num::index(s - first)..num::index(e - first)].fill(true);
    }
    let mut prefix = vec![0u64; n + 1];
    let mut is_used = vec![false; n];
    for &(s, e) in used {
        is_used[num::index(s - first)..num::index(e - first)].fill(true);
    }
    for i in 0..n {
        prefix[i + 1] = prefix[i] + u64::from(is_used[i]);
    }
    let len = num::index(len);
    let mut best: Option<(u64, u64)> = None;
    // Slide a window; restart after every barrier.
    let mut run_start = 0usize;
    for i in 0..n {
        if barrier[i] {
            run_start = i + 1;
            continue;
        }
        if i + 1 >= run_start + len {
            let s = i + 1 - len;
            let cost = prefix[i + 1] - prefix[s];
            if best.is_none_or(|(_, c)| cost < c) {
                best = Some((first + s as u64, cost));
                if cost == 0 {
                    break;
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_avoids_fixed_blocks_and_prefers_fewer_used() {
        let mut used = UsedBlocks::new(0, 100, 1);
        let mut fixed = UsedBlocks::new(0, 100, 1);
        fixed.mark(0, 10);
        used.mark(0, 10);
        used.mark(10, 5);
        used.mark(20, 1);
        used.mark(25, 15);
        fixed.mark(40, 1);
        used.mark(40, 1);
        let runs = |u: &UsedBlocks| u.runs_in(0, 99).collect::<Vec<_>>();
        // [15, 25) holds one used block; [41, 51) none.
        assert_eq!(
            cheapest_window(&runs(&used), &fixed, 0, 99, 10),
            Some((41, 0))
        );
        used.mark(41, 60);
        assert_eq!(
            cheapest_window(&runs(&used), &fixed, 0, 99, 10),
            Some((15, 1))
        );
        fixed.mark(10, 90);
        assert_eq!(cheapest_window(&runs(&used), &fixed, 0, 99, 10), None);
    }
}
