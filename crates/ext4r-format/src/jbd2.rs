//! The jbd2 journal: the block formats the kernel's `fs/jbd2` writes into
//! the journal inode (or an external journal device) and that recovery reads
//! back (`include/linux/jbd2.h`, `Documentation/filesystems/ext4/journal.rst`).
//!
//! Unlike the rest of ext4, every multi-byte jbd2 field is **big-endian**.
//! Every journal block except data blocks starts with a [`JournalHeader`]
//! (magic, block type, transaction sequence). A transaction is written as
//! descriptor blocks (each followed by the data blocks its tags describe),
//! revoke blocks, and a commit block. Block 0 of the journal holds the
//! [`JournalSuperblock`].
//!
//! How descriptor and revoke blocks are laid out depends on incompat
//! features (64-bit block numbers, checksum v2/v3); [`JournalLayout`] carries
//! them so the parsers agree with the kernel's `journal_tag_bytes()`.
//!
//! Checksums (v2 and v3 only; v1's CRC32 over whole transactions is not
//! computed here) chain CRC32C from the journal seed `crc32c(~0, s_uuid)`,
//! see [`journal_csum_seed`].

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::crc32c;
use crate::error::{need, FormatError, Result};
use bitflags::bitflags;
use zerocopy::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

mod commit;
mod descriptor;
pub mod fast_commit;
mod revoke;
#[cfg(test)]
mod samples;
mod superblock;

pub use commit::{
    commit_block_checksum, set_commit_block_checksum, verify_commit_block_checksum, CommitHeader,
    COMMIT_HEADER_SIZE,
};
pub use descriptor::{
    DescriptorBlock, DescriptorTag, DescriptorWriter, JournalBlockTag, JournalBlockTag3, TagFlags,
    TagIter,
};
pub use revoke::{RevokeBlock, RevokeHeader, RevokeIter, RevokeWriter, REVOKE_HEADER_SIZE};
pub use superblock::{JournalSuperblock, JOURNAL_SUPERBLOCK_SIZE, USERS_MAX};

/// `h_magic` of every journal metadata block (the first bytes of /dev/random).
pub const JBD2_MAGIC: u32 = 0xC03B_3998;
/// Size of [`JournalHeader`].
pub const HEADER_SIZE: usize = 12;
/// Smallest journal, in blocks, that mke2fs creates and jbd2 accepts.
pub const MIN_JOURNAL_BLOCKS: u32 = 1024;
/// Fast-commit area size used when `s_num_fc_blks` is zero.
pub const DEFAULT_FAST_COMMIT_BLOCKS: u32 = 256;
/// Size of [`JournalBlockTail`].
pub const TAIL_SIZE: usize = 4;

/// Values of `h_blocktype`.
pub mod block_type {
    /// A descriptor block: tags for the data blocks that follow it.
    pub const DESCRIPTOR: u32 = 1;
    /// A commit block: the transaction is complete.
    pub const COMMIT: u32 = 2;
    /// A version-1 journal superblock (no feature words).
    pub const SUPERBLOCK_V1: u32 = 3;
    /// A version-2 journal superblock.
    pub const SUPERBLOCK_V2: u32 = 4;
    /// A revoke block: blocks whose earlier journal copies must not be replayed.
    pub const REVOKE: u32 = 5;
    /// A fast-commit block.
    pub const FAST_COMMIT: u32 = 6;
}

/// Values of `s_checksum_type` and `h_chksum_type`.
pub mod checksum_type {
    /// CRC32 (checksum v1).
    pub const CRC32: u8 = 1;
    /// MD5 (never implemented).
    pub const MD5: u8 = 2;
    /// SHA1 (never implemented).
    pub const SHA1: u8 = 3;
    /// CRC32C (checksum v2 and v3).
    pub const CRC32C: u8 = 4;
}

