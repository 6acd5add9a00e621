//! Fixes of a file's block map: extent nodes and entries, indirect blocks, and the extent trees rebuilt whole.

use super::super::*;

impl Writer<'_> {
    /// Fixes of a file's block map: extent nodes and entries, indirect blocks, and the extent trees rebuilt whole.
    pub(in crate::writer) fn add_block_map(&mut self, f: &Fix) -> Result<()> {
        match f {
            Fix::ExtentBlockChecksum(b, owner) => {
                self.block(*b, owner.extent())?;
            }
            Fix::IndirectEntry(b, idx) | Fix::ReservedGdtEntry(b, idx) => {
                if matches!(f, Fix::ReservedGdtEntry(..)) {
                    self.allow_meta_write(*b)?;
                }
                // Indirect blocks carry no checksum.
                let blk = self.block(*b, BlockKind::Plain)?;
                if let Some(x) = blk.get_mut(idx * 4..idx * 4 + 4) {
                    x.copy_from_slice(&[0; 4]);
                }
            }
            Fix::ExtentRemove(ino, node, i, owner) => {
                self.extent_removals
                    .entry((*ino, *node))
                    .or_default()
                    .push((*i, *owner));
            }
            Fix::ExtentIndexStart(ino, node, i, lblk, owner) => {
                let buf: &mut [u8] = match node {
                    None => &mut self.inode(*ino)?[0x28..0x28 + 60],
                    Some(b) => self.block(*b, owner.extent())?,
                };
                let at = 12 + i * 12;
                if let Some(x) = buf.get_mut(at..at + 4) {
                    x.copy_from_slice(&lblk.to_le_bytes());
                }
            }
            Fix::RebuildExtents(t) | Fix::ExtentsFromMap(t) => {
                for (b, buf) in &t.blocks {
                    self.put_block(*b, buf.clone(), t.owner.extent())?;
                }
                let rec = self.inode(t.ino)?;
                if let Some(x) = rec.get_mut(0x28..0x28 + 60) {
                    x.copy_from_slice(&t.root);
                }
                if matches!(f, Fix::ExtentsFromMap(_)) {
                    self.edit_inode(t.ino, |i| {
                        let v = i.i_flags.get() | ext4r_format::inode::InodeFlags::EXTENTS.bits();
                        i.i_flags.set(v);
                    })?;
                }
                if let Some((taken, unused)) = &t.accounted {
                    for &b in taken {
                        self.alloc_stats_block(b, true)?;
                    }
                    for &b in unused {
                        self.alloc_stats_block(b, false)?;
                    }
                    let bs = self.fs.block_size();
                    let huge = self
                        .sb
                        .has_ro_compat(ext4r_format::features::RoCompat::HUGE_FILE);
                    let per = u64::from(bs / 512);
                    let (more, less) = (taken.len() as u64 * per, unused.len() as u64 * per);
                    self.edit_inode(t.ino, |i| {
                        let sectors = (i.blocks_count(huge, bs) + more).saturating_sub(less);
                        let _ = i.set_blocks_count(sectors, huge, bs);
                    })?;
                }
            }
            Fix::ExtentWritten(ino, node, i, owner) => {
                let buf: &mut [u8] = match node {
                    None => &mut self.inode(*ino)?[0x28..0x28 + 60],
                    Some(b) => self.block(*b, owner.extent())?,
                };
                // ee_len above 32768 marks an unwritten extent.
                let at = 12 + i * 12 + 4;
                if let Some(x) = buf.get_mut(at..at + 2) {
                    let len = u16::from_le_bytes([x[0], x[1]]);
                    if len > 32768 {
                        x.copy_from_slice(&(len - 32768).to_le_bytes());
                    }
                }
            }
            Fix::ExtentDepth(ino, node, depth, owner) => {
                let buf: &mut [u8] = match node {
                    None => &mut self.inode(*ino)?[0x28..0x28 + 60],
                    Some(b) => self.block(*b, owner.extent())?,
                };
                if let Some(x) = buf.get_mut(6..8) {
                    x.copy_from_slice(&depth.to_le_bytes());
                }
            }
            _ => unreachable!("Writer::add routes {f:?} elsewhere"),
        }
        Ok(())
    }
}
