//! Offline defragmentation: moving blocks of an unmounted filesystem
//! through the write layer (`ext4r_txn`), for files ([`mover`]), trees in
//! read order (`-r`, [`relevant`]) and free space (`-f`, [`compact`]).
//!
//! # The protocol, and what a power cut leaves
//!
//! Every move of a file is made in three steps:
//!
//! 1. **Allocate** the new place in the running transaction (in memory:
//!    nothing on disk says the blocks are taken).
//! 2. **Copy** the data there, in bounded chunks written straight to the
//!    new blocks ([`Transaction::write_data_early`]): ordered mode, the
//!    data is on disk before anything points at it. A cut here leaves the
//!    file as it was and some free blocks written.
//! 3. **Switch**, in one transaction: the inode's mapping rewritten to the
//!    new place (fresh tree or indirect blocks, never the old ones rewritten
//!    in place), `i_blocks` and `ctime` updated, the old data and mapping
//!    blocks freed, bitmaps and counts with them. Through the jbd2 journal
//!    it is all or nothing: recovery (ours, e2fsck's or the kernel's) finds
//!    the old mapping with its blocks, or the new one with its own, both
//!    complete. Without a journal the write layer writes in place in a safe
//!    order (data, tree blocks, inode, bitmaps, superblock): a cut leaves
//!    each file old or new and at worst bitmap counts for `fsck` to fix.
//!
//! Blocks freed by a switch are not handed to another file's copy before
//! that switch is committed: a cut between the two would leave the first
//! file's old mapping (still the committed one) pointing at the second
//! file's data. Several switches share a transaction when the journal has
//! room, and the transaction is committed before an allocation would reuse
//! what it freed.

pub mod compact;
pub(crate) mod layout;
pub mod mover;
pub mod relevant;
mod relocate;
mod tree;

pub use relocate::FileMap;

use ext4r_format::num;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ext4r::device::{BlockDevice, FileDevice, OpenMode};
use ext4r::fs::Run;
use ext4r::support::{self, Access};
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::inode::Timestamp;
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Checkpoint, Volume, VolumeOptions};

use crate::error::{Error, Result};
use crate::freespace::FreeSpace;
use crate::image::ImageFs;

/// How to open a filesystem for offline work.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineOptions {
    /// The time stamped as `ctime` on moved files (seconds, nanoseconds);
    /// the clock's when `None`.
    pub now: Option<(i64, u32)>,
}

/// An unmounted filesystem opened for moving blocks.
pub struct OfflineFs {
    pub(crate) txn: Transaction<Volume>,
    dev: Arc<dyn BlockDevice>,
    path: PathBuf,
    pub(crate) bs: u64,
    pub(crate) ratio: u64,
    pub(crate) huge_file: bool,
    pub(crate) journaled: bool,
    /// Metadata blocks a batch of switches may gather before a commit.
    meta_limit: u64,
    now: Timestamp,
    /// Blocks freed by switches not yet committed (`(start, len)`).
    pub(crate) freed: Vec<(u64, u64)>,
    /// Files switched in the running transaction.
    pub(crate) batch: usize,
    /// A failure abandoned the running transaction: nothing more is done.
    pub(crate) poisoned: bool,
    /// Something was committed: closing writes the superblock's backups.
    committed: bool,
    buf: Vec<u8>,
}

