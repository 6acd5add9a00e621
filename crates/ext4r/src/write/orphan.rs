//! Orphans: a file deleted or shortened over several transactions, as the
//! kernel does with a large one.
//!
//! Freeing a file's blocks touches a bitmap (and a descriptor) per run,
//! so a file of many runs is not freed in one transaction. Instead, the
//! first transaction takes its last name away (or sets its new size) and
//! puts it on the superblock's orphan list (linked through `i_dtime`);
//! the following ones free its runs from the end, [`CHUNK_RUNS`] at a
//! time; the last takes it off the list (and frees the inode of a deleted
//! file). A crash in between leaves it on the list, and whoever opens the
//! filesystem next (the kernel's mount, e2fsck, [`WriteFs::open`]) finishes
//! the job: every step is a consistent filesystem.
//!
//! Opening also finishes orphans found in the orphan file (the
//! `orphan_file` feature), which this code reads but never adds to.

use super::WriteFs;
use crate::error::{Error, Result};
use ext4r_format::features::{Compat, RoCompat};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::orphan::{clear_orphan_slot, OrphanBlock};
use ext4r_format::superblock::STATE_ERROR;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::map::{self, Run};

/// Runs freed per transaction at most.
pub(crate) const CHUNK_RUNS: usize = 64;

/// What is left to do for an orphan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pending {
    /// Deleted: every block, then the inode.
    Delete(u32),
    /// Shortened: the blocks past its size.
    Truncate(u32),
}

impl WriteFs {
    /// Puts `ino` (record `i`, to be stored by the caller) at the head of
    /// the orphan list.
    pub(crate) fn orphan_add(&mut self, ino: u32, i: &mut Inode) {
        let head = self.txn.superblock().s_last_orphan.get();
        i.i_dtime.set(head);
        self.txn.superblock_mut().s_last_orphan.set(ino);
    }

    /// Takes `ino`, whose list successor is `next`, off the orphan list.
    fn orphan_del(&mut self, ino: u32, next: u32) -> Result<()> {
        let head = self.txn.superblock().s_last_orphan.get();
        if head == ino {
            self.txn.superblock_mut().s_last_orphan.set(next);
            return Ok(());
        }
        let mut cur = head;
        let limit = self.txn.superblock().s_inodes_count.get();
        for _ in 0..limit {
            if cur == 0 {
                break;
            }
            let mut c = self.inode(cur)?;
            let after = c.i_dtime.get();
            if after == ino {
                c.i_dtime.set(next);
                return self.put_inode(cur, &c);
            }
            cur = after;
        }
        // Not listed (the list was cleared meanwhile): nothing to undo.
        Ok(())
    }

    /// Whether a file's blocks are too many runs to free in the running
    /// operation.
    pub(crate) fn too_many_runs(&self, ino: u32, i: &Inode, keep: u64) -> Result<bool> {
        if !holds_blocks(self, i) {
            return Ok(false);
        }
        let runs = map::runs_whole(&self.txn, ino, i, false)?;
        Ok(runs.iter().filter(|r| r.end() > keep).count() > CHUNK_RUNS)
    }

    /// Frees the blocks of `ino` mapped past logical block `keep`, the last
    /// `max` runs of them at most (and the mapping blocks no longer
    /// needed); returns whether none is left past `keep`. With bigalloc a
    /// cluster still holding a kept block stays.
    pub(crate) fn cut_mapping(
        &mut self,
        ino: u32,
        i: &mut Inode,
        keep: u64,
        max: usize,
    ) -> Result<bool> {
        if !holds_blocks(self, i) {
            return Ok(true);
        }
        let r = self.shape.ratio;
        let runs = map::runs_whole(&self.txn, ino, i, false)?;
        let mut new_runs: Vec<Run> = Vec::new();
        let mut past: Vec<Run> = Vec::new();
        for run in &runs {
            if run.end() <= keep {
                new_runs.push(*run);
            } else if run.logical >= keep {
                past.push(*run);
            } else {
                let k = keep - run.logical;
                new_runs.push(Run { len: k, ..*run });
                past.push(Run {
                    logical: keep,
                    physical: run.physical + k,
                    len: run.len - k,
                    unwritten: run.unwritten,
                });
            }
        }
        if past.is_empty() {
            return Ok(true);
        }
        let split = past.len().saturating_sub(max);
        let gone = past.split_off(split);
        let done = past.is_empty();
        new_runs.extend(past);
        let kept_cluster = new_runs.last().map(|x| (x.physical + x.len - 1) & !(r - 1));
        for g in &gone {
            let mut c = g.physical & !(r - 1);
            while c < g.physical + g.len {
                if Some(c) != kept_cluster {
                    self.txn.free_blocks(c, r)?;
                }
                c += r;
            }
        }
        let goal = new_runs.last().map_or(0, |x| x.physical + x.len);
        let tree = map::store(&mut self.txn, ino, i, &new_runs, goal)?;
        self.set_blocks(ino, i, &new_runs, tree)?;
        self.put_inode(ino, i)?;
        Ok(done)
    }

