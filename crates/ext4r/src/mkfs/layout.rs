//! Deciding where everything goes, before a single byte is written.
//!
//! The order and the search rules follow mke2fs 1.47 (`ext2fs_initialize`,
//! `ext2fs_allocate_tables`, then root, lost+found, the resize inode, the
//! journal), because the goal is an identical layout: same groups, backups,
//! bitmap and inode-table places, journal place, free counts and flags.

use super::extents::Extents;
use super::journal::JournalPlace;
use super::params::Params;
use crate::error::{Error, Result};
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::geometry::{reserved_gdt_blocks, Geometry};
use ext4r_format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT, BG_INODE_ZEROED};
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use ext4r_txn::alloc::{BlockAlloc, UsedBlocks};

/// First non-reserved inode of a dynamic-revision filesystem.
const GOOD_OLD_FIRST_INO: u32 = 11;

/// Where a group's bitmaps and inode table went. Kept for every group
/// (24 bytes each, 2.9 MiB at 15 TiB); the rest of a group's state is the
/// same for nearly all groups and is kept apart, below.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GroupTables {
    pub block_bitmap: u64,
    pub inode_bitmap: u64,
    pub inode_table: u64,
}

/// A group's inode counts for its descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InodeCounts {
    pub free_inodes: u32,
    pub used_dirs: u32,
    pub itable_unused: u32,
}

/// A directory's blocks.
#[derive(Debug, Clone, Default)]
pub(crate) struct DirPlace {
    pub blocks: Vec<u64>,
}

/// The decided layout.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub sb: Superblock,
    pub geo: Geometry,
    pub tables: Vec<GroupTables>,
    /// `bg_flags` per group.
    pub flags: Vec<u16>,
    /// Inode counts of the first groups, where the reserved inodes and
    /// every inode mke2fs makes live; later groups have
    /// [`Layout::untouched_inode_counts`].
    inode_counts: Vec<InodeCounts>,
    /// `bg_free_blocks_count` as libext2fs keeps it while mke2fs works,
    /// with bigalloc only (empty otherwise): started from
    /// ext2fs_reserve_super_and_bgd and lowered by each allocation's stats
    /// call. These mix blocks and clusters, and the journal's group is
    /// chosen by them.
    stats_free: Vec<i64>,
    pub used: UsedBlocks,
    pub root: DirPlace,
    pub lost_found: DirPlace,
    /// Clusters allocated for lost+found (its blocks share clusters with
    /// bigalloc).
    pub lost_found_clusters: u64,
    /// The resize inode's double-indirect block.
    pub resize_dind: Option<u64>,
    pub journal: Option<JournalPlace>,
    /// Inodes in use, in group 0 (mke2fs never allocates beyond it).
    pub inodes_used: Vec<u32>,
    /// Whether inode tables are zeroed only up to their used inodes
    /// (lazy_itable_init), and whether they need no zeroing at all.
    itable_lazy: bool,
    itable_zeroed: bool,
    /// `itable_unused` of the first groups when that was decided, before
    /// the root directory and the other first inodes were made (mke2fs's
    /// write_inode_tables runs first).
    itable_unused_planned: Vec<u32>,
    /// The orphan file's inode and its blocks (contiguous runs as
    /// `(logical, physical, len)`).
    pub orphan_file: Option<(u32, Extents)>,
    /// Quota files, in the order they were made.
    pub quota: Vec<QuotaPlace>,
}

/// A quota file and where its blocks went.
#[derive(Debug, Clone)]
pub(crate) struct QuotaPlace {
    /// 0 user, 1 group, 2 project.
    pub qtype: usize,
    pub ino: u32,
    pub file: super::quota::QuotaFile,
    pub blocks: super::quota::QuotaBlocks,
}

/// libext2fs's EXT2_ET_TOOSMALL, with mke2fs's context: no group, or a
/// single group too small for its own metadata.
const TOO_SMALL: &str = "Not enough space to build proposed filesystem while setting up superblock";

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

