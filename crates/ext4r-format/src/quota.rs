//! Quota files in the kernel's "vfsv1" format (`fs/quota/quota_tree.c`,
//! `quotaio_v2.h`): what mkfs and tune write, and what fsck reads back to
//! compare with the usage it counted.
//!
//! The file is 1 KiB quota blocks: a header and info in block 0, a
//! four-level radix tree on the id from block 1, and data blocks of
//! entries (72 bytes in revision 1, 48 in revision 0). Which quota block
//! gets which number follows the insertion that e2fsprogs' quota library
//! performs, and the order the blocks are first written in is recorded,
//! so that mkfs can allocate the file's blocks exactly as mke2fs does.
//!
//! Reading follows e2fsprogs' `quota_file_open` and `qtree_scan_dquots`:
//! what they refuse is refused here, and what they accept is accepted
//! (a header whose magic is merely wrong still opens), so that fsck
//! judges a quota file as e2fsck does.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::num;
use alloc::collections::{BTreeMap, BTreeSet};

/// Quota block size (`QT_BLKSIZE`).
pub const QBLK: usize = 1024;
/// Tree root block (`QT_TREEOFF`).
const TREE_OFF: u32 = 1;
/// Tree depth (`QT_TREEDEPTH`).
const TREE_DEPTH: u32 = 4;
/// Data block header (`struct qt_disk_dqdbheader`).
const DQDB_HEADER: usize = 16;
/// `struct v2r1_disk_dqblk`.
const ENTRY: usize = 72;
/// `struct v2r0_disk_dqblk`.
const ENTRY_R0: usize = 48;
/// Entries per data block.
#[allow(clippy::cast_possible_truncation)] // (1024 - 16) / 72 = 14
const ENTRIES_PER_BLOCK: u16 = ((QBLK - DQDB_HEADER) / ENTRY) as u16;
/// Grace periods a new file gets (`MAX_DQ_TIME`, `MAX_IQ_TIME`): a week.
pub const GRACE: u32 = 7 * 24 * 60 * 60;
/// `INITQMAGICS`, by quota type.
const MAGIC: [u32; 3] = [0xd9c0_1f11, 0xd9c0_1927, 0xd9c0_3f14];
/// `V2_VERSION_R1`.
const VERSION: u32 = 1;
/// The largest quota file e2fsprogs opens.
const MAX_FILE: u64 = 1 << 31;

/// Usage of one id: inodes and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Usage {
    /// Inodes owned.
    pub inodes: u64,
    /// Bytes charged.
    pub space: u64,
}

/// One id's record (`struct util_dqblk` with its id).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Dquot {
    /// The user, group or project id.
    pub id: u32,
    /// What the id uses.
    pub usage: Usage,
    /// Inode hard limit.
    pub ihardlimit: u64,
    /// Inode soft limit.
    pub isoftlimit: u64,
    /// Space hard limit, in 1 KiB quota blocks.
    pub bhardlimit: u64,
    /// Space soft limit, in 1 KiB quota blocks.
    pub bsoftlimit: u64,
    /// When the space grace period ends (0: not running).
    pub btime: u64,
    /// When the inode grace period ends (0: not running).
    pub itime: u64,
}

impl Dquot {
    /// An id with usage and no limits.
    pub fn new(id: u32, usage: Usage) -> Self {
        Dquot {
            id,
            usage,
            ..Default::default()
        }
    }

    /// Takes the limits of `other` (the old file's, kept by a rewrite).
    pub fn take_limits(&mut self, other: &Dquot) {
        self.ihardlimit = other.ihardlimit;
        self.isoftlimit = other.isoftlimit;
        self.bhardlimit = other.bhardlimit;
        self.bsoftlimit = other.bsoftlimit;
    }

