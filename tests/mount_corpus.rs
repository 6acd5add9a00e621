//! `ext4r mount` on crafted images: each image of the e2fsprogs test
//! corpus (`../shared/corpus/e2fsprogs`, read in place, each gunzipped to
//! a temp dir) is mounted read-write, its whole tree walked and read
//! (names, attributes, file contents, link targets, xattrs), and one file
//! written in every directory; all under a watchdog. Errors are answers
//! (EUCLEAN, EIO, ENOSPC, a refused mount); a crash (a panic, a dead
//! driver) or a hang is a failure. After the unmount, an image e2fsck
//! found damaged must still be found damaged: the mount never makes a
//! damaged image look clean.
//!
//! CI runs every other image; `EXT4R_MOUNT_CORPUS=all` runs them all.
//! Needs root, /dev/fuse, e2fsprogs and the corpus; says why it skips.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::corpus::corpus_dir;
use common::*;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one image's walk may take before it counts as a hang.
const WATCHDOG: Duration = Duration::from_secs(60);
/// Entries walked per image at most (a crafted tree may be huge or loop);
/// the CI sample walks fewer.
const MAX_ENTRIES: usize = 20_000;
const SAMPLE_ENTRIES: usize = 2_000;

/// Damaged images that legitimately end e2fsck-clean after the mount, and
/// why. Nothing else may.
const CLEANED: &[(&str, &str)] = &[
    (
        "f_deleted_inode_bad_csum",
        "the damage is the record of a free inode (bad checksum); the probe file is given that \
         inode, and a new record replaces it, as on the kernel's ext4",
    ),
    (
        "f_bad_bmap_csum",
        "KNOWN LIBRARY GAP: the write API allocates in a group whose bitmap fails its checksum \
         and rewrites it with a good one; the kernel marks such a group corrupt and leaves it",
    ),
];
/// Bytes read per file at most.
const MAX_READ: u64 = 8 << 20;

/// What the walk saw.
#[derive(Debug, Default)]
struct Walk {
    entries: usize,
    errors: usize,
    writes_ok: usize,
    /// ENOTCONN: the driver went away under the walk.
    disconnected: bool,
}

fn note_err(w: &mut Walk, e: &std::io::Error) {
    w.errors += 1;
    if e.raw_os_error() == Some(rustix::io::Errno::NOTCONN.raw_os_error()) {
        w.disconnected = true;
    }
}

