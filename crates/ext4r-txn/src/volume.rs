//! A filesystem opened for changing: its device, superblock, group table
//! and journal, and the blocks committed to the journal but not yet
//! written home. Every change is made in a [`Transaction`] begun here.

use crate::csum::{BlockKind, Checksums};
use crate::device::BlockDevice;
use crate::error::{Error, Location, Result};
use crate::groups::{read_descs, GroupTable};
use crate::journal::{
    recover_filesystem, recover_filesystem_with, Journal, JournalLocation, JournalWriter,
};
use crate::map::{self, BlockSource};
use crate::txn::Transaction;
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::inode::Inode;
use ext4r_format::num;
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ext4r_format::{BlockNr, FormatError};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The journal inode.
pub const JOURNAL_INO: u32 = 8;

/// Whether transactions go through the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JournalUse {
    /// Through the filesystem's internal journal when it has one; in place
    /// (in a safe order) otherwise.
    #[default]
    Auto,
    /// Always in place: bulk rewrites (tune's) and repairs (a checker's,
    /// which may not trust the journal).
    Off,
}

/// When committed transactions are written to their home locations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checkpoint {
    /// Right after each commit: the journal is empty between transactions
    /// (`needs_recovery` stays set until [`Volume::checkpoint`] or
    /// [`Volume::close`], as while the kernel has it mounted).
    #[default]
    EachCommit,
    /// When the journal is full, and at [`Volume::checkpoint`] or
    /// [`Volume::close`] (the kernel's way: fewer writes, and a crash
    /// leaves committed transactions for recovery to replay).
    Deferred,
}

/// How to open a volume.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct VolumeOptions {
    /// Journal use.
    pub journal: JournalUse,
    /// Checkpoint policy.
    pub checkpoint: Checkpoint,
    /// The time to record (seconds since the epoch); the system's when
    /// `None`.
    pub now: Option<i64>,
    /// Replay a journal that needs recovery before opening (as a mount
    /// does). Without it such a filesystem is refused.
    pub recover: bool,
    /// Replays the fast commits such a recovery finds (the engine's); a
    /// recovery that finds fast commits without it is refused.
    pub fast_commit: Option<Arc<dyn crate::journal::FastCommitReplay>>,
    /// Change metadata without checking its checksums first: for a
    /// checker's repairs and for rewrites that stamp every checksum anew
    /// (tune's). By default (and as the kernel) a transaction refuses to
    /// build on a block or inode whose checksum does not match:
    /// [`crate::txn::Transaction::block_mut`] and
    /// [`crate::txn::Transaction::inode_mut`] give [`Error::Corrupt`]
    /// instead, and nothing is written, so the damage stays for fsck to
    /// see.
    pub unverified: bool,
}

/// A filesystem opened for changing.
pub struct Volume {
    pub(crate) dev: Arc<dyn BlockDevice>,
    pub(crate) sb: Superblock,
    pub(crate) geo: Geometry,
    pub(crate) csum: Checksums,
    pub(crate) groups: GroupTable,
    pub(crate) journal: Option<JournalWriter>,
    /// Committed to the journal, not yet written home.
    pub(crate) pending: BTreeMap<u64, Vec<u8>>,
    /// `needs_recovery` is set in the superblock on disk.
    pub(crate) recover_on_disk: bool,
    pub(crate) opts: VolumeOptions,
    /// Something was written since the open (a recovery, a commit): only
    /// then does [`Volume::close`] write anything.
    pub(crate) changed: bool,
    /// In-place commits leave `needs_recovery` as the superblock says
    /// rather than clearing it (a checker's volume, see
    /// [`Volume::open_checked`]).
    pub(crate) recover_as_given: bool,
    /// The first block and the number of inode groups allocations may not
    /// reach, and block ranges they may not take (see
    /// [`Volume::set_alloc_limits`]).
    pub(crate) limits: (u64, u32, Vec<(u64, u64)>),
    /// Metadata blocks read from the device and found to match their
    /// checksum, with the kind they were checked as: read again, they
    /// need no second check, as the kernel's buffer cache remembers a
    /// verified buffer. Nothing but this volume writes the device while
    /// it is open (the writers' lock), and what it writes it stamps.
    pub(crate) verified: std::sync::Mutex<std::collections::HashSet<(u64, BlockKind)>>,
    /// Windows of inode-table blocks announced to the device already
    /// (see [`Volume::inode_table_ahead`]), by their first block.
    pub(crate) announced: std::sync::Mutex<std::collections::HashSet<u64>>,
}

