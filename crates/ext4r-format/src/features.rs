//! Feature flags of the superblock, with the names e2fsprogs gives them.
//!
//! The three words follow the ext4 rules: an unknown `compat` feature may be
//! ignored, an unknown `ro_compat` one allows only read-only access, an
//! unknown `incompat` one forbids access altogether.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::error::{FormatError, Result};
use bitflags::bitflags;

bitflags! {
    /// `s_feature_compat`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Compat: u32 {
        /// Pre-allocate directory blocks.
        const DIR_PREALLOC = 0x0001;
        /// AFS magic inodes.
        const IMAGIC_INODES = 0x0002;
        /// A jbd2 journal is present.
        const HAS_JOURNAL = 0x0004;
        /// Extended attributes.
        const EXT_ATTR = 0x0008;
        /// Reserved GDT blocks for online growth (inode 7).
        const RESIZE_INODE = 0x0010;
        /// Hashed b-tree directories.
        const DIR_INDEX = 0x0020;
        /// Lazy block groups (never used by ext4).
        const LAZY_BG = 0x0040;
        /// Snapshot exclude bitmap.
        const EXCLUDE_BITMAP = 0x0100;
        /// At most two backup superblocks (`s_backup_bgs`).
        const SPARSE_SUPER2 = 0x0200;
        /// Fast commits in the journal.
        const FAST_COMMIT = 0x0400;
        /// Inode numbers never change (encryption policies rely on it).
        const STABLE_INODES = 0x0800;
        /// Orphan file instead of the orphan list.
        const ORPHAN_FILE = 0x1000;
    }
}

bitflags! {
    /// `s_feature_incompat`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Incompat: u32 {
        /// Compression (never implemented).
        const COMPRESSION = 0x0001;
        /// Directory entries record the file type.
        const FILETYPE = 0x0002;
        /// The journal needs recovery.
        const RECOVER = 0x0004;
        /// This is an external journal device.
        const JOURNAL_DEV = 0x0008;
        /// Meta block groups.
        const META_BG = 0x0010;
        /// Files use extent trees.
        const EXTENTS = 0x0040;
        /// Block numbers up to 2^64, 64-byte group descriptors.
        const BIT64 = 0x0080;
        /// Multiple mount protection.
        const MMP = 0x0100;
        /// Flexible block groups.
        const FLEX_BG = 0x0200;
        /// Large xattr values in inodes.
        const EA_INODE = 0x0400;
        /// Data in directory entries.
        const DIRDATA = 0x1000;
        /// The checksum seed is stored in the superblock.
        const CSUM_SEED = 0x2000;
        /// Directories larger than 2 GiB, 3-level htrees.
        const LARGEDIR = 0x4000;
        /// Small files and directories kept in the inode.
        const INLINE_DATA = 0x8000;
        /// Encrypted inodes.
        const ENCRYPT = 0x10000;
        /// Case-insensitive directories.
        const CASEFOLD = 0x20000;
    }
}

bitflags! {
    /// `s_feature_ro_compat`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct RoCompat: u32 {
        /// Backup superblocks only in groups 0, 1 and powers of 3, 5, 7.
        const SPARSE_SUPER = 0x0001;
        /// Files larger than 2 GiB.
        const LARGE_FILE = 0x0002;
        /// B-tree directories (never used).
        const BTREE_DIR = 0x0004;
        /// Files larger than 2 TiB; i_blocks in fs blocks when HUGE_FILE flag set.
        const HUGE_FILE = 0x0008;
        /// Group descriptors carry a CRC16 (uninit_bg).
        const GDT_CSUM = 0x0010;
        /// More than 65000 subdirectories.
        const DIR_NLINK = 0x0020;
        /// Large inodes reserve `s_min_extra_isize`.
        const EXTRA_ISIZE = 0x0040;
        /// Snapshots.
        const HAS_SNAPSHOT = 0x0080;
        /// Quota inodes.
        const QUOTA = 0x0100;
        /// Allocation in clusters.
        const BIGALLOC = 0x0200;
        /// CRC32C checksums on all metadata.
        const METADATA_CSUM = 0x0400;
        /// Replicas.
        const REPLICA = 0x0800;
        /// Read-only filesystem image.
        const READONLY = 0x1000;
        /// Project quota.
        const PROJECT = 0x2000;
        /// Shared blocks (deduplicated images).
        const SHARED_BLOCKS = 0x4000;
        /// fs-verity files.
        const VERITY = 0x8000;
        /// The orphan file holds entries.
        const ORPHAN_PRESENT = 0x10000;
    }
}

