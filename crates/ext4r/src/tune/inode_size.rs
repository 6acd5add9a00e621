//! `-I NEW_INODE_SIZE`: larger inode records, as tune2fs 1.47's
//! `resize_inode` makes them, with the same checks, messages and result
//! (`s_inode_size`, the inode tables' size, free counts; `s_min_extra_isize`
//! and `s_want_extra_isize` left as they are, every record's
//! `i_extra_isize` 0 as its copy leaves it), and on flex_bg filesystems
//! too, which tune2fs refuses.
//!
//! # Design
//!
//! tune2fs grows each table in place: it moves the file blocks that follow
//! the table elsewhere, then rewrites the table over its old place and the
//! blocks after it. That needs the blocks right after every table, which
//! with flex_bg are the next group's table, and a power cut while the
//! tables are rewritten leaves records of two sizes under a superblock
//! that names one (tune2fs relies on its undo file).
//!
//! Here every group's new table goes to a place of its own that overlaps
//! no table in use ([`super::isize_place`]): a free run (without flex_bg
//! inside the group, with flex_bg anywhere, the flex group's tables back
//! to back where they fit), or else the window whose file blocks are
//! fewest, which [`super::isize_move`] empties first by moving those
//! blocks (whole extents, block-map blocks, xattr blocks) and updating
//! every reference. Then [`super::isize_table`] writes the new tables
//! there, and the commit switches the descriptors to them and frees the
//! old tables. The same path serves flex_bg and the rest; the net block
//! count is tune2fs's (a new table taken, the old one freed), so the
//! superblock and free counts come out as tune2fs's.
//!
//! # Order of writes (copy, then switch)
//!
//! 1. Moved file data into free blocks; then mapping/xattr blocks; then
//!    the inode records that point at them, in the old tables (each step
//!    flushed before the next; see [`super::isize_move`]).
//! 2. The new tables, into their places (free or emptied in step 1).
//! 3. The commit, at the end of the run: block bitmaps (new tables in use,
//!    old ones and vacated extent tails free) with their checksums, then
//!    the primary superblock (`s_inode_size`) and the primary descriptor
//!    table in one write ([`super::write`]), then the backups.
//!
//! Until the commit write the old filesystem stands untouched but for
//! files pointing at identical copies in blocks its bitmaps call free, and
//! (after the bitmaps) bitmaps that name the new tables; e2fsck repairs
//! both (block bitmap differences, free counts), and the run can be
//! repeated. After it the new filesystem stands, some backups possibly
//! still old. The test `inode_size_survives_a_cut_at_any_write` cuts the
//! power after each of these writes and checks exactly that. Left open:
//! a torn commit write (the superblock and the table are adjacent, but a
//! disk promises atomic sectors only), and meta_bg, whose descriptors
//! are apart from the superblock (written first, the superblock last, as
//! `ext2fs_flush` does; a cut between them would need `e2fsck -b`).
//!
//! # Limits
//!
//! - The new tables need their whole size free (or freed by moving files)
//!   while the old ones still stand; tune2fs needs only the growth. Between
//!   the two, this refuses as tune2fs does when it lacks room ("Not enough
//!   space to increase inode size").
//! - A moved extent needs a free run of its length; none found is a
//!   refusal too (extents are never split).
//! - bigalloc is refused, and so is `-I` with other changes that rewrite
//!   metadata in the same run.
//! - tune2fs's checksum pass also recomputes ea_inode xattr hashes and
//!   directory and extent checksums; with the checksum seed unchanged they
//!   come out as they were, so only the inode records are rewritten here.

use super::isize_fixed::fixed_blocks;
use super::isize_move::{Mover, PlanError};
use super::isize_place::{place_tables, NoSpace};
use super::isize_table::{write_tables, Sizes};
use super::{Refused, Run, Step};
use crate::device::BlockDevice;
use crate::error::Result;
use crate::meta::Meta;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::group_desc::BG_INODE_UNINIT;
use ext4r_format::num;
use std::fmt::Write as _;
use std::sync::Arc;

const NO_SPACE: &str = "Not enough space to increase inode size \n";
const FAILED: &str = "Failed to change inode size\n";

impl Run<'_, '_> {
    /// tune2fs's checks of `-I` right after opening the filesystem, before
    /// any other change.
    pub(super) fn check_inode_size(&mut self, new: u64) -> Step {
        let cur = u64::from(self.sb.inode_size());
        let bs = self.sb.block_size().map_or(0, u64::from);
        if new == cur {
            let _ = writeln!(self.err, "The inode size is already {new}");
            return Err(Refused);
        }
        if new < cur {
            return self.refuse("Shrinking inode size is not supported\n");
        }
        if new > bs {
            let _ = writeln!(self.err, "Invalid inode size {new} (max {bs})");
            return Err(Refused);
        }
        if u16::try_from(new).is_err() {
            // 64 KiB blocks allow 65536, which s_inode_size cannot hold.
            let _ = writeln!(self.err, "Invalid inode size {new} (max {})", u16::MAX);
            return Err(Refused);
        }
        self.check_fsck_needed()
    }