    /// `update_grace_times` for a new file: a grace period starts now for
    /// a soft limit exceeded, none runs otherwise.
    pub fn set_grace_times(&mut self, now: u64) {
        let qblocks = self.usage.space.div_ceil(QBLK as u64);
        self.btime = if self.bsoftlimit != 0 && qblocks > self.bsoftlimit {
            now + u64::from(GRACE)
        } else {
            0
        };
        self.itime = if self.isoftlimit != 0 && self.usage.inodes > self.isoftlimit {
            now + u64::from(GRACE)
        } else {
            0
        };
    }

    /// Whether a file keeps no entry for it (`v2_commit_dquot` deletes
    /// such a dquot): nothing used, no limits.
    pub fn is_empty(&self) -> bool {
        self.usage == Usage::default()
            && self.ihardlimit == 0
            && self.isoftlimit == 0
            && self.bhardlimit == 0
            && self.bsoftlimit == 0
    }
}

/// A quota file's contents and the order its quota blocks were first
/// written in.
#[derive(Debug, Clone)]
pub struct QuotaFile {
    /// Quota blocks, block `i` at byte `i * QBLK`.
    pub blocks: Vec<Vec<u8>>,
    /// Quota block numbers in the order they were written, repeats kept.
    pub write_order: Vec<u32>,
}

impl QuotaFile {
    /// Builds the file for quota type `qtype` (0 user, 1 group, 2 project)
    /// holding `dquots` (ids ascending, as the library's dictionary yields
    /// them); empty ones get no entry.
    pub fn build(qtype: usize, dquots: &[Dquot]) -> Self {
        let mut t = Tree {
            f: QuotaFile {
                blocks: Vec::new(),
                write_order: Vec::new(),
            },
            dqi_blocks: TREE_OFF + 1,
            free_entry: 0,
        };
        // v2_new_io: header, then the info with an empty tree.
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&MAGIC[qtype.min(2)].to_le_bytes());
        head[4..].copy_from_slice(&VERSION.to_le_bytes());
        t.put(0, &head);
        let info = t.info();
        t.put(8, &info);
        for d in dquots.iter().filter(|d| !d.is_empty()) {
            let off = t.insert(d.id);
            t.put(off, &entry(d));
        }
        // quota_file_close: the final info.
        let info = t.info();
        t.put(8, &info);
        t.f
    }

    /// File size in bytes: up to the end of the last quota block written.
    pub fn size(&self) -> u64 {
        (self.blocks.len() * QBLK) as u64
    }

    /// The file's logical blocks of `block_size` bytes in the order they
    /// were first written (which is the order they get allocated in).
    pub fn alloc_order(&self, block_size: usize) -> Vec<u64> {
        let per = num::sat_u32(block_size / QBLK);
        let mut out: Vec<u64> = Vec::new();
        for &q in &self.write_order {
            let l = u64::from(q / per);
            if !out.contains(&l) {
                out.push(l);
            }
        }
        out
    }

    /// Contents of logical block `lblk` of `block_size` bytes.
    pub fn fs_block(&self, lblk: u64, block_size: usize) -> Vec<u8> {
        let per = block_size / QBLK;
        let mut out = vec![0u8; block_size];
        for i in 0..per {
            let k = num::index(lblk)
                .checked_mul(per)
                .and_then(|k| k.checked_add(i));
            if let Some(b) = k.and_then(|k| self.blocks.get(k)) {
                out[i * QBLK..(i + 1) * QBLK].copy_from_slice(b);
            }
        }
        out
    }
}

/// One dquot on disk (`v2r1_mem2diskdqblk`); an entry that would be all
/// zeros gets itime 1 so that it does not read as free.
fn entry(d: &Dquot) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[0..4].copy_from_slice(&d.id.to_le_bytes());
    for (at, v) in [
        (8, d.ihardlimit),
        (16, d.isoftlimit),
        (24, d.usage.inodes),
        (32, d.bhardlimit),
        (40, d.bsoftlimit),
        (48, d.usage.space),
        (56, d.btime),
        (64, d.itime),
    ] {
        e[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    if e.iter().all(|b| *b == 0) {
        e[64..72].copy_from_slice(&1u64.to_le_bytes());
    }
    e
}

/// The insertion state of quotaio_tree.c: the next new block and the head
/// of the list of data blocks with free entries (no block is ever freed
/// while a file is written from scratch, so the free-block list stays
/// empty).
struct Tree {
    f: QuotaFile,
    dqi_blocks: u32,
    free_entry: u32,
}

fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(w)
}

