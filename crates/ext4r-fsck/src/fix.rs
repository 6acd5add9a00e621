//! Repairs: what a problem needs changed on disk, and applying a batch of
//! them with every affected checksum recomputed.
//!
//! A round of repair is: check, collect the fixes the problems carry,
//! apply them all (read-modify-write per inode, block and descriptor, so
//! two fixes to one inode make one write), then check again. Fixes are
//! idempotent and computed from what the check saw, so a round that is cut
//! short leaves an image the next run repairs the same way.

mod dirs;
pub(crate) mod guard;
mod resize;
mod space;
mod truncate;
mod apply {
    //! Applying one fix to the batch, by what it changes.
    mod dir;
    mod group;
    mod inline;
    mod inode;
    mod journal;
    mod map;
    mod space;
    mod superblock;
}

use dirs::{add_tail, collapse_dir};
use space::bits_to_bytes;

use std::collections::BTreeMap;

use ext4r::fs::Filesystem;
use ext4r::Result;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4r_format::inode::{inode_csum_seed, Inode};
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use ext4r_format::{GroupNr, InodeNr};
use ext4r_txn::bitmap::Bitmap;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Volume, VolumeOptions};

/// The inode a directory or extent block belongs to: the write layer's
/// checksum dispatcher seeds the block's checksum from its number and
/// generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Owner {
    /// The inode.
    pub ino: u32,
    /// Its `i_generation`.
    pub generation: u32,
}

impl Owner {
    /// Inode `ino` of generation `generation`.
    pub(crate) fn new(ino: u32, generation: u32) -> Self {
        Owner { ino, generation }
    }

    /// Inode `ino` as `inode` holds it.
    pub(crate) fn of(ino: u32, inode: &Inode) -> Self {
        Owner::new(ino, inode.generation())
    }

    /// The checksum seed of its blocks on a filesystem seeded `fs_seed`,
    /// to verify what is read.
    pub(crate) fn seed(self, fs_seed: u32) -> u32 {
        inode_csum_seed(fs_seed, InodeNr(self.ino), self.generation)
    }

    /// One of its directory blocks (a leaf or an htree node).
    pub(crate) fn dir(self) -> BlockKind {
        BlockKind::Dir {
            ino: self.ino,
            generation: self.generation,
        }
    }

    /// One of its extent tree blocks.
    pub(crate) fn extent(self) -> BlockKind {
        BlockKind::Extent {
            ino: self.ino,
            generation: self.generation,
        }
    }
}

