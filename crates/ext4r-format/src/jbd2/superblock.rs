//! The journal superblock (`journal_superblock_t`): 1024 bytes at the start
//! of the journal's first block, big-endian like the rest of jbd2.

#[allow(unused_imports)]
use crate::prelude::*;

use super::{
    block_type, checksum_type, journal_csum_seed, JournalCompat, JournalHeader, JournalIncompat,
    JournalLayout, DEFAULT_FAST_COMMIT_BLOCKS, JBD2_MAGIC, KNOWN_RO_COMPAT, MIN_JOURNAL_BLOCKS,
};
use crate::error::{FormatError, Result};
use zerocopy::big_endian::{I32, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Size of the journal superblock structure.
pub const JOURNAL_SUPERBLOCK_SIZE: usize = 1024;
/// Most filesystems that can share one (external) journal.
pub const USERS_MAX: usize = 48;
/// Offset of `s_checksum`.
const CHECKSUM_OFFSET: usize = 0xFC;

/// The journal superblock exactly as on disk.
#[derive(Clone, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq)]
#[repr(C)]
#[allow(missing_docs)] // Field names are the kernel's; see jbd2.h.
pub struct JournalSuperblock {
    pub s_header: JournalHeader,
    pub s_blocksize: U32,
    pub s_maxlen: U32,
    pub s_first: U32,
    pub s_sequence: U32,
    pub s_start: U32,
    pub s_errno: I32,
    pub s_feature_compat: U32,
    pub s_feature_incompat: U32,
    pub s_feature_ro_compat: U32,
    pub s_uuid: [u8; 16],
    pub s_nr_users: U32,
    pub s_dynsuper: U32,
    pub s_max_transaction: U32,
    pub s_max_trans_data: U32,
    pub s_checksum_type: u8,
    pub s_padding2: [u8; 3],
    pub s_num_fc_blks: U32,
    pub s_head: U32,
    pub s_padding: [U32; 40],
    pub s_checksum: U32,
    pub s_users: [u8; 16 * USERS_MAX],
}

const _: () = assert!(core::mem::size_of::<JournalSuperblock>() == JOURNAL_SUPERBLOCK_SIZE);

impl JournalSuperblock {
    /// An all-zero superblock.
    pub fn zeroed() -> Self {
        <Self as zerocopy::FromZeros>::new_zeroed()
    }

    /// The superblock mke2fs writes for a fresh internal journal
    /// (`ext2fs_create_journal_superblock2`): version 2, no features,
    /// `s_first` 1, `s_sequence` 1, `s_start` 0 (clean), `s_nr_users` 1 but
    /// no user UUIDs, `s_maxlen` covering the journal plus its fast-commit
    /// area. e2fsprogs 1.47 copies the filesystem UUID into `s_uuid` (it is
    /// not zero). The rest of the journal block is zero.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when the journal is smaller than
    /// [`MIN_JOURNAL_BLOCKS`], the block size is not a power of two between
    /// 1 KiB and 64 KiB, or the total length overflows.
    pub fn new_internal(
        block_size: u32,
        journal_blocks: u32,
        fc_blocks: u32,
        uuid: [u8; 16],
    ) -> Result<Self> {
        if journal_blocks < MIN_JOURNAL_BLOCKS {
            return Err(FormatError::invalid(
                "journal size",
                format!("{journal_blocks} blocks (minimum {MIN_JOURNAL_BLOCKS})"),
            ));
        }
        check_block_size(block_size)?;
        let maxlen = journal_blocks
            .checked_add(fc_blocks)
            .ok_or_else(|| FormatError::invalid("journal size", "overflows 32 bits"))?;
        let mut sb = Self::zeroed();
        sb.s_header = JournalHeader::new(block_type::SUPERBLOCK_V2, 0);
        sb.s_blocksize.set(block_size);
        sb.s_maxlen.set(maxlen);
        sb.s_first.set(1);
        sb.s_sequence.set(1);
        sb.s_nr_users.set(1);
        sb.s_num_fc_blks.set(fc_blocks);
        sb.s_uuid = uuid;
        Ok(sb)
    }

    /// Reads a journal superblock from the first 1024 bytes of `bytes`,
    /// checking the magic and that the block type is a superblock.
    /// See [`JournalSuperblock::validate`] for the rest.
    ///
    /// # Errors
    /// [`FormatError::Truncated`], [`FormatError::BadMagic`] or
    /// [`FormatError::Invalid`] for another block type.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let sb = super::read_prefix::<Self>("journal superblock", bytes)?;
        if sb.s_header.h_magic.get() != JBD2_MAGIC {
            return Err(FormatError::BadMagic {
                what: "journal superblock",
                found: sb.s_header.h_magic.get(),
                expected: JBD2_MAGIC,
            });
        }
        let t = sb.s_header.blocktype();
        if t != block_type::SUPERBLOCK_V1 && t != block_type::SUPERBLOCK_V2 {
            return Err(FormatError::invalid(
                "journal superblock",
                format!("block type {t} is not a superblock"),
            ));
        }
        Ok(sb)
    }

    /// The superblock's bytes.
    pub fn to_bytes(&self) -> [u8; JOURNAL_SUPERBLOCK_SIZE] {
        let mut out = [0u8; JOURNAL_SUPERBLOCK_SIZE];
        out.copy_from_slice(self.as_bytes());
        out
    }

    /// 1 or 2, from the block type. Version 1 superblocks have no feature
    /// words: jbd2 ignores whatever those bytes hold.
    pub fn version(&self) -> u32 {
        if self.s_header.blocktype() == block_type::SUPERBLOCK_V1 {
            1
        } else {
            2
        }
    }

    /// The compat features (empty for version 1).
    pub fn compat(&self) -> JournalCompat {
        JournalCompat::from_bits_retain(self.v2_word(self.s_feature_compat.get()))
    }

    /// The incompat features (empty for version 1), unknown bits included.
    pub fn incompat(&self) -> JournalIncompat {
        JournalIncompat::from_bits_retain(self.v2_word(self.s_feature_incompat.get()))
    }

    /// The raw ro_compat word (empty for version 1); no bits are defined.
    pub fn ro_compat(&self) -> u32 {
        self.v2_word(self.s_feature_ro_compat.get())
    }

    fn v2_word(&self, w: u32) -> u32 {
        if self.version() >= 2 {
            w
        } else {
            0
        }
    }

    /// Incompat bits this format does not know; a journal with any cannot be
    /// replayed safely.
    pub fn unknown_incompat(&self) -> u32 {
        self.incompat().bits() & !JournalIncompat::all().bits()
    }

    /// ro_compat bits this format does not know.
    pub fn unknown_ro_compat(&self) -> u32 {
        self.ro_compat() & !KNOWN_RO_COMPAT
    }

    /// The layout of this journal's descriptor and revoke blocks.
    pub fn layout(&self) -> JournalLayout {
        JournalLayout::new(self.incompat())
    }

    /// The checksum seed of this journal's blocks.
    pub fn csum_seed(&self) -> u32 {
        journal_csum_seed(&self.s_uuid)
    }

    /// Size of the fast-commit area: `s_num_fc_blks`, or its default when
    /// zero, and 0 without the fast_commit feature.
    pub fn num_fc_blocks(&self) -> u32 {
        if !self.incompat().contains(JournalIncompat::FAST_COMMIT) {
            return 0;
        }
        match self.s_num_fc_blks.get() {
            0 => DEFAULT_FAST_COMMIT_BLOCKS,
            n => n,
        }
    }

    /// One past the last block of the log proper (`j_last`): `s_maxlen`
    /// minus the fast-commit area, or `None` when that underflows.
    pub fn log_end(&self) -> Option<u32> {
        self.s_maxlen.get().checked_sub(self.num_fc_blocks())
    }

    /// The UUIDs of the filesystems using the journal (external journals):
    /// `s_nr_users` of them, capped at [`USERS_MAX`].
    pub fn users(&self) -> impl Iterator<Item = [u8; 16]> + '_ {
        let n = usize::try_from(self.s_nr_users.get()).map_or(USERS_MAX, |n| n.min(USERS_MAX));
        self.s_users.chunks_exact(16).take(n).map(|c| {
            let mut u = [0u8; 16];
            u.copy_from_slice(c);
            u
        })
    }

    /// The superblock checksum: CRC32C from `~0` over the 1024 bytes with
    /// `s_checksum` zeroed.
    pub fn compute_checksum(&self) -> u32 {
        super::crc_with_hole(!0, self.as_bytes(), CHECKSUM_OFFSET)
    }

    /// Stores the checksum when checksum v2/v3 is on.
    pub fn update_checksum(&mut self) {
        if self.layout().has_csum_v2or3() {
            let c = self.compute_checksum();
            self.s_checksum.set(c);
        }
    }

    /// Checks the stored checksum when checksum v2/v3 is on.
    ///
    /// # Errors
    /// [`FormatError::BadChecksum`] on mismatch.
    pub fn verify_checksum(&self) -> Result<()> {
        if !self.layout().has_csum_v2or3() {
            return Ok(());
        }
        let computed = self.compute_checksum();
        let stored = self.s_checksum.get();
        if computed != stored {
            return Err(FormatError::BadChecksum {
                what: "journal superblock",
                stored,
                computed,
            });
        }
        Ok(())
    }

    /// Checks what jbd2 and e2fsck check before trusting the journal's
    /// geometry: exclusive checksum versions and the checksum type, the block
    /// size, `s_first` and `s_start` inside the log, and a fast-commit area
    /// that leaves at least [`MIN_JOURNAL_BLOCKS`]. Unknown features are not
    /// an error here (see [`JournalSuperblock::unknown_incompat`]), nor is
    /// the checksum (see [`JournalSuperblock::verify_checksum`]).
    ///
    /// # Errors
    /// [`FormatError::Invalid`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        let bad = |what, detail: String| Err(FormatError::invalid(what, detail));
        let inc = self.incompat();
        if inc.contains(JournalIncompat::CSUM_V2 | JournalIncompat::CSUM_V3) {
            return bad("s_feature_incompat", "both checksum v2 and v3".into());
        }
        let v2or3 = self.layout().has_csum_v2or3();
        if v2or3 && self.compat().contains(JournalCompat::CHECKSUM) {
            return bad("s_feature_compat", "checksum v1 with v2/v3".into());
        }
        if v2or3 && self.s_checksum_type != checksum_type::CRC32C {
            return bad("s_checksum_type", format!("{}", self.s_checksum_type));
        }
        check_block_size(self.s_blocksize.get())?;
        let maxlen = self.s_maxlen.get();
        if inc.contains(JournalIncompat::FAST_COMMIT)
            && self.log_end().is_none_or(|end| end < MIN_JOURNAL_BLOCKS)
        {
            return bad(
                "s_num_fc_blks",
                format!("{} of {maxlen} blocks", self.num_fc_blocks()),
            );
        }
        let end = self.log_end().unwrap_or(0);
        let first = self.s_first.get();
        if first == 0 || first >= end {
            return bad("s_first", format!("{first} (log ends at {end})"));
        }
        let start = self.s_start.get();
        if start != 0 && (start < first || start >= end) {
            return bad("s_start", format!("{start} (log is {first}..{end})"));
        }
        Ok(())
    }
}

