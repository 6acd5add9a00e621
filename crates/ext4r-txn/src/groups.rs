//! The group table: every group's descriptor and bitmaps, and every free
//! count, kept right as blocks and inodes are taken and given back.
//!
//! Bitmaps are read when first needed; a group flagged `BLOCK_UNINIT` has
//! its block bitmap computed (its superblock copy and descriptor blocks,
//! and whatever group tables lie in it), one flagged `INODE_UNINIT` an
//! empty inode bitmap, as the kernel and libext2fs do. The accounting
//! follows the kernel and libext2fs' `ext2fs_block_alloc_stats*` /
//! `ext2fs_inode_alloc_stats2`: descriptor and superblock free counts,
//! the uninit flags cleared where something is taken, `bg_itable_unused`
//! lowered past a new inode.
//!
//! Nothing here writes: a [`Transaction`](crate::txn::Transaction) takes a
//! [snapshot](GroupTable::snapshot) of each group before it changes it
//! (so that an abandoned transaction can be undone) and writes the groups
//! it changed, stamped, when it commits.

use crate::alloc::{BlockAlloc, FreeSpace};
use crate::bitmap::Bitmap;
use crate::csum::Checksums;
use crate::device::BlockDevice;
use crate::error::{Error, Location, Result};
use ext4r_format::features::RoCompat;
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use ext4r_format::FormatError;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Reads the descriptor table that goes with the superblock copy at block
/// `sb_block` (the primary's is `first_data_block`); a backup's table
/// follows it in its group, except meta_bg blocks, which have one place.
///
/// # Errors
/// [`Error::Corrupt`] when the table lies past the end or a descriptor
/// cannot be parsed, or I/O errors.
pub fn read_descs(dev: &dyn BlockDevice, geo: &Geometry, sb_block: u64) -> Result<Vec<GroupDesc>> {
    let bs = u64::from(geo.block_size);
    let dsize = geo.desc_size as usize;
    let per_block = geo.descs_per_block();
    let nblocks = geo.desc_blocks();
    // The table has to be on the device: a superblock claiming billions of
    // groups (one block or inode per group) on a small device must fail
    // when reading, not when reserving memory for the table first.
    if u64::from(nblocks) * bs > dev.size() {
        return Err(Error::corrupt(
            "group descriptors",
            FormatError::invalid(
                "group descriptors",
                format!(
                    "{} groups need {nblocks} descriptor blocks, more than the {}-byte device holds",
                    geo.group_count,
                    dev.size()
                ),
            ),
        ));
    }
    let mut descs = Vec::with_capacity(geo.group_count as usize);
    let mut buf = vec![0u8; geo.block_size as usize];
    let backup_shift = sb_block.saturating_sub(geo.first_data_block);
    for i in 0..nblocks {
        let primary = geo.desc_block_loc(i);
        let in_meta = geo.meta_bg.is_some_and(|m| i >= m);
        let loc = if in_meta {
            primary
        } else {
            primary + backup_shift
        };
        let what = format!("group descriptor block {i} (block {loc})");
        if loc >= geo.blocks_count {
            return Err(Error::corrupt(
                what,
                FormatError::invalid("group descriptors", "located past the end"),
            ));
        }
        dev.read_at(&mut buf, loc * bs)?;
        for j in 0..per_block {
            if descs.len() == geo.group_count as usize {
                break;
            }
            let off = j as usize * dsize;
            let d = GroupDesc::parse(&buf[off..off + dsize], dsize)
                .map_err(|e| Error::corrupt(&what, e))?;
            descs.push(d);
        }
    }
    Ok(descs)
}

/// How a group whose inodes were never initialised (`INODE_UNINIT`) is
/// brought into use when an inode in it is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InodeInit {
    /// As the kernel: the flag is cleared and `bg_itable_unused` lowered
    /// just past the new inode, so checkers never read the rest of the
    /// table (which need not be zeroed).
    Kernel,
    /// As libext2fs' `check_inode_uninit`: the flags (also `BLOCK_UNINIT`)
    /// cleared and `bg_itable_unused` set to 0 at once (tune2fs's
    /// behaviour, for byte-identical results; the table must be zeroed).
    Libext2fs,
}

/// One group's state, for undoing an abandoned transaction.
#[derive(Debug, Clone)]
pub struct GroupSnapshot {
    group: u32,
    desc: GroupDesc,
    block_map: Option<Bitmap>,
    inode_map: Option<Bitmap>,
}

