//! `ext4r mount`'s options against the kernel's ext4:
//!
//! - POSIX ACLs (`acl`, the default): the same `setfacl`, `chmod`,
//!   `touch`, `mkdir` and `mknod` under several umasks on twin images, one
//!   through `ext4r mount`, one through a kernel loop mount; every file's
//!   ACLs (`getfacl`) and mode are the same, both images are e2fsck-clean,
//!   and the kernel reads the same ACLs from ours.
//! - `errors=continue|remount-ro|panic`, and the superblock's `s_errors`
//!   when no option is given: a directory block with a damaged entry is
//!   listed (refused: EUCLEAN), then a file is created elsewhere. With
//!   continue the create works; with remount-ro it is refused (EROFS);
//!   with panic the driver is gone. Afterwards, but for panic, the
//!   superblock records the error ("clean with errors", an error count
//!   of 1, the inode) and e2fsck still finds the image not clean.
//! - RENAME_WHITEOUT: files and directories renamed with a whiteout left
//!   behind (in a set-group-ID directory, under a default ACL), and the
//!   refusals; the same errnos, metadata and ACLs as the kernel's.
//! - An access ACL set on a set-group-ID file by its owner from outside
//!   its group drops the bit, from inside (primary or supplementary group)
//!   or by root it stays: as the kernel's posix_acl_update_mode.
//! - fallocate's COLLAPSE_RANGE and INSERT_RANGE: the kernel's FUSE client
//!   refuses them (EOPNOTSUPP) before any FUSE server, so the write API
//!   does them on our image and the kernel on the twin: the same errnos,
//!   sizes, contents and logical blocks mapped (unwritten or not).

#![allow(clippy::unwrap_used)]

mod common;

use common::mount::{Fuse, Kernel};
use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::Command;

