//! The offline [`Mover`]: a file's blocks rewritten into a contiguous free
//! run, or the fewest runs the free space offers, through the write layer.
//!
//! The plan (which files, in what order) is e4defrag's, shared with the
//! online mover: [`crate::online::plan`] over the read path of the
//! unmounted filesystem. For each file:
//!
//! - the mapping is read again as committed and checked ([`OfflineFs::load`]);
//! - free runs for all of its clusters are taken, near the start of its
//!   inode's flex group (where the kernel would put a new file's blocks):
//!   the first run long enough, else the longest ones;
//! - if they would not give fewer extents than the file has, they are given
//!   back and the file is reported as "no improvement possible" — a move
//!   never makes a file worse;
//! - otherwise the data is copied and the mapping switched (see the
//!   protocol in the [module docs](super)).
//!
//! Block-mapped (ext3) files are moved as block maps; with `to_extents`
//! they are given an extent tree, moved or not.

use std::collections::HashSet;
use std::time::Instant;

use ext4r_format::features::Incompat;
use ext4r_format::inode::InodeFlags;
use ext4r_format::InodeNr;
use ext4r_txn::alloc::BlockAlloc;

use super::OfflineFs;
use crate::image::ImageFs;
use crate::online::{Candidate, Mover, Outcome, Plan, Skip};
use crate::score::{BestRule, FileScore};
use crate::source::{LostFound, Source};

/// Moves files of an unmounted filesystem.
#[derive(Debug)]
pub struct OfflineMover<'a> {
    fs: &'a mut OfflineFs,
    rule: BestRule,
    to_extents: bool,
}

impl<'a> OfflineMover<'a> {
    /// A mover over `fs`, best counts by `rule`; with `to_extents`,
    /// block-mapped files are converted to extent trees.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when `to_extents` is asked on a
    /// filesystem without the extent feature.
    pub fn new(fs: &'a mut OfflineFs, rule: BestRule, to_extents: bool) -> crate::Result<Self> {
        if to_extents && !fs.txn.superblock().has_incompat(Incompat::EXTENTS) {
            return Err(crate::Error::InvalidArgument(format!(
                "{}: converting to extents needs the extent feature: turn it on first \
                 (tune.ext4r -O extent {})",
                fs.path().display(),
                fs.path().display()
            )));
        }
        Ok(OfflineMover {
            fs,
            rule,
            to_extents,
        })
    }
}

impl Mover for OfflineMover<'_> {
    fn defrag(&mut self, c: &Candidate, deadline: Option<Instant>) -> Outcome {
        let Ok(ino) = u32::try_from(c.entry.ino) else {
            return Outcome::Skipped(Skip::Vanished);
        };
        if self.fs.poisoned {
            return Outcome::Failed("an earlier failure stopped the run".into());
        }
        let fm = match self.fs.load(ino) {
            Ok(fm) => fm,
            Err(o) => return o,
        };
        if !OfflineFs::same_runs(&fm.runs, &c.extents) {
            return Outcome::Skipped(Skip::Changed);
        }
        let before = fm.extents();
        let convert = self.to_extents && !fm.extent_mapped();
        if before <= self.rule.best(fm.blocks()) {
            if convert {
                // Already in place: only the mapping changes form.
                let goal = fm.runs.first().map_or(0, |r| r.physical);
                return match self.fs.switch(&fm, &fm.runs, &[], goal, true, &[]) {
                    Ok(after) => Outcome::Converted { before, after },
                    Err(e) => Outcome::Failed(ext4r::error::chain(&e)),
                };
            }
            return Outcome::AlreadyBest { extents: before };
        }
        let need = self.fs.need(&fm.runs);
        let goal = self.fs.txn.inode_goal(ino);
        let pieces = match self.fs.alloc_pieces(goal, need) {
            Ok(Some(p)) => p,
            Ok(None) => {
                return Outcome::Skipped(Skip::NoSpace {
                    need,
                    free: self.fs.txn.groups().free_blocks(),
                })
            }
            Err(e) => return Outcome::Failed(ext4r::error::chain(&e)),
        };
        let planned = self
            .fs
            .planned_runs(&fm, &pieces)
            .map_or(u64::MAX, |r| r.len() as u64);
        if planned >= before {
            if let Err(e) = self.fs.release(&pieces) {
                return Outcome::Failed(ext4r::error::chain(&e));
            }
            if convert {
                let goal = fm.runs.first().map_or(0, |r| r.physical);
                return match self.fs.switch(&fm, &fm.runs, &[], goal, true, &[]) {
                    Ok(after) => Outcome::Converted { before, after },
                    Err(e) => Outcome::Failed(ext4r::error::chain(&e)),
                };
            }
            return Outcome::NoImprovement {
                extents: before,
                donor: planned,
            };
        }
        let tree_goal = pieces.last().map_or(goal, |&(s, n)| s + n);
        match self
            .fs
            .relocate(&fm, &fm.runs, &pieces, tree_goal, convert, &[], deadline)
        {
            Ok(Some(after)) if after < before => Outcome::Improved { before, after },
            Ok(Some(after)) => Outcome::Unchanged { before, after },
            Ok(None) => Outcome::Stopped {
                before,
                after: before,
            },
            Err(e) => Outcome::Failed(ext4r::error::chain(&e)),
        }
    }
}

/// e4defrag's plan over the unmounted filesystem `src` (see
/// [`crate::online::plan`]), made for an offline run: each inode once (a
/// file with several names is worked on under the first), and with
/// `to_extents` the block-mapped files already at their best count too,
/// after the others.
///
/// # Errors
/// The walk cannot start.
pub fn plan(src: &ImageFs, to_extents: bool) -> crate::Result<Plan> {
    let lost_found = LostFound(Some(b"/lost+found/".to_vec()));
    let mut p = crate::online::plan(src, &lost_found, true, 0)?;
    let mut seen = HashSet::new();
    p.candidates.retain(|c| seen.insert(c.entry.ino));
    if to_extents {
        let rule = src.best_rule();
        let bs = u64::from(src.block_size());
        let mut keep = Vec::new();
        for (e, n) in std::mem::take(&mut p.already_best) {
            let block_mapped = u32::try_from(e.ino)
                .ok()
                .and_then(|ino| src.fs().inode(InodeNr(ino)).ok())
                .is_some_and(|i| !i.inode.flags().contains(InodeFlags::EXTENTS));
            if !block_mapped || !seen.insert(e.ino) {
                keep.push((e, n));
                continue;
            }
            match src.extents(&e) {
                Ok(x) => {
                    let score =
                        FileScore::new(&rule, x.count(), x.physical_count(), x.blocks(), bs);
                    p.candidates.push(Candidate {
                        entry: e,
                        extents: x,
                        score,
                    });
                }
                Err(_) => keep.push((e, n)),
            }
        }
        p.already_best = keep;
    }
    Ok(p)
}
