//! Pass 1's record of the in-use inodes, kept as e2fsck keeps it: bitmaps
//! for what nearly every inode has (in use, directory, regular file, one
//! link, named once) and short sorted lists for the exceptions (other
//! kinds, link counts other than 1, names counted twice or more). That is
//! well under a byte per in-use inode where a record per inode took 12 (16
//! more while pass 5 copied them), with e2fsck's icount idea for the link
//! counts: a bitmap for the common count of 1, a sorted array for the rest.
//!
//! The sets are kept in chunks of 32768 inode numbers, made where a member
//! is, so the table stays sized by what is in use, not by the volume (an
//! empty 15 TiB filesystem has a billion inode numbers and uses a dozen);
//! a chunk holds runs of members (4 bytes each) until it has more runs
//! than a 4 KiB bitmap has room for, then becomes that bitmap.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};

use ext4r::fs::FileKind;
use ext4r_format::num;

/// Members per chunk of a [`SparseBits`]: 4 KiB as a bitmap.
const CHUNK_BITS: u32 = 1 << 15;
const CHUNK_WORDS: usize = (CHUNK_BITS / 64) as usize;

/// An offset inside a chunk (below [`CHUNK_BITS`], so it fits a `u16`).
fn in_chunk(v: u64) -> u16 {
    debug_assert!(v < u64::from(CHUNK_BITS));
    #[allow(clippy::cast_possible_truncation)] // below CHUNK_BITS = 2^15
    let o = v as u16;
    o
}

/// The 1-based slot a new chunk gets: the number of chunks, at most
/// 2^32 / [`CHUNK_BITS`] = 2^17.
fn slot_of(len: usize) -> u32 {
    debug_assert!(len <= (1 << 17));
    #[allow(clippy::cast_possible_truncation)] // at most 2^17 chunks
    let s = len as u32;
    s
}
/// Runs a chunk keeps before it becomes a bitmap: as many bytes (4 per
/// run) as the bitmap's.
const MAX_RUNS: usize = CHUNK_WORDS * 8 / 4;

/// One chunk's members: runs while they are few, a bitmap once the runs
/// would take more room than it.
#[derive(Debug, Clone)]
enum Chunk {
    /// Sorted, disjoint, non-adjacent `[first, last]` runs of offsets in
    /// the chunk (inclusive: 32768 does not fit a `u16`).
    Runs(Vec<(u16, u16)>),
    Bits(Box<[u64; CHUNK_WORDS]>),
}

impl Chunk {
    /// The first run that ends at or after `o`.
    fn run_at(runs: &[(u16, u16)], o: u16) -> usize {
        runs.partition_point(|r| r.1 < o)
    }

    /// Adds `o`; whether it was not a member. The two cases pass 1 meets
    /// for nearly every inode (a bit set; in inode order, the last run
    /// grown by one) are inlined into the callers: three sets take an
    /// insert per inode, and the call's register saves were most of one.
    #[inline]
    fn insert_new(&mut self, o: u16) -> bool {
        match self {
            Chunk::Bits(w) => {
                let (i, bit) = (usize::from(o / 64), 1u64 << (o % 64));
                let new = w[i] & bit == 0;
                w[i] |= bit;
                return new;
            }
            Chunk::Runs(runs) => {
                if let Some(last) = runs.last_mut().filter(|l| l.1 < o && l.1 + 1 == o) {
                    last.1 = o;
                    return true;
                }
            }
        }
        self.insert_slow(o)
    }

    /// [`Chunk::insert_new`] in every case.
    #[inline(never)]
    fn insert_slow(&mut self, o: u16) -> bool {
        let runs = match self {
            Chunk::Bits(w) => {
                let (i, bit) = (usize::from(o / 64), 1u64 << (o % 64));
                let new = w[i] & bit == 0;
                w[i] |= bit;
                return new;
            }
            Chunk::Runs(runs) => runs,
        };
        // Pass 1 adds in inode order: nearly always the last run grows.
        let i = match runs.last_mut() {
            Some(last) if last.1 < o => {
                if last.1 + 1 == o {
                    last.1 = o;
                    return true;
                }
                runs.len()
            }
            None => 0,
            Some(_) => Self::run_at(runs, o),
        };
        if i < runs.len() && runs[i].0 <= o {
            return false;
        }
        let joins_prev = i > 0 && runs[i - 1].1 + 1 == o;
        let joins_next = i < runs.len() && runs[i].0 == o + 1;
        match (joins_prev, joins_next) {
            (true, true) => {
                runs[i - 1].1 = runs[i].1;
                runs.remove(i);
            }
            (true, false) => runs[i - 1].1 = o,
            (false, true) => runs[i].0 = o,
            (false, false) => {
                if runs.len() == MAX_RUNS {
                    let mut w = Box::new([0u64; CHUNK_WORDS]);
                    for &(a, b) in runs.iter() {
                        for k in a..=b {
                            w[usize::from(k / 64)] |= 1 << (k % 64);
                        }
                    }
                    *self = Chunk::Bits(w);
                    return self.insert_new(o);
                }
                runs.insert(i, (o, o));
            }
        }
        true
    }

