//! Resizing a filesystem: growing and shrinking an unmounted ext2/3/4
//! through the write layer, growing a mounted one through the kernel, and
//! the exact smallest size a shrink reaches.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ext4r::device::{FileDevice, OpenMode};
//! use ext4r::resize::{resize, NewSize, ResizeOptions};
//!
//! // Grow an image file and its filesystem to 4 GiB in one call.
//! let r = ext4r::resize::resize_image("disk.img", NewSize::Bytes(4 << 30), &ResizeOptions::default())?;
//! println!("{} -> {} blocks", r.old_blocks, r.new_blocks);
//! // Or on an open device: shrink to the smallest size that holds it.
//! let dev = Arc::new(FileDevice::open("disk.img", OpenMode { write: true, ..Default::default() })?);
//! resize(dev, NewSize::Minimum, &ResizeOptions::default())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The protocol, and what a power cut leaves
//!
//! Every change is a transaction of the write layer ([`ext4r_txn`]):
//! through the filesystem's jbd2 journal when it has one, so that a replay
//! by us, e2fsck or the kernel makes it whole or leaves it out. A resize
//! is a sequence of such transactions, each of which leaves a consistent
//! filesystem: the old size with some files moved inside it, or the new
//! size. Nothing is written before the whole plan is known to succeed
//! (sizes, room, the minimum); a refusal leaves the device untouched.
//!
//! **Grow** is one transaction:
//!
//! 1. Ahead of it, as data (nothing on disk refers to blocks past the old
//!    end): the new groups' block bitmaps (groups that hold tables, and
//!    the last), their inode tables zeroed where the filesystem has no
//!    uninit_bg, and with meta_bg the new meta groups' descriptor blocks.
//! 2. Logged: the superblock with the new counts, the descriptor blocks
//!    inside the old filesystem (the reserve of the resize inode becoming
//!    descriptor blocks), the old last group's bitmap, the resize inode
//!    rebuilt for the new table and backups — or, past what the reserve
//!    holds (resize2fs's "more than 1024 times" limit), the filesystem
//!    turned to meta_bg: the reserve becomes the old-style table, the
//!    resize inode goes, and new descriptor blocks go in the new groups.
//! 3. Commit block: before it the old filesystem, after it the new one.
//!    The backups are written after the checkpoint; until then e2fsck
//!    reads the primary (or a backup of the old size, which describes the
//!    old filesystem, whose files are all there).
//!
//! **Shrink** empties the part that goes, then switches:
//!
//! 1. The journal, when it lies in that part, moves first: its blocks are
//!    copied to free blocks (data, unreferenced), then one transaction,
//!    logged in the old journal, points inode 8 and the superblock's copy
//!    of its map at the new place. A replay lands the move whole; the old
//!    blocks are free afterwards.
//! 2. Every file with blocks there moves them, a batch of files per
//!    transaction: new blocks are allocated below the new end (the
//!    allocator is capped there for the whole resize), the data copied and
//!    written before the commit (ordered mode: the new blocks are free on
//!    disk until the commit that points at them), then the mapping rebuilt
//!    in fresh blocks, the old ones freed. Extended attribute blocks move
//!    with every inode that shares them. Blocks freed in a transaction are
//!    not handed to data before it commits.
//! 3. The tables of groups that stay but lie in that part move the same
//!    way (copied, then the descriptor switched).
//! 4. Inodes past the new inode count take free numbers below it, a batch
//!    per transaction, each with every reference to it: its record, every
//!    directory entry naming it (`..` of its subdirectories, `.`), the
//!    checksums seeded by its number (its directory and extent blocks),
//!    extended attributes naming it (EA inodes), the superblock's fields.
//! 5. One transaction switches to the new size: superblock, descriptors,
//!    the last group's bitmap cut, the tables of the groups that go freed
//!    where they lay in groups that stay, the resize inode rebuilt. An
//!    image file is truncated after the checkpoint.
//!
//! Until step 5 commits, the filesystem is the old size with all its
//! files (some in new places); after, the new size. A kernel that replays
//! a switch at mount keeps the geometry it read before the replay until
//! it is mounted again (so does its own online resize): checking the
//! filesystem first (fsck or e2fsck, as a boot does) avoids that.
//!
//! Without a journal (ext2, or an external journal this library does not
//! open) each transaction is written in place in the write layer's safe
//! order; a cut then leaves what `fsck -y` repairs, the files intact.
//!
//! Why each intermediate state of a shrink is safe: steps 1–4 only move
//! things inside the old filesystem. A moved block's data is written to
//! blocks that are free on disk before the transaction that points at
//! them commits, and the blocks it leaves are freed by that transaction,
//! never reused by data before it commits; so a replay (or its absence)
//! gives either the old place or the new, each complete. An inode's new
//! number, its record, every entry naming it and the checksums seeded by
//! it change in one transaction, so no state has an entry naming a free
//! inode. Nothing refers to the emptied part afterwards, but it is still
//! inside the filesystem: a cut there leaves the old size, every file
//! intact, and a later resize starts over (finding less to move). Only
//! step 5 changes the size, and it is one transaction. Before step 1 a
//! dry run of all five steps on a staged copy of the device (writes kept
//! in memory, regular files' data not copied) must complete: a shrink
//! that would run out of room is refused with nothing written, and the
//! same dry run is what finds the minimum (`-P`), so `-M` reaches exactly
//! the size printed.
//!
//! # What is refused (nothing written)
//!
//! Shrinking a bigalloc filesystem (growing one works); stable_inodes
//! filesystems (inode numbers cannot change); mmp, shared_blocks,
//! snapshots and unknown incompatible features; a size below the
//! minimum; a device smaller than the new size; a filesystem that needs
//! `e2fsck -f` first (as resize2fs); shrinking a mounted filesystem.

