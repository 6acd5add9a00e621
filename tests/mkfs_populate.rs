//! `mkfs.ext4r -d`: a tree of every file type (hard links, sparse files,
//! devices, FIFOs, sockets, fast and slow symlinks, long names, an htree
//! directory, owners and setuid modes) copied into a new filesystem must
//! show through a kernel mount exactly as the source shows (type, mode,
//! owner, link count, size, content, target, mtime with nanoseconds) and
//! as `mke2fs -d` makes it from the same tree (mke2fs keeps whole seconds
//! only), be e2fsck-clean, keep holes; a tar archive (every GNU sparse
//! flavour), also on standard input, gives the same tree; and with
//! SOURCE_DATE_EPOCH two runs on trees made in different orders at
//! different times must give the same bytes. Extended attributes of every
//! namespace and POSIX ACLs read back through the kernel as the source's
//! and as from mke2fs -d.
//!
//! The tree has 2,000 files by default; `EXT4R_POPULATE_FILES=100000`
//! runs the size (about a minute).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

fn files() -> usize {
    std::env::var("EXT4R_POPULATE_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn content(n: usize, seed: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i * 7 + seed * 13) % 251) as u8 ^ (i >> 11) as u8)
        .collect()
}

/// The source tree. `reverse` creates everything in the opposite order
/// (directory order on the host then differs); contents are the same.
fn make_tree(root: &Path, n: usize, reverse: bool) {
    fs::create_dir_all(root).unwrap();
    let dirs = (n / 1000).max(2);
    let mut order: Vec<usize> = (0..n).collect();
    if reverse {
        order.reverse();
    }
    for d in 0..dirs {
        fs::create_dir_all(root.join(format!("d{d:03}"))).unwrap();
    }
    for &i in &order {
        let p = root.join(format!("d{:03}/f{i:06}", i % dirs));
        let size = [0, 1, 60, 700, 4096, 5000, 70_000][i % 7];
        fs::write(&p, content(size, i)).unwrap();
    }
    // A big directory (htree) and a deep path.
    let big = root.join("big");
    fs::create_dir_all(&big).unwrap();
    let mut names: Vec<usize> = (0..1500).collect();
    if reverse {
        names.reverse();
    }
    for i in names {
        fs::write(big.join(format!("entry-with-a-longer-name-{i:05}")), b"x").unwrap();
    }
    let deep = root.join("a/b/c/d/e/f/g");
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("leaf"), b"deep").unwrap();
    // Every other file type.
    let s = root.join("special");
    fs::create_dir_all(&s).unwrap();
    let mk = |name: &str, kind: rustix::fs::FileType, dev: u64| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            s.join(name),
            kind,
            rustix::fs::Mode::from_raw_mode(0o640),
            dev,
        )
        .unwrap();
    };
    mk(
        "null",
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::makedev(1, 3),
    );
    mk(
        "big-dev",
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::makedev(300, 70_000),
    );
    mk(
        "loop",
        rustix::fs::FileType::BlockDevice,
        rustix::fs::makedev(7, 9),
    );
    mk("fifo", rustix::fs::FileType::Fifo, 0);
    drop(std::os::unix::net::UnixListener::bind(s.join("socket")).unwrap());
    std::os::unix::fs::symlink("../d000/f000000", s.join("fast")).unwrap();
    let long_target = format!("/{}", "t".repeat(300));
    std::os::unix::fs::symlink(&long_target, s.join("slow")).unwrap();
    fs::write(s.join("n".repeat(255)), b"long name").unwrap();
    // Hard links within and across directories.
    fs::write(s.join("linked"), content(9000, 1)).unwrap();
    fs::hard_link(s.join("linked"), s.join("linked2")).unwrap();
    fs::hard_link(s.join("linked"), root.join("d000/linked3")).unwrap();
    // Sparse files: a hole in the middle and at the end, and one all hole.
    let sp = fs::File::create(s.join("sparse")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sp, &content(8192, 2), 1 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sp, &content(100, 3), 8 << 20).unwrap();
    sp.set_len(64 << 20).unwrap();
    fs::File::create(s.join("hole"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    // Owners and modes.
    let own = s.join("owned");
    fs::write(&own, b"setuid").unwrap();
    rustix::fs::chown(
        &own,
        Some(rustix::fs::Uid::from_raw(70_000)),
        Some(rustix::fs::Gid::from_raw(1234)),
    )
    .unwrap();
    fs::set_permissions(&own, fs::Permissions::from_mode(0o4750)).unwrap();
    fs::set_permissions(root.join("a/b"), fs::Permissions::from_mode(0o1777)).unwrap();
}

/// Whether two (large, sparse) files hold the same bytes.
fn same_bytes(a: &Path, b: &Path) -> bool {
    run(Command::new("cmp").arg("-s").arg(a).arg(b))
        .status
        .success()
}

fn mkfs_d(img: &Path, src: &str, extra: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let _ = fs::remove_file(img);
    let mut c = ext4r();
    c.args(["mkfs", "-q"])
        .args(extra)
        .args(["-d", src])
        .arg(img)
        .arg("2G");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = run(&mut c);
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

type Manifest = std::collections::BTreeMap<String, String>;

/// The tree an image holds, as the kernel shows it; checked e2fsck-clean,
/// its holes kept and its hard links one inode.
fn mounted_tree(img: &Path, t: &TempDir) -> Manifest {
    let (rc, out) = e2fsck_fn(img);
    assert_eq!(rc, 0, "{}: e2fsck -fn: {out}", img.display());
    let mut m = LoopMount::new(img, &t.path("mnt")).unwrap();
    let got = manifest(&m.dir);
    // Holes stay holes: the 64 MiB file holds two small runs, the 1 GiB
    // one nothing.
    let sp = fs::metadata(m.dir.join("special/sparse")).unwrap();
    assert!(
        sp.blocks() * 512 <= 64 << 10,
        "sparse file took {} sectors",
        sp.blocks()
    );
    assert_eq!(
        fs::metadata(m.dir.join("special/hole")).unwrap().blocks(),
        0
    );
    // Three names, one inode.
    let ino = |p: &str| fs::metadata(m.dir.join(p)).unwrap().ino();
    assert_eq!(ino("special/linked"), ino("special/linked2"));
    assert_eq!(ino("special/linked"), ino("d000/linked3"));
    m.umount().unwrap();
    got
}

/// `want` against `got`: the first differences, or nothing.
fn differences(want: &Manifest, got: &Manifest, what: &str) -> Vec<String> {
    want.iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: expected {v}\n    {what} {:?}", got.get(k)))
        .chain(
            got.keys()
                .filter(|k| !want.contains_key(*k))
                .map(|k| format!("{k}: only in {what}")),
        )
        .take(10)
        .collect()
}

fn assert_same(want: &Manifest, got: &Manifest, what: &str) {
    let d = differences(want, got, what);
    assert!(d.is_empty(), "{} differences:\n{}", d.len(), d.join("\n"));
}

fn check_mounted(img: &Path, t: &TempDir, want: &Manifest) {
    let got = mounted_tree(img, t);
    assert_same(want, &got, "image");
}

/// `m` with times cut to whole seconds (what mke2fs -d keeps).
fn whole_seconds(m: &Manifest) -> Manifest {
    m.iter()
        .map(|(k, v)| {
            let v = v
                .split(' ')
                .map(|w| match w.strip_prefix("mtime=") {
                    Some(t) => format!("mtime={}", t.split('.').next().unwrap_or(t)),
                    None => w.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ");
            (k.clone(), v)
        })
        .collect()
}

/// `mke2fs -d src` with the same options on a fresh 2 GiB image.
fn mke2fs_d(img: &Path, src: &Path, extra: &[&str]) {
    let _ = fs::remove_file(img);
    let kind: &[&str] = if extra.contains(&"-t") {
        &[]
    } else {
        &["-t", "ext4"]
    };
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F"])
        .args(kind)
        .args(extra)
        .arg("-d")
        .arg(src)
        .arg(img)
        .arg("2G"));
    assert!(
        o.status.success(),
        "mke2fs -d: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_kernel_sees_the_source_tree() {
    if !is_root() || !have("e2fsck") {
        eprintln!("skipped: needs root (loop mounts) and e2fsck");
        return;
    }
    let t = TempDir::new("populate");
    let src = t.path("src");
    make_tree(&src, files(), false);
    let want = manifest(&src);
    let want_secs = whole_seconds(&want);
    for (name, extra) in [
        ("ext4", &[][..]),
        ("ext4-1k", &["-b", "1024"][..]),
        ("ext3", &["-t", "ext3"][..]),
        ("ext4-nocsum", &["-O", "^metadata_csum,uninit_bg"][..]),
    ] {
        let img = t.path(&format!("{name}.img"));
        let (rc, out) = mkfs_d(&img, src.to_str().unwrap(), extra, &[]);
        assert_eq!(rc, 0, "{name}: {out}");
        let ours = mounted_tree(&img, &t);
        assert_same(&want, &ours, &format!("{name} image"));
        fs::remove_file(&img).unwrap();
        // mke2fs -d on the same tree with the same options: the same tree,
        // to the second.
        if have("mke2fs") {
            mke2fs_d(&img, &src, extra);
            let theirs = mounted_tree(&img, &t);
            assert_same(
                &whole_seconds(&theirs),
                &whole_seconds(&ours),
                &format!("{name} ours (mke2fs -d's expected)"),
            );
            assert_same(&want_secs, &whole_seconds(&theirs), "mke2fs -d's image");
            fs::remove_file(&img).unwrap();
        }
        if files() > 10_000 {
            break;
        }
    }
}

#[test]
fn a_tar_archive_gives_the_same_tree() {
    if !is_root() || !have("e2fsck") || !have("tar") {
        eprintln!("skipped: needs root (loop mounts), e2fsck and tar");
        return;
    }
    let t = TempDir::new("populate-tar");
    let src = t.path("src");
    make_tree(&src, 300, false);
    // tar does not archive sockets.
    fs::remove_file(src.join("special/socket")).unwrap();
    let want = manifest(&src);
    let tar = t.path("tree.tar");
    let img = t.path("tar.img");
    // GNU tar's sparse members: its own format, and pax's three.
    for format in [
        &["--format=gnu"][..],
        &["--format=pax", "--sparse-version=0.0"][..],
        &["--format=pax", "--sparse-version=0.1"][..],
        &["--format=pax", "--sparse-version=1.0"][..],
    ] {
        let o = run(Command::new("tar")
            .args(format)
            .args(["--sparse", "--numeric-owner", "-C"])
            .arg(&src)
            .arg("-cf")
            .arg(&tar)
            .arg("."));
        assert!(
            o.status.success(),
            "tar: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (rc, out) = mkfs_d(&img, tar.to_str().unwrap(), &[], &[]);
        assert_eq!(rc, 0, "{format:?}: {out}");
        // The GNU format keeps whole seconds.
        if format[0] == "--format=gnu" {
            assert_same(
                &whole_seconds(&want),
                &whole_seconds(&mounted_tree(&img, &t)),
                "image",
            );
        } else {
            check_mounted(&img, &t, &want);
        }
    }
    // The same archive on standard input gives the same bytes.
    let a = t.path("stdin.img");
    let _ = fs::remove_file(&a);
    let o = run(Command::new("sh").arg("-c").arg(format!(
        "SOURCE_DATE_EPOCH=1600000000 {} mkfs -q -d - {} 2G < {} && SOURCE_DATE_EPOCH=1600000000 {} mkfs -q -d {} {} 2G",
        env!("CARGO_BIN_EXE_ext4r"),
        a.display(),
        tar.display(),
        env!("CARGO_BIN_EXE_ext4r"),
        tar.display(),
        img.display()
    )));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(same_bytes(&a, &img), "stdin and file differ");
}

#[test]
fn source_date_epoch_makes_identical_images() {
    if !have("e2fsck") {
        eprintln!("skipped: needs e2fsck");
        return;
    }
    let t = TempDir::new("populate-sde");
    let a = t.path("a");
    let b = t.path("b");
    make_tree(&a, 500, false);
    // Another order, a second later: other mtimes, inode numbers, readdir.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    make_tree(&b, 500, true);
    let env = [("SOURCE_DATE_EPOCH", "1600000000")];
    let (ia, ib, ic) = (t.path("a.img"), t.path("b.img"), t.path("c.img"));
    let (rc, out) = mkfs_d(&ia, a.to_str().unwrap(), &[], &env);
    assert_eq!(rc, 0, "{out}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (rc, out) = mkfs_d(&ib, b.to_str().unwrap(), &[], &env);
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = e2fsck_fn(&ia);
    assert_eq!(rc, 0, "e2fsck -fn: {out}");
    if !same_bytes(&ia, &ib) {
        let (n, at) = image_diffs(&ia, &ib, 5).unwrap();
        panic!("{n} bytes differ, first at {at:?}");
    }
    // Another epoch, another image.
    let (rc, out) = mkfs_d(
        &ic,
        a.to_str().unwrap(),
        &[],
        &[("SOURCE_DATE_EPOCH", "1600000001")],
    );
    assert_eq!(rc, 0, "{out}");
    assert!(!same_bytes(&ia, &ic));
}

#[test]
fn owners_forced_for_builds_without_root() {
    if !have("debugfs") {
        eprintln!("skipped: needs debugfs");
        return;
    }
    let t = TempDir::new("populate-owner");
    let src = t.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("d/f"), b"x").unwrap();
    let img = t.path("o.img");
    let (rc, out) = mkfs_d(&img, src.to_str().unwrap(), &["-E", "uid=0,gid=42"], &[]);
    assert_eq!(rc, 0, "{out}");
    for p in ["/d", "/d/f"] {
        let o = run(Command::new("debugfs")
            .arg("-R")
            .arg(format!("stat {p}"))
            .arg(&img));
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(s.contains("User:     0   Group:    42"), "{p}: {s}");
    }
}

#[test]
fn refusals_leave_the_device_alone() {
    let t = TempDir::new("populate-refuse");
    let img = t.path("r.img");
    fs::write(&img, vec![0x5au8; 4 << 20]).unwrap();
    let before = fs::read(&img).unwrap();
    // No such source: refused before anything is written.
    let o = run(ext4r()
        .args(["mkfs", "-q", "-d", "/nonexistent/source"])
        .arg(&img));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("/nonexistent/source") && err.contains("No such file or directory"),
        "{err}"
    );
    assert!(fs::read(&img).unwrap() == before, "the image changed");
    // A compressed archive: said so, nothing written.
    let gz = t.path("x.tar.gz");
    fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0]).unwrap();
    let o = run(ext4r().args(["mkfs", "-q", "-d"]).arg(&gz).arg(&img));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("gzip-compressed"));
    assert!(fs::read(&img).unwrap() == before, "the image changed");
}

/// Every xattr under `root` (all namespaces), path -> sorted (name, value).
fn all_xattrs(root: &Path) -> std::collections::BTreeMap<String, Vec<(String, Vec<u8>)>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let md = fs::symlink_metadata(&p).unwrap();
        if md.is_dir() {
            for e in fs::read_dir(&p).unwrap() {
                let e = e.unwrap().path();
                if e.file_name() != Some(std::ffi::OsStr::new("lost+found")) {
                    stack.push(e);
                }
            }
        }
        let mut names = vec![0u8; 65536];
        let n = rustix::fs::llistxattr(&p, &mut names[..]).unwrap();
        let mut xs = Vec::new();
        for name in names[..n].split(|b| *b == 0).filter(|s| !s.is_empty()) {
            let name = String::from_utf8_lossy(name).into_owned();
            let mut v = vec![0u8; 65536];
            let vn = rustix::fs::lgetxattr(&p, name.as_str(), &mut v[..]).unwrap();
            v.truncate(vn);
            xs.push((name, v));
        }
        xs.sort();
        if !xs.is_empty() {
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            out.insert(rel, xs);
        }
    }
    out
}

