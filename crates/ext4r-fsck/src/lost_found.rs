//! Creating /lost+found when it is missing, as e2fsck's pass 3 does: a
//! new directory (mode 0700) of one block holding `.` and `..`, named in
//! the root directory, the root's link count raised.
//!
//! The inode and the block are chosen at check time from what passes 1–3
//! found in use, so the repair is a plain write. The inode is one pass 1
//! read (its group's table is initialised there), so the next check sees
//! it; the bitmaps and counts follow in the next round's pass 5.

use ext4r_format::dir::{ft, rec_len_to_disk};
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::inode::{Inode, InodeFlags, Timestamp};
use ext4r_format::num;

use crate::ctx::Ctx;
use crate::fix::plan::NewLostFound;

/// Chooses a free inode and a free block for lost+found; None when there
/// is none (the problem is then left reported).
pub(crate) fn plan(c: &mut Ctx) -> Option<NewLostFound> {
    let ino = free_inode(c)?;
    let block = reserve_block(c)?;
    // Taken with the allocation statistics (see the writer's
    // `make_lost_found`), where the groups have bitmaps; on bigalloc the
    // next check counts them.
    if c.geo().cluster_ratio() == 1 {
        c.plan_block(block, true);
        let g = (ino - 1) / c.geo().inodes_per_group;
        if !c.group_state(g).inode_uninit {
            c.plan_inode(ino, true, true);
        }
    }
    Some(NewLostFound { ino, block })
}

/// The lowest inode past the reserved ones that pass 1 found unused, in a
/// group whose table pass 1 read there; else the first inode of a group's
/// unused tail (the repair then counts it in the initialised part, as
/// the kernel does when it allocates there).
fn free_inode(c: &Ctx) -> Option<u32> {
    let search = |tails| {
        ext4r_txn::alloc::find_free_inode(&Found { c, tails }, 0)
            .ok()
            .flatten()
    };
    search(false).or_else(|| search(true))
}

/// The inodes pass 1 found in use, for the write layer's inode search:
/// the parts of the inode tables it read (`tails` false), or the first
/// inode of each group's unused tail (`tails` true), which needs
/// descriptor checksums to be trusted.
struct Found<'a> {
    c: &'a Ctx,
    tails: bool,
}

impl ext4r_txn::alloc::InodeSpace for Found<'_> {
    fn inodes_per_group(&self) -> u32 {
        self.c.geo().inodes_per_group
    }
    fn group_count(&self) -> u32 {
        self.c.geo().group_count
    }
    fn first_ino(&self) -> u32 {
        self.c.sb().first_ino()
    }
    fn may_hold(&self, g: u32) -> bool {
        let c = self.c;
        if c.groups().table_unusable(g) {
            return false;
        }
        if self.tails {
            c.group_csum() && !c.group_state(g).inode_uninit
        } else {
            true
        }
    }
    fn first_free_in(&self, g: u32, from: u32) -> ext4r_txn::Result<Option<u32>> {
        let c = self.c;
        let ipg = c.geo().inodes_per_group;
        let read_to = c.inodes_to_read(g).min(ipg);
        if self.tails {
            return Ok(Some(read_to.max(from)).filter(|&i| i < ipg));
        }
        let base = g * ipg + 1;
        Ok((from..read_to).find(|&i| {
            let ino = base + i;
            !c.inodes().contains(ino) && !c.extra_used().contains(&ino)
        }))
    }
}

/// `n` free blocks (first fit, in order), kept from later plans. On
/// bigalloc each is the first block of a wholly free cluster: a block of
/// a cluster the filesystem already uses (a descriptor block, another
/// file's) would be shared, and a directory's block must sit at its
/// logical block's offset (0 for the first ones) in its cluster.
pub(crate) fn reserve_blocks(c: &mut Ctx, n: usize) -> Vec<u64> {
    let out = free_blocks(c, n);
    c.reserve(out.iter().copied());
    out
}

/// The first `n` free blocks (cluster starts on bigalloc), not reserved:
/// `ext2fs_new_block2` from the first data block, one after another, as
/// e2fsck takes lost+found's blocks. None on a pass-1 worker's context:
/// its claims are its own inodes' only, and a block free by them may be
/// another worker's (the repair wanting it is not planned; a shallower
/// tree, the one rebuild planned there, needs none: its old nodes do).
fn free_blocks(c: &Ctx, n: usize) -> Vec<u64> {
    if c.is_worker() {
        return Vec::new();
    }
    let mut space = c.claimed_map();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let Some(b) = space.new_block(c.geo().first_data_block) else {
            break;
        };
        space.mark(b, 1);
        out.push(b);
    }
    out
}