/// Descriptors, bitmaps and free counts of a filesystem being changed.
pub struct GroupTable {
    dev: Arc<dyn BlockDevice>,
    geo: Geometry,
    wide: bool,
    gdt_csum: bool,
    log_flex: u32,
    first_ino: u32,
    descs: Vec<GroupDesc>,
    block_maps: RefCell<HashMap<u32, Bitmap>>,
    inode_maps: RefCell<HashMap<u32, Bitmap>>,
    /// Group tables of other groups lying inside a `BLOCK_UNINIT` group:
    /// the computed bitmap marks them.
    uninit_extra: HashMap<u32, Vec<(u64, u64)>>,
    free_blocks: u64,
    free_inodes: u64,
    /// Checksums to verify bitmaps against as they are read (metadata_csum,
    /// unless the volume was opened unverified).
    verify: Option<Checksums>,
}

impl std::fmt::Debug for GroupTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupTable")
            .field("groups", &self.descs.len())
            .field("free_blocks", &self.free_blocks)
            .field("free_inodes", &self.free_inodes)
            .finish_non_exhaustive()
    }
}

fn bad(what: &str, detail: String) -> Error {
    Error::corrupt(
        what.to_string(),
        FormatError::invalid("group table", detail),
    )
}

/// A bitmap that fails the checksum its descriptor holds.
fn bad_bitmap(g: u32, at: u64, what: &'static str) -> Error {
    let mut loc = Location::block(at).of(what);
    loc.group = Some(g);
    Error::corrupt(loc, FormatError::invalid(what, "checksum does not match"))
}

/// Whether every bit of the bitmap block `raw` past its first `n` is set,
/// as the format wants and e2fsck checks ("padding at end of bitmap is not
/// set"). The checksum covers only the first `n` bits, and a bitmap read
/// back into memory keeps only those: writing it out again would set the
/// padding anew and hide damage there.
fn padding_set(raw: &[u8], n: u32) -> bool {
    let n = n as usize;
    let (full, part) = (n / 8, n % 8);
    let tail = if part == 0 { full } else { full + 1 };
    let partial_ok = part == 0 || raw.get(full).is_some_and(|b| b >> part == 0xff >> part);
    partial_ok && raw.get(tail..).is_none_or(|r| r.iter().all(|&b| b == 0xff))
}

/// Whether `e` is a bitmap that failed its checksum: its group is passed
/// over by the allocators, as the kernel passes over a group it marked
/// corrupt.
fn is_bad_bitmap(e: &Error) -> bool {
    matches!(e, Error::Corrupt { location, .. } if location.what.ends_with("bitmap"))
}

impl GroupTable {
    /// The table of the filesystem with superblock `sb` and descriptors
    /// `descs` (one per group) on `dev`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the superblock's geometry is unusable or the
    /// descriptor count is not the group count.
    pub fn new(dev: Arc<dyn BlockDevice>, sb: &Superblock, descs: Vec<GroupDesc>) -> Result<Self> {
        let geo = Geometry::from_superblock(sb).map_err(|e| Error::corrupt("superblock", e))?;
        if descs.len() != geo.group_count as usize {
            return Err(bad(
                "group descriptors",
                format!("{} descriptors for {} groups", descs.len(), geo.group_count),
            ));
        }
        let wide = sb.desc_size() >= 64;
        let gdt_csum =
            sb.has_ro_compat(RoCompat::METADATA_CSUM) || sb.has_ro_compat(RoCompat::GDT_CSUM);
        let mut t = GroupTable {
            dev,
            wide,
            gdt_csum,
            log_flex: geo.log_groups_per_flex.unwrap_or(0),
            first_ino: sb.first_ino().max(1),
            descs,
            block_maps: RefCell::new(HashMap::new()),
            inode_maps: RefCell::new(HashMap::new()),
            uninit_extra: HashMap::new(),
            free_blocks: sb.free_blocks_count(),
            free_inodes: u64::from(sb.s_free_inodes_count.get()),
            geo,
            verify: None,
        };
        t.index_uninit_tables();
        Ok(t)
    }

    /// Verifies each bitmap read from now on against the checksum its
    /// descriptor holds (`Some`, with metadata_csum), as the kernel does: a
    /// group whose bitmap fails is never allocated from (the kernel's
    /// `BBITMAP_CORRUPT`/`IBITMAP_CORRUPT`), and a change that must edit
    /// that bitmap (a free) gets [`Error::Corrupt`], so the bitmap is never
    /// rewritten with a fresh checksum over the damage.
    pub fn verify_bitmaps(&mut self, csum: Option<Checksums>) {
        self.verify = csum.filter(Checksums::metadata_csum);
    }

