//! The primary superblock, the group descriptors and the bitmaps.

use std::mem::offset_of;

use anyhow::Result;
use ext4r_format::group_desc::GroupDesc as G;
use ext4r_format::superblock::Superblock as S;

use super::{Ctx, Stamp};

/// (name, offset, width) of the superblock fields worth damaging.
const SB_FIELDS: &[(&str, usize, usize)] = &[
    ("s_inodes_count", offset_of!(S, s_inodes_count), 4),
    ("s_blocks_count_lo", offset_of!(S, s_blocks_count_lo), 4),
    ("s_r_blocks_count_lo", offset_of!(S, s_r_blocks_count_lo), 4),
    (
        "s_free_blocks_count_lo",
        offset_of!(S, s_free_blocks_count_lo),
        4,
    ),
    ("s_free_inodes_count", offset_of!(S, s_free_inodes_count), 4),
    ("s_first_data_block", offset_of!(S, s_first_data_block), 4),
    ("s_log_block_size", offset_of!(S, s_log_block_size), 4),
    ("s_log_cluster_size", offset_of!(S, s_log_cluster_size), 4),
    ("s_blocks_per_group", offset_of!(S, s_blocks_per_group), 4),
    (
        "s_clusters_per_group",
        offset_of!(S, s_clusters_per_group),
        4,
    ),
    ("s_inodes_per_group", offset_of!(S, s_inodes_per_group), 4),
    ("s_mtime", offset_of!(S, s_mtime), 4),
    ("s_wtime", offset_of!(S, s_wtime), 4),
    ("s_mnt_count", offset_of!(S, s_mnt_count), 2),
    ("s_max_mnt_count", offset_of!(S, s_max_mnt_count), 2),
    ("s_magic", offset_of!(S, s_magic), 2),
    ("s_state", offset_of!(S, s_state), 2),
    ("s_errors", offset_of!(S, s_errors), 2),
    ("s_minor_rev_level", offset_of!(S, s_minor_rev_level), 2),
    ("s_lastcheck", offset_of!(S, s_lastcheck), 4),
    ("s_checkinterval", offset_of!(S, s_checkinterval), 4),
    ("s_creator_os", offset_of!(S, s_creator_os), 4),
    ("s_rev_level", offset_of!(S, s_rev_level), 4),
    ("s_first_ino", offset_of!(S, s_first_ino), 4),
    ("s_inode_size", offset_of!(S, s_inode_size), 2),
    ("s_block_group_nr", offset_of!(S, s_block_group_nr), 2),
    ("s_feature_compat", offset_of!(S, s_feature_compat), 4),
    ("s_feature_incompat", offset_of!(S, s_feature_incompat), 4),
    ("s_feature_ro_compat", offset_of!(S, s_feature_ro_compat), 4),
    ("s_uuid", offset_of!(S, s_uuid), 16),
    ("s_volume_name", offset_of!(S, s_volume_name), 16),
    (
        "s_reserved_gdt_blocks",
        offset_of!(S, s_reserved_gdt_blocks),
        2,
    ),
    ("s_journal_inum", offset_of!(S, s_journal_inum), 4),
    ("s_journal_dev", offset_of!(S, s_journal_dev), 4),
    ("s_last_orphan", offset_of!(S, s_last_orphan), 4),
    ("s_hash_seed", offset_of!(S, s_hash_seed), 16),
    ("s_def_hash_version", offset_of!(S, s_def_hash_version), 1),
    ("s_jnl_backup_type", offset_of!(S, s_jnl_backup_type), 1),
    ("s_desc_size", offset_of!(S, s_desc_size), 2),
    (
        "s_default_mount_opts",
        offset_of!(S, s_default_mount_opts),
        4,
    ),
    ("s_first_meta_bg", offset_of!(S, s_first_meta_bg), 4),
    ("s_jnl_blocks", offset_of!(S, s_jnl_blocks), 68),
    ("s_blocks_count_hi", offset_of!(S, s_blocks_count_hi), 4),
    (
        "s_free_blocks_count_hi",
        offset_of!(S, s_free_blocks_count_hi),
        4,
    ),
    ("s_min_extra_isize", offset_of!(S, s_min_extra_isize), 2),
    ("s_want_extra_isize", offset_of!(S, s_want_extra_isize), 2),
    ("s_flags", offset_of!(S, s_flags), 4),
    ("s_mmp_block", offset_of!(S, s_mmp_block), 8),
    (
        "s_log_groups_per_flex",
        offset_of!(S, s_log_groups_per_flex),
        1,
    ),
    ("s_checksum_type", offset_of!(S, s_checksum_type), 1),
    ("s_kbytes_written", offset_of!(S, s_kbytes_written), 8),
    ("s_error_count", offset_of!(S, s_error_count), 4),
    ("s_usr_quota_inum", offset_of!(S, s_usr_quota_inum), 4),
    ("s_grp_quota_inum", offset_of!(S, s_grp_quota_inum), 4),
    ("s_overhead_clusters", offset_of!(S, s_overhead_clusters), 4),
    ("s_lpf_ino", offset_of!(S, s_lpf_ino), 4),
    ("s_checksum_seed", offset_of!(S, s_checksum_seed), 4),
    ("s_encoding", offset_of!(S, s_encoding), 2),
    ("s_orphan_file_inum", offset_of!(S, s_orphan_file_inum), 4),
    ("s_checksum", offset_of!(S, s_checksum), 4),
];

