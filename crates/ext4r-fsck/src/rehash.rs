//! Pass 3A, as e2fsck's `rehash.c`: a directory's hash index rebuilt
//! from its live entries. The repair does it for directories whose
//! broken index it cleared (rather than leave them linear), and for every
//! indexed-capable directory under `-D`.
//!
//! The entries are sorted by name hash and laid over the directory's own
//! blocks in logical order: block 0 the root, then the interior nodes of
//! a two-level tree, then the leaves, each filled to e2fsck's four fifths.
//! Blocks past those are released when the extents sit in the inode, or
//! the inode's direct pointers name every block (else every block is kept
//! and the entries spread over them all); a
//! directory whose entries fit one block becomes a linear one. Nothing is
//! allocated, and /lost+found keeps all its blocks, as with e2fsck.

use std::collections::HashSet;

use ext4r::fs::Filesystem;
use ext4r_format::dir::{rec_len_for_name, DirBlockBuilder, DirBlockIter, DIR_TAIL_SIZE};
use ext4r_format::extent::EXTENT_MAGIC;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::htree::{
    dx_hash, dx_limit, effective_hash_version, write_dx_node, write_dx_root, DxEntry, DxRoot,
    DX_NODE_COUNT_OFFSET, DX_ROOT_COUNT_OFFSET,
};
use ext4r_format::inode::InodeFlags;
use ext4r_format::superblock::FLAGS_UNSIGNED_HASH;
use ext4r_format::{num, InodeNr};

/// A directory laid out anew: its blocks' new contents (checksums stamped
/// when written),
/// written over the old ones, and the INDEX flag set on the inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// The directory.
    pub ino: u32,
    /// Its generation (the write layer seeds the blocks' checksums from
    /// the two).
    pub generation: u32,
    /// (physical block, contents) in logical order.
    pub blocks: Vec<(u64, Vec<u8>)>,
    /// Whether it is indexed now (else linear: its entries fit in block 0).
    pub index: bool,
    /// The blocks released at its end, with the inode's new extent root
    /// (`i_block`) and size; empty when it keeps all its blocks.
    pub release: Vec<u64>,
    /// The new `i_block` and `i_size` when blocks are released.
    pub shrunk: Option<([u8; 60], u64)>,
}

/// One live entry: its hash (major, minor), name, inode and file type.
struct Entry {
    hash: (u32, u32),
    name: Vec<u8>,
    ino: u32,
    ft: u8,
}

/// The inode /lost+found names, if any.
pub(crate) fn lost_found(fs: &Filesystem) -> Option<u32> {
    let root = fs.inode(InodeNr(ext4r_format::inode::ino::ROOT)).ok()?;
    fs.lookup(&root, b"lost+found").ok().flatten().map(|i| i.0)
}

/// Directories worth indexing: every directory reachable from the root
/// with more than one block, for `-D`.
pub(crate) fn all_dirs(fs: &Filesystem) -> Vec<u32> {
    let root = ext4r_format::inode::ino::ROOT;
    let mut seen = HashSet::from([root]);
    let mut todo = vec![root];
    let mut out = Vec::new();
    // A bound against loops the check would have reported anyway.
    while let Some(ino) = todo.pop() {
        if seen.len() > 10_000_000 {
            break;
        }
        let Ok(info) = fs.inode(InodeNr(ino)) else {
            continue;
        };
        if !info.inode.is_dir() {
            continue;
        }
        out.push(ino);
        let Ok(entries) = fs.read_dir(&info) else {
            continue;
        };
        for e in entries {
            if e.is_dot() || !seen.insert(e.ino.0) {
                continue;
            }
            // Without the filetype feature every entry is looked at.
            if matches!(
                e.kind,
                ext4r::fs::FileKind::Directory | ext4r::fs::FileKind::Unknown
            ) {
                todo.push(e.ino.0);
            }
        }
    }
    out.sort_unstable();
    out
}

