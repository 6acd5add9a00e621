//! The inode (`struct ext4_inode`): a 128-byte base shared with ext2, then
//! the "extra" fields of large inodes, whose presence is announced by
//! `i_extra_isize`. An on-disk inode record is `s_inode_size` bytes (128,
//! 256, …); bytes past `128 + i_extra_isize` hold in-inode extended
//! attributes (see [`crate::xattr`]).
//!
//! Layout: kernel `fs/ext4/ext4.h`, e2fsprogs `lib/ext2fs/ext2_fs.h`
//! (`struct ext2_inode_large`), `Documentation/filesystems/ext4/inodes.rst`.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::crc32c;
use crate::error::{need, FormatError, Result};
use crate::num;
use crate::types::{BlockNr, InodeNr};
use bitflags::bitflags;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Size of the base inode every revision has (`EXT2_GOOD_OLD_INODE_SIZE`).
pub const GOOD_OLD_INODE_SIZE: usize = 128;
/// Size of [`Inode`]: the base plus every extra field this crate knows.
pub const INODE_STRUCT_SIZE: usize = 160;
/// Size of `i_block` in bytes (15 little-endian words).
pub const I_BLOCK_SIZE: usize = 60;
/// Number of words in `i_block` (`EXT4_N_BLOCKS`).
pub const N_BLOCKS: usize = 15;

/// Offset of `l_i_checksum_lo` (in `osd2`).
const CHECKSUM_LO_OFFSET: usize = 0x7C;
/// Offset of `i_checksum_hi`.
const CHECKSUM_HI_OFFSET: usize = 0x82;
/// Offset of `i_generation`.
const GENERATION_OFFSET: usize = 0x64;
/// Offset of `i_extra_isize`.
const EXTRA_ISIZE_OFFSET: usize = 0x80;

/// Well-known inode numbers (`EXT4_*_INO`).
pub mod ino {
    /// Bad blocks list.
    pub const BAD: u32 = 1;
    /// Root directory.
    pub const ROOT: u32 = 2;
    /// User quota.
    pub const USR_QUOTA: u32 = 3;
    /// Group quota.
    pub const GRP_QUOTA: u32 = 4;
    /// Boot loader.
    pub const BOOT_LOADER: u32 = 5;
    /// Undelete directory.
    pub const UNDEL_DIR: u32 = 6;
    /// Reserved GDT blocks (resize_inode).
    pub const RESIZE: u32 = 7;
    /// Journal.
    pub const JOURNAL: u32 = 8;
    /// Snapshot exclude bitmap.
    pub const EXCLUDE: u32 = 9;
    /// Replica.
    pub const REPLICA: u32 = 10;
    /// First non-reserved inode of revision 0 filesystems.
    pub const GOOD_OLD_FIRST: u32 = 11;
}

/// `i_mode` bits: the file type in the top nibble, then permissions.
pub mod mode {
    /// Mask of the file type.
    pub const S_IFMT: u16 = 0xF000;
    /// Socket.
    pub const S_IFSOCK: u16 = 0xC000;
    /// Symbolic link.
    pub const S_IFLNK: u16 = 0xA000;
    /// Regular file.
    pub const S_IFREG: u16 = 0x8000;
    /// Block device.
    pub const S_IFBLK: u16 = 0x6000;
    /// Directory.
    pub const S_IFDIR: u16 = 0x4000;
    /// Character device.
    pub const S_IFCHR: u16 = 0x2000;
    /// FIFO.
    pub const S_IFIFO: u16 = 0x1000;
    /// Set user id on execution.
    pub const S_ISUID: u16 = 0x0800;
    /// Set group id on execution.
    pub const S_ISGID: u16 = 0x0400;
    /// Sticky bit.
    pub const S_ISVTX: u16 = 0x0200;
    /// Permission bits.
    pub const PERM_MASK: u16 = 0x0FFF;
}

bitflags! {
    /// `i_flags` (`EXT4_*_FL`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct InodeFlags: u32 {
        /// Secure deletion (never implemented).
        const SECRM = 0x0000_0001;
        /// Undelete (never implemented).
        const UNRM = 0x0000_0002;
        /// Compressed file.
        const COMPR = 0x0000_0004;
        /// Synchronous updates.
        const SYNC = 0x0000_0008;
        /// Immutable file.
        const IMMUTABLE = 0x0000_0010;
        /// Append only.
        const APPEND = 0x0000_0020;
        /// Not to be dumped.
        const NODUMP = 0x0000_0040;
        /// Do not update atime.
        const NOATIME = 0x0000_0080;
        /// Dirty compressed data (obsolete).
        const DIRTY = 0x0000_0100;
        /// Compressed clusters (obsolete).
        const COMPRBLK = 0x0000_0200;
        /// Access raw compressed data (obsolete).
        const NOCOMPR = 0x0000_0400;
        /// Encrypted inode.
        const ENCRYPT = 0x0000_0800;
        /// Hash-indexed directory (htree).
        const INDEX = 0x0000_1000;
        /// AFS magic directory.
        const IMAGIC = 0x0000_2000;
        /// File data is journaled.
        const JOURNAL_DATA = 0x0000_4000;
        /// No tail merging.
        const NOTAIL = 0x0000_8000;
        /// Synchronous directory updates.
        const DIRSYNC = 0x0001_0000;
        /// Top of a directory hierarchy (Orlov allocator).
        const TOPDIR = 0x0002_0000;
        /// `i_blocks` counts filesystem blocks, not sectors (huge_file).
        const HUGE_FILE = 0x0004_0000;
        /// `i_block` holds an extent tree.
        const EXTENTS = 0x0008_0000;
        /// fs-verity protected file.
        const VERITY = 0x0010_0000;
        /// The inode holds a large extended attribute value (ea_inode).
        const EA_INODE = 0x0020_0000;
        /// Blocks allocated past EOF (obsolete).
        const EOFBLOCKS = 0x0040_0000;
        /// Do not copy-on-write.
        const NOCOW = 0x0080_0000;
        /// Snapshot file.
        const SNAPFILE = 0x0100_0000;
        /// DAX access.
        const DAX = 0x0200_0000;
        /// Snapshot being deleted.
        const SNAPFILE_DELETED = 0x0400_0000;
        /// Snapshot shrink done.
        const SNAPFILE_SHRUNK = 0x0800_0000;
        /// Data stored inline in the inode (inline_data).
        const INLINE_DATA = 0x1000_0000;
        /// Children inherit the project id.
        const PROJINHERIT = 0x2000_0000;
        /// Case-insensitive directory.
        const CASEFOLD = 0x4000_0000;
        /// Reserved for the ext2 library.
        const RESERVED = 0x8000_0000;
    }
}

