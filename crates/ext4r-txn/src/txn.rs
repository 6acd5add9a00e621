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
//! blocks (trees, directories, xattrs), flush; inode tables; bitmaps;
//! descriptors; flush; superblock; flush. A cut leaves blocks written before it and the old superblock
//! (free counts, state): what e2fsck's repair is for, as with every
//! unjournaled writer (libext2fs writes in this order too).
//!
//! [`JournalUse::Auto`]: crate::volume::JournalUse::Auto
//! [`JournalUse::Off`]: crate::volume::JournalUse::Off
//! [`JournalWriter::commit`]: crate::journal::JournalWriter::commit

use crate::alloc::{self, BlockAlloc, FreeSpace, Limited, Search};
use crate::bitmap::Bitmap;
use crate::csum::{BlockKind, Checksums};
use crate::error::{Error, Result};
use crate::groups::{GroupSnapshot, GroupTable, InodeInit};
use crate::map::BlockSource;
use crate::ranges::RangeSet;
use crate::volume::{Checkpoint, Volume};
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::GroupDesc;
use ext4r_format::num;
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET};
use std::borrow::BorrowMut;
use std::collections::{BTreeMap, BTreeSet, HashSet};

mod reshape;

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
pub struct Transaction<V: BorrowMut<Volume>> {
    /// Always `Some` but during [`Transaction::into_volume`].
    vol: Option<V>,
    sb: Superblock,
    sb_dirty: bool,
    snapshots: BTreeMap<u32, GroupSnapshot>,
    counts_before: (u64, u64),
    blocks: BTreeMap<u64, (Vec<u8>, BlockKind)>,
    data: BTreeMap<u64, Vec<u8>>,
    inodes: BTreeMap<u32, Vec<u8>>,
    /// The inode-table blocks that hold `inodes` (as `inode_place` gives
    /// them): what the records take in the journal, where sixteen
    /// records of 256 bytes share a 4 KiB block. Added to as records come
    /// in; a rolled-back record may leave its block counted (an estimate
    /// on the high side) until the commit clears it.
    inode_blocks: HashSet<u64>,
    freed: BTreeSet<u64>,
    /// Blocks this transaction took: freed again before the commit, they
    /// may be taken again at once (the committed filesystem never had
    /// them).
    taken: RangeSet,
    /// Blocks this transaction freed that the committed filesystem still
    /// has in use: no allocation gets them before the commit. A file's
    /// data goes to its blocks ahead of the commit block (ordered mode),
    /// so a block handed on at once would carry the new owner's data
    /// while a power cut before the commit leaves it to the old owner,
    /// as the kernel's mballoc keeps freed blocks until their
    /// transaction commits.
    held: RangeSet,
    zeroes: Vec<(u64, u64)>,
    /// Groups whose bitmaps a partial flush wrote: their descriptors are
    /// written by the final commit.
    flushed_groups: BTreeSet<u32>,
    /// What [`Transaction::rollback_to_savepoint`] puts back, while a
    /// savepoint is set.
    undo: Option<Box<Undo>>,
    /// Blocks that cannot carry their checksum are written as they are
    /// (see [`Transaction::tolerate_unstampable`]).
    lenient: bool,
    /// The geometry before [`Transaction::reshape`], while the resize is
    /// not committed.
    reshaped: Option<Box<Reshaped>>,
}

/// What an uncommitted resize replaced, for [`Transaction::abandon`].
struct Reshaped {
    geo: Geometry,
    groups: GroupTable,
    csum: Checksums,
    snapshots: BTreeMap<u32, GroupSnapshot>,
    counts_before: (u64, u64),
    /// The old end of the filesystem: nothing on disk refers to blocks at
    /// or past it, so whatever goes there is written ahead as data.
    outside: u64,
}

/// The state of a transaction at a savepoint, kept as the prior values of
/// what changed since (so that setting one costs nothing).
struct Undo {
    blocks: BTreeMap<u64, Option<(Vec<u8>, BlockKind)>>,
    data: BTreeMap<u64, Option<Vec<u8>>>,
    inodes: BTreeMap<u32, Option<Vec<u8>>>,
    freed: BTreeSet<u64>,
    zeroes: usize,
    sb: Superblock,
    sb_dirty: bool,
    groups: BTreeMap<u32, GroupSnapshot>,
    /// Groups first touched by the transaction after the savepoint.
    new_snapshots: BTreeSet<u32>,
    counts: (u64, u64),
}

impl<V: BorrowMut<Volume>> std::fmt::Debug for Transaction<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("blocks", &self.blocks.len())
            .field("inodes", &self.inodes.len())
            .field("groups", &self.snapshots.len())
            .finish_non_exhaustive()
    }
}

impl Transaction<Volume> {
    /// A transaction that owns its volume (for a tool that makes one change
    /// and closes); [`Transaction::into_volume`] gives it back.
    pub fn owned(vol: Volume) -> Self {
        Transaction::new(vol)
    }
}

impl<V: BorrowMut<Volume>> Transaction<V> {
    fn v(&self) -> &Volume {
        match &self.vol {
            Some(v) => v.borrow(),
            None => unreachable!("the volume is taken only by into_volume, which consumes"),
        }
    }

    fn vm(&mut self) -> &mut Volume {
        match &mut self.vol {
            Some(v) => v.borrow_mut(),
            None => unreachable!("the volume is taken only by into_volume, which consumes"),
        }
    }

    /// The volume, as committed plus this transaction's group changes.
    pub fn volume(&self) -> &Volume {
        self.v()
    }

    /// The volume, to checkpoint or close; a change made through it
    /// bypasses this transaction.
    pub fn volume_mut(&mut self) -> &mut Volume {
        self.vm()
    }

