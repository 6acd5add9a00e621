//! One group's bitmap (blocks or inodes), held as 64-bit words so that
//! searches and counts go a word at a time.

/// A bitmap of one block: bit `i` is byte `i / 8`, bit `i % 8`, as on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap {
    words: Vec<u64>,
    /// Bits that describe the group; those past it are padding.
    len: u32,
}

impl Bitmap {
    /// A bitmap of `len` meaningful bits stored in a block of `block_size`
    /// bytes, all clear.
    pub fn new(len: u32, block_size: u32) -> Self {
        let words = (block_size as usize / 8).max(len.div_ceil(64) as usize);
        Bitmap {
            words: vec![0; words],
            len,
        }
    }

    /// Reads a bitmap from its on-disk block; bits past `len` are ignored.
    pub fn from_bytes(bytes: &[u8], len: u32) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8).max(len.div_ceil(64) as usize)];
        for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
        let mut m = Bitmap { words, len };
        m.clear_padding();
        m
    }

    fn clear_padding(&mut self) {
        let len = self.len as usize;
        if let Some(w) = self.words.get_mut(len / 64) {
            if len % 64 != 0 {
                *w &= (1u64 << (len % 64)) - 1;
            } else {
                *w = 0;
            }
        }
        for w in self.words.iter_mut().skip(len / 64 + 1) {
            *w = 0;
        }
    }

    /// The on-disk block: `block_size` bytes, the bits past `len` set, as
    /// mke2fs and the kernel leave them.
    pub fn to_bytes(&self, block_size: u32) -> Vec<u8> {
        let mut out = vec![0u8; block_size as usize];
        for (chunk, w) in out.chunks_mut(8).zip(&self.words) {
            chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
        }
        for i in self.len as usize..out.len() * 8 {
            out[i / 8] |= 1 << (i % 8);
        }
        out
    }

    /// Meaningful bits.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the bitmap describes nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether bit `i` is set (bits past the end read as set: they are not
    /// there to be taken).
    pub fn get(&self, i: u32) -> bool {
        i >= self.len || self.words[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    /// Sets or clears bits `start..start + n` (clipped to the length).
    pub fn set_range(&mut self, start: u32, n: u32, value: bool) {
        let end = start.saturating_add(n).min(self.len);
        let mut i = start;
        while i < end {
            let w = (i / 64) as usize;
            let lo = i % 64;
            let hi = (end - (i - lo)).min(64);
            let mask = if hi - lo == 64 {
                !0
            } else {
                ((1u64 << (hi - lo)) - 1) << lo
            };
            if value {
                self.words[w] |= mask;
            } else {
                self.words[w] &= !mask;
            }
            i = i - lo + hi;
        }
    }

    /// Set bits among `start..start + n` (clipped).
    pub fn count_set(&self, start: u32, n: u32) -> u32 {
        let end = start.saturating_add(n).min(self.len);
        let mut i = start;
        let mut c = 0;
        while i < end {
            let lo = i % 64;
            let hi = (end - (i - lo)).min(64);
            let w = self.words[(i / 64) as usize] >> lo;
            let w = if hi - lo == 64 {
                w
            } else {
                w & ((1u64 << (hi - lo)) - 1)
            };
            c += w.count_ones();
            i = i - lo + hi;
        }
        c
    }

    /// The first clear bit at or after `from`.
    pub fn next_clear(&self, from: u32) -> Option<u32> {
        let mut i = from;
        while i < self.len {
            let w = self.words[(i / 64) as usize] >> (i % 64);
            let inv = !w & (!0u64 >> (i % 64));
            if inv != 0 {
                let at = i + inv.trailing_zeros();
                return (at < self.len).then_some(at);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    /// The first set bit at or after `from` (or `len` when none).
    pub fn next_set(&self, from: u32) -> u32 {
        let mut i = from;
        while i < self.len {
            let w = self.words[(i / 64) as usize] >> (i % 64);
            if w != 0 {
                return (i + w.trailing_zeros()).min(self.len);
            }
            i = (i / 64 + 1) * 64;
        }
        self.len
    }

    /// The last set bit in `start..end` (clipped).
    pub fn last_set(&self, start: u32, end: u32) -> Option<u32> {
        let end = end.min(self.len);
        let mut i = end;
        while i > start {
            // Bits [i - k, i) of the word holding bit i - 1.
            let w_idx = (i - 1) / 64;
            let base = w_idx * 64;
            let hi = i - base;
            let mut w = self.words[w_idx as usize];
            if hi < 64 {
                w &= (1u64 << hi) - 1;
            }
            if w != 0 {
                let at = base + 63 - w.leading_zeros();
                return (at >= start).then_some(at);
            }
            i = base;
        }
        None
    }

    /// Clear runs as (start, length), in order, starting at `from`.
    pub fn clear_runs(&self, from: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut at = from;
        std::iter::from_fn(move || {
            let s = self.next_clear(at)?;
            let e = self.next_set(s);
            at = e;
            Some((s, e - s))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn padding_is_set_on_disk_and_ignored_in_memory() {
        let mut m = Bitmap::new(100, 1024);
        m.set_range(3, 5, true);
        let bytes = m.to_bytes(1024);
        assert_eq!(bytes[0], 0b1111_1000);
        assert_eq!(bytes[12], 0xF0);
        assert!(bytes[13..].iter().all(|&b| b == 0xFF));
        let back = Bitmap::from_bytes(&bytes, 100);
        assert_eq!(back, m);
        assert!(m.get(100) && m.get(5000));
        assert_eq!(m.next_clear(95), Some(95));
        assert_eq!(m.next_clear(100), None);
    }

    proptest! {
        #[test]
        fn matches_a_bool_model(
            len in 1u32..700,
            ops in proptest::collection::vec((0u32..720, 0u32..200, any::<bool>()), 0..20),
            from in 0u32..720,
        ) {
            let mut m = Bitmap::new(len, 128);
            let mut model = vec![false; len as usize];
            for (s, n, v) in ops {
                m.set_range(s, n, v);
                for i in s..s.saturating_add(n).min(len) {
                    model[i as usize] = v;
                }
            }
            for i in 0..len {
                prop_assert_eq!(m.get(i), model[i as usize]);
            }
            let want_clear = (from..len).find(|&i| !model[i as usize]);
            prop_assert_eq!(m.next_clear(from), want_clear);
            let want_set = (from..len).find(|&i| model[i as usize]).unwrap_or(len);
            prop_assert_eq!(m.next_set(from.min(len)), want_set.max(from.min(len)));
            let n = 137;
            let want = (from..from.saturating_add(n).min(len)).filter(|&i| model[i as usize]).count();
            prop_assert_eq!(m.count_set(from, n) as usize, want);
            let want_last = (from.min(len)..len.min(from.saturating_add(90))).rev().find(|&i| model[i as usize]);
            prop_assert_eq!(m.last_set(from, from.saturating_add(90)), want_last);
            let runs: u32 = m.clear_runs(0).map(|(_, l)| l).sum();
            prop_assert_eq!(runs as usize, model.iter().filter(|&&b| !b).count());
            prop_assert_eq!(Bitmap::from_bytes(&m.to_bytes(128), len), m);
        }
    }
}
