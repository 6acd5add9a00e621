//! `cargo xtask crash`: power cuts at every write of the tools' and the
//! write layer's changes, and the recoveries after them.
//!
//! Each workload runs once on a recording device over an image in memory;
//! then for each cut point (every write, or evenly spaced ones where there
//! are more), two disks are built: the writes before the cut as issued,
//! and the same with a random subset of the writes since the last flush
//! dropped and one of them torn (a volatile cache lost at the cut). Each is
//! recovered by our `fsck -fy` and by `e2fsck -fy` (and, for the write
//! layer's journaled transactions, by a kernel mount), and must then be
//! e2fsck-clean with nothing lost:
//!
//! - tune's rewrites (`-O metadata_csum`, `-I 512` on kernel-filled images,
//!   `-j` on ext2): every file's contents as before;
//! - fsck's repairs of three damaged images: clean after recovery;
//! - the write layer's transactions (see [`txnload`]): the files are those
//!   of a committed prefix of the transactions that includes every one
//!   acknowledged before the cut;
//! - an offline e4defrag-r run (defragmentation, `-r`, `-f`; see
//!   [`defragload`]): every file's contents as before;
//! - the recovery of a kernel-made fast_commit image by the library's
//!   writable open (the log and its fast commits replayed, the replay's
//!   blocks journaled before they go home), then a directory and a file
//!   written through the write API: the tree is the recovered one or the
//!   recovered one with the new files, never anything else (a cut before
//!   our replay reached the log leaves the fast commits to the recoverer:
//!   e2fsck's own replay of them is accepted from it);
//! - an offline shrink by resize.ext4r (to 3/4 of the size on 1 KiB blocks,
//!   to the minimum on 4 KiB): the recovered image is the old size or the
//!   new one, with every file's contents as before;
//! - an offline grow by resize.ext4r to twice the size of a filled image,
//!   on a device already that large (1 KiB blocks: the descriptor table
//!   grows into the resize inode's reserve; without resize_inode the
//!   filesystem turns to meta_bg): the old size or the new, every file
//!   as before.
//! - the FUSE driver, `ext4r mount`, served in this process over the
//!   recording device while a few hundred POSIX operations go through
//!   its mount point (see [`mountload`]): the namespace is the one after
//!   some operation no earlier than the last fsync before the cut, every
//!   file fsynced and not touched since has its fsynced contents, no file
//!   holds a byte the workload did not write at that place of a file of
//!   that name, and the files around the workload are untouched.
//!   Skipped, with the reason printed, without `/dev/fuse`.

mod apiload;
mod defragload;
mod image;
mod mountload;
mod txnload;

use crate::util::{self, TempDir};
use anyhow::{bail, Context, Result};
use ext4r::device::{apply_cut, BlockDevice, Cut, MemDevice, Recorder};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Cut points per workload at most (evenly spaced beyond).
    #[arg(long, default_value_t = 120)]
    cuts: usize,
    /// The CI sample: few cut points per workload.
    #[arg(long)]
    sample: bool,
    /// Seed of the images, workloads and dropped writes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only the workloads whose names contain one of these.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Keep the cut images of failures (before recovery) here.
    #[arg(long)]
    keep: Option<std::path::PathBuf>,
    /// Recoveries run at once (each on its own image and loop device)
    /// [default: the available cores].
    #[arg(long)]
    jobs: Option<usize>,
}

/// A change recorded on an image, and what must hold after a cut.
enum Work {
    Tune(&'static [&'static str]),
    Fsck,
    Txn {
        deferred: bool,
    },
    Api {
        deferred: bool,
    },
    Defrag,
    FastCommit,
    /// An offline shrink by resize.ext4r: to three quarters of the size,
    /// or (`true`) to the minimum.
    Shrink(bool),
    /// An offline grow by resize.ext4r by this factor, the device grown
    /// first.
    Grow(u64),
    /// The FUSE driver in this process, this many operations through its
    /// mount point.
    Mount(usize),
}

