//! Replaying fast commits: the records the kernel's `fsync` leaves after
//! the journal proper on a `fast_commit` filesystem, applied through the
//! same operations the write API uses.
//!
//! The records describe what changed, not blocks (see
//! [`ext4r_format::jbd2::fast_commit`]); the kernel replays them in order
//! (`ext4_fc_replay`), and so do we, record for record:
//!
//! | record | what it does here (the kernel's rule unless said) |
//! |---|---|
//! | inode | the raw record laid over the one on disk, `i_block` kept ([`merge_inode_record`]); `i_blocks` counted from the mapping; the inode marked used |
//! | add range | the logical range mapped to the record's physical blocks (replacing what was mapped there, whose blocks are freed) |
//! | del range | the logical range unmapped, its blocks freed |
//! | create | the inode marked used; a directory gets `.` and `..` in its block 0; the entry added unless the name exists; the link count set (a directory counts 2 and its parent one more: the kernel leaves both short) |
//! | link | the entry added unless the name exists, the link count up |
//! | unlink | the entry removed when it names this inode, the link count down; at zero the inode is released (blocks, xattr block, bitmap), as the kernel's eviction does. A directory is removed whole and its parent counts one less (the kernel drops one link and leaves it allocated). An entry naming another inode is left, and nothing is counted down (the kernel counts down anyway, which can free an inode still named elsewhere) |
//!
//! An inode that cannot be read as live (reserved, unused, a bad
//! checksum) makes add-range, del-range, link and unlink records that
//! name it do nothing, as the kernel's `ext4_iget` failure does; a create
//! of such an inode, a record naming a reserved inode, or an operation
//! that fails (no space in a directory) stops the replay there, as the
//! kernel stops (and fails the mount). Ranges outside the filesystem or
//! over its fixed metadata are not mapped (the kernel would map them).
//!
//! Blocks named by the add-range records are kept out of every allocation
//! of the replay (the kernel's excluded regions): they are marked used
//! first, and those no replayed inode maps at the end are freed again.

use super::{node, WriteFs, WriteOptions};
use crate::device::{BlockDevice, Staged};
use crate::error::{Error, Result};
use crate::journal::{FastCommitLog, FastCommitReplay, FcReplayed, ReplayPlan};
use ext4r_format::extent::Extent;
use ext4r_format::inode::{mode, Inode, InodeFlags};
use ext4r_format::jbd2::fast_commit::{merge_inode_record, FcDentry, FcTag};
use ext4r_format::num;
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ext4r_txn::groups::InodeInit;
use ext4r_txn::map::{self, Run};
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Volume, VolumeOptions};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The engine's fast-commit replay, for the write layer's recovery
/// ([`crate::journal::recover_filesystem_with`], and every open that
/// recovers a journal).
#[derive(Debug, Clone, Default)]
pub struct FastCommitReplayer {
    /// The time stamped on directories the replay changes; the system
    /// clock when `None`.
    pub now: Option<(i64, u32)>,
}

impl FastCommitReplay for FastCommitReplayer {
    fn replay(&self, view: Arc<dyn BlockDevice>, log: &FastCommitLog) -> Result<FcReplayed> {
        let mut buf = [0u8; SUPERBLOCK_SIZE];
        view.read_at(&mut buf, SUPERBLOCK_OFFSET)?;
        let sb = Superblock::parse(&buf).map_err(|e| Error::corrupt("primary superblock", e))?;
        let bs = ext4r_format::geometry::Geometry::from_superblock(&sb)
            .map_err(|e| Error::corrupt("superblock", e))?
            .block_size;
        let staged = Arc::new(Staged::new(view, bs));
        let mut vo = VolumeOptions::default();
        vo.now = self.now.map(|t| t.0);
        let vol = Volume::open_with_superblock(staged.clone(), sb, vo)?;
        let opts = WriteOptions {
            now: self.now,
            ..WriteOptions::default()
        };
        let mut fs = WriteFs::over(Transaction::owned(vol), opts);
        let (applied, problem) = fs.apply_fast_commits(log);
        fs.recount();
        fs.txn.commit(Commit::Auto)?;
        drop(fs);
        let blocks = ReplayPlan::from_blocks(bs, staged.take())?;
        Ok(FcReplayed::new(blocks, applied, problem))
    }