/// The three feature words together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Features {
    /// Compatible features.
    pub compat: Compat,
    /// Incompatible features.
    pub incompat: Incompat,
    /// Read-only compatible features.
    pub ro_compat: RoCompat,
}

/// The features e2fsprogs 1.47's library opens (its
/// `EXT2_LIB_FEATURE_*_SUPP` sets). e2fsck refuses to check a filesystem
/// with any other bit set, in any word, and tune2fs to change one with an
/// other incompat or ro_compat bit; ext4r's checker and tune do the same.
/// Named features outside them: `lazy_bg` and `snapshot_bitmap` (compat),
/// `compression` and `dirdata` (incompat), `btree_dir`, `has_snapshot` and
/// `replica` (ro_compat).
pub const E2FSPROGS_SUPPORTED: Features = Features {
    compat: Compat::DIR_PREALLOC
        .union(Compat::IMAGIC_INODES)
        .union(Compat::HAS_JOURNAL)
        .union(Compat::EXT_ATTR)
        .union(Compat::RESIZE_INODE)
        .union(Compat::DIR_INDEX)
        .union(Compat::SPARSE_SUPER2)
        .union(Compat::FAST_COMMIT)
        .union(Compat::STABLE_INODES)
        .union(Compat::ORPHAN_FILE),
    incompat: Incompat::FILETYPE
        .union(Incompat::RECOVER)
        .union(Incompat::JOURNAL_DEV)
        .union(Incompat::META_BG)
        .union(Incompat::EXTENTS)
        .union(Incompat::BIT64)
        .union(Incompat::MMP)
        .union(Incompat::FLEX_BG)
        .union(Incompat::EA_INODE)
        .union(Incompat::CSUM_SEED)
        .union(Incompat::LARGEDIR)
        .union(Incompat::INLINE_DATA)
        .union(Incompat::ENCRYPT)
        .union(Incompat::CASEFOLD),
    ro_compat: RoCompat::SPARSE_SUPER
        .union(RoCompat::LARGE_FILE)
        .union(RoCompat::HUGE_FILE)
        .union(RoCompat::GDT_CSUM)
        .union(RoCompat::DIR_NLINK)
        .union(RoCompat::EXTRA_ISIZE)
        .union(RoCompat::QUOTA)
        .union(RoCompat::BIGALLOC)
        .union(RoCompat::METADATA_CSUM)
        .union(RoCompat::READONLY)
        .union(RoCompat::PROJECT)
        .union(RoCompat::SHARED_BLOCKS)
        .union(RoCompat::VERITY)
        .union(RoCompat::ORPHAN_PRESENT),
};

/// Which word a feature lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// `s_feature_compat`.
    Compat,
    /// `s_feature_incompat`.
    Incompat,
    /// `s_feature_ro_compat`.
    RoCompat,
}

