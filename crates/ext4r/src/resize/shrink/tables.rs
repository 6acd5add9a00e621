//! Moving the tables (bitmaps, inode table) of groups that stay but lie in
//! the part that goes: new places below the new end, the inode table
//! copied there ahead of the commit, then the descriptor switched and the
//! old blocks freed, a group per transaction.

use super::evacuate::copy_blocks;
use super::{Mover, Short};
use crate::resize::error::Result;
use crate::resize::geometry::Shape;
use ext4r_format::group_desc::BG_INODE_UNINIT;

/// Moves every group table of the groups that stay out of the region.
pub(crate) fn move_tables(
    m: &mut Mover<'_>,
    shape: &Shape,
) -> Result<std::result::Result<(), Short>> {
    let geo = shape.old.clone();
    let itb = u64::from(geo.inode_blocks_per_group());
    let wide = m.t.groups().wide();
    let csum = m.t.groups().gdt_csum();
    for g in 0..shape.geo.group_count {
        let d = *m.t.groups().desc(g)?;
        let (bb, ib, it) = (
            d.block_bitmap(wide),
            d.inode_bitmap(wide),
            d.inode_table(wide),
        );
        let it_out = !m.region_part(it, itb).is_empty();
        if !m.in_region(bb) && !m.in_region(ib) && !it_out {
            continue;
        }
        // The bitmaps as they are, so that the commit writes them at the
        // new places.
        m.t.groups().block_map(g)?;
        m.t.groups().inode_map(g)?;
        let goal = geo.group_first_block(g);
        let take = |m: &mut Mover<'_>, len: u64| -> Result<Option<u64>> {
            match m.t.alloc_run(goal, len)? {
                Some((s, n)) if n == len => Ok(Some(s)),
                Some((s, n)) => {
                    m.t.free_blocks(s, n)?;
                    Ok(None)
                }
                None => Ok(None),
            }
        };
        let nbb = if m.in_region(bb) {
            take(m, 1)?
        } else {
            Some(bb)
        };
        let nib = if m.in_region(ib) {
            take(m, 1)?
        } else {
            Some(ib)
        };
        let nit = if it_out { take(m, itb)? } else { Some(it) };
        let (Some(nbb), Some(nib), Some(nit)) = (nbb, nib, nit) else {
            return Ok(Err(Short { blocks: itb + 2 }));
        };
        if nit != it && !(csum && d.flags() & BG_INODE_UNINIT != 0) {
            copy_blocks(m, it, nit, itb)?;
        }
        m.t.desc_mut(g)?.set_locations(nbb, nib, nit);
        for (old, new, n) in [(bb, nbb, 1), (ib, nib, 1), (it, nit, itb)] {
            if old != new {
                m.free(old, n)?;
            }
        }
        m.moved.tables += 1;
        m.commit()?;
    }
    Ok(Ok(()))
}
