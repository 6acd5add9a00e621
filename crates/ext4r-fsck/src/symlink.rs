//! Whether a symlink is sound, by e2fsck's rule
//! (`e2fsck_pass1_check_symlink`): a size below 4 GiB and not zero, no
//! htree flag; a target shorter than 60 bytes lives in `i_block` (no
//! extents flag), a longer one in exactly one block (logical 0; one
//! extent of depth 0, or `i_block[0]` alone); the target's length (up to
//! the first NUL, or the length prefix when encrypted) is the size and
//! leaves room in its buffer. A symlink that fails is cleared by the
//! repair, as e2fsck does; its directory entry goes in the next round.

use ext4r_format::extent::ExtentNode;
use ext4r_format::inode::{Inode, InodeFlags, I_BLOCK_SIZE};

use crate::ctx::Ctx;

/// Whether the symlink `inode` is sound.
pub(crate) fn valid(c: &Ctx, ino: u32, inode: &Inode) -> bool {
    let flags = inode.flags();
    let size = inode.size();
    if size == 0 || size > u64::from(u32::MAX) || flags.contains(InodeFlags::INDEX) {
        return false;
    }
    if flags.contains(InodeFlags::INLINE_DATA) {
        // i_block and the system.data value hold the target.
        if flags.contains(InodeFlags::EXTENTS) {
            return false;
        }
        return inline_size(c, ino).is_some_and(|n| n == size);
    }
    let fast = size < I_BLOCK_SIZE as u64;
    let buf: Vec<u8> = if fast {
        if flags.contains(InodeFlags::EXTENTS) {
            return false;
        }
        inode.i_block.to_vec()
    } else {
        let Some(blk) = target_block(inode) else {
            return false;
        };
        let Some(b) = c.read_block(blk) else {
            return false;
        };
        b
    };
    let len = if flags.contains(InodeFlags::ENCRYPT) {
        usize::from(u16::from_le_bytes([buf[0], buf[1]])) + 2
    } else {
        buf.iter().position(|&x| x == 0).unwrap_or(buf.len())
    };
    len < buf.len() && len as u64 == size
}

/// 60 bytes of `i_block` plus the `system.data` value; None without it.
fn inline_size(c: &Ctx, ino: u32) -> Option<u64> {
    let info = c.fs().inode(ext4r_format::InodeNr(ino)).ok()?;
    let xs = c.fs().xattrs(&info).ok()?;
    let data = xs.iter().find(|x| x.name == b"system.data")?;
    Some(I_BLOCK_SIZE as u64 + data.value.len() as u64)
}

/// The one block holding a long target, if the mapping is that simple.
fn target_block(inode: &Inode) -> Option<u64> {
    if inode.flags().contains(InodeFlags::EXTENTS) {
        let root = inode.i_block;
        let node = ExtentNode::parse(&root).ok()?;
        if node.depth() != 0 {
            return None;
        }
        let exts = node.extents()?;
        match exts {
            [e] if e.ee_block.get() == 0 && e.len() == 1 => Some(e.start().0),
            _ => None,
        }
    } else {
        let w = inode.block_words();
        w[1..].iter().all(|&x| x == 0).then_some(u64::from(w[0]))
    }
}