    /// The table of the same filesystem with another geometry (a resize):
    /// the superblock `sb` and its descriptors `descs`, one per group. The
    /// bitmaps read so far are carried over for every group that keeps its
    /// length; the others are read, computed or set again when needed. The
    /// free counts are the sums of the descriptors'. `self` is left as it
    /// was (what an abandoned resize goes back to).
    ///
    /// # Errors
    /// As [`GroupTable::new`].
    pub fn reshaped(&self, sb: &Superblock, descs: Vec<GroupDesc>) -> Result<GroupTable> {
        let mut t = GroupTable::new(Arc::clone(&self.dev), sb, descs)?;
        t.verify = self.verify.clone();
        let keep = |g: u32| {
            g < self.geo.group_count.min(t.geo.group_count)
                && self.geo.group_blocks(g) == t.geo.group_blocks(g)
                && self.geo.group_first_block(g) == t.geo.group_first_block(g)
        };
        for (&g, m) in self.block_maps.borrow().iter() {
            if keep(g) {
                t.block_maps.borrow_mut().insert(g, m.clone());
            }
        }
        if self.geo.inodes_per_group == t.geo.inodes_per_group {
            for (&g, m) in self.inode_maps.borrow().iter() {
                if g < t.geo.group_count {
                    t.inode_maps.borrow_mut().insert(g, m.clone());
                }
            }
        }
        let ratio = t.ratio();
        t.free_blocks = t
            .descs
            .iter()
            .map(|d| u64::from(d.free_blocks_count(t.wide)) * ratio)
            .sum();
        t.free_inodes = t
            .descs
            .iter()
            .map(|d| u64::from(d.free_inodes_count(t.wide)))
            .sum();
        Ok(t)
    }