mod error;
mod geometry;
mod grow;
mod minimum;
mod online;
mod shrink;
mod switch;

pub use online::online_grow;

pub use error::{Refusal, ResizeError, Result};

use crate::device::BlockDevice;
use crate::error::Error;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::superblock::{
    Superblock, STATE_ERROR, STATE_VALID, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE,
};
use ext4r_txn::volume::{Volume, VolumeOptions};
use std::path::Path;
use std::sync::Arc;

/// The size to resize to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewSize {
    /// This many filesystem blocks.
    Blocks(u64),
    /// This many bytes (rounded down to whole blocks).
    Bytes(u64),
    /// The whole device (rounded down to the page size, as resize2fs).
    Device,
    /// The smallest size that holds what the filesystem holds.
    Minimum,
}

/// How to resize.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ResizeOptions {
    /// Skip the check that the filesystem is known consistent (resize2fs
    /// `-f`).
    pub force: bool,
    /// The time to record (seconds since the epoch); the clock's when
    /// `None`.
    pub now: Option<i64>,
    /// Zero the new groups' inode tables even where the filesystem could
    /// leave them to the kernel's lazy initialisation.
    pub zero_itables: bool,
    /// The device is an image file the caller grows to the new size
    /// before [`Plan::apply`]: a size past its end is not refused.
    pub extendable: bool,
}

/// What a resize did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resized {
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks before.
    pub old_blocks: u64,
    /// Blocks after.
    pub new_blocks: u64,
    /// The filesystem turned to meta_bg to grow past its reserve.
    pub meta_bg: bool,
    /// Blocks moved out of the part that went.
    pub moved_blocks: u64,
    /// Inodes given new numbers.
    pub renumbered: u64,
}

/// Reads the primary superblock of `dev`, checked as the write layer
/// checks it.
///
/// # Errors
/// I/O errors; [`Error::Corrupt`] when it is not an ext2/3/4 superblock.
pub fn superblock(dev: &dyn BlockDevice) -> std::result::Result<Superblock, Error> {
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET)?;
    let sb = Superblock::parse(&buf).map_err(|e| Error::corrupt("superblock", e))?;
    sb.validate().map_err(|e| Error::corrupt("superblock", e))?;
    Ok(sb)
}