/// One field of the primary superblock, or random bytes in it.
pub fn superblock(c: &mut Ctx<'_>) -> Result<String> {
    if c.rng.chance(1, 4) {
        // The fields that matter sit in the first 0x180 bytes.
        let len = if c.rng.chance(3, 4) { 0x180 } else { 1024 };
        let what = c.scribble(1024, len)?;
        return Ok(format!("primary superblock: {what}"));
    }
    let &(name, off, width) = c.rng.pick(SB_FIELDS).unwrap_or(&SB_FIELDS[0]);
    let off = 1024 + off as u64;
    let restamp = c.restamp_chosen() && name != "s_checksum";
    let what = if width > 8 {
        c.scribble(off, width)?
    } else {
        let old = c.get_le(off, width)?;
        let extra = sb_candidates(c, name, old);
        c.field(off, width, &extra)?
    };
    let note = c.finish(Stamp::Super, restamp)?;
    Ok(format!("primary superblock {name}: {what}{note}"))
}

fn sb_candidates(c: &mut Ctx<'_>, name: &str, old: u64) -> Vec<u64> {
    let l = c.l;
    let bpg = l.geo.blocks_per_group;
    let live_file = l
        .inodes
        .iter()
        .filter(|i| i.inode.is_reg() && i.ino > 11)
        .nth(c.rng.index(100))
        .map_or(12, |i| u64::from(i.ino));
    match name {
        "s_feature_compat"
        | "s_feature_incompat"
        | "s_feature_ro_compat"
        | "s_flags"
        | "s_default_mount_opts" => {
            let a = old ^ (1 << c.rng.below(20));
            vec![a, old ^ (1 << c.rng.below(32))]
        }
        "s_blocks_count_lo" | "s_free_blocks_count_lo" | "s_r_blocks_count_lo" => {
            vec![old + bpg, old.saturating_sub(bpg), old + 1]
        }
        "s_log_block_size" | "s_log_cluster_size" => vec![0, 1, 2, 3, 7],
        "s_inode_size" => vec![128, 512, 1024, 100],
        "s_desc_size" => vec![32, 64, 128, 48],
        "s_first_ino" => vec![1, 12, 100],
        "s_journal_inum" => vec![7, 12, live_file],
        "s_last_orphan" => vec![live_file, 2, 11],
        "s_reserved_gdt_blocks" => vec![1024, 3000],
        "s_first_data_block" => vec![0, 1],
        "s_state" => vec![0, 2, 3],
        "s_rev_level" => vec![0, 2],
        "s_inodes_per_group" | "s_blocks_per_group" | "s_clusters_per_group" => {
            vec![old + 8, old.saturating_sub(8), old * 4]
        }
        "s_usr_quota_inum" | "s_grp_quota_inum" | "s_orphan_file_inum" | "s_lpf_ino" => {
            vec![live_file, 2, 0]
        }
        _ => Vec::new(),
    }
}

