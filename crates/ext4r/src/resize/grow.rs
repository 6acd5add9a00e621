//! Growing: the new groups' tables placed in the new space, their
//! descriptors and bitmaps, the descriptor table's growth (into the
//! reserve of the resize inode, or past it to meta_bg), and the one
//! transaction that switches the filesystem to its new size.

use super::error::Result;
use super::geometry::{super_ranges, Shape};
use super::switch::{self, Reconcile};
use crate::error::Error;
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT, BG_INODE_ZEROED};
use ext4r_txn::bitmap::Bitmap;
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;

/// Where a new group's bitmaps and inode table go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tables {
    pub block_bitmap: u64,
    pub inode_bitmap: u64,
    pub inode_table: u64,
}

/// Hands out blocks of the new space in order, stepping over every
/// superblock copy and descriptor table.
struct Cursor<'a> {
    geo: &'a Geometry,
    at: u64,
}

impl Cursor<'_> {
    /// `len` blocks at the cursor or after it, clear of superblock copies
    /// and descriptor tables.
    fn take(&mut self, len: u64) -> Result<u64> {
        'again: loop {
            let end = self.at + len;
            if end > self.geo.blocks_count {
                return Err(Error::NoSpace.into());
            }
            let g0 = self.geo.group_of_block(self.at);
            let g1 = self.geo.group_of_block(end - 1);
            for g in g0..=g1 {
                for (s, e) in super_ranges(self.geo, g) {
                    if s < end && self.at < e {
                        self.at = e;
                        continue 'again;
                    }
                }
            }
            let b = self.at;
            self.at = end;
            return Ok(b);
        }
    }
}

/// The tables of groups `from..` of `geo`: with flex_bg, the groups of
/// each flex group packed in its first new group (block bitmaps, inode
/// bitmaps, inode tables, as mke2fs packs them); without, each group's in
/// the group itself, after its superblock copy.
pub(crate) fn place_tables(geo: &Geometry, from: u32) -> Result<Vec<Tables>> {
    let flex = geo.log_groups_per_flex.map_or(1, |l| 1u32 << l.min(31));
    let itb = u64::from(geo.inode_blocks_per_group());
    let mut out = Vec::with_capacity((geo.group_count - from) as usize);
    let mut g = from;
    while g < geo.group_count {
        let set_end = if flex > 1 {
            (g / flex + 1).saturating_mul(flex)
        } else {
            g + 1
        }
        .min(geo.group_count);
        let n = (set_end - g) as usize;
        let mut cur = Cursor {
            geo,
            at: geo.group_first_block(g),
        };
        let bbs: Vec<u64> = (0..n).map(|_| cur.take(1)).collect::<Result<_>>()?;
        let ibs: Vec<u64> = (0..n).map(|_| cur.take(1)).collect::<Result<_>>()?;
        let its: Vec<u64> = (0..n).map(|_| cur.take(itb)).collect::<Result<_>>()?;
        if flex == 1 && cur.at > geo.group_last_block(g) + 1 {
            // Without flex_bg a group's tables must lie in it.
            return Err(Error::NoSpace.into());
        }
        for k in 0..n {
            out.push(Tables {
                block_bitmap: bbs[k],
                inode_bitmap: ibs[k],
                inode_table: its[k],
            });
        }
        g = set_end;
    }
    Ok(out)
}

/// Clusters of group `g` in its bitmap.
pub(crate) fn clusters_in(geo: &Geometry, g: u32) -> u32 {
    geo.group_blocks(g)
        .div_ceil(geo.cluster_ratio())
        .min(u64::from(geo.block_size) * 8) as u32
}

/// Marks `[start, end)` in group `g`'s bitmap `m` (clusters), clipped to
/// the group.
pub(crate) fn mark(geo: &Geometry, g: u32, m: &mut Bitmap, start: u64, end: u64, used: bool) {
    let first = geo.group_first_block(g);
    let last = geo.group_last_block(g) + 1;
    let (s, e) = (start.max(first), end.min(last));
    if s >= e {
        return;
    }
    let c0 = ((s - first) >> geo.cluster_bits) as u32;
    let c1 = ((e - 1 - first) >> geo.cluster_bits) as u32;
    m.set_range(c0, c1 - c0 + 1, used);
}

/// The new groups' descriptors and the bitmaps that must be written
/// (groups that hold tables, the last group, and every group of a
/// filesystem without uninit_bg).
pub(crate) struct NewGroups {
    pub descs: Vec<GroupDesc>,
    pub block_maps: Vec<(u32, Bitmap)>,
    pub tables: Vec<Tables>,
}