fn skip_reason(tools: &[&str]) -> Option<String> {
    if !is_root() {
        return Some("not root (FUSE and loop mounts need it)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse (modprobe fuse)".into());
    }
    for tool in ["mke2fs", "e2fsck", "dumpe2fs", "debugfs", "mount", "umount"]
        .iter()
        .chain(tools)
    {
        if !have(tool) {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

/// Runs `sh -c script` in `dir`.
fn sh(dir: &Path, script: &str) {
    let o = run(Command::new("sh").arg("-c").arg(script).current_dir(dir));
    assert!(
        o.status.success(),
        "{script} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The ACL work: named entries, default ACLs inherited by files,
/// directories and special files, chmod of a file with an ACL, removal,
/// an ACL equal to the mode (stored as the mode only), under umasks 022
/// and 077.
const ACL_SCRIPT: &str = "umask 022 && touch f && mkdir d && setfacl -m u:1234:rw f \
    && setfacl -d -m g:55:rx,u:77:rwx d && touch d/new && mkdir d/sub && mknod d/fifo p \
    && mkdir d/sub/deeper && touch d/sub/deeper/leaf \
    && setfacl -m u:99:r d/sub && chmod 751 f && setfacl -b d/sub \
    && setfacl -m o::r,g::rw d/new && setfacl -m u::rwx,g::r-x,o::--- d/fifo \
    && umask 077 && touch plain && mkdir pd && touch d/masked && mkdir d/masked_dir \
    && setfacl -k d/masked_dir && touch d/masked_dir/none";

/// Every path under `root` with its mode and `getfacl` output.
fn acls(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p.clone());
            }
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == "lost+found" {
                continue;
            }
            let o = run(Command::new("getfacl")
                .args(["-n", "--omit-header"])
                .arg(&p));
            assert!(o.status.success(), "getfacl {rel}");
            out.insert(
                rel,
                format!(
                    "mode {:o}\n{}",
                    m.mode(),
                    String::from_utf8_lossy(&o.stdout)
                ),
            );
        }
    }
    out
}

/// Makes an image with `mke2fs_args` and a twin of it in `t`, runs `work`
/// on each (ours through `ext4r mount`, the twin through the kernel), and
/// returns both images and what `work` saw on each.
fn on_twins<T>(
    t: &TempDir,
    mke2fs_args: &[&str],
    size: &str,
    work: impl Fn(&Path) -> T,
) -> (std::path::PathBuf, std::path::PathBuf, T, T) {
    on_twins_with(t, mke2fs_args, size, &[], work)
}

/// As [`on_twins`], `ext4r mount` given `mount_args` too.
fn on_twins_with<T>(
    t: &TempDir,
    mke2fs_args: &[&str],
    size: &str,
    mount_args: &[&str],
    work: impl Fn(&Path) -> T,
) -> (std::path::PathBuf, std::path::PathBuf, T, T) {
    let (ours, theirs) = (t.path("ours.img"), t.path("kernel.img"));
    make_image(Command::new("mke2fs"), mke2fs_args, &ours, size).unwrap();
    fs::copy(&ours, &theirs).unwrap();
    let mut f = Fuse::mount_with(&ours, &t.path("mo"), mount_args);
    let seen_ours = work(&f.dir);
    f.umount();
    let mut k = Kernel::mount(&theirs, &t.path("mk"));
    let seen_kernel = work(&k.dir);
    k.umount();
    (ours, theirs, seen_ours, seen_kernel)
}

#[test]
fn posix_acls_are_the_kernels() {
    if let Some(why) = skip_reason(&["setfacl", "getfacl"]) {
        eprintln!("skipping mount_options: {why}");
        return;
    }
    let t = TempDir::new("mount-acl");
    let (ours, theirs, seen_ours, seen_kernel) = on_twins(
        &t,
        &["-q", "-F", "-t", "ext4", "-E", "root_owner=0:0"],
        "64M",
        |dir| {
            sh(dir, ACL_SCRIPT);
            acls(dir)
        },
    );
    assert_eq!(
        seen_ours, seen_kernel,
        "ACLs and modes, ours then the kernel's"
    );
    assert!(
        seen_ours.values().any(|v| v.contains("user:77:rwx")),
        "the default ACL reached the new files: {seen_ours:#?}"
    );
    for img in [&ours, &theirs] {
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "e2fsck -fn {}: {out}", img.display());
    }
    let mut k = Kernel::mount(&ours, &t.path("mk"));
    let kernel_reads_ours = acls(&k.dir);
    k.umount();
    assert_eq!(
        kernel_reads_ours, seen_kernel,
        "the kernel reading our image"
    );
}

/// A filled image whose directory `/d` has a damaged entry (its first
/// file's name length), at `img`.
fn damaged_image(img: &Path) {
    make_image(
        Command::new("mke2fs"),
        &["-q", "-F", "-t", "ext4", "-b", "1024"],
        img,
        "32M",
    )
    .unwrap();
    let dir = img.with_extension("mnt");
    let mut k = Kernel::mount(img, &dir);
    sh(
        &k.dir,
        "mkdir d && echo 1 > d/f1 && echo 2 > d/f2 && mkdir e",
    );
    k.umount();
    let o = run(Command::new("debugfs").args(["-R", "bmap /d 0"]).arg(img));
    let block: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    // "." and ".." take 12 bytes each: byte 30 is f1's name length.
    let f = fs::OpenOptions::new().write(true).open(img).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, b"X", block * 1024 + 30).unwrap();
}

