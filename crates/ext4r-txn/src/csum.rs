//! The one place that stamps metadata checksums.
//!
//! Callers say what a block *is* ([`BlockKind`]); [`Checksums`] knows from
//! the superblock which checksum, if any, that kind carries on this
//! filesystem (metadata_csum's crc32c, gdt_csum's crc16 for descriptors,
//! none at all on ext2/3), and computes it with the format crate's
//! functions. A transaction stamps every block, inode record, bitmap,
//! descriptor and superblock it writes through here, when it writes it;
//! no caller computes a checksum itself.

use crate::error::{Error, Result};
use ext4r_format::dir::{
    set_dir_block_checksum, verify_dir_block_checksum, DirEntry2, DirEntryTail,
};
use ext4r_format::extent::{set_extent_block_checksum, verify_extent_block_checksum};
use ext4r_format::features::RoCompat;
use ext4r_format::group_desc::{bitmap_checksum, GroupDesc, GroupDescCsum};
use ext4r_format::htree::{set_dx_checksum, verify_dx_checksum, DxRoot};
use ext4r_format::inode::{inode_csum_seed, set_inode_checksum, verify_inode_checksum};
use ext4r_format::jbd2::{set_block_tail_checksum, set_commit_block_checksum, JournalSuperblock};
use ext4r_format::mmp::{MmpStruct, MMP_SIZE};
use ext4r_format::orphan::set_orphan_block_checksum;
use ext4r_format::superblock::Superblock;
use ext4r_format::xattr::{set_xattr_block_checksum, verify_xattr_block_checksum};
use ext4r_format::{BlockNr, FormatError, InodeNr};
use zerocopy::FromBytes;

/// What a block holds, for its checksum. The owner's inode number and
/// generation seed the checksums of blocks that belong to one inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlockKind {
    /// No checksum of its own: file data, indirect blocks, inode table
    /// blocks written whole, bitmaps (their checksums live in the
    /// descriptor), journal blocks.
    Plain,
    /// An extent tree block (index or leaf) of an inode.
    Extent {
        /// The inode.
        ino: u32,
        /// Its `i_generation`.
        generation: u32,
    },
    /// A directory block of an inode: a leaf with a checksum tail, or an
    /// htree root or interior node, told apart by its contents. A leaf
    /// without room for a tail is left as it is (e2fsck -fD makes room).
    Dir {
        /// The directory inode.
        ino: u32,
        /// Its `i_generation`.
        generation: u32,
    },
    /// A directory leaf block known to carry a checksum tail: stamping
    /// fails when it has none.
    DirLeaf {
        /// The directory inode.
        ino: u32,
        /// Its `i_generation`.
        generation: u32,
    },
    /// An htree root or interior node: stamping fails when it has no room
    /// for its tail.
    DirIndex {
        /// The directory inode.
        ino: u32,
        /// Its `i_generation`.
        generation: u32,
    },
    /// An extended attribute block (its checksum covers its block number).
    Xattr,
    /// A block of the orphan file.
    Orphan {
        /// The orphan file's inode.
        ino: u32,
        /// Its `i_generation`.
        generation: u32,
    },
    /// The MMP block.
    Mmp,
}

impl BlockKind {
    /// What a block of this kind is, for messages.
    pub fn what(self) -> &'static str {
        match self {
            BlockKind::Plain => "block",
            BlockKind::Extent { .. } => "extent block",
            BlockKind::Dir { .. } | BlockKind::DirLeaf { .. } => "directory block",
            BlockKind::DirIndex { .. } => "directory index block",
            BlockKind::Xattr => "xattr block",
            BlockKind::Orphan { .. } => "orphan file block",
            BlockKind::Mmp => "MMP block",
        }
    }
}

/// Which checksums this filesystem carries, and their seeds.
#[derive(Debug, Clone)]
pub struct Checksums {
    metadata_csum: bool,
    desc: Option<GroupDescCsum>,
    seed: u32,
    desc_size: usize,
    block_bitmap_bytes: usize,
    inode_bitmap_bytes: usize,
}