bitflags! {
    /// `s_feature_compat` of the journal superblock.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct JournalCompat: u32 {
        /// Checksum v1: a CRC32 of each transaction in its commit block.
        const CHECKSUM = 0x0001;
    }
}

bitflags! {
    /// `s_feature_incompat` of the journal superblock.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct JournalIncompat: u32 {
        /// Revoke blocks may appear.
        const REVOKE = 0x0001;
        /// Block numbers in tags and revoke records are 64-bit.
        const BIT64 = 0x0002;
        /// Commit blocks may be written without waiting for the data.
        const ASYNC_COMMIT = 0x0004;
        /// Checksum v2: CRC32C per block, 16-bit tag checksums.
        const CSUM_V2 = 0x0008;
        /// Checksum v3: CRC32C per block, 32-bit tag checksums (`journal_block_tag3_t`).
        const CSUM_V3 = 0x0010;
        /// A fast-commit area follows the journal proper.
        const FAST_COMMIT = 0x0020;
    }
}

/// `s_feature_ro_compat` bits this format knows: none are defined.
pub const KNOWN_RO_COMPAT: u32 = 0;

/// The header of every journal metadata block (`journal_header_t`).
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, PartialEq, Eq, Debug)]
#[repr(C)]
#[allow(missing_docs)] // Field names are the kernel's; see jbd2.h.
pub struct JournalHeader {
    pub h_magic: U32,
    pub h_blocktype: U32,
    pub h_sequence: U32,
}

const _: () = assert!(core::mem::size_of::<JournalHeader>() == HEADER_SIZE);

impl JournalHeader {
    /// A header with the jbd2 magic.
    pub fn new(blocktype: u32, sequence: u32) -> Self {
        JournalHeader {
            h_magic: U32::new(JBD2_MAGIC),
            h_blocktype: U32::new(blocktype),
            h_sequence: U32::new(sequence),
        }
    }

    /// Reads a header from the start of `bytes`, checking the magic.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] or [`FormatError::BadMagic`].
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let h = read_prefix::<Self>("journal header", bytes)?;
        if h.h_magic.get() != JBD2_MAGIC {
            return Err(FormatError::BadMagic {
                what: "journal header",
                found: h.h_magic.get(),
                expected: JBD2_MAGIC,
            });
        }
        Ok(h)
    }

    /// Reads a header and checks that it is of `blocktype`; `what` names the
    /// block in errors.
    ///
    /// # Errors
    /// As [`JournalHeader::parse`], or [`FormatError::Invalid`] for another type.
    pub fn parse_as(what: &'static str, bytes: &[u8], blocktype: u32) -> Result<Self> {
        let h = Self::parse(bytes)?;
        if h.blocktype() != blocktype {
            return Err(FormatError::invalid(
                what,
                format!("block type {} (expected {blocktype})", h.blocktype()),
            ));
        }
        Ok(h)
    }

    /// `h_blocktype`.
    pub fn blocktype(&self) -> u32 {
        self.h_blocktype.get()
    }

    /// `h_sequence`: the transaction id.
    pub fn sequence(&self) -> u32 {
        self.h_sequence.get()
    }

    /// The header's bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        out.copy_from_slice(self.as_bytes());
        out
    }
}

/// The checksum at the end of descriptor and revoke blocks under checksum
/// v2/v3 (`struct jbd2_journal_block_tail`).
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct JournalBlockTail {
    /// `crc32c(seed, block)` computed with this field zero.
    pub t_checksum: U32,
}

const _: () = assert!(core::mem::size_of::<JournalBlockTail>() == TAIL_SIZE);

/// The incompat features that decide how descriptor and revoke blocks are
/// laid out; every block parser takes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct JournalLayout {
    /// The journal's incompat features (empty for a version-1 superblock).
    pub incompat: JournalIncompat,
}

impl JournalLayout {
    /// A layout for these incompat features.
    pub fn new(incompat: JournalIncompat) -> Self {
        JournalLayout { incompat }
    }

