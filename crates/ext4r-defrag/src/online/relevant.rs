//! `-r`: relevant-file defragmentation, online. The files under a
//! directory are laid out one after another in the order a reader walks
//! them, so that reading the tree streams instead of seeking.
//!
//! The kernel has no call to put a file's blocks at a chosen place (the
//! NEC patches that added one were never merged), but `EXT4_IOC_MOVE_EXT`
//! takes a donor offset that need not equal the file's. So one donor file
//! in the directory is `fallocate`d for the whole tree in one call — the
//! allocator hands out that much space as few large extents as it can, near
//! the directory's group — and each file in turn is swapped into the next
//! stretch of it. The donor ends up holding the files' old blocks and is
//! freed when closed. How contiguous the result is depends on how
//! contiguous the free space the allocator finds is: the donor's own extent
//! count is reported, and the gaps before and after are measured from
//! FIEMAP.

use ext4r_format::num;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ext4r::fs::FileKind;
use rustix::fs::FallocateFlags;

use super::kernel::{active_swap_files, donor_in, io_outcome, move_blocks, open_checked};
use super::{Outcome, Skip};
use crate::error::{Error, Result};
use crate::extent::FileExtents;
use crate::mounted::fiemap_extents;
use crate::source::{Entry, LostFound, Source, Walk};

/// How far apart the blocks of a tree are when read in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gaps {
    /// Sum over consecutive files of the distance, in blocks, from the
    /// end of one file's last block to the next file's first block.
    pub between_files: u64,
    /// The same over every extent, inside files too: the seek distance of
    /// reading the tree in order.
    pub total: u64,
    /// Places where reading jumps (the next block is not the one after).
    pub jumps: u64,
}

/// Measures [`Gaps`] of files given in read order, each by logical block.
pub fn gaps<'a>(files: impl IntoIterator<Item = &'a FileExtents>) -> Gaps {
    let mut g = Gaps::default();
    let mut prev: Option<u64> = None;
    for f in files {
        for (i, e) in f.as_slice().iter().enumerate() {
            if let Some(p) = prev {
                if e.physical != p {
                    let d = e.physical.abs_diff(p);
                    g.jumps += 1;
                    g.total += d;
                    if i == 0 {
                        g.between_files += d;
                    }
                }
            }
            prev = Some(e.physical_end());
        }
    }
    g
}

/// An entry left out, with why.
pub type Skipped = (Entry, Skip);

/// A file of the tree, in read order.
#[derive(Debug, Clone)]
pub struct TreeFile {
    /// What the walk saw.
    pub entry: Entry,
    /// Its extents.
    pub extents: FileExtents,
}

/// The regular files with blocks under the walk's start, in its order.
///
/// # Errors
/// The walk cannot start.
pub fn read_order(
    src: &dyn Source,
    lost_found: &LostFound,
) -> Result<(Vec<TreeFile>, Vec<Skipped>)> {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    src.walk(&mut |e| {
        if e.kind != FileKind::Regular || e.size == 0 || e.sectors == 0 {
            return Walk::Continue;
        }
        if lost_found.contains(&e.path) {
            skipped.push((e.clone(), Skip::LostFound));
            return Walk::Continue;
        }
        match src.extents(e) {
            Ok(x) if x.count() > 0 => files.push(TreeFile {
                entry: e.clone(),
                extents: x,
            }),
            Ok(_) => {}
            Err(x) => skipped.push((e.clone(), Skip::Unmappable(ext4r::error::chain(&x)))),
        }
        Walk::Continue
    })?;
    Ok((files, skipped))
}

/// What a placement did.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Files placed.
    pub placed: u64,
    /// Files left where they were, with why.
    pub skipped: Vec<(PathBuf, String)>,
    /// Blocks placed.
    pub blocks: u64,
    /// Extents of the donor region the allocator gave.
    pub donor_extents: u64,
    /// Whether the time limit stopped it.
    pub timed_out: bool,
}

