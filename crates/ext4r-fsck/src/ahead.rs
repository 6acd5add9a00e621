//! Reading ahead of the passes, as the disk wants it (DESIGN.md §4, "read
//! in big sorted runs"). A pass knows every read it will make before it
//! makes the first (pass 1 the used parts of the inode tables, from the
//! descriptors; pass 2 the directory blocks, from pass 1): [`Ahead`]
//! announces them to the device ([`BlockDevice::will_need`]) a window
//! ahead of the reader, neighbours merged into large requests, so that
//! several are in flight while the checks run on what has arrived. The
//! reads themselves stay the passes' own, into their small buffers: the
//! window lives in the host's page cache, not in this process.
//!
//! On a cold cache this is the difference between a disk kept busy and a
//! disk that waits for each read of the checks in turn (1,500 directory
//! blocks read one after another took 0.23 s of a 0.5 s check of 300,000
//! files; announced, they take a few milliseconds).
//!
//! What the records of a chunk name (an indexed directory's root, extent
//! tree nodes) is known only once the chunk is read; announced then, it
//! waits behind the window's requests while the check that wants it
//! waits too. On a cold cache pass 1 has a [`Scout`] read the chunks as
//! they arrive and announce those blocks half a window before the
//! readers come to them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use ext4r::device::BlockDevice;
use ext4r_format::extent::ExtentNode;
use ext4r_format::inode::{Inode, InodeFlags};

/// Bytes announced and not yet read: enough for several large requests
/// in flight on any disk, and little page cache.
pub(crate) const WINDOW: u64 = 32 << 20;
/// The largest request: what a disk takes in one command (Linux's
/// `max_sectors_kb` is 1–4 MiB on most).
pub(crate) const MAX_REQUEST: u64 = 4 << 20;
/// Reads this close are announced as one request, the blocks between
/// them with it: a few blocks more cost less than another request.
pub(crate) const MAX_GAP: u64 = 32 << 10;

/// The reads of a pass, `n` of them in the order the pass makes them,
/// `span(i)` = (byte offset, length) of read `i` (length 0: none).
pub(crate) struct Ahead<'a, F: Fn(usize) -> (u64, u64)> {
    dev: &'a dyn BlockDevice,
    n: usize,
    span: F,
    window: u64,
    state: Mutex<State>,
    /// `State::next`, for a [`Scout`] to read without the lock.
    announced: AtomicUsize,
}

#[derive(Default)]
struct State {
    /// The first read not yet announced.
    next: usize,
    /// The highest read a reader started.
    at: usize,
    /// Announced requests not yet read past: (last read in it, bytes).
    pending: VecDeque<(usize, u64)>,
    /// Their bytes.
    ahead: u64,
}

impl<'a, F: Fn(usize) -> (u64, u64)> Ahead<'a, F> {
    /// Plans the reads and announces the first window of them.
    pub(crate) fn new(dev: &'a dyn BlockDevice, n: usize, span: F) -> Self {
        let a = Ahead {
            dev,
            n,
            span,
            window: WINDOW,
            state: Mutex::new(State::default()),
            announced: AtomicUsize::new(0),
        };
        a.reading(0);
        a
    }

    /// A reader is about to make read `i`: what the window holds past it
    /// is announced. Cheap when nothing is to be announced; a reader that
    /// finds another announcing goes on (that one fills the window).
    pub(crate) fn reading(&self, i: usize) {
        let Ok(mut s) = self.state.try_lock() else {
            return;
        };
        s.at = s.at.max(i);
        while s.pending.front().is_some_and(|&(last, _)| last < s.at) {
            if let Some((_, bytes)) = s.pending.pop_front() {
                s.ahead -= bytes;
            }
        }
        // Reads already made (or being made) need no announcing.
        s.next = s.next.max(s.at);
        while s.ahead < self.window && s.next < self.n {
            let (start, len) = (self.span)(s.next);
            if len == 0 {
                // A read the pass will not make after all.
                s.next += 1;
                continue;
            }
            let mut end = start.saturating_add(len);
            let mut k = s.next + 1;
            while k < self.n {
                let (o, l) = (self.span)(k);
                if l == 0 {
                    k += 1;
                    continue;
                }
                let e = o.saturating_add(l);
                if o < end || o - end > MAX_GAP || e - start > MAX_REQUEST {
                    break;
                }
                end = e;
                k += 1;
            }
            self.dev.will_need(start, end - start);
            s.pending.push_back((k - 1, end - start));
            s.ahead += end - start;
            s.next = k;
        }
        self.announced.store(s.next, Ordering::Release);
    }

