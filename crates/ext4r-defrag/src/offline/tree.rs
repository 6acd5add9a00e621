//! The mapping blocks of an inode — extent tree nodes below the root, or
//! indirect blocks — without listing its data blocks, so that the memory a
//! file costs follows its mapping, not its size. (The write layer's
//! `map::all_blocks` lists every block, data included: fine for a checker,
//! too much for a file of a terabyte.)

use std::collections::HashSet;

use ext4r::error::{Error, Result};
use ext4r_format::blockmap::addr_per_block;
use ext4r_format::extent::{ExtentNode, MAX_EXTENT_DEPTH};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::FormatError;
use ext4r_txn::map::walk::{self, Entry, Ptr, Step, Visitor};
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
    let bs = src.block_size();
    let mut v = Nodes {
        src,
        ino,
        limit: inode.size().div_ceil(u64::from(bs)),
        apb: u64::from(addr_per_block(bs)),
        seen: HashSet::new(),
        m: Mapping::default(),
    };
    if flags.contains(InodeFlags::INLINE_DATA) {
        return Ok(v.m);
    }
    let mut root = inode.i_block;
    if flags.contains(InodeFlags::EXTENTS) {
        let depth = node_depth(ino, &root, None)?;
        walk::extent_tree(&mut root, depth, u64::MAX, &mut v)?;
    } else {
        walk::block_map(&mut root, bs, &mut v)?;
    }
    Ok(v.m)
}

/// The depth of an extent node (`want`: what its place says it must be).
fn node_depth(ino: u32, buf: &[u8], want: Option<u16>) -> Result<u16> {
    let node = ExtentNode::parse(buf).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
    let depth = node.depth();
    if depth > MAX_EXTENT_DEPTH || want.is_some_and(|d| d != depth) {
        return Err(corrupt(
            ino,
            format!("extent node of depth {depth} unexpected"),
        ));
    }
    Ok(depth)
}

/// Lists the mapping blocks the walk enters, and counts a block map's
/// data pointers past `i_size`.
struct Nodes<'a, S: ?Sized> {
    src: &'a S,
    ino: u32,
    /// Logical blocks from here on are past `i_size`.
    limit: u64,
    apb: u64,
    /// Each mapping block maps its own range: one reached twice is
    /// corruption, and refusing it bounds the walk by the disk.
    seen: HashSet<u64>,
    m: Mapping,
}

impl<S: BlockSource + ?Sized> Visitor for Nodes<'_, S> {
    type Error = Error;

    fn pointer(&mut self, p: &Ptr) -> Result<Step> {
        let (ino, b) = (self.ino, p.physical);
        match p.entry {
            Entry::Extent(_) => Ok(Step::Next),
            Entry::Word if p.levels == 0 => {
                self.m.past_eof += u64::from(p.logical >= self.limit);
                Ok(Step::Next)
            }
            Entry::Index(_) => {
                self.src
                    .check_blocks(b, 1, &format!("inode {ino}, extent index"))?;
                if !self.seen.insert(b) {
                    return Err(corrupt(ino, format!("extent block {b} reached twice")));
                }
                self.m.blocks.push(b);
                Ok(Step::Descend)
            }
            Entry::Word => {
                let what = format!("inode {ino}, indirect block {b}");
                self.src.check_blocks(b, 1, &what)?;
                if !self.seen.insert(b) {
                    return Err(corrupt(ino, format!("indirect block {b} reached twice")));
                }
                self.m.blocks.push(b);
                // A last-level block wholly below i_size needs no reading.
                if p.levels == 1 && p.logical + self.apb <= self.limit {
                    return Ok(Step::Next);
                }
                Ok(Step::Descend)
            }
        }
    }

    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>> {
        let (ino, b) = (self.ino, p.physical);
        if let Entry::Index(_) = p.entry {
            let blk = self
                .src
                .read_block(b, &format!("inode {ino}, extent block {b}"))?;
            node_depth(ino, &blk, Some(p.levels))?;
            return Ok(Some(blk));
        }
        let what = format!("inode {ino}, indirect block {b}");
        self.src.read_block(b, &what).map(Some)
    }
}