impl std::fmt::Debug for OfflineFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfflineFs")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Features whose metadata a block move would leave wrong, with why.
fn refused_features(sb: &ext4r_format::superblock::Superblock) -> Option<String> {
    if sb.has_ro_compat(RoCompat::QUOTA) {
        return Some(
            "quota: moving a file changes how many mapping blocks it holds, which its \
             quota usage counts (turn quota off with tune.ext4r -O ^quota, or defragment \
             online)"
                .into(),
        );
    }
    if sb.has_incompat(Incompat::MMP) {
        return Some("mmp: multi-mount protection is not taken offline here".into());
    }
    if sb.has_ro_compat(RoCompat::SHARED_BLOCKS) {
        return Some("shared_blocks: a block moved for one file would leave the others".into());
    }
    let ro_known = support::ro_compat(Access::Relocate);
    let ro_unknown = RoCompat::from_bits_retain(sb.s_feature_ro_compat.get()) - ro_known;
    if !ro_unknown.is_empty() {
        let names = ext4r_format::features::Features::from_raw(0, 0, ro_unknown.bits()).names();
        return Some(names.join(", "));
    }
    let unknown = Incompat::from_bits_retain(sb.s_feature_incompat.get())
        - support::incompat(Access::Relocate);
    if !unknown.is_empty() {
        let names = ext4r_format::features::Features::from_raw(0, unknown.bits(), 0).names();
        return Some(names.join(", "));
    }
    None
}

impl OfflineFs {
    /// Opens the filesystem on `dev` (`path` names it in messages). A
    /// journal that needs recovery is replayed first, as a mount does.
    ///
    /// # Errors
    /// [`Error::Engine`] for an unusable or unsupported filesystem, one
    /// marked as having errors, and I/O errors.
    pub fn open(dev: Arc<dyn BlockDevice>, path: &Path, opts: OfflineOptions) -> Result<Self> {
        let engine = |source| Error::Engine {
            path: path.to_path_buf(),
            source,
        };
        let mut vo = VolumeOptions::default();
        vo.recover = true;
        vo.checkpoint = Checkpoint::EachCommit;
        vo.now = opts.now.map(|t| t.0);
        // A journal left by the kernel is recovered with its fast commits.
        vo.fast_commit = Some(Arc::new(ext4r::write::FastCommitReplayer { now: opts.now }));
        let refuse = |why: String| {
            engine(ext4r::Error::Unsupported(format!(
                "moving blocks offline on filesystems with {why}"
            )))
        };
        // Refused before the journal is replayed (nothing written to a
        // filesystem we will not work on), and again after it.
        let before = Volume::peek_superblock(dev.as_ref(), false).map_err(engine)?;
        if let Some(why) = refused_features(&before) {
            return Err(refuse(why));
        }
        let vol = Volume::open(Arc::clone(&dev), vo).map_err(engine)?;
        let sb = vol.superblock();
        if let Some(why) = refused_features(sb) {
            return Err(refuse(why));
        }
        // A filesystem the kernel or fsck marked as damaged has bitmaps
        // that cannot be trusted to say which blocks are free.
        if sb.s_state.get() & ext4r_format::superblock::STATE_ERROR != 0 {
            return Err(engine(ext4r::Error::InvalidArgument(
                "the filesystem is marked as having errors: check it with fsck.ext4r -f first"
                    .into(),
            )));
        }
        let geo = vol.geometry();
        let now = opts.now.unwrap_or_else(|| {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (d.as_secs() as i64, d.subsec_nanos())
        });
        let meta_limit = vol.journal_blocks().map_or(1, |n| (n / 4).clamp(1, 4096));
        Ok(OfflineFs {
            bs: u64::from(geo.block_size),
            ratio: geo.cluster_ratio(),
            huge_file: sb.has_ro_compat(RoCompat::HUGE_FILE),
            journaled: vol.journaled(),
            meta_limit,
            now: Timestamp {
                secs: now.0,
                nsecs: now.1,
            },
            txn: Transaction::owned(vol),
            dev,
            path: path.to_path_buf(),
            freed: Vec::new(),
            batch: 0,
            poisoned: false,
            committed: false,
            buf: Vec::new(),
        })
    }