    /// Notes the group tables that lie in `BLOCK_UNINIT` groups other than
    /// their own, which those groups' computed bitmaps must show used.
    fn index_uninit_tables(&mut self) {
        if !self.gdt_csum {
            return;
        }
        let ibpg = u64::from(self.geo.inode_blocks_per_group());
        let mut extra: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        for d in &self.descs {
            for (start, len) in [
                (d.block_bitmap(self.wide), 1),
                (d.inode_bitmap(self.wide), 1),
                (d.inode_table(self.wide), ibpg),
            ] {
                let mut b = start;
                let end = start.saturating_add(len).min(self.geo.blocks_count);
                while b < end {
                    let g = self.geo.group_of_block(b);
                    let gend = (self.geo.group_last_block(g) + 1).min(end);
                    if self.is_block_uninit(g) {
                        extra.entry(g).or_default().push((b, gend - b));
                    }
                    b = gend;
                }
            }
        }
        self.uninit_extra = extra;
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Whether descriptors are 64-bit wide.
    pub fn wide(&self) -> bool {
        self.wide
    }

    /// Whether the uninit flags mean anything (uninit_bg or metadata_csum).
    pub fn gdt_csum(&self) -> bool {
        self.gdt_csum
    }

    /// Group `g`'s descriptor.
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn desc(&self, g: u32) -> Result<&GroupDesc> {
        self.descs
            .get(g as usize)
            .ok_or_else(|| bad("group", format!("{g} is past the last group")))
    }

    /// Group `g`'s descriptor, to change (a checker's repairs); take a
    /// [snapshot](GroupTable::snapshot) first inside a transaction.
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn desc_mut(&mut self, g: u32) -> Result<&mut GroupDesc> {
        self.descs
            .get_mut(g as usize)
            .ok_or_else(|| bad("group", format!("{g} is past the last group")))
    }

    /// All descriptors, in group order.
    pub fn descs(&self) -> &[GroupDesc] {
        &self.descs
    }

    /// Free blocks, as the superblock will say.
    pub fn free_blocks(&self) -> u64 {
        self.free_blocks
    }

    /// Free inodes, as the superblock will say.
    pub fn free_inodes(&self) -> u64 {
        self.free_inodes
    }

    /// Sets the superblock's free counts (a checker that recounted them).
    pub fn set_free_counts(&mut self, blocks: u64, inodes: u64) {
        self.free_blocks = blocks;
        self.free_inodes = inodes;
    }

    fn is_block_uninit(&self, g: u32) -> bool {
        self.gdt_csum
            && self
                .descs
                .get(g as usize)
                .is_some_and(|d| d.flags() & BG_BLOCK_UNINIT != 0)
    }

    fn is_inode_uninit(&self, g: u32) -> bool {
        self.gdt_csum
            && self
                .descs
                .get(g as usize)
                .is_some_and(|d| d.flags() & BG_INODE_UNINIT != 0)
    }

    /// Clusters in group `g`'s bitmap.
    fn clusters_in(&self, g: u32) -> u32 {
        let n = self.geo.group_blocks(g).div_ceil(self.geo.cluster_ratio());
        num::sat_u32(n).min(self.geo.block_size * 8)
    }

    fn ratio(&self) -> u64 {
        self.geo.cluster_ratio()
    }

    /// Group and bit of block `b`.
    fn bit_of(&self, b: u64) -> (u32, u32) {
        let g = self.geo.group_of_block(b);
        let first = self.geo.group_first_block(g);
        (
            g,
            // A block past the group (damage) saturates to a bit no bitmap has.
            num::sat_u32(b.saturating_sub(first) >> self.geo.cluster_bits),
        )
    }

    fn block_of(&self, g: u32, bit: u32) -> u64 {
        self.geo.group_first_block(g) + (u64::from(bit) << self.geo.cluster_bits)
    }

    /// The block bitmap of a `BLOCK_UNINIT` group, as the kernel's
    /// `ext4_init_block_bitmap` computes it.
    fn computed_block_map(&self, g: u32) -> Bitmap {
        let mut m = Bitmap::new(self.clusters_in(g), self.geo.block_size);
        let meta = self.geo.group_meta(g);
        let mut mark = |start: u64, len: u64| {
            if len == 0 {
                return;
            }
            let (mg, s) = self.bit_of(start);
            if mg != g {
                return;
            }
            let (_, e) = self.bit_of(start + len - 1);
            m.set_range(s, e - s + 1, true);
        };
        if let Some(b) = meta.super_block {
            mark(b, 1);
        }
        if let Some((b, n)) = meta.old_desc {
            mark(b, n);
        }
        if let Some(b) = meta.meta_desc {
            mark(b, 1);
        }
        for &(s, n) in self.uninit_extra.get(&g).into_iter().flatten() {
            mark(s, n);
        }
        m
    }

    fn load_block_map(&self, g: u32) -> Result<()> {
        if self.block_maps.borrow().contains_key(&g) {
            return Ok(());
        }
        let m = if self.is_block_uninit(g) {
            self.computed_block_map(g)
        } else {
            let desc = self.desc(g)?;
            let at = desc.block_bitmap(self.wide);
            let raw = self.read_meta_block(at, g, "block bitmap")?;
            if self.verify.as_ref().is_some_and(|c| {
                !(c.block_bitmap_ok(desc, &raw) && padding_set(&raw, self.clusters_in(g)))
            }) {
                return Err(bad_bitmap(g, at, "block bitmap"));
            }
            Bitmap::from_bytes(&raw, self.clusters_in(g))
        };
        self.block_maps.borrow_mut().insert(g, m);
        Ok(())
    }

    fn load_inode_map(&self, g: u32) -> Result<()> {
        if self.inode_maps.borrow().contains_key(&g) {
            return Ok(());
        }
        let ipg = self.geo.inodes_per_group;
        let m = if self.is_inode_uninit(g) {
            Bitmap::new(ipg, self.geo.block_size)
        } else {
            let desc = self.desc(g)?;
            let at = desc.inode_bitmap(self.wide);
            let raw = self.read_meta_block(at, g, "inode bitmap")?;
            if self
                .verify
                .as_ref()
                .is_some_and(|c| !(c.inode_bitmap_ok(desc, &raw) && padding_set(&raw, ipg)))
            {
                return Err(bad_bitmap(g, at, "inode bitmap"));
            }
            Bitmap::from_bytes(&raw, ipg)
        };
        self.inode_maps.borrow_mut().insert(g, m);
        Ok(())
    }

    fn read_meta_block(&self, at: u64, g: u32, what: &str) -> Result<Vec<u8>> {
        if at == 0 || at >= self.geo.blocks_count {
            return Err(bad(
                what,
                format!("group {g}'s is at block {at}, outside the filesystem"),
            ));
        }
        let mut raw = vec![0u8; self.geo.block_size as usize];
        self.dev
            .read_at(&mut raw, at * u64::from(self.geo.block_size))?;
        Ok(raw)
    }

    /// Applies `f` to group `g`'s block bitmap (`block`) or inode bitmap
    /// in place, read or computed on first use; the counts and flags are
    /// left as they are.
    ///
    /// # Errors
    /// As [`GroupTable::block_map`].
    pub(crate) fn edit_map<R>(
        &self,
        g: u32,
        block: bool,
        f: impl FnOnce(&mut Bitmap) -> R,
    ) -> Result<R> {
        self.desc(g)?;
        let maps = if block {
            self.load_block_map(g)?;
            &self.block_maps
        } else {
            self.load_inode_map(g)?;
            &self.inode_maps
        };
        let mut maps = maps.borrow_mut();
        let m = maps
            .get_mut(&g)
            .ok_or_else(|| bad("bitmap", format!("group {g}'s is not loaded")))?;
        Ok(f(m))
    }

    /// Group `g`'s block bitmap (a copy), read or computed on first use.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the descriptor places it outside the
    /// filesystem, or I/O errors.
    pub fn block_map(&self, g: u32) -> Result<Bitmap> {
        self.desc(g)?;
        self.load_block_map(g)?;
        Ok(self.block_maps.borrow()[&g].clone())
    }

    /// Group `g`'s inode bitmap (a copy).
    ///
    /// # Errors
    /// As [`GroupTable::block_map`].
    pub fn inode_map(&self, g: u32) -> Result<Bitmap> {
        self.desc(g)?;
        self.load_inode_map(g)?;
        Ok(self.inode_maps.borrow()[&g].clone())
    }

    /// Whether the bitmaps of group `g` have been read (only those can
    /// have changed).
    pub(crate) fn loaded_maps(&self, g: u32) -> (Option<Bitmap>, Option<Bitmap>) {
        (
            self.block_maps.borrow().get(&g).cloned(),
            self.inode_maps.borrow().get(&g).cloned(),
        )
    }

    /// Drops group `g`'s bitmaps from memory (they are on disk as they
    /// are): a rewrite of every group keeps one group's at a time.
    pub(crate) fn forget_maps(&self, g: u32) {
        self.block_maps.borrow_mut().remove(&g);
        self.inode_maps.borrow_mut().remove(&g);
    }

    /// Replaces group `g`'s block bitmap (a checker's recount) and clears
    /// `BLOCK_UNINIT`; counts are the caller's to set.
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn set_block_map(&mut self, g: u32, m: Bitmap) -> Result<()> {
        let d = self.desc_mut(g)?;
        d.set_flags(d.flags() & !BG_BLOCK_UNINIT);
        self.block_maps.borrow_mut().insert(g, m);
        Ok(())
    }

    /// Replaces group `g`'s inode bitmap and clears `INODE_UNINIT`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn set_inode_map(&mut self, g: u32, m: Bitmap) -> Result<()> {
        let d = self.desc_mut(g)?;
        d.set_flags(d.flags() & !BG_INODE_UNINIT);
        self.inode_maps.borrow_mut().insert(g, m);
        Ok(())
    }