    /// Whether anything is gathered and not committed.
    pub fn is_dirty(&self) -> bool {
        self.sb_dirty
            || !self.blocks.is_empty()
            || !self.data.is_empty()
            || !self.inodes.is_empty()
            || !self.zeroes.is_empty()
            || !self.snapshots.is_empty()
            || !self.freed.is_empty()
    }

    /// About how many journal blocks a commit would take now, and the bytes
    /// of file data gathered.
    pub fn pending_sizes(&self) -> (u64, u64) {
        // Each group touched: two bitmaps and (at most) a descriptor
        // block; the superblock; the revoke records of freed blocks.
        let bs = u64::from(self.v().geo.block_size);
        let revokes = (self.freed.len() as u64 * 8).div_ceil(bs);
        let meta = (self.blocks.len() + self.inode_blocks.len() + 3 * self.snapshots.len() + 1)
            as u64
            + revokes;
        (meta, self.data.len() as u64 * bs)
    }

    /// Drops everything gathered: the group table and counts back as they
    /// were, nothing written.
    pub fn abandon(&mut self) {
        self.undo = None;
        if let Some(r) = self.reshaped.take() {
            let r = *r;
            let v = self.vm();
            v.geo = r.geo;
            v.groups = r.groups;
            v.csum = r.csum;
            self.snapshots = r.snapshots;
            self.counts_before = r.counts_before;
        }
        for (_, s) in std::mem::take(&mut self.snapshots) {
            self.vm().groups.restore(s);
        }
        let (b, i) = self.counts_before;
        self.vm().groups.set_free_counts(b, i);
        self.blocks.clear();
        self.data.clear();
        self.inodes.clear();
        self.inode_blocks.clear();
        self.zeroes.clear();
        self.freed.clear();
        self.taken.clear();
        self.held.clear();
        self.sb = self.v().sb.clone();
        self.sb_dirty = false;
    }

    /// Gives the volume back; what is gathered and not committed is
    /// abandoned.
    pub fn into_volume(mut self) -> V {
        self.abandon();
        match self.vol.take() {
            Some(v) => v,
            None => unreachable!("the volume is present until here"),
        }
    }

    pub(crate) fn new(vol: V) -> Self {
        let v: &Volume = vol.borrow();
        let counts_before = (v.groups.free_blocks(), v.groups.free_inodes());
        Transaction {
            sb: v.sb.clone(),
            vol: Some(vol),
            sb_dirty: false,
            snapshots: BTreeMap::new(),
            counts_before,
            blocks: BTreeMap::new(),
            data: BTreeMap::new(),
            inodes: BTreeMap::new(),
            inode_blocks: HashSet::new(),
            freed: BTreeSet::new(),
            taken: RangeSet::default(),
            held: RangeSet::default(),
            zeroes: Vec::new(),
            flushed_groups: BTreeSet::new(),
            undo: None,
            lenient: false,
            reshaped: None,
        }
    }

    /// From now on a block that cannot carry its checksum (a damaged
    /// extent header a checker left for a later round, an xattr block too
    /// short for its header) is written as it is instead of failing the
    /// commit: a checker's repair that fixes one field of a block must
    /// still land when another field is broken. A writer of new metadata
    /// keeps the refusal.
    pub fn tolerate_unstampable(&mut self) {
        self.lenient = true;
    }

    /// Sets a savepoint: [`Transaction::rollback_to_savepoint`] then undoes
    /// every change made after it, the changes before it kept (an
    /// operation that fails midway leaves the ones before it in the
    /// running transaction intact). Replaces an earlier savepoint.
    pub fn savepoint(&mut self) {
        let v = self.v();
        let counts = (v.groups.free_blocks(), v.groups.free_inodes());
        self.undo = Some(Box::new(Undo {
            blocks: BTreeMap::new(),
            data: BTreeMap::new(),
            inodes: BTreeMap::new(),
            freed: BTreeSet::new(),
            zeroes: self.zeroes.len(),
            sb: self.sb.clone(),
            sb_dirty: self.sb_dirty,
            groups: BTreeMap::new(),
            new_snapshots: BTreeSet::new(),
            counts,
        }));
    }

    /// Forgets the savepoint, keeping every change.
    pub fn release_savepoint(&mut self) {
        self.undo = None;
    }

    /// Undoes what changed since the savepoint and forgets it; without one,
    /// nothing happens.
    pub fn rollback_to_savepoint(&mut self) {
        let Some(u) = self.undo.take() else {
            return;
        };
        let u = *u;
        for (nr, old) in u.blocks {
            match old {
                Some(b) => self.blocks.insert(nr, b),
                None => self.blocks.remove(&nr),
            };
        }
        for (nr, old) in u.data {
            match old {
                Some(b) => self.data.insert(nr, b),
                None => self.data.remove(&nr),
            };
        }
        for (ino, old) in u.inodes {
            match old {
                Some(r) => self.inodes.insert(ino, r),
                None => self.inodes.remove(&ino),
            };
        }
        for b in u.freed {
            self.freed.remove(&b);
        }
        self.zeroes.truncate(u.zeroes);
        self.sb = u.sb;
        self.sb_dirty = u.sb_dirty;
        for g in u.new_snapshots {
            self.snapshots.remove(&g);
        }
        for (_, snap) in u.groups {
            self.vm().groups.restore(snap);
        }
        self.vm().groups.set_free_counts(u.counts.0, u.counts.1);
    }