impl Tree {
    fn info(&self) -> [u8; 24] {
        let mut i = [0u8; 24];
        for (k, v) in [GRACE, GRACE, 0, self.dqi_blocks, 0, self.free_entry]
            .iter()
            .enumerate()
        {
            i[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
        }
        i
    }

    fn read_blk(&self, blk: u32) -> Vec<u8> {
        self.f
            .blocks
            .get(blk as usize)
            .cloned()
            .unwrap_or_else(|| vec![0; QBLK])
    }

    fn put(&mut self, off: usize, data: &[u8]) {
        let blk = off / QBLK;
        if self.f.blocks.len() <= blk {
            self.f.blocks.resize(blk + 1, vec![0; QBLK]);
        }
        let start = off % QBLK;
        self.f.blocks[blk][start..start + data.len()].copy_from_slice(data);
        // Quota blocks are numbered in u32 (the tree's pointers).
        self.f.write_order.push(num::sat_u32(blk));
    }

    fn write_blk(&mut self, blk: u32, buf: &[u8]) {
        self.put(blk as usize * QBLK, buf);
    }

    /// `get_free_dqblk` with an empty free list: a new zeroed block at the
    /// end of the file.
    fn get_free_dqblk(&mut self) -> u32 {
        let blk = self.dqi_blocks;
        self.write_blk(blk, &[0; QBLK]);
        self.dqi_blocks += 1;
        blk
    }

    /// `dq_insert_tree`: returns the byte offset of the id's entry.
    fn insert(&mut self, id: u32) -> usize {
        let mut root = TREE_OFF;
        self.insert_at(id, &mut root, 0)
    }

    /// `do_insert_tree`.
    fn insert_at(&mut self, id: u32, treeblk: &mut u32, depth: u32) -> usize {
        let mut buf = if *treeblk == 0 {
            *treeblk = self.get_free_dqblk();
            vec![0; QBLK]
        } else {
            self.read_blk(*treeblk)
        };
        let idx = ((id >> ((TREE_DEPTH - depth - 1) * 8)) & 0xff) as usize;
        let mut child = get_u32(&buf, idx * 4);
        let newson = child == 0;
        let off = if depth == TREE_DEPTH - 1 {
            let (blk, off) = self.find_free_dqentry();
            child = blk;
            off
        } else {
            self.insert_at(id, &mut child, depth + 1)
        };
        if newson {
            buf[idx * 4..idx * 4 + 4].copy_from_slice(&child.to_le_bytes());
            self.write_blk(*treeblk, &buf);
        }
        off
    }

    /// `find_free_dqentry`: a slot in the first data block with room.
    fn find_free_dqentry(&mut self) -> (u32, usize) {
        let (blk, mut buf) = if self.free_entry != 0 {
            (self.free_entry, self.read_blk(self.free_entry))
        } else {
            let b = self.get_free_dqblk();
            self.free_entry = b;
            (b, vec![0; QBLK])
        };
        let entries = u16::from_le_bytes([buf[8], buf[9]]);
        if entries + 1 >= ENTRIES_PER_BLOCK {
            self.remove_free_dqentry(&mut buf, blk);
        }
        buf[8..10].copy_from_slice(&(entries + 1).to_le_bytes());
        let slot = (0..ENTRIES_PER_BLOCK as usize)
            .find(|i| {
                let s = DQDB_HEADER + i * ENTRY;
                buf[s..s + ENTRY].iter().all(|b| *b == 0)
            })
            .unwrap_or(0);
        self.write_blk(blk, &buf);
        (blk, blk as usize * QBLK + DQDB_HEADER + slot * ENTRY)
    }

    /// `remove_free_dqentry`: the block is about to fill up.
    fn remove_free_dqentry(&mut self, buf: &mut [u8], blk: u32) {
        let next = get_u32(buf, 0);
        let prev = get_u32(buf, 4);
        if next != 0 {
            let mut t = self.read_blk(next);
            t[4..8].copy_from_slice(&prev.to_le_bytes());
            self.write_blk(next, &t);
        }
        if prev != 0 {
            let mut t = self.read_blk(prev);
            t[0..4].copy_from_slice(&next.to_le_bytes());
            self.write_blk(prev, &t);
        } else {
            self.free_entry = next;
        }
        buf[0..8].fill(0);
        self.write_blk(blk, buf);
    }
}

/// Why a quota file does not open (e2fsprogs' `quota_file_open` fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unreadable {
    /// Shorter than its header.
    #[error("quota file shorter than its header")]
    Short,
    /// The magic of this type, byte-swapped.
    #[error("quota file stored in the wrong endianness")]
    WrongEndian,
    /// Neither revision 0 nor 1.
    #[error("quota file version {0} unknown")]
    Version(u32),
    /// The info's block counts do not fit the file.
    #[error("quota file info does not fit its size")]
    Info,
}

