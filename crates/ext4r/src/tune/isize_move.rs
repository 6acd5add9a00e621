//! Moving file blocks out of the places chosen for the new inode tables:
//! tune2fs's `move_block`, `inode_scan_and_fix` and `process_block`, with
//! whole extents moved (an extent that reaches into a window is copied to
//! a free run of its length and its entry rewritten, so no extent is ever
//! split and no tree grows), ext2/3 block maps a block at a time, and xattr
//! blocks (shared ones once, their checksum recomputed for the new block
//! number, which it covers).
//!
//! Planning and writing are apart: [`Mover::plan`] visits every inode in
//! use and only allocates (in [`Meta`]) and records; nothing is written
//! until every move has a place, so running out of space is a refusal that
//! leaves the device alone. [`Mover::write`] then writes in an order that
//! keeps the filesystem valid at every step:
//!
//! 1. the data copies, into blocks free on disk and in no window;
//! 2. (flush) tree, map and xattr blocks: moved ones to their new blocks,
//!    changed ones in place; each pointer then names either the old copy
//!    or the new one, both intact;
//! 3. (flush) the inode records, in the old tables.
//!
//! (This is the write layer's in-place order: data, metadata blocks, inode
//! records, each stage flushed; [`Mover::write`] queues them in [`Meta`]'s
//! transaction and flushes it, checksums stamped there.)
//!
//! The blocks given up stay marked in use on disk until the commit writes
//! the new bitmaps; the windows are overwritten only after all this (by
//! [`super::isize_table`]). A power cut before then leaves the old
//! filesystem with some files pointing at identical copies in blocks its
//! bitmaps call free, which e2fsck repairs.

use super::isize_place::NoSpace;
use crate::error::Result;
use crate::meta::{corrupt, Meta};
use ext4r_format::extent::{ExtentHeader, EXTENT_MAGIC};
use ext4r_format::inode::{mode, Inode, InodeFlags, I_BLOCK_SIZE};
use ext4r_format::num;
use ext4r_format::types::BlockNr;
use ext4r_txn::alloc::{BlockAlloc, UsedBlocks};
use ext4r_txn::csum::BlockKind;
use ext4r_txn::map::walk::{self, Entry, Ptr, Step, Visitor};
use std::collections::{BTreeMap, HashMap};
use zerocopy::FromBytes;

/// Deepest extent tree walked (the format allows 5 levels).
const MAX_DEPTH: u16 = 5;
/// Bytes copied at a time.
const COPY_CHUNK: u64 = 1 << 20;

/// Why a plan could not be made.
pub(super) enum PlanError {
    /// No room for some moved blocks: a refusal.
    NoSpace,
    /// An I/O error or a corrupt tree.
    Io(crate::error::Error),
}

impl From<crate::error::Error> for PlanError {
    fn from(e: crate::error::Error) -> Self {
        PlanError::Io(e)
    }
}

impl From<NoSpace> for PlanError {
    fn from(_: NoSpace) -> Self {
        PlanError::NoSpace
    }
}

type Plan<T> = std::result::Result<T, PlanError>;

/// The moves planned so far.
pub(super) struct Mover<'a> {
    meta: &'a mut Meta,
    /// The blocks to vacate.
    to_move: &'a UsedBlocks,
    wide: bool,
    /// The extent tree being walked belongs to this inode and generation.
    owner: BlockKind,
    /// Data copies: (from, to, length).
    copies: Vec<(u64, u64, u64)>,
    /// Mapping and xattr blocks to write, with their final contents.
    blocks: BTreeMap<u64, (Vec<u8>, BlockKind)>,
    /// Inode records to rewrite in the old tables.
    inodes: BTreeMap<u32, Vec<u8>>,
    /// Xattr blocks moved: old to new.
    xattr: HashMap<u64, u64>,
    /// Blocks of moved extents outside the windows, freed at the commit.
    release: Vec<(u64, u64)>,
    /// Blocks visited, bounded by the filesystem's size (a map that loops).
    visited: u64,
    /// Blocks moved (data, mapping and xattr blocks).
    pub moved: u64,
}

impl<'a> Mover<'a> {
    pub(super) fn new(meta: &'a mut Meta, to_move: &'a UsedBlocks) -> Self {
        let wide = meta.wide;
        Mover {
            meta,
            to_move,
            wide,
            owner: BlockKind::Plain,
            copies: Vec::new(),
            blocks: BTreeMap::new(),
            inodes: BTreeMap::new(),
            xattr: HashMap::new(),
            release: Vec::new(),
            visited: 0,
            moved: 0,
        }
    }

