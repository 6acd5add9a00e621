//! A resize inside a transaction: the filesystem takes another geometry
//! (block count, groups, descriptors) and the commit writes it with the
//! rest of the change, all or nothing.
//!
//! The group table of the new geometry replaces the old one in the
//! volume at once, so that everything the same transaction does after
//! [`Transaction::reshape`] (allocations, bitmaps, inode records, blocks
//! past the old end) is checked and placed against the new size. The old
//! table is kept until the commit: [`Transaction::abandon`] puts it back.
//!
//! At the commit, blocks at or past the old end of the filesystem are
//! written ahead as data, not logged: before the commit nothing the old
//! filesystem holds refers to them (a grow's new groups: their bitmaps,
//! meta_bg descriptor blocks), so the journal carries only what a replay
//! must make atomic — the superblock, the descriptor blocks and bitmaps
//! the old filesystem already had, the resize inode.

use super::{Reshaped, Transaction};
use crate::csum::Checksums;
use crate::error::{Error, Result};
use crate::volume::Volume;
use ext4r_format::group_desc::GroupDesc;
use ext4r_format::superblock::Superblock;
use std::borrow::BorrowMut;
use std::collections::BTreeSet;

impl<V: BorrowMut<Volume>> Transaction<V> {
    /// Gives the filesystem the geometry of `sb` (its block count, and
    /// with it the groups) with `descs`, one descriptor per group of the
    /// new geometry: locations, flags, free counts. The bitmaps read so far
    /// stay for the groups that keep their place and length; a group whose
    /// length changed (the last one) must get its bitmap again
    /// ([`Transaction::set_block_map`]), a new group not `BLOCK_UNINIT`
    /// too. Every group the transaction touched before, every new group
    /// and every group whose length changed is written at the commit;
    /// the superblock's free counts are the descriptors' sums.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] under a savepoint, after a partial flush
    /// or a second time before a commit; [`Error::Corrupt`] for a geometry
    /// the format refuses or a descriptor count that is not its group
    /// count.
    pub fn reshape(&mut self, sb: Superblock, descs: Vec<GroupDesc>) -> Result<()> {
        if self.undo.is_some() || !self.flushed_groups.is_empty() || self.reshaped.is_some() {
            return Err(Error::InvalidArgument(
                "a resize takes a transaction without a savepoint, partial flush or \
                 uncommitted resize"
                    .into(),
            ));
        }
        let groups = self.v().groups.reshaped(&sb, descs)?;
        let geo = groups.geometry().clone();
        let old_geo = self.v().geo.clone();
        let v = self.vm();
        let old_groups = std::mem::replace(&mut v.groups, groups);
        let old_csum = std::mem::replace(&mut v.csum, Checksums::new(&sb));
        v.geo = geo.clone();
        let old_snapshots = std::mem::take(&mut self.snapshots);
        let same = |g: u32| {
            g < old_geo.group_count
                && old_geo.group_first_block(g) == geo.group_first_block(g)
                && old_geo.group_blocks(g) == geo.group_blocks(g)
        };
        // The old groups touched, and the last one when its length
        // changed; new groups are written at the commit as a range (a
        // snapshot each would cost memory for nothing: abandoning a
        // reshape puts the whole old table back).
        for g in 0..geo.group_count.min(old_geo.group_count) {
            if old_snapshots.contains_key(&g) || !same(g) {
                self.touch(g)?;
            }
        }
        self.reshaped = Some(Box::new(Reshaped {
            geo: old_geo.clone(),
            groups: old_groups,
            csum: old_csum,
            snapshots: old_snapshots,
            counts_before: self.counts_before,
            outside: old_geo.blocks_count,
        }));
        self.sb = sb;
        self.sb_dirty = true;
        Ok(())
    }

    /// During a grow, before the transaction changes anything the old
    /// filesystem holds: writes the bitmaps set so far for groups past the
    /// old end, and the ranges zeroed there, in place, and drops them from
    /// memory, so that a grow by a hundred thousand groups holds a batch
    /// at a time. Nothing the old filesystem refers to is written: the
    /// descriptors and the superblock that make the new groups part of the
    /// filesystem wait for the commit, and a power cut before it leaves the
    /// old filesystem as it was.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without an uncommitted resize, under a
    /// savepoint, or when anything gathered lies before the old end;
    /// I/O errors.
    pub fn flush_grown(&mut self) -> Result<()> {
        // A grow within the last group has no new groups: nothing to do.
        let (outside, first_new) = match self.reshaped.as_deref() {
            Some(r) => (r.outside, r.geo.group_count),
            None => {
                return Err(Error::InvalidArgument(
                    "writing new groups ahead needs an uncommitted grow".into(),
                ))
            }
        };
        let inside = self
            .blocks
            .keys()
            .chain(self.data.keys())
            .any(|&b| b < outside)
            || self.zeroes.iter().any(|&(s, _)| s < outside)
            || !self.inodes.is_empty()
            || !self.freed.is_empty();
        if self.undo.is_some() || inside {
            return Err(Error::InvalidArgument(
                "only what lies past the old end is written ahead of a grow".into(),
            ));
        }
        let groups: BTreeSet<u32> = self.snapshots.range(first_new..).map(|(&g, _)| g).collect();
        let mut plan = self.assemble_blocks()?;
        self.assemble_bitmaps(&groups, &mut plan)?;
        if plan.is_empty() && self.zeroes.is_empty() {
            return Ok(());
        }
        self.vm().changed = true;
        self.write_in_place(&plan)?;
        for g in groups {
            self.vm().groups.forget_maps(g);
            self.snapshots.remove(&g);
        }
        Ok(())
    }

    /// Whether an uncommitted [`Transaction::reshape`] is in this
    /// transaction.
    pub fn is_reshaped(&self) -> bool {
        self.reshaped.is_some()
    }
}