/// The inode exactly as on disk, up to and including `i_projid`.
///
/// Fields past byte 128 are meaningful only when `128 + i_extra_isize`
/// covers them; the accessors check this. `i_block` is kept as bytes since
/// its meaning depends on the flags (block map, extent tree, inline data or
/// a fast symlink target).
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq)]
#[repr(C)]
#[allow(missing_docs)] // field names are the kernel's; see ext4 documentation
pub struct Inode {
    pub i_mode: U16,
    pub i_uid: U16,
    pub i_size_lo: U32,
    pub i_atime: U32,
    pub i_ctime: U32,
    pub i_mtime: U32,
    pub i_dtime: U32,
    pub i_gid: U16,
    pub i_links_count: U16,
    pub i_blocks_lo: U32,
    pub i_flags: U32,
    /// `osd1.linux1.l_i_version`.
    pub l_i_version: U32,
    pub i_block: [u8; I_BLOCK_SIZE],
    pub i_generation: U32,
    pub i_file_acl_lo: U32,
    pub i_size_high: U32,
    pub i_obso_faddr: U32,
    /// `osd2.linux2.l_i_blocks_high`.
    pub l_i_blocks_high: U16,
    /// `osd2.linux2.l_i_file_acl_high`.
    pub l_i_file_acl_high: U16,
    /// `osd2.linux2.l_i_uid_high`.
    pub l_i_uid_high: U16,
    /// `osd2.linux2.l_i_gid_high`.
    pub l_i_gid_high: U16,
    /// `osd2.linux2.l_i_checksum_lo`.
    pub l_i_checksum_lo: U16,
    /// `osd2.linux2.l_i_reserved`.
    pub l_i_reserved: U16,
    pub i_extra_isize: U16,
    pub i_checksum_hi: U16,
    pub i_ctime_extra: U32,
    pub i_mtime_extra: U32,
    pub i_atime_extra: U32,
    pub i_crtime: U32,
    pub i_crtime_extra: U32,
    pub i_version_hi: U32,
    pub i_projid: U32,
}

const _: () = assert!(core::mem::size_of::<Inode>() == INODE_STRUCT_SIZE);

/// A timestamp with the ext4 extensions: seconds since the epoch (34 bits
/// with the epoch bits, so until 2446) and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp {
    /// Seconds since 1970-01-01 UTC (negative before).
    pub secs: i64,
    /// Nanoseconds, below 10^9 for timestamps that came from the kernel.
    pub nsecs: u32,
}

const EPOCH_MASK: u32 = 0b11;

/// Decodes a time field and its `_extra` companion as the kernel's
/// `ext4_decode_extra_time`: the base is a signed 32-bit value; the two low
/// bits of `extra` add multiples of 2^32 seconds, the upper 30 bits are
/// nanoseconds.
fn decode_time(base: u32, extra: Option<u32>) -> Timestamp {
    let secs = i64::from(base as i32);
    match extra {
        Some(x) => Timestamp {
            secs: secs + (i64::from(x & EPOCH_MASK) << 32),
            nsecs: x >> 2,
        },
        None => Timestamp { secs, nsecs: 0 },
    }
}

/// The inverse of [`decode_time`] (`ext4_encode_extra_time`): times outside
/// the representable range are clamped.
fn encode_time(t: Timestamp) -> (u32, u32) {
    let min = -(1i64 << 31);
    let max = (1i64 << 31) - 1 + (3i64 << 32);
    let secs = t.secs.clamp(min, max);
    // The low 32 bits of the two's complement, as the kernel stores them.
    let base = num::lo32(secs as u64);
    let epoch = ((secs - i64::from(base as i32)) >> 32) as u32 & EPOCH_MASK;
    (base, epoch | (t.nsecs.min((1 << 30) - 1) << 2))
}

/// Byte offset just past each extra field, to test it against
/// `128 + i_extra_isize` (`EXT4_FITS_IN_INODE`).
mod end {
    pub(super) const CHECKSUM_HI: usize = 0x84;
    pub(super) const CTIME_EXTRA: usize = 0x88;
    pub(super) const MTIME_EXTRA: usize = 0x8C;
    pub(super) const ATIME_EXTRA: usize = 0x90;
    pub(super) const CRTIME: usize = 0x94;
    pub(super) const CRTIME_EXTRA: usize = 0x98;
    pub(super) const VERSION_HI: usize = 0x9C;
    pub(super) const PROJID: usize = 0xA0;
}

impl Inode {
    /// An all-zero inode.
    pub fn zeroed() -> Self {
        <Self as zerocopy::FromZeros>::new_zeroed()
    }

    /// Reads an inode from its on-disk record (`s_inode_size` bytes, at least
    /// 128). Bytes of the structure past the record's end read as zero, so
    /// for a 128-byte record `i_extra_isize` is 0 and no extra field counts.
    /// Nothing is validated: see [`Inode::check_extra_isize`].
    ///
    /// # Errors
    /// [`FormatError::Truncated`] when the record is shorter than 128 bytes.
    pub fn parse(record: &[u8]) -> Result<Self> {
        need("inode", record, GOOD_OLD_INODE_SIZE)?;
        let mut inode = Self::zeroed();
        let n = record.len().min(INODE_STRUCT_SIZE);
        inode.as_mut_bytes()[..n].copy_from_slice(&record[..n]);
        Ok(inode)
    }

    /// The inode read in place from a record of at least
    /// [`INODE_STRUCT_SIZE`] bytes: what [`Inode::parse`] gives, without
    /// the copy (`None` for a shorter record, which `parse` pads).
    pub fn in_record(record: &[u8]) -> Option<&Self> {
        Self::ref_from_prefix(record).ok().map(|(inode, _)| inode)
    }

