//! File contents: writing at any offset (holes left where nothing was
//! written), truncating up and down, preallocating unwritten extents.
//!
//! A write maps the blocks it touches: those mapped and written are
//! rewritten (read, changed, written back), unwritten ones become written,
//! unmapped ones are taken as runs near the file's last block. The whole
//! mapping is then stored by the write layer's editor. With bigalloc a
//! logical cluster always lies in one physical cluster, at the same offset,
//! and clusters are taken and given back whole.

use super::node::fast_symlink;
use super::orphan::Pending;
use super::WriteFs;
use crate::error::{Error, Result};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::num;
use ext4r_txn::map::{self, Run};
use std::collections::BTreeMap;

/// Bytes written per operation at most: a larger write is several
/// operations (as the kernel splits one into several transactions).
const WRITE_CHUNK: usize = 8 << 20;

/// One logical block's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    physical: u64,
    unwritten: bool,
}

/// Runs from per-block places (sorted), merged where they continue.
fn runs_from(blocks: &BTreeMap<u64, Slot>) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (&l, s) in blocks {
        let one = Run {
            logical: l,
            physical: s.physical,
            len: 1,
            unwritten: s.unwritten,
        };
        map::push_run(&mut out, one);
    }
    out
}

/// A file's mapping cut around the blocks an operation touches: the runs
/// before and after as they are, the blocks of `[lo, hi)` one by one (so
/// that memory follows the operation, not the file).
struct Window {
    before: Vec<Run>,
    mid: BTreeMap<u64, Slot>,
    after: Vec<Run>,
}

fn window(runs: &[Run], lo: u64, hi: u64) -> Window {
    let mut w = Window {
        before: Vec::new(),
        mid: BTreeMap::new(),
        after: Vec::new(),
    };
    for r in runs {
        let (s, e) = (r.logical, r.end());
        if e <= lo {
            w.before.push(*r);
            continue;
        }
        if s >= hi {
            w.after.push(*r);
            continue;
        }
        let (head, rest) = r.split_at(lo);
        w.before.extend(head);
        for l in s.max(lo)..e.min(hi) {
            w.mid.insert(
                l,
                Slot {
                    physical: r.physical + (l - s),
                    unwritten: r.unwritten,
                },
            );
        }
        w.after.extend(rest.and_then(|x| x.split_at(hi).1));
    }
    w
}

/// The window's runs joined back, neighbours that continue each other
/// merged.
fn join(w: &Window) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for r in w
        .before
        .iter()
        .chain(runs_from(&w.mid).iter())
        .chain(w.after.iter())
    {
        map::push_run(&mut out, *r);
    }
    out
}

impl WriteFs {
    /// Where a new file's blocks go: the start of its inode's group.
    pub(crate) fn goal_for(&self, ino: u32) -> u64 {
        let geo = self.txn.geometry();
        geo.group_first_block((ino.max(1) - 1) / geo.inodes_per_group)
    }

    /// Up to `n` blocks at or near `goal`, whole clusters taken.
    pub(crate) fn alloc_data(&mut self, goal: u64, n: u64) -> Result<(u64, u64)> {
        self.txn.alloc_run(goal, n)?.ok_or(Error::NoSpace)
    }

    /// `i_blocks` of inode `ino` from the data runs and `tree` mapping
    /// blocks, its xattr block and what its EA inodes charge it.
    pub(crate) fn set_blocks(
        &self,
        ino: u32,
        i: &mut Inode,
        runs: &[Run],
        tree: u64,
    ) -> Result<()> {
        let r = self.shape.ratio;
        // Distinct logical clusters mapped (each lies in one physical
        // cluster), counted run by run in logical order.
        let mut clusters = 0u64;
        let mut last: Option<u64> = None;
        for run in runs {
            let (a, b) = (run.logical / r, (run.end() - 1) / r);
            let from = match last {
                Some(l) if l >= a => l + 1,
                _ => a,
            };
            if b >= from {
                clusters += b - from + 1;
            }
            last = Some(last.map_or(b, |l| l.max(b)));
        }
        let blocks = (clusters + tree) * r;
        let acl = u64::from(i.i_file_acl_lo.get() != 0 || i.l_i_file_acl_high.get() != 0) * r;
        let ea = if self.shape.ea_inode {
            self.ea_charge(ino, i)?
        } else {
            0
        };
        i.set_blocks_count(
            (blocks + acl) * (self.shape.bs as u64 / 512) + ea,
            self.shape.huge_file,
            self.shape.bs32,
        )
        .map_err(|e| Error::corrupt("inode", e))
    }

