//! Quota files, as tune2fs's `handle_quota_options` makes and removes them
//! (`-Q`, `-O quota`, `-O project`): the usage of every inode in use is
//! counted per user, group and project (`quota_compute_usage`), and each
//! quota file enabled is written in the format and block order mke2fs
//! uses (`crate::mkfs::quota`); a disabled one is truncated and forgotten
//! (`quota_remove_inode`).

use super::{Run, Step};
use crate::device::BlockDevice;
use crate::error::Result;
use crate::meta::Meta;
use crate::mkfs::quota::Usage;
use crate::quota::Dquot;
use crate::quota_write;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::group_desc::BG_INODE_UNINIT;
use ext4r_format::inode::Inode;
use ext4r_format::num;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Per quota type (user, group, project): `Some(true)` enable,
/// `Some(false)` disable, `None` leave alone (tune2fs's `quota_enable`).
pub type QuotaRequest = [Option<bool>; 3];

/// tune2fs's message for a bad `-Q` list.
pub const QUOTA_USAGE: &str = "\nBad quota options specified.\n\n\
Following valid quota options are available (pass by separating with comma):\n\
\t[^]usr[quota]\n\
\t[^]grp[quota]\n\
\t[^]prj[quota]\n\n\n";

/// `parse_quota_opts` with tune2fs's `option_handle_function`: words
/// starting with `usr`, `grp`, `prj`, each optionally negated with `^`.
///
/// # Errors
/// [`QUOTA_USAGE`] for a word that names no quota type.
pub fn parse_quota_opts(opts: &str, req: &mut QuotaRequest) -> std::result::Result<(), String> {
    for token in opts.split(',') {
        if token.is_empty() {
            break;
        }
        let (neg, name) = match token.strip_prefix('^') {
            Some(n) => (true, n),
            None => (false, token),
        };
        let t = ["usr", "grp", "prj"]
            .iter()
            .position(|p| name.starts_with(p))
            .ok_or_else(|| QUOTA_USAGE.to_string())?;
        req[t] = Some(!neg);
    }
    Ok(())
}

/// `ext2fs_get_stat_i_blocks` in bytes, and the owner ids of a record.
fn usage_of(record: &[u8], huge_file: bool, block_size: u64) -> (u64, [u32; 3]) {
    let bs = u32::try_from(block_size).unwrap_or(u32::MAX);
    let sectors = Inode::parse(record).map_or(0, |i| i.blocks_count(huge_file, bs));
    (sectors << 9, crate::quota::owners(record))
}

impl Run<'_, '_> {
    /// `quota_compute_usage`: the inodes an inode scan returns (groups
    /// with `INODE_UNINIT` and the unused tail of each table skipped when
    /// descriptors have checksums), the root and every non-reserved inode
    /// in use except the project quota file and the orphan file.
    fn quota_usage(&mut self, dev: &Arc<dyn BlockDevice>) -> Result<[BTreeMap<u32, Usage>; 3]> {
        let sb = self.sb.clone();
        let gdt_csum =
            sb.has_ro_compat(RoCompat::GDT_CSUM) || sb.has_ro_compat(RoCompat::METADATA_CSUM);
        let huge = sb.has_ro_compat(RoCompat::HUGE_FILE);
        let first_ino = sb.s_first_ino.get();
        let skip = [sb.s_prj_quota_inum.get(), sb.s_orphan_file_inum.get()];
        let m = self.meta(dev)?;
        let wide = sb.desc_size() >= 64 && sb.has_incompat(Incompat::BIT64);
        let ipg = m.geo.inodes_per_group;
        let isz = m.geo.inode_size as usize;
        let bs = u64::from(m.geo.block_size);
        let mut out: [BTreeMap<u32, Usage>; 3] = Default::default();
        for g in 0..m.geo.group_count {
            let d = &m.descs()[g as usize];
            let mut n = ipg;
            if gdt_csum {
                if d.flags() & BG_INODE_UNINIT != 0 {
                    continue;
                }
                n = n.saturating_sub(d.itable_unused(wide));
            }
            let table = d.inode_table(wide);
            let table_blocks = (u64::from(n) * isz as u64).div_ceil(bs);
            if table == 0 || table.saturating_add(table_blocks) > m.geo.blocks_count {
                return Err(crate::meta::corrupt(
                    "inode table",
                    format!("group {g} at block {table}"),
                ));
            }
            // A megabyte of the table at a time.
            let per_chunk = num::sat_u32(((1u64 << 20) / isz as u64).max(1)); // <= 2^20 / 128
            let mut i = 0;
            while i < n {
                let k = per_chunk.min(n - i);
                let mut buf = vec![0u8; k as usize * isz];
                dev.read_at(&mut buf, table * bs + u64::from(i) * isz as u64)?;
                for j in 0..k {
                    let ino = g * ipg + i + j + 1;
                    let rec = &buf[j as usize * isz..(j as usize + 1) * isz];
                    let counted = ino == 2 || (ino >= first_ino && !skip.contains(&ino));
                    if !counted || Meta::links(rec) == 0 {
                        continue;
                    }
                    let (space, ids) = usage_of(rec, huge, bs);
                    for (t, id) in ids.iter().enumerate() {
                        let u = out[t].entry(*id).or_default();
                        u.inodes += 1;
                        u.space += space;
                    }
                }
                i += k;
            }
        }
        Ok(out)
    }

