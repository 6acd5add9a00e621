//! Fixes of directory blocks: their entries, `.` and `..`, salvaged records and the checksum tail.

use super::super::*;

impl Writer<'_> {
    /// Fixes of directory blocks: their entries, `.` and `..`, salvaged records and the checksum tail.
    pub(in crate::writer) fn add_dir_block(&mut self, f: &Fix) -> Result<()> {
        let bs = self.fs.block_size();
        match f {
            Fix::DirBlockChecksum(b, owner) => {
                self.block(*b, owner.dir())?;
            }
            Fix::DirEntryClear(b, off, owner) => {
                let blk = self.block(*b, owner.dir())?;
                if let Some(x) = blk.get_mut(*off..*off + 4) {
                    x.copy_from_slice(&[0; 4]);
                }
            }
            Fix::DirEntryRename(b, off, name, owner) => {
                let blk = self.block(*b, owner.dir())?;
                let rec = blk
                    .get(*off + 4..*off + 6)
                    .map_or(0, |x| usize::from(u16::from_le_bytes([x[0], x[1]])));
                let n = name.len();
                // 0 (nothing written) for a name too long for a record.
                let n8 = u8::try_from(n).unwrap_or(0);
                if n8 > 0 && 8 + n <= rec {
                    if let Some(x) = blk.get_mut(*off + 8..*off + 8 + n) {
                        x.copy_from_slice(name);
                        blk[*off + 6] = n8;
                    }
                }
            }
            Fix::DirEntryFiletype(b, off, t, owner) => {
                let blk = self.block(*b, owner.dir())?;
                if let Some(x) = blk.get_mut(*off + 7) {
                    *x = *t;
                }
            }
            Fix::DirMakeDot(b, dir, owner) => {
                let ft = self.dir_ft();
                crate::dot::make_dot(self.block(*b, owner.dir())?, *dir, ft, bs);
            }
            Fix::DirMakeDotDot(b, off, owner) => {
                let ft = self.dir_ft();
                crate::dot::make_dotdot(self.block(*b, owner.dir())?, *off, ft, bs);
            }
            Fix::DirZeroByte(b, at, owner) => {
                if let Some(x) = self.block(*b, owner.dir())?.get_mut(*at) {
                    *x = 0;
                }
            }
            Fix::DirSalvage(b, off, prev, owner) => {
                let max_ino = self.sb.s_inodes_count.get();
                let csum = self.csum();
                let blk = self.block(*b, owner.dir())?;
                // Only metadata_csum blocks end in a tail.
                let end = if csum && crate::salvage::has_tail(blk, bs) {
                    blk.len() - 12
                } else {
                    blk.len()
                };
                crate::salvage::salvage(blk, *off, *prev, end, bs, max_ino);
            }
            Fix::DirAddTail(b, owner) => {
                let blk = self.block(*b, owner.dir())?;
                add_tail(blk, bs);
            }
            Fix::DirEntryInode(b, off, target, owner) => {
                let blk = self.block(*b, owner.dir())?;
                if let Some(x) = blk.get_mut(*off..*off + 4) {
                    x.copy_from_slice(&target.to_le_bytes());
                }
            }
            Fix::DirNameFix(b, off, owner) => {
                let blk = self.block(*b, owner.dir())?;
                if let Some(&n) = blk.get(off + 6) {
                    let at = off + 8;
                    if let Some(name) = blk.get_mut(at..at + usize::from(n)) {
                        for x in name.iter_mut().filter(|x| **x == b'/' || **x == 0) {
                            *x = b'.';
                        }
                    }
                }
            }
            _ => unreachable!("Writer::add routes {f:?} elsewhere"),
        }
        Ok(())
    }
}