    /// Whether block `b` is in use.
    ///
    /// # Errors
    /// As [`GroupTable::block_map`].
    pub fn is_block_used(&self, b: u64) -> Result<bool> {
        if b < self.geo.first_data_block || b >= self.geo.blocks_count {
            return Ok(true);
        }
        let (g, bit) = self.bit_of(b);
        self.load_block_map(g)?;
        Ok(self.block_maps.borrow()[&g].get(bit))
    }

    /// Whether inode `ino` is in use.
    ///
    /// # Errors
    /// As [`GroupTable::block_map`].
    pub fn is_inode_used(&self, ino: u32) -> Result<bool> {
        let (g, i) = self.inode_pos(ino)?;
        self.load_inode_map(g)?;
        Ok(self.inode_maps.borrow()[&g].get(i))
    }

    fn inode_pos(&self, ino: u32) -> Result<(u32, u32)> {
        let ipg = self.geo.inodes_per_group;
        if ino == 0 || u64::from(ino) > u64::from(ipg) * u64::from(self.geo.group_count) {
            return Err(bad("inode", format!("{ino} is outside the filesystem")));
        }
        Ok(((ino - 1) / ipg, (ino - 1) % ipg))
    }

    /// A copy of group `g`'s state before a change.
    ///
    /// # Errors
    /// [`Error::Corrupt`] past the last group.
    pub fn snapshot(&self, g: u32) -> Result<GroupSnapshot> {
        let desc = *self.desc(g)?;
        let (block_map, inode_map) = self.loaded_maps(g);
        Ok(GroupSnapshot {
            group: g,
            desc,
            block_map,
            inode_map,
        })
    }

