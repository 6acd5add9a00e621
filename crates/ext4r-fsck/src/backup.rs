//! Falling back to a backup superblock and descriptor table, as e2fsck
//! does when the primary superblock cannot be used or the primary
//! descriptors place a bitmap or inode table where it cannot be
//! ("Group descriptors look bad... trying backup blocks..."). The repair
//! then writes what the backup says over the primary copies.

use std::sync::Arc;

use ext4r::device::BlockDevice;
use ext4r::fs::{Filesystem, OpenOptions};
use ext4r_format::features::Incompat;
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};

use crate::features;
use ext4r_format::GroupNr;

/// The backup superblocks e2fsck tries (its `get_backup_sb`): first where
/// the primary superblock, however damaged, puts group 1 (its
/// `s_blocks_per_group` past its first data block, in its block size:
/// the only guess that finds a bigalloc filesystem's backup, whose groups
/// span clusters), then the first block of group 1 for each block size
/// (8193 for 1 KiB blocks, else 8 × block size).
pub(crate) fn open_backup(dev: &Arc<dyn BlockDevice>, oo: &OpenOptions) -> Option<Filesystem> {
    let probes = (0..7).map(|l| {
        let bs = 1024u32 << l;
        (u64::from(bs) * 8 + u64::from(bs == 1024), bs)
    });
    primary_hint(dev)
        .into_iter()
        .chain(probes)
        .find_map(|(at, bs)| {
            let mut o = oo.clone();
            o.superblock = Some(at);
            o.block_size = Some(bs);
            Filesystem::open_with(dev.clone(), o).ok()
        })
}

/// Group 1's first block and the block size as the primary superblock
/// states them, when it has the magic number and plausible values.
fn primary_hint(dev: &Arc<dyn BlockDevice>) -> Option<(u64, u32)> {
    let sb = primary(dev)?;
    let log = sb.s_log_block_size.get();
    let bs = (log <= 6).then(|| 1024u32 << log)?;
    let per_group = u64::from(sb.s_blocks_per_group.get());
    let at = per_group.checked_add(u64::from(sb.s_first_data_block.get()))?;
    (per_group > 0 && at.checked_mul(u64::from(bs))? < dev.size()).then_some((at, bs))
}

/// The first of e2fsck's ranges for superblock values (its
/// `check_super_block`, whose `check_super_value` stops the check with
/// "Corruption found in superblock") that the superblock leaves, as
/// "name = value"; the ranges [`Superblock::validate`] does not already
/// hold every opened filesystem to, the kernel's being wider (it reads no
/// descriptor size without 64bit, and minds no reserve).
pub(crate) fn out_of_range(sb: &Superblock) -> Option<String> {
    let bs = u64::from(sb.block_size()?);
    let per_block = bs / u64::from(sb.inode_size().max(1));
    let blocks = sb.blocks_count();
    let ds = u64::from(sb.s_desc_size.get());
    let bpg = u64::from(sb.s_blocks_per_group.get());
    let ipg = u64::from(sb.s_inodes_per_group.get());
    let ipg_max = (per_block * bpg.saturating_sub(4)).min((1 << 16) - per_block);
    let checks = [
        ("desc_size", ds, ds <= 1024 && ds & ds.wrapping_sub(1) == 0),
        (
            "r_blocks_count",
            sb.r_blocks_count(),
            sb.r_blocks_count() <= blocks / 2,
        ),
        (
            "reserved_gdt_blocks",
            u64::from(sb.s_reserved_gdt_blocks.get()),
            u64::from(sb.s_reserved_gdt_blocks.get()) <= bs / 4,
        ),
        ("blocks_per_group", bpg, bpg >= 8),
        (
            "clusters_per_group",
            u64::from(sb.s_clusters_per_group.get()),
            sb.s_clusters_per_group.get() >= 8,
        ),
        ("inodes_per_group", ipg, ipg >= per_block && ipg <= ipg_max),
    ];
    checks
        .iter()
        .find(|c| !c.2)
        .map(|(name, value, _)| format!("{name} = {value}"))
}

/// Whether the descriptors pass e2fsck's `ext2fs_check_desc`: each
/// group's bitmaps and inode table inside its group (inside the
/// filesystem with flex_bg), none on a superblock or descriptor copy, no
/// two of them on one block.
pub(crate) fn descs_ok(fs: &Filesystem) -> bool {
    let geo = fs.geometry();
    let wide = fs.superblock().has_incompat(Incompat::BIT64);
    let flex = fs.superblock().has_incompat(Incompat::FLEX_BG);
    let itb = u64::from(geo.inode_blocks_per_group());
    let mut taken: Vec<(u64, u64)> = Vec::new();
    for g in 0..geo.group_count {
        let m = geo.group_meta(g);
        if let Some(s) = m.super_block {
            taken.push((s, 1));
        }
        if let Some((first, n)) = m.old_desc {
            taken.push((first, n));
        }
        if let Some(b) = m.meta_desc {
            taken.push((b, 1));
        }
    }
    let reserved = taken.len();
    // One list per kind, each usually ascending with the group: the sort
    // below then merges four runs (sorting them interleaved was half of
    // this check on an empty 15 TiB image).
    let mut kinds: [Vec<(u64, u64)>; 3] = Default::default();
    for k in &mut kinds {
        k.reserve(geo.group_count as usize);
    }
    for g in 0..geo.group_count {
        let Ok(d) = fs.group_desc(GroupNr(g)) else {
            return false;
        };
        let (lo, hi) = if flex {
            (geo.first_data_block, geo.blocks_count.saturating_sub(1))
        } else {
            (geo.group_first_block(g), geo.group_last_block(g))
        };
        for (k, (b, n)) in [
            (d.block_bitmap(wide), 1),
            (d.inode_bitmap(wide), 1),
            (d.inode_table(wide), itb),
        ]
        .into_iter()
        .enumerate()
        {
            if b < lo || b.saturating_add(n.max(1) - 1) > hi {
                return false;
            }
            kinds[k].push((b, n));
        }
    }
    // Metadata must not overlap; the reserved copies among themselves
    // are laid out by the geometry and not judged here.
    let mut meta: Vec<(u64, u64, bool)> =
        Vec::with_capacity(reserved + kinds.iter().map(Vec::len).sum::<usize>());
    meta.extend(taken.iter().map(|&(b, n)| (b, n, true)));
    for k in kinds {
        meta.extend(k.into_iter().map(|(b, n)| (b, n, false)));
    }
    // A total order on whole elements: the stable sort gives the same
    // sequence as any other.
    meta.sort();
    let mut end = 0u64;
    let mut end_reserved = true;
    for (b, n, res) in meta {
        if b < end && !(res && end_reserved) {
            return false;
        }
        if b + n > end {
            end = b + n;
            end_reserved = res;
        }
    }
    true
}

