//! Making a filesystem, as a library call: [`format()`] writes a new ext2,
//! ext3 or ext4 filesystem to a device with mke2fs's defaults and options;
//! [`plan`] decides the layout without writing (mke2fs -n).
//!
//! The work is split so that each step can be read against e2fsprogs:
//! `MkfsOptions::resolve` is mke2fs's option processing, `layout` decides
//! every block's place, `objects` encodes the few objects a new filesystem
//! holds, and `write` emits them in sorted, merged runs.

mod args;
pub(crate) mod blockmap;
mod extents;
mod groups;
pub(crate) mod journal;
mod layout;
mod notice;
pub(crate) mod objects;
mod params;
pub(crate) mod quota;
pub mod resize_inode;
mod write;

pub use args::parse_size;
pub use notice::Notice;
pub use params::reproducible_ids;
pub use params::{parse_uuid, Extended, MkfsOptions};

use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::num;
use ext4r_txn::alloc::BlockAlloc;
use layout::{DirPlace, Layout};

/// What was made: enough to print mke2fs's summary.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Filesystem type name used for the defaults (ext2, ext3, ext4).
    pub fs_type: String,
    /// The usage types applied (`-T` or chosen from the size).
    pub usage_types: Vec<String>,
    /// Block size in bytes.
    pub block_size: u32,
    /// Cluster size in bytes.
    pub cluster_size: u64,
    /// Blocks in the filesystem.
    pub blocks_count: u64,
    /// Reserved blocks.
    pub r_blocks_count: u64,
    /// Inodes in the filesystem.
    pub inodes_count: u32,
    /// Groups.
    pub group_count: u32,
    /// Blocks per group.
    pub blocks_per_group: u64,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// First data block.
    pub first_data_block: u64,
    /// Groups with superblock backups (after group 0), by first block.
    pub backups: Vec<u64>,
    /// Journal blocks (0 without a journal).
    pub journal_blocks: u64,
    /// Feature names.
    pub features: Vec<String>,
    /// The filesystem UUID.
    pub uuid: [u8; 16],
    /// Label.
    pub label: String,
    /// Stride and stripe width (blocks).
    pub stride: u32,
    /// Stripe width (blocks).
    pub stripe_width: u32,
    /// Bytes handed to the device.
    pub bytes_written: u64,
    /// What mke2fs would say on the way, in its order: warnings (an
    /// unknown usage type, no room for a journal) and what it asks before
    /// going on (see [`Notice`]).
    pub notices: Vec<Notice>,
    /// Whether the device was discarded first.
    pub discarded: bool,
}

/// A filesystem decided down to every block, before anything is written.
///
/// [`plan`] resolves the options and lays out the whole filesystem (group
/// tables, root, lost+found, reserved inodes, resize inode, journal, quota
/// and orphan files) without touching a device, so every refusal mke2fs
/// makes happens here; [`Plan::write`] consumes the value. A tool that
/// refuses therefore leaves the device as it was: the plan is the only way
/// to the writer.
pub struct Plan {
    layout: Layout,
    params: params::Params,
}

impl Plan {
    /// mke2fs's summary of what will be made (nothing written yet).
    pub fn summary(&self) -> Summary {
        summary(&self.layout, &self.params, 0, false)
    }

    /// Bytes the filesystem spans: the device must hold at least this many.
    pub fn fs_bytes(&self) -> u64 {
        self.layout.geo.blocks_count * u64::from(self.layout.geo.block_size)
    }

    /// Writes the planned filesystem to `dev`. `zeroes_on_discard` says
    /// whether a successful discard makes the device read back zeros (true
    /// for image files, where discard punches holes), which lets inode
    /// tables and the journal go unwritten.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `dev` is smaller than the planned
    /// filesystem (checked before the first write), or an I/O error.
    pub fn write(self, dev: &dyn BlockDevice, zeroes_on_discard: bool) -> Result<Summary> {
        let Plan {
            mut layout,
            mut params,
        } = self;
        let len = layout.geo.blocks_count * u64::from(layout.geo.block_size);
        if dev.size() < len {
            return Err(Error::InvalidArgument(format!(
                "the device holds {} bytes, fewer than the {len} the filesystem needs",
                dev.size()
            )));
        }
        let mut zeroed = params.assume_prezeroed;
        let mut discarded = false;
        if params.discard
            && !params.assume_prezeroed
            && ext4r_txn::bulk::RunWriter::new(dev).discard_range(0, len)?
        {
            discarded = true;
            zeroed = zeroes_on_discard;
        }
        if zeroed {
            params.lazy_itable_init = true;
            if params.assume_prezeroed {
                params.lazy_journal_init = true;
            }
        }
        layout.set_itable_mode(params.lazy_itable_init, zeroed);
        let written = write::write(dev, &mut layout, &params, zeroed && discarded)?;
        Ok(summary(&layout, &params, written, discarded))
    }
}

