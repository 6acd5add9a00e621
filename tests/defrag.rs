//! e4defrag-r against e4defrag and the kernel: `-c` reports the same
//! figures as `e4defrag -c` on a kernel-written fragmented image, mounted
//! and unmounted; online runs leave fewer or as many extents as e4defrag,
//! every file byte-identical (mtime included) and e2fsck clean; a file being
//! written meanwhile comes out as its writer wrote it; a full filesystem and
//! a non-ext4 target get clear refusals, an empty unmounted image is left
//! byte-identical. (Offline runs: tests/defrag_offline.rs.)
//!
//! Needs root, loop devices and e2fsprogs' e4defrag; each test says why it
//! skips without them.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use common::tree::manifest;
use common::{copy_sparse, have, is_root, run, LoopMount, TempDir};

fn ours() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ext4r"));
    c.arg("e4defrag");
    c
}

fn can_mount(test: &str) -> bool {
    if !is_root() {
        println!("{test}: skipped, needs root for loop mounts");
        return false;
    }
    for tool in ["mke2fs", "e2fsck", "e4defrag", "losetup"] {
        if !have(tool) {
            println!("{test}: skipped, {tool} not found");
            return false;
        }
    }
    true
}

/// splitmix64, for sizes and contents.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A 64 MiB ext4 with 1 KiB blocks, mounted, holding fragmented files
/// written by the kernel: logs grown by interleaved fsynced appends, small
/// files in two directories, an empty file, a symlink.
fn fragmented(tmp: &TempDir, name: &str) -> (PathBuf, LoopMount) {
    let img = tmp.path(&format!("{name}.img"));
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-b", "1024"])
        .arg(&img)
        .arg("64M"));
    assert!(o.status.success(), "mke2fs: {o:?}");
    let lm = LoopMount::new(&img, &tmp.path(&format!("{name}-mnt"))).unwrap();
    let root = lm.dir.clone();
    let mut rng = Rng(7);
    for round in 0..30 {
        for i in 0..4 {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.join(format!("log{i}")))
                .unwrap();
            let n = 1024 + (rng.next() % 6144) as usize;
            f.write_all(&rng.bytes(n)).unwrap();
            f.sync_data().unwrap();
        }
        if round % 3 == 0 {
            let d = root.join(if round % 2 == 0 { "a" } else { "b/c" });
            std::fs::create_dir_all(&d).unwrap();
            let n = 1 + (rng.next() % 9000) as usize;
            std::fs::write(d.join(format!("small{round}")), rng.bytes(n)).unwrap();
        }
    }
    std::fs::write(root.join("empty"), b"").unwrap();
    std::os::unix::fs::symlink("log0", root.join("link")).unwrap();
    rustix::fs::sync();
    (img, lm)
}

