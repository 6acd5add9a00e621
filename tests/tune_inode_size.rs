//! `ext4r tune -I 256` (larger inodes) against tune2fs 1.47 and the kernel.
//!
//! For each case an image with 128-byte inodes is made (fresh, or filled
//! by the kernel: directories, small and fragmented big files with extent
//! trees or block maps, xattr blocks, fast and slow symlinks, hard links;
//! the dense ones so full that no group has room for its new table and
//! files must move), copied, and changed by tune2fs and by us. Ours must
//! succeed, leave e2fsck -fn clean, and (when filled) show every file as
//! before through a kernel mount. Against tune2fs, `dumpe2fs -h` must be
//! equal (write time, checksums and lifetime writes masked), except where
//! tune2fs does not get there:
//!
//! - flex_bg: tune2fs refuses ("Changing the inode size not supported for
//!   filesystems with the flex_bg feature enabled"); we place the tables
//!   elsewhere;
//! - group checksums (uninit_bg, metadata_csum) without flex_bg: tune2fs
//!   1.47 dies in its checksum pass ("bad i_extra_isize") and leaves an
//!   image e2fsck rejects;
//! - ext4 with extents, filled: tune2fs moves single blocks out of
//!   extents, which splits them and can add extent-tree blocks; we move
//!   whole extents. Its free count is then lower by those blocks, all else
//!   equal.
//! - dense ext4, when the kernel happened to leave an extent in a new
//!   table's place with no free run of its length anywhere: we refuse
//!   (whole extents only, see `tune/isize_move.rs`), leaving the image
//!   as it was, where tune2fs splits the extent. At most one case may.
//!
//! The refusals (shrinking, same size, too large, not a power of two, not
//! freshly checked, not enough space) must match tune2fs's exit codes and
//! messages and leave the image untouched.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

/// What tune2fs 1.47 does with the case.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Theirs {
    /// Succeeds; dumpe2fs -h must be equal.
    Equal,
    /// Succeeds, possibly with extent trees grown (see the module doc).
    EqualOrGrown,
    /// Refuses flex_bg.
    RefusesFlexBg,
    /// Fails midway (group checksums).
    Fails,
}

/// (name, size, mke2fs arguments, fill: None fresh, Some(percent), tune2fs).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    Option<u32>,
    Theirs,
);

