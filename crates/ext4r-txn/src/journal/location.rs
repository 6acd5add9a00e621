//! Where the journal's blocks are: inside the filesystem (the journal
//! inode, whose block map the caller decodes) or on a device of its own.

use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET};
use ext4r_format::{BlockNr, FormatError};

/// Byte offset of the ext2 superblock of an external journal device (it is
/// formatted like a filesystem with the `journal_dev` feature).
pub const EXTERNAL_SB_OFFSET: u64 = SUPERBLOCK_OFFSET;

/// Writes `sb` as the ext2 superblock of an external journal device, its
/// metadata checksum stamped when the device has metadata_csum, and
/// flushes (e2fsck sets a bad checksum right so while it loads the
/// journal).
///
/// # Errors
/// The device's I/O errors.
pub fn write_external_superblock(
    dev: &(impl BlockDevice + ?Sized),
    sb: &mut Superblock,
) -> Result<()> {
    if sb.has_ro_compat(ext4r_format::features::RoCompat::METADATA_CSUM) {
        crate::csum::Checksums::stamp_superblock(sb);
    }
    dev.write_at(&sb.to_bytes(), EXTERNAL_SB_OFFSET)?;
    dev.flush()
}

/// The blocks of a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalLocation {
    /// An inode journal: entry `i` is the filesystem block holding journal
    /// block `i`, for the whole of the inode's size. Block 0 holds the
    /// journal superblock. A hole (block 0) cannot be read.
    Internal(BlockRuns),
    /// A journal device of its own, with the filesystem's block size:
    /// journal block `i` is device block `i`, and the journal superblock
    /// is at `superblock`, the block after the ext2 superblock area.
    External {
        /// Block of the journal superblock: 2 with 1 KiB blocks (the ext2
        /// superblock fills block 1), else 1 (e2fsprogs'
        /// `ext2fs_journal_sb_start`).
        superblock: u64,
        /// Blocks on the device (`s_blocks_count` of its ext2 superblock,
        /// capped at 2^32 - 1 as e2fsck does).
        blocks: u64,
    },
}

impl JournalLocation {
    /// An inode journal whose block `i` is filesystem block `blocks[i]`.
    pub fn internal(blocks: Vec<BlockNr>) -> Self {
        JournalLocation::Internal(BlockRuns::new(&blocks))
    }

    /// Reads the ext2 superblock of an external journal device and checks
    /// what e2fsck checks before trusting it: the magic, the `journal_dev`
    /// feature, the block size, and (when given) that its UUID is the
    /// filesystem's `s_journal_uuid`. A bad metadata checksum on it is not
    /// an error (e2fsck rewrites it; we only read).
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the failed check, or the device's I/O errors.
    pub fn external(
        dev: &(impl BlockDevice + ?Sized),
        fs_block_size: u32,
        journal_uuid: Option<&[u8; 16]>,
    ) -> Result<Self> {
        let corrupt = |e: FormatError| Error::corrupt("external journal superblock", e);
        let mut buf = [0u8; 1024];
        dev.read_at(&mut buf, EXTERNAL_SB_OFFSET)?;
        let sb = Superblock::parse(&buf).map_err(corrupt)?;
        if !sb.has_incompat(ext4r_format::features::Incompat::JOURNAL_DEV) {
            return Err(corrupt(FormatError::invalid(
                "s_feature_incompat",
                "journal_dev feature not set",
            )));
        }
        if sb.block_size() != Some(fs_block_size) {
            return Err(corrupt(FormatError::invalid(
                "s_log_block_size",
                format!(
                    "block size {:?} differs from the filesystem's {fs_block_size}",
                    sb.block_size()
                ),
            )));
        }
        if let Some(uuid) = journal_uuid {
            if &sb.s_uuid != uuid {
                return Err(corrupt(FormatError::invalid(
                    "s_uuid",
                    "not the filesystem's s_journal_uuid",
                )));
            }
        }
        let superblock = if fs_block_size == 1024 { 2 } else { 1 };
        Ok(JournalLocation::External {
            superblock,
            blocks: sb.blocks_count().min(u64::from(u32::MAX)),
        })
    }

    /// Journal blocks addressable (`j_total_len` before `s_maxlen` trims it).
    pub fn len(&self) -> u64 {
        match self {
            JournalLocation::Internal(r) => r.len,
            JournalLocation::External { blocks, .. } => *blocks,
        }
    }

    /// Whether no journal block is addressable.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The journal block holding the journal superblock.
    pub fn superblock_index(&self) -> u64 {
        match self {
            JournalLocation::Internal(_) => 0,
            JournalLocation::External { superblock, .. } => *superblock,
        }
    }