    /// The inode of a regular file whose data may be written: readable
    /// (see `readable_inode`), and not fs-verity, immutable or append-only.
    pub(crate) fn file_inode(&self, ino: u32) -> Result<Inode> {
        let i = self.readable_inode(ino)?;
        if i.flags().contains(InodeFlags::VERITY) {
            return Err(Error::Unsupported(format!(
                "inode {ino} has fs-verity (feature verity): its data is read-only"
            )));
        }
        if i.flags()
            .intersects(InodeFlags::IMMUTABLE | InodeFlags::APPEND)
        {
            return Err(Error::InvalidArgument(format!(
                "inode {ino} is immutable or append-only"
            )));
        }
        Ok(i)
    }

    /// Writes `data` at byte `offset` of regular file `ino`; the size
    /// grows to cover it. Returns the bytes written: all of them, but for
    /// a write that would take the file past the largest size it may have
    /// (as pwrite(2), what fits below it).
    ///
    /// # Errors
    /// [`Error::NoSpace`] (what was written before it stays, in whole
    /// chunks), [`Error::FileTooLarge`] (EFBIG) for a write that starts at
    /// the largest size or past it, [`Error::IsADirectory`] and other wrong
    /// targets, I/O errors.
    pub fn write(&mut self, ino: u32, offset: u64, data: &[u8]) -> Result<usize> {
        let i = self.file_inode(ino)?;
        if data.is_empty() {
            // As pwrite(2) of nothing: the target is checked, nothing
            // changes (not even the size).
            return Ok(0);
        }
        let max = self.max_file_size(&i);
        if offset >= max {
            return Err(Error::FileTooLarge(format!(
                "inode {ino}: a write at {offset}, where the largest size is {max}"
            )));
        }
        let data = &data[..data
            .len()
            .min(usize::try_from(max - offset).unwrap_or(usize::MAX))];
        let mut done = 0;
        while done < data.len() {
            let n = (data.len() - done).min(WRITE_CHUNK);
            let at = offset
                .checked_add(done as u64)
                .ok_or_else(|| Error::InvalidArgument("offset overflows".into()))?;
            let chunk = &data[done..done + n];
            self.op(|w| w.write_chunk(ino, at, chunk))?;
            done += n;
        }
        Ok(done)
    }

    /// Writes `data` at `offset` of file `ino` (record `i`) inside the
    /// inode when it is inline, or empty on an inline_data filesystem, and
    /// the result still fits there (as the kernel keeps small files);
    /// `false` when it does not.
    fn write_inline(&mut self, ino: u32, i: &Inode, offset: u64, data: &[u8]) -> Result<bool> {
        let inline = i.flags().contains(InodeFlags::INLINE_DATA);
        let end = offset + data.len() as u64;
        // An EA inode's value is always in blocks, as the kernel writes it.
        if !self.shape.inline
            || data.is_empty()
            || end > self.shape.bs as u64
            || i.flags().contains(InodeFlags::EA_INODE)
        {
            return Ok(false);
        }
        let mut cur = if inline {
            super::inline::inline_file(&self.txn, ino, i)?
        } else if i.size() == 0 && map::runs(&self.txn, ino, i, false)?.is_empty() {
            Vec::new()
        } else {
            return Ok(false);
        };
        let end = num::index(end);
        if cur.len() < end {
            cur.resize(end, 0);
        }
        cur[num::index(offset)..end].copy_from_slice(data);
        if !self.inline_store(ino, &cur)? {
            return Ok(false);
        }
        let mut i = self.inode(ino)?;
        i.set_size(cur.len() as u64);
        let now = self.now();
        i.set_mtime(now);
        i.set_ctime(now);
        self.put_inode(ino, &i)?;
        Ok(true)
    }