/// Inode-table blocks announced at once when one of them is read: the
/// kernel's `inode_readahead_blks` default (ext4_get_inode_loc reads this
/// many blocks of the table around the one it needs), so that a walk over
/// the inodes of a directory waits for the disk once per window rather
/// than once per block.
const INODE_READAHEAD_BLOCKS: u64 = 32;

/// Announced windows remembered at most before the record starts over
/// (a hint given twice costs one system call).
const ANNOUNCED_MAX: usize = 4096;

impl std::fmt::Debug for Volume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Volume")
            .field("geometry", &self.geo)
            .field("journal", &self.journal.is_some())
            .finish_non_exhaustive()
    }
}

fn read_primary(dev: &dyn BlockDevice) -> Result<Superblock> {
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET)?;
    let sb = Superblock::parse(&buf).map_err(|e| Error::corrupt("superblock", e))?;
    sb.validate().map_err(|e| Error::corrupt("superblock", e))?;
    Ok(sb)
}

/// The blocks of the internal journal, from inode 8's mapping.
fn internal_journal(
    dev: &Arc<dyn BlockDevice>,
    sb: &Superblock,
    geo: &Geometry,
) -> Result<JournalLocation> {
    let descs = read_descs(dev.as_ref(), geo, geo.first_data_block)?;
    let raw = RawSource { dev, geo };
    let rec = read_inode_record(&raw, geo, &descs, sb.desc_size() >= 64, JOURNAL_INO)?;
    let inode = Inode::parse(&rec).map_err(|e| Error::corrupt("journal inode", e))?;
    let runs = map::runs(&raw, JOURNAL_INO, &inode, false)?;
    let bs = u64::from(geo.block_size);
    let len = inode.size() / bs;
    let mut blocks = vec![BlockNr(0); len.min(1 << 26) as usize];
    for r in runs {
        for k in 0..r.len {
            if let Some(slot) = blocks.get_mut(num::index(r.logical + k)) {
                *slot = BlockNr(r.physical + k);
            }
        }
    }
    Ok(JournalLocation::internal(blocks))
}

/// Reads blocks straight from the device (before a volume exists).
struct RawSource<'a> {
    dev: &'a Arc<dyn BlockDevice>,
    geo: &'a Geometry,
}

impl BlockSource for RawSource<'_> {
    fn block_size(&self) -> u32 {
        self.geo.block_size
    }
    fn block_range(&self) -> (u64, u64) {
        (self.geo.first_data_block, self.geo.blocks_count)
    }
    fn read_block(&self, nr: u64, what: &str) -> Result<Vec<u8>> {
        self.check_blocks(nr, 1, what)?;
        let mut b = vec![0u8; self.geo.block_size as usize];
        self.dev
            .read_at(&mut b, nr * u64::from(self.geo.block_size))?;
        Ok(b)
    }
}