    /// Writes the inode into the front of an on-disk record, as many bytes
    /// as fit (128 for a 128-byte record, else 160). Bytes past 160 (the
    /// in-inode xattr area) are left alone.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] when the record is shorter than 128 bytes.
    pub fn write(&self, record: &mut [u8]) -> Result<()> {
        need("inode", record, GOOD_OLD_INODE_SIZE)?;
        let n = record.len().min(INODE_STRUCT_SIZE);
        record[..n].copy_from_slice(&self.as_bytes()[..n]);
        Ok(())
    }

    /// Checks `i_extra_isize` as the kernel does when loading an inode: it
    /// must be a multiple of 4 and leave the extra fields inside the record.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] naming the bad value.
    pub fn check_extra_isize(&self, inode_size: usize) -> Result<()> {
        let extra = usize::from(self.i_extra_isize.get());
        if inode_size <= GOOD_OLD_INODE_SIZE {
            return Ok(());
        }
        if GOOD_OLD_INODE_SIZE + extra > inode_size || extra % 4 != 0 {
            return Err(FormatError::invalid(
                "i_extra_isize",
                format!("{extra} does not fit an inode of {inode_size} bytes"),
            ));
        }
        Ok(())
    }

    /// Whether the extra field ending at byte `end` is present.
    fn fits(&self, end: usize) -> bool {
        GOOD_OLD_INODE_SIZE + usize::from(self.i_extra_isize.get()) >= end
    }

    /// `i_mode`.
    pub fn mode(&self) -> u16 {
        self.i_mode.get()
    }

    /// The file type bits of `i_mode` (one of the `mode::S_IF*` values).
    pub fn file_type(&self) -> u16 {
        self.i_mode.get() & mode::S_IFMT
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type() == mode::S_IFDIR
    }

    /// Whether this is a regular file.
    pub fn is_reg(&self) -> bool {
        self.file_type() == mode::S_IFREG
    }

