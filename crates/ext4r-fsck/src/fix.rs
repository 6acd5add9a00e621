//! Repairs as data: what a problem needs changed on disk. A check plans
//! the change when it finds the problem (choosing blocks and inodes then),
//! so a fix is a plain value that the writer (`crate::writer`) applies;
//! nothing here reads the filesystem or knows the checks.

pub(crate) mod plan;
pub(crate) mod super_edit;

use plan::{BlockCopy, ExtentTree, HideQuota, Meta, NewLostFound, NewOrphanFile};
use super_edit::SuperEdit;

use ext4r_format::inode::{inode_csum_seed, Inode};
use ext4r_format::InodeNr;
use ext4r_txn::csum::BlockKind;

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
    /// node blocks; see [`ExtentTree`]).
    RebuildExtents(Box<ExtentTree>),
    /// Turn a block-mapped inode into an extent-mapped one over the same
    /// blocks: the tree written as [`Fix::RebuildExtents`], the extents
    /// flag set.
    ExtentsFromMap(Box<ExtentTree>),
    /// Move the journal from this inode, named at (block, offset) in the
    /// root directory (its owner), to the reserved journal inode.
    MoveJournal(u32, u64, usize, Owner),
    /// Move a visible quota inode to its reserved inode (see the
    /// `quota_hide` module).
    HideQuota(Box<HideQuota>),
    /// Make the orphan file anew (see the `orphan_file` module).
    NewOrphanFile(Box<NewOrphanFile>),
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
    CloneBlocks(u32, Owner, Vec<BlockCopy>),
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
    /// Change the superblock (see [`SuperEdit`]).
    Superblock(SuperEdit),
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
    /// its size freed (see `writer/truncate.rs`).
    TruncateOrphan(u32),
    /// Create /lost+found with this inode and block.
    MakeLostFound(NewLostFound),
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
    Relocate(u32, Meta, u64),
    /// Move a group's bitmap or inode table from the first block to the
    /// second, copying it (e2fsck's "Relocating ... from X to Y").
    RelocateFrom(u32, Meta, u64, u64),
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
    /// The directory block a fix edits (its physical number, to change
    /// when the block moves) and the directory's owner.
    pub(crate) fn dir_block_mut(&mut self) -> Option<(&mut u64, Owner)> {
        match self {
            Fix::DirBlockChecksum(b, o)
            | Fix::DirEntryClear(b, _, o)
            | Fix::DirEntryRename(b, _, _, o)
            | Fix::DirEntryFiletype(b, _, _, o)
            | Fix::DirMakeDot(b, _, o)
            | Fix::DirMakeDotDot(b, _, o)
            | Fix::DirZeroByte(b, _, o)
            | Fix::DirSalvage(b, _, _, o)
            | Fix::DirAddTail(b, o)
            | Fix::DirEntryInode(b, _, _, o)
            | Fix::DirNameFix(b, _, o) => Some((b, *o)),
            _ => None,
        }
    }

    /// [`Fix::dir_block_mut`], read.
    pub(crate) fn dir_block(&self) -> Option<(u64, Owner)> {
        self.clone().dir_block_mut().map(|(b, o)| (*b, o))
    }

    /// Whether the fix (or one it groups) changes directory block `phys`
    /// beyond its checksum: e2fsck's `dir_modified` for that block.
    pub(crate) fn mends_dir_block(&self, phys: u64) -> bool {
        match self {
            Fix::Each(inner) => inner.iter().any(|f| f.mends_dir_block(phys)),
            Fix::DirBlockChecksum(..) => false,
            _ => self.dir_block().is_some_and(|(b, _)| b == phys),
        }
    }

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