fn superblock_says(img: &Path) -> String {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn errors_option_and_the_superblocks_behaviour() {
    if let Some(why) = skip_reason(&["tune2fs"]) {
        eprintln!("skipping mount_options: {why}");
        return;
    }
    let t = TempDir::new("mount-errors");
    let base = t.path("base.img");
    damaged_image(&base);
    // (options, tune2fs -e first, the create after the damage works,
    // the driver is still there)
    let cases: [(&[&str], Option<&str>, bool, bool); 5] = [
        (&["-o", "errors=continue"], None, true, true),
        (&["-o", "errors=remount-ro"], None, false, true),
        (&["-o", "errors=panic"], None, false, false),
        (&[], Some("remount-ro"), false, true),
        // The option wins over the superblock.
        (&["-o", "errors=continue"], Some("panic"), true, true),
    ];
    for (k, (opts, tune, creates, alive)) in cases.into_iter().enumerate() {
        let img = t.path(&format!("case{k}.img"));
        fs::copy(&base, &img).unwrap();
        if let Some(e) = tune {
            let o = run(Command::new("tune2fs").args(["-e", e]).arg(&img));
            assert!(o.status.success(), "tune2fs -e {e}");
        }
        let what = format!("{opts:?} with s_errors {tune:?}");
        let mut f = Fuse::mount_with(&img, &t.path(&format!("m{k}")), opts);
        let listed = fs::read_dir(f.dir.join("d")).and_then(|d| d.collect::<Result<Vec<_>, _>>());
        assert!(listed.is_err(), "{what}: the damaged directory was listed");
        let created = fs::write(f.dir.join("e/new"), b"after");
        assert_eq!(
            created.is_ok(),
            creates,
            "{what}: create after damage: {created:?}"
        );
        if !creates && alive {
            assert_eq!(
                created.unwrap_err().raw_os_error(),
                Some(rustix::io::Errno::ROFS.raw_os_error()),
                "{what}: refused as on a read-only mount"
            );
        }
        let root = fs::read_dir(&f.dir).map(|d| d.count());
        assert_eq!(
            root.is_ok(),
            alive,
            "{what}: the mount after damage: {root:?}"
        );
        if alive {
            f.umount();
        } else {
            // The driver stopped: nothing to wait for but the kernel's
            // side of the mount.
            drop(f);
            let _ = run(Command::new("umount")
                .arg("-l")
                .arg(t.path(&format!("m{k}"))));
        }
        let sb = superblock_says(&img);
        let recorded =
            sb.contains("clean with errors") && sb.contains("FS Error count:           1");
        assert_eq!(
            recorded, alive,
            "{what}: error record in the superblock:\n{sb}"
        );
        if alive {
            assert!(sb.contains("First error inode #:      12"), "{what}:\n{sb}");
        }
        let (rc, _) = e2fsck_fn(&img);
        assert_ne!(rc, 0, "{what}: the damage is still there for e2fsck");
    }
}

/// Exchanges (renameat2 RENAME_EXCHANGE) of a file and a directory across
/// parents, of two directories, and within one directory; then each
/// path's type, link count and size.
fn exchanges(root: &Path) -> BTreeMap<String, (u32, u64, u64)> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    sh(
        root,
        "mkdir -p a b/dir/sub c && echo file > a/file && echo x > b/dir/x && mkdir c/one c/two \
         && echo same > c/f",
    );
    let swap = |x: &str, y: &str| {
        renameat_with(CWD, root.join(x), CWD, root.join(y), RenameFlags::EXCHANGE)
            .unwrap_or_else(|e| panic!("exchange {x} {y}: {e}"));
    };
    swap("a/file", "b/dir");
    swap("a", "c/one");
    swap("c/two", "c/f");
    let refused = renameat_with(
        CWD,
        root.join("c/a"),
        CWD,
        root.join("c/a/dir/sub"),
        RenameFlags::EXCHANGE,
    );
    assert!(
        refused.is_err(),
        "a directory exchanged into its own subtree"
    );
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p.clone());
            }
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let size = if m.is_dir() { 0 } else { m.len() };
            out.insert(rel, (m.mode() & 0o170_000, m.nlink(), size));
        }
    }
    out
}

#[test]
fn rename_exchange_is_the_kernels() {
    if let Some(why) = skip_reason(&[]) {
        eprintln!("skipping mount_options: {why}");
        return;
    }
    let t = TempDir::new("mount-exchange");
    let (ours, theirs, seen_ours, seen_kernel) =
        on_twins(&t, &["-q", "-F", "-t", "ext4"], "32M", exchanges);
    assert_eq!(
        seen_ours, seen_kernel,
        "types, links and sizes, ours then the kernel's"
    );
    // a/file's contents now under b/dir's name; the directory under c.
    assert_eq!(
        seen_ours.get("b/dir"),
        Some(&(0o100_000, 1, 5)),
        "{seen_ours:#?}"
    );
    assert!(seen_ours.contains_key("c/one/file/sub"), "{seen_ours:#?}");
    for img in [&ours, &theirs] {
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "e2fsck -fn {}: {out}", img.display());
    }
}

