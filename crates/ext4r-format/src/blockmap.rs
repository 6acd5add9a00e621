//! ext2/3 indirect block maps: files without the extents flag map logical
//! blocks through `i_block`, whose slots 0..12 hold the first twelve data
//! blocks directly, slot 12 an indirect block, slot 13 a double-indirect and
//! slot 14 a triple-indirect block. Each indirect block is an array of
//! `block_size / 4` little-endian 32-bit block numbers, 0 meaning a hole.
//!
//! See `Documentation/filesystems/ext4/blockmap.rst`.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::error::{FormatError, Result};
use crate::types::BlockNr;
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, IntoBytes};

/// Direct slots in `i_block` (`EXT2_NDIR_BLOCKS`).
pub const NDIR_BLOCKS: usize = 12;
/// Slot of the indirect block (`EXT2_IND_BLOCK`).
pub const IND_BLOCK: usize = 12;
/// Slot of the double-indirect block (`EXT2_DIND_BLOCK`).
pub const DIND_BLOCK: usize = 13;
/// Slot of the triple-indirect block (`EXT2_TIND_BLOCK`).
pub const TIND_BLOCK: usize = 14;

/// Block numbers per indirect block for a block size.
pub fn addr_per_block(block_size: u32) -> u32 {
    block_size / 4
}

fn check_block_size(block_size: u32) -> Result<()> {
    if !(1024..=65536).contains(&block_size) || !block_size.is_power_of_two() {
        return Err(FormatError::invalid(
            "block map",
            format!("block size {block_size} is not a power of two from 1024 to 65536"),
        ));
    }
    Ok(())
}

/// How many logical blocks a block map can address: 12 + p + p² + p³ with
/// `p = block_size / 4` (more than 2^32 for block sizes above 4 KiB, where
/// the 32-bit logical block number is the limit instead).
pub fn max_mapped_blocks(block_size: u32) -> u64 {
    let p = u64::from(addr_per_block(block_size));
    NDIR_BLOCKS as u64 + p + p * p + p * p * p
}

/// The largest size in bytes a file may reach on the kernel's ext4
/// (`ext4_max_size` and `ext4_max_bitmap_size`, what it refuses past with
/// EFBIG): with `extents`, 2^32 − 1 blocks (one less than the logical
/// block numbers, so that an extent's length can cover the last one);
/// block-mapped, what the map addresses, less the indirect blocks a dense
/// file of that size needs when `i_blocks` is the limit. Without
/// `huge_file`, `i_blocks` counts at most 2^32 − 1 sectors of 512 bytes.
pub fn max_file_bytes(block_size: u32, huge_file: bool, extents: bool) -> u64 {
    // MAX_LFS_FILESIZE on 64-bit kernels.
    const MAX_LFS: u64 = i64::MAX as u64;
    let bits = block_size.max(1024).trailing_zeros();
    let sectors_max = u32::MAX as u64;
    if extents {
        let res = (u64::from(u32::MAX)) << bits;
        let upper = if huge_file {
            MAX_LFS
        } else {
            (sectors_max >> (bits - 9)) << bits
        };
        return res.min(upper);
    }
    let ppb = u64::from(addr_per_block(block_size));
    let mut upper = if huge_file {
        (1u64 << 48) - 1
    } else {
        sectors_max >> (bits - 9)
    };
    let mut res = NDIR_BLOCKS as u64 + ppb + ppb * ppb + ppb * ppb * ppb;
    let meta = 1 + (1 + ppb) + (1 + ppb + ppb * ppb);
    if res + meta > upper {
        res = upper;
        upper -= NDIR_BLOCKS as u64 + ppb;
        let mut meta = 1;
        if upper < ppb * ppb {
            meta += 1 + upper.div_ceil(ppb);
        } else {
            meta += 1 + ppb;
            upper -= ppb * ppb;
            meta += 1 + upper.div_ceil(ppb) + upper.div_ceil(ppb * ppb);
        }
        res -= meta;
    }
    (res << bits).min(MAX_LFS)
}