struct Workload {
    name: &'static str,
    mkfs: &'static str,
    /// debugfs requests that damage the image first (fsck workloads).
    damage: &'static [&'static str],
    work: Work,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "tune-metadata_csum",
        mkfs: "-t ext4 -b 1024 -O ^metadata_csum,uninit_bg",
        damage: &[],
        work: Work::Tune(&["-O", "metadata_csum"]),
    },
    Workload {
        name: "tune-I512",
        mkfs: "-t ext4 -b 1024 -I 256",
        damage: &[],
        work: Work::Tune(&["-I", "512"]),
    },
    Workload {
        name: "tune-j-ext2",
        mkfs: "-t ext2 -b 1024",
        damage: &[],
        work: Work::Tune(&["-j"]),
    },
    Workload {
        name: "fsck-bitmaps",
        mkfs: "-t ext4",
        damage: &[
            "freeb 3000 400",
            "set_bg 1 free_blocks_count 17",
            "set_bg 0 checksum calc",
        ],
        work: Work::Fsck,
    },
    Workload {
        name: "fsck-links",
        mkfs: "-t ext4 -b 1024",
        damage: &[
            "set_inode_field /d0/f1 links_count 7",
            "unlink /d1/f2",
            "unlink /d2/f3",
        ],
        work: Work::Fsck,
    },
    Workload {
        name: "fsck-dir",
        mkfs: "-t ext3",
        damage: &["clri /d3", "set_inode_field /d4/f4 mode 0"],
        work: Work::Fsck,
    },
    Workload {
        name: "txn-each",
        mkfs: "-t ext4",
        damage: &[],
        work: Work::Txn { deferred: false },
    },
    Workload {
        name: "api-each",
        mkfs: "-t ext4",
        damage: &[],
        work: Work::Api { deferred: false },
    },
    Workload {
        name: "api-deferred-1k-nocsum",
        mkfs: "-t ext4 -b 1024 -O ^metadata_csum",
        damage: &[],
        work: Work::Api { deferred: true },
    },
    Workload {
        name: "txn-deferred-1k",
        mkfs: "-t ext4 -b 1024 -O ^metadata_csum",
        damage: &[],
        work: Work::Txn { deferred: true },
    },
    Workload {
        name: "fc-recovery-4k",
        mkfs: "4k-64bit-csum",
        damage: &[],
        work: Work::FastCommit,
    },
    Workload {
        name: "fc-recovery-1k",
        mkfs: "1k-32bit-nocsum",
        damage: &[],
        work: Work::FastCommit,
    },
    Workload {
        name: "defrag-offline",
        mkfs: "-t ext4 -b 1024",
        damage: &[],
        work: Work::Defrag,
    },
    Workload {
        name: "resize-shrink-3q",
        mkfs: "-t ext4 -b 1024",
        damage: &[],
        work: Work::Shrink(false),
    },
    Workload {
        name: "resize-shrink-min-4k",
        mkfs: "-t ext4 -b 4096",
        damage: &[],
        work: Work::Shrink(true),
    },
    Workload {
        name: "resize-grow-2x",
        mkfs: "-t ext4 -b 1024",
        damage: &[],
        work: Work::Grow(2),
    },
    Workload {
        name: "resize-grow-2x-metabg",
        mkfs: "-t ext4 -b 1024 -O ^resize_inode",
        damage: &[],
        work: Work::Grow(2),
    },
    Workload {
        name: "mount-fuse",
        mkfs: "-t ext4",
        damage: &[],
        work: Work::Mount(300),
    },
];

/// Cut points of the FUSE workload in the CI sample: its operations are
/// many and varied, four cuts would see few of them.
const MOUNT_SAMPLE_CUTS: usize = 24;

/// Workloads the CI sample leaves out (each adds over half a minute to
/// it); `--only` picks them.
const NOT_IN_SAMPLE: &[&str] = &["resize-grow-2x", "resize-grow-2x-metabg"];

