//! Defragmenting files: planning (which files, in what order) and running
//! a [`Mover`] over them within a time limit.
//!
//! Planning needs only a [`Source`], so it is the same for a mounted
//! filesystem and, once the allocator/journal crate exists, an unmounted
//! one: the walk finds the regular files, skips what e4defrag skips
//! (lost+found, empty files, files without blocks, other filesystems), and
//! keeps the files with more extents than e4defrag's best count. They are
//! then taken worst first, by e4defrag's own per-file ratio (extra runs per
//! block): under a time limit that spends the time where each moved block
//! removes the most fragments. The [`kernel::KernelMover`] moves files of a
//! mounted filesystem through `EXT4_IOC_MOVE_EXT`.

pub mod kernel;
mod outcome;
mod pagecache;
pub mod relevant;

pub use crate::sys::ignore_sigio;
pub use outcome::{Outcome, Skip};

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ext4r::fs::FileKind;

use crate::error::Result;
use crate::extent::FileExtents;
use crate::score::FileScore;
use crate::source::{Entry, LostFound, Source, Walk};

/// A file worth moving.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// What the walk saw.
    pub entry: Entry,
    /// Its extents then.
    pub extents: FileExtents,
    /// Its e4defrag figures then.
    pub score: FileScore,
}

/// Moves one file's blocks into fewer extents.
///
/// The online mover works through the kernel on a mounted filesystem; an
/// offline mover (through the allocator/journal crate, on an unmounted
/// device) will implement the same trait, so planning, ordering, time limits
/// and reporting stay shared.
pub trait Mover {
    /// Works on one file, giving up at `deadline`.
    fn defrag(&mut self, c: &Candidate, deadline: Option<Instant>) -> Outcome;
}

/// What the planning walk found.
#[derive(Debug, Default)]
pub struct Plan {
    /// Files to work on, worst first.
    pub candidates: Vec<Candidate>,
    /// Files already at their best count (and their extents).
    pub already_best: Vec<(Entry, u64)>,
    /// Entries left alone, with why.
    pub skipped: Vec<(Entry, Skip)>,
}

/// Walks `src` and plans: regular files with more extents than their best
/// count, worst ratio first (ties: more extra extents first, then walk
/// order).
///
/// # Errors
/// The walk cannot start.
pub fn plan(src: &dyn Source, lost_found: &LostFound, root: bool, uid: u32) -> Result<Plan> {
    let mut p = Plan::default();
    let rule = src.best_rule();
    let bs = u64::from(src.block_size());
    src.walk(&mut |e| {
        let skip = if lost_found.contains(&e.path) {
            Some(Skip::LostFound)
        } else if e.kind != FileKind::Regular {
            None // directories and the like are not reported
        } else if !root && e.uid != uid {
            Some(Skip::NotOwner)
        } else if e.size == 0 {
            Some(Skip::Empty)
        } else if e.sectors == 0 {
            Some(Skip::NoBlocks)
        } else {
            match src.extents(e) {
                Err(x) => Some(Skip::Unmappable(x.to_string())),
                Ok(x) if x.count() == 0 => Some(Skip::NoBlocks),
                Ok(x) => {
                    let score =
                        FileScore::new(&rule, x.count(), x.physical_count(), x.blocks(), bs);
                    if score.now <= score.best {
                        p.already_best.push((e.clone(), score.now));
                    } else {
                        p.candidates.push(Candidate {
                            entry: e.clone(),
                            extents: x,
                            score,
                        });
                    }
                    None
                }
            }
        };
        if let Some(s) = skip {
            if e.kind == FileKind::Regular || s == Skip::LostFound {
                p.skipped.push((e.clone(), s));
            }
        }
        Walk::Continue
    })?;
    p.candidates.sort_by(|a, b| {
        b.score
            .ratio
            .total_cmp(&a.score.ratio)
            .then((b.score.now - b.score.best).cmp(&(a.score.now - a.score.best)))
    });
    Ok(p)
}

