//! `cargo xtask damage`: a damage campaign against our repair, with e2fsck
//! as the bar (issue 13).
//!
//! Six configurations (ext4 defaults, ext4 without metadata_csum but with
//! uninit_bg, ext3, ext4 with 1 KiB blocks, inline_data, orphan_file and
//! quota, ext4 bigalloc, ext2) are populated through kernel loop mounts
//! and cached in /dev/shm/ext4r-damage ([`images`]). Each case, named by
//! `--seed` and its index, copies one image, applies one random damage to
//! one kind of metadata ([`mutate`]), runs both checkers on copies and
//! reads every file of the original tree back after each repair
//! ([`case`], [`readback`]). A case fails on a crash or hang of ours, a
//! write by our `-n`, or a file e2fsck's repair kept intact and ours did
//! not; the table also counts verdict agreement, clean repairs and clean
//! second runs against e2fsck's.
//!
//! With `--same-as BIN` the campaign is a before/after check instead
//! (issue 30): each case's damaged image goes to an earlier build of ours
//! (`BIN fsck`) and to the checker under test, with no e2fsck and no
//! reading back, and a case fails when their output, exit or repaired
//! bytes differ ([`crate::same`]).

mod case;
mod images;
mod layout;
mod manifest;
mod mutate;
mod populate;
mod readback;
mod report;
mod rng;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::mountwalk;
use crate::util::{self, TempDir};

#[derive(clap::Args)]
pub struct Args {
    /// The campaign's seed: with a case index it names one damage.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many cases.
    #[arg(long, default_value_t = 100)]
    cases: u64,
    /// Index of the first case (rerun case N alone: --first N --cases 1).
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Damage kinds to draw from (default: all).
    #[arg(long, value_delimiter = ',')]
    kinds: Vec<String>,
    /// Configurations to draw from (default: all six).
    #[arg(long, value_delimiter = ',')]
    configs: Vec<String>,
    /// Cases run at once.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Keep failing cases here: the damaged image gzipped and a text file.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// The checker under test (default: the release build of ext4r).
    #[arg(long, value_name = "BIN")]
    ext4r: Option<PathBuf>,
    /// Seconds before a checker run is killed (a hang).
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// The CI sample: 26 cases; reports, but fails only on a crash, a hang
    /// or a write by -n (repairs are still being fixed).
    #[arg(long)]
    sample: bool,
    /// Build the base images again even when cached.
    #[arg(long)]
    rebuild: bool,
    /// Where the per-case results go (default target/xtask-damage/).
    #[arg(long, value_name = "FILE")]
    results: Option<PathBuf>,
    /// Print the table of earlier runs from their results files (parts of
    /// one run, or a run cut short) and stop.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    table: Vec<PathBuf>,
    /// Compare the checker with an earlier build (`BIN fsck`) instead of
    /// with e2fsck: output, exit and image bytes after -fn and -fy.
    #[arg(long, value_name = "BIN")]
    same_as: Option<PathBuf>,
    /// Mount each damaged image with `ext4r mount` instead of checking it:
    /// walk and read the whole tree and write a file in every directory,
    /// under the timeout; a case fails on a crash or hang of the driver,
    /// or when e2fsck found the image damaged before and clean after.
    /// Needs /dev/fuse.
    #[arg(long, conflicts_with = "same_as")]
    mount: bool,
    /// With --same-as: `E2FSCK_TIME` of both sides [default: now].
    #[arg(long, value_name = "SECS")]
    time: Option<i64>,
    /// Internal: read IMAGE back against --manifest, print lost files.
    #[arg(long, hide = true, value_name = "IMAGE")]
    readback: Option<PathBuf>,
    #[arg(long, hide = true, value_name = "FILE")]
    manifest: Option<PathBuf>,
}

const CACHE: &str = "/dev/shm/ext4r-damage";

