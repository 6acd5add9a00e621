//! e4defrag-r offline, on unmounted images the kernel wrote: no more
//! extents than an online run on a twin, every file byte-identical
//! (mtime included) through a kernel mount, `e2fsck -fn` clean; block maps
//! kept (or converted on request), bigalloc clusters kept whole; `-r`
//! placing a tree in read order; `-f` gathering the free space of a
//! fill-delete image into one run; power cuts after any write of an
//! offline run leaving every file intact after recovery by our fsck,
//! e2fsck and the kernel; clear refusals of mounted targets.
//!
//! Needs root and loop devices (the kernel writes the images); each test
//! says why it skips without them.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::tree::{fnv, manifest};
use common::{copy_sparse, have, is_root, run, LoopMount, TempDir};

fn ours() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ext4r"));
    c.arg("e4defrag");
    c
}

fn can_run(test: &str) -> bool {
    if !is_root() {
        println!("{test}: skipped, needs root for loop mounts");
        return false;
    }
    for tool in ["mke2fs", "e2fsck", "losetup", "debugfs"] {
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

fn mkfs(img: &Path, args: &[&str], size: &str) {
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F"])
        .args(args)
        .arg(img)
        .arg(size));
    assert!(o.status.success(), "mke2fs {args:?}: {o:?}");
}

/// A filesystem made with `args` and filled by the kernel with fragmented
/// files: logs grown by interleaved fsynced appends, small files in
/// directories, a sparse file with an unwritten extent (where fallocate
/// works), a symlink. Unmounted and detached when it returns.
fn fragmented(tmp: &TempDir, name: &str, args: &[&str], size: &str) -> PathBuf {
    let img = tmp.path(&format!("{name}.img"));
    mkfs(&img, args, size);
    let lm = LoopMount::new(&img, &tmp.path(&format!("{name}-mnt"))).unwrap();
    let root = lm.dir.clone();
    let mut rng = Rng(11);
    for round in 0..40 {
        for i in 0..5 {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.join(format!("log{i}")))
                .unwrap();
            let n = 1000 + (rng.next() % 8000) as usize;
            f.write_all(&rng.bytes(n)).unwrap();
            f.sync_data().unwrap();
        }
        if round % 4 == 0 {
            let d = root.join(format!("d{}", round % 3));
            std::fs::create_dir_all(&d).unwrap();
            let n = 1 + (rng.next() % 30000) as usize;
            std::fs::write(d.join(format!("s{round}")), rng.bytes(n)).unwrap();
        }
    }
    let f = std::fs::File::create(root.join("sparse")).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&rng.bytes(5000), 200_000).unwrap();
    // Unwritten blocks past the data (ext3 has no fallocate: a hole then).
    let _ = rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::KEEP_SIZE, 400_000, 100_000);
    drop(f);
    std::os::unix::fs::symlink("log0", root.join("link")).unwrap();
    rustix::fs::sync();
    drop(lm);
    img
}

/// Every file as the kernel sees it (contents, sizes, modes, mtimes).
fn kernel_manifest(tmp: &TempDir, img: &Path) -> BTreeMap<String, String> {
    let lm = LoopMount::new(img, &tmp.path("manifest-mnt")).unwrap();
    let m = manifest(&lm.dir);
    drop(lm);
    m
}