const CASES: &[Case] = &[
    ("ext2-1k", "64M", "-t ext2 -I 128", None, Theirs::Equal),
    (
        "ext2-4k",
        "128M",
        "-t ext2 -b 4096 -I 128",
        None,
        Theirs::Equal,
    ),
    ("ext3-1k", "64M", "-t ext3 -I 128", None, Theirs::Equal),
    (
        "ext3-4k",
        "128M",
        "-t ext3 -b 4096 -I 128",
        None,
        Theirs::Equal,
    ),
    (
        "ext4-noflex-nocsum",
        "64M",
        "-t ext4 -O ^flex_bg,^metadata_csum -I 128",
        None,
        Theirs::Equal,
    ),
    (
        "ext4-noflex",
        "64M",
        "-t ext4 -O ^flex_bg -I 128",
        None,
        Theirs::Fails,
    ),
    (
        "ext4-noflex-gdtcsum",
        "64M",
        "-t ext4 -O ^flex_bg,^metadata_csum,uninit_bg -I 128",
        None,
        Theirs::Fails,
    ),
    (
        "ext4-flex",
        "64M",
        "-t ext4 -I 128",
        None,
        Theirs::RefusesFlexBg,
    ),
    (
        "ext4-metabg",
        "64M",
        "-t ext4 -O meta_bg,^resize_inode -I 128",
        None,
        Theirs::RefusesFlexBg,
    ),
    (
        "ext2-filled",
        "64M",
        "-t ext2 -I 128",
        Some(60),
        Theirs::Equal,
    ),
    (
        "ext3-filled",
        "64M",
        "-t ext3 -I 128",
        Some(60),
        Theirs::Equal,
    ),
    (
        "ext2-dense",
        "64M",
        "-t ext2 -I 128 -m 0",
        Some(97),
        Theirs::Equal,
    ),
    (
        "ext3-dense",
        "64M",
        "-t ext3 -I 128 -m 0",
        Some(97),
        Theirs::Equal,
    ),
    (
        "ext4-noflex-nocsum-filled",
        "64M",
        "-t ext4 -O ^flex_bg,^metadata_csum -I 128",
        Some(60),
        Theirs::EqualOrGrown,
    ),
    (
        "ext4-noflex-nocsum-dense",
        "64M",
        "-t ext4 -O ^flex_bg,^metadata_csum -I 128 -m 0",
        Some(97),
        Theirs::EqualOrGrown,
    ),
    (
        "ext4-noflex-dense",
        "64M",
        "-t ext4 -O ^flex_bg -I 128 -m 0",
        Some(97),
        Theirs::EqualOrGrown,
    ),
    // flex_bg, filled by the kernel: what tune2fs refuses.
    (
        "ext4-flex-filled",
        "128M",
        "-t ext4 -I 128",
        Some(70),
        Theirs::RefusesFlexBg,
    ),
    (
        "ext4-flex-1k-dense",
        "64M",
        "-t ext4 -b 1024 -I 128 -m 0",
        Some(97),
        Theirs::RefusesFlexBg,
    ),
    (
        "ext4-flex-4k-dense",
        "128M",
        "-t ext4 -b 4096 -I 128 -m 0",
        Some(97),
        Theirs::RefusesFlexBg,
    ),
];

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed ^ (i >> 12) as u8)
        })
        .collect()
}

fn sync() {
    rustix::fs::sync();
}

/// Used share of the filesystem mounted at `root`, in percent.
fn used_pct(root: &Path) -> u64 {
    let s = rustix::fs::statvfs(root).unwrap();
    100 - s.f_bfree * 100 / s.f_blocks
}

/// Files of every kind, a big file made of many extents (written into the
/// holes of deleted small files, so that it needs an extent tree or
/// indirect blocks), then filler files up to `fill` percent with every
/// seventh removed again, and a last big file into those holes.
fn workload(root: &Path, fill: u32) {
    for i in 0..300usize {
        let d = root.join(format!("d/s{}", i % 17));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join(format!("f{i}")), pattern(i * 97, i as u8)).unwrap();
    }
    fs::create_dir(root.join("frag")).unwrap();
    for i in 0..400 {
        fs::write(root.join(format!("frag/x{i}")), pattern(8192, i as u8)).unwrap();
    }
    sync();
    for i in (0..400).step_by(2) {
        fs::remove_file(root.join(format!("frag/x{i}"))).unwrap();
    }
    sync();
    fs::write(root.join("big1"), pattern(3 << 20, 1)).unwrap();
    sync();
    std::os::unix::fs::symlink("d/s1/f1", root.join("fastlink")).unwrap();
    let long = format!("{}/target", "l".repeat(120));
    std::os::unix::fs::symlink(&long, root.join("slowlink")).unwrap();
    fs::hard_link(root.join("big1"), root.join("hard1")).unwrap();
    fs::hard_link(root.join("d/s2/f2"), root.join("d/s3/hard2")).unwrap();
    let x = rustix::fs::XattrFlags::empty();
    rustix::fs::setxattr(root.join("big1"), "user.a", b"hello", x).unwrap();
    rustix::fs::setxattr(root.join("d/s1/f1"), "user.big", &pattern(700, 9), x).unwrap();
    // The same xattr on two files: one shared xattr block.
    rustix::fs::setxattr(root.join("d/s4/f4"), "user.s", b"shared", x).unwrap();
    rustix::fs::setxattr(root.join("d/s5/f5"), "user.s", b"shared", x).unwrap();
    rustix::fs::setxattr(root.join("d"), "user.dir", b"on a directory", x).unwrap();
    fs::create_dir(root.join("fill")).unwrap();
    let mut n = 0;
    while used_pct(root) < u64::from(fill) {
        if fs::write(root.join(format!("fill/{n}")), pattern(65536, n as u8)).is_err() {
            let _ = fs::remove_file(root.join(format!("fill/{n}")));
            break;
        }
        n += 1;
        if n % 32 == 0 {
            sync();
        }
    }
    for i in (0..n).step_by(7) {
        fs::remove_file(root.join(format!("fill/{i}"))).unwrap();
    }
    sync();
    let _ = fs::write(root.join("big2"), pattern(2 << 20, 2));
    sync();
}

