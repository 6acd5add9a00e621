//! Transactions: the one way a filesystem is changed.
//!
//! A [`Transaction`] collects everything one operation changes — metadata
//! blocks (with what they are, for their checksums), inode records, file
//! data, descriptors, bitmaps, free counts, the superblock — and nothing
//! reaches the device before [`Transaction::commit`]. Dropping a
//! transaction undoes its allocations.
//!
//! # The commit protocol
//!
//! Journaled (the filesystem has an internal journal, [`JournalUse::Auto`]):
//!
//! 1. File data is written in place (ordered mode: it is never referenced
//!    before it is there). A cut here leaves the old filesystem and some
//!    unreferenced data blocks: nothing is lost or visible.
//! 2. The first time, `needs_recovery` is set in the superblock and
//!    flushed. A cut here leaves an empty journal with the flag set: every
//!    recovery clears it.
//! 3. The metadata blocks, stamped, go to the journal with revoke records
//!    for metadata blocks freed since they were logged, then a flush, the
//!    commit block, a flush ([`JournalWriter::commit`]). A cut before the
//!    commit block is durable leaves a transaction recovery ignores (old
//!    filesystem); after it, one recovery replays (new filesystem).
//! 4. Checkpoint (after each commit, or deferred): the blocks are written
//!    home, flushed, the journal marked empty, `needs_recovery` cleared. A
//!    cut anywhere here leaves the transaction in the journal, so
//!    recovery writes it home again: the new filesystem.
//!
//! In place (no journal, or [`JournalUse::Off`]): data, flush; metadata
//! blocks and inode tables; bitmaps; descriptors; flush; superblock;
//! flush. A cut leaves blocks written before it and the old superblock
//! (free counts, state): what e2fsck's repair is for, as with every
//! unjournaled writer (libext2fs writes in this order too).
//!
//! [`JournalUse::Auto`]: crate::volume::JournalUse::Auto
//! [`JournalUse::Off`]: crate::volume::JournalUse::Off
//! [`JournalWriter::commit`]: crate::journal::JournalWriter::commit

use crate::alloc::{self, BlockAlloc, FreeSpace, Search};
use crate::bitmap::Bitmap;
use crate::csum::{BlockKind, Checksums};
use crate::error::{Error, Result};
use crate::groups::{GroupSnapshot, GroupTable, InodeInit};
use crate::map::BlockSource;
use crate::volume::{Checkpoint, Volume};
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::GroupDesc;
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET};
use std::collections::{BTreeMap, BTreeSet};

/// The root directory's inode.
const ROOT_INO: u32 = 2;

/// How a commit reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Commit {
    /// Through the journal when the volume has one, else in place.
    #[default]
    Auto,
    /// In place, in the safe order, whatever the volume has.
    InPlace,
}

/// What a commit wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Committed {
    /// The journal transaction id, when it went through the journal.
    pub sequence: Option<u32>,
    /// Metadata blocks written (or logged).
    pub blocks: usize,
}

/// A change being assembled; see the [module docs](self).
pub struct Transaction<'v> {
    vol: &'v mut Volume,
    sb: Superblock,
    sb_dirty: bool,
    snapshots: BTreeMap<u32, GroupSnapshot>,
    counts_before: (u64, u64),
    blocks: BTreeMap<u64, (Vec<u8>, BlockKind)>,
    data: BTreeMap<u64, Vec<u8>>,
    inodes: BTreeMap<u32, Vec<u8>>,
    freed: BTreeSet<u64>,
    done: bool,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("blocks", &self.blocks.len())
            .field("inodes", &self.inodes.len())
            .field("groups", &self.snapshots.len())
            .finish_non_exhaustive()
    }
}

