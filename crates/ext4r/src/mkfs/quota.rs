//! Quota files as mke2fs makes them (`-O quota`): one file per quota type
//! in the kernel's "vfsv1" format (`fs/quota/quota_tree.c`,
//! `quotaio_v2.h`), holding one entry per owner of the inodes that exist
//! at that point — the root directory and lost+found.
//!
//! The file is 1 KiB quota blocks: a header and info in block 0, a
//! four-level radix tree on the id from block 1, and data blocks of 72-byte
//! entries. Which quota block gets which number, and in which order the
//! file's filesystem blocks are first written (and so allocated), follows
//! the insertion that e2fsprogs' quota library performs through
//! `ext2_file`; that order is recorded here so that the layout can allocate
//! blocks exactly as mke2fs does.

use super::objects::{self, InodeBuf, EXTENTS_FL, IMMUTABLE_FL};
use crate::error::{Error, Result};
use ext4r_txn::alloc::BlockAlloc;
use std::collections::BTreeMap;

/// Quota block size (`QT_BLKSIZE`).
pub(crate) const QBLK: usize = 1024;
/// Tree root block (`QT_TREEOFF`).
const TREE_OFF: u32 = 1;
/// Tree depth (`QT_TREEDEPTH`).
const TREE_DEPTH: u32 = 4;
/// Data block header (`struct qt_disk_dqdbheader`).
const DQDB_HEADER: usize = 16;
/// `struct v2r1_disk_dqblk`.
const ENTRY: usize = 72;
/// Entries per data block.
const ENTRIES_PER_BLOCK: u16 = ((QBLK - DQDB_HEADER) / ENTRY) as u16;
/// Grace periods mke2fs writes (`MAX_DQ_TIME`, `MAX_IQ_TIME`): a week.
const GRACE: u32 = 7 * 24 * 60 * 60;
/// `INITQMAGICS`, by quota type.
const MAGIC: [u32; 3] = [0xd9c0_1f11, 0xd9c0_1927, 0xd9c0_3f14];
/// `V2_VERSION_R1`.
const VERSION: u32 = 1;

/// Quota types, as bits of `-E quotatype=` (`QUOTA_*_BIT`).
pub(crate) const USR: u8 = 1;
pub(crate) const GRP: u8 = 2;
pub(crate) const PRJ: u8 = 4;

/// Parses `-E quotatype=` (`usr[quota]`, `grp[quota]`, `prj[quota]`, each
/// optionally negated with `^`, separated by `:` or `,`), starting from no
/// types as mke2fs does. Returns the offending word on error.
pub(crate) fn parse_types(list: &str) -> Result<u8, String> {
    let mut bits = 0;
    for word in list.split([':', ',']).filter(|w| !w.is_empty()) {
        let (neg, name) = match word.strip_prefix('^') {
            Some(n) => (true, n),
            None => (false, word),
        };
        let b = match name {
            "usr" | "usrquota" => USR,
            "grp" | "grpquota" => GRP,
            "prj" | "prjquota" => PRJ,
            _ => return Err(word.to_string()),
        };
        if neg {
            bits &= !b;
        } else {
            bits |= b;
        }
    }
    Ok(bits)
}

/// Usage of one id: inodes and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub inodes: u64,
    pub space: u64,
}

/// A quota file's contents and the order its quota blocks were first
/// written in.
#[derive(Debug, Clone)]
pub(crate) struct QuotaFile {
    /// Quota blocks, block `i` at byte `i * QBLK`.
    pub blocks: Vec<Vec<u8>>,
    /// Quota block numbers in the order they were written, repeats kept.
    pub write_order: Vec<u32>,
}

impl QuotaFile {
    /// Builds the file for quota type `qtype` (0 user, 1 group, 2 project)
    /// holding `usage` (ids ascending, as the library's dictionary yields
    /// them).
    pub(crate) fn build(qtype: usize, usage: &[(u32, Usage)]) -> Self {
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
        head[..4].copy_from_slice(&MAGIC[qtype].to_le_bytes());
        head[4..].copy_from_slice(&VERSION.to_le_bytes());
        t.put(0, &head);
        let info = t.info();
        t.put(8, &info);
        for &(id, u) in usage {
            let off = t.insert(id);
            t.put(off, &entry(id, u));
        }
        // quota_file_close: the final info.
        let info = t.info();
        t.put(8, &info);
        t.f
    }

    /// File size in bytes: up to the end of the last quota block written.
    pub(crate) fn size(&self) -> u64 {
        (self.blocks.len() * QBLK) as u64
    }