fn text(c: &mut Command) -> (i32, String, String) {
    let o = run(c);
    // A signal reads as the shell shows it: 128 + its number.
    let rc = o.status.code().unwrap_or_else(|| {
        128 + std::os::unix::process::ExitStatusExt::signal(&o.status).unwrap_or(0)
    });
    (
        rc,
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The visible text of an e4defrag line (its cursor escapes and progress
/// counters removed).
fn visible(line: &str) -> &str {
    let l = line.rsplit("\x1b[K").next().unwrap_or(line);
    if l.chars().all(|c| c.is_ascii_digit() || "[]/".contains(c)) {
        ""
    } else {
        l
    }
}

/// The per-file rows, the ranking and the totals of a `-c -v` report, the
/// mount point removed from paths.
fn rows(report: &str, strip: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev = String::new();
    for raw in report.lines() {
        let l = visible(raw);
        if l.ends_with(" KB") || l.starts_with(" Total/best") || l.starts_with(" Fragmentation") {
            let joined = if l.starts_with(' ') && !l.trim_start().starts_with(char::is_alphabetic) {
                format!("{prev} {}", l.trim())
            } else {
                l.to_string()
            };
            let norm: Vec<&str> = joined.split_whitespace().collect();
            out.push(norm.join(" ").replacen(strip, "", 1));
        }
        prev = l.to_string();
    }
    out
}

#[test]
fn score_matches_e4defrag_mounted_and_unmounted() {
    if !can_mount("score_matches_e4defrag_mounted_and_unmounted") {
        return;
    }
    let tmp = TempDir::new("defrag-score");
    let (img, mut lm) = fragmented(&tmp, "s");
    let mnt = lm.dir.clone();
    // e4defrag's first run after a mount may count extent-tree records;
    // later runs count the kernel's merged extent cache, as we do.
    text(Command::new("e4defrag").args(["-c", "-v"]).arg(&mnt));
    let (rc_t, theirs, _) = text(Command::new("e4defrag").args(["-c", "-v"]).arg(&mnt));
    let (rc_o, mounted, _) = text(ours().args(["-c", "-v"]).arg(&mnt));
    assert_eq!(rc_o, rc_t);
    let prefix = mnt.to_string_lossy().into_owned();
    let want = rows(&theirs, "");
    assert!(want.len() > 20, "e4defrag listed too little:\n{theirs}");
    assert_eq!(
        rows(&mounted, ""),
        want,
        "mounted -c -v\n{mounted}\n---\n{theirs}"
    );
    // Without -v: the same text, but for the version line and our figures.
    let (_, t, _) = text(Command::new("e4defrag").arg("-c").arg(&mnt));
    let (_, o, _) = text(ours().arg("-c").arg(&mnt));
    let body = |s: &str| -> Vec<String> {
        s.lines()
            .skip(1)
            .filter(|l| !l.starts_with(" Extents below 1 MiB"))
            .map(String::from)
            .collect()
    };
    assert_eq!(body(&o), body(&t), "-c\n{o}\n---\n{t}");
    assert!(o.contains(" Extents below 1 MiB: "), "{o}");
    // One file as the target.
    let log = mnt.join("log1");
    let (_, t, _) = text(Command::new("e4defrag").arg("-c").arg(&log));
    let (_, o, _) = text(ours().arg("-c").arg(&log));
    assert_eq!(body(&o), body(&t), "-c file\n{o}\n---\n{t}");
    lm.umount().unwrap();
    drop(lm);
    let (rc_u, unmounted, err) = text(ours().args(["-c", "-v"]).arg(&img));
    assert_eq!(rc_u, 0, "{err}");
    assert_eq!(
        rows(&unmounted, ""),
        rows(&theirs, &prefix),
        "unmounted -c -v\n{unmounted}\n---\n{theirs}"
    );
    assert!(
        unmounted.contains("HISTOGRAM OF FREE EXTENT SIZES:"),
        "{unmounted}"
    );
}

fn total_extents(report: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.strip_prefix(" Total/best extents"))
        .and_then(|v| v.trim().split('/').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no totals in\n{report}"))
}

fn e2fsck_clean(img: &Path) {
    let (rc, out) = common::e2fsck_fn(img);
    assert_eq!(rc, 0, "e2fsck -fn:\n{out}");
}

#[test]
fn online_leaves_no_more_extents_than_e4defrag_and_data_intact() {
    if !can_mount("online_leaves_no_more_extents_than_e4defrag_and_data_intact") {
        return;
    }
    let tmp = TempDir::new("defrag-online");
    let (img, mut lm) = fragmented(&tmp, "o");
    let before = manifest(&lm.dir);
    let (_, c0, _) = text(ours().arg("-c").arg(&lm.dir));
    // A twin for e4defrag.
    lm.umount().unwrap();
    let twin = tmp.path("twin.img");
    copy_sparse(&img, &twin).unwrap();
    lm.mount().unwrap();
    // A time limit already reached: nothing is started, nothing changes.
    let (rc, out, err) = text(ours().args(["-t", "0"]).arg(&lm.dir));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains(" Not reached (time limit):"), "{out}");
    assert_eq!(manifest(&lm.dir), before);
    let (rc, out, err) = text(ours().arg(&lm.dir));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(!out.contains("[ OK ]") && !out.contains("Success"), "{out}");
    let (_, c1, _) = text(ours().arg("-c").arg(&lm.dir));
    assert_eq!(manifest(&lm.dir), before, "contents or mtimes changed");
    lm.umount().unwrap();
    drop(lm);
    e2fsck_clean(&img);
    let mut lt = LoopMount::new(&twin, &tmp.path("twin-mnt")).unwrap();
    text(Command::new("e4defrag").arg(&lt.dir));
    let (_, c2, _) = text(ours().arg("-c").arg(&lt.dir));
    lt.umount().unwrap();
    let (b, o, t) = (total_extents(&c0), total_extents(&c1), total_extents(&c2));
    println!("extents: before {b}, after e4defrag-r {o}, after e4defrag {t}");
    assert!(o < b, "{out}");
    assert!(o <= t, "e4defrag-r left {o} extents, e4defrag {t}");
}

#[test]
fn file_written_during_run_ends_as_written() {
    if !can_mount("file_written_during_run_ends_as_written") {
        return;
    }
    let tmp = TempDir::new("defrag-writer");
    let (img, mut lm) = fragmented(&tmp, "w");
    let target = lm.dir.join("log2");
    let mut model = std::fs::read(&target).unwrap();
    let stop = AtomicBool::new(false);
    /// Stops the writer also when an assertion fails, so that the scope
    /// (which waits for it) ends.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let runs = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut rng = Rng(99);
            let mut writes = 0u32;
            while !stop.load(Ordering::Relaxed) || writes < 50 {
                // Opened per write and closed for a while between writes, so
                // that the run's check often finds no writer and moves while
                // the next writes come in.
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .unwrap();
                let len = 1 + (rng.next() % 8192) as usize;
                let at = (rng.next() % (model.len() as u64 + 4096)) as usize;
                let data = rng.bytes(len);
                f.write_all_at(&data, at as u64).unwrap();
                if model.len() < at + len {
                    model.resize(at + len, 0);
                }
                model[at..at + len].copy_from_slice(&data);
                if writes % 5 == 0 {
                    f.sync_data().unwrap();
                }
                drop(f);
                writes += 1;
                std::thread::sleep(std::time::Duration::from_micros(200 + rng.next() % 2000));
            }
            model
        });
        let guard = Stop(&stop);
        let mut outs = Vec::new();
        let mut touched = 0;
        for _ in 0..40 {
            let (rc, out, err) = text(ours().arg("-v").arg(&target));
            assert!(rc == 0, "exit {rc}\n{out}{err}");
            let moved = out.lines().any(|l| {
                l.starts_with("[1/1]")
                    && (l.ends_with(" extents") || l.contains("written while being moved"))
            });
            touched += u32::from(moved);
            outs.push(out);
            if touched >= 3 {
                break;
            }
        }
        drop(guard);
        (writer.join().unwrap(), (outs, touched))
    });
    let (model, (outs, touched)) = runs;
    assert_eq!(
        std::fs::read(&target).unwrap(),
        model,
        "log2 differs from what was written"
    );
    println!("{}", outs.join("\n"));
    assert!(
        touched > 0,
        "no run moved the file while it was being written"
    );
    lm.umount().unwrap();
    drop(lm);
    e2fsck_clean(&img);
}