    /// Adds `other`'s members where that can be done run by run or word
    /// by word: runs that all come after these (pass 1's stretches, in
    /// inode order), or into a bitmap. `false`, with nothing added,
    /// otherwise.
    fn append(&mut self, other: &Chunk) -> bool {
        match (&mut *self, other) {
            (Chunk::Bits(m), Chunk::Bits(o)) => {
                for (a, b) in m.iter_mut().zip(o.iter()) {
                    *a |= *b;
                }
                true
            }
            (Chunk::Bits(m), Chunk::Runs(o)) => {
                for &(a, b) in o {
                    for k in a..=b {
                        m[usize::from(k / 64)] |= 1 << (k % 64);
                    }
                }
                true
            }
            (Chunk::Runs(m), Chunk::Runs(o)) => {
                let Some(&(first, _)) = o.first() else {
                    return true;
                };
                if m.last().is_some_and(|l| l.1 >= first) || m.len() + o.len() > MAX_RUNS {
                    return false;
                }
                let mut rest = &o[..];
                if let Some(last) = m.last_mut() {
                    if last.1 + 1 == first {
                        last.1 = o[0].1;
                        rest = &o[1..];
                    }
                }
                m.extend_from_slice(rest);
                true
            }
            (Chunk::Runs(_), Chunk::Bits(_)) => false,
        }
    }

    fn contains(&self, o: u16) -> bool {
        match self {
            Chunk::Bits(w) => w[usize::from(o / 64)] & (1 << (o % 64)) != 0,
            Chunk::Runs(runs) => runs.get(Self::run_at(runs, o)).is_some_and(|r| r.0 <= o),
        }
    }

    /// Members `64 * w` to `64 * w + 63` as the bits of a word.
    fn word(&self, w: usize) -> u64 {
        match self {
            Chunk::Bits(words) => words[w],
            Chunk::Runs(runs) => {
                let lo = in_chunk(w as u64 * 64);
                let hi = lo + 63;
                let mut bits = 0u64;
                for &(a, b) in &runs[Self::run_at(runs, lo)..] {
                    if a > hi {
                        break;
                    }
                    let (a, b) = (a.max(lo) - lo, b.min(hi) - lo);
                    bits |= (!0u64 >> (63 - (b - a))) << a;
                }
                bits
            }
        }
    }

    /// The smallest member at or after `o`.
    fn next(&self, o: u16) -> Option<u16> {
        match self {
            Chunk::Runs(runs) => runs.get(Self::run_at(runs, o)).map(|r| r.0.max(o)),
            Chunk::Bits(words) => {
                let mut wi = usize::from(o / 64);
                // The first word without the bits below `o`.
                let mut w = words[wi] & (!0u64 << (o % 64));
                loop {
                    if w != 0 {
                        return Some(in_chunk(wi as u64 * 64 + u64::from(w.trailing_zeros())));
                    }
                    wi += 1;
                    if wi == CHUNK_WORDS {
                        return None;
                    }
                    w = words[wi];
                }
            }
        }
    }

    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        match self {
            Chunk::Runs(r) => r.capacity() * 4,
            Chunk::Bits(_) => CHUNK_WORDS * 8,
        }
    }
}

/// A set of `u32`s in chunks of [`CHUNK_BITS`] created where a member is,
/// each a list of runs until it is fragmented enough to be a bitmap. As
/// e2fsck's default bitmaps (red-black trees of extents), the in-use
/// inodes, which lie in long runs, take a few bytes per run: a bitmap of
/// the 2.5M inode numbers of a 2M-file filesystem took 305 KiB, and pass 1
/// keeps five.
#[derive(Debug, Default)]
pub(crate) struct SparseBits {
    /// One more than each chunk's slot in `chunks` (0: no member in it).
    index: Vec<u32>,
    chunks: Vec<Chunk>,
    /// The `[start, end)` run the last successful lookup found (members
    /// are never removed, so it stays true): passes 2 and 4 look up
    /// inodes of one directory, or in order, mostly in the same run.
    hit: Span,
    /// The `[start, end)` gap between runs the last failed lookup fell in
    /// (cleared by an insert): most inodes are not directories.
    miss: Span,
}

/// A cached `[start, end)` range of inode numbers. Atomic, so that the
/// sets can be read from several threads (pass 2's readers); each reader
/// just finds what another cached, which is as true for it.
#[derive(Debug, Default)]
struct Span(std::sync::atomic::AtomicU64);

impl Span {
    fn get(&self) -> (u32, u32) {
        let v = self.0.load(std::sync::atomic::Ordering::Relaxed);
        (num::hi32(v), num::lo32(v))
    }

