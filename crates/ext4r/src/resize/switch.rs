//! What the switch to the new size changes in the groups that stay, for a
//! grow and a shrink alike: the last group's length, the superblock copies
//! and descriptor tables that appear or go (sparse_super2's backup in the
//! last group, a table that needs fewer blocks), the resize inode for the
//! new table and backups, and the free counts.

use super::error::Result;
use super::geometry::clusters_in;
use super::geometry::{super_ranges, Shape};
use crate::error::Error;
use ext4r_format::features::Compat;
use ext4r_format::geometry::Geometry;
use ext4r_format::inode::{ino, Inode};
use ext4r_txn::bitmap::Bitmap;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;
use std::borrow::BorrowMut;

/// `i_block` slot of the resize inode's double-indirect block.
const DIND_SLOT: usize = 13;

/// Ranges `a` minus ranges `b` (both sorted, merged, end exclusive).
pub(crate) fn minus(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(s, e) in a {
        let mut cur = s;
        for &(t, u) in b {
            if u <= cur || t >= e {
                continue;
            }
            if t > cur {
                out.push((cur, t));
            }
            cur = cur.max(u);
        }
        if cur < e {
            out.push((cur, e));
        }
    }
    out
}

/// The last group's bitmap before the resize, kept to be cut or extended.
pub(crate) struct Reconcile {
    last: u32,
    last_map: Option<Bitmap>,
}

impl Reconcile {
    /// Before [`Transaction::reshape`]: the bitmap of the last group both
    /// geometries share, when its length changes.
    ///
    /// # Errors
    /// Bitmap read errors.
    pub(crate) fn prepare<V: BorrowMut<Volume>>(t: &Transaction<V>, shape: &Shape) -> Result<Self> {
        let last = shape.old.group_count.min(shape.geo.group_count) - 1;
        let changes = shape.old.group_blocks(last) != shape.geo.group_blocks(last);
        // The bitmaps of the shared groups whose superblock copy or
        // descriptor blocks change, read now so that they carry over: a
        // BLOCK_UNINIT group's bitmap computed after the reshape would
        // already show the new layout, and its free count not follow.
        let shared = shape.old.group_count.min(shape.geo.group_count);
        for g in 0..shared {
            if super_ranges(&shape.old, g) != super_ranges(&shape.geo, g) {
                t.groups().block_map(g)?;
            }
        }
        let last_map = if changes {
            Some(t.groups().block_map(last)?)
        } else {
            None
        };
        Ok(Reconcile { last, last_map })
    }

    /// After [`Transaction::reshape`]: the last shared group cut or
    /// extended, and in every group both geometries share, superblock
    /// copies and descriptor blocks that go freed, those that come taken
    /// (they must be free).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a block that becomes metadata is in
    /// use; bitmap errors.
    pub(crate) fn apply<V: BorrowMut<Volume>>(
        self,
        t: &mut Transaction<V>,
        shape: &Shape,
    ) -> Result<()> {
        let (old, new) = (&shape.old, &shape.geo);
        if let Some(om) = self.last_map {
            let g = self.last;
            let mut m = Bitmap::new(clusters_in(new, g), new.block_size);
            let keep = om.len().min(m.len());
            let mut c = 0;
            while c < keep {
                let s = om.next_set(c);
                if s >= keep {
                    break;
                }
                let e = om.next_clear(s).unwrap_or(om.len()).min(keep);
                m.set_range(s, e - s, true);
                c = e;
            }
            let free = m.len() - m.count_set(0, m.len());
            t.set_block_map(g, m)?;
            t.desc_mut(g)?.set_free_blocks_count(free);
        }
        let shared = old.group_count.min(new.group_count);
        for g in 0..shared {
            let (o, n) = (super_ranges(old, g), super_ranges(new, g));
            if o == n {
                continue;
            }
            for (s, e) in minus(&o, &n) {
                free_meta(t, new, s, e)?;
            }
            for (s, e) in minus(&n, &o) {
                take_meta(t, s, e)?;
            }
        }
        Ok(())
    }
}

/// Marks `[s, e)` used as metadata; every cluster of it must be free.
pub(crate) fn take_meta<V: BorrowMut<Volume>>(
    t: &mut Transaction<V>,
    s: u64,
    e: u64,
) -> Result<()> {
    for b in s..e {
        if t.groups().is_block_used(b)? {
            return Err(Error::InvalidArgument(format!(
                "block {b} is to hold a superblock copy or descriptors but is in use"
            ))
            .into());
        }
    }
    t.take_blocks(s, e - s)?;
    Ok(())
}

/// Frees metadata blocks `[s, e)` of geometry `geo` whose clusters hold no
/// other metadata (with bigalloc a cluster may hold a table's end and the
/// next one's start).
pub(crate) fn free_meta<V: BorrowMut<Volume>>(
    t: &mut Transaction<V>,
    geo: &Geometry,
    s: u64,
    e: u64,
) -> Result<()> {
    let ratio = geo.cluster_ratio();
    if ratio == 1 {
        t.free_blocks(s, e - s)?;
        return Ok(());
    }
    let mut c = s / ratio * ratio;
    while c < e {
        let (cs, ce) = (c, c + ratio);
        let others = minus(&[(cs, ce)], &[(s, e)]);
        let shared = others
            .iter()
            .any(|&(a, b)| (a..b).any(|x| is_meta(t, geo, x)));
        if !shared && cs < geo.blocks_count {
            let lo = cs.max(geo.first_data_block);
            t.free_blocks(lo, ce.min(geo.blocks_count) - lo)?;
        }
        c = ce;
    }
    Ok(())
}

