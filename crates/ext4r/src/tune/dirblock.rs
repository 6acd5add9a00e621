//! One directory block made fit for a checksum change, as tune2fs's
//! `rewrite_dir_block`:
//!
//! - turning metadata_csum on: a leaf gets the 12-byte checksum tail, taken
//!   from the slack of its last entry (or its last entry already is an empty
//!   12-byte entry, which becomes the tail); an htree root or node gets its
//!   `limit` lowered to leave room for the `dx_tail`; then the checksum;
//! - turning it off: a trailing tail is merged into the entry before it and
//!   an htree `limit` is raised to the whole block.
//!
//! A block with no room for the tail (or a full htree node) is left alone
//! and the caller asks for `e2fsck -fD`, as tune2fs does. Unlike tune2fs,
//! which aborts mid-rewrite, a block whose entries do not tile it exactly
//! is treated the same way: left alone for fsck.

use ext4r_format::dir::{rec_len_from_disk, rec_len_to_disk};
use ext4r_txn::csum::{BlockKind, Checksums};

/// Size of the leaf checksum tail and of one dx entry / the dx tail.
const TAIL: usize = 12;
const DX_ENTRY: usize = 8;
const DX_TAIL: usize = 8;

/// What happened to a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Edit {
    /// Nothing to write.
    Unchanged,
    /// The block changed and must be written.
    Changed,
    /// Left alone: it needs `e2fsck -fD` (no room for the tail, a full
    /// htree node, or entries that do not tile the block).
    NeedsFsck,
}

/// How to rewrite.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mode<'a> {
    /// The directory is indexed and stays indexed (`INDEX_FL` and dir_index).
    pub htree: bool,
    /// metadata_csum after the change: the checksums, the directory inode
    /// and its generation, and the block's number.
    pub csum: Option<(&'a Checksums, u32, u32, u64)>,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// libext2fs's `__get_dx_countlimit`: where the count/limit pair of an
/// htree root or node is, if the block looks like one.
fn dx_count_offset(block: &[u8]) -> Option<usize> {
    let bs = u32::try_from(block.len()).ok()?;
    let first = rec_len_from_disk(le16(block, 4), bs) as usize;
    let off = if first == block.len() && le16(block, 6) == 0 {
        8
    } else if first == 12 {
        let second = rec_len_from_disk(le16(block, 16), bs) as usize;
        if second != block.len() - 12 || le32(block, 24) != 0 || block[29] != 8 {
            return None;
        }
        32
    } else {
        return None;
    };
    let sane = (block.len() - off) / DX_ENTRY;
    let (limit, count) = (le16(block, off), le16(block, off + 2));
    (usize::from(limit) <= sane && usize::from(count) <= sane).then_some(off)
}

/// Rewrites `block` (one directory block, 1 KiB to 64 KiB) for `mode`.
pub(super) fn rewrite(block: &mut [u8], mode: Mode<'_>) -> Edit {
    if block.len() < 1024 {
        return Edit::NeedsFsck;
    }
    if mode.htree {
        if let Some(off) = dx_count_offset(block) {
            return rewrite_dx(block, off, mode.csum);
        }
    }
    rewrite_leaf(block, mode.csum)
}

/// What [`Mode::csum`] holds.
type Csum<'a> = Option<(&'a Checksums, u32, u32, u64)>;

/// Stamps the block as `kind` of the directory in `csum`.
fn stamp(block: &mut [u8], csum: (&Checksums, u32, u32, u64), index: bool) -> Edit {
    let (cs, ino, generation, nr) = csum;
    let kind = if index {
        BlockKind::DirIndex { ino, generation }
    } else {
        BlockKind::DirLeaf { ino, generation }
    };
    match cs.stamp_block(kind, nr, block) {
        Ok(()) => Edit::Changed,
        Err(_) => Edit::NeedsFsck,
    }
}

fn rewrite_dx(block: &mut [u8], off: usize, csum: Csum<'_>) -> Edit {
    let (limit, count) = (le16(block, off), le16(block, off + 2));
    let Some(csum) = csum else {
        let max = ((block.len() - off) / DX_ENTRY) as u16;
        if limit == max {
            return Edit::Unchanged;
        }
        block[off..off + 2].copy_from_slice(&max.to_le_bytes());
        return Edit::Changed;
    };
    if count == limit {
        return Edit::NeedsFsck;
    }
    let max = ((block.len() - off - DX_TAIL) / DX_ENTRY) as u16;
    block[off..off + 2].copy_from_slice(&max.to_le_bytes());
    stamp(block, csum, true)
}

/// The offsets of the last two entries, when the entries tile the block.
fn last_two(block: &[u8]) -> Option<(Option<usize>, usize)> {
    let bs = u32::try_from(block.len()).ok()?;
    let (mut pos, mut prev, mut last) = (0usize, None, None);
    while pos < block.len() {
        if pos + 8 > block.len() {
            return None;
        }
        let len = rec_len_from_disk(le16(block, pos + 4), bs) as usize;
        if len < 8 || len % 4 != 0 || pos + len > block.len() {
            return None;
        }
        prev = last;
        last = Some(pos);
        pos += len;
    }
    Some((prev, last?))
}

