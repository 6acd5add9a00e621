//! The resize matrix: mke2fs layouts × (grow ×2, grow ×1000, shrink by
//! half, shrink to the minimum), each on an image the kernel filled
//! (files with hashes, hard links, extended attributes in the inode and
//! in a shared block, a large directory, a sparse file, a deep tree, a
//! symlink), resized by the
//! library, and the same operation by resize2fs on a twin. After each of
//! ours: `e2fsck -fn` exits 0, `dumpe2fs` shows the new size, the kernel
//! mounts it and every path has the type, mode, size, link count, contents
//! and attributes it had; `-P` equals what `-M` reaches, and is at most
//! resize2fs's `-M`. A table row per layout is printed (`--nocapture`).
//!
//! The ×1000 grow goes to the largest size the format allows when ×1000
//! is past it (the cell says what capped it); its images are sparse, on
//! /dev/shm. By default a sample of layouts runs (a couple of minutes),
//! two of them with the ×1000 grow; `EXT4R_RESIZE_MATRIX=all` runs every
//! one, or a comma-separated list of names picks some (all of them with
//! the ×1000 grow). Needs root (loop mounts) and e2fsprogs; skipped with
//! a printed reason otherwise.

#![allow(clippy::unwrap_used)]

mod common;

use common::{missing_tools, run, run_status};
use ext4r::device::{FileDevice, OpenMode};
use ext4r::resize::{minimum_size, resize_image, NewSize, ResizeOptions};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// (name, mke2fs arguments, shrinks: false where a shrink is refused by
/// design and the refusal is what is checked).
const LAYOUTS: &[(&str, &str, bool)] = &[
    ("ext4-4k", "-t ext4 -b 4096", true),
    ("ext4-1k", "-t ext4 -b 1024", true),
    ("ext4-2k", "-t ext4 -b 2048", true),
    ("ext4-noflex", "-t ext4 -O ^flex_bg", true),
    ("ext4-uninit", "-t ext4 -O ^metadata_csum,uninit_bg", true),
    ("ext4-32bit", "-t ext4 -O ^64bit", true),
    ("ext4-metabg", "-t ext4 -O meta_bg,^resize_inode", true),
    ("ext4-noresize", "-t ext4 -O ^resize_inode", true),
    ("ext4-sparse2", "-t ext4 -O sparse_super2", true),
    (
        "ext4-nosparse",
        "-t ext4 -O ^sparse_super,^resize_inode",
        true,
    ),
    ("ext4-nojournal", "-t ext4 -O ^has_journal", true),
    ("ext4-inode128", "-t ext4 -I 128", true),
    ("ext4-inline", "-t ext4 -O inline_data", true),
    ("ext4-flex4", "-t ext4 -G 4", true),
    ("ext4-manyinodes", "-t ext4 -i 4096", true),
    ("ext4-orphanfile", "-t ext4 -O orphan_file", true),
    ("ext4-eainode", "-t ext4 -O ea_inode", true),
    ("ext4-largedir", "-t ext4 -O large_dir,huge_file", true),
    ("ext4-csumseed", "-t ext4 -O metadata_csum_seed", true),
    ("ext4-noextent", "-t ext4 -O ^extent,^64bit", true),
    (
        "ext4-4k-metabg",
        "-t ext4 -b 4096 -O meta_bg,^resize_inode",
        true,
    ),
    ("ext4-4k-inline", "-t ext4 -b 4096 -O inline_data", true),
    ("ext4-4k-32bit", "-t ext4 -b 4096 -O ^64bit", true),
    ("ext4-4k-nojournal", "-t ext4 -b 4096 -O ^has_journal", true),
    ("ext4-4k-sparse2", "-t ext4 -b 4096 -O sparse_super2", true),
    ("ext4-4k-noflex", "-t ext4 -b 4096 -O ^flex_bg", true),
    (
        "ext4-4k-uninit",
        "-t ext4 -b 4096 -O ^metadata_csum,uninit_bg",
        true,
    ),
    ("ext3", "-t ext3", true),
    ("ext3-4k", "-t ext3 -b 4096", true),
    ("ext2", "-t ext2", true),
    ("ext2-4k", "-t ext2 -b 4096", true),
    ("ext4-bigalloc", "-t ext4 -O bigalloc -C 16384", false),
];