impl<'v> Transaction<'v> {
    pub(crate) fn new(vol: &'v mut Volume) -> Self {
        let counts_before = (vol.groups.free_blocks(), vol.groups.free_inodes());
        Transaction {
            sb: vol.sb.clone(),
            vol,
            sb_dirty: false,
            snapshots: BTreeMap::new(),
            counts_before,
            blocks: BTreeMap::new(),
            data: BTreeMap::new(),
            inodes: BTreeMap::new(),
            freed: BTreeSet::new(),
            done: false,
        }
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.vol.geo
    }

    /// The checksums (to verify what is read).
    pub fn checksums(&self) -> &Checksums {
        &self.vol.csum
    }

    /// The group table as this transaction leaves it so far.
    pub fn groups(&self) -> &GroupTable {
        &self.vol.groups
    }

    /// The superblock as this transaction leaves it so far.
    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    /// The superblock, to change (its free counts are set from the group
    /// table at commit).
    pub fn superblock_mut(&mut self) -> &mut Superblock {
        self.sb_dirty = true;
        &mut self.sb
    }

    fn bs(&self) -> usize {
        self.vol.geo.block_size as usize
    }

    /// Block `nr` as this transaction leaves it so far.
    ///
    /// # Errors
    /// [`Error::Corrupt`] outside the filesystem, I/O errors.
    pub fn read_block(&self, nr: u64) -> Result<Vec<u8>> {
        if let Some((b, _)) = self.blocks.get(&nr) {
            return Ok(b.clone());
        }
        if let Some(b) = self.data.get(&nr) {
            return Ok(b.clone());
        }
        self.vol.read_block(nr)
    }

    /// Block `nr` to change in place; `kind` says which checksum it gets
    /// at commit.
    ///
    /// # Errors
    /// As [`Transaction::read_block`].
    pub fn block_mut(&mut self, nr: u64, kind: BlockKind) -> Result<&mut Vec<u8>> {
        if !self.blocks.contains_key(&nr) {
            let b = self.read_block(nr)?;
            self.data.remove(&nr);
            self.blocks.insert(nr, (b, kind));
        }
        let entry = self
            .blocks
            .get_mut(&nr)
            .ok_or_else(|| Error::InvalidArgument(format!("block {nr} vanished")))?;
        entry.1 = kind;
        Ok(&mut entry.0)
    }

    /// Replaces metadata block `nr`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` is not one block;
    /// [`Error::Corrupt`] outside the filesystem.
    pub fn write_block(&mut self, nr: u64, kind: BlockKind, data: Vec<u8>) -> Result<()> {
        self.check_block(nr, data.len())?;
        self.data.remove(&nr);
        self.blocks.insert(nr, (data, kind));
        Ok(())
    }

    /// Writes file data to block `nr`: in place before the metadata that
    /// points at it, never through the journal.
    ///
    /// # Errors
    /// As [`Transaction::write_block`].
    pub fn write_data(&mut self, nr: u64, data: Vec<u8>) -> Result<()> {
        self.check_block(nr, data.len())?;
        self.blocks.remove(&nr);
        self.data.insert(nr, data);
        Ok(())
    }

    fn check_block(&self, nr: u64, len: usize) -> Result<()> {
        if len != self.bs() {
            return Err(Error::InvalidArgument(format!(
                "a write of {len} bytes to block {nr} is not one block"
            )));
        }
        self.vol.check_blocks(nr, 1, "block")
    }

    /// Inode `ino`'s record as this transaction leaves it so far.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode outside the filesystem, I/O errors.
    pub fn read_inode(&self, ino: u32) -> Result<Vec<u8>> {
        if let Some(r) = self.inodes.get(&ino) {
            return Ok(r.clone());
        }
        let (block, off) = self.vol.inode_place(ino)?;
        let b = self.read_block(block)?;
        Ok(b[off..off + self.vol.geo.inode_size as usize].to_vec())
    }