    fn set(&self, (start, end): (u32, u32)) {
        let v = u64::from(start) << 32 | u64::from(end);
        self.0.store(v, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Clone for SparseBits {
    fn clone(&self) -> Self {
        SparseBits {
            index: self.index.clone(),
            chunks: self.chunks.clone(),
            hit: Span::default(),
            miss: Span::default(),
        }
    }
}

impl SparseBits {
    #[inline]
    pub(crate) fn insert(&mut self, k: u32) {
        self.insert_new(k);
    }

    /// Inserts `k`; whether it was not a member before (one lookup where
    /// `contains` then `insert` took two).
    ///
    /// Inlined where the chunk exists (pass 1's inserts, but for the first
    /// of each chunk): see [`Chunk::insert_new`].
    #[inline]
    pub(crate) fn insert_new(&mut self, k: u32) -> bool {
        self.miss.set((0, 0));
        let c = (k / CHUNK_BITS) as usize;
        match self.index.get(c) {
            Some(&s) if s != 0 => self.chunks[s as usize - 1].insert_new((k % CHUNK_BITS) as u16),
            _ => self.insert_in_new_chunk(k),
        }
    }

    /// [`SparseBits::insert_new`] where `k`'s chunk is not made yet.
    #[inline(never)]
    fn insert_in_new_chunk(&mut self, k: u32) -> bool {
        let c = (k / CHUNK_BITS) as usize;
        if c >= self.index.len() {
            self.index.resize(c + 1, 0);
        }
        if self.index[c] == 0 {
            self.chunks.push(Chunk::Runs(Vec::new()));
            self.index[c] = slot_of(self.chunks.len());
        }
        let slot = self.index[c] as usize - 1;
        self.chunks[slot].insert_new((k % CHUNK_BITS) as u16)
    }

    pub(crate) fn contains(&self, k: u32) -> bool {
        let (start, end) = self.hit.get();
        if start <= k && k < end {
            return true;
        }
        let (start, end) = self.miss.get();
        if start <= k && k < end {
            return false;
        }
        let chunk = k / CHUNK_BITS;
        let slot = match self.index.get(chunk as usize) {
            Some(&s) if s != 0 => s as usize - 1,
            _ => return false,
        };
        let o = (k % CHUNK_BITS) as u16;
        let base = chunk * CHUNK_BITS;
        match &self.chunks[slot] {
            Chunk::Runs(runs) => {
                let i = Chunk::run_at(runs, o);
                match runs.get(i) {
                    Some(&(a, b)) if a <= o => {
                        // `b` is at most CHUNK_BITS - 1: the end fits
                        // unless the chunk is the last one of u32's range.
                        if let Some(end) = (base + u32::from(b)).checked_add(1) {
                            self.hit.set((base + u32::from(a), end));
                        }
                        true
                    }
                    next => {
                        let from = i.checked_sub(1).map_or(0, |p| u32::from(runs[p].1) + 1);
                        let to = next.map_or(CHUNK_BITS, |r| u32::from(r.0));
                        self.miss.set((base + from, base.saturating_add(to)));
                        false
                    }
                }
            }
            bits => bits.contains(o),
        }
    }

    /// Members `64 * w` to `64 * w + 63` as the bits of a word.
    fn word(&self, w: u32) -> u64 {
        let c = (w / (CHUNK_BITS / 64)) as usize;
        match self.index.get(c) {
            Some(&s) if s != 0 => {
                self.chunks[s as usize - 1].word((w % (CHUNK_BITS / 64)) as usize)
            }
            _ => 0,
        }
    }

    /// The smallest member at or after `from`.
    pub(crate) fn next(&self, from: u32) -> Option<u32> {
        // Pass 4 walks the set in order: mostly within the last run found.
        let (start, end) = self.hit.get();
        if start <= from && from < end {
            return Some(from);
        }
        let mut c = (from / CHUNK_BITS) as usize;
        let mut o = (from % CHUNK_BITS) as u16;
        while c < self.index.len() {
            if self.index[c] != 0 {
                let chunk = &self.chunks[self.index[c] as usize - 1];
                if let Some(m) = chunk.next(o) {
                    let base = c as u64 * u64::from(CHUNK_BITS);
                    if let Chunk::Runs(runs) = chunk {
                        let r = runs[Chunk::run_at(runs, m)];
                        if let (Ok(a), Ok(e)) = (
                            u32::try_from(base + u64::from(r.0)),
                            u32::try_from(base + u64::from(r.1) + 1),
                        ) {
                            self.hit.set((a, e));
                        }
                    }
                    return u32::try_from(base + u64::from(m)).ok();
                }
            }
            c += 1;
            o = 0;
        }
        None
    }

    /// Adds every member of `other`. A chunk this set does not have is
    /// moved over whole; where both have one (where two stretches of pass
    /// 1 meet) `other`'s runs are added one by one, which keeps the
    /// chunk's form rules.
    pub(crate) fn append(&mut self, other: SparseBits) {
        self.miss.set((0, 0));
        let SparseBits { index, chunks, .. } = other;
        let mut chunks: Vec<Option<Chunk>> = chunks.into_iter().map(Some).collect();
        for (c, &slot) in index.iter().enumerate() {
            if slot == 0 {
                continue;
            }
            let Some(chunk) = chunks[slot as usize - 1].take() else {
                continue;
            };
            if c >= self.index.len() {
                self.index.resize(c + 1, 0);
            }
            if self.index[c] == 0 {
                self.chunks.push(chunk);
                self.index[c] = slot_of(self.chunks.len());
                continue;
            }
            let mine = &mut self.chunks[self.index[c] as usize - 1];
            if !mine.append(&chunk) {
                let mut o = chunk.next(0);
                while let Some(m) = o {
                    mine.insert_new(m);
                    o = m
                        .checked_add(1)
                        .filter(|&n| u32::from(n) < CHUNK_BITS)
                        .and_then(|n| chunk.next(n));
                }
            }
        }
    }

    /// The members without the lookup caches: a view threads can share.
    pub(crate) fn view(&self) -> BitsView<'_> {
        BitsView {
            index: &self.index,
            chunks: &self.chunks,
        }
    }

    /// Bytes held (for the memory figures in tests and notes).
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        self.index.capacity() * 4
            + self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.chunks.iter().map(Chunk::heap_bytes).sum::<usize>()
    }
}

/// A [`SparseBits`] read without its caches (which make the set itself
/// not `Sync`): pass 5's workers read the in-use inodes of their groups
/// through it.
#[derive(Clone, Copy)]
pub(crate) struct BitsView<'a> {
    index: &'a [u32],
    chunks: &'a [Chunk],
}

impl BitsView<'_> {
    /// Calls `f(start, end)` for the members in `[from, to)` as runs of
    /// consecutive numbers `[start, end)`, in order (a run crossing a
    /// chunk boundary comes in two parts).
    pub(crate) fn runs(&self, from: u64, to: u64, mut f: impl FnMut(u64, u64)) {
        let cb = u64::from(CHUNK_BITS);
        if from >= to {
            return;
        }
        let last = ((to - 1) / cb).min(self.index.len() as u64);
        for c in from / cb..=last {
            let slot = match self.index.get(num::index(c)) {
                Some(&s) if s != 0 => s as usize - 1,
                _ => continue,
            };
            let base = c * cb;
            // Offsets `[lo, hi)` in the chunk.
            let lo = from.max(base) - base;
            let hi = to.min(base + cb) - base;
            match &self.chunks[slot] {
                Chunk::Runs(runs) => {
                    for &(a, b) in &runs[Chunk::run_at(runs, in_chunk(lo))..] {
                        let (a, b) = (u64::from(a), u64::from(b) + 1);
                        if a >= hi {
                            break;
                        }
                        f(base + a.max(lo), base + b.min(hi));
                    }
                }
                Chunk::Bits(words) => {
                    let mut o = lo;
                    while o < hi {
                        // The next member, then the next non-member.
                        let Some(s) = next_bit(&words[..], o, hi, false) else {
                            break;
                        };
                        let e = next_bit(&words[..], s, hi, true).unwrap_or(hi);
                        f(base + s, base + e);
                        o = e;
                    }
                }
            }
        }
    }
}