    /// Finishes an orphan over as many operations as it takes: its runs
    /// freed from the end, then the inode freed (a deletion) and taken off
    /// the orphan list when `listed` (an orphan of the orphan file is not
    /// on it).
    pub(crate) fn finish_orphan(&mut self, what: Pending, listed: bool) -> Result<()> {
        let (Pending::Delete(ino) | Pending::Truncate(ino)) = what;
        loop {
            let done = self.op(|w| {
                let mut i = w.inode(ino)?;
                let keep = match what {
                    Pending::Delete(_) => 0,
                    Pending::Truncate(_) => i.size().div_ceil(w.shape.bs as u64),
                };
                w.cut_mapping(ino, &mut i, keep, CHUNK_RUNS)
            })?;
            if done {
                break;
            }
        }
        self.op(|w| {
            let mut i = w.inode(ino)?;
            if listed {
                let next = i.i_dtime.get();
                w.orphan_del(ino, next)?;
                i.i_dtime.set(0);
            }
            match what {
                Pending::Delete(_) => w.release_now(ino, &i),
                Pending::Truncate(_) => w.put_inode(ino, &i),
            }
        })
    }

    /// Finishes what a crash left on the orphan list and in the orphan
    /// file, as a mount does (nothing but forgetting the list on a
    /// filesystem marked with errors, as the kernel).
    pub(crate) fn recover_orphans(&mut self) -> Result<()> {
        let sb = self.txn.superblock();
        let head = sb.s_last_orphan.get();
        let present = sb.has_ro_compat(RoCompat::ORPHAN_PRESENT);
        let file = sb.has_compat(Compat::ORPHAN_FILE) && sb.s_orphan_file_inum.get() != 0;
        if head == 0 && !present {
            return Ok(());
        }
        if sb.s_state.get() & STATE_ERROR != 0 {
            self.op(|w| {
                w.txn.superblock_mut().s_last_orphan.set(0);
                Ok(())
            })?;
            return self.commit();
        }
        let (first, count) = (sb.first_ino(), sb.s_inodes_count.get());
        let legal = |i: u32| i >= first && i <= count;
        let mut seen = std::collections::HashSet::new();
        loop {
            let ino = self.txn.superblock().s_last_orphan.get();
            if ino == 0 {
                break;
            }
            if !legal(ino) || !seen.insert(ino) {
                return Err(Error::corrupt(
                    "orphan list",
                    ext4r_format::FormatError::invalid(
                        "s_last_orphan",
                        "names an inode out of range or loops (run fsck)",
                    ),
                ));
            }
            let i = self.inode(ino)?;
            let what = if i.links_count() == 0 {
                Pending::Delete(ino)
            } else {
                Pending::Truncate(ino)
            };
            self.finish_orphan(what, true)?;
        }
        if file {
            self.recover_orphan_file(&mut seen)?;
        }
        if self
            .txn
            .superblock()
            .has_ro_compat(RoCompat::ORPHAN_PRESENT)
        {
            self.op(|w| {
                let sb = w.txn.superblock_mut();
                let ro = sb.s_feature_ro_compat.get() & !RoCompat::ORPHAN_PRESENT.bits();
                sb.s_feature_ro_compat.set(ro);
                Ok(())
            })?;
        }
        self.commit()
    }

    /// The orphan file's entries: each inode finished, its slot emptied.
    fn recover_orphan_file(&mut self, seen: &mut std::collections::HashSet<u32>) -> Result<()> {
        let sb = self.txn.superblock();
        let inum = sb.s_orphan_file_inum.get();
        let (first, count) = (sb.first_ino(), sb.s_inodes_count.get());
        let oi = self.inode(inum)?;
        let generation = oi.generation();
        for run in map::runs(&self.txn, inum, &oi, false)? {
            for b in run.physical..run.physical + run.len {
                let buf = self.txn.read_block(b)?;
                let Ok(block) = OrphanBlock::parse(&buf) else {
                    continue;
                };
                let listed: Vec<(usize, u32)> = block.entries().map(|(s, i)| (s, i.0)).collect();
                for (slot, ino) in listed {
                    if ino >= first && ino <= count && seen.insert(ino) {
                        let i = self.inode(ino)?;
                        let what = if i.links_count() == 0 {
                            Pending::Delete(ino)
                        } else {
                            Pending::Truncate(ino)
                        };
                        self.finish_orphan(what, false)?;
                    }
                    self.op(|w| {
                        let blk = w.txn.block_mut(
                            b,
                            BlockKind::Orphan {
                                ino: inum,
                                generation,
                            },
                        )?;
                        clear_orphan_slot(blk, slot);
                        Ok(())
                    })?;
                }
            }
        }
        Ok(())
    }
}

/// Whether inode `i` has blocks mapped (a regular file, a directory, a
/// slow symlink; not inline data).
fn holds_blocks(w: &WriteFs, i: &Inode) -> bool {
    (i.is_reg() || i.is_dir() || (i.is_symlink() && !super::node::fast_symlink(i, &w.shape)))
        && !i.flags().contains(InodeFlags::INLINE_DATA)
}