/// One change that repairs one problem.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fix {
    /// Recompute an inode's checksum.
    InodeChecksum(u32),
    /// Set `i_links_count`.
    InodeLinks(u32, u16),
    /// Set `i_blocks` to this many filesystem blocks.
    InodeBlocks(u32, u64),
    /// Set `i_size`.
    InodeSize(u32, u64),
    /// Clear `i_dtime` of an inode in use.
    InodeClearDtime(u32),
    /// Clear `i_file_acl` (and its high half).
    InodeClearFileAcl(u32),
    /// Clear the high half of `i_file_acl` on a filesystem without 64bit.
    InodeClearFileAclHigh(u32),
    /// Recompute a directory leaf block's checksum tail (its directory).
    DirBlockChecksum(u64, Owner),
    /// Recompute an extent block's checksum (its inode).
    ExtentBlockChecksum(u64, Owner),
    /// Recompute an xattr block's checksum.
    XattrBlockChecksum(u64),
    /// Set an xattr block's reference count.
    XattrRefcount(u64, u32),
    /// Point a directory entry at nothing (block, offset, the directory).
    DirEntryClear(u64, usize, Owner),
    /// Give the entry at (block, offset) a new name, no longer than its
    /// record holds (e2fsck's rename of a duplicate name) (the directory).
    DirEntryRename(u64, usize, Vec<u8>, Owner),
    /// Set a directory entry's file type (block, offset, type, the directory).
    DirEntryFiletype(u64, usize, u8, Owner),
    /// Set a group's free block count (clusters).
    GroupFreeBlocks(u32, u32),
    /// Set a group's free inode count.
    GroupFreeInodes(u32, u32),
    /// Set a group's directory count.
    GroupUsedDirs(u32, u32),
    /// Write a group's block bitmap (one bit per cluster of the group).
    BlockBitmap(u32, Vec<u64>),
    /// Write a group's inode bitmap.
    InodeBitmap(u32, Vec<u64>),
    /// Rewrite a group descriptor (and so its checksum).
    GroupDescChecksum(u32),
    /// Clear these `bg_flags` bits of a group and, when given, set its
    /// unused inode count (the descriptor is rewritten with its checksum).
    GroupDescFlags(u32, u16, Option<u32>),
    /// Clear `i_block[slot]` (an illegal block pointer).
    InodeBlockSlot(u32, usize),
    /// Clear entry `i` of an indirect block (an illegal block pointer).
    IndirectEntry(u64, usize),
    /// Clear entry `i` of a reserved GDT block's list of its copies (an
    /// illegal number in the resize inode's map). The block is group
    /// metadata, which file repairs otherwise never write.
    ReservedGdtEntry(u64, usize),
    /// Remove entry `i` of an extent node: in the inode's root (None) or
    /// in a tree block; the inode, for the block's checksum.
    ExtentRemove(u32, Option<u64>, usize, Owner),
    /// Set the first logical block of index entry `i` of an extent node
    /// (None: the root in the inode); the inode, for the checksum.
    ExtentIndexStart(u32, Option<u64>, usize, u32, Owner),
    /// Replace an inode's extent tree with a rebuilt one (its root and
    /// node blocks; see [`crate::ExtentTree`]).
    RebuildExtents(Box<crate::extent_rebuild::ExtentTree>),
    /// Turn a block-mapped inode into an extent-mapped one over the same
    /// blocks: the tree written as [`Fix::RebuildExtents`], the extents
    /// flag set.
    ExtentsFromMap(Box<crate::extent_rebuild::ExtentTree>),
    /// Move the journal from this inode, named at (block, offset) in the
    /// root directory (its owner), to the reserved journal inode.
    MoveJournal(u32, u64, usize, Owner),
    /// Move a visible quota inode to its reserved inode (see the
    /// `quota_hide` module).
    HideQuota(Box<crate::quota_hide::HideQuota>),
    /// Make the orphan file anew (see the `orphan_file` module).
    NewOrphanFile(Box<crate::orphan_file::NewOrphanFile>),
    /// Mark leaf entry `i` of an extent node (None: the root) written
    /// (inode, the owner for the checksum).
    ExtentWritten(u32, Option<u64>, usize, Owner),
    /// Set the `eh_depth` of an extent node (None: the root in the inode)
    /// of an inode (the owner for the checksum).
    ExtentDepth(u32, Option<u64>, u16, Owner),
    /// Make the first record of a directory's block 0 its `.` (block,
    /// directory, its owner), splitting off the rest of its space.
    DirMakeDot(u64, u32, Owner),
    /// Make the record at (block, offset) a `..` (the directory).
    DirMakeDotDot(u64, usize, Owner),
    /// Zero one byte of a directory block (block, offset, the directory).
    DirZeroByte(u64, usize, Owner),
    /// Release an inode beyond repair: no links, deletion time set, no
    /// flags (its blocks and entries are freed by the next rounds).
    ClearInode(u32),
    /// Set `i_extra_isize`.
    InodeExtraIsize(u32, u16),
    /// Drop the in-inode xattr area.
    ClearIbodyXattrs(u32),
    /// Rewrite the `e_hash` of in-inode xattr entries: (the entry's byte
    /// offset in the inode record, the hash) for each.
    IbodyXattrHashes(u32, Vec<(usize, u32)>),
    /// Salvage a directory block from a bad record at `offset`: the
    /// previous record (if any, at the given offset) or an empty one takes
    /// the rest of the block.
    DirSalvage(u64, usize, Option<usize>, Owner),
    /// Turn an htree directory back into a linear one (its index blocks
    /// read as empty records), as e2fsck's "Clear HTree index".
    ClearIndexFlag(u32),
    /// Close the holes of a directory: its blocks renumbered 0, 1, 2...
    /// (extent tree of depth 0 or direct block map).
    CollapseDir(u32),
    /// Give a directory leaf block its checksum tail, taken from the slack
    /// of its last record (nothing is done when there is no room).
    DirAddTail(u64, Owner),
    /// Point a directory entry at another inode (`..` repairs).
    DirEntryInode(u64, usize, u32, Owner),
    /// Link an unattached inode into /lost+found as `#ino` (file type).
    Reconnect(u32, u8),
    /// Turn on incompatible feature bits (extents found in use).
    SetIncompat(u32),
    /// Turn off incompatible feature bits (filetype on the Hurd).
    ClearIncompat(u32),
    /// Set the superblock's free block and inode counts.
    SuperblockCounts(u64, u64),
    /// Set the superblock's free block count.
    SuperFreeBlocks(u64),
    /// Set the superblock's free inode count.
    SuperFreeInodes(u64),
    /// Several changes that one answer makes (e2fsck's "Block bitmap
    /// differences", one question for every group's bitmap).
    Each(Vec<Fix>),
    /// Clear the orphan_present feature.
    ClearOrphanPresent,
    /// Give an inode copies of blocks it shares (inode, its owner
    /// identity, the copies): pass 1D's clone.
    CloneBlocks(u32, Owner, Vec<crate::dup::BlockCopy>),
    /// Forget the journal (superblock fields; the inode is cleared by a
    /// later round's [`Fix::ZeroInode`]).
    DeleteJournal,
    /// Reset the journal superblock at this block to an empty journal of
    /// this many blocks, and drop `needs_recovery`.
    ResetJournalSuper(u64, u32),
    /// Zero the v2 fields of a v1 journal superblock at this block.
    ClearV2JournalFields(u64),
    /// Rebuild the journal inode from the superblock's copy of its block
    /// map (`s_jnl_blocks`), as e2fsck does when the inode is bad.
    RestoreJournalInode(u32),
    /// Set `s_journal_inum`.
    JournalInum(u32),
    /// Change the superblock (see [`crate::SuperEdit`]).
    Superblock(crate::super_rules::SuperEdit),
    /// Clear both epoch bits of the extra timestamps that hold a pre-1970
    /// time the old way (see `pass1_rules.rs`).
    InodeClearEpoch(u32),
    /// Zero one byte of an inode record (the Hurd's fragment fields).
    InodeZeroByte(u32, usize),
    /// Clear the obsolete fragment address `i_faddr`.
    InodeClearFaddr(u32),
    /// Zero `l_i_blocks_high` (no huge_file).
    InodeClearBlocksHigh(u32),
    /// Set the superblock's desired (true) or required extra inode size.
    SuperExtraIsize(bool, u16),
    /// Forget a quota inode (0 user, 1 group, 2 project).
    ClearQuotaInode(u8),
    /// Write the quota file of a type (0 user, 1 group, 2 project) anew
    /// holding these records (e2fsck's `quota_write_inode`); made after
    /// the rest of the batch.
    UpdateQuota(u8, Vec<ext4r::quota::Dquot>),
    /// Write the superblock and descriptors the filesystem was opened with
    /// (a backup) to the primary locations.
    RestorePrimary,
    /// Empty an orphan file block (block, orphan file inode, its
    /// generation for the checksum).
    OrphanBlockClear(u64, u32, u32),
    /// Mark these block runs free in the block bitmaps, with the free
    /// counts (an orphan's blocks released).
    FreeBlocks(Vec<(u64, u64)>),
    /// Mark an inode free in its bitmap, with the counts (a directory:
    /// one less in the group's directory count).
    FreeInode(u32, bool),
    /// Clear the head of the orphan inode list.
    ClearLastOrphan,
    /// Finish the truncation of an orphan still linked: the blocks past
    /// its size freed (see `fix/truncate.rs`).
    TruncateOrphan(u32),
    /// Create /lost+found with this inode and block.
    MakeLostFound(crate::lost_found::NewLostFound),
    /// Clear these inode flags.
    InodeClearFlags(u32, u32),
    /// Set `i_flags` bits (an EA inode missing its EA_INODE flag).
    InodeSetFlags(u32, u32),
    /// Turn on read-only-compatible feature bits (dir_nlink).
    SetRoCompat(u32),
    /// Store an EA inode's reference count (`i_ctime` high, `l_i_version`
    /// low word).
    EaInodeRefCount(u32, u64),
    /// Rewrite the MMP block at this address as `ext2fs_mmp_reset` does.
    ResetMmp(u64),
    /// Set the large_file feature, making a revision 0 superblock dynamic
    /// (as e2fsck's `ext2fs_update_dynamic_rev`).
    SetLargeFile,
    /// Set the large_dir feature (an indexed directory of 2 GiB or more
    /// was found).
    SetLargeDir,
    /// Map a new directory block (with `.` and `..`) at logical block 0 of
    /// a directory that has none (inode, block, the directory).
    DirBlock0(u32, u64, Owner),
    /// Map a new empty directory block at a direct logical block of a
    /// block-mapped directory (inode, logical block, block, the owner).
    DirBlockAt(u32, u64, u64, Owner),
    /// Replace '/' and NUL in the name of the entry at (block, offset)
    /// with '.' (the directory).
    DirNameFix(u64, usize, Owner),
    /// Give a directory more (empty) blocks: lost+found expanded (see
    /// `crate::lost_found::plan_expand`).
    ExpandDir(u32, Vec<u64>),
    /// Move a group's bitmap or inode table to zeroed blocks from here.
    Relocate(u32, crate::relocate::Meta, u64),
    /// Move a group's bitmap or inode table from the first block to the
    /// second, copying it (e2fsck's "Relocating ... from X to Y").
    RelocateFrom(u32, crate::relocate::Meta, u64, u64),
    /// Create the root directory (inode 2) with its block here.
    MakeRoot(u64),
    /// Drop an inode's inline data: size 0, no inline flag, `i_block`
    /// zeroed (e2fsck's "Truncate" when `system.data` is missing).
    InlineTruncate(u32),
    /// Set `i_mode`.
    InodeMode(u32, u16),
    /// Set an inline directory's parent (the first word of `i_block`).
    InlineParent(u32, u32),
    /// Clear the inode of the record at an offset of an inline
    /// directory's area (inode, area, offset; see `crate::inline_dir`).
    InlineEntryClear(u32, u64, usize),
    /// Set the file type of the record at an offset of an inline
    /// directory's area (inode, area, offset, type).
    InlineEntryFiletype(u32, u64, usize, u8),
    /// Turn each '/' and NUL of the name of the record at an offset of an
    /// inline directory's area into '.' (inode, area, offset).
    InlineNameFix(u32, u64, usize),
    /// Salvage an inline directory's area at a bad record (inode, area,
    /// offset, the record before).
    InlineSalvage(u32, u64, usize, Option<usize>),
    /// Give an inline directory this size (`i_block` and the
    /// `system.data` value, e2fsck's `fix_inline_dir_size`).
    InlineDirSize(u32, usize),
    /// Zero a whole inode record (an unused reserved inode with data).
    ZeroInode(u32),
    /// Write a directory's rebuilt blocks (a hash index, or one linear
    /// block) over its old ones and set or clear its INDEX flag (pass 3A,
    /// see `crate::rehash`).
    RehashDir(Box<crate::rehash::Rebuilt>),
    /// Rewrite the resize inode as mke2fs makes it, its double-indirect
    /// block here (see `crate::resize_inode`).
    RecreateResizeInode(u64),
    /// Turn the resize_inode feature off and zero `s_reserved_gdt_blocks`.
    DropResizeFeature,
}