/// Block and byte offset in it of inode `ino`'s record.
pub(crate) fn inode_place(
    geo: &Geometry,
    descs: &[ext4r_format::group_desc::GroupDesc],
    wide: bool,
    ino: u32,
) -> Result<(u64, usize)> {
    let ipg = geo.inodes_per_group;
    let bad = |d: String| Error::corrupt(Location::inode(ino), FormatError::invalid("inode", d));
    if ino == 0 || u64::from(ino) > u64::from(ipg) * u64::from(geo.group_count) {
        return Err(bad("outside the filesystem".into()));
    }
    let g = (ino - 1) / ipg;
    let idx = u64::from((ino - 1) % ipg);
    let table = descs[g as usize].inode_table(wide);
    let byte = idx * u64::from(geo.inode_size);
    let bs = u64::from(geo.block_size);
    let block = table + byte / bs;
    if table == 0 || block >= geo.blocks_count {
        return Err(bad(format!("group {g}'s inode table is at block {table}")));
    }
    Ok((block, num::index(byte % bs)))
}

fn read_inode_record(
    src: &impl BlockSource,
    geo: &Geometry,
    descs: &[ext4r_format::group_desc::GroupDesc],
    wide: bool,
    ino: u32,
) -> Result<Vec<u8>> {
    let (block, off) = inode_place(geo, descs, wide, ino)?;
    let b = src.read_block(block, &format!("inode {ino}"))?;
    Ok(b[off..off + geo.inode_size as usize].to_vec())
}

/// The kernel's `ext4_check_descriptors`, which refuses a read-write
/// mount: each group's bitmaps and inode table inside its group (anywhere
/// in the filesystem with flex_bg), none of them on the superblock or
/// group 0's descriptor blocks, and (with uninit_bg or metadata_csum) each
/// descriptor's own checksum right. A writer that went on would place
/// blocks by a table it cannot trust, and stamp a fresh checksum over it.
fn check_descriptors(
    sb: &Superblock,
    geo: &Geometry,
    groups: &GroupTable,
    csum: &Checksums,
) -> Result<()> {
    let flex = sb.has_incompat(Incompat::FLEX_BG);
    let wide = groups.wide();
    let sb_block = geo.first_data_block;
    let gdt_blocks = match geo.meta_bg {
        Some(first_meta) => u64::from(first_meta.min(geo.desc_blocks()).max(1)),
        None => u64::from(geo.desc_blocks()),
    };
    let itb = u64::from(geo.inode_blocks_per_group());
    let fail = |g: u32, what: &'static str, detail: String| {
        Err(Error::corrupt(
            Location::group(g).of(what),
            FormatError::invalid(what, detail),
        ))
    };
    for (g, d) in (0u32..).zip(groups.descs()) {
        let (first, last) = if flex {
            (geo.first_data_block, geo.blocks_count.saturating_sub(1))
        } else {
            (geo.group_first_block(g), geo.group_last_block(g))
        };
        for (what, at, len) in [
            ("block bitmap", d.block_bitmap(wide), 1),
            ("inode bitmap", d.inode_bitmap(wide), 1),
            ("inode table", d.inode_table(wide), itb.max(1)),
        ] {
            let end = at.saturating_add(len - 1);
            if at == sb_block {
                return fail(g, what, format!("block {at} overlaps the superblock"));
            }
            if at > sb_block && at <= sb_block + gdt_blocks {
                return fail(
                    g,
                    what,
                    format!("block {at} overlaps the group descriptors"),
                );
            }
            if at < first || end > last {
                return fail(
                    g,
                    what,
                    format!("blocks {at}-{end} are not within blocks {first}-{last}"),
                );
            }
        }
        if !csum.desc_ok(g, d) {
            return fail(g, "group descriptor", "checksum does not match".into());
        }
    }
    Ok(())
}

impl Volume {
    /// The primary superblock as it is on `dev`, before a journal is
    /// replayed: what a caller checks (features it can handle) before
    /// [`Volume::open`] changes anything, as the kernel's mount checks the
    /// features before it loads the journal. Its checksum is verified
    /// unless `unverified`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a superblock that does not parse or fails
    /// its checksum, I/O errors.
    pub fn peek_superblock(dev: &dyn BlockDevice, unverified: bool) -> Result<Superblock> {
        let sb = read_primary(dev)?;
        if !unverified {
            sb.verify_checksum()
                .map_err(|e| Error::corrupt("superblock", e))?;
        }
        Ok(sb)
    }

