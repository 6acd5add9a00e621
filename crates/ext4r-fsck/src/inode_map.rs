//! Pass 1's record of the in-use inodes, kept as e2fsck keeps it: bitmaps
//! for what nearly every inode has (in use, directory, regular file, one
//! link, named once) and short sorted lists for the exceptions (other
//! kinds, link counts other than 1, names counted twice or more). That is
//! well under a byte per in-use inode where a record per inode took 12 (16
//! more while pass 5 copied them), with e2fsck's icount idea for the link
//! counts: a bitmap for the common count of 1, a sorted array for the rest.
//!
//! The bitmaps are allocated a 4 KiB chunk at a time where a bit is set, so
//! the table stays sized by what is in use, not by the volume (an empty
//! 15 TiB filesystem has a billion inode numbers and uses a dozen).

use std::collections::BTreeMap;

use ext4r::fs::FileKind;

/// Bits per chunk of a [`SparseBits`]: 4 KiB of words.
const CHUNK_BITS: u32 = 1 << 15;
const CHUNK_WORDS: usize = (CHUNK_BITS / 64) as usize;

/// A set of `u32`s as a bitmap allocated in chunks where a member is.
#[derive(Debug, Clone, Default)]
pub(crate) struct SparseBits {
    /// One more than each chunk's slot in `words` (0: no member in it).
    index: Vec<u32>,
    /// The chunks' words, [`CHUNK_WORDS`] per chunk, in the order the
    /// chunks were first used.
    words: Vec<u64>,
}

impl SparseBits {
    pub(crate) fn insert(&mut self, k: u32) {
        self.insert_new(k);
    }

    /// Inserts `k`; whether it was not a member before (one lookup where
    /// `contains` then `insert` took two).
    pub(crate) fn insert_new(&mut self, k: u32) -> bool {
        let chunk = (k / CHUNK_BITS) as usize;
        if chunk >= self.index.len() {
            self.index.resize(chunk + 1, 0);
        }
        if self.index[chunk] == 0 {
            self.words.resize(self.words.len() + CHUNK_WORDS, 0);
            self.index[chunk] = (self.words.len() / CHUNK_WORDS) as u32;
        }
        let w = self.word_at(chunk) + ((k % CHUNK_BITS) / 64) as usize;
        let bit = 1 << (k % 64);
        let new = self.words[w] & bit == 0;
        self.words[w] |= bit;
        new
    }

    pub(crate) fn contains(&self, k: u32) -> bool {
        let chunk = (k / CHUNK_BITS) as usize;
        match self.index.get(chunk) {
            Some(&s) if s != 0 => {
                let w = (s as usize - 1) * CHUNK_WORDS + ((k % CHUNK_BITS) / 64) as usize;
                self.words[w] & (1 << (k % 64)) != 0
            }
            _ => false,
        }
    }

    /// The smallest member at or after `from`.
    pub(crate) fn next(&self, from: u32) -> Option<u32> {
        let mut chunk = (from / CHUNK_BITS) as usize;
        let mut bit = from % CHUNK_BITS;
        while chunk < self.index.len() {
            if self.index[chunk] != 0 {
                let base = self.word_at(chunk);
                let words = &self.words[base..base + CHUNK_WORDS];
                let mut wi = (bit / 64) as usize;
                // The first word without the bits below `from`.
                let mut w = words[wi] & (!0u64 << (bit % 64));
                loop {
                    if w != 0 {
                        let k = chunk as u64 * u64::from(CHUNK_BITS)
                            + wi as u64 * 64
                            + u64::from(w.trailing_zeros());
                        return u32::try_from(k).ok();
                    }
                    wi += 1;
                    if wi == CHUNK_WORDS {
                        break;
                    }
                    w = words[wi];
                }
            }
            chunk += 1;
            bit = 0;
        }
        None
    }

    fn word_at(&self, chunk: usize) -> usize {
        (self.index[chunk] as usize - 1) * CHUNK_WORDS
    }

    /// Bytes held (for the memory figures in tests and notes).
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        self.index.capacity() * 4 + self.words.capacity() * 8
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
#[derive(Debug, Default)]
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

    /// The smallest in-use inode at or after `from`.
    pub(crate) fn next(&self, from: u32) -> Option<u32> {
        self.used.next(from)
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
