//! Space bookkeeping of the fix writer: blocks cloned for multiply-claimed
//! ones, bitmap bits freed, bitmap checksums, extent entries removed.

use super::*;

impl Writer<'_> {
    /// Copies `cp.len` blocks to their new place and moves the pointer,
    /// if it still holds the old block (a repeated fix does nothing).
    pub(super) fn clone_blocks(
        &mut self,
        ino: u32,
        owner: Owner,
        cp: &crate::fix::plan::BlockCopy,
    ) -> Result<()> {
        use crate::fix::plan::PtrAt;
        let (buf, off): (&mut [u8], usize) = match cp.at {
            PtrAt::InodeSlot(slot) => (&mut self.inode(ino)?[0x28..0x28 + 60], slot * 4),
            PtrAt::Indirect(b, i) => (self.block(b, BlockKind::Plain)?, i * 4),
            PtrAt::Extent(None, i) | PtrAt::ExtentIndex(None, i) => {
                (&mut self.inode(ino)?[0x28..0x28 + 60], 12 + i * 12)
            }
            PtrAt::Extent(Some(b), i) | PtrAt::ExtentIndex(Some(b), i) => {
                (self.block(b, owner.extent())?, 12 + i * 12)
            }
        };
        if off + 12 > buf.len() && !matches!(cp.at, PtrAt::InodeSlot(_) | PtrAt::Indirect(..)) {
            return Ok(());
        }
        let word = |buf: &[u8], at: usize| {
            buf.get(at..at + 4)
                .map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
        };
        let half = |buf: &[u8], at: usize| {
            buf.get(at..at + 2)
                .map_or(0, |x| u16::from_le_bytes([x[0], x[1]]))
        };
        // (low word offset, high half offset) of the pointer.
        let (lo, hi) = match cp.at {
            PtrAt::InodeSlot(_) | PtrAt::Indirect(..) => (off, None),
            PtrAt::Extent(..) => (off + 8, Some(off + 6)),
            PtrAt::ExtentIndex(..) => (off + 4, Some(off + 8)),
        };
        let now = u64::from(word(buf, lo)) | hi.map_or(0, |h| u64::from(half(buf, h)) << 32);
        if now != cp.old || lo + 4 > buf.len() {
            return Ok(());
        }
        // A block map cannot point past 2^32: such a clone is not linked.
        if hi.is_none() && u32::try_from(cp.new).is_err() {
            return Ok(());
        }
        buf[lo..lo + 4].copy_from_slice(&num::lo32(cp.new).to_le_bytes());
        if let Some(h) = hi {
            buf[h..h + 2].copy_from_slice(&num::hi16_of_48(cp.new).to_le_bytes());
        }
        let kind = if cp.is_extent_node() {
            owner.extent()
        } else {
            BlockKind::Plain
        };
        for k in 0..cp.len {
            // A block already changed in this batch is copied as changed.
            let data = self.peek(cp.old + k)?;
            let dst = self.block(cp.new + k, kind)?;
            dst.copy_from_slice(&data);
        }
        Ok(())
    }

    /// Group `g`'s block bitmap (`block`) or inode bitmap as this batch
    /// leaves it, read on first use from where its descriptor places it.
    pub(super) fn bitmap(&mut self, g: u32, block: bool) -> Result<&mut Vec<u8>> {
        if !self.bitmaps.contains_key(&(g, block)) {
            let wide = self.sb.has_incompat(Incompat::BIT64);
            let d = *self.desc(g)?;
            let loc = if block {
                d.block_bitmap(wide)
            } else {
                d.inode_bitmap(wide)
            };
            let mut buf = vec![0u8; self.fs.block_size() as usize];
            self.fs
                .device()
                .read_at(&mut buf, loc * u64::from(self.fs.block_size()))?;
            self.bitmaps.insert((g, block), buf);
        }
        Ok(self.bitmaps.entry((g, block)).or_default())
    }

    /// Clears a block's bit (its cluster's) and counts it free; groups
    /// whose bitmap is not initialised are left alone.
    pub(super) fn free_block(&mut self, b: u64) -> Result<()> {
        self.account_block(b, false)
    }

    /// Sets a block's bit (its cluster's) and counts it in use, as
    /// libext2fs' `ext2fs_block_alloc_stats2` for a block a repair takes;
    /// groups whose bitmap is not initialised are left alone.
    pub(super) fn use_block(&mut self, b: u64) -> Result<()> {
        self.account_block(b, true)
    }

    /// Sets (`used`) or clears a block's cluster bit and, when the bit
    /// changed, moves the group's and the superblock's free counts with
    /// it.
    fn account_block(&mut self, b: u64, used: bool) -> Result<()> {
        let geo = self.fs.geometry().clone();
        if b < geo.first_data_block || b >= geo.blocks_count {
            return Ok(());
        }
        let Ok(g) = u32::try_from((b - geo.first_data_block) / geo.blocks_per_group) else {
            return Ok(());
        };
        let wide = self.sb.has_incompat(Incompat::BIT64);
        if self.desc(g)?.flags() & BG_BLOCK_UNINIT != 0 {
            return Ok(());
        }
        let bit = (b - geo.group_first_block(g)) >> geo.cluster_bits;
        let map = self.bitmap(g, true)?;
        let (byte, mask) = ((bit / 8) as usize, 1u8 << (bit % 8));
        let Some(x) = map.get_mut(byte) else {
            return Ok(());
        };
        if (*x & mask != 0) == used {
            return Ok(());
        }
        *x ^= mask;
        let cluster = 1u64 << geo.cluster_bits;
        let d = self.desc(g)?;
        let n = d.free_blocks_count(wide);
        d.set_free_blocks_count(if used { n.saturating_sub(1) } else { n + 1 });
        let free = self.sb.free_blocks_count();
        self.sb.set_free_blocks_count(if used {
            free.saturating_sub(cluster)
        } else {
            free + cluster
        });
        self.sb_dirty = true;
        Ok(())
    }

    /// Clears an inode's bit and counts it free.
    pub(super) fn free_inode(&mut self, ino: u32, dir: bool) -> Result<()> {
        let ipg = self.fs.geometry().inodes_per_group;
        let Some(i) = ino.checked_sub(1) else {
            return Ok(());
        };
        let (g, bit) = (i / ipg, u64::from(i % ipg));
        let wide = self.sb.has_incompat(Incompat::BIT64);
        let d = *self.desc(g)?;
        if d.flags() & BG_INODE_UNINIT != 0 {
            return Ok(());
        }
        if crate::orphan::clear_bit(self.bitmap(g, false)?, bit) {
            let d = self.desc(g)?;
            d.set_free_inodes_count(d.free_inodes_count(wide) + 1);
            if dir {
                d.set_used_dirs_count(d.used_dirs_count(wide).saturating_sub(1));
            }
            let free = self.sb.s_free_inodes_count.get() + 1;
            self.sb.s_free_inodes_count.set(free);
            self.sb_dirty = true;
        }
        Ok(())
    }

    /// Removes the collected extent entries, highest index first.
    pub(super) fn remove_extents(&mut self) -> Result<()> {
        let removals = std::mem::take(&mut self.extent_removals);
        for ((ino, node), mut list) in removals {
            list.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
            list.dedup_by_key(|x| x.0);
            let owner = list.first().map_or_else(Owner::default, |x| x.1);
            let buf: &mut [u8] = match node {
                None => {
                    let rec = self.inode(ino)?;
                    &mut rec[0x28..0x28 + 60]
                }
                Some(b) => self.block(b, owner.extent())?,
            };
            for (i, _) in list {
                remove_entry(buf, i);
            }
            // An emptied root becomes an empty leaf, as libext2fs's
            // ext2fs_extent_delete leaves it (else e2fsck would find the
            // tree "could be shorter").
            if node.is_none() && buf[2..4] == [0, 0] {
                buf[6..8].fill(0);
            }
        }
        Ok(())
    }
}

/// Removes entry `i` from an extent node (header of 12 bytes, then
/// 12-byte entries), shifting the rest down.
pub(super) fn remove_entry(node: &mut [u8], i: usize) {
    if node.len() < 12 {
        return;
    }
    let count = u16::from_le_bytes([node[2], node[3]]);
    let n = usize::from(count);
    if i >= n {
        return;
    }
    let start = 12 + i * 12;
    let end = (12 + n * 12).min(node.len());
    if start + 12 > end {
        return;
    }
    node.copy_within(start + 12..end, start);
    node[end - 12..end].fill(0);
    node[2..4].copy_from_slice(&(count - 1).to_le_bytes());
}

pub(super) fn bits_to_bytes(bits: &[u64], len: usize) -> Vec<u8> {
    let mut raw = vec![0u8; len];
    for (i, w) in bits.iter().enumerate() {
        let b = w.to_le_bytes();
        let at = i * 8;
        if at >= len {
            break;
        }
        let n = (len - at).min(8);
        raw[at..at + n].copy_from_slice(&b[..n]);
    }
    raw
}