    /// The reads announced so far: every read before this one.
    fn announced(&self) -> usize {
        self.announced.load(Ordering::Acquire)
    }
}

/// A reader at the disk's front, for a cold cache: it reads what an
/// [`Ahead`] has announced as it arrives and hands it to a look that
/// announces what the records there name (indexed directories' roots,
/// extent tree nodes, xattr blocks: [`inode_blocks`]), while the readers
/// of the pass stay [`Scout::lag`] reads behind it.
///
/// Without it those blocks are announced when a reader reads the records
/// naming them and wanted a moment later, behind every request of the
/// window in the disk's queue: on a cold check of 2,000,000 files the
/// 2,000 indexed directories' roots took a third of pass 1 (0.33 s of
/// 0.89; with the roots in the cache beforehand, pass 1 took 0.55 s).
/// With the readers half a window behind, a block the scout announces has
/// half a window of requests before it and half a window of reading
/// before it is wanted. On a warm cache nothing waits for the disk and
/// the scout would only copy every record once more: a pass starts one
/// only when the device says its first reads are not in memory
/// ([`BlockDevice::resident`]).
pub(crate) struct Scout {
    /// Reads looked at: every read before this one (all of them once the
    /// scout is done or stopped).
    done: AtomicUsize,
    /// Set when the pass ends: the scout stops at its next read.
    stop: AtomicBool,
    lock: Mutex<()>,
    moved: Condvar,
    /// The scout's thread, for a reader to wake it when the window grows.
    thread: OnceLock<Thread>,
    n: usize,
}

impl Scout {
    /// Bytes a scout reads at once (see [`Scout::run`]).
    pub(crate) const PIECE: usize = 64 << 10;

    /// Reads the readers stay behind the scout: half the window of
    /// `chunk`-byte reads.
    fn lag(chunk: u64) -> usize {
        usize::try_from(WINDOW / 2 / chunk.max(1)).unwrap_or(usize::MAX)
    }

    /// A scout for a pass of `n` reads, when the device says the first of
    /// `spans` are not in memory; `None` on a warm cache, a device that
    /// cannot tell (memory), or a pass too short to gain from one.
    pub(crate) fn wanted(
        dev: &dyn BlockDevice,
        n: usize,
        spans: impl Fn(usize) -> (u64, u64),
    ) -> Option<Scout> {
        let bytes: u64 = (0..n).map(|i| spans(i).1).sum();
        if bytes < 2 * WINDOW {
            return None;
        }
        // The first read, one in the middle and the last: a volume just
        // checked, written or read is in memory at all three.
        let cold = [0, n / 2, n - 1].into_iter().any(|i| {
            let (off, len) = spans(i);
            dev.resident(off, len.min(4096)) == Some(false)
        });
        cold.then(|| Scout {
            done: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            lock: Mutex::new(()),
            moved: Condvar::new(),
            thread: OnceLock::new(),
            n,
        })
    }

