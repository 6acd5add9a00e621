//! Bitmaps, group descriptors and superblock copies, streamed.
//!
//! The descriptor table is never held whole: it is built a chunk of blocks
//! at a time, group by group (writing each group's bitmaps on the way), and
//! each chunk is written once to every place that holds a copy — the
//! primary table and the backups in the sparse groups. On a 15 TiB
//! filesystem the table is 7.5 MiB and has some two dozen copies; building
//! it per copy, or keeping it all, cost more time and memory than mke2fs
//! spends on the whole run.

use super::layout::Layout;
use crate::error::Result;
use ext4r_format::features::Incompat;
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4r_format::num;
use ext4r_txn::bulk::RunWriter;
use ext4r_txn::csum::Checksums;

/// Bytes of descriptor table built before it is written out: 64 KiB writes
/// cost no more time than larger ones here, and less memory.
const CHUNK_BYTES: usize = 64 << 10;

/// Writes every group's bitmaps (those not left uninitialised) and every
/// copy of the descriptor table. Returns the free clusters of the whole
/// filesystem, which the superblocks need.
pub(crate) fn write_bitmaps_and_gdt(
    w: &mut RunWriter<'_>,
    l: &Layout,
    cs: &Checksums,
) -> Result<u64> {
    let bs = l.geo.block_size as usize;
    let ds = l.geo.desc_size as usize;
    let per = bs / ds;
    let desc_blocks = l.geo.desc_blocks() as usize;
    let ngroups = l.geo.group_count as usize;
    // Below first_meta the table sits after each superblock copy; from it
    // on (meta_bg) each block lives in three groups of its own meta group.
    let first_meta = if l.sb.has_incompat(Incompat::META_BG) {
        (l.sb.s_first_meta_bg.get() as usize).min(desc_blocks)
    } else {
        desc_blocks
    };
    let old_copies: Vec<u64> = std::iter::once(0)
        .chain(l.geo.backup_groups())
        .filter_map(|g| l.geo.group_meta(g).old_desc.map(|(start, _)| start))
        .collect();

    let mut groups = GroupWriter::new(l, cs);
    let chunk_blocks = (CHUNK_BYTES / bs).max(1);
    let mut chunk = vec![0u8; chunk_blocks.min(desc_blocks) * bs];
    let mut first = 0;
    while first < desc_blocks {
        // Old-style blocks and meta_bg blocks are never mixed in a chunk,
        // so that each chunk goes out as one write per copy.
        let end = if first < first_meta {
            first_meta.min(first + chunk_blocks)
        } else {
            desc_blocks.min(first + chunk_blocks)
        };
        let buf = &mut chunk[..(end - first) * bs];
        buf.fill(0);
        for g in first * per..(end * per).min(ngroups) {
            let d = groups.group(w, num::sat_u32(g))?; // g < ngroups, a u32
            let at = (g - first * per) * ds;
            // The size was checked when the geometry was built.
            let _ = d.write(&mut buf[at..at + ds], ds);
        }
        if first < first_meta {
            for &start in &old_copies {
                w.write_slice((start + first as u64) * bs as u64, buf)?;
            }
        } else {
            for i in first..end {
                let block = &buf[(i - first) * bs..(i - first + 1) * bs];
                for g in [i * per, i * per + 1, i * per + per - 1] {
                    if g >= ngroups {
                        continue;
                    }
                    if let Some(b) = l.geo.group_meta(num::sat_u32(g)).meta_desc {
                        w.write(b * bs as u64, block.to_vec())?;
                    }
                }
            }
        }
        first = end;
    }
    Ok(groups.total_free)
}

/// The superblock, once per group that holds a copy.
pub(crate) fn write_superblocks(w: &mut RunWriter<'_>, l: &Layout) -> Result<()> {
    let bs = l.geo.block_size as usize;
    for g in std::iter::once(0).chain(l.geo.backup_groups()) {
        let Some(sblk) = l.geo.group_meta(g).super_block else {
            continue;
        };
        // As ext2fs_flush writes each copy (only the primary says the
        // filesystem was cleanly made).
        let bytes = ext4r_txn::flush::superblock_copy(&l.sb, g);
        if g == 0 {
            w.write(1024, bytes.to_vec())?;
        } else {
            let mut buf = vec![0u8; bs.max(1024)];
            buf[..1024].copy_from_slice(&bytes[..]);
            buf.truncate(bs);
            w.write(sblk * bs as u64, buf)?;
        }
    }
    Ok(())
}