/// Plans more blocks for lost+found when the `names` to reconnect will
/// not fit in the room its blocks have: (its inode, the blocks). Block
/// maps take direct slots then one indirect block (its block comes first
/// in the list); an extent root of depth 0 takes one more extent.
pub(crate) fn plan_expand(c: &mut Ctx, names: &[usize]) -> Option<(u32, Vec<u64>)> {
    use ext4r_format::dir::rec_len_for_name;
    // A lost+found made in this round is not on disk yet: the next round
    // plans its room (the old one, when unlinked, is not to grow).
    if names.is_empty() || c.is_lost_found_replaced() {
        return None;
    }
    let root = c
        .fs()
        .inode(ext4r_format::InodeNr(ext4r_format::inode::ino::ROOT))
        .ok()?;
    let lpf = c.fs().lookup(&root, b"lost+found").ok()??;
    let info = c.fs().inode(lpf).ok()?;
    if !info.inode.is_dir() || info.inode.flags().contains(InodeFlags::INDEX) {
        return None;
    }
    let need: usize = names.iter().map(|&n| rec_len_for_name(n)).sum();
    let each = rec_len_for_name(*names.iter().max()?);
    let bs = c.geo().block_size as usize;
    let tail = if c.csum() { 12 } else { 0 };
    let mut room = 0usize;
    let runs = c.fs().runs(&info).ok()?;
    // Each run read in pieces of up to 64 blocks, not a block at a time.
    const PIECE: u64 = 64;
    let mut buf = Vec::new();
    for r in &runs {
        let mut k = 0;
        while k < r.len {
            let n = (r.len - k).min(PIECE);
            buf.resize(num::index(n) * bs, 0);
            let read = c
                .fs()
                .device()
                .read_at(&mut buf, (r.physical + k) * bs as u64);
            k += n;
            if read.is_err() {
                continue;
            }
            for blk in buf.chunks_exact(bs) {
                room += block_room(&blk[..bs - tail], c.geo().block_size, each);
            }
        }
    }
    // `room` counts records of the longest name's length: as bytes, what
    // the names (each at its own length, none longer) can use.
    let room = room * each;
    if room >= need {
        return None;
    }
    let per_block = ((bs - tail) / each).max(1) * each;
    let mut n = (need - room).div_ceil(per_block);
    let extents = info.inode.flags().contains(InodeFlags::EXTENTS);
    let mapped: u64 = runs.iter().map(|r| r.len).sum();
    if !extents {
        let direct_free = num::index(12u64.saturating_sub(mapped));
        let apb = bs / 4;
        let words = info.inode.block_words();
        if n > direct_free {
            // The rest goes in a new single indirect block.
            if words[12] != 0 || mapped > 12 {
                n = direct_free;
            } else {
                n = n.min(direct_free + apb) + 1;
            }
        }
    }
    if n == 0 {
        return None;
    }
    if extents {
        // An extent root of depth 0 maps each run in one of its free
        // slots: the blocks are taken in as few runs as free space allows
        // (first fit, as `free_blocks`, would rarely be one run on a
        // used filesystem, and nothing could be mapped).
        let (used, max) = leaf_root_slots(&info.inode.i_block)?;
        if used >= max {
            return None;
        }
        let blocks = reserve_runs(c, n, max - used);
        planned(c, &blocks);
        return (!blocks.is_empty()).then_some((lpf.0, blocks));
    }
    let blocks = reserve_blocks(c, n);
    (blocks.len() == n).then(|| {
        planned(c, &blocks);
        (lpf.0, blocks)
    })
}

/// The blocks lost+found grows by, taken with the allocation statistics
/// (see the writer's `expand_dir`); on bigalloc the next check counts
/// them.
fn planned(c: &mut Ctx, blocks: &[u64]) {
    if c.geo().cluster_ratio() == 1 {
        for &b in blocks {
            c.plan_block(b, true);
        }
    }
}