    /// The scout's work, on a thread of its own: each read `ahead` has
    /// announced, in order, read into a buffer of its own and handed to
    /// `look`, until every read is looked at or [`Scout::stop`].
    /// `buf` is where it reads, [`Scout::PIECE`] bytes at a time: made by
    /// the caller so that it comes from the caller's heap, not from a heap
    /// the allocator would give the scout's thread (a look needs whole
    /// records: a piece holds a whole number of them, whatever their
    /// size, a power of two up to the block size).
    pub(crate) fn run<F: Fn(usize) -> (u64, u64)>(
        &self,
        ahead: &Ahead<'_, F>,
        buf: &mut [u8],
        mut look: impl FnMut(&[u8]),
    ) {
        let _ = self.thread.set(std::thread::current());
        let _done = DoneOnExit(self);
        for i in 0..self.n {
            while i >= ahead.announced() {
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                // A reader's `reading` wakes it; the timeout is a guard.
                std::thread::park_timeout(Duration::from_millis(5));
            }
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let (off, len) = (ahead.span)(i);
            let mut at = 0;
            while at < len && !buf.is_empty() {
                let n = usize::try_from(len - at).map_or(buf.len(), |n| n.min(buf.len()));
                // A read that fails is the pass's to report, when it
                // makes it.
                if ahead.dev.read_at(&mut buf[..n], off + at).is_ok() {
                    look(&buf[..n]);
                }
                at += n as u64;
            }
            self.set_done(i + 1);
        }
    }

    fn set_done(&self, d: usize) {
        let _g = self.lock.lock();
        self.done.store(d, Ordering::Release);
        self.moved.notify_all();
    }

    /// A reader is about to make read `i` (after [`Ahead::reading`]):
    /// wakes the scout, then waits until it is [`Scout::lag`] reads past
    /// `i`, or has looked at all `ahead` has announced, or is done.
    /// Whether it has looked at read `i` (its blocks are announced).
    pub(crate) fn reading<F: Fn(usize) -> (u64, u64)>(
        &self,
        i: usize,
        ahead: &Ahead<'_, F>,
        chunk: u64,
    ) -> bool {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
        let want = i.saturating_add(Self::lag(chunk));
        let enough = |d: usize| d >= self.n || d >= want || d >= ahead.announced();
        let d = self.done.load(Ordering::Acquire);
        if enough(d) {
            return d > i;
        }
        let Ok(mut g) = self.lock.lock() else {
            return false;
        };
        loop {
            let d = self.done.load(Ordering::Acquire);
            if enough(d) {
                return d > i;
            }
            // Woken by the scout's every read; the timeout is a guard.
            match self.moved.wait_timeout(g, Duration::from_millis(20)) {
                Ok((next, _)) => g = next,
                Err(_) => return false,
            }
        }
    }

    /// Ends the scout's work (the pass is over or stopping).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

/// Stops a scout when the pass's scope ends, also by a panic (the scope
/// waits for the scout's thread before it passes the panic on).
pub(crate) struct StopOnDrop<'a>(pub(crate) &'a Scout);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Marks the scout done however its loop ends, so that no reader waits on
/// a scout that is gone.
struct DoneOnExit<'a>(&'a Scout);

impl Drop for DoneOnExit<'_> {
    fn drop(&mut self) {
        self.0.set_done(self.0.n);
    }
}

/// Announces scattered blocks (extent tree nodes, xattr blocks of a chunk
/// of inodes): sorted, and neighbours merged as [`Ahead`] merges them.
/// `blocks` is left sorted.
pub(crate) fn blocks(dev: &dyn BlockDevice, blocks: &mut [u64], bs: u64) {
    blocks.sort_unstable();
    let mut i = 0;
    while i < blocks.len() {
        let start = blocks[i];
        let mut end = start.saturating_add(1);
        let mut k = i + 1;
        while let Some(&b) = blocks.get(k) {
            // Sorted: `b` is in the request (a repeat) or after it.
            if b >= end {
                let gap = (b - end).saturating_mul(bs);
                let len = (b - start).saturating_add(1).saturating_mul(bs);
                if gap > MAX_GAP || len > MAX_REQUEST {
                    break;
                }
                end = b + 1;
            }
            k += 1;
        }
        if let (Some(off), Some(len)) = (start.checked_mul(bs), (end - start).checked_mul(bs)) {
            dev.will_need(off, len);
        }
        i = k;
    }
}