/// The first bit at or after `o` and before `hi` that is set (`clear`:
/// that is clear).
fn next_bit(words: &[u64], o: u64, hi: u64, clear: bool) -> Option<u64> {
    let flip = if clear { !0u64 } else { 0 };
    let mut wi = (o / 64) as usize;
    let mut w = (words[wi] ^ flip) & (!0u64 << (o % 64));
    loop {
        if w != 0 {
            let at = wi as u64 * 64 + u64::from(w.trailing_zeros());
            return (at < hi).then_some(at);
        }
        wi += 1;
        if wi as u64 * 64 >= hi {
            return None;
        }
        w = words[wi] ^ flip;
    }
}

/// An in-use inode as pass 1 saw it (what [`Inodes::get`] gives back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InodeRec {
    pub ino: u32,
    pub links: u16,
    pub kind: FileKind,
    /// Links found in directories (passes 2–4).
    pub counted: u32,
    /// Holds an xattr value (ea_inode): referenced from xattrs, not from
    /// directories.
    pub ea_inode: bool,
}

/// What pass 1 found of the in-use inodes: their kinds and link counts.
/// Fixed once pass 1 is done, and shared then with pass 2's readers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Kinds {
    used: SparseBits,
    dir: SparseBits,
    regular: SparseBits,
    /// The other kinds (symlinks, devices, fifos, sockets), sorted.
    other: Vec<(u32, FileKind)>,
    /// EA inodes, sorted.
    ea: Vec<u32>,
    /// `i_links_count` is 1.
    link1: SparseBits,
    /// Any other `i_links_count` (directories, hard links, 0).
    links: LinkCounts,
}

/// Inodes with a link count other than 1, sorted, and their counts: two
/// columns, 6 bytes an inode where pairs took 8 (every directory is here:
/// 200,000 of them are 0.4 MB less).
#[derive(Debug, Clone, Default)]
struct LinkCounts {
    inos: Vec<u32>,
    counts: Vec<u16>,
    /// Made at the first lookup after the last insert (see [`Buckets`]).
    buckets: std::sync::OnceLock<Buckets>,
}

impl LinkCounts {
    fn insert(&mut self, ino: u32, count: u16) {
        let at = insert_sorted(&mut self.inos, ino, |&i| i);
        self.counts.insert(at, count);
        self.buckets = std::sync::OnceLock::new();
    }

    fn position(&self, ino: u32) -> Option<usize> {
        let (lo, hi) = self
            .buckets
            .get_or_init(|| Buckets::new(&self.inos))
            .range(ino)?;
        let at = self.inos.get(lo..hi)?.binary_search(&ino).ok()?;
        Some(lo + at)
    }

    fn len(&self) -> usize {
        self.inos.len()
    }
}

impl Kinds {
    pub(crate) fn kind(&self, ino: u32) -> Option<FileKind> {
        if self.regular.contains(ino) {
            Some(FileKind::Regular)
        } else if self.dir.contains(ino) {
            Some(FileKind::Directory)
        } else if self.used.contains(ino) {
            let i = self.other.binary_search_by_key(&ino, |e| e.0).ok()?;
            Some(self.other[i].1)
        } else {
            None
        }
    }

    fn multi(&self, ino: u32) -> Option<usize> {
        self.links.position(ino)
    }
}

/// The in-use inodes pass 1 lists for passes 2–5, and the names passes
/// 2–4 count for them.
#[derive(Debug, Default)]
pub(crate) struct Inodes {
    kinds: Arc<Kinds>,
    /// Made for `kinds` once pass 1 is over (see [`Inodes::names`]).
    names: Option<Arc<Names>>,
}

/// Names counted per in-use inode, shared by the threads of pass 2 (the
/// counts are atomic; counting is the same in any order).
#[derive(Debug)]
pub(crate) struct Names {
    /// Names counted for each of `Kinds::links`, in its order.
    counted: Vec<AtomicU32>,
    /// Per chunk of [`CHUNK_BITS`] inode numbers, one more than its slot
    /// in `named` (0: no inode in use there, none to count).
    index: Vec<u32>,
    /// Inodes outside `links` named at least once: a 4 KiB bitmap per
    /// chunk with inodes in use (as pass 2's dense set was).
    named: Vec<AtomicU64>,
    /// Inodes outside `links` named more than once: how often (a
    /// damaged tree's exception).
    named_more: Mutex<BTreeMap<u32, u32>>,
}