/// The new layout of directory `ino`, or None when it is left as it is:
/// no dir_index feature, one block (nothing to index), inline data,
/// encrypted or casefolded names (hashed with keys or folding this
/// version does not do), holes, entries that do not parse, or a tree
/// deeper than two levels. `lost_found` keeps all its blocks, as e2fsck
/// keeps them (room to reconnect files without allocating).
pub(crate) fn plan(fs: &Filesystem, ino: u32, lost_found: Option<u32>) -> Option<Rebuilt> {
    let sb = fs.superblock();
    if !sb.has_compat(Compat::DIR_INDEX) {
        return None;
    }
    let info = fs.inode(InodeNr(ino)).ok()?;
    let flags = info.inode.flags();
    if !info.inode.is_dir()
        || flags.intersects(InodeFlags::INLINE_DATA | InodeFlags::ENCRYPT | InodeFlags::CASEFOLD)
    {
        return None;
    }
    let bs = fs.block_size();
    let bsz = bs as usize;
    let phys = logical_blocks(fs, &info)?;
    if phys.len() < 2 || info.inode.size() != phys.len() as u64 * u64::from(bs) {
        return None;
    }
    let (parent, mut entries) = live_entries(fs, &phys)?;
    let shrinkable = lost_found != Some(ino) && can_shrink(fs, &info.inode.i_block, flags);
    entries.sort_by(|a, b| (a.hash, &a.name).cmp(&(b.hash, &b.name)));
    let csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
    let filetype = sb.has_incompat(Incompat::FILETYPE);
    let dir = Layout {
        ino,
        generation: info.inode.generation(),
        parent,
        phys: &phys,
        i_block: &info.inode.i_block,
        bs,
        csum,
    };
    let room = bsz - if csum { DIR_TAIL_SIZE } else { 0 };
    let total: usize = entries.iter().map(|e| rec_len_for_name(e.name.len())).sum();
    // Too few for an index (e2fsck's test): one linear block with them
    // all, the others empty (e2fsck would also release those; they stay).
    if total + 24 <= room {
        let dir_ft = if filetype {
            ext4r_format::dir::ft::DIR
        } else {
            0
        };
        return linear(&dir, &entries, dir_ft, shrinkable);
    }
    let (nodes, leaves) = index_shape(&entries, room, bsz, csum, shrinkable, phys.len())?;
    let groups = spread(&entries, leaves, bsz, csum)?;
    let (index, out) = leaf_blocks(&dir, &groups, nodes)?;
    let (root_entries, head) = interior_nodes(&dir, index, nodes, leaves)?;
    let root = DxRoot::new(
        InodeNr(ino),
        InodeNr(parent),
        bs,
        sb.s_def_hash_version,
        u8::from(nodes > 0),
    )
    .ok()?;
    let mut blk = vec![0u8; bsz];
    write_dx_root(&mut blk, &root, &root_entries, csum).ok()?;
    if !filetype {
        blk[7] = 0;
        blk[12 + 7] = 0;
    }
    let mut blocks = vec![(phys[0], blk)];
    blocks.extend(head);
    blocks.extend(out);
    Some(shrink(
        ino,
        dir.generation,
        blocks,
        true,
        &phys,
        dir.i_block,
        bs,
    ))
}

/// The directory a plan lays out.
struct Layout<'a> {
    ino: u32,
    generation: u32,
    /// Its `..`.
    parent: u32,
    /// Its blocks, in logical order.
    phys: &'a [u64],
    i_block: &'a [u8; 60],
    bs: u32,
    csum: bool,
}

/// A directory's blocks in logical order; None with holes or unwritten
/// runs.
fn logical_blocks(fs: &Filesystem, info: &ext4r::fs::InodeInfo) -> Option<Vec<u64>> {
    let mut phys = Vec::new();
    for r in fs.runs(info).ok()? {
        if r.unwritten || r.logical != phys.len() as u64 {
            return None;
        }
        phys.extend(r.physical..r.physical + r.len);
    }
    Some(phys)
}

/// The directory's `..` (from block 0) and its other live entries with
/// their hashes; None when an entry does not parse or hash, or there is
/// no `..`.
fn live_entries(fs: &Filesystem, phys: &[u64]) -> Option<(u32, Vec<Entry>)> {
    let sb = fs.superblock();
    let bs = fs.block_size();
    let version = effective_hash_version(
        sb.s_def_hash_version,
        sb.s_flags.get() & FLAGS_UNSIGNED_HASH != 0,
    );
    let seed = sb.hash_seed();
    let mut parent = None;
    let mut entries = Vec::new();
    let mut buf = vec![0u8; bs as usize];
    for (l, &b) in phys.iter().enumerate() {
        fs.device().read_at(&mut buf, b * u64::from(bs)).ok()?;
        for e in DirBlockIter::with_block_size(&buf, bs) {
            let e = e.ok()?;
            if e.inode.0 == 0 {
                continue;
            }
            if l == 0 && e.name == b".." {
                parent = Some(e.inode.0);
                continue;
            }
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let h = dx_hash(version, e.name, &seed).ok()?;
            entries.push(Entry {
                hash: (h.major, h.minor),
                name: e.name.to_vec(),
                ino: e.inode.0,
                ft: e.file_type,
            });
        }
    }
    Some((parent?, entries))
}