/// The blocks pass 1 will read for `inode` beyond its record, as far as
/// the record tells: the extent tree's nodes below the root, a block map's
/// indirect blocks, the xattr block, a slow symlink's target, an indexed
/// directory's root block (e2fsck's `handle_htree` reads it in pass 1;
/// unannounced, 2,000 such reads were a third of a cold check of 2M
/// files, each waiting on the disk in turn). Numbers
/// 0 (none) and outside `first..end` are left out (the checks report them; a hint
/// for them would be a read of nothing).
pub(crate) fn inode_blocks(inode: &Inode, wide: bool, first: u64, end: u64, out: &mut Vec<u64>) {
    if inode.mode() == 0 || inode.links_count() == 0 {
        return;
    }
    let mut add = |b: u64| {
        // 0 is "none" in every slot (and block 0 is read already).
        if b != 0 && (first..end).contains(&b) {
            out.push(b);
        }
    };
    add(inode.file_acl(wide).0);
    let flags = inode.flags();
    if flags.contains(InodeFlags::INLINE_DATA) {
        return;
    }
    // Block 0 is wanted of a slow symlink (its target) and of an indexed
    // directory (its root).
    let first_block = (inode.is_symlink() && inode.size() >= 60)
        || (inode.is_dir() && flags.contains(InodeFlags::INDEX));
    if flags.contains(InodeFlags::EXTENTS) {
        // A root that is a leaf (eh_depth 0: nearly every file's) names no
        // tree block; only block 0 may be left to look for.
        // Tested before the header is parsed: parsing every inode's was
        // 1.5% of the CPU of a check of the 2M-file image.
        if crate::extent_depth::stored(&inode.i_block) == 0 && !first_block {
            return;
        }
        let Ok(node) = ExtentNode::parse(&inode.i_block) else {
            return;
        };
        if let Some(idx) = node.indexes() {
            idx.iter().for_each(|i| add(i.leaf().0));
        } else if first_block {
            if let Some(e) = node.extents().and_then(|e| e.first()) {
                if e.ee_block.get() == 0 {
                    add(e.start().0);
                }
            }
        }
        return;
    }
    let word = |k: usize| u64::from(ext4r_format::blockmap::word(&inode.i_block, k).unwrap_or(0));
    if first_block {
        add(word(0));
    }
    if inode.is_symlink() {
        return;
    }
    // Indirect, double and triple indirect blocks (the first level).
    (12..15).for_each(|k| add(word(k)));
}

#[cfg(test)]
mod tests {
    use super::*;

    use ext4r_txn::testutil::HintRecorder;

    /// A device that records what it is told will be read.
    fn told() -> HintRecorder {
        HintRecorder::new(1 << 20)
    }

    #[test]
    fn neighbours_merge_and_the_window_follows_the_reader() {
        let d = told();
        // 100 reads of 1 MiB, each 1 MiB after the last: 4 MiB requests.
        let a = Ahead::new(&d, 100, |i| (i as u64 * (2 << 20), 1 << 20));
        let first = d.hints();
        assert_eq!(first[0], (0, 1 << 20));
        assert!(first.iter().all(|&(_, l)| l == 1 << 20));
        assert_eq!(first.len() as u64, WINDOW >> 20);
        // Gaps of a block merge; requests stop at MAX_REQUEST.
        let d2 = told();
        let b = Ahead::new(&d2, 10_000, |i| (i as u64 * 8192, 4096));
        let t = d2.hints();
        assert_eq!(t[0].0, 0);
        assert!(t[0].1 <= MAX_REQUEST && t[0].1 > MAX_REQUEST - 8192);
        drop(b);
        // Reading on moves the window: every read is announced once, in
        // order, and never more than the window ahead of the reader.
        for i in 0..100 {
            a.reading(i);
            let told = d.hints().len();
            assert!(told <= i + (WINDOW >> 20) as usize + 1, "{i}: {told}");
        }
        let all = d.hints();
        let offs: Vec<u64> = all.iter().map(|t| t.0).collect();
        assert_eq!(offs, (0..100).map(|i| i * (2 << 20)).collect::<Vec<u64>>());
        // A reader that jumps ahead (another thread took the reads
        // between) has those reads announced no more: they are made.
        let d3 = told();
        let c = Ahead::new(&d3, 100, |i| (i as u64 * (2 << 20), 1 << 20));
        c.reading(90);
        let all = d3.hints();
        assert_eq!(all.len(), 32 + 10);
        assert_eq!(all[32].0, 90 * (2 << 20));
        drop(c);
    }

