//! Growing: the new groups' tables placed in the new space, their
//! descriptors and bitmaps, the descriptor table's growth (into the
//! reserve of the resize inode, or past it to meta_bg), and the one
//! transaction that switches the filesystem to its new size.

use super::error::Result;
use super::geometry::{clusters_in, super_ranges, Shape};
use super::switch::{self, Reconcile};
use crate::error::Error;
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT, BG_INODE_ZEROED};
use ext4r_format::num;
use ext4r_txn::bitmap::Bitmap;
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;
use std::collections::BTreeMap;

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

/// Marks `[start, end)` in group `g`'s bitmap `m` (clusters), clipped to
/// the group.
pub(crate) fn mark(geo: &Geometry, g: u32, m: &mut Bitmap, start: u64, end: u64, used: bool) {
    let first = geo.group_first_block(g);
    let last = geo.group_last_block(g) + 1;
    let (s, e) = (start.max(first), end.min(last));
    if s >= e {
        return;
    }
    // Both inside group g: below clusters_per_group, a u32.
    let c0 = num::sat_u32((s - first) >> geo.cluster_bits);
    let c1 = num::sat_u32((e - 1 - first) >> geo.cluster_bits);
    m.set_range(c0, c1 - c0 + 1, used);
}

/// The new groups' descriptors, and which of them need a block bitmap
/// written (groups that hold tables, the last group, and every group of a
/// filesystem without uninit_bg): those bitmaps are made again, a batch at
/// a time, by [`NewGroups::block_map`] when they are written, so that a
/// grow by a hundred thousand groups never holds them all.
pub(crate) struct NewGroups {
    pub descs: Vec<GroupDesc>,
    pub explicit: Vec<u32>,
    pub tables: Vec<Tables>,
    /// The table blocks each group holds, as ranges.
    holds: BTreeMap<u32, Vec<(u64, u64)>>,
}

impl NewGroups {
    /// Group `g`'s block bitmap: its superblock copy and descriptor
    /// table, and the new tables it holds.
    pub(crate) fn block_map(&self, geo: &Geometry, g: u32) -> Bitmap {
        let mut m = Bitmap::new(clusters_in(geo, g), geo.block_size);
        for (s, e) in super_ranges(geo, g) {
            mark(geo, g, &mut m, s, e, true);
        }
        for &(s, e) in self.holds.get(&g).into_iter().flatten() {
            mark(geo, g, &mut m, s, e, true);
        }
        m
    }
}

/// Descriptors of groups `shape.old.group_count..` with their tables at
/// `tables`. `csum`: uninit_bg or metadata_csum (groups may be left
/// uninitialised); `zeroed`: their inode tables are zeroed.
pub(crate) fn new_groups(
    shape: &Shape,
    tables: Vec<Tables>,
    csum: bool,
    zeroed: bool,
) -> NewGroups {
    let geo = &shape.geo;
    let from = shape.old.group_count;
    let itb = u64::from(geo.inode_blocks_per_group());
    // Groups whose blocks hold some table.
    let mut holds: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
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
                // Tables are placed back to back: one range each run.
                let ranges = holds.entry(g).or_default();
                match ranges.last_mut() {
                    Some(last) if last.1 == b => last.1 = e,
                    _ => ranges.push((b, e)),
                }
                b = e;
            }
        }
    }
    let mut out = NewGroups {
        descs: Vec::with_capacity(tables.len()),
        explicit: Vec::new(),
        tables: Vec::new(),
        holds,
    };
    let last = geo.group_count - 1;
    for (k, t) in (0u32..).zip(tables.iter()) {
        let g = from + k;
        let m = out.block_map(geo, g);
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
        let explicit = !csum || out.holds.contains_key(&g) || g == last;
        if explicit {
            out.explicit.push(g);
        } else {
            flags |= BG_BLOCK_UNINIT;
        }
        d.set_flags(flags);
        out.descs.push(d);
    }
    out.tables = tables;
    out
}

/// New groups whose bitmaps and zeroed tables are gathered before they
/// are written ahead of the commit: about 32 MiB of 4 KiB bitmaps.
const GROUPS_PER_BATCH: usize = 4096;

/// Grows the filesystem on `vol` to `shape` in one transaction (see the
/// protocol in the [module docs](super)).
pub(crate) fn grow(vol: &mut Volume, shape: &Shape, zero_itables: bool) -> Result<()> {
    let csum = vol.groups().gdt_csum();
    let zeroed = zero_itables || !csum;
    let geo = &shape.geo;
    let from = shape.old.group_count;
    let tables = place_tables(geo, from)?;
    let mut fresh = new_groups(shape, tables, csum, zeroed);
    let mut t = vol.begin();
    let rec = Reconcile::prepare(&t, shape)?;
    let mut descs = t.groups().descs().to_vec();
    descs.append(&mut fresh.descs);
    t.reshape(shape.sb.clone(), descs)?;
    // First the new groups, which nothing on disk refers to yet: their
    // bitmaps and inode tables go ahead of the commit, a batch at a time,
    // before anything the old filesystem holds changes.
    let itb = u64::from(geo.inode_blocks_per_group());
    for (n, (k, tb)) in (0u32..).zip(fresh.tables.iter()).enumerate() {
        let g = from + k;
        if fresh.explicit.binary_search(&g).is_ok() {
            t.set_block_map(g, fresh.block_map(geo, g))?;
        }
        if !csum {
            t.set_inode_map(g, Bitmap::new(geo.inodes_per_group, geo.block_size))?;
        }
        if zeroed {
            t.zero_blocks(tb.inode_table, itb)?;
        }
        if (n + 1) % GROUPS_PER_BATCH == 0 {
            t.flush_grown()?;
        }
    }
    t.flush_grown()?;
    rec.apply(&mut t, shape)?;
    switch::resize_inode(&mut t, shape)?;
    switch::recount(&mut t)?;
    commit(&mut t)?;
    Ok(())
}

fn commit<V: std::borrow::BorrowMut<Volume>>(t: &mut Transaction<V>) -> Result<()> {
    t.commit(ext4r_txn::txn::Commit::Auto)?;
    Ok(())
}
