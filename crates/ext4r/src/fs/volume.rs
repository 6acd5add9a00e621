//! Opening a filesystem for reading: the superblock and descriptors, the
//! journal replayed in memory, and [`Filesystem`] as a block and inode
//! source for the object model.

use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::GroupDesc;
use ext4r_format::num;
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ext4r_format::{FormatError, GroupNr};

use crate::device::BlockDevice;
use crate::error::{Error, Result};
use crate::journal::{Journal, JournalLocation, JournalOverlay};
use crate::object::InodeInfo;
use ext4r_txn::csum::Checksums;
use ext4r_txn::map::{BlockSource, Run};

/// Inode table bytes read at once (see `inode.rs`): the last chunk read,
/// as (byte offset on the device, bytes).
pub(crate) type ItableCache = std::sync::Mutex<Option<(u64, Vec<u8>)>>;

/// How to open a filesystem.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenOptions {
    /// Use the superblock copy at this block number (as `e2fsck -b`);
    /// `None` reads the primary at byte 1024.
    pub superblock: Option<u64>,
    /// Block size to assume with `superblock` (as `e2fsck -B`); `None`
    /// tries each size.
    pub block_size: Option<u32>,
    /// Refuse metadata whose checksum does not match: inodes, extent
    /// tree nodes, directory blocks (leaves and htree nodes) and xattr
    /// blocks, each read giving [`Error::Corrupt`] naming it. On by
    /// default, as in the kernel; turn it off to salvage what a damaged
    /// image still holds (a checker turns it off to see the damage).
    pub verify_checksums: bool,
    /// Also open filesystems whose files are encrypted: metadata stays
    /// readable (a checker needs it), contents and names are ciphertext.
    pub allow_encrypted: bool,
    /// Read the filesystem as it is on disk even when its internal journal
    /// needs recovery (`e2fsck -n` does this). By default a dirty journal
    /// is replayed in memory, never written, so that readers see what the
    /// kernel would after mounting.
    pub skip_journal_replay: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            superblock: None,
            block_size: None,
            verify_checksums: true,
            allow_encrypted: false,
            skip_journal_replay: false,
        }
    }
}

/// An ext2/3/4 filesystem opened for reading.
pub struct Filesystem {
    pub(super) dev: std::sync::Arc<dyn BlockDevice>,
    pub(super) sb: Superblock,
    pub(super) geo: Geometry,
    pub(super) descs: Vec<GroupDesc>,
    pub(super) csum_seed: u32,
    pub(super) checksums: Checksums,
    pub(super) opts: OpenOptions,
    pub(super) itable_cache: ItableCache,
}

impl core::fmt::Debug for Filesystem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Filesystem")
            .field("geometry", &self.geo)
            .finish_non_exhaustive()
    }
}

impl Filesystem {
    /// Opens the filesystem on `dev` with default options.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the superblock or group descriptors are
    /// unusable, [`Error::Unsupported`] naming features this code cannot
    /// read, [`Error::Io`] on device errors.
    pub fn open(dev: impl BlockDevice + 'static) -> Result<Self> {
        Self::open_with(dev, OpenOptions::default())
    }

    /// Opens the filesystem on `dev`.
    ///
    /// # Errors
    /// As [`Filesystem::open`].
    pub fn open_with(dev: impl BlockDevice + 'static, opts: OpenOptions) -> Result<Self> {
        let dev: std::sync::Arc<dyn BlockDevice> = std::sync::Arc::new(dev);
        let fs = Self::open_shared(dev, opts)?;
        if fs.opts.skip_journal_replay || !fs.needs_internal_recovery() {
            return Ok(fs);
        }
        let overlay = fs.replayed()?;
        let mut opts = fs.opts.clone();
        opts.skip_journal_replay = true;
        Self::open_shared(std::sync::Arc::new(overlay), opts)
    }

    /// Whether the internal journal has transactions to replay.
    fn needs_internal_recovery(&self) -> bool {
        self.sb.has_incompat(Incompat::RECOVER)
            && self
                .sb
                .has_compat(ext4r_format::features::Compat::HAS_JOURNAL)
            && self.sb.s_journal_inum.get() != 0
    }

    /// Where the internal journal's blocks are (journal block i → its
    /// filesystem block; 0 for a hole), or `None` without one.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the journal inode or its mapping is broken.
    pub fn journal_location(&self) -> Result<Option<JournalLocation>> {
        let inum = self.sb.s_journal_inum.get();
        if !self
            .sb
            .has_compat(ext4r_format::features::Compat::HAS_JOURNAL)
            || inum == 0
        {
            return Ok(None);
        }
        let info = self.inode(ext4r_format::InodeNr(inum))?;
        let runs = self.runs(&info)?;
        let len = runs.last().map_or(0, |r| r.end());
        let mut blocks = vec![ext4r_format::BlockNr(0); num::index(len)];
        for r in &runs {
            for k in 0..r.len {
                blocks[num::index(r.logical + k)] = ext4r_format::BlockNr(r.physical + k);
            }
        }
        Ok(Some(JournalLocation::internal(blocks)))
    }

