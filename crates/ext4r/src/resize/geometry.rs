//! The filesystem's shape after a resize: block and group counts, the
//! descriptor table and what reserves it, backups. The rules are
//! resize2fs's (`adjust_new_size`, `adjust_fs_info`), so that a size asked
//! of both ends in the same geometry, except where resize2fs would have to
//! move the group tables to make room for the descriptor table: there the
//! filesystem turns to meta_bg, as the kernel's online resize does.

use super::error::Refusal;
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::num;
use ext4r_format::superblock::Superblock;

/// The last group must hold its own metadata and this many blocks more,
/// or it is dropped (resize2fs's and mke2fs's rule).
pub(crate) const LAST_GROUP_SLACK: u64 = 50;

/// Blocks a last group of `count` groups takes for its metadata when it
/// is the last, as resize2fs counts them for `adjust_new_size`: bitmaps
/// and inode table, and its superblock copy with the descriptor table and
/// reserve when it has one.
fn last_group_overhead(sb: &Superblock, geo: &Geometry, count: u32) -> u64 {
    let desc_blocks = u64::from(count.div_ceil(geo.descs_per_block()));
    let mut overhead = 2 + u64::from(geo.inode_blocks_per_group());
    let has_bg = if sb.has_compat(Compat::SPARSE_SUPER2) {
        if count == 2 {
            sb.s_backup_bgs[0].get() != 0
        } else {
            sb.s_backup_bgs[1].get() != 0
        }
    } else {
        geo.has_super(count - 1)
    };
    if has_bg {
        overhead += 1 + desc_blocks + u64::from(sb.s_reserved_gdt_blocks.get());
    }
    overhead
}

/// Blocks an ext4 filesystem can address: extents hold 48-bit block
/// numbers (and the kernel's 64bit filesystems stop there too).
pub(crate) const MAX_BLOCKS: u64 = 1 << 48;

/// Why `size` blocks is past what the format of `sb` can express, in
/// resize2fs's words where it has them; `None` when it is not.
pub(crate) fn beyond_format(sb: &Superblock, geo: &Geometry, size: u64) -> Option<String> {
    if !sb.has_incompat(Incompat::BIT64) && size > u64::from(u32::MAX) {
        return Some("New size too large to be expressed in 32 bits".into());
    }
    if size > MAX_BLOCKS {
        return Some(format!(
            "New size too large: ext4 addresses at most 2^48 ({MAX_BLOCKS}) blocks"
        ));
    }
    let groups = (size.saturating_sub(geo.first_data_block)).div_ceil(geo.blocks_per_group);
    if u32::try_from(groups).is_err() {
        return Some("New size results in too many block groups".into());
    }
    None
}

/// resize2fs's `adjust_new_size`: a last group too small for its metadata
/// and 50 blocks is dropped, and the group count kept below 2^32 inodes.
/// `None` when no size works (a single group too small).
pub(crate) fn adjust_new_size(sb: &Superblock, geo: &Geometry, size: u64) -> Option<u64> {
    let first = geo.first_data_block;
    let bpg = geo.blocks_per_group;
    let ipg = u64::from(geo.inodes_per_group);
    let mut size = size;
    loop {
        if size <= first {
            return None;
        }
        let count = u32::try_from((size - first).div_ceil(bpg)).ok()?;
        let overhead = last_group_overhead(sb, geo, count);
        let rem = (size - first) % bpg;
        if count == 1 && rem != 0 && rem < overhead {
            return None;
        }
        if count > 1 && rem != 0 && rem < overhead + LAST_GROUP_SLACK {
            size -= rem;
            continue;
        }
        if ipg * u64::from(count) > u64::from(u32::MAX) {
            if ipg * u64::from(count - 1) > u64::from(u32::MAX) {
                return None;
            }
            size = bpg * u64::from(count - 1) + first;
            continue;
        }
        return Some(size);
    }
}

/// The superblock of the resized filesystem and how its descriptor table
/// changes.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// The new superblock (free counts are the transaction's to set).
    pub sb: Superblock,
    /// Its geometry.
    pub geo: Geometry,
    /// The old geometry.
    pub old: Geometry,
    /// The filesystem had the resize inode.
    pub had_resize_inode: bool,
    /// The descriptor table outgrows the reserve: the filesystem turns to
    /// meta_bg (the reserve becomes descriptor blocks, the resize inode
    /// goes).
    pub to_meta_bg: bool,
}

impl Shape {
    /// Whether the filesystem grows.
    pub(crate) fn grows(&self) -> bool {
        self.geo.blocks_count > self.old.blocks_count
    }
}

