//! `ext4r mount` against the kernel: one seeded random POSIX workload runs
//! on an image mounted with our FUSE driver and on its twin mounted by the
//! kernel's ext4 (a loop mount). Every operation must give the same
//! result (the same bytes, or the same errno) on both; after each batch
//! the two trees must be equal (names, types, sizes, modes, owners, link
//! counts, xattrs, contents, and the times the workload set), also across
//! an unmount and remount of both; at the end both images are
//! e2fsck-clean and each, mounted by the other driver, shows the same
//! tree.
//!
//! CI runs `EXT4R_MOUNT_OPS` operations (default 20,000, the campaign
//! issue 32 asks CI for: about a minute here); `EXT4R_MOUNT_SEED` picks
//! the workload. Needs root, /dev/fuse and e2fsprogs; says why it skips
//! without them.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::mount::{Fuse, Kernel};
use common::tree::fnv;
use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Operations between two comparisons of the trees.
const BATCH: usize = 250;
/// Batches between two unmount/remount rounds.
const REMOUNT_EVERY: usize = 3;

/// splitmix64: a seeded generator that needs no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let seed = self.next();
        (0..n)
            .map(|i| (seed.rotate_left((i % 64) as u32) as u8) ^ (i as u8))
            .collect()
    }
}

/// What an operation gave: its output, or the errno.
type Outcome = Result<String, i32>;

fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

fn rx(e: rustix::io::Errno) -> i32 {
    e.raw_os_error()
}

/// One operation, drawn once and applied to each tree.
#[derive(Debug, Clone)]
enum Op {
    Write {
        path: String,
        create: bool,
        offset: u64,
        data: Vec<u8>,
    },
    Read {
        path: String,
        offset: u64,
        len: usize,
    },
    Truncate {
        path: String,
        len: u64,
    },
    Mkdir {
        path: String,
        mode: u32,
    },
    Rmdir(String),
    Unlink(String),
    Rename {
        from: String,
        to: String,
        noreplace: bool,
        /// RENAME_EXCHANGE (with noreplace too: EINVAL from both).
        exchange: bool,
        /// RENAME_WHITEOUT: a character device 0:0 left at the old name
        /// (with exchange too: EINVAL from both).
        whiteout: bool,
    },
    Link {
        from: String,
        to: String,
    },
    Symlink {
        target: String,
        path: String,
    },
    Chmod {
        path: String,
        mode: u32,
    },
    Chown {
        path: String,
        uid: u32,
        gid: u32,
    },
    Utimens {
        path: String,
        atime: (i64, i64),
        mtime: (i64, i64),
    },
    SetXattr {
        path: String,
        name: String,
        value: Vec<u8>,
        flags: u32,
    },
    RemoveXattr {
        path: String,
        name: String,
    },
    Fsync(String),
    OpenUnlinkRead {
        path: String,
        len: usize,
    },
    Fallocate {
        path: String,
        offset: u64,
        len: u64,
        /// fallocate's mode: KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE or none.
        mode: rustix::fs::FallocateFlags,
    },
    Mkfifo(String),
}

/// A path in a small name space, so that operations meet each other's
/// results: half the time one that exists (`tree`, the paths in the tree
/// now), else a name of the name space in an existing directory (so that
/// creations mostly succeed, and the rest fail alike).
fn path(r: &mut Rng, tree: &[(String, bool)]) -> String {
    const LEAVES: &[&str] = &["f0", "f1", "f2", "f3", "f4", "d0", "d1", "d2", "l0"];
    if !tree.is_empty() && r.below(2) == 0 {
        return r.pick(tree).0.clone();
    }
    let dirs: Vec<&String> = tree.iter().filter(|(_, d)| *d).map(|(p, _)| p).collect();
    let leaf = *r.pick(LEAVES);
    if dirs.is_empty() || r.below(4) == 0 {
        return leaf.to_string();
    }
    format!("{}/{leaf}", r.pick(&dirs))
}

