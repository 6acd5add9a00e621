//! Multiple-mount protection for our writers, against e2fsprogs and the
//! kernel: while one of our writers holds an `mmp` filesystem, e2fsck and
//! a mount are refused; a filesystem another holder left with e2fsck's
//! sequence is refused by `fsck.ext4r -y` and `tune.ext4r` with
//! e2fsprogs' words, until `tune.ext4r -f -E clear_mmp`; and a change
//! made under the protocol (one real wait of 11 s) leaves the block clean
//! and the image e2fsck-clean.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use ext4r::device::{BlockDevice, FileDevice, OpenMode};
use ext4r::mmp::{MmpClaim, MmpOptions};
use ext4r_format::mmp::{MmpStruct, MMP_SEQ_CLEAN, MMP_SEQ_FSCK, MMP_SIZE};
use ext4r_format::superblock::Superblock;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

fn superblock(img: &Path) -> Superblock {
    let b = std::fs::read(img).unwrap();
    Superblock::parse(&b[1024..2048]).unwrap()
}

/// The MMP block's offset and contents.
fn mmp(img: &Path) -> (u64, MmpStruct) {
    let sb = superblock(img);
    let at = sb.s_mmp_block.get() * u64::from(sb.block_size().unwrap());
    let b = std::fs::read(img).unwrap();
    (
        at,
        MmpStruct::parse(&b[at as usize..at as usize + MMP_SIZE]).unwrap(),
    )
}

/// What another host (or a writer that died) leaves: sequence `seq`.
fn leave_seq(img: &Path, seq: u32) {
    let sb = superblock(img);
    let (at, mut m) = mmp(img);
    m.mmp_seq.set(seq);
    m.update_checksum(sb.csum_seed());
    let f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &m.to_bytes(), at).unwrap();
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn writers_take_and_honour_multiple_mount_protection() {
    if !is_root() || !have("mke2fs") || !have("e2fsck") {
        eprintln!("skipped: needs root (a loop mount) and e2fsprogs");
        return;
    }
    let t = TempDir::new("mmp-writers");
    let img = t.path("m.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-O", "mmp"],
        &img,
        "32M",
    )
    .unwrap();
    assert_eq!(mmp(&img).1.mmp_seq.get(), MMP_SEQ_CLEAN);

    // Held by a writer here (the waits skipped: only what the others see
    // while it holds matters): e2fsck and the kernel are kept out.
    {
        let dev: Arc<dyn BlockDevice> = Arc::new(
            FileDevice::open(
                &img,
                OpenMode {
                    write: true,
                    ..OpenMode::default()
                },
            )
            .unwrap(),
        );
        let claim = MmpClaim::start(
            &dev,
            &superblock(&img),
            MmpOptions {
                device_name: "m.img",
                now: 1_700_000_000,
                sleep: &mut |_| {},
            },
        )
        .unwrap()
        .unwrap();
        assert_eq!(mmp(&img).1.mmp_seq.get(), MMP_SEQ_FSCK);
        let o = run(Command::new("e2fsck").arg("-fn").arg(&img));
        assert_ne!(o.status.code(), Some(0));
        assert!(text(&o).contains("MMP: e2fsck being run"), "{}", text(&o));
        let mnt = t.path("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let lo = run(Command::new("losetup").args(["-f", "--show"]).arg(&img));
        let lodev = String::from_utf8_lossy(&lo.stdout).trim().to_string();
        assert!(lo.status.success());
        let m = run(Command::new("mount").arg(&lodev).arg(&mnt));
        if m.status.success() {
            let _ = run(Command::new("umount").arg(&mnt));
        }
        let _ = run(Command::new("losetup").arg("-d").arg(&lodev));
        assert!(!m.status.success(), "the kernel mounted it under our claim");
        claim.stop().unwrap();
    }
    assert_eq!(mmp(&img).1.mmp_seq.get(), MMP_SEQ_CLEAN);
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "{out}");

    // Left with e2fsck's sequence (a holder that died): refused at once,
    // in e2fsprogs' words, nothing written.
    leave_seq(&img, MMP_SEQ_FSCK);
    let before = std::fs::read(&img).unwrap();
    let o = run(ext4r().args(["fsck", "-fy"]).arg(&img));
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    assert!(
        text(&o).contains("fsck.ext4r: MMP: e2fsck being run while checking MMP block")
            && text(&o).contains("tune.ext4r -f -E clear_mmp"),
        "{}",
        text(&o)
    );
    let o = run(ext4r().args(["tune", "-L", "x"]).arg(&img));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("MMP: e2fsck being run while trying to open")
            && text(&o).contains("MMP error info: node: "),
        "{}",
        text(&o)
    );
    // Without -f the open itself is refused, as tune2fs's is.
    let o = run(ext4r().args(["tune", "-E", "clear_mmp"]).arg(&img));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("MMP: e2fsck being run"), "{}", text(&o));
    assert!(std::fs::read(&img).unwrap() == before, "a refusal wrote");
    // The way out, as tune2fs's.
    let o = run(ext4r().args(["tune", "-f", "-E", "clear_mmp"]).arg(&img));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(mmp(&img).1.mmp_seq.get(), MMP_SEQ_CLEAN);
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "after clear_mmp: {out}");

    // A change under the whole protocol (2 * 5 + 1 s of waiting).
    let started = std::time::Instant::now();
    let o = run(ext4r().args(["tune", "-L", "guarded"]).arg(&img));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(started.elapsed().as_secs() >= 11, "no MMP wait");
    assert_eq!(superblock(&img).volume_name(), b"guarded");
    let (_, m) = mmp(&img);
    assert_eq!(m.mmp_seq.get(), MMP_SEQ_CLEAN);
    // The device as the tool was given it, cut at 32 bytes.
    assert!(!m.bdevname().is_empty());
    assert!(img
        .display()
        .to_string()
        .as_bytes()
        .starts_with(m.bdevname()));
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "after tune under MMP: {out}");
}
