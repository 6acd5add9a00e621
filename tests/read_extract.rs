//! The read path against the kernel: images made by mke2fs are filled by
//! Linux through a loop mount, then `ext4r extract` recreates the tree
//! without mounting, and the extracted tree must equal the kernel's view
//! (type, mode, owner, size, link count, content, link target, user
//! xattrs, mtime). `ext4r ls` and `ext4r cat` are checked on the same
//! images.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// (name, size, mke2fs arguments): the formats the issue names.
const CONFIGS: &[(&str, &str, &str)] = &[
    ("ext4", "256M", "-t ext4"),
    (
        "ext4-gdt_csum",
        "256M",
        "-t ext4 -O ^metadata_csum,uninit_bg",
    ),
    ("ext3", "256M", "-t ext3"),
    ("ext4-inline", "128M", "-t ext4 -O inline_data"),
    ("ext4-1k", "128M", "-t ext4 -b 1024"),
    ("ext2", "128M", "-t ext2"),
];

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

fn xattr(p: &Path, name: &str, v: &[u8]) {
    rustix::fs::lsetxattr(p, name, v, rustix::fs::XattrFlags::empty()).unwrap();
}

/// Files of many sizes (inline candidates among them), a sparse file, a
/// fragmented file (a deep extent tree or many indirect blocks), an htree
/// directory, symlinks fast and slow, hard links, devices and a FIFO,
/// owners beyond 16 bits, user xattrs small and block-sized, deletions
/// and renames.
fn workload(root: &Path) {
    let sizes = [
        0usize,
        1,
        40,
        59,
        60,
        61,
        150,
        4095,
        4096,
        4097,
        65536,
        (1 << 20) + 1,
        9 << 20,
    ];
    fs::create_dir(root.join("files")).unwrap();
    for (i, s) in sizes.iter().enumerate() {
        fs::write(root.join(format!("files/f{i}")), pattern(*s, i as u8)).unwrap();
    }
    let mut f = fs::File::create(root.join("sparse")).unwrap();
    f.write_all(b"start").unwrap();
    f.seek(SeekFrom::Start(40 << 20)).unwrap();
    f.write_all(b"end").unwrap();
    drop(f);
    // One byte every 8 KiB: each lands in its own extent.
    let mut f = fs::File::create(root.join("fragmented")).unwrap();
    for i in 0..1500u64 {
        f.seek(SeekFrom::Start(i * 8192)).unwrap();
        f.write_all(&[i as u8 | 1]).unwrap();
    }
    drop(f);
    fs::create_dir_all(root.join("big/sub/deeper")).unwrap();
    for i in 0..2500 {
        fs::write(
            root.join(format!("big/entry-with-a-longish-name-{i:05}")),
            i.to_string(),
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("files/f1", root.join("fast-link")).unwrap();
    let long = format!("{}/target", "d".repeat(120));
    std::os::unix::fs::symlink(&long, root.join("slow-link")).unwrap();
    std::os::unix::fs::symlink("../../files/f6", root.join("big/sub/up-link")).unwrap();
    fs::hard_link(root.join("files/f3"), root.join("hard1")).unwrap();
    fs::hard_link(root.join("files/f3"), root.join("big/sub/hard2")).unwrap();
    let x = root.join("files/f2");
    xattr(&x, "user.color", b"blue");
    xattr(&x, "user.big", &pattern(900, 7));
    xattr(&root.join("big/sub"), "user.on-a-dir", b"yes");
    for (name, kind, dev) in [
        (
            "cdev",
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::makedev(4, 5),
        ),
        (
            "bdev",
            rustix::fs::FileType::BlockDevice,
            rustix::fs::makedev(259, 300),
        ),
        ("fifo", rustix::fs::FileType::Fifo, 0),
    ] {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join(name),
            kind,
            rustix::fs::Mode::from_raw_mode(0o640),
            dev,
        )
        .unwrap();
    }
    let owned = root.join("files/f5");
    rustix::fs::chownat(
        rustix::fs::CWD,
        &owned,
        Some(rustix::fs::Uid::from_raw(70_000)),
        Some(rustix::fs::Gid::from_raw(123_456)),
        rustix::fs::AtFlags::empty(),
    )
    .unwrap();
    fs::set_permissions(root.join("files/f6"), fs::Permissions::from_mode(0o4755)).unwrap();
    for i in (0..2500).step_by(7) {
        fs::remove_file(root.join(format!("big/entry-with-a-longish-name-{i:05}"))).unwrap();
    }
    fs::rename(root.join("files/f4"), root.join("renamed")).unwrap();
    fs::rename(
        root.join("big/entry-with-a-longish-name-00001"),
        root.join("files/moved"),
    )
    .unwrap();
}

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

fn check_config(dir: &TempDir, args: &str, size: &str) -> Result<usize, String> {
    let img = dir.path("img");
    let mnt = dir.path("mnt");
    let _ = fs::remove_file(&img);
    let argv: Vec<&str> = args.split_whitespace().collect();
    make_image(Command::new("mke2fs"), &argv, &img, size)?;
    let mut lm = LoopMount::new(&img, &mnt)?;
    workload(&mnt);
    let kernel = manifest(&mnt);
    lm.umount()?;
    drop(lm);

    // On the host's disk, not tmpfs: user xattrs and owners must stick.
    let out = std::env::temp_dir().join(format!("ext4r-extract-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let o = run(ext4r().arg("extract").arg(&img).arg(&out));
    let ours = manifest(&out);
    let _ = fs::remove_dir_all(&out);
    if !o.status.success() {
        return Err(format!(
            "extract exit {:?}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    if kernel != ours {
        let diff: Vec<String> = kernel
            .iter()
            .filter(|(k, v)| ours.get(*k) != Some(v))
            .map(|(k, v)| format!("{k}: kernel [{v}] ours [{:?}]", ours.get(k)))
            .chain(
                ours.keys()
                    .filter(|k| !kernel.contains_key(*k))
                    .map(|k| format!("{k}: only in ours")),
            )
            .take(8)
            .collect();
        return Err(format!("extracted tree differs:\n  {}", diff.join("\n  ")));
    }

    // cat of a multi-extent file and a sparse file equals the kernel's
    // bytes; ls lists the htree directory completely.
    for (path, want) in [
        ("/files/f12", pattern(9 << 20, 12)),
        ("/big/sub/up-link", pattern(150, 6)),
    ] {
        let o = run(ext4r().arg("cat").arg(&img).arg(path));
        if !o.status.success() || o.stdout != want {
            return Err(format!(
                "cat {path}: exit {:?}, {} bytes",
                o.status.code(),
                o.stdout.len()
            ));
        }
    }
    let o = run(ext4r().arg("ls").arg(&img).arg("/big"));
    let n = String::from_utf8_lossy(&o.stdout).lines().count();
    let want = 2500 - 2500usize.div_ceil(7) - 1 + 1; // entries left, plus "sub"
    if n != want {
        return Err(format!("ls /big listed {n} names, want {want}"));
    }
    Ok(kernel.len())
}

#[test]
fn extract_equals_the_kernels_view() {
    if !is_root() || !have("losetup") || !have("mke2fs") {
        eprintln!("SKIP: needs root, losetup and mke2fs");
        return;
    }
    let dir = TempDir::new("read");
    let mut failures = Vec::new();
    for (name, size, args) in CONFIGS {
        match check_config(&dir, args, size) {
            Ok(n) => println!("ok: {name}: {n} paths equal"),
            Err(e) => {
                println!("FAILED: {name}: {e}");
                failures.push(*name);
            }
        }
    }
    println!(
        "read/extract: {}/{} configurations equal",
        CONFIGS.len() - failures.len(),
        CONFIGS.len()
    );
    assert!(failures.is_empty(), "failed: {failures:?}");
}

#[test]
fn missing_paths_and_wrong_kinds_are_clear_errors() {
    if !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs");
        return;
    }
    let dir = TempDir::new("read-errors");
    let img = dir.path("img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "8M").unwrap();
    let o = run(ext4r().arg("cat").arg(&img).arg("/nope"));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope: no such file or directory"));
    let o = run(ext4r().arg("cat").arg(&img).arg("/lost+found"));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a directory"));
    let o = run(ext4r().arg("ls").arg(&img).arg("/lost+found/x"));
    assert_eq!(o.status.code(), Some(1));
    let o = run(ext4r().arg("ls").arg("-a").arg(&img));
    assert_eq!(String::from_utf8_lossy(&o.stdout), ".\n..\nlost+found\n");
}

#[test]
fn a_dirty_journal_is_replayed_in_memory_and_never_written() {
    if !is_root() || !have("losetup") || !have("debugfs") {
        eprintln!("SKIP: needs root, losetup and debugfs");
        return;
    }
    let dir = TempDir::new("read-journal");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "4096"],
        &img,
        "64M",
    )
    .unwrap();
    let mut lm = LoopMount::new(&img, &dir.path("mnt")).unwrap();
    fs::write(dir.path("mnt/f"), vec![b'A'; 4096]).unwrap();
    lm.umount().unwrap();
    drop(lm);
    // A committed transaction that rewrites the file's block, left unreplayed.
    let o = run(Command::new("debugfs").args(["-R", "bmap /f 0"]).arg(&img));
    let blk = String::from_utf8_lossy(&o.stdout).trim().to_string();
    fs::write(dir.path("b"), vec![b'B'; 4096]).unwrap();
    let cmds = format!("jo\njw -b {blk} {}\njc\n", dir.path("b").display());
    fs::write(dir.path("cmds"), cmds).unwrap();
    run(Command::new("debugfs")
        .args(["-w", "-f"])
        .arg(dir.path("cmds"))
        .arg(&img));
    let before = fs::read(&img).unwrap();
    let o = run(ext4r().arg("cat").arg(&img).arg("/f"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stdout == vec![b'B'; 4096],
        "the replayed contents are not shown"
    );
    assert!(
        fs::read(&img).unwrap() == before,
        "the image is not written"
    );
}