/// Holes punched and ranges zeroed (fallocate's PUNCH_HOLE and
/// ZERO_RANGE) in a written file, at block-aligned and unaligned offsets,
/// across its end and inside one block; then the contents and the blocks
/// held.
fn punches(root: &Path) -> Vec<(String, u64, u64, Vec<u8>)> {
    use rustix::fs::{fallocate, FallocateFlags as F};
    let data: Vec<u8> = (0..300_000u32).map(|k| (k % 251) as u8 + 1).collect();
    let cases: [(&str, F, u64, u64); 6] = [
        ("aligned", F::PUNCH_HOLE | F::KEEP_SIZE, 8192, 65536),
        ("unaligned", F::PUNCH_HOLE | F::KEEP_SIZE, 1000, 70_000),
        ("past_end", F::PUNCH_HOLE | F::KEEP_SIZE, 290_000, 100_000),
        ("in_one_block", F::PUNCH_HOLE | F::KEEP_SIZE, 4100, 100),
        ("zeroed", F::ZERO_RANGE, 5000, 50_000),
        ("zeroed_grow", F::ZERO_RANGE, 299_000, 20_000),
    ];
    let mut out = Vec::new();
    for (name, mode, offset, len) in cases {
        let p = root.join(name);
        fs::write(&p, &data).unwrap();
        let f = fs::OpenOptions::new().write(true).open(&p).unwrap();
        fallocate(&f, mode, offset, len).unwrap_or_else(|e| panic!("{name}: {e}"));
        f.sync_all().unwrap();
        drop(f);
        let m = fs::metadata(&p).unwrap();
        out.push((name.to_string(), m.len(), m.blocks(), fs::read(&p).unwrap()));
    }
    out
}

/// The logical blocks of `/name` in `img` that are mapped, each with
/// whether it is unwritten (debugfs's extent listing, leaves only).
fn mapped(img: &Path, name: &str) -> Vec<(u64, bool)> {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("ex /{name}")])
        .arg(img));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        // " 0/ 0   1/  3     0 -     4  2328 -  2332      5 Uninit"
        let w: Vec<&str> = line.split_whitespace().collect();
        let level = w.first().and_then(|l| l.strip_suffix('/'));
        let depth = w.get(1);
        if w.len() < 11 || level != depth.map(|d| d.trim()) {
            continue;
        }
        let (Ok(a), Ok(b)) = (w[4].parse::<u64>(), w[6].parse::<u64>()) else {
            continue;
        };
        let uninit = w.last() == Some(&"Uninit");
        out.extend((a..=b).map(|l| (l, uninit)));
    }
    out.sort_unstable();
    assert!(!out.is_empty(), "no extents for /{name}: {text}");
    out
}

#[test]
fn punched_holes_and_zeroed_ranges_are_the_kernels() {
    if let Some(why) = skip_reason(&[]) {
        eprintln!("skipping mount_options: {why}");
        return;
    }
    let t = TempDir::new("mount-punch");
    let (ours, theirs, seen_ours, seen_kernel) =
        on_twins(&t, &["-q", "-F", "-t", "ext4"], "32M", punches);
    for (o, k) in seen_ours.iter().zip(&seen_kernel) {
        assert_eq!((&o.0, o.1), (&k.0, k.1), "size");
        assert!(o.3 == k.3, "{}: contents differ from the kernel's", o.0);
        // Where the blocks lie, and so how many extent tree blocks the
        // file needs, is each allocator's own; which logical blocks are
        // mapped, and which of them unwritten, is not.
        assert_eq!(
            mapped(&ours, &o.0),
            mapped(&theirs, &k.0),
            "{}: logical blocks mapped (unwritten or not), ours then the kernel's",
            o.0
        );
    }
    assert!(seen_ours[0].3[8192..8192 + 65536].iter().all(|&b| b == 0));
    for img in [&ours, &theirs] {
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "e2fsck -fn {}: {out}", img.display());
    }
}

