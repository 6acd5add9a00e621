//! The superblock features this checker knows how to check: those e2fsck
//! 1.47 checks (libext2fs's supported sets). A filesystem with any other
//! bit set is not checked at all, in any word: a repair that does not know
//! what a feature means could "fix" the structures it adds (an unknown
//! `ro_compat` feature is exactly one whose on-disk data a writer must keep
//! up to date), and a check could report them as damage. e2fsck refuses
//! such a filesystem with "has unsupported feature(s)" and "Get a newer
//! version"; so do we.
//!
//! The sets are [`E2FSPROGS_SUPPORTED`] (some named features are outside
//! them, as in e2fsck).

use ext4r_format::features::E2FSPROGS_SUPPORTED;
use ext4r_format::superblock::Superblock;

/// Features of a superblock that this checker does not check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// Their e2fsprogs names (`FEATURE_I18` style for bits without one),
    /// compat first, then incompat, then ro_compat.
    pub names: Vec<String>,
    /// Whether one is `incompat`: the filesystem cannot be opened at all.
    pub incompat: bool,
    /// Whether one is `ro_compat`: it cannot be opened for writing.
    pub ro_compat: bool,
}

impl Unsupported {
    /// Whether libext2fs's open itself fails (e2fsck exits 8 without
    /// looking further) rather than the check refusing the opened
    /// filesystem (exit 12: "still has errors"): an unknown incompat
    /// feature, or an unknown ro_compat one when opening to write.
    pub fn open_fails(&self, writing: bool) -> bool {
        self.incompat || (self.ro_compat && writing)
    }
}

/// The features of `sb` outside what the checker supports, if any.
pub(crate) fn unsupported(sb: &Superblock) -> Option<Unsupported> {
    let beyond = sb.features().outside(&E2FSPROGS_SUPPORTED);
    (!beyond.is_empty()).then(|| Unsupported {
        names: beyond.names(),
        incompat: !beyond.incompat.is_empty(),
        ro_compat: !beyond.ro_compat.is_empty(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(compat: u32, incompat: u32, ro_compat: u32) -> Superblock {
        let mut s = Superblock::zeroed();
        s.s_feature_compat.set(compat);
        s.s_feature_incompat.set(incompat);
        s.s_feature_ro_compat.set(ro_compat);
        s
    }

    #[test]
    fn what_mke2fs_makes_is_supported() {
        // ext4 defaults, and every feature mke2fs can set.
        assert_eq!(unsupported(&sb(0x3c, 0x2c2, 0x46b)), None);
        let all = E2FSPROGS_SUPPORTED;
        let all = sb(all.compat.bits(), all.incompat.bits(), all.ro_compat.bits());
        assert_eq!(unsupported(&all), None);
    }

    #[test]
    fn unknown_and_refused_bits_are_named_per_word() {
        let u = unsupported(&sb(0x3c | 0x4000 | 0x40, 0x2c2, 0x46b)).expect("compat");
        assert_eq!(u.names, ["lazy_bg", "FEATURE_C14"]);
        assert!(!u.open_fails(true));
        let u = unsupported(&sb(0x3c, 0x2c2 | 0x1000, 0x46b | 0x80_0000)).expect("both");
        assert_eq!(u.names, ["dirdata", "FEATURE_R23"]);
        assert!(u.incompat && u.ro_compat && u.open_fails(false));
        let u = unsupported(&sb(0x3c, 0x2c2, 0x46b | 0x800)).expect("replica");
        assert_eq!(u.names, ["replica"]);
        assert!(u.open_fails(true) && !u.open_fails(false));
    }
}