fn corrupt(what: String, e: FormatError) -> Error {
    Error::corrupt(what, e)
}

impl Checksums {
    /// The checksums of the filesystem whose superblock is `sb`.
    pub fn new(sb: &Superblock) -> Self {
        let metadata_csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
        let seed = sb.csum_seed();
        let desc = if metadata_csum {
            Some(GroupDescCsum::Crc32c { seed })
        } else if sb.has_ro_compat(RoCompat::GDT_CSUM) {
            Some(GroupDescCsum::Crc16 { uuid: sb.s_uuid })
        } else {
            None
        };
        let desc_size = usize::from(sb.desc_size());
        let cluster_bits = sb
            .s_log_cluster_size
            .get()
            .saturating_sub(sb.s_log_block_size.get());
        let clusters_per_group = if sb.has_ro_compat(RoCompat::BIGALLOC) {
            sb.s_clusters_per_group.get()
        } else {
            sb.s_blocks_per_group.get() >> cluster_bits.min(31)
        };
        Checksums {
            metadata_csum,
            desc,
            seed,
            desc_size,
            block_bitmap_bytes: (clusters_per_group / 8) as usize,
            inode_bitmap_bytes: (sb.s_inodes_per_group.get() / 8) as usize,
        }
    }

    /// Whether metadata_csum is on.
    pub fn metadata_csum(&self) -> bool {
        self.metadata_csum
    }

    /// The filesystem's checksum seed.
    pub fn seed(&self) -> u32 {
        self.seed
    }

    fn inode_seed(&self, ino: u32, generation: u32) -> u32 {
        inode_csum_seed(self.seed, InodeNr(ino), generation)
    }

    /// Stamps the checksum of block `nr`, of kind `kind`, into `buf`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the block cannot carry its checksum (an
    /// extent or xattr block whose header is damaged, an orphan block of the
    /// wrong size): the caller asked to write a block that does not follow
    /// the format.
    pub fn stamp_block(&self, kind: BlockKind, nr: u64, buf: &mut [u8]) -> Result<()> {
        if !self.metadata_csum {
            return Ok(());
        }
        let place = || format!("block {nr}");
        match kind {
            BlockKind::Plain => Ok(()),
            BlockKind::Extent { ino, generation } => {
                set_extent_block_checksum(self.inode_seed(ino, generation), buf)
                    .map_err(|e| corrupt(place(), e))
            }
            BlockKind::Dir { ino, generation } => {
                let seed = self.inode_seed(ino, generation);
                // An htree node may keep a stale leaf tail at its end (the
                // kernel leaves the old leaf's bytes past its entries): its
                // shape decides first.
                if dx_shaped(buf) && set_dx_checksum(seed, buf).is_ok() {
                    Ok(())
                } else if DirEntryTail::find(buf).is_some() {
                    set_dir_block_checksum(seed, buf).map_err(|e| corrupt(place(), e))
                } else {
                    // An htree node, or a leaf with no room for a tail:
                    // only the former has a checksum to stamp.
                    let _no_room = set_dx_checksum(seed, buf);
                    Ok(())
                }
            }
            BlockKind::DirLeaf { ino, generation } => {
                set_dir_block_checksum(self.inode_seed(ino, generation), buf)
                    .map_err(|e| corrupt(place(), e))
            }
            BlockKind::DirIndex { ino, generation } => {
                set_dx_checksum(self.inode_seed(ino, generation), buf)
                    .map_err(|e| corrupt(place(), e))
            }
            BlockKind::Xattr => set_xattr_block_checksum(self.seed, BlockNr(nr), buf)
                .map_err(|e| corrupt(place(), e)),
            BlockKind::Orphan { ino, generation } => {
                set_orphan_block_checksum(buf, self.seed, InodeNr(ino), generation, BlockNr(nr))
                    .map_err(|e| corrupt(place(), e))
            }
            BlockKind::Mmp => {
                let mut mmp = MmpStruct::parse(buf).map_err(|e| corrupt(place(), e))?;
                self.stamp_mmp(&mut mmp);
                buf[..MMP_SIZE].copy_from_slice(&mmp.to_bytes());
                Ok(())
            }
        }
    }

