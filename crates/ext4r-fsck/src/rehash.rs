//! Pass 3A, as e2fsck's `rehash.c`: a directory's hash index rebuilt
//! from its live entries. The repair does it for directories whose
//! broken index it cleared (rather than leave them linear), and for every
//! indexed-capable directory under `-D`.
//!
//! The entries are sorted by name hash and spread over the directory's
//! own blocks in logical order: block 0 the root, then the interior nodes
//! of a two-level tree, then the leaves. Every block is kept (the
//! directory is not shrunk), so nothing is allocated or freed and a
//! rebuild cut short leaves blocks a later check reads as a linear
//! directory or an index to rebuild again.

use std::collections::HashSet;

use ext4r::fs::Filesystem;
use ext4r_format::dir::{
    rec_len_for_name, set_dir_block_checksum, DirBlockBuilder, DirBlockIter, DIR_TAIL_SIZE,
};
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::htree::{
    dx_hash, dx_limit, effective_hash_version, set_dx_checksum, write_dx_node, write_dx_root,
    DxEntry, DxRoot, DX_NODE_COUNT_OFFSET, DX_ROOT_COUNT_OFFSET,
};
use ext4r_format::inode::{inode_csum_seed, InodeFlags};
use ext4r_format::superblock::FLAGS_UNSIGNED_HASH;
use ext4r_format::InodeNr;

/// A directory laid out anew: its blocks' new contents (checksums set),
/// written over the old ones, and the INDEX flag set on the inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// The directory.
    pub ino: u32,
    /// (physical block, contents) in logical order.
    pub blocks: Vec<(u64, Vec<u8>)>,
    /// Whether it is indexed now (else linear: its entries fit in block 0).
    pub index: bool,
}

/// One live entry: its hash (major, minor), name, inode and file type.
struct Entry {
    hash: (u32, u32),
    name: Vec<u8>,
    ino: u32,
    ft: u8,
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
/// deeper than two levels.
pub(crate) fn plan(fs: &Filesystem, ino: u32) -> Option<Rebuilt> {
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
    // The blocks in logical order, without holes or unwritten runs.
    let mut phys = Vec::new();
    for r in fs.runs(&info).ok()? {
        if r.unwritten || r.logical != phys.len() as u64 {
            return None;
        }
        phys.extend(r.physical..r.physical + r.len);
    }
    if phys.len() < 2 || info.inode.size() != phys.len() as u64 * u64::from(bs) {
        return None;
    }
    let stored = sb.s_def_hash_version;
    let version = effective_hash_version(stored, sb.s_flags.get() & FLAGS_UNSIGNED_HASH != 0);
    let seed = sb.hash_seed();
    let mut parent = None;
    let mut entries = Vec::new();
    let mut buf = vec![0u8; bsz];
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
    let parent = parent?;
    entries.sort_by(|a, b| (a.hash, &a.name).cmp(&(b.hash, &b.name)));
    let csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
    let filetype = sb.has_incompat(Incompat::FILETYPE);
    let dseed = inode_csum_seed(sb.csum_seed(), InodeNr(ino), info.inode.generation());
    let dir_ft = if filetype {
        ext4r_format::dir::ft::DIR
    } else {
        0
    };
    let room = bsz - if csum { DIR_TAIL_SIZE } else { 0 };
    let total: usize = entries.iter().map(|e| rec_len_for_name(e.name.len())).sum();
    // Too few for an index (e2fsck's test): one linear block with them
    // all, the others empty (e2fsck would also release those; they stay).
    if total + 24 <= room {
        let mut blocks = Vec::with_capacity(phys.len());
        for (l, &b) in phys.iter().enumerate() {
            let mut d = DirBlockBuilder::new(bs, csum).ok()?;
            if l == 0 {
                d.push(InodeNr(ino), b".", dir_ft).ok()?;
                d.push(InodeNr(parent), b"..", dir_ft).ok()?;
                for e in &entries {
                    d.push(InodeNr(e.ino), &e.name, e.ft).ok()?;
                }
            }
            let mut blk = d.finish().ok()?;
            if csum {
                set_dir_block_checksum(dseed, &mut blk).ok()?;
            }
            blocks.push((b, blk));
        }
        return Some(Rebuilt {
            ino,
            blocks,
            index: false,
        });
    }
    // Levels: the root's slots for leaves, or for interior nodes each
    // taking as many leaves as it holds.
    let avail = phys.len() - 1;
    let root_limit = usize::from(dx_limit(bsz, DX_ROOT_COUNT_OFFSET, csum));
    let node_limit = usize::from(dx_limit(bsz, DX_NODE_COUNT_OFFSET, csum));
    let nodes = if avail <= root_limit {
        0
    } else {
        let k = avail.div_ceil(node_limit + 1);
        if k > root_limit {
            return None;
        }
        k
    };
    let leaves = avail - nodes;
    let groups = spread(&entries, leaves, bsz, csum)?;
    let mut out = Vec::with_capacity(phys.len());
    // Index entries (hash, logical block) for the leaves.
    let mut index = Vec::with_capacity(leaves);
    let mut prev_last: Option<u32> = None;
    let mut prev_hash = 0u32;
    for (i, g) in groups.iter().enumerate() {
        let lblk = (1 + nodes + i) as u32;
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
        let mut b = DirBlockBuilder::new(bs, csum).ok()?;
        for e in g.iter() {
            b.push(InodeNr(e.ino), &e.name, e.ft).ok()?;
        }
        let mut blk = b.finish().ok()?;
        if csum {
            set_dir_block_checksum(dseed, &mut blk).ok()?;
        }
        out.push((phys[1 + nodes + i], blk));
    }
    let mut head = Vec::with_capacity(1 + nodes);
    let root_entries: Vec<DxEntry> = if nodes == 0 {
        index
    } else {
        let per = leaves.div_ceil(nodes);
        let mut r = Vec::with_capacity(nodes);
        for (k, chunk) in index.chunks(per).enumerate() {
            let mut blk = vec![0u8; bsz];
            write_dx_node(&mut blk, chunk, csum).ok()?;
            if csum {
                set_dx_checksum(dseed, &mut blk).ok()?;
            }
            r.push(DxEntry::new(chunk[0].hash.get(), (1 + k) as u32));
            head.push((phys[1 + k], blk));
        }
        // Fewer chunks than planned nodes would leave a block unindexed.
        if r.len() != nodes {
            return None;
        }
        r
    };
    let root = DxRoot::new(
        InodeNr(ino),
        InodeNr(parent),
        bs,
        stored,
        nodes.min(1) as u8,
    )
    .ok()?;
    let mut blk = vec![0u8; bsz];
    write_dx_root(&mut blk, &root, &root_entries, csum).ok()?;
    if !filetype {
        blk[7] = 0;
        blk[12 + 7] = 0;
    }
    if csum {
        set_dx_checksum(dseed, &mut blk).ok()?;
    }
    let mut blocks = vec![(phys[0], blk)];
    blocks.extend(head);
    blocks.extend(out);
    Some(Rebuilt {
        ino,
        blocks,
        index: true,
    })
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