const GD_FIELDS: &[(&str, usize, usize)] = &[
    ("bg_block_bitmap_lo", offset_of!(G, bg_block_bitmap_lo), 4),
    ("bg_inode_bitmap_lo", offset_of!(G, bg_inode_bitmap_lo), 4),
    ("bg_inode_table_lo", offset_of!(G, bg_inode_table_lo), 4),
    (
        "bg_free_blocks_count_lo",
        offset_of!(G, bg_free_blocks_count_lo),
        2,
    ),
    (
        "bg_free_inodes_count_lo",
        offset_of!(G, bg_free_inodes_count_lo),
        2,
    ),
    (
        "bg_used_dirs_count_lo",
        offset_of!(G, bg_used_dirs_count_lo),
        2,
    ),
    ("bg_flags", offset_of!(G, bg_flags), 2),
    (
        "bg_exclude_bitmap_lo",
        offset_of!(G, bg_exclude_bitmap_lo),
        4,
    ),
    (
        "bg_block_bitmap_csum_lo",
        offset_of!(G, bg_block_bitmap_csum_lo),
        2,
    ),
    (
        "bg_inode_bitmap_csum_lo",
        offset_of!(G, bg_inode_bitmap_csum_lo),
        2,
    ),
    ("bg_itable_unused_lo", offset_of!(G, bg_itable_unused_lo), 2),
    ("bg_checksum", offset_of!(G, bg_checksum), 2),
    ("bg_block_bitmap_hi", offset_of!(G, bg_block_bitmap_hi), 4),
    ("bg_inode_bitmap_hi", offset_of!(G, bg_inode_bitmap_hi), 4),
    ("bg_inode_table_hi", offset_of!(G, bg_inode_table_hi), 4),
    (
        "bg_free_blocks_count_hi",
        offset_of!(G, bg_free_blocks_count_hi),
        2,
    ),
    (
        "bg_free_inodes_count_hi",
        offset_of!(G, bg_free_inodes_count_hi),
        2,
    ),
    (
        "bg_used_dirs_count_hi",
        offset_of!(G, bg_used_dirs_count_hi),
        2,
    ),
    ("bg_itable_unused_hi", offset_of!(G, bg_itable_unused_hi), 2),
    (
        "bg_block_bitmap_csum_hi",
        offset_of!(G, bg_block_bitmap_csum_hi),
        2,
    ),
    (
        "bg_inode_bitmap_csum_hi",
        offset_of!(G, bg_inode_bitmap_csum_hi),
        2,
    ),
];