    /// Puts a group back as a snapshot found it.
    pub fn restore(&mut self, s: GroupSnapshot) {
        if let Some(d) = self.descs.get_mut(s.group as usize) {
            *d = s.desc;
        }
        let mut bm = self.block_maps.borrow_mut();
        match s.block_map {
            Some(m) => bm.insert(s.group, m),
            None => bm.remove(&s.group),
        };
        let mut im = self.inode_maps.borrow_mut();
        match s.inode_map {
            Some(m) => im.insert(s.group, m),
            None => im.remove(&s.group),
        };
    }

    /// Marks the clusters of `[start, start + len)` used or free, with the
    /// counts of the groups and the superblock and `BLOCK_UNINIT` cleared
    /// in each group touched (`ext2fs_block_alloc_stats_range`). Returns
    /// the clusters whose state changed.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for blocks outside the filesystem or a bitmap
    /// that cannot be read.
    pub fn mark_blocks(&mut self, start: u64, len: u64, used: bool) -> Result<u64> {
        if len == 0 {
            return Ok(0);
        }
        let end = start
            .checked_add(len)
            .filter(|&e| e <= self.geo.blocks_count);
        let Some(end) = end.filter(|_| start >= self.geo.first_data_block) else {
            return Err(bad(
                "blocks",
                format!("{start}+{len} is outside the filesystem"),
            ));
        };
        let mut changed = 0u64;
        let mut b = start;
        while b < end {
            let g = self.geo.group_of_block(b);
            let gend = (self.geo.group_last_block(g) + 1).min(end);
            self.load_block_map(g)?;
            let (_, s) = self.bit_of(b);
            let (_, e) = self.bit_of(gend - 1);
            let n = e - s + 1;
            let n_changed = {
                let mut maps = self.block_maps.borrow_mut();
                let m = maps
                    .get_mut(&g)
                    .ok_or_else(|| bad("block bitmap", format!("{g}")))?;
                let set = m.count_set(s, n);
                m.set_range(s, n, used);
                if used {
                    n - set
                } else {
                    set
                }
            };
            let wide = self.wide;
            let d = &mut self.descs[g as usize];
            let free = d.free_blocks_count(wide);
            d.set_free_blocks_count(if used {
                free.saturating_sub(n_changed)
            } else {
                free.saturating_add(n_changed)
            });
            // Only where group checksums give the flags a meaning, as the
            // kernel's mballoc: elsewhere flags are damage, left for fsck
            // to see (clearing them would hide it).
            if self.gdt_csum {
                d.set_flags(d.flags() & !BG_BLOCK_UNINIT);
            }
            let blocks = u64::from(n_changed) * self.ratio();
            self.free_blocks = if used {
                self.free_blocks.saturating_sub(blocks)
            } else {
                self.free_blocks.saturating_add(blocks)
            };
            changed += u64::from(n_changed);
            b = gend;
        }
        Ok(changed)
    }

    /// The groups that blocks `[start, start + len)` lie in.
    pub fn groups_of(&self, start: u64, len: u64) -> std::ops::RangeInclusive<u32> {
        let last = start.saturating_add(len.max(1) - 1);
        self.geo.group_of_block(start)..=self.geo.group_of_block(last)
    }