    fn in_window(&self, start: u64, len: u64) -> bool {
        len != 0 && self.to_move.count_used(start, start + len - 1) != 0
    }

    fn check_range(&mut self, start: u64, len: u64) -> Result<()> {
        let geo = &self.meta.geo;
        let end = start.saturating_add(len);
        if start < geo.first_data_block || end > geo.blocks_count {
            return Err(corrupt(
                "block map",
                format!("blocks {start}..{end} outside the filesystem"),
            ));
        }
        self.visited += len;
        if self.visited > geo.blocks_count.saturating_mul(2) {
            return Err(corrupt("block map", "more blocks than the filesystem has"));
        }
        Ok(())
    }

    /// A free run of `len` blocks for moved data, near `goal`.
    fn alloc(&mut self, goal: u64, len: u64) -> Plan<u64> {
        let b = self
            .meta
            .get_free_blocks(goal, 0, len)
            .ok_or(PlanError::NoSpace)?;
        self.meta.take_range(b, len)?;
        self.moved += len;
        Ok(b)
    }

    fn read(&self, b: u64) -> Result<Vec<u8>> {
        self.meta.read_block(b)
    }

    /// Plans the moves of inode `ino` (its record `rec` from the old table).
    pub(super) fn plan(&mut self, ino: u32, rec: &[u8]) -> Plan<()> {
        let mut rec = rec.to_vec();
        let mut inode = Inode::parse(&rec).map_err(|e| corrupt("inode", e.to_string()))?;
        let mut changed = false;
        let acl = inode.file_acl(self.wide).0;
        if acl != 0 && self.to_move.is_used(acl) {
            let new = match self.xattr.get(&acl) {
                Some(&n) => n,
                None => {
                    self.check_range(acl, 1)?;
                    let n = self.alloc(acl, 1)?;
                    // Its checksum covers its block number: stamped anew.
                    let buf = self.read(acl)?;
                    self.blocks.insert(n, (buf, BlockKind::Xattr));
                    self.xattr.insert(acl, n);
                    n
                }
            };
            if self.wide {
                inode.set_file_acl(BlockNr(new));
            } else {
                // The high half is not ours to touch without 64bit.
                inode.i_file_acl_lo.set(num::lo32(new));
            }
            changed = true;
        }
        if has_blocks(&inode, self.wide) {
            self.owner = BlockKind::Extent {
                ino,
                generation: inode.generation(),
            };
            let mut root = inode.i_block.to_vec();
            let bs = self.meta.geo.block_size;
            let walked = if inode.flags().contains(InodeFlags::EXTENTS) {
                let depth = header_ok(&root, MAX_DEPTH + 1)?;
                walk::extent_tree(&mut root, depth, u64::MAX, self)?
            } else {
                walk::block_map(&mut root, bs, self)?
            };
            // The visitor never stops a walk: the walker does, when a block
            // it was to store does not fit a block map's 32-bit word. The
            // inode's other blocks would then stay where they must leave.
            if walked.stopped {
                return Err(crate::error::Error::InvalidArgument(format!(
                    "inode {ino} is block-mapped and a block of it would move past 2^32, \
                     which its block map cannot hold"
                ))
                .into());
            }
            if walked.root_changed {
                let mut i_block = [0u8; I_BLOCK_SIZE];
                i_block.copy_from_slice(&root);
                inode.i_block = i_block;
                changed = true;
            }
        }
        if changed {
            inode
                .write(&mut rec)
                .map_err(|e| corrupt("inode", e.to_string()))?;
            self.inodes.insert(ino, rec);
        }
        Ok(())
    }

    /// The parts of a moved extent that no window holds: free once the
    /// new tables are in place.
    fn release_outside(&mut self, start: u64, len: u64) {
        let mut b = start;
        let end = start + len;
        let runs: Vec<(u64, u64)> = self.to_move.runs_in(start, end - 1).collect();
        for (s, e) in runs {
            if s > b {
                self.release.push((b, s - b));
            }
            b = e;
        }
        if b < end {
            self.release.push((b, end - b));
        }
    }

    /// A data block of a block map: its new place if it moves.
    fn data_block(&mut self, b: u64) -> Plan<Option<u64>> {
        self.check_range(b, 1)?;
        if !self.to_move.is_used(b) {
            return Ok(None);
        }
        let n = self.alloc(b, 1)?;
        self.copies.push((b, n, 1));
        Ok(Some(n))
    }

