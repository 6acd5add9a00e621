//! fsck.ext4r -fn has no false positives: fresh images from mke2fs and
//! from mkfs.ext4r across the option matrix, and the same images after a
//! kernel workload, all exit 0 (and e2fsck agrees they are clean). Then
//! the same images with one bitmap bit flipped must exit 4, so the test
//! can fail.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;

const CONFIGS: &[(&str, &str)] = &[
    ("256M", "-t ext4"),
    ("256M", "-t ext4 -O ^metadata_csum,uninit_bg"),
    ("128M", "-t ext3"),
    ("128M", "-t ext2"),
    ("128M", "-t ext4 -O inline_data"),
    ("128M", "-t ext4 -b 1024"),
    ("128M", "-t ext4 -b 2048 -O ^has_journal,^flex_bg"),
    ("256M", "-t ext4 -O ^resize_inode,meta_bg"),
    ("256M", "-t ext4 -O sparse_super2"),
    ("128M", "-t ext4 -I 128 -O ^64bit"),
    ("128M", "-t ext4 -O orphan_file"),
    ("128M", "-t ext4 -O metadata_csum_seed -T news"),
    ("2G", "-t ext4 -T largefile"),
    ("512M", "-t ext4 -O bigalloc"),
    ("256M", "-t ext4 -O bigalloc -C 65536 -b 4096"),
    ("256M", "-t ext4 -O quota,project -I 256"),
    ("256M", "-t ext4 -O casefold"),
    ("256M", "-t ext4 -E packed_meta_blocks=1"),
];

/// This kernel has no quota or casefold support: such images do not mount.
fn mountable(args: &str) -> bool {
    !args.contains("quota") && !args.contains("casefold")
}

fn fsck(img: &Path) -> (i32, String) {
    let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .args(["fsck", "-fn"])
        .arg(img));
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

fn workload(root: &Path) {
    fs::create_dir(root.join("big")).unwrap();
    for i in 0..1500 {
        fs::write(
            root.join(format!("big/a-file-with-a-longer-name-{i}")),
            i.to_string(),
        )
        .unwrap();
    }
    for i in (0..1500).step_by(3) {
        fs::remove_file(root.join(format!("big/a-file-with-a-longer-name-{i}"))).unwrap();
    }
    fs::write(root.join("large"), vec![7u8; 3 << 20]).unwrap();
    std::os::unix::fs::symlink("big", root.join("link")).unwrap();
    std::os::unix::fs::symlink("x".repeat(200), root.join("slow-link")).unwrap();
    fs::hard_link(root.join("large"), root.join("large2")).unwrap();
    rustix::fs::setxattr(
        root.join("large"),
        "user.k",
        &[1u8; 700],
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    fs::create_dir_all(root.join("d1/d2/d3")).unwrap();
    fs::rename(root.join("d1/d2"), root.join("moved")).unwrap();
}

/// Flips the first bit of the inode bitmap of group 0 (reserved inode 1
/// is always in use, so the bit is set on every valid image).
fn damage(img: &Path) {
    let o = run(Command::new("dumpe2fs").arg(img));
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("Inode bitmap at "))
        .expect("dumpe2fs shows the inode bitmap");
    let blk: u64 = line
        .split("Inode bitmap at ")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let bs: u64 = text
        .lines()
        .find(|l| l.starts_with("Block size:"))
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    let mut data = fs::read(img).unwrap();
    data[(blk * bs) as usize] ^= 1;
    fs::write(img, data).unwrap();
}

#[test]
fn clean_images_are_clean_and_damage_is_found() {
    if !have("mke2fs") || !have("e2fsck") || !have("dumpe2fs") {
        eprintln!("SKIP: needs e2fsprogs");
        return;
    }
    let can_mount = is_root() && have("losetup");
    let dir = TempDir::new("fsck-clean");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (size, args) in CONFIGS {
        let argv: Vec<&str> = args.split_whitespace().collect();
        for maker in ["mke2fs", "ours"] {
            let img = dir.path("img");
            let _ = fs::remove_file(&img);
            let cmd = if maker == "ours" {
                ours_cmd()
            } else {
                Command::new("mke2fs")
            };
            if let Err(e) = make_image(cmd, &argv, &img, size) {
                if maker == "ours" {
                    println!("skip {maker} {args}: {e}");
                    continue;
                }
                panic!("mke2fs {args}: {e}");
            }
            let name = format!("{maker} {size} {args}");
            let (rc, out) = fsck(&img);
            checked += 1;
            if rc != 0 {
                failures.push(format!("{name} fresh: exit {rc}\n{out}"));
                continue;
            }
            if can_mount && mountable(args) {
                let mnt = dir.path("mnt");
                let mut lm = LoopMount::new(&img, &mnt).unwrap();
                workload(&mnt);
                lm.umount().unwrap();
                drop(lm);
                let (rc, out) = fsck(&img);
                let (erc, _) = e2fsck_fn(&img);
                checked += 1;
                if rc != 0 || erc != 0 {
                    failures.push(format!(
                        "{name} after workload: exit {rc} (e2fsck {erc})\n{out}"
                    ));
                    continue;
                }
            }
            damage(&img);
            let (rc, out) = fsck(&img);
            if rc != 4 {
                failures.push(format!("{name} damaged: exit {rc}, want 4\n{out}"));
            }
        }
    }
    println!(
        "fsck clean checks: {checked} images, {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}
