//! Where things are: groups, superblock backups, group descriptor blocks.
//!
//! The rules are the format's (Documentation/filesystems/ext4/overview.rst,
//! "Block Groups", "Meta Block Groups"): group `g` starts at
//! `s_first_data_block + g * s_blocks_per_group`; a group holds a superblock
//! copy when it is 0 or 1 or a power of 3, 5 or 7 under sparse_super, or one
//! of `s_backup_bgs` under sparse_super2; the descriptor table follows every
//! superblock copy, except that with meta_bg each meta group (the groups one
//! descriptor block describes) keeps its descriptor block in its first,
//! second and last group.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::error::{FormatError, Result};
use crate::features::{Compat, Incompat, RoCompat};
use crate::num;
use crate::superblock::Superblock;

/// The numbers that fix a filesystem's layout, taken from a superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    /// Block size in bytes.
    pub block_size: u32,
    /// `log2(cluster size / block size)`: 0 without bigalloc.
    pub cluster_bits: u32,
    /// Total blocks.
    pub blocks_count: u64,
    /// `s_first_data_block`: 1 for 1 KiB blocks (without bigalloc), else 0.
    pub first_data_block: u64,
    /// Blocks per group.
    pub blocks_per_group: u64,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// Bytes per inode record.
    pub inode_size: u32,
    /// Group descriptor size (32 or 64).
    pub desc_size: u32,
    /// Number of groups.
    pub group_count: u32,
    /// `s_reserved_gdt_blocks`.
    pub reserved_gdt_blocks: u32,
    /// sparse_super is on.
    pub sparse_super: bool,
    /// sparse_super2 is on, with these two backup groups (0 = none).
    pub sparse_super2: Option<[u32; 2]>,
    /// meta_bg is on, starting at this meta group.
    pub meta_bg: Option<u32>,
    /// `s_log_groups_per_flex` when flex_bg is on.
    pub log_groups_per_flex: Option<u32>,
}

impl Geometry {
    /// Derives the geometry from a superblock, refusing values that would
    /// make the arithmetic meaningless (zero or oversized group sizes).
    ///
    /// # Errors
    /// [`FormatError::Invalid`] naming the offending field.
    pub fn from_superblock(sb: &Superblock) -> Result<Self> {
        let block_size = sb
            .block_size()
            .ok_or_else(|| FormatError::invalid("superblock", "bad s_log_block_size"))?;
        let log_c = sb.s_log_cluster_size.get();
        let log_b = sb.s_log_block_size.get();
        let cluster_bits = if sb.has_ro_compat(RoCompat::BIGALLOC) {
            log_c
                .checked_sub(log_b)
                .filter(|b| *b <= 16)
                .ok_or_else(|| FormatError::invalid("superblock", "bad s_log_cluster_size"))?
        } else {
            0
        };
        let bpg = u64::from(sb.s_blocks_per_group.get());
        if bpg == 0 || bpg > (8 * u64::from(block_size)) << cluster_bits {
            return Err(FormatError::invalid(
                "superblock",
                format!("s_blocks_per_group {bpg} out of range"),
            ));
        }
        let ipg = sb.s_inodes_per_group.get();
        if ipg == 0 || ipg > 8 * block_size {
            return Err(FormatError::invalid(
                "superblock",
                format!("s_inodes_per_group {ipg} out of range"),
            ));
        }
        let group_count = sb
            .group_count()
            .ok_or_else(|| FormatError::invalid("superblock", "no groups"))?;
        Ok(Geometry {
            block_size,
            cluster_bits,
            blocks_count: sb.blocks_count(),
            first_data_block: u64::from(sb.s_first_data_block.get()),
            blocks_per_group: bpg,
            inodes_per_group: ipg,
            inode_size: u32::from(sb.inode_size()),
            desc_size: u32::from(sb.desc_size()),
            group_count,
            reserved_gdt_blocks: u32::from(sb.s_reserved_gdt_blocks.get()),
            sparse_super: sb.has_ro_compat(RoCompat::SPARSE_SUPER),
            sparse_super2: sb
                .has_compat(Compat::SPARSE_SUPER2)
                .then(|| [sb.s_backup_bgs[0].get(), sb.s_backup_bgs[1].get()]),
            meta_bg: sb
                .has_incompat(Incompat::META_BG)
                .then(|| sb.s_first_meta_bg.get()),
            log_groups_per_flex: (sb.has_incompat(Incompat::FLEX_BG)
                && sb.s_log_groups_per_flex != 0)
                .then(|| u32::from(sb.s_log_groups_per_flex)),
        })
    }

