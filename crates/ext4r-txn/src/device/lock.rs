//! The writers' lock: one writer per image or block device at a time.
//!
//! Every open for writing ([`super::FileDevice::open`] with `write`) takes
//! an exclusive `flock(2)` on the file it opened and keeps it for as long
//! as the device lives; closing the file releases it, also when the
//! process dies. Two writers each keep their own picture of the bitmaps,
//! descriptors and journal; whichever commits last undoes the other's
//! allocations (a lost update that e2fsck finds as corruption), so a
//! second writer is refused at once, with who holds the image: the pid
//! from `/proc/locks` (a flock lock is listed under the pid that took it)
//! and its command name from `/proc/PID/comm`. [`super::OpenMode::lock_wait`]
//! waits for the holder to finish instead, up to a limit.
//!
//! Why flock: it belongs to the open file description, so it is released
//! exactly when the device is dropped (POSIX record locks are per process
//! and vanish when any descriptor of the file closes), and it works on
//! block device nodes as on image files. Block devices are also opened
//! `O_EXCL` (see `OpenMode::exclusive`), which keeps the kernel (a mount,
//! md, dm) out; the lock is what keeps two of our own writers apart on an
//! image file, where `O_EXCL` means nothing.
//!
//! The lock is per open file description, not per process: a second write
//! open of the same image in one process conflicts with the first, and is
//! refused as "already open for writing in this process" — two writers in
//! one process lose updates the same way. A program that writes in rounds
//! (fsck reopening the filesystem after a repair) shares one device.
//!
//! Readers take no lock. A reader cannot corrupt anything; a shared lock
//! would let a long `fsck -n` or listing lock writers out, or (readers
//! waiting for writers) make a read-only check wait behind a long copy,
//! when `e2fsck -n` exists to look at a filesystem in use; and e2fsprogs
//! takes no lock, so ours would not keep e2fsprogs' writers out anyway. A
//! reader that races a writer may see a half-written image and report an
//! error; a check can ask [`writer_of`] first and say the image is in use,
//! as `e2fsck -n` warns about a busy device, without taking a lock that
//! would make a starting writer fail.

use crate::error::{Error, Result};
use rustix::fs::FlockOperation;
use rustix::io::Errno;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often a waiting open tries the lock again.
const RETRY: Duration = Duration::from_millis(20);

/// Who holds an image or device's writers' lock, as far as `/proc` tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockHolder {
    /// The process that took the lock (`None`: not found in
    /// `/proc/locks`, e.g. a file whose device number the kernel lists
    /// differently, as on btrfs subvolumes).
    pub pid: Option<u32>,
    /// Its command name (`/proc/PID/comm`: `ext4r`, `fsck.ext4r`, ...).
    pub command: Option<String>,
    /// The holder is this very process: the image is already open for
    /// writing here (through another device).
    pub this_process: bool,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.pid, &self.command) {
            (Some(pid), _) if self.this_process => {
                write!(
                    f,
                    "this process (pid {pid}): it is already open for writing here"
                )
            }
            (Some(pid), Some(c)) => write!(f, "{c} (pid {pid})"),
            (Some(pid), None) => write!(f, "pid {pid}"),
            (None, _) => f.write_str("another process"),
        }
    }
}

/// Takes the writers' lock on `file` (opened from `path`): at once, or
/// trying again until `wait` has passed.
///
/// # Errors
/// [`Error::Locked`] naming the holder; [`Error::Open`] when the lock
/// call fails otherwise.
pub(crate) fn lock_exclusive(file: &File, path: &Path, wait: Option<Duration>) -> Result<()> {
    let deadline = wait.map(|w| Instant::now() + w);
    // Times the holder was not found, or was gone before its name could
    // be read: it let go between the refused try and the look at /proc,
    // and the lock is worth trying again.
    let mut vanished = 0;
    loop {
        match rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(Errno::INTR) => {}
            Err(Errno::WOULDBLOCK) => {
                let left = deadline.and_then(|d| d.checked_duration_since(Instant::now()));
                match left {
                    Some(left) if !left.is_zero() => std::thread::sleep(RETRY.min(left)),
                    _ => {
                        let holder = holder(file.metadata().ok().as_ref());
                        if (holder.pid.is_none() || holder.command.is_none()) && vanished < 3 {
                            vanished += 1;
                            continue;
                        }
                        return Err(Error::Locked {
                            path: path.to_path_buf(),
                            holder,
                        });
                    }
                }
            }
            // A filesystem without flock (some network filesystems say
            // ENOLCK): there is no lock to take, and refusing would make
            // every image there unwritable; go on as e2fsprogs does.
            Err(Errno::NOLCK) => return Ok(()),
            Err(e) => {
                return Err(Error::Open {
                    path: path.to_path_buf(),
                    source: std::io::Error::from(e),
                })
            }
        }
    }
}

