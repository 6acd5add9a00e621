//! Commit blocks (`struct commit_header`): the record that a transaction is
//! complete. Under checksum v2/v3 `h_chksum[0]` holds the CRC32C of the whole
//! block (computed with that word zero) and the type and size bytes are 0;
//! checksum v1 (a CRC32 of the transaction, type 1) is not computed here.

#[allow(unused_imports)]
use crate::prelude::*;

use super::{block_type, crc_with_hole, JournalHeader};
use crate::error::{need, FormatError, Result};
use zerocopy::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Bytes of the commit header that carry fields. (C's `sizeof` pads the
/// struct to 64 for the alignment of `h_commit_sec`; the padding is unused.)
pub const COMMIT_HEADER_SIZE: usize = 60;
/// Offset of `h_chksum[0]`.
const CHKSUM_OFFSET: usize = 16;

/// The commit block header.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, PartialEq, Eq, Debug)]
#[repr(C)]
#[allow(missing_docs)] // Field names are the kernel's; see jbd2.h.
pub struct CommitHeader {
    pub h_header: JournalHeader,
    pub h_chksum_type: u8,
    pub h_chksum_size: u8,
    pub h_padding: [u8; 2],
    pub h_chksum: [U32; 8],
    pub h_commit_sec: U64,
    pub h_commit_nsec: U32,
}

const _: () = assert!(core::mem::size_of::<CommitHeader>() == COMMIT_HEADER_SIZE);

impl CommitHeader {
    /// A commit header for transaction `sequence` committed at `sec`.`nsec`,
    /// checksum fields zero.
    pub fn new(sequence: u32, sec: u64, nsec: u32) -> Self {
        let mut h = <Self as zerocopy::FromZeros>::new_zeroed();
        h.h_header = JournalHeader::new(block_type::COMMIT, sequence);
        h.h_commit_sec.set(sec);
        h.h_commit_nsec.set(nsec);
        h
    }

    /// Reads the header of a commit block, checking magic and block type.
    ///
    /// # Errors
    /// [`FormatError::Truncated`], [`FormatError::BadMagic`], or
    /// [`FormatError::Invalid`] for another block type.
    pub fn parse(block: &[u8]) -> Result<Self> {
        need("commit block", block, COMMIT_HEADER_SIZE)?;
        JournalHeader::parse_as("commit block", block, block_type::COMMIT)?;
        super::read_prefix::<Self>("commit block", block)
    }

    /// The header's bytes.
    pub fn to_bytes(&self) -> [u8; COMMIT_HEADER_SIZE] {
        let mut out = [0u8; COMMIT_HEADER_SIZE];
        out.copy_from_slice(self.as_bytes());
        out
    }

    /// The commit time: seconds and nanoseconds.
    pub fn commit_time(&self) -> (u64, u32) {
        (self.h_commit_sec.get(), self.h_commit_nsec.get())
    }
}

/// The v2/v3 checksum of a whole commit block: CRC32C from the journal seed
/// with `h_chksum[0]` taken as zero.
///
/// # Errors
/// [`FormatError::Truncated`] when the block is shorter than the header.
pub fn commit_block_checksum(seed: u32, block: &[u8]) -> Result<u32> {
    need("commit block", block, COMMIT_HEADER_SIZE)?;
    Ok(crc_with_hole(seed, block, CHKSUM_OFFSET))
}

/// Prepares a commit block's checksum fields as jbd2 does under v2/v3
/// (type and size 0) and stores [`commit_block_checksum`].
///
/// # Errors
/// As [`commit_block_checksum`].
pub fn set_commit_block_checksum(seed: u32, block: &mut [u8]) -> Result<()> {
    need("commit block", block, COMMIT_HEADER_SIZE)?;
    block[12] = 0;
    block[13] = 0;
    let c = commit_block_checksum(seed, block)?;
    block[CHKSUM_OFFSET..CHKSUM_OFFSET + 4].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Checks the v2/v3 checksum of a commit block.
///
/// # Errors
/// [`FormatError::Truncated`], or [`FormatError::BadChecksum`] on mismatch.
pub fn verify_commit_block_checksum(seed: u32, block: &[u8]) -> Result<()> {
    let computed = commit_block_checksum(seed, block)?;
    let stored = super::be32_at(block, CHKSUM_OFFSET);
    if stored != computed {
        return Err(FormatError::BadChecksum {
            what: "commit block",
            stored,
            computed,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{journal_csum_seed, samples};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offsets_match_jbd2_h() {
        let h = CommitHeader::new(0, 0, 0);
        let base = h.as_bytes().as_ptr() as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(at(&h.h_chksum_type), 12);
        assert_eq!(at(h.h_chksum.as_bytes().as_ptr()), CHKSUM_OFFSET);
        assert_eq!(at(h.h_commit_sec.as_bytes().as_ptr()), 0x30);
        assert_eq!(at(h.h_commit_nsec.as_bytes().as_ptr()), 0x38);
    }

    #[test]
    fn samples_from_debugfs() {
        for (size, sample, uuid) in [
            (4096, samples::E_COMMIT, samples::UUID_E),
            (1024, samples::F_COMMIT, samples::UUID_F),
        ] {
            let b = samples::sparse(size, sample);
            let seed = journal_csum_seed(&uuid);
            let h = CommitHeader::parse(&b).unwrap();
            assert_eq!(h.h_header.sequence(), 1);
            verify_commit_block_checksum(seed, &b).unwrap();
            // debugfs puts 32-bit seconds in the high half (see samples).
            assert_eq!(h.commit_time().0 >> 32, 0x6b03_7e9c);
            let mut again = b.clone();
            again[CHKSUM_OFFSET..CHKSUM_OFFSET + 4].fill(0);
            set_commit_block_checksum(seed, &mut again).unwrap();
            assert_eq!(again, b);
            again[0x38] ^= 1;
            assert!(verify_commit_block_checksum(seed, &again).is_err());
        }
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(CommitHeader::parse(&[0u8; 59]).is_err());
        assert!(CommitHeader::parse(&[0u8; 60]).is_err());
        let mut b = [0u8; 64];
        b[..12].copy_from_slice(&JournalHeader::new(block_type::REVOKE, 1).to_bytes());
        assert!(CommitHeader::parse(&b).is_err());
        assert!(verify_commit_block_checksum(0, &b[..20]).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(body in proptest::collection::vec(any::<u8>(), 60..200)) {
            let mut b = body;
            b[..8].copy_from_slice(&JournalHeader::new(block_type::COMMIT, 0).to_bytes()[..8]);
            let h = CommitHeader::parse(&b).unwrap();
            prop_assert_eq!(&h.to_bytes()[..], &b[..COMMIT_HEADER_SIZE]);
            set_commit_block_checksum(3, &mut b).unwrap();
            prop_assert!(verify_commit_block_checksum(3, &b).is_ok());
        }
    }
}
