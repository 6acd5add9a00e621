//! `-f`: free-space defragmentation, offline. Blocks are moved so that the
//! free space becomes one large run.
//!
//! # The policy: empty the best window
//!
//! Some blocks cannot move here: superblock and descriptor copies, the
//! reserved descriptor blocks, bitmaps and inode tables, the journal,
//! directories, symlinks, xattr blocks, and files left alone (immutable,
//! append-only, inline). They cut the disk into *segments*; inside a
//! segment every used block belongs to a regular file whose blocks can be
//! moved. The largest free extent the filesystem can have is a whole
//! segment, or all of the free space if that is less.
//!
//! So the window `W` is chosen that can become that extent: in each
//! segment, the stretch of `min(free space, segment)` blocks that already
//! holds the most free blocks — which is the stretch whose emptying moves
//! the least data. Then exactly the file blocks inside `W` are moved out,
//! into the free holes elsewhere, largest pieces first, each into the
//! smallest hole that holds it whole (best fit, so that holes fill up
//! rather than leave crumbs), split over the largest holes only when none
//! does. Blocks outside `W` stay where they are. With the window as large
//! as the free space, the data inside it fills the holes outside exactly:
//! afterwards the free space is `W` alone.
//!
//! Why not compaction toward the start of each flex group, as disk
//! defragmenters do: it moves nearly every block behind the first hole,
//! and on ext4 leaves the free space as one tail per flex group, cut by
//! the backup superblocks and the journal — many medium runs, not one
//! large one. The window moves only what is in the way of the one run,
//! and never more data than the free space outside it.
//!
//! The price is paid by the files moved out of `W`: a piece that fits no
//! hole whole is split, so those files may gain extents (each file's count
//! is reported). Files elsewhere are not touched.

mod space;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use ext4r::fs::{FileKind, Run};
use ext4r_txn::alloc::used_runs;

use self::space::{subtract, Holes, Space, Window};
use super::layout;
use super::relocate::tree_estimate;
use super::{FileMap, OfflineFs};
use crate::freespace::FreeSpace;
use crate::image::ImageFs;
use crate::online::{Outcome, Skip};
use crate::source::{Source, Walk};

/// What `-f` did.
#[derive(Debug, Clone)]
pub struct CompactReport {
    /// Free space before.
    pub before: FreeSpace,
    /// Free space after.
    pub after: FreeSpace,
    /// The window emptied (`(first block, blocks)`), if any was needed.
    pub window: Option<(u64, u64)>,
    /// The largest segment (run of blocks that are free or movable).
    pub largest_segment: u64,
    /// Files whose blocks moved.
    pub files_moved: u64,
    /// Blocks moved.
    pub blocks_moved: u64,
    /// Extents of the files moved, before and after.
    pub extents: (u64, u64),
    /// Files left in the window (no room outside it), with why.
    pub not_moved: Vec<(PathBuf, String)>,
    /// Files a move failed on, with the error.
    pub failed: Vec<(PathBuf, String)>,
    /// Whether the time limit stopped it.
    pub timed_out: bool,
}

/// A file with blocks that can move.
struct Owned {
    path: String,
    fm: FileMap,
}

/// What must leave window `w`, per file (index into `owned`): its runs'
/// parts inside it, largest first.
fn work_in(w: &Window, movable: &[(u64, u64, usize)], owned: &[Owned]) -> Vec<(usize, Vec<Run>)> {
    let (ws, we) = (w.start, w.end());
    let mut work: BTreeMap<usize, Vec<Run>> = BTreeMap::new();
    let lo = movable.partition_point(|&(_, e, _)| e <= ws);
    for &(_, _, k) in movable[lo..].iter().take_while(|&&(s, _, _)| s < we) {
        work.entry(k).or_insert_with(|| {
            owned[k]
                .fm
                .runs
                .iter()
                .filter_map(|run| {
                    let s = run.physical.max(ws);
                    let e = (run.physical + run.len).min(we);
                    (s < e).then(|| Run {
                        logical: run.logical + (s - run.physical),
                        physical: s,
                        len: e - s,
                        unwritten: run.unwritten,
                    })
                })
                .collect()
        });
    }
    let mut order: Vec<(usize, Vec<Run>)> = work.into_iter().collect();
    order.sort_by_key(|(k, m)| (std::cmp::Reverse(m.iter().map(|r| r.len).sum::<u64>()), *k));
    order
}