/// resize2fs's reasons to ask for `e2fsck -f` first. `printing` (a `-P`
/// run) does not mind a filesystem mounted since its last check.
pub fn needs_check(sb: &Superblock, printing: bool) -> Option<String> {
    let state = sb.s_state.get();
    if state & STATE_ERROR != 0 {
        return Some("errors are recorded".into());
    }
    if state & STATE_VALID == 0 {
        return Some("not cleanly unmounted".into());
    }
    if !printing && sb.lastcheck() < sb.mtime() {
        return Some("mounted since it was last checked".into());
    }
    if sb.free_blocks_count() > sb.blocks_count()
        || sb.s_free_inodes_count.get() > sb.s_inodes_count.get()
    {
        return Some("free counts past the totals".into());
    }
    if sb.s_last_orphan.get() != 0 || sb.has_ro_compat(RoCompat::ORPHAN_PRESENT) {
        return Some("orphans to clean up".into());
    }
    if sb.has_incompat(Incompat::RECOVER) {
        return Some("the journal needs recovery".into());
    }
    None
}

/// Features this version does not resize offline, with why.
fn unsupported(sb: &Superblock) -> Option<String> {
    if sb.has_incompat(Incompat::MMP) {
        return Some("mmp: multiple-mount protection is not taken by resize".into());
    }
    if sb.has_ro_compat(RoCompat::SHARED_BLOCKS) {
        return Some("shared_blocks: a block moved for one file would leave the others".into());
    }
    if sb.has_ro_compat(RoCompat::HAS_SNAPSHOT) || sb.has_compat(Compat::EXCLUDE_BITMAP) {
        return Some("snapshots are not supported".into());
    }
    if sb.has_incompat(Incompat::JOURNAL_DEV) {
        return Some("this is an external journal, not a filesystem".into());
    }
    // MMP was refused above with its reason.
    let unknown = Incompat::from_bits_retain(sb.s_feature_incompat.get())
        - crate::support::incompat(crate::support::Access::Relocate);
    if !unknown.is_empty() {
        let names = ext4r_format::features::Features::from_raw(0, unknown.bits(), 0).names();
        return Some(format!("unsupported features: {}", names.join(", ")));
    }
    None
}

/// Features this version grows but does not shrink, with why: refused
/// before anything is written.
fn shrink_unsupported(sb: &Superblock) -> Option<String> {
    if sb.has_ro_compat(RoCompat::BIGALLOC) {
        return Some("shrinking a bigalloc filesystem is not supported yet (growing it is)".into());
    }
    None
}

/// The size `size` asks for on a device of `device_bytes`, in blocks,
/// before the last group is rounded (`None`: the minimum).
fn requested(geo: &Geometry, size: NewSize, device_bytes: u64) -> Option<u64> {
    let bs = u64::from(geo.block_size);
    let n = match size {
        NewSize::Blocks(n) => n,
        NewSize::Bytes(b) => b / bs,
        NewSize::Device => {
            let mut n = device_bytes / bs;
            // resize2fs rounds the device's size down to whole pages.
            let page = 4096u64;
            if page > bs {
                n &= !(page / bs - 1);
            }
            n
        }
        NewSize::Minimum => return None,
    };
    // Whole clusters only.
    Some(n & !(geo.cluster_ratio() - 1))
}

/// A resize decided and checked, nothing written yet ([`plan`]).
#[derive(Debug)]
pub struct Plan {
    shape: geometry::Shape,
    zero_itables: bool,
    now: Option<i64>,
}

/// The volume options of a resize.
fn volume_options(now: Option<i64>) -> VolumeOptions {
    let mut v = VolumeOptions::default();
    v.now = now;
    v
}

impl Plan {
    /// The size the filesystem will have, in blocks.
    pub fn new_blocks(&self) -> u64 {
        self.shape.geo.blocks_count
    }

    /// The size it has, in blocks.
    pub fn old_blocks(&self) -> u64 {
        self.shape.old.blocks_count
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.shape.geo.block_size
    }