fn text(c: &mut Command) -> (i32, String, String) {
    let o = run(c);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
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

/// Runs an offline command that must succeed, and returns its output.
fn offline(args: &[&str], img: &Path) -> String {
    let (rc, out, err) = text(ours().args(args).arg(img));
    assert_eq!(rc, 0, "e4defrag-r {args:?}:\n{out}{err}");
    assert!(!out.contains("failed"), "{out}");
    out
}

fn debugfs_stat(img: &Path, path: &str) -> String {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("stat {path}")])
        .arg(img));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn offline_leaves_no_more_extents_than_online_and_data_intact() {
    if !can_run("offline_leaves_no_more_extents_than_online_and_data_intact") {
        return;
    }
    let tmp = TempDir::new("defrag-off");
    let img = fragmented(&tmp, "o", &["-t", "ext4", "-b", "1024"], "64M");
    let before = kernel_manifest(&tmp, &img);
    let twin = tmp.path("twin.img");
    copy_sparse(&img, &twin).unwrap();
    let (_, c0, _) = text(ours().arg("-c").arg(&img));
    // Online on the twin.
    let mut lm = LoopMount::new(&twin, &tmp.path("twin-mnt")).unwrap();
    let (rc, out, err) = text(ours().arg(&lm.dir));
    assert_eq!(rc, 0, "{out}{err}");
    lm.umount().unwrap();
    drop(lm);
    let (_, c_online, _) = text(ours().arg("-c").arg(&twin));
    // Offline on the image.
    let out = offline(&[], &img);
    assert!(out.contains(", offline"), "{out}");
    assert!(!out.contains("[ OK ]") && !out.contains("Success"), "{out}");
    let (_, c_off, _) = text(ours().arg("-c").arg(&img));
    e2fsck_clean(&img);
    assert_eq!(
        kernel_manifest(&tmp, &img),
        before,
        "contents or mtimes changed"
    );
    let (b, on, off) = (
        total_extents(&c0),
        total_extents(&c_online),
        total_extents(&c_off),
    );
    println!("extents: before {b}, online {on}, offline {off}\n{out}");
    assert!(off < b, "{out}");
    assert!(off <= on, "offline left {off} extents, online {on}");
    // A second run finds nothing to move and changes nothing.
    let bytes = std::fs::read(&img).unwrap();
    let again = offline(&[], &img);
    assert!(again.contains(" Improved:\t\t\t0"), "{again}");
    let (_, c_again, _) = text(ours().arg("-c").arg(&img));
    assert_eq!(total_extents(&c_again), off);
    assert_eq!(
        std::fs::read(&img).unwrap().len(),
        bytes.len(),
        "the image changed size"
    );
}

#[test]
fn ext3_files_stay_block_mapped_unless_converted() {
    if !can_run("ext3_files_stay_block_mapped_unless_converted") || !have("tune2fs") {
        return;
    }
    let tmp = TempDir::new("defrag-off-ext3");
    let img = fragmented(&tmp, "e", &["-t", "ext3", "-b", "1024"], "64M");
    let before = kernel_manifest(&tmp, &img);
    let twin = tmp.path("twin.img");
    copy_sparse(&img, &twin).unwrap();
    let out = offline(&[], &img);
    assert!(out.contains("/log0: "), "{out}");
    e2fsck_clean(&img);
    assert_eq!(kernel_manifest(&tmp, &img), before);
    let stat = debugfs_stat(&img, "/log0");
    assert!(
        stat.contains("Flags: 0x0") && stat.contains("(IND)"),
        "{stat}"
    );
    let (_, c, _) = text(ours().arg("-c").arg(&img));
    assert!(total_extents(&c) < 40, "{c}");
    // Converting needs the extent feature.
    let (rc, _, err) = text(ours().arg("--to-extents").arg(&twin));
    assert_eq!(rc, 1);
    assert!(err.contains("needs the extent feature"), "{err}");
    assert!(
        run(Command::new("tune2fs").args(["-O", "extent"]).arg(&twin))
            .status
            .success()
    );
    let out = offline(&["--to-extents"], &twin);
    assert!(out.contains("block map converted to extents"), "{out}");
    e2fsck_clean(&twin);
    assert_eq!(kernel_manifest(&tmp, &twin), before);
    for f in ["/log0", "/d0/s0"] {
        let stat = debugfs_stat(&twin, f);
        assert!(stat.contains("EXTENTS:"), "{f}: {stat}");
    }
}

#[test]
fn bigalloc_clusters_stay_whole() {
    if !can_run("bigalloc_clusters_stay_whole") {
        return;
    }
    let tmp = TempDir::new("defrag-off-big");
    let img = fragmented(
        &tmp,
        "b",
        &["-t", "ext4", "-O", "bigalloc", "-C", "16384"],
        "128M",
    );
    let before = kernel_manifest(&tmp, &img);
    for (k, args) in [vec![], vec!["-r"], vec!["-f"]].iter().enumerate() {
        let copy = tmp.path(&format!("copy{k}.img"));
        copy_sparse(&img, &copy).unwrap();
        let out = offline(args, &copy);
        println!("{out}");
        e2fsck_clean(&copy);
        assert_eq!(kernel_manifest(&tmp, &copy), before, "{args:?}");
    }
}