#[test]
fn full_filesystem_says_so_and_keeps_data() {
    if !can_mount("full_filesystem_says_so_and_keeps_data") {
        return;
    }
    let tmp = TempDir::new("defrag-full");
    let (img, mut lm) = fragmented(&tmp, "f");
    let mut filler = std::fs::File::create(lm.dir.join("filler")).unwrap();
    let chunk = vec![0x5a; 1 << 20];
    while filler.write_all(&chunk).is_ok() {}
    while filler.write_all(&chunk[..1024]).is_ok() {}
    drop(filler);
    rustix::fs::sync();
    let before = manifest(&lm.dir);
    let (rc, out, err) = text(ours().arg(&lm.dir));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(
        out.contains("not enough free space") || out.contains("no improvement possible"),
        "{out}"
    );
    assert!(!out.contains("failed"), "{out}");
    assert_eq!(manifest(&lm.dir), before);
    lm.umount().unwrap();
    drop(lm);
    e2fsck_clean(&img);
}

#[test]
fn immutable_and_append_only_files_are_skipped() {
    if !can_mount("immutable_and_append_only_files_are_skipped") || !have("chattr") {
        return;
    }
    let tmp = TempDir::new("defrag-flags");
    let (img, mut lm) = fragmented(&tmp, "i");
    let mnt = lm.dir.clone();
    assert!(run(Command::new("chattr").arg("+i").arg(mnt.join("log0")))
        .status
        .success());
    assert!(run(Command::new("chattr").arg("+a").arg(mnt.join("log1")))
        .status
        .success());
    let before = manifest(&mnt);
    let (rc, out, err) = text(ours().arg(&mnt));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("log0: skipped: immutable"), "{out}");
    assert!(out.contains("log1: skipped: append-only"), "{out}");
    assert_eq!(manifest(&mnt), before);
    for f in ["log0", "log1"] {
        run(Command::new("chattr").args(["-i", "-a"]).arg(mnt.join(f)));
    }
    lm.umount().unwrap();
    drop(lm);
    e2fsck_clean(&img);
}