impl Fix {
    /// Whether the fix writes inode `ino`'s record (and so stamps its
    /// checksum anew), as a fix e2fsck makes with `e2fsck_write_inode`.
    pub(crate) fn rewrites_inode(&self, ino: u32) -> bool {
        match self {
            Fix::InodeLinks(i, _)
            | Fix::InodeBlocks(i, _)
            | Fix::InodeSize(i, _)
            | Fix::InodeClearDtime(i)
            | Fix::InodeClearFileAcl(i)
            | Fix::InodeClearFileAclHigh(i)
            | Fix::InodeBlockSlot(i, _)
            | Fix::ClearInode(i)
            | Fix::InodeExtraIsize(i, _)
            | Fix::ClearIbodyXattrs(i)
            | Fix::IbodyXattrHashes(i, _)
            | Fix::ClearIndexFlag(i)
            | Fix::InodeClearEpoch(i)
            | Fix::InodeZeroByte(i, _)
            | Fix::InodeClearFaddr(i)
            | Fix::InodeClearBlocksHigh(i)
            | Fix::InodeClearFlags(i, _)
            | Fix::InodeSetFlags(i, _)
            | Fix::InodeMode(i, _)
            | Fix::InlineTruncate(i)
            | Fix::ZeroInode(i)
            | Fix::ExtentRemove(i, None, ..)
            | Fix::ExtentIndexStart(i, None, ..)
            | Fix::ExtentWritten(i, None, ..)
            | Fix::ExtentDepth(i, None, ..) => *i == ino,
            Fix::RebuildExtents(t) | Fix::ExtentsFromMap(t) => t.ino == ino,
            Fix::Each(all) => all.iter().any(|f| f.rewrites_inode(ino)),
            _ => false,
        }
    }
}