    /// Opens the image or block device at `path`: refused when it is
    /// mounted (or active swap); a block device is opened exclusively, so
    /// that the kernel cannot mount it meanwhile, and the writers' lock
    /// keeps our other writers out (`ext4r::device::lock`).
    ///
    /// # Errors
    /// [`Error::Mounted`], [`Error::Engine`] with `ext4r::Error::Locked`
    /// when another writer has it, and as [`OfflineFs::open`].
    pub fn open_path(path: &Path, opts: OfflineOptions) -> Result<Self> {
        let engine = |source| Error::Engine {
            path: path.to_path_buf(),
            source,
        };
        if let Some(m) = ext4r::safety::mounted(path).map_err(engine)? {
            return Err(Error::Mounted {
                path: path.to_path_buf(),
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
        .map_err(engine)?;
        Self::open(Arc::new(dev), path, opts)
    }

    /// The path in messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The block size.
    pub fn block_size(&self) -> u32 {
        num::sat_u32(self.bs)
    }

    /// Whether switches go through a journal.
    pub fn journaled(&self) -> bool {
        self.journaled
    }

    /// A reader of the filesystem as committed so far (the walk that plans
    /// a run; a fresh one sees what earlier moves did).
    ///
    /// # Errors
    /// Committing or checkpointing fails, or the read path cannot open it.
    pub fn source(&mut self) -> Result<ImageFs> {
        self.commit()?;
        self.txn
            .volume_mut()
            .checkpoint()
            .map_err(|e| self.engine(e))?;
        ImageFs::from_device(Arc::clone(&self.dev), &self.path)
    }

    /// The free space as the running transaction leaves it.
    ///
    /// # Errors
    /// A bitmap cannot be read.
    pub fn free_space(&self) -> Result<FreeSpace> {
        let mut out = FreeSpace::new(num::sat_u32(self.bs), self.txn.geometry().blocks_count);
        let (first, count) = (
            self.txn.geometry().first_data_block,
            self.txn.geometry().blocks_count,
        );
        let mut b = first;
        for (s, e) in
            ext4r_txn::alloc::used_runs(&self.txn, first, count - 1).map_err(|e| self.engine(e))?
        {
            out.add(s - b);
            b = e;
        }
        out.add(count - b);
        Ok(out)
    }

    pub(crate) fn engine(&self, source: ext4r::Error) -> Error {
        Error::Engine {
            path: self.path.clone(),
            source,
        }
    }

    /// Commits the running transaction (switches made so far become
    /// durable, the blocks they freed usable).
    ///
    /// # Errors
    /// I/O errors; the transaction is abandoned then.
    pub fn commit(&mut self) -> Result<()> {
        if self.poisoned {
            return Err(Error::InvalidArgument(
                "an earlier failure abandoned the running transaction".into(),
            ));
        }
        if !self.txn.is_dirty() {
            self.freed.clear();
            self.batch = 0;
            return Ok(());
        }
        match self.txn.commit(Commit::Auto) {
            Ok(_) => {
                self.freed.clear();
                self.batch = 0;
                self.committed = true;
                Ok(())
            }
            Err(e) => {
                self.txn.abandon();
                self.poisoned = true;
                Err(self.engine(e))
            }
        }
    }

    /// Commits, writes everything home and closes the filesystem (the
    /// superblock's backups written as libext2fs writes them). A run that
    /// changed nothing writes nothing.
    ///
    /// # Errors
    /// I/O errors.
    pub fn close(mut self) -> Result<()> {
        self.commit()?;
        if !self.committed {
            return Ok(());
        }
        let path = self.path.clone();
        self.txn
            .into_volume()
            .close()
            .map_err(|source| Error::Engine { path, source })
    }

    /// The runs of a file as [`crate::extent::Extent`]s are compared with.
    pub(crate) fn same_runs(a: &[Run], b: &crate::extent::FileExtents) -> bool {
        a.len() == b.as_slice().len()
            && a.iter().zip(b.as_slice()).all(|(r, e)| {
                r.logical == e.logical
                    && r.physical == e.physical
                    && r.len == e.len
                    && r.unwritten == e.unwritten
            })
    }
}
