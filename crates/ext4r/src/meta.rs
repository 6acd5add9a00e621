//! The metadata changed when a journal or quota files are added or
//! removed, or inode tables move (tune; fsck's journal re-creation and
//! quota rewrite through [`crate::journal_create`] and
//! [`crate::quota_write`]): one in-place [`Transaction`] of the write
//! layer over the filesystem as the caller sees it (its superblock,
//! features already changed in memory), committed by [`Meta::flush`]
//! before the superblock and backups are written (a refused later step
//! then leaves the device alone).
//!
//! What is libext2fs-specific stays here: `ext2fs_new_inode`'s search from
//! the first non-reserved inode with `check_inode_uninit`, and the order in
//! which tune2fs takes and gives back blocks, so that the result equals
//! tune2fs's byte for byte.

use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::features::RoCompat;
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4r_format::inode::Inode;
use ext4r_format::superblock::Superblock;
use ext4r_txn::alloc::{self, BlockAlloc, FreeSpace};
use ext4r_txn::bitmap::Bitmap;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::groups::InodeInit;
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Volume, VolumeOptions};
use std::sync::Arc;

pub(crate) fn corrupt(what: &str, msg: impl Into<String>) -> Error {
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
    txn: Transaction<Volume>,
}

impl Meta {
    /// Opens the filesystem on `dev` as `sb` describes it.
    pub(crate) fn load(dev: &Arc<dyn BlockDevice>, sb: &Superblock) -> Result<Self> {
        let vol = Volume::open_with_superblock(Arc::clone(dev), sb.clone(), rewrite_options())?;
        let geo = vol.geometry().clone();
        let metadata_csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
        Ok(Meta {
            wide: vol.groups().wide(),
            gdt_csum: vol.groups().gdt_csum(),
            metadata_csum,
            geo,
            txn: Transaction::owned(vol),
        })
    }

    /// The descriptors as changed so far.
    pub(crate) fn descs(&self) -> &[GroupDesc] {
        self.txn.groups().descs()
    }

    /// Group `g`'s descriptor, to change.
    pub(crate) fn desc_mut(&mut self, g: u32) -> Result<&mut GroupDesc> {
        self.txn.desc_mut(g)
    }

    /// The superblock's free block count as it stands.
    pub(crate) fn free_blocks(&self) -> u64 {
        self.txn.groups().free_blocks()
    }

    /// `ext2fs_get_free_blocks2` on the usage map.
    pub(crate) fn get_free_blocks(&self, start: u64, finish: u64, num: u64) -> Option<u64> {
        alloc::get_free_blocks(&self.txn, start, finish, num)
            .ok()
            .flatten()
    }

    /// The used runs in `[from, to]`.
    pub(crate) fn used_runs(&self, from: u64, to: u64) -> Result<Vec<(u64, u64)>> {
        alloc::used_runs(&self.txn, from, to)
    }

    /// Queues a whole block (file data of a journal or quota file, or a
    /// moved block).
    pub(crate) fn write_block(&mut self, block: u64, data: Vec<u8>) -> Result<()> {
        self.txn.write_data(block, data)
    }

    /// Queues a metadata block of `kind` (its checksum is stamped at
    /// flush).
    pub(crate) fn write_meta_block(
        &mut self,
        block: u64,
        kind: BlockKind,
        data: Vec<u8>,
    ) -> Result<()> {
        self.txn.write_block(block, kind, data)
    }

    /// Queues `count` blocks from `block` to be zeroed.
    pub(crate) fn zero_blocks(&mut self, block: u64, count: u64) -> Result<()> {
        self.txn.zero_blocks(block, count)
    }

    /// Reads a block, as changed so far.
    pub(crate) fn read_block(&self, block: u64) -> Result<Vec<u8>> {
        if block == 0 || block >= self.geo.blocks_count {
            return Err(corrupt("block", format!("{block} outside the filesystem")));
        }
        self.txn.read_block(block)
    }

    /// Inode `ino`'s record, as changed so far.
    pub(crate) fn read_inode(&self, ino: u32) -> Result<Vec<u8>> {
        self.txn.read_inode(ino)
    }

    /// Replaces inode `ino`'s record (its checksum is set when flushed).
    pub(crate) fn write_inode(&mut self, ino: u32, record: Vec<u8>) -> Result<()> {
        self.txn.write_inode(ino, record)
    }

    /// Stores `runs` as inode `ino`'s mapping in `record` (an extent tree
    /// of the depth it needs, or a block map with indirect blocks, as the
    /// record's flags say), taking mapping blocks near `goal`; returns how
    /// many mapping blocks it uses.
    pub(crate) fn store_mapping(
        &mut self,
        ino: u32,
        record: &mut [u8],
        runs: &[ext4r_txn::map::Run],
        goal: u64,
    ) -> Result<u64> {
        let corrupt = |e| Error::corrupt(format!("inode {ino}"), e);
        let mut i = Inode::parse(record).map_err(corrupt)?;
        let used = ext4r_txn::map::store(&mut self.txn, ino, &mut i, runs, goal)?;
        i.write(record).map_err(corrupt)?;
        Ok(used)
    }

    /// `ext2fs_write_inode` of a 128-byte `struct ext2_inode` that is all
    /// zeros: the large part of the record stays as it was.
    pub(crate) fn clear_inode_base(&mut self, ino: u32) -> Result<()> {
        let r = self.txn.inode_mut(ino)?;
        let n = r.len().min(128);
        r[..n].fill(0);
        Ok(())
    }

    /// Every block inode `ino` (record `rec`) holds, mapping blocks too.
    pub(crate) fn inode_blocks(&self, ino: u32, rec: &[u8]) -> Result<Vec<u64>> {
        let inode = Inode::parse(rec).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
        ext4r_txn::map::all_blocks(&self.txn, ino, &inode)
    }