    pub(crate) fn write_chunk(&mut self, ino: u32, offset: u64, data: &[u8]) -> Result<()> {
        let bs = self.shape.bs as u64;
        let r = self.shape.ratio;
        let i = self.file_inode(ino)?;
        let end = offset + data.len() as u64;
        if end > self.max_file_size(&i) {
            return Err(Error::FileTooLarge(format!(
                "inode {ino}: a file cannot reach {end} bytes here"
            )));
        }
        if self.write_inline(ino, &i, offset, data)? {
            return Ok(());
        }
        let mut i = self.uninline(ino)?;
        let runs = map::runs(&self.txn, ino, &i, false)?;
        let first = offset / bs;
        let last = end.div_ceil(bs);
        // Whole clusters around the range: a cluster's blocks go together.
        let mut win = window(&runs, first & !(r - 1), last.div_ceil(r) * r);
        let blocks = &mut win.mid;
        // Blocks needed at most: every block of the range, whole clusters.
        let need = (last - first).div_ceil(r) * r + 2;
        if self.txn.groups().free_blocks() < need + self.reserve() {
            let missing = (first..last).filter(|l| !blocks.contains_key(l)).count() as u64;
            if self.txn.groups().free_blocks() < missing.div_ceil(r) * r + 2 {
                return Err(Error::NoSpace);
            }
        }
        let mut goal = runs
            .iter()
            .rev()
            .find(|run| run.logical <= first)
            .map_or_else(
                || self.goal_for(ino),
                |run| run.physical + (first - run.logical).min(run.len),
            );
        let mut l = first;
        while l < last {
            if let Some(s) = blocks.get(&l).copied() {
                // A block the write covers whole is not read first: a
                // random 4 KiB overwrite would otherwise cost a read too.
                let whole = offset <= l * bs && (l + 1) * bs <= end;
                let mut b = if s.unwritten || whole {
                    vec![0u8; num::index(bs)]
                } else {
                    self.txn.read_block(s.physical)?
                };
                copy_into(&mut b, l * bs, offset, data);
                self.txn.write_data(s.physical, b)?;
                blocks.insert(
                    l,
                    Slot {
                        unwritten: false,
                        ..s
                    },
                );
                goal = s.physical + 1;
                l += 1;
                continue;
            }
            // A hole: the unmapped stretch from here, taken whole.
            let mut stop = l;
            while stop < last && !blocks.contains_key(&stop) {
                stop += 1;
            }
            let placed = self.place(blocks, l, stop, goal)?;
            for (ll, p) in placed {
                let mut b = vec![0u8; num::index(bs)];
                copy_into(&mut b, ll * bs, offset, data);
                self.txn.write_data(p, b)?;
                goal = p + 1;
            }
            l = stop;
        }
        let new_runs = join(&win);
        let tree = map::store(&mut self.txn, ino, &mut i, &new_runs, goal)?;
        if end > i.size() {
            i.set_size(end);
        }
        self.set_blocks(ino, &mut i, &new_runs, tree)?;
        let now = self.now();
        i.set_mtime(now);
        i.set_ctime(now);
        self.put_inode(ino, &i)
    }

    /// Blocks the allocator keeps back from files (none: the reserved
    /// blocks are root's, and we write as root).
    fn reserve(&self) -> u64 {
        0
    }

    /// The largest size file `i` may have here: the kernel's limit for its
    /// mapping (extents or a block map, as its flag says) and for what
    /// `i_blocks` can count, past which it refuses with EFBIG.
    pub(crate) fn max_file_size(&self, i: &Inode) -> u64 {
        ext4r_format::blockmap::max_file_bytes(
            self.shape.bs32,
            self.shape.huge_file,
            i.flags().contains(InodeFlags::EXTENTS),
        )
    }

