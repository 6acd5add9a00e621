//! Moving a file's contents along its logical blocks: fallocate's
//! `COLLAPSE_RANGE` (a range taken out, what follows moved down) and
//! `INSERT_RANGE` (a hole put in, what follows moved up), as the kernel's
//! `ext4_collapse_range` and `ext4_insert_range` do them.
//!
//! Both work on extent-mapped regular files only and on whole clusters
//! (blocks without bigalloc): nothing is copied, the extents past the
//! range change their logical start. Extents past the size (preallocated
//! with `KEEP_SIZE`) move with the rest, as the kernel moves them.

use super::WriteFs;
use crate::error::{Error, Result};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_txn::map::{self, Run};

/// `runs` cut at logical blocks `lo` and `hi`: the runs before `lo`,
/// those inside `[lo, hi)`, those from `hi` on (a run crossing a cut is
/// split there, its halves keeping its unwritten state).
fn cut(runs: &[Run], lo: u64, hi: u64) -> (Vec<Run>, Vec<Run>, Vec<Run>) {
    let (mut before, mut mid, mut after) = (Vec::new(), Vec::new(), Vec::new());
    for r in runs {
        let (b, rest) = r.split_at(lo);
        before.extend(b);
        let (m, a) = rest.map_or((None, None), |x| x.split_at(hi));
        mid.extend(m);
        after.extend(a);
    }
    (before, mid, after)
}

/// Runs joined where one continues the other (logically and physically,
/// in the same state), as the kernel merges extents after a shift.
fn merged(runs: impl IntoIterator<Item = Run>) -> Vec<Run> {
    let mut out = Vec::new();
    for r in runs {
        map::push_run(&mut out, r);
    }
    out
}

/// The physical clusters (of `r` blocks) that `runs` use, as sorted,
/// merged `[start, end)` block spans: each cluster once.
fn cluster_spans(runs: &[Run], r: u64) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = runs
        .iter()
        .map(|g| {
            let start = g.physical & !(r - 1);
            (start, (g.physical + g.len).div_ceil(r) * r)
        })
        .collect();
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

impl WriteFs {
    /// The checks collapse and insert share, in the kernel's order: a
    /// regular file that may be written, its inline data moved to a block
    /// first (as `ext4_fallocate` does for every mode), extent-mapped
    /// (else [`Error::Unsupported`]), `offset` and `len` whole clusters and
    /// `len` not 0 (else [`Error::InvalidArgument`]). Returns the inode and
    /// the range in blocks.
    fn shift_checks(
        &mut self,
        ino: u32,
        what: &str,
        offset: u64,
        len: u64,
    ) -> Result<(Inode, u64, u64)> {
        self.file_inode(ino)?;
        let i = self.uninline(ino)?;
        if !i.flags().contains(InodeFlags::EXTENTS) {
            return Err(Error::Unsupported(format!(
                "inode {ino}: {what} needs extents"
            )));
        }
        let bs = self.shape.bs as u64;
        let cluster = bs * self.shape.ratio;
        if len == 0 || offset % cluster != 0 || len % cluster != 0 {
            return Err(Error::InvalidArgument(format!(
                "inode {ino}: {what} of {len} bytes at {offset}: not whole clusters of {cluster}"
            )));
        }
        Ok((i, offset / bs, len / bs))
    }

    /// Takes `[offset, offset + len)` out of regular file `ino`
    /// (fallocate's `COLLAPSE_RANGE`): its blocks are freed, everything
    /// after it moves down by `len`, the size shrinks by `len`; the
    /// modification and change times are stamped. One operation.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a file without extents (EOPNOTSUPP, as the
    /// kernel); [`Error::InvalidArgument`] (EINVAL) when `offset` or `len`
    /// is not a multiple of the cluster size, `len` is 0, or the range
    /// reaches the end of the file (that would be a truncate);
    /// [`Error::Corrupt`] for a damaged extent tree; otherwise as
    /// [`WriteFs::write`].
    pub fn collapse_range(&mut self, ino: u32, offset: u64, len: u64) -> Result<()> {
        self.op(|w| w.collapse_now(ino, offset, len))
    }

    fn collapse_now(&mut self, ino: u32, offset: u64, len: u64) -> Result<()> {
        let (mut i, first, n) = self.shift_checks(ino, "collapsing a range", offset, len)?;
        let size = i.size();
        if offset.checked_add(len).is_none_or(|end| end >= size) {
            return Err(Error::InvalidArgument(format!(
                "inode {ino}: a collapse of {len} bytes at {offset} reaches the end ({size})"
            )));
        }
        let runs = map::runs(&self.txn, ino, &i, false)?;
        let (before, gone, after) = cut(&runs, first, first + n);
        // Whole logical clusters go, and a logical cluster lies in one
        // physical cluster: every cluster these blocks use goes with them,
        // freed as spans (two runs may share a cluster at their ends).
        let r = self.shape.ratio;
        for (start, end) in cluster_spans(&gone, r) {
            self.txn.free_blocks(start, end - start)?;
        }
        let moved = after.into_iter().map(|x| Run {
            logical: x.logical - n,
            ..x
        });
        let new_runs = merged(before.into_iter().chain(moved));
        let goal = new_runs.last().map_or(0, |x| x.physical + x.len);
        let tree = map::store(&mut self.txn, ino, &mut i, &new_runs, goal)?;
        self.set_blocks(ino, &mut i, &new_runs, tree)?;
        i.set_size(size - len);
        let now = self.now();
        i.set_mtime(now);
        i.set_ctime(now);
        self.put_inode(ino, &i)
    }

