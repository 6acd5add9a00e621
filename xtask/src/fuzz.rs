//! `cargo xtask fuzz`: runs cargo-fuzz targets under `fuzz/` (its own workspace,
//! nightly toolchain) for a fixed time each and reports crashes.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use ext4r_lab::util::{self, fmt_duration};

const TOOLCHAIN: &str = "nightly";

#[derive(clap::Args)]
pub struct Args {
    /// Seconds to fuzz each target (libFuzzer `-max_total_time`; build time excluded).
    #[arg(long, default_value_t = 60)]
    secs: u64,
    /// The cargo-fuzz project (default: `<repo>/fuzz`).
    #[arg(long, value_name = "DIR")]
    fuzz_dir: Option<PathBuf>,
    /// Targets to run [default: all of `cargo fuzz list`].
    targets: Vec<String>,
}

enum Outcome {
    Passed { runs: Option<u64> },
    Crashed { artifacts: Vec<PathBuf> },
    Error(String),
}

pub fn run(args: &Args) -> Result<()> {
    let root = util::repo_root();
    let fuzz_dir = match &args.fuzz_dir {
        Some(dir) => std::path::absolute(dir)?,
        None => root.join("fuzz"),
    };
    if !fuzz_dir.join("Cargo.toml").is_file() {
        bail!(
            "no cargo-fuzz project: {} does not exist, so there is nothing to fuzz \
             (expected a `cargo fuzz init` layout: fuzz/Cargo.toml, fuzz/fuzz_targets/*.rs)",
            fuzz_dir.join("Cargo.toml").display()
        );
    }
    ensure_cargo_fuzz()?;
    let available = list_targets(&fuzz_dir)?;
    if available.is_empty() {
        bail!("{} has no fuzz targets", fuzz_dir.display());
    }
    let targets: Vec<String> = if args.targets.is_empty() {
        available.clone()
    } else {
        for t in &args.targets {
            if !available.contains(t) {
                bail!(
                    "unknown fuzz target {t:?}; available: {}",
                    available.join(", ")
                );
            }
        }
        args.targets.clone()
    };

    let logdir = root.join("target").join("xtask-fuzz");
    std::fs::create_dir_all(&logdir)?;
    let mut results = Vec::new();
    for t in &targets {
        let outcome = fuzz_one(&fuzz_dir, &logdir, t, args.secs)?;
        results.push((t.as_str(), outcome));
    }

    let dir_arg = match &args.fuzz_dir {
        Some(_) => format!(" --fuzz-dir {}", fuzz_dir.display()),
        None => String::new(),
    };
    println!("\nfuzz summary ({}s per target):", args.secs);
    let mut bad = 0;
    for (t, outcome) in &results {
        match outcome {
            Outcome::Passed { runs } => {
                let runs = runs.map_or(String::new(), |n| format!(" ({n} runs)"));
                println!("  {t:<24} ok{runs}");
            }
            Outcome::Crashed { artifacts } => {
                bad += 1;
                println!("  {t:<24} CRASH");
                for a in artifacts {
                    println!("      artifact: {}", a.display());
                    println!(
                        "      reproduce: cargo +{TOOLCHAIN} fuzz run{dir_arg} {t} {}",
                        a.display()
                    );
                }
            }
            Outcome::Error(why) => {
                bad += 1;
                println!("  {t:<24} ERROR: {why}");
            }
        }
    }
    if bad > 0 {
        bail!(
            "{bad} of {} fuzz target(s) crashed or failed",
            results.len()
        );
    }
    Ok(())
}

/// Installs cargo-fuzz if `cargo +nightly fuzz` does not work yet.
fn ensure_cargo_fuzz() -> Result<()> {
    let works = |args: &[&str]| {
        cargo_proxy(TOOLCHAIN)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !works(&["--version"]) {
        bail!("the {TOOLCHAIN} toolchain is missing: rustup toolchain install {TOOLCHAIN}");
    }
    if works(&["fuzz", "--version"]) {
        return Ok(());
    }
    println!("cargo-fuzz is not installed; installing it with `cargo install cargo-fuzz`");
    util::run_step(
        "install cargo-fuzz",
        util::cargo().args(["install", "cargo-fuzz"]),
    )?;
    Ok(())
}

/// `cargo fuzz list`, falling back to the file names in fuzz/fuzz_targets/.
fn list_targets(fuzz_dir: &Path) -> Result<Vec<String>> {
    let out = cargo_fuzz(fuzz_dir, "list")
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo fuzz list")?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect());
    }
    eprintln!("cargo fuzz list failed; using the files in fuzz/fuzz_targets/");
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(fuzz_dir.join("fuzz_targets"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "rs") {
            if let Some(stem) = path.file_stem() {
                names.insert(stem.to_string_lossy().into_owned());
            }
        }
    }
    Ok(names.into_iter().collect())
}

/// `cargo +nightly fuzz <sub> --fuzz-dir <dir>`, run from the project above it.
fn cargo_fuzz(fuzz_dir: &Path, sub: &str) -> Command {
    let mut cmd = cargo_proxy(TOOLCHAIN);
    cmd.args(["fuzz", sub, "--fuzz-dir"])
        .arg(fuzz_dir)
        .current_dir(fuzz_dir.parent().unwrap_or(fuzz_dir));
    cmd
}