/// A directory too small for an index: block 0 holds `.`, `..` and every
/// entry; the others (kept unless `shrinkable`) are empty.
fn linear(dir: &Layout<'_>, entries: &[Entry], dir_ft: u8, shrinkable: bool) -> Option<Rebuilt> {
    let keep = if shrinkable { 1 } else { dir.phys.len() };
    let mut blocks = Vec::with_capacity(keep);
    for (l, &b) in dir.phys.iter().enumerate().take(keep) {
        let mut d = DirBlockBuilder::new(dir.bs, dir.csum).ok()?;
        if l == 0 {
            d.push(InodeNr(dir.ino), b".", dir_ft).ok()?;
            d.push(InodeNr(dir.parent), b"..", dir_ft).ok()?;
            for e in entries {
                d.push(InodeNr(e.ino), &e.name, e.ft).ok()?;
            }
        }
        let blk = d.finish().ok()?;
        blocks.push((b, blk));
    }
    Some(shrink(
        dir.ino,
        dir.generation,
        blocks,
        false,
        dir.phys,
        dir.i_block,
        dir.bs,
    ))
}

/// How many interior nodes and leaves the index has: as few leaves as
/// e2fsck fills (each to within its slack of full) when the blocks past
/// them can be released, else all the blocks. Levels: the root's slots
/// for leaves, or for interior nodes each taking as many leaves as it
/// holds. None when it would take more than two levels.
fn index_shape(
    entries: &[Entry],
    room: usize,
    bsz: usize,
    csum: bool,
    shrinkable: bool,
    blocks: usize,
) -> Option<(usize, usize)> {
    let root_limit = usize::from(dx_limit(bsz, DX_ROOT_COUNT_OFFSET, csum));
    let node_limit = usize::from(dx_limit(bsz, DX_NODE_COUNT_OFFSET, csum));
    let needed = leaves_needed(entries, room);
    let needed_nodes = if needed <= root_limit {
        0
    } else {
        needed.div_ceil(node_limit)
    };
    let (nodes, leaves) = if shrinkable && 1 + needed_nodes + needed < blocks {
        (needed_nodes, needed)
    } else {
        let avail = blocks - 1;
        let k = if avail <= root_limit {
            0
        } else {
            avail.div_ceil(node_limit + 1)
        };
        (k, avail - k)
    };
    if nodes > root_limit {
        return None;
    }
    Some((nodes, leaves))
}

/// The leaf blocks, after the root and `nodes` interior nodes, each
/// holding one group of entries; and the index entries (hash, logical
/// block) for them, a hash shared with the previous leaf marked by its
/// low bit.
#[allow(clippy::type_complexity)]
fn leaf_blocks(
    dir: &Layout<'_>,
    groups: &[&[Entry]],
    nodes: usize,
) -> Option<(Vec<DxEntry>, Vec<(u64, Vec<u8>)>)> {
    let mut out = Vec::with_capacity(dir.phys.len());
    let mut index = Vec::with_capacity(groups.len());
    let mut prev_last: Option<u32> = None;
    let mut prev_hash = 0u32;
    for (i, g) in groups.iter().enumerate() {
        let lblk = u32::try_from(1 + nodes + i).ok()?;
        let hash = match (g.first(), prev_last) {
            (Some(e), Some(last)) if e.hash.0 == last => e.hash.0 | 1,
            (Some(e), _) => e.hash.0,
            (None, _) => prev_hash,
        };
        prev_hash = hash;
        if let Some(e) = g.last() {
            prev_last = Some(e.hash.0);
        }
        index.push(DxEntry::new(hash, lblk));
        let mut b = DirBlockBuilder::new(dir.bs, dir.csum).ok()?;
        for e in g.iter() {
            b.push(InodeNr(e.ino), &e.name, e.ft).ok()?;
        }
        let blk = b.finish().ok()?;
        out.push((dir.phys[1 + nodes + i], blk));
    }
    Some((index, out))
}

/// The root's entries: the leaves' own with no interior nodes, else one
/// per interior node, each node (blocks 1..=nodes) taking an equal share
/// of the leaves' entries. None when the share leaves a node unused.
#[allow(clippy::type_complexity)]
fn interior_nodes(
    dir: &Layout<'_>,
    index: Vec<DxEntry>,
    nodes: usize,
    leaves: usize,
) -> Option<(Vec<DxEntry>, Vec<(u64, Vec<u8>)>)> {
    let mut head = Vec::with_capacity(1 + nodes);
    if nodes == 0 {
        return Some((index, head));
    }
    let per = leaves.div_ceil(nodes);
    let mut r = Vec::with_capacity(nodes);
    for (k, chunk) in index.chunks(per).enumerate() {
        let mut blk = vec![0u8; dir.bs as usize];
        write_dx_node(&mut blk, chunk, dir.csum).ok()?;
        r.push(DxEntry::new(
            chunk[0].hash.get(),
            u32::try_from(1 + k).ok()?,
        ));
        head.push((dir.phys[1 + k], blk));
    }
    // Fewer chunks than planned nodes would leave a block unindexed.
    if r.len() != nodes {
        return None;
    }
    Some((r, head))
}

