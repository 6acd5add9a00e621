//! Shrinking: the part of the filesystem that goes is emptied (the
//! journal, file blocks, extended attribute blocks, group tables, inode
//! numbers), each step a transaction that leaves a consistent filesystem
//! of the old size; then one transaction switches to the new size. See
//! the protocol in the [resize module docs](super).
//!
//! The same code runs as a dry run on a staged copy of the device (writes
//! kept in memory, file data not copied): that is how the minimum is
//! found and how a shrink is known to succeed before its first write.

mod evacuate;
mod journal;
mod renumber;
mod scan;
mod tables;

use super::error::Result;
use super::geometry::{super_ranges, Shape};
use super::switch::{self, minus, Reconcile};
use crate::error::Error;
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::Volume;

/// What a shrink did, or would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    /// Blocks of files and attributes moved.
    pub blocks: u64,
    /// Inodes given new numbers.
    pub inodes: u64,
    /// Group tables moved.
    pub tables: u64,
    /// The journal moved.
    pub journal: bool,
}

/// A failed dry run's verdict: room was short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Short {
    /// At least this many more blocks would have been needed.
    pub blocks: u64,
}

/// The running transaction of a shrink and the rules its steps follow.
pub(crate) struct Mover<'v> {
    pub t: Transaction<&'v mut Volume>,
    /// The new block count: nothing may stay at or past it.
    pub end: u64,
    /// Other blocks to empty (superblock copies the new geometry adds),
    /// sorted, end exclusive.
    pub extra: Vec<(u64, u64)>,
    /// A dry run: regular files' data is not copied.
    pub dry: bool,
    journaled: bool,
    /// Metadata blocks a transaction gathers before it commits.
    budget: u64,
    /// Blocks below the end freed by the running transaction: no data is
    /// written there before it commits.
    freed: Vec<(u64, u64)>,
    /// Without a journal, blocks below the end to free once the running
    /// transaction committed (a cut in between leaves them marked used,
    /// which fsck repairs, and no file pointing at reused blocks).
    deferred: Vec<(u64, u64)>,
    pub moved: Moved,
    /// Blocks still to move when room ran out (a dry run's shortfall).
    pub short: u64,
}

impl<'v> Mover<'v> {
    pub(crate) fn new(vol: &'v mut Volume, end: u64, extra: Vec<(u64, u64)>, dry: bool) -> Self {
        let journaled = vol.journaled();
        let budget = vol
            .journal_blocks()
            .map_or(4096, |j| (j / 4).clamp(64, 8192));
        Mover {
            t: vol.begin(),
            end,
            extra,
            dry,
            journaled,
            budget,
            freed: Vec::new(),
            deferred: Vec::new(),
            moved: Moved::default(),
            short: 0,
        }
    }

    /// Whether block `b` lies in the part that is emptied.
    pub(crate) fn in_region(&self, b: u64) -> bool {
        b >= self.end || self.extra.iter().any(|&(s, e)| s <= b && b < e)
    }

    /// The part of `[s, s + n)` in the region, as ranges.
    pub(crate) fn region_part(&self, s: u64, n: u64) -> Vec<(u64, u64)> {
        let e = s + n;
        let mut out = Vec::new();
        for &(a, b) in &self.extra {
            let (lo, hi) = (a.max(s), b.min(e));
            if lo < hi {
                out.push((lo, hi));
            }
        }
        if e > self.end {
            out.push((s.max(self.end), e));
        }
        out.sort_unstable();
        out
    }

    /// Commits when the running transaction has gathered its share of
    /// the journal.
    pub(crate) fn maybe_commit(&mut self) -> Result<()> {
        let (meta, _) = self.t.pending_sizes();
        if meta >= self.budget || !self.journaled && meta >= 256 {
            self.commit()?;
        }
        Ok(())
    }

    /// Commits the running transaction (and, without a journal, the
    /// frees it deferred, in one more).
    pub(crate) fn commit(&mut self) -> Result<()> {
        self.t.commit(Commit::Auto)?;
        self.freed.clear();
        if !self.deferred.is_empty() {
            for (s, n) in std::mem::take(&mut self.deferred) {
                self.t.free_blocks(s, n)?;
            }
            self.t.commit(Commit::Auto)?;
        }
        Ok(())
    }

    /// Frees `[s, s + n)`: blocks in the region at once; below the end,
    /// noted so that no data lands there before the commit (or, without a
    /// journal, deferred past it).
    pub(crate) fn free(&mut self, s: u64, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        if s >= self.end {
            self.t.free_blocks(s, n)?;
            return Ok(());
        }
        if self.journaled {
            self.t.free_blocks(s, n)?;
            self.freed.push((s, n));
        } else {
            self.deferred.push((s, n));
        }
        Ok(())
    }

