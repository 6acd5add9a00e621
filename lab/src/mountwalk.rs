//! `ext4r mount` on an image that may be damaged: mount it in the
//! foreground, walk and read the whole tree (names, attributes, file
//! contents, link targets, xattrs), write one file in every directory,
//! unmount; all under a watchdog. Errors the driver answers (EUCLEAN, EIO,
//! ENOSPC, a refused mount) are answers; a crash (a panic, a dead driver)
//! or a hang is a failure. Used by `tests/mount_corpus.rs` on the
//! e2fsprogs corpus and by `cargo xtask damage --mount` on generated
//! damage.

use std::fs;
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Bytes read per file at most.
const MAX_READ: u64 = 8 << 20;
/// Directory depth walked at most (a crafted tree may loop).
const MAX_DEPTH: usize = 64;

/// What a walk saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// Entries listed.
    pub entries: usize,
    /// Calls that returned an error (each one an answer of the driver).
    pub errors: usize,
    /// Probe files written.
    pub writes_ok: usize,
    /// ENOTCONN: the driver went away under the walk.
    pub disconnected: bool,
}

/// How one image went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The mount was refused with a message.
    Refused,
    /// Mounted, walked, unmounted.
    Served(Walk),
}

fn note_err(w: &mut Walk, e: &std::io::Error) {
    w.errors += 1;
    if e.raw_os_error() == Some(rustix::io::Errno::NOTCONN.raw_os_error()) {
        w.disconnected = true;
    }
}

/// Walks `root`: every entry stat'ed, files read, links read, xattrs
/// listed and read, and a 5000-byte file `ext4r-probe` written in each
/// directory, up to `max_entries` entries.
pub fn walk(root: &Path, max_entries: usize) -> Walk {
    let mut w = Walk::default();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        if w.disconnected || w.entries >= max_entries {
            break;
        }
        match fs::File::create(dir.join("ext4r-probe")).and_then(|mut f| f.write_all(&[7u8; 5000]))
        {
            Ok(()) => w.writes_ok += 1,
            Err(e) => note_err(&mut w, &e),
        }
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) => {
                note_err(&mut w, &e);
                continue;
            }
        };
        for e in rd {
            let e = match e {
                Ok(e) => e,
                Err(e) => {
                    note_err(&mut w, &e);
                    break;
                }
            };
            w.entries += 1;
            if w.entries >= max_entries {
                break;
            }
            let p = e.path();
            let m = match fs::symlink_metadata(&p) {
                Ok(m) => m,
                Err(e) => {
                    note_err(&mut w, &e);
                    continue;
                }
            };
            let mut names = vec![0u8; 65536];
            match rustix::fs::llistxattr(&p, &mut names[..]) {
                Ok(n) => {
                    for name in names[..n].split(|b| *b == 0).filter(|s| !s.is_empty()) {
                        let mut v = vec![0u8; 65536];
                        if rustix::fs::lgetxattr(&p, name, &mut v[..]).is_err() {
                            w.errors += 1;
                        }
                    }
                }
                Err(_) => w.errors += 1,
            }
            if m.file_type().is_symlink() {
                if let Err(e) = fs::read_link(&p) {
                    note_err(&mut w, &e);
                }
            } else if m.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((p, depth + 1));
                }
            } else if m.is_file() {
                let r = fs::File::open(&p).and_then(|f| {
                    let mut buf = Vec::new();
                    f.take(MAX_READ).read_to_end(&mut buf).map(|_| ())
                });
                if let Err(e) = r {
                    note_err(&mut w, &e);
                }
            }
        }
    }
    w
}

/// Whether `dir` is a mount point now, as /proc/self/mountinfo says (a
/// stat of it would ask the driver, which may answer EUCLEAN for a
/// damaged root).
pub fn is_mounted(dir: &Path) -> bool {
    let Ok(want) = fs::canonicalize(dir.parent().unwrap_or(dir)) else {
        return false;
    };
    let want = want.join(dir.file_name().unwrap_or_default());
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.to_string_lossy().as_ref()))
}

