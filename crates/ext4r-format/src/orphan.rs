//! Blocks of the orphan file (the orphan_file feature, inode
//! `s_orphan_file_inum`): each block is an array of little-endian inode
//! numbers, 0 meaning a free slot, ended by an 8-byte tail
//! (`struct ext4_orphan_block_tail`) with a magic and, with metadata_csum, a
//! checksum. See the kernel's `fs/ext4/orphan.c` and e2fsprogs'
//! `lib/ext2fs/orphan.c`.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::crc32c;
use crate::error::{need, FormatError, Result};
use crate::types::{BlockNr, InodeNr};
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `ob_magic`.
pub const ORPHAN_BLOCK_MAGIC: u32 = 0x0B10_CA04;
/// Size of the tail at the end of every orphan file block.
pub const ORPHAN_TAIL_SIZE: usize = 8;

/// The tail of an orphan file block.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct OrphanBlockTail {
    /// [`ORPHAN_BLOCK_MAGIC`].
    pub ob_magic: U32,
    /// See [`orphan_block_checksum`].
    pub ob_checksum: U32,
}

const _: () = assert!(core::mem::size_of::<OrphanBlockTail>() == ORPHAN_TAIL_SIZE);

/// Inode slots per orphan file block of `block_size` bytes
/// (`ext4_inodes_per_orphan_block`): 0 when the block cannot hold the tail.
pub fn inodes_per_orphan_block(block_size: usize) -> usize {
    block_size.saturating_sub(ORPHAN_TAIL_SIZE) / 4
}

/// The checksum of an orphan file block: CRC32C from the filesystem seed,
/// chained over the orphan file's inode number and `i_generation` (both
/// 32-bit little-endian), the block's physical number (64-bit
/// little-endian), then the inode slots (the tail is not covered).
///
/// # Errors
/// [`FormatError::Truncated`] when the block cannot hold the tail.
pub fn orphan_block_checksum(
    fs_seed: u32,
    ino: InodeNr,
    generation: u32,
    blocknr: BlockNr,
    block: &[u8],
) -> Result<u32> {
    need("orphan block", block, ORPHAN_TAIL_SIZE)?;
    let crc = crc32c(fs_seed, &ino.0.to_le_bytes());
    let crc = crc32c(crc, &generation.to_le_bytes());
    let crc = crc32c(crc, &blocknr.0.to_le_bytes());
    Ok(crc32c(
        crc,
        &block[..inodes_per_orphan_block(block.len()) * 4],
    ))
}

/// Empties slot `slot` of an orphan file block (the inode it named is no
/// longer an orphan); false when the block has no such slot.
pub fn clear_orphan_slot(block: &mut [u8], slot: usize) -> bool {
    if slot >= inodes_per_orphan_block(block.len()) {
        return false;
    }
    block[slot * 4..slot * 4 + 4].fill(0);
    true
}

/// A parsed orphan file block (`block` is the whole filesystem block).
#[derive(Clone, Copy, Debug)]
pub struct OrphanBlock<'a> {
    block: &'a [u8],
    tail: OrphanBlockTail,
}

impl<'a> OrphanBlock<'a> {
    /// Reads the tail of an orphan file block and checks its magic.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] or [`FormatError::BadMagic`].
    pub fn parse(block: &'a [u8]) -> Result<Self> {
        need("orphan block", block, ORPHAN_TAIL_SIZE)?;
        let tail = OrphanBlockTail::read_from_bytes(&block[block.len() - ORPHAN_TAIL_SIZE..])
            .map_err(|_| FormatError::invalid("orphan block", "unreadable tail"))?;
        if tail.ob_magic.get() != ORPHAN_BLOCK_MAGIC {
            return Err(FormatError::BadMagic {
                what: "orphan block",
                found: tail.ob_magic.get(),
                expected: ORPHAN_BLOCK_MAGIC,
            });
        }
        Ok(OrphanBlock { block, tail })
    }

    /// The tail.
    pub fn tail(&self) -> OrphanBlockTail {
        self.tail
    }

