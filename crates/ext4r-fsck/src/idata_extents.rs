//! An inode with both the inline-data and the extents flag, resolved as
//! e2fsck's `fix_inline_data_extents_file`: a special file loses both; an
//! `i_block` holding an extent header keeps extents; a size that fits
//! inline keeps inline data; an `i_block` of valid block numbers becomes
//! a block map; anything else is cleared.

use crate::codes::ProblemCode;
use ext4r::fs::FileKind;
use ext4r_format::extent::ExtentNode;
use ext4r_format::features::Incompat;
use ext4r_format::inode::{Inode, InodeFlags};

use crate::ctx::Ctx;
use crate::fix::Fix;

/// The problem and repair for inode `ino` with both flags (None when
/// neither feature is on: the usual checks judge it), and the flags the
/// repair leaves.
///
/// An inode without both flags (all but a damaged few) is answered
/// inline: pass 1 asks for every inode.
#[inline]
pub(crate) fn resolve(
    c: &Ctx,
    ino: u32,
    inode: &Inode,
    kind: FileKind,
    record_len: usize,
) -> Option<(ProblemCode, String, Fix, InodeFlags)> {
    if !inode
        .flags()
        .contains(InodeFlags::INLINE_DATA | InodeFlags::EXTENTS)
    {
        return None;
    }
    resolve_both(c, ino, inode, kind, record_len)
}

/// [`resolve`] for an inode with both flags.
#[inline(never)]
fn resolve_both(
    c: &Ctx,
    ino: u32,
    inode: &Inode,
    kind: FileKind,
    record_len: usize,
) -> Option<(ProblemCode, String, Fix, InodeFlags)> {
    let both = InodeFlags::INLINE_DATA | InodeFlags::EXTENTS;
    let flags = inode.flags();
    if !flags.contains(both)
        || !(c.sb().has_incompat(Incompat::EXTENTS) || c.sb().has_incompat(Incompat::INLINE_DATA))
    {
        return None;
    }
    let clear = |f: InodeFlags| Fix::InodeClearFlags(ino, f.bits());
    if matches!(
        kind,
        FileKind::CharDevice | FileKind::BlockDevice | FileKind::Fifo | FileKind::Socket
    ) {
        return Some((
            ProblemCode::PR_1_SPECIAL_EXTENTS_IDATA,
            format!(
                "Special (device/socket/fifo) file (inode {ino}) has extents\nor inline-data flag set."
            ),
            clear(both),
            flags - both,
        ));
    }
    let root = inode.i_block;
    if ExtentNode::parse(&root).is_ok() {
        return Some((
            ProblemCode::PR_1_CLEAR_INLINE_DATA_FOR_EXTENT,
            format!("Inode {ino} has extent header but inline data flag is set."),
            clear(InodeFlags::INLINE_DATA),
            flags - InodeFlags::INLINE_DATA,
        ));
    }
    let max_ea = if record_len > 128 {
        record_len.saturating_sub(128 + usize::from(inode.i_extra_isize.get()))
    } else {
        0
    };
    if inode.size() < (60 + max_ea) as u64 {
        return Some((
            ProblemCode::PR_1_CLEAR_EXTENT_FOR_INLINE_DATA,
            format!("Inode {ino} seems to have inline data but extent flag is set."),
            clear(InodeFlags::EXTENTS),
            flags - InodeFlags::EXTENTS,
        ));
    }
    let map_ok = inode
        .block_words()
        .iter()
        .all(|&b| b == 0 || c.valid_range(u64::from(b), 1));
    if map_ok {
        return Some((
            ProblemCode::PR_1_CLEAR_EXTENT_INLINE_DATA_FLAGS,
            format!("Inode {ino} seems to have block map but inline data and extent flags set."),
            clear(both),
            flags - both,
        ));
    }
    Some((
        ProblemCode::PR_1_CLEAR_EXTENT_INLINE_DATA_INODE,
        format!("Inode {ino} has inline data and extent flags set but i_block contains junk."),
        Fix::ClearInode(ino),
        flags,
    ))
}
