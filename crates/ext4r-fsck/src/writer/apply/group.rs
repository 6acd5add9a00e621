//! Fixes of block groups: descriptor counts and flags, whole bitmaps, and group metadata relocated.

use super::super::*;

impl Writer<'_> {
    /// Fixes of block groups: descriptor counts and flags, whole bitmaps, and group metadata relocated.
    pub(in crate::writer) fn add_group(&mut self, f: &Fix) -> Result<()> {
        let bs = self.fs.block_size();
        let wide = self.sb.has_incompat(Incompat::BIT64);
        match f {
            Fix::GroupFreeBlocks(g, n) => self.desc(*g)?.set_free_blocks_count(*n),
            Fix::GroupFreeInodes(g, n) => self.desc(*g)?.set_free_inodes_count(*n),
            Fix::GroupUsedDirs(g, n) => self.desc(*g)?.set_used_dirs_count(*n),
            Fix::GroupDescChecksum(g) => {
                self.desc(*g)?;
            }
            Fix::GroupDescFlags(g, clear, unused) => {
                let d = self.desc(*g)?;
                d.set_flags(d.flags() & !clear);
                if let Some(u) = unused {
                    d.set_itable_unused(*u);
                }
            }
            // Whole bitmaps from the recount; the write layer sets the
            // padding past the group's end, as mke2fs and the kernel leave
            // it, and stamps their checksums in the descriptor.
            Fix::BlockBitmap(g, bits) => {
                let raw = bits_to_bytes(bits, bs as usize);
                let d = self.desc(*g)?;
                d.set_flags(d.flags() & !BG_BLOCK_UNINIT);
                self.set_map(*g, true, &raw)?;
            }
            Fix::InodeBitmap(g, bits) => {
                let raw = bits_to_bytes(bits, bs as usize);
                let d = self.desc(*g)?;
                d.set_flags(d.flags() & !BG_INODE_UNINIT);
                self.set_map(*g, false, &raw)?;
            }
            Fix::Relocate(g, what, at) | Fix::RelocateFrom(g, what, _, at) => {
                use crate::fix::plan::Meta;
                let n = match what {
                    Meta::InodeTable => u64::from(self.fs.geometry().inode_blocks_per_group()),
                    _ => 1,
                };
                for k in 0..n {
                    let data = match f {
                        Fix::RelocateFrom(_, _, from, _) => self
                            .block(from + k, BlockKind::Plain)
                            .map(|b| b.clone())
                            .unwrap_or_default(),
                        _ => Vec::new(),
                    };
                    let blk = self.block(at + k, BlockKind::Plain)?;
                    if data.len() == blk.len() {
                        blk.copy_from_slice(&data);
                    } else {
                        blk.fill(0);
                    }
                }
                let d = self.desc(*g)?;
                let (mut bb, mut ib, mut it) = (
                    d.block_bitmap(wide),
                    d.inode_bitmap(wide),
                    d.inode_table(wide),
                );
                match what {
                    Meta::BlockBitmap => bb = *at,
                    Meta::InodeBitmap => ib = *at,
                    Meta::InodeTable => it = *at,
                }
                d.set_locations(bb, ib, it);
                if *what == Meta::BlockBitmap {
                    d.set_flags(d.flags() & !BG_BLOCK_UNINIT);
                }
                if *what == Meta::InodeBitmap {
                    d.set_flags(d.flags() & !BG_INODE_UNINIT);
                }
            }
            _ => unreachable!("Writer::add routes {f:?} elsewhere"),
        }
        Ok(())
    }
}