    /// Whether frees wait for the running transaction's commit to be
    /// usable (blocks it freed, or frees deferred past it).
    pub(crate) fn has_pending_frees(&self) -> bool {
        !self.deferred.is_empty() || !self.freed.is_empty()
    }

    /// Whether `[s, s + n)` meets blocks freed by the running transaction.
    fn meets_freed(&self, s: u64, n: u64) -> bool {
        self.freed.iter().any(|&(a, m)| s < a + m && a < s + n)
    }

    /// Takes free runs for `need` blocks of data (whole clusters), near
    /// `goal`, as few as the free space allows; never blocks the running
    /// transaction freed (it commits first). `Ok(None)` when the room
    /// below the end is short (nothing taken).
    pub(crate) fn alloc_data(&mut self, goal: u64, need: u64) -> Result<Option<Vec<(u64, u64)>>> {
        let ratio = self.t.geometry().cluster_ratio();
        for attempt in 0..2 {
            let mut pieces: Vec<(u64, u64)> = Vec::new();
            let mut got = 0u64;
            while got < need {
                let Some((s, n)) = self.t.alloc_run(goal, need - got)? else {
                    break;
                };
                let whole = n / ratio * ratio;
                if whole < n {
                    self.t.free_blocks(s + whole, n - whole)?;
                }
                if whole == 0 {
                    break;
                }
                pieces.push((s, whole));
                got += whole;
            }
            let clash = pieces.iter().any(|&(s, n)| self.meets_freed(s, n));
            // Short, but frees wait for the commit (without a journal, or
            // blocks this transaction freed): commit, then try again.
            let pending = self.has_pending_frees();
            if got < need || (clash && attempt == 0) {
                for &(s, n) in &pieces {
                    self.t.free_blocks(s, n)?;
                }
                if got < need && (attempt > 0 || !pending) {
                    return Ok(None);
                }
                self.commit()?;
                continue;
            }
            return Ok(Some(pieces));
        }
        Ok(None)
    }
}

/// The blocks the new geometry makes metadata in groups that stay, which
/// must be emptied like the part that goes.
pub(crate) fn extra_ranges(shape: &Shape) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for g in 0..shape.geo.group_count {
        let (o, n) = (super_ranges(&shape.old, g), super_ranges(&shape.geo, g));
        if o != n {
            out.extend(minus(&n, &o));
        }
    }
    out
}

/// Shrinks the filesystem on `vol` to `shape`, reopening the volume when
/// the journal moves. `dry`: a dry run (file data is not copied). Returns
/// the volume (to close) and what moved, or the shortfall when the room
/// below the new end is short.
pub(crate) fn shrink(
    mut vol: Volume,
    shape: &Shape,
    dry: bool,
    vopts: &ext4r_txn::volume::VolumeOptions,
) -> Result<(Volume, std::result::Result<Moved, Short>)> {
    let end = shape.geo.blocks_count;
    let extra = extra_ranges(shape);
    let groups = shape.geo.group_count;
    vol.set_alloc_limits(Some(end), Some(groups), &extra);
    let mut moved = Moved::default();
    // 1. The journal.
    let (v, jshort) = journal::move_journal(vol, end, &extra, dry, vopts)?;
    vol = v;
    match jshort {
        Ok(m) => moved.journal = m,
        Err(s) => return Ok((vol, Err(s))),
    }
    vol.set_alloc_limits(Some(end), Some(groups), &extra);
    {
        let mut m = Mover::new(&mut vol, end, extra.clone(), dry);
        m.moved = moved.clone();
        // 2. Files and attribute blocks.
        let found = scan::scan(&m, shape)?;
        if let Some(why) = found.refused {
            return Err(super::error::Refusal::Unsupported(why).into());
        }
        for &ino in &found.movers {
            if !evacuate::move_inode(&mut m, ino)? {
                m.short += found.remaining_after(ino);
                let short = Short {
                    blocks: m.short.max(1),
                };
                m.t.abandon();
                drop(m);
                return Ok((vol, Err(short)));
            }
            m.maybe_commit()?;
        }
        for (&block, owners) in &found.xattr {
            if !evacuate::move_xattr(&mut m, block, owners)? {
                let short = Short {
                    blocks: found.xattr.len() as u64,
                };
                m.t.abandon();
                drop(m);
                return Ok((vol, Err(short)));
            }
            m.maybe_commit()?;
        }
        m.commit()?;
        // 3. Group tables of groups that stay.
        if let Err(s) = tables::move_tables(&mut m, shape)? {
            m.t.abandon();
            drop(m);
            return Ok((vol, Err(s)));
        }
        m.commit()?;
        // 4. Inode numbers.
        if let Err(s) = renumber::renumber(&mut m, shape)? {
            m.t.abandon();
            drop(m);
            return Ok((vol, Err(s)));
        }
        m.commit()?;
        moved = m.moved.clone();
    }
    // 5. The switch.
    verify_empty(&mut vol, shape, &extra)?;
    switch_shrink(&mut vol, shape)?;
    vol.set_alloc_limits(None, None, &[]);
    Ok((vol, Ok(moved)))
}