    /// Carries the resize out on `dev` (the device the plan was made on,
    /// large enough for the new size).
    ///
    /// # Errors
    /// Engine errors (every step committed before leaves a consistent
    /// filesystem); [`Error::InvalidArgument`] when the device changed
    /// since the plan.
    pub fn apply(self, dev: Arc<dyn BlockDevice>) -> Result<Resized> {
        let bs = u64::from(self.block_size());
        if dev.size() / bs < self.new_blocks() {
            return Err(Error::InvalidArgument(format!(
                "the device holds {} blocks, the plan {}",
                dev.size() / bs,
                self.new_blocks()
            ))
            .into());
        }
        let sb = superblock(dev.as_ref())?;
        if sb.blocks_count() != self.old_blocks() {
            return Err(
                Error::InvalidArgument("the filesystem changed since the plan".into()).into(),
            );
        }
        let vopts = volume_options(self.now);
        let mut vol = Volume::open(dev, vopts.clone())?;
        let mut out = Resized {
            block_size: self.block_size(),
            old_blocks: self.old_blocks(),
            new_blocks: self.new_blocks(),
            meta_bg: self.shape.to_meta_bg,
            ..Resized::default()
        };
        if self.shape.grows() {
            grow::grow(&mut vol, &self.shape, self.zero_itables)?;
            vol.close()?;
            return Ok(out);
        }
        let (vol, moved) = shrink::shrink(vol, &self.shape, false, &vopts)?;
        vol.close()?;
        match moved {
            Ok(m) => {
                out.moved_blocks = m.blocks;
                out.renumbered = m.inodes;
                Ok(out)
            }
            Err(short) => Err(Error::InvalidArgument(format!(
                "the shrink ran short of {} blocks although its dry run did not \
                 (the filesystem is consistent at its old size)",
                short.blocks
            ))
            .into()),
        }
    }
}

/// Decides the resize of the unmounted filesystem on `dev` to `size` and
/// checks that it can be done; writes nothing.
///
/// # Errors
/// [`ResizeError::Refused`]: the filesystem needs checking, the size is
/// below the minimum, above what the format or the device holds (unless
/// `opts.extendable`), or already the filesystem's; engine errors reading
/// it.
pub fn plan(dev: &Arc<dyn BlockDevice>, size: NewSize, opts: &ResizeOptions) -> Result<Plan> {
    let sb = superblock(dev.as_ref())?;
    if !opts.force {
        if let Some(why) = needs_check(&sb, false) {
            return Err(Refusal::NeedsCheck(why).into());
        }
    } else if sb.has_incompat(Incompat::RECOVER) {
        return Err(Refusal::NeedsCheck("the journal needs recovery".into()).into());
    }
    if let Some(why) = unsupported(&sb) {
        return Err(Refusal::Unsupported(why).into());
    }
    let geo = Geometry::from_superblock(&sb).map_err(|e| Error::corrupt("superblock", e))?;
    let vopts = volume_options(opts.now);
    let plan_of = |shape| Plan {
        shape,
        zero_itables: opts.zero_itables,
        now: opts.now,
    };
    let Some(want) = requested(&geo, size, dev.size()) else {
        if sb.has_compat(Compat::STABLE_INODES) {
            return Err(Refusal::StableInodes.into());
        }
        if let Some(why) = shrink_unsupported(&sb) {
            return Err(Refusal::Unsupported(why).into());
        }
        let (min, shape) = minimum::find(dev, &sb, &geo, &vopts)?;
        if min >= geo.blocks_count {
            return Err(Refusal::NothingToDo {
                blocks: geo.blocks_count,
            }
            .into());
        }
        return Ok(plan_of(shape));
    };
    if want < geo.blocks_count {
        if let Some(why) = shrink_unsupported(&sb) {
            return Err(Refusal::Unsupported(why).into());
        }
        let Some(blocks) = geometry::adjust_new_size(&sb, &geo, want) else {
            return Err(Refusal::BelowMinimum {
                minimum: minimum::find(dev, &sb, &geo, &vopts)?.0,
            }
            .into());
        };
        if blocks == geo.blocks_count {
            return Err(Refusal::NothingToDo { blocks }.into());
        }
        if sb.has_compat(Compat::STABLE_INODES) {
            return Err(Refusal::StableInodes.into());
        }
        let shape = geometry::shape(&sb, &geo, blocks)?;
        if !minimum::fits(dev, &shape, &vopts)? {
            return Err(Refusal::BelowMinimum {
                minimum: minimum::find(dev, &sb, &geo, &vopts)?.0,
            }
            .into());
        }
        return Ok(plan_of(shape));
    }
    // As resize2fs: 16 TiB of 4 KiB blocks is taken as 2^32 - 1 blocks
    // without 64bit.
    let want = if !sb.has_incompat(Incompat::BIT64) && want == 1 << 32 {
        want - geo.cluster_ratio()
    } else {
        want
    };
    // What the format cannot express is said as such, before the device's
    // size (which cannot help).
    if let Some(why) = geometry::beyond_format(&sb, &geo, want) {
        return Err(Refusal::TooLarge(why).into());
    }
    let device_blocks = dev.size() / u64::from(geo.block_size);
    if want > device_blocks && !opts.extendable {
        return Err(Refusal::DeviceTooSmall {
            device_blocks,
            requested: want,
        }
        .into());
    }
    let Some(blocks) = geometry::adjust_new_size(&sb, &geo, want) else {
        return Err(Refusal::TooLarge("the new size leaves no usable group".into()).into());
    };
    if blocks == geo.blocks_count {
        return Err(Refusal::NothingToDo { blocks }.into());
    }
    let shape = geometry::shape(&sb, &geo, blocks)?;
    Ok(plan_of(shape))
}

