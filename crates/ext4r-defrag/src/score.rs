//! e4defrag's arithmetic, to the bit: the best extent count of a file, the
//! per-file ratio, the totals and the "Fragmentation score", and the
//! five-file ranking (misc/e4defrag.c of e2fsprogs 1.47.0: `get_best_count`,
//! `file_statistic`, `CALC_SCORE`). e4defrag computes ratios in C `float`;
//! they are `f32` here, in the same order of operations, so that rankings
//! and rounding come out the same.

use ext4r_format::features::Incompat;
use ext4r_format::superblock::Superblock;

/// Scores above this "need defragmentation" (`BOUND_SCORE`).
pub const BOUND_SCORE: f32 = 55.0;

/// Files listed under `<Fragmented files>` (`SHOW_FRAG_FILES`).
pub const SHOW_FRAG_FILES: usize = 5;

/// What "best" is measured against: blocks one extent can hold at most in
/// e4defrag's eyes, a block group or, with flex_bg, a flex group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BestRule {
    /// `s_blocks_per_group`; 0 when the superblock could not be read (then
    /// every file's best is 1, as e4defrag does).
    pub blocks_per_group: u32,
    /// `s_log_groups_per_flex` when flex_bg is on.
    pub log_groups_per_flex: Option<u8>,
}

impl BestRule {
    /// The rule for a filesystem.
    pub fn from_superblock(sb: &Superblock) -> Self {
        BestRule {
            blocks_per_group: sb.s_blocks_per_group.get(),
            log_groups_per_flex: sb
                .has_incompat(Incompat::FLEX_BG)
                .then_some(sb.s_log_groups_per_flex),
        }
    }

    /// Blocks in the unit a file is expected to fill before it needs
    /// another extent (0 when unknown).
    pub fn unit_blocks(&self) -> u64 {
        let flex = match self.log_groups_per_flex {
            // e4defrag shifts a 32-bit 1; a log of 32 or more is no
            // filesystem mke2fs makes: saturate rather than wrap.
            Some(log) => 1u64.checked_shl(u32::from(log)).unwrap_or(u64::MAX),
            None => 1,
        };
        u64::from(self.blocks_per_group).saturating_mul(flex)
    }

    /// The fewest extents a file of `blocks` blocks can have in e4defrag's
    /// model: one per (flex) group it must span, at least 1.
    pub fn best(&self, blocks: u64) -> u64 {
        let unit = self.unit_blocks();
        if unit == 0 || blocks == 0 {
            return 1;
        }
        (blocks - 1) / unit + 1
    }
}

/// One file's figures as e4defrag prints them.
#[derive(Debug, Clone, PartialEq)]
pub struct FileScore {
    /// Extents now (FIEMAP records).
    pub now: u64,
    /// Runs contiguous on disk and in the file.
    pub physical: u64,
    /// The best count.
    pub best: u64,
    /// Blocks mapped.
    pub blocks: u64,
    /// KiB per extent, rounded down.
    pub size_per_ext: u64,
    /// `(physical - best) * 100 / blocks` in `f32`.
    pub ratio: f32,
}

impl FileScore {
    /// Scores a file with `now` records forming `physical` runs over
    /// `blocks` blocks; `blksize` is `st_blksize` (e4defrag uses it as the
    /// block size in KiB arithmetic).
    pub fn new(rule: &BestRule, now: u64, physical: u64, blocks: u64, blksize: u64) -> Self {
        let best = rule.best(blocks);
        let size_per_ext = blocks
            .saturating_mul(blksize / 1024)
            .checked_div(now)
            .unwrap_or(0);
        // C: (float)(int - int) * 100 / unsigned long long, all in float.
        let diff = physical as i64 - best as i64;
        let ratio = if blocks == 0 {
            0.0
        } else {
            diff as f32 * 100.0 / blocks as f32
        };
        FileScore {
            now,
            physical,
            best,
            blocks,
            size_per_ext,
            ratio,
        }
    }
}

/// The sums e4defrag prints at the end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Sum of "now" (`extents_before_defrag`).
    pub now: u64,
    /// Sum of "best" (`extents_after_defrag`).
    pub best: u64,
    /// Sum of blocks (`files_block_count`).
    pub blocks: u64,
}

impl Totals {
    /// Adds one file.
    pub fn add(&mut self, f: &FileScore) {
        self.now += f.now;
        self.best += f.best;
        self.blocks += f.blocks;
    }

    /// "Average size per extent" in KiB.
    pub fn size_per_ext(&self, blksize: u64) -> u64 {
        self.blocks
            .saturating_mul(blksize / 1024)
            .checked_div(self.now)
            .unwrap_or(0)
    }