    /// Inode `ino`'s record to change; its checksum is set at commit.
    ///
    /// # Errors
    /// As [`Transaction::read_inode`].
    pub fn inode_mut(&mut self, ino: u32) -> Result<&mut Vec<u8>> {
        if !self.inodes.contains_key(&ino) {
            let r = self.read_inode(ino)?;
            self.inodes.insert(ino, r);
        }
        self.inodes
            .get_mut(&ino)
            .ok_or_else(|| Error::InvalidArgument(format!("inode {ino} vanished")))
    }

    /// Replaces inode `ino`'s record (`s_inode_size` bytes).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a record of the wrong size,
    /// [`Error::Corrupt`] for an inode outside the filesystem.
    pub fn write_inode(&mut self, ino: u32, record: Vec<u8>) -> Result<()> {
        if record.len() != self.vol.geo.inode_size as usize {
            return Err(Error::InvalidArgument(format!(
                "inode record of {} bytes, not {}",
                record.len(),
                self.vol.geo.inode_size
            )));
        }
        self.vol.inode_place(ino)?;
        self.inodes.insert(ino, record);
        Ok(())
    }

    fn touch(&mut self, g: u32) -> Result<()> {
        if !self.snapshots.contains_key(&g) {
            let s = self.vol.groups.snapshot(g)?;
            self.snapshots.insert(g, s);
        }
        Ok(())
    }

    /// Group `g`'s descriptor, to change (a repair); its checksum is set
    /// at commit.
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn desc_mut(&mut self, g: u32) -> Result<&mut GroupDesc> {
        self.touch(g)?;
        self.vol.groups.desc_mut(g)
    }

    /// Replaces group `g`'s block bitmap (a recount).
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn set_block_map(&mut self, g: u32, m: Bitmap) -> Result<()> {
        self.touch(g)?;
        self.vol.groups.set_block_map(g, m)
    }

    /// Replaces group `g`'s inode bitmap (a recount).
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn set_inode_map(&mut self, g: u32, m: Bitmap) -> Result<()> {
        self.touch(g)?;
        self.vol.groups.set_inode_map(g, m)
    }

    /// Sets the free counts the superblock will carry (a recount).
    pub fn set_free_counts(&mut self, blocks: u64, inodes: u64) {
        self.sb_dirty = true;
        self.vol.groups.set_free_counts(blocks, inodes);
    }

    /// Marks `[start, start + len)` used, with every count.
    ///
    /// # Errors
    /// [`Error::Corrupt`] outside the filesystem, bitmap read errors.
    pub fn take_blocks(&mut self, start: u64, len: u64) -> Result<u64> {
        for g in self.vol.groups.groups_of(start, len) {
            self.touch(g)?;
        }
        self.vol.groups.mark_blocks(start, len, true)
    }

    /// Marks `[start, start + len)` free, with every count. Blocks that
    /// were logged as metadata by a transaction not yet checkpointed are
    /// revoked (recovery must not write them over their next owner).
    ///
    /// # Errors
    /// As [`Transaction::take_blocks`].
    pub fn free_blocks(&mut self, start: u64, len: u64) -> Result<u64> {
        for g in self.vol.groups.groups_of(start, len) {
            self.touch(g)?;
        }
        for b in start..start.saturating_add(len) {
            self.blocks.remove(&b);
            self.data.remove(&b);
            if self.vol.pending.contains_key(&b) {
                self.freed.insert(b);
            }
        }
        self.vol.groups.mark_blocks(start, len, false)
    }

    /// Allocates a run for a file: up to `len` blocks at or near `goal`
    /// (the first run long enough, else the longest), taken with every
    /// count. `None` when the filesystem is full.
    ///
    /// # Errors
    /// Bitmap read errors.
    pub fn alloc_run(&mut self, goal: u64, len: u64) -> Result<Option<(u64, u64)>> {
        let Some((s, n)) = alloc::best_run(&self.vol.groups, goal, len, Search::default())? else {
            return Ok(None);
        };
        self.take_blocks(s, n)?;
        Ok(Some((s, n)))
    }