/// Mostly an existing non-directory, for the operations on file data.
fn file_path(r: &mut Rng, tree: &[(String, bool)]) -> String {
    let files: Vec<&String> = tree.iter().filter(|(_, d)| !*d).map(|(p, _)| p).collect();
    if files.is_empty() || r.below(4) == 0 {
        return path(r, tree);
    }
    r.pick(&files).to_string()
}

/// The paths under `root` (lost+found left out), sorted, with whether
/// each is a directory; at most three levels deep, so that the tree stays
/// small.
fn paths(root: &Path) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == "lost+found" {
                continue;
            }
            let is_dir = e.file_type().unwrap().is_dir();
            if is_dir && depth < 2 {
                stack.push((p, depth + 1));
            }
            out.push((rel, is_dir && depth < 2));
        }
    }
    out.sort();
    out
}

fn xattr_name(r: &mut Rng) -> String {
    {
        let ns = *r.pick(&["user", "trusted"]);
        format!("{ns}.a{}", r.below(4))
    }
}

/// A time the workload sets: before 2001, so that the comparison can tell
/// it from the clock's.
fn old_time(r: &mut Rng) -> (i64, i64) {
    (
        600_000_000 + r.below(300_000_000) as i64,
        r.below(1_000_000_000) as i64,
    )
}

fn draw(r: &mut Rng, tree: &[(String, bool)]) -> Op {
    match r.below(100) {
        0..=17 => Op::Write {
            path: file_path(r, tree),
            create: r.below(4) != 0,
            // Holes: writes land anywhere in the first 300 KiB.
            offset: if r.below(3) == 0 {
                0
            } else {
                r.below(300 << 10)
            },
            data: {
                let big = r.below(4) == 0;
                let n = r.below(if big { 70_000 } else { 5000 }) as usize + 1;
                r.bytes(n)
            },
        },
        18..=27 => Op::Read {
            path: file_path(r, tree),
            offset: r.below(320 << 10),
            len: r.below(70_000) as usize,
        },
        28..=32 => Op::Truncate {
            path: file_path(r, tree),
            len: r.below(320 << 10),
        },
        33..=40 => Op::Mkdir {
            path: path(r, tree),
            mode: *r.pick(&[0o755, 0o700, 0o2775, 0o1777]),
        },
        41..=44 => Op::Rmdir(path(r, tree)),
        45..=50 => Op::Unlink(path(r, tree)),
        51..=58 => {
            let from = path(r, tree);
            // Now and then a directory moved into its own subtree, which
            // both drivers must refuse (EINVAL) rather than detach it.
            let to = if r.below(6) == 0 {
                format!("{from}/{}", path(r, tree).replace('/', "_"))
            } else {
                path(r, tree)
            };
            Op::Rename {
                from,
                to,
                noreplace: r.below(4) == 0,
                exchange: r.below(3) == 0,
                whiteout: r.below(5) == 0,
            }
        }
        59..=62 => Op::Link {
            from: path(r, tree),
            to: path(r, tree),
        },
        63..=66 => Op::Symlink {
            target: if r.below(5) == 0 {
                "t".repeat(60 + r.below(200) as usize)
            } else {
                path(r, tree)
            },
            path: path(r, tree),
        },
        67..=71 => Op::Chmod {
            path: path(r, tree),
            mode: r.below(0o10000) as u32 | 0o600,
        },
        72..=75 => Op::Chown {
            path: path(r, tree),
            uid: *r.pick(&[0, 1000, 1001, 65534]),
            gid: *r.pick(&[0, 100, 1000, 65534]),
        },
        76..=79 => Op::Utimens {
            path: path(r, tree),
            atime: old_time(r),
            mtime: old_time(r),
        },
        80..=85 => Op::SetXattr {
            path: file_path(r, tree),
            name: xattr_name(r),
            value: {
                let n = r.below(300) as usize;
                r.bytes(n)
            },
            flags: *r.pick(&[0, 0, 1, 2]),
        },
        86..=88 => Op::RemoveXattr {
            path: path(r, tree),
            name: xattr_name(r),
        },
        89..=91 => Op::Fsync(path(r, tree)),
        92..=94 => Op::OpenUnlinkRead {
            path: file_path(r, tree),
            len: r.below(100_000) as usize,
        },
        95..=97 => Op::Fallocate {
            path: file_path(r, tree),
            offset: r.below(200 << 10),
            len: r.below(100 << 10) + 1,
            mode: {
                use rustix::fs::FallocateFlags as F;
                *r.pick(&[
                    F::empty(),
                    F::KEEP_SIZE,
                    F::PUNCH_HOLE | F::KEEP_SIZE,
                    F::ZERO_RANGE,
                    F::ZERO_RANGE | F::KEEP_SIZE,
                ])
            },
        },
        _ => Op::Mkfifo(path(r, tree)),
    }
}

