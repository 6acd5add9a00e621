//! `ext4r mount` under concurrent writers, fsstress-style: several workers
//! create, write, append, truncate, read, rename, link, unlink, make and
//! remove directories and symlinks among the same few names in one
//! directory at once, for a while. Every error must be one the kernel's
//! ext4 would give to such a race (ENOENT, EEXIST, ENOTEMPTY, ENOTDIR,
//! EISDIR, ENOSPC, EMLINK); an I/O or corruption error, a dead driver or a
//! hang fails. After the unmount the image must be e2fsck-clean, and the
//! kernel must mount it and show the tree the driver showed last.
//!
//! CI runs 4 workers for 15 seconds; `EXT4R_MOUNT_STRESS_SECS=600` runs
//! the ten-minute campaign (`EXT4R_MOUNT_STRESS_WORKERS`,
//! `EXT4R_MOUNT_STRESS_SEED`). Needs root, /dev/fuse and e2fsprogs.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::mount::{Fuse, Kernel};
use common::tree::fnv;
use common::*;
use rustix::io::Errno;
use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Names the workers fight over: few, so that they meet.
const NAMES: u64 = 24;
/// Subdirectories, each with a few names of its own.
const DIRS: u64 = 4;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The errors a race between writers gives on the kernel's ext4 too
/// (`op` is the step: a hard link to a directory is EPERM, a directory
/// renamed into itself EINVAL).
fn expected(e: &std::io::Error, op: u64) -> bool {
    let Some(n) = e.raw_os_error() else {
        return false;
    };
    if (op == 8 && n == Errno::PERM.raw_os_error()) || (op == 6 && n == Errno::INVAL.raw_os_error())
    {
        return true;
    }
    [
        Errno::NOENT,
        Errno::EXIST,
        Errno::NOTEMPTY,
        Errno::NOTDIR,
        Errno::ISDIR,
        Errno::NOSPC,
        Errno::MLINK,
    ]
    .iter()
    .any(|x| x.raw_os_error() == n)
}

/// A name in the shared directory or one of its subdirectories.
fn name(r: &mut Rng) -> String {
    if r.below(4) == 0 {
        format!("d{}/n{}", r.below(DIRS), r.below(6))
    } else {
        format!("n{}", r.below(NAMES))
    }
}

/// Bytes `len` long, different per worker and step.
fn data(r: &mut Rng, len: usize) -> Vec<u8> {
    let b = r.next();
    (0..len)
        .map(|i| (b as u8).wrapping_add((i as u8).wrapping_mul(31)))
        .collect()
}

/// One step of a worker: `Err` carries what failed unexpectedly.
fn step(root: &Path, r: &mut Rng) -> Result<(), String> {
    let a = root.join(name(r));
    let op = r.below(14);
    let res: std::io::Result<()> = match op {
        0 | 1 => {
            let len = match r.below(4) {
                0 => r.below(64) as usize,
                1 => r.below(8192) as usize,
                _ => r.below(200_000) as usize,
            };
            let bytes = data(r, len);
            let sync = r.below(4) == 0;
            fs::File::create(&a).and_then(|mut f| {
                f.write_all(&bytes)?;
                if sync {
                    f.sync_all()?;
                }
                Ok(())
            })
        }
        2 => {
            let len = r.below(5000) as usize;
            let bytes = data(r, len);
            fs::OpenOptions::new()
                .append(true)
                .open(&a)
                .and_then(|mut f| f.write_all(&bytes))
        }
        3 => {
            let len = r.below(300_000);
            fs::OpenOptions::new()
                .write(true)
                .open(&a)
                .and_then(|f| f.set_len(len))
        }
        4 | 5 => fs::File::open(&a).and_then(|mut f| {
            let mut v = Vec::new();
            f.read_to_end(&mut v).map(|_| ())
        }),
        6 => fs::rename(&a, root.join(name(r))),
        7 => fs::remove_file(&a),
        8 => fs::hard_link(&a, root.join(name(r))),
        9 => std::os::unix::fs::symlink(format!("target-{}", r.below(100)), &a),
        10 => fs::create_dir(root.join(format!("d{}", r.below(DIRS)))),
        11 => fs::remove_dir(root.join(format!("d{}", r.below(DIRS)))),
        12 => fs::read_dir(root).and_then(|rd| {
            for e in rd {
                let e = e?;
                match fs::symlink_metadata(e.path()) {
                    Ok(_) => {}
                    // Gone between the listing and the stat.
                    Err(x) if x.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => {}
                    Err(x) => return Err(x),
                }
            }
            Ok(())
        }),
        _ => fs::create_dir(&a),
    };
    match res {
        Ok(()) => Ok(()),
        Err(e) if expected(&e, op) => Ok(()),
        Err(e) => Err(format!("op {op} on {}: {e}", a.display())),
    }
}