    #[test]
    fn a_scout_comes_only_for_a_cold_device_and_a_long_pass() {
        let mut d = HintRecorder::new(1 << 20);
        let long = |i: usize| (i as u64 * (256 << 10), 256 << 10);
        // Memory (no answer) and a warm cache: none.
        assert!(Scout::wanted(&d, 1000, long).is_none());
        d.resident = Some(true);
        assert!(Scout::wanted(&d, 1000, long).is_none());
        // Cold: one, unless the pass reads less than two windows.
        d.resident = Some(false);
        assert!(Scout::wanted(&d, 1000, long).is_some());
        assert!(Scout::wanted(&d, 10, long).is_none());
        assert!(Scout::wanted(&d, 0, long).is_none());
    }

    #[test]
    fn readers_stay_behind_the_scout_which_looks_at_every_read_once() {
        // 400 reads of 256 KiB (100 MiB, three windows), each read's
        // bytes its number, a reader checking as it goes.
        let n = 400usize;
        let size = 256u64 << 10;
        let mut d = HintRecorder::new(n as u64 * size);
        for i in 0..n {
            d.dev
                .write_at(&vec![(i % 251) as u8; size as usize], i as u64 * size)
                .unwrap();
        }
        d.resident = Some(false);
        let span = |i: usize| (i as u64 * size, size);
        let scout = Scout::wanted(&d, n, span).unwrap();
        let ahead = Ahead::new(&d, n, span);
        let lag = Scout::lag(size);
        assert_eq!(lag, 64);
        let seen = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&scout);
            let (sc, a, seen) = (&scout, &ahead, &seen);
            let mut buf = vec![0u8; Scout::PIECE];
            s.spawn(move || {
                sc.run(a, &mut buf, |recs| seen.lock().unwrap().push(recs[0]));
            });
            for i in 0..n {
                ahead.reading(i);
                assert!(scout.reading(i, &ahead, size), "read {i} not looked at");
                // Behind by the lag, or by what the window has announced,
                // or the scout is through.
                let done = scout.done.load(Ordering::Acquire);
                assert!(
                    done >= (i + lag).min(n) || done >= ahead.announced(),
                    "{i}: scout at {done}"
                );
            }
        });
        // Each read in four pieces, in order, once.
        let seen = seen.into_inner().unwrap();
        let want: Vec<u8> = (0..n).flat_map(|i| [(i % 251) as u8; 4]).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn a_stopped_scout_keeps_no_reader_waiting() {
        let n = 400usize;
        let mut d = HintRecorder::new(n as u64 * (256 << 10));
        d.resident = Some(false);
        let span = |i: usize| (i as u64 * (256 << 10), 256 << 10);
        let scout = Scout::wanted(&d, n, span).unwrap();
        let ahead = Ahead::new(&d, n, span);
        std::thread::scope(|s| {
            let (sc, a) = (&scout, &ahead);
            let mut buf = vec![0u8; Scout::PIECE];
            let h = s.spawn(move || sc.run(a, &mut buf, |_| {}));
            ahead.reading(0);
            assert!(scout.reading(0, &ahead, 256 << 10));
            // The pass ends early: the scout goes, and a reader asking
            // after that is answered at once.
            scout.stop();
            h.join().unwrap();
            assert_eq!(scout.done.load(Ordering::Acquire), n);
            assert!(scout.reading(n - 1, &ahead, 256 << 10));
        });
    }

    #[test]
    fn an_inode_names_its_index_and_xattr_blocks_not_block_0() {
        let mut inode = Inode::zeroed();
        inode.i_mode.set(0o100_644);
        inode.i_links_count.set(1);
        inode.i_flags.set(InodeFlags::EXTENTS.bits());
        // A root of depth 1 with three index entries (magic, entries, max,
        // depth; then block, leaf low, leaf high).
        let mut root = Vec::new();
        for h in [0xF30Au16, 3, 4, 1, 0, 0] {
            root.extend(h.to_le_bytes());
        }
        for leaf in [500u32, 0, 9_000_000] {
            root.extend(0u32.to_le_bytes());
            root.extend(leaf.to_le_bytes());
            root.extend([0u8; 4]);
        }
        inode.i_block[..root.len()].copy_from_slice(&root);
        let mut out = Vec::new();
        // No xattr block (0), the leaf at 0 and the one past the end left out.
        inode_blocks(&inode, true, 0, 1_000_000, &mut out);
        assert_eq!(out, [500]);
        inode.i_file_acl_lo.set(77);
        out.clear();
        inode_blocks(&inode, true, 0, 1_000_000, &mut out);
        assert_eq!(out, [77, 500]);
        // A free inode names nothing.
        inode.i_links_count.set(0);
        out.clear();
        inode_blocks(&inode, true, 0, 1_000_000, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn an_indexed_directory_names_its_root_block() {
        let mut inode = Inode::zeroed();
        inode.i_mode.set(0o040_755);
        inode.i_links_count.set(2);
        inode
            .i_flags
            .set((InodeFlags::EXTENTS | InodeFlags::INDEX).bits());
        // A leaf root (depth 0) with one extent: logical 0, 3 blocks at 4321.
        let mut root = Vec::new();
        for h in [0xF30Au16, 1, 4, 0, 0, 0] {
            root.extend(h.to_le_bytes());
        }
        root.extend(0u32.to_le_bytes());
        root.extend(3u16.to_le_bytes());
        root.extend(0u16.to_le_bytes());
        root.extend(4321u32.to_le_bytes());
        inode.i_block[..root.len()].copy_from_slice(&root);
        let mut out = Vec::new();
        inode_blocks(&inode, true, 0, 1_000_000, &mut out);
        assert_eq!(out, [4321]);
        // Not when the first extent starts past block 0 (a hole there).
        inode.i_block[12..16].copy_from_slice(&5u32.to_le_bytes());
        out.clear();
        inode_blocks(&inode, true, 0, 1_000_000, &mut out);
        assert!(out.is_empty());
        // Nor for a directory without the index flag (pass 2 reads it).
        inode.i_block[12..16].copy_from_slice(&0u32.to_le_bytes());
        inode.i_flags.set(InodeFlags::EXTENTS.bits());
        inode_blocks(&inode, true, 0, 1_000_000, &mut out);
        assert!(out.is_empty());
        // A block-mapped indexed directory: its first block word.
        inode.i_flags.set(InodeFlags::INDEX.bits());
        inode.i_block = [0; 60];
        inode.i_block[..4].copy_from_slice(&777u32.to_le_bytes());
        inode_blocks(&inode, true, 0, 1_000_000, &mut out);
        assert_eq!(out, [777]);
    }

    #[test]
    fn scattered_blocks_are_sorted_and_merged() {
        let d = told();
        let mut b = vec![900, 5, 3, 4, 12, 1_000_000, 4];
        blocks(&d, &mut b, 4096);
        let t = d.hints();
        assert_eq!(
            t,
            vec![
                (3 * 4096, 10 * 4096),
                (900 * 4096, 4096),
                (1_000_000 * 4096, 4096)
            ]
        );
    }
}