#[test]
fn relevant_mode_places_a_tree_in_read_order() {
    if !can_mount("relevant_mode_places_a_tree_in_read_order") {
        return;
    }
    let tmp = TempDir::new("defrag-relevant");
    let (img, mut lm) = fragmented(&tmp, "r");
    let tree = lm.dir.join("tree");
    let mut rng = Rng(3);
    let mut names: Vec<(u32, u32)> = (0..8).flat_map(|d| (0..25).map(move |f| (d, f))).collect();
    for i in (1..names.len()).rev() {
        names.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    for (k, (d, f)) in names.iter().enumerate() {
        let dir = tree.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        let n = 1 + (rng.next() % 12000) as usize;
        std::fs::write(dir.join(format!("f{f}")), rng.bytes(n)).unwrap();
        if k % 4 == 0 {
            std::fs::write(lm.dir.join(format!("scratch{k}")), rng.bytes(3000)).unwrap();
            rustix::fs::sync();
        }
    }
    rustix::fs::sync();
    let before = manifest(&tree);
    let (rc, out, err) = text(ours().arg("-r").arg(&tree));
    assert_eq!(rc, 0, "{out}{err}");
    let gaps = out
        .lines()
        .find_map(|l| l.strip_prefix(" Gaps between files in read order:"))
        .unwrap_or_else(|| panic!("{out}"));
    let nums: Vec<u64> = gaps
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    assert!(nums.len() >= 2 && nums[1] < nums[0], "{out}");
    assert!(out.contains("Files placed:\t\t\t200 of 200"), "{out}");
    assert_eq!(manifest(&tree), before);
    lm.umount().unwrap();
    drop(lm);
    e2fsck_clean(&img);
}

#[test]
fn refusals_are_clear_and_change_nothing() {
    if !have("mke2fs") {
        println!("refusals_are_clear_and_change_nothing: skipped, mke2fs not found");
        return;
    }
    let tmp = TempDir::new("defrag-refuse");
    let img = tmp.path("u.img");
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&img)
        .arg("16M"));
    assert!(o.status.success());
    let bytes = std::fs::read(&img).unwrap();
    // An unmounted image is worked on offline: an empty one has nothing
    // to move, and a run that moves nothing writes nothing.
    let (rc, out, err) = text(ours().arg(&img));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains(", offline"), "{out}");
    let (rc, out, err) = text(ours().arg("-f").arg(&img));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("Nothing to move"), "{out}");
    assert_eq!(std::fs::read(&img).unwrap(), bytes, "the image changed");
    // Scoring it unmounted works.
    let (rc, out, err) = text(ours().arg("-c").arg(&img));
    assert_eq!(rc, 1, "{out}{err}"); // an empty filesystem: nothing to score
    assert!(out.contains("none can be defragmented"), "{out}");
    // Not ext4: a plain file in the temp directory (tmpfs or another fs).
    let plain = tmp.path("plain");
    std::fs::write(&plain, vec![1u8; 10000]).unwrap();
    let on_ext4 = rustix::fs::statfs(&plain).unwrap().f_type == 0xEF53;
    let (rc, _, err) = text(ours().arg("-c").arg(&plain));
    assert_eq!(rc, 1);
    if !on_ext4 {
        assert!(err.contains("Filesystem is not ext4 filesystem"), "{err}");
    }
    let (rc, _, err) = text(ours().arg(tmp.path("missing")));
    assert_eq!(rc, 1);
    assert!(
        err.contains("Failed to get file information: No such file or directory"),
        "{err}"
    );
}

/// `-c --json`: the figures of the text report, as numbers (unmounted
/// image; no mount needed).
#[test]
fn json_score_holds_the_text_figures() {
    if !have("mke2fs") || !have("debugfs") {
        println!("json_score_holds_the_text_figures: skipped, needs mke2fs and debugfs");
        return;
    }
    let tmp = TempDir::new("defrag-json");
    let img = tmp.path("j.img");
    common::make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "32M").unwrap();
    let src = tmp.path("f");
    std::fs::write(&src, vec![7u8; 3 << 20]).unwrap();
    for i in 0..4 {
        let o = run(Command::new("debugfs")
            .args(["-w", "-R", &format!("write {} f{i}", src.display())])
            .arg(&img));
        assert!(o.status.success(), "{o:?}");
    }
    let (rc_t, t, err) = text(ours().args(["-c", "--image"]).arg(&img));
    let (rc_j, j, _) = text(ours().args(["-c", "--image", "--json"]).arg(&img));
    assert_eq!(rc_j, rc_t, "{err}");
    let v: serde_json::Value = serde_json::from_str(j.trim()).unwrap();
    let o = &v["targets"][0];
    assert_eq!(o["kind"], "device", "{j}");
    assert_eq!(
        o["extents_now"].as_u64(),
        Some(total_extents(&t)),
        "{j}\n{t}"
    );
    let score = t
        .lines()
        .find_map(|l| l.strip_prefix(" Fragmentation score"))
        .map(|s| s.trim().to_string())
        .unwrap();
    assert_eq!(
        format!("{:.0}", o["score"].as_f64().unwrap()),
        score,
        "{j}\n{t}"
    );
    let frag = o["fragmented"].as_array().unwrap();
    assert_eq!(
        frag.len(),
        t.lines().filter(|l| l.contains(". /f")).count(),
        "{j}\n{t}"
    );
}