    /// Writes the moves in the order the module doc gives, then frees the
    /// parts of moved extents no window holds (in memory, for the commit).
    pub(super) fn write(self) -> Result<()> {
        let bs = u64::from(self.meta.geo.block_size);
        let mut queued = 0u64;
        for &(from, to, len) in &self.copies {
            for k in 0..len {
                let data = self.meta.read_block(from + k)?;
                self.meta.write_block(to + k, data)?;
                queued += bs;
                if queued >= COPY_CHUNK * 64 {
                    self.meta.flush_partial()?;
                    queued = 0;
                }
            }
        }
        for (b, (data, kind)) in self.blocks {
            self.meta.write_meta_block(b, kind, data)?;
        }
        for (ino, rec) in self.inodes {
            self.meta.write_inode(ino, rec)?;
        }
        self.meta.flush_partial()?;
        for &(s, n) in &self.release {
            for b in s..s + n {
                self.meta.free_cluster(b)?;
            }
        }
        Ok(())
    }
}

/// The walk of a file's mapping: data that reaches into a window is
/// copied and its pointer rewritten; a mapping block that lies in a
/// window, or whose pointers changed, is written (moved, or in place)
/// once its own entries are done.
impl Visitor for Mover<'_> {
    type Error = PlanError;

    fn pointer(&mut self, p: &Ptr) -> Plan<Step> {
        if p.is_node() {
            self.check_range(p.physical, 1)?;
            return Ok(Step::Descend);
        }
        let new = match p.entry {
            Entry::Extent(e) => {
                // Whole extents move: none is split, no tree grows.
                let (start, len) = (p.physical, u64::from(e.len()));
                self.check_range(start, len)?;
                if !self.in_window(start, len) {
                    return Ok(Step::Next);
                }
                let new = self.alloc(start, len)?;
                self.copies.push((start, new, len));
                self.release_outside(start, len);
                Some(new)
            }
            _ => self.data_block(p.physical)?,
        };
        Ok(new.map_or(Step::Next, Step::Replace))
    }

    fn enter(&mut self, p: &Ptr) -> Plan<Option<Vec<u8>>> {
        let buf = self.read(p.physical)?;
        if let Entry::Index(_) = p.entry {
            // One level below its parent, as the parent's depth says.
            if header_ok(&buf, p.levels + 1)? != p.levels {
                return Err(
                    corrupt("extent tree", format!("block {}: wrong depth", p.physical)).into(),
                );
            }
        }
        Ok(Some(buf))
    }

    fn leave(&mut self, p: &Ptr, buf: Vec<u8>, changed: bool) -> Plan<Step> {
        let b = p.physical;
        let kind = match p.entry {
            Entry::Index(_) => self.owner,
            _ => BlockKind::Plain,
        };
        if self.to_move.is_used(b) {
            let n = self.alloc(b, 1)?;
            self.blocks.insert(n, (buf, kind));
            return Ok(Step::Replace(n));
        }
        if changed {
            self.blocks.insert(b, (buf, kind));
        }
        Ok(Step::Next)
    }
}

/// Whether an extent node's header can be walked: its magic, its
/// entries inside the buffer, its depth below `budget`. Gives the depth.
fn header_ok(node: &[u8], budget: u16) -> Plan<u16> {
    let bad = || corrupt("extent tree", "bad header").into();
    let (h, _) = ExtentHeader::ref_from_prefix(node).map_err(|_| bad())?;
    if h.eh_magic.get() != EXTENT_MAGIC || budget == 0 {
        return Err(bad());
    }
    let entries = usize::from(h.eh_entries.get());
    let depth = h.eh_depth.get();
    if 12 + 12 * entries > node.len() || depth >= budget {
        return Err(corrupt("extent tree", "too many entries or levels").into());
    }
    Ok(depth)
}

/// `ext2fs_inode_has_valid_blocks2`: whether `i_block` holds block
/// numbers (not a fast symlink's text, a device number or inline data).
fn has_blocks(inode: &Inode, wide: bool) -> bool {
    let fmt = inode.file_type();
    if fmt != mode::S_IFREG && fmt != mode::S_IFDIR && fmt != mode::S_IFLNK {
        return false;
    }
    if fmt == mode::S_IFLNK {
        if inode.file_acl(wide).0 == 0 {
            // Without an xattr block, i_blocks tells.
            if inode.i_blocks_lo.get() == 0 && inode.l_i_blocks_high.get() == 0 {
                return false;
            }
        } else {
            let size = inode.i_size_lo.get();
            let slow = size >= 60 || (size > 4 && inode.block_words()[1] == 0);
            if !slow {
                return false;
            }
        }
    }
    !inode.flags().contains(InodeFlags::INLINE_DATA)
}