/// The tree under `root`: path -> type, size, link count, contents' hash
/// or link target.
fn describe(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == "lost+found" {
                continue;
            }
            let m = fs::symlink_metadata(&p).unwrap();
            let d = if m.file_type().is_symlink() {
                format!("-> {}", fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                format!("dir nlink={}", m.nlink())
            } else {
                let v = fs::read(&p).unwrap();
                format!(
                    "file size={} nlink={} hash={:x}",
                    m.len(),
                    m.nlink(),
                    fnv(&v)
                )
            };
            out.insert(rel, d);
        }
    }
    out
}

#[test]
fn concurrent_writers_in_one_directory() {
    if !is_root() || !Path::new("/dev/fuse").exists() {
        eprintln!("skipping mount_stress: needs root and /dev/fuse");
        return;
    }
    if !have("e2fsck") || !have("mount") {
        eprintln!("skipping mount_stress: e2fsck or mount is not installed");
        return;
    }
    let secs = env_u64("EXT4R_MOUNT_STRESS_SECS").unwrap_or(15);
    let workers = env_u64("EXT4R_MOUNT_STRESS_WORKERS").unwrap_or(4).max(1);
    let seed = env_u64("EXT4R_MOUNT_STRESS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1
    });
    let t = TempDir::new("mount-stress");
    let img = t.path("img");
    let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .args(["mkfs", "-q", "-F", "-t", "ext4"])
        .arg(&img)
        .arg("128M"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = t.path("m");
    let mut m = Fuse::mount(&img, &dir);
    let stop = AtomicBool::new(false);
    let steps = AtomicU64::new(0);
    let failures = Mutex::new(Vec::<String>::new());
    let deadline = Instant::now() + Duration::from_secs(secs);
    std::thread::scope(|s| {
        for w in 0..workers {
            let (stop, steps, failures, root) = (&stop, &steps, &failures, &m.dir);
            s.spawn(move || {
                let mut r = Rng(seed ^ (w + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    if let Err(e) = step(root, &mut r) {
                        let mut f = failures.lock().unwrap();
                        f.push(format!("worker {w}: {e}"));
                        if f.len() >= 10 {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    steps.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "seed {seed}: errors the kernel would not give:\n{}",
        failures.join("\n")
    );
    let seen = describe(&m.dir);
    m.umount();
    let (rc, out) = e2fsck_fn(&img);
    if rc != 0 {
        // Kept for a look (sparse, 128 MiB at most).
        let kept = std::env::temp_dir().join(format!("ext4r-mount-stress-{seed}.img"));
        let _ = copy_sparse(&img, &kept);
        panic!(
            "seed {seed}: e2fsck -fn after the unmount (image kept as {}): {out}",
            kept.display()
        );
    }
    let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .args(["fsck", "-fn"])
        .arg(&img));
    assert_eq!(
        o.status.code(),
        Some(0),
        "seed {seed}: fsck.ext4r -fn: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let mut k = Kernel::mount(&img, &t.path("k"));
    let theirs = describe(&k.dir);
    k.umount();
    assert!(
        seen == theirs,
        "seed {seed}: the kernel shows another tree ({} vs {} entries)",
        seen.len(),
        theirs.len()
    );
    eprintln!(
        "mount_stress: seed {seed}, {workers} workers, {secs} s: {} steps, {} entries at the end, \
         e2fsck clean, the kernel shows the same tree",
        steps.load(Ordering::Relaxed),
        seen.len()
    );
}