    /// Whether checksum v2 or v3 is on (per-block CRC32C).
    pub fn has_csum_v2or3(self) -> bool {
        self.incompat
            .intersects(JournalIncompat::CSUM_V2 | JournalIncompat::CSUM_V3)
    }

    /// Whether block numbers are 64-bit.
    pub fn is_64bit(self) -> bool {
        self.incompat.contains(JournalIncompat::BIT64)
    }

    /// Bytes per descriptor tag, excluding the optional UUID: the kernel's
    /// `journal_tag_bytes()`. v3 always uses the 16-byte `journal_block_tag3_t`;
    /// otherwise `journal_block_tag_t` is 12 bytes, cut to 8 without 64bit,
    /// and v2 adds 2 bytes (its 16-bit checksum lives inside the 8).
    pub fn tag_bytes(self) -> usize {
        if self.incompat.contains(JournalIncompat::CSUM_V3) {
            return core::mem::size_of::<JournalBlockTag3>();
        }
        let mut sz = core::mem::size_of::<JournalBlockTag>();
        if self.incompat.contains(JournalIncompat::CSUM_V2) {
            sz += 2;
        }
        if self.is_64bit() {
            sz
        } else {
            sz - 4
        }
    }

    /// Bytes reserved at the end of descriptor and revoke blocks for the
    /// [`JournalBlockTail`]: 4 under checksum v2/v3, else 0.
    pub fn tail_bytes(self) -> usize {
        if self.has_csum_v2or3() {
            TAIL_SIZE
        } else {
            0
        }
    }

    /// Bytes per revoke record: 8 with 64bit, else 4.
    pub fn revoke_record_bytes(self) -> usize {
        if self.is_64bit() {
            8
        } else {
            4
        }
    }
}

/// Whether a block being logged must be escaped (`JBD2_FLAG_ESCAPE`): it
/// begins with the jbd2 magic, which a replay would take for a journal
/// block of its own. Its journal copy then starts with four zero bytes
/// ([`escape`]), which replay puts back ([`unescape`]).
pub fn needs_escape(block: &[u8]) -> bool {
    U32::read_from_prefix(block).is_ok_and(|(m, _)| m.get() == JBD2_MAGIC)
}

/// Zeroes the magic at the start of a block logged with the escape flag.
pub fn escape(block: &mut [u8]) {
    let n = block.len().min(4);
    block[..n].fill(0);
}

/// Restores the magic at the start of a replayed block that was logged
/// with the escape flag.
pub fn unescape(block: &mut [u8]) {
    if let Ok((m, _)) = U32::mut_from_prefix(block) {
        m.set(JBD2_MAGIC);
    }
}

/// The journal checksum seed: `crc32c(~0, s_uuid)` of the journal superblock.
pub fn journal_csum_seed(uuid: &[u8; 16]) -> u32 {
    crc32c(!0, uuid)
}

/// CRC32C from `seed` over `block` as if the bytes at `at..at + 4` were zero:
/// how jbd2 checksums a block that stores its own checksum. The caller has
/// checked that `at + 4 <= block.len()`.
fn crc_with_hole(seed: u32, block: &[u8], at: usize) -> u32 {
    let crc = crc32c(seed, &block[..at]);
    let crc = crc32c(crc, &[0u8; 4]);
    crc32c(crc, &block[at + 4..])
}

/// The checksum of a descriptor or revoke block: CRC32C from `seed` over the
/// whole block with its tail (last 4 bytes) zeroed.
///
/// # Errors
/// [`FormatError::Truncated`] when the block cannot hold a header and tail.
pub fn block_tail_checksum(seed: u32, block: &[u8]) -> Result<u32> {
    need("journal block tail", block, HEADER_SIZE + TAIL_SIZE)?;
    Ok(crc_with_hole(seed, block, block.len() - TAIL_SIZE))
}