fn set_rec_len(block: &mut [u8], at: usize, len: usize) -> bool {
    let bs = block.len() as u32;
    match rec_len_to_disk(len as u32, bs) {
        Ok(raw) => {
            block[at + 4..at + 6].copy_from_slice(&raw.to_le_bytes());
            true
        }
        Err(_) => false,
    }
}

fn rewrite_leaf(block: &mut [u8], csum: Csum<'_>) -> Edit {
    let Some((prev, last)) = last_two(block) else {
        return Edit::NeedsFsck;
    };
    let bs = block.len() as u32;
    let rec_len = rec_len_from_disk(le16(block, last + 4), bs) as usize;
    let inode = le32(block, last);
    let name_len = usize::from(block[last + 6]);
    let Some(csum) = csum else {
        // An empty 12-byte last entry is a tail: give its room back.
        let Some(prev) = prev else {
            return Edit::Unchanged;
        };
        if inode != 0 || name_len != 0 || rec_len != TAIL {
            return Edit::Unchanged;
        }
        let prev_len = rec_len_from_disk(le16(block, prev + 4), bs) as usize;
        return if set_rec_len(block, prev, prev_len + TAIL) {
            Edit::Changed
        } else {
            Edit::NeedsFsck
        };
    };
    let end = block.len();
    if inode == 0 && rec_len == TAIL {
        // Already shaped like a tail: mark it as one.
        block[last + 6] = 0;
        block[last + 7] = 0xDE;
    } else {
        let name = name_len.next_multiple_of(4);
        if rec_len <= 8 + name + TAIL || !set_rec_len(block, last, rec_len - TAIL) {
            return Edit::NeedsFsck;
        }
        let t = &mut block[end - TAIL..];
        t.fill(0);
        t[4..6].copy_from_slice(&(TAIL as u16).to_le_bytes());
        t[7] = 0xDE;
    }
    stamp(block, csum, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r_format::dir::{DirBlockBuilder, DirEntryTail};
    use ext4r_format::features::RoCompat;
    use ext4r_format::superblock::Superblock;
    use ext4r_format::InodeNr;

    /// The checksums of a metadata_csum filesystem.
    fn csums() -> Checksums {
        let mut sb = Superblock::zeroed();
        sb.s_feature_ro_compat.set(RoCompat::METADATA_CSUM.bits());
        sb.s_uuid = [7; 16];
        Checksums::new(&sb)
    }

    fn leaf(with_tail: bool) -> Vec<u8> {
        let mut b = DirBlockBuilder::new(1024, with_tail).unwrap();
        b.push(InodeNr(2), b".", 2).unwrap();
        b.push(InodeNr(2), b"..", 2).unwrap();
        b.push(InodeNr(12), b"file", 1).unwrap();
        b.finish().unwrap()
    }

    #[test]
    fn tail_added_and_removed() {
        let plain = leaf(false);
        let mut b = plain.clone();
        let cs = csums();
        let on = Mode {
            htree: false,
            csum: Some((&cs, 12, 0, 100)),
        };
        assert_eq!(rewrite(&mut b, on), Edit::Changed);
        assert!(DirEntryTail::find(&b).is_some());
        let kind = BlockKind::DirLeaf {
            ino: 12,
            generation: 0,
        };
        assert!(cs.block_ok(kind, 100, &b));
        let off = Mode {
            htree: false,
            csum: None,
        };
        assert_eq!(rewrite(&mut b, off), Edit::Changed);
        // Back to the same entries; the old tail bytes stay as slack.
        assert_eq!(b[..1024 - TAIL], plain[..1024 - TAIL]);
        assert_eq!(rewrite(&mut b, off), Edit::Unchanged);
    }

    #[test]
    fn no_room_and_garbage_need_fsck() {
        // Two entries; the last one's 255-byte name leaves no slack.
        let mut b = vec![0u8; 1024];
        b[..4].copy_from_slice(&2u32.to_le_bytes());
        b[4..6].copy_from_slice(&760u16.to_le_bytes());
        b[6] = 1;
        b[8] = b'.';
        b[760..764].copy_from_slice(&12u32.to_le_bytes());
        b[764..766].copy_from_slice(&264u16.to_le_bytes());
        b[766] = 255;
        let cs = csums();
        let mode = Mode {
            htree: false,
            csum: Some((&cs, 2, 0, 5)),
        };
        assert_eq!(rewrite(&mut b.clone(), mode), Edit::NeedsFsck);
        b[4] = 3;
        assert_eq!(rewrite(&mut b, mode), Edit::NeedsFsck);
    }
}