/// Resizes the unmounted filesystem on `dev` to `size`: [`plan`], then
/// [`Plan::apply`].
///
/// # Errors
/// As [`plan`] and [`Plan::apply`].
pub fn resize(dev: Arc<dyn BlockDevice>, size: NewSize, opts: &ResizeOptions) -> Result<Resized> {
    plan(&dev, size, opts)?.apply(dev)
}

/// The smallest size (blocks) a shrink of the filesystem on `dev` reaches,
/// exactly what [`NewSize::Minimum`] resizes it to.
///
/// # Errors
/// As [`plan`].
pub fn minimum_size(dev: Arc<dyn BlockDevice>, opts: &ResizeOptions) -> Result<u64> {
    let sb = superblock(dev.as_ref())?;
    if !opts.force {
        if let Some(why) = needs_check(&sb, true) {
            return Err(Refusal::NeedsCheck(why).into());
        }
    } else if sb.has_incompat(Incompat::RECOVER) {
        return Err(Refusal::NeedsCheck("the journal needs recovery".into()).into());
    }
    if let Some(why) = unsupported(&sb) {
        return Err(Refusal::Unsupported(why).into());
    }
    if let Some(why) = shrink_unsupported(&sb) {
        return Err(Refusal::Unsupported(why).into());
    }
    let geo = Geometry::from_superblock(&sb).map_err(|e| Error::corrupt("superblock", e))?;
    Ok(minimum::find(&dev, &sb, &geo, &volume_options(opts.now))?.0)
}

/// Resizes the filesystem in the image file `path` to `size`: the file
/// is grown first for a grow (sparse) and cut to the new size after a
/// shrink.
///
/// # Errors
/// As [`resize`]; [`Error::Open`] when the file cannot be opened or
/// sized.
pub fn resize_image(
    path: impl AsRef<Path>,
    size: NewSize,
    opts: &ResizeOptions,
) -> Result<Resized> {
    let path = path.as_ref();
    let open = |create: Option<u64>| -> std::result::Result<Arc<dyn BlockDevice>, Error> {
        Ok(Arc::new(crate::device::FileDevice::open(
            path,
            crate::device::OpenMode {
                write: true,
                create_size: create,
                ..Default::default()
            },
        )?))
    };
    let dev = open(None)?;
    let mut o = opts.clone();
    o.extendable = true;
    let p = plan(&dev, size, &o)?;
    let bytes = p.new_blocks() * u64::from(p.block_size());
    drop(dev);
    let dev = open((bytes > 0).then_some(bytes))?;
    let r = p.apply(dev)?;
    // As resize2fs: an image ends where its filesystem does.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|source| Error::Open {
            path: path.to_path_buf(),
            source,
        })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > bytes {
        file.set_len(bytes).map_err(|source| Error::Open {
            path: path.to_path_buf(),
            source,
        })?;
    }
    Ok(r)
}