/// A POSIX ACL as setxattr takes it (version 2, 8-byte entries).
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

/// A tree whose files carry xattrs of each namespace and place (in the
/// inode, in a block, shared values), and ACLs; `None` when the temp
/// filesystem takes no user xattrs.
fn xattr_tree(src: &Path) -> Option<()> {
    use rustix::fs::{lsetxattr, XattrFlags};
    fs::create_dir_all(src.join("dir/sub")).unwrap();
    let set = |p: &Path, n: &str, v: &[u8]| lsetxattr(p, n, v, XattrFlags::empty());
    if set(src, "user.root", b"on the root").is_err() {
        return None;
    }
    for i in 0..20 {
        let f = src.join(format!("dir/f{i:02}"));
        fs::write(&f, format!("file {i}")).unwrap();
        set(&f, "user.small", format!("v{i}").as_bytes()).unwrap();
        // The same big values on several files (one block each, as mke2fs
        // and the kernel keep them), and a value too big for the inode.
        if i % 3 == 0 {
            set(&f, "user.big", &[b'b'; 700]).unwrap();
        }
        if i % 5 == 0 {
            set(&f, "trusted.t", &[i as u8; 40]).unwrap();
        }
    }
    let acl_file = src.join("dir/acl");
    fs::write(&acl_file, b"acl").unwrap();
    // user::rw- user:1000:r-- group::r-- group:70000:rw- mask::rw- other::---
    let access = acl(&[
        (0x01, 6, u32::MAX),
        (0x02, 4, 1000),
        (0x04, 4, u32::MAX),
        (0x08, 6, 70_000),
        (0x10, 6, u32::MAX),
        (0x20, 0, u32::MAX),
    ]);
    set(&acl_file, "system.posix_acl_access", &access).ok()?;
    let default = acl(&[
        (0x01, 7, u32::MAX),
        (0x04, 5, u32::MAX),
        (0x20, 5, u32::MAX),
    ]);
    set(&src.join("dir/sub"), "system.posix_acl_default", &default).ok()?;
    set(&src.join("dir/sub"), "user.on-a-dir", b"d").unwrap();
    std::os::unix::fs::symlink("f00", src.join("dir/link")).unwrap();
    set(&src.join("dir/link"), "trusted.on-a-link", b"l").unwrap();
    Some(())
}