/// Up to `n` free blocks in at most `runs` runs, kept from later plans:
/// one run of `n` when free space has one, else the longest runs first
/// fit finds, in turn. None on bigalloc, where a directory block must sit
/// at its logical block's offset in its cluster.
fn reserve_runs(c: &mut Ctx, n: usize, runs: usize) -> Vec<u64> {
    let geo = c.geo();
    let (first, count) = (geo.first_data_block, geo.blocks_count);
    if geo.cluster_ratio() > 1 {
        return Vec::new();
    }
    let mut space = c.claimed_map();
    let want = n as u64;
    let mut out: Vec<u64> = Vec::with_capacity(n);
    if let Some(b) = space.get_free_blocks(first, first, want) {
        out.extend(b..b + want);
    } else {
        for _ in 0..runs {
            let left = want - out.len() as u64;
            if left == 0 {
                break;
            }
            let mut best: Option<(u64, u64)> = None;
            let mut from = first;
            // Each free run once, in block order (a run found before
            // `from` is the search wrapping: every run was seen).
            while let Some((s, len)) = space.new_range(from, left) {
                if s < from || len == 0 {
                    break;
                }
                if best.is_none_or(|b| len > b.1) {
                    best = Some((s, len));
                }
                from = s + len;
                if len >= left || from >= count {
                    break;
                }
            }
            let Some((s, len)) = best else { break };
            space.mark(s, len);
            out.extend(s..s + len);
        }
    }
    c.reserve(out.iter().copied());
    out
}

/// How many records of `each` bytes fit in a directory block's slack.
fn block_room(blk: &[u8], bs: u32, each: usize) -> usize {
    let mut off = 0usize;
    let mut n = 0usize;
    while off + 8 <= blk.len() {
        let raw = u16::from_le_bytes([blk[off + 4], blk[off + 5]]);
        let rec = ext4r_format::dir::rec_len_from_disk(raw, bs) as usize;
        if rec < 12 || off + rec > blk.len() {
            break;
        }
        let used = if blk[off..off + 4] == [0; 4] {
            0
        } else {
            ext4r_format::dir::rec_len_for_name(usize::from(blk[off + 6]))
        };
        n += (rec - used) / each;
        off += rec;
    }
    n
}

/// Adds `blocks` to directory `i` as empty directory blocks' homes (see
/// [`plan_expand`] for the order); returns the (block, is it a directory
/// block) list actually mapped. Size and block count are updated.
pub(crate) fn map_more(i: &mut Inode, blocks: &[u64], bs: u32, huge: bool) -> Vec<(u64, bool)> {
    let mut done = Vec::new();
    if i.flags().contains(InodeFlags::EXTENTS) {
        let Some((n, max)) = leaf_root_slots(&i.i_block) else {
            return done;
        };
        // A size past 2^32 blocks (damaged) has no logical block to add at.
        let Ok(mut lblk) = u32::try_from(i.size() / u64::from(bs)) else {
            return done;
        };
        // One extent per run of consecutive blocks, in the root's free
        // slots, in order; what does not fit stays unmapped.
        let mut entries = n;
        let mut rest = blocks;
        while !rest.is_empty() && entries < max {
            let run = 1 + rest
                .windows(2)
                .take(32767)
                .take_while(|w| w[1] == w[0] + 1)
                .count();
            let Some(end) = lblk.checked_add(num::sat_u32(run)) else {
                break;
            };
            let at = 12 + entries * 12;
            let r = &mut i.i_block;
            r[at..at + 4].copy_from_slice(&lblk.to_le_bytes());
            // At most 32768 blocks (taken above), so the length fits.
            r[at + 4..at + 6].copy_from_slice(&num::sat_u16(run).to_le_bytes());
            r[at + 6..at + 8].copy_from_slice(&num::hi16_of_48(rest[0]).to_le_bytes());
            r[at + 8..at + 12].copy_from_slice(&num::lo32(rest[0]).to_le_bytes());
            entries += 1;
            // entries <= max <= 4.
            r[2..4].copy_from_slice(&num::sat_u16(entries).to_le_bytes());
            done.extend(rest[..run].iter().map(|&b| (b, true)));
            rest = &rest[run..];
            lblk = end;
        }
    } else {
        // A block map cannot point past 2^32: then nothing is mapped.
        let Some(words) = blocks
            .iter()
            .map(|&b| u32::try_from(b).ok())
            .collect::<Option<Vec<u32>>>()
        else {
            return done;
        };
        let mut w = i.block_words();
        let mut rest = blocks.iter().copied().zip(words);
        let mut slot = num::index(i.size() / u64::from(bs));
        while slot < 12 {
            let Some((b, b32)) = rest.next() else { break };
            w[slot] = b32;
            done.push((b, true));
            slot += 1;
        }
        let left: Vec<(u64, u32)> = rest.collect();
        if left.len() >= 2 && w[12] == 0 {
            // First the indirect block, then what it maps.
            w[12] = left[0].1;
            done.push((left[0].0, false));
            done.extend(left[1..].iter().map(|&(b, _)| (b, true)));
        }
        i.set_block_words(&w);
    }
    let data = done.iter().filter(|x| x.1).count() as u64;
    let all = done.len() as u64;
    if all > 0 {
        i.set_size(i.size() + data * u64::from(bs));
        let sectors = i.blocks_count(huge, bs) + all * u64::from(bs / 512);
        let _ = i.set_blocks_count(sectors, huge, bs);
    }
    done
}