    /// Maps logical blocks `[from, to)` to newly taken blocks (whole
    /// clusters, a logical cluster in one physical cluster at the same
    /// offset); returns (logical, physical) of each.
    fn place(
        &mut self,
        blocks: &mut BTreeMap<u64, Slot>,
        from: u64,
        to: u64,
        goal: u64,
    ) -> Result<Vec<(u64, u64)>> {
        let r = self.shape.ratio;
        let mut out = Vec::new();
        let mut l = from;
        let mut goal = goal;
        while l < to {
            // A cluster partly mapped already fixes where l goes.
            let cstart = l & !(r - 1);
            let known = (cstart..cstart + r).find_map(|x| {
                blocks
                    .get(&x)
                    .map(|s| (s.physical & !(r - 1)) + (l - cstart))
            });
            if let Some(p) = known {
                blocks.insert(
                    l,
                    Slot {
                        physical: p,
                        unwritten: false,
                    },
                );
                out.push((l, p));
                l += 1;
                continue;
            }
            // New clusters from here, up to the first cluster that has
            // blocks already (those fix their own place).
            let mut lim = cstart + r;
            while lim < to && blocks.range(lim..lim + r).next().is_none() {
                lim += r;
            }
            let lim = lim.min(to);
            let want = (lim - cstart).div_ceil(r) * r;
            let (s, n) = self.alloc_data(goal & !(r - 1), want)?;
            // Blocks from `l`, at their offset in the first cluster.
            let mut p = s + (l - cstart);
            let stop = (cstart + n).min(lim);
            while l < stop {
                blocks.insert(
                    l,
                    Slot {
                        physical: p,
                        unwritten: false,
                    },
                );
                out.push((l, p));
                l += 1;
                p += 1;
            }
            goal = s + n;
        }
        Ok(out)
    }

    /// Sets regular file `ino`'s size: shorter frees the blocks past it
    /// (and zeroes the rest of its last block), longer leaves a hole.
    ///
    /// # Errors
    /// As [`WriteFs::write`].
    pub fn truncate(&mut self, ino: u32, size: u64) -> Result<()> {
        self.op(|w| w.truncate_now(ino, size, true))
    }

    pub(crate) fn truncate_now(&mut self, ino: u32, size: u64, stamp: bool) -> Result<()> {
        let bs = self.shape.bs as u64;
        let mut i = self.inode(ino)?;
        if i.is_dir() {
            return Err(Error::IsADirectory(format!("inode {ino}")));
        }
        if i.is_reg() {
            // The same refusals as a write (encrypted, verity, immutable).
            self.file_inode(ino)?;
        }
        if size > self.max_file_size(&i) {
            return Err(Error::FileTooLarge(format!(
                "inode {ino}: size {size} too large"
            )));
        }
        if i.flags().contains(InodeFlags::INLINE_DATA) {
            // Kept inline while it fits, else moved out first.
            if size <= bs {
                let mut cur = super::inline::inline_file(&self.txn, ino, &i)?;
                cur.resize(num::index(size), 0);
                if self.inline_store(ino, &cur)? {
                    let mut i = self.inode(ino)?;
                    i.set_size(size);
                    if stamp {
                        let now = self.now();
                        i.set_mtime(now);
                        i.set_ctime(now);
                    }
                    return self.put_inode(ino, &i);
                }
            }
            i = self.uninline(ino)?;
        }
        let has_blocks = i.is_reg() || (i.is_symlink() && !fast_symlink(&i, &self.shape));
        if has_blocks && !i.flags().contains(InodeFlags::INLINE_DATA) && size % bs != 0 {
            // The rest of the last block reads as zeros from now on.
            let l = size / bs;
            let runs = map::runs(&self.txn, ino, &i, false)?;
            let slot = runs
                .iter()
                .find(|x| x.logical <= l && l < x.end() && !x.unwritten)
                .map(|x| x.physical + (l - x.logical));
            if let Some(p) = slot {
                let mut b = self.txn.read_block(p)?;
                b[num::index(size % bs)..].fill(0);
                self.txn.write_data(p, b)?;
            }
        }
        let shrinks = size < i.size();
        i.set_size(size);
        if stamp {
            let now = self.now();
            i.set_mtime(now);
            i.set_ctime(now);
        }
        let keep = size.div_ceil(bs);
        if shrinks && self.too_many_runs(ino, &i, keep)? {
            // The blocks past the new size go over several operations.
            self.orphan_add(ino, &mut i);
            self.put_inode(ino, &i)?;
            self.deferred.push(Pending::Truncate(ino));
            return Ok(());
        }
        self.cut_mapping(ino, &mut i, keep, usize::MAX)?;
        self.put_inode(ino, &i)
    }

