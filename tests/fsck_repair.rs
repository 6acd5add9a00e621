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

/// The physical block of logical block `lblk` of `path` (debugfs bmap).
fn bmap(img: &Path, path: &str, lblk: u64) -> u64 {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("bmap {path} {lblk}")])
        .arg(img));
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

/// The inode number of `path`.
fn inum(img: &Path, path: &str) -> u64 {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("stat {path}")])
        .arg(img));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let rest = text.split("Inode: ").nth(1).unwrap();
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// Overwrites the start of block `blk` with `bytes`.
fn poke(img: &Path, blk: u64, bytes: &[u8]) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    // s_log_block_size, in the superblock at 1024.
    let mut w = [0u8; 4];
    f.seek(SeekFrom::Start(1024 + 24)).unwrap();
    f.read_exact(&mut w).unwrap();
    let bs = 1024u64 << u32::from_le_bytes(w);
    f.seek(SeekFrom::Start(blk * bs)).unwrap();
    f.write_all(bytes).unwrap();
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
    (
        // The victim's one extent pointed at the first block of /big:
        // the repair gives it a copy, /big keeps its data.
        "multiply-claimed block",
        |i| {
            let b = bmap(i, "/big", 0);
            debugfs(i, &format!("sif /victim block[5] {b}"));
        },
        &["victim"],
    ),
    (
        "missing lost+found",
        |i| debugfs(i, "rmdir /lost+found"),
        &[],
    ),
    (
        // A deleted file left on the orphan list: released before the
        // check, its name then cleared.
        "orphan list",
        |i| {
            let n = inum(i, "/victim");
            debugfs(i, "sif /victim links_count 0");
            debugfs(i, &format!("ssv last_orphan {n}"));
        },
        &["victim"],
    ),
    (
        "journal superblock magic",
        |i| {
            let b = bmap(i, "<8>", 0);
            poke(i, b, &[0, 0, 0, 0]);
        },
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
        // e2fsck -n counts wrong superblock summaries as harmless, and
        // looks for lost+found only when it may create it.
        let pre_ok = pre != 0 || *name == "superblock counts" || *name == "missing lost+found";
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
