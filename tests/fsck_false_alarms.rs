//! Filesystems e2fsck finds clean that fsck.ext4r reported (issue 19),
//! each made here the way e2fsprogs' own tests make them (mke2fs and
//! debugfs), so the rule is tested, not one image: our -fn must exit 0
//! wherever e2fsck -fn does, and -p as e2fsck -p.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn debugfs_w(img: &Path, cmds: &[String]) {
    for c in cmds {
        let o = run(Command::new("debugfs").args(["-w", "-R", c]).arg(img));
        assert!(o.status.success(), "debugfs {c}: {o:?}");
    }
}

/// e2fsck -fn must be clean; ours -fn then exits 0, and ours -p exits as
/// e2fsck -p does (0, or 1 where e2fsck -p quietly fixes something).
fn judged_alike(dir: &TempDir, img: &Path, what: &str) {
    let (rc, out) = e2fsck_fn(img);
    assert_eq!(rc, 0, "{what}: the case must be clean for e2fsck: {out}");
    let copy = dir.path("copy.img");
    copy_sparse(img, &copy).unwrap();
    let theirs = run(Command::new("e2fsck").arg("-p").arg(&copy))
        .status
        .code();
    for (mode, want) in [("-fn", Some(0)), ("-p", theirs)] {
        copy_sparse(img, &copy).unwrap();
        let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
            .args(["fsck", mode])
            .arg(&copy));
        assert_eq!(
            o.status.code(),
            want,
            "{what}, fsck {mode}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

#[test]
fn symlinks_with_an_xattr_block_on_bigalloc() {
    if !have("mke2fs") || !have("debugfs") || !have("e2fsck") {
        println!("skipped: e2fsprogs not installed");
        return;
    }
    let dir = TempDir::new("fa-bigalloc-symlink");
    let value = dir.path("value");
    std::fs::write(&value, vec![b'v'; 600]).unwrap();
    // The xattr block is charged as a whole cluster in i_blocks: a fast
    // symlink is one whose i_blocks is that cluster and nothing more.
    for (bs, cluster) in [("1024", "16384"), ("4096", "65536")] {
        let img = dir.path("b.img");
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-b", bs, "-O", "bigalloc", "-C", cluster],
            &img,
            "64M",
        )
        .unwrap();
        debugfs_w(
            &img,
            &[
                "symlink /fast target".into(),
                format!("ea_set -f {} /fast trusted.big", value.display()),
                format!("symlink /slow {}", "s".repeat(200)),
                format!("ea_set -f {} /slow trusted.big", value.display()),
            ],
        );
        judged_alike(&dir, &img, &format!("bigalloc {bs}/{cluster}"));
    }
}

#[test]
fn verity_files_keep_blocks_past_their_size() {
    if !have("mke2fs") || !have("debugfs") || !have("e2fsck") {
        println!("skipped: e2fsprogs not installed");
        return;
    }
    let dir = TempDir::new("fa-verity");
    let data = dir.path("data");
    std::fs::write(&data, vec![b'd'; 5 * 4096]).unwrap();
    let img = dir.path("v.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "4096", "-O", "verity"],
        &img,
        "64M",
    )
    .unwrap();
    // Five blocks written, i_size of two: the rest stands for the Merkle
    // tree fs-verity keeps past the end of the data.
    debugfs_w(
        &img,
        &[
            format!("write {} /f", data.display()),
            "sif /f size 8192".into(),
            "sif /f flags 0x180000".into(),
        ],
    );
    judged_alike(&dir, &img, "verity");
}

#[test]
fn a_journal_left_without_the_has_journal_flag() {
    if !have("mke2fs") || !have("debugfs") || !have("e2fsck") {
        println!("skipped: e2fsprogs not installed");
        return;
    }
    let dir = TempDir::new("fa-extra-journal");
    for t in ["ext3", "ext4"] {
        let img = dir.path("j.img");
        make_image(Command::new("mke2fs"), &["-t", t], &img, "32M").unwrap();
        debugfs_w(&img, &["feature ^has_journal".into()]);
        judged_alike(&dir, &img, t);
    }
}

/// The MMP block is metadata: a clean MMP filesystem was reported with a
/// block bitmap difference (and -y freed the block). A damaged MMP block
/// is rewritten as e2fsck rewrites it.
#[test]
fn mmp_filesystems() {
    if !have("mke2fs") || !have("debugfs") || !have("e2fsck") || !have("dumpe2fs") {
        println!("skipped: e2fsprogs not installed");
        return;
    }
    // e2fsck, and our fsck with it, waits out MMP's check interval (11 s)
    // before each repair: the configurations and their damages run side
    // by side, each in a directory of its own.
    let configs = [
        &["-t", "ext4", "-O", "mmp"][..],
        &["-t", "ext4", "-O", "mmp,^metadata_csum"],
    ];
    std::thread::scope(|s| {
        for (k, opts) in configs.into_iter().enumerate() {
            s.spawn(move || {
                let dir = TempDir::new(&format!("fa-mmp-{k}"));
                let img = dir.path("m.img");
                make_image(Command::new("mke2fs"), opts, &img, "32M").unwrap();
                judged_alike(&dir, &img, &format!("{opts:?}"));
                let dump = run(Command::new("dumpe2fs").arg("-h").arg(&img));
                let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
                let mmp: u64 = dump
                    .lines()
                    .find_map(|l| l.strip_prefix("MMP block number:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap();
                // Bad magic, then (with metadata_csum) a bad checksum.
                std::thread::scope(|s| {
                    for (at, byte) in [(0u64, 0x00u8), (100, 0x5a)] {
                        let (dir, img) = (&dir, &img);
                        s.spawn(move || {
                            let mut bytes = std::fs::read(img).unwrap();
                            bytes[(mmp * 1024 + at) as usize] ^= byte | 1;
                            let damaged = dir.path(&format!("d{at}.img"));
                            std::fs::write(&damaged, &bytes).unwrap();
                            let (pre, _) = e2fsck_fn(&damaged);
                            let fy = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
                                .args(["fsck", "-fy"])
                                .arg(&damaged));
                            let (rc, out) = e2fsck_fn(&damaged);
                            assert_eq!(
                                rc, 0,
                                "{opts:?} byte {at}: e2fsck before {pre}, ours {fy:?}: {out}"
                            );
                        });
                    }
                });
            });
        }
    });
}

/// Unmounts on drop, also when the test panics.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).output();
    }
}

#[test]
fn names_in_encrypted_directories_are_ciphertext() {
    if !is_root() || !have("mke2fs") || !have("e2fsck") {
        println!("skipped: needs root (loop mount) and e2fsprogs");
        return;
    }
    let dir = TempDir::new("fa-encrypt");
    let img = dir.path("e.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-O", "encrypt"],
        &img,
        "32M",
    )
    .unwrap();
    let mnt = dir.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // Without a key the kernel encrypts new directories under a dummy
    // policy only with this option; a kernel without it cannot make the case.
    let o = run(Command::new("mount")
        .args(["-o", "loop,test_dummy_encryption"])
        .arg(&img)
        .arg(&mnt));
    if !o.status.success() {
        println!("skipped: the kernel refuses test_dummy_encryption");
        return;
    }
    {
        let _m = Mounted(mnt.clone());
        // Ciphertext names hold '/' and NUL bytes about one time in eight
        // at 16 bytes: 300 names make it certain.
        let d = mnt.join("d");
        std::fs::create_dir(&d).unwrap();
        for i in 0..300 {
            std::fs::write(d.join(format!("n{i}")), b"x").unwrap();
        }
    }
    judged_alike(&dir, &img, "encrypted directory");
}