/// Checks, before the switch, that nothing but the metadata of the groups
/// that go is left in the part that goes, and no inode past the new count
/// is in use: what the switch would otherwise cut off.
fn verify_empty(vol: &mut Volume, shape: &Shape, extra: &[(u64, u64)]) -> Result<()> {
    let (old, new) = (&shape.old, &shape.geo);
    let wide = vol.groups().wide();
    let itb = u64::from(old.inode_blocks_per_group());
    let end = new.blocks_count;
    // Metadata allowed past the end: superblock copies, descriptor tables
    // and reserve of the groups that go; the tables of those groups.
    let mut allowed: Vec<(u64, u64)> = Vec::new();
    for g in new.group_count.saturating_sub(1)..old.group_count {
        allowed.extend(super_ranges(old, g));
    }
    for g in new.group_count..old.group_count {
        let d = vol.groups().desc(g)?;
        allowed.push((d.block_bitmap(wide), d.block_bitmap(wide) + 1));
        allowed.push((d.inode_bitmap(wide), d.inode_bitmap(wide) + 1));
        allowed.push((d.inode_table(wide), d.inode_table(wide) + itb));
    }
    allowed.sort_unstable();
    let ratio = old.cluster_ratio();
    let space = vol.groups();
    let check = |s: u64, e: u64| -> Result<()> {
        let mut b = s;
        while b < e {
            let Some(u) = ext4r_txn::alloc::FreeSpace::first_used(space, b, e - 1)? else {
                break;
            };
            let c = u / ratio * ratio;
            let ok = allowed
                .iter()
                .any(|&(a, z)| a < c + ratio && c < z && a <= u && u < z);
            if !ok {
                return Err(Error::InvalidArgument(format!(
                    "block {u} is still in use in the part that goes (a bug: nothing was cut)"
                ))
                .into());
            }
            b = u + 1;
        }
        Ok(())
    };
    check(end, old.blocks_count)?;
    for &(s, e) in extra {
        check(s, e)?;
    }
    let ipg = old.inodes_per_group;
    for g in new.group_count..old.group_count {
        let d = vol.groups().desc(g)?;
        if d.free_inodes_count(wide) != ipg {
            return Err(Error::InvalidArgument(format!(
                "group {g} still has inodes in use (a bug: nothing was cut)"
            ))
            .into());
        }
    }
    Ok(())
}

/// The switch: the new geometry in one transaction.
fn switch_shrink(vol: &mut Volume, shape: &Shape) -> Result<()> {
    let (old, new) = (&shape.old, &shape.geo);
    let wide = vol.groups().wide();
    let itb = u64::from(old.inode_blocks_per_group());
    let end = new.blocks_count;
    // The tables of the groups that go which lie below the new end.
    let mut gone: Vec<(u64, u64)> = Vec::new();
    for g in new.group_count..old.group_count {
        let d = vol.groups().desc(g)?;
        for (s, n) in [
            (d.block_bitmap(wide), 1),
            (d.inode_bitmap(wide), 1),
            (d.inode_table(wide), itb),
        ] {
            if s < end {
                gone.push((s, (s + n).min(end)));
            }
        }
    }
    let mut t = vol.begin();
    // Bitmaps of groups that stay and hold such tables, read now so that
    // they carry over (a BLOCK_UNINIT group's computed bitmap would not
    // show them after the switch).
    for &(s, _) in &gone {
        let g = old.group_of_block(s);
        if g < new.group_count {
            t.groups().block_map(g)?;
        }
    }
    let rec = Reconcile::prepare(&t, shape)?;
    let descs = t.groups().descs()[..new.group_count as usize].to_vec();
    t.reshape(shape.sb.clone(), descs)?;
    rec.apply(&mut t, shape)?;
    gone.sort_unstable();
    for (s, e) in gone {
        switch::free_meta(&mut t, new, s, e)?;
    }
    switch::resize_inode(&mut t, shape)?;
    switch::recount(&mut t)?;
    t.commit(Commit::Auto)?;
    Ok(())
}
