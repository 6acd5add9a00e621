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

use ext4r_format::dir::leaf;
use ext4r_format::htree::{dx_countlimit_mut, dx_countlimit_offset, DX_ENTRY_SIZE, DX_TAIL_SIZE};
use ext4r_format::num;
use ext4r_txn::csum::{BlockKind, Checksums};

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

/// Rewrites `block` (one directory block, 1 KiB to 64 KiB) for `mode`.
pub(super) fn rewrite(block: &mut [u8], mode: Mode<'_>) -> Edit {
    if block.len() < 1024 {
        return Edit::NeedsFsck;
    }
    if mode.htree {
        if let Some(off) = dx_countlimit_offset(block) {
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
    let room = block.len() - off;
    let Some(cl) = dx_countlimit_mut(block, off) else {
        return Edit::NeedsFsck;
    };
    let (limit, count) = (cl.limit.get(), cl.count.get());
    let Some(csum) = csum else {
        let max = num::sat_u16(room / DX_ENTRY_SIZE); // a block / 8 <= 8192
        if limit == max {
            return Edit::Unchanged;
        }
        cl.limit.set(max);
        return Edit::Changed;
    };
    if count == limit {
        return Edit::NeedsFsck;
    }
    cl.limit
        .set(num::sat_u16((room - DX_TAIL_SIZE) / DX_ENTRY_SIZE));
    stamp(block, csum, true)
}

fn rewrite_leaf(block: &mut [u8], csum: Csum<'_>) -> Edit {
    let Some(csum) = csum else {
        return match leaf::remove_tail(block) {
            Ok(true) => Edit::Changed,
            Ok(false) => Edit::Unchanged,
            Err(_) => Edit::NeedsFsck,
        };
    };
    match leaf::add_tail(block) {
        Ok(()) => stamp(block, csum, false),
        Err(_) => Edit::NeedsFsck,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r_format::dir::{DirBlockBuilder, DirEntryTail, DIR_TAIL_SIZE as TAIL};
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
