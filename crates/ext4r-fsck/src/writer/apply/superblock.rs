//! Fixes of the superblock: feature bits, free counts, and the fields the superblock checks repair.

use super::super::*;

impl Writer<'_> {
    /// Fixes of the superblock: feature bits, free counts, and the fields the superblock checks repair.
    pub(in crate::writer) fn add_superblock(&mut self, f: &Fix) -> Result<()> {
        match f {
            Fix::SetIncompat(bits) => {
                let v = self.sb.s_feature_incompat.get() | bits;
                self.sb.s_feature_incompat.set(v);
                self.sb_dirty = true;
            }
            Fix::SetRoCompat(bits) => {
                let v = self.sb.s_feature_ro_compat.get() | bits;
                self.sb.s_feature_ro_compat.set(v);
                self.sb_dirty = true;
            }
            Fix::ClearIncompat(bits) => {
                let v = self.sb.s_feature_incompat.get() & !bits;
                self.sb.s_feature_incompat.set(v);
                self.sb_dirty = true;
            }
            Fix::SuperblockCounts(blocks, inodes) => {
                self.sb.set_free_blocks_count(*blocks);
                // At most s_inodes_count, a u32.
                self.sb.s_free_inodes_count.set(num::sat_u32(*inodes));
                self.sb_dirty = true;
            }
            Fix::SuperFreeBlocks(blocks) => {
                self.sb.set_free_blocks_count(*blocks);
                self.sb_dirty = true;
            }
            Fix::SuperFreeInodes(inodes) => {
                self.sb.s_free_inodes_count.set(num::sat_u32(*inodes));
                self.sb_dirty = true;
            }
            Fix::Superblock(e) => {
                if e.apply(&mut self.sb) {
                    for g in 0..self.fs.geometry().group_count {
                        self.desc(g)?;
                    }
                }
                self.sb_dirty = true;
            }
            Fix::SuperExtraIsize(want, v) => {
                if *want {
                    self.sb.s_want_extra_isize.set(*v);
                } else {
                    self.sb.s_min_extra_isize.set(*v);
                }
                self.sb_dirty = true;
            }
            Fix::ClearQuotaInode(q) => {
                match q {
                    0 => self.sb.s_usr_quota_inum.set(0),
                    1 => self.sb.s_grp_quota_inum.set(0),
                    _ => self.sb.s_prj_quota_inum.set(0),
                }
                self.sb_dirty = true;
            }
            Fix::RestorePrimary => {
                self.sb.s_block_group_nr.set(0);
                self.sb_dirty = true;
                for g in 0..self.fs.geometry().group_count {
                    self.desc(g)?;
                }
            }
            Fix::ClearLastOrphan => {
                self.sb.s_last_orphan.set(0);
                self.sb_dirty = true;
            }
            Fix::SetLargeDir => {
                let v = self.sb.s_feature_incompat.get() | Incompat::LARGEDIR.bits();
                self.sb.s_feature_incompat.set(v);
                self.sb_dirty = true;
            }
            Fix::SetLargeFile => {
                let v = self.sb.s_feature_ro_compat.get() | RoCompat::LARGE_FILE.bits();
                self.sb.s_feature_ro_compat.set(v);
                if self.sb.s_rev_level.get() == 0 {
                    self.sb.s_rev_level.set(1);
                    self.sb.s_first_ino.set(11);
                    self.sb.s_inode_size.set(128);
                }
                self.sb_dirty = true;
            }
            Fix::DropResizeFeature => self.drop_resize_feature(),
            Fix::ClearOrphanPresent => {
                let mut f = self.sb.features();
                f.ro_compat.remove(RoCompat::ORPHAN_PRESENT);
                self.sb.set_features(f);
                self.sb_dirty = true;
            }
            _ => unreachable!("Writer::add routes {f:?} elsewhere"),
        }
        Ok(())
    }
}