    /// `-I`: the change itself, where tune2fs makes it (after `-U`, before
    /// the checksum rewrites).
    pub(super) fn change_inode_size(
        &mut self,
        dev: &Arc<dyn BlockDevice>,
        new: u32,
    ) -> Result<Step> {
        if self.meta.is_some() || !self.csum.is_empty() {
            return Ok(self.refuse(
                "tune.ext4r: -I cannot be combined yet with changes that rewrite other \
                 metadata (checksums, journal, quota); run them one at a time. \
                 Nothing was changed.\n",
            ));
        }
        if self.sb.has_ro_compat(RoCompat::BIGALLOC) {
            return Ok(self.refuse(
                "tune.ext4r: changing the inode size of a bigalloc filesystem is not \
                 supported yet. Nothing was changed.\n",
            ));
        }
        if self.sb.s_rev_level.get() == 0 {
            return Ok(self.refuse(
                "tune.ext4r: a revision 0 filesystem has 128-byte inodes only. \
                 Nothing was changed.\n",
            ));
        }
        let mut meta = Meta::load(dev, &self.sb)?;
        let geo = meta.geo.clone();
        let bs = u64::from(geo.block_size);
        let sizes = Sizes {
            old_isize: geo.inode_size as usize,
            new_isize: new as usize,
            old_ibpg: u64::from(geo.inode_blocks_per_group()),
            new_ibpg: (u64::from(geo.inodes_per_group) * u64::from(new)).div_ceil(bs),
        };
        // tune2fs's get_move_bitmaps: the tables' growth must fit.
        let growth = u64::from(geo.group_count) * (sizes.new_ibpg - sizes.old_ibpg);
        if growth > meta.free_blocks() {
            return Ok(self.no_space());
        }
        let mut fixed = fixed_blocks(&meta, &self.sb)?;
        let place = match place_tables(&mut meta, &mut fixed, sizes.new_ibpg) {
            Ok(p) => p,
            Err(NoSpace) => return Ok(self.no_space()),
        };
        if place.move_count != 0 {
            match self.plan_moves(dev.as_ref(), &mut meta, &place.to_move) {
                Ok(()) => {}
                Err(PlanError::NoSpace) => return Ok(self.no_space()),
                Err(PlanError::Io(e)) => return Err(e),
            }
        }
        let progress = &mut self.env.progress;
        write_tables(&mut meta, &place.dest, &sizes, &mut |d, n| {
            progress("Rewriting inode tables", d, n)
        })?;
        progress("Rewriting inode tables", 1, 1);
        // The commit, in memory: written with the superblock at the end.
        for g in 0..geo.group_count {
            let d = meta.descs()[g as usize];
            let (bb, ib, old) = (
                d.block_bitmap(meta.wide),
                d.inode_bitmap(meta.wide),
                d.inode_table(meta.wide),
            );
            for b in old..old + sizes.old_ibpg {
                meta.free_cluster(b)?;
            }
            meta.desc_mut(g)?
                .set_locations(bb, ib, place.dest[g as usize]);
        }
        // check_inode_size refused anything wider.
        self.sb.s_inode_size.set(num::sat_u16(new));
        self.sb.s_checksum_type = u8::from(meta.metadata_csum);
        self.meta = Some(Box::new(meta));
        self.dirty = true;
        let _ = writeln!(self.out, "Setting inode size {new}");
        Ok(Ok(()))
    }

    fn no_space(&mut self) -> Step {
        self.err.push_str(NO_SPACE);
        self.out.push_str(FAILED);
        Err(Refused)
    }

    /// Plans the moves out of the windows over every inode in use, then
    /// writes them (see [`super::isize_move`]).
    fn plan_moves(
        &mut self,
        dev: &dyn BlockDevice,
        meta: &mut Meta,
        to_move: &ext4r_txn::alloc::UsedBlocks,
    ) -> std::result::Result<(), PlanError> {
        let geo = meta.geo.clone();
        let bs = u64::from(geo.block_size);
        let isz = geo.inode_size as usize;
        let ipg = geo.inodes_per_group as usize;
        let first_ino = self.sb.s_first_ino.get();
        let journal = if self.sb.has_incompat(Incompat::JOURNAL_DEV) {
            0
        } else {
            self.sb.s_journal_inum.get()
        };
        let orphan = self.sb.s_orphan_file_inum.get();
        // The old tables' places, before the mover borrows the map.
        let tables: Vec<(u64, u64, usize)> = meta
            .descs()
            .iter()
            .map(|d| {
                let unused = if meta.gdt_csum {
                    d.itable_unused(meta.wide) as usize
                } else {
                    0
                };
                let skip = meta.gdt_csum && d.flags() & BG_INODE_UNINIT != 0;
                let n = if skip { 0 } else { ipg.saturating_sub(unused) };
                (d.inode_table(meta.wide), d.inode_bitmap(meta.wide), n)
            })
            .collect();
        let mut mover = Mover::new(meta, to_move);
        let mut ibitmap = vec![0u8; num::index(bs)];
        let mut buf = Vec::new();
        for (g, &(table, ibm, n)) in tables.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let nblocks = (n * isz).div_ceil(num::index(bs)) as u64;
            for (b, k) in [(table, nblocks), (ibm, 1)] {
                if b < geo.first_data_block || b.saturating_add(k) > geo.blocks_count {
                    return Err(crate::meta::corrupt("group tables", format!("group {g}")).into());
                }
            }
            dev.read_at(&mut ibitmap, ibm * bs)?;
            buf.resize(num::index(nblocks * bs), 0);
            dev.read_at(&mut buf, table * bs)?;
            for i in 0..n {
                if ibitmap[i / 8] & (1 << (i % 8)) == 0 {
                    continue;
                }
                // At most s_inodes_count, a u32.
                let ino = num::sat_u32(g * ipg + i + 1);
                let reserved = ino < first_ino && ino != 2;
                if reserved || ino == journal || ino == orphan {
                    continue;
                }
                mover.plan(ino, &buf[i * isz..(i + 1) * isz])?;
            }
        }
        mover.write()?;
        Ok(())
    }
}
