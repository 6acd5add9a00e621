//! The metadata tune changes when it adds or removes a journal or quota
//! files, as libext2fs keeps it between `ext2fs_read_bitmaps` and
//! `ext2fs_close`: block and inode bitmaps, group descriptors, free counts
//! and inode records, all changed in memory and written only by
//! [`Meta::flush`] (a refused later step then leaves the device alone).
//!
//! The accounting follows libext2fs' `ext2fs_block_alloc_stats*` and
//! `ext2fs_inode_alloc_stats2`: free counts per group and in the
//! superblock, `BLOCK_UNINIT` / `INODE_UNINIT` cleared where something is
//! taken, `itable_unused` lowered past a new inode. Bitmaps are written
//! as `ext2fs_write_bitmaps` does (padding bits set, checksums under
//! metadata_csum), group descriptor checksums recomputed.

use crate::device::BlockDevice;
use crate::error::{Error, Result};
use crate::mkfs::objects::InodeBuf;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::{
    bitmap_checksum, GroupDesc, GroupDescCsum, BG_BLOCK_UNINIT, BG_INODE_UNINIT,
};
use ext4r_format::superblock::Superblock;
use ext4r_txn::alloc::{BlockAlloc, UsedBlocks};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// `i_links_count` in an inode record.
const I_LINKS: usize = 0x1A;

pub(super) fn get16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
pub(super) fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

pub(super) fn corrupt(what: &str, msg: impl Into<String>) -> Error {
    Error::corrupt(
        "tune",
        ext4r_format::FormatError::invalid("metadata", format!("{what}: {}", msg.into())),
    )
}

/// Bitmaps, descriptors and inodes being changed.
pub(crate) struct Meta {
    pub geo: Geometry,
    pub(crate) wide: bool,
    /// Descriptors carry checksums (uninit_bg or metadata_csum).
    pub(crate) gdt_csum: bool,
    pub(crate) metadata_csum: bool,
    log_flex: u32,
    first_ino: u32,
    pub descs: Vec<GroupDesc>,
    /// The raw primary descriptor table, rewritten at the end.
    table: Vec<u8>,
    /// Blocks in use (clusters with bigalloc).
    pub used: UsedBlocks,
    block_dirty: BTreeSet<u32>,
    inode_maps: BTreeMap<u32, Vec<u8>>,
    inode_dirty: BTreeSet<u32>,
    /// Inode records changed, by number.
    inodes: BTreeMap<u32, Vec<u8>>,
    /// Blocks to write: byte offset to contents.
    writes: BTreeMap<u64, Vec<u8>>,
    /// Byte ranges to zero, before the writes.
    zeroes: Vec<(u64, u64)>,
    /// The superblock's free counts as they change.
    pub free_blocks: u64,
    pub free_inodes: u32,
}