pub fn run(args: &Args) -> Result<()> {
    if let Some(img) = &args.readback {
        let m = args
            .manifest
            .as_deref()
            .context("--readback needs --manifest")?;
        return readback::main(img, m);
    }
    if !args.table.is_empty() {
        let mut all = Vec::new();
        for f in &args.table {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("cannot read {}", f.display()))?;
            all.extend(text.lines().filter_map(report::Verdicts::parse));
        }
        print!("{}", report::table(&all));
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() || !Path::new("/dev/loop-control").exists() {
        println!("damage: skipped: needs root and loop devices to build the images");
        return Ok(());
    }
    for prog in ["mke2fs", "e2fsck", "tune2fs", "dumpe2fs", "gzip"] {
        if util::find_program(prog.as_ref()).is_none() {
            println!("damage: skipped: {prog} not found");
            return Ok(());
        }
    }
    util::install_interrupt_handler();
    let kinds = select(&args.kinds, mutate::KINDS, "kind")?;
    let names: Vec<&'static str> = images::CONFIGS.iter().map(|c| c.name).collect();
    let configs = select(&args.configs, &names, "configuration")?;
    let ext4r = match &args.ext4r {
        Some(p) => p.clone(),
        None => PathBuf::from(util::release_ext4r("fsck")?.remove(0)),
    };
    let xtask = std::env::current_exe().context("cannot find the xtask binary")?;
    let (first, cases) = if args.sample {
        (0, 26)
    } else {
        (args.first, args.cases)
    };
    let cache = Path::new(CACHE);
    std::fs::create_dir_all(cache).with_context(|| format!("cannot create {CACHE}"))?;

    let mut bases = Vec::new();
    for name in &configs {
        let cfg = images::config(name).context("unknown configuration")?;
        let base = images::prepare(cache, cfg, args.rebuild)?;
        let layout = layout::Layout::load(&base.img)?;
        let snap = match &base.snap {
            Some(s) => layout::Layout::load(s).ok(),
            None => None,
        };
        bases.push((base, layout, snap));
    }
    let work = TempDir::new_in(cache, "run-")?;
    let env = case::Env {
        seed: args.seed,
        kinds: &kinds,
        bases: &bases,
        ext4r,
        xtask,
        limit: Duration::from_secs(args.timeout.max(1)),
        work: work.path(),
    };
    if let Some(old) = &args.same_as {
        return run_same(args, &env, old, &work);
    }
    if args.mount {
        return run_mount(args, &env, &work);
    }
    let mut selection = String::new();
    if !args.kinds.is_empty() {
        selection += &format!(" --kinds {}", kinds.join(","));
    }
    if !args.configs.is_empty() {
        selection += &format!(" --configs {}", configs.join(","));
    }
    let results_path = args.results.clone().unwrap_or_else(|| {
        util::target_dir()
            .join("xtask-damage")
            .join(format!("seed{}-from{first}.tsv", args.seed))
    });
    if let Some(p) = results_path.parent() {
        std::fs::create_dir_all(p)?;
    }
    // Written case by case, so that a run cut short (Ctrl-C, the OOM
    // killer) keeps what it measured; `--table` adds files up.
    let tsv = Mutex::new(
        std::fs::File::create(&results_path)
            .with_context(|| format!("cannot create {}", results_path.display()))?,
    );
    if let Ok(mut f) = tsv.lock() {
        f.write_all(report::TSV_HEADER.as_bytes())?;
    }
    println!(
        "damage: seed {}, cases {first}..{}, {} kinds, configurations {}, {} jobs, timeout {}s",
        args.seed,
        first + cases,
        kinds.len(),
        configs.join(","),
        args.jobs,
        args.timeout
    );
    let start = Instant::now();
    let next = AtomicU64::new(first);
    let results: Mutex<Vec<case::CaseResult>> = Mutex::new(Vec::new());
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= first + cases || util::interrupted() {
                    break;
                }
                match case::run(&env, i) {
                    Ok(r) => {
                        finish_case(args, &r, &selection, &tsv);
                        let _ = std::fs::remove_dir_all(work.path().join(format!("case-{i}")));
                        if let Ok(mut v) = results.lock() {
                            v.push(r);
                        }
                    }
                    Err(e) => {
                        println!("case {i}: ERROR {e:#}");
                        if let Ok(mut v) = errors.lock() {
                            v.push(format!("case {i}: {e:#}"));
                        }
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|r| r.index);
    let errors = errors.into_inner().unwrap_or_default();
    summary(
        args,
        &results,
        &errors,
        &selection,
        &results_path,
        start.elapsed(),
    )
}

/// The `--same-as` campaign: every case's damaged image through both builds.
fn run_same(args: &Args, env: &case::Env<'_>, old: &Path, work: &TempDir) -> Result<()> {
    if !old.is_file() {
        bail!("--same-as {}: no such file", old.display());
    }
    let old: Vec<std::ffi::OsString> = vec![old.into(), "fsck".into()];
    let time = args.time.unwrap_or_else(crate::corpus::now);
    let (first, cases) = (args.first, args.cases);
    println!(
        "damage --same-as {}: seed {}, cases {first}..{}, {} jobs, E2FSCK_TIME {time}",
        old[0].to_string_lossy(),
        args.seed,
        first + cases,
        args.jobs,
    );
    let start = Instant::now();
    let next = AtomicU64::new(first);
    let tally = Mutex::new((0u64, Vec::<String>::new(), Vec::<String>::new()));
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= first + cases || util::interrupted() {
                    break;
                }
                let r = case::run_same(env, i, &old, time);
                let _ = std::fs::remove_dir_all(work.path().join(format!("case-{i}")));
                let Ok(mut t) = tally.lock() else { break };
                match r {
                    Ok((cfg, kind, desc, out)) if out.identical() => {
                        t.0 += 1;
                        println!(
                            "case {i:>4} [{cfg}] {kind:<10} identical ({}): {desc}",
                            out.summary
                        );
                        for n in &out.notes {
                            println!("       note: {n}");
                        }
                    }
                    Ok((cfg, kind, desc, out)) => {
                        let mut line = format!(
                            "case {i:>4} [{cfg}] {kind:<10} DIFFERS ({}): {desc}",
                            out.summary
                        );
                        for d in &out.differences {
                            line += &format!("\n       {d}");
                        }
                        println!("{line}");
                        t.1.push(line);
                    }
                    Err(e) => {
                        println!("case {i}: ERROR {e:#}");
                        t.2.push(format!("case {i}: {e:#}"));
                    }
                }
            });
        }
    });
    let (identical, differ, errors) = tally.into_inner().unwrap_or_default();
    if !differ.is_empty() {
        println!("\ndiffering cases:");
        for d in &differ {
            println!("{d}");
        }
    }
    for e in &errors {
        println!("not run: {e}");
    }
    println!(
        "damage --same-as: seed {}, {} cases compared in {}: {identical} identical, {} different, \
         {} not run",
        args.seed,
        identical + differ.len() as u64,
        util::fmt_duration(start.elapsed()),
        differ.len(),
        errors.len()
    );
    util::check_interrupted()?;
    if !differ.is_empty() || !errors.is_empty() {
        bail!("{} case(s) differ, {} not run", differ.len(), errors.len());
    }
    Ok(())
}

