//! fsck.ext4r -y against a damage generator: a kernel-filled image gets one
//! kind of damage at a time (through debugfs, or by flipping bytes), our
//! repair runs, and then e2fsck -fn and our own -fn must both find it
//! clean, with every file the damage did not touch unchanged.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::fnv;
use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

/// Regular files by path with a hash of their contents.
fn manifest(root: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, fnv(&fs::read(&p).unwrap()));
            }
        }
    }
    out
}

fn workload(root: &Path) {
    for d in 0..4 {
        fs::create_dir(root.join(format!("d{d}"))).unwrap();
        for i in 0..200 {
            let data: Vec<u8> = (0..(i * 37) % 9000).map(|x| (x * 7 + i) as u8).collect();
            fs::write(root.join(format!("d{d}/f{i}")), data).unwrap();
        }
    }
    fs::write(root.join("victim"), b"this file gets damaged").unwrap();
    fs::write(root.join("big"), vec![3u8; 2 << 20]).unwrap();
}

fn debugfs(img: &Path, cmd: &str) {
    let o = run(Command::new("debugfs").args(["-w", "-R", cmd]).arg(img));
    assert!(
        o.status.success(),
        "debugfs {cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// (name, damage, paths it may lose or change)
type Damage = (&'static str, fn(&Path), &'static [&'static str]);

const DAMAGES: &[Damage] = &[
    (
        "group free counts",
        |i| debugfs(i, "set_bg 0 free_blocks_count 7"),
        &[],
    ),
    (
        "group inode counts",
        |i| debugfs(i, "set_bg 0 free_inodes_count 3"),
        &[],
    ),
    (
        "superblock counts",
        |i| debugfs(i, "ssv free_blocks_count 12"),
        &[],
    ),
    (
        "link count",
        |i| debugfs(i, "sif /victim links_count 5"),
        &[],
    ),
    (
        "i_size of a directory",
        |i| debugfs(i, "sif /d1 size 1"),
        &[],
    ),
    ("i_blocks", |i| debugfs(i, "sif /big blocks 8"), &[]),
    (
        "inode checksum",
        |i| debugfs(i, "sif /victim checksum 0x1234"),
        &[],
    ),
    ("block bitmap", |i| debugfs(i, "freeb 2000 40"), &[]),
    ("inode bitmap", |i| debugfs(i, "freei /victim"), &[]),
    ("cleared inode", |i| debugfs(i, "clri /victim"), &["victim"]),
    (
        "dtime on a live inode",
        |i| debugfs(i, "sif /d2/f3 dtime 12345"),
        &[],
    ),
];

#[test]
fn repairs_leave_e2fsck_clean_images_and_untouched_files_intact() {
    if !is_root() || !have("losetup") || !have("debugfs") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("repair");
    let base = dir.path("base.img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &base, "64M").unwrap();
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(&base, &mnt).unwrap();
    workload(&mnt);
    let before = manifest(&mnt);
    lm.umount().unwrap();
    drop(lm);
    let mut failures = Vec::new();
    for (name, damage, may_lose) in DAMAGES {
        let img = dir.path("img");
        fs::copy(&base, &img).unwrap();
        damage(&img);
        let (pre, _) = e2fsck_fn(&img);
        let o = run(ext4r().args(["fsck", "-fy"]).arg(&img));
        let rc = o.status.code();
        let (after, eout) = e2fsck_fn(&img);
        let again = run(ext4r().args(["fsck", "-fn"]).arg(&img)).status.code();
        let mut lm = LoopMount::new(&img, &mnt).unwrap();
        let now = manifest(&mnt);
        lm.umount().unwrap();
        drop(lm);
        let lost: Vec<&String> = before
            .iter()
            .filter(|(k, v)| !may_lose.contains(&k.as_str()) && now.get(*k) != Some(v))
            .map(|(k, _)| k)
            .collect();
        // e2fsck -n counts wrong superblock summaries as harmless.
        let pre_ok = pre != 0 || *name == "superblock counts";
        let ok = pre_ok && rc == Some(1) && after == 0 && again == Some(0) && lost.is_empty();
        println!(
            "{}: {name}: e2fsck before {pre}, ours -fy {rc:?}, e2fsck after {after}, ours -fn {again:?}, \
             files changed {}",
            if ok { "ok" } else { "FAILED" },
            lost.len()
        );
        if !ok {
            println!("{}\n{eout}", String::from_utf8_lossy(&o.stdout));
            failures.push(*name);
        }
    }
    println!(
        "repair: {}/{} damages repaired",
        DAMAGES.len() - failures.len(),
        DAMAGES.len()
    );
    assert!(failures.is_empty(), "failed: {failures:?}");
}
