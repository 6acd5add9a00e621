//! Unmounting: the kernel's side goes at once, but the driver then writes
//! the filesystem out; `unmount` returns when it has.

use ext4r::safety::unescape_mount_field;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long to wait for the driver to write the filesystem out.
const WAIT: Duration = Duration::from_secs(600);

/// How long a busy mount is tried again before EBUSY is the answer.
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// The mount source of the FUSE mount at `mountpoint` (the image, as
/// `ext4r mount` names it), if `mountpoint` is one of ours.
fn source_of(mountpoint: &Path) -> Option<String> {
    // The parent resolved, not the mount point: a stat of that asks the
    // driver, which answers EUCLEAN for a damaged root directory.
    let parent = match mountpoint.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let want = std::fs::canonicalize(parent)
        .ok()?
        .join(mountpoint.file_name()?);
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().rev().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mp = left.split(' ').nth(4)?;
        let mut r = right.split(' ');
        let fstype = r.next()?;
        let source = r.next()?;
        (unescape_mount_field(mp) == want.to_string_lossy() && fstype.starts_with("fuse"))
            .then(|| unescape_mount_field(source))
    })
}

/// Unmounts the `ext4r mount` at `mountpoint` and waits until its driver
/// has written the filesystem out and let go of the image (it holds the
/// writers' lock until then).
///
/// A mount that is busy is tried again for up to 2 seconds: a file
/// closed a moment ago can still be held by a child that another thread
/// of the closing program forked and that has not yet run `exec` (which
/// closes it), and such a mount is busy only for that instant.
///
/// # Errors
/// The system's error for the unmount (EBUSY while in use, EINVAL for no
/// mount), or `TimedOut` when the driver does not finish.
pub fn unmount(mountpoint: &Path) -> io::Result<()> {
    let source = source_of(mountpoint);
    let holder = source
        .as_deref()
        .and_then(|s| ext4r::device::writer_of(Path::new(s)))
        .and_then(|h| h.pid);
    let tried = Instant::now();
    loop {
        match rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::empty()) {
            Ok(()) => break,
            Err(rustix::io::Errno::PERM) => {
                fusermount_u(mountpoint)?;
                break;
            }
            Err(rustix::io::Errno::BUSY) if tried.elapsed() < BUSY_WAIT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e.into()),
        }
    }
    let Some(pid) = holder else {
        return Ok(());
    };
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() && still_holds(source.as_deref(), pid) {
        if start.elapsed() > WAIT {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the driver (pid {pid}) is still writing the filesystem"),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Whether process `pid` still holds the image's writers' lock.
fn still_holds(source: Option<&str>, pid: u32) -> bool {
    source
        .and_then(|s| ext4r::device::writer_of(Path::new(s)))
        .and_then(|h| h.pid)
        == Some(pid)
}

/// An unprivileged user's unmount: the setuid helper of the fuse3 package.
fn fusermount_u(mountpoint: &Path) -> io::Result<()> {
    for bin in ["fusermount3", "fusermount"] {
        match std::process::Command::new(bin)
            .arg("-u")
            .arg(mountpoint)
            .status()
        {
            Ok(s) if s.success() => return Ok(()),
            Ok(_) => return Err(io::Error::from_raw_os_error(libc::EPERM)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EPERM))
}

/// Detaches the mount at `mountpoint` at once (`umount -l`): the driver's
/// session ends and it writes the filesystem out, while processes that
/// still have files open there keep them.
///
/// # Errors
/// The system's error.
pub fn detach(mountpoint: &Path) -> io::Result<()> {
    rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::DETACH).map_err(Into::into)
}
