//! `ext4r mount`: a userspace ext4 driver. The kernel's FUSE module hands
//! each request on a mounted directory to this process, which answers it
//! with ext4r's write API ([`ext4r::write::WriteFs`]): an image you did not
//! make is parsed here, where damage is an error answer (EUCLEAN or EIO
//! for the operation that met it), not in the kernel.
//!
//! What this first version is:
//! - Every request runs under **one lock** around the `WriteFs`, whose
//!   writes take `&mut self`; requests are served one at a time. The
//!   library's block cache is the driver's only cache; the kernel keeps
//!   file pages in its own (FUSE's writeback cache) and hands writes over
//!   at writeback or fsync.
//! - FUSE node ids are ext4 inode numbers (FUSE's root, 1, is ext4's 2),
//!   and the inode generation is `i_generation`, so nothing needs a table
//!   of what the kernel has looked up.
//! - Changes gather in the library's running transaction and are
//!   committed through the journal on `fsync`/`fsyncdir`, when the
//!   transaction grows large, every [`COMMIT_INTERVAL`] (as the kernel's
//!   jbd2 commits every 5 s), and at unmount.
//! - A file unlinked (or replaced by a rename) while open keeps its data,
//!   on the orphan list, until its last close, as on the kernel's ext4.
//! - Read-only mounts (`-o ro`) open the image for reading only: a journal
//!   to replay and orphans to finish are handled in memory
//!   ([`ext4r::device::Staged`]), so the image is never written.
//! - Permissions are checked by the kernel (`default_permissions`), POSIX
//!   ACLs included (`acl`, the default): their attributes are converted
//!   between ext4's stored form and the system calls', a new inode takes
//!   its directory's default ACL (or the umask, when there is none),
//!   `chmod` updates an access ACL and setting one updates the mode, as
//!   the kernel's ext4 does, dropping the set-group-ID bit when the caller
//!   is outside the file's group and lacks CAP_FSETID (read from
//!   `/proc/PID/status`: the FUSE crate cannot take the kernel's own
//!   answer, `FUSE_SETXATTR_EXT`).
//! - Damage met by an operation (EUCLEAN for it) is recorded in the
//!   superblock, as the kernel's `ext4_error` does, so that the next
//!   `e2fsck -p` checks the filesystem; then `errors=` (or the
//!   superblock's `s_errors`) says what follows: continue; remount-ro
//!   (what was done is committed, every change after is refused with
//!   EROFS); panic (the driver stops at once and writes nothing more).
//!
//! - `rename` with `RENAME_NOREPLACE`, `RENAME_EXCHANGE` and
//!   `RENAME_WHITEOUT` (a character device 0:0 left at the old name, as
//!   ext4 leaves it for overlay filesystems); `fallocate` preallocating,
//!   punching holes, zeroing, collapsing and inserting ranges, unsharing
//!   refused (EOPNOTSUPP) as ext4 refuses it. The kernel's FUSE client
//!   passes no collapse or insert to any FUSE server (it answers
//!   EOPNOTSUPP itself), so those two are served for clients that do;
//!   embedders call [`ext4r::write::WriteFs::collapse_range`] and
//!   [`ext4r::write::WriteFs::insert_range`].
//! - `uid=`/`gid=` show every inode as owned by them (nothing on the image
//!   changes hands).

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::cast_possible_truncation))]

mod attr;
mod errno;
mod fs;
mod options;
mod unmount;

pub use errno::{errno_of, EFSCORRUPTED};
pub use fs::{Ext4rFuse, Outcome};
pub use options::Options;
pub use unmount::{detach, unmount};

use ext4r::device::{BlockDevice, FileDevice, OffsetDevice, OpenMode, Staged};
use ext4r::write::{WriteFs, WriteOptions};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often changes are committed when nothing asks for it.
pub const COMMIT_INTERVAL: Duration = Duration::from_secs(5);

/// What went wrong mounting or serving.
#[derive(Debug)]
#[non_exhaustive]
pub enum MountError {
    /// The image could not be opened as a filesystem.
    Open(ext4r::Error),
    /// The FUSE mount or session failed.
    Fuse(std::io::Error),
    /// Writing the filesystem out at unmount failed.
    Close(ext4r::Error),
}

impl std::fmt::Display for MountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MountError::Open(e) => write!(f, "{}", ext4r::error::chain(e)),
            MountError::Fuse(e) => write!(f, "{e}"),
            MountError::Close(e) => {
                write!(
                    f,
                    "writing the filesystem at unmount: {}",
                    ext4r::error::chain(e)
                )
            }
        }
    }
}

impl std::error::Error for MountError {}