/// What a scan of a file that opened found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Every entry in use, in the order the tree walk met them.
    pub dquots: Vec<Dquot>,
    /// False when the walk stopped at a reference past the file's blocks
    /// (`qtree_scan_dquots` failing): `dquots` are those met before.
    pub complete: bool,
}

/// Reads the quota file of type `qtype` whose size is `size`, its quota
/// block `n` read by `read(n, buf)` (zeros past the end or on an error,
/// as e2fsprogs reads it).
///
/// # Errors
/// [`Unreadable`] where e2fsprogs' `quota_file_open` fails.
pub fn scan(
    size: u64,
    qtype: usize,
    read: &mut dyn FnMut(u32, &mut [u8; QBLK]),
) -> Result<Scan, Unreadable> {
    if size < 8 {
        return Err(Unreadable::Short);
    }
    let mut b0 = [0u8; QBLK];
    read(0, &mut b0);
    let magic = get_u32(&b0, 0);
    if magic.swap_bytes() == MAGIC[qtype.min(2)] {
        return Err(Unreadable::WrongEndian);
    }
    let version = get_u32(&b0, 4);
    let entry_size = match version {
        0 => ENTRY_R0,
        1 => ENTRY,
        v => return Err(Unreadable::Version(v)),
    };
    // v2_init_io reads the 24-byte info at offset 8 and checks it
    // against the file size.
    if size < 32 {
        return Err(Unreadable::Info);
    }
    let blocks = get_u32(&b0, 8 + 12);
    let free_blk = get_u32(&b0, 8 + 16);
    let free_entry = get_u32(&b0, 8 + 20);
    if size > MAX_FILE
        || u64::from(blocks) > size.div_ceil(QBLK as u64)
        || free_blk >= blocks
        || free_entry >= blocks
    {
        return Err(Unreadable::Info);
    }
    let mut w = Walk {
        read,
        blocks,
        entry_size,
        seen_data: BTreeSet::new(),
        seen_tree: BTreeSet::new(),
        out: Vec::new(),
    };
    let complete = w.tree(TREE_OFF, 0).is_ok();
    Ok(Scan {
        dquots: w.out,
        complete,
    })
}

/// `report_tree` and `report_block`.
struct Walk<'r> {
    read: &'r mut dyn FnMut(u32, &mut [u8; QBLK]),
    blocks: u32,
    entry_size: usize,
    /// Data blocks reported (each once, as e2fsprogs' bitmap keeps them).
    seen_data: BTreeSet<u32>,
    /// Tree blocks walked, by depth: walking one again reports nothing
    /// new (its data blocks are all seen), so it is not walked again,
    /// which bounds a tree whose references repeat.
    seen_tree: BTreeSet<(u32, u32)>,
    out: Vec<Dquot>,
}