    /// `ext2fs_block_alloc_stats2(-1)` of block `b`'s cluster.
    pub(crate) fn free_cluster(&mut self, b: u64) -> Result<()> {
        let ratio = self.geo.cluster_ratio();
        self.txn.free_blocks(b & !(ratio - 1), ratio).map(|_| ())
    }

    /// Takes the free blocks of `[start, start+len)`; the used ones stay
    /// as they are (the new inode tables' places, whose file blocks move).
    pub(crate) fn take_range_free(&mut self, start: u64, len: u64) -> Result<()> {
        self.txn.take_blocks(start, len).map(|_| ())
    }

    /// Frees every cluster holding one of `blocks`, each once.
    pub(crate) fn free_blocks_of(&mut self, blocks: &[u64]) -> Result<()> {
        let ratio = self.geo.cluster_ratio();
        let mut clusters: Vec<u64> = blocks.iter().map(|b| b & !(ratio - 1)).collect();
        clusters.sort_unstable();
        clusters.dedup();
        for c in clusters {
            self.txn.free_blocks(c, ratio)?;
        }
        Ok(())
    }

    /// `ext2fs_new_inode(fs, root, ...)`: the first free inode from the
    /// first non-reserved one, group by group (the write layer's one inode
    /// search), its group initialised if it is `INODE_UNINIT`, as
    /// `check_inode_uninit` does (an uninitialised group has every inode
    /// free, so the search stops in the first one it meets).
    pub(crate) fn new_inode(&mut self) -> Result<u32> {
        let ipg = self.geo.inodes_per_group;
        let ino = self
            .txn
            .groups()
            .find_free_inode(0)?
            .ok_or_else(|| Error::InvalidArgument("no free inode for the quota file".into()))?;
        let g = (ino - 1) / ipg;
        let d = *self.txn.groups().desc(g)?;
        if self.gdt_csum && d.flags() & BG_INODE_UNINIT != 0 {
            let d = self.txn.desc_mut(g)?;
            d.set_itable_unused(0);
            d.set_flags(d.flags() & !(BG_INODE_UNINIT | BG_BLOCK_UNINIT));
            let bs = self.geo.block_size;
            self.txn.set_inode_map(g, Bitmap::new(ipg, bs))?;
            let bmap = self.txn.groups().block_map(g)?;
            self.txn.set_block_map(g, bmap)?;
        }
        Ok(ino)
    }

    /// `ext2fs_inode_alloc_stats2(ino, +1 or -1, not a directory)`.
    pub(crate) fn inode_alloc_stats(&mut self, ino: u32, inuse: bool) -> Result<()> {
        if inuse {
            self.txn.take_inode(ino, false, InodeInit::Libext2fs)
        } else {
            self.txn.free_inode(ino, false)
        }
    }

    /// Whether an inode record is in use (`i_links_count` > 0).
    pub(crate) fn links(record: &[u8]) -> u16 {
        Inode::parse(record).map_or(0, |i| i.links_count())
    }

    /// Writes what is queued (data, metadata blocks, inode records,
    /// bitmaps) in place, keeping descriptors and the superblock for
    /// [`Meta::flush`]: a long change keeps its memory bounded.
    pub(crate) fn flush_partial(&mut self) -> Result<()> {
        self.txn.flush_partial()
    }

    /// The checksums of the filesystem (for records written outside the
    /// live inode tables, such as a new larger table).
    pub(crate) fn checksums(&self) -> &ext4r_txn::csum::Checksums {
        self.txn.checksums()
    }

    /// Writes everything changed, in place and in the safe order, with `sb`
    /// as the superblock (its free counts set); returns the descriptor
    /// table for the backups.
    pub(crate) fn flush(mut self, sb: &mut Superblock) -> Result<Vec<u8>> {
        self.txn.set_superblock(sb.clone());
        self.txn.commit(Commit::InPlace)?;
        *sb = self.txn.superblock().clone();
        ext4r_txn::flush::descriptor_table(&self.geo, self.txn.groups().descs())
    }
}

impl BlockAlloc for Meta {
    type Space = Transaction<Volume>;
    fn space(&self) -> &Transaction<Volume> {
        &self.txn
    }
    fn geo(&self) -> &Geometry {
        &self.geo
    }
    fn log_groups_per_flex(&self) -> u32 {
        self.geo.log_groups_per_flex.unwrap_or(0)
    }
    fn group_free(&self, g: u32) -> i64 {
        self.txn.group_free(g)
    }
    fn take_range(&mut self, start: u64, len: u64) -> Result<()> {
        self.txn.take_blocks(start, len).map(|_| ())
    }
    fn alloc_block(&mut self, goal: u64) -> Result<u64> {
        self.txn.alloc_block(goal).map_err(|e| match e {
            Error::NoSpace => {
                Error::InvalidArgument("Could not allocate block in ext2 filesystem".into())
            }
            e => e,
        })
    }
}

impl FreeSpace for Meta {
    fn first_data_block(&self) -> u64 {
        self.txn.first_data_block()
    }
    fn blocks_count(&self) -> u64 {
        self.txn.blocks_count()
    }
    fn cluster_mask(&self) -> u64 {
        self.txn.cluster_mask()
    }
    fn first_free(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.txn.first_free(from, to)
    }
    fn first_used(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.txn.first_used(from, to)
    }
    fn used_end(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.txn.used_end(from, to)
    }
}

/// A rewrite's volume: it stamps every checksum anew, so it does not
/// verify the old ones first.
fn rewrite_options() -> VolumeOptions {
    let mut o = VolumeOptions::default();
    o.unverified = true;
    o
}