#[test]
fn uid_and_gid_show_every_inode_as_theirs() {
    if let Some(why) = skip_reason(&["setpriv"]) {
        eprintln!("skipping mount_options: {why}");
        return;
    }
    let t = TempDir::new("mount-ids");
    let img = t.path("ids.img");
    make_image(
        Command::new("mke2fs"),
        &["-q", "-F", "-t", "ext4"],
        &img,
        "32M",
    )
    .unwrap();
    let mut k = Kernel::mount(&img, &t.path("mk"));
    sh(
        &k.dir,
        "mkdir d && echo root > d/rootfile && chmod 600 d/rootfile && chmod 700 d \
         && echo theirs > other && chown 1234:1234 other",
    );
    k.umount();
    // As user 4242, not in any group: root's 0600 file in root's 0700
    // directory is out of reach, unless the mount shows it as theirs.
    let as_user = |dir: &Path, script: &str| {
        run(Command::new("setpriv")
            .args([
                "--reuid",
                "4242",
                "--regid",
                "4343",
                "--clear-groups",
                "sh",
                "-c",
                script,
            ])
            .current_dir(dir))
        .status
        .success()
    };
    let mut f = Fuse::mount_with(&img, &t.path("plain"), &["-o", "allow_other"]);
    assert!(
        !as_user(&f.dir, "cat d/rootfile"),
        "read root's 0600 file without uid="
    );
    f.umount();
    let mut f = Fuse::mount_with(
        &img,
        &t.path("ids"),
        &["-o", "allow_other,uid=4242,gid=4343"],
    );
    for p in ["d", "d/rootfile", "other", "."] {
        let m = fs::metadata(f.dir.join(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), (4242, 4343), "{p} shown as");
    }
    assert!(as_user(
        &f.dir,
        "cat d/rootfile >/dev/null && echo more >> d/rootfile && touch d/new"
    ));
    f.umount();
    // Nothing changed hands on the image: the new file is its creator's.
    let mut k = Kernel::mount(&img, &t.path("mk"));
    let owner = |p: &str| {
        let m = fs::metadata(k.dir.join(p)).unwrap();
        (m.uid(), m.gid())
    };
    assert_eq!(owner("d/rootfile"), (0, 0));
    assert_eq!(owner("other"), (1234, 1234));
    assert_eq!(owner("d/new"), (4242, 4343));
    assert_eq!(fs::read(k.dir.join("d/rootfile")).unwrap(), b"root\nmore\n");
    k.umount();
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn: {out}");
}

/// Every path under `root` (lost+found left out) with its type and mode,
/// owner, link count, device number and size (0 for directories).
fn metas(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p.clone());
            }
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == "lost+found" {
                continue;
            }
            let size = if m.is_dir() { 0 } else { m.len() };
            out.insert(
                rel,
                format!(
                    "mode {:o} owner {}:{} links {} rdev {:x} size {size}",
                    m.mode(),
                    m.uid(),
                    m.gid(),
                    m.nlink(),
                    m.rdev()
                ),
            );
        }
    }
    out
}

/// Renames with RENAME_WHITEOUT: a file over another across directories,
/// a directory to another parent, one in a set-group-ID directory (the
/// whiteout takes its group) and one in a directory with a default ACL;
/// and the refusals (a missing source, with EXCHANGE, with NOREPLACE over
/// a name, a directory over a file). Returns each one's errno (0 for
/// done) and every path's metadata and ACLs.
fn whiteouts(root: &Path) -> (Vec<i32>, BTreeMap<String, String>, BTreeMap<String, String>) {
    use rustix::fs::{renameat_with, RenameFlags as R, CWD};
    sh(
        root,
        "mkdir -p a/sub b sg acl && echo x > a/f && touch a/sub/in && echo y > b/old \
         && chown 0:77 sg && chmod 2775 sg && echo z > sg/f \
         && setfacl -d -m u:55:rwx acl && touch acl/f && echo w > a/g",
    );
    let cases: [(&str, &str, R); 8] = [
        ("a/f", "b/old", R::WHITEOUT),
        ("a/sub", "b/sub", R::WHITEOUT),
        ("sg/f", "sg/g", R::WHITEOUT),
        ("acl/f", "acl/g", R::WHITEOUT),
        ("a/missing", "b/x", R::WHITEOUT),
        ("a/g", "b/old", R::WHITEOUT | R::EXCHANGE),
        ("a/g", "b/old", R::WHITEOUT | R::NOREPLACE),
        ("b/sub", "b/old", R::WHITEOUT),
    ];
    let errs = cases
        .iter()
        .map(
            |(x, y, fl)| match renameat_with(CWD, root.join(x), CWD, root.join(y), *fl) {
                Ok(()) => 0,
                Err(e) => e.raw_os_error(),
            },
        )
        .collect();
    (errs, metas(root), acls(root))
}