    /// Opens the filesystem on `dev` for changing.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the superblock or descriptors are unusable,
    /// [`Error::InvalidArgument`] when the journal needs recovery and
    /// `opts.recover` is off, I/O errors.
    pub fn open(dev: Arc<dyn BlockDevice>, opts: VolumeOptions) -> Result<Self> {
        let mut sb = read_primary(dev.as_ref())?;
        // As the kernel's mount, before anything else is read: a
        // superblock failing its checksum is not built on (and rewriting
        // it would restamp a good checksum over the damage).
        if !opts.unverified {
            sb.verify_checksum()
                .map_err(|e| Error::corrupt("superblock", e))?;
        }
        let geo = Geometry::from_superblock(&sb).map_err(|e| Error::corrupt("superblock", e))?;
        if geo.blocks_count.saturating_mul(u64::from(geo.block_size)) > dev.size() {
            return Err(Error::InvalidArgument(format!(
                "the filesystem has {} blocks but the device holds {} bytes",
                geo.blocks_count,
                dev.size()
            )));
        }
        let has_journal = sb.has_compat(Compat::HAS_JOURNAL) && sb.s_journal_inum.get() != 0;
        let mut journal = None;
        let mut recovered = false;
        if has_journal {
            let loc = internal_journal(&dev, &sb, &geo)?;
            let j = Journal::open(Arc::clone(&dev), loc, geo.block_size)?;
            if sb.has_incompat(Incompat::RECOVER) || j.needs_recovery() {
                if !opts.recover {
                    return Err(Error::InvalidArgument(
                        "the journal needs recovery (replay it first, as a mount or fsck does)"
                            .into(),
                    ));
                }
                match opts.fast_commit.as_deref() {
                    Some(fc) => recover_filesystem_with(&dev, &j, fc)?,
                    None => recover_filesystem(dev.as_ref(), &j)?,
                };
                sb = read_primary(dev.as_ref())?;
                recovered = true;
            }
            if opts.journal == JournalUse::Auto {
                let j = Journal::open(Arc::clone(&dev), j.location().clone(), geo.block_size)?;
                journal = Some(JournalWriter::open(&j, sb.desc_size() >= 64)?);
            }
        } else if sb.has_incompat(Incompat::RECOVER) {
            return Err(Error::InvalidArgument(
                "needs_recovery is set but the filesystem has no internal journal".into(),
            ));
        }
        let descs = read_descs(dev.as_ref(), &geo, geo.first_data_block)?;
        let mut groups = GroupTable::new(Arc::clone(&dev), &sb, descs)?;
        let csum = Checksums::new(&sb);
        if !opts.unverified {
            check_descriptors(&sb, &geo, &groups, &csum)?;
            groups.verify_bitmaps(Some(csum.clone()));
        }
        Ok(Volume {
            csum,
            recover_on_disk: sb.has_incompat(Incompat::RECOVER),
            dev,
            sb,
            geo,
            groups,
            journal,
            pending: BTreeMap::new(),
            opts,
            changed: recovered,
            recover_as_given: false,
            limits: (u64::MAX, u32::MAX, Vec::new()),
            verified: Default::default(),
            announced: Default::default(),
        })
    }

