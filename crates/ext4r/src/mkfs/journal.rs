//! The internal journal as `ext2fs_add_journal_inode3` makes it, shared by
//! mkfs and tune (`tune2fs -j` calls the same library function mke2fs
//! does): its default size, its place (the midpoint group, extent-mapped
//! with extents, else block-mapped from the start of inode 8's group), and
//! the journal inode with its mapping blocks and jbd2 superblock.

use super::blockmap::MappedFile;
use super::objects::{self, InodeBuf, EXTENTS_FL};
use crate::error::{Error, Result};
use ext4r_format::{blockmap, num};
use ext4r_txn::alloc::{self, BlockAlloc, FreeSpace};
use ext4r_txn::csum::BlockKind;

/// Largest length of an initialised extent.
pub(crate) const EXT_INIT_MAX_LEN: u64 = 1 << 15;
/// The journal's inode.
pub(crate) const JOURNAL_INO: u32 = 8;
/// `EXT2_JOURNAL_TO_FC_BLKS_RATIO`: fast-commit blocks per journal block.
pub(crate) const FC_RATIO: u64 = 64;

/// Where the journal's blocks went.
#[derive(Debug, Clone, Default)]
pub(crate) struct JournalPlace {
    /// `(logical, physical, len)` runs, for an extent-mapped journal.
    pub extents: Vec<(u64, u64, u64)>,
    /// Extent leaf block, when more than four extents were needed.
    pub leaf: Option<u64>,
    /// Block-mapped journal: every block in allocation order, data and
    /// indirect blocks interleaved as ext2/3 place them.
    pub blockmap: Option<MappedFile>,
    /// Journal length in blocks (fast-commit area included).
    pub blocks: u64,
}

/// `ext2fs_default_journal_size`: `None` when the filesystem is too small.
pub(crate) fn default_journal_blocks(blocks: u64) -> Option<u64> {
    Some(match blocks {
        b if b < 2048 => return None,
        b if b < 32768 => 1024,
        b if b < 256 * 1024 => 4096,
        b if b < 512 * 1024 => 8192,
        b if b < 4096 * 1024 => 16384,
        b if b < 8192 * 1024 => 32768,
        b if b < 16384 * 1024 => 65536,
        b if b < 32768 * 1024 => 131072,
        _ => 262144,
    })
}

/// The midpoint group's first block, where the journal goes
/// (`get_midpoint_journal_block`): of the groups around the middle, the
/// one with the most free blocks as the allocator counts them.
pub(crate) fn journal_goal(a: &impl BlockAlloc) -> u64 {
    let geo = a.geo();
    let ngroups = geo.group_count;
    let mid = (geo.blocks_count - geo.first_data_block) / 2;
    let mut group = geo.group_of_block(mid);
    let log = a.log_groups_per_flex();
    // A flex size beyond 2^31 groups only comes from a damaged superblock
    // (tune reads it from disk): treat it as no flex_bg.
    let log_flex = 1u32.checked_shl(log).unwrap_or(0);
    let start;
    if log != 0 && log_flex != 0 && group > log_flex {
        group &= !(log_flex - 1);
        while group < ngroups && a.group_free(group) == 0 {
            group += 1;
        }
        if group == ngroups {
            group = 0;
        }
        start = group;
    } else {
        start = group.saturating_sub(1);
    }
    let end = if group + 1 < ngroups {
        group + 1
    } else {
        group
    };
    let mut best = start;
    for i in start + 1..=end {
        if a.group_free(i) > a.group_free(best) {
            best = i;
        }
    }
    geo.group_first_block(best)
}

/// Allocates a journal of `len` blocks: extent-mapped from `goal`, or
/// block-mapped from the start of inode 8's (flex) group, which
/// `ext2fs_fallocate` uses whatever the goal.
pub(crate) fn allocate(
    a: &mut impl BlockAlloc,
    extents: bool,
    goal: u64,
    len: u64,
) -> Result<JournalPlace> {
    if extents {
        return fallocate_extents(a, goal, len);
    }
    let apb = u64::from(a.geo().block_size) / 4;
    let start = a.inode_goal(JOURNAL_INO);
    let map = MappedFile::allocate(len, apb, start, |g| a.alloc_block(g))?;
    Ok(JournalPlace {
        blockmap: Some(map),
        blocks: len,
        ..Default::default()
    })
}

