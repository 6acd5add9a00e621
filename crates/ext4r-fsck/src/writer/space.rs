//! Space bookkeeping of the fix writer: blocks cloned for multiply-claimed
//! ones, bitmap bits freed, bitmap checksums, extent entries removed.

use super::*;

impl Writer<'_> {
    /// Copies `cp.len` blocks to their new place and moves the pointer,
    /// if it still holds the old block (a repeated fix does nothing);
    /// whether it did.
    pub(super) fn clone_blocks(
        &mut self,
        ino: u32,
        owner: Owner,
        cp: &crate::fix::plan::BlockCopy,
    ) -> Result<bool> {
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
            return Ok(false);
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
            return Ok(false);
        }
        // A block map cannot point past 2^32: such a clone is not linked.
        if hi.is_none() && u32::try_from(cp.new).is_err() {
            return Ok(false);
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
        Ok(true)
    }

    /// The bits of group `g`'s block bitmap (`block`, one per cluster) or
    /// inode bitmap, as the filesystem the check read has them.
    pub(super) fn map_bits(&self, g: u32, block: bool) -> u32 {
        let geo = self.fs.geometry();
        if block {
            let bits = geo
                .group_blocks(g)
                .div_ceil(geo.cluster_ratio())
                .min(u64::from(geo.block_size) * 8);
            num::sat_u32(bits)
        } else {
            geo.inodes_per_group
        }
    }

    /// Puts group `g`'s block bitmap (`block`) or inode bitmap, as `raw`
    /// bytes, in the transaction.
    pub(super) fn set_map(&mut self, g: u32, block: bool, raw: &[u8]) -> Result<()> {
        self.maps_taken.insert((g, block));
        let m = Bitmap::from_bytes(raw, self.map_bits(g, block));
        if block {
            self.txn.set_block_map(g, m)
        } else {
            self.txn.set_inode_map(g, m)
        }
    }

    /// Sets (`used`) or clears bit `bit` of group `g`'s block (`block`)
    /// or inode bitmap in the transaction; returns whether it changed.
    /// The bitmap is taken on first use from where the batch's descriptor
    /// places it, as the device holds it (its checksum and its group's
    /// flags are the check's to judge).
    pub(super) fn set_bit(&mut self, g: u32, block: bool, bit: u64, used: bool) -> Result<bool> {
        if !self.maps_taken.contains(&(g, block)) {
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
            self.set_map(g, block, &buf)?;
        }
        let Ok(bit) = u32::try_from(bit) else {
            return Ok(false);
        };
        self.txn.edit_map(g, block, |m| {
            if bit >= m.len() || m.get(bit) == used {
                return false;
            }
            m.set_range(bit, 1, used);
            true
        })
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

    /// Sets (`used`) or clears a block's bit and moves the group's and
    /// the superblock's free counts by one whatever the bit was, as
    /// libext2fs' `ext2fs_block_alloc_stats2`: the repairs planned with
    /// [`crate::ctx::Ctx::plan_block`], whose effect pass 5 of the same
    /// check counted so. Groups whose bitmap is not initialised are left
    /// alone (pass 5 leaves them out too).
    pub(super) fn alloc_stats_block(&mut self, b: u64, used: bool) -> Result<()> {
        self.move_block(b, used, true)
    }

    /// Sets (`used`) or clears a block's cluster bit and, when the bit
    /// changed, moves the group's and the superblock's free counts with
    /// it.
    fn account_block(&mut self, b: u64, used: bool) -> Result<()> {
        self.move_block(b, used, false)
    }

    fn move_block(&mut self, b: u64, used: bool, always: bool) -> Result<()> {
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
        if !self.set_bit(g, true, bit, used)? && !always {
            return Ok(());
        }
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

    /// Sets an inode's bit and counts it in use (a directory: one more
    /// in the group's directory count) whatever the bit was, as
    /// libext2fs' `ext2fs_inode_alloc_stats2`: see
    /// [`crate::ctx::Ctx::plan_inode`]. The inode lies in its group's
    /// initialised part (see `initialised`), so the group has a bitmap.
    pub(super) fn alloc_stats_inode(&mut self, ino: u32, dir: bool) -> Result<()> {
        self.move_inode(ino, true, dir, true)
    }

    /// Clears an inode's bit and counts it free.
    pub(super) fn free_inode(&mut self, ino: u32, dir: bool) -> Result<()> {
        self.move_inode(ino, false, dir, false)
    }

    /// Sets (`used`) or clears an inode's bit and moves its group's and
    /// the superblock's free inode counts (and the group's directory
    /// count for a directory) with it: when the bit changed, or
    /// `always`. A group without an initialised inode bitmap is left
    /// alone.
    fn move_inode(&mut self, ino: u32, used: bool, dir: bool, always: bool) -> Result<()> {
        let ipg = self.fs.geometry().inodes_per_group;
        let Some(i) = ino.checked_sub(1) else {
            return Ok(());
        };
        let (g, bit) = (i / ipg, u64::from(i % ipg));
        let wide = self.sb.has_incompat(Incompat::BIT64);
        if self.desc(g)?.flags() & BG_INODE_UNINIT != 0 {
            return Ok(());
        }
        if !self.set_bit(g, false, bit, used)? && !always {
            return Ok(());
        }
        let step = |n: u32, up: bool| if up { n + 1 } else { n.saturating_sub(1) };
        let d = self.desc(g)?;
        d.set_free_inodes_count(step(d.free_inodes_count(wide), !used));
        if dir {
            d.set_used_dirs_count(step(d.used_dirs_count(wide), used));
        }
        let free = step(self.sb.s_free_inodes_count.get(), !used);
        self.sb.s_free_inodes_count.set(free);
        self.sb_dirty = true;
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