    /// Preallocates `[offset, offset + len)` of regular file `ino` as
    /// unwritten extents (reading as zeros); with `keep_size` the size
    /// stays, else it grows to cover the range.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a file without extents, as the kernel;
    /// otherwise as [`WriteFs::write`].
    pub fn fallocate(&mut self, ino: u32, offset: u64, len: u64, keep_size: bool) -> Result<()> {
        self.op(|w| w.fallocate_now(ino, offset, len, keep_size))
    }

    fn fallocate_now(&mut self, ino: u32, offset: u64, len: u64, keep_size: bool) -> Result<()> {
        let w = self;
        let bs = w.shape.bs as u64;
        w.file_inode(ino)?;
        let mut i = w.uninline(ino)?;
        if !i.flags().contains(InodeFlags::EXTENTS) {
            return Err(Error::Unsupported(format!(
                "inode {ino}: preallocation needs extents"
            )));
        }
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= w.max_file_size(&i))
            .ok_or_else(|| Error::FileTooLarge(format!("inode {ino}: range too large")))?;
        let runs = map::runs(&w.txn, ino, &i, false)?;
        let (first, last) = (offset / bs, end.div_ceil(bs));
        let r = w.shape.ratio;
        let mut win = window(&runs, first & !(r - 1), last.div_ceil(r) * r);
        let blocks = &mut win.mid;
        let missing = (first..last).filter(|l| !blocks.contains_key(l)).count() as u64;
        if w.txn.groups().free_blocks() < missing.div_ceil(w.shape.ratio) * w.shape.ratio + 2 {
            return Err(Error::NoSpace);
        }
        let mut goal = runs
            .last()
            .map_or_else(|| w.goal_for(ino), |r| r.physical + r.len);
        let mut l = first;
        while l < last {
            if blocks.contains_key(&l) {
                l += 1;
                continue;
            }
            let mut stop = l;
            while stop < last && !blocks.contains_key(&stop) {
                stop += 1;
            }
            for (ll, p) in w.place(blocks, l, stop, goal)? {
                if let Some(s) = blocks.get_mut(&ll) {
                    s.unwritten = true;
                }
                goal = p + 1;
            }
            l = stop;
        }
        let new_runs = join(&win);
        let tree = map::store(&mut w.txn, ino, &mut i, &new_runs, goal)?;
        if !keep_size && end > i.size() {
            i.set_size(end);
        }
        w.set_blocks(ino, &mut i, &new_runs, tree)?;
        i.set_ctime(w.now());
        w.put_inode(ino, &i)
    }
}

impl WriteFs {
    /// Deallocates `[offset, offset + len)` of regular file `ino`, the
    /// size kept (fallocate's `PUNCH_HOLE | KEEP_SIZE`), as the kernel's
    /// `ext4_punch_hole`: the range is cut to the file's size (rounded up
    /// to 4 KiB, so that blocks preallocated past the end stay); blocks it
    /// covers whole are unmapped and freed (with bigalloc, a cluster only
    /// when no block of it stays mapped); the written parts of the blocks
    /// at its ends are zeroed. Afterwards the range reads as zeros.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a file without extents; otherwise as
    /// [`WriteFs::write`].
    pub fn punch_hole(&mut self, ino: u32, offset: u64, len: u64) -> Result<()> {
        self.op(|w| w.punch_now(ino, offset, len))
    }