    /// Group descriptors per descriptor block.
    pub fn descs_per_block(&self) -> u32 {
        self.block_size / self.desc_size.max(32)
    }

    /// Blocks holding the descriptor table.
    pub fn desc_blocks(&self) -> u32 {
        self.group_count.div_ceil(self.descs_per_block())
    }

    /// Blocks one inode table takes.
    pub fn inode_blocks_per_group(&self) -> u32 {
        num::sat_u32(
            (u64::from(self.inodes_per_group) * u64::from(self.inode_size))
                .div_ceil(u64::from(self.block_size)),
        )
    }

    /// Blocks per cluster.
    pub fn cluster_ratio(&self) -> u64 {
        1 << self.cluster_bits
    }

    /// First block of group `g`.
    pub fn group_first_block(&self, g: u32) -> u64 {
        self.first_data_block + u64::from(g) * self.blocks_per_group
    }

    /// Last block of group `g` (the last group may be short).
    pub fn group_last_block(&self, g: u32) -> u64 {
        if g + 1 >= self.group_count {
            self.blocks_count - 1
        } else {
            self.group_first_block(g) + self.blocks_per_group - 1
        }
    }

    /// Blocks in group `g`.
    pub fn group_blocks(&self, g: u32) -> u64 {
        self.group_last_block(g) - self.group_first_block(g) + 1
    }

    /// The group holding block `b` (blocks before the first data block
    /// count as group 0).
    pub fn group_of_block(&self, b: u64) -> u32 {
        num::sat_u32(b.saturating_sub(self.first_data_block) / self.blocks_per_group)
    }

    /// Whether group `g` holds a superblock copy.
    pub fn has_super(&self, g: u32) -> bool {
        if g == 0 {
            return true;
        }
        if let Some(bgs) = self.sparse_super2 {
            return g == bgs[0] || g == bgs[1];
        }
        if g <= 1 || !self.sparse_super {
            return true;
        }
        if g & 1 == 0 {
            return false;
        }
        is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7)
    }

    /// Descriptor-table blocks that follow a superblock copy outside meta_bg:
    /// the descriptor blocks plus the reserved GDT blocks, or with meta_bg
    /// those of the meta groups before `s_first_meta_bg`.
    pub fn old_desc_blocks(&self) -> u32 {
        match self.meta_bg {
            Some(first) => first,
            None => self.desc_blocks() + self.reserved_gdt_blocks,
        }
    }

    /// The superblock and descriptor locations in group `g`.
    pub fn group_meta(&self, g: u32) -> GroupMeta {
        let mut first = self.group_first_block(g);
        if first == 0 && self.block_size == 1024 {
            // 1 KiB blocks with bigalloc: block 0 is the boot block.
            first = 1;
        }
        let has_super = self.has_super(g);
        let mut m = GroupMeta {
            super_block: has_super.then_some(first),
            ..GroupMeta::default()
        };
        let per = self.descs_per_block();
        let in_old = match self.meta_bg {
            None => true,
            Some(firstmeta) => g / per < firstmeta,
        };
        if in_old {
            if has_super {
                let count = u64::from(self.old_desc_blocks())
                    .min(self.blocks_count.saturating_sub(first + 1));
                m.old_desc = Some((first + 1, count));
            }
        } else {
            let r = g % per;
            if r == 0 || r == 1 || r == per - 1 {
                m.meta_desc = Some(first + u64::from(has_super));
            }
        }
        m
    }

    /// Blocks in group `g` taken by its superblock copy and descriptors
    /// (the count e2fsprogs' `ext2fs_super_and_bgd_loc2` reports).
    pub fn super_and_desc_blocks(&self, g: u32) -> u64 {
        let m = self.group_meta(g);
        let mut n = u64::from(m.super_block.is_some());
        let per = self.descs_per_block();
        let in_old = self.meta_bg.is_none_or(|fm| g / per < fm);
        if in_old {
            if m.super_block.is_some() {
                n += u64::from(self.old_desc_blocks());
            }
        } else if m.meta_desc.is_some() {
            n += 1;
        }
        n
    }

    /// Location of primary descriptor block `i`.
    pub fn desc_block_loc(&self, i: u32) -> u64 {
        let first = self.first_data_block;
        // 1 KiB blocks with bigalloc start at block 0, whose first KiB is
        // the boot block: the superblock is block 1 and the table after
        // it, all of it (libext2fs's openfs reads it from there in one
        // piece; only its meta_bg lookup adjusts group 0 alone).
        let boot = u64::from(first == 0 && self.block_size == 1024);
        match self.meta_bg {
            Some(fm) if i >= fm => {
                let bg = self.descs_per_block() * i;
                self.group_first_block(bg)
                    + u64::from(self.has_super(bg))
                    + boot * u64::from(i == 0)
            }
            _ => first + u64::from(i) + 1 + boot,
        }
    }

    /// Groups whose superblock copy exists, in order.
    pub fn backup_groups(&self) -> impl Iterator<Item = u32> + '_ {
        BackupGroups { geo: self, next: 1 }
    }
}