    /// The device as it reads after the journal is replayed in memory.
    fn replayed(&self) -> Result<JournalOverlay<std::sync::Arc<dyn BlockDevice>>> {
        let Some(location) = self.journal_location()? else {
            return Err(Error::InvalidArgument("no internal journal".into()));
        };
        let journal = Journal::open(self.dev.clone(), location, self.geo.block_size)?;
        let mut recovery = journal.recover(self.geo.blocks_count, self.geo.inode_size as usize);
        // Fast commits replayed in memory too, as a read-only mount does.
        let fc = crate::write::FastCommitReplayer::default();
        let extra = crate::journal::replay_fast_commits(&self.dev, &mut recovery, &fc)?;
        let mut overlay = JournalOverlay::recovered(self.dev.clone(), recovery)?;
        if let Some(extra) = extra {
            overlay.add(&extra);
        }
        Ok(overlay)
    }

    fn open_shared(dev: std::sync::Arc<dyn BlockDevice>, opts: OpenOptions) -> Result<Self> {
        let (sb, sb_block) = read_superblock(dev.as_ref(), &opts)?;
        let geo = Geometry::from_superblock(&sb).map_err(|e| Error::corrupt("superblock", e))?;
        // Every block number below s_blocks_count is turned into a byte
        // offset; a count whose bytes overflow u64 is no filesystem.
        if geo
            .blocks_count
            .checked_mul(u64::from(geo.block_size))
            .is_none()
        {
            return Err(Error::corrupt(
                "superblock",
                FormatError::invalid(
                    "s_blocks_count",
                    format!("{} blocks overflow the byte range", geo.blocks_count),
                ),
            ));
        }
        check_features(&sb, opts.allow_encrypted)?;
        let mut descs = ext4r_txn::groups::read_descs(dev.as_ref(), &geo, sb_block)?;
        if sb_block > geo.first_data_block {
            forget_uninit(&sb, &mut descs);
        }
        let csum_seed = sb.csum_seed();
        Ok(Filesystem {
            dev,
            checksums: Checksums::new(&sb),
            sb,
            geo,
            descs,
            csum_seed,
            opts,
            itable_cache: std::sync::Mutex::new(None),
        })
    }

    /// The superblock in use.
    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    /// The layout numbers.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.geo.block_size
    }

    /// The descriptor of group `g`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when `g` is past the last group.
    pub fn group_desc(&self, g: GroupNr) -> Result<&GroupDesc> {
        self.descs.get(g.0 as usize).ok_or_else(|| {
            Error::corrupt(
                format!("group {}", g.0),
                FormatError::invalid("group number", "past the last group"),
            )
        })
    }

    /// All group descriptors, in group order.
    pub fn group_descs(&self) -> &[GroupDesc] {
        &self.descs
    }

    /// The device underneath.
    pub fn device(&self) -> &dyn BlockDevice {
        self.dev.as_ref()
    }

    /// The device underneath, shared (for a reader thread).
    pub fn device_shared(&self) -> std::sync::Arc<dyn BlockDevice> {
        self.dev.clone()
    }

    pub(crate) fn is_64bit(&self) -> bool {
        self.sb.has_incompat(Incompat::BIT64)
    }

    pub(crate) fn has_csum(&self) -> bool {
        self.sb.has_ro_compat(RoCompat::METADATA_CSUM)
    }

    pub(crate) fn csum_seed(&self) -> u32 {
        self.csum_seed
    }

    pub(crate) fn verify(&self) -> bool {
        self.opts.verify_checksums && self.has_csum()
    }

    /// Checks that `count` blocks from `block` lie inside the filesystem.
    pub(crate) fn check_blocks(&self, block: u64, count: u64, what: &str) -> Result<()> {
        BlockSource::check_blocks(self, block, count, what)
    }

    /// The data runs of an inode, sorted by logical block, coalesced, not
    /// overlapping. Inline-data inodes and fast symlinks have none.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the inode and block of a broken extent
    /// tree or block map: bad magic, depth, out-of-range or overlapping
    /// blocks, a node reached twice, a checksum mismatch when verifying.
    pub fn runs(&self, info: &InodeInfo) -> Result<Vec<Run>> {
        let fast = crate::object::is_fast_symlink(&self.sb, &info.inode);
        ext4r_txn::map::runs(self, info.ino.0, &info.inode, fast)
    }

    /// Reads `buf.len()` bytes starting at block `block`, which must lie in
    /// the filesystem; `what` names the reader for the error.
    pub(crate) fn read_blocks(&self, block: u64, buf: &mut [u8], what: &str) -> Result<()> {
        let bs = u64::from(self.geo.block_size);
        let count = (buf.len() as u64).div_ceil(bs);
        self.check_blocks(block, count.max(1), what)?;
        self.dev.read_at(buf, block * bs)
    }

    /// Reads one block into a new buffer.
    pub(crate) fn read_block(&self, block: u64, what: &str) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.geo.block_size as usize];
        self.read_blocks(block, &mut buf, what)?;
        Ok(buf)
    }
}

