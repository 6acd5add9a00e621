//! The usage pass 1 counts per quota type and id: one map for each type
//! whose file the superblock names (e2fsck's `quota_init_context(.., 0)`).

use std::collections::BTreeMap;

use ext4r::quota::Usage;
use ext4r_format::features::RoCompat;
use ext4r_format::superblock::Superblock;

/// Usage per id, for each quota type (user, group, project) counted.
pub(crate) type Counters = [Option<BTreeMap<u32, Usage>>; 3];

/// Empty counters for the quota types `sb` keeps files for.
pub(crate) fn counters(sb: &Superblock) -> Counters {
    let on = sb.has_ro_compat(RoCompat::QUOTA);
    let mut out: Counters = Default::default();
    for (t, slot) in out.iter_mut().enumerate() {
        if on && inum(sb, t) != 0 {
            *slot = Some(BTreeMap::new());
        }
    }
    out
}

/// The inode of quota type `qtype`'s file (0: none).
pub(crate) fn inum(sb: &Superblock, qtype: usize) -> u32 {
    match qtype {
        0 => sb.s_usr_quota_inum.get(),
        1 => sb.s_grp_quota_inum.get(),
        _ => sb.s_prj_quota_inum.get(),
    }
}