/// `dumpe2fs -h`, with what may differ masked, as key -> value.
fn dumpe2fs_h(img: &Path) -> BTreeMap<String, String> {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    let masked = [
        "Last write time",
        "Checksum",
        "Journal checksum",
        "Lifetime writes",
    ];
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| !masked.contains(&k.trim()))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn field(h: &BTreeMap<String, String>, k: &str) -> u64 {
    h.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Whether some group's new table has no free run to go to (so that
/// files must move): per group without flex_bg, anywhere with it.
fn needs_moves(img: &Path, new_isize: u64) -> bool {
    let h = dumpe2fs_h(img);
    let bs = field(&h, "Block size");
    let need = (field(&h, "Inodes per group") * new_isize).div_ceil(bs);
    let flex = h.contains_key("Flex block group size");
    let o = run(Command::new("dumpe2fs").arg(img));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut runs = Vec::new();
    for l in text.lines() {
        let Some(list) = l.trim_start().strip_prefix("Free blocks: ") else {
            continue;
        };
        let best = list
            .split(',')
            .filter_map(|r| {
                let r = r.trim();
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                Some(b.parse::<u64>().ok()? - a.parse::<u64>().ok()? + 1)
            })
            .max()
            .unwrap_or(0);
        runs.push(best);
    }
    if flex {
        runs.iter().all(|&r| r < need)
    } else {
        runs.iter().any(|&r| r < need)
    }
}

#[derive(Default)]
struct Counts {
    cases: usize,
    clean: usize,
    equal: usize,
    grown: usize,
    refused_flex: usize,
    tune2fs_fails: usize,
    remounts: usize,
    moved: usize,
    refused_room: usize,
}

fn run_case(dir: &TempDir, case: &Case, c: &mut Counts) -> Result<(), String> {
    let (name, size, args, fill, theirs) = *case;
    let base = dir.path("base.img");
    let _ = fs::remove_file(&base);
    let t = run(Command::new("truncate").args(["-s", size]).arg(&base));
    assert!(t.status.success());
    let o = run(Command::new("mke2fs")
        .env("MKE2FS_SKIP_CHECK_MSG", "1")
        .args(["-q", "-F"])
        .args(args.split_whitespace())
        .arg(&base));
    if !o.status.success() {
        return Err(format!("mke2fs: {o:?}"));
    }
    let mnt = dir.path("mnt");
    let mut before = None;
    if let Some(pct) = fill {
        let mut lm = LoopMount::new(&base, &mnt)?;
        workload(&mnt, pct);
        before = Some(manifest(&mnt));
        lm.umount()?;
        drop(lm);
        // The kernel leaves s_lastcheck before s_mtime: check it, as a
        // user must before tune2fs -I.
        let o = run(Command::new("e2fsck").args(["-fy"]).arg(&base));
        if o.status.code() != Some(0) {
            return Err(format!("e2fsck -fy of the filled image: {o:?}"));
        }
        if needs_moves(&base, 256) {
            c.moved += 1;
        }
    }
    let (ti, oi) = (dir.path("t.img"), dir.path("o.img"));
    for p in [&ti, &oi] {
        let o = run(Command::new("cp").arg("--sparse=always").arg(&base).arg(p));
        assert!(o.status.success());
    }
    let (ro, outo) = tune_at(ours_tune().args(["-I", "256"]), &oi);
    let (rt, outt) = tune_at(Command::new("tune2fs").args(["-I", "256"]), &ti);
    c.cases += 1;
    if ro == 1 && outo.contains("Not enough space") && theirs == Theirs::EqualOrGrown {
        // We move whole extents: one that reaches into a new table's place
        // needs a free run of its own length, which a fragmented, nearly
        // full filesystem may not have (tune2fs moves single blocks and
        // splits the extent). The kernel's allocation decides whether that
        // happens here. The refusal must leave the image as it was.
        if fs::read(&oi).unwrap() != fs::read(&base).unwrap() {
            return Err("ours refused for space but changed the image".into());
        }
        println!("  {name}: refused for space (an extent has no free run of its length); tune2fs exit {rt}");
        c.refused_room += 1;
        return Ok(());
    }
    if ro != 0 || !outo.contains("Setting inode size 256") {
        return Err(format!(
            "ours exit {ro}:\n{outo}\ntune2fs exit {rt}:\n{outt}"
        ));
    }
    let (fc, fout) = e2fsck_fn(&oi);
    if fc != 0 {
        return Err(format!("e2fsck -fn of ours: {fc}\n{fout}"));
    }
    c.clean += 1;
    let (ho, ht) = (dumpe2fs_h(&oi), dumpe2fs_h(&ti));
    if field(&ho, "Inode size") != 256 {
        return Err(format!("inode size {:?}", ho.get("Inode size")));
    }
    match theirs {
        Theirs::Equal | Theirs::EqualOrGrown if rt == 0 && ho == ht => c.equal += 1,
        Theirs::EqualOrGrown if rt == 0 => {
            let mut a = ho.clone();
            let mut b = ht.clone();
            let (fo, ft) = (field(&a, "Free blocks"), field(&b, "Free blocks"));
            a.remove("Free blocks");
            b.remove("Free blocks");
            if a != b || ft >= fo {
                return Err(format!(
                    "{name}: dumpe2fs -h differs: ours {ho:?}\ntheirs {ht:?}"
                ));
            }
            println!("  {name}: tune2fs grew extent trees by {} blocks", fo - ft);
            c.grown += 1;
        }
        Theirs::RefusesFlexBg if rt == 1 && outt.contains("flex_bg") => c.refused_flex += 1,
        Theirs::Fails if rt == 1 && e2fsck_fn(&ti).0 != 0 => c.tune2fs_fails += 1,
        _ => {
            return Err(format!(
                "{name}: tune2fs exit {rt}, expected {theirs:?}:\n{outt}\n{}",
                first_diffs(&format!("{ho:#?}"), &format!("{ht:#?}"), 5)
            ))
        }
    }
    if let Some(before) = before {
        let mut lm = LoopMount::new(&oi, &mnt)?;
        let after = manifest(&mnt);
        lm.umount()?;
        if before != after {
            let diff: Vec<_> = before
                .iter()
                .filter(|(k, v)| after.get(*k) != Some(v))
                .take(5)
                .collect();
            return Err(format!("files changed: {diff:?}"));
        }
        c.remounts += 1;
    }
    Ok(())
}

#[test]
fn inode_size_against_tune2fs_and_the_kernel() {
    if !is_root() || !have("losetup") || !have("e2fsck") || !have("tune2fs") {
        println!("skipped: needs root, losetup and e2fsprogs");
        return;
    }
    let dir = TempDir::new("tune-isize");
    let mut c = Counts::default();
    let mut failures = Vec::new();
    for case in CASES {
        match run_case(&dir, case, &mut c) {
            Ok(()) => println!("ok: {} ({})", case.0, case.2),
            Err(e) => {
                println!("FAILED: {}: {e}", case.0);
                failures.push(case.0);
            }
        }
    }
    println!(
        "tune -I 256: {}/{} cases e2fsck-clean; vs tune2fs: {} dumpe2fs -h equal, {} equal \
         but for tune2fs's extent-tree growth, {} refused by tune2fs (flex_bg), {} where \
         tune2fs fails (group checksums); {} remounts with every file intact, {} cases \
         where files had to move; {} refused for lack of a free run for a whole extent",
        c.clean,
        c.cases,
        c.equal,
        c.grown,
        c.refused_flex,
        c.tune2fs_fails,
        c.remounts,
        c.moved,
        c.refused_room
    );
    // At most the one case whose kernel-made layout varies from run to run.
    assert!(
        c.refused_room <= 1,
        "refused for space in {} cases",
        c.refused_room
    );
    assert!(failures.is_empty(), "failed: {failures:?}");
}

/// Makes a fresh image.
fn fresh(dir: &TempDir, name: &str, size: &str, args: &str) -> std::path::PathBuf {
    let img = dir.path(name);
    let _ = fs::remove_file(&img);
    let t = run(Command::new("truncate").args(["-s", size]).arg(&img));
    assert!(t.status.success());
    let o = run(Command::new("mke2fs")
        .env("MKE2FS_SKIP_CHECK_MSG", "1")
        .args(["-q", "-F"])
        .args(args.split_whitespace())
        .arg(&img));
    assert!(o.status.success(), "{o:?}");
    img
}

/// Runs tune2fs and ours with `opt` on copies of `img`: both must exit 1,
/// say `says`, and leave their copy as it was.
fn both_refuse(dir: &TempDir, img: &Path, opt: &[&str], says: &str) -> Result<(), String> {
    let (ti, oi) = (dir.path("rt.img"), dir.path("ro.img"));
    for p in [&ti, &oi] {
        let o = run(Command::new("cp").arg("--sparse=always").arg(img).arg(p));
        assert!(o.status.success());
    }
    let orig = fs::read(img).unwrap();
    let (rt, outt) = tune_at(Command::new("tune2fs").args(opt), &ti);
    let (ro, outo) = tune_at(ours_tune().args(opt), &oi);
    if rt != 1 || ro != 1 {
        return Err(format!(
            "{opt:?}: exit tune2fs {rt}, ours {ro}\n{outt}\n{outo}"
        ));
    }
    if !outt.contains(says) || !outo.contains(says) {
        return Err(format!(
            "{opt:?}: expected {says:?}:\n tune2fs: {outt}\n ours: {outo}"
        ));
    }
    if fs::read(&oi).unwrap() != orig {
        return Err(format!("{opt:?}: ours wrote to the image"));
    }
    Ok(())
}

#[test]
fn inode_size_refusals() {
    if !have("mke2fs") || !have("tune2fs") {
        println!("skipped: needs e2fsprogs");
        return;
    }
    let dir = TempDir::new("tune-isize-refuse");
    let mut failures = Vec::new();
    let mut ok = 0;
    let big = fresh(&dir, "big.img", "32M", "-t ext4 -b 4096 -I 256");
    let small = fresh(&dir, "small.img", "32M", "-t ext2 -I 128");
    let checks: Vec<(&Path, &[&str], &str)> = vec![
        (
            &big,
            &["-I", "128"],
            "Shrinking inode size is not supported",
        ),
        (&big, &["-I", "256"], "The inode size is already 256"),
        (&big, &["-I", "8192"], "Invalid inode size 8192 (max 4096)"),
        (
            &small,
            &["-I", "300"],
            "Inode size must be a power of two- 300",
        ),
        (&small, &["-I", "12x"], "bad inode size - 12x"),
        (
            &small,
            &["-I", "0"],
            "Shrinking inode size is not supported",
        ),
    ];
    for (img, opt, says) in checks {
        match both_refuse(&dir, img, opt, says) {
            Ok(()) => ok += 1,
            Err(e) => failures.push(e),
        }
    }
    // Not freshly checked: the error flag, or mounted since the check.
    let o = run(Command::new("debugfs")
        .args(["-w", "-R", "ssv state 3"])
        .arg(&small));
    assert!(o.status.success());
    match both_refuse(
        &dir,
        &small,
        &["-I", "256"],
        "requires a freshly checked filesystem",
    ) {
        Ok(()) => ok += 1,
        Err(e) => failures.push(e),
    }
    let o = run(Command::new("debugfs")
        .args(["-w", "-R", "ssv state 1"])
        .arg(&small));
    assert!(o.status.success());
    for set in ["ssv mtime 20230101", "ssv lastcheck 20220101"] {
        let o = run(Command::new("debugfs").args(["-w", "-R", set]).arg(&small));
        assert!(o.status.success());
    }
    match both_refuse(
        &dir,
        &small,
        &["-I", "256"],
        "requires a freshly checked filesystem",
    ) {
        Ok(()) => ok += 1,
        Err(e) => failures.push(e),
    }
    // Not enough space: filled by the kernel until nothing is left.
    if is_root() && have("losetup") {
        let full = fresh(&dir, "full.img", "32M", "-t ext2 -I 128 -m 0");
        let mnt = dir.path("mnt");
        let mut lm = LoopMount::new(&full, &mnt).unwrap();
        let mut n = 0;
        while fs::write(mnt.join(format!("f{n}")), pattern(65536, n as u8)).is_ok() {
            n += 1;
        }
        lm.umount().unwrap();
        drop(lm);
        let o = run(Command::new("e2fsck").args(["-fy"]).arg(&full));
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        match both_refuse(
            &dir,
            &full,
            &["-I", "256"],
            "Not enough space to increase inode size",
        ) {
            Ok(()) => ok += 1,
            Err(e) => failures.push(e),
        }
    }
    println!("tune -I refusals: {ok} as tune2fs's (exit 1, same message, nothing written)");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Builds a kernel-filled image dense enough that files move.
fn dense_image(dir: &TempDir, name: &str, args: &str) -> Result<std::path::PathBuf, String> {
    let img = fresh(dir, name, "64M", args);
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(&img, &mnt)?;
    workload(&mnt, 97);
    lm.umount()?;
    drop(lm);
    let o = run(Command::new("e2fsck").args(["-fy"]).arg(&img));
    if o.status.code() != Some(0) {
        return Err(format!("e2fsck -fy: {o:?}"));
    }
    Ok(img)
}

/// `ext4r tune -I 256` on a device that dies after `cut` writes (never,
/// with `None`): the surviving contents and the write log.
fn tune_cut(
    bytes: &[u8],
    cut: Option<u64>,
) -> (ext4r::device::MemDevice, Vec<ext4r::device::WriteRecord>) {
    use ext4r::device::{BlockDevice, FaultDevice, MemDevice};
    use std::sync::Arc;
    let fault = Arc::new(FaultDevice::new(MemDevice::from_bytes(bytes)));
    if let Some(n) = cut {
        fault.fail_after(n);
    }
    let dev: Arc<dyn BlockDevice> = fault.clone();
    let mut opts = ext4r::tune::TuneOptions::default();
    opts.inode_size = Some(256);
    let mut env = ext4r::tune::TuneEnv::new("img", 1_700_000_500);
    let r = ext4r::tune::tune(dev, &opts, &mut env);
    if cut.is_none() {
        assert_eq!(r.as_ref().unwrap().status, 0);
    }
    let log = fault.log();
    drop(r);
    let fault = Arc::try_unwrap(fault).unwrap();
    (fault.into_inner(), log)
}

/// A power cut after any write leaves an image e2fsck repairs: `-fy`
/// fixes bitmaps and free counts only, then `-fn` is clean. (The primary superblock and descriptors go in one
/// write; were they apart, a cut between them would need `e2fsck -b`, and
/// the test says how often that was needed.)
#[test]
fn inode_size_survives_a_cut_at_any_write() {
    if !is_root() || !have("losetup") || !have("e2fsck") {
        println!("skipped: needs root, losetup and e2fsprogs");
        return;
    }
    let dir = TempDir::new("tune-isize-cut");
    let mut failures = Vec::new();
    let (mut cuts, mut repaired, mut by_backup) = (0, 0, 0);
    let mut other_fixes = std::collections::BTreeSet::new();
    for (name, args, backup) in [
        ("ext2", "-t ext2 -I 128 -m 0", "8193"),
        ("ext4-flex", "-t ext4 -b 1024 -I 128 -m 0", "8193"),
    ] {
        let img = dense_image(&dir, &format!("{name}.img"), args).unwrap();
        let bytes = fs::read(&img).unwrap();
        let (_, log) = tune_cut(&bytes, None);
        let writes: Vec<_> = log
            .iter()
            .filter(|w| w.kind != ext4r::device::WriteKind::Flush)
            .collect();
        let total = writes.len() as u64;
        // The commit: the write of the primary superblock (with the
        // primary descriptors).
        let commit = writes.iter().rposition(|w| w.offset == 1024).unwrap() as u64;
        // Every write from 20 before the commit on, a sample before.
        let step = (commit / 40).max(1) as usize;
        let mut points: Vec<u64> = (0..commit.saturating_sub(20)).step_by(step).collect();
        points.extend(commit.saturating_sub(20)..total);
        for n in points {
            cuts += 1;
            let (mem, _) = tune_cut(&bytes, Some(n));
            let cut_img = dir.path("cut.img");
            mem.save(&cut_img).unwrap();
            let y = run(Command::new("e2fsck").args(["-fy"]).arg(&cut_img));
            let (fc, fout) = e2fsck_fn(&cut_img);
            // Only what a cut before the commit leaves: bitmaps and counts.
            let ytext = String::from_utf8_lossy(&y.stdout).into_owned();
            let lines: Vec<&str> = ytext.lines().filter(|l| !l.trim().is_empty()).collect();
            for (i, l) in lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.ends_with("? yes"))
            {
                // A prompt alone on its line is about the line before.
                let what = if l.split_whitespace().count() <= 2 && i > 0 {
                    lines[i - 1]
                } else {
                    l
                };
                let benign = [
                    "Block bitmap differences",
                    "Free blocks count wrong",
                    "Free inodes count wrong",
                    "Padding at end of",
                ]
                .iter()
                .any(|b| what.trim_start().starts_with(b));
                if !benign {
                    other_fixes.insert(what.to_string());
                }
            }
            if y.status.code().is_some_and(|c| c <= 1) && fc == 0 {
                repaired += 1;
                continue;
            }
            mem.save(&cut_img).unwrap();
            let b = run(Command::new("e2fsck")
                .args(["-fy", "-b", backup, "-B", "1024"])
                .arg(&cut_img));
            let (fc2, _) = e2fsck_fn(&cut_img);
            if b.status.code().is_some_and(|c| c <= 1) && fc2 == 0 {
                by_backup += 1;
            }
            failures.push(format!(
                "{name}: cut after {n} of {total} writes (commit at {commit}): \
                 e2fsck -fn {fc}\n{}",
                fout.lines().take(8).collect::<Vec<_>>().join("\n")
            ));
        }
        println!("{name}: {total} writes, the commit is write {commit}");
    }
    println!(
        "tune -I cut tests: {cuts} cut points, {repaired} repaired by e2fsck -fy, \
         {by_backup} not, but repaired from the first backup (e2fsck -b)"
    );
    println!("e2fsck fixes other than bitmaps and free counts: {other_fixes:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        other_fixes.is_empty(),
        "a cut must cost bitmaps and counts only"
    );
}