pub fn run(args: &Args) -> Result<()> {
    if !rustix::process::geteuid().is_root() || !Path::new("/dev/loop-control").exists() {
        println!(
            "crash: skipped: needs root and loop devices (kernel-filled images, kernel recovery)"
        );
        return Ok(());
    }
    for prog in ["mke2fs", "e2fsck", "debugfs"] {
        if util::find_program(prog.as_ref()).is_none() {
            println!("crash: skipped: {prog} not found");
            return Ok(());
        }
    }
    let fsck = util::release_ext4r("fsck")?;
    let tmp = TempDir::new_in(Path::new("/dev/shm"), "ext4r-crash")?;
    let max_cuts = if args.sample { 4 } else { args.cuts.max(2) };
    let tail = if args.sample { 3 } else { 10 };
    let setting = Setting {
        dir: tmp.path(),
        fsck: &fsck,
        keep: args.keep.as_deref(),
        jobs: args.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        }),
    };
    let start = Instant::now();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (k, w) in WORKLOADS.iter().enumerate() {
        if !args.only.is_empty() && !args.only.iter().any(|o| w.name.contains(o.as_str())) {
            continue;
        }
        if args.sample && args.only.is_empty() && NOT_IN_SAMPLE.contains(&w.name) {
            continue;
        }
        if matches!(w.work, Work::Mount(_)) && !Path::new("/dev/fuse").exists() {
            println!("crash: {:<20} skipped: /dev/fuse is missing", w.name);
            continue;
        }
        util::check_interrupted()?;
        let seed = args.seed.wrapping_mul(1000).wrapping_add(k as u64);
        let max_cuts = match w.work {
            Work::Mount(_) if args.sample => MOUNT_SAMPLE_CUTS,
            _ => max_cuts,
        };
        let row = one(w, &setting, seed, (max_cuts, tail), &mut failures)
            .with_context(|| w.name.to_string())?;
        println!(
            "crash: {:<20} {:>6} writes {:>5} cut points {:>5} recoveries, {} failed",
            w.name, row.0, row.1, row.2, row.3
        );
        rows.push((w.name, row));
    }
    let (cuts, recov, failed): (usize, usize, usize) = rows
        .iter()
        .fold((0, 0, 0), |a, (_, r)| (a.0 + r.1, a.1 + r.2, a.2 + r.3));
    for f in failures.iter().take(20) {
        println!("  FAIL {f}");
    }
    println!(
        "crash: {} workloads, {cuts} cut points, {recov} recoveries, {failed} failures, {}",
        rows.len(),
        util::fmt_duration(start.elapsed())
    );
    if failed > 0 {
        bail!("{failed} recoveries left a damaged filesystem or lost data");
    }
    Ok(())
}

/// Where and how the workloads run.
struct Setting<'a> {
    /// The temporary directory (tmpfs).
    dir: &'a Path,
    /// Our fsck's command line.
    fsck: &'a [OsString],
    /// Where to keep the cut images of failures.
    keep: Option<&'a Path>,
    /// Recoveries at once.
    jobs: usize,
}

/// The resize workloads' options. The base was mounted by the kernel after
/// mke2fs; when the mount fell in a later second than mke2fs, resize (as
/// resize2fs) asks for `e2fsck -f` first ("mounted since it was last
/// checked"), which made the workload fail by the clock. The base is known
/// clean, and the question is not what the harness measures: forced.
fn resize_options() -> ext4r::resize::ResizeOptions {
    let mut o = ext4r::resize::ResizeOptions::default();
    o.now = Some(1_700_000_000);
    o.force = true;
    o
}

