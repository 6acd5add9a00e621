//! Rewriting metadata when the checksum scheme changes: metadata_csum on
//! or off, uninit_bg (gdt_csum) on or off, a new UUID or checksum seed on a
//! metadata_csum filesystem, dir_index cleared under metadata_csum. It
//! follows tune2fs's `rewrite_metadata_checksums`, `enable_uninit_bg` and
//! `disable_uninit_bg`, and leaves the same bytes:
//!
//! - every selected inode in use gets its checksum; an unused inode that is
//!   not all zeros is zeroed (and checksummed);
//! - extent tree blocks, directory blocks (see [`super::dirblock`]) and
//!   xattr blocks get their checksums;
//! - bitmaps are rewritten (padding set, uninit groups' bitmaps computed
//!   where they stop being uninit) with their checksums in the descriptors;
//! - descriptors get their flags and checksums; the caller writes them and
//!   the superblock (see [`super::write`]).
//!
//! It works a group at a time, so memory does not grow with the
//! filesystem: a group's inode bitmap, then its inode table in chunks (and
//! the blocks its inodes own), then its block bitmap.
//!
//! Order of writes, and why a power cut is repairable: everything here is
//! written in place before the descriptors and, last, the superblock. Until
//! the superblock lands, the filesystem still declares its old features:
//! turning checksums on, the blocks written so far carry checksums nobody
//! reads yet (a tail is a valid empty entry); turning them off, the blocks
//! written so far lack checksums the old features expect, which fsck
//! reports and repairs (missing tails, checksum mismatches). Either way
//! `fsck -fy` brings it back, and re-running the same tune finishes it.

use ext4r_format::num;
use std::collections::HashSet;
use std::sync::Arc;

use super::dirblock::{self, Edit, Mode};
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use crate::fs::{Filesystem, InodeInfo, OpenOptions};
use ext4r_format::extent::ExtentNode;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT, BG_INODE_ZEROED};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::superblock::Superblock;
use ext4r_format::xattr::XattrHeader;
use ext4r_format::InodeNr;
use ext4r_txn::csum::{BlockKind, Checksums};
use ext4r_txn::map::walk::{self, Ptr, Step, Visitor};
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::{Volume, VolumeOptions};

/// tune2fs's `REWRITE_EA_FL`, `REWRITE_DIR_FL`, `REWRITE_NONDIR_FL`.
pub(super) const REWRITE_EA: u8 = 1;
pub(super) const REWRITE_DIR: u8 = 2;
pub(super) const REWRITE_NONDIR: u8 = 4;
pub(super) const REWRITE_ALL: u8 = REWRITE_EA | REWRITE_DIR | REWRITE_NONDIR;

/// Inode-table bytes read at a time (one buffer, reused).
const CHUNK: usize = 256 << 10;

/// Which checksum feature `disable_uninit_bg` turns off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Disable {
    /// uninit_bg: unused inodes are zeroed too.
    GdtCsum,
    /// metadata_csum without uninit_bg in its place.
    MetadataCsum,
}

/// What the feature and UUID changes asked for.
#[derive(Debug, Clone, Default)]
pub(super) struct Plan {
    /// Which inodes to rewrite (`REWRITE_*`); 0 for none.
    pub rewrite: u8,
    /// `enable_uninit_bg`: every group marked zeroed, no unused-table hint.
    pub enable_uninit: bool,
    /// `disable_uninit_bg`: no group flags, every bitmap written.
    pub disable_uninit: Option<Disable>,
}

impl Plan {
    /// Whether anything beyond the superblock must be written.
    pub(super) fn is_empty(&self) -> bool {
        self.rewrite == 0 && !self.enable_uninit && self.disable_uninit.is_none()
    }
}

/// The result: the new descriptor table, and whether some directory block
/// was left for `e2fsck -fD`.
pub(super) struct Done {
    pub table: Vec<u8>,
    pub dir_fsck: bool,
    /// Bytes written to the device (for `s_kbytes_written`).
    pub bytes_written: u64,
}

