//! Changing a filesystem: create, write, truncate, unlink, rename, link,
//! set attributes — each operation one atomic change, committed through
//! the jbd2 journal by the write layer (`ext4r_txn`).
//!
//! Operations gather in a running transaction, as the kernel's jbd2 does:
//! each is wholly there or wholly absent after a crash, and [`WriteFs::sync`]
//! (or [`WriteFs::close`]) makes everything before it durable. File data
//! goes to its blocks before the transaction that points at it commits
//! (ordered mode). An operation checks everything it can before changing
//! anything; one that still fails midway (no space for a tree block, an
//! I/O error or corruption found on the way) is rolled back to where it
//! started: the operations before it stay in the running transaction, and
//! nothing of the failed one is ever written. Only a failed commit (an I/O
//! error while writing) leaves the handle unusable.
//!
//! ```
//! use ext4r::device::MemDevice;
//! use ext4r::mkfs::{format, MkfsOptions};
//! use ext4r::write::{NewNode, WriteFs, WriteOptions};
//! use std::sync::Arc;
//!
//! let dev = Arc::new(MemDevice::new(32 << 20));
//! let opts = MkfsOptions { size_bytes: 32 << 20, now: 1_700_000_000, ..Default::default() };
//! format(&*dev, &opts, true).unwrap();
//!
//! let mut fs = WriteFs::open(dev.clone(), WriteOptions::default()).unwrap();
//! let etc = fs.mkdir(2, b"etc", &NewNode::dir(0o755)).unwrap();
//! let f = fs.create(etc, b"hostname", &NewNode::file(0o644)).unwrap();
//! fs.write(f, 0, b"ext4r\n").unwrap();
//! fs.close().unwrap();
//!
//! let ro = ext4r::fs::Filesystem::open(dev).unwrap();
//! let file = ro.resolve("/etc/hostname").unwrap();
//! assert_eq!(file.inode.size(), 6);
//! ```

mod dir;
mod fast_commit;
mod fault;
mod file;
mod handle;
mod htree;
mod inline;
mod keep;
mod look;
mod node;
mod ops;
mod orphan;
mod shift;
mod stats;
mod xattr;

pub use fast_commit::{recover_journal, FastCommitReplayer};
pub use fault::{is_damage, OnError};
pub use handle::File;
pub use node::{NewNode, SetAttr};
pub use stats::FsStats;

use crate::device::{BlockDevice, Cached, FileDevice, OpenMode};
use crate::error::{Error, Result};
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::inode::Timestamp;
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Checkpoint, Volume, VolumeOptions};
use std::path::Path;
use std::sync::Arc;

/// `EROFS`: the image or device lies on something mounted read-only.
const EROFS: i32 = 30;

/// The root directory's inode.
pub const ROOT_INO: u32 = 2;

/// How to open a filesystem for writing.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WriteOptions {
    /// The time stamped on what changes (seconds, nanoseconds since the
    /// epoch); the system clock when `None`.
    pub now: Option<(i64, u32)>,
    /// Commit every operation as it returns (durable at once, slower);
    /// otherwise they gather until [`WriteFs::sync`] or the transaction
    /// grows large.
    pub sync_every_op: bool,
    /// Leave committed transactions in the journal at [`WriteFs::sync`]
    /// (the kernel's way): a crash then leaves work for recovery.
    pub defer_checkpoint: bool,
    /// A read-only view over a device whose writes never reach the image
    /// ([`crate::device::Staged`], as `ext4r mount -o ro` uses): the
    /// filesystem is accepted with the features the read API accepts; a
    /// journal is replayed and orphans are finished in the staging layer
    /// (orphans only where this version could write the filesystem); then
    /// every change through the handle is refused with
    /// [`Error::ReadOnly`].
    pub staged_read_only: bool,
    /// Blocks of the device kept in memory after they are read
    /// ([`Cached`]; 256 by default, 1 MiB of 4 KiB blocks): what a
    /// long-running writer such as a mount goes back to (directory and
    /// inode-table blocks). 0 keeps none, for a writer that seldom reads a
    /// block twice (`mkfs -d` fills a new filesystem: 1.5 MiB less peak
    /// RSS for 50,000 files).
    pub cached_blocks: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            now: None,
            sync_every_op: false,
            defer_checkpoint: false,
            staged_read_only: false,
            cached_blocks: CACHED_BLOCKS,
        }
    }
}

