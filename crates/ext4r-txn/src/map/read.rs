//! Reading a mapping: extent trees and ext2/3 block maps turned into one
//! sorted list of runs.

use std::collections::HashSet;

use ext4r_format::blockmap::{
    addr_per_block, IndirectBlock, DIND_BLOCK, IND_BLOCK, NDIR_BLOCKS, TIND_BLOCK,
};
use ext4r_format::extent::{ExtentNode, MAX_EXTENT_DEPTH};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::FormatError;

use super::{BlockSource, Run};
use crate::csum::BlockKind;
use crate::error::{Error, Location, Result};

/// The data runs of inode `ino`, sorted by logical block, coalesced, not
/// overlapping. Inline-data inodes and fast symlinks (`fast_symlink`: its
/// `i_block` holds the target) have none.
///
/// # Errors
/// [`Error::Corrupt`] naming the inode and block of a broken extent tree or
/// block map: bad magic, depth, out-of-range or overlapping blocks, a node
/// reached twice, a checksum mismatch when the source verifies them.
pub fn runs(
    src: &(impl BlockSource + ?Sized),
    ino: u32,
    inode: &Inode,
    fast_symlink: bool,
) -> Result<Vec<Run>> {
    let bs = u64::from(src.block_size());
    runs_below(src, ino, inode, fast_symlink, inode.size().div_ceil(bs))
}

/// Every data run of inode `ino`, a block map's past `i_size` too: what a
/// truncate frees once the size is already the new one (an orphan being
/// shortened), as the kernel's truncate walks the whole map.
///
/// # Errors
/// As [`runs`].
pub fn runs_whole(
    src: &(impl BlockSource + ?Sized),
    ino: u32,
    inode: &Inode,
    fast_symlink: bool,
) -> Result<Vec<Run>> {
    runs_below(src, ino, inode, fast_symlink, u64::MAX)
}

/// [`runs`] with a block map read up to logical block `limit`.
fn runs_below(
    src: &(impl BlockSource + ?Sized),
    ino: u32,
    inode: &Inode,
    fast_symlink: bool,
    limit: u64,
) -> Result<Vec<Run>> {
    let info = Info { ino, inode };
    let flags = inode.flags();
    let mut out = Vec::new();
    if flags.contains(InodeFlags::INLINE_DATA) || fast_symlink {
        return Ok(out);
    }
    if flags.contains(InodeFlags::EXTENTS) {
        let mut walk = ExtentWalk {
            src,
            info: &info,
            seen: HashSet::new(),
            out: &mut out,
            kind: BlockKind::Extent {
                ino,
                generation: inode.generation(),
            },
            meta: None,
        };
        walk.node(&inode.i_block, None, None)?;
    } else {
        // A block map: only the blocks below the limit count.
        let mut w = MapWalk {
            src,
            info: &info,
            limit,
            seen: HashSet::new(),
            out: &mut out,
            meta: None,
        };
        w.walk()?;
    }
    check_sorted(&out, &info)?;
    Ok(out)
}

/// The data runs of extent-mapped inode `ino` (as [`runs`]) and the
/// blocks of its extent tree below the root in the inode (sorted, each
/// once): what storing a new mapping reuses, found in one walk of the
/// tree, without listing every data block.
///
/// # Errors
/// As [`runs`].
pub(crate) fn extent_tree(
    src: &(impl BlockSource + ?Sized),
    ino: u32,
    inode: &Inode,
) -> Result<(Vec<Run>, Vec<u64>)> {
    let info = Info { ino, inode };
    let mut out = Vec::new();
    let mut meta = Vec::new();
    let mut walk = ExtentWalk {
        src,
        info: &info,
        seen: HashSet::new(),
        out: &mut out,
        kind: BlockKind::Extent {
            ino,
            generation: inode.generation(),
        },
        meta: Some(&mut meta),
    };
    walk.node(&inode.i_block, None, None)?;
    check_sorted(&out, &info)?;
    meta.sort_unstable();
    meta.dedup();
    Ok((out, meta))
}