    /// Opens the filesystem on `dev` with the superblock `sb` the caller
    /// holds (already read, maybe changed in memory: a tool that applies
    /// feature changes before it writes). No journal is used and none is
    /// recovered: the caller made sure it needs none.
    ///
    /// # Errors
    /// As [`Volume::open`].
    pub fn open_with_superblock(
        dev: Arc<dyn BlockDevice>,
        sb: Superblock,
        mut opts: VolumeOptions,
    ) -> Result<Self> {
        opts.journal = JournalUse::Off;
        let geo = Geometry::from_superblock(&sb).map_err(|e| Error::corrupt("superblock", e))?;
        let descs = read_descs(dev.as_ref(), &geo, geo.first_data_block)?;
        let mut groups = GroupTable::new(Arc::clone(&dev), &sb, descs)?;
        let csum = Checksums::new(&sb);
        if !opts.unverified {
            check_descriptors(&sb, &geo, &groups, &csum)?;
            groups.verify_bitmaps(Some(csum.clone()));
        }
        Ok(Volume {
            csum,
            recover_on_disk: false,
            dev,
            sb,
            geo,
            groups,
            journal: None,
            pending: BTreeMap::new(),
            opts,
            // The caller's superblock may differ from the one on disk.
            changed: true,
            recover_as_given: false,
            limits: (u64::MAX, u32::MAX, Vec::new()),
            verified: Default::default(),
            announced: Default::default(),
        })
    }

    /// Opens the filesystem on `dev` as a checker sees it: the superblock
    /// `sb` and descriptors `descs` it chose (a backup's, when the primary
    /// ones were unusable) and changed in memory. The journal is neither
    /// recovered nor used (commits are in place), and `needs_recovery`
    /// stays as `sb` says: the checker judges the journal itself, and may
    /// set the flag to have a journal with data replayed next (e2fsck's
    /// "Run journal anyway").
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the superblock's geometry is unusable or
    /// there is not one descriptor per group.
    pub fn open_checked(
        dev: Arc<dyn BlockDevice>,
        sb: Superblock,
        descs: Vec<ext4r_format::group_desc::GroupDesc>,
        mut opts: VolumeOptions,
    ) -> Result<Self> {
        opts.journal = JournalUse::Off;
        // A checker repairs what fails its checksum.
        opts.unverified = true;
        let geo = Geometry::from_superblock(&sb).map_err(|e| Error::corrupt("superblock", e))?;
        let groups = GroupTable::new(Arc::clone(&dev), &sb, descs)?;
        Ok(Volume {
            csum: Checksums::new(&sb),
            recover_on_disk: false,
            dev,
            sb,
            geo,
            groups,
            journal: None,
            pending: BTreeMap::new(),
            opts,
            changed: true,
            recover_as_given: true,
            limits: (u64::MAX, u32::MAX, Vec::new()),
            verified: Default::default(),
            announced: Default::default(),
        })
    }

    /// The superblock as committed so far.
    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The group table as committed so far.
    pub fn groups(&self) -> &GroupTable {
        &self.groups
    }

    /// Whether metadata read to be changed has its checksum verified
    /// first (the filesystem has checksums and the volume was not opened
    /// [`VolumeOptions::unverified`]).
    pub fn verifies(&self) -> bool {
        !self.opts.unverified && self.csum.metadata_csum()
    }

    /// Whether block `nr` was read and found to match its checksum as a
    /// block of kind `kind` (see [`Volume::note_verified`]).
    pub fn was_verified(&self, nr: u64, kind: BlockKind) -> bool {
        self.verified.lock().is_ok_and(|v| v.contains(&(nr, kind)))
    }

    /// Remembers that block `nr` matched its checksum as kind `kind`. The
    /// set is bounded: past a million blocks it starts again.
    pub fn note_verified(&self, nr: u64, kind: BlockKind) {
        if let Ok(mut v) = self.verified.lock() {
            if v.len() >= 1 << 20 {
                v.clear();
            }
            v.insert((nr, kind));
        }
    }

    /// The checksums of this filesystem.
    pub fn checksums(&self) -> &Checksums {
        &self.csum
    }

    /// The device.
    pub fn device(&self) -> &Arc<dyn BlockDevice> {
        &self.dev
    }

    /// Blocks of the journal's log, when transactions go through one.
    pub fn journal_blocks(&self) -> Option<u64> {
        self.journal.as_ref().map(|j| j.log_blocks())
    }

    /// Whether transactions go through a journal.
    pub fn journaled(&self) -> bool {
        self.journal.is_some()
    }

