//! Revoke blocks (`jbd2_journal_revoke_header_t`): a header, `r_count` (bytes
//! in use, header included), then big-endian block numbers of 4 bytes, or 8
//! with 64bit. Replay skips journal copies of a revoked block made by this
//! or earlier transactions.

#[allow(unused_imports)]
use crate::prelude::*;

use super::{
    block_type, set_block_tail_checksum, verify_block_tail_checksum, JournalHeader, JournalLayout,
    HEADER_SIZE,
};
use crate::error::{need, FormatError, Result};
use crate::types::BlockNr;
use zerocopy::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Size of [`RevokeHeader`]; the first record follows it.
pub const REVOKE_HEADER_SIZE: usize = 16;

/// The revoke block header.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct RevokeHeader {
    /// The common header, block type [`block_type::REVOKE`].
    pub r_header: JournalHeader,
    /// Bytes of the block in use, header included.
    pub r_count: U32,
}

const _: () = assert!(core::mem::size_of::<RevokeHeader>() == REVOKE_HEADER_SIZE);

/// A parsed revoke block.
#[derive(Clone, Copy, Debug)]
pub struct RevokeBlock<'a> {
    block: &'a [u8],
    layout: JournalLayout,
    header: RevokeHeader,
}

impl<'a> RevokeBlock<'a> {
    /// Checks the header of a revoke block (`block` is the whole journal
    /// block) and that `r_count` stays before the tail, as recovery does.
    ///
    /// # Errors
    /// [`FormatError::Truncated`], [`FormatError::BadMagic`], or
    /// [`FormatError::Invalid`] for another block type or an `r_count` past
    /// the usable bytes.
    pub fn parse(block: &'a [u8], layout: JournalLayout) -> Result<Self> {
        need(
            "revoke block",
            block,
            REVOKE_HEADER_SIZE + layout.tail_bytes(),
        )?;
        JournalHeader::parse_as("revoke block", block, block_type::REVOKE)?;
        let header = super::read_prefix::<RevokeHeader>("revoke block", block)?;
        let count = header.r_count.get();
        let usable = block.len() - layout.tail_bytes();
        if u64::from(count) > usable as u64 {
            return Err(FormatError::invalid(
                "r_count",
                format!("{count} exceeds the {usable} usable bytes"),
            ));
        }
        Ok(RevokeBlock {
            block,
            layout,
            header,
        })
    }

    /// The header.
    pub fn header(&self) -> RevokeHeader {
        self.header
    }

    /// The revoked block numbers: every whole record between the header and
    /// `r_count` (a count below the header size means none).
    pub fn records(&self) -> RevokeIter<'a> {
        // parse() bounded r_count by the block length.
        let end = self.header.r_count.get() as usize;
        RevokeIter {
            bytes: self.block,
            off: REVOKE_HEADER_SIZE,
            end,
            size: self.layout.revoke_record_bytes(),
        }
    }

    /// Checks the tail checksum (checksum v2/v3 only).
    ///
    /// # Errors
    /// [`FormatError::BadChecksum`] on mismatch.
    pub fn verify_checksum(&self, seed: u32) -> Result<()> {
        if !self.layout.has_csum_v2or3() {
            return Ok(());
        }
        verify_block_tail_checksum(seed, self.block)
    }
}

/// Iterator over the records of a [`RevokeBlock`].
#[derive(Clone, Debug)]
pub struct RevokeIter<'a> {
    bytes: &'a [u8],
    off: usize,
    end: usize,
    size: usize,
}

impl Iterator for RevokeIter<'_> {
    type Item = BlockNr;

    fn next(&mut self) -> Option<BlockNr> {
        if self.off + self.size > self.end {
            return None;
        }
        let rec = &self.bytes[self.off..self.off + self.size];
        self.off += self.size;
        let v = rec.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        Some(BlockNr(v))
    }
}

/// Builds a revoke block in place.
#[derive(Debug)]
pub struct RevokeWriter<'a> {
    block: &'a mut [u8],
    layout: JournalLayout,
    off: usize,
}

impl<'a> RevokeWriter<'a> {
    /// Zeroes `block` (a whole journal block) and writes a revoke header for
    /// transaction `sequence`.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] when the block cannot hold header and tail.
    pub fn new(block: &'a mut [u8], layout: JournalLayout, sequence: u32) -> Result<Self> {
        need(
            "revoke block",
            block,
            REVOKE_HEADER_SIZE + layout.tail_bytes(),
        )?;
        block.fill(0);
        block[..HEADER_SIZE]
            .copy_from_slice(&JournalHeader::new(block_type::REVOKE, sequence).to_bytes());
        Ok(RevokeWriter {
            block,
            layout,
            off: REVOKE_HEADER_SIZE,
        })
    }

    /// Appends a record; `Ok(false)` when the block is full.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when the block number needs 64 bits and the
    /// journal lacks the 64bit feature.
    pub fn push(&mut self, block: BlockNr) -> Result<bool> {
        let size = self.layout.revoke_record_bytes();
        if self.off + size > self.block.len() - self.layout.tail_bytes() {
            return Ok(false);
        }
        let rec = &mut self.block[self.off..self.off + size];
        if size == 8 {
            rec.copy_from_slice(&block.0.to_be_bytes());
        } else {
            let v = u32::try_from(block.0).map_err(|_| {
                FormatError::invalid("revoke record", format!("{block} needs 64bit"))
            })?;
            rec.copy_from_slice(&v.to_be_bytes());
        }
        self.off += size;
        Ok(true)
    }