/// Every block inode `ino` holds, data and mapping blocks (extent tree
/// nodes, indirect blocks) alike, as `ext2fs_block_iterate3` visits them:
/// what is freed when the inode goes. A block map is walked whole, past
/// `i_size`. Each block once, in no particular order.
///
/// # Errors
/// As [`runs`]; also a mapping that names more blocks than the filesystem
/// has.
pub fn all_blocks(src: &(impl BlockSource + ?Sized), ino: u32, inode: &Inode) -> Result<Vec<u64>> {
    let info = Info { ino, inode };
    let flags = inode.flags();
    let mut out = Vec::new();
    let mut meta = Vec::new();
    if flags.contains(InodeFlags::INLINE_DATA) {
        return Ok(Vec::new());
    }
    if flags.contains(InodeFlags::EXTENTS) {
        let mut walk = ExtentWalk {
            src,
            info: &info,
            seen: HashSet::new(),
            out: &mut out,
            kind: BlockKind::Plain,
            meta: Some(&mut meta),
        };
        walk.node(&inode.i_block, None, None)?;
    } else {
        let mut w = MapWalk {
            src,
            info: &info,
            limit: u64::MAX,
            seen: HashSet::new(),
            out: &mut out,
            meta: Some(&mut meta),
        };
        w.walk()?;
    }
    let (_, count) = src.block_range();
    let mut blocks: Vec<u64> = meta;
    for r in &out {
        if blocks.len() as u64 + r.len > count {
            return Err(corrupt(&info, "more blocks than the filesystem has".into()));
        }
        blocks.extend(r.physical..r.physical + r.len);
    }
    blocks.sort_unstable();
    blocks.dedup();
    Ok(blocks)
}

/// The inode being walked.
struct Info<'a> {
    ino: u32,
    inode: &'a Inode,
}

fn corrupt(info: &Info<'_>, detail: String) -> Error {
    Error::corrupt(
        Location::inode(info.ino),
        FormatError::invalid("block mapping", detail),
    )
}

fn check_sorted(runs: &[Run], info: &Info<'_>) -> Result<()> {
    for w in runs.windows(2) {
        if w[1].logical < w[0].end() {
            return Err(corrupt(
                info,
                format!(
                    "logical blocks {}..{} overlap {}..{}",
                    w[1].logical,
                    w[1].end(),
                    w[0].logical,
                    w[0].end()
                ),
            ));
        }
    }
    Ok(())
}

/// Appends a run, merging it with the previous one when they continue
/// each other.
fn push(out: &mut Vec<Run>, r: Run) {
    if let Some(last) = out.last_mut() {
        if last.end() == r.logical
            && last.physical + last.len == r.physical
            && last.unwritten == r.unwritten
        {
            last.len += r.len;
            return;
        }
    }
    out.push(r);
}

struct ExtentWalk<'a, S: ?Sized> {
    src: &'a S,
    info: &'a Info<'a>,
    seen: HashSet<u64>,
    out: &'a mut Vec<Run>,
    kind: BlockKind,
    /// Where to list the tree's own blocks, when wanted.
    meta: Option<&'a mut Vec<u64>>,
}

impl<S: BlockSource + ?Sized> ExtentWalk<'_, S> {
    /// Walks one node. `block` is where it came from (None for the root in
    /// the inode), `want_depth` the depth its parent implies.
    fn node(&mut self, buf: &[u8], block: Option<u64>, want_depth: Option<u16>) -> Result<()> {
        let info = self.info;
        let at = || match block {
            Some(b) => Location::inode(info.ino).of("extent block").at_block(b),
            None => Location::inode(info.ino).of("extent root"),
        };
        let place = || at().to_string();
        let node = ExtentNode::parse(buf).map_err(|e| Error::corrupt(at(), e))?;
        let depth = node.depth();
        if depth > MAX_EXTENT_DEPTH || want_depth.is_some_and(|d| d != depth) {
            return Err(Error::corrupt(
                at(),
                FormatError::invalid("extent header", format!("depth {depth} unexpected")),
            ));
        }
        if let Some(exts) = node.extents() {
            for e in exts {
                let len = u64::from(e.len());
                if len == 0 {
                    continue;
                }
                let start = e.start().0;
                self.src.check_blocks(start, len, &place())?;
                push(
                    self.out,
                    Run {
                        logical: u64::from(e.ee_block.get()),
                        physical: start,
                        len,
                        unwritten: e.is_unwritten(),
                    },
                );
            }
        } else if let Some(idx) = node.indexes() {
            for ix in idx {
                let child = ix.leaf().0;
                self.src.check_blocks(child, 1, &place())?;
                if !self.seen.insert(child) {
                    return Err(Error::corrupt(
                        at(),
                        FormatError::invalid(
                            "extent index",
                            format!("block {child} is reached twice"),
                        ),
                    ));
                }
                if let Some(m) = self.meta.as_deref_mut() {
                    m.push(child);
                }
                let loc = Location::inode(info.ino).of("extent block").at_block(child);
                let blk = self.src.read_block(child, &loc.to_string())?;
                if let Some(cs) = self.src.verify() {
                    if !cs.block_ok(self.kind, child, &blk) {
                        return Err(Error::corrupt(
                            loc,
                            FormatError::invalid("extent block", "checksum does not match"),
                        ));
                    }
                }
                self.node(&blk, Some(child), Some(depth - 1))?;
            }
        }
        Ok(())
    }
}