fn artifact_files(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

/// Targets whose code runs on rayon's persistent worker threads: a
/// thread-local first touched on a worker during some input stays
/// registered (glibc's 32-byte `__cxa_thread_atexit_impl` record) until
/// exit, which LeakSanitizer reports as that input's leak. Leaks are not
/// what these targets hunt (panics, hangs and unbounded allocation are,
/// and `-rss_limit_mb` still applies), so leak detection is off for them.
const THREADED: &[&str] = &["fsck", "repair"];

/// Seeds of the mkfs option target: size, -E, -O, -t, -T, -b, -I, -i, -N,
/// -m, -g, -G, -C, -J size, -r, -L.
const MKFS_OPTS_SEEDS: &[&str] = &[
    "64M\n\n\next4\n",
    "100K\nstride=8,stripe_width=64\n^has_journal\next2\nsmall\n1024\n128\n4096\n\n5\n",
    "1G\nnum_backup_sb=1,packed_meta_blocks=1\nsparse_super2,^resize_inode\next4\nhuge\n4096\n256\n65536\n1000\n0\n32768\n16\n\n4\n1\nlabel\n",
    "16M\nresize=100000,orphan_file_size=64K\nbigalloc,orphan_file\next4\n\n1024\n\n\n\n\n\n\n16384\n",
    "3T\nencoding=utf8,quotatype=usrquota:prjquota\nquota,project,inline_data,meta_bg\next4\nlargefile\n",
];

/// Targets that read fs_walk's sparse-image input.
const SHARE_FS_WALK_SEEDS: &[&str] = &["fsck", "repair", "tune"];

fn fuzz_one(fuzz_dir: &Path, logdir: &Path, target: &str, secs: u64) -> Result<Outcome> {
    let log = logdir.join(format!("{target}.log"));
    let artifact_dir = fuzz_dir.join("artifacts").join(target);
    let before = artifact_files(&artifact_dir);
    println!("==> fuzz {target} for {secs}s (output: {})", log.display());
    let out = File::create(&log)?;
    let start = Instant::now();
    let mut cmd = cargo_fuzz(fuzz_dir, "run");
    cmd.arg(target);
    // Targets whose input is fs_walk's sparse image also start from its
    // committed seeds (libFuzzer writes new inputs to the first directory).
    if target == "mkfs_opts" {
        // Text fields, one a line (see the target): a few typed command
        // lines give the fuzzer the shape to mutate.
        let own = fuzz_dir.join("corpus").join(target);
        std::fs::create_dir_all(&own)?;
        for (i, seed) in MKFS_OPTS_SEEDS.iter().enumerate() {
            let path = own.join(format!("seed-{i}"));
            if !path.exists() {
                std::fs::write(path, seed)?;
            }
        }
    }
    if SHARE_FS_WALK_SEEDS.contains(&target) {
        let own = fuzz_dir.join("corpus").join(target);
        std::fs::create_dir_all(&own)?;
        cmd.arg(own).arg(fuzz_dir.join("corpus").join("fs_walk"));
    }
    cmd.arg("--");
    if THREADED.contains(&target) {
        cmd.arg("-detect_leaks=0");
    }
    let status = cmd
        .arg(format!("-max_total_time={secs}"))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .context("cannot run cargo fuzz")?;
    let took = start.elapsed();

    let text = String::from_utf8_lossy(&std::fs::read(&log)?).into_owned();
    // libFuzzer: "Test unit written to <path>"; also look for new files, in
    // case the message format changes.
    let mut artifacts: BTreeSet<PathBuf> = text
        .lines()
        .filter_map(|l| l.split_once("Test unit written to ").map(|(_, p)| p.trim()))
        .map(|p| fuzz_dir.parent().unwrap_or(fuzz_dir).join(p))
        .collect();
    artifacts.extend(artifact_files(&artifact_dir).difference(&before).cloned());
    // libFuzzer's last line on a clean finish: "Done 123456 runs in 60 second(s)".
    let runs = text.lines().rev().find_map(|l| {
        let rest = l.trim().strip_prefix("Done ")?;
        rest.split_whitespace().next()?.parse().ok()
    });

    let outcome = if !artifacts.is_empty() {
        Outcome::Crashed {
            artifacts: artifacts.into_iter().collect(),
        }
    } else if !status.success() {
        Outcome::Error(format!(
            "cargo fuzz run exited with {status}; see {}",
            log.display()
        ))
    } else {
        Outcome::Passed { runs }
    };
    match &outcome {
        Outcome::Passed { .. } => println!("<== fuzz {target}: ok in {}", fmt_duration(took)),
        _ => {
            println!("<== fuzz {target}: FAILED after {}", fmt_duration(took));
            print!("{}", util::tail(&log, 30));
        }
    }
    Ok(outcome)
}

/// `cargo` through the rustup proxy on `$PATH`, which understands `+nightly`
/// (`$CARGO` points at one toolchain's cargo binary, which does not).
fn cargo_proxy(toolchain: &str) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg(format!("+{toolchain}"))
        .current_dir(util::repo_root())
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO");
    cmd
}