/// Decides the whole filesystem for `opts` without touching any device
/// (mke2fs -n, and the first half of [`format()`]). Where mke2fs asks
/// before going on, the plan goes on, as `mke2fs -F` does: the caller
/// chose the options; [`Summary::notices`] says what mke2fs would have
/// said.
///
/// # Errors
/// [`Error::InvalidArgument`] for options or sizes mke2fs would refuse,
/// with its message.
pub fn plan(opts: &MkfsOptions) -> Result<Plan> {
    plan_with(opts, &mut |_| true)
}

/// [`plan`], telling `on_notice` each [`Notice`] as mke2fs would say it
/// and in its order. For a notice where mke2fs stops unless forced
/// ([`Notice::needs_consent`]) the answer decides: `false` ends the plan.
/// The answer to any other notice is ignored.
///
/// # Errors
/// As [`plan`]; [`Error::Cancelled`] when `on_notice` declined.
pub fn plan_with(opts: &MkfsOptions, on_notice: &mut dyn FnMut(&Notice) -> bool) -> Result<Plan> {
    let mut notices = notice::Notices::new(on_notice);
    let params = opts.resolve(&mut notices)?;
    let (layout, mut params) = build_with(params, &mut notices)?;
    params.notices = notices.said;
    Ok(Plan { layout, params })
}

/// Formats `dev`: [`plan`], then [`Plan::write`]. Nothing is written when
/// the options, the size or the device are refused.
///
/// # Errors
/// Invalid options, a device smaller than the filesystem, or an I/O error
/// from the device.
pub fn format(
    dev: &dyn BlockDevice,
    opts: &MkfsOptions,
    zeroes_on_discard: bool,
) -> Result<Summary> {
    plan(opts)?.write(dev, zeroes_on_discard)
}

fn build_with(
    mut p: params::Params,
    notices: &mut notice::Notices<'_>,
) -> Result<(Layout, params::Params)> {
    let mut layout = Layout::initialize(&p)?;
    // Journal size (figure_journal_size): the default by size, or the
    // requested size within bounds.
    let blocks = layout.geo.blocks_count;
    let mut journal = p.journal_blocks;
    // The fast-commit area follows the journal proper (ext2fs's
    // EXT2_JOURNAL_TO_FC_BLKS_RATIO of it, or -J fast_commit_size=).
    let fast_commit = layout.sb.has_compat(Compat::FAST_COMMIT);
    let mut fc = 0;
    if let Some(req) = journal {
        let default = journal::default_journal_blocks(blocks);
        let fc_req = p.journal_fc_request.filter(|&k| fast_commit && k > 0);
        if req == 0 && fc_req.is_none() {
            journal = default.filter(|d| *d > 0);
            fc = if fast_commit {
                journal.map_or(0, |j| j / journal::FC_RATIO)
            } else {
                0
            };
        } else if default.is_none() {
            journal = None;
        } else {
            let proper = if req == 0 { default.unwrap_or(0) } else { req };
            // A requested journal size keeps the default's area
            // (ext2fs_get_journal_params sized it before the request).
            fc = match fc_req {
                Some(k) => k,
                None if fast_commit => default.unwrap_or(0) / journal::FC_RATIO,
                None => 0,
            };
            let total = proper + fc;
            if !(1024..=10_240_000).contains(&total) {
                return Err(Error::InvalidArgument(format!(
                    "The total requested journal size is {total} blocks; it must be\n\
                     between 1024 and 10240000 blocks.  Aborting."
                )));
            } else if total > layout.sb.free_blocks_count() / 2 {
                return Err(Error::InvalidArgument(
                    "Total journal size too big for filesystem.".into(),
                ));
            }
            journal = Some(proper);
        }
        if default.is_none() {
            notices.say(Notice::NoJournal)?;
        }
        if journal.is_none() {
            let mut f = layout.sb.features();
            f.compat.remove(Compat::HAS_JOURNAL | Compat::ORPHAN_FILE);
            layout.sb.set_features(f);
            p.features = f;
            fc = 0;
        }
    }
    let journal = journal.map(|j| j + fc);
    p.journal_fc_blocks = fc;
    p.journal_blocks = journal;
    if p.packed_meta_blocks && layout.sb.has_incompat(Incompat::FLEX_BG) {
        layout.allocate_tables_packed()?;
    } else {
        layout.allocate_tables(p.raid_stride)?;
    }
    layout.convert_to_cluster_map();
    let overhead = layout
        .used
        .count_used(layout.geo.first_data_block, layout.geo.blocks_count - 1)
        .div_ceil(layout.geo.cluster_ratio());
    layout.snapshot_itable_unused();
    create_objects(&mut layout, &p)?;
    let overhead = overhead
        + journal.unwrap_or(0).div_ceil(layout.geo.cluster_ratio())
        + layout.geo.first_data_block;
    layout.sb.s_overhead_clusters.set(num::sat_u32(overhead));
    Ok((layout, p))
}

