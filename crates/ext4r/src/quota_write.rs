//! Writing a quota file: e2fsck's `quota_write_inode` and tune2fs's
//! quota-file creation share it, as they share libquota. tune uses
//! `write_file` and `truncate_quota_inode` inside its own run (`-Q`,
//! `-O quota`); fsck calls [`rewrite_quota_file`] when the usage it
//! counted differs from the file's. The file's layout and block order
//! are mkfs's (`crate::mkfs::quota`).

use crate::device::BlockDevice;
use crate::error::Result;
use crate::meta::Meta;
use crate::mkfs::quota::{self, QuotaFile};
use crate::quota::Dquot;
use ext4r_format::features::Incompat;
use ext4r_format::inode::Inode;
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use std::sync::Arc;

/// `quota_inode_truncate` of a quota file: its blocks freed a cluster at
/// a time (`ext2fs_punch`), the base inode zeroed.
pub(crate) fn truncate_quota_inode(m: &mut Meta, ino: u32) -> Result<()> {
    let rec = m.read_inode(ino)?;
    let blocks = m.inode_blocks(ino, &rec)?;
    m.free_blocks_of(&blocks)?;
    m.clear_inode_base(ino)
}

/// `quota_inode_init_new` and the writes of `write_dquots`: inode `ino`
/// (its old file truncated first) made the quota file of `qtype` holding
/// `dquots`, its blocks allocated in the order mke2fs allocates them.
pub(crate) fn write_file(
    m: &mut Meta,
    sb: &Superblock,
    ino: u32,
    qtype: usize,
    dquots: &[Dquot],
    now: i64,
) -> Result<()> {
    // EXT2_I_SIZE: an old file of that inode is truncated.
    let size = {
        let r = m.read_inode(ino)?;
        Inode::parse(&r).map_or(0, |i| i.size())
    };
    if size != 0 {
        truncate_quota_inode(m, ino)?;
    }
    let extents = sb.has_incompat(Incompat::EXTENTS);
    let isz = usize::from(sb.inode_size());
    let bs = u64::from(m.geo.block_size);
    let ratio = m.geo.cluster_ratio();
    let file = QuotaFile::build(qtype, dquots);
    let blocks = quota::allocate(m, &file)?;
    for &(l, p) in &blocks.map {
        m.write_block(p, file.fs_block(l, num::index(bs)))?;
    }
    match quota::encode_inode(&file, &blocks, isz, bs, ratio, extents, now) {
        Ok(inode) => m.write_inode(ino, inode.bytes),
        // More extents than i_block holds, or blocks past the direct ones
        // (a rewrite of a file with many ids): the mapping it needs.
        Err(crate::Error::InvalidArgument(_)) => {
            let mut runs: Vec<ext4r_txn::map::Run> = Vec::new();
            for &(l, p) in &blocks.map {
                match runs.last_mut() {
                    Some(r) if r.logical + r.len == l && r.physical + r.len == p => r.len += 1,
                    _ => runs.push(ext4r_txn::map::Run {
                        logical: l,
                        physical: p,
                        len: 1,
                        unwritten: false,
                    }),
                }
            }
            let mut inode = quota::unmapped_inode(&file, isz, extents, now)?;
            let goal = runs.last().map_or(0, |r| r.physical + r.len);
            let used = m.store_mapping(ino, &mut inode.bytes, &runs, goal)?;
            inode.set_sectors((blocks.clusters + used) * ratio * (bs / 512));
            m.write_inode(ino, inode.bytes)
        }
        Err(e) => Err(e),
    }
}

/// e2fsck's `quota_write_inode` of one quota type: the file the
/// superblock names for `qtype` (0 user, 1 group, 2 project) written anew
/// holding `dquots` (ids ascending), its old blocks freed. The superblock
/// is written without its backups, as e2fsck writes it.
///
/// # Errors
/// [`crate::Error::InvalidArgument`] when the superblock names no file of
/// that type; I/O errors; [`crate::Error::Corrupt`] when the metadata does
/// not read or the old file's blocks cannot be mapped; no space.
pub fn rewrite_quota_file(
    dev: Arc<dyn BlockDevice>,
    qtype: usize,
    dquots: &[Dquot],
    now: i64,
) -> Result<()> {
    let mut buf = [0u8; ext4r_format::superblock::SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, ext4r_format::superblock::SUPERBLOCK_OFFSET)?;
    let mut sb = Superblock::parse(&buf).map_err(|e| crate::Error::corrupt("superblock", e))?;
    let ino = match qtype {
        0 => sb.s_usr_quota_inum.get(),
        1 => sb.s_grp_quota_inum.get(),
        _ => sb.s_prj_quota_inum.get(),
    };
    if ino == 0 || ino > sb.s_inodes_count.get() {
        return Err(crate::Error::InvalidArgument(format!(
            "no quota file of type {qtype} to rewrite"
        )));
    }
    let mut m = Meta::load(&dev, &sb)?;
    write_file(&mut m, &sb, ino, qtype, dquots, now)?;
    let table = m.flush(&mut sb)?;
    ext4r_txn::flush::flush_super(dev.as_ref(), &mut sb, Some(&table), now, true)?;
    Ok(())
}
