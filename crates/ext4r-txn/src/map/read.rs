//! Reading a mapping: extent trees and ext2/3 block maps turned into one
//! sorted list of runs.

use std::collections::HashSet;

use ext4r_format::blockmap::IndirectBlock;
use ext4r_format::extent::{ExtentNode, MAX_EXTENT_DEPTH};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::FormatError;

use super::walk::{self, Entry, Ptr, Step, Visitor};
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
    let kind = BlockKind::Extent {
        ino,
        generation: inode.generation(),
    };
    Collect::new(src, &info, limit, &mut out, kind, None)
        .walk(flags.contains(InodeFlags::EXTENTS))?;
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
    let kind = BlockKind::Extent {
        ino,
        generation: inode.generation(),
    };
    Collect::new(src, &info, u64::MAX, &mut out, kind, Some(&mut meta)).walk(true)?;
    check_sorted(&out, &info)?;
    meta.sort_unstable();
    meta.dedup();
    Ok((out, meta))
}

/// Every data run of inode `ino` (past `i_size` too, as [`runs_whole`])
/// and the blocks of its mapping (extent tree nodes below the root, or
/// indirect blocks), sorted, each once: what moving the inode's blocks
/// elsewhere has to move. Inline-data inodes and fast symlinks
/// (`fast_symlink`) have neither.
///
/// # Errors
/// As [`runs`].
pub fn runs_and_nodes(
    src: &(impl BlockSource + ?Sized),
    ino: u32,
    inode: &Inode,
    fast_symlink: bool,
) -> Result<(Vec<Run>, Vec<u64>)> {
    let info = Info { ino, inode };
    let flags = inode.flags();
    let mut out = Vec::new();
    let mut meta = Vec::new();
    if flags.contains(InodeFlags::INLINE_DATA) || fast_symlink {
        return Ok((out, meta));
    }
    let extents = flags.contains(InodeFlags::EXTENTS);
    let kind = if extents {
        BlockKind::Extent {
            ino,
            generation: inode.generation(),
        }
    } else {
        BlockKind::Plain
    };
    Collect::new(src, &info, u64::MAX, &mut out, kind, Some(&mut meta)).walk(extents)?;
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
    Collect::new(
        src,
        &info,
        u64::MAX,
        &mut out,
        BlockKind::Plain,
        Some(&mut meta),
    )
    .walk(flags.contains(InodeFlags::EXTENTS))?;
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

/// The walk's visitor for [`runs`], [`extent_tree`] and [`all_blocks`]:
/// every pointer checked against the filesystem, each node reached once
/// and (when the source verifies them) its checksum, the runs collected.
struct Collect<'a, S: ?Sized> {
    src: &'a S,
    info: &'a Info<'a>,
    /// Logical blocks at or past this are ignored (a block map's; an
    /// extent tree is read whole).
    limit: u64,
    /// Tree nodes and indirect blocks entered. Each maps a distinct range
    /// of the file, so one reached twice is corruption, and refusing it
    /// bounds the walk by the blocks on disk: a triple-indirect block
    /// listing itself would otherwise be read as 1024 x 1024 indirect
    /// blocks with 2^30 leaves.
    seen: HashSet<u64>,
    out: &'a mut Vec<Run>,
    /// The checksum kind of extent tree blocks.
    kind: BlockKind,
    /// Where to list the mapping's own blocks, when wanted.
    meta: Option<&'a mut Vec<u64>>,
}

impl<'a, S: BlockSource + ?Sized> Collect<'a, S> {
    fn new(
        src: &'a S,
        info: &'a Info<'a>,
        limit: u64,
        out: &'a mut Vec<Run>,
        kind: BlockKind,
        meta: Option<&'a mut Vec<u64>>,
    ) -> Self {
        Collect {
            src,
            info,
            limit,
            seen: HashSet::new(),
            out,
            kind,
            meta,
        }
    }

    /// Walks the inode's extent tree (`extents`) or block map.
    fn walk(&mut self, extents: bool) -> Result<()> {
        let mut root = self.info.inode.i_block;
        if extents {
            let depth = node_depth(self.info.ino, &root, None, None)?;
            walk::extent_tree(&mut root, depth, u64::MAX, self)?;
        } else {
            walk::block_map(&mut root, self.src.block_size(), self)?;
        }
        Ok(())
    }