/// Carries out `plan` on `dev`. `old_group_csum`: the filesystem had group
/// checksums (uninit flags mean something) before the change; `sb` is the
/// superblock after it.
///
/// # Errors
/// I/O errors; [`Error::Corrupt`] for an unusable geometry or descriptor.
pub(super) fn execute(
    dev: &Arc<dyn BlockDevice>,
    sb: &Superblock,
    old_group_csum: bool,
    plan: &Plan,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Done> {
    let geo = Geometry::from_superblock(sb).map_err(|e| Error::corrupt("superblock", e))?;
    let (mut table, descs) = super::read_desc_table(dev.as_ref(), sb)?;
    let fs = if plan.rewrite & REWRITE_DIR != 0 {
        let o = OpenOptions {
            verify_checksums: false,
            skip_journal_replay: true,
            allow_encrypted: true,
            ..OpenOptions::default()
        };
        Some(Filesystem::open_with(dev.clone(), o)?)
    } else {
        None
    };
    let metadata_csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
    // The filesystem as it will be: its checksums are the new ones.
    let vol = Volume::open_with_superblock(Arc::clone(dev), sb.clone(), rewrite_options())?;
    let cs = vol.checksums().clone();
    let mut r = Rewriter {
        txn: Transaction::owned(vol),
        fs: fs.as_ref(),
        geo: &geo,
        wide: sb.has_incompat(Incompat::BIT64),
        cs,
        metadata_csum,
        new_group_csum: metadata_csum || sb.has_ro_compat(RoCompat::GDT_CSUM),
        old_group_csum,
        keep_htree: sb.has_compat(Compat::DIR_INDEX),
        plan,
        xattr_done: HashSet::new(),
        dir_fsck: false,
        chunk: Vec::new(),
        written: std::cell::Cell::new(0),
    };
    let dsize = geo.desc_size as usize;
    let groups = u64::from(geo.group_count);
    for (g, mut d) in (0u32..).zip(descs) {
        progress(u64::from(g), groups);
        r.group(g, &mut d)?;
        // A group's blocks go out before the next group is read.
        r.txn.flush_partial()?;
        r.cs.stamp_desc(g, &mut d);
        let at = g as usize * dsize;
        d.write(&mut table[at..at + dsize], dsize)
            .map_err(|e| Error::corrupt("group descriptor", e))?;
    }
    Ok(Done {
        table,
        dir_fsck: r.dir_fsck,
        bytes_written: r.written.get(),
    })
}

struct Rewriter<'a> {
    /// Where the blocks go (in place, flushed group by group).
    txn: Transaction<Volume>,
    fs: Option<&'a Filesystem>,
    geo: &'a Geometry,
    wide: bool,
    /// The checksums after the change.
    cs: Checksums,
    /// metadata_csum is on afterwards.
    metadata_csum: bool,
    new_group_csum: bool,
    old_group_csum: bool,
    keep_htree: bool,
    plan: &'a Plan,
    /// Xattr blocks already rewritten (they are shared).
    xattr_done: HashSet<u64>,
    dir_fsck: bool,
    /// The inode-table buffer, reused from chunk to chunk.
    chunk: Vec<u8>,
    written: std::cell::Cell<u64>,
}