/// Descriptors and bitmaps of groups `shape.old.group_count..` with their
/// tables at `tables`. `csum`: uninit_bg or metadata_csum (groups may be
/// left uninitialised); `zeroed`: their inode tables are zeroed.
pub(crate) fn new_groups(
    shape: &Shape,
    tables: Vec<Tables>,
    csum: bool,
    zeroed: bool,
) -> NewGroups {
    let geo = &shape.geo;
    let from = shape.old.group_count;
    let itb = u64::from(geo.inode_blocks_per_group());
    let wide = geo.desc_size >= 64;
    let _ = wide;
    // Groups whose blocks hold some table.
    let mut holds: std::collections::BTreeMap<u32, Vec<(u64, u64)>> = Default::default();
    for t in &tables {
        for (s, n) in [
            (t.block_bitmap, 1),
            (t.inode_bitmap, 1),
            (t.inode_table, itb),
        ] {
            let mut b = s;
            while b < s + n {
                let g = geo.group_of_block(b);
                let e = (geo.group_last_block(g) + 1).min(s + n);
                holds.entry(g).or_default().push((b, e));
                b = e;
            }
        }
    }
    let mut descs = Vec::with_capacity(tables.len());
    let mut block_maps = Vec::new();
    let last = geo.group_count - 1;
    for (k, t) in tables.iter().enumerate() {
        let g = from + k as u32;
        let mut m = Bitmap::new(clusters_in(geo, g), geo.block_size);
        for (s, e) in super_ranges(geo, g) {
            mark(geo, g, &mut m, s, e, true);
        }
        let held = holds.get(&g);
        for &(s, e) in held.into_iter().flatten() {
            mark(geo, g, &mut m, s, e, true);
        }
        let used = m.count_set(0, m.len());
        let mut d = GroupDesc::zeroed();
        d.set_locations(t.block_bitmap, t.inode_bitmap, t.inode_table);
        d.set_free_blocks_count(m.len() - used);
        d.set_free_inodes_count(geo.inodes_per_group);
        d.set_used_dirs_count(0);
        let mut flags = 0;
        if csum {
            flags |= BG_INODE_UNINIT;
            if zeroed {
                flags |= BG_INODE_ZEROED;
            }
            d.set_itable_unused(geo.inodes_per_group);
        }
        let explicit = !csum || held.is_some() || g == last;
        if explicit {
            block_maps.push((g, m));
        } else {
            flags |= BG_BLOCK_UNINIT;
        }
        d.set_flags(flags);
        descs.push(d);
    }
    NewGroups {
        descs,
        block_maps,
        tables,
    }
}

/// Grows the filesystem on `vol` to `shape` in one transaction (see the
/// protocol in the [module docs](super)).
pub(crate) fn grow(vol: &mut Volume, shape: &Shape, zero_itables: bool) -> Result<()> {
    let csum = vol.groups().gdt_csum();
    let zeroed = zero_itables || !csum;
    let tables = place_tables(&shape.geo, shape.old.group_count)?;
    let fresh = new_groups(shape, tables, csum, zeroed);
    let mut t = vol.begin();
    let rec = Reconcile::prepare(&t, shape)?;
    let mut descs = t.groups().descs().to_vec();
    descs.extend_from_slice(&fresh.descs);
    t.reshape(shape.sb.clone(), descs)?;
    rec.apply(&mut t, shape)?;
    for (g, m) in fresh.block_maps {
        t.set_block_map(g, m)?;
    }
    let itb = u64::from(shape.geo.inode_blocks_per_group());
    for (k, tb) in fresh.tables.iter().enumerate() {
        let g = shape.old.group_count + k as u32;
        if !csum {
            t.set_inode_map(
                g,
                Bitmap::new(shape.geo.inodes_per_group, shape.geo.block_size),
            )?;
        }
        if zeroed {
            t.zero_blocks(tb.inode_table, itb)?;
        }
    }
    switch::resize_inode(&mut t, shape)?;
    switch::recount(&mut t)?;
    commit(&mut t)?;
    Ok(())
}

fn commit<V: std::borrow::BorrowMut<Volume>>(t: &mut Transaction<V>) -> Result<()> {
    t.commit(ext4r_txn::txn::Commit::Auto)?;
    Ok(())
}