    /// Where an extent node is: its block, or the root in the inode.
    fn node_at(&self, block: Option<u64>) -> Location {
        extent_at(self.info.ino, block)
    }
}

fn extent_at(ino: u32, block: Option<u64>) -> Location {
    match block {
        Some(b) => Location::inode(ino).of("extent block").at_block(b),
        None => Location::inode(ino).of("extent root"),
    }
}

/// The depth of extent node `buf` (at `block`; None: the root), which
/// its place may say (`want`).
fn node_depth(ino: u32, buf: &[u8], block: Option<u64>, want: Option<u16>) -> Result<u16> {
    let at = || extent_at(ino, block);
    let node = ExtentNode::parse(buf).map_err(|e| Error::corrupt(at(), e))?;
    let depth = node.depth();
    if depth > MAX_EXTENT_DEPTH || want.is_some_and(|d| d != depth) {
        return Err(Error::corrupt(
            at(),
            FormatError::invalid("extent header", format!("depth {depth} unexpected")),
        ));
    }
    Ok(depth)
}

impl<S: BlockSource + ?Sized> Visitor for Collect<'_, S> {
    type Error = Error;

    fn pointer(&mut self, p: &Ptr) -> Result<Step> {
        let (ino, b) = (self.info.ino, p.physical);
        match p.entry {
            Entry::Extent(_) => {
                if p.len == 0 {
                    return Ok(Step::Next);
                }
                let place = self.node_at(p.slot.block).to_string();
                self.src.check_blocks(b, p.len, &place)?;
                super::push_run(
                    self.out,
                    Run {
                        logical: p.logical,
                        physical: b,
                        len: p.len,
                        unwritten: p.unwritten,
                    },
                );
                Ok(Step::Next)
            }
            Entry::Index(_) => {
                let place = self.node_at(p.slot.block);
                self.src.check_blocks(b, 1, &place.to_string())?;
                if !self.seen.insert(b) {
                    return Err(Error::corrupt(
                        place,
                        FormatError::invalid("extent index", format!("block {b} is reached twice")),
                    ));
                }
                if let Some(m) = self.meta.as_deref_mut() {
                    m.push(b);
                }
                Ok(Step::Descend)
            }
            Entry::Word => {
                // A block map: only the blocks below the limit count.
                if p.logical >= self.limit {
                    return Ok(Step::Next);
                }
                if p.levels == 0 {
                    let what = format!("inode {ino}, logical block {}", p.logical);
                    self.src.check_blocks(b, 1, &what)?;
                    super::push_run(
                        self.out,
                        Run {
                            logical: p.logical,
                            physical: b,
                            len: 1,
                            unwritten: false,
                        },
                    );
                    return Ok(Step::Next);
                }
                if !self.seen.insert(b) {
                    return Err(Error::corrupt(
                        Location::inode(ino).of("indirect block").at_block(b),
                        FormatError::invalid("block map", "indirect block reached twice"),
                    ));
                }
                if let Some(m) = self.meta.as_deref_mut() {
                    m.push(b);
                }
                Ok(Step::Descend)
            }
        }
    }

    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>> {
        let (ino, b) = (self.info.ino, p.physical);
        if let Entry::Index(_) = p.entry {
            let loc = Location::inode(ino).of("extent block").at_block(b);
            let blk = self.src.read_block(b, &loc.to_string())?;
            if let Some(cs) = self.src.verify() {
                if !self.src.trusted(b) && !cs.block_ok(self.kind, b, &blk) {
                    return Err(Error::corrupt(
                        loc,
                        FormatError::invalid("extent block", "checksum does not match"),
                    ));
                }
            }
            node_depth(ino, &blk, Some(b), Some(p.levels))?;
            return Ok(Some(blk));
        }
        let loc = Location::inode(ino).of("indirect block").at_block(b);
        let buf = self.src.read_block(b, &loc.to_string())?;
        IndirectBlock::parse(&buf).map_err(|e| Error::corrupt(loc, e))?;
        Ok(Some(buf))
    }
}