/// Root, lost+found, reserved inodes, the resize inode and the journal, in
/// mke2fs's order (the order decides which blocks each gets).
fn create_objects(l: &mut Layout, p: &params::Params) -> Result<()> {
    let bs = u64::from(l.geo.block_size);
    let extents = l.sb.has_incompat(Incompat::EXTENTS);
    // Root directory.
    l.alloc_inode(2, true)?;
    let b = l.new_block(l.inode_goal(2))?;
    l.root = DirPlace { blocks: vec![b] };
    // lost+found: grown until it is 16 KiB and two blocks, as mke2fs does.
    l.alloc_inode(11, true)?;
    let mut count = 1u64;
    let mut size = 0u64;
    for _ in 1..12 {
        size += bs;
        if size >= 16 * 1024 && size >= 2 * bs {
            break;
        }
        count += 1;
    }
    if l.sb.has_incompat(Incompat::INLINE_DATA) {
        // mke2fs makes lost+found inline first; its first expansion only
        // moves the inline entries into a block.
        count = count.saturating_sub(1).max(1);
    }
    // ext2fs_expand_dir: a block in the cluster of the previous one is
    // taken without allocating (bigalloc).
    let mut blocks: Vec<u64> = Vec::new();
    let mut clusters = 0;
    for _ in 0..count {
        let b = match blocks.last() {
            Some(&prev) if l.same_cluster(prev, prev + 1) => prev + 1,
            last => {
                clusters += 1;
                l.new_block(last.map_or_else(|| l.inode_goal(11), |&p| p + 1))?
            }
        };
        blocks.push(b);
    }
    if extents && write::block_runs(&blocks).len() > 4 {
        // Metadata scattered by a tiny group leaves lost+found more pieces
        // than its inode holds; mke2fs would grow an extent tree here.
        return Err(Error::InvalidArgument(
            "lost+found too fragmented for an in-inode extent list".into(),
        ));
    }
    l.lost_found = DirPlace { blocks };
    l.lost_found_clusters = clusters;
    // Reserved inodes, then the bad-block inode.
    for ino in 3..11 {
        l.alloc_inode(ino, false)?;
    }
    l.alloc_inode(1, false)?;
    // Resize inode.
    if l.sb.has_compat(Compat::RESIZE_INODE) {
        let goal = resize_inode::dind_goal(&l.geo);
        l.resize_dind = Some(l.new_block(goal)?);
    }
    // Journal.
    if let Some(jblocks) = p.journal_blocks {
        // packed_meta_blocks sets mke2fs's journal location to block 0: the
        // journal follows the packed tables instead of going to the middle.
        // (A block-mapped journal ignores the goal either way.)
        let goal = if p.packed_meta_blocks {
            0
        } else {
            journal::journal_goal(l)
        };
        l.journal = Some(journal::allocate(l, extents, goal, jblocks)?);
    }
    if l.sb.has_ro_compat(ext4r_format::features::RoCompat::QUOTA) {
        create_quota_files(l, p)?;
    }
    if l.sb.has_compat(Compat::ORPHAN_FILE) {
        // ext2fs_create_orphan_file: the next free inode (12), blocks taken
        // one by one from the start of the filesystem.
        let blocks = match p.orphan_file_size {
            Some(bytes) => bytes / bs,
            None => {
                let n = l.geo.blocks_count;
                let b = if n < 128 * 1024 {
                    32
                } else if n < 2 * 1024 * 1024 {
                    n / 4096
                } else {
                    512
                };
                let mask = l.geo.cluster_ratio() - 1;
                (b + mask) & !mask
            }
        };
        let ino = l.next_free_inode();
        l.alloc_inode(ino, false)?;
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        let mut last = 0;
        for lblk in 0..blocks {
            // With bigalloc the rest of the last block's cluster is used
            // first, without a new allocation.
            let b = if lblk != 0 && l.same_cluster(last, last + 1) {
                last + 1
            } else {
                l.new_block(last)?
            };
            match runs.last_mut() {
                Some((_, s, n)) if *s + *n == b && *n < 32768 => *n += 1,
                _ => runs.push((lblk, b, 1)),
            }
            last = b;
        }
        if runs.len() > 4 {
            return Err(Error::InvalidArgument(
                "orphan file too fragmented for an in-inode extent list".into(),
            ));
        }
        l.orphan_file = Some((ino, runs));
    }
    Ok(())
}