    /// Stamps the checksum of an MMP block's structure (where the
    /// filesystem has metadata checksums): what [`Checksums::stamp_block`]
    /// does for [`BlockKind::Mmp`], for the MMP writer, which holds the
    /// structure rather than a block.
    pub fn stamp_mmp(&self, mmp: &mut MmpStruct) {
        if self.metadata_csum {
            mmp.update_checksum(self.seed);
        }
    }

    /// Whether the checksum of block `nr` of kind `kind` is right (always
    /// true where the filesystem has none).
    pub fn block_ok(&self, kind: BlockKind, nr: u64, buf: &[u8]) -> bool {
        if !self.metadata_csum {
            return true;
        }
        match kind {
            BlockKind::Plain | BlockKind::Orphan { .. } | BlockKind::Mmp => true,
            BlockKind::Extent { ino, generation } => {
                verify_extent_block_checksum(self.inode_seed(ino, generation), buf).is_ok()
            }
            BlockKind::Dir { ino, generation } => {
                let seed = self.inode_seed(ino, generation);
                verify_dir_block_checksum(seed, buf).is_ok()
                    || verify_dx_checksum(seed, buf).is_ok()
            }
            BlockKind::DirLeaf { ino, generation } => {
                verify_dir_block_checksum(self.inode_seed(ino, generation), buf).is_ok()
            }
            BlockKind::DirIndex { ino, generation } => {
                verify_dx_checksum(self.inode_seed(ino, generation), buf).is_ok()
            }
            BlockKind::Xattr => verify_xattr_block_checksum(self.seed, BlockNr(nr), buf).is_ok(),
        }
    }

    /// Stamps the checksum of inode `ino`'s on-disk record (all
    /// `s_inode_size` bytes).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the record is shorter than 128 bytes.
    pub fn stamp_inode(&self, ino: u32, record: &mut [u8]) -> Result<()> {
        if !self.metadata_csum {
            return Ok(());
        }
        set_inode_checksum(self.seed, InodeNr(ino), record)
            .map_err(|e| corrupt(format!("inode {ino}"), e))
    }

    /// Whether inode `ino`'s record carries the right checksum.
    pub fn inode_ok(&self, ino: u32, record: &[u8]) -> bool {
        !self.metadata_csum || verify_inode_checksum(self.seed, InodeNr(ino), record).is_ok()
    }

    /// Stores the checksums of group `g`'s bitmaps in its descriptor
    /// (metadata_csum only), each over the bytes the format says it covers.
    pub fn stamp_bitmaps(
        &self,
        desc: &mut GroupDesc,
        block_bitmap: Option<&[u8]>,
        inode_bitmap: Option<&[u8]>,
    ) {
        if !self.metadata_csum {
            return;
        }
        if let Some(b) = block_bitmap {
            let n = self.block_bitmap_bytes.min(b.len());
            desc.set_block_bitmap_csum(bitmap_checksum(self.seed, &b[..n]), self.desc_size);
        }
        if let Some(b) = inode_bitmap {
            let n = self.inode_bitmap_bytes.min(b.len());
            desc.set_inode_bitmap_csum(bitmap_checksum(self.seed, &b[..n]), self.desc_size);
        }
    }

    /// Whether `desc` carries the right checksum of its group's block
    /// bitmap `bitmap` (the on-disk block); always true without
    /// metadata_csum.
    pub fn block_bitmap_ok(&self, desc: &GroupDesc, bitmap: &[u8]) -> bool {
        let mut d = *desc;
        self.stamp_bitmaps(&mut d, Some(bitmap), None);
        d.bg_block_bitmap_csum_lo == desc.bg_block_bitmap_csum_lo
            && d.bg_block_bitmap_csum_hi == desc.bg_block_bitmap_csum_hi
    }