    /// Allocates one block as libext2fs' `ext2fs_new_block2` does (first
    /// free at or after `goal`).
    ///
    /// # Errors
    /// [`Error::NoSpace`], bitmap read errors.
    pub fn alloc_block(&mut self, goal: u64) -> Result<u64> {
        let b = alloc::new_block(&self.vol.groups, goal)?.ok_or(Error::NoSpace)?;
        self.take_blocks(b, 1)?;
        Ok(b)
    }

    /// Allocates an inode for a child of `parent` (near it for a file,
    /// spread for a directory at the top), with every count. The record is
    /// the caller's to write.
    ///
    /// # Errors
    /// [`Error::NoSpace`] when no inode is free, bitmap read errors.
    pub fn alloc_inode(&mut self, parent: u32, dir: bool) -> Result<u32> {
        let top = parent == ROOT_INO;
        let g = self.vol.groups.inode_group(parent, dir, top);
        let ino = self.vol.groups.find_free_inode(g)?.ok_or(Error::NoSpace)?;
        self.take_inode(ino, dir, InodeInit::Kernel)?;
        Ok(ino)
    }

    /// Marks inode `ino` used, with the counts and the uninit bookkeeping
    /// of `how`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode outside the filesystem, bitmap read
    /// errors.
    pub fn take_inode(&mut self, ino: u32, dir: bool, how: InodeInit) -> Result<()> {
        let g = (ino.max(1) - 1) / self.vol.geo.inodes_per_group;
        self.touch(g)?;
        self.vol.groups.mark_inode(ino, true, dir, how)
    }

    /// Marks inode `ino` free, with the counts (the record is the caller's
    /// to clear).
    ///
    /// # Errors
    /// As [`Transaction::take_inode`].
    pub fn free_inode(&mut self, ino: u32, dir: bool) -> Result<()> {
        let g = (ino.max(1) - 1) / self.vol.geo.inodes_per_group;
        self.touch(g)?;
        self.vol
            .groups
            .mark_inode(ino, false, dir, InodeInit::Kernel)
    }

    /// Commits: see the [module docs](self) for the protocol.
    ///
    /// # Errors
    /// I/O errors; [`Error::TransactionTooLarge`] when a journaled commit
    /// does not fit in the journal (nothing is written then); corrupt
    /// metadata that cannot be stamped.
    pub fn commit(mut self, how: Commit) -> Result<Committed> {
        let plan = self.assemble()?;
        let journaled = how == Commit::Auto && self.vol.journal.is_some();
        let out = if journaled {
            self.commit_journaled(&plan)?
        } else {
            self.commit_in_place(&plan)?;
            Committed {
                sequence: None,
                blocks: plan.len(),
            }
        };
        self.vol.sb = self.sb.clone();
        self.vol.csum = Checksums::new(&self.sb);
        self.done = true;
        Ok(out)
    }