/// Superblock and descriptor locations inside one group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupMeta {
    /// Block of the superblock copy (for group 0 with 1 KiB blocks: block 1).
    pub super_block: Option<u64>,
    /// First block and count of the descriptor table (with reserved GDT
    /// blocks) that follows the superblock outside meta_bg.
    pub old_desc: Option<(u64, u64)>,
    /// The meta_bg descriptor block kept in this group.
    pub meta_desc: Option<u64>,
}

fn is_power_of(mut n: u32, base: u32) -> bool {
    while n > 1 {
        if n % base != 0 {
            return false;
        }
        n /= base;
    }
    n == 1
}

/// Iterates the groups after 0 that hold a superblock copy, jumping through
/// powers under sparse_super instead of testing every group.
struct BackupGroups<'a> {
    geo: &'a Geometry,
    next: u32,
}

impl Iterator for BackupGroups<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        let geo = self.geo;
        while self.next < geo.group_count {
            let g = self.next;
            if let Some(bgs) = geo.sparse_super2 {
                // Only the two named groups: jump to the next one above g.
                let mut cands: Vec<u32> = bgs.iter().copied().filter(|&b| b >= g).collect();
                cands.sort_unstable();
                let c = cands.into_iter().find(|&b| b != 0)?;
                if c >= geo.group_count {
                    return None;
                }
                self.next = c + 1;
                return Some(c);
            }
            if geo.sparse_super && g > 1 {
                // Smallest power of 3, 5 or 7 that is >= g.
                let mut best = u32::MAX;
                for base in [3u32, 5, 7] {
                    let mut p: u64 = 1;
                    while p < u64::from(g) {
                        p *= u64::from(base);
                    }
                    best = best.min(u32::try_from(p).unwrap_or(u32::MAX));
                }
                if best >= geo.group_count {
                    return None;
                }
                self.next = best + 1;
                return Some(best);
            }
            self.next = g + 1;
            if geo.has_super(g) {
                return Some(g);
            }
        }
        None
    }
}