/// Why the primary superblock or descriptors were passed over.
#[derive(Debug, Clone)]
pub(crate) enum Fallback {
    /// The primary was used.
    None,
    /// A backup serves; the note says why (e2fsck's words).
    Backup(String),
    /// The primary serves although its checksum is wrong: no backup
    /// could be opened (a one-group filesystem has none).
    BadChecksum,
}

/// Opens the filesystem the way e2fsck chooses its superblock when none
/// is given: the primary, unless it cannot be opened, its checksum fails
/// (`EXT2_ET_SB_CSUM_INVALID`), or its descriptors place metadata where it
/// cannot be (`ext2fs_check_desc`); then the first backup that opens (and,
/// for bad descriptors, whose descriptors are sound).
///
/// Features the checker does not support end it first, as e2fsck: in the
/// primary superblock when they keep libext2fs from opening it at all
/// (incompat, ro_compat), no backup tried; else in the superblock used.
pub(crate) fn open_as_e2fsck(
    dev: &Arc<dyn BlockDevice>,
    oo: &OpenOptions,
) -> Result<(Filesystem, Fallback), crate::error::Error> {
    refuse_unsupported_primary(dev)?;
    let (fs, why) = open_fallback(dev, oo)?;
    if let Some(u) = features::unsupported(fs.superblock()) {
        return Err(crate::error::Error::Unsupported(u));
    }
    Ok((fs, why))
}

/// Refuses a filesystem whose primary superblock (its checksum sound)
/// names an unknown checksum algorithm or has features that keep
/// libext2fs from opening it (incompat, ro_compat): e2fsck tries no
/// backup then.
pub(crate) fn refuse_unsupported_primary(
    dev: &Arc<dyn BlockDevice>,
) -> Result<(), crate::error::Error> {
    // libext2fs verifies the checksum first: a primary that fails it is
    // not read for its algorithm or features (e2fsck goes to a backup,
    // whose own count).
    let usable = primary(dev).filter(Superblock::checksum_matches);
    if usable.as_ref().is_some_and(|sb| !sb.checksum_type_known()) {
        return Err(crate::error::Error::UnknownChecksum);
    }
    match usable.and_then(|sb| features::unsupported(&sb)) {
        Some(u) if u.incompat || u.ro_compat => Err(crate::error::Error::Unsupported(u)),
        _ => Ok(()),
    }
}

/// The primary superblock, when it has the magic number.
pub(crate) fn primary(dev: &Arc<dyn BlockDevice>) -> Option<Superblock> {
    let mut buf = vec![0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET).ok()?;
    Superblock::parse(&buf).ok()
}

fn open_fallback(
    dev: &Arc<dyn BlockDevice>,
    oo: &OpenOptions,
) -> Result<(Filesystem, Fallback), crate::error::Error> {
    let fs = match Filesystem::open_with(dev.clone(), oo.clone()) {
        Ok(fs) => fs,
        Err(e) => {
            return match open_backup(dev, oo) {
                Some(b) => Ok((
                    b,
                    Fallback::Backup(format!(
                        "Superblock invalid ({}), trying backup blocks...",
                        ext4r::error::chain(&e)
                    )),
                )),
                None => Err(crate::error::Error::NoFilesystem(e)),
            }
        }
    };
    if fs.superblock().verify_checksum().is_err() {
        return Ok(match open_backup(dev, oo) {
            Some(b) => (
                b,
                Fallback::Backup(
                    "Superblock checksum does not match superblock, trying backup blocks...".into(),
                ),
            ),
            None => match out_of_range(fs.superblock()) {
                Some(why) => return Err(crate::error::Error::CorruptSuperblock(why)),
                None => (fs, Fallback::BadChecksum),
            },
        });
    }
    if let Some(why) = out_of_range(fs.superblock()) {
        if let Some(b) = open_backup(dev, oo).filter(|b| out_of_range(b.superblock()).is_none()) {
            return Ok((
                b,
                Fallback::Backup(format!(
                    "Corruption found in superblock.  ({why}).  Trying backup blocks..."
                )),
            ));
        }
        // e2fsck stops here (exit 8) rather than check by values the
        // kernel would read past.
        return Err(crate::error::Error::CorruptSuperblock(why));
    }
    if fs.geometry().group_count > 1 && !descs_ok(&fs) {
        if let Some(b) = open_backup(dev, oo).filter(descs_ok) {
            return Ok((
                b,
                Fallback::Backup("Group descriptors look bad... trying backup blocks...".into()),
            ));
        }
    }
    Ok((fs, Fallback::None))
}