#[test]
fn relevant_mode_places_a_tree_in_read_order() {
    if !can_run("relevant_mode_places_a_tree_in_read_order") {
        return;
    }
    let tmp = TempDir::new("defrag-off-r");
    let img = tmp.path("r.img");
    mkfs(&img, &["-t", "ext4", "-b", "1024"], "64M");
    let lm = LoopMount::new(&img, &tmp.path("r-mnt")).unwrap();
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
    drop(lm);
    let before = kernel_manifest(&tmp, &img);
    let out = offline(&["-r", "--path", "/tree"], &img);
    let gaps = out
        .lines()
        .find_map(|l| l.strip_prefix(" Gaps between files in read order:"))
        .unwrap_or_else(|| panic!("{out}"));
    let nums: Vec<u64> = gaps
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    println!("{out}");
    assert!(nums.len() >= 2 && nums[0] > 0 && nums[1] == 0, "{out}");
    assert!(out.contains("Files placed:\t\t\t200 of 200"), "{out}");
    e2fsck_clean(&img);
    assert_eq!(kernel_manifest(&tmp, &img), before);
    // In order now: a second run moves nothing.
    let again = offline(&["-r", "--path", "/tree"], &img);
    assert!(again.contains("Already in read order"), "{again}");
    // --order name lays them out again, by name.
    let named = offline(&["-r", "--order", "name", "--path", "/tree"], &img);
    assert!(named.contains("Files placed:\t\t\t200 of 200"), "{named}");
    e2fsck_clean(&img);
    assert_eq!(kernel_manifest(&tmp, &img), before);
}

/// The free-space figures `-f` prints: (largest before, largest after,
/// free after), in KB.
fn free_figures(out: &str) -> (u64, u64, u64) {
    let kb = |prefix: &str| -> (u64, u64) {
        let l = out
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{out}"));
        let n: Vec<u64> = l
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|s| s.parse().ok())
            .collect();
        (n[0], n[1])
    };
    let (b, _) = kb(" Largest free extent before:");
    let (a, free) = kb(" Largest free extent after:");
    (b, a, free)
}

#[test]
fn free_space_gathers_into_one_run() {
    if !can_run("free_space_gathers_into_one_run") {
        return;
    }
    let tmp = TempDir::new("defrag-off-f");
    let img = tmp.path("f.img");
    mkfs(&img, &["-t", "ext4"], "256M");
    let lm = LoopMount::new(&img, &tmp.path("f-mnt")).unwrap();
    let mut rng = Rng(17);
    // Fill with files of 8 KiB to 1 MiB, then delete a fifth of them.
    let mut files = Vec::new();
    for k in 0.. {
        let n = 8192usize << (rng.next() % 8);
        let p = lm.dir.join(format!("f{k:05}"));
        let data = rng.bytes(n);
        if std::fs::write(&p, &data).is_err() {
            let _ = std::fs::remove_file(&p);
            break;
        }
        files.push(p);
    }
    rustix::fs::sync();
    for p in &files {
        if rng.next() % 5 == 0 {
            std::fs::remove_file(p).unwrap();
        }
    }
    rustix::fs::sync();
    drop(lm);
    let before = kernel_manifest(&tmp, &img);
    let out = offline(&["-f"], &img);
    println!("{out}");
    let (b, a, free) = free_figures(&out);
    assert!(out.contains("HISTOGRAM OF FREE EXTENT SIZES:"), "{out}");
    assert!(a * 10 >= free * 9, "largest {a} KB of {free} KB free");
    assert!(a > b);
    e2fsck_clean(&img);
    assert_eq!(kernel_manifest(&tmp, &img), before);
    // Gathered: a second run has nothing to do.
    let again = offline(&["-f"], &img);
    let (_, a2, _) = free_figures(&again);
    assert!(a2 >= a, "{again}");
}

/// path -> (size, FNV-1a) of every regular file, through our read path.
fn library_manifest(dev: Arc<dyn ext4r::device::BlockDevice>) -> BTreeMap<String, (u64, u64)> {
    let fs = ext4r::fs::Filesystem::open(dev).unwrap();
    let mut out = BTreeMap::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let path = if dir.is_empty() { "/" } else { &dir };
        for e in fs.read_dir_path(path).unwrap() {
            if e.is_dot() {
                continue;
            }
            let p = format!("{dir}/{}", e.name_lossy());
            let info = fs.inode(e.ino).unwrap();
            match e.kind {
                ext4r::fs::FileKind::Directory if p != "/lost+found" => stack.push(p),
                ext4r::fs::FileKind::Regular => {
                    let mut data = Vec::new();
                    fs.open_file(&info).unwrap().read_to_end(&mut data).unwrap();
                    out.insert(p, (data.len() as u64, fnv(&data)));
                }
                _ => {}
            }
        }
    }
    out
}

