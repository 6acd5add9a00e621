//! Fixes of the superblock: feature bits, free counts, and the fields the superblock checks repair.

use super::super::*;
use ext4r_format::features::Compat;

impl Writer<'_> {
    /// Fixes of the superblock: feature bits, free counts, and the fields the superblock checks repair.
    pub(in crate::writer) fn add_superblock(&mut self, f: &Fix) -> Result<()> {
        let all_descs = edit_superblock(&mut self.sb, f);
        self.sb_dirty = true;
        if all_descs {
            // Their checksums follow the superblock's (its UUID, seed or
            // features): every descriptor is written again.
            for g in 0..self.fs.geometry().group_count {
                self.desc(g)?;
            }
        }
        Ok(())
    }
}

/// Whether `f` is a fix of the superblock alone (see [`edit_superblock`]):
/// the fixes [`Writer::add`] routes to [`Writer::add_superblock`].
pub(in crate::writer) fn is_superblock_fix(f: &Fix) -> bool {
    matches!(
        f,
        Fix::SetIncompat(..)
            | Fix::SetRoCompat(..)
            | Fix::ClearIncompat(..)
            | Fix::SuperblockCounts(..)
            | Fix::SuperFreeBlocks(..)
            | Fix::SuperFreeInodes(..)
            | Fix::Superblock(..)
            | Fix::SuperExtraIsize(..)
            | Fix::ClearQuotaInode(..)
            | Fix::RestorePrimary
            | Fix::ClearLastOrphan
            | Fix::SetLargeDir
            | Fix::SetLargeFile
            | Fix::ClearOrphanPresent
            | Fix::DropResizeFeature
    )
}

/// Makes superblock fix `f` in `sb`; returns whether every group
/// descriptor is to be written again with it.
pub(in crate::writer) fn edit_superblock(sb: &mut Superblock, f: &Fix) -> bool {
    match f {
        Fix::SetIncompat(bits) => {
            let v = sb.s_feature_incompat.get() | bits;
            sb.s_feature_incompat.set(v);
        }
        Fix::SetRoCompat(bits) => {
            let v = sb.s_feature_ro_compat.get() | bits;
            sb.s_feature_ro_compat.set(v);
        }
        Fix::ClearIncompat(bits) => {
            let v = sb.s_feature_incompat.get() & !bits;
            sb.s_feature_incompat.set(v);
        }
        Fix::SuperblockCounts(blocks, inodes) => {
            sb.set_free_blocks_count(*blocks);
            // At most s_inodes_count, a u32.
            sb.s_free_inodes_count.set(num::sat_u32(*inodes));
        }
        Fix::SuperFreeBlocks(blocks) => sb.set_free_blocks_count(*blocks),
        Fix::SuperFreeInodes(inodes) => sb.s_free_inodes_count.set(num::sat_u32(*inodes)),
        Fix::Superblock(e) => return e.apply(sb),
        Fix::SuperExtraIsize(want, v) => {
            if *want {
                sb.s_want_extra_isize.set(*v);
            } else {
                sb.s_min_extra_isize.set(*v);
            }
        }
        Fix::ClearQuotaInode(q) => match q {
            0 => sb.s_usr_quota_inum.set(0),
            1 => sb.s_grp_quota_inum.set(0),
            _ => sb.s_prj_quota_inum.set(0),
        },
        Fix::RestorePrimary => {
            sb.s_block_group_nr.set(0);
            return true;
        }
        Fix::ClearLastOrphan => sb.s_last_orphan.set(0),
        Fix::SetLargeDir => {
            let v = sb.s_feature_incompat.get() | Incompat::LARGEDIR.bits();
            sb.s_feature_incompat.set(v);
        }
        Fix::SetLargeFile => {
            let v = sb.s_feature_ro_compat.get() | RoCompat::LARGE_FILE.bits();
            sb.s_feature_ro_compat.set(v);
            if sb.s_rev_level.get() == 0 {
                sb.s_rev_level.set(1);
                sb.s_first_ino.set(11);
                sb.s_inode_size.set(128);
            }
        }
        // No resize inode: the feature off and no reserved GDT blocks
        // (their blocks are freed by pass 5 of the next round).
        Fix::DropResizeFeature => {
            let compat = sb.s_feature_compat.get() & !Compat::RESIZE_INODE.bits();
            sb.s_feature_compat.set(compat);
            sb.s_reserved_gdt_blocks.set(0);
        }
        Fix::ClearOrphanPresent => {
            let mut f = sb.features();
            f.ro_compat.remove(RoCompat::ORPHAN_PRESENT);
            sb.set_features(f);
        }
        _ => unreachable!("Writer::add routes {f:?} elsewhere"),
    }
    false
}