/// A reference past the file's blocks (`check_reference`).
struct IllegalRef;

impl Walk<'_> {
    fn tree(&mut self, blk: u32, depth: u32) -> Result<(), IllegalRef> {
        if !self.seen_tree.insert((blk, depth)) {
            // Already walked: the same references, checked then.
            return Ok(());
        }
        let mut buf = [0u8; QBLK];
        (self.read)(blk, &mut buf);
        for i in 0..QBLK / 4 {
            let r = get_u32(&buf, i * 4);
            if depth == TREE_DEPTH - 1 {
                if r >= self.blocks {
                    return Err(IllegalRef);
                }
                if r != 0 && self.seen_data.insert(r) {
                    self.data(r);
                }
            } else if r != 0 {
                if r >= self.blocks {
                    return Err(IllegalRef);
                }
                self.tree(r, depth + 1)?;
            }
        }
        Ok(())
    }

    fn data(&mut self, blk: u32) {
        let mut buf = [0u8; QBLK];
        (self.read)(blk, &mut buf);
        let n = (QBLK - DQDB_HEADER) / self.entry_size;
        for i in 0..n {
            let at = DQDB_HEADER + i * self.entry_size;
            let e = &buf[at..at + self.entry_size];
            if e.iter().all(|b| *b == 0) {
                continue;
            }
            self.out.push(if self.entry_size == ENTRY {
                Dquot {
                    id: get_u32(e, 0),
                    ihardlimit: get_u64(e, 8),
                    isoftlimit: get_u64(e, 16),
                    usage: Usage {
                        inodes: get_u64(e, 24),
                        space: get_u64(e, 48),
                    },
                    bhardlimit: get_u64(e, 32),
                    bsoftlimit: get_u64(e, 40),
                    btime: get_u64(e, 56),
                    itime: get_u64(e, 64),
                }
            } else {
                Dquot {
                    id: get_u32(e, 0),
                    ihardlimit: get_u32(e, 4).into(),
                    isoftlimit: get_u32(e, 8).into(),
                    usage: Usage {
                        inodes: get_u32(e, 12).into(),
                        space: get_u64(e, 24),
                    },
                    bhardlimit: get_u32(e, 16).into(),
                    bsoftlimit: get_u32(e, 20).into(),
                    btime: get_u64(e, 32),
                    itime: get_u64(e, 40),
                }
            });
        }
    }
}

/// The ids an inode record charges: user, group and project (the
/// project only when `i_extra_isize` reaches past `i_projid`; 0 otherwise,
/// as e2fsprogs' `get_qid`). `record` is at least 128 bytes.
pub fn owners(record: &[u8]) -> [u32; 3] {
    let g16 = |o: usize| u32::from(u16::from_le_bytes([record[o], record[o + 1]]));
    let uid = g16(0x02) | g16(0x78) << 16;
    let gid = g16(0x18) | g16(0x7A) << 16;
    let prj = if record.len() >= 0xA0 && 128 + g16(0x80) as usize >= 0xA0 {
        get_u32(record, 0x9C)
    } else {
        0
    };
    [uid, gid, prj]
}