impl crate::object::Source for Filesystem {
    fn superblock(&self) -> &Superblock {
        &self.sb
    }

    fn inode(&self, ino: ext4r_format::InodeNr) -> Result<InodeInfo> {
        Filesystem::inode(self, ino)
    }

    fn read_run(&self, first: u64, buf: &mut [u8], what: &dyn Fn() -> String) -> Result<()> {
        // The name is built only for the error (see `Source::read_run`).
        let bs = u64::from(self.geo.block_size);
        let count = (buf.len() as u64).div_ceil(bs).max(1);
        if self.check_blocks(first, count, "").is_err() {
            self.check_blocks(first, count, &what())?;
        }
        self.read_blocks(first, buf, "")
    }
}

impl BlockSource for Filesystem {
    fn block_size(&self) -> u32 {
        self.geo.block_size
    }

    fn block_range(&self) -> (u64, u64) {
        (self.geo.first_data_block, self.geo.blocks_count)
    }

    fn read_block(&self, nr: u64, what: &str) -> Result<Vec<u8>> {
        Filesystem::read_block(self, nr, what)
    }

    fn verify(&self) -> Option<&Checksums> {
        Filesystem::verify(self).then_some(&self.checksums)
    }
}

/// Reads and validates the superblock, returning it and the block it was
/// found at (for locating the descriptors of a backup).
fn read_superblock(dev: &dyn BlockDevice, opts: &OpenOptions) -> Result<(Superblock, u64)> {
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    let Some(block) = opts.superblock else {
        dev.read_at(&mut buf, SUPERBLOCK_OFFSET)?;
        let sb = parse_sb(&buf, "superblock", opts.verify_checksums)?;
        let b = u64::from(sb.s_first_data_block.get());
        return Ok((sb, b));
    };
    let sizes: Vec<u32> = match opts.block_size {
        Some(s) => vec![s],
        None => (0..7).map(|l| 1024u32 << l).collect(),
    };
    let mut last = None;
    for bs in sizes {
        let Some(off) = block.checked_mul(u64::from(bs)) else {
            continue;
        };
        if off.saturating_add(SUPERBLOCK_SIZE as u64) > dev.size() {
            continue;
        }
        dev.read_at(&mut buf, off)?;
        match parse_sb(
            &buf,
            &format!("superblock at block {block}"),
            opts.verify_checksums,
        ) {
            Ok(sb) if sb.block_size() == Some(bs) => return Ok((sb, block)),
            Ok(_) => {}
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        Error::corrupt(
            format!("superblock at block {block}"),
            FormatError::invalid("superblock", "no valid superblock there for any block size"),
        )
    }))
}

/// The superblock in `buf`, validated; with `verify`, its checksum
/// checked too (metadata_csum), as the kernel's mount checks it.
fn parse_sb(buf: &[u8], location: &str, verify: bool) -> Result<Superblock> {
    let sb = Superblock::parse(buf).map_err(|e| Error::corrupt(location, e))?;
    sb.validate().map_err(|e| Error::corrupt(location, e))?;
    if verify {
        sb.verify_checksum()
            .map_err(|e| Error::corrupt(location, e))?;
    }
    Ok(sb)
}

fn check_features(sb: &Superblock, allow_encrypted: bool) -> Result<()> {
    let mut known = crate::support::incompat(crate::support::Access::Read);
    if allow_encrypted {
        known |= Incompat::ENCRYPT;
    }
    let unknown = Incompat::from_bits_retain(sb.s_feature_incompat.get()) - known;
    if unknown.is_empty() {
        return Ok(());
    }
    let names: Vec<String> =
        ext4r_format::features::Features::from_raw(0, unknown.bits(), 0).names();
    Err(Error::Unsupported(names.join(", ")))
}

/// Reads the group descriptor table. With a backup superblock the table
/// follows it in the same group (meta_bg tables are found in their groups
/// as usual, since their primary copies are not in group 0).
/// A backup descriptor table was written when its superblock copy was
/// (at mkfs or resize time); its uninit flags and unused-inode counts say
/// nothing about the groups now. As libext2fs does when it opens a backup,
/// they are dropped (every group is read) and the checksums made to match,
/// so that checking reads every inode table and bitmap in full.
fn forget_uninit(sb: &Superblock, descs: &mut [GroupDesc]) {
    use ext4r_format::features::RoCompat;
    use ext4r_format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
    if !sb.has_ro_compat(RoCompat::METADATA_CSUM) && !sb.has_ro_compat(RoCompat::GDT_CSUM) {
        return;
    }
    let cs = Checksums::new(sb);
    for (g, d) in (0u32..).zip(descs.iter_mut()) {
        d.set_flags(d.flags() & !(BG_BLOCK_UNINIT | BG_INODE_UNINIT));
        d.set_itable_unused(0);
        cs.stamp_desc(g, d);
    }
}
