//! Block group descriptors (`struct ext4_group_desc`): 32 bytes, or 64 bytes
//! (`s_desc_size`) when the 64bit feature is on, packed into the group
//! descriptor table (GDT) that follows each superblock copy.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::{crc16, crc32c};
use crate::error::{need, FormatError, Result};
use crate::num;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Descriptor size without the 64bit feature.
pub const DESC_SIZE_32: usize = 32;
/// Descriptor size with the 64bit feature (the minimum `s_desc_size`).
pub const DESC_SIZE_64: usize = 64;

/// `bg_flags`: inode table and bitmap are not initialised.
pub const BG_INODE_UNINIT: u16 = 0x0001;
/// `bg_flags`: block bitmap is not initialised (computable from the layout).
pub const BG_BLOCK_UNINIT: u16 = 0x0002;
/// `bg_flags`: inode table is known to be zeroed.
pub const BG_INODE_ZEROED: u16 = 0x0004;

/// One group descriptor in its 64-byte form; a 32-byte descriptor is the
/// first half with the `_hi` fields reading as zero.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, PartialEq, Eq, Debug)]
#[repr(C)]
#[allow(missing_docs)] // Field names are the kernel's; see ext4.h.
pub struct GroupDesc {
    pub bg_block_bitmap_lo: U32,
    pub bg_inode_bitmap_lo: U32,
    pub bg_inode_table_lo: U32,
    pub bg_free_blocks_count_lo: U16,
    pub bg_free_inodes_count_lo: U16,
    pub bg_used_dirs_count_lo: U16,
    pub bg_flags: U16,
    pub bg_exclude_bitmap_lo: U32,
    pub bg_block_bitmap_csum_lo: U16,
    pub bg_inode_bitmap_csum_lo: U16,
    pub bg_itable_unused_lo: U16,
    pub bg_checksum: U16,
    pub bg_block_bitmap_hi: U32,
    pub bg_inode_bitmap_hi: U32,
    pub bg_inode_table_hi: U32,
    pub bg_free_blocks_count_hi: U16,
    pub bg_free_inodes_count_hi: U16,
    pub bg_used_dirs_count_hi: U16,
    pub bg_itable_unused_hi: U16,
    pub bg_exclude_bitmap_hi: U32,
    pub bg_block_bitmap_csum_hi: U16,
    pub bg_inode_bitmap_csum_hi: U16,
    pub bg_reserved: U32,
}

const _: () = assert!(core::mem::size_of::<GroupDesc>() == DESC_SIZE_64);

/// Offset of `bg_checksum`, which the crc16 skips.
const CHECKSUM_OFFSET: usize = 0x1E;
/// The `bg_block_bitmap_csum_hi` field ends here; descriptors shorter than
/// this keep only the low 16 bits of the bitmap checksums.
const BITMAP_CSUM_HI_END: usize = 0x3C;

fn join(lo: u32, hi: u32, wide: bool) -> u64 {
    u64::from(lo) | if wide { u64::from(hi) << 32 } else { 0 }
}

fn join16(lo: u16, hi: u16, wide: bool) -> u32 {
    u32::from(lo) | if wide { u32::from(hi) << 16 } else { 0 }
}

impl GroupDesc {
    /// An all-zero descriptor.
    pub fn zeroed() -> Self {
        <Self as zerocopy::FromZeros>::new_zeroed()
    }

    /// Reads a descriptor of `desc_size` bytes (32, or 64 and more) from the
    /// start of `bytes`. Bytes beyond 64 are ignored.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] when `bytes` is short, or
    /// [`FormatError::Invalid`] for a descriptor size the format forbids.
    pub fn parse(bytes: &[u8], desc_size: usize) -> Result<Self> {
        check_desc_size(desc_size)?;
        need("group descriptor", bytes, desc_size)?;
        let mut d = Self::zeroed();
        let n = desc_size.min(DESC_SIZE_64);
        d.as_mut_bytes()[..n].copy_from_slice(&bytes[..n]);
        Ok(d)
    }

    /// Writes the first `desc_size` bytes of the descriptor into `out`
    /// (bytes beyond 64 are zeroed).
    ///
    /// # Errors
    /// As [`GroupDesc::parse`].
    pub fn write(&self, out: &mut [u8], desc_size: usize) -> Result<()> {
        check_desc_size(desc_size)?;
        need("group descriptor", out, desc_size)?;
        let n = desc_size.min(DESC_SIZE_64);
        out[..n].copy_from_slice(&self.as_bytes()[..n]);
        out[n..desc_size].fill(0);
        Ok(())
    }

