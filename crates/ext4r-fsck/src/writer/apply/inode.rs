//! Fixes of one inode's record: its fields, flags, in-inode xattr area, or the whole record.

use super::super::*;

impl Writer<'_> {
    /// Fixes of one inode's record: its fields, flags, in-inode xattr area, or the whole record.
    pub(in crate::writer) fn add_inode_field(&mut self, f: &Fix) -> Result<()> {
        let bs = self.fs.block_size();
        let huge = self.sb.has_ro_compat(RoCompat::HUGE_FILE);
        match f {
            Fix::InodeChecksum(ino) => {
                self.inode(*ino)?;
            }
            Fix::InodeLinks(ino, n) => self.edit_inode(*ino, |i| i.i_links_count.set(*n))?,
            Fix::InodeBlocks(ino, blocks) => self.edit_inode(*ino, |i| {
                let _ = i.set_blocks_count(blocks * u64::from(bs / 512), huge, bs);
            })?,
            Fix::InodeSize(ino, size) => {
                self.edit_inode(*ino, |i| i.set_size(*size))?;
                // As libext2fs's ext2fs_inode_size_set: a regular file
                // made 2 GiB or more sets large_file (and a dynamic
                // revision) itself, so no later check finds it missing.
                let rec = self.inode(*ino)?;
                let regular = rec.get(..2).is_some_and(|m| m[1] & 0xF0 == 0x80);
                let wanted =
                    !self.sb.has_ro_compat(RoCompat::LARGE_FILE) || self.sb.s_rev_level.get() == 0;
                if regular && *size >= 0x8000_0000 && wanted {
                    self.add(&Fix::SetLargeFile)?;
                }
            }
            Fix::InodeClearDtime(ino) => self.edit_inode(*ino, |i| i.i_dtime.set(0))?,
            Fix::InodeClearFileAcl(ino) => self.edit_inode(*ino, |i| {
                i.i_file_acl_lo.set(0);
                i.l_i_file_acl_high.set(0);
            })?,
            Fix::InodeClearFileAclHigh(ino) => {
                self.edit_inode(*ino, |i| i.l_i_file_acl_high.set(0))?
            }
            Fix::InodeBlockSlot(ino, slot) => {
                let slot = *slot;
                self.edit_inode(*ino, |i| {
                    let mut w = i.block_words();
                    if let Some(x) = w.get_mut(slot) {
                        *x = 0;
                    }
                    i.set_block_words(&w);
                })?
            }
            Fix::ClearInode(ino) => {
                let now = self.now;
                // As e2fsck_clear_inode: no flags left either.
                self.edit_inode(*ino, |i| {
                    i.i_links_count.set(0);
                    i.i_dtime.set(now);
                    i.i_flags.set(0);
                })?
            }
            Fix::InodeExtraIsize(ino, v) => self.edit_inode(*ino, |i| i.i_extra_isize.set(*v))?,
            Fix::ClearIbodyXattrs(ino) => {
                let rec = self.inode(*ino)?;
                // Only records with room past the fixed part have the area.
                if let Some(x) = rec.get(0x80..0x82) {
                    let extra = usize::from(u16::from_le_bytes([x[0], x[1]]));
                    let start = (128 + extra).min(rec.len());
                    rec[start..].fill(0);
                }
            }
            Fix::IbodyXattrHashes(ino, hashes) => {
                let rec = self.inode(*ino)?;
                for &(off, hash) in hashes {
                    // e_hash is the entry's last word (offset 12).
                    if let Some(x) = rec.get_mut(off + 12..off + 16) {
                        x.copy_from_slice(&hash.to_le_bytes());
                    }
                }
            }
            Fix::CollapseDir(ino) => self.edit_inode(*ino, collapse_dir)?,
            Fix::ClearIndexFlag(ino) => self.edit_inode(*ino, |i| {
                let f = i.flags() - ext4r_format::inode::InodeFlags::INDEX;
                i.set_flags(f);
            })?,
            Fix::EaInodeRefCount(ino, refs) => self.edit_inode(*ino, |i| {
                i.i_ctime.set(num::hi32(*refs));
                i.l_i_version.set(num::lo32(*refs));
            })?,
            Fix::InodeClearEpoch(ino) => {
                let rec = self.inode(*ino)?;
                if let Ok(inode) = Inode::parse(rec) {
                    let at: Vec<usize> = crate::pass1_rules::epoch_fields(&inode, rec).collect();
                    for a in at {
                        rec[a] &= !3;
                    }
                }
            }
            Fix::InodeZeroByte(ino, at) => {
                if let Some(x) = self.inode(*ino)?.get_mut(*at) {
                    *x = 0;
                }
            }
            Fix::InodeClearFaddr(ino) => self.edit_inode(*ino, |i| i.i_obso_faddr.set(0))?,
            Fix::InodeClearBlocksHigh(ino) => {
                self.edit_inode(*ino, |i| i.l_i_blocks_high.set(0))?
            }
            Fix::InodeClearFlags(ino, bits) => self.edit_inode(*ino, |i| {
                i.i_flags.set(i.i_flags.get() & !bits);
            })?,
            Fix::InodeSetFlags(ino, bits) => self.edit_inode(*ino, |i| {
                i.i_flags.set(i.i_flags.get() | bits);
            })?,
            Fix::InlineTruncate(ino) => self.edit_inode(*ino, |i| {
                i.set_size(0);
                let f = i.flags() - ext4r_format::inode::InodeFlags::INLINE_DATA;
                i.set_flags(f);
                i.i_block = [0; 60];
            })?,
            Fix::InodeMode(ino, m) => self.edit_inode(*ino, |i| i.i_mode.set(*m))?,
            Fix::ZeroInode(ino) => self.inode(*ino)?.fill(0),
            _ => unreachable!("Writer::add routes {f:?} elsewhere"),
        }
        Ok(())
    }
}