/// mke2fs's create_quota_inodes: the usage of the inodes made so far (the
/// root directory and lost+found; the reserved inodes do not count) per
/// user, group and project, written as quota files in inodes 3, 4 and,
/// for projects, the next free inode.
fn create_quota_files(l: &mut Layout, p: &params::Params) -> Result<()> {
    use std::collections::BTreeMap;
    let cluster_bytes = u64::from(l.geo.block_size) << l.geo.cluster_bits;
    let (uid, gid) = p.root_owner;
    // (uid, gid, project, bytes): i_blocks counts whole clusters.
    let owners = [
        (uid, gid, 0u32, cluster_bytes),
        (0, 0, 0, l.lost_found_clusters * cluster_bytes),
    ];
    for (qtype, bit) in [(0, quota::USR), (1, quota::GRP), (2, quota::PRJ)] {
        if p.quota_types & bit == 0 {
            continue;
        }
        let mut usage: BTreeMap<u32, quota::Usage> = BTreeMap::new();
        for &(u, g, prj, bytes) in &owners {
            let id = [u, g, prj][qtype];
            let e = usage.entry(id).or_default();
            e.inodes += 1;
            e.space += bytes;
        }
        let usage = crate::quota::from_usage(&usage);
        let ino = match qtype {
            0 => 3,
            1 => 4,
            _ => {
                let i = l.next_free_inode();
                l.alloc_inode(i, false)?;
                i
            }
        };
        let file = quota::QuotaFile::build(qtype, &usage);
        let blocks = quota::allocate(l, &file)?;
        l.quota.push(layout::QuotaPlace {
            qtype,
            ino,
            file,
            blocks,
        });
    }
    Ok(())
}

fn summary(l: &Layout, p: &params::Params, written: u64, discarded: bool) -> Summary {
    let geo = &l.geo;
    Summary {
        fs_type: p.fs_type.clone(),
        usage_types: p.usage_types.clone(),
        block_size: geo.block_size,
        cluster_size: u64::from(geo.block_size) << geo.cluster_bits,
        blocks_count: geo.blocks_count,
        r_blocks_count: l.sb.r_blocks_count(),
        inodes_count: l.sb.s_inodes_count.get(),
        group_count: geo.group_count,
        blocks_per_group: geo.blocks_per_group,
        inodes_per_group: geo.inodes_per_group,
        first_data_block: geo.first_data_block,
        backups: geo
            .backup_groups()
            .map(|g| geo.group_first_block(g))
            .collect(),
        journal_blocks: l.journal.as_ref().map_or(0, |j| j.blocks),
        features: l.sb.features().names(),
        uuid: p.uuid,
        label: String::from_utf8_lossy(&p.label).into_owned(),
        stride: p.raid_stride,
        stripe_width: p.raid_stripe_width,
        bytes_written: written,
        notices: p.notices.clone(),
        discarded,
    }
}