/// An empty directory block: one unused record over it (and a tail).
pub(crate) fn empty_dir_block(blk: &mut [u8], tail: bool, bs: u32) {
    blk.fill(0);
    let end = blk.len() - if tail { 12 } else { 0 };
    if let Ok(r) = rec_len_to_disk(num::sat_u32(end), bs) {
        blk[4..6].copy_from_slice(&r.to_le_bytes());
    }
    if tail {
        let at = blk.len() - 12;
        blk[at + 4..at + 6].copy_from_slice(&12u16.to_le_bytes());
        blk[at + 7] = ft::DIR_CSUM;
    }
}

/// A free block for a repair of this check, kept from later plans.
pub(crate) fn reserve_block(c: &mut Ctx) -> Option<u64> {
    reserve_blocks(c, 1).first().copied()
}

/// The new directory's inode.
pub(crate) fn inode(
    sb: &ext4r_format::superblock::Superblock,
    block: u64,
    block_size: u32,
    now: u32,
    record_len: usize,
) -> Option<Inode> {
    let mut i = Inode::zeroed();
    i.i_mode.set(0o040700);
    i.i_links_count.set(2);
    i.set_size(u64::from(block_size));
    let t = Timestamp {
        secs: i64::from(now),
        nsecs: 0,
    };
    if record_len > 128 {
        i.i_extra_isize.set(32);
    }
    i.set_atime(t);
    i.set_ctime(t);
    i.set_mtime(t);
    let huge = sb.has_ro_compat(RoCompat::HUGE_FILE);
    let _ = i.set_blocks_count(u64::from(block_size / 512), huge, block_size);
    if sb.has_incompat(Incompat::EXTENTS) {
        i.set_flags(InodeFlags::EXTENTS);
        let b = &mut i.i_block;
        b[0..2].copy_from_slice(&ext4r_format::extent::EXTENT_MAGIC.to_le_bytes());
        b[2..4].copy_from_slice(&1u16.to_le_bytes());
        b[4..6].copy_from_slice(&4u16.to_le_bytes());
        // One extent: logical 0, one block.
        b[16..18].copy_from_slice(&1u16.to_le_bytes());
        b[18..20].copy_from_slice(&num::hi16_of_48(block).to_le_bytes());
        b[20..24].copy_from_slice(&num::lo32(block).to_le_bytes());
    } else {
        // A block map cannot point past 2^32.
        let mut w = [0u32; 15];
        w[0] = u32::try_from(block).ok()?;
        i.set_block_words(&w);
    }
    Some(i)
}

/// An extent root of depth 0 (a leaf in the inode): its entries in use
/// and its slots (`eh_max`, at most the four `i_block` holds), as read
/// from the inode; None for a deeper root.
fn leaf_root_slots(i_block: &[u8; 60]) -> Option<(usize, usize)> {
    let half = |k: usize| u16::from_le_bytes([i_block[k], i_block[k + 1]]);
    (half(6) == 0).then(|| (usize::from(half(2)), usize::from(half(4)).min(4)))
}

/// Maps block `b` at logical block 0: a free direct pointer, or a new
/// first extent in a depth-0 root with room (the others shifted up).
/// Whether it was mapped.
pub(crate) fn map_block0(i: &mut Inode, b: u64) -> bool {
    if i.flags().contains(InodeFlags::EXTENTS) {
        let Some((n, max)) = leaf_root_slots(&i.i_block) else {
            return false;
        };
        if n >= max {
            return false;
        }
        let r = &mut i.i_block;
        r.copy_within(12..12 + n * 12, 24);
        r[12..24].fill(0);
        r[16..18].copy_from_slice(&1u16.to_le_bytes());
        r[18..20].copy_from_slice(&num::hi16_of_48(b).to_le_bytes());
        r[20..24].copy_from_slice(&num::lo32(b).to_le_bytes());
        // n < max <= 4.
        r[2..4].copy_from_slice(&num::sat_u16(n + 1).to_le_bytes());
        true
    } else {
        let mut w = i.block_words();
        let Ok(b32) = u32::try_from(b) else {
            return false;
        };
        if w[0] != 0 {
            return false;
        }
        w[0] = b32;
        i.set_block_words(&w);
        true
    }
}