/// Runs one workload: (writes, cut points, recoveries, failures).
fn one(
    w: &Workload,
    setting: &Setting<'_>,
    seed: u64,
    (max_cuts, tail): (usize, usize),
    failures: &mut Vec<String>,
) -> Result<(usize, usize, usize, usize)> {
    let Setting {
        dir,
        fsck,
        keep,
        jobs,
    } = *setting;
    let base = match w.work {
        Work::FastCommit => fc_base(dir, w, seed)?,
        _ => image::kernel_filled(dir, w.name, w.mkfs, "80M", seed)?,
    };
    let base = if w.damage.is_empty() {
        base
    } else {
        damage(dir, w.name, &base, w.damage)?
    };
    let base = match w.work {
        Work::Defrag => defragload::fragment(base, seed)?,
        // The device grows first (a partition or image file made
        // larger), the filesystem after.
        Work::Grow(factor) => {
            let mut bytes = base.to_vec()?;
            bytes.resize(bytes.len() * factor as usize, 0);
            MemDevice::from_bytes(&bytes)
        }
        _ => base,
    };
    let base = Arc::new(base);
    let api_start = match w.work {
        Work::Api { .. } => Some(apiload::prepare(base.clone())?),
        _ => None,
    };
    // What must survive: every file, for the tune and defrag workloads (a
    // damaged image's files are what the repair makes of them).
    let manifest = match w.work {
        Work::Tune(_) | Work::Defrag | Work::Shrink(_) | Work::Grow(_) | Work::Mount(_) => {
            image::manifest(base.snapshot())?
        }
        _ => image::Manifest::new(),
    };
    let fc_trees = match w.work {
        Work::FastCommit => Some(fc_trees(dir, w.name, &base)?),
        _ => None,
    };
    // The workload, recorded.
    let rec = Arc::new(Recorder::new(base.snapshot()));
    let dev: Arc<dyn BlockDevice> = rec.clone();
    let mut txn_model = None;
    let mut api_model = None;
    let mut sizes = None;
    let mut mount_model = None;
    match &w.work {
        Work::Tune(opts) => {
            let argv: Vec<OsString> = opts.iter().map(OsString::from).collect();
            tune(dev, &argv)?;
        }
        Work::Fsck => {
            let mut o = ext4r_fsck::Options::default();
            o.force = true;
            o.now = 1_700_000_000;
            let mut quiet = ext4r_fsck::Quiet;
            ext4r_fsck::repair(dev, &o, ext4r_fsck::Mode::Yes, false, &mut quiet)?;
        }
        Work::Txn { deferred } => {
            let r2 = rec.clone();
            let writes = move || r2.writes();
            txn_model = Some(txnload::run(dev, 40, seed, *deferred, &writes)?);
        }
        Work::Api { deferred } => {
            let r2 = rec.clone();
            let writes = move || r2.writes();
            let start = api_start.clone().unwrap_or_default();
            api_model = Some(apiload::run(dev, 200, seed, *deferred, &writes, start)?);
        }
        Work::Defrag => defragload::run(dev)?,
        Work::FastCommit => fc_work(dev)?,
        Work::Shrink(minimum) => {
            let o = resize_options();
            let old = ext4r::resize::superblock(dev.as_ref())?.blocks_count();
            let size = if *minimum {
                ext4r::resize::NewSize::Minimum
            } else {
                ext4r::resize::NewSize::Blocks(old / 4 * 3)
            };
            let r = ext4r::resize::resize(dev, size, &o)?;
            sizes = Some((old, r.new_blocks));
        }
        Work::Grow(factor) => {
            let o = resize_options();
            let old = ext4r::resize::superblock(dev.as_ref())?.blocks_count();
            let size = ext4r::resize::NewSize::Blocks(old * factor);
            let r = ext4r::resize::resize(dev, size, &o)?;
            if r.new_blocks <= old {
                bail!("the grow to {factor}x left {} blocks", r.new_blocks);
            }
            sizes = Some((old, r.new_blocks));
        }
        Work::Mount(ops) => {
            let r2 = rec.clone();
            let writes = move || r2.writes();
            mount_model = Some(mountload::run(dev, dir, *ops, seed, &writes)?);
        }
    }
    let log = rec.log();
    let total = rec.writes();
    let points = cut_points(total, max_cuts, tail);
    let recoverers: &[&str] = match w.work {
        Work::Txn { .. }
        | Work::Defrag
        | Work::FastCommit
        | Work::Shrink(_)
        | Work::Grow(_)
        | Work::Mount(_) => &["ours", "e2fsck", "kernel"],
        Work::Api { .. } => &["ours", "open", "e2fsck", "kernel"],
        _ => &["ours", "e2fsck"],
    };
    // Every (cut point, variant, recoverer), handed out to `jobs` workers,
    // each with its own image and mount point.
    let tasks: Vec<(usize, u64, &str)> = points
        .iter()
        .flat_map(|&n| {
            (0..2u64).flat_map(move |variant| recoverers.iter().map(move |&who| (n, variant, who)))
        })
        .collect();
    let models = Models {
        txn: txn_model.as_ref(),
        api: api_model.as_ref(),
        fc: fc_trees.as_ref(),
        sizes,
        mount: mount_model.as_ref(),
        total,
    };
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<(usize, Option<String>)>> = Mutex::new(Vec::new());
    let harness: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for k in 0..jobs.max(1) {
            let (tasks, next, outcomes, harness) = (&tasks, &next, &outcomes, &harness);
            let (base, log, manifest, models) = (&base, &log, &manifest, &models);
            s.spawn(move || {
                let wdir = dir.join(format!("{}-w{k}", w.name));
                let run = || -> Result<()> {
                    std::fs::create_dir_all(&wdir)?;
                    let img = wdir.join("cut.img");
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(n, variant, who)) = tasks.get(i) else {
                            break;
                        };
                        if harness.lock().map_or(true, |h| h.is_some()) {
                            break;
                        }
                        util::check_interrupted()?;
                        let cut = Cut {
                            writes: n,
                            drop_unflushed: variant == 1,
                            tear: variant == 1,
                            seed: seed ^ (n as u64) << 8 ^ variant,
                        };
                        let disk = base.snapshot();
                        let stats = apply_cut(&disk, log, cut)?;
                        let torn_sb = stats
                            .torn_at
                            .is_some_and(|(o, l)| ext4r::device::covers_superblock(o, l));
                        disk.save(&img)?;
                        // Fast commits still to replay are the
                        // recoverer's own replay to do: the kernel's
                        // leaves counts e2fsck corrects (i_blocks), which
                        // are not ours to judge.
                        let fc = matches!(w.work, Work::FastCommit);
                        let theirs = fc
                            && who == "kernel"
                            && crate::zoo::fastcommit::fc_records(&img).unwrap_or(0) > 0;
                        // e2fsck 1.47 gives up recovering a journal whose
                        // fast-commit head is stale (one write's window
                        // here, after our replay's transaction commits and
                        // before the head is voided; the kernel leaves
                        // such heads after any full commit): its tree is
                        // its own.
                        let stale = fc
                            && who == "e2fsck"
                            && crate::zoo::fastcommit::stale_fc_head(&img).unwrap_or(false);
                        let verdict = recover(who, &img, fsck, &wdir, torn_sb).and_then(|()| {
                            let by = By {
                                who,
                                kernel_replayed: theirs,
                                stale_head: stale,
                            };
                            judge(w, &img, manifest, models, n, &by)
                        });
                        let failure = match verdict {
                            Ok(()) => None,
                            Err(e) => {
                                if let Some(k) = keep {
                                    std::fs::create_dir_all(k)?;
                                    let kept =
                                        k.join(format!("{}-{n}-{variant}-{who}.img", w.name));
                                    let disk = base.snapshot();
                                    apply_cut(&disk, log, cut)?;
                                    disk.save(&kept)?;
                                }
                                Some(format!(
                                    "{} cut {n}/{total} variant {variant} by {who}: {e:#}",
                                    w.name
                                ))
                            }
                        };
                        if let Ok(mut o) = outcomes.lock() {
                            o.push((i, failure));
                        }
                    }
                    Ok(())
                };
                let r = run();
                let _ = std::fs::remove_dir_all(&wdir);
                if let Err(e) = r {
                    if let Ok(mut h) = harness.lock() {
                        h.get_or_insert(e);
                    }
                }
            });
        }
    });
    if let Some(e) = harness.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut outcomes = outcomes.into_inner().unwrap_or_default();
    outcomes.sort_by_key(|o| o.0);
    let recoveries = outcomes.len();
    let mut failed = 0;
    for f in outcomes.into_iter().filter_map(|o| o.1) {
        failed += 1;
        failures.push(f);
    }
    Ok((total, points.len(), recoveries, failed))
}

