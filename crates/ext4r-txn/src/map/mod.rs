//! The one walker of an inode's block pointers: extent trees of any depth
//! and ext2/3 block maps (direct, indirect, double and triple indirect).
//!
//! [`runs`] reads a mapping into sorted runs for every reader (the read
//! path, tune, fsck's helpers, the journal's location); [`all_blocks`]
//! lists every block an inode holds; [`store`] writes a mapping back, as an
//! extent tree or a block map, inside a transaction; [`walk`] is the
//! visitor walk for callers that judge, repair or move single pointers
//! (fsck, tune, defrag).

mod edit;
mod read;
pub mod walk;

pub use edit::store;
pub use read::{all_blocks, runs, runs_and_nodes, runs_whole};

use crate::csum::Checksums;
use crate::error::{Error, Result};
use ext4r_format::FormatError;

/// A run of a file's logical blocks stored contiguously on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// First logical block.
    pub logical: u64,
    /// First physical block.
    pub physical: u64,
    /// Number of blocks.
    pub len: u64,
    /// Allocated but not written (reads as zeros).
    pub unwritten: bool,
}

impl Run {
    /// One past the last logical block.
    pub fn end(&self) -> u64 {
        self.logical + self.len
    }

    /// The run cut at logical block `at`: the part before it and the part
    /// from it on (either `None` when empty), each keeping the state.
    pub fn split_at(self, at: u64) -> (Option<Run>, Option<Run>) {
        if at <= self.logical {
            return (None, Some(self));
        }
        if at >= self.end() {
            return (Some(self), None);
        }
        let n = at - self.logical;
        let before = Run { len: n, ..self };
        let after = Run {
            logical: at,
            physical: self.physical + n,
            len: self.len - n,
            ..self
        };
        (Some(before), Some(after))
    }
}

/// Appends `r` to `out`, merged into the last run when it continues it in
/// the file and on disk with the same written state.
pub fn push_run(out: &mut Vec<Run>, r: Run) {
    if let Some(last) = out.last_mut() {
        if last.end() == r.logical
            && last.physical + last.len == r.physical
            && last.unwritten == r.unwritten
        {
            last.len += r.len;
            return;
        }
    }
    out.push(r);
}

/// Where a walk reads mapping blocks from: a filesystem being read, or one
/// being changed (whose reads see its own uncommitted changes).
pub trait BlockSource {
    /// Block size in bytes.
    fn block_size(&self) -> u32;
    /// `(first data block, blocks count)`: the blocks a mapping may name.
    fn block_range(&self) -> (u64, u64);
    /// Reads block `nr`; `what` names the reader for errors.
    ///
    /// # Errors
    /// I/O errors, or [`Error::Corrupt`] for a block outside the range.
    fn read_block(&self, nr: u64, what: &str) -> Result<Vec<u8>>;
    /// The checksums to verify mapping blocks against, if the caller wants
    /// them verified.
    fn verify(&self) -> Option<&Checksums> {
        None
    }
    /// Whether block `nr` is the source's own, not yet stamped (a
    /// transaction's change): not verified against its checksum.
    fn trusted(&self, nr: u64) -> bool {
        let _ = nr;
        false
    }
    /// Whether block `nr` already matched its checksum as kind `kind` in
    /// this source (see [`BlockSource::note_verified`]).
    fn was_verified(&self, nr: u64, kind: crate::csum::BlockKind) -> bool {
        let _ = (nr, kind);
        false
    }
    /// Block `nr` matched its checksum as kind `kind`: a source that can
    /// remember it need not check it again.
    fn note_verified(&self, nr: u64, kind: crate::csum::BlockKind) {
        let _ = (nr, kind);
    }
    /// Checks that `count` blocks from `block` lie inside the filesystem.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming `what`.
    fn check_blocks(&self, block: u64, count: u64, what: &str) -> Result<()> {
        let (first, blocks) = self.block_range();
        let end = block.checked_add(count);
        if block < first || end.is_none_or(|e| e > blocks) || count == 0 {
            return Err(Error::corrupt(
                what.to_string(),
                FormatError::invalid(
                    "block number",
                    format!("blocks {block}+{count} outside the filesystem (0..{blocks})"),
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod run_tests {
    use super::{push_run, Run};

    fn run(logical: u64, physical: u64, len: u64) -> Run {
        Run {
            logical,
            physical,
            len,
            unwritten: false,
        }
    }

    #[test]
    fn a_split_keeps_every_block_in_place() {
        let r = run(10, 100, 5);
        assert_eq!(r.split_at(10), (None, Some(r)));
        assert_eq!(r.split_at(15), (Some(r), None));
        assert_eq!(
            r.split_at(12),
            (Some(run(10, 100, 2)), Some(run(12, 102, 3)))
        );
    }

    #[test]
    fn only_continuing_runs_of_one_state_merge() {
        let mut out = Vec::new();
        push_run(&mut out, run(0, 50, 2));
        push_run(&mut out, run(2, 52, 3));
        push_run(&mut out, run(5, 60, 1));
        push_run(
            &mut out,
            Run {
                unwritten: true,
                ..run(6, 61, 1)
            },
        );
        assert_eq!(
            out,
            vec![
                run(0, 50, 5),
                run(5, 60, 1),
                Run {
                    unwritten: true,
                    ..run(6, 61, 1)
                }
            ]
        );
    }
}
