//! Writing each group's inode table with the larger records: tune2fs's
//! `expand_inode_table` and the inode part of the `REWRITE_ALL` checksum
//! pass it runs next (`rewrite_inodes`), in one go.
//!
//! Every record is copied into its larger slot and the new bytes are
//! zeros (so `i_extra_isize` is 0, as tune2fs leaves it: no in-inode
//! xattrs, no high checksum half, no nanosecond times until the kernel
//! sets them). Of the inodes tune2fs's checksum pass visits (groups not
//! `INODE_UNINIT`, below `bg_itable_unused` with group checksums): one in
//! use gets its checksum for the new size under metadata_csum, one not in
//! use that is not all zeros is zeroed (and checksummed), as
//! `rewrite_one_inode` does. An `INODE_UNINIT` group's new table is zeroed.
//!
//! The tables are written to their new places ([`super::isize_place`]),
//! never over a table in use: until the descriptors and the superblock
//! change, the filesystem reads its old tables, which stay intact.

use crate::error::Result;
use crate::meta::{corrupt, Meta};
use ext4r_format::group_desc::BG_INODE_UNINIT;
use ext4r_format::num;

/// Bytes of new tables queued before they are written out.
const QUEUE_BYTES: u64 = 64 << 20;

/// The two sizes.
pub(super) struct Sizes {
    pub old_isize: usize,
    pub new_isize: usize,
    pub old_ibpg: u64,
    pub new_ibpg: u64,
}

/// Writes every group's table with the new record size at `dest[g]`
/// (queued in `meta`'s transaction as new data, flushed as it goes).
pub(super) fn write_tables(
    meta: &mut Meta,
    dest: &[u64],
    s: &Sizes,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<()> {
    let geo = meta.geo.clone();
    let bs = u64::from(geo.block_size);
    let ipg = geo.inodes_per_group as usize;
    let mut old = vec![0u8; num::index(s.old_ibpg * bs)];
    let mut new = vec![0u8; num::index(s.new_ibpg * bs)];
    let mut ibitmap;
    let mut queued = 0u64;
    let groups = u64::from(geo.group_count);
    for (g, &at) in dest.iter().enumerate().take(geo.group_count as usize) {
        progress(g as u64, groups);
        let d = meta.descs()[g];
        if at < geo.first_data_block || at + s.new_ibpg > geo.blocks_count {
            return Err(corrupt("inode table", format!("group {g}: no place")));
        }
        if meta.gdt_csum && d.flags() & BG_INODE_UNINIT != 0 {
            meta.zero_blocks(at, s.new_ibpg)?;
            continue;
        }
        let table = d.inode_table(meta.wide);
        let ib = d.inode_bitmap(meta.wide);
        for (what, b, n) in [("inode table", table, s.old_ibpg), ("inode bitmap", ib, 1)] {
            if b < geo.first_data_block || b.saturating_add(n) > geo.blocks_count {
                return Err(corrupt(what, format!("group {g} at block {b}")));
            }
        }
        for k in 0..s.old_ibpg {
            let b = meta.read_block(table + k)?;
            old[num::index(k * bs)..num::index((k + 1) * bs)].copy_from_slice(&b);
        }
        ibitmap = meta.read_block(ib)?;
        let scanned = if meta.gdt_csum {
            ipg.saturating_sub(d.itable_unused(meta.wide) as usize)
        } else {
            ipg
        };
        new.fill(0);
        for i in 0..ipg {
            let rec = &old[i * s.old_isize..(i + 1) * s.old_isize];
            let slot = &mut new[i * s.new_isize..(i + 1) * s.new_isize];
            slot[..s.old_isize].copy_from_slice(rec);
            if i >= scanned {
                continue;
            }
            let used = ibitmap[i / 8] & (1 << (i % 8)) != 0;
            if !used {
                if slot.iter().all(|&b| b == 0) {
                    continue;
                }
                slot.fill(0);
            }
            // At most s_inodes_count, a u32.
            let ino = num::sat_u32(g * ipg + i + 1);
            meta.checksums().stamp_inode(ino, slot)?;
        }
        for (k, chunk) in new.chunks(num::index(bs)).enumerate() {
            meta.write_block(at + k as u64, chunk.to_vec())?;
        }
        queued += s.new_ibpg * bs;
        if queued >= QUEUE_BYTES {
            meta.flush_partial()?;
            queued = 0;
        }
    }
    meta.flush_partial()
}