    /// Takes inode `ino` (`used`) or gives it back, with the group's and
    /// superblock's counts, the directory count for a directory, and the
    /// uninit bookkeeping of `how`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode outside the filesystem or a bitmap
    /// that cannot be read.
    pub fn mark_inode(&mut self, ino: u32, used: bool, dir: bool, how: InodeInit) -> Result<()> {
        let (g, i) = self.inode_pos(ino)?;
        let ipg = self.geo.inodes_per_group;
        if used && self.is_inode_uninit(g) {
            let d = &mut self.descs[g as usize];
            match how {
                InodeInit::Kernel => {
                    d.set_flags(d.flags() & !BG_INODE_UNINIT);
                    d.set_itable_unused(ipg);
                }
                InodeInit::Libext2fs => {
                    d.set_flags(d.flags() & !(BG_INODE_UNINIT | BG_BLOCK_UNINIT));
                    d.set_itable_unused(0);
                }
            }
            self.inode_maps
                .borrow_mut()
                .insert(g, Bitmap::new(ipg, self.geo.block_size));
        }
        self.load_inode_map(g)?;
        let was = {
            let mut maps = self.inode_maps.borrow_mut();
            let m = maps
                .get_mut(&g)
                .ok_or_else(|| bad("inode bitmap", format!("{g}")))?;
            let was = m.get(i);
            m.set_range(i, 1, used);
            was
        };
        if was == used {
            return Ok(());
        }
        let wide = self.wide;
        let gdt_csum = self.gdt_csum;
        let d = &mut self.descs[g as usize];
        let free = d.free_inodes_count(wide);
        let dirs = d.used_dirs_count(wide);
        if used {
            d.set_free_inodes_count(free.saturating_sub(1));
            if dir {
                d.set_used_dirs_count(dirs.saturating_add(1));
            }
            self.free_inodes = self.free_inodes.saturating_sub(1);
        } else {
            d.set_free_inodes_count(free.saturating_add(1));
            if dir {
                d.set_used_dirs_count(dirs.saturating_sub(1));
            }
            self.free_inodes = self.free_inodes.saturating_add(1);
        }
        if gdt_csum {
            d.set_flags(d.flags() & !BG_INODE_UNINIT);
        }
        if gdt_csum && used {
            let first_unused = ipg.saturating_sub(d.itable_unused(wide));
            if i >= first_unused {
                d.set_itable_unused(ipg - i - 1);
            }
        }
        Ok(())
    }

    /// The first free inode in group order from group `start_group`,
    /// wrapping once; reserved inodes are never returned. Groups without
    /// free inodes (by their count) are skipped unread.
    ///
    /// # Errors
    /// A bitmap that cannot be read.
    pub fn find_free_inode(&self, start_group: u32) -> Result<Option<u32>> {
        crate::alloc::find_free_inode(self, start_group)
    }

    /// A group for a new inode: near `parent`'s group for a file; for a
    /// directory, Orlov-style spreading as the kernel does for directories
    /// at the top (a group with above-average free inodes and blocks and
    /// the fewest directories), near the parent below it.
    pub fn inode_group(&self, parent: u32, dir: bool, top_level: bool) -> u32 {
        let gc = self.geo.group_count.max(1);
        let ipg = self.geo.inodes_per_group;
        let pg = parent.saturating_sub(1) / ipg.max(1) % gc;
        if !dir || !top_level {
            return pg;
        }
        let avg_inodes = self.free_inodes / u64::from(gc);
        let avg_blocks = self.free_blocks / self.ratio() / u64::from(gc);
        let mut best: Option<(u32, u32)> = None;
        for k in 0..gc {
            let g = (pg + k) % gc;
            let d = &self.descs[g as usize];
            let fi = u64::from(d.free_inodes_count(self.wide));
            let fb = u64::from(d.free_blocks_count(self.wide));
            if fi < avg_inodes.max(1) || fb < avg_blocks {
                continue;
            }
            let dirs = d.used_dirs_count(self.wide);
            if best.is_none_or(|(_, bd)| dirs < bd) {
                best = Some((g, dirs));
            }
        }
        best.map_or(pg, |(g, _)| g)
    }
}

impl FreeSpace for GroupTable {
    fn first_data_block(&self) -> u64 {
        self.geo.first_data_block
    }

    fn blocks_count(&self) -> u64 {
        self.geo.blocks_count
    }

    fn cluster_mask(&self) -> u64 {
        self.ratio() - 1
    }

    fn first_free(&self, from: u64, to: u64) -> Result<Option<u64>> {
        let to = to.min(self.geo.blocks_count.saturating_sub(1));
        let mut b = from.max(self.geo.first_data_block);
        while b <= to {
            let (g, bit) = self.bit_of(b);
            let gend = self.geo.group_last_block(g).min(to);
            if self.descs[g as usize].free_blocks_count(self.wide) != 0 {
                match self.load_block_map(g) {
                    Err(e) if is_bad_bitmap(&e) => {
                        b = gend + 1;
                        continue;
                    }
                    r => r?,
                }
                let maps = self.block_maps.borrow();
                if let Some(c) = maps[&g].next_clear(bit) {
                    let at = self.block_of(g, c).max(b);
                    if at <= gend {
                        return Ok(Some(at));
                    }
                }
            }
            b = gend + 1;
        }
        Ok(None)
    }