impl Meta {
    /// Reads the descriptors and block bitmaps (`ext2fs_read_bitmaps`):
    /// a group with `BLOCK_UNINIT` holds only its superblock and
    /// descriptor copies and whatever group tables lie in it.
    pub(crate) fn load(dev: &dyn BlockDevice, sb: &Superblock) -> Result<Self> {
        let geo = Geometry::from_superblock(sb).map_err(|e| Error::corrupt("superblock", e))?;
        let (table, descs) = super::read_desc_table(dev, sb)?;
        let wide = sb.desc_size() >= 64 && sb.has_incompat(Incompat::BIT64);
        let metadata_csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
        let gdt_csum = metadata_csum || sb.has_ro_compat(RoCompat::GDT_CSUM);
        let ratio = geo.cluster_ratio();
        let mut used = UsedBlocks::new(geo.first_data_block, geo.blocks_count, ratio);
        let bs = geo.block_size as usize;
        let mut buf = vec![0u8; bs];
        let ibpg = u64::from(geo.inode_blocks_per_group());
        for (g, d) in descs.iter().enumerate() {
            let g = g as u32;
            used.mark(d.block_bitmap(wide), 1);
            used.mark(d.inode_bitmap(wide), 1);
            used.mark(d.inode_table(wide), ibpg);
            let first = geo.group_first_block(g);
            if gdt_csum && d.flags() & BG_BLOCK_UNINIT != 0 {
                let m = geo.group_meta(g);
                if let Some(b) = m.super_block {
                    used.mark(b, 1);
                }
                if let Some((b, n)) = m.old_desc {
                    used.mark(b, n);
                }
                if let Some(b) = m.meta_desc {
                    used.mark(b, 1);
                }
                continue;
            }
            let bb = d.block_bitmap(wide);
            if bb == 0 || bb >= geo.blocks_count {
                return Err(corrupt("block bitmap", format!("group {g} at block {bb}")));
            }
            dev.read_at(&mut buf, bb * bs as u64)?;
            // A bitmap is one block (the superblock checks bound the group).
            let clusters = (geo.group_blocks(g).div_ceil(ratio) as usize).min(bs * 8);
            let mut i = 0;
            while i < clusters {
                if buf[i / 8] & (1 << (i % 8)) == 0 {
                    i += 1;
                    continue;
                }
                let s = i;
                while i < clusters && buf[i / 8] & (1 << (i % 8)) != 0 {
                    i += 1;
                }
                used.mark(first + s as u64 * ratio, (i - s) as u64 * ratio);
            }
        }
        Ok(Meta {
            geo,
            wide,
            gdt_csum,
            metadata_csum,
            log_flex: u32::from(sb.s_log_groups_per_flex),
            first_ino: sb.s_first_ino.get().max(1),
            descs,
            table,
            used,
            block_dirty: BTreeSet::new(),
            inode_maps: BTreeMap::new(),
            inode_dirty: BTreeSet::new(),
            inodes: BTreeMap::new(),
            writes: BTreeMap::new(),
            zeroes: Vec::new(),
            free_blocks: sb.free_blocks_count(),
            free_inodes: sb.s_free_inodes_count.get(),
        })
    }

    fn bs(&self) -> u64 {
        u64::from(self.geo.block_size)
    }

    /// Queues a whole block.
    pub(crate) fn write_block(&mut self, block: u64, data: Vec<u8>) {
        let off = block * self.bs();
        self.writes.insert(off, data);
    }

    /// Queues `count` blocks from `block` to be zeroed.
    pub(crate) fn zero_blocks(&mut self, block: u64, count: u64) {
        let bs = self.bs();
        self.zeroes.push((block * bs, count * bs));
    }

    /// The byte offset of `block`, which a descriptor may name wrongly.
    fn block_offset(&self, block: u64, what: &'static str) -> Result<u64> {
        if block == 0 || block >= self.geo.blocks_count {
            return Err(corrupt(
                what,
                format!("at block {block}, outside the filesystem"),
            ));
        }
        Ok(block * self.bs())
    }

    /// Reads a block, as changed so far.
    pub(crate) fn read_block(&self, dev: &dyn BlockDevice, block: u64) -> Result<Vec<u8>> {
        if block == 0 || block >= self.geo.blocks_count {
            return Err(corrupt("block", format!("{block} outside the filesystem")));
        }
        let off = block * self.bs();
        if let Some(b) = self.writes.get(&off) {
            return Ok(b.clone());
        }
        let mut b = vec![0u8; self.bs() as usize];
        dev.read_at(&mut b, off)?;
        Ok(b)
    }

    /// Byte offset of inode `ino`'s record.
    fn inode_offset(&self, ino: u32) -> Result<u64> {
        let ipg = self.geo.inodes_per_group;
        let g = ((ino - 1) / ipg) as usize;
        let d = self
            .descs
            .get(g)
            .ok_or_else(|| corrupt("inode", format!("{ino} outside the filesystem")))?;
        let idx = u64::from((ino - 1) % ipg);
        let table = d.inode_table(self.wide);
        if table == 0 || table >= self.geo.blocks_count {
            return Err(corrupt(
                "inode table",
                format!("group {g} at block {table}"),
            ));
        }
        Ok(table * self.bs() + idx * u64::from(self.geo.inode_size))
    }

    /// Inode `ino`'s record, as changed so far.
    pub(crate) fn read_inode(&self, dev: &dyn BlockDevice, ino: u32) -> Result<Vec<u8>> {
        if let Some(r) = self.inodes.get(&ino) {
            return Ok(r.clone());
        }
        let mut r = vec![0u8; self.geo.inode_size as usize];
        dev.read_at(&mut r, self.inode_offset(ino)?)?;
        Ok(r)
    }

