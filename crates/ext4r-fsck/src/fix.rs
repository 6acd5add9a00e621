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

    fn add(&mut self, f: &Fix) -> Result<()> {
        let bs = self.fs.block_size();
        let huge = self.sb.has_ro_compat(RoCompat::HUGE_FILE);
        let wide = self.sb.has_incompat(Incompat::BIT64);
        match f {
            Fix::InodeChecksum(ino) => {
                self.inode(*ino)?;
            }
            Fix::InodeLinks(ino, n) => self.edit_inode(*ino, |i| i.i_links_count.set(*n))?,
            Fix::InodeBlocks(ino, blocks) => self.edit_inode(*ino, |i| {
                let _ = i.set_blocks_count(blocks * u64::from(bs / 512), huge, bs);
            })?,
            Fix::InodeSize(ino, size) => {
                self.edit_inode(*ino, |i| i.set_size(*size))?;
                // As libext2fs's ext2fs_inode_size_set: a regular file
                // made 2 GiB or more sets large_file (and a dynamic
                // revision) itself, so no later check finds it missing.
                let rec = self.inode(*ino)?;
                let regular = rec.get(..2).is_some_and(|m| m[1] & 0xF0 == 0x80);
                let wanted =
                    !self.sb.has_ro_compat(RoCompat::LARGE_FILE) || self.sb.s_rev_level.get() == 0;
                if regular && *size >= 0x8000_0000 && wanted {
                    self.add(&Fix::SetLargeFile)?;
                }
            }
            Fix::InodeClearDtime(ino) => self.edit_inode(*ino, |i| i.i_dtime.set(0))?,
            Fix::InodeClearFileAcl(ino) => self.edit_inode(*ino, |i| {
                i.i_file_acl_lo.set(0);
                i.l_i_file_acl_high.set(0);
            })?,
            Fix::InodeClearFileAclHigh(ino) => {
                self.edit_inode(*ino, |i| i.l_i_file_acl_high.set(0))?
            }
            Fix::DirBlockChecksum(b, owner) => {
                self.block(*b, owner.dir())?;
            }
            Fix::ExtentBlockChecksum(b, owner) => {
                self.block(*b, owner.extent())?;
            }
            Fix::XattrBlockChecksum(b) => {
                self.block(*b, BlockKind::Xattr)?;
            }
            Fix::XattrRefcount(b, n) => {
                let blk = self.block(*b, BlockKind::Xattr)?;
                blk[4..8].copy_from_slice(&n.to_le_bytes());
            }
            Fix::DirEntryClear(b, off, owner) => {
                let blk = self.block(*b, owner.dir())?;
                if let Some(x) = blk.get_mut(*off..*off + 4) {
                    x.copy_from_slice(&[0; 4]);
                }
            }
            Fix::DirEntryRename(b, off, name, owner) => {
                let blk = self.block(*b, owner.dir())?;
                let rec = blk
                    .get(*off + 4..*off + 6)
                    .map_or(0, |x| usize::from(u16::from_le_bytes([x[0], x[1]])));
                let n = name.len();
                // 0 (nothing written) for a name too long for a record.
                let n8 = u8::try_from(n).unwrap_or(0);
                if n8 > 0 && 8 + n <= rec {
                    if let Some(x) = blk.get_mut(*off + 8..*off + 8 + n) {
                        x.copy_from_slice(name);
                        blk[*off + 6] = n8;
                    }
                }
            }
            Fix::DirEntryFiletype(b, off, t, owner) => {
                let blk = self.block(*b, owner.dir())?;
                if let Some(x) = blk.get_mut(*off + 7) {
                    *x = *t;
                }
            }
            Fix::GroupFreeBlocks(g, n) => self.desc(*g)?.set_free_blocks_count(*n),
            Fix::GroupFreeInodes(g, n) => self.desc(*g)?.set_free_inodes_count(*n),
            Fix::GroupUsedDirs(g, n) => self.desc(*g)?.set_used_dirs_count(*n),
            Fix::GroupDescChecksum(g) => {
                self.desc(*g)?;
            }
            Fix::GroupDescFlags(g, clear, unused) => {
                let d = self.desc(*g)?;
                d.set_flags(d.flags() & !clear);
                if let Some(u) = unused {
                    d.set_itable_unused(*u);
                }
            }
            // Whole bitmaps from the recount; the write layer sets the
            // padding past the group's end, as mke2fs and the kernel leave
            // it, and stamps their checksums in the descriptor.
            Fix::BlockBitmap(g, bits) => {
                let raw = bits_to_bytes(bits, bs as usize);
                let d = self.desc(*g)?;
                d.set_flags(d.flags() & !BG_BLOCK_UNINIT);
                self.bitmaps.insert((*g, true), raw);
            }
            Fix::InodeBitmap(g, bits) => {
                let raw = bits_to_bytes(bits, bs as usize);
                let d = self.desc(*g)?;
                d.set_flags(d.flags() & !BG_INODE_UNINIT);
                self.bitmaps.insert((*g, false), raw);
            }
            Fix::InodeBlockSlot(ino, slot) => {
                let slot = *slot;
                self.edit_inode(*ino, |i| {
                    let mut w = i.block_words();
                    if let Some(x) = w.get_mut(slot) {
                        *x = 0;
                    }
                    i.set_block_words(&w);
                })?
            }
            Fix::IndirectEntry(b, idx) | Fix::ReservedGdtEntry(b, idx) => {
                if matches!(f, Fix::ReservedGdtEntry(..)) {
                    self.meta_writes.insert(*b);
                }
                // Indirect blocks carry no checksum.
                let blk = self.block(*b, BlockKind::Plain)?;
                if let Some(x) = blk.get_mut(idx * 4..idx * 4 + 4) {
                    x.copy_from_slice(&[0; 4]);
                }
            }
            Fix::ExtentRemove(ino, node, i, owner) => {
                self.extent_removals
                    .entry((*ino, *node))
                    .or_default()
                    .push((*i, *owner));
            }
            Fix::ExtentIndexStart(ino, node, i, lblk, owner) => {
                let buf: &mut [u8] = match node {
                    None => &mut self.inode(*ino)?[0x28..0x28 + 60],
                    Some(b) => self.block(*b, owner.extent())?,
                };
                let at = 12 + i * 12;
                if let Some(x) = buf.get_mut(at..at + 4) {
                    x.copy_from_slice(&lblk.to_le_bytes());
                }
            }
            Fix::RebuildExtents(t) | Fix::ExtentsFromMap(t) => {
                for (b, buf) in &t.blocks {
                    self.blocks.insert(*b, (buf.clone(), t.owner.extent()));
                }
                let rec = self.inode(t.ino)?;
                if let Some(x) = rec.get_mut(0x28..0x28 + 60) {
                    x.copy_from_slice(&t.root);
                }
                if matches!(f, Fix::ExtentsFromMap(_)) {
                    self.edit_inode(t.ino, |i| {
                        let v = i.i_flags.get() | ext4r_format::inode::InodeFlags::EXTENTS.bits();
                        i.i_flags.set(v);
                    })?;
                }
            }
            Fix::MoveJournal(from, b, off, owner) => {
                let rec = self.inode(*from)?.clone();
                let to = self.inode(ext4r_format::inode::ino::JOURNAL)?;
                let n = to.len().min(rec.len());
                to[..n].copy_from_slice(&rec[..n]);
                self.add(&Fix::DirEntryClear(*b, *off, *owner))?;
                self.add(&Fix::JournalInum(ext4r_format::inode::ino::JOURNAL))?;
                self.add(&Fix::ClearInode(*from))?;
                self.add(&Fix::FreeInode(*from, false))?;
            }
            Fix::HideQuota(h) => self.hide_quota(h)?,
            Fix::NewOrphanFile(n) => {
                let node_kind = if n.extents {
                    n.owner.extent()
                } else {
                    BlockKind::Plain
                };
                for (b, buf) in &n.nodes {
                    self.blocks.insert(*b, (buf.clone(), node_kind));
                }
                for &b in &n.blocks {
                    let mut buf = vec![0u8; bs as usize];
                    if ext4r_format::orphan::init_orphan_block(&mut buf).is_ok() {
                        let kind = BlockKind::Orphan {
                            ino: n.ino,
                            generation: n.generation,
                        };
                        self.blocks.insert(b, (buf, kind));
                    }
                }
                let rec = self.inode(n.ino)?;
                if let Some(x) = rec.get_mut(0x28..0x28 + 60) {
                    x.copy_from_slice(&n.root);
                }
                let held = (n.blocks.len() + n.nodes.len()) as u64 * u64::from(bs / 512);
                let flags = if n.extents {
                    ext4r_format::inode::InodeFlags::EXTENTS.bits()
                } else {
                    0
                };
                let size = n.blocks.len() as u64 * u64::from(bs);
                self.edit_inode(n.ino, |i| {
                    // As libext2fs's ext2fs_create_orphan_file: a regular
                    // file, mode 0600, one link, extent-mapped.
                    i.i_mode.set(0o100_600);
                    i.i_links_count.set(1);
                    i.i_dtime.set(0);
                    i.set_size(size);
                    let _ = i.set_blocks_count(held, huge, bs);
                    i.i_flags.set(flags);
                })?;
            }
            Fix::ExtentWritten(ino, node, i, owner) => {
                let buf: &mut [u8] = match node {
                    None => &mut self.inode(*ino)?[0x28..0x28 + 60],
                    Some(b) => self.block(*b, owner.extent())?,
                };
                // ee_len above 32768 marks an unwritten extent.
                let at = 12 + i * 12 + 4;
                if let Some(x) = buf.get_mut(at..at + 2) {
                    let len = u16::from_le_bytes([x[0], x[1]]);
                    if len > 32768 {
                        x.copy_from_slice(&(len - 32768).to_le_bytes());
                    }
                }
            }
            Fix::ExtentDepth(ino, node, depth, owner) => {
                let buf: &mut [u8] = match node {
                    None => &mut self.inode(*ino)?[0x28..0x28 + 60],
                    Some(b) => self.block(*b, owner.extent())?,
                };
                if let Some(x) = buf.get_mut(6..8) {
                    x.copy_from_slice(&depth.to_le_bytes());
                }
            }
            Fix::DirMakeDot(b, dir, owner) => {
                let ft = self.dir_ft();
                crate::dot::make_dot(self.block(*b, owner.dir())?, *dir, ft, bs);
            }
            Fix::DirMakeDotDot(b, off, owner) => {
                let ft = self.dir_ft();
                crate::dot::make_dotdot(self.block(*b, owner.dir())?, *off, ft, bs);
            }
            Fix::DirZeroByte(b, at, owner) => {
                if let Some(x) = self.block(*b, owner.dir())?.get_mut(*at) {
                    *x = 0;
                }
            }
            Fix::ClearInode(ino) => {
                let now = self.now;
                // As e2fsck_clear_inode: no flags left either.
                self.edit_inode(*ino, |i| {
                    i.i_links_count.set(0);
                    i.i_dtime.set(now);
                    i.i_flags.set(0);
                })?
            }
            Fix::InodeExtraIsize(ino, v) => self.edit_inode(*ino, |i| i.i_extra_isize.set(*v))?,
            Fix::ClearIbodyXattrs(ino) => {
                let rec = self.inode(*ino)?;
                // Only records with room past the fixed part have the area.
                if let Some(x) = rec.get(0x80..0x82) {
                    let extra = usize::from(u16::from_le_bytes([x[0], x[1]]));
                    let start = (128 + extra).min(rec.len());
                    rec[start..].fill(0);
                }
            }
            Fix::IbodyXattrHashes(ino, hashes) => {
                let rec = self.inode(*ino)?;
                for &(off, hash) in hashes {
                    // e_hash is the entry's last word (offset 12).
                    if let Some(x) = rec.get_mut(off + 12..off + 16) {
                        x.copy_from_slice(&hash.to_le_bytes());
                    }
                }
            }
            Fix::DirSalvage(b, off, prev, owner) => {
                let max_ino = self.sb.s_inodes_count.get();
                let csum = self.csum();
                let blk = self.block(*b, owner.dir())?;
                // Only metadata_csum blocks end in a tail.
                let end = if csum && crate::salvage::has_tail(blk, bs) {
                    blk.len() - 12
                } else {
                    blk.len()
                };
                crate::salvage::salvage(blk, *off, *prev, end, bs, max_ino);
            }
            Fix::CollapseDir(ino) => self.edit_inode(*ino, collapse_dir)?,
            Fix::ClearIndexFlag(ino) => self.edit_inode(*ino, |i| {
                let f = i.flags() - ext4r_format::inode::InodeFlags::INDEX;
                i.set_flags(f);
            })?,
            Fix::DirAddTail(b, owner) => {
                let blk = self.block(*b, owner.dir())?;
                add_tail(blk, bs);
            }
            Fix::DirEntryInode(b, off, target, owner) => {
                let blk = self.block(*b, owner.dir())?;
                if let Some(x) = blk.get_mut(*off..*off + 4) {
                    x.copy_from_slice(&target.to_le_bytes());
                }
            }
            Fix::Reconnect(ino, ft) => self.reconnect(*ino, *ft)?,
            Fix::SetIncompat(bits) => {
                let v = self.sb.s_feature_incompat.get() | bits;
                self.sb.s_feature_incompat.set(v);
                self.sb_dirty = true;
            }
            Fix::SetRoCompat(bits) => {
                let v = self.sb.s_feature_ro_compat.get() | bits;
                self.sb.s_feature_ro_compat.set(v);
                self.sb_dirty = true;
            }
            Fix::EaInodeRefCount(ino, refs) => self.edit_inode(*ino, |i| {
                i.i_ctime.set(num::hi32(*refs));
                i.l_i_version.set(num::lo32(*refs));
            })?,
            Fix::ClearIncompat(bits) => {
                let v = self.sb.s_feature_incompat.get() & !bits;
                self.sb.s_feature_incompat.set(v);
                self.sb_dirty = true;
            }
            Fix::SuperblockCounts(blocks, inodes) => {
                self.sb.set_free_blocks_count(*blocks);
                // At most s_inodes_count, a u32.
                self.sb.s_free_inodes_count.set(num::sat_u32(*inodes));
                self.sb_dirty = true;
            }
            Fix::SuperFreeBlocks(blocks) => {
                self.sb.set_free_blocks_count(*blocks);
                self.sb_dirty = true;
            }
            Fix::SuperFreeInodes(inodes) => {
                self.sb.s_free_inodes_count.set(num::sat_u32(*inodes));
                self.sb_dirty = true;
            }
            Fix::Each(fixes) => {
                for f in fixes {
                    self.add(f)?;
                }
            }
            Fix::CloneBlocks(ino, owner, copies) => {
                for cp in copies {
                    self.clone_blocks(*ino, *owner, cp)?;
                }
            }
            Fix::DeleteJournal => {
                crate::journal_fix::delete_journal(&mut self.sb);
                self.sb_dirty = true;
            }
            Fix::ResetJournalSuper(b, maxlen) => {
                // A sequence number unlike any the old log could hold.
                let seq = self.now ^ num::lo32(*b).rotate_left(16) ^ 0x5a5a_0001;
                let blk = self.block(*b, BlockKind::Plain)?;
                crate::journal_fix::reset_super(blk, bs, *maxlen, seq);
                let f = self.sb.s_feature_incompat.get() & !Incompat::RECOVER.bits();
                self.sb.s_feature_incompat.set(f);
                self.sb_dirty = true;
            }
            Fix::Superblock(e) => {
                if e.apply(&mut self.sb) {
                    for g in 0..self.fs.geometry().group_count {
                        self.desc(g)?;
                    }
                }
                self.sb_dirty = true;
            }
            Fix::JournalInum(ino) => {
                self.sb.s_journal_inum.set(*ino);
                self.sb_dirty = true;
            }
            Fix::RestoreJournalInode(ino) => {
                let sb = self.sb.clone();
                let rec = self.inode(*ino)?;
                let _ = crate::journal_check::backup_record(&sb, rec);
            }
            Fix::ClearV2JournalFields(b) => {
                crate::journal_fix::clear_v2_fields(self.block(*b, BlockKind::Plain)?);
            }
            Fix::InodeClearEpoch(ino) => {
                let rec = self.inode(*ino)?;
                if let Ok(inode) = Inode::parse(rec) {
                    let at: Vec<usize> = crate::pass1_rules::epoch_fields(&inode, rec).collect();
                    for a in at {
                        rec[a] &= !3;
                    }
                }
            }
            Fix::InodeZeroByte(ino, at) => {
                if let Some(x) = self.inode(*ino)?.get_mut(*at) {
                    *x = 0;
                }
            }
            Fix::InodeClearFaddr(ino) => self.edit_inode(*ino, |i| i.i_obso_faddr.set(0))?,
            Fix::InodeClearBlocksHigh(ino) => {
                self.edit_inode(*ino, |i| i.l_i_blocks_high.set(0))?
            }
            Fix::SuperExtraIsize(want, v) => {
                if *want {
                    self.sb.s_want_extra_isize.set(*v);
                } else {
                    self.sb.s_min_extra_isize.set(*v);
                }
                self.sb_dirty = true;
            }
            // Written by apply_at after the batch.
            Fix::UpdateQuota(..) => {}
            Fix::ClearQuotaInode(q) => {
                match q {
                    0 => self.sb.s_usr_quota_inum.set(0),
                    1 => self.sb.s_grp_quota_inum.set(0),
                    _ => self.sb.s_prj_quota_inum.set(0),
                }
                self.sb_dirty = true;
            }
            Fix::RestorePrimary => {
                self.sb.s_block_group_nr.set(0);
                self.sb_dirty = true;
                for g in 0..self.fs.geometry().group_count {
                    self.desc(g)?;
                }
            }
            Fix::OrphanBlockClear(b, ino, gen) => {
                let blk = self.block(*b, BlockKind::Plain)?;
                // Only a block that takes the orphan format gets its tail
                // stamped.
                if ext4r_format::orphan::init_orphan_block(blk).is_ok() {
                    if let Some(e) = self.blocks.get_mut(b) {
                        e.1 = BlockKind::Orphan {
                            ino: *ino,
                            generation: *gen,
                        };
                    }
                }
            }
            Fix::FreeBlocks(runs) => {
                for &(start, len) in runs {
                    for b in start..start.saturating_add(len) {
                        self.free_block(b)?;
                    }
                }
            }
            Fix::FreeInode(ino, dir) => self.free_inode(*ino, *dir)?,
            Fix::TruncateOrphan(ino) => {
                if !self.truncates.contains(ino) {
                    self.truncates.push(*ino);
                }
            }
            Fix::ClearLastOrphan => {
                self.sb.s_last_orphan.set(0);
                self.sb_dirty = true;
            }
            Fix::MakeLostFound(n) => self.make_lost_found(*n)?,
            Fix::InodeClearFlags(ino, bits) => self.edit_inode(*ino, |i| {
                i.i_flags.set(i.i_flags.get() & !bits);
            })?,
            Fix::InodeSetFlags(ino, bits) => self.edit_inode(*ino, |i| {
                i.i_flags.set(i.i_flags.get() | bits);
            })?,
            Fix::SetLargeDir => {
                let v = self.sb.s_feature_incompat.get() | Incompat::LARGEDIR.bits();
                self.sb.s_feature_incompat.set(v);
                self.sb_dirty = true;
            }
            Fix::SetLargeFile => {
                let v = self.sb.s_feature_ro_compat.get() | RoCompat::LARGE_FILE.bits();
                self.sb.s_feature_ro_compat.set(v);
                if self.sb.s_rev_level.get() == 0 {
                    self.sb.s_rev_level.set(1);
                    self.sb.s_first_ino.set(11);
                    self.sb.s_inode_size.set(128);
                }
                self.sb_dirty = true;
            }
            Fix::DirBlock0(ino, b, owner) => self.dir_block0(*ino, *b, *owner)?,
            Fix::DirBlockAt(ino, l, b, owner) => self.dir_block_at(*ino, *l, *b, *owner)?,
            Fix::DirNameFix(b, off, owner) => {
                let blk = self.block(*b, owner.dir())?;
                if let Some(&n) = blk.get(off + 6) {
                    let at = off + 8;
                    if let Some(name) = blk.get_mut(at..at + usize::from(n)) {
                        for x in name.iter_mut().filter(|x| **x == b'/' || **x == 0) {
                            *x = b'.';
                        }
                    }
                }
            }
            Fix::ExpandDir(ino, blocks) => self.expand_dir(*ino, blocks)?,
            Fix::RehashDir(r) => {
                let owner = Owner::new(r.ino, r.generation);
                for (b, buf) in &r.blocks {
                    self.blocks.insert(*b, (buf.clone(), owner.dir()));
                }
                let freed = r.release.len() as u64 * u64::from(bs / 512);
                self.edit_inode(r.ino, |i| {
                    let mut f = i.flags();
                    f.set(ext4r_format::inode::InodeFlags::INDEX, r.index);
                    i.set_flags(f);
                    if let Some((ib, size)) = &r.shrunk {
                        i.i_block = *ib;
                        i.set_size(*size);
                        let sectors = i.blocks_count(huge, bs).saturating_sub(freed);
                        let _ = i.set_blocks_count(sectors, huge, bs);
                    }
                })?;
                for b in &r.release {
                    self.free_block(*b)?;
                }
            }
            Fix::Relocate(g, what, at) | Fix::RelocateFrom(g, what, _, at) => {
                use crate::relocate::Meta;
                let n = match what {
                    Meta::InodeTable => u64::from(self.fs.geometry().inode_blocks_per_group()),
                    _ => 1,
                };
                for k in 0..n {
                    let data = match f {
                        Fix::RelocateFrom(_, _, from, _) => self
                            .block(from + k, BlockKind::Plain)
                            .map(|b| b.clone())
                            .unwrap_or_default(),
                        _ => Vec::new(),
                    };
                    let blk = self.block(at + k, BlockKind::Plain)?;
                    if data.len() == blk.len() {
                        blk.copy_from_slice(&data);
                    } else {
                        blk.fill(0);
                    }
                }
                let d = self.desc(*g)?;
                let (mut bb, mut ib, mut it) = (
                    d.block_bitmap(wide),
                    d.inode_bitmap(wide),
                    d.inode_table(wide),
                );
                match what {
                    Meta::BlockBitmap => bb = *at,
                    Meta::InodeBitmap => ib = *at,
                    Meta::InodeTable => it = *at,
                }
                d.set_locations(bb, ib, it);
                if *what == Meta::BlockBitmap {
                    d.set_flags(d.flags() & !BG_BLOCK_UNINIT);
                }
                if *what == Meta::InodeBitmap {
                    d.set_flags(d.flags() & !BG_INODE_UNINIT);
                }
            }
            Fix::MakeRoot(b) => self.make_root(*b)?,
            Fix::InlineTruncate(ino) => self.edit_inode(*ino, |i| {
                i.set_size(0);
                let f = i.flags() - ext4r_format::inode::InodeFlags::INLINE_DATA;
                i.set_flags(f);
                i.i_block = [0; 60];
            })?,
            Fix::InodeMode(ino, m) => self.edit_inode(*ino, |i| i.i_mode.set(*m))?,
            Fix::InlineParent(ino, p) => {
                let rec = self.inode(*ino)?;
                if let Some(x) = rec.get_mut(0x28..0x2c) {
                    x.copy_from_slice(&p.to_le_bytes());
                }
            }
            Fix::InlineEntryClear(ino, area, off) => {
                let rec = self.inode(*ino)?;
                if let Some(a) = crate::inline_dir::area_mut(rec, *area) {
                    if let Some(x) = a.get_mut(*off..*off + 4) {
                        x.copy_from_slice(&[0; 4]);
                    }
                }
                if *area == crate::inline_dir::AREA_DATA {
                    crate::inline_dir::rehash_data(rec);
                }
            }
            Fix::InlineEntryFiletype(ino, area, off, t) => {
                let rec = self.inode(*ino)?;
                if let Some(x) =
                    crate::inline_dir::area_mut(rec, *area).and_then(|a| a.get_mut(*off + 7))
                {
                    *x = *t;
                }
            }
            Fix::InlineNameFix(ino, area, off) => {
                let rec = self.inode(*ino)?;
                if let Some(a) = crate::inline_dir::area_mut(rec, *area) {
                    if let Some(&n) = a.get(off + 6) {
                        let at = off + 8;
                        if let Some(name) = a.get_mut(at..at + usize::from(n)) {
                            for x in name.iter_mut().filter(|x| **x == b'/' || **x == 0) {
                                *x = b'.';
                            }
                        }
                    }
                }
            }
            Fix::InlineSalvage(ino, area, off, prev) => {
                let max_ino = self.sb.s_inodes_count.get();
                let rec = self.inode(*ino)?;
                if let Some(a) = crate::inline_dir::area_mut(rec, *area) {
                    let end = a.len();
                    // Record lengths are raw below 64 KiB.
                    crate::salvage::salvage(a, *off, *prev, end, 4096, max_ino);
                }
                // The value changed: its entry's hash follows.
                if *area == crate::inline_dir::AREA_DATA {
                    crate::inline_dir::rehash_data(rec);
                }
            }
            Fix::InlineDirSize(ino, size) => {
                let rec = self.inode(*ino)?;
                let value = size.saturating_sub(60);
                if crate::inline_dir::set_data_len(rec, value) {
                    self.edit_inode(*ino, |i| i.set_size(*size as u64))?;
                }
            }
            Fix::ZeroInode(ino) => self.inode(*ino)?.fill(0),
            Fix::ResetMmp(b) => {
                let interval = self.sb.s_mmp_update_interval.get();
                let bs = self.fs.block_size() as usize;
                let data = crate::mmp::reset_block(interval, bs);
                self.blocks.insert(*b, (data, BlockKind::Mmp));
            }
            Fix::RecreateResizeInode(dind) => self.recreate_resize_inode(*dind)?,
            Fix::DropResizeFeature => self.drop_resize_feature(),
            Fix::ClearOrphanPresent => {
                let mut f = self.sb.features();
                f.ro_compat.remove(RoCompat::ORPHAN_PRESENT);
                self.sb.set_features(f);
                self.sb_dirty = true;
            }
        }
        Ok(())
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