/// The dquots of `usage` (ids ascending), no limits.
pub fn from_usage(usage: &BTreeMap<u32, Usage>) -> Vec<Dquot> {
    usage.iter().map(|(&id, &u)| Dquot::new(id, u)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_from(f: &QuotaFile) -> impl FnMut(u32, &mut [u8; QBLK]) + '_ {
        move |n, buf| match f.blocks.get(n as usize) {
            Some(b) => buf.copy_from_slice(b),
            None => buf.fill(0),
        }
    }

    #[test]
    fn one_id_makes_six_blocks_like_mke2fs() {
        let u = Usage {
            inodes: 2,
            space: 20480,
        };
        let f = QuotaFile::build(0, &[Dquot::new(0, u)]);
        assert_eq!(f.blocks.len(), 6);
        let b0 = &f.blocks[0];
        assert_eq!(get_u32(b0, 0), 0xd9c0_1f11);
        // info: grace, grace, flags, blocks 6, free_blk 0, free_entry 5
        assert_eq!(get_u32(b0, 8 + 12), 6);
        assert_eq!(get_u32(b0, 8 + 20), 5);
        for (blk, child) in [(1, 2), (2, 3), (3, 4), (4, 5)] {
            assert_eq!(get_u32(&f.blocks[blk], 0), child);
        }
        assert_eq!(u16::from_le_bytes([f.blocks[5][8], f.blocks[5][9]]), 1);
        assert_eq!(f.blocks[5][16 + 24], 2);
        // 1 KiB blocks are first written 0, 2, 3, 4, 5, then 1.
        assert_eq!(f.alloc_order(1024), [0, 2, 3, 4, 5, 1]);
        assert_eq!(f.alloc_order(4096), [0, 1]);
    }

    #[test]
    fn what_is_built_scans_back_with_limits_and_without_empty_ids() {
        let mut ds: Vec<Dquot> = (0..40u32)
            .map(|i| {
                Dquot::new(
                    i * 1000,
                    Usage {
                        inodes: u64::from(i),
                        space: u64::from(i) * 4096,
                    },
                )
            })
            .collect();
        ds[3].bsoftlimit = 7;
        let f = QuotaFile::build(1, &ds);
        let s = scan(f.size(), 1, &mut read_from(&f)).unwrap();
        assert!(s.complete);
        let mut got = s.dquots;
        got.sort_by_key(|d| d.id);
        // id 0 uses nothing and has no limits: no entry.
        assert_eq!(got, ds[1..]);
    }

    #[test]
    fn damage_is_judged_as_e2fsprogs_judges_it() {
        let one = Usage {
            inodes: 1,
            space: 1024,
        };
        let f = QuotaFile::build(0, &[Dquot::new(5, Usage::default()), Dquot::new(6, one)]);
        let ids: Vec<u32> = scan(f.size(), 0, &mut read_from(&f))
            .unwrap()
            .dquots
            .iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(ids, [6]);
        let mut g = QuotaFile::build(0, &[Dquot::new(5, one)]);
        // A wrong magic still opens; a wrong version does not.
        g.blocks[0][0] ^= 0xff;
        assert!(scan(g.size(), 0, &mut read_from(&g)).is_ok());
        g.blocks[0][4] = 9;
        assert_eq!(
            scan(g.size(), 0, &mut read_from(&g)),
            Err(Unreadable::Version(9))
        );
        g.blocks[0][4] = 1;
        // A tree reference past the file stops the walk.
        g.blocks[1][0] = 200;
        let s = scan(g.size(), 0, &mut read_from(&g)).unwrap();
        assert!(!s.complete);
        assert_eq!(scan(4, 0, &mut read_from(&g)), Err(Unreadable::Short));
    }

    #[test]
    fn a_tree_whose_references_repeat_is_walked_once() {
        let one = Usage {
            inodes: 1,
            space: 1024,
        };
        let mut f = QuotaFile::build(0, &[Dquot::new(1, one)]);
        f.blocks.truncate(2);
        f.blocks[0][8 + 12..8 + 16].copy_from_slice(&2u32.to_le_bytes());
        f.blocks[0][8 + 20..8 + 24].fill(0);
        // Every reference of the root points back at the root.
        f.blocks[1] = [1u8, 0, 0, 0].repeat(QBLK / 4);
        let mut reads = 0;
        let s = scan(f.size(), 0, &mut |n, buf: &mut [u8; QBLK]| {
            reads += 1;
            buf.copy_from_slice(&f.blocks[n as usize]);
        })
        .unwrap();
        assert!(s.complete);
        assert!(reads < 10, "{reads} reads");
    }
}