/// `O_NONBLOCK` on every open of the workload: a FIFO never blocks it.
const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;

/// Opens for reading without blocking on a FIFO.
fn open_ro(p: &Path) -> Result<fs::File, i32> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(NONBLOCK)
        .open(p)
        .map_err(errno)
}

/// Runs `op` under `root`.
fn apply(root: &Path, op: &Op) -> Outcome {
    use rustix::fs::{AtFlags, CWD};
    let at = |p: &str| root.join(p);
    match op {
        Op::Write {
            path,
            create,
            offset,
            data,
        } => {
            let f = fs::OpenOptions::new()
                .write(true)
                .create(*create)
                .mode(0o644)
                .custom_flags(NONBLOCK)
                .open(at(path))
                .map_err(errno)?;
            f.write_all_at(data, *offset).map_err(errno)?;
            Ok(String::new())
        }
        Op::Read { path, offset, len } => {
            let f = open_ro(&at(path))?;
            let mut buf = vec![0u8; *len];
            let n = f.read_at(&mut buf, *offset).map_err(errno)?;
            Ok(format!("{n}:{:x}", fnv(&buf[..n])))
        }
        Op::Truncate { path, len } => {
            let f = fs::OpenOptions::new()
                .write(true)
                .custom_flags(NONBLOCK)
                .open(at(path))
                .map_err(errno)?;
            f.set_len(*len).map_err(errno)?;
            Ok(String::new())
        }
        Op::Mkdir { path, mode } => {
            fs::create_dir(at(path)).map_err(errno)?;
            fs::set_permissions(at(path), fs::Permissions::from_mode(*mode)).map_err(errno)?;
            Ok(String::new())
        }
        Op::Rmdir(p) => fs::remove_dir(at(p)).map(|_| String::new()).map_err(errno),
        Op::Unlink(p) => fs::remove_file(at(p)).map(|_| String::new()).map_err(errno),
        Op::Rename {
            from,
            to,
            noreplace,
            exchange,
            whiteout,
        } => {
            let mut flags = rustix::fs::RenameFlags::empty();
            if *noreplace {
                flags |= rustix::fs::RenameFlags::NOREPLACE;
            }
            if *exchange {
                flags |= rustix::fs::RenameFlags::EXCHANGE;
            }
            if *whiteout {
                flags |= rustix::fs::RenameFlags::WHITEOUT;
            }
            rustix::fs::renameat_with(CWD, at(from), CWD, at(to), flags)
                .map(|_| String::new())
                .map_err(rx)
        }
        Op::Link { from, to } => fs::hard_link(at(from), at(to))
            .map(|_| String::new())
            .map_err(errno),
        Op::Symlink { target, path } => std::os::unix::fs::symlink(target, at(path))
            .map(|_| String::new())
            .map_err(errno),
        Op::Chmod { path, mode } => {
            fs::set_permissions(at(path), fs::Permissions::from_mode(*mode))
                .map(|_| String::new())
                .map_err(errno)
        }
        Op::Chown { path, uid, gid } => rustix::fs::chownat(
            CWD,
            at(path),
            Some(rustix::fs::Uid::from_raw(*uid)),
            Some(rustix::fs::Gid::from_raw(*gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map(|_| String::new())
        .map_err(rx),
        Op::Utimens { path, atime, mtime } => {
            let ts = |t: &(i64, i64)| rustix::fs::Timespec {
                tv_sec: t.0,
                tv_nsec: t.1,
            };
            let times = rustix::fs::Timestamps {
                last_access: ts(atime),
                last_modification: ts(mtime),
            };
            rustix::fs::utimensat(CWD, at(path), &times, AtFlags::SYMLINK_NOFOLLOW)
                .map(|_| String::new())
                .map_err(rx)
        }
        Op::SetXattr {
            path,
            name,
            value,
            flags,
        } => rustix::fs::lsetxattr(
            at(path),
            name.as_str(),
            value,
            rustix::fs::XattrFlags::from_bits_retain(*flags),
        )
        .map(|_| String::new())
        .map_err(rx),
        Op::RemoveXattr { path, name } => rustix::fs::lremovexattr(at(path), name.as_str())
            .map(|_| String::new())
            .map_err(rx),
        Op::Fsync(p) => {
            let f = open_ro(&at(p))?;
            f.sync_all().map_err(errno)?;
            Ok(String::new())
        }
        Op::OpenUnlinkRead { path, len } => {
            // Only regular files: opening a FIFO would block.
            let m = fs::symlink_metadata(at(path)).map_err(errno)?;
            if !m.is_file() {
                return Ok("not a file".into());
            }
            let mut f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(at(path))
                .map_err(errno)?;
            fs::remove_file(at(path)).map_err(errno)?;
            // The data stays readable and writable through the descriptor.
            f.write_all_at(b"still here", 3).map_err(errno)?;
            f.seek(SeekFrom::Start(0)).map_err(errno)?;
            let mut buf = vec![0u8; *len];
            let n = f.read(&mut buf).map_err(errno)?;
            let links = f.metadata().map_err(errno)?.nlink();
            Ok(format!("{n}:{:x}:nlink={links}", fnv(&buf[..n])))
        }
        Op::Fallocate {
            path,
            offset,
            len,
            mode,
        } => {
            let f = fs::OpenOptions::new()
                .write(true)
                .custom_flags(NONBLOCK)
                .open(at(path))
                .map_err(errno)?;
            rustix::fs::fallocate(&f, *mode, *offset, *len)
                .map(|_| String::new())
                .map_err(rx)
        }
        Op::Mkfifo(p) => rustix::fs::mknodat(
            CWD,
            at(p),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o640),
            0,
        )
        .map(|_| String::new())
        .map_err(rx),
    }
}

/// Everything compared about a tree: path -> description. Directory
/// sizes (how many blocks the entries take) and ctimes are the drivers'
/// own; times the workload set (before 2001) must agree.
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
            let mut d = format!(
                "mode={:o} uid={} gid={} nlink={}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.nlink()
            );
            for (what, s, ns) in [
                ("atime", m.atime(), m.atime_nsec()),
                ("mtime", m.mtime(), m.mtime_nsec()),
            ] {
                if s < 1_000_000_000 {
                    d += &format!(" {what}={s}.{ns:09}");
                }
            }
            let ft = m.file_type();
            if ft.is_symlink() {
                d += &format!(" -> {}", fs::read_link(&p).unwrap().display());
            } else if m.is_dir() {
                stack.push(p.clone());
            } else if m.is_file() {
                let data = fs::read(&p).unwrap();
                d += &format!(" size={} hash={:x}", m.len(), fnv(&data));
            } else {
                d += &format!(" rdev={:x}", m.rdev());
            }
            let mut names = vec![0u8; 4096];
            let n = rustix::fs::llistxattr(&p, &mut names[..]).unwrap_or(0);
            let mut list: Vec<&[u8]> = names[..n]
                .split(|b| *b == 0)
                .filter(|s| !s.is_empty())
                .collect();
            list.sort();
            for name in list {
                let name = String::from_utf8_lossy(name).into_owned();
                let mut v = vec![0u8; 65536];
                let vn = rustix::fs::lgetxattr(&p, name.as_str(), &mut v[..]).unwrap();
                d += &format!(" {name}={:x}", fnv(&v[..vn]));
            }
            out.insert(rel, d);
        }
    }
    out
}