impl Layout {
    /// `ext2fs_initialize`: fixes the group geometry and the superblock's
    /// counts, trimming a last group too small to hold its metadata.
    pub(crate) fn initialize(p: &Params) -> Result<Layout> {
        let mut sb = Superblock::zeroed();
        sb.s_magic.set(ext4r_format::superblock::EXT4_MAGIC);
        sb.s_state.set(ext4r_format::superblock::STATE_VALID);
        sb.set_features(p.features);
        let bigalloc = p.features.ro_compat.contains(RoCompat::BIGALLOC);
        sb.s_log_block_size.set(p.log_block_size);
        let log_cluster = if bigalloc {
            p.log_cluster_size
        } else {
            p.log_block_size
        };
        sb.s_log_cluster_size.set(log_cluster);
        let cluster_bits = log_cluster - p.log_block_size;
        let block_size32: u32 = 1024 << p.log_block_size;
        let block_size = u64::from(block_size32);
        let first_data_block32: u32 = if log_cluster == 0 { 1 } else { 0 };
        let first_data_block = u64::from(first_data_block32);
        sb.s_first_data_block.set(first_data_block32);
        sb.s_max_mnt_count.set(-1);
        sb.s_errors.set(p.errors);
        sb.s_default_mount_opts.set(p.default_mount_opts);
        sb.s_raid_stride
            .set(u16::try_from(p.raid_stride).map_err(|_| {
                bad(format!(
                    "RAID stride {} does not fit the superblock's 16 bits",
                    p.raid_stride
                ))
            })?);
        sb.s_raid_stripe_width.set(p.raid_stripe_width);
        sb.s_log_groups_per_flex = p.log_groups_per_flex;
        sb.s_rev_level.set(p.rev_level);
        if p.rev_level >= 1 {
            sb.s_first_ino.set(GOOD_OLD_FIRST_INO);
            sb.s_inode_size.set(p.inode_size);
            if p.inode_size >= 160 {
                sb.s_min_extra_isize.set(32);
                sb.s_want_extra_isize.set(32);
            }
        }
        sb.set_mkfs_time(p.now);
        sb.set_lastcheck(p.now);
        sb.s_creator_os.set(p.creator_os);
        sb.s_encoding.set(p.encoding.0);
        sb.s_encoding_flags.set(p.encoding.1);
        let inode_size = u64::from(if p.rev_level >= 1 { p.inode_size } else { 128 });

        let max_bpg: u64 = if bigalloc {
            // clusters per group is limited by the bitmap; blocks per group
            // must fit 32 bits.
            8 * block_size
        } else {
            // EXT2_MAX_BLOCKS_PER_GROUP: 65528 blocks.
            ((1u64 << 16) - 8).min(8 * block_size)
        };
        let mut bpg: u64;
        let cpg: u64;
        if bigalloc {
            let ratio = 1u64 << cluster_bits;
            let c = if let Some(c) = p.clusters_per_group {
                u64::from(c)
            } else if log_cluster + 15 < 32 {
                8 * block_size
            } else {
                (block_size - 1) * 8
            };
            let c = c.min(max_bpg.min((1u64 << 16) - 8));
            bpg = c * ratio;
            if bpg >= 1 << 32 {
                return Err(bad("blocks per group too large for the cluster size"));
            }
            cpg = c;
        } else {
            bpg = p
                .blocks_per_group
                .map_or(8 * block_size, u64::from)
                .min(max_bpg);
            cpg = bpg;
        }
        let mut cpg = cpg;
        let cluster_mask = (1u64 << cluster_bits) - 1;
        let mut blocks_count = p.blocks_count & !cluster_mask;
        let mut r_blocks = p.r_blocks_count;
        if r_blocks >= p.blocks_count {
            return Err(bad("reserved blocks exceed the filesystem size"));
        }
        let desc_size: u64 = if p.features.incompat.contains(Incompat::BIT64) {
            64
        } else {
            32
        };
        let mut features = p.features;

        // The retry loop of ext2fs_initialize.
        let (group_count, ipg, inode_blocks_per_group, rsv_gdt, desc_blocks) = loop {
            let group_count = (blocks_count - first_data_block).div_ceil(bpg);
            let group_count32 = u32::try_from(group_count)
                .ok()
                .filter(|&g| g != 0)
                .ok_or_else(|| bad(TOO_SMALL))?;
            let descs_per_block32 = if desc_size == 64 {
                block_size32 / 64
            } else {
                block_size32 / 32
            };
            let desc_blocks32 = group_count32.div_ceil(descs_per_block32);
            let desc_blocks = u64::from(desc_blocks32);
            let i = if block_size >= 4096 {
                1
            } else {
                4096 / block_size
            };
            let mut inodes_count = if p.inodes_count != 0 {
                p.inodes_count
            } else if features.incompat.contains(Incompat::BIT64) && blocks_count / i >= 1 << 32 {
                u64::from(u32::MAX)
            } else {
                blocks_count / i
            };
            if inodes_count < u64::from(GOOD_OLD_FIRST_INO) + 1 {
                inodes_count = u64::from(GOOD_OLD_FIRST_INO) + 1;
            }
            let mut ipg = inodes_count.div_ceil(group_count);
            if ipg > block_size * 8 {
                if !bigalloc && bpg >= 256 {
                    bpg -= 8;
                    cpg = bpg;
                    blocks_count = p.blocks_count & !cluster_mask;
                    continue;
                }
                return Err(bad("too many inodes for the filesystem size"));
            }
            // EXT2_MAX_INODES_PER_GROUP: 65536 - inodes per block.
            let max_ipg = (1u64 << 16) - block_size / inode_size;
            ipg = ipg.min(max_ipg);
            let (ipg, ibpg) = loop {
                let ibpg = (ipg * inode_size).div_ceil(block_size);
                let mut real = ibpg * block_size / inode_size;
                if real < 8 {
                    real = 8;
                }
                real &= !7;
                let ibpg = (real * inode_size).div_ceil(block_size);
                if real * group_count > u64::from(u32::MAX) {
                    ipg -= 1;
                    continue;
                }
                break (real, ibpg);
            };
            let mut rsv = if features.compat.contains(Compat::RESIZE_INODE) {
                reserved_gdt_blocks(
                    blocks_count,
                    first_data_block,
                    bpg,
                    descs_per_block32,
                    desc_blocks32,
                    block_size32,
                )
                .into()
            } else {
                0
            };
            if let Some(r) = p.reserved_gdt_blocks {
                rsv = u64::from(r);
            }
            if rsv > block_size / 4 {
                return Err(bad("too many reserved group descriptor blocks"));
            }
            if rsv + desc_blocks > bpg * 3 / 4 {
                features.incompat |= Incompat::META_BG;
                features.compat.remove(Compat::RESIZE_INODE);
                rsv = 0;
            }
            let meta_bg = features.incompat.contains(Incompat::META_BG);
            let mut overhead = 3 + ibpg + rsv;
            overhead += if meta_bg { 1 } else { desc_blocks };
            if overhead > bpg {
                return Err(bad(
                    "too many inodes: the inode tables do not fit in a group",
                ));
            }
            // Is the last group big enough for its metadata?
            let mut overhead = 2 + ibpg;
            let last = group_count32 - 1;
            let has_bg = if features.compat.contains(Compat::SPARSE_SUPER2) {
                if group_count == 2 {
                    p.backup_bgs[0] != 0
                } else {
                    p.backup_bgs[1] != 0
                }
            } else {
                last == 0
                    || last == 1
                    || !features.ro_compat.contains(RoCompat::SPARSE_SUPER)
                    || (last & 1 == 1 && is_backup_power(last))
            };
            if has_bg {
                overhead += 1 + desc_blocks + rsv;
            }
            let rem = (blocks_count - first_data_block) % bpg;
            if group_count == 1 && rem != 0 && rem < overhead {
                return Err(bad(TOO_SMALL));
            }
            if rem != 0 && rem < overhead + 50 {
                blocks_count -= rem;
                let ratio = 100.0 * p.r_blocks_count as f64 / p.blocks_count as f64;
                #[allow(clippy::cast_possible_truncation)] // a share of blocks_count
                let r = (ratio * blocks_count as f64 / 100.0) as u64;
                r_blocks = r;
                continue;
            }
            // real * group_count fits 32 bits (checked above), the inode
            // tables fit a group and rsv is at most a quarter block.
            let fit = |v: u64| {
                u32::try_from(v).map_err(|_| bad("group geometry does not fit 32-bit fields"))
            };
            break (group_count32, fit(ipg)?, fit(ibpg)?, fit(rsv)?, desc_blocks);
        };
        let _ = desc_blocks;
        sb.set_features(features);
        sb.set_blocks_count(blocks_count);
        sb.set_r_blocks_count(r_blocks);
        let fit =
            |v: u64| u32::try_from(v).map_err(|_| bad("blocks per group too large for 32 bits"));
        sb.s_blocks_per_group.set(fit(bpg)?);
        sb.s_clusters_per_group.set(fit(cpg)?);
        sb.s_inodes_per_group.set(ipg);
        sb.s_inodes_count.set(ipg * group_count);
        sb.s_free_inodes_count.set(ipg * group_count);
        sb.s_reserved_gdt_blocks.set(
            u16::try_from(rsv_gdt).map_err(|_| bad("too many reserved group descriptor blocks"))?,
        );
        sb.s_desc_size.set(if desc_size == 64 { 64 } else { 0 });
        if features.compat.contains(Compat::SPARSE_SUPER2) {
            let mut b = p.backup_bgs;
            for x in &mut b {
                if *x >= group_count {
                    *x = group_count - 1;
                }
            }
            if b[0] == b[1] {
                b[1] = 0;
            }
            if b[0] > b[1] {
                b.swap(0, 1);
            }
            sb.s_backup_bgs[0].set(b[0]);
            sb.s_backup_bgs[1].set(b[1]);
        }
        // char is signed on the machines mke2fs runs on; the kernel reads
        // this flag to pick the hash variant.
        sb.s_flags.set(p.s_flags);
        let geo = Geometry::from_superblock(&sb)
            .map_err(|e| bad(format!("internal geometry error: {e}")))?;
        debug_assert_eq!(geo.inode_blocks_per_group(), inode_blocks_per_group);

        let csum = features.ro_compat.contains(RoCompat::GDT_CSUM)
            || features.ro_compat.contains(RoCompat::METADATA_CSUM);
        let mut flags = vec![0u16; group_count as usize];
        if csum {
            flags.fill(BG_BLOCK_UNINIT | BG_INODE_UNINIT);
            flags[group_count as usize - 1] &= !BG_BLOCK_UNINIT;
        }
        // The reserved inodes count as used in itable_unused, spilling
        // into the next group when groups are tiny.
        let mut inode_counts = Vec::new();
        let mut reserved_inos = GOOD_OLD_FIRST_INO;
        while csum && reserved_inos > 0 && inode_counts.len() < group_count as usize {
            let taken = reserved_inos.min(ipg);
            reserved_inos -= taken;
            inode_counts.push(InodeCounts {
                free_inodes: ipg,
                used_dirs: 0,
                itable_unused: ipg - taken,
            });
        }
        // Block-granular until the group tables are placed (mke2fs's
        // subcluster bitmap); see `Layout::convert_to_cluster_map`.
        let mut used = UsedBlocks::new(first_data_block, blocks_count, 1);
        for g in 0..group_count {
            let m = geo.group_meta(g);
            if let Some(s) = m.super_block {
                used.mark(s, 1);
            } else if g == 0 {
                used.mark(geo.group_first_block(0), 1);
            }
            if g == 0 && block_size == 1024 && cluster_bits > 0 {
                used.mark(0, 1);
            }
            if let Some((s, n)) = m.old_desc {
                used.mark(s, n);
            }
            if let Some(b) = m.meta_desc {
                used.mark(b, 1);
            }
        }
        // Signed, as in mke2fs: a group can hold less than its own tables
        // (a last group whose backup the size check did not count, or
        // flex_bg moving the tables out). Placing the tables refuses such
        // a filesystem later; the count must not wrap before that.
        let mut free = 0i64;
        let mut stats_free = Vec::new();
        for g in 0..group_count {
            let mut n = geo.group_blocks(g) as i64
                - 2
                - i64::from(inode_blocks_per_group)
                - geo.super_and_desc_blocks(g) as i64;
            if p.log_groups_per_flex != 0 {
                n += 2 + i64::from(inode_blocks_per_group);
            }
            if bigalloc {
                stats_free.push(n);
            }
            free += n;
        }
        sb.set_free_blocks_count(free.max(0) as u64 & !cluster_mask);
        Ok(Layout {
            sb,
            geo,
            tables: vec![GroupTables::default(); group_count as usize],
            flags,
            inode_counts,
            stats_free,
            used,
            root: DirPlace::default(),
            lost_found: DirPlace::default(),
            lost_found_clusters: 0,
            resize_dind: None,
            journal: None,
            inodes_used: Vec::new(),
            itable_lazy: false,
            itable_zeroed: false,
            itable_unused_planned: Vec::new(),
            orphan_file: None,
            quota: Vec::new(),
        })
    }