    /// Notes block `nr`'s entries before they change (under a savepoint).
    fn note_block(&mut self, nr: u64) {
        if let Some(u) = self.undo.as_deref_mut() {
            u.blocks
                .entry(nr)
                .or_insert_with(|| self.blocks.get(&nr).cloned());
            u.data
                .entry(nr)
                .or_insert_with(|| self.data.get(&nr).cloned());
        }
    }

    /// Notes inode `ino`'s record before it changes (under a savepoint).
    fn note_inode(&mut self, ino: u32) {
        if let Some(u) = self.undo.as_deref_mut() {
            u.inodes
                .entry(ino)
                .or_insert_with(|| self.inodes.get(&ino).cloned());
        }
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.v().geo
    }

    /// The checksums (to verify what is read).
    pub fn checksums(&self) -> &Checksums {
        &self.v().csum
    }

    /// The group table as this transaction leaves it so far.
    pub fn groups(&self) -> &GroupTable {
        &self.v().groups
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
        self.v().geo.block_size as usize
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
        self.v().read_block(nr)
    }

    /// Blocks `start..start + buf.len() / block size` into `buf`, as this
    /// transaction leaves them: one device read for the run, then the
    /// blocks changed since laid over it.
    ///
    /// # Errors
    /// [`Error::Corrupt`] outside the filesystem, I/O errors.
    pub fn read_blocks(&self, start: u64, buf: &mut [u8]) -> Result<()> {
        let bs = self.bs();
        let n = (buf.len() / bs) as u64;
        if n == 0 {
            return Ok(());
        }
        self.v().check_blocks(start, n, "blocks")?;
        self.v()
            .dev
            .read_at(&mut buf[..num::index(n) * bs], start * bs as u64)?;
        let over = |b: u64| -> Option<&Vec<u8>> {
            self.blocks
                .get(&b)
                .map(|(d, _)| d)
                .or_else(|| self.data.get(&b))
                .or_else(|| self.v().pending.get(&b))
        };
        for k in 0..n {
            if let Some(d) = over(start + k) {
                buf[num::index(k) * bs..(num::index(k) + 1) * bs].copy_from_slice(d);
            }
        }
        Ok(())
    }

    /// Block `nr` to change in place; `kind` says which checksum it gets
    /// at commit.
    ///
    /// # Errors
    /// As [`Transaction::read_block`].
    pub fn block_mut(&mut self, nr: u64, kind: BlockKind) -> Result<&mut Vec<u8>> {
        if !self.blocks.contains_key(&nr) {
            let b = self.read_block(nr)?;
            if !self.data.contains_key(&nr) {
                self.verified_block(nr, kind, &b)?;
            }
            self.note_block(nr);
            self.data.remove(&nr);
            self.blocks.insert(nr, (b, kind));
        } else {
            self.note_block(nr);
        }
        let entry = self
            .blocks
            .get_mut(&nr)
            .ok_or_else(|| Error::InvalidArgument(format!("block {nr} vanished")))?;
        entry.1 = kind;
        Ok(&mut entry.0)
    }

    /// The checksum kind block `nr` is staged with in this transaction,
    /// if it is staged as metadata: a caller that edits one block in
    /// several steps keeps the kind it first gave.
    pub fn staged_kind(&self, nr: u64) -> Option<BlockKind> {
        self.blocks.get(&nr).map(|(_, k)| *k)
    }

    /// Whether inode `ino`'s record is staged in this transaction.
    pub fn has_inode(&self, ino: u32) -> bool {
        self.inodes.contains_key(&ino)
    }

    /// Replaces metadata block `nr`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` is not one block;
    /// [`Error::Corrupt`] outside the filesystem.
    pub fn write_block(&mut self, nr: u64, kind: BlockKind, data: Vec<u8>) -> Result<()> {
        self.check_block(nr, data.len())?;
        self.note_block(nr);
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
        self.note_block(nr);
        self.blocks.remove(&nr);
        self.data.insert(nr, data);
        Ok(())
    }

    /// Writes the file data gathered so far to its blocks now, ahead of
    /// the commit, and drops it from memory: how a copy of a large file
    /// (a defragmenter's) keeps its memory bounded. Ordered mode allows it
    /// for blocks nothing committed points at — blocks this transaction
    /// allocated: a cut leaves them written and still free on disk. (The
    /// commit's flush before its commit block, or before the metadata in
    /// place, makes them durable before anything refers to them.) A
    /// rollback to a savepoint cannot unwrite what this wrote: blocks
    /// allocated after the savepoint are freed again by it, so only data
    /// written early to blocks allocated before it stays on disk.
    ///
    /// # Errors
    /// I/O errors (the data not yet written stays gathered).
    pub fn write_data_early(&mut self) -> Result<()> {
        let bs = self.bs() as u64;
        let dev = std::sync::Arc::clone(&self.v().dev);
        let data: BTreeMap<u64, (Vec<u8>, Order)> = std::mem::take(&mut self.data)
            .into_iter()
            .map(|(n, b)| (n, (b, Order::Data)))
            .collect();
        if let Err(e) = write_runs(dev.as_ref(), bs, data.iter()) {
            self.data = data.into_iter().map(|(n, (b, _))| (n, b)).collect();
            return Err(e);
        }
        Ok(())
    }

    fn check_block(&self, nr: u64, len: usize) -> Result<()> {
        if len != self.bs() {
            return Err(Error::InvalidArgument(format!(
                "a write of {len} bytes to block {nr} is not one block"
            )));
        }
        self.v().check_blocks(nr, 1, "block")
    }