fn assert_same(what: &str, a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) {
    if a == b {
        return;
    }
    let mut diffs = Vec::new();
    for k in a.keys().chain(b.keys()) {
        if a.get(k) != b.get(k) && !diffs.iter().any(|(x, _, _)| x == k) {
            diffs.push((k.clone(), a.get(k).cloned(), b.get(k).cloned()));
        }
    }
    let shown: Vec<String> = diffs
        .iter()
        .take(10)
        .map(|(k, x, y)| format!("  {k}:\n    ext4r:  {x:?}\n    kernel: {y:?}"))
        .collect();
    panic!(
        "{what}: the trees differ in {} entries:\n{}",
        diffs.len(),
        shown.join("\n")
    );
}

fn skip_reason() -> Option<String> {
    if !is_root() {
        return Some("not root (FUSE and loop mounts need it)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse (modprobe fuse)".into());
    }
    for tool in ["mke2fs", "e2fsck", "mount", "umount"] {
        if !have(tool) {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

fn fsck_clean(img: &Path, what: &str) {
    let (rc, out) = e2fsck_fn(img);
    assert_eq!(rc, 0, "e2fsck -fn of the {what} image: {out}");
}

#[test]
fn workload_matches_the_kernel() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping mount_diff: {why}");
        return;
    }
    let ops: usize = std::env::var("EXT4R_MOUNT_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let seed: u64 = std::env::var("EXT4R_MOUNT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_2026);
    // Comparing after every operation (EXT4R_MOUNT_BATCH=1) finds the one
    // that made the trees differ.
    let batch_len: usize = std::env::var("EXT4R_MOUNT_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(BATCH)
        .max(1);
    let td = TempDir::new("mount-diff");
    let (ours_img, kern_img) = (td.path("ours.img"), td.path("kernel.img"));
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "4096"],
        &ours_img,
        "256M",
    )
    .unwrap();
    copy_sparse(&ours_img, &kern_img).unwrap();
    let (ours_dir, kern_dir) = (td.path("ours"), td.path("kernel"));
    let mut ours = Fuse::mount(&ours_img, &ours_dir);
    let mut kern = Kernel::mount(&kern_img, &kern_dir);

    let start = Instant::now();
    let mut rng = Rng(seed);
    let mut failed_alike = 0usize;
    // Whiteout renames both drivers did (the rest failed alike).
    let mut whiteouts = 0usize;
    let mut failures: BTreeMap<(String, i32), usize> = BTreeMap::new();
    let mut batch = 0usize;
    for k in 0..ops {
        let op = draw(&mut rng, &paths(&kern.dir));
        let a = apply(&ours.dir, &op);
        let b = apply(&kern.dir, &op);
        assert_eq!(
            a, b,
            "seed {seed}, operation {k}: {op:?}\n  ext4r gave {a:?}, the kernel {b:?}"
        );
        if a.is_ok() && matches!(op, Op::Rename { whiteout: true, .. }) {
            whiteouts += 1;
        }
        if let Err(e) = &a {
            failed_alike += 1;
            let kind = format!("{op:?}");
            let kind = kind.split([' ', '(']).next().unwrap_or("").to_string();
            *failures.entry((kind, *e)).or_insert(0usize) += 1;
        }
        if (k + 1) % batch_len == 0 || k + 1 == ops {
            batch += 1;
            assert_same(
                &format!("seed {seed}, after operation {k} ({op:?})"),
                &describe(&ours.dir),
                &describe(&kern.dir),
            );
            if batch % REMOUNT_EVERY == 0 {
                ours.umount();
                kern.umount();
                fsck_clean(&ours_img, "ext4r-written");
                fsck_clean(&kern_img, "kernel-written");
                ours = Fuse::mount(&ours_img, &ours_dir);
                kern = Kernel::mount(&kern_img, &kern_dir);
                assert_same(
                    &format!("seed {seed}, remounted after operation {k}"),
                    &describe(&ours.dir),
                    &describe(&kern.dir),
                );
            }
        }
    }
    if std::env::var_os("EXT4R_MOUNT_VERBOSE").is_some() {
        for ((op, e), n) in &failures {
            eprintln!("  {op} failed with errno {e}: {n} times");
        }
    }
    let tree = describe(&ours.dir);
    ours.umount();
    kern.umount();
    fsck_clean(&ours_img, "ext4r-written");
    fsck_clean(&kern_img, "kernel-written");

    // Each image through the other driver.
    let mut ours_by_kernel = Kernel::mount(&ours_img, &ours_dir);
    let mut kern_by_ours = Fuse::mount(&kern_img, &kern_dir);
    let a = describe(&ours_by_kernel.dir);
    let b = describe(&kern_by_ours.dir);
    assert_same("ext4r's image by the kernel", &tree, &a);
    assert_same("the kernel's image by ext4r", &tree, &b);
    ours_by_kernel.umount();
    kern_by_ours.umount();
    fsck_clean(&ours_img, "ext4r-written (after the kernel mounted it)");
    fsck_clean(&kern_img, "kernel-written (after ext4r mounted it)");
    eprintln!(
        "mount_diff: seed {seed}: {ops} operations ({failed_alike} failed alike, {whiteouts} whiteout renames), {} entries at the end, {batch} batches, {:.1} s",
        tree.len(),
        start.elapsed().as_secs_f64()
    );
    // A whiteout rename is drawn about once in 60 operations and needs
    // an existing source: a workload of a few hundred has some.
    assert!(
        ops < 1000 || whiteouts > 0,
        "no whiteout rename succeeded in {ops} operations"
    );
}