/// The shape of the filesystem `sb` (geometry `geo`) at `blocks` blocks,
/// a size [`adjust_new_size`] returned.
///
/// # Errors
/// The refusal when the format cannot express that size.
pub(crate) fn shape(sb: &Superblock, geo: &Geometry, blocks: u64) -> Result<Shape, Refusal> {
    let wide = sb.has_incompat(Incompat::BIT64);
    if !wide && blocks > u64::from(u32::MAX) {
        return Err(Refusal::TooLarge(
            "New size too large to be expressed in 32 bits".into(),
        ));
    }
    let first = geo.first_data_block;
    let bpg = geo.blocks_per_group;
    let count = u32::try_from((blocks - first).div_ceil(bpg))
        .map_err(|_| Refusal::TooLarge("New size results in too many block groups".into()))?;
    let ipg = geo.inodes_per_group;
    let inodes = u32::try_from(u64::from(ipg) * u64::from(count))
        .map_err(|_| Refusal::TooLarge(format!("inodes must be less than {}", u32::MAX)))?;
    let per = geo.descs_per_block();
    let old_desc = geo.desc_blocks();
    let new_desc = count.div_ceil(per);
    let mut n = sb.clone();
    n.set_blocks_count(blocks);
    n.s_inodes_count.set(inodes);
    n.s_overhead_clusters.set(0);
    // The reserve scales with the size, in double precision as resize2fs
    // computes it.
    let percent = (sb.r_blocks_count() as f64 * 100.0) / geo.blocks_count as f64;
    #[allow(clippy::cast_possible_truncation)] // a percentage (<= 100) of a u64 count
    let r_blocks = (percent * blocks as f64 / 100.0) as u64;
    n.set_r_blocks_count(r_blocks);
    let resize_inode = sb.has_compat(Compat::RESIZE_INODE);
    let meta_bg = sb.has_incompat(Incompat::META_BG);
    let reserved = u32::from(sb.s_reserved_gdt_blocks.get());
    let mut to_meta_bg = false;
    if !meta_bg && new_desc > old_desc {
        // The descriptor table grows past its old blocks: into the
        // reserve while it lasts (its pointers are 32 bits: none past
        // 2^32 blocks), else to meta_bg.
        let fits = resize_inode && new_desc <= old_desc + reserved && blocks <= 1 << 32;
        to_meta_bg = !fits;
    }
    if to_meta_bg {
        // The old descriptor blocks and the whole reserve become the
        // table before the first meta group: the same blocks after every
        // superblock copy as before, now all descriptors.
        let mut inc = Incompat::from_bits_retain(n.s_feature_incompat.get());
        inc.insert(Incompat::META_BG);
        n.s_feature_incompat.set(inc.bits());
        let mut compat = Compat::from_bits_retain(n.s_feature_compat.get());
        compat.remove(Compat::RESIZE_INODE);
        n.s_feature_compat.set(compat.bits());
        n.s_first_meta_bg
            .set(old_desc + if resize_inode { reserved } else { 0 });
        n.s_reserved_gdt_blocks.set(0);
    } else if resize_inode && new_desc != old_desc {
        // resize2fs's adjust_reserved_gdt_blocks: the table and its
        // reserve keep their size.
        let r = (i64::from(reserved) + i64::from(old_desc) - i64::from(new_desc))
            .clamp(0, i64::from(geo.block_size / 4));
        n.s_reserved_gdt_blocks.set(num::sat_u16(r)); // clamped to a quarter block
    }
    if meta_bg && n.s_first_meta_bg.get() > new_desc {
        // Every descriptor block left follows the superblock.
        let mut inc = Incompat::from_bits_retain(n.s_feature_incompat.get());
        inc.remove(Incompat::META_BG);
        n.s_feature_incompat.set(inc.bits());
        n.s_first_meta_bg.set(0);
    }
    if sb.has_compat(Compat::SPARSE_SUPER2) {
        let last = count - 1;
        let old_last = geo.group_count - 1;
        let mut bgs = [sb.s_backup_bgs[0].get(), sb.s_backup_bgs[1].get()];
        if last > old_last {
            if geo.group_count == 1 {
                bgs[0] = 1;
            }
            if (geo.group_count < 3 && count > 2) || bgs[1] != 0 {
                bgs[1] = last;
            }
        } else if last < old_last {
            if bgs[0] > last {
                bgs[0] = 0;
            }
            if bgs[1] > last {
                bgs[1] = 0;
            }
            if last > 1 && sb.s_backup_bgs[1].get() == old_last {
                bgs[1] = last;
            }
        }
        n.s_backup_bgs[0].set(bgs[0]);
        n.s_backup_bgs[1].set(bgs[1]);
    }
    let ngeo = Geometry::from_superblock(&n)
        .map_err(|e| Refusal::TooLarge(format!("the new geometry is not valid: {e}")))?;
    if ngeo.meta_bg.is_none() || to_meta_bg {
        // The table before the first meta group (all of it without
        // meta_bg) must fit in group 0 after the superblock.
        let old_style = u64::from(ngeo.old_desc_blocks());
        if old_style + first + 1 > bpg {
            return Err(Refusal::TooLarge(
                "New size results in too many block group descriptors.".into(),
            ));
        }
    }
    Ok(Shape {
        sb: n,
        geo: ngeo,
        old: geo.clone(),
        had_resize_inode: resize_inode,
        to_meta_bg,
    })
}