/// Stores [`block_tail_checksum`] in the block's tail.
///
/// # Errors
/// As [`block_tail_checksum`].
pub fn set_block_tail_checksum(seed: u32, block: &mut [u8]) -> Result<()> {
    let c = block_tail_checksum(seed, block)?;
    let at = block.len() - TAIL_SIZE;
    block[at..].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Checks the tail checksum of a descriptor or revoke block.
///
/// # Errors
/// [`FormatError::Truncated`], or [`FormatError::BadChecksum`] on mismatch.
pub fn verify_block_tail_checksum(seed: u32, block: &[u8]) -> Result<()> {
    let computed = block_tail_checksum(seed, block)?;
    let stored = be32_at(block, block.len() - TAIL_SIZE);
    if stored != computed {
        return Err(FormatError::BadChecksum {
            what: "journal block tail",
            stored,
            computed,
        });
    }
    Ok(())
}

/// The checksum of a journalled data block as its tag stores it:
/// CRC32C from `seed` over the big-endian transaction sequence, then over the
/// block exactly as it sits in the journal (escaped, if it was). Checksum v2
/// tags keep the low 16 bits.
pub fn data_block_checksum(seed: u32, sequence: u32, data: &[u8]) -> u32 {
    crc32c(crc32c(seed, &sequence.to_be_bytes()), data)
}

/// The journal size mke2fs 1.47 picks for a filesystem of `fs_blocks` blocks
/// (`ext2fs_default_journal_size`), or `None` when the filesystem is too
/// small (under 2048 blocks) for a journal. A fast-commit area, if any,
/// comes on top of this.
pub fn default_journal_blocks(fs_blocks: u64) -> Option<u32> {
    // Thresholds are in filesystem blocks; the sizes assume 4 KiB blocks.
    const STEPS: [(u64, u32); 7] = [
        (32 * 1024, 1024),       // < 128 MiB: 4 MiB
        (256 * 1024, 4096),      // < 1 GiB: 16 MiB
        (512 * 1024, 8192),      // < 2 GiB: 32 MiB
        (4096 * 1024, 16384),    // < 16 GiB: 64 MiB
        (8192 * 1024, 32768),    // < 32 GiB: 128 MiB
        (16384 * 1024, 65536),   // < 64 GiB: 256 MiB
        (32768 * 1024, 131_072), // < 128 GiB: 512 MiB
    ];
    if fs_blocks < 2048 {
        return None;
    }
    let blocks = STEPS
        .iter()
        .find(|&&(limit, _)| fs_blocks < limit)
        .map_or(262_144, |&(_, blocks)| blocks); // 1 GiB
    Some(blocks)
}

/// Reads a `T` from the start of `bytes`.
fn read_prefix<T: FromBytes + KnownLayout + Immutable>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T> {
    need(what, bytes, core::mem::size_of::<T>())?;
    T::read_from_prefix(bytes)
        .map(|(v, _)| v)
        .map_err(|_| FormatError::invalid(what, "unreadable"))
}

/// The big-endian u32 at `at`; the caller has bounds-checked.
fn be32_at(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escaped_blocks_round_trip() {
        let mut b = vec![0u8; 1024];
        b[..4].copy_from_slice(&[0xC0, 0x3B, 0x39, 0x98]);
        b[4] = 7;
        assert!(needs_escape(&b));
        let orig = b.clone();
        escape(&mut b);
        assert!(!needs_escape(&b));
        assert_eq!(&b[..5], &[0, 0, 0, 0, 7]);
        unescape(&mut b);
        assert_eq!(b, orig);
        assert!(!needs_escape(&[0xC0, 0x3B]));
    }

    #[test]
    fn tag_bytes_follow_journal_tag_bytes() {
        let l = JournalLayout::new;
        assert_eq!(l(JournalIncompat::empty()).tag_bytes(), 8);
        assert_eq!(l(JournalIncompat::BIT64).tag_bytes(), 12);
        assert_eq!(l(JournalIncompat::CSUM_V2).tag_bytes(), 10);
        assert_eq!(
            l(JournalIncompat::CSUM_V2 | JournalIncompat::BIT64).tag_bytes(),
            14
        );
        assert_eq!(l(JournalIncompat::CSUM_V3).tag_bytes(), 16);
        assert_eq!(
            l(JournalIncompat::CSUM_V3 | JournalIncompat::BIT64).tag_bytes(),
            16
        );
        assert_eq!(l(JournalIncompat::CSUM_V3).tail_bytes(), 4);
        assert_eq!(l(JournalIncompat::REVOKE).tail_bytes(), 0);
        assert_eq!(l(JournalIncompat::BIT64).revoke_record_bytes(), 8);
        assert_eq!(l(JournalIncompat::empty()).revoke_record_bytes(), 4);
    }

    #[test]
    fn header_parses_and_rejects() {
        let h = JournalHeader::new(block_type::COMMIT, 7);
        let b = h.to_bytes();
        assert_eq!(b[..4], [0xc0, 0x3b, 0x39, 0x98]);
        assert_eq!(JournalHeader::parse(&b).unwrap(), h);
        assert!(matches!(
            JournalHeader::parse(&b[..11]),
            Err(FormatError::Truncated { .. })
        ));
        assert!(matches!(
            JournalHeader::parse(&[0u8; 12]),
            Err(FormatError::BadMagic { .. })
        ));
        assert!(JournalHeader::parse_as("x", &b, block_type::REVOKE).is_err());
    }

    #[test]
    fn default_journal_size_matches_mke2fs() {
        assert_eq!(default_journal_blocks(2047), None);
        assert_eq!(default_journal_blocks(2048), Some(1024));
        assert_eq!(default_journal_blocks(32767), Some(1024));
        // 32 MiB and 64 MiB images with 1 KiB blocks, 256 MiB with 4 KiB:
        // mke2fs 1.47.0 made 4096-block journals for all three.
        assert_eq!(default_journal_blocks(32768), Some(4096));
        assert_eq!(default_journal_blocks(65536), Some(4096));
        assert_eq!(default_journal_blocks(256 * 1024), Some(8192));
        assert_eq!(default_journal_blocks(512 * 1024), Some(16384));
        assert_eq!(default_journal_blocks(4096 * 1024), Some(32768));
        assert_eq!(default_journal_blocks(8192 * 1024), Some(65536));
        assert_eq!(default_journal_blocks(16384 * 1024), Some(131_072));
        assert_eq!(default_journal_blocks(32768 * 1024), Some(262_144));
        assert_eq!(default_journal_blocks(u64::MAX), Some(262_144));
    }

    #[test]
    fn tail_checksum_round_trip_and_short_blocks() {
        let mut b = vec![0x5au8; 1024];
        set_block_tail_checksum(1234, &mut b).unwrap();
        verify_block_tail_checksum(1234, &b).unwrap();
        b[100] ^= 1;
        assert!(matches!(
            verify_block_tail_checksum(1234, &b),
            Err(FormatError::BadChecksum { .. })
        ));
        assert!(block_tail_checksum(0, &[0u8; 15]).is_err());
    }

    proptest! {
        #[test]
        fn header_round_trip(bytes in proptest::array::uniform12(any::<u8>())) {
            let mut bytes = bytes;
            bytes[..4].copy_from_slice(&JBD2_MAGIC.to_be_bytes());
            let h = JournalHeader::parse(&bytes).unwrap();
            prop_assert_eq!(h.to_bytes(), bytes);
        }

        #[test]
        fn hole_crc_equals_zeroed_copy(block in proptest::collection::vec(any::<u8>(), 16..600)) {
            let mut copy = block.clone();
            let n = copy.len();
            copy[n - 4..].fill(0);
            prop_assert_eq!(block_tail_checksum(9, &block).unwrap(), crc32c(9, &copy));
        }
    }
}