    /// Every slot, free ones (0) included.
    pub fn slots(&self) -> impl Iterator<Item = u32> + 'a {
        let n = inodes_per_orphan_block(self.block.len());
        self.block[..n * 4]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }

    /// The orphan inodes recorded, with their slot index.
    pub fn entries(&self) -> impl Iterator<Item = (usize, InodeNr)> + 'a {
        self.slots()
            .enumerate()
            .filter(|&(_, ino)| ino != 0)
            .map(|(i, ino)| (i, InodeNr(ino)))
    }

    /// Checks the checksum (metadata_csum only) for the orphan file inode
    /// `ino` of generation `generation`, this block being at `blocknr`.
    ///
    /// # Errors
    /// [`FormatError::BadChecksum`] on mismatch.
    pub fn verify_checksum(
        &self,
        fs_seed: u32,
        ino: InodeNr,
        generation: u32,
        blocknr: BlockNr,
    ) -> Result<()> {
        let computed = orphan_block_checksum(fs_seed, ino, generation, blocknr, self.block)?;
        let stored = self.tail.ob_checksum.get();
        if stored != computed {
            return Err(FormatError::BadChecksum {
                what: "orphan block",
                stored,
                computed,
            });
        }
        Ok(())
    }
}

/// Makes `block` an empty orphan file block: all slots free, the magic in
/// the tail, checksum zero.
///
/// # Errors
/// [`FormatError::Truncated`] when the block cannot hold the tail.
pub fn init_orphan_block(block: &mut [u8]) -> Result<()> {
    need("orphan block", block, ORPHAN_TAIL_SIZE)?;
    block.fill(0);
    let at = block.len() - ORPHAN_TAIL_SIZE;
    block[at..at + 4].copy_from_slice(&ORPHAN_BLOCK_MAGIC.to_le_bytes());
    Ok(())
}

/// Stores `ino` (0 to free it) in slot `index`.
///
/// # Errors
/// [`FormatError::Invalid`] when the block has no such slot.
pub fn set_orphan_slot(block: &mut [u8], index: usize, ino: u32) -> Result<()> {
    let n = inodes_per_orphan_block(block.len());
    if index >= n {
        return Err(FormatError::invalid(
            "orphan slot",
            format!("{index} of {n}"),
        ));
    }
    block[index * 4..index * 4 + 4].copy_from_slice(&ino.to_le_bytes());
    Ok(())
}

/// Stores [`orphan_block_checksum`] in the tail.
///
/// # Errors
/// As [`orphan_block_checksum`].
pub fn set_orphan_block_checksum(
    block: &mut [u8],
    fs_seed: u32,
    ino: InodeNr,
    generation: u32,
    blocknr: BlockNr,
) -> Result<()> {
    let c = orphan_block_checksum(fs_seed, ino, generation, blocknr, block)?;
    let at = block.len() - 4;
    block[at..].copy_from_slice(&c.to_le_bytes());
    Ok(())
}