/// Every write when there are few; else `max` evenly spaced and the last
/// `tail` (where the commits are).
fn cut_points(total: usize, max: usize, tail: usize) -> Vec<usize> {
    if total <= max {
        return (0..=total).collect();
    }
    let mut v: Vec<usize> = (0..max).map(|i| i * total / max).collect();
    v.extend(total.saturating_sub(tail)..=total);
    v.sort_unstable();
    v.dedup();
    v
}

fn tune(dev: Arc<dyn BlockDevice>, argv: &[OsString]) -> Result<()> {
    let mut opts = ext4r::tune::TuneOptions::default();
    let a: Vec<String> = argv
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    match a.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["-O", f] => opts.features = Some((*f).to_string()),
        ["-I", n] => {
            opts.inode_size = Some(n.parse()?);
            // As tune2fs -f: no e2fsck -f needed first after the mount.
            opts.force = 1;
        }
        ["-j"] => {
            let mut j = ext4r::tune::JournalRequest::default();
            j.size = -1;
            opts.journal = Some(j);
        }
        other => bail!("tune options {other:?} not known to the crash test"),
    }
    let mut env = ext4r::tune::TuneEnv::new("crash", 1_700_000_000);
    let out = ext4r::tune::tune(dev, &opts, &mut env)?;
    if out.status != 0 {
        bail!("tune {a:?} refused: {}{}", out.out, out.err);
    }
    Ok(())
}