/// Features of the filesystem that decide how things are written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub bs: usize,
    /// The block size again, as the on-disk u32 the format API takes.
    pub bs32: u32,
    pub isz: usize,
    pub extents: bool,
    pub filetype: bool,
    pub dir_index: bool,
    pub csum: bool,
    pub huge_file: bool,
    pub dir_nlink: bool,
    pub largedir: bool,
    pub hash_version: u8,
    pub hash_unsigned: bool,
    pub encrypt: bool,
    pub casefold: bool,
    /// inline_data: new directories and small files kept in the inode.
    pub inline: bool,
    /// ea_inode: values too big for a block kept in inodes of their own.
    pub ea_inode: bool,
    pub ratio: u64,
}

/// The shape of the filesystem `vol` holds.
fn shape_of(vol: &Volume) -> Shape {
    let sb = vol.superblock();
    Shape {
        bs: vol.geometry().block_size as usize,
        bs32: vol.geometry().block_size,
        isz: vol.geometry().inode_size as usize,
        extents: sb.has_incompat(Incompat::EXTENTS),
        filetype: sb.has_incompat(Incompat::FILETYPE),
        dir_index: sb.has_compat(Compat::DIR_INDEX),
        csum: sb.has_ro_compat(RoCompat::METADATA_CSUM),
        huge_file: sb.has_ro_compat(RoCompat::HUGE_FILE),
        dir_nlink: sb.has_ro_compat(RoCompat::DIR_NLINK),
        largedir: sb.has_incompat(Incompat::LARGEDIR),
        hash_version: sb.s_def_hash_version,
        hash_unsigned: sb.s_flags.get() & 0x2 != 0,
        encrypt: sb.has_incompat(Incompat::ENCRYPT),
        casefold: sb.has_incompat(Incompat::CASEFOLD),
        inline: sb.has_incompat(Incompat::INLINE_DATA),
        ea_inode: sb.has_incompat(Incompat::EA_INODE),
        ratio: vol.geometry().cluster_ratio(),
    }
}

/// Metadata blocks a running transaction may gather before it is
/// committed on its own: a quarter of the journal (as jbd2's largest
/// transaction), and no more than [`META_LIMIT`].
fn journal_share(vol: &Volume) -> u64 {
    vol.journal_blocks()
        .map_or(4096, |n| (n / 4).max(64))
        .min(META_LIMIT)
}

/// Metadata blocks gathered before a commit at most, whatever the
/// journal's size: what bounds memory. A transaction holds each changed
/// block, and each changed inode record apart (sixteen of them to a 4 KiB
/// table block), and its commit holds the blocks twice more (the journal's
/// copy, kept until written home). The estimate counted inode records as
/// blocks until 2026-11-30, which committed an `rm -rf` of 50,000 files
/// through a mount fourteen times (3,580 journal blocks, 3,171 distinct:
/// each commit logged again the inode-table blocks it shared with the one
/// before); counted as blocks, with 512 it commits nine times (3,463
/// blocks) and the driver's peak RSS is 14–15 MiB (9–11.5 MiB before;
/// 17–27 MiB with 1,024).
const META_LIMIT: u64 = 512;

/// File data buffered before a commit writes it (bounds memory).
const DATA_LIMIT: u64 = 32 << 20;