    /// Inode `ino`'s record as this transaction leaves it so far.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode outside the filesystem, I/O errors.
    pub fn read_inode(&self, ino: u32) -> Result<Vec<u8>> {
        if let Some(r) = self.inodes.get(&ino) {
            return Ok(r.clone());
        }
        let (block, off) = self.v().inode_place(ino)?;
        if !self.blocks.contains_key(&block) && !self.data.contains_key(&block) {
            self.v().inode_table_ahead(ino, block);
        }
        let b = self.read_block(block)?;
        Ok(b[off..off + self.v().geo.inode_size as usize].to_vec())
    }

    /// Inode `ino`'s record as this transaction leaves it so far, its
    /// checksum verified when it comes from the disk and the volume
    /// verifies ([`Volume::verifies`]).
    ///
    /// # Errors
    /// As [`Transaction::read_inode`]; [`Error::Corrupt`] naming the inode
    /// when its checksum does not match.
    pub fn read_inode_checked(&self, ino: u32) -> Result<Vec<u8>> {
        if let Some(r) = self.inodes.get(&ino) {
            return Ok(r.clone());
        }
        let r = self.read_inode(ino)?;
        if self.v().verifies() && !self.v().csum.inode_ok(ino, &r) {
            return Err(Error::corrupt(
                crate::error::Location::inode(ino),
                ext4r_format::FormatError::invalid("inode", "checksum does not match"),
            ));
        }
        Ok(r)
    }

    /// Block `nr` as this transaction leaves it so far, its checksum (of
    /// kind `kind`) verified when it comes from the disk and the volume
    /// verifies.
    ///
    /// # Errors
    /// As [`Transaction::read_block`]; [`Error::Corrupt`] naming the block
    /// when its checksum does not match.
    pub fn read_block_checked(&self, nr: u64, kind: BlockKind) -> Result<Vec<u8>> {
        if let Some((b, _)) = self.blocks.get(&nr) {
            return Ok(b.clone());
        }
        let b = self.read_block(nr)?;
        if !self.data.contains_key(&nr) {
            self.verified_block(nr, kind, &b)?;
        }
        Ok(b)
    }

    fn verified_block(&self, nr: u64, kind: BlockKind, b: &[u8]) -> Result<()> {
        if self.v().verifies() && !self.v().csum.block_ok(kind, nr, b) {
            return Err(Error::corrupt(
                crate::error::Location::block(nr).of(kind.what()),
                ext4r_format::FormatError::invalid(kind.what(), "checksum does not match"),
            ));
        }
        Ok(())
    }

