//! `cargo xtask zoo`: clean images across the mke2fs feature matrix, each
//! filled through a kernel loop mount with a seeded workload, then judged:
//! wherever `e2fsck -fn` exits 0, `ext4r fsck -fn` and `ext4r fsck -p` (on
//! a copy) must exit 0 too. A live snapshot of each mounted image (the
//! backing file copied after a write burst, with a file held open and
//! unlinked) stands for a crash: the kernel replays its journal and orphan
//! list, and our -fn must then be clean. A second copy of each journalled
//! image is cut mid-write (crash.rs) and judged before and after replay.
//!
//! Heavy shapes on fixed subsets of image indexes (see `Heavy`): 66,000
//! subdirectories in one directory (dir_nlink: its link count becomes 1),
//! and 65,000 hard links to one file (EXT4_LINK_MAX, then EMLINK) under
//! ~240-byte names, which on 1 KiB blocks with large_dir make a
//! three-level htree (indirect_levels 2, read back from dx_root).
//!
//! Not covered, and why: 64 KiB blocks (the kernel mounts only blocks up to
//! the page size, 4 KiB here); quota and project quota (no quota support in
//! this kernel); fs-verity and casefold cannot be written by this kernel
//! (verity files are made with debugfs in tests/fsck_false_alarms.rs).

mod crash;
pub(crate) mod fastcommit;
mod matrix;
mod workload;

use crate::util::{self, TempDir};
use anyhow::{bail, Context, Result};
use ext4r_txn::testutil::copy_sparse;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Number of images (the matrix is cycled with fresh seeds).
    #[arg(long, default_value_t = 500)]
    count: usize,
    /// First seed; image i uses seed + i.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// First image index (to rerun one image: --start I --count 1).
    #[arg(long, default_value_t = 0)]
    start: usize,
    /// The fixed CI sample: 48 images, small workloads.
    #[arg(long)]
    sample: bool,
    /// Images built and checked at once.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// The checker under test (default: the release build of ext4r).
    #[arg(long)]
    ext4r: Option<PathBuf>,
    /// Fast-commit crash cases instead (see fastcommit.rs): with --sample
    /// the fixed CI matrix, else --count random cases (default 100).
    #[arg(long)]
    fast_commit: bool,
    /// With --fast-commit and without --sample: every random case is of
    /// the kind the sample races (mixed, fsync'd, a writer thread racing
    /// the cut), the configurations cycled; each run makes other images.
    #[arg(long)]
    racing: bool,
    /// With --fast-commit: copy the cut image of each failed case, and of
    /// each the kernel refused to mount, into this directory.
    #[arg(long)]
    keep: Option<PathBuf>,
}

