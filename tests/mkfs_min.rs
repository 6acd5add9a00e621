//! `mkfs.ext4r -d SOURCE` at the smallest size (no size for a new image
//! file, or the size word `min`): the image must be e2fsck-clean, no
//! larger than `mke2fs -d` followed by `resize2fs -M` makes from the same
//! tree, show the source tree through a kernel mount, and be the same
//! bytes twice under SOURCE_DATE_EPOCH. `min+N%` adds free room; `min`
//! without -d, with a tree on standard input or with bigalloc, is
//! refused with no file left behind; a tar archive is measured from its
//! headers.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

/// A small tree of every common kind: 1,200 files of mixed sizes in a few
/// directories, a 3 MiB file, a sparse file, symlinks, a hard link.
fn make_tree(root: &Path) {
    for d in 0..6 {
        fs::create_dir_all(root.join(format!("dir{d}/sub"))).unwrap();
    }
    for i in 0..1200usize {
        let size = [0, 10, 900, 3000, 4096, 12_000][i % 6];
        let data: Vec<u8> = (0..size).map(|j| ((i * 31 + j * 7) % 253) as u8).collect();
        let sub = if i % 5 == 0 { "/sub" } else { "" };
        fs::write(root.join(format!("dir{}{sub}/file{i:05}", i % 6)), data).unwrap();
    }
    let big: Vec<u8> = (0..3 << 20).map(|j: usize| (j * 131 % 251) as u8).collect();
    fs::write(root.join("big.bin"), big).unwrap();
    let sp = fs::File::create(root.join("sparse")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sp, b"middle", 5 << 20).unwrap();
    sp.set_len(32 << 20).unwrap();
    std::os::unix::fs::symlink("dir0/file00000", root.join("fast-link")).unwrap();
    std::os::unix::fs::symlink("/".to_string() + &"x".repeat(200), root.join("slow-link")).unwrap();
    fs::hard_link(root.join("dir1/file00001"), root.join("hard")).unwrap();
    set_times(root);
}

/// Modification times before SOURCE_DATE_EPOCH (not clamped: the kernel
/// view shows them as the source has them), children first so that no
/// directory's time moves afterwards. Access times (reading the tree
/// moves them) are later than the epoch, so always clamped to it.
fn set_times(p: &Path) {
    use rustix::fs::{AtFlags, Timespec, Timestamps, CWD};
    if fs::symlink_metadata(p).unwrap().is_dir() {
        for e in fs::read_dir(p).unwrap() {
            set_times(&e.unwrap().path());
        }
    }
    let mtime = Timespec {
        tv_sec: 1_600_000_000,
        tv_nsec: 123_456_789,
    };
    let atime = Timespec {
        tv_sec: 1_800_000_000,
        tv_nsec: 0,
    };
    let t = Timestamps {
        last_access: atime,
        last_modification: mtime,
    };
    rustix::fs::utimensat(CWD, p, &t, AtFlags::SYMLINK_NOFOLLOW).unwrap();
}