    /// Inode `ino`'s record to change; its checksum is set at commit.
    ///
    /// # Errors
    /// As [`Transaction::read_inode`].
    pub fn inode_mut(&mut self, ino: u32) -> Result<&mut Vec<u8>> {
        if !self.inodes.contains_key(&ino) {
            let r = self.read_inode_checked(ino)?;
            let (block, _) = self.v().inode_place(ino)?;
            self.note_inode(ino);
            self.inode_blocks.insert(block);
            self.inodes.insert(ino, r);
        } else {
            self.note_inode(ino);
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
        if record.len() != self.v().geo.inode_size as usize {
            return Err(Error::InvalidArgument(format!(
                "inode record of {} bytes, not {}",
                record.len(),
                self.v().geo.inode_size
            )));
        }
        let (block, _) = self.v().inode_place(ino)?;
        self.note_inode(ino);
        self.inode_blocks.insert(block);
        self.inodes.insert(ino, record);
        Ok(())
    }

    fn touch(&mut self, g: u32) -> Result<()> {
        if self
            .undo
            .as_ref()
            .is_some_and(|u| !u.groups.contains_key(&g))
        {
            let s = self.v().groups.snapshot(g)?;
            if let Some(u) = self.undo.as_deref_mut() {
                u.groups.insert(g, s);
                if !self.snapshots.contains_key(&g) {
                    u.new_snapshots.insert(g);
                }
            }
        }
        if !self.snapshots.contains_key(&g) {
            let s = self.v().groups.snapshot(g)?;
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
        self.vm().groups.desc_mut(g)
    }

    /// Replaces group `g`'s block bitmap (a recount).
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn set_block_map(&mut self, g: u32, m: Bitmap) -> Result<()> {
        self.touch(g)?;
        self.vm().groups.set_block_map(g, m)
    }

    /// Replaces group `g`'s inode bitmap (a recount).
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn set_inode_map(&mut self, g: u32, m: Bitmap) -> Result<()> {
        self.touch(g)?;
        self.vm().groups.set_inode_map(g, m)
    }

    /// Applies `f` to group `g`'s block bitmap (`block`) or inode bitmap
    /// as this transaction leaves it: a checker's repair of single bits,
    /// which keeps the counts itself (nothing but the bitmap changes).
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group or for a bitmap the
    /// descriptor places outside the filesystem; I/O errors.
    pub fn edit_map<R>(
        &mut self,
        g: u32,
        block: bool,
        f: impl FnOnce(&mut Bitmap) -> R,
    ) -> Result<R> {
        self.touch(g)?;
        self.v().groups.edit_map(g, block, f)
    }

    /// Sets the free counts the superblock will carry (a recount).
    pub fn set_free_counts(&mut self, blocks: u64, inodes: u64) {
        self.sb_dirty = true;
        self.vm().groups.set_free_counts(blocks, inodes);
    }

    /// Marks `[start, start + len)` used, with every count.
    ///
    /// # Errors
    /// [`Error::Corrupt`] outside the filesystem, bitmap read errors.
    pub fn take_blocks(&mut self, start: u64, len: u64) -> Result<u64> {
        for g in self.v().groups.groups_of(start, len) {
            self.touch(g)?;
        }
        let n = self.vm().groups.mark_blocks(start, len, true)?;
        self.taken.insert(start, start.saturating_add(len));
        Ok(n)
    }

    /// Marks `[start, start + len)` free, with every count. Blocks that
    /// were logged as metadata by a transaction not yet checkpointed are
    /// revoked (recovery must not write them over their next owner).
    /// Blocks the committed filesystem has in use (not taken by this
    /// transaction) are not allocated again before the commit.
    ///
    /// # Errors
    /// As [`Transaction::take_blocks`].
    pub fn free_blocks(&mut self, start: u64, len: u64) -> Result<u64> {
        let end = start.saturating_add(len);
        let mine = self.taken.remove(start, end);
        let mut from = start;
        for (s, e) in mine.into_iter().chain(std::iter::once((end, end))) {
            self.held.insert(from, s);
            from = e;
        }
        for g in self.v().groups.groups_of(start, len) {
            self.touch(g)?;
        }
        for b in start..start.saturating_add(len) {
            self.note_block(b);
            self.blocks.remove(&b);
            self.data.remove(&b);
            if self.v().pending.contains_key(&b) && self.freed.insert(b) {
                if let Some(u) = self.undo.as_deref_mut() {
                    u.freed.insert(b);
                }
            }
        }
        self.vm().groups.mark_blocks(start, len, false)
    }

    /// Whether blocks this transaction freed are kept from allocation
    /// until it commits (see the field `held`): an allocation that failed
    /// may succeed after a commit. After a rolled-back operation this can
    /// be true of blocks that operation freed and the rollback gave back
    /// to their owners (cheaper than copying the set at every savepoint);
    /// a commit clears it either way.
    pub fn holds_freed_blocks(&self) -> bool {
        !self.held.ranges().is_empty()
    }

    /// Allocates a run for a file: up to `len` blocks at or near `goal`
    /// (the first run long enough, else the longest), taken with every
    /// count. `None` when the filesystem is full.
    ///
    /// # Errors
    /// Bitmap read errors.
    pub fn alloc_run(&mut self, goal: u64, len: u64) -> Result<Option<(u64, u64)>> {
        let limited = self.v().limited_space();
        let space = Limited::new(&limited, u64::MAX, u32::MAX, self.held.ranges());
        let Some((s, n)) = alloc::best_run(&space, goal, len, Search::default())? else {
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
        let limited = self.v().limited_space();
        let space = Limited::new(&limited, u64::MAX, u32::MAX, self.held.ranges());
        let b = alloc::new_block(&space, goal)?.ok_or(Error::NoSpace)?;
        self.take_blocks(b, 1)?;
        Ok(b)
    }

    /// Allocates an inode for a child of `parent` (near it for a file,
    /// spread for a directory at the top), with every count. The record is
    /// the caller's to write.
    ///
    /// # Errors
    /// [`Error::NoFreeInodes`] when no inode is free, bitmap read errors.
    pub fn alloc_inode(&mut self, parent: u32, dir: bool) -> Result<u32> {
        let top = parent == ROOT_INO;
        let g = self.v().groups.inode_group(parent, dir, top);
        let ino =
            alloc::find_free_inode(&self.v().limited_inodes(), g)?.ok_or(Error::NoFreeInodes)?;
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
        let g = (ino.max(1) - 1) / self.v().geo.inodes_per_group;
        self.touch(g)?;
        self.vm().groups.mark_inode(ino, true, dir, how)
    }

    /// Marks inode `ino` free, with the counts (the record is the caller's
    /// to clear).
    ///
    /// # Errors
    /// As [`Transaction::take_inode`].
    pub fn free_inode(&mut self, ino: u32, dir: bool) -> Result<()> {
        let g = (ino.max(1) - 1) / self.v().geo.inodes_per_group;
        self.touch(g)?;
        self.vm()
            .groups
            .mark_inode(ino, false, dir, InodeInit::Kernel)
    }

    /// Zeroes `count` blocks from `start` (file data: in place, before
    /// the metadata).
    ///
    /// # Errors
    /// [`Error::Corrupt`] outside the filesystem.
    pub fn zero_blocks(&mut self, start: u64, count: u64) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        self.v().check_blocks(start, count, "blocks to zero")?;
        for b in start..start + count {
            self.note_block(b);
            self.blocks.remove(&b);
            self.data.remove(&b);
        }
        self.zeroes.push((start, count));
        Ok(())
    }

    /// Replaces the superblock this transaction writes (a tool that
    /// changed fields and features on its own copy).
    pub fn set_superblock(&mut self, sb: Superblock) {
        self.sb = sb;
        self.sb_dirty = true;
    }

    /// Commits: see the [module docs](self) for the protocol. The
    /// transaction is empty afterwards and may be used for the next change.
    ///
    /// # Errors
    /// I/O errors; [`Error::TransactionTooLarge`] when a journaled commit
    /// does not fit in the journal (nothing is written then); corrupt
    /// metadata that cannot be stamped.
    pub fn commit(&mut self, how: Commit) -> Result<Committed> {
        let journaled = how == Commit::Auto && self.v().journal.is_some();
        // The journal must not hold older copies of what is written in
        // place: recovery would write them over it.
        if !journaled && !self.v().pending.is_empty() {
            self.vm().checkpoint()?;
        }
        let mut plan = self.assemble_blocks()?;
        // A grow's new groups are all written (their descriptors at least).
        let grown = match self.reshaped.as_deref() {
            Some(r) => r.geo.group_count..self.v().geo.group_count,
            None => 0..0,
        };
        let groups: BTreeSet<u32> = self
            .snapshots
            .keys()
            .chain(self.flushed_groups.iter())
            .copied()
            .chain(grown)
            .collect();
        self.assemble_bitmaps(&groups, &mut plan)?;
        self.assemble_descs(&groups, &mut plan)?;
        self.assemble_super(!groups.is_empty(), journaled, &mut plan)?;
        if let Some(r) = &self.reshaped {
            // Past the old end nothing refers to a block before this
            // commit: such blocks go ahead of it, as data (the journal
            // holds only what the old filesystem can see change).
            for (_, (_, order)) in plan.range_mut(r.outside..) {
                *order = Order::Data;
            }
        }
        if plan.is_empty() && self.freed.is_empty() && self.zeroes.is_empty() {
            // Nothing changed: nothing is written (not even a commit block).
            self.taken.clear();
            self.held.clear();
            self.snapshots.clear();
            self.undo = None;
            self.flushed_groups.clear();
            self.sb_dirty = false;
            return Ok(Committed {
                sequence: None,
                blocks: 0,
            });
        }
        self.vm().changed = true;
        let out = if journaled {
            self.commit_journaled(&plan)?
        } else {
            self.write_in_place(&plan)?;
            Committed {
                sequence: None,
                blocks: plan.len(),
            }
        };
        let sb = self.sb.clone();
        self.vm().csum = Checksums::new(&sb);
        self.vm().sb = sb;
        if journaled && self.v().opts.checkpoint == Checkpoint::EachCommit {
            self.vm().write_home()?;
        }
        // What is committed stays: the transaction starts afresh.
        self.reshaped = None;
        self.taken.clear();
        self.held.clear();
        self.snapshots.clear();
        self.undo = None;
        self.flushed_groups.clear();
        self.sb_dirty = false;
        let v = self.v();
        self.counts_before = (v.groups.free_blocks(), v.groups.free_inodes());
        Ok(out)
    }

    /// Writes the changed blocks, inode records and bitmaps so far in
    /// place, keeping descriptors and the superblock for the final
    /// [`Transaction::commit`]: how a rewrite of a whole filesystem (a
    /// checksum change) keeps its memory bounded. There is no undo past
    /// this point; the bitmaps written are dropped from memory.
    ///
    /// # Errors
    /// As [`Transaction::commit`].
    pub fn flush_partial(&mut self) -> Result<()> {
        let mut plan = self.assemble_blocks()?;
        let groups: BTreeSet<u32> = self.snapshots.keys().copied().collect();
        self.assemble_bitmaps(&groups, &mut plan)?;
        if !plan.is_empty() || !self.zeroes.is_empty() {
            self.vm().changed = true;
        }
        self.write_in_place(&plan)?;
        for g in groups {
            self.vm().groups.forget_maps(g);
            self.flushed_groups.insert(g);
        }
        self.snapshots.clear();
        self.undo = None;
        Ok(())
    }

    /// The metadata blocks and inode records, stamped, taken out of the
    /// transaction.
    fn assemble_blocks(&mut self) -> Result<BTreeMap<u64, (Vec<u8>, Order)>> {
        let csum = self.v().csum.clone();
        let mut out: BTreeMap<u64, (Vec<u8>, Order)> = BTreeMap::new();
        for (nr, (mut buf, kind)) in std::mem::take(&mut self.blocks) {
            match csum.stamp_block(kind, nr, &mut buf) {
                Err(_) if self.lenient => {}
                r => r?,
            }
            out.insert(nr, (buf, Order::Metadata));
        }
        for (nr, buf) in std::mem::take(&mut self.data) {
            out.insert(nr, (buf, Order::Data));
        }
        // Inode records into their table blocks.
        let isz = self.v().geo.inode_size as usize;
        let inodes = std::mem::take(&mut self.inodes);
        self.inode_blocks.clear();
        let vol: &Volume = self.v();
        for (ino, mut rec) in inodes {
            csum.stamp_inode(ino, &mut rec)?;
            let (block, off) = vol.inode_place(ino)?;
            if let std::collections::btree_map::Entry::Vacant(e) = out.entry(block) {
                e.insert((vol.read_block(block)?, Order::Inodes));
            }
            if let Some((b, order)) = out.get_mut(&block) {
                b[off..off + isz].copy_from_slice(&rec);
                *order = Order::Inodes;
            }
        }
        Ok(out)
    }

    /// The bitmaps of `groups` that are read and not uninit, with their
    /// checksums stored in the descriptors.
    fn assemble_bitmaps(
        &mut self,
        groups: &BTreeSet<u32>,
        out: &mut BTreeMap<u64, (Vec<u8>, Order)>,
    ) -> Result<()> {
        use ext4r_format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
        let csum = self.v().csum.clone();
        let bs = self.v().geo.block_size;
        let wide = self.v().groups.wide();
        let gdt = self.v().groups.gdt_csum();
        for &g in groups {
            let (bmap, imap) = self.v().groups.loaded_maps(g);
            let mut d = *self.v().groups.desc(g)?;
            let braw = bmap
                .filter(|_| !(gdt && d.flags() & BG_BLOCK_UNINIT != 0))
                .map(|m| m.to_bytes(bs));
            let iraw = imap
                .filter(|_| !(gdt && d.flags() & BG_INODE_UNINIT != 0))
                .map(|m| m.to_bytes(bs));
            csum.stamp_bitmaps(&mut d, braw.as_deref(), iraw.as_deref());
            *self.vm().groups.desc_mut(g)? = d;
            for (raw, at) in [(braw, d.block_bitmap(wide)), (iraw, d.inode_bitmap(wide))] {
                if let Some(raw) = raw {
                    self.v().check_blocks(at, 1, "bitmap")?;
                    out.insert(at, (raw, Order::Bitmap));
                }
            }
        }
        Ok(())
    }

    /// The descriptor blocks holding `groups`, their checksums stamped.
    fn assemble_descs(
        &mut self,
        groups: &BTreeSet<u32>,
        out: &mut BTreeMap<u64, (Vec<u8>, Order)>,
    ) -> Result<()> {
        let csum = self.v().csum.clone();
        let geo = self.v().geo.clone();
        let dsize = geo.desc_size as usize;
        let per = geo.descs_per_block();
        for &g in groups {
            let mut d = *self.v().groups.desc(g)?;
            csum.stamp_desc(g, &mut d);
            *self.vm().groups.desc_mut(g)? = d;
            let loc = geo.desc_block_loc(g / per);
            if let std::collections::btree_map::Entry::Vacant(e) = out.entry(loc) {
                e.insert((self.v().read_block(loc)?, Order::Desc));
            }
            if let Some((b, order)) = out.get_mut(&loc) {
                let off = (g % per) as usize * dsize;
                d.write(&mut b[off..off + dsize], dsize).map_err(|e| {
                    Error::corrupt(crate::error::Location::group(g).of("descriptor"), e)
                })?;
                *order = Order::Desc;
            }
        }
        Ok(())
    }

    /// The superblock's block, when anything it counts or says changed.
    /// Through the journal its copy says `needs_recovery`: it is written
    /// home only while the journal holds it, and the flag is cleared on
    /// disk once the journal is empty; in place, it says what the disk
    /// holds.
    fn assemble_super(
        &mut self,
        groups_changed: bool,
        journaled: bool,
        out: &mut BTreeMap<u64, (Vec<u8>, Order)>,
    ) -> Result<()> {
        let counts = (self.v().groups.free_blocks(), self.v().groups.free_inodes());
        if !(self.sb_dirty || counts != self.counts_before || groups_changed) {
            return Ok(());
        }
        self.sb.set_free_blocks_count(counts.0);
        // Never above s_inodes_count, a u32.
        self.sb.s_free_inodes_count.set(num::sat_u32(counts.1));
        let now = self.v().now();
        self.sb.set_wtime(now);
        let recover = ext4r_format::features::Incompat::RECOVER.bits();
        let inc = self.sb.s_feature_incompat.get();
        self.sb.s_feature_incompat.set(if journaled {
            inc | recover
        } else if self.v().recover_as_given {
            inc
        } else {
            inc & !recover
        });
        Checksums::stamp_superblock(&mut self.sb);
        let bs = self.bs();
        let (blk, off) = if bs == 1024 {
            (1u64, 0usize)
        } else {
            (0, num::index(SUPERBLOCK_OFFSET))
        };
        if let std::collections::btree_map::Entry::Vacant(e) = out.entry(blk) {
            e.insert((self.v().read_block(blk)?, Order::Super));
        }
        if let Some((b, order)) = out.get_mut(&blk) {
            let bytes = self.sb.to_bytes();
            b[off..off + bytes.len()].copy_from_slice(&bytes);
            *order = Order::Super;
        }
        Ok(())
    }

    /// Zeroed ranges, then data, then the plan in the safe order.
    fn write_in_place(&mut self, plan: &BTreeMap<u64, (Vec<u8>, Order)>) -> Result<()> {
        if !self.v().pending.is_empty() {
            self.vm().checkpoint()?;
        }
        let bs = self.bs() as u64;
        let dev = std::sync::Arc::clone(&self.v().dev);
        self.write_zeroes()?;
        for order in [Order::Data, Order::Metadata, Order::Inodes, Order::Bitmap] {
            // Children before the parents that point at them: data before
            // the blocks mapping it, those before the inode records.
            if matches!(order, Order::Metadata | Order::Inodes) {
                dev.flush()?;
            }
            write_runs(
                dev.as_ref(),
                bs,
                plan.iter().filter(|(_, (_, o))| *o == order),
            )?;
        }
        // The commit point: the superblock together with the descriptor
        // blocks that follow it, in one write (as flush_super does), so
        // that the two never disagree; descriptor blocks elsewhere
        // (meta_bg) before it.
        let sb_block = if bs == 1024 { 1 } else { 0 };
        let top: Vec<(&u64, &(Vec<u8>, Order))> = plan
            .iter()
            .filter(|(_, (_, o))| matches!(o, Order::Desc | Order::Super))
            .collect();
        let mut commit_run = BTreeSet::new();
        if top.iter().any(|(&n, _)| n == sb_block) {
            let mut n = sb_block;
            while top.iter().any(|(&m, _)| m == n) {
                commit_run.insert(n);
                n += 1;
            }
        }
        write_runs(
            dev.as_ref(),
            bs,
            top.iter()
                .copied()
                .filter(|(n, _)| !commit_run.contains(*n)),
        )?;
        dev.flush()?;
        write_runs(
            dev.as_ref(),
            bs,
            top.iter().copied().filter(|(n, _)| commit_run.contains(*n)),
        )?;
        dev.flush()
    }

    fn write_zeroes(&mut self) -> Result<()> {
        let bs = self.bs() as u64;
        let dev = std::sync::Arc::clone(&self.v().dev);
        for (s, n) in std::mem::take(&mut self.zeroes) {
            dev.zeroout(s * bs, n * bs)?;
        }
        Ok(())
    }

    fn commit_journaled(&mut self, plan: &BTreeMap<u64, (Vec<u8>, Order)>) -> Result<Committed> {
        let bs = self.bs() as u64;
        let dev = std::sync::Arc::clone(&self.v().dev);
        self.write_zeroes()?;
        write_runs(
            dev.as_ref(),
            bs,
            plan.iter().filter(|(_, (_, o))| *o == Order::Data),
        )?;
        if !self.v().recover_on_disk {
            self.vm().set_recover_on_disk(true)?;
        }
        let meta: Vec<(u64, &[u8])> = plan
            .iter()
            .filter(|(_, (_, o))| *o != Order::Data)
            .map(|(&n, (b, _))| (n, b.as_slice()))
            .collect();
        let revokes: Vec<u64> = self.freed.iter().copied().collect();
        let now = self.v().now().max(0) as u64;
        let seq = match self.journal_commit(&meta, &revokes, now) {
            Err(Error::JournalFull) => {
                self.vm().write_home()?;
                self.journal_commit(&meta, &revokes, now)?
            }
            r => r?,
        };
        let freed = std::mem::take(&mut self.freed);
        for b in &freed {
            self.vm().pending.remove(b);
        }
        for (n, b) in meta {
            self.vm().pending.insert(n, b.to_vec());
        }
        Ok(Committed {
            sequence: Some(seq),
            blocks: plan.len(),
        })
    }

    fn journal_commit(&mut self, meta: &[(u64, &[u8])], revokes: &[u64], now: u64) -> Result<u32> {
        let dev = std::sync::Arc::clone(&self.v().dev);
        let journal = self
            .vm()
            .journal
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("no journal".into()))?;
        journal.commit(dev.as_ref(), meta, revokes, (now, 0))
    }
}

/// Writes blocks in runs of consecutive numbers, one write per run (per
/// [`RUN_BYTES`] of a longer one).
fn write_runs<'a>(
    dev: &dyn crate::device::BlockDevice,
    bs: u64,
    blocks: impl Iterator<Item = (&'a u64, &'a (Vec<u8>, Order))>,
) -> Result<()> {
    let mut run: Vec<u8> = Vec::new();
    let mut start = 0u64;
    let mut next = 0u64;
    for (&nr, (b, _)) in blocks {
        if !run.is_empty() && nr != next {
            dev.write_at(&run, start * bs)?;
            run.clear();
        }
        if run.is_empty() {
            start = nr;
        }
        run.extend_from_slice(b);
        next = nr + 1;
        // A long run goes out in pieces: a copy of all of it would double
        // the memory of the data gathered (tens of MiB for a big file).
        if run.len() >= RUN_BYTES {
            dev.write_at(&run, start * bs)?;
            run.clear();
        }
    }
    if !run.is_empty() {
        dev.write_at(&run, start * bs)?;
    }
    Ok(())
}

