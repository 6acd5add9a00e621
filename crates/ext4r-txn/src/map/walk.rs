//! The visitor walk of a block map or an extent tree: the one recursion
//! over an inode's pointers, for every caller that needs more than the
//! runs [`super::runs`] gives — fsck's pass 1 and pass 1D, tune's block
//! mover, defrag's list of mapping blocks.
//!
//! The walk knows the layout only: where each pointer sits, the logical
//! blocks it maps, how many levels of mapping lie below it, and (for an
//! extent tree) the logical range a node's parent gives it. It judges
//! nothing: every non-zero pointer, valid or not, is shown to the
//! [`Visitor`], which says per pointer whether to go on, to enter the
//! block it names, to rewrite it, or to stop. So a checker sees a bad
//! entry with its place and reports it as e2fsck does, a reader refuses
//! it, and a mover rewrites it.
//!
//! Mapping blocks are read by the visitor ([`Visitor::enter`]), which can
//! check them (header, depth, checksum) and hand back the bytes the walk
//! goes through — a checker repairs the header's depth in its copy, as
//! libext2fs reads a node at the depth its place implies. An extent tree
//! is walked by levels counted down from the root: a node `levels` above
//! the leaves holds index entries, at 0 extents, whatever its header says.
//! After a block's entries, [`Visitor::leave`] gets its bytes (with the
//! pointers the walk rewrote) and may move it.

use ext4r_format::blockmap::{self, NDIR_BLOCKS};
use ext4r_format::extent::{Extent, ExtentHeader, ExtentIdx, EXTENT_ENTRY_SIZE};
use ext4r_format::BlockNr;
use zerocopy::FromBytes;

/// Where a pointer is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The block holding it; None: the inode's `i_block`.
    pub block: Option<u64>,
    /// Its index there: the `i_block` word of a block map, the entry of
    /// an extent node or an indirect block.
    pub index: usize,
}

/// What a pointer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A block map's 32-bit word.
    Word,
    /// An extent tree leaf entry.
    Extent(Extent),
    /// An extent tree index entry.
    Index(ExtentIdx),
}

/// A non-zero pointer the walk met, with its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ptr {
    /// Where it is stored.
    pub slot: Slot,
    /// How many levels of mapping the node holding it is below the
    /// inode (0: in `i_block`).
    pub level: u16,
    /// The depth of the block it names, in its format's own count: 0
    /// for data; for a block map the indirection (1: an indirect block of
    /// data pointers); for an extent index entry the `eh_depth` the node
    /// must have (0: a leaf). [`Ptr::is_node`] tells data from nodes.
    pub levels: u16,
    /// First logical block it maps.
    pub logical: u64,
    /// The block it names (an extent's first).
    pub physical: u64,
    /// Blocks it maps directly: an extent's length, else 1.
    pub len: u64,
    /// An unwritten extent.
    pub unwritten: bool,
    /// The raw entry.
    pub entry: Entry,
    /// The logical range `[lo, hi)` the node holding it covers (extent
    /// trees: what the parent's index entry gives it).
    pub lo: u64,
    /// See `lo`.
    pub hi: u64,
    /// Where its own range ends: the next entry's first logical block
    /// (capped at `hi`) for an index entry, `hi` after the last; the end
    /// of its span for a block map pointer; `logical + len` for an extent.
    pub next: u64,
}

impl Ptr {
    /// Whether it names a mapping block (indirect block, extent tree
    /// node), not data.
    pub fn is_node(&self) -> bool {
        match self.entry {
            Entry::Word => self.levels > 0,
            Entry::Extent(_) => false,
            Entry::Index(_) => true,
        }
    }
}

/// The visitor's answer for a pointer or a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Go on with the next pointer (a block pointer: do not enter it).
    Next,
    /// Enter the block this pointer names ([`Visitor::enter`] reads it).
    Descend,
    /// Store this block number in the pointer instead, and go on. A
    /// block-map word holds 32 bits: a block at or past 2^32 is not
    /// stored and ends the walk ([`Walked::stopped`]), as ext4 keeps
    /// block-mapped files below 2^32.
    Replace(u64),
    /// End the whole walk.
    Stop,
}

/// What a walk tells its caller.
pub trait Visitor {
    /// The error that ends a walk.
    type Error;