fn check_block_size(bs: u32) -> Result<()> {
    if !(1024..=65536).contains(&bs) || !bs.is_power_of_two() {
        return Err(FormatError::invalid("s_blocksize", format!("{bs}")));
    }
    Ok(())
}

impl core::fmt::Debug for JournalSuperblock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JournalSuperblock")
            .field("version", &self.version())
            .field("blocksize", &self.s_blocksize.get())
            .field("maxlen", &self.s_maxlen.get())
            .field("first", &self.s_first.get())
            .field("sequence", &self.s_sequence.get())
            .field("start", &self.s_start.get())
            .field("compat", &self.compat())
            .field("incompat", &self.incompat())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::super::samples;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offsets_match_jbd2_h() {
        let sb = JournalSuperblock::zeroed();
        let base = sb.as_bytes().as_ptr() as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(at(sb.s_blocksize.as_bytes().as_ptr()), 0x0c);
        assert_eq!(at(sb.s_sequence.as_bytes().as_ptr()), 0x18);
        assert_eq!(at(sb.s_errno.as_bytes().as_ptr()), 0x20);
        assert_eq!(at(sb.s_feature_compat.as_bytes().as_ptr()), 0x24);
        assert_eq!(at(sb.s_uuid.as_ptr()), 0x30);
        assert_eq!(at(sb.s_nr_users.as_bytes().as_ptr()), 0x40);
        assert_eq!(at(sb.s_max_transaction.as_bytes().as_ptr()), 0x48);
        assert_eq!(at(&sb.s_checksum_type), 0x50);
        assert_eq!(at(sb.s_num_fc_blks.as_bytes().as_ptr()), 0x54);
        assert_eq!(at(sb.s_head.as_bytes().as_ptr()), 0x58);
        assert_eq!(at(sb.s_checksum.as_bytes().as_ptr()), CHECKSUM_OFFSET);
        assert_eq!(at(sb.s_users.as_ptr()), 0x100);
    }

    #[test]
    fn constructor_matches_mke2fs() {
        for (bs, sample) in [(4096, samples::FRESH_SB_4K), (1024, samples::FRESH_SB_1K)] {
            let want = samples::sparse(JOURNAL_SUPERBLOCK_SIZE, sample);
            let sb = JournalSuperblock::new_internal(bs, 4096, 0, samples::UUID_E).unwrap();
            assert_eq!(&sb.to_bytes()[..], &want[..], "block size {bs}");
            let parsed = JournalSuperblock::parse(&want).unwrap();
            parsed.validate().unwrap();
            parsed.verify_checksum().unwrap();
            assert_eq!(parsed.layout().tag_bytes(), 8);
            assert_eq!(parsed.users().count(), 1);
            assert_eq!(parsed.log_end(), Some(4096));
        }
        assert!(JournalSuperblock::new_internal(4096, 1023, 0, [0; 16]).is_err());
        assert!(JournalSuperblock::new_internal(4095, 4096, 0, [0; 16]).is_err());
        assert!(JournalSuperblock::new_internal(4096, u32::MAX, 1, [0; 16]).is_err());
    }

    #[test]
    fn real_checksums_verify() {
        for (sample, layout) in [
            (samples::CSUM_V3_SB, samples::layout_e()),
            (samples::CSUM_V2_SB, samples::layout_f()),
        ] {
            let bytes = samples::sparse(JOURNAL_SUPERBLOCK_SIZE, sample);
            let mut sb = JournalSuperblock::parse(&bytes).unwrap();
            sb.validate().unwrap();
            sb.verify_checksum().unwrap();
            assert_eq!(sb.layout(), layout);
            assert_eq!(sb.unknown_incompat(), 0);
            sb.s_sequence.set(2);
            assert!(sb.verify_checksum().is_err());
            sb.update_checksum();
            sb.verify_checksum().unwrap();
        }
    }

    #[test]
    fn validate_rejects_inconsistent_fields() {
        let good = JournalSuperblock::new_internal(4096, 4096, 0, [1; 16]).unwrap();
        let check = |f: &dyn Fn(&mut JournalSuperblock)| {
            let mut sb = good.clone();
            f(&mut sb);
            sb.validate()
        };
        assert!(check(&|_| {}).is_ok());
        assert!(check(&|sb| sb.s_first.set(0)).is_err());
        assert!(check(&|sb| sb.s_first.set(4096)).is_err());
        assert!(check(&|sb| sb.s_start.set(4096)).is_err());
        assert!(check(&|sb| sb.s_start.set(1)).is_ok());
        assert!(check(&|sb| sb.s_blocksize.set(3000)).is_err());
        assert!(check(&|sb| sb.s_feature_incompat.set(0x18)).is_err());
        // Checksum v3 needs s_checksum_type CRC32C.
        assert!(check(&|sb| sb.s_feature_incompat.set(0x10)).is_err());
        assert!(check(&|sb| {
            sb.s_feature_incompat.set(0x10);
            sb.s_feature_compat.set(1);
            sb.s_checksum_type = checksum_type::CRC32C;
        })
        .is_err());
        // Default fast-commit area (256) when s_num_fc_blks is 0.
        assert!(check(&|sb| sb.s_feature_incompat.set(0x20)).is_ok());
        assert!(check(&|sb| {
            sb.s_feature_incompat.set(0x20);
            sb.s_num_fc_blks.set(3100);
        })
        .is_err());
        // Version 1 ignores the feature words.
        let mut v1 = good.clone();
        v1.s_header.h_blocktype.set(block_type::SUPERBLOCK_V1);
        v1.s_feature_incompat.set(0xffff_ffff);
        assert_eq!(v1.incompat(), JournalIncompat::empty());
        v1.validate().unwrap();
    }

    #[test]
    fn parse_rejects_garbage() {
        assert!(matches!(
            JournalSuperblock::parse(&[0u8; 100]),
            Err(FormatError::Truncated { .. })
        ));
        assert!(matches!(
            JournalSuperblock::parse(&[0u8; 1024]),
            Err(FormatError::BadMagic { .. })
        ));
        let mut b = [0u8; 1024];
        b[..12].copy_from_slice(&JournalHeader::new(block_type::DESCRIPTOR, 1).to_bytes());
        assert!(matches!(
            JournalSuperblock::parse(&b),
            Err(FormatError::Invalid { .. })
        ));
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 1024), v1 in any::<bool>()) {
            let mut bytes = bytes;
            let t = if v1 { block_type::SUPERBLOCK_V1 } else { block_type::SUPERBLOCK_V2 };
            bytes[..8].copy_from_slice(&JournalHeader::new(t, 0).to_bytes()[..8]);
            let sb = JournalSuperblock::parse(&bytes).unwrap();
            prop_assert_eq!(&sb.to_bytes()[..], &bytes[..]);
            // Nothing derived from arbitrary bytes panics.
            let _ = (sb.validate(), sb.verify_checksum(), sb.log_end(), sb.users().count());
            let _ = (sb.layout().tag_bytes(), sb.unknown_incompat(), format!("{sb:?}"));
        }
    }
}
