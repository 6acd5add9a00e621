//! Directory repairs of the fix writer: a root or lost+found made from
//! nothing, blocks added to a directory, entries linked in (reconnection),
//! and the record-level helpers they share.

use super::*;

impl Writer<'_> {
    /// Creates the root directory: inode 2 (mode 0755) with one block of
    /// `.` and `..` naming itself.
    pub(super) fn make_root(&mut self, b: u64) -> Result<()> {
        use ext4r_format::inode::ino::ROOT;
        let bs = self.fs.block_size();
        let now = self.now;
        let sb = self.sb.clone();
        self.initialised(ROOT)?;
        let rec = self.inode(ROOT)?;
        // A block map cannot hold a block past 2^32: no root then.
        let Some(mut new) = crate::lost_found::inode(&sb, b, bs, now, rec.len()) else {
            return Ok(());
        };
        rec.fill(0);
        new.i_mode.set(0o040755);
        let _ = new.write(rec);
        let owner = Owner::new(ROOT, 0);
        let tail = self.csum();
        let filetype = sb.has_incompat(Incompat::FILETYPE);
        let blk = self.block(b, owner.dir())?;
        crate::lost_found::dir_block(blk, ROOT, filetype, tail, bs);
        Ok(())
    }

    /// Makes sure pass 1 reads inode `ino`: its group's initialised part
    /// (itable_unused) covers it.
    pub(super) fn initialised(&mut self, ino: u32) -> Result<()> {
        let sb = &self.sb;
        if sb.has_ro_compat(RoCompat::METADATA_CSUM) || sb.has_ro_compat(RoCompat::GDT_CSUM) {
            let ipg = self.fs.geometry().inodes_per_group;
            let (g, idx) = ((ino - 1) / ipg, (ino - 1) % ipg);
            let wide = sb.has_incompat(Incompat::BIT64);
            let d = self.desc(g)?;
            let unused = d.itable_unused(wide).min(ipg - idx - 1);
            d.set_itable_unused(unused);
            d.set_flags(d.flags() & !BG_INODE_UNINIT);
        }
        Ok(())
    }

    /// Creates /lost+found (see [`crate::lost_found`]): named in the root
    /// first, so that a root without room leaves nothing half made.
    pub(super) fn make_lost_found(&mut self, n: crate::fix::plan::NewLostFound) -> Result<()> {
        use ext4r_format::inode::{ino::ROOT, InodeFlags};
        let fs = self.fs;
        let Ok(root) = fs.inode(InodeNr(ROOT)) else {
            return Ok(());
        };
        // A new name in an indexed root would break its hash order.
        if !root.inode.is_dir() || root.inode.flags().contains(InodeFlags::INDEX) {
            return Ok(());
        }
        // An unreadable root is repaired first; lost+found comes later.
        // The name may still be on the device: the check planned this only
        // where it found none, or one this batch clears (its pass 2).
        let Ok(old) = fs.lookup(&root, b"lost+found") else {
            return Ok(());
        };
        if old.is_some() && !self.name_cleared(&root, b"lost+found")? {
            return Ok(());
        }
        // A block map cannot hold a block past 2^32: no lost+found then
        // (checked before its name goes in the root).
        let record_len = num::index(u64::from(fs.geometry().inode_size));
        let Some(new) =
            crate::lost_found::inode(&self.sb, n.block, fs.block_size(), self.now, record_len)
        else {
            return Ok(());
        };
        let ft = self.dir_ft();
        if !self.link(&root, b"lost+found", n.ino, ft)? {
            return Ok(());
        }
        let bs = fs.block_size();
        let sb = self.sb.clone();
        let rec = self.inode(n.ino)?;
        rec.fill(0);
        let _ = new.write(rec);
        let owner = Owner::new(n.ino, 0);
        let tail = self.csum();
        // Its block and inode are taken with the allocation statistics,
        // as the check planned them (`lost_found::plan`): the inode where
        // its group had a bitmap before this.
        let ipg = fs.geometry().inodes_per_group;
        let had_bitmap = self.desc((n.ino - 1) / ipg)?.flags() & BG_INODE_UNINIT == 0;
        // The inode must lie in the group's initialised part.
        self.initialised(n.ino)?;
        if fs.geometry().cluster_ratio() == 1 {
            self.alloc_stats_block(n.block, true)?;
            if had_bitmap {
                self.alloc_stats_inode(n.ino, true)?;
            }
        }
        let filetype = sb.has_incompat(Incompat::FILETYPE);
        let blk = self.block(n.block, owner.dir())?;
        crate::lost_found::dir_block(blk, n.ino, filetype, tail, bs);
        self.made_lost_found = Some(ext4r::fs::InodeInfo {
            ino: InodeNr(n.ino),
            inode: new,
            record: self.inode(n.ino)?.clone(),
        });
        // Its `..`: one more link, as e2fsck's `e2fsck_adjust_inode_count`
        // (pass 4 counted it so, and sets the count it found after this).
        self.edit_inode(ROOT, |i| {
            let l = i.i_links_count.get();
            if l < u16::MAX {
                i.i_links_count.set(l + 1);
            }
        })
    }

    /// Maps `b` at logical block 0 of directory `ino` (a direct pointer,
    /// or a first extent in a root with room) and fills it with `.` and
    /// `..`; the size and block count grow to match.
    pub(super) fn dir_block0(&mut self, ino: u32, b: u64, owner: Owner) -> Result<()> {
        let bs = self.fs.block_size();
        let huge = self.sb.has_ro_compat(RoCompat::HUGE_FILE);
        let mut mapped = false;
        self.edit_inode(ino, |i| {
            mapped = crate::lost_found::map_block0(i, b);
            if mapped {
                let sectors = i.blocks_count(huge, bs) + u64::from(bs / 512);
                let _ = i.set_blocks_count(sectors, huge, bs);
                if i.size() < u64::from(bs) {
                    i.set_size(u64::from(bs));
                }
            }
        })?;
        if mapped {
            let tail = self.csum();
            let filetype = self.sb.has_incompat(Incompat::FILETYPE);
            let blk = self.block(b, owner.dir())?;
            crate::lost_found::dir_block(blk, ino, filetype, tail, bs);
        }
        Ok(())
    }

    /// e2fsck's `allocate_dir_block` for a direct block `l` of a
    /// block-mapped directory: an empty block mapped there, counted, and
    /// the size grown to cover it.
    pub(super) fn dir_block_at(&mut self, ino: u32, l: u64, b: u64, owner: Owner) -> Result<()> {
        let bs = self.fs.block_size();
        let huge = self.sb.has_ro_compat(RoCompat::HUGE_FILE);
        let (Ok(slot), Ok(word)) = (usize::try_from(l), u32::try_from(b)) else {
            return Ok(());
        };
        let mut mapped = false;
        self.edit_inode(ino, |i| {
            let mut w = i.block_words();
            if slot >= 12 || i.flags().contains(ext4r_format::inode::InodeFlags::EXTENTS) {
                return;
            }
            w[slot] = word;
            i.set_block_words(&w);
            let sectors = i.blocks_count(huge, bs) + u64::from(bs / 512);
            let _ = i.set_blocks_count(sectors, huge, bs);
            let end = (l + 1) * u64::from(bs);
            if i.size() < end {
                i.set_size(end);
            }
            mapped = true;
        })?;
        if mapped {
            let tail = self.csum();
            let blk = self.block(b, owner.dir())?;
            crate::lost_found::empty_dir_block(blk, tail, bs);
            self.use_block(b)?;
        }
        Ok(())
    }

    /// Maps `blocks` into directory `ino` and writes them: empty directory
    /// blocks, and an indirect block listing the ones after it.
    pub(super) fn expand_dir(&mut self, ino: u32, blocks: &[u64]) -> Result<()> {
        let bs = self.fs.block_size();
        let huge = self.sb.has_ro_compat(RoCompat::HUGE_FILE);
        let mut done = Vec::new();
        let mut gen = 0;
        self.edit_inode(ino, |i| {
            gen = i.generation();
            done = crate::lost_found::map_more(i, blocks, bs, huge);
        })?;
        // Taken with the allocation statistics, as the check planned them
        // (`lost_found::plan_expand`).
        if self.fs.geometry().cluster_ratio() == 1 {
            for &(b, _) in &done {
                self.alloc_stats_block(b, true)?;
            }
        }
        let owner = Owner::new(ino, gen);
        let tail = self.csum();
        for (k, &(b, dir)) in done.iter().enumerate() {
            if dir {
                let blk = self.block(b, owner.dir())?;
                crate::lost_found::empty_dir_block(blk, tail, bs);
            } else {
                let blk = self.block(b, BlockKind::Plain)?;
                blk.fill(0);
                for (j, &(d, _)) in done[k + 1..].iter().enumerate() {
                    // map_more maps only blocks below 2^32 in a block map.
                    if let (Some(x), Ok(d)) = (blk.get_mut(j * 4..j * 4 + 4), u32::try_from(d)) {
                        x.copy_from_slice(&d.to_le_bytes());
                    }
                }
            }
        }
        Ok(())
    }

    /// Adds `#ino` to /lost+found in the first block with room: an unused
    /// record big enough, or the slack after a record. Nothing is
    /// allocated; a full lost+found leaves the problem for the next run.
    pub(super) fn reconnect(&mut self, ino: u32, ft: u8) -> Result<()> {
        // A root or lost+found that cannot be read (being repaired in this
        // batch) leaves the reconnection to a later round.
        if self.reconnect_to.is_none() {
            let to = self.lost_found_now()?;
            self.reconnect_to = Some(to);
        }
        let Some(Some(info)) = self.reconnect_to.clone() else {
            return Ok(());
        };
        // An encrypted lost+found cannot take plain names (pass 3 has it
        // replaced).
        if info
            .inode
            .flags()
            .contains(ext4r_format::inode::InodeFlags::ENCRYPT)
        {
            return Ok(());
        }
        if !info.inode.is_dir() {
            return Ok(());
        }
        // Without the filetype feature the type byte must stay zero.
        let ft = if self.sb.has_incompat(Incompat::FILETYPE) {
            ft
        } else {
            0
        };
        self.link(&info, format!("#{ino}").as_bytes(), ino, ft)?;
        Ok(())
    }

    /// The lost+found reconnections go to: the one this batch made, else
    /// the one on the device unless this batch clears its name (the next
    /// round has a new one); None when there is none to use.
    fn lost_found_now(&self) -> Result<Option<ext4r::fs::InodeInfo>> {
        if let Some(made) = &self.made_lost_found {
            return Ok(Some(made.clone()));
        }
        let fs = self.fs;
        let Ok(root) = fs.inode(InodeNr(ext4r_format::inode::ino::ROOT)) else {
            return Ok(None);
        };
        let Ok(Some(lpf)) = fs.lookup(&root, b"lost+found") else {
            return Ok(None);
        };
        if self.name_cleared(&root, b"lost+found")? {
            return Ok(None);
        }
        Ok(fs.inode(lpf).ok())
    }

    /// Whether the entry `name` of directory `dir` (found on the device)
    /// is gone from its blocks as this batch leaves them (a pass-2 fix
    /// cleared it). An indexed directory's blocks are read as linear ones:
    /// names live in its leaves all the same.
    pub(super) fn name_cleared(&self, dir: &ext4r::fs::InodeInfo, name: &[u8]) -> Result<bool> {
        let Ok(runs) = self.fs.runs(dir) else {
            return Ok(false);
        };
        for r in runs {
            for k in 0..r.len {
                let blk = self.peek(r.physical + k)?;
                let live = ext4r_format::dir::DirBlockIter::new(&blk)
                    .map_while(std::result::Result::ok)
                    .any(|e| e.inode.0 != 0 && e.name == name);
                if live {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Adds the entry `name` → `ino` to directory `dir` in the first block
    /// with room; whether it was added.
    pub(super) fn link(
        &mut self,
        dir: &ext4r::fs::InodeInfo,
        name: &[u8],
        ino: u32,
        ft: u8,
    ) -> Result<bool> {
        let fs = self.fs;
        let info = dir;
        let owner = Owner::new(info.ino.0, info.inode.generation());
        // A name longer than a record can say is not linked.
        let Ok(name_len) = u8::try_from(name.len()) else {
            return Ok(false);
        };
        let need = ext4r_format::dir::rec_len_for_name(name.len());
        let bs = fs.block_size();
        let csum = self.csum();
        let Ok(runs) = fs.runs(info) else {
            return Ok(false);
        };
        for r in runs {
            for k in 0..r.len {
                let blk = self.block(r.physical + k, owner.dir())?;
                if let Some((off, rec_len)) = free_slot(blk, need, bs, csum) {
                    if off + rec_len > blk.len() {
                        continue;
                    }
                    blk[off..off + 4].copy_from_slice(&ino.to_le_bytes());
                    if let Ok(raw) = ext4r_format::dir::rec_len_to_disk(num::sat_u32(rec_len), bs) {
                        blk[off + 4..off + 6].copy_from_slice(&raw.to_le_bytes());
                    }
                    blk[off + 6] = name_len;
                    blk[off + 7] = ft;
                    blk[off + 8..off + 8 + name.len()].copy_from_slice(name);
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// Finds room for a record of `need` bytes in a directory block: an
/// unused record at least that long, or the slack after a used record
/// (which is shortened to its own size). Returns (offset, length).
pub(super) fn free_slot(
    blk: &mut [u8],
    need: usize,
    bs: u32,
    csum: bool,
) -> Option<(usize, usize)> {
    let len = blk.len();
    let end = if csum && crate::salvage::has_tail(blk, bs) {
        len - 12
    } else {
        len
    };
    let mut off = 0usize;
    while off + 8 <= end {
        let ino = u32::from_le_bytes([blk[off], blk[off + 1], blk[off + 2], blk[off + 3]]);
        let raw = u16::from_le_bytes([blk[off + 4], blk[off + 5]]);
        let rec = ext4r_format::dir::rec_len_from_disk(raw, bs) as usize;
        if rec < 12 || off + rec > end {
            return None;
        }
        if ino == 0 && rec >= need {
            return Some((off, rec));
        }
        let used = ext4r_format::dir::rec_len_for_name(usize::from(blk[off + 6]));
        if ino != 0 && rec >= used + need {
            if let Ok(raw) = ext4r_format::dir::rec_len_to_disk(num::sat_u32(used), bs) {
                blk[off + 4..off + 6].copy_from_slice(&raw.to_le_bytes());
                return Some((off + used, rec - used));
            }
        }
        off += rec;
    }
    None
}

/// Renumbers a directory's blocks from 0 without holes: in a depth-0
/// extent root each extent starts where the previous one ended; in a block
/// map the direct pointers are packed to the front.
pub(super) fn collapse_dir(i: &mut Inode) {
    use ext4r_format::inode::InodeFlags;
    if i.flags().contains(InodeFlags::EXTENTS) {
        let b = &mut i.i_block;
        let depth = u16::from_le_bytes([b[6], b[7]]);
        let n = usize::from(u16::from_le_bytes([b[2], b[3]])).min(4);
        if depth != 0 {
            return;
        }
        let mut next = 0u32;
        for k in 0..n {
            let at = 12 + k * 12;
            b[at..at + 4].copy_from_slice(&next.to_le_bytes());
            let raw = u16::from_le_bytes([b[at + 4], b[at + 5]]);
            // Lengths above 32768 mark unwritten extents.
            let len = if raw > 32768 { raw - 32768 } else { raw };
            next += u32::from(len);
        }
    } else {
        let mut w = i.block_words();
        let mut packed: Vec<u32> = w[..12].iter().copied().filter(|&x| x != 0).collect();
        packed.resize(12, 0);
        w[..12].copy_from_slice(&packed);
        i.set_block_words(&w);
    }
}

/// Shortens the last record of a leaf block by 12 bytes and writes an
/// empty checksum tail there (the checksum is set when the block is
/// written), when the record has that much slack.
pub(super) fn add_tail(blk: &mut [u8], bs: u32) {
    let len = blk.len();
    if crate::salvage::has_tail(blk, bs) || len < 24 {
        return;
    }
    let mut off = 0usize;
    while off + 8 <= len {
        if off + 12 == len {
            // The records end where the tail belongs (what is there is
            // a damaged tail or left over): write the tail.
            let t = &mut blk[off..];
            t.fill(0);
            t[4..6].copy_from_slice(&12u16.to_le_bytes());
            t[7] = ext4r_format::dir::ft::DIR_CSUM;
            return;
        }
        let raw = u16::from_le_bytes([blk[off + 4], blk[off + 5]]);
        let rec = ext4r_format::dir::rec_len_from_disk(raw, bs) as usize;
        if rec < 12 || off + rec > len {
            return;
        }
        if off + rec == len {
            if off + 12 == len && rec == 12 && blk[off..off + 4] == [0; 4] {
                // A damaged tail in the tail's place: rewrite it.
                let t = &mut blk[off..];
                t.fill(0);
                t[4..6].copy_from_slice(&12u16.to_le_bytes());
                t[7] = ext4r_format::dir::ft::DIR_CSUM;
                return;
            }
            let used = if blk[off..off + 4] == [0; 4] {
                12
            } else {
                ext4r_format::dir::rec_len_for_name(usize::from(blk[off + 6]))
            };
            if rec >= used + 12 {
                if let Ok(r) = ext4r_format::dir::rec_len_to_disk(num::sat_u32(rec - 12), bs) {
                    blk[off + 4..off + 6].copy_from_slice(&r.to_le_bytes());
                    let t = &mut blk[len - 12..];
                    t.fill(0);
                    t[4..6].copy_from_slice(&12u16.to_le_bytes());
                    t[7] = ext4r_format::dir::ft::DIR_CSUM;
                }
            }
            return;
        }
        off += rec;
    }
}