/// Whether block `b` is a superblock copy, descriptor block or one of
/// some group's tables in geometry `geo` (as the transaction has them).
fn is_meta<V: BorrowMut<Volume>>(t: &Transaction<V>, geo: &Geometry, b: u64) -> bool {
    if b >= geo.blocks_count {
        return false;
    }
    let g = geo.group_of_block(b);
    if super_ranges(geo, g).iter().any(|&(s, e)| s <= b && b < e) {
        return true;
    }
    let wide = t.groups().wide();
    let itb = u64::from(geo.inode_blocks_per_group());
    t.groups().descs().iter().any(|d| {
        d.block_bitmap(wide) == b
            || d.inode_bitmap(wide) == b
            || (d.inode_table(wide) <= b && b < d.inode_table(wide) + itb)
    })
}

/// The resize inode for the new table and backups: rebuilt as mke2fs lays
/// it out when the filesystem keeps resize_inode, cleared (its
/// double-indirect block freed) when it turns to meta_bg.
///
/// # Errors
/// I/O and corruption errors of inode 7.
pub(crate) fn resize_inode<V: BorrowMut<Volume>>(
    t: &mut Transaction<V>,
    shape: &Shape,
) -> Result<()> {
    let had = shape.had_resize_inode;
    let has = shape.sb.has_compat(Compat::RESIZE_INODE);
    if !had {
        return Ok(());
    }
    let rec = t.read_inode(ino::RESIZE)?;
    let mut inode =
        Inode::parse(&rec).map_err(|e| Error::corrupt("resize inode".to_string(), e))?;
    let words = inode.block_words();
    let dind = u64::from(words[DIND_SLOT]);
    let geo = shape.geo.clone();
    if !has {
        if dind != 0 && dind < geo.blocks_count {
            free_meta(t, &geo, dind, dind + 1)?;
        }
        let zero = vec![0u8; rec.len()];
        t.write_inode(ino::RESIZE, zero)?;
        return Ok(());
    }
    let dind = if dind == 0 || dind >= geo.blocks_count {
        // Out of the new filesystem (or never made): a new one near the
        // start, as libext2fs places it.
        let b = t.alloc_block(crate::mkfs::resize_inode::dind_goal(&geo))?;
        if dind != 0 && dind < shape.old.blocks_count {
            // Still inside the old filesystem: the shrink frees it with
            // the groups that go.
        }
        b
    } else {
        dind
    };
    let mut writes = Vec::new();
    let total = crate::mkfs::resize_inode::emit_blocks(&geo, dind, |b, data| {
        writes.push((b, data));
        Ok::<(), std::convert::Infallible>(())
    });
    let total = match total {
        Ok(n) => n,
        Err(never) => match never {},
    };
    for (b, data) in writes {
        t.write_block(b, BlockKind::Plain, data)?;
    }
    let bs = geo.block_size;
    let mut w = [0u32; 15];
    w[DIND_SLOT] = crate::mkfs::blockmap::ptr(dind);
    inode.set_block_words(&w);
    let apb = u64::from(bs / 4);
    inode.set_size((apb * apb + apb + 12) * u64::from(bs));
    let huge = t
        .superblock()
        .has_ro_compat(ext4r_format::features::RoCompat::HUGE_FILE);
    inode
        .set_blocks_count(total * geo.cluster_ratio() * u64::from(bs / 512), huge, bs)
        .map_err(|e| Error::corrupt("resize inode".to_string(), e))?;
    let mut rec = rec;
    inode
        .write(&mut rec)
        .map_err(|e| Error::corrupt("resize inode".to_string(), e))?;
    t.write_inode(ino::RESIZE, rec)?;
    Ok(())
}

/// Sets the superblock's free counts to the sums of the descriptors'.
///
/// # Errors
/// None today; kept fallible for the table's reads.
pub(crate) fn recount<V: BorrowMut<Volume>>(t: &mut Transaction<V>) -> Result<()> {
    let wide = t.groups().wide();
    let ratio = t.geometry().cluster_ratio();
    let (mut blocks, mut inodes) = (0u64, 0u64);
    for d in t.groups().descs() {
        blocks += u64::from(d.free_blocks_count(wide)) * ratio;
        inodes += u64::from(d.free_inodes_count(wide));
    }
    t.set_free_counts(blocks, inodes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_difference() {
        assert_eq!(
            minus(&[(0, 10)], &[(2, 4), (6, 7)]),
            [(0, 2), (4, 6), (7, 10)]
        );
        assert_eq!(minus(&[(0, 10)], &[(0, 10)]), []);
        assert_eq!(minus(&[(5, 10)], &[(0, 6)]), [(6, 10)]);
    }
}