/// Blocks read and kept in memory by default (1 MiB of 4 KiB blocks;
/// [`WriteOptions::cached_blocks`]): the directory
/// blocks and inode-table blocks a burst of operations in a few
/// directories goes back to. An `rm -rf` of 50,000 files through a mount
/// read 1.4 GiB from the page cache in 580,000 system calls without it.
const CACHED_BLOCKS: usize = 256;

/// A filesystem opened for changing.
///
/// Operations gather in a running transaction that is committed through
/// the journal when it grows large, on [`WriteFs::sync`] and on
/// [`WriteFs::close`]. Dropping a `WriteFs` without closing it discards
/// the operations not yet committed, as a power cut would: the
/// filesystem stays at its last commit, consistent. After a commit
/// fails, every later call returns [`Error::ReadOnly`] naming that
/// failure; reopening recovers what was committed.
#[must_use = "operations not committed are discarded when a WriteFs is dropped: call close()"]
pub struct WriteFs {
    txn: Transaction<Volume>,
    shape: Shape,
    opts: WriteOptions,
    /// A commit failed (what it said): what it was writing may be half
    /// on disk.
    poisoned: Option<String>,
    /// Orphans the running operation left to finish after it.
    deferred: Vec<orphan::Pending>,
    limit: u64,
    /// Opened as a read-only view ([`WriteOptions::staged_read_only`]).
    read_only_view: bool,
}

impl std::fmt::Debug for WriteFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteFs").finish_non_exhaustive()
    }
}

impl WriteFs {
    /// Opens the filesystem on `dev` for changing; a journal that needs
    /// recovery is replayed first, as a mount does.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] for a device opened for reading only or a
    /// filesystem marked read-only, [`Error::Unsupported`] for features this version cannot write,
    /// [`Error::Corrupt`] for an unusable superblock or descriptors, I/O
    /// errors.
    pub fn open(dev: Arc<dyn BlockDevice>, opts: WriteOptions) -> Result<Self> {
        if dev.read_only() {
            return Err(Error::ReadOnly(
                "the device was opened for reading only (OpenMode::write is false)".into(),
            ));
        }
        let mut vo = VolumeOptions::default();
        vo.recover = true;
        vo.now = opts.now.map(|t| t.0);
        vo.checkpoint = if opts.defer_checkpoint {
            Checkpoint::Deferred
        } else {
            Checkpoint::EachCommit
        };
        vo.fast_commit = Some(Arc::new(FastCommitReplayer { now: opts.now }));
        // The features are checked before the journal is replayed (and
        // again after: the replay may bring another superblock), so that
        // a filesystem this handle will refuse is not written to first.
        let before = Volume::peek_superblock(dev.as_ref(), false)?;
        if opts.staged_read_only {
            check_read_features(&before)?;
        } else {
            check_features(&before)?;
        }
        // Lookups, stats and unlinks read the same directory and inode
        // table blocks again and again: the last ones read are kept (every
        // write goes through and updates them, see `Cached`).
        let dev: Arc<dyn BlockDevice> = match before.block_size() {
            Some(bs) if opts.cached_blocks > 0 => {
                Arc::new(Cached::new(dev, bs, opts.cached_blocks))
            }
            _ => dev,
        };
        let vol = Volume::open(dev, vo)?;
        if opts.staged_read_only {
            check_read_features(vol.superblock())?;
            let writable = check_features(vol.superblock()).is_ok();
            let mut fs = WriteFs::over(Transaction::owned(vol), opts);
            if writable {
                fs.recover_orphans()?;
            }
            fs.read_only_view = true;
            return Ok(fs);
        }
        check_features(vol.superblock())?;
        let mut fs = WriteFs::over(Transaction::owned(vol), opts);
        fs.recover_orphans()?;
        Ok(fs)
    }