/// The slots to follow from `i_block` down to a logical block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockPath {
    len: u8,
    offsets: [u32; 4],
}

impl BlockPath {
    /// The slot in `i_block` (0..15) and then the index within each
    /// indirect block on the way down; one element for a direct block, up
    /// to four for a triple-indirect one.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets[..usize::from(self.len)]
    }

    /// Levels of indirection (0 for a direct block, 3 for triple-indirect).
    pub fn depth(&self) -> usize {
        usize::from(self.len) - 1
    }

    /// The logical block this path reaches (the inverse of [`block_path`]).
    pub fn to_logical(&self, block_size: u32) -> u64 {
        let p = u64::from(addr_per_block(block_size));
        let o = self.offsets();
        let mut base = NDIR_BLOCKS as u64;
        let mut span = 1u64;
        for _ in 1..self.depth() {
            span *= p;
            base += span;
        }
        if self.depth() == 0 {
            return u64::from(o[0]);
        }
        // Indexes below the top slot form a base-p number.
        o[1..].iter().fold(0u64, |acc, &i| acc * p + u64::from(i)) + base
    }
}

/// The path to logical block `logical`, as the kernel's
/// `ext4_block_to_path`.
///
/// # Errors
/// [`FormatError::Invalid`] for a block size outside 1 KiB..64 KiB or a
/// logical block past what the map can address.
pub fn block_path(logical: u32, block_size: u32) -> Result<BlockPath> {
    check_block_size(block_size)?;
    let p = u64::from(addr_per_block(block_size));
    let mut n = u64::from(logical);
    let mut offsets = [0u32; 4];
    if n < NDIR_BLOCKS as u64 {
        offsets[0] = logical;
        return Ok(BlockPath { len: 1, offsets });
    }
    n -= NDIR_BLOCKS as u64;
    let mut span = p;
    // (slot in i_block, levels of indirection below it)
    for (slot, depth) in [(IND_BLOCK, 1u8), (DIND_BLOCK, 2), (TIND_BLOCK, 3)] {
        if n < span {
            #[allow(clippy::cast_possible_truncation)] // the slots are 12..=14
            let slot = slot as u32;
            offsets[0] = slot;
            // Write the base-p digits of n, least significant last.
            for i in (1..=usize::from(depth)).rev() {
                #[allow(clippy::cast_possible_truncation)] // n % p < p, a u32
                let digit = (n % p) as u32;
                offsets[i] = digit;
                n /= p;
            }
            return Ok(BlockPath {
                len: depth + 1,
                offsets,
            });
        }
        n -= span;
        span *= p;
    }
    Err(FormatError::invalid(
        "block map",
        format!("logical block {logical} is beyond the triple-indirect range"),
    ))
}

/// The block numbers of a block-map array of any length: an indirect block,
/// or `i_block`'s fifteen words. A trailing partial word is left out.
pub fn words(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes
        .chunks_exact(4)
        .filter_map(|c| U32::read_from_bytes(c).ok())
        .map(|w| w.get())
}

/// Slot `i` of a block-map array (`i_block` or an indirect block), or
/// `None` past its end.
pub fn word(bytes: &[u8], i: usize) -> Option<u32> {
    let at = i.checked_mul(4)?;
    U32::read_from_bytes(bytes.get(at..at.checked_add(4)?)?)
        .ok()
        .map(|w| w.get())
}

/// Stores `v` in slot `i` of a block-map array; `false` past its end.
pub fn set_word(bytes: &mut [u8], i: usize, v: u32) -> bool {
    let Some(at) = i.checked_mul(4) else {
        return false;
    };
    match at.checked_add(4).and_then(|end| bytes.get_mut(at..end)) {
        Some(slot) => {
            slot.copy_from_slice(U32::new(v).as_bytes());
            true
        }
        None => false,
    }
}

/// An indirect block viewed as its block numbers.
#[derive(Debug, Clone, Copy)]
pub struct IndirectBlock<'a> {
    words: &'a [U32],
}