/// Who holds the writers' lock on the image or device at `path`, if
/// anyone does — looked up in `/proc/locks` without taking a lock, so
/// that asking cannot make a starting writer fail.
pub fn writer_of(path: &Path) -> Option<LockHolder> {
    let meta = std::fs::metadata(path).ok()?;
    let h = holder(Some(&meta));
    h.pid.is_some().then_some(h)
}

/// The holder of a flock lock on the file `meta` describes.
fn holder(meta: Option<&std::fs::Metadata>) -> LockHolder {
    let found = meta.and_then(|m| {
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        flock_pid(&locks, m.dev(), m.ino())
    });
    let Some(pid) = found else {
        return LockHolder::default();
    };
    let command = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_string())
        .filter(|c| !c.is_empty());
    LockHolder {
        pid: Some(pid),
        command,
        this_process: pid == std::process::id(),
    }
}

/// The pid of the first flock lock `locks` (the text of `/proc/locks`)
/// lists on inode `ino` of device `dev`. A line reads
/// `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`: the device as
/// major:minor in hex, the inode in decimal (fs/locks.c,
/// `lock_get_status`); a waiter's line has `->` after the number.
fn flock_pid(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    locks.lines().find_map(|l| {
        let mut w = l.split_whitespace().skip(1);
        if w.next()? != "FLOCK" {
            return None;
        }
        let pid = w.nth(2)?;
        let mut id = w.next()?.split(':');
        let (ma, mi, i) = (id.next()?, id.next()?, id.next()?);
        let same = u32::from_str_radix(ma, 16).ok()? == major
            && u32::from_str_radix(mi, 16).ok()? == minor
            && i.parse::<u64>().ok()? == ino;
        // OFD and lease entries can show -1: no pid to name.
        same.then(|| pid.parse::<u32>().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines() {
        let dev = rustix::fs::makedev(0xfd, 0x1);
        let text = "\
1: POSIX  ADVISORY  WRITE 77 fd:01:5678 0 EOF
2: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
2: -> FLOCK  ADVISORY  WRITE 999 fd:01:5678 0 EOF
3: FLOCK  ADVISORY  WRITE 4321 fd:01:5679 0 EOF
4: OFDLCK ADVISORY  READ  -1 fd:01:5680 0 EOF
";
        assert_eq!(flock_pid(text, dev, 5678), Some(1234));
        assert_eq!(flock_pid(text, dev, 5679), Some(4321));
        assert_eq!(flock_pid(text, dev, 5680), None);
        assert_eq!(flock_pid(text, rustix::fs::makedev(0xfd, 2), 5678), None);
        assert_eq!(flock_pid("garbage\n\n1:\n", dev, 1), None);
    }

    #[test]
    fn holders_are_named() {
        let h = |pid, command: Option<&str>, this_process| LockHolder {
            pid,
            command: command.map(str::to_string),
            this_process,
        };
        assert_eq!(
            h(Some(12), Some("ext4r"), false).to_string(),
            "ext4r (pid 12)"
        );
        assert_eq!(h(Some(12), None, false).to_string(), "pid 12");
        assert_eq!(h(None, None, false).to_string(), "another process");
        assert!(h(Some(12), Some("x"), true)
            .to_string()
            .contains("already open for writing here"));
    }
}