/// Reserved GDT blocks mke2fs sets aside for online growth (resize_inode):
/// enough descriptor blocks for 1024 times the current size, capped at
/// 2^32 blocks and at one indirect block's worth of pointers.
pub fn reserved_gdt_blocks(
    blocks_count: u64,
    first_data_block: u64,
    blocks_per_group: u64,
    descs_per_block: u32,
    desc_blocks: u32,
    block_size: u32,
) -> u32 {
    let max_blocks: u64 = if blocks_count < 0xFFFF_FFFF / 1024 {
        blocks_count * 1024
    } else {
        0xFFFF_FFFF
    };
    let rsv_groups = (max_blocks - first_data_block).div_ceil(blocks_per_group);
    let rsv_gdb = rsv_groups
        .div_ceil(u64::from(descs_per_block))
        .saturating_sub(u64::from(desc_blocks));
    num::sat_u32(rsv_gdb).min(block_size / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(groups: u32) -> Geometry {
        Geometry {
            block_size: 4096,
            cluster_bits: 0,
            blocks_count: u64::from(groups) * 32768,
            first_data_block: 0,
            blocks_per_group: 32768,
            inodes_per_group: 8192,
            inode_size: 256,
            desc_size: 64,
            group_count: groups,
            reserved_gdt_blocks: 7,
            sparse_super: true,
            sparse_super2: None,
            meta_bg: None,
            log_groups_per_flex: Some(4),
        }
    }

    #[test]
    fn sparse_super_backups() {
        let g = geo(800);
        let got: Vec<u32> = g.backup_groups().collect();
        assert_eq!(
            got,
            [1, 3, 5, 7, 9, 25, 27, 49, 81, 125, 243, 343, 625, 729]
        );
        let slow: Vec<u32> = (1..800).filter(|&i| g.has_super(i)).collect();
        assert_eq!(got, slow);
    }

    #[test]
    fn sparse_super2_backups() {
        let mut g = geo(10);
        g.sparse_super2 = Some([1, 9]);
        assert_eq!(g.backup_groups().collect::<Vec<_>>(), [1, 9]);
        g.sparse_super2 = Some([0, 0]);
        assert_eq!(g.backup_groups().count(), 0);
    }

    #[test]
    fn meta_bg_descriptors_in_first_second_last() {
        let mut g = geo(300);
        g.meta_bg = Some(0);
        g.reserved_gdt_blocks = 0;
        // 64 descriptors per 4 KiB block.
        assert_eq!(g.group_meta(0).meta_desc, Some(1));
        assert_eq!(g.group_meta(1).meta_desc, Some(32768 + 1));
        assert_eq!(g.group_meta(2).meta_desc, None);
        assert_eq!(g.group_meta(63).meta_desc, Some(63 * 32768));
        assert_eq!(g.group_meta(64).meta_desc, Some(64 * 32768));
        assert_eq!(g.desc_block_loc(1), 64 * 32768);
    }

    #[test]
    fn one_k_bigalloc_descriptors_follow_the_boot_block() {
        // mke2fs -O bigalloc -b 1024 -C 4096, 600 MiB: dumpe2fs says
        // "Group descriptors at 2-3" (16 descriptors per block).
        let mut g = geo(19);
        g.block_size = 1024;
        g.cluster_bits = 2;
        g.reserved_gdt_blocks = 256;
        assert_eq!(g.desc_blocks(), 2);
        assert_eq!(g.group_meta(0).old_desc, Some((2, 2 + 256)));
        assert_eq!(g.desc_block_loc(0), 2);
        assert_eq!(g.desc_block_loc(1), 3);
        g.meta_bg = Some(0);
        assert_eq!(g.desc_block_loc(0), 2);
        assert_eq!(g.desc_block_loc(1), 16 * 32768);
    }

    #[test]
    fn reserved_gdt_matches_mke2fs() {
        // 1 GiB, 4 KiB blocks: dumpe2fs of mke2fs's image says 127 with
        // 64bit (64 descriptors per block) and 63 without.
        assert_eq!(reserved_gdt_blocks(262144, 0, 32768, 64, 1, 4096), 127);
        assert_eq!(reserved_gdt_blocks(262144, 0, 32768, 128, 1, 4096), 63);
    }
}