    /// Replaces inode `ino`'s record (its checksum is set when flushed).
    pub(crate) fn write_inode(&mut self, ino: u32, record: Vec<u8>) {
        self.inodes.insert(ino, record);
    }

    /// `ext2fs_write_inode` of a 128-byte `struct ext2_inode` that is all
    /// zeros: the large part of the record stays as it was.
    pub(crate) fn clear_inode_base(&mut self, dev: &dyn BlockDevice, ino: u32) -> Result<()> {
        let mut r = self.read_inode(dev, ino)?;
        let n = r.len().min(128);
        r[..n].fill(0);
        self.write_inode(ino, r);
        Ok(())
    }

    fn group_piece(&self, b: u64, end: u64) -> (u32, u64) {
        let g = self.geo.group_of_block(b);
        (g, (self.geo.group_last_block(g) + 1).min(end) - b)
    }

    fn set_group_free(&mut self, g: u32, delta: i64) {
        let d = &mut self.descs[g as usize];
        let v = i64::from(d.free_blocks_count(self.wide)) + delta;
        d.set_free_blocks_count(v as u32);
        d.set_flags(d.flags() & !BG_BLOCK_UNINIT);
        self.block_dirty.insert(g);
    }

    /// `ext2fs_block_alloc_stats2(-1)` of block `b`'s cluster: the bitmap
    /// bit cleared, one more free cluster in the group, a cluster's worth
    /// of blocks more in the superblock.
    pub(crate) fn free_cluster(&mut self, b: u64) {
        let ratio = self.geo.cluster_ratio();
        let c = b & !(ratio - 1);
        self.used.unmark(c, ratio);
        let g = self.geo.group_of_block(b);
        self.set_group_free(g, 1);
        self.free_blocks += ratio;
    }

    /// Takes the free blocks of `[start, start+len)`; the used ones stay
    /// as they are (the new inode tables' places, whose file blocks move).
    pub(crate) fn take_range_free(&mut self, start: u64, len: u64) {
        let end = start + len;
        let used: Vec<(u64, u64)> = self.used.runs_in(start, end - 1).collect();
        let mut b = start;
        for (s, e) in used {
            if s > b {
                self.take_free(b, s - b);
            }
            b = e;
        }
        if b < end {
            self.take_free(b, end - b);
        }
    }

    /// [`BlockAlloc::take_range`] of a range known free (an interval map
    /// cannot fail).
    fn take_free(&mut self, start: u64, len: u64) {
        let _in_memory = BlockAlloc::take_range(self, start, len);
    }

    /// Frees every cluster holding one of `blocks`, each once.
    pub(crate) fn free_blocks_of(&mut self, blocks: &[u64]) {
        let ratio = self.geo.cluster_ratio();
        let clusters: BTreeSet<u64> = blocks.iter().map(|b| b & !(ratio - 1)).collect();
        for c in clusters {
            self.free_cluster(c);
        }
    }

