//! Moving the internal journal out of the part that goes. Its blocks are
//! copied to free blocks below the new end (data: nothing refers to them
//! yet), then one transaction, logged in the old journal, points inode 8
//! and the superblock's copy of its map (`s_jnl_blocks`) at the new place
//! and frees the old blocks. The journal is empty before the copy (every
//! transaction of a resize is checkpointed at once), so the copy is a
//! journal with nothing to replay and the next sequence number; a replay
//! of the move by anyone lands it whole. The volume is then opened again,
//! on the journal's new place.

use super::evacuate::{relocate, Copy};
use super::{Mover, Short};
use crate::error::Error;
use crate::resize::error::Result;
use ext4r_format::features::Compat;
use ext4r_format::inode::Inode;
use ext4r_format::num;
use ext4r_txn::map;
use ext4r_txn::volume::{Volume, VolumeOptions};

/// `s_jnl_backup_type` of a superblock that keeps inode 8's map.
const JNL_BACKUP_BLOCKS: u8 = 1;

/// Moves the journal when any of its blocks lies in the region (past
/// `end` or in `extra`). Returns the volume, opened again when the
/// journal moved, and whether it did (or the shortfall: no room).
pub(crate) fn move_journal(
    mut vol: Volume,
    end: u64,
    extra: &[(u64, u64)],
    dry: bool,
    vopts: &VolumeOptions,
) -> Result<(Volume, std::result::Result<bool, Short>)> {
    let sb = vol.superblock().clone();
    let jino = sb.s_journal_inum.get();
    if !sb.has_compat(Compat::HAS_JOURNAL) || jino == 0 {
        return Ok((vol, Ok(false)));
    }
    let step: std::result::Result<bool, Short> = {
        let mut m = Mover::new(&mut vol, end, extra.to_vec(), dry);
        let rec = m.t.read_inode(jino)?;
        let inode =
            Inode::parse(&rec).map_err(|e| Error::corrupt("journal inode".to_string(), e))?;
        let (runs, nodes) = map::runs_and_nodes(&m.t, jino, &inode, false)?;
        let inside = runs
            .iter()
            .all(|r| m.region_part(r.physical, r.len).is_empty())
            && nodes.iter().all(|&b| !m.in_region(b));
        let copy = if dry { Copy::First } else { Copy::All };
        if inside {
            Ok(false)
        } else if !relocate(&mut m, jino, true, copy)? {
            m.t.abandon();
            let blocks = inode.size() / u64::from(m.t.geometry().block_size);
            Err(Short { blocks })
        } else {
            moved_journal(&mut m, jino)?;
            Ok(true)
        }
    };
    if step != Ok(true) {
        return Ok((vol, step));
    }
    let dev = std::sync::Arc::clone(vol.device());
    vol.close()?;
    let vol = Volume::open(dev, vopts.clone())?;
    Ok((vol, Ok(true)))
}

/// Points the superblock's copy of the journal's map at its new place and
/// commits the move.
fn moved_journal(m: &mut Mover<'_>, jino: u32) -> Result<()> {
    {
        let rec = m.t.read_inode(jino)?;
        let inode =
            Inode::parse(&rec).map_err(|e| Error::corrupt("journal inode".to_string(), e))?;
        let sbm = m.t.superblock_mut();
        if sbm.s_jnl_backup_type == JNL_BACKUP_BLOCKS {
            let words = inode.block_words();
            for (k, w) in words.iter().enumerate() {
                sbm.s_jnl_blocks[k].set(*w);
            }
            sbm.s_jnl_blocks[15].set(num::hi32(inode.size()));
            sbm.s_jnl_blocks[16].set(num::lo32(inode.size()));
        }
    }
    m.commit()
}
