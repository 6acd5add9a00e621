//! Pass 3A: fsck.ext4r rebuilds hash indexes. A kernel-made two-level
//! htree directory whose root is damaged gets a new index from `-fy`
//! (not just a cleared one), and `-fyD` rebuilds every directory of a
//! kernel-filled image; e2fsck -fn must find the results clean, debugfs
//! must walk the new index, and the kernel must read every file back.

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

/// Long names so that ~2000 of them need a two-level tree at 1 KiB.
fn name(i: u32) -> String {
    format!("file_with_a_rather_long_name_to_fill_blocks_quickly_{i:05}")
}

/// A 1 KiB-block ext4 image with /big (2000 files, a two-level htree),
/// /small (three files) and, with `holes`, names deleted from /big so
/// that some of its leaves are nearly empty.
fn kernel_image(dir: &TempDir, extra: &[&str], holes: bool) -> (std::path::PathBuf, Manifest) {
    let img = dir.path("img");
    let mut args = vec!["-t", "ext4", "-b", "1024"];
    args.extend_from_slice(extra);
    make_image(Command::new("mke2fs"), &args, &img, "32M").unwrap();
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(&img, &mnt).unwrap();
    fs::create_dir(mnt.join("big")).unwrap();
    for i in 0..2000 {
        fs::write(mnt.join("big").join(name(i)), format!("content {i}\n")).unwrap();
    }
    if holes {
        for i in (0..2000).filter(|i| i % 3 != 0) {
            fs::remove_file(mnt.join("big").join(name(i))).unwrap();
        }
    }
    fs::create_dir(mnt.join("small")).unwrap();
    for i in 0..3 {
        fs::write(mnt.join(format!("small/f{i}")), [i as u8; 100]).unwrap();
    }
    let m = manifest(&mnt);
    lm.umount().unwrap();
    (img, m)
}

type Manifest = std::collections::BTreeMap<String, String>;

fn debugfs_out(img: &Path, cmd: &str) -> (bool, String) {
    let o = run(Command::new("debugfs").args(["-R", cmd]).arg(img));
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn bmap(img: &Path, path: &str, lblk: u64) -> u64 {
    let (_, out) = debugfs_out(img, &format!("bmap {path} {lblk}"));
    out.lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("bmap {path} {lblk}: {out}"))
}

/// /big's flags word from debugfs `stat`.
fn flags(img: &Path, path: &str) -> u32 {
    let (_, out) = debugfs_out(img, &format!("stat {path}"));
    let f = out.split("Flags: 0x").nth(1).unwrap();
    let hex: String = f.chars().take_while(char::is_ascii_hexdigit).collect();
    u32::from_str_radix(&hex, 16).unwrap()
}

/// A file's `i_size` from debugfs `stat`.
fn size(img: &Path, path: &str) -> u64 {
    let (_, out) = debugfs_out(img, &format!("stat {path}"));
    let f = out.split("Size: ").nth(1).unwrap();
    f.split_whitespace().next().unwrap().parse().unwrap()
}

/// The image is clean for e2fsck, /big is indexed with a tree debugfs
/// walks, and the kernel reads back what was written.
fn assert_sound(dir: &TempDir, img: &Path, want: &Manifest, what: &str) {
    let (rc, out) = e2fsck_fn(img);
    assert_eq!(rc, 0, "{what}: e2fsck -fn after repair:\n{out}");
    assert_ne!(flags(img, "/big") & 0x1000, 0, "{what}: /big lost INDEX_FL");
    let (ok, out) = debugfs_out(img, "htree /big");
    assert!(
        ok && out.contains("Root node dump"),
        "{what}: htree:\n{out}"
    );
    assert!(
        !out.contains("rror") && !out.contains("orrupt"),
        "{what}: htree:\n{out}"
    );
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(img, &mnt).unwrap();
    let now = manifest(&mnt);
    // The kernel looks names up through the index, not only by readdir.
    let probe = fs::read_to_string(mnt.join("big").join(name(1998))).ok();
    lm.umount().unwrap();
    assert_eq!(&now, want, "{what}: files differ after repair");
    assert_eq!(probe.as_deref(), Some("content 1998\n"), "{what}: lookup");
}

/// One loop device at a time: `losetup -f` in two tests at once may
/// hand both the same device.
static LOOP: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn usable() -> bool {
    if !is_root() || !have("losetup") || !have("debugfs") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup, debugfs and e2fsck");
        return false;
    }
    true
}

#[test]
fn damaged_root_is_rebuilt_not_just_cleared() {
    if !usable() {
        return;
    }
    let _one = LOOP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for extra in [&[][..], &["-O", "^metadata_csum"][..]] {
        let dir = TempDir::new("rehash-root");
        let (img, want) = kernel_image(&dir, extra, false);
        let (_, htree) = debugfs_out(&img, "htree /big");
        assert!(
            htree.contains("Indirect levels: 1"),
            "{extra:?}: the kernel made no two-level tree:\n{}",
            &htree[..htree.len().min(600)]
        );
        // Zero the root's count and limit.
        let root = bmap(&img, "/big", 0);
        let mut f = fs::OpenOptions::new().write(true).open(&img).unwrap();
        use std::io::{Seek, SeekFrom, Write};
        f.seek(SeekFrom::Start(root * 1024 + 32)).unwrap();
        f.write_all(&[0; 4]).unwrap();
        drop(f);
        assert_ne!(e2fsck_fn(&img).0, 0, "{extra:?}: the damage went unseen");
        let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: fsck -fy:\n{text}");
        assert!(text.contains("Pass 3A"), "{extra:?}: no rebuild:\n{text}");
        assert_sound(&dir, &img, &want, &format!("root damage {extra:?}"));
    }
}

#[test]
fn optimize_every_directory() {
    if !usable() {
        return;
    }
    let _one = LOOP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for extra in [&[][..], &["-O", "^metadata_csum"][..]] {
        let dir = TempDir::new("rehash-all");
        let (img, want) = kernel_image(&dir, extra, true);
        let before = size(&img, "/big");
        let o = run(ext4r().arg("fsck").arg("-fyD").arg(&img));
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: fsck -fyD:\n{text}");
        assert_sound(&dir, &img, &want, &format!("-D {extra:?}"));
        // Two thirds of the names gone: the rebuilt /big is smaller.
        let after = size(&img, "/big");
        assert!(after < before, "{extra:?}: /big {before} -> {after} bytes");
        // The rebuilt filesystem is clean for our own check too, and a
        // second -D run leaves it clean.
        let o = run(ext4r().arg("fsck").arg("-fn").arg(&img));
        assert_eq!(o.status.code(), Some(0), "{extra:?}: our -fn after -D");
        let o = run(ext4r().arg("fsck").arg("-pfD").arg(&img));
        assert!(o.status.code().unwrap_or(9) <= 1, "{extra:?}: -pfD");
        assert_eq!(e2fsck_fn(&img).0, 0, "{extra:?}: e2fsck after -pfD");
    }
}
