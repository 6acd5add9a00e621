//! A file's extents and e4defrag's two ways of counting them.
//!
//! e4defrag (misc/e4defrag.c) keeps each file's FIEMAP records twice: sorted
//! by logical block, where the number of records is the "now" figure it
//! prints, and sorted by physical block, where it counts runs that continue
//! each other both on disk and in the file; that second count is what the
//! per-file fragmentation ratio uses. Both lists refuse overlapping records.

use std::path::Path;

use crate::error::{Error, Result};

/// A run of a file's blocks contiguous on disk, in filesystem blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extent {
    /// First logical block in the file.
    pub logical: u64,
    /// First physical block on the device.
    pub physical: u64,
    /// Number of blocks.
    pub len: u64,
    /// Allocated but not written (reads as zeros).
    pub unwritten: bool,
}

impl Extent {
    /// One past the last logical block.
    pub fn logical_end(&self) -> u64 {
        self.logical.saturating_add(self.len)
    }

    /// One past the last physical block.
    pub fn physical_end(&self) -> u64 {
        self.physical.saturating_add(self.len)
    }
}

impl From<ext4r::fs::Run> for Extent {
    fn from(r: ext4r::fs::Run) -> Self {
        Extent {
            logical: r.logical,
            physical: r.physical,
            len: r.len,
            unwritten: r.unwritten,
        }
    }
}

/// A file's extents checked the way e4defrag builds its lists: sorted by
/// logical block, no two overlapping logically or physically, none empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileExtents {
    extents: Vec<Extent>,
}

impl FileExtents {
    /// Checks and sorts `extents`.
    ///
    /// # Errors
    /// [`Error::BadExtents`] naming `path` when two records overlap in the
    /// file or on disk, or one is empty (e4defrag fails the file with
    /// "Failed to get file extents" then).
    pub fn new(path: &Path, mut extents: Vec<Extent>) -> Result<Self> {
        let bad = |detail: String| Error::BadExtents {
            path: path.to_path_buf(),
            detail,
        };
        if let Some(e) = extents.iter().find(|e| e.len == 0) {
            return Err(bad(format!("empty extent at logical block {}", e.logical)));
        }
        extents.sort_unstable_by_key(|e| e.physical);
        for w in extents.windows(2) {
            if w[1].physical < w[0].physical_end() {
                return Err(bad(format!(
                    "physical blocks {}+{} overlap {}+{}",
                    w[1].physical, w[1].len, w[0].physical, w[0].len
                )));
            }
        }
        extents.sort_unstable_by_key(|e| e.logical);
        for w in extents.windows(2) {
            if w[1].logical < w[0].logical_end() {
                return Err(bad(format!(
                    "logical blocks {}+{} overlap {}+{}",
                    w[1].logical, w[1].len, w[0].logical, w[0].len
                )));
            }
        }
        Ok(FileExtents { extents })
    }

    /// The extents, by logical block.
    pub fn as_slice(&self) -> &[Extent] {
        &self.extents
    }

    /// e4defrag's "now": the number of records.
    pub fn count(&self) -> u64 {
        self.extents.len() as u64
    }

    /// Blocks mapped (unwritten ones included), e4defrag's `get_file_blocks`.
    pub fn blocks(&self) -> u64 {
        self.extents.iter().map(|e| e.len).sum()
    }

    /// Runs contiguous both on disk and in the file, e4defrag's
    /// `get_physical_count`: walking the records by physical block, a new run
    /// starts wherever one does not end exactly where the next begins, on
    /// disk and in the file.
    pub fn physical_count(&self) -> u64 {
        if self.extents.is_empty() {
            return 0;
        }
        let mut by_phys: Vec<&Extent> = self.extents.iter().collect();
        by_phys.sort_unstable_by_key(|e| e.physical);
        1 + by_phys
            .windows(2)
            .filter(|w| w[0].physical_end() != w[1].physical || w[0].logical_end() != w[1].logical)
            .count() as u64
    }

    /// Data ranges of the file: runs of logically adjacent extents, as
    /// `(first logical block, blocks)` (e4defrag's `join_extents` groups).
    pub fn data_ranges(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for e in &self.extents {
            match out.last_mut() {
                Some((s, n)) if *s + *n == e.logical => *n += e.len,
                _ => out.push((e.logical, e.len)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(logical: u64, physical: u64, len: u64) -> Extent {
        Extent {
            logical,
            physical,
            len,
            unwritten: false,
        }
    }

    fn fe(v: Vec<Extent>) -> FileExtents {
        FileExtents::new(Path::new("f"), v).expect("valid")
    }

    #[test]
    fn physical_count_joins_only_runs_contiguous_both_ways() {
        // Two records continuing each other on disk and in the file: one run.
        assert_eq!(fe(vec![ext(0, 100, 8), ext(8, 108, 8)]).physical_count(), 1);
        // Contiguous on disk but swapped in the file: two runs.
        assert_eq!(fe(vec![ext(0, 108, 8), ext(8, 100, 8)]).physical_count(), 2);
        // A hole in the file over contiguous disk blocks: two runs.
        assert_eq!(fe(vec![ext(0, 100, 8), ext(9, 108, 8)]).physical_count(), 2);
        assert_eq!(fe(vec![ext(0, 7, 1)]).physical_count(), 1);
    }

    #[test]
    fn overlaps_are_refused() {
        assert!(FileExtents::new(Path::new("f"), vec![ext(0, 100, 8), ext(4, 200, 8)]).is_err());
        assert!(FileExtents::new(Path::new("f"), vec![ext(0, 100, 8), ext(8, 104, 8)]).is_err());
        assert!(FileExtents::new(Path::new("f"), vec![ext(0, 100, 0)]).is_err());
    }

    #[test]
    fn data_ranges_split_at_holes() {
        let f = fe(vec![ext(0, 50, 2), ext(2, 10, 3), ext(9, 90, 1)]);
        assert_eq!(f.data_ranges(), vec![(0, 5), (9, 1)]);
        assert_eq!(f.blocks(), 6);
        assert_eq!(f.count(), 3);
    }
}