/// Writes `fixes` to the filesystem's device.
///
/// # Errors
/// I/O errors, or corrupt structures that stand in the way (reported with
/// their location).
pub fn apply(fs: &Filesystem, fixes: &[Fix]) -> Result<usize> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs() as i64);
    apply_at(fs, fixes, now)
}

/// [`apply`] with the check's clock: deletion times and the superblock's
/// write time are `now`, as e2fsck stamps them with the time it started
/// (a later clock would put the write time in the future of the next
/// round's check).
pub(crate) fn apply_at(fs: &Filesystem, fixes: &[Fix], now: i64) -> Result<usize> {
    let mut w = Writer::new(fs, now);
    let mut quota = Vec::new();
    for f in fixes {
        match f {
            // The engine writes a quota file whole (allocating its
            // blocks), once what the batch changes is on disk.
            Fix::UpdateQuota(qtype, dquots) => quota.push((usize::from(*qtype), dquots)),
            _ => w.add(f)?,
        }
    }
    w.flush()?;
    for (qtype, dquots) in quota {
        ext4r::quota_write::rewrite_quota_file(fs.device_shared(), qtype, dquots, now)?;
    }
    Ok(fixes.len())
}

/// Extent entries to remove, per (inode, node block), with the owner.
type ExtentRemovals = BTreeMap<(u32, Option<u64>), Vec<(usize, Owner)>>;