/// The e2fsprogs names, first name of each bit is the canonical one.
const NAMES: &[(Word, u32, &str)] = &[
    (Word::Compat, 0x0001, "dir_prealloc"),
    (Word::Compat, 0x0004, "has_journal"),
    (Word::Compat, 0x0002, "imagic_inodes"),
    (Word::Compat, 0x0008, "ext_attr"),
    (Word::Compat, 0x0020, "dir_index"),
    (Word::Compat, 0x0010, "resize_inode"),
    (Word::Compat, 0x0040, "lazy_bg"),
    (Word::Compat, 0x0100, "snapshot_bitmap"),
    (Word::Compat, 0x0200, "sparse_super2"),
    (Word::Compat, 0x0400, "fast_commit"),
    (Word::Compat, 0x0800, "stable_inodes"),
    (Word::Compat, 0x1000, "orphan_file"),
    (Word::RoCompat, 0x0001, "sparse_super"),
    (Word::RoCompat, 0x0002, "large_file"),
    (Word::RoCompat, 0x0008, "huge_file"),
    (Word::RoCompat, 0x0010, "uninit_bg"),
    (Word::RoCompat, 0x0010, "uninit_groups"),
    (Word::RoCompat, 0x0020, "dir_nlink"),
    (Word::RoCompat, 0x0040, "extra_isize"),
    (Word::RoCompat, 0x0100, "quota"),
    (Word::RoCompat, 0x0200, "bigalloc"),
    (Word::RoCompat, 0x0400, "metadata_csum"),
    (Word::RoCompat, 0x0800, "replica"),
    (Word::RoCompat, 0x1000, "read-only"),
    (Word::RoCompat, 0x2000, "project"),
    (Word::RoCompat, 0x4000, "shared_blocks"),
    (Word::RoCompat, 0x8000, "verity"),
    (Word::RoCompat, 0x10000, "orphan_present"),
    (Word::Incompat, 0x0001, "compression"),
    (Word::Incompat, 0x0002, "filetype"),
    (Word::Incompat, 0x0004, "needs_recovery"),
    (Word::Incompat, 0x0008, "journal_dev"),
    (Word::Incompat, 0x0040, "extent"),
    (Word::Incompat, 0x0040, "extents"),
    (Word::Incompat, 0x0010, "meta_bg"),
    (Word::Incompat, 0x0080, "64bit"),
    (Word::Incompat, 0x0100, "mmp"),
    (Word::Incompat, 0x0200, "flex_bg"),
    (Word::Incompat, 0x0400, "ea_inode"),
    (Word::Incompat, 0x1000, "dirdata"),
    (Word::Incompat, 0x2000, "metadata_csum_seed"),
    (Word::Incompat, 0x4000, "large_dir"),
    (Word::Incompat, 0x8000, "inline_data"),
    (Word::Incompat, 0x10000, "encrypt"),
    (Word::Incompat, 0x20000, "casefold"),
    (Word::Incompat, 0x20000, "fname_encoding"),
];

impl Features {
    /// The bits of `self` outside `known`, word by word.
    pub fn outside(&self, known: &Features) -> Features {
        Features {
            compat: Compat::from_bits_retain(self.compat.bits() & !known.compat.bits()),
            incompat: Incompat::from_bits_retain(self.incompat.bits() & !known.incompat.bits()),
            ro_compat: RoCompat::from_bits_retain(self.ro_compat.bits() & !known.ro_compat.bits()),
        }
    }

    /// Whether no bit is set in any word.
    pub fn is_empty(&self) -> bool {
        self.compat.bits() | self.incompat.bits() | self.ro_compat.bits() == 0
    }

    /// Builds from the raw superblock words, keeping unknown bits.
    pub fn from_raw(compat: u32, incompat: u32, ro_compat: u32) -> Self {
        Features {
            compat: Compat::from_bits_retain(compat),
            incompat: Incompat::from_bits_retain(incompat),
            ro_compat: RoCompat::from_bits_retain(ro_compat),
        }
    }

    /// Sets or clears one bit of one word.
    pub fn set(&mut self, word: Word, mask: u32, on: bool) {
        let apply = |bits: u32| if on { bits | mask } else { bits & !mask };
        match word {
            Word::Compat => self.compat = Compat::from_bits_retain(apply(self.compat.bits())),
            Word::Incompat => {
                self.incompat = Incompat::from_bits_retain(apply(self.incompat.bits()))
            }
            Word::RoCompat => {
                self.ro_compat = RoCompat::from_bits_retain(apply(self.ro_compat.bits()))
            }
        }
    }

    /// Whether one bit of one word is set.
    pub fn has(&self, word: Word, mask: u32) -> bool {
        let bits = match word {
            Word::Compat => self.compat.bits(),
            Word::Incompat => self.incompat.bits(),
            Word::RoCompat => self.ro_compat.bits(),
        };
        bits & mask != 0
    }

