//! The resize inode (inode 7) as mke2fs lays it out
//! (`ext2fs_create_resize_inode`): a double-indirect block whose entries
//! name the primary reserved GDT blocks, each of which lists its copies in
//! the backup groups. Shared by mkfs and by fsck's "Resize inode not
//! valid.  Recreate".

use super::blockmap::ptr;
use super::objects::InodeBuf;
use ext4r_format::geometry::Geometry;
use ext4r_format::{blockmap, num};

/// Inode 7's record and the blocks it owns, ready to write.
pub struct ResizeInode {
    /// The inode record (`inode_size` bytes, checksum not set).
    pub inode: Vec<u8>,
    /// (block number, contents): the double-indirect block and the
    /// primary reserved GDT blocks.
    pub blocks: Vec<(u64, Vec<u8>)>,
}

/// The block holding the primary superblock (block 1 for 1 KiB blocks,
/// also under bigalloc where `s_first_data_block` is 0).
fn superblock_block(geo: &Geometry) -> u64 {
    if geo.block_size == 1024 && geo.first_data_block == 0 {
        1
    } else {
        geo.first_data_block
    }
}

/// Where libext2fs starts looking for the double-indirect block: past the
/// superblock, descriptors, reserved GDT blocks, bitmaps and inode table
/// of group 0 as a non-flex layout would place them.
#[must_use]
pub fn dind_goal(geo: &Geometry) -> u64 {
    superblock_block(geo)
        + u64::from(geo.desc_blocks())
        + u64::from(geo.reserved_gdt_blocks)
        + 2
        + u64::from(geo.inode_blocks_per_group())
}

/// Inode 7 with its double-indirect block at `dind`, created at `now`,
/// with all its blocks in memory (for a repair; mkfs streams them with
/// [`emit_blocks`]).
#[must_use]
pub fn build(geo: &Geometry, inode_size: usize, dind: u64, now: i64) -> ResizeInode {
    let mut blocks = Vec::new();
    let total = emit_blocks(geo, dind, |b, data| {
        blocks.push((b, data));
        Ok::<(), std::convert::Infallible>(())
    });
    let total = match total {
        Ok(t) => t,
        Err(never) => match never {},
    };
    ResizeInode {
        inode: inode_record(geo, inode_size, dind, now, total),
        blocks,
    }
}

/// Hands each block of the resize inode to `emit` (the primary reserved
/// GDT blocks, then the double-indirect block), one at a time so that a
/// large reserve (1024 blocks on a big filesystem) is never held at once.
/// Returns the number of blocks the inode accounts for.
///
/// # Errors
/// Whatever `emit` returns.
pub fn emit_blocks<E>(
    geo: &Geometry,
    dind: u64,
    mut emit: impl FnMut(u64, Vec<u8>) -> Result<(), E>,
) -> Result<u64, E> {
    let bs = geo.block_size as usize;
    let apb = (bs / 4) as u64;
    let sb_blk = superblock_block(geo);
    let desc_blocks = u64::from(geo.desc_blocks());
    let backups: Vec<u32> = geo.backup_groups().collect();
    let mut dind_buf = vec![0u8; bs];
    let mut total = 1u64;
    for r in 0..u64::from(geo.reserved_gdt_blocks) {
        let gdt_blk = sb_blk + 1 + desc_blocks + r;
        let off = num::index((desc_blocks + r) % apb);
        blockmap::set_word(&mut dind_buf, off, ptr(gdt_blk));
        total += 1;
        let mut ind = vec![0u8; bs];
        // An indirect block holds at most `apb` backups (more groups than
        // that need meta_bg, which excludes the resize inode).
        for (i, g) in backups.iter().enumerate().take(apb as usize) {
            blockmap::set_word(
                &mut ind,
                i,
                ptr(gdt_blk + u64::from(*g) * geo.blocks_per_group),
            );
            total += 1;
        }
        emit(gdt_blk, ind)?;
    }
    emit(dind, dind_buf)?;
    Ok(total)
}

/// Inode 7's record for a double-indirect block at `dind` and `total`
/// blocks (from [`emit_blocks`]), created at `now`; checksum not set.
#[must_use]
pub fn inode_record(geo: &Geometry, inode_size: usize, dind: u64, now: i64, total: u64) -> Vec<u8> {
    let bs = geo.block_size as usize;
    let apb = (bs / 4) as u64;
    let mut ri = InodeBuf::new_file(inode_size, 0o100600, 1, now);
    ri.set_size((apb * apb + apb + 12) * bs as u64);
    // i_blocks counts a cluster per allocation, as libext2fs does.
    ri.set_sectors(total * geo.cluster_ratio() * (bs as u64 / 512));
    let mut words = [0u32; 15];
    words[blockmap::DIND_BLOCK] = ptr(dind);
    ri.set_block_words(&words);
    ri.bytes
}