/// `-o ro` never writes to the image: after a read-only mount, a walk of
/// every file and attempted changes (refused with EROFS), the image is
/// byte-identical; and a read-write mount refuses an image the kernel has
/// mounted.
#[test]
fn read_only_mount_writes_nothing() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping mount_diff: {why}");
        return;
    }
    let td = TempDir::new("mount-ro");
    let img = td.path("ro.img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "64M").unwrap();
    let dir = td.path("m");
    let expected = {
        let k = Kernel::mount(&img, &dir);
        let mut r = Rng(7);
        fs::create_dir(k.dir.join("d")).unwrap();
        for i in 0..20 {
            let n = r.below(200_000) as usize;
            let data = r.bytes(n);
            fs::write(k.dir.join(format!("d/f{i}")), data).unwrap();
        }
        std::os::unix::fs::symlink("d/f0", k.dir.join("s")).unwrap();
        rustix::fs::lsetxattr(
            k.dir.join("d/f1"),
            "user.k",
            b"v",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
        // A second writer while the kernel has it: refused.
        let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
            .args(["mount", "-f"])
            .arg(&img)
            .arg(td.path("other")));
        assert_eq!(o.status.code(), Some(32), "{o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("mounted"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut k = k;
        let seen = describe(&k.dir);
        k.umount();
        seen
    };
    let before = fs::read(&img).unwrap();
    let mut m = Fuse::mount_with(&img, &dir, &["-o", "ro"]);
    assert_same("the read-only mount", &describe(&m.dir), &expected);
    for (what, r) in [
        ("create", fs::write(m.dir.join("new"), b"x").map_err(errno)),
        ("mkdir", fs::create_dir(m.dir.join("nd")).map_err(errno)),
        ("unlink", fs::remove_file(m.dir.join("s")).map_err(errno)),
        (
            "truncate",
            fs::OpenOptions::new()
                .write(true)
                .open(m.dir.join("d/f2"))
                .map(|_| ())
                .map_err(errno),
        ),
    ] {
        assert_eq!(r, Err(libc_erofs()), "{what} on a read-only mount");
    }
    m.umount();
    assert!(
        fs::read(&img).unwrap() == before,
        "the read-only mount changed the image"
    );
}

/// `EROFS`.
fn libc_erofs() -> i32 {
    rustix::io::Errno::ROFS.raw_os_error()
}
