//! A small file's extents as mkfs lays them out: `(logical, physical,
//! length)` runs, grown one block at a time the way libext2fs maps them.

use super::journal::EXT_INIT_MAX_LEN;

/// `(logical, physical, length)` runs of a file.
pub(crate) type Extents = Vec<(u64, u64, u64)>;

/// `ext2fs_extent_set_bmap` for a block not mapped yet, in a depth-0
/// tree: the block extends the extent it follows or the one it precedes
/// (never both: two extents that become adjacent stay two), or starts a
/// new one. `extents` is kept sorted by logical block.
pub(crate) fn map_block(extents: &mut Extents, lblk: u64, pblk: u64) {
    let max = EXT_INIT_MAX_LEN - 1;
    // The extent the handle lands on: the last one starting at or before
    // lblk, else the first.
    let cur = extents
        .iter()
        .rposition(|e| e.0 <= lblk)
        .or(if extents.is_empty() { None } else { Some(0) });
    if let Some(c) = cur {
        let (l, p, n) = extents[c];
        if lblk == l + n && pblk == p + n && n < max {
            extents[c].2 += 1;
            return;
        }
        if lblk + 1 == l && pblk + 1 == p && n < max {
            extents[c] = (l - 1, p - 1, n + 1);
            return;
        }
        if let Some(&(nl, np, nn)) = extents.get(c + 1) {
            if lblk + 1 == nl && pblk + 1 == np && nn < max {
                extents[c + 1] = (nl - 1, np - 1, nn + 1);
                return;
            }
        }
    }
    let at = extents.partition_point(|e| e.0 < lblk);
    extents.insert(at, (lblk, pblk, 1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_joins_one_neighbour_only() {
        let mut e = Vec::new();
        for (l, p) in [(0, 100), (2, 102), (3, 103), (4, 104), (5, 105), (1, 101)] {
            map_block(&mut e, l, p);
        }
        // lblk 1 extends the extent of lblk 0; (2-5) stays separate.
        assert_eq!(e, [(0, 100, 2), (2, 102, 4)]);
        let mut e = Vec::new();
        for (l, p) in [(0, 100), (2, 101), (3, 102), (1, 105)] {
            map_block(&mut e, l, p);
        }
        assert_eq!(e, [(0, 100, 1), (1, 105, 1), (2, 101, 2)]);
    }
}
