//! Where the object model's blocks and inodes come from ([`Source`]), and
//! the verified reads every other part of it goes through.

use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::inode::{Inode, InodeFlags, I_BLOCK_SIZE};
use ext4r_format::superblock::Superblock;
use ext4r_format::{FormatError, InodeNr};
use ext4r_txn::csum::BlockKind;
use ext4r_txn::error::Location;
use ext4r_txn::map::{self, BlockSource, Run};
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;

use crate::error::{Error, Result};

/// An inode as loaded: its number, the decoded fixed part and the whole
/// on-disk record (the in-inode xattrs live past the fixed part).
#[derive(Clone)]
pub struct InodeInfo {
    /// The inode number.
    pub ino: InodeNr,
    /// The decoded inode.
    pub inode: Inode,
    /// The on-disk record, `s_inode_size` bytes.
    pub record: Vec<u8>,
}

impl core::fmt::Debug for InodeInfo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("InodeInfo")
            .field("ino", &self.ino.0)
            .field("inode", &self.inode)
            .finish_non_exhaustive()
    }
}

/// Where the object model's blocks and inodes come from.
pub(crate) trait Source: BlockSource {
    /// The superblock the filesystem's features are read from.
    fn superblock(&self) -> &Superblock;

    /// Inode `ino`, its record verified where the source verifies.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the inode: a number outside the
    /// filesystem, an unreadable record, a checksum mismatch.
    fn inode(&self, ino: InodeNr) -> Result<InodeInfo>;

    /// `buf.len()` bytes (whole blocks) from block `first` on, as the
    /// source has them, unverified: file data, or a run of metadata
    /// blocks that the caller verifies one by one ([`verified`]).
    ///
    /// # Errors
    /// [`Error::Corrupt`] for blocks outside the filesystem (named by
    /// `what`, called only then: a lookup reads a directory per name),
    /// I/O errors.
    fn read_run(&self, first: u64, buf: &mut [u8], what: &dyn Fn() -> String) -> Result<()>;
}

impl Source for Transaction<Volume> {
    fn superblock(&self) -> &Superblock {
        Transaction::superblock(self)
    }

    fn inode(&self, ino: InodeNr) -> Result<InodeInfo> {
        let record = self.read_inode_checked(ino.0)?;
        let inode = Inode::parse(&record).map_err(|e| Error::corrupt(Location::inode(ino.0), e))?;
        Ok(InodeInfo { ino, inode, record })
    }

    fn read_run(&self, first: u64, buf: &mut [u8], what: &dyn Fn() -> String) -> Result<()> {
        let bs = u64::from(BlockSource::block_size(self));
        let count = (buf.len() as u64).div_ceil(bs).max(1);
        if self.check_blocks(first, count, "").is_err() {
            self.check_blocks(first, count, &what())?;
        }
        self.read_blocks(first, buf)
    }
}

/// Whether `nr`, read as `buf`, passes its checksum of kind `kind` where
/// `src` verifies (blocks the source changed itself are not stamped yet
/// and are taken as they are).
pub(crate) fn verified(
    src: &(impl Source + ?Sized),
    kind: BlockKind,
    nr: u64,
    buf: &[u8],
) -> Result<()> {
    match src.verify() {
        Some(cs) if !src.trusted(nr) && !src.was_verified(nr, kind) => {
            if !cs.block_ok(kind, nr, buf) {
                return Err(Error::corrupt(
                    kind_location(kind, nr),
                    FormatError::invalid(kind.what(), "checksum does not match"),
                ));
            }
            src.note_verified(nr, kind);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Where a block of kind `kind` is, for an error: the inode that owns it
/// when the kind names one.
fn kind_location(kind: BlockKind, nr: u64) -> Location {
    match kind {
        BlockKind::Dir { ino, .. }
        | BlockKind::DirLeaf { ino, .. }
        | BlockKind::DirIndex { ino, .. }
        | BlockKind::Extent { ino, .. } => Location::inode(ino).of(kind.what()).at_block(nr),
        _ => Location::block(nr).of(kind.what()),
    }
}

/// Metadata block `nr` of kind `kind`, its checksum verified where the
/// source verifies.
///
/// # Errors
/// [`Error::Corrupt`] naming the block on a mismatch or outside the
/// filesystem; I/O errors.
pub(crate) fn meta_block(
    src: &(impl Source + ?Sized),
    nr: u64,
    kind: BlockKind,
) -> Result<Vec<u8>> {
    // The bounds error names the kind and block; the full place is built
    // only for a checksum error (this runs for every metadata block).
    let b = src.read_block(nr, kind.what())?;
    verified(src, kind, nr, &b)?;
    Ok(b)
}

/// The filesystem's 64bit feature: block numbers have high halves.
pub(crate) fn wide(sb: &Superblock) -> bool {
    sb.has_incompat(Incompat::BIT64)
}

/// A fast symlink keeps its target in `i_block`: no extent or inline
/// flag, and no data blocks (an xattr block may be counted in `i_blocks`,
/// as the kernel's `ext4_inode_is_fast_symlink` allows).
pub(crate) fn is_fast_symlink(sb: &Superblock, inode: &Inode) -> bool {
    let flags = inode.flags();
    if !inode.is_symlink() || flags.intersects(InodeFlags::EXTENTS | InodeFlags::INLINE_DATA) {
        return false;
    }
    let bs = sb.block_size().unwrap_or(1024);
    let sectors = inode.blocks_count(sb.has_ro_compat(RoCompat::HUGE_FILE), bs);
    let ea = if inode.file_acl(wide(sb)).0 != 0 {
        u64::from(bs / 512)
    } else {
        0
    };
    sectors.saturating_sub(ea) == 0 && inode.size() < I_BLOCK_SIZE as u64
}

/// The data runs of an inode, sorted by logical block, coalesced, not
/// overlapping, cut at its size. Inline-data inodes and fast symlinks
/// have none.
///
/// # Errors
/// [`Error::Corrupt`] naming the inode and block of a broken extent tree
/// or block map.
pub(crate) fn runs(src: &(impl Source + ?Sized), info: &InodeInfo) -> Result<Vec<Run>> {
    let fast = is_fast_symlink(src.superblock(), &info.inode);
    map::runs(src, info.ino.0, &info.inode, fast)
}