impl<'a> IndirectBlock<'a> {
    /// Views a block as little-endian block numbers.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when the length is not a valid block size.
    pub fn parse(block: &'a [u8]) -> Result<Self> {
        check_block_size(u32::try_from(block.len()).unwrap_or(0))?;
        let words = <[U32]>::ref_from_bytes(block)
            .map_err(|_| FormatError::invalid("indirect block", "unreadable"))?;
        Ok(IndirectBlock { words })
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether there are no slots (never, for a parsed block).
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The block number in slot `i` (0 is a hole), or `None` past the end.
    pub fn get(&self, i: usize) -> Option<BlockNr> {
        self.words.get(i).map(|w| BlockNr(u64::from(w.get())))
    }

    /// All slots in order.
    pub fn iter(&self) -> impl Iterator<Item = BlockNr> + 'a {
        self.words.iter().map(|w| BlockNr(u64::from(w.get())))
    }
}

/// Writes block numbers into an indirect block, zeroing the slots after them.
///
/// # Errors
/// [`FormatError::Invalid`] when `out` is not a valid block, there are more
/// entries than slots, or a number does not fit in 32 bits.
pub fn write_indirect(out: &mut [u8], entries: &[BlockNr]) -> Result<()> {
    check_block_size(u32::try_from(out.len()).unwrap_or(0))?;
    if entries.len() > out.len() / 4 {
        return Err(FormatError::invalid(
            "indirect block",
            format!("{} entries in {} bytes", entries.len(), out.len()),
        ));
    }
    out.fill(0);
    for (chunk, b) in out.chunks_exact_mut(4).zip(entries) {
        let w = u32::try_from(b.0).map_err(|_| {
            FormatError::invalid("indirect block", format!("{} needs more than 32 bits", b.0))
        })?;
        chunk.copy_from_slice(U32::new(w).as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_size_limits_are_the_kernels() {
        // What the kernel refuses past (ftruncate's EFBIG, found by
        // bisection on loop mounts of mke2fs images of these shapes).
        assert_eq!(max_file_bytes(4096, true, true), 17_592_186_040_320);
        assert_eq!(max_file_bytes(1024, true, true), 4_398_046_510_080);
        assert_eq!(max_file_bytes(4096, false, true), 2_199_023_251_456);
        assert_eq!(max_file_bytes(1024, false, true), 2_199_023_254_528);
        assert_eq!(max_file_bytes(1024, true, false), 17_247_252_480);
        assert_eq!(max_file_bytes(4096, true, false), 4_402_345_721_856);
        assert_eq!(max_file_bytes(4096, false, false), 2_196_873_666_560);
        assert_eq!(max_file_bytes(2048, false, false), 275_415_851_008);
        assert_eq!(max_file_bytes(2048, false, true), 2_199_023_253_504);
        assert_eq!(
            max_file_bytes(65536, true, true),
            (u64::from(u32::MAX)) << 16
        );
    }
    use proptest::prelude::*;

    /// A 300 KiB file written by `mke2fs -t ext2 -b 1024 -d`: debugfs
    /// reports `(0-11):290-301, (IND):302, (12-267):303-558, (DIND):559,
    /// (IND):560, (268-299):561-592`, and `bmap` agrees with this walk.
    #[test]
    fn real_ext2_layout() {
        let bs = 1024;
        let mut iblock = [0u32; 15];
        for (i, w) in iblock.iter_mut().take(12).enumerate() {
            *w = 290 + i as u32;
        }
        iblock[IND_BLOCK] = 302;
        iblock[DIND_BLOCK] = 559;
        let mut ind = vec![0u8; 1024];
        write_indirect(&mut ind, &(303..=558).map(BlockNr).collect::<Vec<_>>()).unwrap();
        let mut dind = vec![0u8; 1024];
        write_indirect(&mut dind, &[BlockNr(560)]).unwrap();
        let mut dind_ind = vec![0u8; 1024];
        write_indirect(&mut dind_ind, &(561..=592).map(BlockNr).collect::<Vec<_>>()).unwrap();
        // The first bytes of the real indirect block 302.
        assert_eq!(&ind[..8], &[0x2f, 0x01, 0, 0, 0x30, 0x01, 0, 0]);
        let read = |n: u32| -> &[u8] {
            match n {
                302 => &ind,
                559 => &dind,
                560 => &dind_ind,
                _ => panic!("unexpected block {n}"),
            }
        };
        for (logical, want) in [
            (0, 290),
            (11, 301),
            (12, 303),
            (13, 304),
            (267, 558),
            (268, 561),
            (269, 562),
            (299, 592),
        ] {
            let path = block_path(logical, bs).unwrap();
            let mut b = iblock[path.offsets()[0] as usize];
            for &i in &path.offsets()[1..] {
                b = IndirectBlock::parse(read(b))
                    .unwrap()
                    .get(i as usize)
                    .unwrap()
                    .0 as u32;
            }
            assert_eq!(b, want, "logical {logical}");
        }
        let blk = IndirectBlock::parse(&dind_ind).unwrap();
        assert_eq!(blk.len(), 256);
        assert_eq!(blk.iter().filter(|b| b.0 != 0).count(), 32);
        assert_eq!(blk.get(256), None);
    }

    #[test]
    fn paths_at_the_boundaries() {
        let p = |l, bs| block_path(l, bs).unwrap().offsets().to_vec();
        assert_eq!(p(11, 4096), vec![11]);
        assert_eq!(p(12, 4096), vec![12, 0]);
        assert_eq!(p(12 + 1023, 4096), vec![12, 1023]);
        assert_eq!(p(12 + 1024, 4096), vec![13, 0, 0]);
        assert_eq!(p(12 + 1024 + 1024 * 1024, 4096), vec![14, 0, 0, 0]);
        // 4 KiB blocks stop short of 2^32 logical blocks, 8 KiB ones do not.
        assert!(block_path(u32::MAX, 4096).is_err());
        assert_eq!(p(u32::MAX, 8192).len(), 4);
        assert_eq!(p(u32::MAX, 65536).len(), 4);
        // 1 KiB blocks address 12 + 256 + 256² + 256³ blocks.
        let last = u32::try_from(max_mapped_blocks(1024) - 1).unwrap();
        assert_eq!(p(last, 1024), vec![14, 255, 255, 255]);
        assert!(block_path(last + 1, 1024).is_err());
        assert!(block_path(0, 1000).is_err());
    }

    #[test]
    fn bad_buffers_are_errors() {
        assert!(IndirectBlock::parse(&[0u8; 100]).is_err());
        assert!(IndirectBlock::parse(&[]).is_err());
        let mut out = [0u8; 1024];
        assert!(write_indirect(&mut out, &[BlockNr(1 << 32)]).is_err());
        assert!(write_indirect(&mut out, &[BlockNr(1); 257]).is_err());
    }

    proptest! {
        #[test]
        fn path_round_trip(logical: u32, shift in 10u32..=16) {
            let bs = 1u32 << shift;
            match block_path(logical, bs) {
                Ok(path) => {
                    prop_assert_eq!(path.to_logical(bs), u64::from(logical));
                    let per = addr_per_block(bs);
                    prop_assert!(path.offsets()[1..].iter().all(|&i| i < per));
                    prop_assert_eq!(usize::try_from(path.offsets()[0]).unwrap() >= NDIR_BLOCKS, path.depth() > 0);
                }
                Err(_) => prop_assert!(u64::from(logical) >= max_mapped_blocks(bs)),
            }
        }

        #[test]
        fn indirect_round_trip(words in proptest::collection::vec(any::<u32>(), 256)) {
            let mut bytes = vec![0u8; 1024];
            for (c, w) in bytes.chunks_exact_mut(4).zip(&words) {
                c.copy_from_slice(&w.to_le_bytes());
            }
            let blk = IndirectBlock::parse(&bytes).unwrap();
            let entries: Vec<BlockNr> = blk.iter().collect();
            let mut out = vec![0xAAu8; 1024];
            write_indirect(&mut out, &entries).unwrap();
            prop_assert_eq!(out, bytes);
        }
    }
}