    /// Keeps every allocation below block `blocks`, out of the block
    /// ranges `avoid` (`(start, end)`, end exclusive) and in the first
    /// `inode_groups` groups' inodes (`None`: no limit): a filesystem
    /// being emptied for a shrink. Blocks and inodes past the limits can
    /// still be freed, and taken by name.
    pub fn set_alloc_limits(
        &mut self,
        blocks: Option<u64>,
        inode_groups: Option<u32>,
        avoid: &[(u64, u64)],
    ) {
        let mut avoid = avoid.to_vec();
        avoid.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (s, e) in avoid {
            match merged.last_mut() {
                Some(l) if s <= l.1 => l.1 = l.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.limits = (
            blocks.unwrap_or(u64::MAX),
            inode_groups.unwrap_or(u32::MAX),
            merged,
        );
    }

    /// The free space as allocations may take it.
    pub(crate) fn limited_space(&self) -> crate::alloc::Limited<'_, GroupTable> {
        crate::alloc::Limited::new(&self.groups, self.limits.0, self.limits.1, &self.limits.2)
    }

    /// The inodes as allocations may take them.
    pub(crate) fn limited_inodes(&self) -> crate::alloc::Limited<'_, GroupTable> {
        self.limited_space()
    }

    /// Begins a transaction.
    pub fn begin(&mut self) -> Transaction<&mut Volume> {
        Transaction::new(self)
    }