    fn flex_size(&self) -> u32 {
        if self.sb.has_incompat(Incompat::FLEX_BG) && self.sb.s_log_groups_per_flex != 0 {
            1 << self.sb.s_log_groups_per_flex
        } else {
            0
        }
    }

    /// `ext2fs_block_alloc_stats_range(+1)`: marks the range and, per
    /// group it touches, clears BLOCK_UNINIT and takes the blocks (counted
    /// in clusters, rounding down) from the group's free count. The
    /// flex_bg placement of inode tables keeps the same books.
    fn mark_data(&mut self, start: u64, len: u64) {
        self.used.mark(start, len);
        let ratio = self.geo.cluster_ratio();
        let mut b = start;
        let end = start + len;
        while b < end {
            let g = self.geo.group_of_block(b);
            let n = (self.geo.group_last_block(g) + 1).min(end) - b;
            self.flags[g as usize] &= !BG_BLOCK_UNINIT;
            if let Some(f) = self.stats_free.get_mut(g as usize) {
                *f -= (n / ratio) as i64;
            }
            b += n;
        }
    }

    /// One block taken with a single stats call (`ext2fs_block_alloc_stats2`
    /// or a flex_bg bitmap): the group loses one from its free count,
    /// whatever the cluster size.
    fn mark_one(&mut self, b: u64) {
        self.used.mark(b, 1);
        let g = self.geo.group_of_block(b) as usize;
        self.flags[g] &= !BG_BLOCK_UNINIT;
        if let Some(f) = self.stats_free.get_mut(g) {
            *f -= 1;
        }
    }