#[test]
fn rename_whiteout_is_the_kernels() {
    if let Some(why) = skip_reason(&["setfacl", "getfacl"]) {
        eprintln!("skipping mount_options: {why}");
        return;
    }
    let t = TempDir::new("mount-whiteout");
    let (ours, theirs, seen_ours, seen_kernel) =
        on_twins(&t, &["-q", "-F", "-t", "ext4"], "32M", whiteouts);
    assert_eq!(seen_ours.0, seen_kernel.0, "errnos, ours then the kernel's");
    assert_eq!(
        &seen_ours.0[..4],
        &[0, 0, 0, 0],
        "the four whiteout renames were done"
    );
    assert_eq!(
        seen_ours.1, seen_kernel.1,
        "metadata, ours then the kernel's"
    );
    assert_eq!(seen_ours.2, seen_kernel.2, "ACLs, ours then the kernel's");
    assert!(
        seen_ours.1["a/f"].starts_with("mode 20000 owner 0:0 links 1 rdev 0"),
        "{:#?}",
        seen_ours.1
    );
    assert!(
        seen_ours.1["sg/f"].contains("owner 0:77"),
        "{:#?}",
        seen_ours.1
    );
    for img in [&ours, &theirs] {
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "e2fsck -fn {}: {out}", img.display());
    }
    let mut k = Kernel::mount(&ours, &t.path("mk"));
    let kernel_reads_ours = (metas(&k.dir), acls(&k.dir));
    k.umount();
    assert_eq!(
        kernel_reads_ours,
        (seen_kernel.1, seen_kernel.2),
        "the kernel reading our image"
    );
}

/// Access ACLs set on set-group-ID files (mode 2770) by their owner, user
/// 1234: outside the file's group and without CAP_FSETID (the bit goes,
/// as posix_acl_update_mode takes it), in it as the primary group or a
/// supplementary one (it stays), an ACL no more than the mode (the bit
/// goes all the same), and root (CAP_FSETID: it stays).
fn sgid_acls(root: &Path) -> BTreeMap<String, String> {
    sh(
        root,
        "mkdir -m 0777 w && cd w && touch other member supp equiv byroot \
         && chown 1234:0 other equiv byroot && chown 1234:1234 member && chown 1234:77 supp \
         && chmod 2770 other member supp equiv byroot",
    );
    let as_user = |groups: &str, script: &str| {
        let o = run(Command::new("setpriv")
            .args(["--reuid", "1234", "--regid", "1234"])
            .args(if groups.is_empty() {
                vec!["--clear-groups".to_string()]
            } else {
                vec!["--groups".to_string(), groups.to_string()]
            })
            .args(["sh", "-c", script])
            .current_dir(root.join("w")));
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    as_user(
        "",
        "setfacl -m u:55:rw other && setfacl -m u:55:r member \
         && setfacl -m u::rw,g::r,o::- equiv",
    );
    as_user("77", "setfacl -m u:56:rw supp");
    sh(&root.join("w"), "setfacl -m u:57:r byroot");
    acls(&root.join("w"))
}

#[test]
fn setting_an_acl_drops_set_group_id_as_the_kernel() {
    if let Some(why) = skip_reason(&["setfacl", "getfacl", "setpriv"]) {
        eprintln!("skipping mount_options: {why}");
        return;
    }
    let t = TempDir::new("mount-acl-sgid");
    let (ours, theirs, seen_ours, seen_kernel) = on_twins_with(
        &t,
        &["-q", "-F", "-t", "ext4"],
        "32M",
        &["-o", "allow_other"],
        sgid_acls,
    );
    assert_eq!(
        seen_ours, seen_kernel,
        "modes and ACLs, ours then the kernel's"
    );
    let mode = |p: &str| seen_ours[p].lines().next().unwrap_or("").to_string();
    assert_eq!(mode("other"), "mode 100770", "{seen_ours:#?}");
    assert_eq!(mode("equiv"), "mode 100640", "{seen_ours:#?}");
    for kept in ["member", "supp", "byroot"] {
        assert!(mode(kept).starts_with("mode 102"), "{kept}: {seen_ours:#?}");
    }
    for img in [&ours, &theirs] {
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "e2fsck -fn {}: {out}", img.display());
    }
}