/// Opens the filesystem in `image` as `opts` say: for writing (the
/// writers' lock taken, refused while mounted elsewhere), or for reading
/// only with every write the library makes kept in memory.
///
/// # Errors
/// [`ext4r::Error::Mounted`], [`ext4r::Error::Locked`], open and
/// filesystem errors as [`WriteFs::open`] gives them.
pub fn open_image(image: &Path, opts: &Options) -> ext4r::Result<WriteFs> {
    if let Some(m) = ext4r::safety::mounted(image)? {
        return Err(ext4r::Error::Mounted {
            device: image.to_path_buf(),
            mountpoint: m.mountpoint,
        });
    }
    let mode = OpenMode {
        write: !opts.read_only,
        exclusive: !opts.read_only,
        ..OpenMode::default()
    };
    let file = FileDevice::open(image, mode)?;
    let dev: Arc<dyn BlockDevice> = if opts.offset != 0 {
        let len = file
            .size()
            .checked_sub(opts.offset)
            .filter(|&l| l > 0)
            .ok_or_else(|| {
                ext4r::Error::InvalidArgument(format!(
                    "offset {} is past the end of {} ({} bytes)",
                    opts.offset,
                    image.display(),
                    file.size()
                ))
            })?;
        // Whole sectors only: the window ends at the last whole one.
        let len = len - len % 512;
        Arc::new(OffsetDevice::new(file, opts.offset, len)?)
    } else {
        Arc::new(file)
    };
    let dev: Arc<dyn BlockDevice> = if opts.read_only {
        Arc::new(Staged::new(dev, 1024))
    } else {
        dev
    };
    let mut wo = WriteOptions::default();
    // Read-only: whatever the read API reads mounts (with quota, say),
    // and nothing can be changed through the handle either.
    wo.staged_read_only = opts.read_only;
    WriteFs::open(dev, wo)
}

/// The fuser configuration for `opts`, naming `image` as the source.
fn config(image: &Path, opts: &Options) -> fuser::Config {
    use fuser::MountOption as M;
    let source = std::path::absolute(image).unwrap_or_else(|_| image.to_path_buf());
    let mut c = fuser::Config::default();
    c.mount_options = vec![
        // The image as the mount's source: our other tools see it as
        // mounted and keep off it (see ext4r::safety::mounted).
        M::FSName(source.display().to_string()),
        M::Subtype("ext4r".into()),
        M::DefaultPermissions,
        if opts.read_only { M::RO } else { M::RW },
    ];
    c.mount_options.extend(opts.kernel.iter().cloned());
    c.acl = if opts.allow_other {
        fuser::SessionACL::All
    } else if opts.allow_root {
        fuser::SessionACL::RootAndOwner
    } else {
        fuser::SessionACL::Owner
    };
    c.n_threads = Some(1);
    c
}

/// Mounts the filesystem in `image` on `mountpoint` and serves it until it
/// is unmounted; `ready` runs once the mount is in place (a daemon tells
/// the process that started it, which then exits). Returns when the
/// filesystem is unmounted and written out.
///
/// # Errors
/// [`MountError::Open`] when the image cannot be opened,
/// [`MountError::Fuse`] when the mount fails, [`MountError::Close`] when
/// the filesystem could not be written at the end.
pub fn mount(
    image: &Path,
    mountpoint: &Path,
    opts: &Options,
    ready: impl FnOnce(),
) -> Result<(), MountError> {
    let wfs = open_image(image, opts).map_err(MountError::Open)?;
    serve(wfs, image, mountpoint, opts, ready)
}

/// Serves `wfs`, a filesystem already opened (over any device: an image
/// in memory, a recording device for crash tests), on `mountpoint` until
/// it is unmounted, as [`mount`] does; `source` is the name the mount
/// table shows for it. `opts.read_only` must match how `wfs` was opened
/// (see [`open_image`]); `opts.offset` is the opener's business and not
/// looked at here. Returns when the filesystem is unmounted (see
/// [`unmount`]) and `wfs` is closed.
///
/// # Errors
/// [`MountError::Fuse`] when the mount fails, [`MountError::Close`] when
/// the filesystem could not be written at the end.
pub fn serve(
    wfs: WriteFs,
    source: &Path,
    mountpoint: &Path,
    opts: &Options,
    ready: impl FnOnce(),
) -> Result<(), MountError> {
    let outcome: Outcome = Arc::new(Mutex::new(None));
    let fuse = Ext4rFuse::with_options(wfs, opts, outcome.clone());
    let state = fuse.state.clone();
    let notifier = fuse.notifier.clone();
    let session =
        fuser::Session::new(fuse, mountpoint, &config(source, opts)).map_err(MountError::Fuse)?;
    let _ = notifier.set(session.notifier());
    ready();
    if !opts.read_only {
        std::thread::Builder::new()
            .name("ext4r-commit".into())
            .spawn(move || fs::commit_every(&state, COMMIT_INTERVAL))
            .map_err(MountError::Fuse)?;
    }
    let served = session.run();
    let closed = outcome
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    match closed {
        Some(Err(e)) => Err(MountError::Close(e)),
        _ => served.map_err(MountError::Fuse),
    }
}