/// The layouts run without `EXT4R_RESIZE_MATRIX`.
const SAMPLE: &[&str] = &[
    "ext4-4k",
    "ext4-1k",
    "ext4-metabg",
    "ext4-inline",
    "ext3",
    "ext2",
    "ext4-bigalloc",
];

/// The layouts that also grow ×1000 without `EXT4R_RESIZE_MATRIX` (every
/// chosen layout does with it): 1 KiB blocks, where the descriptor table
/// outgrows the resize inode's reserve and the filesystem turns to
/// meta_bg, and 4 KiB blocks, where the reserve holds it.
const SAMPLE_GROW1000: &[&str] = &["ext4-4k", "ext4-1k"];

/// Image size (mke2fs picks 1 KiB blocks below 512 MiB unless told).
const SIZE: &str = "256M";

/// A directory for the images, on /dev/shm when there is one; removed
/// on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let p = base.join(format!("ext4r-resize-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    fn join(&self, n: &str) -> PathBuf {
        self.0.join(n)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `f` on `img` loop-mounted at `mnt`; always unmounts.
fn mounted<T>(img: &Path, mnt: &Path, ro: bool, f: impl FnOnce(&Path) -> T) -> Result<T, String> {
    std::fs::create_dir_all(mnt).unwrap();
    let opts = if ro { "loop,ro" } else { "loop" };
    run(
        "mount",
        &["-o", opts, img.to_str().unwrap(), mnt.to_str().unwrap()],
        &[],
    )?;
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(mnt)));
    let mut unmounted = false;
    for _ in 0..20 {
        if run("umount", &[mnt.to_str().unwrap()], &[]).is_ok() {
            unmounted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    if !unmounted {
        let _ = run("umount", &["-l", mnt.to_str().unwrap()], &[]);
    }
    out.map_err(|_| "panicked while mounted".to_string())
}

/// A deterministic byte stream.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn setxattr(p: &Path, name: &str, value: &[u8]) {
    rustix::fs::lsetxattr(p, name, value, rustix::fs::XattrFlags::empty())
        .unwrap_or_else(|e| panic!("setxattr {name} on {}: {e}", p.display()));
}

/// Fills the mounted filesystem at `root`.
fn fill(root: &Path) {
    let files = root.join("files");
    std::fs::create_dir_all(&files).unwrap();
    for i in 1..=40u64 {
        std::fs::write(files.join(format!("f{i}")), bytes(i, (i * 7919) as usize)).unwrap();
    }
    std::fs::hard_link(files.join("f1"), files.join("hard1")).unwrap();
    let deep = root.join("deep");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::hard_link(files.join("f2"), deep.join("hard2")).unwrap();
    setxattr(&files.join("f3"), "user.a", b"hello");
    // The same large value on several files: one shared attribute block.
    let big = vec![b'x'; 700];
    for f in ["f4", "f5", "f6", "f7"] {
        setxattr(&files.join(f), "user.big", &big);
    }
    let bigdir = root.join("bigdir");
    std::fs::create_dir_all(&bigdir).unwrap();
    for i in 0..600 {
        std::fs::write(
            bigdir.join(format!("entry_with_a_long_name_{i}")),
            format!("{i}\n"),
        )
        .unwrap();
    }
    setxattr(&bigdir, "user.other", &[b'y'; 600]);
    let sparse = std::fs::File::create(root.join("sparse")).unwrap();
    sparse.set_len(50 << 20).unwrap();
    sparse.write_all_at(&bytes(99, 40960), 100 * 4096).unwrap();
    sparse.write_all_at(b"tail\n", 50 << 20).unwrap();
    drop(sparse);
    let mut d = root.join("deep");
    for i in 1..=30 {
        d = d.join(format!("d{i}"));
    }
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("leaf"), b"deepfile\n").unwrap();
    std::fs::create_dir_all(root.join("big")).unwrap();
    std::fs::write(root.join("big/b1"), bytes(7, 3 << 20)).unwrap();
    std::os::unix::fs::symlink("files/f1", root.join("symlink")).unwrap();
}

