//! The smallest size a shrink reaches, found by doing the shrink: a dry
//! run on a staged copy of the device (writes kept in memory, file data
//! not copied) either completes or says how many blocks it was short.
//! The search starts at a lower bound counted from the bitmaps' totals
//! and the new geometry's metadata, and moves up by each shortfall; the
//! first size whose dry run completes is the minimum. `-P` prints it and
//! `-M` shrinks to it, by the same code: the number printed is the size
//! reached, not an estimate.

use super::error::Result;
use super::geometry::{self, adjust_new_size, Shape, LAST_GROUP_SLACK};
use super::shrink;
use crate::device::BlockDevice;
use ext4r_format::geometry::Geometry;
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use ext4r_txn::device::Staged;
use ext4r_txn::volume::{Volume, VolumeOptions};
use std::sync::Arc;

/// Dry runs tried at most before settling for the current size.
const MAX_TRIES: usize = 40;

/// Whether a shrink to `shape` completes (a dry run; nothing written).
///
/// # Errors
/// Engine errors of the dry run.
pub(crate) fn fits(
    dev: &Arc<dyn BlockDevice>,
    shape: &Shape,
    vopts: &VolumeOptions,
) -> Result<bool> {
    Ok(dry_run(dev, shape, vopts)?.is_ok())
}

/// The dry run: `Ok(())` when it completes, else how many blocks it was
/// short.
fn dry_run(
    dev: &Arc<dyn BlockDevice>,
    shape: &Shape,
    vopts: &VolumeOptions,
) -> Result<std::result::Result<(), u64>> {
    let staged: Arc<dyn BlockDevice> = Arc::new(Staged::new(Arc::clone(dev), shape.geo.block_size));
    let vol = Volume::open(staged, vopts.clone())?;
    let (vol, r) = shrink::shrink(vol, shape, true, vopts)?;
    drop(vol);
    Ok(r.map(|_| ()).map_err(|s| s.blocks))
}

/// Metadata blocks of groups `0..count` of `geo` (superblock copies,
/// descriptor tables and reserve, bitmaps, inode tables).
fn metadata(geo: &Geometry, count: u32) -> u64 {
    let itb = u64::from(geo.inode_blocks_per_group());
    (0..count)
        .map(|g| geo.super_and_desc_blocks(g) + 2 + itb)
        .sum()
}

/// The smallest valid size at or above `n` (the last group keeps its
/// metadata and 50 blocks, or is not there), or `None` past `limit`.
fn valid_at_least(sb: &Superblock, geo: &Geometry, n: u64, limit: u64) -> Option<u64> {
    let mut n = n.max(geo.first_data_block + 1);
    let ratio = geo.cluster_ratio();
    n = n.div_ceil(ratio) * ratio;
    for _ in 0..4 {
        if n >= limit {
            return None;
        }
        if adjust_new_size(sb, geo, n) == Some(n) {
            return Some(n);
        }
        // Too little of the last group: give it its metadata and slack.
        let rem = (n - geo.first_data_block) % geo.blocks_per_group;
        let base = n - rem;
        let count =
            u32::try_from((n - geo.first_data_block).div_ceil(geo.blocks_per_group)).ok()?;
        let probe = geometry::shape(sb, geo, n).ok()?;
        let last = count - 1;
        let overhead =
            2 + u64::from(geo.inode_blocks_per_group()) + probe.geo.super_and_desc_blocks(last);
        let want = base + overhead + LAST_GROUP_SLACK;
        n = if want > n {
            want
        } else {
            base + geo.blocks_per_group
        };
        n = n.div_ceil(ratio) * ratio;
    }
    None
}

/// A lower bound on the size a shrink can reach: room for every block in
/// use that is not group metadata, and for the new geometry's metadata;
/// groups for every inode in use.
fn lower_bound(sb: &Superblock, geo: &Geometry) -> u64 {
    let used_inodes = u64::from(sb.s_inodes_count.get() - sb.s_free_inodes_count.get());
    let ipg = u64::from(geo.inodes_per_group);
    // At most the group count, since used inodes <= inodes_count.
    let min_groups = num::sat_u32(used_inodes.div_ceil(ipg).max(1));
    let used = geo.blocks_count - sb.free_blocks_count();
    let data = used.saturating_sub(metadata(geo, geo.group_count));
    let bpg = geo.blocks_per_group;
    let mut g = min_groups;
    // Up to the current group count: a filesystem can shrink inside its
    // last group (one group of one, too).
    while g <= geo.group_count {
        let probe_blocks = (geo.first_data_block + u64::from(g) * bpg).min(geo.blocks_count);
        let meta = match geometry::shape(sb, geo, probe_blocks) {
            Ok(s) => metadata(&s.geo, g),
            Err(_) => metadata(geo, g),
        };
        let need = data + meta;
        if need <= probe_blocks - geo.first_data_block {
            let partial = u64::from(g - 1) * bpg;
            return geo.first_data_block + need.max(partial + 1);
        }
        g += 1;
    }
    geo.blocks_count
}

/// The minimum size (blocks) of the filesystem on `dev` (superblock `sb`,
/// geometry `geo`) and the shape of the filesystem at that size.
///
/// # Errors
/// Engine errors of the dry runs.
pub(crate) fn find(
    dev: &Arc<dyn BlockDevice>,
    sb: &Superblock,
    geo: &Geometry,
    vopts: &VolumeOptions,
) -> Result<(u64, Shape)> {
    let current = geo.blocks_count;
    let whole = || -> Result<(u64, Shape)> { Ok((current, geometry::shape(sb, geo, current)?)) };
    let mut n = lower_bound(sb, geo);
    // The last size whose dry run fell short.
    let mut failed: Option<u64> = None;
    let mut found = None;
    for _ in 0..MAX_TRIES {
        let Some(v) = valid_at_least(sb, geo, n, current) else {
            return whole();
        };
        let shape = geometry::shape(sb, geo, v)?;
        match dry_run(dev, &shape, vopts)? {
            Ok(()) => {
                found = Some((v, shape));
                break;
            }
            Err(short) => {
                failed = Some(v);
                n = v + short.max(1);
            }
        }
    }
    let Some((mut hi, mut best)) = found else {
        return whole();
    };
    // A shortfall is counted generously (whole runs, whole groups of
    // inodes): the size it leads to may be above the smallest that works.
    // Bisect between the last size that fell short and the first that
    // worked, over the valid sizes.
    if let Some(mut lo) = failed {
        let mut top = hi;
        let mut tries = 0;
        while lo + 1 < top && tries < MAX_TRIES {
            tries += 1;
            let mid = lo + (top - lo) / 2;
            match valid_at_least(sb, geo, mid, current) {
                Some(m) if m < top => {
                    let shape = geometry::shape(sb, geo, m)?;
                    if dry_run(dev, &shape, vopts)?.is_ok() {
                        (hi, best, top) = (m, shape, m);
                    } else {
                        lo = m;
                    }
                }
                // No valid size in [mid, top): look below mid.
                _ => top = mid,
            }
        }
    }
    Ok((hi, best))
}