struct MapWalk<'a, S: ?Sized> {
    src: &'a S,
    info: &'a Info<'a>,
    /// Logical blocks at or past this are ignored.
    limit: u64,
    /// Indirect blocks read so far. Each maps a distinct range of the
    /// file, so one reached twice is corruption, and refusing it bounds the
    /// walk by the blocks on disk: a triple-indirect block listing itself
    /// would otherwise be read as 1024 x 1024 indirect blocks with 2^30
    /// leaves.
    seen: HashSet<u32>,
    out: &'a mut Vec<Run>,
    /// Where to list the indirect blocks, when wanted.
    meta: Option<&'a mut Vec<u64>>,
}

impl<S: BlockSource + ?Sized> MapWalk<'_, S> {
    fn walk(&mut self) -> Result<()> {
        let words = self.info.inode.block_words();
        for (i, &w) in words.iter().enumerate().take(NDIR_BLOCKS) {
            self.leaf(i as u64, w)?;
        }
        let apb = u64::from(addr_per_block(self.src.block_size()));
        let mut base = NDIR_BLOCKS as u64;
        for (slot, level) in [(IND_BLOCK, 1u32), (DIND_BLOCK, 2), (TIND_BLOCK, 3)] {
            let span = apb.pow(level);
            if base >= self.limit {
                break;
            }
            self.indirect(words[slot], level, base)?;
            base += span;
        }
        Ok(())
    }

    fn leaf(&mut self, logical: u64, block: u32) -> Result<()> {
        if block == 0 || logical >= self.limit {
            return Ok(());
        }
        let b = u64::from(block);
        self.src.check_blocks(
            b,
            1,
            &format!("inode {}, logical block {logical}", self.info.ino),
        )?;
        push(
            self.out,
            Run {
                logical,
                physical: b,
                len: 1,
                unwritten: false,
            },
        );
        Ok(())
    }

    /// An indirect block of `level` (1 = its entries are data blocks)
    /// mapping logical blocks from `base`.
    fn indirect(&mut self, block: u32, level: u32, base: u64) -> Result<()> {
        if block == 0 || base >= self.limit {
            return Ok(());
        }
        let loc = Location::inode(self.info.ino)
            .of("indirect block")
            .at_block(u64::from(block));
        let what = loc.to_string();
        if !self.seen.insert(block) {
            return Err(Error::corrupt(
                loc.clone(),
                FormatError::invalid("block map", "indirect block reached twice"),
            ));
        }
        if let Some(m) = self.meta.as_deref_mut() {
            m.push(u64::from(block));
        }
        let buf = self.src.read_block(u64::from(block), &what)?;
        let ind = IndirectBlock::parse(&buf).map_err(|e| Error::corrupt(loc, e))?;
        let apb = u64::from(addr_per_block(self.src.block_size()));
        let span = apb.pow(level - 1);
        for (i, b) in ind.iter().enumerate() {
            let logical = base + i as u64 * span;
            if logical >= self.limit {
                break;
            }
            let b = u32::try_from(b.0).unwrap_or(u32::MAX);
            if level == 1 {
                self.leaf(logical, b)?;
            } else {
                self.indirect(b, level - 1, logical)?;
            }
        }
        Ok(())
    }
}