    /// Whether this is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.file_type() == mode::S_IFLNK
    }

    /// `i_flags`, unknown bits kept.
    pub fn flags(&self) -> InodeFlags {
        InodeFlags::from_bits_retain(self.i_flags.get())
    }

    /// Stores `i_flags`.
    pub fn set_flags(&mut self, f: InodeFlags) {
        self.i_flags.set(f.bits());
    }

    /// `i_links_count`.
    pub fn links_count(&self) -> u16 {
        self.i_links_count.get()
    }

    /// Stores `i_links_count`.
    pub fn set_links_count(&mut self, n: u16) {
        self.i_links_count.set(n);
    }

    /// Stores `i_mode`: the file type bits and the permissions.
    pub fn set_mode(&mut self, m: u16) {
        self.i_mode.set(m);
    }

    /// File size in bytes, `i_size_lo | i_size_high << 32`.
    ///
    /// This is e2fsprogs' `EXT2_I_SIZE`; the kernel ignores `i_size_high`
    /// for non-regular files unless the largedir feature is on.
    pub fn size(&self) -> u64 {
        u64::from(self.i_size_lo.get()) | u64::from(self.i_size_high.get()) << 32
    }

    /// Sets the file size.
    pub fn set_size(&mut self, v: u64) {
        self.i_size_lo.set(num::lo32(v));
        self.i_size_high.set(num::hi32(v));
    }

    /// The raw 48-bit `i_blocks` (low word plus `l_i_blocks_high` when the
    /// huge_file feature is on), in the unit the flags say.
    fn raw_blocks(&self, huge_file: bool) -> u64 {
        let lo = u64::from(self.i_blocks_lo.get());
        if huge_file {
            lo | u64::from(self.l_i_blocks_high.get()) << 32
        } else {
            lo
        }
    }

    /// Blocks used in 512-byte sectors, as the kernel's `ext4_inode_blocks`:
    /// without the huge_file feature only the low word counts; with it the
    /// count is 48 bits, and in filesystem blocks when the inode carries
    /// [`InodeFlags::HUGE_FILE`].
    pub fn blocks_count(&self, huge_file: bool, block_size: u32) -> u64 {
        let raw = self.raw_blocks(huge_file);
        if huge_file && self.flags().contains(InodeFlags::HUGE_FILE) {
            raw.saturating_mul(u64::from(block_size / 512))
        } else {
            raw
        }
    }

    /// Stores a block count given in 512-byte sectors, choosing the
    /// representation as the kernel's `ext4_inode_blocks_set`: 32 bits; 48
    /// bits with huge_file; else filesystem blocks with the HUGE_FILE flag.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when the count cannot be represented.
    pub fn set_blocks_count(
        &mut self,
        sectors: u64,
        huge_file: bool,
        block_size: u32,
    ) -> Result<()> {
        let mut flags = self.flags();
        if sectors <= u64::from(u32::MAX) {
            self.i_blocks_lo.set(num::lo32(sectors));
            self.l_i_blocks_high.set(0);
            flags.remove(InodeFlags::HUGE_FILE);
        } else if huge_file && sectors < 1 << 48 {
            self.i_blocks_lo.set(num::lo32(sectors));
            self.l_i_blocks_high.set(num::hi16_of_48(sectors));
            flags.remove(InodeFlags::HUGE_FILE);
        } else {
            let per_block = u64::from(block_size / 512);
            let fs_blocks = sectors.checked_div(per_block).unwrap_or(u64::MAX);
            if !huge_file || fs_blocks >= 1 << 48 || sectors % per_block.max(1) != 0 {
                return Err(FormatError::invalid(
                    "i_blocks",
                    format!("{sectors} sectors cannot be stored"),
                ));
            }
            self.i_blocks_lo.set(num::lo32(fs_blocks));
            self.l_i_blocks_high.set(num::hi16_of_48(fs_blocks));
            flags.insert(InodeFlags::HUGE_FILE);
        }
        self.set_flags(flags);
        Ok(())
    }

    /// Owner, with the high 16 bits from `l_i_uid_high`.
    pub fn uid(&self) -> u32 {
        u32::from(self.i_uid.get()) | u32::from(self.l_i_uid_high.get()) << 16
    }

    /// Sets the owner.
    pub fn set_uid(&mut self, v: u32) {
        self.i_uid.set(num::lo16(v));
        self.l_i_uid_high.set(num::hi16(v));
    }

    /// Group, with the high 16 bits from `l_i_gid_high`.
    pub fn gid(&self) -> u32 {
        u32::from(self.i_gid.get()) | u32::from(self.l_i_gid_high.get()) << 16
    }

    /// Sets the group.
    pub fn set_gid(&mut self, v: u32) {
        self.i_gid.set(num::lo16(v));
        self.l_i_gid_high.set(num::hi16(v));
    }

    /// The extended attribute block; the high half only counts with the
    /// 64bit feature (`wide`). Block 0 means none.
    pub fn file_acl(&self, wide: bool) -> BlockNr {
        let lo = u64::from(self.i_file_acl_lo.get());
        let hi = if wide {
            u64::from(self.l_i_file_acl_high.get()) << 32
        } else {
            0
        };
        BlockNr(lo | hi)
    }

    /// Sets the extended attribute block (48 bits).
    pub fn set_file_acl(&mut self, b: BlockNr) {
        self.i_file_acl_lo.set(num::lo32(b.0));
        self.l_i_file_acl_high.set(num::hi16_of_48(b.0));
    }

    /// `i_generation`.
    pub fn generation(&self) -> u32 {
        self.i_generation.get()
    }

    /// Access time.
    pub fn atime(&self) -> Timestamp {
        let extra = self
            .fits(end::ATIME_EXTRA)
            .then(|| self.i_atime_extra.get());
        decode_time(self.i_atime.get(), extra)
    }

    /// Inode change time.
    pub fn ctime(&self) -> Timestamp {
        let extra = self
            .fits(end::CTIME_EXTRA)
            .then(|| self.i_ctime_extra.get());
        decode_time(self.i_ctime.get(), extra)
    }

    /// Modification time.
    pub fn mtime(&self) -> Timestamp {
        let extra = self
            .fits(end::MTIME_EXTRA)
            .then(|| self.i_mtime_extra.get());
        decode_time(self.i_mtime.get(), extra)
    }

    /// Creation time, when the inode is large enough to hold it.
    pub fn crtime(&self) -> Option<Timestamp> {
        if !self.fits(end::CRTIME) {
            return None;
        }
        let extra = self
            .fits(end::CRTIME_EXTRA)
            .then(|| self.i_crtime_extra.get());
        Some(decode_time(self.i_crtime.get(), extra))
    }

    /// Deletion time (32 bits, no extension; also the orphan list link).
    pub fn dtime(&self) -> u32 {
        self.i_dtime.get()
    }

    /// Sets the access time (nanoseconds and epoch only if the inode has room).
    pub fn set_atime(&mut self, t: Timestamp) {
        let (base, extra) = encode_time(t);
        self.i_atime.set(base);
        if self.fits(end::ATIME_EXTRA) {
            self.i_atime_extra.set(extra);
        }
    }

    /// Sets the change time.
    pub fn set_ctime(&mut self, t: Timestamp) {
        let (base, extra) = encode_time(t);
        self.i_ctime.set(base);
        if self.fits(end::CTIME_EXTRA) {
            self.i_ctime_extra.set(extra);
        }
    }

    /// Sets the modification time.
    pub fn set_mtime(&mut self, t: Timestamp) {
        let (base, extra) = encode_time(t);
        self.i_mtime.set(base);
        if self.fits(end::MTIME_EXTRA) {
            self.i_mtime_extra.set(extra);
        }
    }

    /// Sets the creation time when the inode has room for it.
    pub fn set_crtime(&mut self, t: Timestamp) {
        let (base, extra) = encode_time(t);
        if self.fits(end::CRTIME) {
            self.i_crtime.set(base);
        }
        if self.fits(end::CRTIME_EXTRA) {
            self.i_crtime_extra.set(extra);
        }
    }

    /// The 64-bit inode version (`l_i_version`, high word when present).
    pub fn version(&self) -> u64 {
        let hi = if self.fits(end::VERSION_HI) {
            u64::from(self.i_version_hi.get()) << 32
        } else {
            0
        };
        u64::from(self.l_i_version.get()) | hi
    }

    /// Project id, 0 when the inode has no room for it.
    pub fn projid(&self) -> u32 {
        if self.fits(end::PROJID) {
            self.i_projid.get()
        } else {
            0
        }
    }

    /// Whether `i_checksum_hi` is present (`EXT4_INODE_CSUM_HI_EXTRA_END`).
    pub fn has_checksum_hi(&self) -> bool {
        self.fits(end::CHECKSUM_HI)
    }

    /// `i_block` as 15 little-endian words (block map or raw view).
    pub fn block_words(&self) -> [u32; N_BLOCKS] {
        let mut out = [0u32; N_BLOCKS];
        for (w, c) in out.iter_mut().zip(self.i_block.chunks_exact(4)) {
            *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        out
    }

    /// Stores 15 words into `i_block`.
    pub fn set_block_words(&mut self, words: &[u32; N_BLOCKS]) {
        for (c, w) in self.i_block.chunks_exact_mut(4).zip(words) {
            c.copy_from_slice(&w.to_le_bytes());
        }
    }
}

impl core::fmt::Debug for Inode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Inode")
            .field("mode", &format_args!("{:#o}", self.mode()))
            .field("size", &self.size())
            .field("links", &self.links_count())
            .field("flags", &self.flags())
            .field("extra_isize", &self.i_extra_isize.get())
            .finish_non_exhaustive()
    }
}

/// The per-inode checksum seed that inode, extent, directory and htree
/// checksums start from: `crc32c(crc32c(fs_seed, ino_le32), generation_le32)`.
pub fn inode_csum_seed(fs_seed: u32, ino: InodeNr, generation: u32) -> u32 {
    crc32c(
        crc32c(fs_seed, &ino.0.to_le_bytes()),
        &generation.to_le_bytes(),
    )
}