    /// Block bitmap location.
    pub fn block_bitmap(&self, wide: bool) -> u64 {
        join(
            self.bg_block_bitmap_lo.get(),
            self.bg_block_bitmap_hi.get(),
            wide,
        )
    }
    /// Inode bitmap location.
    pub fn inode_bitmap(&self, wide: bool) -> u64 {
        join(
            self.bg_inode_bitmap_lo.get(),
            self.bg_inode_bitmap_hi.get(),
            wide,
        )
    }
    /// First block of the inode table.
    pub fn inode_table(&self, wide: bool) -> u64 {
        join(
            self.bg_inode_table_lo.get(),
            self.bg_inode_table_hi.get(),
            wide,
        )
    }
    /// Free blocks (clusters with bigalloc) in the group.
    pub fn free_blocks_count(&self, wide: bool) -> u32 {
        join16(
            self.bg_free_blocks_count_lo.get(),
            self.bg_free_blocks_count_hi.get(),
            wide,
        )
    }
    /// Free inodes in the group.
    pub fn free_inodes_count(&self, wide: bool) -> u32 {
        join16(
            self.bg_free_inodes_count_lo.get(),
            self.bg_free_inodes_count_hi.get(),
            wide,
        )
    }
    /// Directories in the group.
    pub fn used_dirs_count(&self, wide: bool) -> u32 {
        join16(
            self.bg_used_dirs_count_lo.get(),
            self.bg_used_dirs_count_hi.get(),
            wide,
        )
    }
    /// Inodes at the end of the table never used (uninit_bg/metadata_csum).
    pub fn itable_unused(&self, wide: bool) -> u32 {
        join16(
            self.bg_itable_unused_lo.get(),
            self.bg_itable_unused_hi.get(),
            wide,
        )
    }
    /// `bg_flags`.
    pub fn flags(&self) -> u16 {
        self.bg_flags.get()
    }

    /// Sets the three metadata locations.
    pub fn set_locations(&mut self, block_bitmap: u64, inode_bitmap: u64, inode_table: u64) {
        self.bg_block_bitmap_lo.set(num::lo32(block_bitmap));
        self.bg_block_bitmap_hi.set(num::hi32(block_bitmap));
        self.bg_inode_bitmap_lo.set(num::lo32(inode_bitmap));
        self.bg_inode_bitmap_hi.set(num::hi32(inode_bitmap));
        self.bg_inode_table_lo.set(num::lo32(inode_table));
        self.bg_inode_table_hi.set(num::hi32(inode_table));
    }
    /// Sets the free block count.
    pub fn set_free_blocks_count(&mut self, v: u32) {
        self.bg_free_blocks_count_lo.set(num::lo16(v));
        self.bg_free_blocks_count_hi.set(num::hi16(v));
    }
    /// Sets the free inode count.
    pub fn set_free_inodes_count(&mut self, v: u32) {
        self.bg_free_inodes_count_lo.set(num::lo16(v));
        self.bg_free_inodes_count_hi.set(num::hi16(v));
    }
    /// Sets the directory count.
    pub fn set_used_dirs_count(&mut self, v: u32) {
        self.bg_used_dirs_count_lo.set(num::lo16(v));
        self.bg_used_dirs_count_hi.set(num::hi16(v));
    }
    /// Sets the unused inode count.
    pub fn set_itable_unused(&mut self, v: u32) {
        self.bg_itable_unused_lo.set(num::lo16(v));
        self.bg_itable_unused_hi.set(num::hi16(v));
    }
    /// Sets `bg_flags`.
    pub fn set_flags(&mut self, v: u16) {
        self.bg_flags.set(v);
    }

    /// Stores a block bitmap checksum (full crc32c; the high half only when
    /// the descriptor is large enough to hold it).
    pub fn set_block_bitmap_csum(&mut self, crc: u32, desc_size: usize) {
        self.bg_block_bitmap_csum_lo.set(num::lo16(crc));
        if desc_size >= BITMAP_CSUM_HI_END - 2 {
            self.bg_block_bitmap_csum_hi.set(num::hi16(crc));
        }
    }
    /// Stores an inode bitmap checksum.
    pub fn set_inode_bitmap_csum(&mut self, crc: u32, desc_size: usize) {
        self.bg_inode_bitmap_csum_lo.set(num::lo16(crc));
        if desc_size >= BITMAP_CSUM_HI_END {
            self.bg_inode_bitmap_csum_hi.set(num::hi16(crc));
        }
    }

    /// The descriptor checksum as the kernel's `ext4_group_desc_csum`
    /// computes it: with metadata_csum the low 16 bits of
    /// crc32c(seed, group, desc with checksum zeroed); with gdt_csum a crc16
    /// over uuid, group number and the descriptor minus the checksum field.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when `desc_size` is not 32 or a power of
    /// two from 64 to 1024.
    pub fn compute_checksum(
        &self,
        group: u32,
        desc_size: usize,
        csum: &GroupDescCsum,
    ) -> Result<u16> {
        check_desc_size(desc_size)?;
        let mut buf = [0u8; 1024];
        self.write(&mut buf, desc_size)?;
        let bytes = &mut buf[..desc_size];
        Ok(match *csum {
            GroupDescCsum::Crc32c { seed } => {
                bytes[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].fill(0);
                let c = crc32c(seed, &group.to_le_bytes());
                (crc32c(c, bytes) & 0xFFFF) as u16
            }
            GroupDescCsum::Crc16 { uuid } => {
                let mut c = crc16(!0, &uuid);
                c = crc16(c, &group.to_le_bytes());
                c = crc16(c, &bytes[..CHECKSUM_OFFSET]);
                crc16(c, &bytes[CHECKSUM_OFFSET + 2..])
            }
        })
    }