#[test]
fn xattrs_copied_as_mke2fs_copies_them() {
    if !is_root() || !have("e2fsck") || !have("mke2fs") {
        eprintln!("skipped: needs root (loop mounts, trusted xattrs), e2fsck and mke2fs");
        return;
    }
    let t = TempDir::new("populate-xattr");
    let src = t.path("src");
    if xattr_tree(&src).is_none() {
        eprintln!("skipped: the temp filesystem takes no user xattrs or ACLs");
        return;
    }
    let want = all_xattrs(&src);
    assert!(want.len() >= 10, "{want:?}");
    let img = t.path("x.img");
    let read_back = |img: &Path| {
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "e2fsck -fn: {out}");
        let mut m = LoopMount::new(img, &t.path("mnt")).unwrap();
        let x = all_xattrs(&m.dir);
        m.umount().unwrap();
        x
    };
    for extra in [&[][..], &["-b", "1024"][..], &["-I", "128"][..]] {
        let (rc, out) = mkfs_d(&img, src.to_str().unwrap(), extra, &[]);
        assert_eq!(rc, 0, "{extra:?}: {out}");
        let ours = read_back(&img);
        mke2fs_d(&img, &src, extra);
        let theirs = read_back(&img);
        assert_eq!(ours, theirs, "{extra:?}: ours, then mke2fs -d's");
        assert_eq!(ours, want, "{extra:?}: ours, then the source's");
    }
    // Left out on request.
    let (rc, out) = mkfs_d(&img, src.to_str().unwrap(), &["-E", "no_copy_xattrs"], &[]);
    assert_eq!(rc, 0, "{out}");
    assert!(read_back(&img).is_empty());
    // From a tar archive's SCHILY.xattr records (GNU tar --xattrs).
    if have("tar") {
        let tar = t.path("x.tar");
        let o = run(Command::new("tar")
            .args([
                "--format=pax",
                "--xattrs",
                "--xattrs-include=*",
                "--acls",
                "-C",
            ])
            .arg(&src)
            .arg("-cf")
            .arg(&tar)
            .arg("."));
        assert!(
            o.status.success(),
            "tar: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (rc, out) = mkfs_d(&img, tar.to_str().unwrap(), &[], &[]);
        assert_eq!(rc, 0, "{out}");
        let got = read_back(&img);
        // tar keeps user and trusted xattrs (and ACLs in records of its own,
        // which mke2fs's tar support ignores too).
        let user_trusted = |m: &std::collections::BTreeMap<String, Vec<(String, Vec<u8>)>>| {
            m.iter()
                .map(|(k, v)| {
                    let v: Vec<_> = v
                        .iter()
                        .filter(|(n, _)| !n.starts_with("system."))
                        .cloned()
                        .collect();
                    (k.clone(), v)
                })
                .filter(|(_, v)| !v.is_empty())
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert_eq!(user_trusted(&got), user_trusted(&want));
    }
}

/// The size, ignored by default (about three minutes in release
/// mode on two cores; `cargo test --release --test mkfs_populate --
/// --ignored --nocapture`, `EXT4R_POPULATE_FILES` changes the count): a
/// tree of 100,000 files plus every file type, hard links, sparse files
/// and xattrs (user, trusted, ACLs; in the inode and in blocks) copied by
/// `mkfs.ext4r -d` shows through a kernel mount as the source shows, is
/// e2fsck-clean, and with SOURCE_DATE_EPOCH two runs on trees created in
/// opposite orders at different times give byte-identical images.
#[test]
#[ignore = "heavy: 100,000 files (run with --ignored)"]
fn hundred_thousand_files_reproducible() {
    if !is_root() || !have("e2fsck") {
        eprintln!("skipped: needs root (loop mounts) and e2fsck");
        return;
    }
    let n = std::env::var("EXT4R_POPULATE_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let t = TempDir::new("populate-100k");
    let (a, b) = (t.path("a"), t.path("b"));
    let clock = std::time::Instant::now();
    make_tree(&a, n, false);
    if xattr_tree(&a.join("xattrs")).is_none() {
        eprintln!("skipped: the temp filesystem takes no user xattrs or ACLs");
        return;
    }
    // The second tree another second later and in the opposite order:
    // other mtimes, inode numbers and readdir order.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    make_tree(&b, n, true);
    xattr_tree(&b.join("xattrs")).unwrap();
    let want = manifest(&a);
    let want_x = all_xattrs(&a);
    let count = want.len();
    eprintln!(
        "source trees: {count} names each ({} with xattrs), made in {:.1?}",
        want_x.len(),
        clock.elapsed()
    );

    // Without SOURCE_DATE_EPOCH the times are the source's: the kernel
    // must show exactly the source tree.
    let img = t.path("plain.img");
    let clock = std::time::Instant::now();
    let (rc, out) = mkfs_d(&img, a.to_str().unwrap(), &[], &[]);
    assert_eq!(rc, 0, "{out}");
    eprintln!("mkfs.ext4r -d: {:.1?}", clock.elapsed());
    let got = mounted_tree(&img, &t);
    assert_same(&want, &got, "image");
    let mut m = LoopMount::new(&img, &t.path("mnt")).unwrap();
    let got_x = all_xattrs(&m.dir);
    m.umount().unwrap();
    assert_eq!(
        got_x, want_x,
        "xattrs through the kernel, then the source's"
    );
    eprintln!(
        "kernel mount: {} names as in the source, xattrs too",
        got.len()
    );
    fs::remove_file(&img).unwrap();

    // SOURCE_DATE_EPOCH: the same bytes from both trees, made at
    // different wall times.
    let env = [("SOURCE_DATE_EPOCH", "1600000000")];
    let (ia, ib) = (t.path("a.img"), t.path("b.img"));
    let (rc, out) = mkfs_d(&ia, a.to_str().unwrap(), &[], &env);
    assert_eq!(rc, 0, "{out}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (rc, out) = mkfs_d(&ib, b.to_str().unwrap(), &[], &env);
    assert_eq!(rc, 0, "{out}");
    for img in [&ia, &ib] {
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "{}: e2fsck -fn: {out}", img.display());
    }
    if !same_bytes(&ia, &ib) {
        let (n, at) = image_diffs(&ia, &ib, 5).unwrap();
        panic!("{n} bytes differ, first at {at:?}");
    }
    // The clamped image shows the same tree but for times after the epoch.
    let clamp = |m: &Manifest| -> Manifest {
        m.iter()
            .map(|(k, v)| {
                let v = v
                    .split(' ')
                    .filter(|w| !w.starts_with("mtime="))
                    .collect::<Vec<_>>()
                    .join(" ");
                (k.clone(), v)
            })
            .collect()
    };
    let got = mounted_tree(&ia, &t);
    assert_same(&clamp(&want), &clamp(&got), "SOURCE_DATE_EPOCH image");
    eprintln!(
        "SOURCE_DATE_EPOCH=1600000000: two images of {} bytes from trees made in opposite \
         orders, byte-identical, e2fsck -fn clean",
        fs::metadata(&ia).unwrap().len()
    );
}
