//! The one rule the writer enforces on its own: a block written as file
//! data or file metadata (directory, extent, xattr, indirect blocks) never
//! lands on the filesystem's own metadata — a superblock copy, a
//! descriptor or reserved GDT block, a bitmap or an inode table. A file whose pointer was
//! damaged to name such a block shares it with the filesystem until pass
//! 1D gives the file a copy; a repair of the file's contents made before
//! that must not write over the superblock (it once zeroed
//! `s_inodes_count`). Such a write is dropped: the next round finds the
//! problem again in the copy.

use ext4r::fs::Filesystem;
use ext4r_format::features::Incompat;
use ext4r_format::GroupNr;

/// Sorted `[start, end)` block ranges of the group metadata, as the
/// descriptors the filesystem was opened with place it.
pub(crate) fn metadata_ranges(fs: &Filesystem) -> Vec<(u64, u64)> {
    let geo = fs.geometry();
    let wide = fs.superblock().has_incompat(Incompat::BIT64);
    let itb = u64::from(geo.inode_blocks_per_group());
    let mut out = Vec::new();
    // The primary superblock: in block 0 with blocks above 1 KiB.
    out.push((0, geo.first_data_block + 1));
    for i in 0..geo.desc_blocks() {
        let b = geo.desc_block_loc(i);
        out.push((b, b + 1));
    }
    for g in 0..geo.group_count {
        let m = geo.group_meta(g);
        if let Some(s) = m.super_block {
            out.push((s, s + 1));
        }
        // Descriptor blocks and the reserved GDT blocks after them (the
        // resize inode's; only its own recreation writes them).
        if let Some((first, n)) = m.old_desc {
            out.push((first, first + n));
        }
        if let Some(b) = m.meta_desc {
            out.push((b, b + 1));
        }
        if let Ok(d) = fs.group_desc(GroupNr(g)) {
            for (b, n) in [
                (d.block_bitmap(wide), 1),
                (d.inode_bitmap(wide), 1),
                (d.inode_table(wide), itb),
            ] {
                if b != 0 && b < geo.blocks_count {
                    out.push((b, b.saturating_add(n).min(geo.blocks_count)));
                }
            }
        }
    }
    out.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(out.len());
    for (s, e) in out {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Whether block `b` lies in one of the sorted disjoint `ranges`.
pub(crate) fn covers(ranges: &[(u64, u64)], b: u64) -> bool {
    let i = ranges.partition_point(|r| r.0 <= b);
    i > 0 && b < ranges[i - 1].1
}

#[cfg(test)]
mod tests {
    use super::covers;

    #[test]
    fn blocks_in_ranges_are_found() {
        let r = vec![(0, 2), (5, 10), (20, 21)];
        assert!(covers(&r, 0) && covers(&r, 1) && covers(&r, 9) && covers(&r, 20));
        assert!(!covers(&r, 2) && !covers(&r, 10) && !covers(&r, 19) && !covers(&r, 21));
    }
}