fn read_u16(b: &[u8], off: usize) -> u16 {
    match b.get(off..off + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

fn read_u32(b: &[u8], off: usize) -> u32 {
    match b.get(off..off + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// Whether the record holds `i_checksum_hi`: it is larger than 128 bytes
/// and `i_extra_isize` reaches past the field.
fn record_has_hi(record: &[u8]) -> bool {
    record.len() >= end::CHECKSUM_HI
        && GOOD_OLD_INODE_SIZE + usize::from(read_u16(record, EXTRA_ISIZE_OFFSET))
            >= end::CHECKSUM_HI
}

/// The full 32-bit inode checksum of an on-disk inode record (all
/// `s_inode_size` bytes, including the in-inode xattr area), as the kernel's
/// `ext4_inode_csum`: CRC32C from [`inode_csum_seed`] over the record with
/// `l_i_checksum_lo` and (when present) `i_checksum_hi` read as zero.
///
/// # Errors
/// [`FormatError::Truncated`] when the record is shorter than 128 bytes.
pub fn inode_checksum(fs_seed: u32, ino: InodeNr, record: &[u8]) -> Result<u32> {
    need("inode", record, GOOD_OLD_INODE_SIZE)?;
    let generation = read_u32(record, GENERATION_OFFSET);
    if record.len() <= SHORT_RECORD {
        // One CRC run over a copy with the checksum fields zeroed, where
        // the pieces between them took eight (a fsck checks every inode).
        let mut input = InodeCsumInput::default();
        if let Some(bytes) = input.fill(ino, record) {
            return Ok(crc32c(fs_seed, bytes));
        }
    }
    let seed = inode_csum_seed(fs_seed, ino, generation);
    let zero = [0u8; 2];
    let mut crc = crc32c(seed, &record[..CHECKSUM_LO_OFFSET]);
    crc = crc32c(crc, &zero);
    crc = crc32c(crc, &record[CHECKSUM_LO_OFFSET + 2..GOOD_OLD_INODE_SIZE]);
    if record.len() > GOOD_OLD_INODE_SIZE {
        if record_has_hi(record) {
            crc = crc32c(crc, &record[GOOD_OLD_INODE_SIZE..CHECKSUM_HI_OFFSET]);
            crc = crc32c(crc, &zero);
            crc = crc32c(crc, &record[CHECKSUM_HI_OFFSET + 2..]);
        } else {
            crc = crc32c(crc, &record[GOOD_OLD_INODE_SIZE..]);
        }
    }
    Ok(crc)
}

/// Records up to this size are checksummed through a copy on the stack.
const SHORT_RECORD: usize = 256;

/// What the checksum of an inode record of up to 256 bytes runs over, in
/// one piece: the inode number and generation, then the record with its
/// checksum fields read as zero. `crc32c(fs_seed, bytes)` is
/// [`inode_checksum`]; a checker holding many records can run several of
/// these through the CRC side by side (see [`inode_checksum_matches`]).
#[derive(Clone)]
#[repr(align(8))]
pub struct InodeCsumInput([u8; 8 + SHORT_RECORD]);

impl Default for InodeCsumInput {
    fn default() -> Self {
        InodeCsumInput([0; 8 + SHORT_RECORD])
    }
}

impl InodeCsumInput {
    /// Fills in the input for `record` of inode `ino` and returns it (8
    /// bytes more than the record; 8-aligned, as the CRC's word loop
    /// starts). `None` for a record shorter than 128 bytes or longer than
    /// 256.
    pub fn fill(&mut self, ino: InodeNr, record: &[u8]) -> Option<&[u8]> {
        if record.len() < GOOD_OLD_INODE_SIZE || record.len() > SHORT_RECORD {
            return None;
        }
        let generation = read_u32(record, GENERATION_OFFSET);
        let out = &mut self.0[..8 + record.len()];
        out[..4].copy_from_slice(&ino.0.to_le_bytes());
        out[4..8].copy_from_slice(&generation.to_le_bytes());
        let copy = &mut out[8..];
        copy.copy_from_slice(record);
        copy[CHECKSUM_LO_OFFSET..CHECKSUM_LO_OFFSET + 2].fill(0);
        if record_has_hi(record) {
            copy[CHECKSUM_HI_OFFSET..CHECKSUM_HI_OFFSET + 2].fill(0);
        }
        Some(out)
    }
}

/// Inode checksums computed over the records where they lie, for a
/// checker that checks many: a CRC run over a record as it is, from
/// [`InodeCsumInPlace::seed`], is its checksum but for what the checksum
/// fields themselves add, and since the CRC is linear (the record with
/// those fields zeroed is the record XOR the fields alone) that is a
/// table lookup per field byte ([`InodeCsumInPlace::finish`]). No copy
/// per record, as [`InodeCsumInput`] makes, and records of any size run
/// side by side from their own seeds.
#[derive(Clone)]
pub struct InodeCsumInPlace {
    len: usize,
    /// Per checksum byte (`l_i_checksum_lo`'s two, `i_checksum_hi`'s two),
    /// what each of its values adds to a CRC run over the whole record.
    fields: [[u32; 256]; 4],
}

impl InodeCsumInPlace {
    /// For records of `len` bytes (`s_inode_size`); `None` below 128.
    pub fn new(len: usize) -> Option<Self> {
        if len < GOOD_OLD_INODE_SIZE {
            return None;
        }
        const ZEROS: [u8; 256] = [0; 256];
        // The CRC from 0 of `byte` then zeros to the record's end.
        let alone = |byte: u8, at: usize| {
            let mut crc = crc32c(0, &[byte]);
            let mut left = len - at - 1;
            while left > 0 {
                let n = left.min(ZEROS.len());
                crc = crc32c(crc, &ZEROS[..n]);
                left -= n;
            }
            crc
        };
        let mut fields = [[0u32; 256]; 4];
        let at = [
            CHECKSUM_LO_OFFSET,
            CHECKSUM_LO_OFFSET + 1,
            CHECKSUM_HI_OFFSET,
            CHECKSUM_HI_OFFSET + 1,
        ];
        for (table, &p) in fields.iter_mut().zip(&at).filter(|(_, &p)| p < len) {
            // One CRC per bit; every other value is the XOR of its bits'.
            let bits: [u32; 8] = core::array::from_fn(|b| alone(1 << b, p));
            for v in 1..256usize {
                let low = v & v.wrapping_neg();
                table[v] = table[v ^ low] ^ bits[low.trailing_zeros() as usize];
            }
        }
        Some(InodeCsumInPlace { len, fields })
    }

    /// Where the CRC over inode `ino`'s `record` starts:
    /// [`inode_csum_seed`] of its number and generation.
    pub fn seed(fs_seed: u32, ino: InodeNr, record: &[u8]) -> u32 {
        crc32c(fs_seed, &Self::head(ino, record).to_le_bytes())
    }

    /// What the checksum runs over before the record: the inode's number
    /// and its generation (from the record), as one little-endian word,
    /// for a CRC that takes it in one step.
    pub fn head(ino: InodeNr, record: &[u8]) -> u64 {
        u64::from(ino.0) | u64::from(read_u32(record, GENERATION_OFFSET)) << 32
    }

    /// The full checksum of `record` (of the length this was made for;
    /// `None` for another), given `raw`: the CRC run over the whole record
    /// as it is from [`InodeCsumInPlace::seed`]. Equal to
    /// [`inode_checksum`].
    pub fn finish(&self, record: &[u8], raw: u32) -> Option<u32> {
        if record.len() != self.len {
            return None;
        }
        let f = &self.fields;
        let mut sum = raw
            ^ f[0][usize::from(record[CHECKSUM_LO_OFFSET])]
            ^ f[1][usize::from(record[CHECKSUM_LO_OFFSET + 1])];
        if record_has_hi(record) {
            sum ^= f[2][usize::from(record[CHECKSUM_HI_OFFSET])]
                ^ f[3][usize::from(record[CHECKSUM_HI_OFFSET + 1])];
        }
        Some(sum)
    }
}

/// Whether `computed` (the full [`inode_checksum`]) is what `record`
/// stores: all 32 bits, or the low 16 when the record has no
/// `i_checksum_hi`.
pub fn inode_checksum_matches(record: &[u8], computed: u32) -> bool {
    if record.len() < GOOD_OLD_INODE_SIZE {
        return false;
    }
    let computed = if record_has_hi(record) {
        computed
    } else {
        computed & 0xFFFF
    };
    stored_checksum(record) == computed
}

/// The checksum as stored in the record: the low 16 bits always, the high
/// 16 bits when `i_checksum_hi` is present.
fn stored_checksum(record: &[u8]) -> u32 {
    let lo = u32::from(read_u16(record, CHECKSUM_LO_OFFSET));
    if record_has_hi(record) {
        lo | u32::from(read_u16(record, CHECKSUM_HI_OFFSET)) << 16
    } else {
        lo
    }
}

/// Checks the checksum of an on-disk inode record (metadata_csum).
///
/// Only the low 16 bits are compared when the record has no
/// `i_checksum_hi`. e2fsprogs additionally accepts a record whose first 128
/// bytes are all zero (a never-used inode); see [`is_zeroed_inode`].
///
/// # Errors
/// [`FormatError::Truncated`], or [`FormatError::BadChecksum`] on mismatch.
pub fn verify_inode_checksum(fs_seed: u32, ino: InodeNr, record: &[u8]) -> Result<()> {
    let mut computed = inode_checksum(fs_seed, ino, record)?;
    if !record_has_hi(record) {
        computed &= 0xFFFF;
    }
    let stored = stored_checksum(record);
    if stored != computed {
        return Err(FormatError::BadChecksum {
            what: "inode",
            stored,
            computed,
        });
    }
    Ok(())
}

/// Computes and stores the checksum of an on-disk inode record.
///
/// # Errors
/// [`FormatError::Truncated`] when the record is shorter than 128 bytes.
pub fn set_inode_checksum(fs_seed: u32, ino: InodeNr, record: &mut [u8]) -> Result<()> {
    let crc = inode_checksum(fs_seed, ino, record)?;
    record[CHECKSUM_LO_OFFSET..CHECKSUM_LO_OFFSET + 2]
        .copy_from_slice(&num::lo16(crc).to_le_bytes());
    if record_has_hi(record) {
        record[CHECKSUM_HI_OFFSET..CHECKSUM_HI_OFFSET + 2]
            .copy_from_slice(&num::hi16(crc).to_le_bytes());
    }
    Ok(())
}

/// Whether the 128-byte base of a record is all zero: e2fsprogs treats such
/// an inode as valid whatever its checksum (`ext2fs_inode_csum_verify`).
pub fn is_zeroed_inode(record: &[u8]) -> bool {
    record.iter().take(GOOD_OLD_INODE_SIZE).all(|&b| b == 0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Builds a buffer of `len` zero bytes with the given runs filled in
    /// (offset, hex). Real on-disk samples are mostly zeros.
    pub(crate) fn sparse(len: usize, runs: &[(usize, &str)]) -> Vec<u8> {
        let mut out = vec![0u8; len];
        for &(off, hex) in runs {
            for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
                let s = std::str::from_utf8(pair).unwrap();
                out[off + i] = u8::from_str_radix(s, 16).unwrap();
            }
        }
        out
    }

    /// The filesystem seed of the sample image made by
    /// `mke2fs -t ext4 -b 1024 -I 256 -U 11111111-2222-3333-4444-555555555555`.
    pub(crate) fn sample_fs_seed() -> u32 {
        crate::checksum::fs_csum_seed(&[
            0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44, 0x55, 0x55, 0x55, 0x55,
            0x55, 0x55,
        ])
    }

    /// Inode 93 of that image: a regular file to which debugfs gave a
    /// generation, 32-bit uid/gid, size over 4 GiB, times with epoch bits
    /// and nanoseconds, a project id and an in-inode xattr (`user.small`).
    /// e2fsck -fn reports it clean; debugfs reports checksum 0xcc9db4a1.
    pub(crate) fn sample_inode_93() -> Vec<u8> {
        sparse(
            256,
            &[
                (
                    0x0,
                    "a481452306000000258b036b258b036b258b036b00000000214301000200000000000800\
                     000000000af3010004",
                ),
                (0x38, "010000008505"),
                (0x64, "785634120000000001"),
                (
                    0x78,
                    "01000500a1b4000020009dcc050d00000165cd1d02000000268b036b07000000000000004d\
                     000000000002ea05015800000000000400000000000000736d616c6c",
                ),
                (0xfc, "74696e79"),
            ],
        )
    }

    /// Root inode of the same image (generation 0x2a2b2c2d), checksum
    /// 0xf389f45d.
    fn sample_inode_2() -> Vec<u8> {
        sparse(
            256,
            &[
                (
                    0x0,
                    "ed41000000040000258b036b258b036b258b036b00000000000005000200000000000800\
                     000000000af3010004",
                ),
                (0x38, "0100000023"),
                (0x64, "2d2c2b2a"),
                (0x7c, "5df40000200089f3"),
                (0x90, "258b036b"),
            ],
        )
    }

    #[test]
    fn offsets_match_the_kernel() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(Inode, i_links_count), 0x1A);
        assert_eq!(offset_of!(Inode, i_flags), 0x20);
        assert_eq!(offset_of!(Inode, i_block), 0x28);
        assert_eq!(offset_of!(Inode, i_generation), GENERATION_OFFSET);
        assert_eq!(offset_of!(Inode, i_size_high), 0x6C);
        assert_eq!(offset_of!(Inode, l_i_blocks_high), 0x74);
        assert_eq!(offset_of!(Inode, l_i_checksum_lo), CHECKSUM_LO_OFFSET);
        assert_eq!(offset_of!(Inode, i_extra_isize), EXTRA_ISIZE_OFFSET);
        assert_eq!(offset_of!(Inode, i_checksum_hi), CHECKSUM_HI_OFFSET);
        assert_eq!(offset_of!(Inode, i_crtime), 0x90);
        assert_eq!(offset_of!(Inode, i_projid), 0x9C);
    }

    #[test]
    fn mode_and_links_land_in_their_fields() {
        let mut ino = Inode::zeroed();
        ino.set_mode(0o040755);
        ino.set_links_count(3);
        let mut rec = [0u8; 128];
        ino.write(&mut rec).unwrap();
        assert_eq!(&rec[..2], &[0xED, 0x41]);
        assert_eq!(&rec[0x1A..0x1C], &[3, 0]);
        let back = Inode::parse(&rec).unwrap();
        assert!(back.is_dir());
        assert_eq!(back.links_count(), 3);
    }

    #[test]
    fn real_inode_fields() {
        let rec = sample_inode_93();
        let ino = Inode::parse(&rec).unwrap();
        assert!(ino.is_reg());
        assert_eq!(ino.mode() & mode::PERM_MASK, 0o644);
        assert_eq!(ino.uid(), 0x12345);
        assert_eq!(ino.gid(), 0x54321);
        assert_eq!(ino.size(), 0x1_0000_0006);
        assert_eq!(ino.generation(), 0x1234_5678);
        assert_eq!(ino.blocks_count(true, 1024), 2);
        assert!(ino.flags().contains(InodeFlags::EXTENTS));
        assert_eq!(ino.projid(), 77);
        // ctime 0x6b038b25 with extra 0xd05: epoch 1, 833 ns.
        let base = 0x6b03_8b25i64;
        assert_eq!(
            ino.ctime(),
            Timestamp {
                secs: base + (1 << 32),
                nsecs: 0xd05 >> 2
            }
        );
        assert_eq!(
            ino.mtime(),
            Timestamp {
                secs: base + (1 << 32),
                nsecs: 0x1dcd_6501 >> 2
            }
        );
        assert_eq!(ino.atime().secs, base + (2 << 32));
        assert_eq!(
            ino.crtime(),
            Some(Timestamp {
                secs: 0x6b03_8b26 + (3 << 32),
                nsecs: 1
            })
        );
        assert_eq!(ino.file_acl(true), BlockNr(0));
        let w = ino.block_words();
        assert_eq!(w[0] & 0xFFFF, 0xF30A);
    }

    #[test]
    fn real_inode_checksums_verify() {
        let seed = sample_fs_seed();
        let rec = sample_inode_93();
        assert_eq!(
            inode_checksum(seed, InodeNr(93), &rec).unwrap(),
            0xcc9d_b4a1
        );
        verify_inode_checksum(seed, InodeNr(93), &rec).unwrap();
        let root = sample_inode_2();
        assert_eq!(
            inode_checksum(seed, InodeNr(2), &root).unwrap(),
            0xf389_f45d
        );
        verify_inode_checksum(seed, InodeNr(2), &root).unwrap();
        // The inode number is covered.
        assert!(verify_inode_checksum(seed, InodeNr(3), &root).is_err());
        // Any covered byte (here in the xattr area) is covered.
        let mut bad = rec.clone();
        bad[0xff] ^= 1;
        assert!(matches!(
            verify_inode_checksum(seed, InodeNr(93), &bad),
            Err(FormatError::BadChecksum { .. })
        ));
        // set restores it.
        let mut fixed = rec.clone();
        fixed[0x7c..0x7e].fill(0);
        fixed[0x82..0x84].fill(0);
        set_inode_checksum(seed, InodeNr(93), &mut fixed).unwrap();
        assert_eq!(fixed, rec);
    }

    #[test]
    fn small_records_use_only_the_low_half() {
        let seed = 0x1234_5678;
        let mut rec = sample_inode_2();
        rec.truncate(128);
        set_inode_checksum(seed, InodeNr(2), &mut rec).unwrap();
        verify_inode_checksum(seed, InodeNr(2), &rec).unwrap();
        let ino = Inode::parse(&rec).unwrap();
        assert!(!ino.has_checksum_hi());
        assert_eq!(ino.crtime(), None);
        assert_eq!(ino.projid(), 0);
        assert_eq!(ino.ctime().nsecs, 0);
        // extra_isize of 0 in a large record: no hi half either.
        let mut big = sample_inode_2();
        big[0x80..0x82].fill(0);
        set_inode_checksum(seed, InodeNr(2), &mut big).unwrap();
        verify_inode_checksum(seed, InodeNr(2), &big).unwrap();
        assert_eq!(&big[0x82..0x84], &[0x89, 0xf3]);
    }

    #[test]
    fn one_run_checksum_is_the_pieces_checksum() {
        // The checksum as the format defines it: the seed, then the
        // record in pieces with its checksum fields taken as zero.
        fn pieces(fs_seed: u32, ino: InodeNr, r: &[u8]) -> u32 {
            let seed = inode_csum_seed(fs_seed, ino, read_u32(r, GENERATION_OFFSET));
            let mut crc = crc32c(seed, &r[..CHECKSUM_LO_OFFSET]);
            crc = crc32c(crc, &[0, 0]);
            crc = crc32c(crc, &r[CHECKSUM_LO_OFFSET + 2..GOOD_OLD_INODE_SIZE]);
            if r.len() > GOOD_OLD_INODE_SIZE {
                if record_has_hi(r) {
                    crc = crc32c(crc, &r[GOOD_OLD_INODE_SIZE..CHECKSUM_HI_OFFSET]);
                    crc = crc32c(crc, &[0, 0]);
                    crc = crc32c(crc, &r[CHECKSUM_HI_OFFSET + 2..]);
                } else {
                    crc = crc32c(crc, &r[GOOD_OLD_INODE_SIZE..]);
                }
            }
            crc
        }
        for len in [128usize, 160, 256, 512] {
            for extra in [0u16, 4, 32] {
                let mut r: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
                if len > 128 {
                    r[0x80..0x82].copy_from_slice(&extra.to_le_bytes());
                }
                let ino = InodeNr(len as u32 + u32::from(extra));
                assert_eq!(
                    inode_checksum(0x1234_5678, ino, &r).unwrap(),
                    pieces(0x1234_5678, ino, &r),
                    "{len} {extra}"
                );
            }
        }
    }

    #[test]
    fn in_record_reads_what_parse_copies() {
        let rec = sample_inode_2();
        assert_eq!(Inode::in_record(&rec), Some(&Inode::parse(&rec).unwrap()));
        assert_eq!(Inode::in_record(&rec[..128]), None);
    }

    #[test]
    fn truncated_records_are_errors() {
        assert!(matches!(
            Inode::parse(&[0u8; 127]),
            Err(FormatError::Truncated { .. })
        ));
        assert!(inode_checksum(0, InodeNr(1), &[0u8; 100]).is_err());
        assert!(Inode::zeroed().write(&mut [0u8; 64]).is_err());
    }

    #[test]
    fn extra_isize_is_checked() {
        let mut ino = Inode::zeroed();
        ino.i_extra_isize.set(32);
        ino.check_extra_isize(256).unwrap();
        ino.i_extra_isize.set(130);
        assert!(ino.check_extra_isize(256).is_err());
        ino.i_extra_isize.set(30);
        assert!(ino.check_extra_isize(256).is_err());
    }

    #[test]
    fn huge_file_block_counts() {
        let mut ino = Inode::zeroed();
        ino.set_blocks_count(8, true, 4096).unwrap();
        assert_eq!(ino.blocks_count(true, 4096), 8);
        ino.set_blocks_count(1 << 40, true, 4096).unwrap();
        assert!(!ino.flags().contains(InodeFlags::HUGE_FILE));
        assert_eq!(ino.blocks_count(true, 4096), 1 << 40);
        assert_eq!(ino.blocks_count(false, 4096), 0);
        ino.set_blocks_count(1 << 50, true, 4096).unwrap();
        assert!(ino.flags().contains(InodeFlags::HUGE_FILE));
        assert_eq!(ino.blocks_count(true, 4096), 1 << 50);
        assert!(ino.set_blocks_count(1 << 40, false, 4096).is_err());
    }

    #[test]
    fn pre_1970_times_decode_signed() {
        let mut ino = Inode::zeroed();
        ino.i_extra_isize.set(32);
        let t = Timestamp { secs: -1, nsecs: 5 };
        ino.set_mtime(t);
        assert_eq!(ino.i_mtime.get(), u32::MAX);
        assert_eq!(ino.mtime(), t);
    }

    proptest! {
        #[test]
        fn checksum_input_and_match_agree_with_verify(
            bytes in proptest::collection::vec(any::<u8>(), 1024),
            size in prop_oneof![Just(128usize), Just(160), Just(256), Just(512), Just(1024)],
            extra in 0u16..200,
            seed: u32,
            ino in 1u32..1_000_000,
            stamp: bool,
        ) {
            let mut rec = bytes[..size].to_vec();
            if size > 128 {
                rec[EXTRA_ISIZE_OFFSET..EXTRA_ISIZE_OFFSET + 2].copy_from_slice(&extra.to_le_bytes());
            }
            if stamp {
                set_inode_checksum(seed, InodeNr(ino), &mut rec).unwrap();
            }
            let full = inode_checksum(seed, InodeNr(ino), &rec).unwrap();
            // In place: the CRC of the record as it is, finished by table.
            let in_place = InodeCsumInPlace::new(size).unwrap();
            let raw = crate::checksum::crc32c(InodeCsumInPlace::seed(seed, InodeNr(ino), &rec), &rec);
            prop_assert_eq!(in_place.finish(&rec, raw), Some(full));
            prop_assert_eq!(InodeCsumInPlace::new(size * 2).unwrap().finish(&rec, raw), None);
            let mut input = InodeCsumInput::default();
            if let Some(bytes) = input.fill(InodeNr(ino), &rec) {
                prop_assert_eq!(crate::checksum::crc32c(seed, bytes), full);
            } else {
                prop_assert!(size > 256);
            }
            prop_assert_eq!(
                inode_checksum_matches(&rec, full),
                verify_inode_checksum(seed, InodeNr(ino), &rec).is_ok()
            );
            if stamp {
                prop_assert!(inode_checksum_matches(&rec, full));
            }
        }
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 128..=512)) {
            let ino = Inode::parse(&bytes).unwrap();
            let mut out = bytes.clone();
            out[..128].fill(0);
            ino.write(&mut out).unwrap();
            prop_assert_eq!(&out, &bytes);
            // No accessor panics on any bytes.
            let _ = (ino.atime(), ino.crtime(), ino.blocks_count(true, 65536), ino.version());
            let _ = ino.check_extra_isize(bytes.len());
            let _ = verify_inode_checksum(1, InodeNr(5), &bytes);
        }

        #[test]
        fn times_round_trip(secs in -(1i64 << 31)..((1i64 << 31) + (3i64 << 32)), nsecs in 0u32..1_000_000_000) {
            let mut ino = Inode::zeroed();
            ino.i_extra_isize.set(32);
            let t = Timestamp { secs, nsecs };
            ino.set_atime(t);
            ino.set_crtime(t);
            prop_assert_eq!(ino.atime(), t);
            prop_assert_eq!(ino.crtime(), Some(t));
        }

        #[test]
        fn checksum_set_then_verify(bytes in proptest::collection::vec(any::<u8>(), 256), seed: u32, ino: u32) {
            let mut rec = bytes;
            set_inode_checksum(seed, InodeNr(ino), &mut rec).unwrap();
            prop_assert!(verify_inode_checksum(seed, InodeNr(ino), &rec).is_ok());
        }
    }
}