    /// Records written so far.
    pub fn len(&self) -> usize {
        (self.off - REVOKE_HEADER_SIZE) / self.layout.revoke_record_bytes()
    }

    /// Whether no record was written.
    pub fn is_empty(&self) -> bool {
        self.off == REVOKE_HEADER_SIZE
    }

    /// Stores `r_count` and, under checksum v2/v3, the tail checksum from
    /// the journal seed `seed`. Returns the number of records.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when the block is too large for `r_count`
    /// (jbd2 blocks are at most 64 KiB); checksum errors are passed on.
    pub fn finish(self, seed: u32) -> Result<usize> {
        let n = self.len();
        let count = u32::try_from(self.off)
            .map_err(|_| FormatError::invalid("r_count", "block too large"))?;
        self.block[HEADER_SIZE..REVOKE_HEADER_SIZE].copy_from_slice(&count.to_be_bytes());
        if self.layout.has_csum_v2or3() {
            set_block_tail_checksum(seed, self.block)?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{journal_csum_seed, samples, JournalIncompat};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn samples_from_debugfs() {
        let e = (
            4096,
            samples::E_REVOKE,
            samples::layout_e(),
            samples::UUID_E,
        );
        let f = (
            1024,
            samples::F_REVOKE,
            samples::layout_f(),
            samples::UUID_F,
        );
        for ((size, sample, layout, uuid), want) in [(e, &[200u64, 201][..]), (f, &[200, 201, 202])]
        {
            let b = samples::sparse(size, sample);
            let seed = journal_csum_seed(&uuid);
            let r = RevokeBlock::parse(&b, layout).unwrap();
            r.verify_checksum(seed).unwrap();
            let got: Vec<u64> = r.records().map(|b| b.0).collect();
            assert_eq!(got, want);
            // The writer reproduces the block byte for byte.
            let mut out = vec![0xaau8; size];
            let mut w = RevokeWriter::new(&mut out, layout, 1).unwrap();
            for &blk in want {
                assert!(w.push(BlockNr(blk)).unwrap());
            }
            assert_eq!(w.finish(seed).unwrap(), want.len());
            assert_eq!(out, b);
            let mut bad = b.clone();
            bad[0x17] ^= 1;
            let r = RevokeBlock::parse(&bad, layout).unwrap();
            assert!(r.verify_checksum(seed).is_err());
        }
    }

    #[test]
    fn bad_counts_and_wide_numbers() {
        let layout = samples::layout_f();
        let mut b = vec![0u8; 1024];
        b[..12].copy_from_slice(&JournalHeader::new(block_type::REVOKE, 1).to_bytes());
        b[12..16].copy_from_slice(&1021u32.to_be_bytes());
        assert!(RevokeBlock::parse(&b, layout).is_err());
        b[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(RevokeBlock::parse(&b, layout).is_err());
        b[12..16].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(RevokeBlock::parse(&b, layout).unwrap().records().count(), 0);
        assert!(RevokeBlock::parse(&b[..19], layout).is_err());

        let mut w = RevokeWriter::new(&mut b, layout, 1).unwrap();
        assert!(w.push(BlockNr(1 << 32)).is_err());
        let wide = JournalLayout::new(JournalIncompat::BIT64);
        let mut w = RevokeWriter::new(&mut b, wide, 1).unwrap();
        let mut n = 0;
        while w.push(BlockNr((1 << 40) + n)).unwrap() {
            n += 1;
        }
        assert_eq!(n, (1024 - 16) / 8);
        w.finish(0).unwrap();
        let r = RevokeBlock::parse(&b, wide).unwrap();
        assert_eq!(r.records().last(), Some(BlockNr((1 << 40) + n - 1)));
    }

    proptest! {
        #[test]
        fn round_trip(
            wide in any::<bool>(),
            csum in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 256),
            count in 0u32..300,
        ) {
            let mut f = JournalIncompat::REVOKE;
            f.set(JournalIncompat::BIT64, wide);
            f.set(JournalIncompat::CSUM_V3, csum);
            let layout = JournalLayout::new(f);
            let mut b = body;
            b[..12].copy_from_slice(&JournalHeader::new(block_type::REVOKE, 5).to_bytes());
            b[12..16].copy_from_slice(&count.to_be_bytes());
            let Ok(r) = RevokeBlock::parse(&b, layout) else {
                prop_assert!(count as usize > 256 - layout.tail_bytes());
                return Ok(());
            };
            let hdr = RevokeHeader::read_from_bytes(&b[..16]).unwrap();
            prop_assert_eq!(hdr.as_bytes(), &b[..16]);
            let recs: Vec<_> = r.records().collect();
            let mut out = vec![0u8; 256];
            let mut w = RevokeWriter::new(&mut out, layout, 5).unwrap();
            for &rec in &recs {
                prop_assert!(w.push(rec).unwrap());
            }
            w.finish(0).unwrap();
            let end = REVOKE_HEADER_SIZE + recs.len() * layout.revoke_record_bytes();
            prop_assert_eq!(&out[16..end], &b[16..end]);
        }
    }
}