/// Takes pieces for `need` blocks from `holes` as a move does (best fit,
/// else the largest holes), without touching the disk.
fn pick_pieces(holes: &mut Holes, need: u64, ratio: u64) -> Option<Vec<(u64, u64)>> {
    let mut pieces = Vec::new();
    let mut got = 0;
    while got < need {
        let (s, n) = holes.pick(need - got)?;
        holes.remove(s);
        let take = (need - got).min(n) / ratio * ratio;
        holes.insert(s + take, n - take);
        if take > 0 {
            pieces.push((s, take));
            got += take;
        }
    }
    Some(pieces)
}

/// Plays the evacuation of `work` into `holes`: the blocks short, 0 when
/// everything fits — the data, and the mapping blocks the moved files will
/// need, taken after their data as the mapping editor takes them.
fn shortfall(
    work: &[(usize, Vec<Run>)],
    owned: &[Owned],
    mut holes: Holes,
    ratio: u64,
    bs: u64,
) -> u64 {
    let mut short = 0u64;
    for (k, moving) in work {
        let fm = &owned[*k].fm;
        let need = layout::clusters(moving, ratio) * ratio;
        let Some(pieces) = pick_pieces(&mut holes, need, ratio) else {
            short += need;
            continue;
        };
        let tree = layout::lay_out(moving, ratio, &pieces)
            .map(|(placed, _)| layout::replace(&fm.runs, &placed))
            .map_or(0, |runs| tree_estimate(&runs, fm.extent_mapped(), bs));
        let mut goal = pieces.last().map_or(0, |&(s, n)| s + n);
        for _ in 0..tree {
            let Some((s, n)) = holes.next_from(goal) else {
                short += ratio;
                continue;
            };
            holes.remove(s);
            holes.insert(s + ratio, n.saturating_sub(ratio));
            goal = s + ratio;
        }
    }
    short
}

/// Empties the best window (see the [module docs](self)); `progress(i, n,
/// path, outcome)` hears of each file moved.
///
/// # Errors
/// The walk or a bitmap cannot be read, or a commit fails.
pub fn compact(
    fs: &mut OfflineFs,
    src: &ImageFs,
    deadline: Option<Instant>,
    progress: &mut dyn FnMut(usize, usize, &str, &Outcome),
) -> crate::Result<CompactReport> {
    let before = fs.free_space()?;
    let mut report = CompactReport {
        before: before.clone(),
        after: before.clone(),
        window: None,
        largest_segment: 0,
        files_moved: 0,
        blocks_moved: 0,
        extents: (0, 0),
        not_moved: Vec::new(),
        failed: Vec::new(),
        timed_out: false,
    };
    let r = fs.ratio;
    // Every regular file that can move, once.
    let mut owned: Vec<Owned> = Vec::new();
    let mut seen = HashSet::new();
    src.walk(&mut |e| {
        if e.kind == FileKind::Regular && e.sectors > 0 && seen.insert(e.ino) {
            if let Some(fm) = u32::try_from(e.ino).ok().and_then(|i| fs.load(i).ok()) {
                owned.push(Owned {
                    path: e.display(),
                    fm,
                });
            }
        }
        Walk::Continue
    })?;
    // Movable blocks, whole clusters, with their owner.
    let mut movable: Vec<(u64, u64, usize)> = Vec::new();
    for (k, o) in owned.iter().enumerate() {
        let tree = o.fm.tree.iter().map(|&b| (b, 1));
        for (s, n) in o.fm.runs.iter().map(|r| (r.physical, r.len)).chain(tree) {
            movable.push((s / r * r, (s + n).div_ceil(r) * r, k));
        }
    }
    movable.sort_unstable();
    let geo = fs.txn.geometry().clone();
    let (first, count) = (geo.first_data_block, geo.blocks_count);
    let used = used_runs(&fs.txn, first, count - 1).map_err(|e| fs.engine(e))?;
    let space = Space::new(
        first,
        count,
        &used,
        movable.iter().map(|&(s, e, _)| (s, e)).collect(),
        r,
    );
    report.largest_segment = space.largest_segment();
    // The window, shrunk until what leaves it fits outside with the
    // mapping blocks the moved files will need.
    let mut reserve = 0u64;
    let mut chosen = None;
    for _ in 0..8 {
        let Some(w) = space.window(reserve) else {
            break;
        };
        let work = work_in(&w, &movable, &owned);
        let holes = space.holes_outside(&w);
        let short = shortfall(&work, &owned, holes.clone(), r, fs.bs);
        if short == 0 {
            chosen = Some((w, work, holes));
            break;
        }
        reserve += short.div_ceil(r) * r + r;
    }
    // Nothing to gain: no window that can be emptied, or none larger than
    // the largest free extent there is already.
    let Some((w, work, mut holes)) =
        chosen.filter(|(w, _, _)| w.free < w.len && w.len > before.max)
    else {
        return Ok(report);
    };
    report.window = Some((w.start, w.len));
    let window = [(w.start, w.len)];
    let n = work.len();
    for (i, (k, moving)) in work.into_iter().enumerate() {
        let o = &owned[k];
        if deadline.is_some_and(|d| Instant::now() >= d) {
            report.timed_out = true;
            break;
        }
        let outcome = move_out(
            fs,
            &o.fm,
            &moving,
            &mut holes,
            &window,
            deadline,
            &mut report,
        );
        match &outcome {
            Outcome::Failed(why) => report.failed.push((PathBuf::from(&o.path), why.clone())),
            Outcome::Skipped(why) => report
                .not_moved
                .push((PathBuf::from(&o.path), why.to_string())),
            _ => {}
        }
        let stop = matches!(outcome, Outcome::Stopped { .. });
        progress(i + 1, n, &o.path, &outcome);
        if stop {
            report.timed_out = true;
            break;
        }
        if fs.poisoned {
            break;
        }
    }
    fs.commit()?;
    report.after = fs.free_space()?;
    Ok(report)
}