impl Names {
    /// No names yet, for the inodes `kinds` has.
    fn for_kinds(kinds: &Kinds) -> Self {
        let mut index = vec![0u32; kinds.used.index.len()];
        let mut slots = 0u32;
        for (c, &s) in kinds.used.index.iter().enumerate() {
            if s != 0 {
                slots += 1;
                index[c] = slots;
            }
        }
        Names {
            counted: (0..kinds.links.len()).map(|_| AtomicU32::new(0)).collect(),
            index,
            named: (0..slots as usize * CHUNK_WORDS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            named_more: Mutex::new(BTreeMap::new()),
        }
    }

    /// The word and bit of `ino` in `named`.
    fn bit(&self, ino: u32) -> Option<(&AtomicU64, u64)> {
        let slot = *self.index.get((ino / CHUNK_BITS) as usize)?;
        let o = (ino % CHUNK_BITS) as usize;
        let w = (slot as usize).checked_sub(1)? * CHUNK_WORDS + o / 64;
        Some((self.named.get(w)?, 1u64 << (o % 64)))
    }

    fn more(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, u32>> {
        self.named_more.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more name for `ino` (an in-use inode of `kinds`; others
    /// are not counted).
    pub(crate) fn add(&self, kinds: &Kinds, ino: u32) {
        if !kinds.used.contains(ino) {
            return;
        }
        if !kinds.link1.contains(ino) {
            if let Some(i) = kinds.multi(ino) {
                let _ = self.counted[i].fetch_update(Relaxed, Relaxed, |n| n.checked_add(1));
                return;
            }
        }
        let Some((word, mask)) = self.bit(ino) else {
            return;
        };
        if word.fetch_or(mask, Relaxed) & mask != 0 {
            let mut more = self.more();
            let n = more.entry(ino).or_insert(1);
            *n = n.saturating_add(1);
        }
    }

    /// Takes back one name counted for `ino` with [`Names::add`].
    pub(crate) fn remove(&self, kinds: &Kinds, ino: u32) {
        if !kinds.used.contains(ino) {
            return;
        }
        if !kinds.link1.contains(ino) {
            if let Some(i) = kinds.multi(ino) {
                let _ = self.counted[i].fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
                return;
            }
        }
        let mut more = self.more();
        match more.get(&ino).copied() {
            Some(n) if n > 2 => {
                more.insert(ino, n - 1);
            }
            Some(_) => {
                more.remove(&ino);
            }
            None => {
                if let Some((word, mask)) = self.bit(ino) {
                    word.fetch_and(!mask, Relaxed);
                }
            }
        }
    }

    /// Of inodes `64 * w` to `64 * w + 63`, those outside `links` named
    /// exactly once, as the bits of a word.
    fn once(&self, w: u32) -> u64 {
        let Some(&slot) = self.index.get((w / (CHUNK_BITS / 64)) as usize) else {
            return 0;
        };
        let Some(at) = (slot as usize).checked_sub(1) else {
            return 0;
        };
        let mut bits =
            self.named[at * CHUNK_WORDS + (w % (CHUNK_BITS / 64)) as usize].load(Relaxed);
        let first = w * 64;
        for (&ino, _) in self.more().range(first..=first + 63) {
            bits &= !(1 << (ino - first));
        }
        bits
    }

    /// Names counted for `ino` outside `links`.
    fn count(&self, ino: u32) -> u32 {
        match self.more().get(&ino) {
            Some(&n) => n,
            None => u32::from(self.bit(ino).is_some_and(|(w, m)| w.load(Relaxed) & m != 0)),
        }
    }
}

/// Where to look for an inode number in a sorted list: the list's span
/// of each run of `1 << shift` numbers from `base`. Pass 2 looks up every
/// name of a hard-linked file or directory; a binary search of the whole
/// list (17 steps for 131,000 inodes of the cold bench's backup tree,
/// each a cache miss) was a third of that check's CPU. About eight
/// entries a bucket: half a byte an entry beside the list's six.
#[derive(Debug, Clone)]
struct Buckets {
    base: u32,
    shift: u32,
    /// `starts[b]`: the first entry in bucket `b` or after it; one more
    /// than the buckets.
    starts: Vec<u32>,
}

impl Buckets {
    /// Entries a bucket holds on average, at most.
    const PER: usize = 8;

    fn new(sorted: &[u32]) -> Self {
        let (Some(&base), Some(&last)) = (sorted.first(), sorted.last()) else {
            return Buckets {
                base: 0,
                shift: 0,
                starts: vec![0],
            };
        };
        let want = (sorted.len() / Self::PER).max(1) as u64;
        let span = u64::from(last - base);
        let mut shift = 0u32;
        while (span >> shift) + 1 > want {
            shift += 1;
        }
        let buckets = num::index((span >> shift) + 1);
        let mut starts = Vec::with_capacity(buckets + 1);
        let mut b = 0usize;
        for (i, &ino) in sorted.iter().enumerate() {
            let mine = num::index(u64::from(ino - base) >> shift);
            while b <= mine {
                starts.push(num::sat_u32(i));
                b += 1;
            }
        }
        while starts.len() <= buckets {
            starts.push(num::sat_u32(sorted.len()));
        }
        Buckets {
            base,
            shift,
            starts,
        }
    }

    /// The span of the list where `ino` is, if anywhere.
    fn range(&self, ino: u32) -> Option<(usize, usize)> {
        let b = usize::try_from(u64::from(ino.checked_sub(self.base)?) >> self.shift).ok()?;
        let lo = *self.starts.get(b)? as usize;
        let hi = *self.starts.get(b + 1)? as usize;
        Some((lo, hi))
    }
}

/// Inserts into a list kept sorted by `key`; pass 1 adds in inode order,
/// so this is nearly always a push. Returns where it went.
fn insert_sorted<T>(v: &mut Vec<T>, item: T, key: impl Fn(&T) -> u32) -> usize {
    let k = key(&item);
    match v.last() {
        Some(last) if key(last) >= k => {
            let at = v.partition_point(|x| key(x) < k);
            v.insert(at, item);
            at
        }
        _ => {
            v.push(item);
            v.len() - 1
        }
    }
}

impl Inodes {
    /// Records an in-use inode (counted 0). An inode already recorded is
    /// left as it is.
    pub(crate) fn insert(&mut self, ino: u32, links: u16, kind: FileKind, ea_inode: bool) {
        let k = Arc::make_mut(&mut self.kinds);
        if !k.used.insert_new(ino) {
            return;
        }
        match kind {
            FileKind::Directory => k.dir.insert(ino),
            FileKind::Regular => k.regular.insert(ino),
            other => {
                insert_sorted(&mut k.other, (ino, other), |e| e.0);
            }
        }
        if ea_inode {
            insert_sorted(&mut k.ea, ino, |&e| e);
        }
        if links == 1 {
            k.link1.insert(ino);
        } else {
            k.links.insert(ino, links);
        }
        // Counted for the kinds as they will be.
        self.names = None;
    }

    pub(crate) fn contains(&self, ino: u32) -> bool {
        self.kinds.used.contains(ino)
    }

    /// Adds the inodes `other` recorded (none of them recorded here: pass
    /// 1 checks each inode once), as if each had been inserted here.
    pub(crate) fn append(&mut self, other: Inodes) {
        let Inodes { kinds, names } = other;
        debug_assert!(names.is_none(), "names counted in pass 1");
        let Kinds {
            used,
            dir,
            regular,
            other: others,
            ea,
            link1,
            links,
        } = Arc::unwrap_or_clone(kinds);
        let k = Arc::make_mut(&mut self.kinds);
        k.used.append(used);
        k.dir.append(dir);
        k.regular.append(regular);
        k.link1.append(link1);
        for o in others {
            insert_sorted(&mut k.other, o, |e| e.0);
        }
        for e in ea {
            insert_sorted(&mut k.ea, e, |&e| e);
        }
        for (ino, count) in links.inos.into_iter().zip(links.counts) {
            k.links.insert(ino, count);
        }
        self.names = None;
    }

    /// The in-use inodes and the directories among them, for threads to
    /// share without the lookup caches (see [`BitsView`]).
    pub(crate) fn views(&self) -> (BitsView<'_>, BitsView<'_>) {
        (self.kinds.used.view(), self.kinds.dir.view())
    }

    /// The kinds and link counts, to be read on other threads (pass 1 is
    /// over: a later insert would copy them).
    pub(crate) fn kinds(&self) -> Arc<Kinds> {
        self.kinds.clone()
    }

    /// The smallest in-use inode at or after `from`.
    pub(crate) fn next(&self, from: u32) -> Option<u32> {
        self.kinds.used.next(from)
    }

    pub(crate) fn kind(&self, ino: u32) -> Option<FileKind> {
        self.kinds.kind(ino)
    }

    pub(crate) fn is_dir(&self, ino: u32) -> bool {
        self.kinds.dir.contains(ino)
    }

    /// The names counted, to count more on other threads (made when
    /// first asked for; pass 1, which changes the kinds, is over then).
    pub(crate) fn names(&mut self) -> Arc<Names> {
        self.names
            .get_or_insert_with(|| Arc::new(Names::for_kinds(&self.kinds)))
            .clone()
    }

    /// Counts one more name for `ino` (an in-use inode; others are not
    /// counted).
    pub(crate) fn add_name(&mut self, ino: u32) {
        let names = self.names();
        names.add(&self.kinds, ino);
    }

    /// Takes back a name counted for `ino`.
    pub(crate) fn remove_name(&mut self, ino: u32) {
        let names = self.names();
        names.remove(&self.kinds, ino);
    }

    /// Of inodes `64 * w` to `64 * w + 63`, those in use whose record
    /// [`Inodes::get`] may show something to act on, as the bits of a
    /// word: all but the ordinary ones with one link and one name (nearly
    /// every file), which a walk over all inodes (pass 4) can skip 64 at a
    /// time. EA inodes are never skipped.
    pub(crate) fn unsettled(&self, w: u32) -> u64 {
        let k = &self.kinds;
        let used = k.used.word(w);
        if used == 0 {
            return 0;
        }
        let once = self.names.as_ref().map_or(0, |n| n.once(w));
        let mut settled = k.link1.word(w) & once;
        let first = w * 64;
        let from = k.ea.partition_point(|&e| e < first);
        for &e in k.ea[from..].iter().take_while(|&&e| e - first < 64) {
            settled &= !(1 << (e - first));
        }
        used & !settled
    }

    /// The record of an in-use inode.
    pub(crate) fn get(&self, ino: u32) -> Option<InodeRec> {
        let kind = self.kind(ino)?;
        let named = |ino| self.names.as_ref().map_or(0, |n| n.count(ino));
        let (links, counted) = if self.kinds.link1.contains(ino) {
            (1, named(ino))
        } else {
            match self.kinds.multi(ino) {
                Some(i) => (
                    self.kinds.links.counts[i],
                    self.names
                        .as_ref()
                        .map_or(0, |n| n.counted[i].load(Relaxed)),
                ),
                None => (1, named(ino)),
            }
        };
        Some(InodeRec {
            ino,
            links,
            kind,
            counted,
            ea_inode: self.kinds.ea.binary_search(&ino).is_ok(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_bits_next_and_contains() {
        let mut b = SparseBits::default();
        let members = [0u32, 1, 63, 64, 32767, 32768, 1 << 30, u32::MAX];
        for &k in members.iter().rev() {
            b.insert(k);
        }
        for &k in &members {
            assert!(b.contains(k), "{k}");
        }
        assert!(!b.contains(2));
        assert!(!b.contains(5 << 20));
        let mut seen = Vec::new();
        let mut from = Some(0u32);
        while let Some(k) = from.and_then(|f| b.next(f)) {
            seen.push(k);
            from = k.checked_add(1);
        }
        assert_eq!(seen, members);
        assert_eq!(b.next(65), Some(32767));
        assert_eq!(b.next((1 << 30) + 1), Some(u32::MAX));
    }

    #[test]
    fn sparse_bits_sized_by_members() {
        let mut b = SparseBits::default();
        b.insert(11);
        b.insert(12);
        // A billion-inode table with its first inodes in use: one chunk.
        assert!(b.heap_bytes() <= 4096 + 64);
    }

    #[test]
    fn sparse_bits_runs_and_bitmaps_agree_with_a_set() {
        // A small linear congruential sequence: runs that merge, split
        // insertions, and chunks fragmented past MAX_RUNS into bitmaps.
        let mut b = SparseBits::default();
        let mut set = std::collections::BTreeSet::new();
        let mut x = 12345u64;
        for round in 0..40_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = match round % 4 {
                // Dense: fills and joins runs in the first chunk.
                0 => (x >> 33) as u32 % 3000,
                // Every other number of the second chunk: a bitmap.
                1 => CHUNK_BITS + ((x >> 33) as u32 % 16000) * 2,
                // In order, as pass 1 adds.
                2 => 5 * CHUNK_BITS + round,
                _ => (x >> 20) as u32,
            };
            assert_eq!(b.insert_new(k), set.insert(k), "{k}");
        }
        assert!(b.chunks.iter().any(|c| matches!(c, Chunk::Bits(_))));
        assert!(b.chunks.iter().any(|c| matches!(c, Chunk::Runs(_))));
        for k in (0..8 * CHUNK_BITS).chain(set.iter().copied()) {
            assert_eq!(b.contains(k), set.contains(&k), "{k}");
        }
        let mut seen = Vec::new();
        let mut from = Some(0u32);
        while let Some(k) = from.and_then(|f| b.next(f)) {
            seen.push(k);
            from = k.checked_add(1);
        }
        assert!(seen.iter().eq(set.iter()));
        for w in 0..8 * CHUNK_BITS / 64 {
            let want = (0..64).fold(0u64, |v, i| v | u64::from(set.contains(&(w * 64 + i))) << i);
            assert_eq!(b.word(w), want, "word {w}");
        }
    }

    #[test]
    fn views_give_the_runs_of_a_range() {
        // Runs and bitmap chunks alike: the members in any range, as runs.
        for dense in [false, true] {
            let mut b = SparseBits::default();
            let mut set = std::collections::BTreeSet::new();
            if dense {
                // More runs than a chunk keeps: its bitmap form.
                for k in (1000..4000u32).step_by(2) {
                    b.insert(k);
                    set.insert(u64::from(k));
                }
            }
            let mut x = 99u64;
            for k in (10..200u32).chain(CHUNK_BITS - 5..CHUNK_BITS + 70) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if (x >> 40) % 3 != 0 {
                    b.insert(k);
                    set.insert(u64::from(k));
                }
            }
            b.insert(u32::MAX);
            set.insert(u64::from(u32::MAX));
            let v = b.view();
            for (from, to) in [
                (0, 300),
                (11, 12),
                (64, 129),
                (130, 3 * u64::from(CHUNK_BITS)),
                (u64::from(CHUNK_BITS) - 7, u64::from(CHUNK_BITS) + 1),
                (0, 1 << 33),
                (u64::from(u32::MAX), 1 << 32),
                (5, 5),
            ] {
                let mut got = Vec::new();
                v.runs(from, to, |s, e| {
                    assert!(s < e && got.last().is_none_or(|&l| l < s));
                    got.extend(s..e);
                });
                let want: Vec<u64> = set.range(from..to).copied().collect();
                assert_eq!(got, want, "dense {dense}: [{from}, {to})");
            }
        }
    }

    #[test]
    fn sparse_bits_and_the_hit_cache() {
        let mut b = SparseBits::default();
        for k in [5u32, 9, 6, 7, 8, 100_000, u32::MAX] {
            assert!(b.insert_new(k));
        }
        for k in (0..200u32).chain([99_999, 100_000, 100_001, u32::MAX - 1, u32::MAX]) {
            let want = [5, 6, 7, 8, 9, 100_000, u32::MAX].contains(&k);
            assert_eq!(b.contains(k), want, "{k}");
            // Again, now that the last hit or miss is cached.
            assert_eq!(b.contains(k), want, "{k}");
        }
        // A cached miss does not outlive an insert into its gap.
        assert!(!b.contains(50));
        b.insert(50);
        assert!(b.contains(50) && !b.contains(51));
        assert_eq!(b.next(10), Some(50));
    }

    #[test]
    fn sparse_bits_runs_are_small() {
        // 2M inodes in 128 runs (a kernel-filled filesystem's groups).
        let mut b = SparseBits::default();
        for g in 0..128u32 {
            for i in 0..15_000 {
                b.insert(g * 19_536 + 12 + i);
            }
        }
        assert!(b.heap_bytes() < 8 << 10, "{}", b.heap_bytes());
    }

    #[test]
    fn records_and_counts() {
        let mut t = Inodes::default();
        t.insert(2, 3, FileKind::Directory, false);
        t.insert(12, 1, FileKind::Regular, false);
        t.insert(13, 1, FileKind::Symlink, false);
        t.insert(14, 2, FileKind::Regular, false);
        t.insert(15, 0, FileKind::Regular, true);
        // Out of order (the resize inode's recreation, say).
        t.insert(11, 1, FileKind::Fifo, false);
        let mut all = Vec::new();
        let mut from = Some(0u32);
        while let Some(ino) = from.and_then(|f| t.next(f)) {
            all.push(ino);
            from = ino.checked_add(1);
        }
        assert_eq!(all, [2, 11, 12, 13, 14, 15]);
        for ino in [2, 2, 12, 14, 14, 13, 13, 13, 99] {
            t.add_name(ino);
        }
        let r = |ino| t.get(ino).map(|r| (r.links, r.kind, r.counted, r.ea_inode));
        assert_eq!(r(2), Some((3, FileKind::Directory, 2, false)));
        assert_eq!(r(11), Some((1, FileKind::Fifo, 0, false)));
        assert_eq!(r(12), Some((1, FileKind::Regular, 1, false)));
        assert_eq!(r(13), Some((1, FileKind::Symlink, 3, false)));
        assert_eq!(r(14), Some((2, FileKind::Regular, 2, false)));
        assert_eq!(r(15), Some((0, FileKind::Regular, 0, true)));
        assert_eq!(r(99), None);
        assert!(t.is_dir(2) && !t.is_dir(12));
        assert_eq!(t.next(3), Some(11));
        // A name taken back: from a list count, a repeat and a single.
        for ino in [2, 13, 12] {
            t.remove_name(ino);
        }
        let r = |ino| t.get(ino).map(|r| (r.links, r.kind, r.counted, r.ea_inode));
        assert_eq!(r(2).map(|r| r.2), Some(1));
        assert_eq!(r(13).map(|r| r.2), Some(2));
        assert_eq!(r(12).map(|r| r.2), Some(0));
    }

    #[test]
    fn appended_stretches_equal_one_set() {
        // Stretches of members in order (pass 1's), some dense, some
        // sparse enough to make bitmaps, and one out of order.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut whole = SparseBits::default();
        let mut parts = SparseBits::default();
        let mut all = std::collections::BTreeSet::new();
        let mut at = 0u32;
        for stretch in 0..200u32 {
            let mut part = SparseBits::default();
            let start = if stretch == 150 { 1000 } else { at };
            for k in start..start + 1024 {
                if rnd() % (1 + u64::from(stretch % 5)) == 0 {
                    part.insert(k);
                    whole.insert(k);
                    all.insert(k);
                }
            }
            at = at.max(start + 1024);
            parts.append(part);
        }
        let mut from = Some(0u32);
        let mut seen = Vec::new();
        while let Some(k) = from.and_then(|f| parts.next(f)) {
            seen.push(k);
            from = k.checked_add(1);
        }
        assert!(seen.iter().eq(all.iter()));
        for k in 0..at + 10 {
            assert_eq!(parts.contains(k), whole.contains(k), "{k}");
        }
    }

    #[test]
    fn names_counted_on_threads_as_on_one() {
        let mut t = Inodes::default();
        let mut one = Inodes::default();
        for ino in 11..100_000u32 {
            let links = if ino % 10 == 0 { 2 } else { 1 };
            t.insert(ino, links, FileKind::Regular, false);
            one.insert(ino, links, FileKind::Regular, false);
        }
        // Every inode named (ino % 3) + 1 times, in four threads' order.
        let names: Vec<u32> = (11..100_000u32)
            .flat_map(|i| std::iter::repeat_n(i, (i % 3) as usize + 1))
            .collect();
        let (kinds, shared) = (t.kinds(), t.names());
        std::thread::scope(|s| {
            for part in names.chunks(names.len() / 4 + 1) {
                let (kinds, shared) = (&kinds, &shared);
                s.spawn(move || part.iter().rev().for_each(|&i| shared.add(kinds, i)));
            }
        });
        for &i in &names {
            one.add_name(i);
        }
        for ino in (0..100_010u32).step_by(7) {
            assert_eq!(t.get(ino), one.get(ino), "{ino}");
        }
    }

    #[test]
    fn unsettled_are_all_but_one_link_one_name() {
        let mut t = Inodes::default();
        for ino in 11..40_000u32 {
            if ino % 97 == 0 {
                continue; // not in use
            }
            let links = if ino % 10 == 0 { 2 } else { 1 };
            let kind = if ino % 13 == 0 {
                FileKind::Directory
            } else {
                FileKind::Regular
            };
            t.insert(ino, links, kind, ino % 1000 == 7);
        }
        // Named (ino % 4) times: 0, 1, 2 or 3.
        for ino in 11..40_000u32 {
            for _ in 0..ino % 4 {
                t.add_name(ino);
            }
        }
        for w in 0..40_064 / 64 {
            let mut want = 0u64;
            for i in 0..64 {
                let ino = w * 64 + i;
                let Some(r) = t.get(ino) else { continue };
                if r.ea_inode || r.links != 1 || r.counted != 1 {
                    want |= 1 << i;
                }
            }
            assert_eq!(t.unsettled(w), want, "word {w}");
        }
    }

    proptest::proptest! {
        /// A lookup through the buckets finds what a search of the whole
        /// list finds, for numbers in it, between, before and after.
        #[test]
        fn buckets_find_what_a_binary_search_finds(
            mut inos in proptest::collection::vec(0u32..200_000, 0..400),
            probes in proptest::collection::vec(0u32..=u32::MAX, 0..50),
            spread in 0u32..4,
        ) {
            for i in &mut inos {
                *i = i.saturating_mul(1 + spread * 1000);
            }
            inos.sort_unstable();
            inos.dedup();
            let mut l = LinkCounts::default();
            for &i in &inos {
                l.insert(i, 2);
            }
            let near = inos.iter().flat_map(|&i| [i.wrapping_sub(1), i, i.wrapping_add(1)]);
            for p in near.chain(probes).chain([0, u32::MAX]) {
                proptest::prop_assert_eq!(l.position(p), inos.binary_search(&p).ok(), "{}", p);
            }
            // An insert after a lookup is found too (the buckets are made
            // again).
            l.insert(u32::MAX - 5, 3);
            proptest::prop_assert_eq!(l.position(u32::MAX - 5), Some(l.inos.len() - 1));
            if let Some(&first) = inos.first() {
                proptest::prop_assert_eq!(l.position(first), Some(0));
            }
        }
    }
}
