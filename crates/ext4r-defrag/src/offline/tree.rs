//! The mapping blocks of an inode — extent tree nodes below the root, or
//! indirect blocks — without listing its data blocks, so that the memory a
//! file costs follows its mapping, not its size. (The write layer's
//! `map::all_blocks` lists every block, data included: fine for a checker,
//! too much for a file of a terabyte.)

use std::collections::HashSet;

use ext4r::error::{Error, Result};
use ext4r_format::blockmap::{addr_per_block, DIND_BLOCK, IND_BLOCK, NDIR_BLOCKS, TIND_BLOCK};
use ext4r_format::extent::{ExtentNode, MAX_EXTENT_DEPTH};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::FormatError;
use ext4r_txn::map::BlockSource;

/// What an inode's mapping holds besides its data runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// Tree nodes or indirect blocks.
    pub blocks: Vec<u64>,
    /// Data blocks a block map points at past `i_size` (the read path's
    /// runs leave them out; a file holding any is left alone).
    pub past_eof: u64,
}

fn corrupt(ino: u32, detail: String) -> Error {
    Error::corrupt(
        format!("inode {ino}"),
        FormatError::invalid("block mapping", detail),
    )
}

/// The mapping blocks of inode `ino`.
///
/// # Errors
/// A node out of the filesystem, reached twice, too deep, or unreadable.
pub(crate) fn mapping(
    src: &(impl BlockSource + ?Sized),
    ino: u32,
    inode: &Inode,
) -> Result<Mapping> {
    let flags = inode.flags();
    let mut m = Mapping::default();
    if flags.contains(InodeFlags::INLINE_DATA) {
        return Ok(m);
    }
    let mut seen = HashSet::new();
    if flags.contains(InodeFlags::EXTENTS) {
        extent_nodes(src, ino, &inode.i_block, None, &mut seen, &mut m.blocks)?;
    } else {
        let bs = src.block_size();
        let limit = inode.size().div_ceil(u64::from(bs));
        let words = inode.block_words();
        m.past_eof += words[..NDIR_BLOCKS]
            .iter()
            .enumerate()
            .filter(|&(i, &w)| w != 0 && i as u64 >= limit)
            .count() as u64;
        let apb = u64::from(addr_per_block(bs));
        let mut base = NDIR_BLOCKS as u64;
        for (slot, level) in [(IND_BLOCK, 1u32), (DIND_BLOCK, 2), (TIND_BLOCK, 3)] {
            let w = Walk {
                src,
                ino,
                limit,
                apb,
            };
            w.indirect(words[slot], level, base, &mut seen, &mut m)?;
            base += apb.pow(level);
        }
    }
    Ok(m)
}

fn extent_nodes(
    src: &(impl BlockSource + ?Sized),
    ino: u32,
    buf: &[u8],
    want_depth: Option<u16>,
    seen: &mut HashSet<u64>,
    out: &mut Vec<u64>,
) -> Result<()> {
    let node = ExtentNode::parse(buf).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
    let depth = node.depth();
    if depth > MAX_EXTENT_DEPTH || want_depth.is_some_and(|d| d != depth) {
        return Err(corrupt(
            ino,
            format!("extent node of depth {depth} unexpected"),
        ));
    }
    let Some(idx) = node.indexes() else {
        return Ok(());
    };
    for ix in idx {
        let child = ix.leaf().0;
        src.check_blocks(child, 1, &format!("inode {ino}, extent index"))?;
        if !seen.insert(child) {
            return Err(corrupt(ino, format!("extent block {child} reached twice")));
        }
        out.push(child);
        let blk = src.read_block(child, &format!("inode {ino}, extent block {child}"))?;
        extent_nodes(src, ino, &blk, Some(depth - 1), seen, out)?;
    }
    Ok(())
}

struct Walk<'a, S: ?Sized> {
    src: &'a S,
    ino: u32,
    /// Logical blocks from here on are past `i_size`.
    limit: u64,
    apb: u64,
}

impl<S: BlockSource + ?Sized> Walk<'_, S> {
    /// An indirect block of `level` (1: it points at data) mapping logical
    /// blocks from `base`.
    fn indirect(
        &self,
        block: u32,
        level: u32,
        base: u64,
        seen: &mut HashSet<u64>,
        m: &mut Mapping,
    ) -> Result<()> {
        if block == 0 {
            return Ok(());
        }
        let b = u64::from(block);
        let what = format!("inode {}, indirect block {b}", self.ino);
        self.src.check_blocks(b, 1, &what)?;
        // Each indirect block maps its own range: one reached twice is
        // corruption, and refusing it bounds the walk by the disk.
        if !seen.insert(b) {
            return Err(corrupt(
                self.ino,
                format!("indirect block {b} reached twice"),
            ));
        }
        m.blocks.push(b);
        let span = self.apb.pow(level - 1);
        // A last-level block wholly below i_size needs no reading.
        if level == 1 && base + self.apb <= self.limit {
            return Ok(());
        }
        let buf = self.src.read_block(b, &what)?;
        for (i, c) in buf.chunks_exact(4).enumerate() {
            let p = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            if p == 0 {
                continue;
            }
            let logical = base + i as u64 * span;
            if level == 1 {
                m.past_eof += u64::from(logical >= self.limit);
            } else {
                self.indirect(p, level - 1, logical, seen, m)?;
            }
        }
        Ok(())
    }
}