    /// A non-zero pointer (zero is a hole in a block map; an extent
    /// entry naming block 0 is shown). [`Step::Descend`] on a data
    /// pointer is [`Step::Next`].
    ///
    /// # Errors
    /// The visitor's, ending the walk.
    fn pointer(&mut self, p: &Ptr) -> Result<Step, Self::Error>;

    /// Reads the block `p` names, to walk its entries; None leaves it
    /// (the visitor has said why, or does not care). For an extent tree
    /// the bytes must hold a header whose `eh_entries` is what to walk
    /// (entries past the buffer are not read).
    ///
    /// # Errors
    /// The visitor's, ending the walk.
    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>, Self::Error>;

    /// After the entries of the block `p` names: its bytes, with the
    /// pointers the walk replaced, and whether any was. [`Step::Replace`]
    /// moves the block itself (the pointer to it is rewritten).
    ///
    /// # Errors
    /// The visitor's, ending the walk.
    fn leave(&mut self, p: &Ptr, buf: Vec<u8>, changed: bool) -> Result<Step, Self::Error> {
        let _ = (p, buf, changed);
        Ok(Step::Next)
    }

    /// Where the logical range of the node that index entry `p` names
    /// ends (exclusive): `p.next` unless the visitor computes ranges as
    /// some other reader does (e2fsck's 32-bit lengths).
    fn node_end(&self, p: &Ptr) -> u64 {
        p.next
    }

    /// Where the logical range of the node that index entry `p` names
    /// starts, given the node's bytes ([`Visitor::enter`]'s): `p.logical`
    /// unless the visitor holds it to the node's own first entry (e2fsck,
    /// where an index's start is damaged).
    fn node_start(&self, p: &Ptr, child: &[u8]) -> u64 {
        let _ = child;
        p.logical
    }
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Walked {
    /// A pointer in the root (`i_block`) was replaced.
    pub root_changed: bool,
    /// The visitor stopped the walk.
    pub stopped: bool,
}

/// Walks the ext2/3 block map in `i_block` (15 little-endian words: 12
/// direct, then single, double and triple indirect) of a filesystem with
/// `block_size`-byte blocks, in logical order, each indirect block before
/// what it points to.
///
/// # Errors
/// The visitor's.
pub fn block_map<V: Visitor + ?Sized>(
    i_block: &mut [u8],
    block_size: u32,
    v: &mut V,
) -> Result<Walked, V::Error> {
    let apb = u64::from(block_size / 4);
    let mut w = MapWalk {
        apb,
        changed: false,
    };
    let mut base = NDIR_BLOCKS as u64;
    let mut tops = [(0u64, 0u16); 15];
    for (i, t) in tops.iter_mut().enumerate().take(NDIR_BLOCKS) {
        *t = (i as u64, 0);
    }
    for (slot, level) in [(12usize, 1u16), (13, 2), (14, 3)] {
        tops[slot] = (base, level);
        base = base.saturating_add(apb.saturating_pow(u32::from(level)));
    }
    let n = i_block.len().min(4 * tops.len());
    let stopped = w.words(&mut i_block[..n], None, 0, &|i| tops[i], v)?;
    Ok(Walked {
        root_changed: w.changed,
        stopped,
    })
}

struct MapWalk {
    apb: u64,
    /// A word of the node being walked was replaced.
    changed: bool,
}

impl MapWalk {
    /// The words of `buf` (the root, or an indirect block at `block`),
    /// `level` below the inode; `place(i)` is word `i`'s (first logical
    /// block, levels below). Returns true when stopped.
    fn words<V: Visitor + ?Sized>(
        &mut self,
        buf: &mut [u8],
        block: Option<u64>,
        level: u16,
        place: &dyn Fn(usize) -> (u64, u16),
        v: &mut V,
    ) -> Result<bool, V::Error> {
        let n = buf.len() / 4;
        for i in 0..n {
            let b = blockmap::word(buf, i).unwrap_or(0);
            if b == 0 {
                continue;
            }
            let (logical, levels) = place(i);
            let span = self.apb.saturating_pow(u32::from(levels));
            let p = Ptr {
                slot: Slot { block, index: i },
                level,
                levels,
                logical,
                physical: u64::from(b),
                len: 1,
                unwritten: false,
                entry: Entry::Word,
                lo: logical,
                hi: logical.saturating_add(span),
                next: logical.saturating_add(span),
            };
            let step = match v.pointer(&p)? {
                Step::Descend if levels > 0 => match self.descend(&p, v)? {
                    Some(s) => s,
                    None => return Ok(true),
                },
                s => s,
            };
            match step {
                Step::Stop => return Ok(true),
                Step::Replace(new) => {
                    // A word holds 32 bits: a block past them is not stored
                    // (wrapping would name another block); the walk stops.
                    let Ok(new) = u32::try_from(new) else {
                        return Ok(true);
                    };
                    blockmap::set_word(buf, i, new);
                    self.changed = true;
                }
                Step::Next | Step::Descend => {}
            }
        }
        Ok(false)
    }