/// Places `files` one after another, in the order given, in a donor
/// region allocated in `dir` (which must be on the same filesystem).
///
/// # Errors
/// The donor cannot be made or allocated (not enough free space).
pub fn place(
    files: &[TreeFile],
    dir: &Path,
    block_size: u32,
    root: bool,
    deadline: Option<Instant>,
    progress: &mut dyn FnMut(usize, usize, &Path, &Outcome),
) -> Result<Placement> {
    let bs = u64::from(block_size);
    // A file's blocks and the donor's must sit at the same offset within a
    // page (mext_check_arguments), which matters with blocks below the page
    // size: each range starts at the next donor block of the right residue.
    let per_page = (crate::sys::page_size() / bs).max(1);
    let need: u64 = files
        .iter()
        .map(|f| f.extents.blocks() + (per_page - 1) * f.extents.data_ranges().len() as u64)
        .sum();
    let mut out = Placement::default();
    if need == 0 {
        return Ok(out);
    }
    let dir_fd = rustix::fs::open(
        dir,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| Error::io(dir, "open")(e.into()))?;
    let st = rustix::fs::fstatfs(&dir_fd).map_err(|e| Error::io(dir, "statfs")(e.into()))?;
    let free = if root {
        st.f_bfree as u64
    } else {
        st.f_bavail as u64
    };
    if free < need {
        return Err(Error::InvalidArgument(format!(
            "{}: placing {} files together needs {need} free blocks, {free} are free",
            dir.display(),
            files.len()
        )));
    }
    let donor = donor_in(dir, &dir.join(".e4defrag-r")).map_err(Error::io(dir, "donor file"))?;
    rustix::fs::fallocate(&donor, FallocateFlags::empty(), 0, need * bs)
        .map_err(|e| Error::io(dir, "fallocate")(e.into()))?;
    out.donor_extents = fiemap_extents(&donor, dir, block_size)?.count();
    let swaps: HashSet<(u64, u64)> = active_swap_files();
    let mut buf = Vec::new();
    let mut cursor = 0u64;
    let n = files.len();
    for (i, f) in files.iter().enumerate() {
        let path = PathBuf::from(OsStr::from_bytes(&f.entry.path));
        if deadline.is_some_and(|d| Instant::now() >= d) {
            out.timed_out = true;
            break;
        }
        let outcome = place_one(
            f,
            &path,
            &swaps,
            &donor,
            &mut cursor,
            per_page,
            bs,
            &mut buf,
        );
        match &outcome {
            Outcome::Improved { .. } | Outcome::Unchanged { .. } => {
                out.placed += 1;
                out.blocks += f.extents.blocks();
            }
            other => out.skipped.push((path.clone(), other.to_string())),
        }
        progress(i + 1, n, &path, &outcome);
    }
    Ok(out)
}

/// Swaps one file into the donor from `cursor` on.
#[allow(clippy::too_many_arguments)]
fn place_one(
    f: &TreeFile,
    path: &Path,
    swaps: &HashSet<(u64, u64)>,
    donor: &std::os::fd::OwnedFd,
    cursor: &mut u64,
    per_page: u64,
    bs: u64,
    buf: &mut Vec<u8>,
) -> Outcome {
    let fd = match open_checked(&f.entry, swaps) {
        Ok(fd) => fd,
        Err(o) => return o,
    };
    let before = match fiemap_extents(&fd, path, num::sat_u32(bs)) {
        Ok(x) => x,
        Err(e) => return Outcome::Skipped(Skip::Unmappable(ext4r::error::chain(&e))),
    };
    if before != f.extents {
        return Outcome::Skipped(Skip::Changed);
    }
    for (l, n) in before.data_ranges() {
        while *cursor % per_page != l % per_page {
            *cursor += 1;
        }
        if let Err(e) = move_blocks(&fd, donor, l, *cursor, n, bs, buf) {
            return io_outcome("EXT4_IOC_MOVE_EXT", &e);
        }
        *cursor += n;
    }
    let after = match fiemap_extents(&fd, path, num::sat_u32(bs)) {
        Ok(x) => x.count(),
        Err(e) => return Outcome::Failed(ext4r::error::chain(&e)),
    };
    let before = before.count();
    if after < before {
        Outcome::Improved { before, after }
    } else {
        Outcome::Unchanged { before, after }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extent::Extent;

    fn file(v: &[(u64, u64, u64)]) -> FileExtents {
        FileExtents::new(
            Path::new("f"),
            v.iter()
                .map(|&(logical, physical, len)| Extent {
                    logical,
                    physical,
                    len,
                    unwritten: false,
                })
                .collect(),
        )
        .expect("valid")
    }

    #[test]
    fn gaps_count_jumps_between_and_inside_files() {
        let a = file(&[(0, 100, 4)]);
        let b = file(&[(0, 104, 2), (2, 200, 2)]);
        let c = file(&[(0, 150, 1)]);
        let g = gaps([&a, &b, &c]);
        // a -> b contiguous; inside b 106 -> 200 (94); b -> c 202 -> 150 (52).
        assert_eq!(
            g,
            Gaps {
                between_files: 52,
                total: 146,
                jumps: 2
            }
        );
        assert_eq!(gaps([&a]), Gaps::default());
    }
}