    /// Every metadata block this transaction writes, stamped, by block
    /// number, with its place in the in-place order.
    fn assemble(&mut self) -> Result<BTreeMap<u64, (Vec<u8>, Order)>> {
        let bs = self.bs();
        let csum = self.vol.csum.clone();
        let mut out: BTreeMap<u64, (Vec<u8>, Order)> = BTreeMap::new();
        for (&nr, (buf, kind)) in &mut self.blocks {
            csum.stamp_block(*kind, nr, buf)?;
            out.insert(nr, (buf.clone(), Order::Metadata));
        }
        // Inode records into their table blocks.
        let isz = self.vol.geo.inode_size as usize;
        for (&ino, rec) in &mut self.inodes {
            csum.stamp_inode(ino, rec)?;
            let (block, off) = self.vol.inode_place(ino)?;
            if let std::collections::btree_map::Entry::Vacant(e) = out.entry(block) {
                e.insert((self.vol.read_block(block)?, Order::Metadata));
            }
            if let Some((b, _)) = out.get_mut(&block) {
                b[off..off + isz].copy_from_slice(rec);
            }
        }
        // Bitmaps and descriptors of the groups touched.
        let geo = self.vol.geo.clone();
        let wide = self.vol.groups.wide();
        let dsize = geo.desc_size as usize;
        let per = geo.descs_per_block();
        for &g in self.snapshots.keys() {
            let (bmap, imap) = self.vol.groups.loaded_maps(g);
            let mut d = *self.vol.groups.desc(g)?;
            let gdt = self.vol.groups.gdt_csum();
            let braw = bmap
                .filter(|_| !(gdt && d.flags() & ext4r_format::group_desc::BG_BLOCK_UNINIT != 0))
                .map(|m| m.to_bytes(geo.block_size));
            let iraw = imap
                .filter(|_| !(gdt && d.flags() & ext4r_format::group_desc::BG_INODE_UNINIT != 0))
                .map(|m| m.to_bytes(geo.block_size));
            csum.stamp_bitmaps(&mut d, braw.as_deref(), iraw.as_deref());
            csum.stamp_desc(g, &mut d);
            *self.vol.groups.desc_mut(g)? = d;
            for (raw, at) in [(braw, d.block_bitmap(wide)), (iraw, d.inode_bitmap(wide))] {
                if let Some(raw) = raw {
                    self.vol.check_blocks(at, 1, "bitmap")?;
                    out.insert(at, (raw, Order::Bitmap));
                }
            }
            let loc = geo.desc_block_loc(g / per);
            if let std::collections::btree_map::Entry::Vacant(e) = out.entry(loc) {
                e.insert((self.vol.read_block(loc)?, Order::Desc));
            }
            if let Some((b, order)) = out.get_mut(&loc) {
                let off = (g % per) as usize * dsize;
                d.write(&mut b[off..off + dsize], dsize)
                    .map_err(|e| Error::corrupt(format!("group {g} descriptor"), e))?;
                *order = Order::Desc;
            }
        }
        // The superblock, when anything it counts changed.
        let counts = (self.vol.groups.free_blocks(), self.vol.groups.free_inodes());
        if self.sb_dirty || counts != self.counts_before || !self.snapshots.is_empty() {
            self.sb.set_free_blocks_count(counts.0);
            self.sb.s_free_inodes_count.set(counts.1 as u32);
            self.sb.set_wtime(self.vol.now());
            if self.vol.journal.is_some() && self.vol.recover_on_disk {
                let inc = self.sb.s_feature_incompat.get()
                    | ext4r_format::features::Incompat::RECOVER.bits();
                self.sb.s_feature_incompat.set(inc);
            }
            Checksums::stamp_superblock(&mut self.sb);
            let (blk, off) = if bs == 1024 {
                (1u64, 0usize)
            } else {
                (0, SUPERBLOCK_OFFSET as usize)
            };
            if let std::collections::btree_map::Entry::Vacant(e) = out.entry(blk) {
                e.insert((self.vol.read_block(blk)?, Order::Super));
            }
            if let Some((b, order)) = out.get_mut(&blk) {
                let bytes = self.sb.to_bytes();
                b[off..off + bytes.len()].copy_from_slice(&bytes);
                *order = Order::Super;
            }
        }
        Ok(out)
    }

    fn flush_data(&self) -> Result<()> {
        let bs = self.bs() as u64;
        for (&nr, d) in &self.data {
            self.vol.dev.write_at(d, nr * bs)?;
        }
        Ok(())
    }

    fn commit_in_place(&mut self, plan: &BTreeMap<u64, (Vec<u8>, Order)>) -> Result<()> {
        // The journal must not hold older copies of what is written in
        // place: recovery would write them over it.
        if !self.vol.pending.is_empty() {
            self.vol.checkpoint()?;
        }
        let bs = self.bs() as u64;
        let dev = std::sync::Arc::clone(&self.vol.dev);
        self.flush_data()?;
        dev.flush()?;
        for order in [Order::Metadata, Order::Bitmap, Order::Desc, Order::Super] {
            if order == Order::Super {
                dev.flush()?;
            }
            for (&nr, (b, o)) in plan {
                if *o == order {
                    dev.write_at(b, nr * bs)?;
                }
            }
        }
        dev.flush()
    }

