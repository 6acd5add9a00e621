//! The blocks pass 0 and pass 1 find claimed, kept in two forms:
//!
//! - the union of the claimed runs, merged as they come (e2fsck's
//!   `block_found_map`, which is an extent tree too): a few hundred runs
//!   for a filesystem of two million files, and what the usage maps of
//!   the repairs and pass 5's bitmaps need;
//! - who claimed what, as a log of varint deltas (a few bytes a claim
//!   where a 24-byte [`Claim`] each took 6 MiB for 200,000 files; one
//!   byte for a small file's block just after the last claim's, which
//!   made the log of a 2M-file filesystem 210 KiB instead of 625), read
//!   back only when pass 5 must name owners: when claims overlap, or
//!   the bad block list has claims to sort out.

use std::collections::BTreeMap;

use ext4r_format::num;

/// Who claims a run of blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Claim {
    pub start: u64,
    pub len: u64,
    /// The inode, or 0 for filesystem metadata.
    pub owner: u32,
}

/// Runs held back before they are merged into the union (16 bytes each).
const PENDING: usize = 4096;

#[derive(Debug, Default, Clone)]
pub(crate) struct Claims {
    /// Disjoint `start -> end` runs, adjacent ones merged.
    union: BTreeMap<u64, u64>,
    /// Runs not merged into `union` yet, in the order claimed (one that
    /// continues the last extends it): merged [`PENDING`] at a time,
    /// sorted, where one at a time cost a search and often a remove and
    /// insert in the map per claim (8% of pass 1's thread for 2M files).
    pending: Vec<(u64, u64)>,
    /// Some claim overlaps another, is empty, or ends past `u64::MAX`:
    /// the union alone does not say what pass 5 reports.
    irregular: bool,
    /// The claims before `last`, as (start, len, owner) varint deltas.
    log: Vec<u8>,
    /// The last claim, still growing while the next ones continue it.
    last: Option<Claim>,
    /// Where the last logged claim started and who owned it (the deltas'
    /// base).
    base: (u64, u32),
    len: usize,
}

impl Claims {
    /// Adds a claim, merged with the previous one when it continues it
    /// for the same owner.
    pub(crate) fn push(&mut self, start: u64, len: u64, owner: u32) {
        match start.checked_add(len) {
            Some(end) if len > 0 => self.hold(start, end),
            _ => self.irregular = true,
        }
        if let Some(last) = &mut self.last {
            if last.owner == owner && last.start.checked_add(last.len) == Some(start) {
                last.len += len;
                return;
            }
        }
        if let Some(prev) = self.last.replace(Claim { start, len, owner }) {
            self.log_claim(prev);
        }
        self.len += 1;
    }

    fn log_claim(&mut self, cl: Claim) {
        let (bs, bo) = self.base;
        let ds = cl.start.wrapping_sub(bs);
        let dow = cl.owner.wrapping_sub(bo);
        if let (1, Ok(d @ 1..=8), Ok(o @ 0..16)) = (cl.len, u8::try_from(ds), u8::try_from(dow)) {
            // The common claim of many small files: one block just after
            // the last claim's start, for an inode a little further on.
            self.log.push(0x80 | (d - 1) << 4 | o);
        } else {
            self.log.push(0);
            put(&mut self.log, zigzag(ds as i64));
            put(&mut self.log, cl.len);
            put(&mut self.log, zigzag(i64::from(dow as i32)));
        }
        self.base = (cl.start, cl.owner);
    }

    fn add_run(&mut self, s: u64, e: u64) {
        let (mut from, mut to) = (s, e);
        if let Some((&ps, &pe)) = self.union.range(..=s).next_back() {
            if pe > s {
                self.irregular = true;
            }
            if pe >= s {
                from = ps;
                to = to.max(pe);
                self.union.remove(&ps);
            }
        }
        while let Some((&ns, &ne)) = self.union.range(s..).next() {
            if ns > to {
                break;
            }
            if ns < e {
                self.irregular = true;
            }
            to = to.max(ne);
            self.union.remove(&ns);
        }
        self.union.insert(from, to);
    }