    /// The file's logical blocks of `block_size` bytes in the order they
    /// were first written (which is the order they get allocated in).
    pub(crate) fn alloc_order(&self, block_size: usize) -> Vec<u64> {
        let per = (block_size / QBLK) as u32;
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
    pub(crate) fn fs_block(&self, lblk: u64, block_size: usize) -> Vec<u8> {
        let per = block_size / QBLK;
        let mut out = vec![0u8; block_size];
        for i in 0..per {
            if let Some(b) = self.blocks.get(lblk as usize * per + i) {
                out[i * QBLK..(i + 1) * QBLK].copy_from_slice(b);
            }
        }
        out
    }
}

/// Where a quota file's blocks went.
#[derive(Debug, Clone, Default)]
pub(crate) struct QuotaBlocks {
    /// `(logical, physical)` by logical block.
    pub map: Vec<(u64, u64)>,
    /// The extents the blocks were mapped into, in the order mapped.
    pub extents: Vec<(u64, u64, u64)>,
    /// Clusters allocated (for i_blocks).
    pub clusters: u64,
}

/// Allocates the blocks of `file` as `ext2_file` writes do: each block
/// when it is first written; a block whose logical cluster is already
/// mapped takes its place in that cluster; otherwise the search starts
/// after the previous logical block's, or at the start of the filesystem
/// (`extent_bmap`'s goal when the previous block is unmapped).
pub(crate) fn allocate(a: &mut impl BlockAlloc, file: &QuotaFile) -> Result<QuotaBlocks> {
    let bs = a.geo().block_size as usize;
    let ratio = a.geo().cluster_ratio();
    let mut map: BTreeMap<u64, u64> = BTreeMap::new();
    let mut extents = Vec::new();
    let mut clusters = 0;
    for lblk in file.alloc_order(bs) {
        let implied = map
            .iter()
            .find(|(&k, _)| k / ratio == lblk / ratio)
            .map(|(&k, &pb)| pb - k % ratio + lblk % ratio);
        let pblk = match implied {
            Some(b) => b,
            None => {
                let goal = lblk
                    .checked_sub(1)
                    .and_then(|prev| map.get(&prev))
                    .map_or(0, |pb| pb + 1);
                clusters += 1;
                a.alloc_block(goal)?
            }
        };
        map.insert(lblk, pblk);
        super::layout::map_block(&mut extents, lblk, pblk);
    }
    Ok(QuotaBlocks {
        map: map.into_iter().collect(),
        extents,
        clusters,
    })
}

/// The quota file's inode as `quota_inode_init_new` and the writes leave
/// it: an immutable regular file (checksum not yet set).
pub(crate) fn encode_inode(
    file: &QuotaFile,
    q: &QuotaBlocks,
    inode_size: usize,
    block_size: u64,
    cluster_ratio: u64,
    extents: bool,
    now: i64,
) -> Result<InodeBuf> {
    let mut qi = InodeBuf::new_file(inode_size, 0o100600, 1, now);
    qi.set_size(file.size());
    qi.set_sectors(q.clusters * cluster_ratio * (block_size / 512));
    if extents {
        if q.extents.len() > 4 {
            return Err(Error::InvalidArgument(
                "quota file too fragmented for an in-inode extent list".into(),
            ));
        }
        qi.set_flags(EXTENTS_FL | IMMUTABLE_FL);
        qi.set_i_block(&objects::extent_root(&q.extents, None));
    } else {
        let mut ib = [0u8; 60];
        for &(lb, pb) in &q.map {
            if lb >= 12 {
                return Err(Error::InvalidArgument(
                    "quota file too large for direct block pointers".into(),
                ));
            }
            let k = lb as usize * 4;
            ib[k..k + 4].copy_from_slice(&(pb as u32).to_le_bytes());
        }
        qi.set_flags(IMMUTABLE_FL);
        qi.set_i_block(&ib);
    }
    Ok(qi)
}

/// One dquot on disk (`v2r1_mem2diskdqblk`): no limits, no grace times;
/// an entry that would be all zeros gets itime 1 so that it does not read
/// as free.
fn entry(id: u32, u: Usage) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[0..4].copy_from_slice(&id.to_le_bytes());
    e[24..32].copy_from_slice(&u.inodes.to_le_bytes());
    e[48..56].copy_from_slice(&u.space.to_le_bytes());
    if e.iter().all(|b| *b == 0) {
        e[64..72].copy_from_slice(&1u64.to_le_bytes());
    }
    e
}

/// The insertion state of quotaio_tree.c: the next new block and the head
/// of the list of data blocks with free entries (no block is ever freed
/// while a filesystem is made, so the free-block list stays empty).
struct Tree {
    f: QuotaFile,
    dqi_blocks: u32,
    free_entry: u32,
}

fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
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
        self.f.write_order.push(blk as u32);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_id_makes_six_blocks_like_mke2fs() {
        let f = QuotaFile::build(
            0,
            &[(
                0,
                Usage {
                    inodes: 2,
                    space: 20480,
                },
            )],
        );
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
    fn quota_types_parse_as_mke2fs() {
        assert_eq!(parse_types("usrquota:grpquota:prjquota"), Ok(7));
        assert_eq!(parse_types("prj"), Ok(PRJ));
        assert_eq!(parse_types("usr,grp,^usr"), Ok(GRP));
        assert_eq!(parse_types("foo"), Err("foo".into()));
    }
}