fn damage(dir: &Path, name: &str, base: &MemDevice, reqs: &[&str]) -> Result<MemDevice> {
    let img = dir.join(format!("{name}-damage.img"));
    base.save(&img)?;
    for r in reqs {
        let out = Command::new("debugfs")
            .args(["-w", "-R", r])
            .arg(&img)
            .output()?;
        if !out.status.success() {
            bail!("debugfs {r}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let bytes = std::fs::read(&img)?;
    let _ = std::fs::remove_file(&img);
    Ok(MemDevice::from_bytes(&bytes))
}

fn exit_code(cmd: &mut Command) -> Result<i32> {
    let out = cmd.output().with_context(|| format!("{cmd:?}"))?;
    Ok(out.status.code().unwrap_or(-1))
}

/// Recovers the cut image with `who`.
/// Recovers a cut image: fsck's repair (ours, e2fsck's), a kernel mount,
/// or our library's open (which replays the journal and finishes orphans).
/// A torn primary superblock no mount or open accepts (the kernel's own
/// writes of it tear alike): those must refuse it, and fsck then repairs it
/// from a backup.
fn recover(who: &str, img: &Path, fsck: &[OsString], dir: &Path, torn_sb: bool) -> Result<()> {
    let ours_fsck = || exit_code(Command::new(&fsck[0]).args(&fsck[1..]).arg("-fy").arg(img));
    let code = match who {
        "ours" => ours_fsck()?,
        "e2fsck" => exit_code(Command::new("e2fsck").arg("-fy").arg(img))?,
        "open" => {
            let mut o = ext4r::write::WriteOptions::default();
            o.now = Some((1_700_000_100, 0));
            let opened = ext4r::write::WriteFs::open_path(img, o.clone());
            match opened {
                Ok(fs) => fs.close().context("closing after recovery")?,
                Err(e) if torn_sb => {
                    let c = ours_fsck()?;
                    if c > 2 {
                        bail!(
                            "our fsck exited {c} on a torn superblock (open: {})",
                            ext4r::error::chain(&e)
                        );
                    }
                    ext4r::write::WriteFs::open_path(img, o)?.close()?;
                }
                Err(e) => bail!("our open refused it: {}", ext4r::error::chain(&e)),
            }
            0
        }
        _ => {
            let mnt = dir.join("crash.mnt");
            std::fs::create_dir_all(&mnt)?;
            let mount = || {
                exit_code(
                    Command::new("mount")
                        .args(["-o", "loop"])
                        .arg(img)
                        .arg(&mnt),
                )
            };
            let mut m = mount()?;
            if m != 0 && torn_sb {
                let c = exit_code(Command::new("e2fsck").arg("-fy").arg(img))?;
                if c > 2 {
                    bail!("e2fsck exited {c} on a torn superblock");
                }
                m = mount()?;
            }
            if m != 0 {
                bail!("the kernel refused to mount it (mount exit {m})");
            }
            image::umount(&mnt)?;
            0
        }
    };
    if code > 2 {
        bail!("{who} exited {code}");
    }
    Ok(())
}

/// Who recovered a cut image, and what of it was theirs to do.
struct By<'a> {
    who: &'a str,
    /// The kernel replayed fast commits itself (its replay leaves counts
    /// e2fsck corrects).
    kernel_replayed: bool,
    /// The image's fast-commit head was stale, which e2fsck 1.47 refuses.
    stale_head: bool,
}

/// What the transaction workloads expect, per state.
struct Models<'a> {
    txn: Option<&'a (txnload::Model, Vec<usize>)>,
    api: Option<&'a (Vec<apiload::Tree>, Vec<usize>)>,
    fc: Option<&'a FcTrees>,
    /// A resize's old and new block counts: a recovery leaves one of them.
    sizes: Option<(u64, u64)>,
    /// What the FUSE workload did.
    mount: Option<&'a mountload::Model>,
    /// The writes of the workload.
    total: usize,
}

/// The trees a fast-commit recovery may leave: recovered (by us, whole),
/// recovered and then written, and e2fsck's own recovery of the image.
struct FcTrees {
    recovered: image::Manifest,
    written: image::Manifest,
    e2fsck: image::Manifest,
}

/// A kernel-made fast_commit image cut in an fsync-heavy workload (the
/// zoo's fast-commit builder, mixed operations).
fn fc_base(dir: &Path, w: &Workload, seed: u64) -> Result<MemDevice> {
    use crate::zoo::fastcommit as fc;
    let cfg = fc::configs()
        .into_iter()
        .find(|c| c.name == w.mkfs)
        .context("fast-commit configuration")?;
    let case = fc::Case {
        cfg,
        load: fc::Load::Mixed,
        fsync: true,
        racing: false,
        seed: seed.wrapping_add(7),
    };
    let img = dir.join(format!("{}.img", w.name));
    let mnt = dir.join(format!("{}.mnt", w.name));
    std::fs::create_dir_all(&mnt)?;
    fc::make(&img, &mnt, &case)?;
    let bytes = std::fs::read(&img)?;
    let _ = std::fs::remove_file(&img);
    Ok(MemDevice::from_bytes(&bytes))
}

/// The library's writable open recovers the journal (fast commits
/// included), then a directory and a file are made and synced.
fn fc_work(dev: Arc<dyn BlockDevice>) -> Result<()> {
    use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_100, 0));
    let mut fs = WriteFs::open(dev, o)?;
    let d = fs.mkdir(ROOT_INO, b"after", &NewNode::dir(0o755))?;
    let f = fs.create(d, b"file", &NewNode::file(0o644))?;
    fs.write(f, 0, &[0x5a; 9000])?;
    fs.close()?;
    Ok(())
}

