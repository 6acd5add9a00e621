//! `-r` offline: the regular files under a directory laid out one after
//! another in the order they are read, next to the directory's group.
//!
//! Offline nothing stands between us and the allocator, so this is the
//! placement the NEC proposal asked the kernel for: the files' total size
//! is looked for as one free run from the start of the directory's (flex)
//! group, and the files are moved into it back to back in read order (a
//! walk in directory order, by default as readdir returns entries, the
//! order of find, tar and cp -r). Where no single run holds them all, each
//! file goes to the next free run after the previous one that holds it
//! whole. Files are moved even when they are in one extent already: the
//! point is where they are. Directories and inodes stay where they are.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use ext4r_txn::alloc::{best_run, BlockAlloc, Search};

use super::OfflineFs;
use crate::extent::{Extent, FileExtents};
use crate::image::ImageFs;
use crate::online::relevant::{gaps, read_order, Gaps, Placement, TreeFile};
use crate::online::{Outcome, Skip};
use crate::source::LostFound;

/// What an offline placement did, with the gaps before and after.
#[derive(Debug, Clone, Default)]
pub struct RelevantReport {
    /// The placement's counts (`donor_extents`: the free runs the files
    /// went to).
    pub placement: Placement,
    /// Files of the tree.
    pub files: u64,
    /// Gaps in read order before.
    pub before: Gaps,
    /// Gaps in read order after.
    pub after: Gaps,
    /// The tree was in read order already: nothing moved.
    pub already_in_order: bool,
}

fn extents_of(path: &[u8], runs: &[ext4r::fs::Run]) -> FileExtents {
    let p = PathBuf::from(String::from_utf8_lossy(path).into_owned());
    FileExtents::new(&p, runs.iter().map(|r| Extent::from(*r)).collect()).unwrap_or_default()
}

/// Places the files under `src`'s start directory (walked in `src`'s
/// order) in read order; `progress(i, n, path, outcome)` hears of each.
///
/// # Errors
/// The walk cannot start, or committing fails.
pub fn place(
    fs: &mut OfflineFs,
    src: &ImageFs,
    deadline: Option<Instant>,
    progress: &mut dyn FnMut(usize, usize, &str, &Outcome),
) -> crate::Result<RelevantReport> {
    let lost_found = LostFound(Some(b"/lost+found/".to_vec()));
    let (mut files, skipped) = read_order(src, &lost_found)?;
    let mut out = RelevantReport::default();
    for (e, why) in skipped {
        out.placement
            .skipped
            .push((PathBuf::from(e.display()), why.to_string()));
    }
    // A file with several names is placed where it is first read.
    let mut seen = HashSet::new();
    files.retain(|f| seen.insert(f.entry.ino));
    out.files = files.len() as u64;
    out.before = gaps(files.iter().map(|f| &f.extents));
    if out.before.total == 0 {
        out.already_in_order = true;
        out.after = out.before;
        return Ok(out);
    }
    let dir = src.start_inode()?;
    let goal = fs.txn.inode_goal(dir);
    let total: u64 = files
        .iter()
        .map(|f| {
            let runs: Vec<_> = f.extents.as_slice().iter().map(run_of).collect();
            fs.need(&runs)
        })
        .sum();
    // Where the whole tree fits, if anywhere: the walk of free space
    // starts there. Nothing is taken yet.
    let region =
        best_run(&fs.txn, goal, total.max(1), Search::default()).map_err(|e| fs.engine(e))?;
    let mut cursor = region.map_or(goal, |(s, _)| s);
    let tree_goal = region.map_or(goal, |(s, n)| s + n);
    let mut after: Vec<FileExtents> = Vec::with_capacity(files.len());
    let n = files.len();
    for (i, f) in files.iter().enumerate() {
        let path = f.entry.display();
        if deadline.is_some_and(|d| Instant::now() >= d) {
            out.placement.timed_out = true;
            after.extend(files[i..].iter().map(|f| f.extents.clone()));
            break;
        }
        let (outcome, now) = place_one(fs, f, &mut cursor, tree_goal, deadline, &mut out);
        match &outcome {
            Outcome::Improved { .. } | Outcome::Unchanged { .. } => {
                out.placement.placed += 1;
                out.placement.blocks += f.extents.blocks();
            }
            other => out
                .placement
                .skipped
                .push((PathBuf::from(&path), other.to_string())),
        }
        after.push(now);
        progress(i + 1, n, &path, &outcome);
        if matches!(outcome, Outcome::Stopped { .. }) {
            out.placement.timed_out = true;
            after.extend(files[i + 1..].iter().map(|f| f.extents.clone()));
            break;
        }
    }
    fs.commit()?;
    out.after = gaps(after.iter());
    Ok(out)
}

fn run_of(e: &Extent) -> ext4r::fs::Run {
    ext4r::fs::Run {
        logical: e.logical,
        physical: e.physical,
        len: e.len,
        unwritten: e.unwritten,
    }
}

/// Moves one file to `cursor` (or the next free run after it that holds
/// the file); returns the outcome and the file's extents afterwards.
fn place_one(
    fs: &mut OfflineFs,
    f: &TreeFile,
    cursor: &mut u64,
    tree_goal: u64,
    deadline: Option<Instant>,
    out: &mut RelevantReport,
) -> (Outcome, FileExtents) {
    let Ok(ino) = u32::try_from(f.entry.ino) else {
        return (Outcome::Skipped(Skip::Vanished), f.extents.clone());
    };
    let fm = match fs.load(ino) {
        Ok(fm) => fm,
        Err(o) => return (o, f.extents.clone()),
    };
    if !OfflineFs::same_runs(&fm.runs, &f.extents) {
        return (Outcome::Skipped(Skip::Changed), f.extents.clone());
    }
    let need = fs.need(&fm.runs);
    // With bigalloc a file starts on a cluster of its own.
    let r = fs.ratio;
    *cursor = cursor.div_ceil(r) * r;
    let pieces = match fs.alloc_pieces(*cursor, need) {
        Ok(Some(p)) => p,
        Ok(None) => {
            let free = fs.txn.groups().free_blocks();
            return (
                Outcome::Skipped(Skip::NoSpace { need, free }),
                f.extents.clone(),
            );
        }
        Err(e) => return (Outcome::Failed(ext4r::error::chain(&e)), f.extents.clone()),
    };
    if pieces.first().is_some_and(|&(s, _)| s != *cursor) || out.placement.donor_extents == 0 {
        out.placement.donor_extents += 1;
    }
    out.placement.donor_extents += pieces.len().saturating_sub(1) as u64;
    let end = pieces.last().map_or(*cursor, |&(s, n)| s + n);
    let before = fm.extents();
    match fs.relocate(&fm, &fm.runs, &pieces, tree_goal, false, &[], deadline) {
        Ok(Some(after)) => {
            *cursor = end;
            let now = fs
                .load(ino)
                .map(|m| extents_of(&f.entry.path, &m.runs))
                .unwrap_or_else(|_| f.extents.clone());
            let o = if after < before {
                Outcome::Improved { before, after }
            } else {
                Outcome::Unchanged { before, after }
            };
            (o, now)
        }
        Ok(None) => (
            Outcome::Stopped {
                before,
                after: before,
            },
            f.extents.clone(),
        ),
        Err(e) => (Outcome::Failed(ext4r::error::chain(&e)), f.extents.clone()),
    }
}
