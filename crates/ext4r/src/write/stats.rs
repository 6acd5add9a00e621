//! Numbers an embedder that serves the filesystem to others needs and
//! the rest of the write API does not hand out: the whole filesystem's
//! counts (statfs(2)) and an inode's allocated size in 512-byte units
//! (`st_blocks`), both as the running transaction has them.

use super::WriteFs;
use ext4r_format::inode::Inode;

/// Space and inode counts of the filesystem, as statfs(2) reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FsStats {
    /// The block size in bytes.
    pub block_size: u64,
    /// Blocks in the filesystem (`s_blocks_count`).
    pub blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Free blocks an unprivileged user may take: free less the reserved
    /// (`s_r_blocks_count`).
    pub avail_blocks: u64,
    /// Inodes in the filesystem.
    pub inodes: u64,
    /// Free inodes.
    pub free_inodes: u64,
}

impl WriteFs {
    /// The filesystem's counts, operations not yet committed included.
    pub fn fs_stats(&self) -> FsStats {
        let sb = self.txn.superblock();
        let free_blocks = self.free_blocks();
        FsStats {
            block_size: self.shape.bs as u64,
            blocks: sb.blocks_count(),
            free_blocks,
            avail_blocks: free_blocks.saturating_sub(sb.r_blocks_count()),
            inodes: u64::from(sb.s_inodes_count.get()),
            free_inodes: self.free_inodes(),
        }
    }

    /// The space inode `i` holds, in 512-byte units (`st_blocks`), read
    /// with this filesystem's `huge_file` rule.
    pub fn sectors(&self, i: &Inode) -> u64 {
        i.blocks_count(self.shape.huge_file, self.shape.bs32)
    }
}