    pub(crate) fn now(&self) -> i64 {
        self.opts.now.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        })
    }

    /// Block `nr` as committed (a block in the journal not yet written
    /// home reads as committed).
    ///
    /// # Errors
    /// [`Error::Corrupt`] outside the filesystem, I/O errors.
    pub fn read_block(&self, nr: u64) -> Result<Vec<u8>> {
        if let Some(b) = self.pending.get(&nr) {
            return Ok(b.clone());
        }
        self.check_blocks(nr, 1, "block")?;
        let mut b = vec![0u8; self.geo.block_size as usize];
        self.dev
            .read_at(&mut b, nr * u64::from(self.geo.block_size))?;
        Ok(b)
    }

    /// Block and offset of inode `ino`'s record.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode outside the filesystem or an inode
    /// table out of place.
    pub fn inode_place(&self, ino: u32) -> Result<(u64, usize)> {
        inode_place(&self.geo, self.groups.descs(), self.groups.wide(), ino)
    }

    /// Announces to the device the window of [`INODE_READAHEAD_BLOCKS`]
    /// blocks of `ino`'s inode table around `block` (where its record
    /// lies), once per window, before the block is read: the device
    /// fetches the rest while the caller works on the first inode, as the
    /// kernel reads inode tables ahead. A hint: nothing else changes.
    pub(crate) fn inode_table_ahead(&self, ino: u32, block: u64) {
        if self.pending.contains_key(&block) || self.geo.inodes_per_group == 0 {
            return;
        }
        let g = (ino - 1) / self.geo.inodes_per_group;
        let Ok(d) = self.groups.desc(g) else {
            return;
        };
        let table = d.inode_table(self.groups.wide());
        let table_end = table
            .saturating_add(u64::from(self.geo.inode_blocks_per_group()))
            .min(self.geo.blocks_count);
        let Some(rel) = block.checked_sub(table) else {
            return;
        };
        let start = table + rel / INODE_READAHEAD_BLOCKS * INODE_READAHEAD_BLOCKS;
        let end = (start + INODE_READAHEAD_BLOCKS).min(table_end);
        if end <= start {
            return;
        }
        {
            let Ok(mut seen) = self.announced.lock() else {
                return;
            };
            if seen.len() >= ANNOUNCED_MAX {
                seen.clear();
            }
            if !seen.insert(start) {
                return;
            }
        }
        let bs = u64::from(self.geo.block_size);
        self.dev.will_need(start * bs, (end - start) * bs);
    }

    /// Inode `ino`'s on-disk record, as committed.
    ///
    /// # Errors
    /// As [`Volume::inode_place`], I/O errors.
    pub fn read_inode(&self, ino: u32) -> Result<Vec<u8>> {
        let (block, off) = self.inode_place(ino)?;
        self.inode_table_ahead(ino, block);
        let b = self.read_block(block)?;
        Ok(b[off..off + self.geo.inode_size as usize].to_vec())
    }

    /// Writes every committed transaction home, then marks the journal
    /// empty and clears `needs_recovery`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn checkpoint(&mut self) -> Result<()> {
        if !self.changed && self.pending.is_empty() && !self.recover_on_disk {
            return Ok(());
        }
        self.write_home()?;
        if self.recover_on_disk {
            self.set_recover_on_disk(false)?;
        }
        Ok(())
    }

    /// Writes every committed transaction home and marks the journal
    /// empty, leaving `needs_recovery` set (as the kernel leaves it while
    /// mounted): the superblock, whose write a power cut can tear, is
    /// written when the first transaction starts and at
    /// [`Volume::checkpoint`] or [`Volume::close`], not at every commit.
    ///
    /// # Errors
    /// I/O errors.
    pub fn write_home(&mut self) -> Result<()> {
        if self.pending.is_empty() && !self.changed {
            return Ok(());
        }
        let bs = u64::from(self.geo.block_size);
        // The block holding the primary superblock goes home last, after
        // a flush: the kernel checks the descriptors the superblock on
        // disk describes before it replays the journal (ext4_fill_super),
        // so a superblock of a new size must not land before the
        // descriptor blocks of that size (a resize's switch).
        let sb_block = 1024 / bs;
        let mut sb_data = None;
        for (&b, data) in &self.pending {
            if b == sb_block {
                sb_data = Some(data);
                continue;
            }
            self.dev.write_at(data, b * bs)?;
        }
        if let Some(data) = sb_data {
            self.dev.flush()?;
            self.dev.write_at(data, sb_block * bs)?;
        }
        self.dev.flush()?;
        self.pending.clear();
        if let Some(j) = &mut self.journal {
            j.mark_empty(self.dev.as_ref())?;
        }
        Ok(())
    }

    /// Sets or clears `needs_recovery` in the primary superblock on disk
    /// (and in memory), flushed.
    pub(crate) fn set_recover_on_disk(&mut self, on: bool) -> Result<()> {
        let mut inc = self.sb.s_feature_incompat.get();
        if on {
            inc |= Incompat::RECOVER.bits();
        } else {
            inc &= !Incompat::RECOVER.bits();
        }
        self.sb.s_feature_incompat.set(inc);
        let mut sb = self.sb.clone();
        self.changed = true;
        crate::flush::write_primary(self.dev.as_ref(), &mut sb)?;
        self.recover_on_disk = on;
        Ok(())
    }

    /// Checkpoints, then writes the superblock's backups and the
    /// descriptor table's as libext2fs does when it closes a filesystem —
    /// when anything changed since the open: otherwise the device is left
    /// byte for byte as it was.
    ///
    /// # Errors
    /// I/O errors.
    pub fn close(mut self) -> Result<()> {
        self.checkpoint()?;
        if !self.changed {
            return Ok(());
        }
        let table = crate::flush::descriptor_table(&self.geo, self.groups.descs())?;
        let now = self.now();
        crate::flush::flush_super(self.dev.as_ref(), &mut self.sb, Some(&table), now, false)
    }
}

impl BlockSource for Volume {
    fn block_size(&self) -> u32 {
        self.geo.block_size
    }
    fn block_range(&self) -> (u64, u64) {
        (self.geo.first_data_block, self.geo.blocks_count)
    }
    fn read_block(&self, nr: u64, what: &str) -> Result<Vec<u8>> {
        self.check_blocks(nr, 1, what)?;
        Volume::read_block(self, nr)
    }
}