    fn commit_journaled(&mut self, plan: &BTreeMap<u64, (Vec<u8>, Order)>) -> Result<Committed> {
        self.flush_data()?;
        if !self.vol.recover_on_disk {
            self.vol.set_recover_on_disk(true)?;
        }
        let blocks: Vec<(u64, &[u8])> = plan.iter().map(|(&n, (b, _))| (n, b.as_slice())).collect();
        let revokes: Vec<u64> = self.freed.iter().copied().collect();
        let now = self.vol.now().max(0) as u64;
        let dev = std::sync::Arc::clone(&self.vol.dev);
        let journal = self
            .vol
            .journal
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("no journal".into()))?;
        let seq = match journal.commit(dev.as_ref(), &blocks, &revokes, (now, 0)) {
            Err(Error::JournalFull) => {
                self.vol.checkpoint()?;
                let journal = self
                    .vol
                    .journal
                    .as_mut()
                    .ok_or_else(|| Error::InvalidArgument("no journal".into()))?;
                journal.commit(dev.as_ref(), &blocks, &revokes, (now, 0))?
            }
            r => r?,
        };
        for b in &self.freed {
            self.vol.pending.remove(b);
        }
        for (n, (b, _)) in plan {
            self.vol.pending.insert(*n, b.clone());
        }
        if self.vol.opts.checkpoint == Checkpoint::EachCommit {
            self.vol.checkpoint()?;
        }
        Ok(Committed {
            sequence: Some(seq),
            blocks: plan.len(),
        })
    }
}

/// Where a block goes in the in-place order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Metadata,
    Bitmap,
    Desc,
    Super,
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for (_, s) in std::mem::take(&mut self.snapshots) {
            self.vol.groups.restore(s);
        }
        let (b, i) = self.counts_before;
        self.vol.groups.set_free_counts(b, i);
    }
}

impl BlockSource for Transaction<'_> {
    fn block_size(&self) -> u32 {
        self.vol.geo.block_size
    }
    fn block_range(&self) -> (u64, u64) {
        (self.vol.geo.first_data_block, self.vol.geo.blocks_count)
    }
    fn read_block(&self, nr: u64, what: &str) -> Result<Vec<u8>> {
        self.check_blocks(nr, 1, what)?;
        Transaction::read_block(self, nr)
    }
}

impl FreeSpace for Transaction<'_> {
    fn first_data_block(&self) -> u64 {
        self.vol.groups.first_data_block()
    }
    fn blocks_count(&self) -> u64 {
        self.vol.groups.blocks_count()
    }
    fn cluster_mask(&self) -> u64 {
        self.vol.groups.cluster_mask()
    }
    fn first_free(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.vol.groups.first_free(from, to)
    }
    fn first_used(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.vol.groups.first_used(from, to)
    }
    fn used_end(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.vol.groups.used_end(from, to)
    }
}

impl BlockAlloc for Transaction<'_> {
    type Space = Self;
    fn space(&self) -> &Self {
        self
    }
    fn geo(&self) -> &Geometry {
        &self.vol.geo
    }
    fn log_groups_per_flex(&self) -> u32 {
        self.vol.groups.log_groups_per_flex()
    }
    fn group_free(&self, g: u32) -> i64 {
        self.vol.groups.group_free(g)
    }
    fn take_range(&mut self, start: u64, len: u64) -> Result<()> {
        self.take_blocks(start, len).map(|_| ())
    }
    fn alloc_block(&mut self, goal: u64) -> Result<u64> {
        Transaction::alloc_block(self, goal)
    }
}