    /// A writer over the running transaction `txn` (the volume opened by
    /// the caller).
    pub(crate) fn over(txn: Transaction<Volume>, opts: WriteOptions) -> Self {
        let shape = shape_of(txn.volume());
        let limit = journal_share(txn.volume());
        WriteFs {
            txn,
            shape,
            opts,
            poisoned: None,
            deferred: Vec::new(),
            limit,
            read_only_view: false,
        }
    }

    /// Opens the image or block device at `path` for changing, refusing
    /// one that is mounted (as the tools do). The handle holds the
    /// writers' lock on it until dropped (see [`crate::device::lock`]):
    /// no other writer — another `WriteFs`, fsck, tune, defrag, mkfs —
    /// gets in meanwhile.
    ///
    /// # Errors
    /// [`Error::Mounted`], [`Error::ReadOnly`] for an image on a read-only
    /// mount, [`Error::Locked`] naming the writer that has it,
    /// [`Error::Open`], and as [`WriteFs::open`].
    pub fn open_path(path: &Path, opts: WriteOptions) -> Result<Self> {
        if let Some(m) = crate::safety::mounted(path)? {
            return Err(Error::Mounted {
                device: path.to_path_buf(),
                mountpoint: m.mountpoint,
            });
        }
        let dev = FileDevice::open(
            path,
            OpenMode {
                write: true,
                exclusive: true,
                ..OpenMode::default()
            },
        )
        .map_err(|e| match e {
            Error::Open { path, source } if matches!(source.raw_os_error(), Some(EROFS)) => {
                Error::ReadOnly(format!("{}: {source}", path.display()))
            }
            e => e,
        })?;
        Self::open(Arc::new(dev), opts)
    }

    /// The time to stamp.
    pub(crate) fn now(&self) -> Timestamp {
        let (secs, nsecs) = self.opts.now.unwrap_or_else(|| {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (d.as_secs() as i64, d.subsec_nanos())
        });
        Timestamp { secs, nsecs }
    }

    /// Runs one operation on the running transaction: refused after a
    /// failed commit; a failure rolls the operation back (see the module
    /// docs); afterwards the transaction is committed when it is large or
    /// when every operation is.
    ///
    /// An operation that finds no space while the transaction holds blocks
    /// it freed (kept from every allocation until the commit, see
    /// [`Transaction::holds_freed_blocks`]) is tried once more after the
    /// operations before it are committed, as the kernel commits its
    /// journal and retries an allocation (`ext4_should_retry_alloc`): a
    /// file deleted and another written in its room is not refused.
    pub(crate) fn op<T>(&mut self, mut f: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        self.check_poisoned()?;
        let out = match self.attempt(&mut f) {
            Err(Error::NoSpace) if self.txn.holds_freed_blocks() => {
                self.commit()?;
                self.attempt(&mut f)?
            }
            other => other?,
        };
        let deferred = std::mem::take(&mut self.deferred);
        let (meta, data) = self.txn.pending_sizes();
        if self.opts.sync_every_op || meta >= self.limit || data >= DATA_LIMIT {
            self.commit()?;
        }
        for what in deferred {
            self.finish_orphan(what, true)?;
        }
        Ok(out)
    }

    /// One try of an operation under a savepoint: kept when it succeeds,
    /// rolled back (and its deferred work dropped) when it fails; the
    /// operations before it stay in the transaction either way.
    fn attempt<T>(&mut self, f: &mut impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        self.txn.savepoint();
        match f(self) {
            Ok(v) => {
                self.txn.release_savepoint();
                Ok(v)
            }
            Err(e) => {
                self.txn.rollback_to_savepoint();
                self.deferred.clear();
                Err(e)
            }
        }
    }

    fn commit(&mut self) -> Result<()> {
        if let Err(e) = self.txn.commit(Commit::Auto) {
            self.poisoned = Some(e.to_string());
            return Err(e);
        }
        Ok(())
    }