    /// Puts a hole of `len` bytes at `offset` into regular file `ino`
    /// (fallocate's `INSERT_RANGE`): everything from `offset` on moves up
    /// by `len` (an extent across `offset` is split there), the size grows
    /// by `len`; the modification and change times are stamped. One
    /// operation.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a file without extents (EOPNOTSUPP, as the
    /// kernel); [`Error::InvalidArgument`] (EINVAL) when `offset` or `len`
    /// is not a multiple of the cluster size, `len` is 0, or `offset` is
    /// not below the size; [`Error::FileTooLarge`] (EFBIG) when the file
    /// would grow past the largest size; [`Error::Corrupt`] for a damaged
    /// extent tree; otherwise as [`WriteFs::write`].
    pub fn insert_range(&mut self, ino: u32, offset: u64, len: u64) -> Result<()> {
        self.op(|w| w.insert_now(ino, offset, len))
    }

    fn insert_now(&mut self, ino: u32, offset: u64, len: u64) -> Result<()> {
        let (mut i, first, n) = self.shift_checks(ino, "inserting a range", offset, len)?;
        let size = i.size();
        if offset >= size {
            return Err(Error::InvalidArgument(format!(
                "inode {ino}: an insert at {offset} is not below the size ({size})"
            )));
        }
        let max = self.max_file_size(&i);
        if len > max.saturating_sub(size) {
            return Err(Error::FileTooLarge(format!(
                "inode {ino}: {size} bytes and {len} more"
            )));
        }
        let runs = map::runs(&self.txn, ino, &i, false)?;
        // Blocks preallocated past the size move too: none may leave the
        // logical blocks a file has.
        let bs = self.shape.bs as u64;
        if runs.last().is_some_and(|x| x.end() + n > max / bs) {
            return Err(Error::FileTooLarge(format!(
                "inode {ino}: its blocks past the size would move past the last logical block"
            )));
        }
        let (before, mid, after) = cut(&runs, first, first);
        debug_assert!(mid.is_empty());
        let moved = after.into_iter().map(|x| Run {
            logical: x.logical + n,
            ..x
        });
        let new_runs: Vec<Run> = before.into_iter().chain(moved).collect();
        let goal = new_runs.last().map_or(0, |x| x.physical + x.len);
        let tree = map::store(&mut self.txn, ino, &mut i, &new_runs, goal)?;
        self.set_blocks(ino, &mut i, &new_runs, tree)?;
        i.set_size(size + len);
        let now = self.now();
        i.set_mtime(now);
        i.set_ctime(now);
        self.put_inode(ino, &i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logical: u64, physical: u64, len: u64, unwritten: bool) -> Run {
        Run {
            logical,
            physical,
            len,
            unwritten,
        }
    }

    #[test]
    fn cut_splits_runs_across_both_cuts() {
        let runs = [run(0, 100, 10, false), run(20, 300, 5, true)];
        let (b, m, a) = cut(&runs, 4, 22);
        assert_eq!(b, vec![run(0, 100, 4, false)]);
        assert_eq!(m, vec![run(4, 104, 6, false), run(20, 300, 2, true)]);
        assert_eq!(a, vec![run(22, 302, 3, true)]);
        // An empty cut: a run across it is split, nothing in the middle.
        let (b, m, a) = cut(&runs, 5, 5);
        assert_eq!(b, vec![run(0, 100, 5, false)]);
        assert!(m.is_empty());
        assert_eq!(a, vec![run(5, 105, 5, false), run(20, 300, 5, true)]);
    }

    #[test]
    fn cluster_spans_count_each_cluster_once() {
        // Without bigalloc: the runs themselves, adjacent ones merged.
        let runs = [
            run(0, 100, 4, false),
            run(9, 104, 2, false),
            run(20, 50, 1, true),
        ];
        assert_eq!(cluster_spans(&runs, 1), vec![(50, 51), (100, 106)]);
        // Clusters of 4: two runs in one cluster free it once.
        let runs = [
            run(0, 101, 2, false),
            run(2, 103, 3, false),
            run(8, 40, 4, false),
        ];
        assert_eq!(cluster_spans(&runs, 4), vec![(40, 44), (100, 108)]);
    }

    #[test]
    fn merged_joins_only_what_continues_in_the_same_state() {
        let out = merged([
            run(0, 100, 4, false),
            run(4, 104, 2, false),
            run(6, 106, 2, true),
            run(9, 109, 1, true),
        ]);
        assert_eq!(
            out,
            vec![
                run(0, 100, 6, false),
                run(6, 106, 2, true),
                run(9, 109, 1, true)
            ]
        );
    }
}