fn lazy_unmount(dir: &Path) {
    let _ = Command::new("umount").arg("-l").arg(dir).output();
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Mounts `img` on `dir` with `ext4r mount -f` (`ext4r` is the binary),
/// the driver's stderr to `log`; walks at most `max_entries` entries;
/// unmounts with `ext4r umount`. Each stage gets `watchdog`. `Err` says
/// what went wrong: a crash or a hang (the mount is then torn down).
pub fn serve(
    ext4r: &Path,
    img: &Path,
    dir: &Path,
    log: &Path,
    max_entries: usize,
    watchdog: Duration,
) -> Result<Verdict, String> {
    serve_with(ext4r, img, dir, log, max_entries, watchdog, false)
}

/// [`serve`], mounted `-o ro` when `read_only` (the probe writes are then
/// answered EROFS).
pub fn serve_with(
    ext4r: &Path,
    img: &Path,
    dir: &Path,
    log: &Path,
    max_entries: usize,
    watchdog: Duration,
    read_only: bool,
) -> Result<Verdict, String> {
    let stderr = fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut child = Command::new(ext4r)
        .args(["mount", "-f"])
        // Whatever the image's s_errors says, the walk goes on past the
        // damage it meets (with panic the driver would stop on purpose,
        // and the walk would count that as a crash).
        .args(if read_only {
            &["-o", "ro,errors=continue"][..]
        } else {
            &["-o", "errors=continue"]
        })
        .arg(img)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", ext4r.display()))?;
    let t0 = Instant::now();
    while !is_mounted(dir) {
        if let Ok(Some(status)) = child.try_wait() {
            let text = fs::read_to_string(log).unwrap_or_default();
            if text.contains("panicked") || status.code().is_none() {
                return Err(format!("the driver died while mounting ({status}): {text}"));
            }
            if text.trim().is_empty() {
                return Err(format!("refused with no message ({status})"));
            }
            return Ok(Verdict::Refused);
        }
        if t0.elapsed() > watchdog {
            kill(&mut child);
            lazy_unmount(dir);
            return Err("hung while mounting".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (tx, rx) = mpsc::channel();
    let root = dir.to_path_buf();
    let walker = std::thread::spawn(move || {
        let _ = tx.send(walk(&root, max_entries));
    });
    let Ok(seen) = rx.recv_timeout(watchdog) else {
        // Killing the driver aborts the connection: the walk's blocked
        // calls return ENOTCONN.
        kill(&mut child);
        let _ = walker.join();
        lazy_unmount(dir);
        return Err("the walk hung".into());
    };
    let _ = walker.join();
    let um = Command::new(ext4r).arg("umount").arg(dir).output();
    let t1 = Instant::now();
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s;
        }
        if t1.elapsed() > watchdog {
            kill(&mut child);
            lazy_unmount(dir);
            return Err("the driver hung at unmount".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = fs::read_to_string(log).unwrap_or_default();
    if text.contains("panicked") || status.code().is_none() || seen.disconnected {
        return Err(format!("the driver crashed ({status}): {text}"));
    }
    match um {
        Ok(o) if o.status.success() => Ok(Verdict::Served(seen)),
        Ok(o) => {
            lazy_unmount(dir);
            Err(format!(
                "ext4r umount failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ))
        }
        Err(e) => {
            lazy_unmount(dir);
            Err(format!("cannot run ext4r umount: {e}"))
        }
    }
}

/// `e2fsck -fn` with a time limit in seconds: e2fsck 1.47.0 loops for
/// ever on a few corpus images; a timeout (124) counts as "not clean".
pub fn e2fsck_limited(img: &Path, secs: u32) -> i32 {
    Command::new("timeout")
        .arg(secs.to_string())
        .args(["e2fsck", "-fn"])
        .arg(img)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()
        .and_then(|s| s.code())
        .unwrap_or(-1)
}

/// Whether mounting `img` has recovery to do: a journal to replay, or
/// orphans (the list, or the orphan file's present flag), per dumpe2fs.
/// Such an image may end clean after any mount, the kernel's too.
pub fn needs_recovery(img: &Path) -> bool {
    let Ok(o) = Command::new("dumpe2fs")
        .arg("-h")
        .arg(img)
        .stderr(Stdio::null())
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines().any(|l| {
        (l.starts_with("Filesystem features:")
            && (l.contains("needs_recovery") || l.contains("orphan_present")))
            || l.starts_with("First orphan inode:")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_directory_is_walked_and_probed() {
        let t = crate::util::TempDir::new_in(&std::env::temp_dir(), "mountwalk").expect("temp dir");
        let root = t.path().join("root");
        fs::create_dir_all(root.join("a/b")).expect("mkdir");
        fs::write(root.join("a/f"), b"data").expect("write");
        std::os::unix::fs::symlink("f", root.join("a/l")).expect("symlink");
        let w = walk(&root, 100);
        // a, a/b, a/f, a/l, and the probe files of root and a.
        assert_eq!(w.writes_ok, 3, "{w:?}");
        assert!(w.entries >= 6, "{w:?}");
        assert!(!w.disconnected);
        assert!(root.join("a/b/ext4r-probe").is_file());
        assert!(!is_mounted(&root));
        assert_eq!(walk(&root, 2).entries, 2);
    }
}