/// One image's outcome.
struct Outcome {
    features: Vec<&'static str>,
    made: Vec<(&'static str, u64)>,
    /// Why it was not judged (e2fsck itself not clean, mkfs refused...).
    skipped: Option<String>,
    false_alarms: Vec<String>,
}

pub fn run(args: &Args) -> Result<()> {
    if !rustix::process::geteuid().is_root() || !Path::new("/dev/loop-control").exists() {
        println!("zoo: skipped: needs root and loop devices for loop mounts");
        return Ok(());
    }
    for prog in ["mke2fs", "e2fsck", "setfattr", "fallocate"] {
        if util::find_program(prog.as_ref()).is_none() {
            println!("zoo: skipped: {prog} not found");
            return Ok(());
        }
    }
    let bin: OsString = match &args.ext4r {
        Some(p) => p.clone().into(),
        None => util::release_ext4r("fsck")?.remove(0),
    };
    if args.fast_commit {
        return run_fast_commit(args, &bin);
    }
    let count = if args.sample { 48 } else { args.count };
    let configs = matrix::configs();
    let cache = Path::new("/dev/shm/ext4r-zoo");
    std::fs::create_dir_all(cache).context("cannot create /dev/shm/ext4r-zoo")?;
    let work = TempDir::new_in(cache, "run-")?;
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| loop {
                let i = args.start + next.fetch_add(1, Ordering::Relaxed);
                if i >= args.start + count || util::interrupted() {
                    break;
                }
                let cfg = &configs[i % configs.len()];
                let seed = args.seed + i as u64;
                let out =
                    one(&bin, work.path(), cache, cfg, i, seed, args.sample).unwrap_or_else(|e| {
                        Outcome {
                            features: cfg.features.clone(),
                            made: Vec::new(),
                            skipped: Some(format!("{e:#}")),
                            false_alarms: Vec::new(),
                        }
                    });
                let tag = if !out.false_alarms.is_empty() {
                    "FALSE ALARM"
                } else if out.skipped.is_some() {
                    "skip"
                } else {
                    "ok"
                };
                println!("zoo {i:4} seed {seed} [{}] {tag}", cfg.name);
                for fa in &out.false_alarms {
                    println!("    {fa}");
                }
                if let Some(why) = &out.skipped {
                    println!("    skipped: {why}");
                }
                if let Ok(mut r) = results.lock() {
                    r.push(out);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_default();
    report(&results, start);
    let alarms: usize = results.iter().map(|o| o.false_alarms.len()).sum();
    if alarms > 0 {
        bail!(
            "{alarms} false alarm(s); failing images kept under {}",
            cache.display()
        );
    }
    Ok(())
}

/// The fast-commit cases: built, cut, recovered four ways, compared.
fn run_fast_commit(args: &Args, bin: &OsString) -> Result<()> {
    let cases: Vec<fastcommit::Case> = if args.sample {
        fastcommit::sample()
    } else {
        let count = if args.count == 500 { 100 } else { args.count };
        (args.start..args.start + count)
            .map(|i| {
                if args.racing {
                    fastcommit::racing(i, args.seed + i as u64)
                } else {
                    fastcommit::random(i, args.seed + i as u64)
                }
            })
            .collect()
    };
    if let Some(k) = &args.keep {
        std::fs::create_dir_all(k).with_context(|| format!("cannot create {}", k.display()))?;
    }
    let cache = Path::new("/dev/shm/ext4r-zoo");
    std::fs::create_dir_all(cache).context("cannot create /dev/shm/ext4r-zoo")?;
    let work = TempDir::new_in(cache, "fc-")?;
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= cases.len() || util::interrupted() {
                    break;
                }
                let case = &cases[i];
                let r = fastcommit::run_case(bin, work.path(), case, args.keep.as_deref());
                let line = match &r {
                    Ok(r) if r.failures.is_empty() => format!(
                        "ok ({} ops, {} fast-commit records{}{}{})",
                        r.ops,
                        r.fc_records,
                        match (r.kernel_refused, r.fc_overrun) {
                            (true, Some(how)) => format!(
                                ", kernel refused: its fast-commit scan runs off the journal; {how}"
                            ),
                            (true, None) => ", kernel refused".into(),
                            _ => String::new(),
                        },
                        if r.e2fsck_differs.is_empty() {
                            String::new()
                        } else {
                            format!(", e2fsck differs on {}", r.e2fsck_differs.len())
                        },
                        if r.beyond_e2fsck.is_empty() {
                            String::new()
                        } else {
                            format!(", keeps {} beyond e2fsck's", r.beyond_e2fsck.len())
                        }
                    ),
                    Ok(_) => "FAILED".into(),
                    Err(e) => format!("ERROR {e:#}"),
                };
                println!("fc {i:3} seed {} [{}] {line}", case.seed, case.name());
                if let Ok(r) = &r {
                    for f in &r.failures {
                        println!("    {f}");
                    }
                    for d in r.e2fsck_differs.iter().take(3) {
                        println!("    e2fsck vs kernel: {d}");
                    }
                    for d in r.beyond_e2fsck.iter().take(3) {
                        println!("    beyond e2fsck's (the kernel refused): {d}");
                    }
                }
                if let Ok(mut v) = results.lock() {
                    v.push(r.map_err(|e| format!("{e:#}")));
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_default();
    let failed = results
        .iter()
        .filter(|r| r.as_ref().map_or(true, |r| !r.failures.is_empty()))
        .count();
    let ok: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let lost: usize = ok.iter().map(|r| r.lost).sum();
    let with_fc = ok.iter().filter(|r| r.fc_records > 0).count();
    let refused = ok.iter().filter(|r| r.kernel_refused).count();
    let overrun = ok.iter().filter(|r| r.fc_overrun.is_some()).count();
    let e2_differs = ok.iter().filter(|r| !r.e2fsck_differs.is_empty()).count();
    println!(
        "\nzoo fast-commit: {} cases, {with_fc} with fast commits to replay, {failed} failed, {lost} files lost, kernel refused {refused} ({overrun} for running off the fast-commit area), e2fsck differs from the kernel on {e2_differs}, {}",
        results.len(),
        util::fmt_duration(start.elapsed())
    );
    if failed > 0 {
        bail!("{failed} fast-commit case(s) failed");
    }
    Ok(())
}

fn report(results: &[Outcome], start: Instant) {
    let mut per_feature: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut per_object: BTreeMap<&str, u64> = BTreeMap::new();
    for o in results {
        for f in &o.features {
            let e = per_feature.entry(f).or_default();
            if o.skipped.is_none() {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
        for (k, n) in &o.made {
            *per_object.entry(k).or_default() += n;
        }
    }
    println!("\n{:<22} {:>7} {:>7}", "feature", "judged", "skipped");
    for (f, (j, s)) in &per_feature {
        println!("{f:<22} {j:>7} {s:>7}");
    }
    println!("\n{:<36} {:>9}", "object", "made");
    for (k, n) in &per_object {
        println!("{k:<36} {n:>9}");
    }
    let judged = results.iter().filter(|o| o.skipped.is_none()).count();
    let alarms: usize = results.iter().map(|o| o.false_alarms.len()).sum();
    println!(
        "\nzoo: {} images, {judged} judged, {} skipped, {alarms} false alarms, {}",
        results.len(),
        results.len() - judged,
        util::fmt_duration(start.elapsed())
    );
}

fn status(cmd: &mut Command) -> Result<i32> {
    let st = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| util::display_cmd(cmd))?;
    Ok(st.code().unwrap_or(-1))
}

/// Mounts `img` on `mnt` through a loop device (attached atomically by
/// mount itself), runs `f`, unmounts even when `f` fails.
fn with_mount<T>(img: &Path, mnt: &Path, opts: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let mut o = String::from("loop");
    if !opts.is_empty() {
        o.push(',');
        o.push_str(opts);
    }
    if status(Command::new("mount").arg("-o").arg(&o).arg(img).arg(mnt))? != 0 {
        let name = img.file_name().unwrap_or_default().to_string_lossy();
        bail!("kernel refused to mount {name} ({o})");
    }
    let r = f();
    // With --jobs above 1, another worker's child may briefly inherit an
    // fd on this mount between fork and exec (EBUSY): retry, then detach
    // lazily so no mount outlives the run.
    for _ in 0..50 {
        if status(Command::new("umount").arg(mnt))? == 0 {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = status(Command::new("umount").arg("-l").arg(mnt));
    bail!("umount {} stayed busy (detached lazily)", mnt.display())
}

/// Our verdicts on a clean image: -fn on it, -p on a copy.
fn judge(bin: &OsString, img: &Path, what: &str, alarms: &mut Vec<String>) -> Result<()> {
    let fnc = status(Command::new(bin).args(["fsck", "-fn"]).arg(img))?;
    if fnc != 0 {
        alarms.push(format!("{what}: ext4r fsck -fn exit {fnc} (e2fsck -fn 0)"));
    }
    let copy = img.with_extension("p.img");
    copy_sparse(img, &copy)?;
    let p = status(Command::new(bin).args(["fsck", "-p"]).arg(&copy))?;
    let _ = std::fs::remove_file(&copy);
    if p != 0 {
        alarms.push(format!("{what}: ext4r fsck -p exit {p}"));
    }
    Ok(())
}

fn one(
    bin: &OsString,
    work: &Path,
    cache: &Path,
    cfg: &matrix::Config,
    index: usize,
    seed: u64,
    sample: bool,
) -> Result<Outcome> {
    let dir = TempDir::new_in(work, &format!("s{seed}-"))?;
    let img = dir.path().join("zoo.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt)?;
    let mut out = Outcome {
        features: cfg.features.clone(),
        made: Vec::new(),
        skipped: None,
        false_alarms: Vec::new(),
    };
    let heavy = Heavy::of(cfg, index);
    let mut size_mib = cfg.size_mib;
    if heavy.subdirs {
        // One block per subdirectory, inode tables for them, slack.
        size_mib += (workload::MANY_SUBDIRS * cfg.block_size * 5 / 4) >> 20;
        size_mib += 40;
    }
    if heavy.links {
        // Directories of 65,000 names of ~240 bytes: up to 48 MiB.
        size_mib += 96;
    }
    std::fs::File::create(&img)?.set_len(size_mib << 20)?;
    let mut mk = Command::new("mke2fs");
    mk.args([
        "-q",
        "-F",
        "-E",
        &format!("root_owner=0:0,{}", cfg.extended),
    ])
    .args(&cfg.mkfs);
    if heavy.subdirs {
        mk.args(["-N", "70000"]);
    }
    mk.arg(&img);
    if status(&mut mk)? != 0 {
        out.skipped = Some(format!("mke2fs {} refused", cfg.mkfs.join(" ")));
        return Ok(out);
    }
    let mut rng = workload::Rng::new(seed);
    let shape = workload::Shape {
        block_size: cfg.block_size,
        ea_inode: cfg.features.contains(&"ea_inode"),
        huge_file: cfg.features.contains(&"huge_file"),
        extents: cfg.extents,
        wide_dir: if heavy.subdirs {
            workload::MANY_SUBDIRS
        } else if sample {
            200
        } else {
            200 + rng.below(2000)
        },
        xattrs: true,
    };
    let snap = dir.path().join("snap.img");
    let journal = cfg.journal;
    let made = with_mount(&img, &mnt, &cfg.mount_opts, || {
        let mut made = workload::fill(&mnt, &shape, &mut rng)?;
        if heavy.links {
            made.extend(workload::link_limit(&mnt, &mut rng)?);
        }
        if journal {
            // A live snapshot: a file unlinked while open (an orphan) and
            // a write burst after a sync, then the backing file copied
            // while mounted, so the copy needs journal recovery.
            let held = mnt.join("orphan");
            let mut f = std::fs::File::create(&held)?;
            std::io::Write::write_all(&mut f, &vec![7u8; 50_000])?;
            f.sync_all()?;
            std::fs::remove_file(&held)?;
            let _ = Command::new("sync").arg("-f").arg(&mnt).status();
            for i in 0..20 {
                std::fs::write(mnt.join(format!("late{i}")), vec![1u8; 3000 * (i + 1)])?;
            }
            copy_sparse(&img, &snap)?;
            drop(f);
        }
        Ok(made)
    })?;
    out.made = made;
    if heavy.links {
        match htree_levels(&img, "/linkmax/d0", cfg.block_size) {
            Some(2) => out.made.push(("images: htree of 3 levels", 1)),
            Some(1) => out.made.push(("images: htree of 2 levels", 1)),
            l => out.made.push(if l.is_some() {
                ("images: htree of other depth", 1)
            } else {
                ("images: htree depth unread", 1)
            }),
        }
    }
    let e2 = status(Command::new("e2fsck").arg("-fn").arg(&img))?;
    if e2 != 0 {
        out.skipped = Some(format!("e2fsck -fn exit {e2}"));
        return Ok(out);
    }
    judge(bin, &img, "image", &mut out.false_alarms)?;
    if journal && snap.is_file() {
        let dump = Command::new("dumpe2fs")
            .arg("-h")
            .arg(&snap)
            .stderr(Stdio::null())
            .output()?;
        if String::from_utf8_lossy(&dump.stdout).contains("needs_recovery") {
            out.made.push(("snapshots needing replay", 1));
        }
        // Replay by the kernel, then both checkers must find it clean.
        with_mount(&snap, &mnt, &cfg.mount_opts, || Ok(()))?;
        if status(Command::new("e2fsck").arg("-fn").arg(&snap))? == 0 {
            judge(bin, &snap, "after replay", &mut out.false_alarms)?;
            out.made.push(("replayed snapshots", 1));
        }
    }
    if journal {
        // A kernel that cannot replay its own cut is worth knowing, but
        // it does not void the checks above.
        if let Err(e) = cut_and_replay(bin, &img, &mnt, cfg, &mut rng, &mut out) {
            println!("    cut: {e:#}");
            out.made.push(("cut: failed", 1));
            let from = img.with_extension("cut.img");
            if from.is_file() {
                let to = cache.join(format!("cut-failed-seed{seed}-{}.img", cfg.name));
                copy_sparse(&from, &to)?;
                println!("    kept {}", to.display());
            }
        }
    }
    if !out.false_alarms.is_empty() {
        let keep = cache.join(format!("fail-seed{seed}-{}.img", cfg.name));
        copy_sparse(&img, &keep)?;
        println!("    kept {}", keep.display());
        // The cut image (replayed) and, if ours failed before the replay,
        // its unreplayed copy.
        for ext in ["cut.img", "cut-unreplayed.img"] {
            let from = img.with_extension(ext);
            if from.is_file() {
                let to = cache.join(format!("fail-seed{seed}-{}.{ext}", cfg.name));
                copy_sparse(&from, &to)?;
                println!("    kept {}", to.display());
            }
        }
    }
    Ok(out)
}

/// The heavy shapes, each on a fixed subset of image indexes (so the CI
/// sample, the first 48, holds each of them at least once).
struct Heavy {
    /// MANY_SUBDIRS subdirectories in one directory: ext4 (dir_nlink is
    /// in mke2fs's ext4 defaults) without bigalloc (a cluster per
    /// directory would not fit).
    subdirs: bool,
    /// Hard links to one file up to EXT4_LINK_MAX under long names; on
    /// 1 KiB blocks with large_dir a three-level htree.
    links: bool,
}

impl Heavy {
    fn of(cfg: &matrix::Config, index: usize) -> Heavy {
        let f = |name: &str| cfg.features.contains(&name);
        let bigalloc = cfg.features.iter().any(|f| f.starts_with("bigalloc"));
        Heavy {
            subdirs: index % 14 == 7 && f("ext4") && !bigalloc,
            links: index % 14 == 1 || (cfg.block_size == 1024 && f("large_dir")),
        }
    }
}

/// indirect_levels of the htree at `path` (dx_root_info after the "."
/// and ".." entries, byte 30 of the directory's first block), read
/// through debugfs's block map.
fn htree_levels(img: &Path, path: &str, bs: u64) -> Option<u8> {
    let out = Command::new("debugfs")
        .arg("-R")
        .arg(format!("bmap {path} 0"))
        .arg(img)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let blk: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    let mut b = [0u8; 1];
    let f = std::fs::File::open(img).ok()?;
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, blk * bs + 30).ok()?;
    Some(b[0])
}

/// A copy of the filled image, mounted again and cut mid-write (see
/// crash.rs): where e2fsck -fn finds the unreplayed image clean, ours must
/// too; after the kernel replays the journal, both must.
fn cut_and_replay(
    bin: &OsString,
    img: &Path,
    mnt: &Path,
    cfg: &matrix::Config,
    rng: &mut workload::Rng,
    out: &mut Outcome,
) -> Result<()> {
    let cut = img.with_extension("cut.img");
    copy_sparse(img, &cut)?;
    let ops = with_mount(&cut, mnt, &cfg.mount_opts, || crash::cut(mnt, rng))?;
    out.made.push(("images: cut mid-write", 1));
    out.made.push(("ops before the cut", ops));
    let dump = Command::new("dumpe2fs")
        .arg("-h")
        .arg(&cut)
        .stderr(Stdio::null())
        .output()?;
    if String::from_utf8_lossy(&dump.stdout).contains("needs_recovery") {
        out.made.push(("cut images needing replay", 1));
    }
    let e2 = status(Command::new("e2fsck").arg("-fn").arg(&cut))?;
    let ours = status(Command::new(bin).args(["fsck", "-fn"]).arg(&cut))?;
    match (e2 == 0, ours == 0) {
        (true, false) => {
            out.false_alarms.push(format!(
                "cut, unreplayed: ext4r fsck -fn exit {ours} (e2fsck -fn 0)"
            ));
            copy_sparse(&cut, img.with_extension("cut-unreplayed.img"))?;
        }
        (false, true) => {
            println!("    cut, unreplayed: e2fsck -fn exit {e2}, ours clean");
            out.made.push(("cut: e2fsck unclean, ours clean", 1));
        }
        (true, true) => out.made.push(("cut: both clean unreplayed", 1)),
        (false, false) => out.made.push(("cut: both unclean unreplayed", 1)),
    }
    if let Err(e) = with_mount(&cut, mnt, &cfg.mount_opts, || Ok(())) {
        // Seen with fast_commit on this kernel: "JBD2: corrupted journal
        // superblock", "journal recovery failed" (jbd2's fast-commit scan
        // running off the journal, see fastcommit::Overrun). e2fsck -fy
        // fails its recovery alike and discards the journal; our verdict
        // on what it leaves is judged instead.
        println!("    cut: {e:#}; replayed by e2fsck -fy instead");
        out.made.push(("cut: kernel refused replay, e2fsck did", 1));
        status(Command::new("e2fsck").arg("-fy").arg(&cut))?;
    }
    let e2 = status(Command::new("e2fsck").arg("-fn").arg(&cut))?;
    if e2 == 0 {
        judge(bin, &cut, "cut, after replay", &mut out.false_alarms)?;
        out.made.push(("cut images replayed, judged", 1));
    } else {
        // Not ours to judge (fast-commit replay leaves i_blocks 0 on
        // this kernel), but ours must not call it clean.
        let ours = status(Command::new(bin).args(["fsck", "-fn"]).arg(&cut))?;
        println!("    cut, after replay: e2fsck -fn exit {e2}, ours {ours}");
        out.made.push(if ours == 0 {
            ("cut: replayed, e2fsck unclean, ours clean", 1)
        } else {
            ("cut: replayed, both unclean", 1)
        });
    }
    if !out.false_alarms.iter().any(|a| a.starts_with("cut")) {
        let _ = std::fs::remove_file(&cut);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CI sample (the first 48 indexes) must hold every heavy shape,
    /// including a three-level htree (1 KiB blocks with large_dir).
    #[test]
    fn the_sample_holds_every_heavy_shape() {
        let configs = matrix::configs();
        let heavy: Vec<_> = (0..48)
            .map(|i| {
                (
                    &configs[i % configs.len()],
                    Heavy::of(&configs[i % configs.len()], i),
                )
            })
            .collect();
        assert!(heavy.iter().any(|(_, h)| h.subdirs));
        assert!(heavy
            .iter()
            .any(|(c, h)| h.links && c.block_size == 1024 && c.features.contains(&"large_dir")));
    }
}