/// Entries a `--mount` case walks at most (the images hold a few
/// thousand; a damaged directory may loop).
const MOUNT_ENTRIES: usize = 20_000;

/// The `--mount` campaign: every case's damaged image served by
/// `ext4r mount`.
fn run_mount(args: &Args, env: &case::Env<'_>, work: &TempDir) -> Result<()> {
    if !Path::new("/dev/fuse").exists() {
        println!("damage --mount: skipped: no /dev/fuse");
        return Ok(());
    }
    let (first, cases) = if args.sample {
        (0, 26)
    } else {
        (args.first, args.cases)
    };
    println!(
        "damage --mount: seed {}, cases {first}..{}, {} jobs, watchdog {}s",
        args.seed,
        first + cases,
        args.jobs,
        env.limit.as_secs()
    );
    let start = Instant::now();
    let next = AtomicU64::new(first);
    #[derive(Default)]
    struct Tally {
        cases: u64,
        served: u64,
        served_ro: u64,
        refused: u64,
        entries: usize,
        errors: usize,
        writes: usize,
        damaged: u64,
        still: u64,
        failures: Vec<String>,
        not_run: Vec<String>,
    }
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= first + cases || util::interrupted() {
                    break;
                }
                let r = case::run_mount(env, i, MOUNT_ENTRIES);
                let Ok(mut t) = tally.lock() else { break };
                let c = match r {
                    Ok(c) => c,
                    Err(e) => {
                        println!("case {i}: ERROR {e:#}");
                        t.not_run.push(format!("case {i}: {e:#}"));
                        continue;
                    }
                };
                t.cases += 1;
                let head = format!("case {i:>4} [{}] {:<10}", c.cfg, c.kind);
                let mut bad = Vec::new();
                let mut said = match &c.verdict {
                    Ok(mountwalk::Verdict::Refused) => {
                        t.refused += 1;
                        "refused".to_string()
                    }
                    Ok(mountwalk::Verdict::Served(w)) => {
                        t.served += 1;
                        t.entries += w.entries;
                        t.errors += w.errors;
                        t.writes += w.writes_ok;
                        format!(
                            "served: {} entries, {} errors, {} writes",
                            w.entries, w.errors, w.writes_ok
                        )
                    }
                    Err(why) => {
                        bad.push(why.clone());
                        "FAILED".to_string()
                    }
                };
                match &c.read_only {
                    None => {}
                    Some(Ok(mountwalk::Verdict::Refused)) => said += ", refused read-only too",
                    Some(Ok(mountwalk::Verdict::Served(w))) => {
                        t.served_ro += 1;
                        t.entries += w.entries;
                        said += &format!(
                            ", served read-only: {} entries, {} errors",
                            w.entries, w.errors
                        );
                    }
                    Some(Err(why)) => {
                        bad.push(format!("read-only: {why}"));
                        said += ", read-only FAILED";
                    }
                }
                if let Some(after) = c.after {
                    t.damaged += 1;
                    if after != 0 {
                        t.still += 1;
                    } else {
                        bad.push(format!(
                            "e2fsck -fn exit {} before the mount, clean after it",
                            c.before
                        ));
                    }
                }
                let e2 = match c.after {
                    Some(a) => format!("e2fsck {} -> {a}", c.before),
                    None => format!("e2fsck {}", c.before),
                };
                if bad.is_empty() {
                    println!("{head} {said}; {e2}: {}", c.desc);
                } else {
                    let line = format!(
                        "{head} {said}; {e2}: {}\n       {}",
                        c.desc,
                        bad.join("\n       ")
                    );
                    println!("{line}");
                    t.failures.push(line);
                }
                let _ = std::fs::remove_dir_all(work.path().join(format!("case-{i}")));
            });
        }
    });
    let t = tally.into_inner().unwrap_or_default();
    if !t.failures.is_empty() {
        println!(
            "\nfailing cases (each reruns alone with --mount --seed {} --first N --cases 1):",
            args.seed
        );
        for f in &t.failures {
            println!("{f}");
        }
    }
    for e in &t.not_run {
        println!("not run: {e}");
    }
    println!(
        "damage --mount: seed {}, {} cases in {}: {} served ({} entries walked, {} errors \
         answered, {} probe files written), {} refused read-write ({} of them served \
         read-only); {} of {} damaged images still damaged after the unmount; {} failures, \
         {} not run",
        args.seed,
        t.cases,
        util::fmt_duration(start.elapsed()),
        t.served,
        t.entries,
        t.errors,
        t.writes,
        t.refused,
        t.served_ro,
        t.still,
        t.damaged,
        t.failures.len(),
        t.not_run.len()
    );
    util::check_interrupted()?;
    if !t.failures.is_empty() || !t.not_run.is_empty() {
        bail!(
            "{} case(s) failed, {} not run",
            t.failures.len(),
            t.not_run.len()
        );
    }
    Ok(())
}