struct Writer<'a> {
    fs: &'a Filesystem,
    /// Extent entries to remove per (inode, node): applied at the end,
    /// highest index first, so indexes stay valid.
    extent_removals: ExtentRemovals,
    sb: Superblock,
    sb_dirty: bool,
    /// Deletion time for cleared inodes.
    now: u32,
    /// The check's clock, for the write layer (the superblock's write
    /// time).
    clock: i64,
    inodes: BTreeMap<u32, Vec<u8>>,
    blocks: BTreeMap<u64, (Vec<u8>, BlockKind)>,
    descs: BTreeMap<u32, GroupDesc>,
    /// Bitmaps changed, by (group, block bitmap?): written, and their
    /// checksums stamped, by the write layer.
    bitmaps: BTreeMap<(u32, bool), Vec<u8>>,
    /// Orphans to truncate to their size, once the rest of the batch is
    /// in the transaction.
    truncates: Vec<u32>,
    /// Metadata blocks a fix rewrites as metadata (the resize inode's
    /// reserved GDT blocks), exempt from the guard.
    meta_writes: std::collections::BTreeSet<u64>,
}

impl<'a> Writer<'a> {
    fn new(fs: &'a Filesystem, now: i64) -> Self {
        Writer {
            fs,
            extent_removals: BTreeMap::new(),
            sb: fs.superblock().clone(),
            sb_dirty: false,
            now: num::sat_u32(now.clamp(1, i64::from(u32::MAX))),
            clock: now,
            inodes: BTreeMap::new(),
            blocks: BTreeMap::new(),
            descs: BTreeMap::new(),
            bitmaps: BTreeMap::new(),
            meta_writes: std::collections::BTreeSet::new(),
            truncates: Vec::new(),
        }
    }

