//! tune.ext4r's metadata rewrites (metadata_csum and uninit_bg on and off,
//! a new UUID under metadata_csum, dir_index off under metadata_csum) on
//! filesystems the kernel has filled: an htree directory, a fragmented file
//! with an extent tree, an xattr block, slow and fast symlinks, hard links,
//! a sparse file, and deleted files whose inodes are no longer zero.
//!
//! For each base and option, copies are changed by tune2fs and by
//! `ext4r tune`: the exit codes must match, the images must be byte-identical
//! (superblock lifetime-writes counters and their checksums aside: tune2fs
//! counts blocks it rewrote unchanged), e2fsck -fn must judge both alike,
//! and a kernel mount of ours must show every file as before. A round trip
//! (checksums off, then on again) must come back e2fsck-clean and intact.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

const BASES: &[(&str, &[&str])] = &[
    ("ext4-1k", &["-t", "ext4", "-b", "1024"]),
    ("ext4-4k", &["-t", "ext4", "-b", "4096"]),
    (
        "ext4-gdtcsum",
        &["-t", "ext4", "-b", "1024", "-O", "^metadata_csum,uninit_bg"],
    ),
    (
        "ext4-nocsum",
        &[
            "-t",
            "ext4",
            "-b",
            "1024",
            "-O",
            "^metadata_csum,^uninit_bg",
        ],
    ),
    ("ext3", &["-t", "ext3", "-b", "1024"]),
];

const OPTIONS: &[&[&str]] = &[
    &["-O", "^metadata_csum"],
    &["-O", "metadata_csum"],
    &["-O", "^metadata_csum,^uninit_bg"],
    &["-O", "^uninit_bg"],
    &["-O", "uninit_bg"],
    &["-O", "^dir_index"],
    &["-U", "22222222-3333-4444-5555-666666666666"],
];

fn workload(root: &Path) {
    let d = root.join("big-dir");
    fs::create_dir(&d).unwrap();
    for i in 0..600 {
        fs::write(
            d.join(format!("a-rather-long-file-name-{i:05}")),
            format!("{i}\n"),
        )
        .unwrap();
    }
    for i in (0..600).step_by(3) {
        fs::remove_file(d.join(format!("a-rather-long-file-name-{i:05}"))).unwrap();
    }
    // Two files written in turns, synced, so that each gets many extents.
    let (mut a, mut b) = (
        fs::File::create(root.join("frag-a")).unwrap(),
        fs::File::create(root.join("frag-b")).unwrap(),
    );
    let mut x = 0x9e37_79b9u32;
    for _ in 0..40 {
        let chunk: Vec<u8> = (0..8192)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        a.write_all(&chunk).unwrap();
        a.sync_all().unwrap();
        b.write_all(&chunk[..4096]).unwrap();
        b.sync_all().unwrap();
    }
    let sparse = fs::File::create(root.join("sparse")).unwrap();
    sparse.set_len(50 << 20).unwrap();
    fs::write(root.join("xattrs"), b"x").unwrap();
    let big = "v".repeat(700);
    let o = run(Command::new("setfattr")
        .args(["-n", "user.big", "-v", &big])
        .arg(root.join("xattrs")));
    assert!(o.status.success(), "setfattr: {o:?}");
    std::os::unix::fs::symlink("frag-a", root.join("fast")).unwrap();
    std::os::unix::fs::symlink("s".repeat(200), root.join("slow")).unwrap();
    fs::hard_link(root.join("frag-b"), root.join("hard")).unwrap();
    for i in 0..20 {
        let sub = root.join(format!("sub{i}"));
        fs::create_dir(&sub).unwrap();
        fs::write(sub.join("f"), vec![i as u8; 3000]).unwrap();
    }
    fs::remove_dir_all(root.join("sub7")).unwrap();
}

fn view(img: &Path, mnt: &Path) -> Result<BTreeMap<String, String>, String> {
    let mut lm = LoopMount::new(img, mnt)?;
    let m = manifest(mnt);
    lm.umount()?;
    Ok(m)
}