    fn first_used(&self, from: u64, to: u64) -> Result<Option<u64>> {
        if from < self.geo.first_data_block {
            return Ok(Some(from));
        }
        let to = to.min(self.geo.blocks_count.saturating_sub(1));
        let mut b = from;
        while b <= to {
            let (g, bit) = self.bit_of(b);
            let gend = self.geo.group_last_block(g).min(to);
            self.load_block_map(g)?;
            let maps = self.block_maps.borrow();
            let m = &maps[&g];
            let s = m.next_set(bit);
            if s < m.len() {
                let at = self.block_of(g, s).max(b);
                if at <= gend {
                    return Ok(Some(at));
                }
            }
            b = gend + 1;
        }
        Ok(None)
    }

    fn used_end(&self, from: u64, to: u64) -> Result<Option<u64>> {
        let to = to.min(self.geo.blocks_count.saturating_sub(1));
        if from > to {
            return Ok(None);
        }
        // The last used cluster in [from, to], group by group from the end.
        let mut hi = to;
        let last = loop {
            let (g, bit_hi) = self.bit_of(hi);
            let gfirst = self.geo.group_first_block(g).max(from);
            let (_, bit_lo) = self.bit_of(gfirst);
            self.load_block_map(g)?;
            let found = self.block_maps.borrow()[&g].last_set(bit_lo, bit_hi + 1);
            if let Some(bit) = found {
                break Some((g, bit));
            }
            if gfirst <= from {
                break None;
            }
            hi = gfirst - 1;
        };
        let Some((mut g, bit)) = last else {
            return Ok(None);
        };
        // Then the end of its run, which may go on into later groups.
        let mut next = bit + 1;
        loop {
            let maps = self.block_maps.borrow();
            let m = &maps[&g];
            if next < m.len() {
                let c = m.next_clear(next).unwrap_or(m.len());
                if c < m.len() {
                    return Ok(Some(self.block_of(g, c)));
                }
            }
            drop(maps);
            if g + 1 >= self.geo.group_count {
                return Ok(Some(self.geo.blocks_count));
            }
            g += 1;
            next = 0;
            self.load_block_map(g)?;
        }
    }
}

impl BlockAlloc for GroupTable {
    type Space = Self;

    fn space(&self) -> &Self {
        self
    }

    fn geo(&self) -> &Geometry {
        &self.geo
    }

    fn log_groups_per_flex(&self) -> u32 {
        self.log_flex
    }

    fn group_free(&self, g: u32) -> i64 {
        self.descs
            .get(g as usize)
            .map_or(0, |d| i64::from(d.free_blocks_count(self.wide)))
    }

    fn take_range(&mut self, start: u64, len: u64) -> Result<()> {
        self.mark_blocks(start, len, true).map(|_| ())
    }

    fn alloc_block(&mut self, goal: u64) -> Result<u64> {
        let b = crate::alloc::new_block(&*self, goal)?.ok_or(Error::NoSpace)?;
        self.mark_blocks(b, 1, true)?;
        Ok(b)
    }
}

impl crate::alloc::InodeSpace for GroupTable {
    fn inodes_per_group(&self) -> u32 {
        self.geo.inodes_per_group
    }
    fn group_count(&self) -> u32 {
        self.geo.group_count
    }
    fn first_ino(&self) -> u32 {
        self.first_ino
    }
    fn may_hold(&self, g: u32) -> bool {
        self.descs
            .get(g as usize)
            .is_some_and(|d| d.free_inodes_count(self.wide) != 0)
    }
    fn first_free_in(&self, g: u32, from: u32) -> Result<Option<u32>> {
        match self.load_inode_map(g) {
            Err(e) if is_bad_bitmap(&e) => return Ok(None),
            r => r?,
        }
        Ok(self.inode_maps.borrow()[&g].next_clear(from))
    }
}

#[cfg(test)]
mod tests {
    use super::padding_set;

    #[test]
    fn bitmap_padding_must_be_set() {
        assert!(padding_set(&[0x00, 0xff], 8));
        assert!(padding_set(&[0xf0, 0xff], 4));
        assert!(!padding_set(&[0x70, 0xff], 4));
        assert!(!padding_set(&[0x00, 0xfe], 8));
        assert!(padding_set(&[0x12, 0x34], 16));
    }
}