/// An offline run on the recording device: defragmentation, `-r` of the
/// whole tree, then `-f`.
fn offline_workload(dev: Arc<dyn ext4r::device::BlockDevice>) {
    use ext4r_defrag::offline::{compact::compact, mover, relevant, OfflineFs, OfflineOptions};
    use ext4r_defrag::online::{run as run_plan, RunOptions};
    use ext4r_defrag::source::Source;
    let opts = OfflineOptions {
        now: Some((1_700_000_000, 0)),
    };
    let mut fs = OfflineFs::open(dev, Path::new("recorded"), opts).unwrap();
    let src = fs.source().unwrap();
    let plan = mover::plan(&src, false).unwrap();
    let rule = src.best_rule();
    let mut m = mover::OfflineMover::new(&mut fs, rule, false).unwrap();
    let s = run_plan(&plan, &mut m, &RunOptions::default(), &mut |_, _, _, _| {});
    assert_eq!(s.failed, 0);
    assert!(s.improved > 0, "{s:?}");
    let src = fs.source().unwrap();
    let r = relevant::place(&mut fs, &src, None, &mut |_, _, _, _| {}).unwrap();
    assert!(r.placement.placed > 0, "{r:?}");
    let src = fs.source().unwrap();
    let r = compact(&mut fs, &src, None, &mut |_, _, _, _| {}).unwrap();
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    drop(src);
    fs.close().unwrap();
}

