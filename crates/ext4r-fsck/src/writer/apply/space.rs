//! Fixes that allocate, free or move whole objects: blocks and inodes freed or cloned, xattr blocks, orphans, lost+found, new directory blocks, rehashed directories, and the special inodes rebuilt.

use super::super::*;

impl Writer<'_> {
    /// Fixes that allocate, free or move whole objects: blocks and inodes freed or cloned, xattr blocks, orphans, lost+found, new directory blocks, rehashed directories, and the special inodes rebuilt.
    pub(in crate::writer) fn add_space(&mut self, f: &Fix) -> Result<()> {
        let bs = self.fs.block_size();
        let huge = self.sb.has_ro_compat(RoCompat::HUGE_FILE);
        match f {
            Fix::XattrBlockChecksum(b) => {
                self.block(*b, BlockKind::Xattr)?;
            }
            Fix::XattrRefcount(b, n) => {
                let blk = self.block(*b, BlockKind::Xattr)?;
                blk[4..8].copy_from_slice(&n.to_le_bytes());
            }
            Fix::HideQuota(h) => self.hide_quota(h)?,
            Fix::NewOrphanFile(n) => {
                let node_kind = if n.extents {
                    n.owner.extent()
                } else {
                    BlockKind::Plain
                };
                for (b, buf) in &n.nodes {
                    self.put_block(*b, buf.clone(), node_kind)?;
                }
                for &b in &n.blocks {
                    let mut buf = vec![0u8; bs as usize];
                    if ext4r_format::orphan::init_orphan_block(&mut buf).is_ok() {
                        let kind = BlockKind::Orphan {
                            ino: n.ino,
                            generation: n.generation,
                        };
                        self.put_block(b, buf, kind)?;
                    }
                }
                let rec = self.inode(n.ino)?;
                if let Some(x) = rec.get_mut(0x28..0x28 + 60) {
                    x.copy_from_slice(&n.root);
                }
                let held = (n.blocks.len() + n.nodes.len()) as u64 * u64::from(bs / 512);
                let flags = if n.extents {
                    ext4r_format::inode::InodeFlags::EXTENTS.bits()
                } else {
                    0
                };
                let size = n.blocks.len() as u64 * u64::from(bs);
                self.edit_inode(n.ino, |i| {
                    // As libext2fs's ext2fs_create_orphan_file: a regular
                    // file, mode 0600, one link, extent-mapped.
                    i.i_mode.set(0o100_600);
                    i.i_links_count.set(1);
                    i.i_dtime.set(0);
                    i.set_size(size);
                    let _ = i.set_blocks_count(held, huge, bs);
                    i.i_flags.set(flags);
                })?;
            }
            Fix::Reconnect(ino, ft) => self.reconnect(*ino, *ft)?,
            Fix::Each(fixes) => {
                for f in fixes {
                    self.add(f)?;
                }
            }
            Fix::CloneBlocks(ino, owner, copies) => {
                let whole = self.fs.geometry().cluster_ratio() == 1;
                for cp in copies {
                    let made = self.clone_blocks(*ino, *owner, cp)?;
                    // Taken as the check planned them (`dup::plan`); a copy
                    // this batch could not make takes none (the next check
                    // counts it free).
                    if whole && made {
                        for b in cp.new..cp.new + cp.len {
                            self.alloc_stats_block(b, true)?;
                        }
                    }
                }
            }
            // Written by apply_at after the batch.
            Fix::UpdateQuota(..) => {}
            Fix::OrphanBlockClear(b, ino, gen) => {
                let blk = self.block(*b, BlockKind::Plain)?;
                // Only a block that takes the orphan format gets its tail
                // stamped.
                if ext4r_format::orphan::init_orphan_block(blk).is_ok() {
                    let kind = BlockKind::Orphan {
                        ino: *ino,
                        generation: *gen,
                    };
                    self.set_kind(*b, kind)?;
                }
            }
            Fix::FreeBlocks(runs) => {
                for &(start, len) in runs {
                    for b in start..start.saturating_add(len) {
                        self.free_block(b)?;
                    }
                }
            }
            Fix::FreeInode(ino, dir) => self.free_inode(*ino, *dir)?,
            Fix::TruncateOrphan(ino) => {
                if !self.truncates.contains(ino) {
                    self.truncates.push(*ino);
                }
            }
            Fix::MakeLostFound(n) => self.make_lost_found(*n)?,
            Fix::DirBlock0(ino, b, owner) => self.dir_block0(*ino, *b, *owner)?,
            Fix::DirBlockAt(ino, l, b, owner) => self.dir_block_at(*ino, *l, *b, *owner)?,
            Fix::ExpandDir(ino, blocks) => self.expand_dir(*ino, blocks)?,
            Fix::RehashDir(r) => {
                let owner = Owner::new(r.ino, r.generation);
                for (b, buf) in &r.blocks {
                    self.put_block(*b, buf.clone(), owner.dir())?;
                }
                let freed = r.release.len() as u64 * u64::from(bs / 512);
                self.edit_inode(r.ino, |i| {
                    let mut f = i.flags();
                    f.set(ext4r_format::inode::InodeFlags::INDEX, r.index);
                    i.set_flags(f);
                    if let Some((ib, size)) = &r.shrunk {
                        i.i_block = *ib;
                        i.set_size(*size);
                        let sectors = i.blocks_count(huge, bs).saturating_sub(freed);
                        let _ = i.set_blocks_count(sectors, huge, bs);
                    }
                })?;
                for b in &r.release {
                    self.free_block(*b)?;
                }
            }
            Fix::MakeRoot(b) => self.make_root(*b)?,
            Fix::ResetMmp(b) => {
                let interval = self.sb.s_mmp_update_interval.get();
                let bs = self.fs.block_size() as usize;
                let data = crate::mmp::reset_block(interval, bs);
                self.put_block(*b, data, BlockKind::Mmp)?;
            }
            Fix::RecreateResizeInode(dind) => self.recreate_resize_inode(*dind)?,
            _ => unreachable!("Writer::add routes {f:?} elsewhere"),
        }
        Ok(())
    }
}