impl Rewriter<'_> {
    fn bs(&self) -> usize {
        self.geo.block_size as usize
    }

    fn in_fs(&self, b: u64) -> bool {
        b >= self.geo.first_data_block && b < self.geo.blocks_count
    }

    /// The byte offset of `block`, which must lie in the filesystem (a
    /// descriptor or inode can name any number).
    fn offset(&self, block: u64, len: usize) -> Result<u64> {
        let blocks = (len as u64).div_ceil(self.bs() as u64).max(1);
        if !self.in_fs(block) || !self.in_fs(block.saturating_add(blocks - 1)) {
            return Err(Error::corrupt(
                format!("block {block}"),
                ext4r_format::FormatError::invalid(
                    "block number",
                    format!("outside the filesystem ({} blocks)", self.geo.blocks_count),
                ),
            ));
        }
        Ok(block * self.bs() as u64)
    }

    fn read(&self, block: u64, buf: &mut [u8]) -> Result<()> {
        self.offset(block, buf.len())?;
        self.txn.read_blocks(block, buf)
    }

    /// Queues blocks (already stamped) from `block`.
    fn write(&mut self, block: u64, buf: &[u8]) -> Result<()> {
        self.offset(block, buf.len())?;
        for (k, chunk) in buf.chunks(self.bs()).enumerate() {
            self.txn
                .write_block(block + k as u64, BlockKind::Plain, chunk.to_vec())?;
        }
        self.written.set(self.written.get() + buf.len() as u64);
        Ok(())
    }

    fn group(&mut self, g: u32, d: &mut GroupDesc) -> Result<()> {
        let plan = self.plan;
        let bitmaps = plan.rewrite != 0 || plan.disable_uninit.is_some();
        let scan = plan.rewrite != 0 || plan.disable_uninit == Some(Disable::GdtCsum);
        let old_flags = if self.old_group_csum { d.flags() } else { 0 };
        if plan.enable_uninit {
            d.set_itable_unused(0);
            d.set_flags(BG_INODE_ZEROED);
        }
        if plan.disable_uninit.is_some() {
            d.set_itable_unused(0);
            d.set_flags(0);
        }
        let lazy = self.new_group_csum;
        let new_flags = if lazy { d.flags() } else { 0 };
        let ipg = self.geo.inodes_per_group as usize;
        let ibytes = ipg.div_ceil(8);
        let bs = self.bs();
        let mut ibitmap = vec![0u8; bs];
        // What is on disk, when it was read: compared before writing back.
        let mut ib_disk = None;
        if old_flags & BG_INODE_UNINIT == 0 && (bitmaps || scan) {
            self.read(d.inode_bitmap(self.wide), &mut ibitmap)?;
            ib_disk = Some(ibitmap.clone());
        }
        if scan && new_flags & BG_INODE_UNINIT == 0 {
            let unused = if lazy {
                d.itable_unused(self.wide) as usize
            } else {
                0
            };
            self.inodes(g, d, &ibitmap, ipg.saturating_sub(unused))?;
        }
        if !bitmaps {
            return Ok(());
        }
        if new_flags & BG_INODE_UNINIT == 0 {
            ibitmap[ibytes..].fill(0xff);
            self.cs.stamp_bitmaps(d, None, Some(&ibitmap));
            self.write_if_changed(d.inode_bitmap(self.wide), &ibitmap, ib_disk.as_deref())?;
        }
        if new_flags & BG_BLOCK_UNINIT == 0 {
            let (bbitmap, bb_disk) = self.block_bitmap(g, d, old_flags)?;
            self.cs.stamp_bitmaps(d, Some(&bbitmap), None);
            self.write_if_changed(d.block_bitmap(self.wide), &bbitmap, bb_disk.as_deref())?;
        }
        Ok(())
    }

    /// Writes a bitmap unless it equals what was read from `block`
    /// (`on_disk`; `None` when it was computed, not read).
    fn write_if_changed(&mut self, block: u64, buf: &[u8], on_disk: Option<&[u8]>) -> Result<()> {
        if !self.in_fs(block) || on_disk == Some(buf) {
            return Ok(());
        }
        self.write(block, buf)
    }

    /// The group's block bitmap as libext2fs writes it: read, or computed
    /// for a group that was BLOCK_UNINIT; the bits past the last cluster of
    /// the last group and the bytes past the group set. With it, what was
    /// read from disk (`None` when computed).
    fn block_bitmap(
        &self,
        g: u32,
        d: &GroupDesc,
        old_flags: u16,
    ) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
        let bs = self.bs();
        let geo = self.geo;
        let cbits = geo.cluster_bits;
        let cpg = num::index(geo.blocks_per_group >> cbits);
        let mut map = vec![0u8; bs];
        let mut disk = None;
        if old_flags & BG_BLOCK_UNINIT == 0 {
            self.read(d.block_bitmap(self.wide), &mut map)?;
            disk = Some(map.clone());
        } else {
            let first = geo.group_first_block(g);
            let end = first + geo.group_blocks(g);
            let mut mark = |a: u64, n: u64| {
                for b in a.max(first)..(a + n).min(end) {
                    let c = num::index((b - first) >> cbits);
                    if c < bs * 8 {
                        map[c / 8] |= 1 << (c % 8);
                    }
                }
            };
            let m = geo.group_meta(g);
            if let Some(s) = m.super_block {
                mark(s, 1);
            }
            if let Some((f, n)) = m.old_desc {
                mark(f, n);
            }
            if let Some(b) = m.meta_desc {
                mark(b, 1);
            }
            mark(d.block_bitmap(self.wide), 1);
            mark(d.inode_bitmap(self.wide), 1);
            mark(
                d.inode_table(self.wide),
                u64::from(geo.inode_blocks_per_group()),
            );
        }
        let mut bits = cpg / 8 * 8;
        if g + 1 == geo.group_count {
            let rem = (geo.blocks_count - geo.first_data_block) % geo.blocks_per_group;
            let n = num::index(rem.div_ceil(1 << cbits));
            if n != 0 {
                bits = n;
            }
        }
        for c in bits..bs * 8 {
            map[c / 8] |= 1 << (c % 8);
        }
        Ok((map, disk))
    }

    /// The first `n` inodes of group `g`, a chunk of the table at a time.
    fn inodes(&mut self, g: u32, d: &GroupDesc, ibitmap: &[u8], n: usize) -> Result<()> {
        let bs = self.bs();
        let isz = self.geo.inode_size as usize;
        let table = d.inode_table(self.wide);
        let per_chunk = (CHUNK / isz).max(1);
        let mut done = 0usize;
        while done < n {
            let count = per_chunk.min(n - done);
            let first_block = (done * isz) / bs;
            let nblocks = (count * isz).div_ceil(bs);
            let start = table.saturating_add(first_block as u64);
            if !self.in_fs(start) || !self.in_fs(start.saturating_add(nblocks as u64 - 1)) {
                return Err(Error::corrupt(
                    format!("group {g} descriptor"),
                    ext4r_format::FormatError::invalid(
                        "bg_inode_table",
                        format!("inode table at {table} lies outside the filesystem"),
                    ),
                ));
            }
            let mut buf = std::mem::take(&mut self.chunk);
            buf.resize(nblocks * bs, 0);
            let result = self.inode_chunk(g, ibitmap, done, count, start, &mut buf);
            self.chunk = buf;
            result?;
            done += count;
        }
        Ok(())
    }

    /// Inodes `first..first + count` of group `g`, whose table blocks from
    /// `start` are in `buf`; the blocks that changed are written back.
    fn inode_chunk(
        &mut self,
        g: u32,
        ibitmap: &[u8],
        first: usize,
        count: usize,
        start: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        let bs = self.bs();
        let isz = self.geo.inode_size as usize;
        self.read(start, buf)?;
        let skip = first * isz - (first * isz) / bs * bs;
        let mut dirty = vec![false; buf.len() / bs];
        let mut before = Vec::with_capacity(isz);
        for k in 0..count {
            let i = first + k;
            let used = ibitmap[i / 8] & (1 << (i % 8)) != 0;
            let ino = u64::from(g) * u64::from(self.geo.inodes_per_group) + i as u64 + 1;
            let off = skip + k * isz;
            let rec = &mut buf[off..off + isz];
            // A slot of group g's table: at most s_inodes_count, a u32.
            if self.inode(InodeNr(num::sat_u32(ino)), used, rec, &mut before)? {
                dirty[off / bs] = true;
                dirty[(off + isz - 1) / bs] = true;
            }
        }
        for (b, _) in dirty.iter().enumerate().filter(|(_, d)| **d) {
            self.write(start + b as u64, &buf[b * bs..(b + 1) * bs])?;
        }
        Ok(())
    }

    /// One inode, as tune2fs's `rewrite_one_inode` (or `zero_empty_inodes`):
    /// whether its record's bytes changed. The record is copied into
    /// `before` only on the paths that may change it, where a copy and a
    /// compare of every record cost ~10% of turning metadata_csum off on
    /// 2M files (where most records stay as they are).
    fn inode(
        &mut self,
        ino: InodeNr,
        used: bool,
        rec: &mut [u8],
        before: &mut Vec<u8>,
    ) -> Result<bool> {
        // Read in place (no copy of the 160 bytes) when the record holds
        // the whole structure; a shorter one is parsed into a padded copy.
        let parsed;
        let view: &Inode = match Inode::in_record(rec) {
            Some(i) => i,
            None => {
                let Ok(p) = Inode::parse(rec) else {
                    return Ok(false);
                };
                parsed = p;
                &parsed
            }
        };
        let flags = view.flags();
        let is_dir = view.is_dir();
        let wanted = if flags.contains(InodeFlags::EA_INODE) {
            REWRITE_EA
        } else if is_dir {
            REWRITE_DIR
        } else {
            REWRITE_NONDIR
        };
        let all_zero = |r: &[u8]| r.iter().all(|&b| b == 0);
        if self.plan.rewrite & wanted == 0 {
            if !used && self.plan.disable_uninit == Some(Disable::GdtCsum) && !all_zero(rec) {
                rec.fill(0);
                return Ok(true);
            }
            return Ok(false);
        }
        if !used {
            if all_zero(rec) {
                return Ok(false);
            }
            before.clear();
            before.extend_from_slice(rec);
            rec.fill(0);
            self.cs.stamp_inode(ino.0, rec)?;
            return Ok(*rec != before[..]);
        }
        let generation = view.generation();
        let i_block = view.i_block;
        let acl = view.file_acl(self.wide).0;
        // A directory's inode is kept whole: its blocks are read through
        // it, and its htree flag may go.
        let dir_inode = (is_dir && !flags.contains(InodeFlags::INLINE_DATA)).then_some(*view);
        // Only the checksum (stamped only under metadata_csum) and a
        // directory's flags are written below.
        let may_change = self.cs.metadata_csum() || dir_inode.is_some();
        if may_change {
            before.clear();
            before.extend_from_slice(rec);
        }
        if self.metadata_csum && flags.contains(InodeFlags::EXTENTS) {
            let kind = BlockKind::Extent {
                ino: ino.0,
                generation,
            };
            if let Ok(root) = ExtentNode::parse(&i_block) {
                let depth = root.depth();
                let mut v = Restamp {
                    w: self,
                    kind,
                    seen: HashSet::new(),
                };
                let mut copy = i_block;
                walk::extent_tree(&mut copy, depth, u64::MAX, &mut v)?;
            }
        }
        if let Some(mut inode) = dir_inode {
            let htree = flags.contains(InodeFlags::INDEX);
            self.directory(ino, &inode, rec, generation, htree && self.keep_htree)?;
            if htree && !self.keep_htree {
                inode.set_flags(flags - InodeFlags::INDEX);
                inode
                    .write(rec)
                    .map_err(|e| Error::corrupt(format!("inode {}", ino.0), e))?;
            }
        }
        if acl != 0 && self.in_fs(acl) {
            self.xattr_block(acl)?;
        }
        self.cs.stamp_inode(ino.0, rec)?;
        Ok(may_change && *rec != before[..])
    }

    fn directory(
        &mut self,
        ino: InodeNr,
        inode: &Inode,
        rec: &[u8],
        generation: u32,
        htree: bool,
    ) -> Result<()> {
        let Some(fs) = self.fs else {
            return Ok(());
        };
        let info = InodeInfo {
            ino,
            inode: *inode,
            record: rec.to_vec(),
        };
        let Ok(runs) = fs.runs(&info) else {
            self.dir_fsck = true;
            return Ok(());
        };
        let bs = self.bs();
        let cs = self.cs.clone();
        let metadata_csum = self.metadata_csum;
        let mut block = vec![0u8; bs];
        for run in runs {
            for b in run.physical..run.physical + run.len {
                if !self.in_fs(b) {
                    continue;
                }
                self.read(b, &mut block)?;
                let mode = Mode {
                    htree,
                    csum: metadata_csum.then_some((&cs, ino.0, generation, b)),
                };
                match dirblock::rewrite(&mut block, mode) {
                    Edit::Unchanged => {}
                    Edit::Changed => self.write(b, &block)?,
                    Edit::NeedsFsck => self.dir_fsck = true,
                }
            }
        }
        Ok(())
    }

    fn xattr_block(&mut self, b: u64) -> Result<()> {
        if !self.metadata_csum || !self.xattr_done.insert(b) {
            return Ok(());
        }
        let mut buf = vec![0u8; self.bs()];
        self.read(b, &mut buf)?;
        if XattrHeader::of_block(&buf).is_none() {
            return Ok(());
        }
        let before = buf.clone();
        if self.cs.stamp_block(BlockKind::Xattr, b, &mut buf).is_ok() && buf != before {
            self.write(b, &buf)?;
        }
        Ok(())
    }
}
/// The walk of an extent tree whose blocks get their checksums: each
/// node below the root, depth first, checksummed and written when that
/// changed it. A node out of the filesystem, reached twice or not one
/// level below its parent is left alone, and what is below it.
struct Restamp<'r, 'a> {
    w: &'r mut Rewriter<'a>,
    kind: BlockKind,
    seen: HashSet<u64>,
}

impl Visitor for Restamp<'_, '_> {
    type Error = Error;

    fn pointer(&mut self, p: &Ptr) -> Result<Step> {
        let b = p.physical;
        if !p.is_node() || !self.w.in_fs(b) || !self.seen.insert(b) {
            return Ok(Step::Next);
        }
        Ok(Step::Descend)
    }

    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>> {
        let b = p.physical;
        let mut buf = vec![0u8; self.w.bs()];
        self.w.read(b, &mut buf)?;
        if !ExtentNode::parse(&buf).is_ok_and(|c| c.depth() == p.levels) {
            return Ok(None);
        }
        let before = buf.clone();
        if self.w.cs.stamp_block(self.kind, b, &mut buf).is_ok() && buf != before {
            self.w.write(b, &buf)?;
        }
        Ok(Some(buf))
    }
}

/// A rewrite's volume: it stamps every checksum anew, so it does not
/// verify the old ones first.
fn rewrite_options() -> VolumeOptions {
    let mut o = VolumeOptions::default();
    o.unverified = true;
    o
}