    /// Enters indirect block `p`; its [`Visitor::leave`] step, or None
    /// when the walk stopped below it.
    fn descend<V: Visitor + ?Sized>(
        &mut self,
        p: &Ptr,
        v: &mut V,
    ) -> Result<Option<Step>, V::Error> {
        let Some(mut buf) = v.enter(p)? else {
            return Ok(Some(Step::Next));
        };
        let outer = std::mem::replace(&mut self.changed, false);
        let span = self.apb.saturating_pow(u32::from(p.levels) - 1);
        let (base, below) = (p.logical, p.levels - 1);
        let place = move |i: usize| (base.saturating_add(i as u64 * span), below);
        let stopped = self.words(&mut buf, Some(p.physical), p.level + 1, &place, v)?;
        let changed = std::mem::replace(&mut self.changed, outer);
        if stopped {
            return Ok(None);
        }
        v.leave(p, buf, changed).map(Some)
    }
}

/// Walks the extent tree whose root is `root` (`i_block`, its header
/// already judged by the caller), `levels` above the leaves, covering
/// logical `[0, hi)`: in logical order, each index entry's node before
/// the next entry.
///
/// # Errors
/// The visitor's.
pub fn extent_tree<V: Visitor + ?Sized>(
    root: &mut [u8],
    levels: u16,
    hi: u64,
    v: &mut V,
) -> Result<Walked, V::Error> {
    let mut changed = false;
    let stopped = node(root, None, 0, levels, 0, hi, &mut changed, v)?;
    Ok(Walked {
        root_changed: changed,
        stopped,
    })
}

/// The entries of one extent node `buf` (at `block`; None: the root),
/// `level` below the root and `levels` above the leaves, covering
/// `[lo, hi)`. Returns true when stopped; sets `changed` when an entry
/// was replaced.
#[allow(clippy::too_many_arguments)]
fn node<V: Visitor + ?Sized>(
    buf: &mut [u8],
    block: Option<u64>,
    level: u16,
    levels: u16,
    lo: u64,
    hi: u64,
    changed: &mut bool,
    v: &mut V,
) -> Result<bool, V::Error> {
    let stored =
        ExtentHeader::read_from_prefix(buf).map_or(0, |(h, _)| usize::from(h.eh_entries.get()));
    let fit = buf.len().saturating_sub(EXTENT_ENTRY_SIZE) / EXTENT_ENTRY_SIZE;
    let n = stored.min(fit);
    let at = |i: usize| EXTENT_ENTRY_SIZE * (i + 1);
    for i in 0..n {
        let raw = &buf[at(i)..at(i) + EXTENT_ENTRY_SIZE];
        let slot = Slot { block, index: i };
        let p = if levels == 0 {
            let Ok(e) = Extent::read_from_bytes(raw) else {
                continue;
            };
            let logical = u64::from(e.ee_block.get());
            let len = u64::from(e.len());
            Ptr {
                slot,
                level,
                levels: 0,
                logical,
                physical: e.start().0,
                len,
                unwritten: e.is_unwritten(),
                entry: Entry::Extent(e),
                lo,
                hi,
                next: logical + len,
            }
        } else {
            let Ok(ix) = ExtentIdx::read_from_bytes(raw) else {
                continue;
            };
            // The next index's first logical block ends this subtree.
            let next = match buf.get(at(i + 1)..).map(ExtentIdx::read_from_prefix) {
                Some(Ok((x, _))) if i + 1 < n => u64::from(x.ei_block.get()).min(hi),
                _ => hi,
            };
            Ptr {
                slot,
                level,
                levels: levels - 1,
                logical: u64::from(ix.ei_block.get()),
                physical: ix.leaf().0,
                len: 1,
                unwritten: false,
                entry: Entry::Index(ix),
                lo,
                hi,
                next,
            }
        };
        let mut step = v.pointer(&p)?;
        if step == Step::Descend && levels > 0 {
            step = match v.enter(&p)? {
                None => Step::Next,
                Some(mut child) => {
                    let mut below = false;
                    let end = v.node_end(&p);
                    let start = v.node_start(&p, &child);
                    let child_at = Some(p.physical);
                    if node(
                        &mut child,
                        child_at,
                        level + 1,
                        levels - 1,
                        start,
                        end,
                        &mut below,
                        v,
                    )? {
                        return Ok(true);
                    }
                    v.leave(&p, child, below)?
                }
            };
        }
        match step {
            Step::Stop => return Ok(true),
            Step::Replace(new) => {
                let raw = &mut buf[at(i)..at(i) + EXTENT_ENTRY_SIZE];
                match p.entry {
                    Entry::Extent(mut e) => {
                        e.set_start(BlockNr(new));
                        raw.copy_from_slice(zerocopy::IntoBytes::as_bytes(&e));
                    }
                    Entry::Index(mut ix) => {
                        ix.set_leaf(BlockNr(new));
                        raw.copy_from_slice(zerocopy::IntoBytes::as_bytes(&ix));
                    }
                    Entry::Word => {}
                }
                *changed = true;
            }
            Step::Next | Step::Descend => {}
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r_format::extent::{write_index, write_leaf};
    use std::collections::HashMap;

    /// Records the walk; blocks from a map; moves what `moves` says.
    #[derive(Default)]
    struct Log {
        blocks: HashMap<u64, Vec<u8>>,
        seen: Vec<(Option<u64>, usize, u64, u64, u16)>,
        left: Vec<(u64, bool)>,
        moves: HashMap<u64, u64>,
        stop_at: Option<u64>,
    }

    impl Visitor for Log {
        type Error = ();
        fn pointer(&mut self, p: &Ptr) -> Result<Step, ()> {
            self.seen
                .push((p.slot.block, p.slot.index, p.logical, p.physical, p.levels));
            if self.stop_at == Some(p.physical) {
                return Ok(Step::Stop);
            }
            if p.is_node() {
                return Ok(Step::Descend);
            }
            Ok(self
                .moves
                .get(&p.physical)
                .map_or(Step::Next, |&n| Step::Replace(n)))
        }
        fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>, ()> {
            Ok(self.blocks.get(&p.physical).cloned())
        }
        fn leave(&mut self, p: &Ptr, buf: Vec<u8>, changed: bool) -> Result<Step, ()> {
            self.left.push((p.physical, changed));
            self.blocks.insert(p.physical, buf);
            Ok(self
                .moves
                .get(&p.physical)
                .map_or(Step::Next, |&n| Step::Replace(n)))
        }
    }

    fn words(ws: &[(usize, u32)], len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        for &(i, w) in ws {
            b[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    #[test]
    fn block_map_is_walked_in_logical_order_with_places() {
        // 1 KiB blocks: 256 pointers per block.
        let mut root = words(&[(0, 100), (11, 111), (12, 200), (13, 300)], 60);
        let mut v = Log::default();
        v.blocks.insert(200, words(&[(0, 201), (255, 202)], 1024));
        v.blocks.insert(300, words(&[(1, 310)], 1024));
        v.blocks.insert(310, words(&[(2, 311)], 1024));
        v.moves.insert(202, 900);
        v.moves.insert(300, 901);
        let w = block_map(&mut root, 1024, &mut v).unwrap();
        assert_eq!(
            v.seen,
            vec![
                (None, 0, 0, 100, 0),
                (None, 11, 11, 111, 0),
                (None, 12, 12, 200, 1),
                (Some(200), 0, 12, 201, 0),
                (Some(200), 255, 12 + 255, 202, 0),
                (None, 13, 12 + 256, 300, 2),
                (Some(300), 1, 12 + 256 + 256, 310, 1),
                (Some(310), 2, 12 + 256 + 256 + 2, 311, 0),
            ]
        );
        // Post-order, with what changed below each.
        assert_eq!(v.left, vec![(200, true), (310, false), (300, false)]);
        assert_eq!(&v.blocks[&200][1020..], &900u32.to_le_bytes());
        assert_eq!(&root[52..56], &901u32.to_le_bytes());
        assert!(w.root_changed && !w.stopped);
    }

    #[test]
    fn stop_ends_the_whole_walk() {
        let mut root = words(&[(0, 100), (12, 200), (13, 300)], 60);
        let mut v = Log::default();
        v.blocks.insert(200, words(&[(0, 201), (1, 202)], 1024));
        v.stop_at = Some(201);
        let w = block_map(&mut root, 1024, &mut v).unwrap();
        assert!(w.stopped);
        assert_eq!(v.seen.len(), 3);
        assert!(v.left.is_empty());
    }

    #[test]
    fn a_block_map_word_is_not_given_a_block_past_32_bits() {
        let mut root = words(&[(0, 100), (1, 101)], 60);
        let before = root.clone();
        let mut v = Log::default();
        v.moves.insert(100, 1 << 32);
        let w = block_map(&mut root, 1024, &mut v).unwrap();
        assert!(w.stopped && !w.root_changed);
        assert_eq!(root, before);
        assert_eq!(v.seen.len(), 1);
    }

    #[test]
    fn extent_tree_gives_ranges_and_rewrites_entries() {
        let ext = |l: u32, p: u64, n: u16| Extent::new(l, BlockNr(p), n, false).unwrap();
        let mut leaf = vec![0u8; 1024];
        write_leaf(&mut leaf, &[ext(0, 500, 4), ext(10, 600, 2)]).unwrap();
        let mut leaf2 = vec![0u8; 1024];
        write_leaf(&mut leaf2, &[ext(20, 700, 1)]).unwrap();
        let mut root = vec![0u8; 60];
        let idx = [
            ExtentIdx::new(0, BlockNr(50)),
            ExtentIdx::new(20, BlockNr(51)),
        ];
        write_index(&mut root, 1, &idx).unwrap();
        let mut v = Log::default();
        v.blocks.insert(50, leaf);
        v.blocks.insert(51, leaf2);
        v.moves.insert(600, 800);
        v.moves.insert(51, 61);
        let w = extent_tree(&mut root, 1, u64::MAX, &mut v).unwrap();
        assert_eq!(
            v.seen,
            vec![
                (None, 0, 0, 50, 0),
                (Some(50), 0, 0, 500, 0),
                (Some(50), 1, 10, 600, 0),
                (None, 1, 20, 51, 0),
                (Some(51), 0, 20, 700, 0),
            ]
        );
        assert_eq!(v.left, vec![(50, true), (51, false)]);
        let node = ext4r_format::extent::ExtentNode::parse(&v.blocks[&50]).unwrap();
        assert_eq!(node.extents().unwrap()[1].start().0, 800);
        let r = ext4r_format::extent::ExtentNode::parse(&root).unwrap();
        assert_eq!(r.indexes().unwrap()[1].leaf().0, 61);
        assert!(w.root_changed);
    }

    /// The ranges a node's entries are given: the index's own, capped by
    /// the next entry.
    #[test]
    fn index_entries_know_their_range() {
        struct Ranges(Vec<(u64, u64, u64)>);
        impl Visitor for Ranges {
            type Error = ();
            fn pointer(&mut self, p: &Ptr) -> Result<Step, ()> {
                self.0.push((p.lo, p.hi, p.next));
                Ok(Step::Next)
            }
            fn enter(&mut self, _: &Ptr) -> Result<Option<Vec<u8>>, ()> {
                Ok(None)
            }
        }
        let mut root = vec![0u8; 60];
        let idx = [
            ExtentIdx::new(0, BlockNr(50)),
            ExtentIdx::new(20, BlockNr(51)),
            ExtentIdx::new(90, BlockNr(52)),
        ];
        write_index(&mut root, 2, &idx).unwrap();
        let mut v = Ranges(Vec::new());
        extent_tree(&mut root, 2, 64, &mut v).unwrap();
        assert_eq!(v.0, vec![(0, 64, 20), (0, 64, 64), (0, 64, 64)]);
    }
}