/// The orphan file size mke2fs 1.47 picks (`ext2fs_default_orphan_file_blocks`):
/// 32 blocks below 128 Ki blocks, 1/4096 of the filesystem below 2 Gi blocks,
/// else 512; rounded up to whole clusters of `cluster_ratio` blocks (a
/// power of two; 1 without bigalloc).
pub fn default_orphan_file_blocks(fs_blocks: u64, cluster_ratio: u64) -> u64 {
    let blocks = if fs_blocks < 128 * 1024 {
        32
    } else if fs_blocks < 2 * 1024 * 1024 {
        fs_blocks / 4096
    } else {
        512
    };
    let mask = cluster_ratio.max(1) - 1;
    (blocks + mask) & !mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::fs_csum_seed;
    use proptest::prelude::*;

    const UUID: [u8; 16] = [
        0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55,
        0x55,
    ];

    /// The first two orphan file blocks of `mke2fs -t ext4 -b 1024
    /// -O orphan_file,metadata_csum -U 11111111-2222-3333-4444-555555555555`
    /// (e2fsprogs 1.47.0): inode 12, generation 0, physical blocks 2328 and
    /// 2329, all slots free; only the checksums differ.
    fn sample(checksum: [u8; 4]) -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        b[0x3f8..0x3fc].copy_from_slice(&[0x04, 0xca, 0x10, 0x0b]);
        b[0x3fc..].copy_from_slice(&checksum);
        b
    }

    #[test]
    fn offsets_and_sizes() {
        let t = OrphanBlockTail::read_from_bytes(&[1, 0, 0, 0, 2, 0, 0, 0][..]).unwrap();
        assert_eq!((t.ob_magic.get(), t.ob_checksum.get()), (1, 2));
        assert_eq!(inodes_per_orphan_block(1024), 254);
        assert_eq!(inodes_per_orphan_block(4096), 1022);
        assert_eq!(inodes_per_orphan_block(4), 0);
    }

    #[test]
    fn mke2fs_samples() {
        let seed = fs_csum_seed(&UUID);
        for (blk, csum) in [
            (2328, [0x99, 0xd8, 0xff, 0x74]),
            (2329, [0xc1, 0x9a, 0xce, 0x8a]),
        ] {
            let b = sample(csum);
            let ob = OrphanBlock::parse(&b).unwrap();
            assert_eq!(ob.entries().count(), 0);
            assert_eq!(ob.slots().count(), 254);
            ob.verify_checksum(seed, InodeNr(12), 0, BlockNr(blk))
                .unwrap();
            assert!(ob
                .verify_checksum(seed, InodeNr(12), 1, BlockNr(blk))
                .is_err());
            assert!(ob
                .verify_checksum(seed, InodeNr(13), 0, BlockNr(blk))
                .is_err());
            let mut again = vec![0xffu8; 1024];
            init_orphan_block(&mut again).unwrap();
            set_orphan_block_checksum(&mut again, seed, InodeNr(12), 0, BlockNr(blk)).unwrap();
            assert_eq!(again, b);
        }
    }

    #[test]
    fn entries_are_listed_and_checksummed() {
        let seed = fs_csum_seed(&UUID);
        let mut b = vec![0u8; 1024];
        init_orphan_block(&mut b).unwrap();
        set_orphan_slot(&mut b, 0, 15).unwrap();
        set_orphan_slot(&mut b, 253, 4000).unwrap();
        assert!(set_orphan_slot(&mut b, 254, 1).is_err());
        set_orphan_block_checksum(&mut b, seed, InodeNr(12), 0, BlockNr(2328)).unwrap();
        let ob = OrphanBlock::parse(&b).unwrap();
        let e: Vec<_> = ob.entries().collect();
        assert_eq!(e, [(0, InodeNr(15)), (253, InodeNr(4000))]);
        ob.verify_checksum(seed, InodeNr(12), 0, BlockNr(2328))
            .unwrap();
        // e2fsck 1.47.0 accepted this block (checksum included) in place of
        // the sample's first block and released the two orphans.
        assert_eq!(ob.tail().ob_checksum.get(), 0x60d9_a8b7);
        set_orphan_slot(&mut b, 0, 0).unwrap();
        let ob = OrphanBlock::parse(&b).unwrap();
        assert!(ob
            .verify_checksum(seed, InodeNr(12), 0, BlockNr(2328))
            .is_err());
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(matches!(
            OrphanBlock::parse(&[0u8; 7]),
            Err(FormatError::Truncated { .. })
        ));
        assert!(matches!(
            OrphanBlock::parse(&[0u8; 1024]),
            Err(FormatError::BadMagic { .. })
        ));
        assert!(orphan_block_checksum(0, InodeNr(1), 0, BlockNr(0), &[0; 3]).is_err());
        let mut short = [0u8; 7];
        assert!(init_orphan_block(&mut short).is_err());
    }

    #[test]
    fn default_size_matches_e2fsprogs() {
        assert_eq!(default_orphan_file_blocks(32768, 1), 32);
        assert_eq!(default_orphan_file_blocks(128 * 1024, 1), 32);
        assert_eq!(default_orphan_file_blocks(1024 * 1024, 1), 256);
        assert_eq!(default_orphan_file_blocks(1024 * 1024 + 4096 * 3, 16), 272);
        assert_eq!(default_orphan_file_blocks(u64::MAX, 1), 512);
    }

    proptest! {
        #[test]
        fn round_trip(
            size in prop_oneof![Just(1024usize), Just(4096), 8usize..64],
            body in proptest::collection::vec(any::<u8>(), 4096),
        ) {
            let mut b = body[..size].to_vec();
            b[size - 8..size - 4].copy_from_slice(&ORPHAN_BLOCK_MAGIC.to_le_bytes());
            let ob = OrphanBlock::parse(&b).unwrap();
            let tail = ob.tail();
            prop_assert_eq!(tail.as_bytes(), &b[size - 8..]);
            let mut out = vec![0u8; size];
            init_orphan_block(&mut out).unwrap();
            for (i, ino) in ob.slots().enumerate() {
                set_orphan_slot(&mut out, i, ino).unwrap();
            }
            let n = inodes_per_orphan_block(size) * 4;
            prop_assert_eq!(&out[..n], &b[..n]);
            prop_assert!(ob.entries().all(|(_, ino)| ino.0 != 0));
            set_orphan_block_checksum(&mut out, 1, InodeNr(12), 3, BlockNr(9)).unwrap();
            let o = OrphanBlock::parse(&out).unwrap();
            prop_assert!(o.verify_checksum(1, InodeNr(12), 3, BlockNr(9)).is_ok());
        }
    }
}