/// Records the offline workload on a kernel-written image, then cuts the
/// power at evenly spaced writes (`EXT4R_DEFRAG_CUTS`, default `cuts`) and
/// at each of the last ones, as issued and with the unflushed writes
/// dropped and one torn; each cut is recovered by our fsck, by e2fsck and
/// by a kernel mount, then must be e2fsck-clean with every file as before.
fn power_cuts(tag: &str, args: &[&str], size: &str, cuts: usize) {
    use ext4r::device::{apply_cut, Cut, MemDevice, Recorder};
    let tmp = TempDir::new(&format!("defrag-off-cut-{tag}"));
    let img = fragmented(&tmp, "c", args, size);
    let bytes = std::fs::read(&img).unwrap();
    let base = MemDevice::from_bytes(&bytes);
    let want = library_manifest(Arc::new(base.snapshot()));
    let rec = Arc::new(Recorder::new(base.snapshot()));
    offline_workload(rec.clone());
    let log = rec.log();
    let total = rec.writes();
    assert_eq!(library_manifest(rec.clone()), want, "the run itself");
    let max: usize = std::env::var("EXT4R_DEFRAG_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cuts)
        .max(1);
    let mut points: Vec<usize> = (0..max.min(total + 1))
        .map(|i| i * total / max.min(total + 1).max(1))
        .collect();
    points.extend(total.saturating_sub(4)..=total);
    points.sort_unstable();
    points.dedup();
    let ext4r_bin = env!("CARGO_BIN_EXE_ext4r");
    let cut_img = tmp.path("cut.img");
    let mut failures = Vec::new();
    let mut recoveries = 0;
    for &n in &points {
        for variant in 0..2u64 {
            for who in ["ours", "e2fsck", "kernel"] {
                let disk = base.snapshot();
                let cut = Cut {
                    writes: n,
                    drop_unflushed: variant == 1,
                    tear: variant == 1,
                    seed: (n as u64) << 8 ^ variant,
                };
                apply_cut(&disk, &log, cut).unwrap();
                disk.save(&cut_img).unwrap();
                recoveries += 1;
                let recovered = match who {
                    "ours" => run(Command::new(ext4r_bin).args(["fsck", "-fy"]).arg(&cut_img))
                        .status
                        .code()
                        .is_some_and(|c| c <= 2),
                    "e2fsck" => run(Command::new("e2fsck").arg("-fy").arg(&cut_img))
                        .status
                        .code()
                        .is_some_and(|c| c <= 2),
                    _ => LoopMount::new(&cut_img, &tmp.path("cut-mnt")).is_ok(),
                };
                let verdict = if !recovered {
                    Err(format!("{who} could not recover it"))
                } else {
                    let (rc, out) = common::e2fsck_fn(&cut_img);
                    if rc != 0 {
                        Err(format!(
                            "e2fsck -fn exit {rc}: {}",
                            out.lines().nth(1).unwrap_or("")
                        ))
                    } else {
                        let dev =
                            ext4r::device::FileDevice::open(&cut_img, Default::default()).unwrap();
                        let now = library_manifest(Arc::new(dev));
                        if now == want {
                            Ok(())
                        } else {
                            let lost: Vec<_> = want
                                .iter()
                                .filter(|(p, v)| now.get(*p) != Some(*v))
                                .map(|(p, _)| p.clone())
                                .take(4)
                                .collect();
                            Err(format!("files changed: {lost:?}"))
                        }
                    }
                };
                if let Err(e) = verdict {
                    failures.push(format!("cut {n}/{total} variant {variant} by {who}: {e}"));
                }
            }
        }
    }
    println!(
        "{tag}: {total} writes, {} cut points, {recoveries} recoveries, {} failures",
        points.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn power_cut_at_any_write_leaves_every_file_intact() {
    if !can_run("power_cut_at_any_write_leaves_every_file_intact") {
        return;
    }
    power_cuts("ext4-1k", &["-t", "ext4", "-b", "1024"], "32M", 16);
    power_cuts("ext3", &["-t", "ext3", "-b", "1024"], "32M", 8);
    power_cuts(
        "bigalloc",
        &["-t", "ext4", "-O", "bigalloc", "-C", "16384"],
        "64M",
        8,
    );
}

#[test]
fn refusals_are_clear_and_keep_data() {
    if !can_run("refusals_are_clear_and_keep_data") {
        return;
    }
    let tmp = TempDir::new("defrag-off-refuse");
    let img = fragmented(&tmp, "x", &["-t", "ext4", "-b", "1024"], "32M");
    let mut lm = LoopMount::new(&img, &tmp.path("x-mnt")).unwrap();
    let before = manifest(&lm.dir);
    // -f, --to-extents and --path are offline only.
    for (flag, what) in [("-f", "-f (free-space"), ("--to-extents", "--to-extents")] {
        let (rc, _, err) = text(ours().arg(flag).arg(&lm.dir));
        assert_eq!(rc, 1, "{flag}");
        assert!(
            err.contains(what) && err.contains("unmount it first"),
            "{err}"
        );
    }
    let (rc, _, err) = text(ours().args(["--path", "/d0"]).arg(&lm.dir));
    assert_eq!(rc, 1);
    assert!(err.contains("--path"), "{err}");
    // An image kept as a file on a mounted ext4 is a file to e4defrag; an
    // offline-only flag on it says how to name the filesystem inside.
    let inner = lm.dir.join("inner.img");
    mkfs(&inner, &["-t", "ext4"], "1M");
    let inner_bytes = std::fs::read(&inner).unwrap();
    let (rc, _, err) = text(ours().arg("-f").arg(&inner));
    assert_eq!(rc, 1);
    assert!(
        err.contains("is a file on the ext4 mounted at") && err.contains("add --image"),
        "{err}"
    );
    assert_eq!(std::fs::read(&inner).unwrap(), inner_bytes);
    std::fs::remove_file(&inner).unwrap();
    // The library refuses a mounted image outright.
    let e = ext4r_defrag::offline::OfflineFs::open_path(&img, Default::default()).unwrap_err();
    assert!(e.to_string().contains("is mounted on"), "{e}");
    assert_eq!(manifest(&lm.dir), before);
    lm.umount().unwrap();
    drop(lm);
    e2fsck_clean(&img);
    // A full filesystem: nothing can move, nothing is lost.
    let lm = LoopMount::new(&img, &tmp.path("x-mnt")).unwrap();
    let mut filler = std::fs::File::create(lm.dir.join("filler")).unwrap();
    let chunk = vec![0x5a; 1 << 16];
    while filler.write_all(&chunk).is_ok() {}
    while filler.write_all(&chunk[..1024]).is_ok() {}
    drop(filler);
    rustix::fs::sync();
    drop(lm);
    let before = kernel_manifest(&tmp, &img);
    let (rc, out, err) = text(ours().arg(&img));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(
        out.contains("not enough free space") || out.contains("no improvement possible"),
        "{out}"
    );
    e2fsck_clean(&img);
    assert_eq!(kernel_manifest(&tmp, &img), before);
    // Not an ext4 image.
    let plain = tmp.path("plain.img");
    std::fs::write(&plain, vec![7u8; 1 << 20]).unwrap();
    let (rc, _, err) = text(ours().arg("--image").arg(&plain));
    assert_eq!(rc, 1);
    assert!(
        err.contains("plain.img: superblock: bad magic") && !err.contains("superblock: superblock"),
        "{err}"
    );
    assert_eq!(std::fs::read(&plain).unwrap(), vec![7u8; 1 << 20]);
}