    fn csum(&self) -> bool {
        self.sb.has_ro_compat(RoCompat::METADATA_CSUM)
    }

    /// The file type byte of a directory entry naming a directory.
    fn dir_ft(&self) -> u8 {
        if self.sb.has_incompat(Incompat::FILETYPE) {
            ext4r_format::dir::ft::DIR
        } else {
            0
        }
    }

    fn inode(&mut self, ino: u32) -> Result<&mut Vec<u8>> {
        if !self.inodes.contains_key(&ino) {
            let rec = self.fs.inode_record(InodeNr(ino))?;
            self.inodes.insert(ino, rec);
        }
        Ok(self.inodes.entry(ino).or_default())
    }

    /// e2fsck's `move_quota_inode`: the inode written anew at the reserved
    /// number as `ext2fs_write_new_inode` writes one (the first 128 bytes
    /// kept, the rest zeroed but for `i_extra_isize` and a creation time),
    /// the name unlinked, the old inode's first 128 bytes zeroed and its
    /// number freed. Without a name to unlink, e2fsck stops short of
    /// pointing the superblock at the new inode and hides it again at
    /// every run; the move is completed here all the same.
    fn hide_quota(&mut self, h: &crate::quota_hide::HideQuota) -> Result<()> {
        use ext4r_format::inode::InodeFlags;
        let old = self.inode(h.from)?.clone();
        let extents = self.sb.has_incompat(Incompat::EXTENTS);
        let now = self.now;
        let to = self.inode(h.to)?;
        to.fill(0);
        let n = to.len().min(old.len()).min(128);
        to[..n].copy_from_slice(&old[..n]);
        if to.len() > 128 {
            // sizeof(struct ext2_inode_large) - 128.
            to[0x80..0x82].copy_from_slice(&32u16.to_le_bytes());
            // i_crtime (the copy has none: its extra fields are gone).
            if let Some(x) = to.get_mut(0x90..0x94) {
                x.copy_from_slice(&now.to_le_bytes());
            }
        }
        let mut flags = InodeFlags::IMMUTABLE.bits();
        if extents {
            flags |= InodeFlags::EXTENTS.bits();
        }
        self.edit_inode(h.to, |i| {
            i.i_links_count.set(1);
            i.i_mode.set(0o100_600);
            i.i_flags.set(flags);
        })?;
        if let Some((b, off, owner)) = h.entry {
            self.add(&Fix::DirEntryClear(b, off, owner))?;
        }
        match h.qtype {
            0 => self.sb.s_usr_quota_inum.set(h.to),
            _ => self.sb.s_grp_quota_inum.set(h.to),
        }
        self.sb_dirty = true;
        let from = self.inode(h.from)?;
        let n = from.len().min(128);
        from[..n].fill(0);
        self.free_inode(h.from, false)
    }

    fn edit_inode(&mut self, ino: u32, f: impl FnOnce(&mut Inode)) -> Result<()> {
        let rec = self.inode(ino)?;
        if let Ok(mut i) = Inode::parse(rec) {
            f(&mut i);
            let _ = i.write(rec);
        }
        Ok(())
    }

    fn block(&mut self, b: u64, kind: BlockKind) -> Result<&mut Vec<u8>> {
        if !self.blocks.contains_key(&b) {
            let mut buf = vec![0u8; self.fs.block_size() as usize];
            self.fs
                .device()
                .read_at(&mut buf, b * u64::from(self.fs.block_size()))?;
            self.blocks.insert(b, (buf, kind));
        }
        Ok(&mut self.blocks.entry(b).or_insert_with(|| (Vec::new(), kind)).0)
    }

    /// A block as this batch leaves it, without taking it into the batch.
    fn peek(&self, b: u64) -> Result<Vec<u8>> {
        if let Some((buf, _)) = self.blocks.get(&b) {
            return Ok(buf.clone());
        }
        let mut buf = vec![0u8; self.fs.block_size() as usize];
        self.fs
            .device()
            .read_at(&mut buf, b * u64::from(self.fs.block_size()))?;
        Ok(buf)
    }