    /// tune2fs's `handle_quota_options`.
    pub(super) fn handle_quota(&mut self, dev: &Arc<dyn BlockDevice>) -> Result<Step> {
        let en = self.quota_enable;
        if en.iter().all(Option::is_none) {
            return Ok(Ok(()));
        }
        if en[2] == Some(true) && self.sb.inode_size() == 128 {
            return Ok(self.refuse("Cannot enable project quota; inode size too small.\n"));
        }
        let enabled = en.contains(&Some(true));
        let usage = if enabled {
            self.quota_usage(dev)?
        } else {
            Default::default()
        };
        // Whether the superblock is to be written (tune2fs's need_dirty and
        // the quota library's ext2fs_mark_super_dirty calls).
        let mut changed = false;
        for (qtype, want) in en.iter().enumerate() {
            match want {
                Some(true) if self.quota_inum(qtype) == 0 => {
                    let u: Vec<(u32, Usage)> = usage[qtype].iter().map(|(k, v)| (*k, *v)).collect();
                    self.write_quota_file(dev, qtype, &u)?;
                    let f = &self.sb.s_feature_ro_compat;
                    let mut bits = f.get() | RoCompat::QUOTA.bits();
                    if qtype == 2 {
                        bits |= RoCompat::PROJECT.bits();
                    }
                    self.sb.s_feature_ro_compat.set(bits);
                    changed = true;
                }
                Some(false) => {
                    changed |= self.quota_inum(qtype) != 0;
                    self.remove_quota_file(dev, qtype)?;
                    if qtype == 2 {
                        changed = true;
                        let f = self.sb.s_feature_ro_compat.get();
                        self.sb
                            .s_feature_ro_compat
                            .set(f & !RoCompat::PROJECT.bits());
                    }
                }
                _ => {}
            }
        }
        if !enabled && (0..3).all(|t| self.quota_inum(t) == 0) {
            let f = self.sb.s_feature_ro_compat.get();
            self.sb.s_feature_ro_compat.set(f & !RoCompat::QUOTA.bits());
            changed = true;
        }
        self.dirty |= changed;
        Ok(Ok(()))
    }

    fn quota_inum(&self, qtype: usize) -> u32 {
        match qtype {
            0 => self.sb.s_usr_quota_inum.get(),
            1 => self.sb.s_grp_quota_inum.get(),
            _ => self.sb.s_prj_quota_inum.get(),
        }
    }

    fn set_quota_inum(&mut self, qtype: usize, ino: u32) {
        match qtype {
            0 => self.sb.s_usr_quota_inum.set(ino),
            1 => self.sb.s_grp_quota_inum.set(ino),
            _ => self.sb.s_prj_quota_inum.set(ino),
        }
    }

    /// `quota_file_create`, `write_dquots` and `quota_file_close`: a new
    /// inode for project quota, the reserved ones for user and group.
    fn write_quota_file(
        &mut self,
        dev: &Arc<dyn BlockDevice>,
        qtype: usize,
        usage: &[(u32, Usage)],
    ) -> Result<()> {
        let mut ino = self.quota_inum(qtype);
        if ino == 0 {
            ino = match qtype {
                0 => 3,
                1 => 4,
                _ => {
                    let m = self.meta(dev)?;
                    let i = m.new_inode()?;
                    m.inode_alloc_stats(i, true)?;
                    i
                }
            };
        }
        let dquots: Vec<Dquot> = usage.iter().map(|&(id, u)| Dquot::new(id, u)).collect();
        let sb = self.sb.clone();
        let now = self.env.now;
        quota_write::write_file(self.meta(dev)?, &sb, ino, qtype, &dquots, now)?;
        self.set_quota_inum(qtype, ino);
        Ok(())
    }

    /// `quota_remove_inode`.
    fn remove_quota_file(&mut self, dev: &Arc<dyn BlockDevice>, qtype: usize) -> Result<()> {
        let ino = self.quota_inum(qtype);
        if ino == 0 {
            return Ok(());
        }
        quota_write::truncate_quota_inode(self.meta(dev)?, ino)?;
        if ino >= self.sb.s_first_ino.get() {
            let m = self.meta(dev)?;
            m.clear_inode_base(ino)?;
            m.inode_alloc_stats(ino, false)?;
        }
        self.set_quota_inum(qtype, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_options_parse_by_prefix() {
        let mut r = QuotaRequest::default();
        parse_quota_opts("usrquota,^grp,prjfoo", &mut r).unwrap();
        assert_eq!(r, [Some(true), Some(false), Some(true)]);
        assert!(parse_quota_opts("quota", &mut r).is_err());
    }
}