    fn now(&self) -> Option<(i64, u32)> {
        self.now
    }
}

/// What the replay keeps between records.
#[derive(Default)]
struct Replay {
    /// Inodes whose mapping the replay set: their blocks are marked used
    /// at the end.
    mapped: BTreeSet<u32>,
    /// Inodes the replay wrote (their checksums are stamped at commit, so
    /// they are not verified when read again).
    written: BTreeSet<u32>,
    /// Blocks of add-range records that were free: taken for the replay.
    reserved: Vec<(u64, u64)>,
    /// The filesystem's fixed metadata (superblocks, descriptors,
    /// bitmaps, inode tables, journal), as sorted `[start, end)` runs.
    system: Vec<(u64, u64)>,
}

/// How one record ended.
enum Step {
    Done,
    Skipped,
}

fn stop(what: String) -> Error {
    Error::corrupt(
        "fast-commit replay",
        ext4r_format::FormatError::invalid("fast-commit record", what),
    )
}

impl WriteFs {
    /// Applies the records of `log` in order. Returns how many were
    /// applied (or passed over as the kernel passes over them) and why the
    /// replay stopped early, if it did.
    pub(crate) fn apply_fast_commits(&mut self, log: &FastCommitLog) -> (usize, Option<Error>) {
        let mut r = Replay::default();
        if let Err(e) = self.prepare(log, &mut r) {
            return (0, Some(e));
        }
        let mut applied = 0;
        let mut problem = None;
        for (k, rec) in log.records.iter().enumerate() {
            let tag = match rec.decode() {
                Ok(t) => t,
                Err(e) => {
                    problem = Some(Error::corrupt(format!("fast-commit record {k}"), e));
                    break;
                }
            };
            match self.op(|w| w.apply_one(&tag, &mut r)) {
                Ok(_) => applied += 1,
                Err(e) => {
                    problem = Some(stop(format!(
                        "record {k} (fast-commit block {}, {}): {e}",
                        rec.block,
                        describe(&tag)
                    )));
                    break;
                }
            }
        }
        if let Err(e) = self.op(|w| w.settle(&r)) {
            problem.get_or_insert(e);
        }
        (applied, problem)
    }

    fn apply_one(&mut self, tag: &FcTag<'_>, r: &mut Replay) -> Result<Step> {
        match *tag {
            FcTag::Head { .. } | FcTag::Tail { .. } | FcTag::Pad => Ok(Step::Done),
            FcTag::Inode { ino, raw } => self.fc_inode(ino, raw, r),
            FcTag::AddRange { ino, extent } => self.fc_add_range(ino, &extent, r),
            FcTag::DelRange { ino, lblk, len } => self.fc_del_range(ino, lblk, len, r),
            FcTag::Create(d) => self.fc_create(&d, r),
            FcTag::Link(d) => self.fc_link(&d, r),
            FcTag::Unlink(d) => self.fc_unlink(&d, r),
        }
    }

    /// Collects the fixed metadata and takes the add-range blocks that
    /// are free.
    fn prepare(&mut self, log: &FastCommitLog, r: &mut Replay) -> Result<()> {
        let mut ranges = Vec::new();
        for rec in &log.records {
            if let Ok(FcTag::AddRange { extent, .. }) = rec.decode() {
                ranges.push((extent.start().0, u64::from(extent.len())));
            }
        }
        if ranges.is_empty() {
            return Ok(());
        }
        r.system = self.system_zone()?;
        for (start, len) in ranges {
            if !self.mappable(start, len, r) {
                continue;
            }
            let mut b = start;
            while b < start + len {
                if self.txn.groups().is_block_used(b)? {
                    b += 1;
                    continue;
                }
                let s = b;
                while b < start + len && !self.txn.groups().is_block_used(b)? {
                    b += 1;
                }
                self.txn.take_blocks(s, b - s)?;
                r.reserved.push((s, b - s));
            }
        }
        Ok(())
    }