    fn desc(&mut self, g: u32) -> Result<&mut GroupDesc> {
        if !self.descs.contains_key(&g) {
            let d = *self.fs.group_desc(GroupNr(g))?;
            self.descs.insert(g, d);
        }
        Ok(self.descs.entry(g).or_insert_with(GroupDesc::zeroed))
    }

    /// Takes one fix into the batch; each kind of fix is applied by the
    /// part of the writer for what it changes (`apply/`).
    fn add(&mut self, f: &Fix) -> Result<()> {
        match f {
            Fix::InodeChecksum(..)
            | Fix::InodeLinks(..)
            | Fix::InodeBlocks(..)
            | Fix::InodeSize(..)
            | Fix::InodeClearDtime(..)
            | Fix::InodeClearFileAcl(..)
            | Fix::InodeClearFileAclHigh(..)
            | Fix::InodeBlockSlot(..)
            | Fix::ClearInode(..)
            | Fix::InodeExtraIsize(..)
            | Fix::ClearIbodyXattrs(..)
            | Fix::IbodyXattrHashes(..)
            | Fix::CollapseDir(..)
            | Fix::ClearIndexFlag(..)
            | Fix::EaInodeRefCount(..)
            | Fix::InodeClearEpoch(..)
            | Fix::InodeZeroByte(..)
            | Fix::InodeClearFaddr(..)
            | Fix::InodeClearBlocksHigh(..)
            | Fix::InodeClearFlags(..)
            | Fix::InodeSetFlags(..)
            | Fix::InodeMode(..)
            | Fix::ZeroInode(..)
            | Fix::InlineTruncate(..) => self.add_inode_field(f),
            Fix::DirBlockChecksum(..)
            | Fix::DirEntryClear(..)
            | Fix::DirEntryRename(..)
            | Fix::DirEntryFiletype(..)
            | Fix::DirMakeDot(..)
            | Fix::DirMakeDotDot(..)
            | Fix::DirZeroByte(..)
            | Fix::DirSalvage(..)
            | Fix::DirAddTail(..)
            | Fix::DirEntryInode(..)
            | Fix::DirNameFix(..) => self.add_dir_block(f),
            Fix::InlineParent(..)
            | Fix::InlineEntryClear(..)
            | Fix::InlineEntryFiletype(..)
            | Fix::InlineNameFix(..)
            | Fix::InlineSalvage(..)
            | Fix::InlineDirSize(..) => self.add_inline_dir(f),
            Fix::ExtentBlockChecksum(..)
            | Fix::ExtentRemove(..)
            | Fix::ExtentIndexStart(..)
            | Fix::RebuildExtents(..)
            | Fix::ExtentsFromMap(..)
            | Fix::ExtentWritten(..)
            | Fix::ExtentDepth(..)
            | Fix::IndirectEntry(..)
            | Fix::ReservedGdtEntry(..) => self.add_block_map(f),
            Fix::GroupFreeBlocks(..)
            | Fix::GroupFreeInodes(..)
            | Fix::GroupUsedDirs(..)
            | Fix::GroupDescChecksum(..)
            | Fix::GroupDescFlags(..)
            | Fix::BlockBitmap(..)
            | Fix::InodeBitmap(..)
            | Fix::Relocate(..)
            | Fix::RelocateFrom(..) => self.add_group(f),
            Fix::SetIncompat(..)
            | Fix::SetRoCompat(..)
            | Fix::ClearIncompat(..)
            | Fix::SuperblockCounts(..)
            | Fix::SuperFreeBlocks(..)
            | Fix::SuperFreeInodes(..)
            | Fix::Superblock(..)
            | Fix::SuperExtraIsize(..)
            | Fix::ClearQuotaInode(..)
            | Fix::RestorePrimary
            | Fix::ClearLastOrphan
            | Fix::SetLargeDir
            | Fix::SetLargeFile
            | Fix::ClearOrphanPresent
            | Fix::DropResizeFeature => self.add_superblock(f),
            Fix::DeleteJournal
            | Fix::ResetJournalSuper(..)
            | Fix::JournalInum(..)
            | Fix::RestoreJournalInode(..)
            | Fix::ClearV2JournalFields(..)
            | Fix::MoveJournal(..) => self.add_journal(f),
            Fix::XattrBlockChecksum(..)
            | Fix::XattrRefcount(..)
            | Fix::Each(..)
            | Fix::CloneBlocks(..)
            | Fix::FreeBlocks(..)
            | Fix::FreeInode(..)
            | Fix::Reconnect(..)
            | Fix::MakeLostFound(..)
            | Fix::DirBlock0(..)
            | Fix::DirBlockAt(..)
            | Fix::ExpandDir(..)
            | Fix::RehashDir(..)
            | Fix::MakeRoot(..)
            | Fix::HideQuota(..)
            | Fix::RecreateResizeInode(..)
            | Fix::ResetMmp(..)
            | Fix::UpdateQuota(..)
            | Fix::NewOrphanFile(..)
            | Fix::OrphanBlockClear(..)
            | Fix::TruncateOrphan(..) => self.add_space(f),
        }
    }