    /// `ext2fs_convert_subcluster_bitmap`: after the group tables are
    /// placed, allocation works on whole clusters.
    pub(crate) fn convert_to_cluster_map(&mut self) {
        self.used.set_granularity(self.geo.cluster_ratio());
    }

    /// `flexbg_offset` of alloc_tables.c.
    fn flexbg_offset(&self, group: u32, start_blk: u64, rem_grp: u32, elem_size: u64) -> u64 {
        let flexbg_size = self.flex_size();
        let flexbg = group / flexbg_size;
        let mut size = u64::from(rem_grp) * elem_size;
        if size > self.geo.blocks_per_group / 4 {
            size = self.geo.blocks_per_group / 4;
        }
        if start_blk != 0 && start_blk < self.geo.blocks_count {
            if let Some(b) = self
                .used
                .get_free_blocks(start_blk, start_blk + size, elem_size)
            {
                return b;
            }
        }
        let start = self.geo.group_first_block(flexbg_size * flexbg);
        let last_grp = (group | (flexbg_size - 1)).min(self.geo.group_count - 1);
        let last_blk = self.geo.group_last_block(last_grp);
        if let Some(b) = self.used.get_free_blocks(start, last_blk, size) {
            return b;
        }
        if let Some(b) = self.used.get_free_blocks(start, last_blk, elem_size) {
            return b;
        }
        self.used
            .get_free_blocks(0, last_blk, elem_size)
            .unwrap_or(0)
    }