/// Walks `root`: every entry stat'ed, files read, links read, xattrs
/// listed and read, and a file written in each directory.
fn walk(root: &Path, max_entries: usize) -> Walk {
    let mut w = Walk::default();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        if w.disconnected || w.entries >= max_entries {
            break;
        }
        // One write per directory.
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
                if depth < 64 {
                    stack.push((p, depth + 1));
                }
            } else if m.is_file() {
                let r = fs::File::open(&p).and_then(|f| {
                    use std::io::Read;
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
fn is_mounted(dir: &Path) -> bool {
    let Ok(want) = fs::canonicalize(dir.parent().unwrap_or(dir)) else {
        return false;
    };
    let want = want.join(dir.file_name().unwrap_or_default());
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.to_string_lossy().as_ref()))
}

/// The driver, in the foreground, its stderr to `log`.
fn start(img: &Path, dir: &Path, log: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .args(["mount", "-f"])
        .arg(img)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// How one image went.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The mount was refused with a message.
    Refused,
    /// Mounted, walked, unmounted.
    Served,
}

/// Mounts, walks and unmounts one image; `Err` says what went wrong (a
/// crash or a hang).
fn one(img: &Path, dir: &Path, log: &Path, max_entries: usize) -> Result<(Verdict, Walk), String> {
    let mut child = start(img, dir, log);
    let t0 = Instant::now();
    loop {
        if is_mounted(dir) {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let text = fs::read_to_string(log).unwrap_or_default();
            if text.contains("panicked") || status.code().is_none() {
                return Err(format!("the driver died while mounting ({status}): {text}"));
            }
            if text.trim().is_empty() {
                return Err(format!("refused with no message ({status})"));
            }
            return Ok((Verdict::Refused, Walk::default()));
        }
        if t0.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            let _ = Command::new("umount").arg("-l").arg(dir).output();
            return Err("hung while mounting".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (tx, rx) = mpsc::channel();
    let root = dir.to_path_buf();
    let walker = std::thread::spawn(move || {
        let _ = tx.send(walk(&root, max_entries));
    });
    let seen = match rx.recv_timeout(WATCHDOG) {
        Ok(w) => w,
        Err(_) => {
            // Killing the driver aborts the connection: the walk's
            // blocked calls return ENOTCONN.
            let _ = child.kill();
            let _ = child.wait();
            let _ = walker.join();
            let _ = Command::new("umount").arg("-l").arg(dir).output();
            return Err("the walk hung".into());
        }
    };
    let _ = walker.join();
    let um = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .arg("umount")
        .arg(dir));
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t1.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            let _ = Command::new("umount").arg("-l").arg(dir).output();
            return Err("the driver hung at unmount".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = fs::read_to_string(log).unwrap_or_default();
    if text.contains("panicked") || status.code().is_none() || seen.disconnected {
        return Err(format!("the driver crashed ({status}): {text}"));
    }
    if !um.status.success() {
        let _ = Command::new("umount").arg("-l").arg(dir).output();
        return Err(format!(
            "ext4r umount failed: {}",
            String::from_utf8_lossy(&um.stderr)
        ));
    }
    Ok((Verdict::Served, seen))
}

/// `e2fsck -fn` with a time limit: e2fsck 1.47.0 loops for ever on a
/// few corpus images (see the corpus's verdicts.tsv); a timeout (124)
/// counts as "not clean", as it did before the mount.
fn e2fsck_limited(img: &Path, secs: u32) -> i32 {
    run(Command::new("timeout")
        .arg(secs.to_string())
        .args(["e2fsck", "-fn"])
        .arg(img))
    .status
    .code()
    .unwrap_or(-1)
}

/// Whether mounting `img` has recovery to do: a journal to replay, or
/// orphans (the list, or the orphan file's present flag), per dumpe2fs.
fn needs_recovery(img: &Path) -> bool {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines().any(|l| {
        (l.starts_with("Filesystem features:")
            && (l.contains("needs_recovery") || l.contains("orphan_present")))
            || l.starts_with("First orphan inode:")
    })
}

#[test]
fn crafted_images_neither_crash_nor_hang() {
    if !is_root() || !Path::new("/dev/fuse").exists() {
        eprintln!("skipping mount_corpus: needs root and /dev/fuse");
        return;
    }
    if !have("e2fsck") || !have("dumpe2fs") || !have("gzip") || !have("timeout") {
        eprintln!("skipping mount_corpus: e2fsck, gzip or timeout is not installed");
        return;
    }
    let Some(corpus) = corpus_dir() else {
        eprintln!("skipping mount_corpus: no e2fsprogs corpus (../shared/corpus/e2fsprogs)");
        return;
    };
    let all = std::env::var("EXT4R_MOUNT_CORPUS").is_ok_and(|v| v == "all");
    // Seconds e2fsck gets per run (the CI sample's are fewer).
    let limit = if all { 30 } else { 8 };
    let mut cases: Vec<PathBuf> = fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("image.gz").is_file())
        .collect();
    cases.sort();
    let td = TempDir::new("mount-corpus");
    let dir = td.path("m");
    fs::create_dir_all(&dir).unwrap();
    let (mut served, mut refused, mut still_damaged, mut damaged, mut explained) = (0, 0, 0, 0, 0);
    let (mut entries, mut errors, mut writes) = (0, 0, 0);
    let mut failures = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        if !all && k % 2 == 1 {
            continue;
        }
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let img = td.path("image");
        let o = run(Command::new("sh").arg("-c").arg(format!(
            "gzip -dc '{}' > '{}'",
            case.join("image.gz").display(),
            img.display()
        )));
        assert!(o.status.success(), "{name}: gunzip failed");
        let before = e2fsck_limited(&img, limit);
        let recovers = needs_recovery(&img);
        let log = td.path("log");
        let t = Instant::now();
        let r = one(
            &img,
            &dir,
            &log,
            if all { MAX_ENTRIES } else { SAMPLE_ENTRIES },
        );
        if std::env::var_os("EXT4R_MOUNT_VERBOSE").is_some() {
            eprintln!(
                "  {name}: {:?} in {:.1} s",
                r.as_ref().map(|(v, w)| (v, w.entries, w.errors)),
                t.elapsed().as_secs_f64()
            );
        }
        match r {
            Ok((Verdict::Refused, _)) => refused += 1,
            Ok((Verdict::Served, w)) => {
                served += 1;
                entries += w.entries;
                errors += w.errors;
                writes += w.writes_ok;
            }
            Err(why) => failures.push(format!("{name}: {why}")),
        }
        // A journal to replay and orphans to finish are what a mount does
        // (the kernel's too): such an image may end clean.
        if before != 0 && !recovers {
            damaged += 1;
            let after = e2fsck_limited(&img, limit);
            if after != 0 {
                still_damaged += 1;
            } else if let Some((_, why)) = CLEANED.iter().find(|(n, _)| *n == name) {
                eprintln!("  {name}: clean after the mount, as expected: {why}");
                explained += 1;
            } else {
                failures.push(format!(
                    "{name}: e2fsck -fn exit {before} before the mount, clean after it"
                ));
            }
        }
    }
    eprintln!(
        "mount_corpus: {} images: {served} served ({entries} entries walked, {errors} errors \
         answered, {writes} probe files written), {refused} refused; {still_damaged} of \
         {damaged} damaged images still damaged after the unmount ({explained} clean for a \
         listed reason); {} failures",
        served + refused + failures.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
