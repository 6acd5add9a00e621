//! `ext4r mount` on crafted images: each image of the e2fsprogs test
//! corpus (`../shared/corpus/e2fsprogs`, read in place, each gunzipped to
//! a temp dir) is mounted read-write, its whole tree walked and read
//! (names, attributes, file contents, link targets, xattrs), and one file
//! written in every directory; all under a watchdog. Errors are answers
//! (EUCLEAN, EIO, ENOSPC, a refused mount); a crash (a panic, a dead
//! driver) or a hang is a failure. After the unmount, an image e2fsck
//! found damaged must still be found damaged: the mount never makes a
//! damaged image look clean.
//!
//! CI runs every other image; `EXT4R_MOUNT_CORPUS=all` runs them all.
//! Needs root, /dev/fuse, e2fsprogs and the corpus; says why it skips.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::corpus::corpus_dir;
use common::*;
use ext4r_lab::mountwalk::{e2fsck_limited, needs_recovery, serve, Verdict};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long one image's walk may take before it counts as a hang.
const WATCHDOG: Duration = Duration::from_secs(60);
/// Entries walked per image at most (a crafted tree may be huge or loop);
/// the CI sample walks fewer.
const MAX_ENTRIES: usize = 20_000;
const SAMPLE_ENTRIES: usize = 2_000;

/// Damaged images that legitimately end e2fsck-clean after the mount, and
/// why. Nothing else may.
const CLEANED: &[(&str, &str)] = &[(
    "f_deleted_inode_bad_csum",
    "the damage is the record of a free inode (bad checksum); the probe file is given that \
         inode, and a new record replaces it, as on the kernel's ext4",
)];

#[test]
fn crafted_images_neither_crash_nor_hang() {
    if !is_root() || !Path::new("/dev/fuse").exists() {
        eprintln!("skipping mount_corpus: needs root and /dev/fuse");
        return;
    }
    if !have("e2fsck") || !have("dumpe2fs") || !have("gzip") || !have("timeout") {
        eprintln!("skipping mount_corpus: e2fsck, gzip or timeout is not installed");
        return;
    }
    let Some(corpus) = corpus_dir() else {
        eprintln!("skipping mount_corpus: no e2fsprogs corpus (../shared/corpus/e2fsprogs)");
        return;
    };
    let all = std::env::var("EXT4R_MOUNT_CORPUS").is_ok_and(|v| v == "all");
    // Seconds e2fsck gets per run (the CI sample's are fewer).
    let limit = if all { 30 } else { 8 };
    let mut cases: Vec<PathBuf> = fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("image.gz").is_file())
        .collect();
    cases.sort();
    let td = TempDir::new("mount-corpus");
    let dir = td.path("m");
    fs::create_dir_all(&dir).unwrap();
    let (mut served, mut refused, mut still_damaged, mut damaged, mut explained) = (0, 0, 0, 0, 0);
    let (mut entries, mut errors, mut writes) = (0, 0, 0);
    let mut failures = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        if !all && k % 2 == 1 {
            continue;
        }
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let img = td.path("image");
        let o = run(Command::new("sh").arg("-c").arg(format!(
            "gzip -dc '{}' > '{}'",
            case.join("image.gz").display(),
            img.display()
        )));
        assert!(o.status.success(), "{name}: gunzip failed");
        let before = e2fsck_limited(&img, limit);
        let recovers = needs_recovery(&img);
        let log = td.path("log");
        let t = Instant::now();
        let r = serve(
            Path::new(env!("CARGO_BIN_EXE_ext4r")),
            &img,
            &dir,
            &log,
            if all { MAX_ENTRIES } else { SAMPLE_ENTRIES },
            WATCHDOG,
        );
        if std::env::var_os("EXT4R_MOUNT_VERBOSE").is_some() {
            eprintln!("  {name}: {r:?} in {:.1} s", t.elapsed().as_secs_f64());
        }
        match r {
            Ok(Verdict::Refused) => refused += 1,
            Ok(Verdict::Served(w)) => {
                served += 1;
                entries += w.entries;
                errors += w.errors;
                writes += w.writes_ok;
            }
            Err(why) => failures.push(format!("{name}: {why}")),
        }
        // A journal to replay and orphans to finish are what a mount does
        // (the kernel's too): such an image may end clean.
        if before != 0 && !recovers {
            damaged += 1;
            let after = e2fsck_limited(&img, limit);
            if after != 0 {
                still_damaged += 1;
            } else if let Some((_, why)) = CLEANED.iter().find(|(n, _)| *n == name) {
                eprintln!("  {name}: clean after the mount, as expected: {why}");
                explained += 1;
            } else {
                failures.push(format!(
                    "{name}: e2fsck -fn exit {before} before the mount, clean after it"
                ));
            }
        }
    }
    eprintln!(
        "mount_corpus: {} images: {served} served ({entries} entries walked, {errors} errors \
         answered, {writes} probe files written), {refused} refused; {still_damaged} of \
         {damaged} damaged images still damaged after the unmount ({explained} clean for a \
         listed reason); {} failures",
        served + refused + failures.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
