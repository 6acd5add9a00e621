//! A device, FIFO or socket whose first block reads as a directory's
//! (`.` naming itself, then `..`) is taken for a directory with a damaged
//! mode, as e2fsck's `check_is_really_dir` does.

use ext4r_format::extent::ExtentNode;
use ext4r_format::inode::{Inode, InodeFlags};

use crate::ctx::Ctx;

/// The inline case: a size that is a multiple of 4 (60 and the
/// system.data value), a sane parent and a sane first record.
fn inline_looks_like_dir(c: &Ctx, ino: u32, inode: &Inode) -> bool {
    let Ok(rec) = c.fs().inode_record(ext4r_format::InodeNr(ino)) else {
        return false;
    };
    let Some((_, n)) = crate::inline_dir::data_range(&rec) else {
        return false;
    };
    if (60 + n) % 4 != 0 {
        return false;
    }
    let b = &inode.i_block;
    let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let count = c.sb().s_inodes_count.get();
    let first = c.sb().first_ino();
    let ok_ino = |i: u32| i < count && (i >= first || i == ext4r_format::inode::ino::ROOT);
    let (parent, de_ino) = (word(0), word(4));
    let rec_len = usize::from(u16::from_le_bytes([b[8], b[9]]));
    ok_ino(parent) && (de_ino == 0 || (de_ino < count && de_ino >= first)) && rec_len <= 56
}

/// Whether special inode `ino` looks like a directory.
pub(crate) fn looks_like_dir(c: &Ctx, ino: u32, inode: &Inode) -> bool {
    let w = inode.block_words();
    if w[0] == 0 {
        return false;
    }
    if inode.flags().contains(InodeFlags::INLINE_DATA)
        && c.sb()
            .has_incompat(ext4r_format::features::Incompat::INLINE_DATA)
    {
        return inline_looks_like_dir(c, ino, inode);
    }
    let mut not_device = false;
    let blk = if inode.flags().contains(InodeFlags::EXTENTS) {
        let root = inode.i_block;
        let Some(first) = ExtentNode::parse(&root)
            .ok()
            .filter(|n| n.depth() == 0)
            .and_then(|n| n.extents().and_then(|e| e.first().copied()))
        else {
            return false;
        };
        if first.ee_block.get() != 0 {
            return false;
        }
        not_device = true;
        first.start().0
    } else {
        for (i, &b) in w.iter().enumerate() {
            if b == 0 {
                continue;
            }
            if i >= 4 {
                not_device = true;
            }
            if !c.valid_range(u64::from(b), 1) {
                return false;
            }
        }
        u64::from(w[0])
    };
    if !c.valid_range(blk, 1) {
        return false;
    }
    let is_dev = matches!(inode.mode() & 0xF000, 0x2000 | 0x6000);
    if is_dev && inode.links_count() == 1 && !not_device {
        return false;
    }
    let bs = c.geo().block_size as usize;
    let mut buf = vec![0u8; bs];
    if c.fs().device().read_at(&mut buf, blk * bs as u64).is_err() {
        return false;
    }
    let rec = |off: usize| usize::from(u16::from_le_bytes([buf[off + 4], buf[off + 5]]));
    let ino_at =
        |off: usize| u32::from_le_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]]);
    let r0 = rec(0);
    if buf[6] != 1 || buf[8] != b'.' || ino_at(0) != ino || r0 < 12 || r0 % 4 != 0 || r0 >= bs - 12
    {
        return false;
    }
    let r1 = rec(r0);
    buf[r0 + 6] == 2 && &buf[r0 + 8..r0 + 10] == b".." && r1 >= 12 && r1 % 4 == 0
}