/// The files the range shifts work on, each 600 KiB written in pieces
/// with holes, and what is done to each (fallocate mode, offset, length):
/// collapses and inserts in the middle, at 0, across an unwritten range,
/// and the kernel's refusals (unaligned, reaching or past the end).
fn shift_cases() -> Vec<(&'static str, rustix::fs::FallocateFlags, u64, u64)> {
    use rustix::fs::FallocateFlags as F;
    let (c, i) = (F::COLLAPSE_RANGE, F::INSERT_RANGE);
    vec![
        ("collapse_mid", c, 65536, 131_072),
        ("collapse_head", c, 0, 4096),
        ("collapse_prealloc", c, 8192, 40960),
        ("insert_mid", i, 65536, 131_072),
        ("insert_head", i, 0, 4096),
        ("insert_prealloc", i, 16384, 8192),
        ("collapse_unaligned", c, 1000, 4096),
        ("collapse_to_end", c, 4096, 610_304),
        ("insert_at_end", i, 614_400, 4096),
        ("insert_unaligned", i, 4096, 100),
    ]
}

/// Writes each case's file under `root` (holes, and unwritten blocks from
/// 16 KiB to 64 KiB and past the end).
fn shift_files(root: &Path) {
    use rustix::fs::{fallocate, FallocateFlags as F};
    for (name, ..) in shift_cases() {
        let f = fs::File::create(root.join(name)).unwrap();
        for k in 0..40u64 {
            if k % 4 == 3 {
                continue;
            }
            let data: Vec<u8> = (0..15_000u64)
                .map(|b| ((k * 7 + b) % 253) as u8 + 1)
                .collect();
            f.write_all_at(&data, k * 15_360).unwrap();
        }
        fallocate(&f, F::KEEP_SIZE, 16384, 49152).unwrap();
        fallocate(&f, F::KEEP_SIZE, 614_400, 32768).unwrap();
        f.sync_all().unwrap();
    }
}

/// Each case's errno (0 for done), size, blocks held and contents.
fn shift_results(root: &Path, errs: &[i32]) -> Vec<(String, i32, u64, u64, Vec<u8>)> {
    shift_cases()
        .iter()
        .zip(errs)
        .map(|((name, ..), e)| {
            let p = root.join(name);
            let m = fs::metadata(&p).unwrap();
            (
                name.to_string(),
                *e,
                m.len(),
                m.blocks(),
                fs::read(&p).unwrap(),
            )
        })
        .collect()
}

/// The kernel's errno for a library error, as the mount gives it.
fn errno_of(r: ext4r::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => ext4r_mount::errno_of(&e),
    }
}

#[test]
fn collapsed_and_inserted_ranges_are_the_kernels() {
    if let Some(why) = skip_reason(&[]) {
        eprintln!("skipping mount_options: {why}");
        return;
    }
    let t = TempDir::new("mount-shift");
    // 4 KiB blocks, a page each: the kernel's FUSE client writes back
    // whole pages, so with smaller blocks the zeros around a write in a
    // page would be written (mapped) through the mount and not by ext4.
    let done = shifts_on_twins(&t, "blocks", &["-b", "4096"]);
    assert_eq!(done, 6, "shifts done on 4 KiB blocks");
    // With 16 KiB clusters only the shifts of whole clusters are done.
    let done = shifts_on_twins(
        &t,
        "clusters",
        &["-b", "4096", "-O", "bigalloc", "-C", "16384"],
    );
    assert_eq!(done, 2, "shifts done on 16 KiB clusters");
}