    /// The device block of journal block `index`, or `None` when it is out
    /// of range or a hole.
    pub fn device_block(&self, index: u64) -> Option<BlockNr> {
        match self {
            JournalLocation::Internal(r) => r.get(index).filter(|b| b.0 != 0),
            JournalLocation::External { blocks, .. } => (index < *blocks).then_some(BlockNr(index)),
        }
    }
}

/// The blocks of an inode journal as runs of consecutive block numbers:
/// a few entries for the contiguous journal mke2fs makes, where one entry
/// per block took 8 bytes a block (256 KiB for a 128 MiB journal) in every
/// tool that opened the filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRuns {
    /// (first journal block, first device block) of each run, by journal
    /// block; a run ends where the next starts (the last at `len`). A hole
    /// is a run of device block 0 that does not count up.
    runs: Vec<(u64, u64)>,
    len: u64,
}

impl BlockRuns {
    fn new(blocks: &[BlockNr]) -> Self {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (i, b) in blocks.iter().enumerate() {
            let i = i as u64;
            let follows = runs.last().is_some_and(|&(ji, db)| {
                if db == 0 {
                    b.0 == 0
                } else {
                    db.checked_add(i - ji) == Some(b.0)
                }
            });
            if !follows {
                runs.push((i, b.0));
            }
        }
        runs.shrink_to_fit();
        BlockRuns {
            runs,
            len: blocks.len() as u64,
        }
    }

    /// The device block of each journal block in order (0 for a hole).
    pub fn iter(&self) -> impl Iterator<Item = BlockNr> + '_ {
        (0..self.len).filter_map(move |i| self.get(i))
    }

    /// The device block of journal block `index` (0 for a hole).
    fn get(&self, index: u64) -> Option<BlockNr> {
        if index >= self.len {
            return None;
        }
        let at = self.runs.partition_point(|&(ji, _)| ji <= index);
        let (ji, db) = *self.runs.get(at.checked_sub(1)?)?;
        Some(BlockNr(if db == 0 { 0 } else { db + (index - ji) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    #[test]
    fn internal_maps_and_refuses_holes() {
        let l = JournalLocation::internal(vec![BlockNr(7), BlockNr(0), BlockNr(9)]);
        assert_eq!(l.len(), 3);
        assert_eq!(l.superblock_index(), 0);
        assert_eq!(l.device_block(0), Some(BlockNr(7)));
        assert_eq!(l.device_block(1), None);
        assert_eq!(l.device_block(3), None);
        assert_eq!(l.device_block(u64::MAX), None);
    }

    #[test]
    fn runs_give_back_every_block() {
        let blocks: Vec<BlockNr> = [5, 6, 7, 0, 0, 9, 10, 3, 4, 4, 0, 11]
            .iter()
            .map(|&b| BlockNr(b))
            .collect();
        let r = BlockRuns::new(&blocks);
        for (i, b) in blocks.iter().enumerate() {
            assert_eq!(r.get(i as u64), Some(*b), "block {i}");
        }
        assert_eq!(r.get(blocks.len() as u64), None);
        // A contiguous journal is one run.
        let one = BlockRuns::new(&(100..16_484).map(BlockNr).collect::<Vec<_>>());
        assert_eq!(one.runs.len(), 1);
        assert_eq!(one.get(16_383), Some(BlockNr(16_483)));
        assert!(BlockRuns::new(&[]).get(0).is_none());
    }

    #[test]
    fn external_needs_a_journal_dev_superblock() {
        let dev = MemDevice::new(1 << 20);
        assert!(JournalLocation::external(&dev, 1024, None).is_err());
        let mut sb = Superblock::zeroed();
        sb.s_magic.set(ext4r_format::superblock::EXT4_MAGIC);
        sb.set_blocks_count(1024);
        sb.s_uuid = [3; 16];
        dev.write_at(&sb.to_bytes(), 1024).unwrap();
        // No journal_dev feature yet.
        assert!(JournalLocation::external(&dev, 1024, None).is_err());
        sb.s_feature_incompat
            .set(ext4r_format::features::Incompat::JOURNAL_DEV.bits());
        dev.write_at(&sb.to_bytes(), 1024).unwrap();
        let l = JournalLocation::external(&dev, 1024, Some(&[3; 16])).unwrap();
        assert_eq!(
            l,
            JournalLocation::External {
                superblock: 2,
                blocks: 1024
            }
        );
        assert!(JournalLocation::external(&dev, 1024, Some(&[4; 16])).is_err());
        assert!(JournalLocation::external(&dev, 4096, None).is_err());
        assert_eq!(l.device_block(1023), Some(BlockNr(1023)));
        assert_eq!(l.device_block(1024), None);
    }
}
