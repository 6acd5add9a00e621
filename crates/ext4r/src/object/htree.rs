//! Indexed directories (htree) as stored, read through a [`Source`]: the
//! index read from block 0 down to the leaf a name hashes to, as the
//! kernel's `dx_probe` and `dx_find_entry` do (`fs/ext4/namei.c`). The
//! write face changes indexes with these same readers.

use ext4r_format::dir::leaf;
use ext4r_format::htree::{
    dx_hash, dx_limit, effective_hash_version, parse_dx_node, parse_dx_root, DxNode, DxRoot,
    DX_NODE_COUNT_OFFSET,
};
use ext4r_format::inode::InodeFlags;
use ext4r_format::superblock::Superblock;
use ext4r_txn::csum::BlockKind;
use zerocopy::FromBytes;

use super::dirblock::{kind_of, untiled, DirMap};
use super::source::{meta_block, InodeInfo, Source};
use crate::error::{Error, Result};

/// What hashing a name into an index needs from the superblock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hashing {
    /// `dir_index`: indexes are followed (and kept).
    pub dir_index: bool,
    /// `largedir`: three levels of index, not two.
    pub largedir: bool,
    /// metadata_csum: index blocks carry a tail, which shortens their limit.
    pub csum: bool,
    pub seed: [u32; 4],
    /// Whether the legacy hashes treat name bytes as unsigned.
    pub unsigned: bool,
}

impl Hashing {
    /// The parameters `sb` sets.
    pub(crate) fn of(sb: &Superblock) -> Self {
        use ext4r_format::features::{Compat, Incompat, RoCompat};
        Hashing {
            dir_index: sb.has_compat(Compat::DIR_INDEX),
            largedir: sb.has_incompat(Incompat::LARGEDIR),
            csum: sb.has_ro_compat(RoCompat::METADATA_CSUM),
            seed: sb.hash_seed(),
            unsigned: sb.s_flags.get() & 0x2 != 0,
        }
    }

    /// The major hash of `name` under hash `version`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an unknown hash version.
    pub(crate) fn hash(&self, version: u8, name: &[u8]) -> Result<u32> {
        dx_hash(version, name, &self.seed)
            .map(|h| h.major)
            .map_err(|e| Error::corrupt("directory hash", e))
    }

    /// Index levels below the root this filesystem allows.
    pub(crate) fn max_levels(&self) -> u8 {
        if self.largedir {
            2
        } else {
            1
        }
    }
}

/// Whether a block is an htree interior node (an unused record over the
/// whole block, then count/limit): skipped when scanning for names.
pub(crate) fn is_index_block(b: &[u8], csum: bool) -> bool {
    // The fake record is unused (inode 0) over the whole block, and the
    // limit is exactly what the block holds.
    let unused = DxNode::read_from_prefix(b).is_ok_and(|(n, _)| n.fake.inode.get() == 0);
    unused
        && parse_dx_node(b).is_ok_and(|e| e.limit == dx_limit(b.len(), DX_NODE_COUNT_OFFSET, csum))
}

/// The index of an htree directory.
pub(crate) struct Index {
    pub root: DxRoot,
    pub root_entries: Vec<(u32, u32)>,
    pub levels: u8,
    pub hash_version: u8,
    /// Logical to physical block of the directory.
    pub map: DirMap,
    /// Its blocks' checksum kind.
    pub kind: BlockKind,
}

/// The index of directory `dir`, or `None` when it is not indexed or its
/// root cannot be followed (too deep, unreadable as a root): the caller
/// then treats the directory as linear.
///
/// # Errors
/// As [`meta_block`] for block 0; mapping errors.
pub(crate) fn read_index(src: &(impl Source + ?Sized), dir: &InodeInfo) -> Result<Option<Index>> {
    let h = Hashing::of(src.superblock());
    if !dir.inode.flags().contains(InodeFlags::INDEX) || !h.dir_index {
        return Ok(None);
    }
    let map = DirMap::read(src, dir)?;
    let Some(b0) = map.get(0) else {
        return Ok(None);
    };
    let kind = kind_of(dir.ino.0, &dir.inode);
    let b = meta_block(src, b0, kind)?;
    let Ok(root) = parse_dx_root(&b) else {
        return Ok(None);
    };
    let levels = root.root.info.indirect_levels;
    if levels > h.max_levels() {
        return Ok(None);
    }
    let hash_version = effective_hash_version(root.root.info.hash_version, h.unsigned);
    Ok(Some(Index {
        root: root.root,
        root_entries: root.entries.iter().collect(),
        levels,
        hash_version,
        map,
        kind,
    }))
}