/// How to run a plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Stop starting work at this moment (`-t`).
    pub deadline: Option<Instant>,
    /// How often a file that was busy is tried again.
    pub retries: u32,
    /// Pause before a retry, letting a writer finish.
    pub retry_delay: Duration,
}

/// Counts of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files now in fewer extents.
    pub improved: u64,
    /// Files where free space offered nothing better, or a move gained nothing.
    pub not_improved: u64,
    /// Files left alone (reasons reported one by one).
    pub skipped: u64,
    /// Files a move failed on.
    pub failed: u64,
    /// Files not reached before the time limit.
    pub not_reached: u64,
    /// Extents of the files reached, as planned.
    pub extents_before: u64,
    /// Extents of the files reached, after (unchanged for files skipped or
    /// failed).
    pub extents_after: u64,
    /// Whether the time limit stopped the run.
    pub timed_out: bool,
}

/// Runs `mover` over the plan's candidates in order; `report(i, n, c,
/// outcome)` hears about each file as it is done. A file found busy is
/// tried again after the others, up to `retries` times.
pub fn run(
    plan: &Plan,
    mover: &mut dyn Mover,
    opts: &RunOptions,
    report: &mut dyn FnMut(usize, usize, &Candidate, &Outcome),
) -> Summary {
    let mut s = Summary::default();
    let n = plan.candidates.len();
    let mut queue: VecDeque<(usize, u32)> = (0..n).map(|i| (i, 0)).collect();
    let mut done = 0usize;
    while let Some((i, tries)) = queue.pop_front() {
        if opts.deadline.is_some_and(|d| Instant::now() >= d) {
            s.timed_out = true;
            s.not_reached = queue.len() as u64 + 1;
            break;
        }
        let c = &plan.candidates[i];
        if tries > 0 && !opts.retry_delay.is_zero() {
            std::thread::sleep(opts.retry_delay);
        }
        let mut outcome = mover.defrag(c, opts.deadline);
        if let Outcome::Retry(why) = &outcome {
            if tries < opts.retries {
                queue.push_back((i, tries + 1));
                continue;
            }
            outcome = Outcome::Skipped(why.clone());
        }
        done += 1;
        // Figures against the plan's count: an earlier attempt may have
        // moved the file before a writer sent it back to the queue.
        let before = c.score.now;
        let now = match &outcome {
            Outcome::Improved { after, .. }
            | Outcome::Unchanged { after, .. }
            | Outcome::Converted { after, .. }
            | Outcome::Stopped { after, .. } => Some(*after),
            Outcome::AlreadyBest { extents } | Outcome::NoImprovement { extents, .. } => {
                Some(*extents)
            }
            _ => None,
        };
        if let (Some(after), true) = (now, tries > 0) {
            if after < before && !matches!(outcome, Outcome::Stopped { .. }) {
                outcome = Outcome::Improved { before, after };
            }
        }
        s.extents_before += before;
        s.extents_after += now.unwrap_or(before);
        match &outcome {
            Outcome::Improved { .. } => s.improved += 1,
            Outcome::Unchanged { before, after }
            | Outcome::Converted { before, after }
            | Outcome::Stopped { before, after } => {
                s.not_improved += u64::from(after >= before);
                s.improved += u64::from(after < before);
            }
            Outcome::NoImprovement { .. } | Outcome::AlreadyBest { .. } => s.not_improved += 1,
            Outcome::Skipped(_) | Outcome::Retry(_) => s.skipped += 1,
            Outcome::Failed(_) => s.failed += 1,
        }
        report(done, n, c, &outcome);
        if matches!(outcome, Outcome::Stopped { .. }) {
            s.timed_out = true;
            s.not_reached = queue.len() as u64;
            break;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extent::Extent;

    fn cand(name: &str, now: u64, blocks: u64) -> Candidate {
        let extents: Vec<Extent> = (0..now)
            .map(|i| Extent {
                logical: i * (blocks / now),
                physical: 1000 * (i + 1),
                len: blocks / now,
                unwritten: false,
            })
            .collect();
        let x = FileExtents::new(std::path::Path::new(name), extents).expect("valid");
        let score = FileScore::new(
            &crate::score::BestRule::default(),
            now,
            now,
            x.blocks(),
            4096,
        );
        Candidate {
            entry: Entry {
                path: name.as_bytes().to_vec(),
                kind: FileKind::Regular,
                size: blocks * 4096,
                sectors: blocks * 8,
                uid: 0,
                ino: 12,
                dev: 1,
                mtime_ns: 0,
            },
            extents: x,
            score,
        }
    }

    /// Answers from a script per file, one per attempt.
    struct Scripted(
        std::collections::HashMap<String, VecDeque<Outcome>>,
        Vec<String>,
    );

    impl Mover for Scripted {
        fn defrag(&mut self, c: &Candidate, _: Option<Instant>) -> Outcome {
            let name = c.entry.display();
            self.1.push(name.clone());
            self.0
                .get_mut(&name)
                .and_then(|q| q.pop_front())
                .unwrap_or(Outcome::Failed("unscripted".into()))
        }
    }

    #[test]
    fn retries_go_last_and_count_from_the_plan() {
        let plan = Plan {
            candidates: vec![cand("a", 8, 64), cand("b", 4, 64)],
            ..Plan::default()
        };
        let mut m = Scripted(
            [
                (
                    "a".to_string(),
                    VecDeque::from([
                        Outcome::Retry(Skip::WrittenDuringMove),
                        Outcome::AlreadyBest { extents: 1 },
                    ]),
                ),
                (
                    "b".to_string(),
                    VecDeque::from([Outcome::NoImprovement {
                        extents: 4,
                        donor: 4,
                    }]),
                ),
            ]
            .into_iter()
            .collect(),
            Vec::new(),
        );
        let opts = RunOptions {
            retries: 2,
            ..RunOptions::default()
        };
        let mut seen = Vec::new();
        let s = run(&plan, &mut m, &opts, &mut |_, _, c, o| {
            seen.push((c.entry.display(), o.clone()));
        });
        assert_eq!(m.1, ["a", "b", "a"]);
        // The first attempt moved a before a writer came: 8 -> 1 in all.
        assert_eq!(
            seen[1],
            (
                "a".into(),
                Outcome::Improved {
                    before: 8,
                    after: 1
                }
            )
        );
        assert_eq!(
            (
                s.improved,
                s.not_improved,
                s.extents_before,
                s.extents_after
            ),
            (1, 1, 12, 5)
        );
    }

    #[test]
    fn a_passed_deadline_starts_nothing() {
        let plan = Plan {
            candidates: vec![cand("a", 8, 64)],
            ..Plan::default()
        };
        let mut m = Scripted(Default::default(), Vec::new());
        let opts = RunOptions {
            deadline: Some(Instant::now()),
            ..RunOptions::default()
        };
        let s = run(&plan, &mut m, &opts, &mut |_, _, _, _| {});
        assert!(m.1.is_empty());
        assert!(s.timed_out);
        assert_eq!(s.not_reached, 1);
    }

    #[test]
    fn busy_files_are_skipped_after_their_retries() {
        let plan = Plan {
            candidates: vec![cand("a", 8, 64)],
            ..Plan::default()
        };
        let mut m = Scripted(
            [(
                "a".to_string(),
                VecDeque::from(vec![Outcome::Retry(Skip::OpenForWriting); 3]),
            )]
            .into_iter()
            .collect(),
            Vec::new(),
        );
        let opts = RunOptions {
            retries: 2,
            ..RunOptions::default()
        };
        let mut last = None;
        let s = run(&plan, &mut m, &opts, &mut |_, _, _, o| {
            last = Some(o.clone())
        });
        assert_eq!(m.1.len(), 3);
        assert_eq!(last, Some(Outcome::Skipped(Skip::OpenForWriting)));
        assert_eq!((s.skipped, s.failed), (1, 0));
    }
}
