//! Extent tree depths judged by what the tree holds, not by one field.
//!
//! libext2fs walks a tree by the root's `eh_depth` alone: a node below the
//! root is a leaf when it is `eh_depth(root)` levels down, whatever its own
//! `eh_depth` says, so e2fsck keeps every extent of a file whose leaf
//! block has a wrong depth (and does not report it; the kernel refuses to
//! read such a file, so a repair here also rewrites the field). A wrong
//! depth in the root itself makes libext2fs read index entries as extents
//! or extents as index entries, and e2fsck then deletes them all. Index and
//! extent entries are both 12 bytes, so the entries show which reading is
//! right: extents name runs inside the filesystem, index entries name
//! blocks that start with an extent header one level down. When the
//! stored root depth does not fit and exactly one other depth does, that
//! one is the file's (evidence before destruction).

use ext4r_format::extent::{ExtentNode, EXTENT_MAGIC, MAX_EXTENT_DEPTH};

use crate::ctx::Ctx;

/// Entry `i` of a node's bytes (12 bytes after the 12-byte header).
fn entry(node: &[u8], i: usize) -> Option<&[u8]> {
    node.get(12 + 12 * i..24 + 12 * i)
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u64 {
    u64::from(le16(b, at))
}

/// The little-endian `u16` at `at`, 0 past the end of `b`.
fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |x| u16::from_le_bytes([x[0], x[1]]))
}

fn u32_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 4).map_or(0, |x| {
        u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
    })
}

/// The entry count of a node whose header reads (magic, count within the
/// slots the buffer has); None otherwise.
fn entry_count(node: &[u8]) -> Option<usize> {
    if u16_at(node, 0) != u64::from(EXTENT_MAGIC) {
        return None;
    }
    let (n, max) = (usize::from(le16(node, 2)), usize::from(le16(node, 4)));
    (n <= max && 12 + 12 * max <= node.len()).then_some(n)
}

/// Whether entry `e` reads as an extent inside the filesystem: (start,
/// end) of its logical range.
fn as_extent(c: &Ctx, e: &[u8]) -> Option<(u64, u64)> {
    let raw_len = u16_at(e, 4);
    let len = if raw_len > 32768 {
        raw_len - 32768
    } else {
        raw_len
    };
    let start = u16_at(e, 6) << 32 | u32_at(e, 8);
    let l = u32_at(e, 0);
    // Block 0 is never data (libext2fs rejects it even where it is
    // inside the filesystem, on 4 KiB blocks).
    (start != 0 && c.valid_range(start, len)).then_some((l, l + len))
}

/// The child block entry `e` names when read as an index entry.
fn as_index(c: &Ctx, e: &[u8]) -> Option<u64> {
    let child = u16_at(e, 8) << 32 | u32_at(e, 4);
    (child != 0 && c.valid_range(child, 1)).then_some(child)
}

/// Whether `node` reads as a node `depth` levels above the leaves: its
/// entries in logical order, each an extent inside the filesystem (depth
/// 0) or naming a block inside it (above). With `children`, each child is
/// read and must carry an extent header whose entries read as one level
/// down (not deeper). Its stored `eh_depth` is not trusted.
fn fits(c: &Ctx, node: &[u8], depth: u16, children: bool) -> bool {
    let Some(n) = entry_count(node) else {
        return false;
    };
    if n == 0 {
        return depth == 0;
    }
    let mut last = 0u64;
    for i in 0..n {
        let Some(e) = entry(node, i) else {
            return false;
        };
        let l = u32_at(e, 0);
        if l < last {
            return false;
        }
        if depth == 0 {
            match as_extent(c, e) {
                Some((_, end)) => last = end,
                None => return false,
            }
            continue;
        }
        last = l;
        let Some(child) = as_index(c, e) else {
            return false;
        };
        if children {
            let Some(buf) = read(c, child) else {
                return false;
            };
            if !fits(c, &buf, depth - 1, false) {
                return false;
            }
        }
    }
    true
}

fn read(c: &Ctx, b: u64) -> Option<Vec<u8>> {
    let bs = c.geo().block_size as usize;
    let mut buf = vec![0u8; bs];
    c.fs().device().read_at(&mut buf, b * bs as u64).ok()?;
    Some(buf)
}

/// The depth a root (`i_block`) must have when its stored `eh_depth`
/// contradicts its entries and exactly one other depth fits; None when the
/// stored depth stands (or nothing better is known).
#[inline]
pub(crate) fn root_depth(c: &Ctx, root: &[u8]) -> Option<u16> {
    let n = entry_count(root)?;
    // An empty leaf root (every empty file's) fits as it is: the test in
    // `judged_depth` says so too, by way of calls made for most inodes.
    if n == 0 && stored(root) == 0 {
        return None;
    }
    judged_depth(c, root)
}

/// [`root_depth`] of a root that reads as a node.
#[inline(never)]
fn judged_depth(c: &Ctx, root: &[u8]) -> Option<u16> {
    let stored = le16(root, 6);
    if stored <= MAX_EXTENT_DEPTH && stored_fits(c, root, stored) {
        return None;
    }
    let fitting: Vec<u16> = (0..=MAX_EXTENT_DEPTH)
        .filter(|&d| fits(c, root, d, true))
        .collect();
    match fitting.as_slice() {
        // The stored depth fits once its children are read by level (a
        // child's own depth is what is wrong, if anything).
        [d] if *d != stored => Some(*d),
        _ => None,
    }
}

/// The cheap test of the stored depth: entries that read as it says, and
/// the first child (the block the walk reads next anyway) one level down
/// by its own header too. A stored depth that passes is not questioned.
fn stored_fits(c: &Ctx, root: &[u8], depth: u16) -> bool {
    if !fits(c, root, depth, false) {
        return false;
    }
    if depth == 0 {
        return true;
    }
    let Some(first) = entry(root, 0).and_then(|e| as_index(c, e)) else {
        return false;
    };
    read(c, first)
        .is_some_and(|b| entry_count(&b).is_some() && u16_at(&b, 6) == u64::from(depth - 1))
}

/// Parses a node as a node of `depth` (its stored `eh_depth` replaced in
/// `buf`, which the caller owns a copy of): what libext2fs does by
/// walking levels from the root.
pub(crate) fn parse_at(
    buf: &mut [u8],
    depth: u16,
) -> Result<ExtentNode<'_>, ext4r_format::FormatError> {
    if let Some(x) = buf.get_mut(6..8) {
        x.copy_from_slice(&depth.to_le_bytes());
    }
    ExtentNode::parse(buf)
}

/// The stored `eh_depth` of a node's bytes.
pub(crate) fn stored(buf: &[u8]) -> u16 {
    le16(buf, 6)
}