/// The longest write [`write_runs`] issues. Its buffer is what a commit
/// adds to the memory of the changes gathered: 64 KiB rather than 256 KiB
/// took 190 KiB off the peak RSS of `mkfs.ext4r -d` (which commits every
/// 256 KiB of changes) at the same speed.
const RUN_BYTES: usize = 64 << 10;

/// Where a block goes in the in-place order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Data,
    Metadata,
    Inodes,
    Bitmap,
    Desc,
    Super,
}

impl<V: BorrowMut<Volume>> Drop for Transaction<V> {
    fn drop(&mut self) {
        if self.vol.is_some() {
            self.abandon();
        }
    }
}

impl<V: BorrowMut<Volume>> BlockSource for Transaction<V> {
    fn block_size(&self) -> u32 {
        self.v().geo.block_size
    }
    fn block_range(&self) -> (u64, u64) {
        (self.v().geo.first_data_block, self.v().geo.blocks_count)
    }
    fn read_block(&self, nr: u64, what: &str) -> Result<Vec<u8>> {
        self.check_blocks(nr, 1, what)?;
        Transaction::read_block(self, nr)
    }
    fn verify(&self) -> Option<&Checksums> {
        self.v().verifies().then_some(&self.v().csum)
    }
    fn trusted(&self, nr: u64) -> bool {
        self.blocks.contains_key(&nr) || self.data.contains_key(&nr)
    }
    fn was_verified(&self, nr: u64, kind: crate::csum::BlockKind) -> bool {
        self.v().was_verified(nr, kind)
    }
    fn note_verified(&self, nr: u64, kind: crate::csum::BlockKind) {
        self.v().note_verified(nr, kind);
    }
}