/// Per-group descriptors, with the bitmaps they describe written on the
/// way and their free counts summed.
struct GroupWriter<'l> {
    l: &'l Layout,
    cs: &'l Checksums,
    /// Whether uninit flags let bitmaps go unwritten.
    csum: bool,
    total_free: u64,
}

impl<'l> GroupWriter<'l> {
    fn new(l: &'l Layout, cs: &'l Checksums) -> Self {
        GroupWriter {
            l,
            cs,
            csum: l.csum(),
            total_free: 0,
        }
    }

    fn group(&mut self, w: &mut RunWriter<'_>, g: u32) -> Result<GroupDesc> {
        let l = self.l;
        let geo = &l.geo;
        let bs = geo.block_size as usize;
        let gi = l.tables[g as usize];
        let flags = l.flags[g as usize];
        let counts = l.inode_counts(g);
        let first = geo.group_first_block(g);
        let last = geo.group_last_block(g);
        let cluster_bits = geo.cluster_bits;
        let cpg = geo.blocks_per_group >> cluster_bits;
        let mut d = GroupDesc::zeroed();
        d.set_locations(gi.block_bitmap, gi.inode_bitmap, gi.inode_table);

        // Block bitmap, one bit per cluster; built only when written.
        let write_bb = !(self.csum && flags & BG_BLOCK_UNINIT != 0);
        let mut bitmap = if write_bb {
            let mut b = vec![0xFFu8; bs];
            b[..(cpg / 8) as usize].fill(0);
            b
        } else {
            Vec::new()
        };
        let mut used = 0u64;
        for (s, e) in l.used.runs_in(first, last) {
            let cs = (s - first) >> cluster_bits;
            let ce = (e - first).div_ceil(1 << cluster_bits);
            if write_bb {
                set_bits(&mut bitmap, cs, ce);
            }
            used += ce - cs;
        }
        let group_clusters = (last - first + 1).div_ceil(1 << cluster_bits);
        let free = group_clusters - used;
        self.total_free += free;
        d.set_free_blocks_count(num::sat_u32(free)); // at most clusters_per_group
        if write_bb {
            if g + 1 == geo.group_count {
                // Padding past the short last group.
                set_bits(&mut bitmap, group_clusters, bs as u64 * 8);
            }
            self.cs.stamp_bitmaps(&mut d, Some(&bitmap), None);
            w.write(gi.block_bitmap * bs as u64, bitmap)?;
        }

        if !(self.csum && flags & BG_INODE_UNINIT != 0) {
            let ipg = geo.inodes_per_group;
            let n = (ipg as usize).div_ceil(8);
            let mut ib = vec![0xFFu8; bs];
            ib[..n].fill(0);
            let base = g * ipg;
            for &ino in &l.inodes_used {
                if ino > base && ino <= base + ipg {
                    let i = (ino - base - 1) as usize;
                    ib[i / 8] |= 1 << (i % 8);
                }
            }
            self.cs.stamp_bitmaps(&mut d, None, Some(&ib));
            w.write(gi.inode_bitmap * bs as u64, ib)?;
        }
        d.set_free_inodes_count(counts.free_inodes);
        d.set_used_dirs_count(counts.used_dirs);
        d.set_flags(flags);
        d.set_itable_unused(counts.itable_unused);
        self.cs.stamp_desc(g, &mut d);
        Ok(d)
    }
}

/// Sets bits `[from, to)` of a little-endian bitmap, whole bytes at a time
/// (a flex group's first bitmap marks thousands of table blocks).
fn set_bits(bitmap: &mut [u8], mut from: u64, to: u64) {
    while from < to && from % 8 != 0 {
        bitmap[(from / 8) as usize] |= 1 << (from % 8);
        from += 1;
    }
    let whole = (to - from.min(to)) / 8;
    let at = (from / 8) as usize;
    bitmap[at..at + whole as usize].fill(0xFF);
    from += whole * 8;
    while from < to {
        bitmap[(from / 8) as usize] |= 1 << (from % 8);
        from += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_bits_matches_bit_by_bit() {
        for from in 0..40u64 {
            for to in from..48u64 {
                let mut fast = [0u8; 6];
                set_bits(&mut fast, from, to);
                let mut slow = [0u8; 6];
                for c in from..to {
                    slow[(c / 8) as usize] |= 1 << (c % 8);
                }
                assert_eq!(fast, slow, "{from}..{to}");
            }
        }
    }
}