fn fnv(h: u64, data: &[u8]) -> u64 {
    data.iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The attributes of a path, names sorted, hashed with their values.
fn xattr_hash(p: &Path) -> u64 {
    let mut names = vec![0u8; 65536];
    let n = rustix::fs::llistxattr(p, &mut names).unwrap_or(0);
    let mut list: Vec<&[u8]> = names[..n]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .collect();
    list.sort();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for name in list {
        let mut v = vec![0u8; 65536];
        let k = rustix::fs::lgetxattr(p, std::str::from_utf8(name).unwrap(), &mut v).unwrap_or(0);
        h = fnv(fnv(fnv(h, name), &[0]), &v[..k]);
    }
    h
}

/// path -> (mode, size, link count, contents hash, attributes hash).
type Tree = BTreeMap<String, (u32, u64, u64, u64, u64)>;

fn walk(root: &Path) -> Tree {
    let mut out = Tree::new();
    let mut stack = vec![PathBuf::from(root)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == "lost+found" {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            let content = if m.file_type().is_file() {
                fnv(0xcbf2_9ce4_8422_2325, &std::fs::read(&p).unwrap())
            } else if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                fnv(0xcbf2_9ce4_8422_2325, t.to_string_lossy().as_bytes())
            } else {
                0
            };
            let size = if m.is_dir() { 0 } else { m.size() };
            out.insert(rel, (m.mode(), size, m.nlink(), content, xattr_hash(&p)));
            if m.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

fn block_count(img: &Path) -> Result<u64, String> {
    let out = run("dumpe2fs", &["-h", img.to_str().unwrap()], &[])?;
    out.lines()
        .find_map(|l| l.strip_prefix("Block count:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "dumpe2fs: no block count".to_string())
}

/// e2fsck -fn clean, the new size `want` (when known) in dumpe2fs, the
/// kernel's view equal to `tree`; the block count.
fn check(img: &Path, mnt: &Path, want: Option<u64>, tree: &Tree) -> Result<u64, String> {
    let (code, out, _) = run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[])?;
    if code != 0 {
        return Err(format!(
            "e2fsck -fn exit {code}:\n{}",
            out.lines().take(15).collect::<Vec<_>>().join("\n")
        ));
    }
    let n = block_count(img)?;
    if let Some(w) = want {
        if n != w {
            return Err(format!("dumpe2fs shows {n} blocks, not {w}"));
        }
    }
    let seen = mounted(img, mnt, true, walk)?;
    if &seen != tree {
        let diff: Vec<_> = tree
            .iter()
            .filter(|(k, v)| seen.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .chain(seen.keys().filter(|k| !tree.contains_key(*k)).cloned())
            .take(5)
            .collect();
        return Err(format!("the kernel's view differs: {diff:?}"));
    }
    Ok(n)
}

fn copy(from: &Path, to: &Path) {
    run(
        "cp",
        &[
            "--sparse=always",
            from.to_str().unwrap(),
            to.to_str().unwrap(),
        ],
        &[],
    )
    .unwrap();
}

/// A dumpe2fs -h field of `img` as a number.
fn field(img: &Path, name: &str) -> u64 {
    let out = run("dumpe2fs", &["-h", img.to_str().unwrap()], &[]).unwrap();
    out.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The ×1000 grow target of `img` (`blocks` blocks), or the largest size
/// its format allows below it, with why it was capped: 32-bit block
/// numbers without 64bit, fewer than 2^32 inodes.
fn grow1000_target(img: &Path, blocks: u64) -> (u64, Option<&'static str>) {
    let want = blocks * 1000;
    let wide = run("dumpe2fs", &["-h", img.to_str().unwrap()], &[])
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Filesystem features:") && l.contains("64bit"));
    let bpg = field(img, "Blocks per group:");
    let ipg = field(img, "Inodes per group:");
    let first = field(img, "First block:");
    let mut cap = (want, None);
    if !wide && want > u64::from(u32::MAX) {
        cap = (
            u64::from(u32::MAX) / bpg * bpg,
            Some("32-bit block numbers"),
        );
    }
    let max_groups = u64::from(u32::MAX) / ipg.max(1);
    if cap.0.saturating_sub(first).div_ceil(bpg) > max_groups {
        cap = (max_groups * bpg + first, Some("2^32 inodes"));
    }
    cap
}

/// Why resize2fs's grow of `img` to `blocks` is not run beside ours: it
/// would write more than the scratch space takes. resize2fs keeps the
/// descriptor table whole after every superblock copy (it does not turn
/// to meta_bg), so without sparse_super every group gets a copy of a
/// table that grows with the group count: ×1000 of a 1 KiB-block image is
/// tens of GiB (ours turns to meta_bg: three blocks a group).
fn twin_too_big(img: &Path, blocks: u64) -> Option<String> {
    let out = run("dumpe2fs", &["-h", img.to_str().unwrap()], &[]).unwrap();
    let sparse = out
        .lines()
        .any(|l| l.starts_with("Filesystem features:") && l.contains("sparse_super"));
    let meta_bg = out
        .lines()
        .any(|l| l.starts_with("Filesystem features:") && l.contains("meta_bg"));
    if sparse || meta_bg {
        return None;
    }
    let bs = field(img, "Block size:");
    let bpg = field(img, "Blocks per group:");
    let first = field(img, "First block:");
    let desc = match field(img, "Group descriptor size:") {
        0 => 32,
        d => d,
    };
    let groups = (blocks - first).div_ceil(bpg);
    let table = groups.div_ceil(bs / desc);
    let bytes = groups * (1 + table) * bs;
    let room = rustix::fs::statvfs(img)
        .map(|v| v.f_bavail * v.f_frsize)
        .unwrap_or(0);
    (bytes > room / 4).then(|| {
        format!(
            "without sparse_super it would write a {table}-block descriptor table into \
             each of {groups} groups, {} GiB, past a quarter of the {} GiB free here",
            bytes >> 30,
            room >> 30
        )
    })
}

/// One row: per operation, ours and resize2fs's result. Panics on a
/// failure of ours. `grow1000`: also grow ×1000 (sparse images).
fn layout(name: &str, args: &str, shrinks: bool, grow1000: bool) -> String {
    let dir = Scratch::new(name);
    let mnt = dir.join("mnt");
    let base = dir.join("base.img");
    let mut a: Vec<&str> = vec!["-q", "-F"];
    a.extend(args.split_whitespace());
    a.extend([base.to_str().unwrap(), SIZE]);
    if let Err(e) = run("mke2fs", &a, &[]) {
        return format!("{name:18} mke2fs fails here: {e}");
    }
    if let Err(e) = mounted(&base, &mnt, false, fill) {
        return format!("{name:18} the kernel does not mount it here: {e}");
    }
    let _ = run_status("e2fsck", &["-fy", base.to_str().unwrap()], &[]);
    let tree = mounted(&base, &mnt, true, walk).unwrap();
    let blocks = block_count(&base).unwrap();
    let bs = {
        let sb = ext4r::resize::superblock(&FileDevice::open(&base, OpenMode::default()).unwrap())
            .unwrap();
        u64::from(sb.block_size().unwrap())
    };
    let opts = ResizeOptions::default();
    let mut row = format!("{name:18}");
    let mut mins = (None, None);
    let ops: &[&str] = if grow1000 {
        &["grow", "grow1000", "shrink", "min"]
    } else {
        &["grow", "shrink", "min"]
    };
    for &op in ops {
        let ours = dir.join(&format!("{op}.ours.img"));
        let twin = dir.join(&format!("{op}.r2fs.img"));
        copy(&base, &ours);
        copy(&base, &twin);
        let mut capped = None;
        let target = match op {
            "grow" => Some(blocks * 2),
            "grow1000" => {
                let (t, why) = grow1000_target(&base, blocks);
                capped = why;
                Some(t)
            }
            "shrink" => Some(blocks / 2),
            _ => None,
        };
        // Ours.
        let size = target.map_or(NewSize::Minimum, NewSize::Blocks);
        let printed = if op == "min" {
            let dev = FileDevice::open(&ours, OpenMode::default()).unwrap();
            Some(minimum_size(Arc::new(dev), &opts))
        } else {
            None
        };
        let result = resize_image(&ours, size, &opts);
        let cell = match (op, shrinks, result) {
            (_, _, Ok(r)) => {
                assert!(
                    shrinks || op.starts_with("grow"),
                    "{name} {op}: ours shrank a layout it should refuse"
                );
                let n = check(&ours, &mnt, target.or(Some(r.new_blocks)), &tree)
                    .unwrap_or_else(|e| panic!("{name} {op}: ours: {e}"));
                if let Some(p) = printed {
                    let p = p.unwrap_or_else(|e| panic!("{name}: -P: {e}"));
                    assert_eq!(p, n, "{name}: -P printed {p}, -M reached {n}");
                    mins.0 = Some(n);
                }
                let to_meta = if r.meta_bg { " to meta_bg" } else { "" };
                match capped {
                    Some(why) => format!("ok {n}{to_meta} (capped by {why})"),
                    None => format!("ok {n}{to_meta}"),
                }
            }
            (_, false, Err(e)) if !op.starts_with("grow") => {
                // Refused: nothing written.
                assert!(
                    std::fs::read(&ours).unwrap() == std::fs::read(&base).unwrap(),
                    "{name} {op}: refused ({e}) but the image changed"
                );
                "refused".to_string()
            }
            (_, _, Err(e)) => panic!("{name} {op}: ours failed: {e}"),
        };
        // resize2fs on the twin, unless it would fill /dev/shm.
        let t = twin.to_str().unwrap();
        if let Some(why) = target
            .filter(|_| op == "grow1000")
            .and_then(|n| twin_too_big(&base, n))
        {
            row += &format!(" | {op}: ours {cell}, resize2fs not run ({why})");
            let _ = std::fs::remove_file(&ours);
            let _ = std::fs::remove_file(&twin);
            continue;
        }
        let r2 = match target {
            Some(n) => {
                if n > blocks {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&twin)
                        .unwrap()
                        .set_len(n * bs)
                        .unwrap();
                }
                run_status("resize2fs", &[t, &n.to_string()], &[])
            }
            None => run_status("resize2fs", &["-M", t], &[]),
        }
        .unwrap();
        let r2cell = if r2.0 != 0 {
            let why =
                r2.2.lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
                    .to_string();
            format!("fails ({why})")
        } else {
            match check(&twin, &mnt, target, &tree) {
                Ok(n) => {
                    if op == "min" {
                        mins.1 = Some(n);
                    }
                    let meta = |p: &Path| {
                        run("dumpe2fs", &["-h", p.to_str().unwrap()], &[])
                            .unwrap_or_default()
                            .lines()
                            .any(|l| l.starts_with("Filesystem features:") && l.contains("meta_bg"))
                    };
                    let to_meta = if !meta(&base) && meta(&twin) {
                        " to meta_bg"
                    } else {
                        ""
                    };
                    format!("ok {n}{to_meta}")
                }
                Err(e) => format!("BROKEN: {}", e.lines().next().unwrap_or("")),
            }
        };
        row += &format!(" | {op}: ours {cell}, resize2fs {r2cell}");
        let _ = std::fs::remove_file(&ours);
        let _ = std::fs::remove_file(&twin);
    }
    if let (Some(o), Some(r)) = mins {
        assert!(o <= r, "{name}: our -M {o} is above resize2fs's {r}");
    }
    row
}

#[test]
fn resize_matrix() {
    if !rustix::process::geteuid().is_root() {
        println!("skipped: needs root for loop mounts");
        return;
    }
    if let Some(why) = missing_tools(&[
        "mke2fs",
        "e2fsck",
        "resize2fs",
        "dumpe2fs",
        "mount",
        "umount",
        "cp",
    ]) {
        println!("skipped: {why}");
        return;
    }
    let pick = std::env::var("EXT4R_RESIZE_MATRIX").unwrap_or_default();
    let chosen: Vec<_> = LAYOUTS
        .iter()
        .filter(|(n, _, _)| match pick.as_str() {
            "" => SAMPLE.contains(n),
            "all" => true,
            list => list.split(',').any(|p| p == *n),
        })
        .collect();
    for (name, args, shrinks) in chosen {
        let grow1000 = !pick.is_empty() || SAMPLE_GROW1000.contains(name);
        let row = layout(name, args, *shrinks, grow1000);
        println!("{row}");
    }
}