    /// Hands the batch to the write layer: one in-place transaction over
    /// the filesystem as the check saw it (its descriptors, the superblock
    /// as the fixes left it), in which the dispatcher stamps the checksum
    /// of every inode record, block, bitmap, descriptor and the
    /// superblock, and which writes them in its safe order.
    fn flush(&mut self) -> Result<()> {
        self.remove_extents()?;
        let geo = self.fs.geometry().clone();
        let descs = (0..geo.group_count)
            .map(|g| self.fs.group_desc(GroupNr(g)).copied())
            .collect::<Result<Vec<GroupDesc>>>()?;
        let mut opts = VolumeOptions::default();
        opts.now = Some(self.clock);
        let vol = Volume::open_checked(self.fs.device_shared(), self.sb.clone(), descs, opts)?;
        let mut txn = Transaction::owned(vol);
        // A block fixed in one field may still be broken in another (a
        // later round repairs it): it is written without its checksum
        // rather than not at all.
        txn.tolerate_unstampable();
        for (&g, d) in &self.descs {
            *txn.desc_mut(g)? = *d;
        }
        for (&(g, block), raw) in &self.bitmaps {
            if block {
                let bits = geo
                    .group_blocks(g)
                    .div_ceil(geo.cluster_ratio())
                    .min(u64::from(geo.block_size) * 8);
                let bits = num::sat_u32(bits);
                txn.set_block_map(g, Bitmap::from_bytes(raw, bits))?;
            } else {
                txn.set_inode_map(g, Bitmap::from_bytes(raw, geo.inodes_per_group))?;
            }
        }
        for (ino, rec) in std::mem::take(&mut self.inodes) {
            txn.write_inode(ino, rec)?;
        }
        let meta = if self.blocks.is_empty() {
            Vec::new()
        } else {
            guard::metadata_ranges(self.fs)
        };
        for (b, (buf, kind)) in std::mem::take(&mut self.blocks) {
            if guard::covers(&meta, b) && !self.meta_writes.contains(&b) {
                continue;
            }
            txn.write_block(b, kind, buf)?;
        }
        if !self.truncates.is_empty() {
            let meta = guard::metadata_ranges(self.fs);
            for ino in std::mem::take(&mut self.truncates) {
                // A mapping found damaged on the way is left whole (the
                // check judges it): its changes are undone.
                txn.savepoint();
                match truncate::truncate(&mut txn, ino, &meta) {
                    Err(ext4r::Error::Corrupt { .. } | ext4r::Error::NoSpace) => {
                        txn.rollback_to_savepoint()
                    }
                    r => {
                        r?;
                        txn.release_savepoint();
                    }
                }
            }
        }
        if self.sb_dirty {
            txn.set_superblock(self.sb.clone());
        }
        txn.commit(Commit::InPlace)?;
        Ok(())
    }
}

/// Writes `sb` as the superblock of `fs` (the check's last word: state,
/// mount count, check time), through the write layer.
pub(crate) fn write_superblock(fs: &Filesystem, sb: Superblock, now: i64) -> Result<()> {
    let mut w = Writer::new(fs, now);
    w.sb = sb;
    w.sb_dirty = true;
    w.flush()
}
