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

use ext4r::fs::FileKind;

/// Members per chunk of a [`SparseBits`]: 4 KiB as a bitmap.
const CHUNK_BITS: u32 = 1 << 15;
const CHUNK_WORDS: usize = (CHUNK_BITS / 64) as usize;
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

    fn insert_new(&mut self, o: u16) -> bool {
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

    fn contains(&self, o: u16) -> bool {
        match self {
            Chunk::Bits(w) => w[usize::from(o / 64)] & (1 << (o % 64)) != 0,
            Chunk::Runs(runs) => runs.get(Self::run_at(runs, o)).is_some_and(|r| r.0 <= o),
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
                        return Some((wi * 64) as u16 + w.trailing_zeros() as u16);
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
#[derive(Debug, Clone, Default)]
pub(crate) struct SparseBits {
    /// One more than each chunk's slot in `chunks` (0: no member in it).
    index: Vec<u32>,
    chunks: Vec<Chunk>,
    /// Chunks are bitmaps from the start: for a set filled in random
    /// order (the names pass 2 counts, in hash order within each
    /// directory), whose runs would be split and joined at every insert.
    dense: bool,
    /// The `[start, end)` run the last successful lookup found (members
    /// are never removed, so it stays true): passes 2 and 4 look up
    /// inodes of one directory, or in order, mostly in the same run.
    hit: std::cell::Cell<(u32, u32)>,
    /// The `[start, end)` gap between runs the last failed lookup fell in
    /// (cleared by an insert): most inodes are not directories.
    miss: std::cell::Cell<(u32, u32)>,
}

impl SparseBits {
    /// A set kept as bitmaps where it has members (see `dense`).
    pub(crate) fn dense() -> Self {
        SparseBits {
            dense: true,
            ..SparseBits::default()
        }
    }

    pub(crate) fn insert(&mut self, k: u32) {
        self.insert_new(k);
    }

    /// Inserts `k`; whether it was not a member before (one lookup where
    /// `contains` then `insert` took two).
    pub(crate) fn insert_new(&mut self, k: u32) -> bool {
        self.miss.set((0, 0));
        let c = (k / CHUNK_BITS) as usize;
        if c >= self.index.len() {
            self.index.resize(c + 1, 0);
        }
        if self.index[c] == 0 {
            self.chunks.push(if self.dense {
                Chunk::Bits(Box::new([0; CHUNK_WORDS]))
            } else {
                Chunk::Runs(Vec::new())
            });
            self.index[c] = self.chunks.len() as u32;
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
        let c = (k / CHUNK_BITS) as usize;
        let slot = match self.index.get(c) {
            Some(&s) if s != 0 => s as usize - 1,
            _ => return false,
        };
        let o = (k % CHUNK_BITS) as u16;
        let base = c as u32 * CHUNK_BITS;
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
            if self.index[c] == 0 && !self.dense {
                self.chunks.push(chunk);
                self.index[c] = self.chunks.len() as u32;
                continue;
            }
            let base = c as u32 * CHUNK_BITS;
            let mut o = chunk.next(0);
            while let Some(m) = o {
                self.insert(base + u32::from(m));
                o = m
                    .checked_add(1)
                    .filter(|&n| u32::from(n) < CHUNK_BITS)
                    .and_then(|n| chunk.next(n));
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
            let slot = match self.index.get(c as usize) {
                Some(&s) if s != 0 => s as usize - 1,
                _ => continue,
            };
            let base = c * cb;
            // Offsets `[lo, hi)` in the chunk.
            let lo = from.max(base) - base;
            let hi = to.min(base + cb) - base;
            match &self.chunks[slot] {
                Chunk::Runs(runs) => {
                    for &(a, b) in &runs[Chunk::run_at(runs, lo as u16)..] {
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

/// The in-use inodes pass 1 lists for passes 2–5.
#[derive(Debug)]
pub(crate) struct Inodes {
    used: SparseBits,
    dir: SparseBits,
    regular: SparseBits,
    /// The other kinds (symlinks, devices, fifos, sockets), sorted.
    other: Vec<(u32, FileKind)>,
    /// EA inodes, sorted.
    ea: Vec<u32>,
    /// `i_links_count` is 1.
    link1: SparseBits,
    /// Any other `i_links_count` (directories, hard links, 0), sorted, with
    /// the names counted for it.
    links: Vec<Multi>,
    /// Inodes outside `links` named at least once.
    named: SparseBits,
    /// Inodes outside `links` named more than once: how often (a
    /// damaged tree's exception).
    named_more: BTreeMap<u32, u32>,
}

impl Default for Inodes {
    fn default() -> Self {
        Inodes {
            used: SparseBits::default(),
            dir: SparseBits::default(),
            regular: SparseBits::default(),
            other: Vec::new(),
            ea: Vec::new(),
            link1: SparseBits::default(),
            links: Vec::new(),
            // Filled in pass 2's order, not the inodes'.
            named: SparseBits::dense(),
            named_more: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Multi {
    ino: u32,
    links: u16,
    counted: u32,
}

/// Inserts into a list kept sorted by `key`; pass 1 adds in inode order,
/// so this is nearly always a push.
fn insert_sorted<T>(v: &mut Vec<T>, item: T, key: impl Fn(&T) -> u32) {
    let k = key(&item);
    match v.last() {
        Some(last) if key(last) >= k => {
            let at = v.partition_point(|x| key(x) < k);
            v.insert(at, item);
        }
        _ => v.push(item),
    }
}

impl Inodes {
    /// Records an in-use inode (counted 0). An inode already recorded is
    /// left as it is.
    pub(crate) fn insert(&mut self, ino: u32, links: u16, kind: FileKind, ea_inode: bool) {
        if !self.used.insert_new(ino) {
            return;
        }
        match kind {
            FileKind::Directory => self.dir.insert(ino),
            FileKind::Regular => self.regular.insert(ino),
            k => insert_sorted(&mut self.other, (ino, k), |e| e.0),
        }
        if ea_inode {
            insert_sorted(&mut self.ea, ino, |&e| e);
        }
        if links == 1 {
            self.link1.insert(ino);
        } else {
            let m = Multi {
                ino,
                links,
                counted: 0,
            };
            insert_sorted(&mut self.links, m, |e| e.ino);
        }
    }

    pub(crate) fn contains(&self, ino: u32) -> bool {
        self.used.contains(ino)
    }

    /// Adds the inodes `other` recorded (none of them recorded here: pass
    /// 1 checks each inode once), as if each had been inserted here.
    pub(crate) fn append(&mut self, other: Inodes) {
        let Inodes {
            used,
            dir,
            regular,
            other: kinds,
            ea,
            link1,
            links,
            named,
            named_more,
        } = other;
        debug_assert!(named.next(0).is_none() && named_more.is_empty());
        self.used.append(used);
        self.dir.append(dir);
        self.regular.append(regular);
        self.link1.append(link1);
        for k in kinds {
            insert_sorted(&mut self.other, k, |e| e.0);
        }
        for e in ea {
            insert_sorted(&mut self.ea, e, |&e| e);
        }
        for m in links {
            insert_sorted(&mut self.links, m, |e| e.ino);
        }
    }

    /// The smallest in-use inode at or after `from`.
    pub(crate) fn next(&self, from: u32) -> Option<u32> {
        self.used.next(from)
    }

    /// The in-use inodes and the directories among them, for threads to
    /// share (see [`BitsView`]).
    pub(crate) fn views(&self) -> (BitsView<'_>, BitsView<'_>) {
        (self.used.view(), self.dir.view())
    }

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

    pub(crate) fn is_dir(&self, ino: u32) -> bool {
        self.dir.contains(ino)
    }

    fn multi(&self, ino: u32) -> Option<usize> {
        self.links.binary_search_by_key(&ino, |m| m.ino).ok()
    }

    /// Counts one more name for `ino` (an in-use inode; others are not
    /// counted).
    pub(crate) fn add_name(&mut self, ino: u32) {
        if !self.used.contains(ino) {
            return;
        }
        if !self.link1.contains(ino) {
            if let Some(i) = self.multi(ino) {
                let m = &mut self.links[i];
                m.counted = m.counted.saturating_add(1);
                return;
            }
        }
        if !self.named.insert_new(ino) {
            let n = self.named_more.entry(ino).or_insert(1);
            *n = n.saturating_add(1);
        }
    }

    /// The record of an in-use inode.
    pub(crate) fn get(&self, ino: u32) -> Option<InodeRec> {
        let kind = self.kind(ino)?;
        let (links, counted) = if self.link1.contains(ino) {
            (1, self.named_count(ino))
        } else {
            match self.multi(ino) {
                Some(i) => (self.links[i].links, self.links[i].counted),
                None => (1, self.named_count(ino)),
            }
        };
        Some(InodeRec {
            ino,
            links,
            kind,
            counted,
            ea_inode: self.ea.binary_search(&ino).is_ok(),
        })
    }

    fn named_count(&self, ino: u32) -> u32 {
        match self.named_more.get(&ino) {
            Some(&n) => n,
            None => u32::from(self.named.contains(ino)),
        }
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
    }

    #[test]
    fn views_give_the_runs_of_a_range() {
        // Runs and bitmap chunks alike: the members in any range, as runs.
        for dense in [false, true] {
            let mut b = if dense {
                SparseBits::dense()
            } else {
                SparseBits::default()
            };
            let mut set = std::collections::BTreeSet::new();
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
    fn dense_sparse_bits_and_the_hit_cache() {
        let mut d = SparseBits::dense();
        let mut b = SparseBits::default();
        for k in [5u32, 9, 6, 7, 8, 100_000, u32::MAX] {
            assert!(d.insert_new(k) && b.insert_new(k));
        }
        assert!(d.chunks.iter().all(|c| matches!(c, Chunk::Bits(_))));
        for k in (0..200u32).chain([99_999, 100_000, 100_001, u32::MAX - 1, u32::MAX]) {
            let want = [5, 6, 7, 8, 9, 100_000, u32::MAX].contains(&k);
            assert_eq!(d.contains(k), want, "{k}");
            assert_eq!(b.contains(k), want, "{k}");
            // Again, now that the last hit or miss is cached.
            assert_eq!(b.contains(k), want, "{k}");
        }
        // A cached miss does not outlive an insert into its gap.
        assert!(!b.contains(50));
        b.insert(50);
        assert!(b.contains(50) && !b.contains(51));
        assert_eq!(d.next(10), Some(100_000));
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
    }
}