/// The blocks of group `g` that hold a superblock copy or descriptor
/// table (with its reserve), as `(start, end)` ranges (end exclusive).
pub(crate) fn super_ranges(geo: &Geometry, g: u32) -> Vec<(u64, u64)> {
    let m = geo.group_meta(g);
    let mut out = Vec::new();
    if let Some(b) = m.super_block {
        out.push((b, b + 1));
    }
    if let Some((b, n)) = m.old_desc {
        out.push((b, b + n));
    }
    if let Some(b) = m.meta_desc {
        out.push((b, b + 1));
    }
    // 1 KiB blocks with bigalloc: block 0 (the boot block) is in the
    // first cluster, which the superblock's makes used anyway.
    out.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in out {
        match merged.last_mut() {
            Some(l) if s <= l.1 => l.1 = l.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Clusters of group `g` in its bitmap.
pub(crate) fn clusters_in(geo: &Geometry, g: u32) -> u32 {
    num::sat_u32(
        geo.group_blocks(g)
            .div_ceil(geo.cluster_ratio())
            .min(u64::from(geo.block_size) * 8),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r_format::features::RoCompat;

    fn sb4k(blocks: u64) -> Superblock {
        let mut sb = Superblock::zeroed();
        sb.s_log_block_size.set(2);
        sb.s_log_cluster_size.set(2);
        sb.s_blocks_per_group.set(32768);
        sb.s_clusters_per_group.set(32768);
        sb.s_inodes_per_group.set(8192);
        sb.s_inode_size.set(256);
        sb.s_rev_level.set(1);
        sb.s_first_ino.set(11);
        sb.s_feature_ro_compat
            .set(RoCompat::SPARSE_SUPER.bits() | RoCompat::METADATA_CSUM.bits());
        sb.s_feature_incompat
            .set(Incompat::BIT64.bits() | Incompat::FLEX_BG.bits());
        sb.s_feature_compat.set(Compat::RESIZE_INODE.bits());
        sb.s_desc_size.set(64);
        sb.s_log_groups_per_flex = 4;
        sb.s_reserved_gdt_blocks.set(127);
        sb.set_blocks_count(blocks);
        sb.s_inodes_count
            .set((blocks.div_ceil(32768) * 8192) as u32);
        sb.set_r_blocks_count(blocks / 20);
        sb
    }

    #[test]
    fn sizes_past_the_format_are_named() {
        let sb = sb4k(1 << 20);
        let geo = Geometry::from_superblock(&sb).unwrap();
        assert_eq!(beyond_format(&sb, &geo, 1 << 40), None);
        assert!(beyond_format(&sb, &geo, (1 << 48) + 1)
            .unwrap()
            .contains("2^48"));
        let mut narrow = sb.clone();
        narrow.s_feature_incompat.set(Incompat::FLEX_BG.bits());
        narrow.s_desc_size.set(0);
        let geo = Geometry::from_superblock(&narrow).unwrap();
        assert_eq!(beyond_format(&narrow, &geo, u64::from(u32::MAX)), None);
        assert_eq!(
            beyond_format(&narrow, &geo, 1 << 32).as_deref(),
            Some("New size too large to be expressed in 32 bits")
        );
    }

    #[test]
    fn a_small_last_group_is_dropped() {
        let sb = sb4k(262144);
        let geo = Geometry::from_superblock(&sb).unwrap();
        // 10 blocks into a ninth group: dropped.
        assert_eq!(adjust_new_size(&sb, &geo, 262154), Some(262144));
        // A whole ninth group is kept.
        assert_eq!(adjust_new_size(&sb, &geo, 294912), Some(294912));
    }

    #[test]
    fn growing_uses_the_reserve_then_meta_bg() {
        let sb = sb4k(262144);
        let geo = Geometry::from_superblock(&sb).unwrap();
        // 1 GiB -> 64 GiB: 512 groups, 8 descriptor blocks, 7 of the reserve.
        let s = shape(&sb, &geo, 1 << 24).unwrap();
        assert!(!s.to_meta_bg);
        assert_eq!(s.sb.s_reserved_gdt_blocks.get(), 120);
        assert_eq!(s.geo.desc_blocks(), 8);
        // Past 1024x: no reserve left for it.
        let s = shape(&sb, &geo, 1 << 30).unwrap();
        assert!(s.to_meta_bg);
        assert_eq!(s.sb.s_first_meta_bg.get(), 128);
        assert_eq!(s.geo.old_desc_blocks(), 128);
        assert_eq!(s.sb.s_reserved_gdt_blocks.get(), 0);
        assert!(!s.sb.has_compat(Compat::RESIZE_INODE));
        // The reserve keeps its share, computed in double as resize2fs
        // does (13107 of 262144 blocks: 4.99992%).
        assert_eq!(s.sb.r_blocks_count(), 53_686_272);
    }
}