    /// `ext2fs_allocate_group_table` for every group.
    pub(crate) fn allocate_tables(&mut self, stride: u32) -> Result<()> {
        let flexbg_size = self.flex_size();
        let ibpg = u64::from(self.geo.inode_blocks_per_group());
        let ngroups = self.geo.group_count;
        for group in 0..ngroups {
            let mut group_blk = self.geo.group_first_block(group);
            let mut last_blk = self.geo.group_last_block(group);
            let mut last_grp = 0;
            let mut rem_grps = 0;
            let mut table_offset = 0u64;
            if flexbg_size != 0 {
                last_grp = (group | (flexbg_size - 1)).min(ngroups - 1);
                rem_grps = last_grp - group + 1;
            }
            let mut start_blk = if stride != 0 && flexbg_size == 0 {
                let s = self
                    .used
                    .get_free_blocks(group_blk, last_blk, 1)
                    .ok_or_else(|| bad("no room for group tables"))?;
                let mut s = s + ibpg;
                s += (u64::from(stride) * u64::from(group)) % (last_blk - s + 1);
                if s >= last_blk {
                    s = group_blk;
                }
                s
            } else {
                group_blk
            };
            if flexbg_size != 0 {
                let mut prev_block = 0;
                table_offset = u64::from(flexbg_size);
                if group % flexbg_size != 0 {
                    prev_block = self.tables[group as usize - 1].block_bitmap + 1;
                } else if last_grp == ngroups - 1 {
                    // The last flex group keeps its tables contiguous.
                    table_offset = u64::from(last_grp & (flexbg_size - 1));
                    if table_offset == 0 {
                        table_offset = u64::from(flexbg_size);
                    } else {
                        table_offset += 1;
                    }
                }
                start_blk = self.flexbg_offset(group, prev_block, rem_grps, 1);
                last_blk = self.geo.group_last_block(last_grp);
            }
            // Block bitmap.
            let b = self
                .used
                .get_free_blocks(start_blk, last_blk, 1)
                .or_else(|| self.used.get_free_blocks(group_blk, last_blk, 1))
                .ok_or_else(|| bad("no room for a block bitmap"))?;
            if flexbg_size != 0 {
                self.mark_one(b);
            } else {
                self.used.mark(b, 1);
            }
            self.tables[group as usize].block_bitmap = b;

            if flexbg_size != 0 {
                let prev_block = if group % flexbg_size != 0 {
                    self.tables[group as usize - 1].inode_bitmap + 1
                } else {
                    self.tables[group as usize].block_bitmap + table_offset
                };
                start_blk = self.flexbg_offset(group, prev_block, rem_grps, 1);
                last_blk = self.geo.group_last_block(last_grp);
            }
            let b = self
                .used
                .get_free_blocks(start_blk, last_blk, 1)
                .or_else(|| self.used.get_free_blocks(group_blk, last_blk, 1))
                .ok_or_else(|| bad("no room for an inode bitmap"))?;
            if flexbg_size != 0 {
                self.mark_one(b);
            } else {
                self.used.mark(b, 1);
            }
            self.tables[group as usize].inode_bitmap = b;

            if flexbg_size != 0 {
                let prev_block = if group % flexbg_size != 0 {
                    self.tables[group as usize - 1].inode_table + ibpg
                } else {
                    self.tables[group as usize].inode_bitmap + table_offset
                };
                group_blk = self.flexbg_offset(group, prev_block, rem_grps, ibpg);
                last_blk = self.geo.group_last_block(last_grp);
            }
            let b = self
                .used
                .get_free_blocks(group_blk, last_blk, ibpg)
                .ok_or_else(|| bad("no room for an inode table"))?;
            if flexbg_size != 0 {
                self.mark_data(b, ibpg);
            } else {
                self.used.mark(b, ibpg);
            }
            self.tables[group as usize].inode_table = b;
        }
        Ok(())
    }