    /// `(now - best) * 100 / blocks` in `f32`.
    pub fn ratio(&self) -> f32 {
        if self.blocks == 0 {
            return 0.0;
        }
        (self.now as i64 - self.best as i64) as f32 * 100.0 / self.blocks as f32
    }

    /// The "Fragmentation score".
    pub fn score(&self) -> f32 {
        calc_score(self.ratio())
    }
}

/// e4defrag's `CALC_SCORE`: linear up to a ratio of 10 (score 80), then
/// slowly toward 100.
pub fn calc_score(ratio: f32) -> f32 {
    if ratio > 10.0 {
        80.0 + 20.0 * ratio / 100.0
    } else {
        8.0 * ratio
    }
}

/// A score as e4defrag prints it (`%.0f`: to the nearest integer, ties to
/// even, from the exact value).
pub fn format_score(score: f32) -> String {
    format!("{:.0}", f64::from(score))
}

/// One ranked file.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The path as printed.
    pub path: String,
    /// Its figures.
    pub score: FileScore,
}

/// The five most fragmented files, with e4defrag's tie rule: a file goes in
/// front of the first entry whose ratio is not above its own, so among
/// equal ratios the one seen last ranks first; empty slots count as ratio
/// 0, which a file with a negative ratio never displaces.
#[derive(Debug, Clone, Default)]
pub struct Ranking {
    slots: Vec<Ranked>,
}

impl Ranking {
    /// Offers a file.
    pub fn offer(&mut self, path: &str, score: &FileScore) {
        let pos = (0..SHOW_FRAG_FILES).find(|&i| match self.slots.get(i) {
            Some(r) => score.ratio >= r.score.ratio,
            None => score.ratio >= 0.0,
        });
        if let Some(i) = pos {
            self.slots.insert(
                i,
                Ranked {
                    path: path.to_string(),
                    score: score.clone(),
                },
            );
            self.slots.truncate(SHOW_FRAG_FILES);
        }
    }

    /// The ranked files, worst first.
    pub fn entries(&self) -> &[Ranked] {
        &self.slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> BestRule {
        BestRule {
            blocks_per_group: 32768,
            log_groups_per_flex: Some(4),
        }
    }

    #[test]
    fn best_counts_flex_groups() {
        let r = rule();
        assert_eq!(r.best(1), 1);
        assert_eq!(r.best(32768 * 16), 1);
        assert_eq!(r.best(32768 * 16 + 1), 2);
        let no_flex = BestRule {
            blocks_per_group: 8192,
            log_groups_per_flex: None,
        };
        assert_eq!(no_flex.best(8193), 2);
        assert_eq!(BestRule::default().best(1 << 40), 1);
    }

    #[test]
    fn figures_match_e4defrag() {
        // Measured with e4defrag 1.47.0: 41/3 extents over 76840 blocks of
        // 4 KiB average 7496 KB per extent and score 0.
        let t = Totals {
            now: 41,
            best: 3,
            blocks: 76840,
        };
        assert_eq!(t.size_per_ext(4096), 7496);
        assert_eq!(format_score(t.score()), "0");
        let f = FileScore::new(&rule(), 19, 19, 20, 4096);
        assert_eq!((f.best, f.size_per_ext), (1, 4));
        assert_eq!(f.ratio, 90.0);
        assert_eq!(calc_score(12.0), 82.4);
        assert_eq!(calc_score(1.5), 12.0);
    }

    #[test]
    fn scores_round_half_to_even() {
        assert_eq!(format_score(0.5), "0");
        assert_eq!(format_score(1.5), "2");
        assert_eq!(format_score(2.5), "2");
        assert_eq!(format_score(55.4), "55");
    }

    #[test]
    fn ranking_puts_later_ties_first_and_keeps_five() {
        let mut r = Ranking::default();
        let s = |ratio: f32| FileScore {
            now: 2,
            physical: 2,
            best: 1,
            blocks: 2,
            size_per_ext: 4,
            ratio,
        };
        r.offer("a", &s(1.0));
        r.offer("b", &s(1.0));
        r.offer("neg", &s(-5.0));
        r.offer("c", &s(3.0));
        r.offer("zero", &s(0.0));
        let names: Vec<&str> = r.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(names, ["c", "b", "a", "zero"]);
        for n in ["d", "e", "f"] {
            r.offer(n, &s(2.0));
        }
        let names: Vec<&str> = r.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(names, ["c", "f", "e", "d", "b"]);
    }
}