/// The shift cases on twin images made with `mke2fs_args` more: the
/// kernel's through its loop mount, ours through the write API; compared
/// (errnos, sizes, contents, logical blocks mapped), both e2fsck-clean.
/// Returns how many shifts were done.
fn shifts_on_twins(t: &TempDir, tag: &str, mke2fs_args: &[&str]) -> usize {
    use rustix::fs::{fallocate, FallocateFlags as F};
    let (ours, theirs) = (
        t.path(&format!("{tag}-ours.img")),
        t.path(&format!("{tag}-kernel.img")),
    );
    let mut args = vec!["-q", "-F", "-t", "ext4"];
    args.extend_from_slice(mke2fs_args);
    make_image(Command::new("mke2fs"), &args, &ours, "32M").unwrap();
    fs::copy(&ours, &theirs).unwrap();
    // The kernel's, through its loop mount.
    let mut k = Kernel::mount(&theirs, &t.path("mk"));
    shift_files(&k.dir);
    let errs: Vec<i32> = shift_cases()
        .iter()
        .map(|(name, mode, off, len)| {
            let f = fs::OpenOptions::new()
                .write(true)
                .open(k.dir.join(name))
                .unwrap();
            fallocate(&f, *mode, *off, *len).map_or_else(|e| e.raw_os_error(), |()| 0)
        })
        .collect();
    let seen_kernel = shift_results(&k.dir, &errs);
    k.umount();
    // Ours: the files through the mount. The kernel's FUSE client passes
    // no collapse or insert to a FUSE server (EOPNOTSUPP before the
    // request leaves it); if a kernel does, the mount serves them.
    let mut f = Fuse::mount(&ours, &t.path("mo"));
    shift_files(&f.dir);
    let probe = fs::OpenOptions::new()
        .write(true)
        .open(f.dir.join("collapse_mid"))
        .unwrap();
    let (_, mode, off, len) = shift_cases()[0];
    let through_fuse = fallocate(&probe, mode, off, len);
    drop(probe);
    f.umount();
    let errs: Vec<i32> = match through_fuse {
        Err(e) => {
            assert_eq!(e, rustix::io::Errno::OPNOTSUPP, "the FUSE client's answer");
            // So the write API does them, on the image, as an embedder would.
            let mut w = ext4r::write::WriteFs::open_path(&ours, Default::default()).unwrap();
            let errs = shift_cases()
                .iter()
                .map(|(name, mode, off, len)| {
                    let ino = w.lookup_path(format!("/{name}")).unwrap();
                    errno_of(if *mode == F::COLLAPSE_RANGE {
                        w.collapse_range(ino, *off, *len)
                    } else {
                        w.insert_range(ino, *off, *len)
                    })
                })
                .collect();
            w.close().unwrap();
            errs
        }
        Ok(()) => panic!(
            "the kernel's FUSE client passed a collapse on: serve the rest through the mount"
        ),
    };
    let mut f = Fuse::mount(&ours, &t.path("mo"));
    let seen_ours = shift_results(&f.dir, &errs);
    f.umount();
    for (o, k) in seen_ours.iter().zip(&seen_kernel) {
        assert_eq!((&o.0, o.1, o.2), (&k.0, k.1, k.2), "errno and size");
        assert!(o.4 == k.4, "{}: contents differ from the kernel's", o.0);
        assert_eq!(
            mapped(&ours, &o.0),
            mapped(&theirs, &k.0),
            "{}: logical blocks mapped (unwritten or not), ours then the kernel's",
            o.0
        );
    }
    for img in [&ours, &theirs] {
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "e2fsck -fn {}: {out}", img.display());
    }
    seen_kernel.iter().filter(|c| c.1 == 0).count()
}