    /// `packed_allocate_tables` of mke2fs (`-E packed_meta_blocks`): all
    /// block bitmaps, then all inode bitmaps, then all inode tables, from
    /// the start of the device.
    pub(crate) fn allocate_tables_packed(&mut self) -> Result<()> {
        let ibpg = u64::from(self.geo.inode_blocks_per_group());
        let mut goal = 0;
        for g in 0..self.geo.group_count as usize {
            goal = self.new_block(goal)?;
            self.tables[g].block_bitmap = goal;
        }
        for g in 0..self.geo.group_count as usize {
            goal = self.new_block(goal)?;
            self.tables[g].inode_bitmap = goal;
        }
        for g in 0..self.geo.group_count as usize {
            let end = self.geo.blocks_count - 1;
            goal = self
                .used
                .get_free_blocks(goal, end, ibpg)
                .ok_or_else(|| bad("no room for the inode tables"))?;
            self.mark_data(goal, ibpg);
            self.tables[g].inode_table = goal;
        }
        Ok(())
    }

    /// Allocates one block at or after `goal` (`ext2fs_new_block2` followed
    /// by `ext2fs_block_alloc_stats2`).
    pub(crate) fn new_block(&mut self, goal: u64) -> Result<u64> {
        let b = self
            .used
            .new_block(goal)
            .ok_or_else(|| bad("filesystem full while creating metadata"))?;
        self.mark_one(b);
        Ok(b)
    }

    /// The lowest unused inode at or after the first non-reserved one
    /// (`ext2fs_new_inode` in group 0, where mke2fs's inodes all are).
    /// The write layer's inode search over the plan; past the last inode
    /// it names the one after it, which [`Layout::alloc_inode`] refuses.
    pub(crate) fn next_free_inode(&self) -> u32 {
        ext4r_txn::alloc::find_free_inode(self, 0)
            .ok()
            .flatten()
            .unwrap_or_else(|| self.sb.s_inodes_count.get().saturating_add(1))
    }

    /// Whether two blocks lie in the same cluster.
    pub(crate) fn same_cluster(&self, a: u64, b: u64) -> bool {
        a >> self.geo.cluster_bits == b >> self.geo.cluster_bits
    }

