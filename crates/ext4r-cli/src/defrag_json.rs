//! `e4defrag-r -c --json`: the score of each target as one JSON object
//! (serde_json), the figures e4defrag's text prints as numbers.

use ext4r_defrag::score::{calc_score, BOUND_SCORE};
use ext4r_defrag::source::Source;
use ext4r_defrag::stat::{ArgKind, StatSummary};
use serde::Serialize;

/// The whole run: one entry per target that could be scored.
#[derive(Serialize, Default)]
pub(crate) struct Report {
    pub targets: Vec<Target>,
}

/// One target's figures.
#[derive(Serialize)]
pub(crate) struct Target {
    target: String,
    kind: &'static str,
    /// Files scored (0 for a user other than root without -v, as e4defrag
    /// scores nothing then).
    files_scored: u64,
    extents_now: u64,
    extents_best: u64,
    blocks: u64,
    average_extent_kb: u64,
    /// "Fragmentation score", unrounded.
    score: f64,
    needs_defrag: bool,
    extents_below_1mib: u64,
    files_with_them: u64,
    /// Free space in KiB and its largest extent (null when unknown).
    free_kb: Option<u64>,
    largest_free_extent_kb: Option<u64>,
    /// The `<Fragmented files>` list, most fragmented first.
    fragmented: Vec<Fragmented>,
}

#[derive(Serialize)]
struct Fragmented {
    path: String,
    extents_now: u64,
    extents_best: u64,
    average_extent_kb: u64,
    ratio: f64,
}

impl Target {
    pub(crate) fn new(arg: &[u8], kind: ArgKind, src: &dyn Source, s: &StatSummary) -> Self {
        let t = &s.totals;
        let score = if s.scored == 0 {
            0.0
        } else {
            calc_score(t.ratio())
        };
        let free = src.free_space().ok();
        let kb = |blocks: u64, bs: u32| blocks.saturating_mul(u64::from(bs / 1024));
        Target {
            target: String::from_utf8_lossy(arg).into_owned(),
            kind: match kind {
                ArgKind::Device => "device",
                ArgKind::Directory => "directory",
                ArgKind::File => "file",
            },
            files_scored: s.scored,
            extents_now: t.now,
            extents_best: t.best,
            blocks: t.blocks,
            average_extent_kb: t.size_per_ext(u64::from(src.block_size())),
            score: f64::from(score),
            needs_defrag: s.scored != 0 && score > BOUND_SCORE,
            extents_below_1mib: s.small_extents,
            files_with_them: s.small_files,
            free_kb: free.as_ref().map(|f| kb(f.free_blocks, f.block_size)),
            largest_free_extent_kb: free.as_ref().map(|f| kb(f.max, f.block_size)),
            fragmented: s
                .fragmented
                .iter()
                .map(|r| Fragmented {
                    path: r.path.clone(),
                    extents_now: r.score.now,
                    extents_best: r.score.best,
                    average_extent_kb: r.score.size_per_ext,
                    ratio: f64::from(r.score.ratio),
                })
                .collect(),
        }
    }
}

impl Report {
    pub(crate) fn render(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