fn select(wanted: &[String], all: &[&'static str], what: &str) -> Result<Vec<&'static str>> {
    if wanted.is_empty() {
        return Ok(all.to_vec());
    }
    wanted
        .iter()
        .map(|w| {
            all.iter()
                .copied()
                .find(|a| a == w)
                .with_context(|| format!("unknown {what} {w:?} (known: {})", all.join(", ")))
        })
        .collect()
}

fn finish_case(args: &Args, r: &case::CaseResult, selection: &str, tsv: &Mutex<std::fs::File>) {
    let failures = r.failures();
    let tag = if r.fatal() {
        "FAIL"
    } else if failures.is_empty() {
        "ok"
    } else {
        "differs"
    };
    println!(
        "case {:>4} [{}] {:<10} {:<5} ours -fn {:<7} -fy {:<7} then e2fsck {:<7} | e2fsck -fn {:<7} -fy {:<7} | lost ours {} e2fsck {}: {}",
        r.index,
        r.cfg,
        r.kind,
        tag,
        r.ours_fn.outcome.detail,
        r.ours_fy.outcome.detail,
        r.ours_then_e2.outcome.detail,
        r.e2_fn.outcome.detail,
        r.e2_fy.outcome.detail,
        r.ours_lost.len(),
        r.e2_lost.len(),
        r.desc
    );
    for f in &failures {
        println!("       {f}");
    }
    if let Ok(mut f) = tsv.lock() {
        if let Err(e) = f.write_all(report::tsv_line(r).as_bytes()) {
            println!("       could not record case {}: {e}", r.index);
        }
    }
    if !failures.is_empty() {
        if let Some(dir) = &args.keep {
            if let Err(e) = report::keep(dir, args.seed, r, selection) {
                println!("       could not keep case {}: {e:#}", r.index);
            }
        }
    }
}

fn summary(
    args: &Args,
    results: &[case::CaseResult],
    errors: &[String],
    selection: &str,
    results_path: &Path,
    took: Duration,
) -> Result<()> {
    let all: Vec<&case::CaseResult> = results.iter().collect();
    let failing: Vec<&&case::CaseResult> =
        all.iter().filter(|r| !r.failures().is_empty()).collect();
    if !failing.is_empty() {
        println!("\nfailing cases:");
        for r in &failing {
            print!("{}", report::describe(args.seed, r, selection));
        }
    }
    let verdicts: Vec<report::Verdicts> = all.iter().map(|r| report::Verdicts::of(r)).collect();
    println!("\n{}", report::table(&verdicts));
    for e in errors {
        println!("not run: {e}");
    }
    println!(
        "damage: {} cases in {}, per-case results in {}{}",
        results.len(),
        util::fmt_duration(took),
        results_path.display(),
        args.keep
            .as_ref()
            .map(|k| format!(", failing cases kept in {}", k.display()))
            .unwrap_or_default()
    );
    util::check_interrupted()?;
    let fatal: Vec<_> = all.iter().filter(|r| r.fatal()).collect();
    let hard = all
        .iter()
        .filter(|r| r.crashed() || r.hung() || r.fn_wrote)
        .count();
    if args.sample {
        println!(
            "damage --sample is informational: {} case(s) lost files e2fsck kept, repaired worse \
             or gave another -n verdict; it fails only on a crash, a hang or a write by -n ({hard})",
            failing.len()
        );
        if hard > 0 {
            bail!("{hard} case(s) crashed, hung or wrote with -n");
        }
        return Ok(());
    }
    if !errors.is_empty() {
        bail!("{} case(s) could not be run", errors.len());
    }
    if !fatal.is_empty() {
        bail!(
            "{} case(s) failed: crash, hang, write by -n, or files lost that e2fsck kept",
            fatal.len()
        );
    }
    Ok(())
}