fn output(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `mkfs.ext4r -q -d src img [size]` under SOURCE_DATE_EPOCH.
fn mkfs_min(img: &Path, src: &Path, size: Option<&str>) -> std::process::Output {
    let _ = fs::remove_file(img);
    let mut c = ext4r();
    c.args(["mkfs", "-q", "-d"])
        .arg(src)
        .arg(img)
        .args(size)
        .env("SOURCE_DATE_EPOCH", FAKE_TIME);
    run(&mut c)
}

/// Block count and block size from the superblock.
fn blocks(img: &Path) -> (u64, u64) {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    let text = String::from_utf8_lossy(&o.stdout);
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    (field("Block count:"), field("Block size:"))
}

/// `mke2fs -t ext4 -d src` at the first size from 16 MiB up (doubling)
/// that holds the tree, then `resize2fs -M`: the image's length in bytes.
fn mke2fs_then_resize2fs(img: &Path, src: &Path) -> u64 {
    let mut size = 16u64 << 20;
    loop {
        let _ = fs::remove_file(img);
        let o = run(Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext4", "-d"])
            .arg(src)
            .arg(img)
            .arg(format!("{}k", size >> 10))
            .env("E2FSPROGS_FAKE_TIME", FAKE_TIME));
        if o.status.success() {
            break;
        }
        assert!(size < 1 << 30, "mke2fs -d: {}", output(&o));
        size *= 2;
    }
    let o = run(Command::new("resize2fs").arg("-M").arg(img));
    assert!(o.status.success(), "resize2fs -M: {}", output(&o));
    fs::metadata(img).unwrap().len()
}

#[test]
fn smallest_image_holds_the_tree() {
    if !have("e2fsck") || !have("dumpe2fs") {
        eprintln!("skipped: e2fsck/dumpe2fs not installed");
        return;
    }
    let t = TempDir::new("mkfs-min");
    let src = t.path("src");
    make_tree(&src);
    let img = t.path("min.img");
    let o = mkfs_min(&img, &src, None);
    assert!(o.status.success(), "mkfs -d without a size: {}", output(&o));
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn: {out}");
    // The file ends where the filesystem does.
    let (count, bs) = blocks(&img);
    let len = fs::metadata(&img).unwrap().len();
    assert_eq!(len, count * bs, "image length against the block count");

    // The same tree again: the same bytes; `min` spelt out: the same.
    let again = t.path("again.img");
    let o = mkfs_min(&again, &src, Some("min"));
    assert!(o.status.success(), "mkfs -d ... min: {}", output(&o));
    let cmp = run(Command::new("cmp").arg(&img).arg(&again));
    assert!(cmp.status.success(), "not reproducible: {}", output(&cmp));
    fs::remove_file(&again).unwrap();

    if have("mke2fs") && have("resize2fs") {
        let theirs = mke2fs_then_resize2fs(&t.path("theirs.img"), &src);
        eprintln!("ours {len} bytes ({count} blocks of {bs}), mke2fs -d + resize2fs -M {theirs}");
        assert!(
            len <= theirs,
            "ours {len} bytes, mke2fs -d + resize2fs -M {theirs}"
        );
        fs::remove_file(t.path("theirs.img")).unwrap();
    } else {
        eprintln!("mke2fs/resize2fs not installed: size comparison skipped");
    }

    if !is_root() || !have("losetup") {
        eprintln!("skipped the kernel view: needs root and losetup");
        return;
    }
    let want = manifest(&src);
    let mut m = LoopMount::new(&img, &t.path("mnt")).unwrap();
    let got = manifest(&m.dir);
    m.umount().unwrap();
    let diffs: Vec<_> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: {v} / {:?}", got.get(k)))
        .chain(
            got.keys()
                .filter(|k| !want.contains_key(*k))
                .map(|k| format!("{k}: only in the image")),
        )
        .take(10)
        .collect();
    assert!(
        diffs.is_empty(),
        "kernel view differs:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn slack_and_refusals() {
    if !have("e2fsck") || !have("dumpe2fs") {
        eprintln!("skipped: e2fsck/dumpe2fs not installed");
        return;
    }
    let t = TempDir::new("mkfs-min-slack");
    let src = t.path("src");
    fs::create_dir_all(src.join("etc")).unwrap();
    fs::write(src.join("etc/motd"), b"hello\n").unwrap();
    let min = t.path("min.img");
    let o = mkfs_min(&min, &src, Some("min"));
    assert!(o.status.success(), "{}", output(&o));
    let slack = t.path("slack.img");
    let o = mkfs_min(&slack, &src, Some("min+50%"));
    assert!(o.status.success(), "{}", output(&o));
    let (rc, out) = e2fsck_fn(&slack);
    assert_eq!(rc, 0, "e2fsck -fn: {out}");
    let (a, _) = blocks(&min);
    let (b, bs) = blocks(&slack);
    assert!(b >= a + a / 2, "min+50%: {b} blocks, min {a}");
    assert_eq!(fs::metadata(&slack).unwrap().len(), b * bs);

    // An existing, larger file is cut to the minimum.
    let existing = t.path("existing.img");
    fs::File::create(&existing)
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    let o = run(ext4r()
        .args(["mkfs", "-q", "-F", "-d"])
        .arg(&src)
        .arg(&existing)
        .arg("min")
        .env("SOURCE_DATE_EPOCH", FAKE_TIME));
    assert!(o.status.success(), "{}", output(&o));
    assert_eq!(
        fs::metadata(&existing).unwrap().len(),
        fs::metadata(&min).unwrap().len()
    );

    // A tar archive is measured from its headers.
    if have("tar") {
        let tar = t.path("tree.tar");
        let o = run(Command::new("tar")
            .arg("-C")
            .arg(&src)
            .arg("-cf")
            .arg(&tar)
            .arg("."));
        assert!(o.status.success(), "{}", output(&o));
        let from_tar = t.path("tar.img");
        let o = mkfs_min(&from_tar, &tar, None);
        assert!(o.status.success(), "{}", output(&o));
        let (rc, out) = e2fsck_fn(&from_tar);
        assert_eq!(rc, 0, "e2fsck -fn: {out}");
        let (c, bs) = blocks(&from_tar);
        assert_eq!(fs::metadata(&from_tar).unwrap().len(), c * bs);
    }

    // `min` needs a tree; standard input cannot be measured.
    let none = t.path("none.img");
    let o = run(ext4r().args(["mkfs", "-q"]).arg(&none).arg("min"));
    assert_eq!(o.status.code(), Some(1), "{}", output(&o));
    assert!(output(&o).contains("needs -d"), "{}", output(&o));
    assert!(!none.exists());
    let o = run(ext4r()
        .args(["mkfs", "-q", "-d", "-"])
        .arg(&none)
        .stdin(std::process::Stdio::null()));
    assert_eq!(o.status.code(), Some(1), "{}", output(&o));
    assert!(output(&o).contains("standard input"), "{}", output(&o));
    assert!(!none.exists());
    // bigalloc cannot be shrunk yet: refused before anything is made.
    let o = run(ext4r()
        .args(["mkfs", "-q", "-O", "bigalloc", "-C", "16384", "-d"])
        .arg(&src)
        .arg(&none));
    assert_eq!(o.status.code(), Some(1), "{}", output(&o));
    assert!(output(&o).contains("bigalloc"), "{}", output(&o));
    assert!(!none.exists());
}