/// Moves the runs `moving` of one file into holes.
fn move_out(
    fs: &mut OfflineFs,
    fm: &FileMap,
    moving: &[Run],
    holes: &mut Holes,
    window: &[(u64, u64)],
    deadline: Option<Instant>,
    report: &mut CompactReport,
) -> Outcome {
    let before = fm.extents();
    let need = fs.need(moving);
    let no_room = |holes: &Holes| {
        Outcome::Skipped(Skip::NoSpace {
            need,
            free: holes.total(),
        })
    };
    if need > holes.total() {
        return no_room(holes);
    }
    if let Err(e) = fs.before_alloc() {
        return Outcome::Failed(ext4r::error::chain(&e));
    }
    let mut pieces: Vec<(u64, u64)> = Vec::new();
    let mut got = 0u64;
    while got < need {
        let Some((s, n)) = holes.pick(need - got) else {
            break;
        };
        holes.remove(s);
        // The hole as the bitmaps say now: mapping blocks of earlier moves
        // may have taken part of it.
        let used = match used_runs(&fs.txn, s, s + n - 1) {
            Ok(u) => u,
            Err(e) => return Outcome::Failed(ext4r::error::chain(&e)),
        };
        if !used.is_empty() {
            for (fs_, fe) in subtract(&[(s, s + n)], &used) {
                holes.insert(fs_, fe - fs_);
            }
            continue;
        }
        let take = (need - got).min(n) / fs.ratio * fs.ratio;
        if take == 0 {
            continue;
        }
        if let Err(e) = fs.txn.take_blocks(s, take) {
            return Outcome::Failed(ext4r::error::chain(&e));
        }
        holes.insert(s + take, n - take);
        pieces.push((s, take));
        got += take;
    }
    if got < need {
        let _ = fs.release(&pieces);
        for &(s, n) in &pieces {
            holes.insert(s, n);
        }
        return no_room(holes);
    }
    let goal = pieces.last().map_or(0, |&(s, n)| s + n);
    match fs.relocate(fm, moving, &pieces, goal, false, window, deadline) {
        Ok(Some(after)) => {
            report.files_moved += 1;
            report.blocks_moved += need;
            report.extents.0 += before;
            report.extents.1 += after;
            if after < before {
                Outcome::Improved { before, after }
            } else {
                Outcome::Unchanged { before, after }
            }
        }
        Ok(None) => Outcome::Stopped {
            before,
            after: before,
        },
        Err(e) => Outcome::Failed(ext4r::error::chain(&e)),
    }
}