    /// [`Error::ReadOnly`] naming the failed commit, once one failed.
    fn check_poisoned(&self) -> Result<()> {
        if self.read_only_view {
            return Err(Error::ReadOnly(
                "opened as a read-only view (WriteOptions::staged_read_only)".into(),
            ));
        }
        match &self.poisoned {
            Some(why) => Err(Error::ReadOnly(format!(
                "an earlier commit failed ({why}); nothing more is written: reopen the filesystem \
                 (recovery keeps what was committed)"
            ))),
            None => Ok(()),
        }
    }

    /// Commits every operation so far and writes it home: durable.
    ///
    /// # Errors
    /// I/O errors.
    pub fn sync(&mut self) -> Result<()> {
        self.check_poisoned()?;
        self.commit()?;
        if !self.opts.defer_checkpoint {
            self.txn.volume_mut().write_home()?;
        }
        Ok(())
    }

    /// Syncs, checkpoints and writes the superblock's backups.
    ///
    /// # Errors
    /// As [`WriteFs::sync`].
    pub fn close(mut self) -> Result<()> {
        self.sync()?;
        self.txn.into_volume().close()
    }

    /// The block size in bytes.
    pub fn block_size(&self) -> u64 {
        self.shape.bs as u64
    }

    /// Free blocks left (as the running transaction sees them).
    pub fn free_blocks(&self) -> u64 {
        self.txn.groups().free_blocks()
    }

    /// Free inodes left (as the running transaction sees them).
    pub fn free_inodes(&self) -> u64 {
        self.txn.groups().free_inodes()
    }

    /// The inode a path names (absolute; symlinks on the way followed, the
    /// last component's not). Any bytes but `/` and NUL make a name: a
    /// non-UTF-8 name is passed as an `OsStr` or `Path`.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::NotADirectory`], read errors.
    pub fn lookup_path(&self, path: impl AsRef<Path>) -> Result<u32> {
        use std::os::unix::ffi::OsStrExt;
        dir::resolve(&self.txn, path.as_ref().as_os_str().as_bytes())
    }
}

/// The incompatible features the write API keeps right: its row of the
/// one feature table ([`crate::support`]).
pub const WRITABLE_INCOMPAT: Incompat = crate::support::incompat(crate::support::Access::Write);

/// Refuses what this version cannot read (a read-only view).
fn check_read_features(sb: &ext4r_format::superblock::Superblock) -> Result<()> {
    let known = crate::support::incompat(crate::support::Access::Read);
    let unknown = Incompat::from_bits_retain(sb.s_feature_incompat.get()) - known;
    if !unknown.is_empty() {
        let names = ext4r_format::features::Features::from_raw(0, unknown.bits(), 0).names();
        return Err(Error::Unsupported(names.join(", ")));
    }
    Ok(())
}

/// Refuses what this version cannot change safely.
fn check_features(sb: &ext4r_format::superblock::Superblock) -> Result<()> {
    let unknown = Incompat::from_bits_retain(sb.s_feature_incompat.get()) - WRITABLE_INCOMPAT;
    if !unknown.is_empty() {
        let names = ext4r_format::features::Features::from_raw(0, unknown.bits(), 0).names();
        return Err(Error::Unsupported(format!(
            "writing filesystems with {}",
            names.join(", ")
        )));
    }
    if sb.has_ro_compat(RoCompat::READONLY) {
        return Err(Error::ReadOnly(
            "the filesystem is marked read-only (feature read-only; tune2fs -O ^read-only clears it)"
                .into(),
        ));
    }
    let ro_known = crate::support::ro_compat(crate::support::Access::Write);
    let ro_unknown = RoCompat::from_bits_retain(sb.s_feature_ro_compat.get()) - ro_known;
    if !ro_unknown.is_empty() {
        let names = ext4r_format::features::Features::from_raw(0, 0, ro_unknown.bits()).names();
        return Err(Error::Unsupported(format!(
            "writing filesystems with {} (their files must be kept up to date too)",
            names.join(", ")
        )));
    }
    Ok(())
}