    /// The superblocks, descriptors, bitmaps and inode tables of every
    /// group and the internal journal's blocks, merged into sorted runs.
    fn system_zone(&self) -> Result<Vec<(u64, u64)>> {
        let geo = self.txn.geometry().clone();
        let wide = self.txn.groups().wide();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for g in 0..geo.group_count {
            let m = geo.group_meta(g);
            if let Some(b) = m.super_block {
                runs.push((b, b + 1));
            }
            if let Some((b, n)) = m.old_desc {
                runs.push((b, b + n));
            }
            if let Some(b) = m.meta_desc {
                runs.push((b, b + 1));
            }
            let d = self.txn.groups().desc(g)?;
            let bb = d.block_bitmap(wide);
            let ib = d.inode_bitmap(wide);
            let it = d.inode_table(wide);
            runs.push((bb, bb + 1));
            runs.push((ib, ib + 1));
            runs.push((it, it + u64::from(geo.inode_blocks_per_group())));
        }
        let sb = self.txn.superblock();
        let jino = sb.s_journal_inum.get();
        if jino != 0 && sb.s_journal_dev.get() == 0 {
            if let Ok(j) = self.inode(jino) {
                for run in map::runs(&self.txn, jino, &j, false).unwrap_or_default() {
                    runs.push((run.physical, run.physical + run.len));
                }
            }
        }
        runs.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
        for (s, e) in runs {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        Ok(merged)
    }

    /// Whether `[start, start + len)` lies inside the filesystem and off
    /// its fixed metadata.
    fn mappable(&self, start: u64, len: u64, r: &Replay) -> bool {
        let geo = self.txn.geometry();
        let Some(end) = start.checked_add(len) else {
            return false;
        };
        if len == 0 || start < geo.first_data_block || end > geo.blocks_count {
            return false;
        }
        let i = r.system.partition_point(|&(s, _)| s < end);
        i == 0 || r.system[i - 1].1 <= start
    }

    /// Inode `ino` as the kernel's `ext4_iget` accepts it: a normal inode
    /// (the root or one past the reserved ones), in use (links, mode), its
    /// checksum good (unless the replay wrote it).
    fn live(&self, ino: u32, r: &Replay) -> Option<Inode> {
        if !self.normal_ino(ino) {
            return None;
        }
        let rec = self.txn.read_inode(ino).ok()?;
        let i = Inode::parse(&rec).ok()?;
        if i.links_count() == 0 || i.mode() == 0 {
            return None;
        }
        if !r.written.contains(&ino) && !self.txn.checksums().inode_ok(ino, &rec) {
            return None;
        }
        Some(i)
    }

    fn normal_ino(&self, ino: u32) -> bool {
        let sb = self.txn.superblock();
        (ino == super::ROOT_INO || ino >= sb.first_ino()) && ino <= sb.s_inodes_count.get()
    }

    fn fc_inode(&mut self, ino: u32, raw: &[u8], r: &mut Replay) -> Result<Step> {
        if !self.normal_ino(ino) {
            return Err(Error::InvalidArgument(format!(
                "inode {ino} is not an inode a fast commit may carry"
            )));
        }
        let old = self.live(ino, r);
        let old_blocks = match &old {
            Some(i) => mapping_blocks(&self.txn, ino, i)?,
            None => Vec::new(),
        };
        let mut rec = self.txn.read_inode(ino)?;
        if old.is_none() {
            // Whatever mapping a dead or never used record still holds is
            // not this file's (the kernel keeps it, which for a record
            // left uninitialised by lazy_itable_init is garbage): the
            // add-range records that follow build the mapping.
            let mut dead =
                Inode::parse(&rec).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
            dead.i_block = [0; 60];
            dead.write(&mut rec)
                .map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
        }
        merge_inode_record(&mut rec, raw);
        let mut i =
            Inode::parse(&rec).map_err(|e| Error::corrupt(format!("inode {ino} (replayed)"), e))?;
        let new_blocks = mapping_blocks(&self.txn, ino, &i).unwrap_or_default();
        self.rebalance(&old_blocks, &new_blocks)?;
        self.count_blocks(ino, &mut i)?;
        i.write(&mut rec)
            .map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
        self.txn.write_inode(ino, rec)?;
        self.txn.take_inode(ino, i.is_dir(), InodeInit::Kernel)?;
        r.written.insert(ino);
        r.mapped.insert(ino);
        Ok(Step::Done)
    }

    /// Frees what only `old` holds and takes what only `new` holds.
    fn rebalance(&mut self, old: &[u64], new: &[u64]) -> Result<()> {
        let old_set: BTreeSet<u64> = old.iter().copied().collect();
        let new_set: BTreeSet<u64> = new.iter().copied().collect();
        for &b in old_set.difference(&new_set) {
            self.txn.free_blocks(b, 1)?;
        }
        for &b in new_set.difference(&old_set) {
            self.txn.take_blocks(b, 1)?;
        }
        Ok(())
    }

    /// Sets `i_blocks` from the inode's mapping.
    fn count_blocks(&self, ino: u32, i: &mut Inode) -> Result<()> {
        let flags = i.flags();
        let fast_link = i.is_symlink() && !flags.contains(InodeFlags::EXTENTS) && i.size() < 60;
        let (runs, tree) = if flags.contains(InodeFlags::INLINE_DATA) || fast_link {
            (Vec::new(), 0)
        } else {
            let runs = map::runs(&self.txn, ino, i, false)?;
            let all = map::all_blocks(&self.txn, ino, i)?;
            let data: u64 = runs.iter().map(|r| r.len).sum();
            let tree = (all.len() as u64).saturating_sub(data);
            (runs, tree)
        };
        self.set_blocks(ino, i, &runs, tree)
    }

    fn fc_add_range(&mut self, ino: u32, e: &Extent, r: &mut Replay) -> Result<Step> {
        let Some(mut i) = self.live(ino, r) else {
            return Ok(Step::Skipped);
        };
        let (l, p, n) = (u64::from(e.ee_block.get()), e.start().0, u64::from(e.len()));
        let flags = i.flags();
        if flags.contains(InodeFlags::INLINE_DATA)
            || (e.is_unwritten() && !flags.contains(InodeFlags::EXTENTS))
            || l + n > 1 << 32
            || !self.mappable(p, n, r)
        {
            return Ok(Step::Skipped);
        }
        let add = Run {
            logical: l,
            physical: p,
            len: n,
            unwritten: e.is_unwritten(),
        };
        self.remap(ino, &mut i, l, l + n, Some(add))?;
        r.written.insert(ino);
        r.mapped.insert(ino);
        Ok(Step::Done)
    }

    fn fc_del_range(&mut self, ino: u32, lblk: u32, len: u32, r: &mut Replay) -> Result<Step> {
        let Some(mut i) = self.live(ino, r) else {
            return Ok(Step::Skipped);
        };
        if i.flags().contains(InodeFlags::INLINE_DATA) || len == 0 {
            return Ok(Step::Skipped);
        }
        let from = u64::from(lblk);
        let to = (from + u64::from(len)).min(1 << 32);
        self.remap(ino, &mut i, from, to, None)?;
        r.written.insert(ino);
        r.mapped.insert(ino);
        Ok(Step::Done)
    }

    /// Replaces what inode `ino` maps in `[from, to)` with `add` (or
    /// nothing), freeing the blocks that drop out and taking the new ones;
    /// stores the mapping and the record.
    fn remap(
        &mut self,
        ino: u32,
        i: &mut Inode,
        from: u64,
        to: u64,
        add: Option<Run>,
    ) -> Result<()> {
        let runs = map::runs_whole(&self.txn, ino, i, false)?;
        let mut kept = Vec::with_capacity(runs.len() + 2);
        let mut dropped = Vec::new();
        for run in runs {
            if run.end() <= from || run.logical >= to {
                kept.push(run);
                continue;
            }
            if run.logical < from {
                kept.push(Run {
                    len: from - run.logical,
                    ..run
                });
            }
            let a = run.logical.max(from);
            let b = run.end().min(to);
            dropped.push((run.physical + (a - run.logical), b - a));
            if run.end() > to {
                kept.push(Run {
                    logical: to,
                    physical: run.physical + (to - run.logical),
                    len: run.end() - to,
                    unwritten: run.unwritten,
                });
            }
        }
        if let Some(a) = add {
            kept.push(a);
        }
        kept.sort_unstable_by_key(|r| r.logical);
        for (s, n) in dropped {
            let keep = add.is_some_and(|a| a.physical <= s && s + n <= a.physical + a.len);
            if !keep {
                self.txn.free_blocks(s, n)?;
            }
        }
        if let Some(a) = add {
            self.txn.take_blocks(a.physical, a.len)?;
        }
        let goal = self.goal_for(ino);
        let tree = map::store(&mut self.txn, ino, i, &kept, goal)?;
        self.set_blocks(ino, i, &kept, tree)?;
        self.put_inode(ino, i)
    }

    fn fc_create(&mut self, d: &FcDentry<'_>, r: &mut Replay) -> Result<Step> {
        let sb = self.txn.superblock();
        if d.ino < sb.first_ino() || d.ino > sb.s_inodes_count.get() {
            return Err(Error::InvalidArgument(format!(
                "create of inode {}, outside the inodes a file may have",
                d.ino
            )));
        }
        let Some(i) = self.live(d.ino, r) else {
            return Err(Error::InvalidArgument(format!(
                "create of inode {}, which holds no live inode",
                d.ino
            )));
        };
        self.txn.take_inode(d.ino, i.is_dir(), InodeInit::Kernel)?;
        let Some(parent) = self.live(d.parent, r).filter(Inode::is_dir) else {
            return Ok(Step::Skipped);
        };
        if i.is_dir() && !i.flags().contains(InodeFlags::INLINE_DATA) {
            self.fc_init_dir(d.ino, d.parent)?;
        }
        let inserted = self.fc_add_entry(d, &i, &parent)?;
        let mut i = self.inode(d.ino)?;
        i.i_links_count.set(if i.is_dir() { 2 } else { 1 });
        self.put_inode(d.ino, &i)?;
        if inserted && i.is_dir() {
            self.fc_parent_links(d.parent, 1)?;
        }
        r.written.insert(d.ino);
        r.written.insert(d.parent);
        Ok(Step::Done)
    }

    /// Gives directory `dir` a block 0 holding `.` and `..` (the one it
    /// maps, or a new one), and nothing past it, as the kernel's
    /// `ext4_init_new_dir` starts a directory over.
    fn fc_init_dir(&mut self, dir: u32, parent: u32) -> Result<()> {
        let sh = self.shape;
        let mut i = self.inode(dir)?;
        let runs = map::runs_whole(&self.txn, dir, &i, false)?;
        let first = runs
            .iter()
            .find(|r| r.logical == 0 && !r.unwritten)
            .map(|r| r.physical);
        for run in &runs {
            let from = if run.logical == 0 && Some(run.physical) == first {
                1
            } else {
                0
            };
            if run.len > from {
                self.txn.free_blocks(run.physical + from, run.len - from)?;
            }
        }
        let nr = match first {
            Some(b) => b,
            None => self.alloc_data(self.goal_for(dir), 1)?.0,
        };
        let keep = [Run {
            logical: 0,
            physical: nr,
            len: 1,
            unwritten: false,
        }];
        let tree = map::store(&mut self.txn, dir, &mut i, &keep, nr)?;
        i.set_size(sh.bs as u64);
        self.set_blocks(dir, &mut i, &keep, tree)?;
        self.put_inode(dir, &i)?;
        let ft = node::ftype(mode::S_IFDIR, &sh);
        let b = ext4r_format::dir::leaf::build(
            sh.bs,
            &[(b".".to_vec(), dir, ft), (b"..".to_vec(), parent, ft)],
            sh.csum,
        )
        .ok_or_else(|| Error::InvalidArgument("new directory block".into()))?;
        let kind = self.dir_kind(dir, &i);
        self.txn.write_block(nr, kind, b)?;
        Ok(())
    }

    /// Adds the entry unless its name is taken (`EEXIST` is no failure in
    /// a replay: the entry may have reached the disk before the crash).
    fn fc_add_entry(&mut self, d: &FcDentry<'_>, i: &Inode, _parent: &Inode) -> Result<bool> {
        super::dir::check_name(d.name)?;
        if super::dir::lookup(&self.txn, d.parent, d.name)?.is_some() {
            return Ok(false);
        }
        let ft = node::ftype(i.mode(), &self.shape);
        self.dir_insert(d.parent, d.name, d.ino, ft)?;
        let now = self.now();
        let mut p = self.inode(d.parent)?;
        p.set_mtime(now);
        p.set_ctime(now);
        self.put_inode(d.parent, &p)?;
        Ok(true)
    }

    /// Directory `dir`'s link count moved by `by` (a subdirectory made or
    /// removed), as `dir_nlink` counts.
    fn fc_parent_links(&mut self, dir: u32, by: i32) -> Result<()> {
        let mut p = self.inode(dir)?;
        let n = i32::from(p.links_count());
        if n == 1 {
            // dir_nlink: "many" stays many.
            return Ok(());
        }
        let n = (n + by).clamp(2, i32::from(u16::MAX) - 1);
        let n = if n >= 65000 { 1 } else { n };
        p.i_links_count.set(num::sat_u16(n)); // clamped to 1..65534 above
        self.put_inode(dir, &p)
    }

    fn fc_link(&mut self, d: &FcDentry<'_>, r: &mut Replay) -> Result<Step> {
        let Some(i) = self.live(d.ino, r) else {
            return Ok(Step::Skipped);
        };
        let Some(parent) = self.live(d.parent, r).filter(Inode::is_dir) else {
            return Ok(Step::Skipped);
        };
        if i.is_dir() {
            // A second name for a directory is never made by the kernel.
            return Ok(Step::Skipped);
        }
        if !self.fc_add_entry(d, &i, &parent)? {
            return Ok(Step::Skipped);
        }
        let mut i = self.inode(d.ino)?;
        i.i_links_count
            .set(i.links_count().saturating_add(1).min(65000));
        self.put_inode(d.ino, &i)?;
        r.written.insert(d.ino);
        r.written.insert(d.parent);
        Ok(Step::Done)
    }

    fn fc_unlink(&mut self, d: &FcDentry<'_>, r: &mut Replay) -> Result<Step> {
        let Some(i) = self.live(d.ino, r) else {
            return Ok(Step::Skipped);
        };
        if self.live(d.parent, r).filter(Inode::is_dir).is_none() {
            return Ok(Step::Skipped);
        }
        match super::dir::lookup(&self.txn, d.parent, d.name)? {
            Some((found, _)) if found == d.ino => {}
            _ => return Ok(Step::Skipped),
        }
        self.dir_remove(d.parent, d.name)?;
        let now = self.now();
        let mut p = self.inode(d.parent)?;
        p.set_mtime(now);
        p.set_ctime(now);
        self.put_inode(d.parent, &p)?;
        r.written.insert(d.parent);
        if i.is_dir() {
            self.fc_parent_links(d.parent, -1)?;
            self.release_now(d.ino, &i)?;
        } else if i.links_count() <= 1 {
            self.release_now(d.ino, &i)?;
        } else {
            let mut i = i;
            i.i_links_count.set(i.links_count() - 1);
            self.put_inode(d.ino, &i)?;
        }
        r.written.insert(d.ino);
        r.mapped.remove(&d.ino);
        Ok(Step::Done)
    }

    /// The superblock's free counts as the descriptors add up, as e2fsck's
    /// replay leaves them (the kernel keeps no exact count on disk while
    /// mounted, so the copy recovery wrote home is stale).
    fn recount(&mut self) {
        let wide = self.txn.groups().wide();
        let ratio = self.txn.geometry().cluster_ratio();
        let (mut blocks, mut inodes) = (0u64, 0u64);
        for d in self.txn.groups().descs() {
            blocks += u64::from(d.free_blocks_count(wide)) * ratio;
            inodes += u64::from(d.free_inodes_count(wide));
        }
        self.txn.set_free_counts(blocks, inodes);
    }

    /// The end of the replay: every block a replayed inode maps is marked
    /// used, and the reserved blocks none maps are freed again.
    fn settle(&mut self, r: &Replay) -> Result<()> {
        let mut mapped: Vec<u64> = Vec::new();
        for &ino in &r.mapped {
            let Some(i) = self.live(ino, r) else {
                continue;
            };
            mapped.extend(mapping_blocks(&self.txn, ino, &i)?);
        }
        mapped.sort_unstable();
        mapped.dedup();
        for &b in &mapped {
            if !self.txn.groups().is_block_used(b)? {
                self.txn.take_blocks(b, 1)?;
            }
        }
        for &(s, n) in &r.reserved {
            for b in s..s + n {
                if mapped.binary_search(&b).is_err() {
                    self.txn.free_blocks(b, 1)?;
                }
            }
        }
        Ok(())
    }
}

/// Every block inode `ino` holds for its data and mapping (not its xattr
/// block), or none for inline data and fast symlinks.
fn mapping_blocks(t: &Transaction<Volume>, ino: u32, i: &Inode) -> Result<Vec<u64>> {
    let flags = i.flags();
    if flags.contains(InodeFlags::INLINE_DATA)
        || (i.is_symlink() && !flags.contains(InodeFlags::EXTENTS) && i.size() < 60)
    {
        return Ok(Vec::new());
    }
    let mut all = map::all_blocks(t, ino, i)?;
    // The xattr block is not the mapping's.
    let acl = i.file_acl(t.groups().wide()).0;
    all.retain(|&b| b != acl || acl == 0);
    Ok(all)
}

fn describe(tag: &FcTag<'_>) -> String {
    let name = |d: &FcDentry<'_>| String::from_utf8_lossy(d.name).into_owned();
    match tag {
        FcTag::AddRange { ino, extent } => format!(
            "add range of inode {ino}: logical {} -> {} ({} blocks)",
            extent.ee_block.get(),
            extent.start(),
            extent.len()
        ),
        FcTag::DelRange { ino, lblk, len } => {
            format!("del range of inode {ino}: logical {lblk} ({len} blocks)")
        }
        FcTag::Create(d) => format!("create '{}' -> {} in {}", name(d), d.ino, d.parent),
        FcTag::Link(d) => format!("link '{}' -> {} in {}", name(d), d.ino, d.parent),
        FcTag::Unlink(d) => format!("unlink '{}' -> {} in {}", name(d), d.ino, d.parent),
        FcTag::Inode { ino, .. } => format!("inode {ino}"),
        FcTag::Head { .. } => "head".into(),
        FcTag::Tail { .. } => "tail".into(),
        FcTag::Pad => "pad".into(),
    }
}

/// Recovers the journal of the filesystem on `dev` in place: the log
/// replayed and its fast commits with it (see
/// [`crate::journal::recover_filesystem_with`]); `now` is stamped on the
/// directories the fast commits change (the system clock when `None`).
///
/// # Errors
/// As [`crate::journal::recover_filesystem_with`].
pub fn recover_journal<J: BlockDevice>(
    dev: &Arc<dyn BlockDevice>,
    journal: &crate::journal::Journal<J>,
    now: Option<(i64, u32)>,
) -> Result<crate::journal::Recovery> {
    crate::journal::recover_filesystem_with(dev, journal, &FastCommitReplayer { now })
}