    /// Holds a run back, extending the last one held when it continues it.
    fn hold(&mut self, s: u64, e: u64) {
        if let Some(last) = self.pending.last_mut() {
            if last.1 == s {
                last.1 = e;
                return;
            }
        }
        if self.pending.len() == PENDING {
            self.settle();
        }
        self.pending.push((s, e));
    }

    /// Merges the held runs into the union: sorted, joined where they
    /// touch or overlap (an overlap makes the claims irregular, as
    /// [`Claims::add_run`] finds one with the union).
    fn settle(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable();
        let mut cur: Option<(u64, u64)> = None;
        for &(s, e) in &pending {
            match &mut cur {
                Some(c) if s <= c.1 => {
                    if s < c.1 {
                        self.irregular = true;
                    }
                    c.1 = c.1.max(e);
                }
                _ => {
                    if let Some((cs, ce)) = cur.replace((s, e)) {
                        self.add_run(cs, ce);
                    }
                }
            }
        }
        if let Some((cs, ce)) = cur {
            self.add_run(cs, ce);
        }
        // The buffer is kept for the next runs.
        pending.clear();
        self.pending = pending;
    }

    /// These claims with every held run merged (a copy, for the rare
    /// readers of the union before pass 1 is done).
    fn settled(&self) -> std::borrow::Cow<'_, Self> {
        if self.pending.is_empty() {
            std::borrow::Cow::Borrowed(self)
        } else {
            let mut c = Claims {
                union: self.union.clone(),
                pending: self.pending.clone(),
                irregular: self.irregular,
                ..Claims::default()
            };
            c.settle();
            std::borrow::Cow::Owned(c)
        }
    }

    /// The claimed blocks as sorted, disjoint, non-adjacent `[start, end)`
    /// runs.
    pub(crate) fn runs(&self) -> impl Iterator<Item = (u64, u64)> {
        let runs: Vec<(u64, u64)> = match self.settled() {
            std::borrow::Cow::Borrowed(c) => c.union.iter().map(|(&s, &e)| (s, e)).collect(),
            std::borrow::Cow::Owned(c) => c.union.into_iter().collect(),
        };
        runs.into_iter()
    }

    /// Whether every claim was non-empty and none overlapped another: the
    /// union then says all pass 5 needs.
    pub(crate) fn regular(&self) -> bool {
        !self.settled().irregular
    }

    /// Adds `other`'s claims after these, as if each had been made here.
    /// Replaying them finds every overlap with these claims; an empty
    /// claim `other` merged away is still known by its flag.
    pub(crate) fn absorb(&mut self, other: Claims) {
        self.irregular |= other.irregular;
        for cl in other.into_vec() {
            self.push(cl.start, cl.len, cl.owner);
        }
    }

    /// Every claim, in the order made (adjacent ones of one owner merged).
    pub(crate) fn into_vec(self) -> Vec<Claim> {
        let mut out = Vec::with_capacity(self.len);
        let mut at = 0usize;
        let (mut start, mut owner) = (0u64, 0u32);
        while let Some(&tag) = self.log.get(at) {
            at += 1;
            let (ds, len, dow) = if tag & 0x80 != 0 {
                (u64::from((tag >> 4) & 7) + 1, 1, u32::from(tag & 15))
            } else {
                let ds = unzigzag(get(&self.log, &mut at)) as u64;
                let len = get(&self.log, &mut at);
                // The owner's delta wraps in u32 (logged as an i32).
                (ds, len, num::lo32(unzigzag(get(&self.log, &mut at)) as u64))
            };
            start = start.wrapping_add(ds);
            owner = owner.wrapping_add(dow);
            out.push(Claim { start, len, owner });
        }
        out.extend(self.last);
        out
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push((v & 0x7f) as u8);
}