/// `extent_fallocate` of a new file: runs of up to 32768 blocks taken
/// from `goal` on; the fifth run pushes the extents out of the inode into
/// a leaf block placed just before the first run when possible.
pub(crate) fn fallocate_extents(
    a: &mut impl BlockAlloc,
    goal: u64,
    len: u64,
) -> Result<JournalPlace> {
    let mut place = JournalPlace {
        blocks: len,
        ..JournalPlace::default()
    };
    let (blocks_count, first_data, block_size, ratio) = {
        let g = a.geo();
        (
            g.blocks_count,
            g.first_data_block,
            g.block_size,
            g.cluster_ratio(),
        )
    };
    let goal = a
        .space()
        .first_free(goal, blocks_count - 1)?
        .unwrap_or(goal);
    let mut pblk = goal;
    let mut lblk = 0u64;
    let leaf_max = (u64::from(block_size) - 12) / 12;
    while lblk < len {
        let want = (len - lblk).min(EXT_INIT_MAX_LEN);
        let (s, n) = alloc::new_range(a.space(), pblk, want)?
            .ok_or_else(|| Error::InvalidArgument("no room for the journal".into()))?;
        a.take_range(s, n)?;
        place.extents.push((lblk, s, n));
        if place.extents.len() == 5 {
            let first = place.extents[0].1;
            let g = first.saturating_sub(ratio) & !(ratio - 1);
            place.leaf = Some(a.alloc_block(g)?);
        }
        if place.extents.len() as u64 > leaf_max {
            return Err(Error::InvalidArgument(
                "journal too fragmented: more extents than one leaf block holds".into(),
            ));
        }
        lblk += n;
        pblk = s + n;
        if pblk >= blocks_count {
            pblk = first_data;
        }
    }
    Ok(place)
}

/// What a journal looks like on disk, ready to write.
pub(crate) struct JournalImage {
    /// The journal inode (checksum not yet set).
    pub inode: InodeBuf,
    /// Mapping blocks (indirect blocks, extent leaf) and the jbd2
    /// superblock: `(block, what it is, contents)`, checksums not yet
    /// stamped.
    pub blocks: Vec<(u64, BlockKind, Vec<u8>)>,
    /// The journal's data blocks as `(first, count)` runs (to zero).
    pub data: Vec<(u64, u64)>,
    /// `s_jnl_blocks`: the inode's block map, then the size's high and low
    /// words.
    pub jnl_blocks: [u32; 17],
}

/// Shape of the journal to encode.
pub(crate) struct JournalSpec<'a> {
    pub block_size: usize,
    pub inode_size: usize,
    pub cluster_ratio: u64,
    pub now: i64,
    pub uuid: &'a [u8; 16],
    /// Fast-commit blocks at the end of the journal.
    pub fc_blocks: u64,
    /// jbd2 superblock version 1 (`-J v1_superblock`).
    pub v1: bool,
}

/// Encodes the journal inode, its mapping blocks and jbd2 superblock as
/// `write_journal_inode` leaves them.
///
/// # Errors
/// A run that no extent can hold.
pub(crate) fn encode(j: &JournalPlace, s: &JournalSpec<'_>) -> Result<JournalImage> {
    let bs = s.block_size;
    let sectors = |blocks: u64| blocks * (bs as u64 / 512);
    let mut ji = InodeBuf::new_file(s.inode_size, 0o100600, 1, s.now);
    ji.set_size(j.blocks * bs as u64);
    let mut blocks = Vec::new();
    let data;
    if let Some(map) = &j.blockmap {
        ji.set_sectors(sectors(map.total_blocks()));
        ji.set_block_words(&map.i_block());
        for (b, ptrs) in map.mapping_blocks((bs / 4) as u64) {
            let mut buf = vec![0u8; bs];
            for (i, v) in ptrs.iter().enumerate() {
                blockmap::set_word(&mut buf, i, *v);
            }
            blocks.push((b, BlockKind::Plain, buf));
        }
        data = runs_of(&map.data);
    } else {
        ji.set_flags(EXTENTS_FL);
        let clusters: u64 = j
            .extents
            .iter()
            .map(|e| e.2.div_ceil(s.cluster_ratio))
            .sum();
        ji.set_sectors(sectors(
            (clusters + u64::from(j.leaf.is_some())) * s.cluster_ratio,
        ));
        ji.set_i_block(&objects::extent_root(&j.extents, j.leaf)?);
        if let Some(leaf) = j.leaf {
            let kind = BlockKind::Extent {
                ino: JOURNAL_INO,
                generation: 0,
            };
            blocks.push((leaf, kind, objects::extent_leaf(bs, &j.extents)?));
        }
        data = j.extents.iter().map(|&(_, p, n)| (p, n)).collect();
    }
    let first = data.first().map_or(0, |r| r.0);
    blocks.push((
        first,
        BlockKind::Plain,
        // The block size is at most 64 KiB, the journal's size was capped
        // far below 2^32 blocks when it was chosen.
        objects::journal_superblock(
            num::sat_u32(bs),
            num::sat_u32(j.blocks),
            s.uuid,
            num::sat_u32(s.fc_blocks),
            s.v1,
        ),
    ));
    let mut jnl_blocks = [0u32; 17];
    let ib = ji.i_block();
    for (w, b) in jnl_blocks.iter_mut().zip(blockmap::words(&ib).take(15)) {
        *w = b;
    }
    let size = j.blocks * bs as u64;
    jnl_blocks[15] = num::hi32(size);
    jnl_blocks[16] = num::lo32(size);
    Ok(JournalImage {
        inode: ji,
        blocks,
        data,
        jnl_blocks,
    })
}

/// Consecutive blocks merged into `(first, count)` runs, in order.
fn runs_of(blocks: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &b in blocks {
        match out.last_mut() {
            Some((s, n)) if *s + *n == b => *n += 1,
            _ => out.push((b, 1)),
        }
    }
    out
}