    fn punch_now(&mut self, ino: u32, offset: u64, len: u64) -> Result<()> {
        let w = self;
        let bs = w.shape.bs as u64;
        let mut i = w.file_inode(ino)?;
        let size = i.size();
        let end = offset
            .checked_add(len)
            .ok_or_else(|| Error::InvalidArgument("range too large".into()))?
            .min(size.next_multiple_of(4096));
        if len == 0 || offset >= end {
            return Ok(());
        }
        if i.flags().contains(InodeFlags::INLINE_DATA) {
            let mut cur = super::inline::inline_file(&w.txn, ino, &i)?;
            let (lo, hi) = (num::index(offset), num::index(end).min(cur.len()));
            if lo < hi {
                cur[lo..hi].fill(0);
                w.inline_store(ino, &cur)?;
                i = w.inode(ino)?;
            }
        } else {
            if !i.flags().contains(InodeFlags::EXTENTS) {
                return Err(Error::Unsupported(format!(
                    "inode {ino}: punching holes needs extents"
                )));
            }
            let runs = map::runs(&w.txn, ino, &i, false)?;
            // The blocks at the ends the range covers in part.
            for l in [offset / bs, (end - 1) / bs] {
                let (lo, hi) = ((l * bs).max(offset), ((l + 1) * bs).min(end));
                if hi - lo == bs {
                    continue;
                }
                let at = runs
                    .iter()
                    .find(|x| x.logical <= l && l < x.end() && !x.unwritten)
                    .map(|x| x.physical + (l - x.logical));
                if let Some(p) = at {
                    let mut b = w.txn.read_block(p)?;
                    b[num::index(lo - l * bs)..num::index(hi - l * bs)].fill(0);
                    w.txn.write_data(p, b)?;
                }
                if offset / bs == (end - 1) / bs {
                    break;
                }
            }
            let (first, last) = (offset.div_ceil(bs), end / bs);
            if first < last {
                let mut win = window(&runs, first, last);
                let gone = runs_from(&win.mid);
                win.mid.clear();
                let r = w.shape.ratio;
                // Clusters the blocks on either side still use.
                let kept = [
                    win.before
                        .last()
                        .map(|x| (x.physical + x.len - 1) & !(r - 1)),
                    win.after.first().map(|x| x.physical & !(r - 1)),
                ];
                let mut freed = std::collections::BTreeSet::new();
                for g in &gone {
                    let mut c = g.physical & !(r - 1);
                    while c < g.physical + g.len {
                        if !kept.contains(&Some(c)) && freed.insert(c) {
                            w.txn.free_blocks(c, r)?;
                        }
                        c += r;
                    }
                }
                if !gone.is_empty() {
                    let new_runs = join(&win);
                    let goal = new_runs.last().map_or(0, |x| x.physical + x.len);
                    let tree = map::store(&mut w.txn, ino, &mut i, &new_runs, goal)?;
                    w.set_blocks(ino, &mut i, &new_runs, tree)?;
                }
            }
        }
        let now = w.now();
        i.set_mtime(now);
        i.set_ctime(now);
        w.put_inode(ino, &i)
    }

    /// Makes `[offset, offset + len)` of regular file `ino` read as
    /// zeros and stay allocated (fallocate's `ZERO_RANGE`): the range is
    /// punched and preallocated again as unwritten extents, the size grown
    /// to cover it unless `keep_size`. Both steps are one operation.
    ///
    /// # Errors
    /// As [`WriteFs::punch_hole`] and [`WriteFs::fallocate`].
    pub fn zero_range(&mut self, ino: u32, offset: u64, len: u64, keep_size: bool) -> Result<()> {
        self.op(|w| {
            // Past the size the range reads as zeros already; punching
            // stops there and preallocation covers it.
            w.punch_now(ino, offset, len)?;
            w.fallocate_now(ino, offset, len, keep_size)
        })
    }
}

/// Copies the part of `data` (at byte `offset` of the file) that falls in
/// the block starting at byte `block_at` into `b`.
fn copy_into(b: &mut [u8], block_at: u64, offset: u64, data: &[u8]) {
    let bs = b.len() as u64;
    let lo = block_at.max(offset);
    let hi = (block_at + bs).min(offset + data.len() as u64);
    if lo >= hi {
        return;
    }
    let src = num::index(lo - offset)..num::index(hi - offset);
    let dst = num::index(lo - block_at)..num::index(hi - block_at);
    b[dst].copy_from_slice(&data[src]);
}