/// Reads a varint [`put`] wrote (the log is ours: never cut short).
fn get(log: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&b) = log.get(*at) {
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cl(start: u64, len: u64, owner: u32) -> Claim {
        Claim { start, len, owner }
    }

    #[test]
    fn log_gives_back_the_claims() {
        let mut c = Claims::default();
        let input = [
            (100, 5, 12),
            (105, 3, 12), // continues the last: merged
            (50, 1, 11),
            (u64::MAX - 10, 10, u32::MAX),
            (0, 1, 0),
            (200, 1 << 40, 7),
        ];
        for &(s, l, o) in &input {
            c.push(s, l, o);
        }
        assert!(c.regular());
        assert_eq!(
            c.into_vec(),
            [
                cl(100, 8, 12),
                cl(50, 1, 11),
                cl(u64::MAX - 10, 10, u32::MAX),
                cl(0, 1, 0),
                cl(200, 1 << 40, 7)
            ]
        );
    }

    #[test]
    fn log_gives_back_one_byte_claims() {
        let mut c = Claims::default();
        let input = [
            (557_077, 1, 1_562_882),
            (557_078, 1, 1_562_892),
            (557_086, 1, 1_562_907), // the largest deltas of the short form
            (557_095, 1, 1_562_907), // start 9 on: the long form
            (557_096, 1, 1_562_923), // owner 16 on: the long form
            (557_097, 2, 1_562_924), // two blocks: the long form
            (557_098, 1, 1_562_924), // overlaps, same owner
            (557_090, 1, 1_562_920), // backwards
        ];
        // Bytes each claim took in the log (a claim is logged when the
        // next one is pushed): the first is the long form.
        let mut took = Vec::new();
        for &(s, l, o) in &input {
            let before = c.log.len();
            c.push(s, l, o);
            took.push(c.log.len() - before);
        }
        assert_eq!(took[2..6], [1, 1, 4, 4]);
        let want: Vec<Claim> = input.iter().map(|&(s, l, o)| cl(s, l, o)).collect();
        assert_eq!(c.into_vec(), want);
    }

    #[test]
    fn held_runs_merge_as_one_at_a_time() {
        // Out of order, touching, and more than a buffer's worth: the
        // union and the verdict as if each run went into the map alone.
        let mut c = Claims::default();
        let n = PENDING as u64 * 3;
        for i in 0..n {
            // Every other run of two blocks, in a scrambled order.
            let k = (i * 7919) % n;
            c.push(k * 4, 2, k as u32);
        }
        assert!(c.regular());
        assert_eq!(c.runs().count() as u64, n);
        for i in 0..n {
            c.push(i * 4 + 2, 2, 0);
        }
        assert!(c.regular());
        assert_eq!(c.runs().collect::<Vec<_>>(), [(0, n * 4)]);
        // An overlap between two held runs is seen.
        let mut c = Claims::default();
        c.push(10, 5, 1);
        c.push(100, 5, 2);
        c.push(12, 1, 3);
        assert!(!c.regular());
        assert_eq!(c.runs().collect::<Vec<_>>(), [(10, 15), (100, 105)]);
    }

    #[test]
    fn union_merges_and_sees_overlaps() {
        let mut c = Claims::default();
        c.push(10, 5, 1);
        c.push(20, 5, 2);
        c.push(15, 5, 3); // fills the gap exactly
        assert!(c.regular());
        assert_eq!(c.runs().collect::<Vec<_>>(), [(10, 25)]);
        c.push(30, 2, 4);
        c.push(5, 2, 5);
        assert_eq!(c.runs().collect::<Vec<_>>(), [(5, 7), (10, 25), (30, 32)]);
        assert!(c.regular());
        c.push(24, 7, 6); // overlaps two runs
        assert!(!c.regular());
        assert_eq!(c.runs().collect::<Vec<_>>(), [(5, 7), (10, 32)]);

        let mut c = Claims::default();
        c.push(10, 5, 1);
        c.push(12, 1, 2); // inside
        assert!(!c.regular());
        let mut c = Claims::default();
        c.push(10, 0, 1); // empty
        assert!(!c.regular());
    }
}