    /// Whether `desc` carries the right checksum of its group's inode
    /// bitmap `bitmap`; always true without metadata_csum.
    pub fn inode_bitmap_ok(&self, desc: &GroupDesc, bitmap: &[u8]) -> bool {
        let mut d = *desc;
        self.stamp_bitmaps(&mut d, None, Some(bitmap));
        d.bg_inode_bitmap_csum_lo == desc.bg_inode_bitmap_csum_lo
            && d.bg_inode_bitmap_csum_hi == desc.bg_inode_bitmap_csum_hi
    }

    /// Stamps group `g`'s descriptor checksum (crc32c or crc16, or nothing
    /// without uninit_bg/metadata_csum).
    pub fn stamp_desc(&self, g: u32, desc: &mut GroupDesc) {
        if let Some(cs) = &self.desc {
            // The size was checked when the superblock was opened; a
            // descriptor size the format refuses keeps its old checksum.
            let _size_checked_at_open = desc.update_checksum(g, self.desc_size, cs);
        }
    }

    /// Whether group `g`'s descriptor carries the right checksum.
    pub fn desc_ok(&self, g: u32, desc: &GroupDesc) -> bool {
        match &self.desc {
            Some(cs) => desc
                .compute_checksum(g, self.desc_size, cs)
                .is_ok_and(|c| c == desc.bg_checksum.get()),
            None => true,
        }
    }

    /// The value hash an EA inode keeps in its `i_atime` (ea_inode):
    /// crc32c of the value from the filesystem's checksum seed, with or
    /// without metadata_csum, as the kernel computes it.
    pub fn ea_inode_hash(&self, value: &[u8]) -> u32 {
        ext4r_format::checksum::crc32c(self.seed, value)
    }

    /// Stamps the superblock's own checksum (metadata_csum).
    pub fn stamp_superblock(sb: &mut Superblock) {
        sb.update_checksum();
    }

    /// Stamps a jbd2 journal superblock (v2/v3 checksums).
    pub fn stamp_journal_superblock(jsb: &mut JournalSuperblock) {
        jsb.update_checksum();
    }

    /// Stamps the tail of a journal descriptor or revoke block (v2/v3).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the block is too small for a tail.
    pub fn stamp_journal_tail(jseed: u32, block: &mut [u8]) -> Result<()> {
        set_block_tail_checksum(jseed, block).map_err(|e| corrupt("journal block".into(), e))
    }

    /// Stamps a journal commit block (v2/v3).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the block is too small.
    pub fn stamp_journal_commit(jseed: u32, block: &mut [u8]) -> Result<()> {
        set_commit_block_checksum(jseed, block).map_err(|e| corrupt("journal commit".into(), e))
    }
}

/// Whether directory block `buf` has the shape of an htree node: an
/// interior node's one empty entry spanning the block, or a root's `.`
/// and a `..` reaching the block's end (a leaf's `..` stops before its
/// checksum tail).
fn dx_shaped(buf: &[u8]) -> bool {
    let bs = buf.len();
    // Lengths of 64 KiB are stored as 0 or 65535.
    let rec_len = |e: &DirEntry2| -> usize {
        let v = usize::from(e.rec_len.get());
        if bs >= 65536 && (v == 0 || v == 65535) {
            65536
        } else {
            v
        }
    };
    // Shorter than a root's fixed part (32 bytes): neither.
    let Ok((root, _)) = DxRoot::read_from_prefix(buf) else {
        return false;
    };
    if root.dot.inode.get() == 0 && rec_len(&root.dot) == bs {
        return true;
    }
    rec_len(&root.dot) == 12
        && root.dot.name_len == 1
        && root.dot_name[0] == b'.'
        && root.dotdot.name_len == 2
        && rec_len(&root.dotdot) == bs - 12
}
