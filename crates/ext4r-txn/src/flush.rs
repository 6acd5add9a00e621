//! Writing a changed superblock back the way libext2fs' `ext2fs_flush`
//! does with `EXT2_FLAG_SUPER_ONLY`, so that primary and backups end up
//! byte for byte as tune2fs leaves them:
//!
//! - `s_wtime` becomes the current time;
//! - every backup copy (groups that hold one, group 0 excluded) is written
//!   with `s_block_group_nr` set to its group (capped at 65535), the
//!   `VALID` state bit and the `needs_recovery` feature cleared, and its
//!   own checksum;
//! - optionally the group descriptor table and all its copies (when the
//!   descriptors' checksums changed or their tables moved);
//! - the primary superblock with its own state and features.
//!
//! Order: when descriptors are written and the primary table lies right
//! after the superblock (outside meta_bg), the primary superblock and that
//! table go first, in one write, so that a power cut leaves both old or
//! both new; then the backups. A cut before that write leaves the old
//! filesystem, one after it the new one with some backups still old
//! (e2fsck does not compare what tune changes, and the next full write
//! refreshes them). Otherwise, as `ext2fs_flush`: descriptors and backups
//! first, the primary superblock last.

use crate::csum::Checksums;
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::features::Incompat;
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::GroupDesc;
use ext4r_format::num;
use ext4r_format::superblock::{Superblock, STATE_VALID, SUPERBLOCK_OFFSET};

/// Writes `sb` (primary and backups) as `ext2fs_flush` does; with `descs`
/// (the raw descriptor table, `desc_blocks` blocks) also every copy of the
/// descriptor table. `now` becomes `s_wtime`. With `master_only` (libext2fs'
/// `EXT2_FLAG_MASTER_SB_ONLY`) backup superblocks and the backup copies of
/// the old-style descriptor table are left alone.
///
/// # Errors
/// I/O errors, or [`Error::Corrupt`] when the geometry is unusable.
pub fn flush_super(
    dev: &dyn BlockDevice,
    sb: &mut Superblock,
    descs: Option<&[u8]>,
    now: i64,
    master_only: bool,
) -> Result<()> {
    let geo = Geometry::from_superblock(sb).map_err(|e| Error::corrupt("superblock", e))?;
    let bs = u64::from(geo.block_size);
    // ext2fs_flush stores the 32-bit time only.
    sb.s_wtime.set(num::lo32(now as u64));
    sb.s_block_group_nr.set(0);
    let per = geo.descs_per_block();
    let old_blocks = u64::from(match geo.meta_bg {
        Some(first) => first.min(geo.desc_blocks()),
        None => geo.desc_blocks(),
    });
    let old_len = |table: &[u8]| num::index(old_blocks * bs).min(table.len());
    Checksums::stamp_superblock(sb);
    let sb_bytes = sb.to_bytes();
    let sb_end = SUPERBLOCK_OFFSET + sb_bytes.len() as u64;
    // The primary table, when all of it follows the superblock's block.
    let all_old = geo.meta_bg.is_none_or(|first| first >= geo.desc_blocks());
    let primary = descs.filter(|_| all_old).and_then(|t| {
        let (first, _) = geo.group_meta(0).old_desc?;
        let at = first * bs;
        (at >= sb_end && at - sb_end < bs).then(|| (at, &t[..old_len(t)]))
    });
    dev.flush()?;
    if let Some((at, table)) = primary {
        // The commit: both in one write, then the backups.
        let sb_len = sb_bytes.len();
        let gap = num::index(at - sb_end);
        let mut buf = vec![0u8; sb_len + gap + table.len()];
        dev.read_at(&mut buf[sb_len..sb_len + gap], sb_end)?;
        buf[..sb_len].copy_from_slice(&sb_bytes);
        buf[sb_len + gap..].copy_from_slice(table);
        dev.write_at(&buf, SUPERBLOCK_OFFSET)?;
        dev.flush()?;
    }
    for g in 0..geo.group_count {
        let meta = geo.group_meta(g);
        if g != 0 && !master_only {
            if let Some(blk) = meta.super_block {
                dev.write_at(&superblock_copy(sb, g), blk * bs)?;
            }
        }
        let Some(table) = descs else { continue };
        let copy = if g == 0 {
            primary.is_none()
        } else {
            !master_only
        };
        if let Some((first, _)) = meta.old_desc.filter(|_| copy) {
            dev.write_at(&table[..old_len(table)], first * bs)?;
        }
        if let Some(blk) = meta.meta_desc {
            let off = num::index(u64::from(g / per) * bs);
            if let Some(block) = table.get(off..off + num::index(bs)) {
                dev.write_at(block, blk * bs)?;
            }
        }
    }
    dev.flush()?;
    if primary.is_none() {
        // As ext2fs_flush: the primary superblock last.
        write_primary_bytes(dev, &sb_bytes)?;
    }
    Ok(())
}

/// Writes `sb` as the primary superblock alone, its checksum stamped, and
/// flushes: for the changes that touch no backup (journal recovery's
/// marks, `needs_recovery` set before a journaled commit and cleared
/// after its checkpoint), as libext2fs' `EXT2_FLAG_MASTER_SB_ONLY`.
///
/// # Errors
/// I/O errors.
pub fn write_primary(dev: &(impl BlockDevice + ?Sized), sb: &mut Superblock) -> Result<()> {
    Checksums::stamp_superblock(sb);
    write_primary_bytes(dev, &sb.to_bytes())
}

/// The one write of the primary superblock's bytes.
fn write_primary_bytes(dev: &(impl BlockDevice + ?Sized), bytes: &[u8]) -> Result<()> {
    dev.write_at(bytes, SUPERBLOCK_OFFSET)?;
    dev.flush()?;
    Ok(())
}

/// Superblock `sb` as it is written in group `g` (the primary for 0), as
/// `ext2fs_flush` writes each copy: `s_block_group_nr` the group (capped at
/// 65535); in the backups the `VALID` state bit and `needs_recovery`
/// cleared; its own checksum.
pub fn superblock_copy(sb: &Superblock, g: u32) -> [u8; ext4r_format::superblock::SUPERBLOCK_SIZE] {
    let mut c = sb.clone();
    c.s_block_group_nr.set(g.min(65535) as u16);
    if g != 0 {
        c.s_state.set(sb.s_state.get() & !STATE_VALID);
        c.s_feature_incompat
            .set(sb.s_feature_incompat.get() & !Incompat::RECOVER.bits());
    }
    Checksums::stamp_superblock(&mut c);
    c.to_bytes()
}

/// The primary descriptor table as bytes: `desc_blocks` blocks holding
/// `descs` in group order (the rest of the last block zero).
///
/// # Errors
/// [`Error::Corrupt`] when a descriptor cannot be written at the
/// filesystem's descriptor size.
pub fn descriptor_table(geo: &Geometry, descs: &[GroupDesc]) -> Result<Vec<u8>> {
    let bs = geo.block_size as usize;
    let dsize = geo.desc_size as usize;
    let mut table = vec![0u8; geo.desc_blocks() as usize * bs];
    for (g, d) in descs.iter().enumerate() {
        let at = g * dsize;
        let Some(slot) = table.get_mut(at..at + dsize) else {
            break;
        };
        d.write(slot, dsize).map_err(|e| {
            Error::corrupt(
                crate::error::Location::group(num::sat_u32(g)).of("descriptor"),
                e,
            )
        })?;
    }
    Ok(table)
}