impl<V: BorrowMut<Volume>> FreeSpace for Transaction<V> {
    fn first_data_block(&self) -> u64 {
        self.v().groups.first_data_block()
    }
    fn blocks_count(&self) -> u64 {
        self.v().groups.blocks_count()
    }
    fn cluster_mask(&self) -> u64 {
        self.v().groups.cluster_mask()
    }
    // The blocks held until the commit (see `Transaction::held`) count
    // as used for every search of free space.
    fn first_free(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.unheld().first_free(from, to)
    }
    fn first_used(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.unheld().first_used(from, to)
    }
    fn used_end(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.unheld().used_end(from, to)
    }
}

impl<V: BorrowMut<Volume>> Transaction<V> {
    /// The group table's free space less the blocks held until the commit.
    fn unheld(&self) -> Limited<'_, GroupTable> {
        Limited::new(&self.v().groups, u64::MAX, u32::MAX, self.held.ranges())
    }
}

impl<V: BorrowMut<Volume>> BlockAlloc for Transaction<V> {
    type Space = Self;
    fn space(&self) -> &Self {
        self
    }
    fn geo(&self) -> &Geometry {
        &self.v().geo
    }
    fn log_groups_per_flex(&self) -> u32 {
        self.v().groups.log_groups_per_flex()
    }
    fn group_free(&self, g: u32) -> i64 {
        self.v().groups.group_free(g)
    }
    fn take_range(&mut self, start: u64, len: u64) -> Result<()> {
        self.take_blocks(start, len).map(|_| ())
    }
    fn alloc_block(&mut self, goal: u64) -> Result<u64> {
        Transaction::alloc_block(self, goal)
    }
}