    /// Looks a feature name up as e2fsprogs does: its names, case-insensitive,
    /// or the generic `FEATURE_C12` / `FEATURE_I3` / `FEATURE_R7` form.
    pub fn lookup(name: &str) -> Option<(Word, u32)> {
        if let Some(&(w, m, _)) = NAMES.iter().find(|(_, _, n)| n.eq_ignore_ascii_case(name)) {
            return Some((w, m));
        }
        let rest = name
            .get(..8)?
            .eq_ignore_ascii_case("FEATURE_")
            .then(|| &name[8..])?;
        let mut chars = rest.chars();
        let word = match chars.next()?.to_ascii_uppercase() {
            'C' => Word::Compat,
            'I' => Word::Incompat,
            'R' => Word::RoCompat,
            _ => return None,
        };
        let bit: u32 = chars.as_str().parse().ok()?;
        (bit < 32).then(|| (word, 1u32 << bit))
    }

    /// The e2fsprogs name of a bit, or `FEATURE_<W><n>` for bits it does not name.
    pub fn name(word: Word, mask: u32) -> String {
        if let Some((_, _, n)) = NAMES.iter().find(|(w, m, _)| *w == word && *m == mask) {
            return (*n).to_string();
        }
        let c = match word {
            Word::Compat => 'C',
            Word::Incompat => 'I',
            Word::RoCompat => 'R',
        };
        format!("FEATURE_{c}{}", mask.trailing_zeros())
    }

    /// Names of all set features in dumpe2fs's order (compat, incompat, ro_compat,
    /// each by ascending bit).
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (word, bits) in [
            (Word::Compat, self.compat.bits()),
            (Word::Incompat, self.incompat.bits()),
            (Word::RoCompat, self.ro_compat.bits()),
        ] {
            for bit in 0..32 {
                let mask = 1u32 << bit;
                if bits & mask != 0 {
                    out.push(Self::name(word, mask));
                }
            }
        }
        out
    }

    /// Applies an `-O` style edit list: names separated by commas or white
    /// space, `^name` (or `-name`) clears, `+name` or `name` sets, and `none` /
    /// `clear` clears everything. Returns the list of (word, mask, on) edits in
    /// order so that callers can check each against their rules.
    ///
    /// # Errors
    /// [`FormatError::UnknownFeature`] for a name that is not known.
    pub fn edit(&mut self, list: &str) -> Result<Vec<(Word, u32, bool)>> {
        let mut edits = Vec::new();
        for item in list.split(|c: char| c == ',' || c.is_whitespace()) {
            if item.is_empty() {
                continue;
            }
            if item.eq_ignore_ascii_case("none") || item.eq_ignore_ascii_case("clear") {
                *self = Features::default();
                continue;
            }
            let (on, name) = match item.as_bytes()[0] {
                b'^' | b'-' => (false, &item[1..]),
                b'+' => (true, &item[1..]),
                _ => (true, item),
            };
            let (word, mask) =
                Self::lookup(name).ok_or_else(|| FormatError::UnknownFeature(name.to_string()))?;
            self.set(word, mask, on);
            edits.push((word, mask, on));
        }
        Ok(edits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_sets_and_clears() {
        let mut f = Features::default();
        f.edit("has_journal,extents ^has_journal,64bit,uninit_groups")
            .unwrap();
        assert!(!f.compat.contains(Compat::HAS_JOURNAL));
        assert!(f.incompat.contains(Incompat::EXTENTS | Incompat::BIT64));
        assert!(f.ro_compat.contains(RoCompat::GDT_CSUM));
        assert_eq!(f.names(), vec!["extent", "64bit", "uninit_bg"]);
    }

    #[test]
    fn generic_names_round_trip() {
        assert_eq!(
            Features::lookup("FEATURE_C13"),
            Some((Word::Compat, 1 << 13))
        );
        assert_eq!(Features::name(Word::Compat, 1 << 13), "FEATURE_C13");
        assert_eq!(Features::lookup("FEATURE_X1"), None);
        assert_eq!(Features::lookup("FEATURE_C99"), None);
    }

    #[test]
    fn unknown_feature_is_an_error() {
        let mut f = Features::default();
        assert_eq!(
            f.edit("frobnicate"),
            Err(FormatError::UnknownFeature("frobnicate".into()))
        );
    }

    #[test]
    fn none_clears_everything() {
        let mut f = Features::from_raw(0x3c, 0x2c2, 0x46b);
        f.edit("none,filetype").unwrap();
        assert_eq!(f, Features::from_raw(0, 2, 0));
    }
}
