//! Fixes of inline directories: entries kept in the inode's `i_block` and system.data areas.

use super::super::*;

impl Writer<'_> {
    /// Fixes of inline directories: entries kept in the inode's `i_block` and system.data areas.
    pub(in crate::writer) fn add_inline_dir(&mut self, f: &Fix) -> Result<()> {
        match f {
            Fix::InlineParent(ino, p) => {
                let rec = self.inode(*ino)?;
                if let Some(x) = rec.get_mut(0x28..0x2c) {
                    x.copy_from_slice(&p.to_le_bytes());
                }
            }
            Fix::InlineEntryClear(ino, area, off) => {
                let rec = self.inode(*ino)?;
                if let Some(a) = crate::inline_dir::area_mut(rec, *area) {
                    if let Some(x) = a.get_mut(*off..*off + 4) {
                        x.copy_from_slice(&[0; 4]);
                    }
                }
                if *area == crate::inline_dir::AREA_DATA {
                    crate::inline_dir::rehash_data(rec);
                }
            }
            Fix::InlineEntryFiletype(ino, area, off, t) => {
                let rec = self.inode(*ino)?;
                if let Some(x) =
                    crate::inline_dir::area_mut(rec, *area).and_then(|a| a.get_mut(*off + 7))
                {
                    *x = *t;
                }
            }
            Fix::InlineNameFix(ino, area, off) => {
                let rec = self.inode(*ino)?;
                if let Some(a) = crate::inline_dir::area_mut(rec, *area) {
                    if let Some(&n) = a.get(off + 6) {
                        let at = off + 8;
                        if let Some(name) = a.get_mut(at..at + usize::from(n)) {
                            for x in name.iter_mut().filter(|x| **x == b'/' || **x == 0) {
                                *x = b'.';
                            }
                        }
                    }
                }
            }
            Fix::InlineSalvage(ino, area, off, prev) => {
                let max_ino = self.sb.s_inodes_count.get();
                let rec = self.inode(*ino)?;
                if let Some(a) = crate::inline_dir::area_mut(rec, *area) {
                    let end = a.len();
                    // Record lengths are raw below 64 KiB.
                    crate::salvage::salvage(a, *off, *prev, end, 4096, max_ino);
                }
                // The value changed: its entry's hash follows.
                if *area == crate::inline_dir::AREA_DATA {
                    crate::inline_dir::rehash_data(rec);
                }
            }
            Fix::InlineDirSize(ino, size) => {
                let rec = self.inode(*ino)?;
                let value = size.saturating_sub(60);
                if crate::inline_dir::set_data_len(rec, value) {
                    self.edit_inode(*ino, |i| i.set_size(*size as u64))?;
                }
            }
            _ => unreachable!("Writer::add routes {f:?} elsewhere"),
        }
        Ok(())
    }
}