    /// The inode bitmap of group `g` (`ipg / 8` bytes), loaded on demand;
    /// an `INODE_UNINIT` group's reads as empty.
    fn inode_map(&mut self, dev: &dyn BlockDevice, g: u32) -> Result<&mut Vec<u8>> {
        let n = ((self.geo.inodes_per_group / 8) as usize).min(self.bs() as usize);
        let bs = self.bs() as usize;
        let d = &self.descs[g as usize];
        let uninit = self.gdt_csum && d.flags() & BG_INODE_UNINIT != 0;
        let ib = d.inode_bitmap(self.wide);
        if !uninit && (ib == 0 || ib >= self.geo.blocks_count) {
            return Err(corrupt("inode bitmap", format!("group {g} at block {ib}")));
        }
        let at = ib * bs as u64;
        match self.inode_maps.entry(g) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(v) => {
                let mut b = vec![0u8; bs];
                if !uninit {
                    dev.read_at(&mut b, at)?;
                }
                b.truncate(n);
                Ok(v.insert(b))
            }
        }
    }

    /// `ext2fs_new_inode(fs, root, ...)`: the first free inode from the
    /// first non-reserved one, group by group (an `INODE_UNINIT` group
    /// being initialised on the way, as `check_inode_uninit` does).
    pub(crate) fn new_inode(&mut self, dev: &dyn BlockDevice) -> Result<u32> {
        let ipg = self.geo.inodes_per_group;
        let count = ipg * self.geo.group_count;
        let mut ino = self.first_ino;
        while ino <= count {
            let g = (ino - 1) / ipg;
            if self.gdt_csum && self.descs[g as usize].flags() & BG_INODE_UNINIT != 0 {
                let d = &mut self.descs[g as usize];
                d.set_itable_unused(0);
                d.set_flags(d.flags() & !(BG_INODE_UNINIT | BG_BLOCK_UNINIT));
                self.inode_dirty.insert(g);
                self.block_dirty.insert(g);
            }
            let map = self.inode_map(dev, g)?;
            let end = (g + 1) * ipg;
            while ino <= end {
                let i = ((ino - 1) % ipg) as usize;
                if map[i / 8] & (1 << (i % 8)) == 0 {
                    return Ok(ino);
                }
                ino += 1;
            }
        }
        Err(Error::InvalidArgument(
            "no free inode for the quota file".into(),
        ))
    }

    /// `ext2fs_inode_alloc_stats2(ino, +1 or -1, not a directory)`.
    pub(crate) fn inode_alloc_stats(
        &mut self,
        dev: &dyn BlockDevice,
        ino: u32,
        inuse: bool,
    ) -> Result<()> {
        let ipg = self.geo.inodes_per_group;
        let g = (ino - 1) / ipg;
        let i = ((ino - 1) % ipg) as usize;
        let map = self.inode_map(dev, g)?;
        if inuse {
            map[i / 8] |= 1 << (i % 8);
        } else {
            map[i / 8] &= !(1 << (i % 8));
        }
        self.inode_dirty.insert(g);
        let gdt_csum = self.gdt_csum;
        let wide = self.wide;
        let d = &mut self.descs[g as usize];
        let free = d.free_inodes_count(wide);
        d.set_free_inodes_count(if inuse {
            free.saturating_sub(1)
        } else {
            free + 1
        });
        d.set_flags(d.flags() & !BG_INODE_UNINIT);
        if gdt_csum {
            let first_unused = ipg - d.itable_unused(wide) + g * ipg + 1;
            if ino >= first_unused {
                d.set_itable_unused(g * ipg + ipg - ino);
            }
        }
        if inuse {
            self.free_inodes = self.free_inodes.saturating_sub(1);
        } else {
            self.free_inodes += 1;
        }
        Ok(())
    }

    /// Whether an inode record is in use (`i_links_count` > 0).
    pub(crate) fn links(record: &[u8]) -> u16 {
        get16(record, I_LINKS)
    }

    /// Writes everything changed: zeroed ranges, blocks, inode records
    /// (checksummed under metadata_csum), bitmaps; sets the superblock's
    /// free counts and returns the descriptor table to write with it.
    pub(crate) fn flush(mut self, dev: &dyn BlockDevice, sb: &mut Superblock) -> Result<Vec<u8>> {
        let bs = self.bs() as usize;
        let seed = sb.csum_seed();
        for &(off, len) in &self.zeroes {
            dev.zeroout(off, len)?;
        }
        for (off, data) in &self.writes {
            dev.write_at(data, *off)?;
        }
        // Inode records, a table block at a time.
        let isz = self.geo.inode_size as usize;
        let mut blocks: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for (&ino, rec) in &self.inodes {
            let off = self.inode_offset(ino)?;
            let blk = off / bs as u64;
            let buf = match blocks.entry(blk) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(v) => {
                    let mut b = vec![0u8; bs];
                    dev.read_at(&mut b, blk * bs as u64)?;
                    v.insert(b)
                }
            };
            let mut ib = InodeBuf { bytes: rec.clone() };
            if self.metadata_csum {
                ib.set_checksum(seed, ino);
            }
            let at = (off % bs as u64) as usize;
            buf[at..at + isz].copy_from_slice(&ib.bytes);
        }
        for (blk, b) in &blocks {
            dev.write_at(b, blk * bs as u64)?;
        }
        let dsize = self.geo.desc_size as usize;
        // Block bitmaps of the groups changed.
        let ratio = self.geo.cluster_ratio();
        let cpg = ((self.geo.blocks_per_group / ratio) as usize).min(bs * 8);
        let last = self.geo.group_count - 1;
        for &g in &self.block_dirty {
            let d = &self.descs[g as usize];
            if self.gdt_csum && d.flags() & BG_BLOCK_UNINIT != 0 {
                continue;
            }
            let mut buf = vec![0xFFu8; bs];
            buf[..cpg / 8].fill(0);
            let first = self.geo.group_first_block(g);
            let lastb = self.geo.group_last_block(g);
            for (s, e) in self.used.runs_in(first, lastb) {
                for c in (s - first) / ratio..(e - first).div_ceil(ratio) {
                    let c = c as usize;
                    buf[c / 8] |= 1 << (c % 8);
                }
            }
            if g == last {
                let nbits = self.geo.group_blocks(g).div_ceil(ratio) as usize;
                for c in nbits..bs * 8 {
                    buf[c / 8] |= 1 << (c % 8);
                }
            }
            if self.metadata_csum {
                let crc = bitmap_checksum(seed, &buf[..cpg / 8]);
                self.descs[g as usize].set_block_bitmap_csum(crc, dsize);
            }
            let at = self.block_offset(
                self.descs[g as usize].block_bitmap(self.wide),
                "block bitmap",
            )?;
            dev.write_at(&buf, at)?;
        }
        for &g in &self.inode_dirty {
            let Some(map) = self.inode_maps.get(&g) else {
                continue;
            };
            let mut buf = vec![0xFFu8; bs];
            buf[..map.len()].copy_from_slice(map);
            if self.metadata_csum {
                let crc = bitmap_checksum(seed, map);
                self.descs[g as usize].set_inode_bitmap_csum(crc, dsize);
            }
            let at = self.block_offset(
                self.descs[g as usize].inode_bitmap(self.wide),
                "inode bitmap",
            )?;
            dev.write_at(&buf, at)?;
        }
        let kind = if self.metadata_csum {
            Some(GroupDescCsum::Crc32c { seed })
        } else if self.gdt_csum {
            Some(GroupDescCsum::Crc16 { uuid: sb.s_uuid })
        } else {
            None
        };
        for (g, d) in self.descs.iter_mut().enumerate() {
            if let Some(k) = &kind {
                d.update_checksum(g as u32, dsize, k)
                    .map_err(|e| Error::corrupt("group descriptor", e))?;
            }
            d.write(&mut self.table[g * dsize..(g + 1) * dsize], dsize)
                .map_err(|e| Error::corrupt("group descriptor", e))?;
        }
        sb.set_free_blocks_count(self.free_blocks);
        sb.s_free_inodes_count.set(self.free_inodes);
        Ok(self.table)
    }
}