#[test]
fn checksum_rewrites_match_tune2fs_on_kernel_filled_images() {
    if !is_root() || !have("losetup") || !have("tune2fs") || !have("setfattr") {
        println!("skipped: needs root, losetup, tune2fs and setfattr");
        return;
    }
    let dir = TempDir::new("tune-rewrite");
    let mnt = dir.path("mnt");
    let (mut total, mut identical, mut intact) = (0, 0, 0);
    let mut failures = Vec::new();
    for (name, args) in BASES {
        let base = dir.path(&format!("{name}.img"));
        make_image(Command::new("mke2fs"), args, &base, "96M").unwrap();
        let mut lm = LoopMount::new(&base, &mnt).unwrap();
        workload(&mnt);
        let before = manifest(&mnt);
        lm.umount().unwrap();
        drop(lm);
        // tune2fs wants a freshly checked filesystem for these.
        let o = run(Command::new("e2fsck").args(["-fy"]).arg(&base));
        assert!(o.status.code().is_some_and(|c| c <= 1), "e2fsck: {o:?}");
        for opt in OPTIONS {
            total += 1;
            let (ti, oi) = (dir.path("t.img"), dir.path("o.img"));
            copy_sparse(&base, &ti).unwrap();
            copy_sparse(&base, &oi).unwrap();
            let rt = tune_at(Command::new("tune2fs").args(*opt), &ti).0;
            let ro = tune_at(ours_tune().args(*opt), &oi).0;
            if rt != 0 || ro != 0 {
                failures.push(format!("{name} {opt:?}: exit tune2fs {rt}, ours {ro}"));
                continue;
            }
            match image_diffs(&ti, &oi, 4) {
                Ok((0, _)) => identical += 1,
                Ok((n, at)) => failures.push(format!(
                    "{name} {opt:?}: {n} bytes differ from tune2fs's, first at {at:?}"
                )),
                Err(e) => failures.push(e),
            }
            let (ft, fo) = (e2fsck_fn(&ti).0, e2fsck_fn(&oi));
            if ft != fo.0 {
                failures.push(format!(
                    "{name} {opt:?}: e2fsck -fn tune2fs's {ft}, ours {}\n{}",
                    fo.0, fo.1
                ));
            }
            let ours_fsck = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
                .args(["fsck", "-fn"])
                .arg(&oi));
            if ours_fsck.status.code() != Some(fo.0) {
                failures.push(format!(
                    "{name} {opt:?}: fsck.ext4r -fn {:?}, e2fsck {}",
                    ours_fsck.status.code(),
                    fo.0
                ));
            }
            match view(&oi, &mnt) {
                Ok(now) if now == before => intact += 1,
                Ok(_) => failures.push(format!("{name} {opt:?}: files changed")),
                Err(e) => failures.push(format!("{name} {opt:?}: {e}")),
            }
        }
    }
    // Round trip on the metadata_csum base: off, then on again.
    let rt = dir.path("roundtrip.img");
    copy_sparse(dir.path("ext4-1k.img"), &rt).unwrap();
    let before = view(&rt, &mnt).unwrap();
    run(Command::new("e2fsck").args(["-fy"]).arg(&rt));
    for opt in [["-O", "^metadata_csum"], ["-O", "metadata_csum"]] {
        let rc = tune_at(ours_tune().args(opt), &rt).0;
        let (f, out) = e2fsck_fn(&rt);
        if rc != 0 || f != 0 {
            failures.push(format!("round trip {opt:?}: exit {rc}, e2fsck {f}\n{out}"));
        }
    }
    let round_trip_intact = view(&rt, &mnt).is_ok_and(|m| m == before);
    if !round_trip_intact {
        failures.push("round trip: files changed".into());
    }
    println!(
        "tune rewrites on kernel-filled images: {identical}/{total} byte-identical to tune2fs, \
         {intact}/{total} intact under a kernel mount, round trip intact: {round_trip_intact}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Power cut during a checksum rewrite: the tune is run through a device
/// that refuses every write from the n-th on, for cut points spread over
/// the whole run; `e2fsck -fy` must then leave a clean image with every
/// file as the kernel wrote it. How often our own fsck gets there is
/// printed.
#[test]
fn a_power_cut_during_a_checksum_rewrite_is_repaired() {
    use ext4r::device::{BlockDevice, FaultDevice, FileDevice, OpenMode};
    use ext4r::tune::{tune, TuneEnv, TuneOptions};
    use std::sync::Arc;
    if !is_root() || !have("losetup") || !have("setfattr") || !have("e2fsck") {
        println!("skipped: needs root, losetup, setfattr and e2fsck");
        return;
    }
    let dir = TempDir::new("tune-cut");
    let mnt = dir.path("mnt");
    let on = dir.path("on.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024"],
        &on,
        "64M",
    )
    .unwrap();
    let mut lm = LoopMount::new(&on, &mnt).unwrap();
    workload(&mnt);
    let before = manifest(&mnt);
    lm.umount().unwrap();
    drop(lm);
    run(Command::new("e2fsck").args(["-fy"]).arg(&on));
    let off = dir.path("off.img");
    copy_sparse(&on, &off).unwrap();
    assert_eq!(
        tune_at(ours_tune().args(["-O", "^metadata_csum"]), &off).0,
        0
    );
    let open = |img: &Path| {
        // The last cut's writer has let go, but the other test in this
        // binary spawns programs: a child between fork and exec holds a
        // copy of the descriptor, and its lock, for an instant (CI saw
        // Locked by this very process once). Waiting covers that.
        let mode = OpenMode {
            write: true,
            exclusive: false,
            lock_wait: Some(std::time::Duration::from_secs(10)),
            ..OpenMode::default()
        };
        Arc::new(FaultDevice::new(FileDevice::open(img, mode).unwrap()))
    };
    let change = |dev: Arc<FaultDevice<FileDevice>>, feature: &str| {
        let mut o = TuneOptions::default();
        o.features = Some(feature.to_string());
        let dev: Arc<dyn BlockDevice> = dev;
        tune(dev, &o, &mut TuneEnv::new("img", 1_700_000_500))
    };
    let (mut cuts, mut repaired, mut ours_repaired) = (0, 0, 0);
    let mut failures = Vec::new();
    for (base, feature) in [(&on, "^metadata_csum"), (&off, "metadata_csum")] {
        let img = dir.path("cut.img");
        copy_sparse(base, &img).unwrap();
        let dev = open(&img);
        let out = change(dev.clone(), feature).unwrap();
        assert_eq!(out.status, 0, "{feature}: {out:?}");
        let total = dev.writes();
        assert!(total > 10, "{feature}: only {total} writes");
        // The writers' lock is per open: the cut runs below open the
        // image again.
        drop(dev);
        for k in 1..=8u64 {
            let n = total * k / 9;
            cuts += 1;
            copy_sparse(base, &img).unwrap();
            let dev = open(&img);
            dev.fail_after(n);
            let _ = change(dev.clone(), feature);
            drop(dev);
            // Our own fsck on a copy of the cut image, e2fsck on the image.
            let ours_img = dir.path("cut-ours.img");
            copy_sparse(&img, &ours_img).unwrap();
            let fy = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
                .args(["fsck", "-fy"])
                .arg(&ours_img));
            let ours_fn = e2fsck_fn(&ours_img);
            let ours_files = view(&ours_img, &mnt);
            if fy.status.code().is_some_and(|c| c <= 1)
                && ours_fn.0 == 0
                && ours_files.as_ref().is_ok_and(|m| *m == before)
            {
                ours_repaired += 1;
            } else {
                failures.push(format!(
                    "{feature} cut at write {n}/{total}: fsck.ext4r -fy {:?}, then e2fsck -fn {}, \
                     files intact {}\n{}",
                    fy.status.code(),
                    ours_fn.0,
                    ours_files.is_ok_and(|m| m == before),
                    ours_fn.1.lines().take(12).collect::<Vec<_>>().join("\n")
                ));
            }
            let ey = run(Command::new("e2fsck").args(["-fy"]).arg(&img));
            let (after, out) = e2fsck_fn(&img);
            let files = view(&img, &mnt);
            if after == 0 && files.as_ref().is_ok_and(|m| *m == before) {
                repaired += 1;
            } else {
                failures.push(format!(
                    "{feature} cut at write {n}/{total}: e2fsck -fy {:?}, e2fsck -fn {after}, \
                     files intact {}\n{}",
                    ey.status.code(),
                    files.is_ok_and(|m| m == before),
                    out.lines().take(12).collect::<Vec<_>>().join("\n")
                ));
            }
        }
    }
    println!(
        "power cut during a checksum rewrite: {repaired}/{cuts} repaired by e2fsck -fy, \
         {ours_repaired}/{cuts} by fsck.ext4r -fy, to clean and intact"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