/// The entry of `entries` whose range holds `h`.
pub(crate) fn pick(entries: &[(u32, u32)], h: u32) -> usize {
    let mut k = 0;
    for (i, &(eh, _)) in entries.iter().enumerate().skip(1) {
        if eh & !1 <= h {
            k = i;
        } else {
            break;
        }
    }
    k
}

/// One index block on the way down: its logical block and entries, the
/// one taken.
pub(crate) struct Frame {
    pub logical: u64,
    pub entries: Vec<(u32, u32)>,
    pub pos: usize,
}

/// The frames from the root to the leaf hash `h` belongs in; `None` when
/// the index cannot be followed.
///
/// # Errors
/// As [`meta_block`] for the index blocks.
pub(crate) fn descend(
    src: &(impl Source + ?Sized),
    ix: &Index,
    h: u32,
) -> Result<Option<Vec<Frame>>> {
    let mut frames = vec![Frame {
        logical: 0,
        entries: ix.root_entries.clone(),
        pos: pick(&ix.root_entries, h),
    }];
    for _ in 0..ix.levels {
        let Some(last) = frames.last() else {
            return Ok(None);
        };
        let Some(&(_, lb)) = last.entries.get(last.pos) else {
            return Ok(None);
        };
        let lb = u64::from(lb);
        let Some(pb) = ix.map.get(lb) else {
            return Ok(None);
        };
        let b = meta_block(src, pb, ix.kind)?;
        let Ok(node) = parse_dx_node(&b) else {
            return Ok(None);
        };
        let entries: Vec<(u32, u32)> = node.iter().collect();
        if entries.is_empty() {
            return Ok(None);
        }
        let pos = pick(&entries, h);
        frames.push(Frame {
            logical: lb,
            entries,
            pos,
        });
    }
    Ok(Some(frames))
}

/// Where a name was found: the leaf's physical block, and the record's
/// inode and file type.
pub(crate) type LeafHit = (u64, (u32, u8));

/// The leaf block (physical) of htree directory `dir` that holds `name`,
/// with the record's inode and file type, found through the index as the
/// kernel's `dx_find_entry` finds it: `Ok(None)` when `dir` is not indexed
/// or its index cannot be followed (the caller scans the blocks linearly,
/// as the kernel falls back on a bad index), `Ok(Some(None))` when the
/// index leads to leaves without the name.
///
/// # Errors
/// As [`meta_block`]; [`Error::Corrupt`] for a leaf whose records do not
/// tile it.
pub(crate) fn leaf_of(
    src: &(impl Source + ?Sized),
    dir: &InodeInfo,
    name: &[u8],
) -> Result<Option<Option<LeafHit>>> {
    let Some(ix) = read_index(src, dir)? else {
        return Ok(None);
    };
    let h = Hashing::of(src.superblock()).hash(ix.hash_version, name)?;
    let Some(frames) = descend(src, &ix, h)? else {
        return Ok(None);
    };
    let Some(last) = frames.last() else {
        return Ok(None);
    };
    // The leaf, then the next ones while they continue this hash.
    let mut pos = last.pos;
    loop {
        let Some(&(_, lb)) = last.entries.get(pos) else {
            return Ok(None);
        };
        let Some(pb) = ix.map.get(u64::from(lb)) else {
            return Ok(None);
        };
        let b = meta_block(src, pb, ix.kind)?;
        if let Some(found) = leaf::find(&b, name).ok_or_else(|| untiled(dir.ino.0, pb))? {
            return Ok(Some(Some((pb, found))));
        }
        pos += 1;
        match last.entries.get(pos) {
            Some(&(eh, _)) if eh & 1 == 1 && eh & !1 == h => continue,
            _ => return Ok(Some(None)),
        }
    }
}
