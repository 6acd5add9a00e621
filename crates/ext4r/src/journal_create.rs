//! Making an internal journal: libext2fs' `ext2fs_add_journal_inode3`,
//! the one way a journal is added to an existing filesystem. tune uses
//! `create` inside its own run (`-j`, `-J`, `-O has_journal`); fsck
//! calls [`add_journal`] when it recreates a journal it had to delete.
//! Placement and encoding are mkfs's (`crate::mkfs::journal`), as
//! e2fsprogs' tools share them.

use crate::device::BlockDevice;
use crate::error::{Error, Location, Result};
use crate::meta::Meta;
use crate::mkfs::journal::{self, JournalSpec, FC_RATIO, JOURNAL_INO};
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::inode::Inode;
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use std::sync::Arc;

/// Why an internal journal could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The filesystem has one already.
    #[error("The filesystem already has a journal")]
    Exists,
    /// Inode 8 still holds blocks.
    #[error("File exists")]
    InodeInUse,
    /// The filesystem is too small for the smallest journal.
    #[error("Filesystem too small for a journal")]
    TooSmall,
    /// No room for the journal's blocks (the allocator's words).
    #[error("{0}")]
    NoSpace(String),
}

/// The journal to make.
pub(crate) struct NewJournal {
    /// Journal blocks (the log).
    pub blocks: u64,
    /// Fast-commit blocks after it.
    pub fc_blocks: u64,
    /// Where to start looking for room (`-J location=`); the midpoint
    /// group's start, as mke2fs, by default.
    pub goal: Option<u64>,
    /// A version 1 journal superblock.
    pub v1: bool,
    /// Its times.
    pub now: i64,
}

/// Makes the internal journal in `m` (inode 8, its blocks zeroed, the jbd2
/// superblock written) and records it in `sb`, as libext2fs'
/// `ext2fs_add_journal_inode3` does: the one way tune and fsck add a
/// journal (mkfs plans its own with the same placement and encoding).
pub(crate) fn create(
    m: &mut Meta,
    sb: &mut Superblock,
    spec: &NewJournal,
) -> Result<std::result::Result<(), JournalError>> {
    if sb.has_compat(Compat::HAS_JOURNAL) {
        return Ok(Err(JournalError::Exists));
    }
    let old = m.read_inode(JOURNAL_INO)?;
    let old = Inode::parse(&old).map_err(|e| Error::corrupt(Location::inode(JOURNAL_INO), e))?;
    if old.i_blocks_lo.get() > 0 {
        return Ok(Err(JournalError::InodeInUse));
    }
    let total = spec.blocks + spec.fc_blocks;
    let extents = sb.has_incompat(Incompat::EXTENTS);
    let goal = spec.goal.unwrap_or_else(|| journal::journal_goal(&*m));
    let place = match journal::allocate(m, extents, goal, total) {
        Ok(p) => p,
        Err(e) => return Ok(Err(JournalError::NoSpace(crate::error::chain(&e)))),
    };
    let bs = u64::from(m.geo.block_size);
    let ratio = m.geo.cluster_ratio();
    let img = journal::encode(
        &place,
        &JournalSpec {
            block_size: num::index(bs),
            inode_size: usize::from(sb.inode_size()),
            cluster_ratio: ratio,
            now: spec.now,
            uuid: &sb.s_uuid,
            fc_blocks: spec.fc_blocks,
            v1: spec.v1,
        },
    )?;
    // EXT2_FALLOCATE_ZERO_BLOCKS: the journal is never left lazy here.
    for &(s, n) in &img.data {
        m.zero_blocks(s, n)?;
    }
    for (b, kind, buf) in img.blocks {
        m.write_meta_block(b, kind, buf)?;
    }
    m.write_inode(JOURNAL_INO, img.inode.bytes)?;
    for (i, v) in img.jnl_blocks.iter().enumerate() {
        sb.s_jnl_blocks[i].set(*v);
    }
    sb.s_jnl_backup_type = 1;
    sb.s_journal_inum.set(JOURNAL_INO);
    sb.s_journal_dev.set(0);
    sb.s_journal_uuid = [0; 16];
    sb.s_feature_compat
        .set(sb.s_feature_compat.get() | Compat::HAS_JOURNAL.bits());
    let over = sb.s_overhead_clusters.get();
    sb.s_overhead_clusters
        .set(over.wrapping_add(num::sat_u32(total.div_ceil(ratio))));
    Ok(Ok(()))
}

/// Adds an internal journal of the default size (fast-commit area
/// included when the feature asks for one) to an unmounted filesystem
/// that has none, placed where mke2fs and tune2fs put it, in one in-place
/// transaction: what e2fsck does when it recreates a journal it had to
/// delete. Returns the journal's size in blocks (without the fast-commit
/// area).
///
/// # Errors
/// I/O errors and unreadable superblocks; a journal that cannot be made
/// is the inner [`JournalError`].
pub fn add_journal(
    dev: Arc<dyn BlockDevice>,
    now: i64,
) -> Result<std::result::Result<u64, JournalError>> {
    let mut buf = [0u8; ext4r_format::superblock::SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, ext4r_format::superblock::SUPERBLOCK_OFFSET)?;
    let mut sb = Superblock::parse(&buf).map_err(|e| crate::Error::corrupt("superblock", e))?;
    let Some(blocks) = journal::default_journal_blocks(sb.blocks_count()) else {
        return Ok(Err(JournalError::TooSmall));
    };
    let fc = if sb.has_compat(Compat::FAST_COMMIT) {
        blocks / FC_RATIO
    } else {
        0
    };
    let mut m = Meta::load(&dev, &sb)?;
    let spec = NewJournal {
        blocks,
        fc_blocks: fc,
        goal: None,
        v1: false,
        now,
    };
    if let Err(e) = create(&mut m, &mut sb, &spec)? {
        return Ok(Err(e));
    }
    let table = m.flush(&mut sb)?;
    ext4r_txn::flush::flush_super(dev.as_ref(), &mut sb, Some(&table), now, false)?;
    Ok(Ok(blocks))
}