/// One field of one primary group descriptor (group 0 half of the time),
/// or random bytes in it.
pub fn gdt(c: &mut Ctx<'_>) -> Result<String> {
    let l = c.l;
    let groups = l.geo.group_count;
    let g = if c.rng.chance(1, 2) {
        0
    } else {
        c.rng.below(u64::from(groups)) as u32
    };
    let ds = l.geo.desc_size as usize;
    let base = l.desc_offset(g);
    if c.rng.chance(3, 10) {
        let what = c.scribble(base, ds)?;
        return Ok(format!("group {g} descriptor: {what}"));
    }
    let fields: Vec<_> = GD_FIELDS.iter().filter(|f| f.1 + f.2 <= ds).collect();
    let &&(name, off, width) = c.rng.pick(&fields).unwrap_or(&&GD_FIELDS[0]);
    let restamp = c.restamp_chosen() && name != "bg_checksum";
    let other = &l.descs[c.rng.below(u64::from(groups)) as usize];
    let d = &l.descs[g as usize];
    let extra: Vec<u64> = match name {
        "bg_block_bitmap_lo" => vec![
            other.block_bitmap(l.wide),
            d.inode_bitmap(l.wide),
            d.inode_table(l.wide) + 1,
            l.geo.blocks_count + 10,
        ],
        "bg_inode_bitmap_lo" => vec![
            other.inode_bitmap(l.wide),
            d.block_bitmap(l.wide),
            l.geo.blocks_count + 10,
        ],
        "bg_inode_table_lo" => vec![
            other.inode_table(l.wide),
            d.inode_table(l.wide) + 1,
            d.block_bitmap(l.wide),
            l.geo.blocks_count - 2,
        ],
        "bg_flags" => vec![1, 2, 3, 4, 7, 0xffff],
        "bg_itable_unused_lo" | "bg_free_inodes_count_lo" => {
            vec![u64::from(l.geo.inodes_per_group), 0]
        }
        "bg_itable_unused_hi" | "bg_free_inodes_count_hi" | "bg_free_blocks_count_hi" => {
            vec![0xffff, 1]
        }
        _ => Vec::new(),
    };
    let what = c.field(base + off as u64, width, &extra)?;
    let note = c.finish(Stamp::Desc(g), restamp)?;
    Ok(format!("group {g} descriptor {name}: {what}{note}"))
}

/// A block or inode bitmap of a group whose bitmap is read (not uninit).
pub fn bitmap(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let inode_map = c.rng.chance(1, 2);
    let flag = if inode_map { 1 } else { 2 };
    let groups: Vec<u32> = (0..l.geo.group_count)
        .filter(|&g| l.descs[g as usize].flags() & flag == 0)
        .collect();
    let Some(&g) = c.rng.pick(&groups) else {
        return Ok(None);
    };
    let d = &l.descs[g as usize];
    let (block, bits, what) = if inode_map {
        (
            d.inode_bitmap(l.wide),
            u64::from(l.geo.inodes_per_group),
            "inode bitmap",
        )
    } else {
        (
            d.block_bitmap(l.wide),
            l.geo.blocks_per_group >> l.geo.cluster_bits,
            "block bitmap",
        )
    };
    let mut map = c.img.block(block)?;
    let bits = bits.min(8 * map.len() as u64);
    let op = match c.rng.below(5) {
        0 | 1 => {
            // Bits where things are: the used part is at the front.
            let n = 1 + c.rng.below(16);
            let span = if c.rng.chance(2, 3) { bits / 4 } else { bits };
            let mut flipped = Vec::new();
            for _ in 0..n {
                let b = c.rng.below(span.max(1));
                map[(b / 8) as usize] ^= 1 << (b % 8);
                flipped.push(b);
            }
            format!("bits {flipped:?} flipped")
        }
        2 => {
            let start = c.rng.below(bits / 4 + 1);
            let n = c.rng.range(8, 256).min(bits - start);
            let set = c.rng.chance(1, 2);
            for b in start..start + n {
                if set {
                    map[(b / 8) as usize] |= 1 << (b % 8);
                } else {
                    map[(b / 8) as usize] &= !(1 << (b % 8));
                }
            }
            format!(
                "bits {start}..{} {}",
                start + n,
                if set { "set" } else { "cleared" }
            )
        }
        3 => {
            let ones = c.rng.chance(1, 3);
            for x in map.iter_mut().take((bits / 8) as usize) {
                *x = if ones { 0xff } else { 0 };
            }
            format!("all {bits} bits {}", if ones { "set" } else { "cleared" })
        }
        _ => {
            let start = c.rng.below(bits / 8) as usize;
            let n = (1 + c.rng.below(32) as usize).min(map.len() - start);
            for x in &mut map[start..start + n] {
                *x = c.rng.next() as u8;
            }
            format!("{n} random bytes at byte {start}")
        }
    };
    c.img.put_block(block, &map)?;
    let restamp = c.restamp_chosen();
    let note = c.finish(super::Stamp::Bitmaps(g), restamp)?;
    Ok(Some(format!(
        "group {g} {what} (block {block}): {op}{note}"
    )))
}