/// The rebuilt directory, releasing the blocks past those written.
fn shrink(
    ino: u32,
    generation: u32,
    blocks: Vec<(u64, Vec<u8>)>,
    index: bool,
    phys: &[u64],
    i_block: &[u8; 60],
    bs: u32,
) -> Rebuilt {
    let keep = blocks.len();
    let extents = u16::from_le_bytes([i_block[0], i_block[1]]) == EXTENT_MAGIC;
    let shrunk = (keep < phys.len())
        .then(|| {
            if extents {
                trim_extents(i_block, u32::try_from(keep).ok()?)
            } else {
                Some(trim_direct(i_block, keep))
            }
        })
        .flatten();
    let release = if shrunk.is_some() {
        phys[keep..].to_vec()
    } else {
        Vec::new()
    };
    Rebuilt {
        ino,
        generation,
        blocks,
        index,
        release,
        shrunk: shrunk.map(|ib| (ib, keep as u64 * u64::from(bs))),
    }
}

/// Whether a directory's blocks can be released: one block per cluster,
/// and its extents all in the inode (a tree of depth 0) or, block-mapped,
/// its blocks all named by the inode's twelve direct pointers.
fn can_shrink(fs: &Filesystem, i_block: &[u8; 60], flags: InodeFlags) -> bool {
    let word = |i: usize| u16::from_le_bytes([i_block[i], i_block[i + 1]]);
    let in_inode = if flags.contains(InodeFlags::EXTENTS) {
        word(0) == EXTENT_MAGIC && word(6) == 0
    } else {
        // No indirect, double or triple indirect block.
        i_block[48..].iter().all(|&b| b == 0)
    };
    fs.geometry().cluster_bits == 0 && in_inode
}

/// A block map cut to its first `keep` direct pointers.
fn trim_direct(i_block: &[u8; 60], keep: usize) -> [u8; 60] {
    let mut out = *i_block;
    out[(4 * keep).min(48)..48].fill(0);
    out
}

/// The extent root cut to the first `keep` logical blocks; None when an
/// extent entry does not parse.
fn trim_extents(i_block: &[u8; 60], keep: u32) -> Option<[u8; 60]> {
    let mut out = *i_block;
    let n = usize::from(u16::from_le_bytes([i_block[2], i_block[3]])).min(4);
    let mut kept = 0usize;
    for k in 0..n {
        let e = &i_block[12 + k * 12..24 + k * 12];
        let start = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        let raw = u16::from_le_bytes([e[4], e[5]]);
        if raw > 32768 || start >= keep {
            continue;
        }
        let len = raw.min(num::sat_u16(keep - start));
        let mut rec = [0u8; 12];
        rec.copy_from_slice(e);
        rec[4..6].copy_from_slice(&len.to_le_bytes());
        out[12 + kept * 12..24 + kept * 12].copy_from_slice(&rec);
        kept += 1;
    }
    out[12 + kept * 12..].fill(0);
    // At most the root's four entries.
    out[2..4].copy_from_slice(&num::sat_u16(kept).to_le_bytes());
    Some(out)
}

/// Leaves e2fsck's layout takes: each filled until less than its slack
/// (a fifth of the block) is left.
fn leaves_needed(entries: &[Entry], room: usize) -> usize {
    let limit = room - room / 5;
    let mut n = 1;
    let mut used = 0;
    for e in entries {
        let r = rec_len_for_name(e.name.len());
        if used + r > limit && used > 0 {
            n += 1;
            used = 0;
        }
        used += r;
    }
    n
}

/// Splits the sorted entries over `leaves` blocks, each taking an even
/// share of what is left (so none is full and later inserts have room);
/// None when they do not fit.
fn spread(entries: &[Entry], leaves: usize, bsz: usize, csum: bool) -> Option<Vec<&[Entry]>> {
    let room = bsz - if csum { DIR_TAIL_SIZE } else { 0 };
    let size = |e: &Entry| rec_len_for_name(e.name.len());
    let mut left: usize = entries.iter().map(size).sum();
    let mut out = Vec::with_capacity(leaves);
    let mut at = 0;
    for i in 0..leaves {
        let share = left.div_ceil(leaves - i);
        let (mut used, start) = (0, at);
        while let Some(e) = entries.get(at) {
            if used >= share || used + size(e) > room {
                break;
            }
            used += size(e);
            at += 1;
        }
        left -= used;
        out.push(&entries[start..at]);
    }
    (at == entries.len()).then_some(out)
}
