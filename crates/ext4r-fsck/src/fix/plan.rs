//! What a repair planned at check time carries: the blocks and inodes the
//! check chose, and the bytes to write, so the writer only writes them.

use super::Owner;

/// A rebuilt tree: the inode's new `i_block` and the node blocks to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtentTree {
    /// The inode.
    pub ino: u32,
    /// The inode again, with its generation, for the node blocks' tails.
    pub owner: Owner,
    /// The new root.
    pub root: [u8; 60],
    /// Node blocks and their contents (tails are stamped when written).
    pub blocks: Vec<(u64, Vec<u8>)>,
    /// Blocks taken from free space and blocks of the old tree let go,
    /// when the repair moves them with the allocation statistics (bitmap
    /// bits, free counts and `i_blocks`); None leaves that to the next
    /// check.
    pub accounted: Option<(Vec<u64>, Vec<u64>)>,
}

/// One quota inode to hide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HideQuota {
    /// 0 user, 1 group.
    pub qtype: u8,
    /// The visible inode.
    pub from: u32,
    /// The reserved inode it moves to.
    pub to: u32,
    /// Its name in the root directory: (block, offset, the root).
    pub entry: Option<(u64, usize, Owner)>,
}

/// A new orphan file: how its blocks are mapped, and the blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrphanFile {
    /// The inode.
    pub ino: u32,
    /// Its owner, for the checksums of extent tree blocks.
    pub owner: Owner,
    /// The new `i_block`.
    pub root: [u8; 60],
    /// Extent-mapped (else a block map).
    pub extents: bool,
    /// Extent tree or indirect blocks and their contents.
    pub nodes: Vec<(u64, Vec<u8>)>,
    /// The data blocks, each to become an empty orphan block.
    pub blocks: Vec<u64>,
    /// The inode's generation (the blocks' checksums take it).
    pub generation: u32,
}

/// Where a block pointer is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtrAt {
    /// `i_block[slot]` of a block-mapped inode.
    InodeSlot(usize),
    /// Entry `i` of an indirect block.
    Indirect(u64, usize),
    /// Leaf entry `i` of an extent node (None: the root in the inode).
    Extent(Option<u64>, usize),
    /// Index entry `i` of an extent node (None: the root in the inode).
    ExtentIndex(Option<u64>, usize),
}

/// One copy: `len` blocks from `old` to `new`, and the pointer at `at`
/// (which holds `old`) set to `new`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockCopy {
    /// The pointer to move.
    pub at: PtrAt,
    /// Where the blocks are now.
    pub old: u64,
    /// Where the copies go.
    pub new: u64,
    /// How many blocks.
    pub len: u64,
    /// The blocks are an index or indirect block (no file data): a fix of
    /// a directory block never follows them to the copy.
    pub node: bool,
}

impl BlockCopy {
    /// The copied block is an extent tree node (its checksum tail is
    /// recomputed; the seed is the inode's, unchanged).
    pub fn is_extent_node(&self) -> bool {
        matches!(self.at, PtrAt::ExtentIndex(..))
    }
}

/// What the new lost+found gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewLostFound {
    /// Its inode.
    pub ino: u32,
    /// Its one directory block.
    pub block: u64,
}

/// Which of a group's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meta {
    /// The block bitmap.
    BlockBitmap,
    /// The inode bitmap.
    InodeBitmap,
    /// The inode table.
    InodeTable,
}

impl Meta {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Meta::BlockBitmap => "block bitmap",
            Meta::InodeBitmap => "inode bitmap",
            Meta::InodeTable => "inode table",
        }
    }
}