    /// Recomputes and stores `bg_checksum`.
    ///
    /// # Errors
    /// As [`GroupDesc::parse`].
    pub fn update_checksum(
        &mut self,
        group: u32,
        desc_size: usize,
        csum: &GroupDescCsum,
    ) -> Result<()> {
        let c = self.compute_checksum(group, desc_size, csum)?;
        self.bg_checksum.set(c);
        Ok(())
    }
}

/// Which checksum protects group descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupDescCsum {
    /// metadata_csum: crc32c from the filesystem's checksum seed.
    Crc32c {
        /// The filesystem checksum seed.
        seed: u32,
    },
    /// gdt_csum (uninit_bg): crc16 starting from the filesystem UUID.
    Crc16 {
        /// The filesystem UUID.
        uuid: [u8; 16],
    },
}

fn check_desc_size(desc_size: usize) -> Result<()> {
    if desc_size == DESC_SIZE_32
        || ((DESC_SIZE_64..=1024).contains(&desc_size) && desc_size.is_power_of_two())
    {
        Ok(())
    } else {
        Err(FormatError::invalid(
            "group descriptor",
            format!("descriptor size {desc_size} is not 32 or a power of two from 64 to 1024"),
        ))
    }
}

/// The bitmap checksum (metadata_csum): crc32c(seed, bitmap bytes), where
/// the block bitmap covers `clusters_per_group / 8` bytes and the inode
/// bitmap `inodes_per_group / 8` bytes.
pub fn bitmap_checksum(seed: u32, bitmap: &[u8]) -> u32 {
    crc32c(seed, bitmap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offsets_match_the_kernel() {
        assert_eq!(core::mem::offset_of!(GroupDesc, bg_flags), 0x12);
        assert_eq!(core::mem::offset_of!(GroupDesc, bg_checksum), 0x1E);
        assert_eq!(core::mem::offset_of!(GroupDesc, bg_block_bitmap_hi), 0x20);
        assert_eq!(core::mem::offset_of!(GroupDesc, bg_itable_unused_hi), 0x32);
        assert_eq!(
            core::mem::offset_of!(GroupDesc, bg_inode_bitmap_csum_hi),
            0x3A
        );
    }

    #[test]
    fn narrow_descriptors_drop_high_halves() {
        let mut d = GroupDesc::zeroed();
        d.set_locations(0x1_0000_0005, 6, 7);
        d.set_free_blocks_count(0x12345);
        let mut buf = [0u8; 32];
        d.write(&mut buf, 32).unwrap();
        let back = GroupDesc::parse(&buf, 32).unwrap();
        assert_eq!(back.block_bitmap(true), 5);
        assert_eq!(back.free_blocks_count(false), 0x2345);
    }

    #[test]
    fn bad_sizes_are_errors() {
        assert!(GroupDesc::parse(&[0u8; 48], 48).is_err());
        assert!(GroupDesc::parse(&[0u8; 16], 32).is_err());
    }

    /// The checksum field is excluded and the group number is covered.
    /// (Agreement with e2fsprogs is tested end to end: e2fsck verifies every
    /// descriptor mkfs.ext4r writes.)
    #[test]
    fn checksums_cover_group_and_skip_own_field() {
        let uuid = [
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        let mut d = GroupDesc::zeroed();
        d.set_locations(18, 34, 50);
        d.set_free_blocks_count(1000);
        d.set_free_inodes_count(2037);
        d.set_used_dirs_count(2);
        d.set_flags(BG_INODE_ZEROED);
        d.set_itable_unused(2037);
        let seed = crate::checksum::fs_csum_seed(&uuid);
        let c32 = d
            .compute_checksum(0, 64, &GroupDescCsum::Crc32c { seed })
            .unwrap();
        let c16 = d
            .compute_checksum(0, 32, &GroupDescCsum::Crc16 { uuid })
            .unwrap();
        // Changing any covered byte changes both checksums; the checksum
        // field itself is excluded.
        let mut e = d;
        e.bg_checksum.set(0xFFFF);
        assert_eq!(
            e.compute_checksum(0, 64, &GroupDescCsum::Crc32c { seed })
                .unwrap(),
            c32
        );
        assert_eq!(
            e.compute_checksum(0, 32, &GroupDescCsum::Crc16 { uuid })
                .unwrap(),
            c16
        );
        e.set_used_dirs_count(3);
        assert_ne!(
            e.compute_checksum(1, 64, &GroupDescCsum::Crc32c { seed })
                .unwrap(),
            c32
        );
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 64)) {
            let d = GroupDesc::parse(&bytes, 64).unwrap();
            let mut out = [0u8; 64];
            d.write(&mut out, 64).unwrap();
            prop_assert_eq!(&out[..], &bytes[..]);
            let d32 = GroupDesc::parse(&bytes, 32).unwrap();
            let mut out32 = [0u8; 32];
            d32.write(&mut out32, 32).unwrap();
            prop_assert_eq!(&out32[..], &bytes[..32]);
        }
    }
}
