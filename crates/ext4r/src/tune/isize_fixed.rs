//! The blocks that stay where they are while the inode tables grow (see
//! [`super::inode_size`]): every group's superblock and descriptor copies
//! (reserved GDT blocks included), bitmaps and old inode table, the MMP
//! block, and the blocks of the inodes nothing may move: the reserved ones
//! (bad blocks, the resize inode, the journal; the root directory is
//! reserved too but an ordinary directory), the journal and the orphan
//! file (whose block numbers the superblock and the kernel keep
//! elsewhere). A new table's place never holds one of them.

use crate::error::Result;
use crate::meta::Meta;
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::inode::Inode;
use ext4r_format::superblock::Superblock;
use ext4r_txn::alloc::UsedBlocks;

/// The blocks that cannot move.
pub(super) fn fixed_blocks(meta: &Meta, sb: &Superblock) -> Result<UsedBlocks> {
    let geo = &meta.geo;
    let mut fixed = UsedBlocks::new(geo.first_data_block, geo.blocks_count, 1);
    let ibpg = u64::from(geo.inode_blocks_per_group());
    for (g, d) in (0u32..).zip(meta.descs().iter()) {
        let m = geo.group_meta(g);
        if let Some(b) = m.super_block {
            fixed.mark(b, 1);
        }
        if let Some((b, n)) = m.old_desc {
            fixed.mark(b, n);
        }
        if let Some(b) = m.meta_desc {
            fixed.mark(b, 1);
        }
        fixed.mark(d.block_bitmap(meta.wide), 1);
        fixed.mark(d.inode_bitmap(meta.wide), 1);
        fixed.mark(d.inode_table(meta.wide), ibpg);
    }
    if sb.has_incompat(Incompat::MMP) {
        let b = sb.s_mmp_block.get();
        if b != 0 && b < geo.blocks_count {
            fixed.mark(b, 1);
        }
    }
    let mut keep: Vec<u32> = (1..sb.s_first_ino.get()).filter(|&i| i != 2).collect();
    if !sb.has_incompat(Incompat::JOURNAL_DEV) {
        keep.push(sb.s_journal_inum.get());
    }
    if sb.has_compat(Compat::ORPHAN_FILE) {
        keep.push(sb.s_orphan_file_inum.get());
    }
    let count = sb.s_inodes_count.get();
    for ino in keep {
        if ino == 0 || ino > count {
            continue;
        }
        let rec = meta.read_inode(ino)?;
        let acl = Inode::parse(&rec).map_or(0, |i| u64::from(i.i_file_acl_lo.get()));
        if acl != 0 && acl < geo.blocks_count {
            fixed.mark(acl, 1);
        }
        if rec.iter().take(128).all(|&b| b == 0) {
            continue;
        }
        for b in meta.inode_blocks(ino, &rec)? {
            fixed.mark(b, 1);
        }
    }
    Ok(fixed)
}