    /// `ext2fs_inode_alloc_stats2(+1)`.
    ///
    /// # Errors
    /// An inode number beyond the filesystem's inodes: mke2fs 1.47.0 rounds
    /// a tiny filesystem's inodes down to 8, fewer than the reserved ones,
    /// and then fails writing them; we refuse before anything is written.
    pub(crate) fn alloc_inode(&mut self, ino: u32, is_dir: bool) -> Result<()> {
        let count = self.sb.s_inodes_count.get();
        if ino == 0 || ino > count {
            return Err(bad(format!(
                "Illegal inode number while writing reserved inodes: the filesystem \
                 would have {count} inodes, fewer than the {GOOD_OLD_FIRST_INO} it needs"
            )));
        }
        let ipg = self.geo.inodes_per_group;
        let group32 = (ino - 1) / ipg;
        let group = group32 as usize;
        let csum = self.csum();
        let untouched = self.untouched_inode_counts();
        if self.inode_counts.len() <= group {
            self.inode_counts.resize(group + 1, untouched);
        }
        let g = &mut self.inode_counts[group];
        g.free_inodes -= 1;
        if is_dir {
            g.used_dirs += 1;
        }
        self.flags[group] &= !BG_INODE_UNINIT;
        if csum {
            let first_unused = ipg - g.itable_unused + group32 * ipg + 1;
            if ino >= first_unused {
                g.itable_unused = group32 * ipg + ipg - ino;
            }
        }
        self.inodes_used.push(ino);
        let free = self.sb.s_free_inodes_count.get() - 1;
        self.sb.s_free_inodes_count.set(free);
        Ok(())
    }

    /// Whether group descriptors carry checksums (uninit_bg or metadata_csum).
    pub(crate) fn csum(&self) -> bool {
        self.sb.has_ro_compat(RoCompat::GDT_CSUM) || self.sb.has_ro_compat(RoCompat::METADATA_CSUM)
    }

    /// A group's free count as mke2fs's journal placement reads it. Without
    /// bigalloc that is simply its free blocks; with bigalloc it is the
    /// running count libext2fs keeps, which is in neither unit.
    pub(crate) fn group_free_blocks(&self, g: u32) -> i64 {
        if self.geo.cluster_bits > 0 {
            // Stored in the descriptor's 16 or 32 bits, so it wraps.
            let v = self.stats_free[g as usize];
            return if self.geo.desc_size >= 64 {
                i64::from(num::lo32(v as u64))
            } else {
                i64::from(num::lo16(num::lo32(v as u64)))
            };
        }
        let first = self.geo.group_first_block(g);
        let last = self.geo.group_last_block(g);
        ((last - first + 1) - self.used.count_used(first, last)) as i64
    }

    /// A group's inode counts.
    pub(crate) fn inode_counts(&self, g: u32) -> InodeCounts {
        self.inode_counts
            .get(g as usize)
            .copied()
            .unwrap_or_else(|| self.untouched_inode_counts())
    }

    /// The counts of a group no inode was taken from.
    fn untouched_inode_counts(&self) -> InodeCounts {
        let ipg = self.geo.inodes_per_group;
        InodeCounts {
            free_inodes: ipg,
            used_dirs: 0,
            itable_unused: if self.csum() { ipg } else { 0 },
        }
    }

    /// Free inodes in the whole filesystem.
    pub(crate) fn free_inodes(&self) -> u32 {
        // inode_counts holds at most one entry per group.
        let untouched = self
            .geo
            .group_count
            .saturating_sub(num::sat_u32(self.inode_counts.len()));
        let rest: u32 = self.inode_counts.iter().map(|c| c.free_inodes).sum();
        untouched * self.untouched_inode_counts().free_inodes + rest
    }

    /// Keeps each group's unused-inode count as it stands before the first
    /// objects are made: mke2fs's `write_inode_tables` runs at that point,
    /// so its lazy zeroing covers only the inodes in use then.
    pub(crate) fn snapshot_itable_unused(&mut self) {
        self.itable_unused_planned = self.inode_counts.iter().map(|c| c.itable_unused).collect();
    }