impl BlockAlloc for Meta {
    fn geo(&self) -> &Geometry {
        &self.geo
    }
    fn log_groups_per_flex(&self) -> u32 {
        self.log_flex
    }
    type Space = UsedBlocks;
    fn space(&self) -> &UsedBlocks {
        &self.used
    }
    fn group_free(&self, g: u32) -> i64 {
        i64::from(self.descs[g as usize].free_blocks_count(self.wide))
    }
    fn take_range(&mut self, start: u64, len: u64) -> Result<()> {
        self.used.mark(start, len);
        let ratio = self.geo.cluster_ratio();
        let end = start + len;
        let mut b = start;
        while b < end {
            let (g, n) = self.group_piece(b, end);
            self.set_group_free(g, -((n / ratio) as i64));
            b += n;
        }
        self.free_blocks = self.free_blocks.saturating_sub(len);
        Ok(())
    }
    fn alloc_block(&mut self, goal: u64) -> Result<u64> {
        let b = self.used.new_block(goal).ok_or_else(|| {
            Error::InvalidArgument("Could not allocate block in ext2 filesystem".into())
        })?;
        let ratio = self.geo.cluster_ratio();
        self.used.mark(b, 1);
        let g = self.geo.group_of_block(b);
        self.set_group_free(g, -1);
        self.free_blocks = self.free_blocks.saturating_sub(ratio);
        Ok(b)
    }
}
