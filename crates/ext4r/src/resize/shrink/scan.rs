//! One pass over the inode tables: which inodes hold blocks in the part
//! that goes (file data, mapping blocks, extended attribute blocks), and
//! which inodes lie past the new inode count.

use super::Mover;
use crate::error::Error;
use crate::resize::error::Result;
use crate::resize::geometry::Shape;
use ext4r_format::features::Incompat;
use ext4r_format::group_desc::BG_INODE_UNINIT;
use ext4r_format::inode::{ino, mode, Inode, InodeFlags};
use ext4r_format::num;
use ext4r_txn::map;
use std::collections::BTreeMap;

/// Inode table blocks read at once.
const CHUNK_BLOCKS: u64 = 256;

/// What the scan found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Inodes with data or mapping blocks to move, in inode order.
    pub movers: Vec<u32>,
    /// Blocks to move of each mover (for a shortfall's estimate).
    pub mover_blocks: Vec<u64>,
    /// Extended attribute blocks to move, with the inodes that share each.
    pub xattr: BTreeMap<u64, Vec<u32>>,
    /// Why the shrink cannot go on, when it cannot.
    pub refused: Option<String>,
}

impl Found {
    /// Blocks still to move after mover `ino` (included).
    pub(crate) fn remaining_after(&self, ino: u32) -> u64 {
        let i = self.movers.partition_point(|&m| m < ino);
        self.mover_blocks[i.min(self.mover_blocks.len())..]
            .iter()
            .sum()
    }
}

/// Whether `inode` keeps its target in `i_block` (the kernel's
/// `ext4_inode_is_fast_symlink`: no blocks but its attribute block's).
pub(crate) fn fast_symlink(inode: &Inode, huge: bool, bs: u32, cluster: u64) -> bool {
    if !inode.is_symlink() || inode.flags().contains(InodeFlags::INLINE_DATA) {
        return false;
    }
    let acl = if inode.i_file_acl_lo.get() != 0 || inode.l_i_file_acl_high.get() != 0 {
        cluster / 512
    } else {
        0
    };
    inode.blocks_count(huge, bs).saturating_sub(acl) == 0
}

/// Whether inode `inode` maps blocks: regular files, directories, slow
/// symlinks (device nodes, FIFOs and sockets keep other things in
/// `i_block`).
pub(crate) fn maps_blocks(inode: &Inode, huge: bool, bs: u32, cluster: u64) -> bool {
    match inode.file_type() {
        mode::S_IFREG | mode::S_IFDIR => !inode.flags().contains(InodeFlags::INLINE_DATA),
        mode::S_IFLNK => !fast_symlink(inode, huge, bs, cluster),
        _ => false,
    }
}

/// Calls `f(ino, record)` for every inode in use, in order, reading the
/// inode tables in large runs and skipping what uninit_bg says is unused.
pub(crate) fn each_inode(m: &Mover<'_>, mut f: impl FnMut(u32, &[u8]) -> Result<()>) -> Result<()> {
    let t = &m.t;
    let geo = t.geometry().clone();
    let wide = t.groups().wide();
    let csum = t.groups().gdt_csum();
    let ipg = geo.inodes_per_group;
    let isz = geo.inode_size as usize;
    let bs = u64::from(geo.block_size);
    let per_block = num::sat_u32((num::index(bs) / isz).max(1)); // <= 65536 / 128
    let mut buf = Vec::new();
    for g in 0..geo.group_count {
        let d = *t.groups().desc(g)?;
        if csum && d.flags() & BG_INODE_UNINIT != 0 {
            continue;
        }
        if d.free_inodes_count(wide) == ipg && g != 0 {
            continue;
        }
        let used = if csum {
            ipg.saturating_sub(d.itable_unused(wide))
        } else {
            ipg
        };
        if used == 0 {
            continue;
        }
        let map = t.groups().inode_map(g)?;
        let table = d.inode_table(wide);
        let blocks = u64::from(used.div_ceil(per_block));
        let mut k = 0u64;
        while k < blocks {
            let n = CHUNK_BLOCKS.min(blocks - k);
            buf.resize(num::index(n * bs), 0);
            t.read_blocks(table + k, &mut buf)?;
            // k < blocks, the table's size, so k * per_block < ipg.
            let first = num::sat_u32(k * u64::from(per_block));
            for (j, rec) in (0u32..).zip(buf.chunks_exact(isz)) {
                let i = first + j;
                if i >= used {
                    break;
                }
                if map.get(i) {
                    f(g * ipg + i + 1, rec)?;
                }
            }
            k += n;
        }
    }
    Ok(())
}

/// Scans every inode in use for what must move.
pub(crate) fn scan(m: &Mover<'_>, shape: &Shape) -> Result<Found> {
    let sb = m.t.superblock().clone();
    let huge = sb.has_ro_compat(ext4r_format::features::RoCompat::HUGE_FILE);
    let wide = sb.has_incompat(Incompat::BIT64);
    let geo = shape.old.clone();
    let bs = geo.block_size;
    let cluster = u64::from(bs) << geo.cluster_bits;
    let journal = sb.s_journal_inum.get();
    let mut found = Found::default();
    each_inode(m, |n, rec| {
        if n == ino::RESIZE || (journal != 0 && n == journal) {
            // Rebuilt by the switch; moved on its own first.
            return Ok(());
        }
        let inode = Inode::parse(rec).map_err(|e| Error::corrupt(format!("inode {n}"), e))?;
        if inode.links_count() == 0 && n >= sb.first_ino() {
            return Ok(());
        }
        let acl = inode.file_acl(wide).0;
        if acl != 0 && m.in_region(acl) {
            found.xattr.entry(acl).or_default().push(n);
        }
        if !maps_blocks(&inode, huge, bs, cluster) {
            return Ok(());
        }
        let fast = inode.is_symlink() && fast_symlink(&inode, huge, bs, cluster);
        let (runs, nodes) = map::runs_and_nodes(&m.t, n, &inode, fast)?;
        let mut count = 0u64;
        for r in &runs {
            count += m
                .region_part(r.physical, r.len)
                .iter()
                .map(|&(s, e)| e - s)
                .sum::<u64>();
        }
        count += nodes.iter().filter(|&&b| m.in_region(b)).count() as u64;
        if count > 0 {
            if n == ino::BAD {
                found.refused =
                    Some("bad blocks are listed in the part of the filesystem that goes".into());
                return Ok(());
            }
            found.movers.push(n);
            found.mover_blocks.push(count);
        }
        Ok(())
    })?;
    Ok(found)
}