fn fc_trees(dir: &Path, name: &str, base: &MemDevice) -> Result<FcTrees> {
    let recovered = {
        let d = Arc::new(base.snapshot());
        let mut o = ext4r::write::WriteOptions::default();
        o.now = Some((1_700_000_100, 0));
        ext4r::write::WriteFs::open(d.clone(), o)?.close()?;
        image::manifest(d.snapshot())?
    };
    let written = {
        let d = Arc::new(base.snapshot());
        fc_work(d.clone())?;
        image::manifest(d.snapshot())?
    };
    let img = dir.join(format!("{name}-e2fsck.img"));
    base.save(&img)?;
    exit_code(Command::new("e2fsck").arg("-fy").arg(&img))?;
    let e2fsck = image::manifest(ext4r::device::FileDevice::open(&img, Default::default())?)?;
    let _ = std::fs::remove_file(&img);
    Ok(FcTrees {
        recovered,
        written,
        e2fsck,
    })
}

/// The checks after a recovery: e2fsck-clean, and the workload's own.
fn judge(
    w: &Workload,
    img: &Path,
    manifest: &image::Manifest,
    models: &Models<'_>,
    cut: usize,
    by: &By<'_>,
) -> Result<()> {
    let By {
        who,
        kernel_replayed,
        stale_head,
    } = *by;
    let out = Command::new("e2fsck").arg("-fn").arg(img).output()?;
    if out.status.code() != Some(0) && !kernel_replayed {
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("Pass "))
            .take(4)
            .collect();
        bail!(
            "e2fsck -fn exit {:?} afterwards: {}",
            out.status.code(),
            lines.join(" | ")
        );
    }
    let dev = ext4r::device::FileDevice::open(img, Default::default())?;
    match &w.work {
        Work::Tune(_) | Work::Defrag | Work::Shrink(_) | Work::Grow(_) => {
            if let Some((old, new)) = models.sizes {
                let n = ext4r::resize::superblock(&dev)?.blocks_count();
                if n != old && n != new {
                    bail!("{n} blocks: neither the old size {old} nor the new {new}");
                }
            }
            let now = image::manifest(dev)?;
            if &now != manifest {
                let lost: Vec<&String> = manifest
                    .iter()
                    .filter(|(p, v)| now.get(*p) != Some(v))
                    .map(|(p, _)| p)
                    .take(5)
                    .collect();
                bail!("files changed or lost: {lost:?}");
            }
        }
        Work::Fsck => {}
        Work::Mount(_) => {
            let Some(model) = models.mount else {
                bail!("no model");
            };
            // The kernel's files around the workload's directory: as they
            // were.
            let outside = |m: image::Manifest| -> image::Manifest {
                let under = format!("{}/", mountload::DIR);
                m.into_iter()
                    .filter(|(p, _)| !p.starts_with(&under))
                    .collect()
            };
            let now = outside(image::manifest(dev)?);
            if now != outside(manifest.clone()) {
                let changed = manifest
                    .keys()
                    .chain(now.keys())
                    .find(|&p| manifest.get(p) != now.get(p));
                bail!("a file outside {} changed: {changed:?}", mountload::DIR);
            }
            let dev = ext4r::device::FileDevice::open(img, Default::default())?;
            let (seen, contents) = mountload::observe(dev)?;
            mountload::judge(model, &seen, &contents, cut, models.total)?;
        }
        Work::FastCommit => {
            let Some(t) = models.fc else {
                bail!("no model");
            };
            let seen = image::manifest(dev)?;
            let ok = seen == t.recovered
                || seen == t.written
                || (who == "e2fsck" && (seen == t.e2fsck || stale_head));
            if !ok {
                let diff: Vec<&String> = t
                    .recovered
                    .keys()
                    .chain(seen.keys())
                    .filter(|p| t.recovered.get(*p) != seen.get(*p))
                    .take(5)
                    .collect();
                bail!("the tree is neither the recovered one nor it written to (first differences from the recovered one: {diff:?})");
            }
        }
        Work::Api { .. } => {
            let Some((states, acked)) = models.api else {
                bail!("no model");
            };
            let seen = apiload::observe(dev)?;
            let done = acked.iter().filter(|&&a| a <= cut).count();
            let exact = (done..states.len().min(done + 2)).any(|m| states[m] == seen);
            let torn = || match (states.get(done), states.get(done + 1)) {
                (Some(old), Some(new)) => apiload::torn_between(old, new, &seen),
                _ => false,
            };
            if !exact && !torn() {
                let want = &states[done.min(states.len() - 1)];
                let differing = want
                    .keys()
                    .chain(seen.keys())
                    .find(|&p| want.get(p) != seen.get(p))
                    .map(|p| {
                        let len = |t: &apiload::Tree| t.get(p).map(|v| v.as_ref().map(Vec::len));
                        format!(
                            "{p}: expected length {:?}, found {:?}",
                            len(want),
                            len(&seen)
                        )
                    });
                bail!(
                    "the tree is no state from operation {done} on: {} paths, expected {} \
                     (first differing: {})",
                    seen.len(),
                    want.len(),
                    differing.unwrap_or_default()
                );
            }
        }
        Work::Txn { .. } => {
            let Some((model, acked)) = models.txn else {
                bail!("no model");
            };
            let seen = txnload::observe(dev)?;
            let done = acked.iter().filter(|&&a| a <= cut).count();
            let ok = (done..model.len().min(done + 2)).find(|&m| model[m] == seen);
            if ok.is_none() {
                let near: BTreeMap<_, _> = model.get(done).cloned().unwrap_or_default();
                bail!(
                    "files {seen:?} are no committed state from transaction {done} on \
                     (expected at least {near:?})"
                );
            }
        }
    }
    Ok(())
}