/// The new directory's block: `.`, `..` (the root) over the rest, and a
/// checksum tail when `tail` (its checksum is set when written).
pub(crate) fn dir_block(blk: &mut [u8], ino: u32, filetype: bool, tail: bool, bs: u32) {
    blk.fill(0);
    let t = if filetype { ft::DIR } else { 0 };
    let end = blk.len() - if tail { 12 } else { 0 };
    let put = |blk: &mut [u8], off: usize, ino: u32, len: usize, name: &[u8]| {
        blk[off..off + 4].copy_from_slice(&ino.to_le_bytes());
        if let Ok(r) = rec_len_to_disk(num::sat_u32(len), bs) {
            blk[off + 4..off + 6].copy_from_slice(&r.to_le_bytes());
        }
        #[allow(clippy::cast_possible_truncation)] // only "." and ".."
        let name_len = name.len() as u8;
        blk[off + 6] = name_len;
        blk[off + 7] = t;
        blk[off + 8..off + 8 + name.len()].copy_from_slice(name);
    };
    put(blk, 0, ino, 12, b".");
    put(blk, 12, ext4r_format::inode::ino::ROOT, end - 12, b"..");
    if tail {
        let at = blk.len() - 12;
        blk[at + 4..at + 6].copy_from_slice(&12u16.to_le_bytes());
        blk[at + 7] = ft::DIR_CSUM;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_block_has_dot_dotdot_and_a_tail() {
        let mut b = vec![0xffu8; 1024];
        dir_block(&mut b, 11, true, true, 1024);
        let names: Vec<Vec<u8>> = ext4r_format::dir::DirBlockIter::new(&b)
            .filter_map(|e| e.ok().map(|e| e.name.to_vec()))
            .collect();
        assert_eq!(names, vec![b".".to_vec(), b"..".to_vec()]);
        assert!(ext4r_format::dir::DirEntryTail::find(&b).is_some());
    }

    #[test]
    fn a_pass_1_worker_takes_no_free_block() {
        let dev = std::sync::Arc::new(ext4r::device::MemDevice::new(8 << 20));
        let opts = ext4r::mkfs::MkfsOptions {
            size_bytes: 8 << 20,
            now: 1_700_000_000,
            ..Default::default()
        };
        ext4r::mkfs::format(&*dev, &opts, false).unwrap();
        let fs = ext4r::fs::Filesystem::open(dev).unwrap();
        let settings = crate::ctx::Settings {
            repairing: true,
            now: 1_700_000_000,
            forced: true,
            threads: 2,
            optimize_extents: true,
        };
        let mut c = Ctx::new(fs, settings);
        let mut w = c.worker();
        assert!(w.is_worker() && !c.is_worker());
        // The worker knows no other worker's blocks: it takes none.
        assert!(reserve_blocks(&mut w, 2).is_empty());
        assert_eq!(reserve_block(&mut w), None);
        // The merging context, which has every claim, does; and keeps
        // what it took from the next plan.
        let got = reserve_blocks(&mut c, 2);
        assert_eq!(got.len(), 2);
        let next = reserve_block(&mut c).unwrap();
        assert!(!got.contains(&next));
    }

    #[test]
    fn a_block_map_takes_no_block_past_2_32() {
        let sb = ext4r_format::superblock::Superblock::zeroed();
        let low = u64::from(u32::MAX);
        let high = low + 1;
        // No extents feature: a block map, whose words are 32 bits.
        let made = inode(&sb, low, 1024, 1, 256).map(|i| i.block_words()[0]);
        assert_eq!(made, Some(u32::MAX));
        assert!(inode(&sb, high, 1024, 1, 256).is_none());

        let mut dir = Inode::zeroed();
        dir.i_mode.set(0o040700);
        dir.set_size(1024);
        assert!(map_more(&mut dir, &[5, high, 7], 1024, false).is_empty());
        assert_eq!(dir.block_words(), [0; 15]);
        assert_eq!(dir.size(), 1024);
        let done = map_more(&mut dir, &[5, 6], 1024, false);
        assert_eq!(done, vec![(5, true), (6, true)]);
        assert_eq!(dir.block_words()[1..3], [5, 6]);

        let mut first = Inode::zeroed();
        assert!(!map_block0(&mut first, high));
        assert!(map_block0(&mut first, low));
        assert_eq!(first.block_words()[0], u32::MAX);
    }
}