    /// The ITABLE_ZEROED flag and which inode tables need zeroing, as
    /// `write_inode_tables` decides them; known only once the device has
    /// said whether its discard zeroes.
    pub(crate) fn set_itable_mode(&mut self, lazy: bool, zeroed: bool) {
        self.itable_lazy = lazy;
        self.itable_zeroed = zeroed;
        if !lazy || zeroed {
            for f in &mut self.flags {
                *f |= BG_INODE_ZEROED;
            }
        }
    }

    /// Inode-table blocks to zero, as `(first block, count)`: whole tables,
    /// or with lazy_itable_init the blocks holding used inodes; tables
    /// that follow each other (flex_bg) are one range.
    pub(crate) fn itable_zero_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let ibpg = u64::from(self.geo.inode_blocks_per_group());
        let isz = u64::from(self.geo.inode_size);
        let bs = u64::from(self.geo.block_size);
        let ipg = u64::from(self.geo.inodes_per_group);
        let untouched = self.untouched_inode_counts().itable_unused;
        let mut pending: Option<(u64, u64)> = None;
        let mut groups = (0..self.geo.group_count).filter(|_| !self.itable_zeroed);
        std::iter::from_fn(move || {
            for g in groups.by_ref() {
                let num = if self.itable_lazy {
                    let planned = self.itable_unused_planned.get(g as usize);
                    let unused = u64::from(planned.copied().unwrap_or(untouched));
                    ((ipg - unused) * isz).div_ceil(bs)
                } else {
                    ibpg
                };
                if num == 0 {
                    continue;
                }
                let start = self.tables[g as usize].inode_table;
                match pending {
                    Some((s, n)) if s + n == start => pending = Some((s, n + num)),
                    Some(done) => {
                        pending = Some((start, num));
                        return Some(done);
                    }
                    None => pending = Some((start, num)),
                }
            }
            pending.take()
        })
    }
}

impl BlockAlloc for Layout {
    fn geo(&self) -> &Geometry {
        &self.geo
    }
    fn log_groups_per_flex(&self) -> u32 {
        u32::from(self.sb.s_log_groups_per_flex)
    }
    type Space = UsedBlocks;
    fn space(&self) -> &UsedBlocks {
        &self.used
    }
    fn group_free(&self, g: u32) -> i64 {
        self.group_free_blocks(g)
    }
    fn take_range(&mut self, start: u64, len: u64) -> Result<()> {
        self.mark_data(start, len);
        Ok(())
    }
    fn alloc_block(&mut self, goal: u64) -> Result<u64> {
        self.new_block(goal)
    }
}

fn is_backup_power(g: u32) -> bool {
    [3u32, 5, 7].iter().any(|&b| {
        let mut n = g;
        while n > 1 && n % b == 0 {
            n /= b;
        }
        n == 1
    })
}

/// The inodes a plan has made, for the write layer's inode search.
impl ext4r_txn::alloc::InodeSpace for Layout {
    fn inodes_per_group(&self) -> u32 {
        self.geo.inodes_per_group
    }
    fn group_count(&self) -> u32 {
        self.geo.group_count
    }
    fn first_ino(&self) -> u32 {
        GOOD_OLD_FIRST_INO
    }
    fn may_hold(&self, _g: u32) -> bool {
        true
    }
    fn first_free_in(&self, g: u32, from: u32) -> ext4r_txn::Result<Option<u32>> {
        let base = g * self.geo.inodes_per_group + 1;
        Ok((from..self.geo.inodes_per_group).find(|i| !self.inodes_used.contains(&(base + i))))
    }
}

#[cfg(test)]
mod tests {
    /// A RAID stride past s_raid_stride's 16 bits is refused before
    /// anything is written, not stored as its low bits.
    #[test]
    fn a_stride_wider_than_its_field_is_refused() {
        use crate::device::{BlockDevice, MemDevice};
        use crate::mkfs::{format, Extended, MkfsOptions};
        let opts = |stride| MkfsOptions {
            size_bytes: 8 << 20,
            now: 1_700_000_000,
            extended: Extended {
                stride: Some(stride),
                ..Default::default()
            },
            ..Default::default()
        };
        let dev = MemDevice::new(8 << 20);
        let e = format(&dev, &opts(65_536), true).expect_err("a 17-bit stride");
        assert!(e.to_string().contains("RAID stride 65536"), "{e}");
        let mut head = vec![0u8; 4096];
        dev.read_at(&mut head, 0).unwrap();
        assert!(head.iter().all(|&b| b == 0), "something was written");
        format(&dev, &opts(65_535), true).expect("the widest stride that fits");
    }
}
