//! `cargo xtask bench defrag`: `e4defrag-r` against `e4defrag` on the images
//! of `cargo xtask fragment` (kernel-written, cached with their seeds).
//!
//! - `score`: on a loop-mounted twin, `e4defrag -c -v` (run twice: its
//!   first run after a mount counts extent-tree records, later runs the
//!   kernel's merged extent cache) against `e4defrag-r -c -v` on the mount
//!   and on the unmounted image: per-file now/best/size lines, the
//!   numbering, the five ranked files and the totals must be identical.
//! - `online`: twins mounted, every file read (pages cached, as after
//!   writing them), then `e4defrag DIR` and `e4defrag-r DIR` timed,
//!   alternating which goes first; afterwards the total extent count, every
//!   file's sha256, and `e2fsck -fn` after unmounting.
//! - `relevant`: the `small` tree copied to twin images on the disk (not
//!   tmpfs), both mounted; `e4defrag-r -r` on one (its gap figures, hashes
//!   before and after, e2fsck after); then cold-cache reads of both trees,
//!   alternating between them, `--reads` times each: `tar cf - | cat`, which
//!   reads the data, the issue's `tar cf /dev/null`, which GNU tar answers
//!   without reading file data, and the first after the second (the data
//!   alone, the part -r changes). Medians are reported, with the read
//!   requests the disk served.
//! - `offline`: e4defrag-r on each unmounted image against e4defrag-r
//!   online on a twin: extent totals (offline must leave no more), times,
//!   sha256 of every file through a mount, `e2fsck -fn`.
//! - `relevant-offline`: as `relevant`, with `-r` run on the unmounted
//!   image (`--path /tree`) instead of through the kernel.
//! - `free`: `-f` on the unmounted `holes` and `filldel` images: largest
//!   free extent and e2freefrag's histogram before and after, hashes,
//!   `e2fsck -fn`.

mod offline;
mod online;
mod relevant;
mod score;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, ensure, Context, Result};

use crate::fragment::{self, Case};
use crate::util::{self, TempDir};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Score,
    Online,
    Relevant,
    Offline,
    RelevantOffline,
    Free,
}

#[derive(clap::Args)]
pub struct DefragArgs {
    /// What to measure, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "score,online,relevant"
    )]
    parts: Vec<Part>,
    /// Images for `score` and `online`, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "interleave,filldel,small,big"
    )]
    cases: Vec<Case>,
    /// Seed of the images.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where `cargo xtask fragment` keeps the images.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm/ext4r-defrag")]
    cache: PathBuf,
    /// Build the images again.
    #[arg(long)]
    rebuild: bool,
    /// Timed runs per tool in `online` (alternating which goes first).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Where twins are made (tmpfs).
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Where the `relevant` image lives: must be on a disk, not tmpfs
    /// [default: target/xtask-defrag].
    #[arg(long)]
    disk_dir: Option<PathBuf>,
    /// Cold reads per measurement in `relevant` (the median is reported).
    #[arg(long, default_value_t = 5)]
    reads: usize,
    /// Our binary instead of `cargo xtask dist`'s (`e4defrag` is appended).
    #[arg(long, value_name = "CMD")]
    ours_cmd: Option<String>,
}

pub fn run(a: &DefragArgs) -> Result<()> {
    ensure!(
        rustix::process::geteuid().is_root(),
        "bench defrag needs root (loop devices, mounts, drop_caches)"
    );
    for tool in ["e4defrag", "e2fsck", "sha256sum", "tar"] {
        ensure!(
            util::find_program(tool.as_ref()).is_some(),
            "{tool} not found on $PATH"
        );
    }
    let ours: Vec<OsString> = match &a.ours_cmd {
        Some(c) => util::resolve_cmd(c)?,
        None => vec![util::shipped_ext4r()?.into()],
    };
    let tmp = TempDir::new_in(&a.dir, "ext4r-defrag-bench-")?;
    let mut failures = Vec::new();
    if [Part::Score, Part::Online, Part::Offline]
        .iter()
        .any(|p| a.parts.contains(p))
    {
        for &case in &a.cases {
            let img = fragment::image(case, a.seed, &a.cache, a.rebuild)?;
            if a.parts.contains(&Part::Score) {
                if let Err(e) = score::score(&ours, case, &img, tmp.path()) {
                    failures.push(format!("score {}: {e:#}", case.name()));
                }
            }
            if a.parts.contains(&Part::Online) {
                if let Err(e) = online::online(&ours, case, &img, tmp.path(), a.runs) {
                    failures.push(format!("online {}: {e:#}", case.name()));
                }
            }
            if a.parts.contains(&Part::Offline) {
                if let Err(e) = offline::offline(&ours, case, &img, tmp.path()) {
                    failures.push(format!("offline {}: {e:#}", case.name()));
                }
            }
        }
    }
    for (part, offline) in [(Part::Relevant, false), (Part::RelevantOffline, true)] {
        if !a.parts.contains(&part) {
            continue;
        }
        let img = fragment::image(Case::Small, a.seed, &a.cache, a.rebuild)?;
        let disk = a
            .disk_dir
            .clone()
            .unwrap_or_else(|| util::target_dir().join("xtask-defrag"));
        if let Err(e) = relevant::relevant(&ours, &img, &disk, a.reads, offline) {
            failures.push(format!("relevant: {e:#}"));
        }
    }
    if a.parts.contains(&Part::Free) {
        for case in [Case::Holes, Case::Filldel] {
            let img = fragment::image(case, a.seed, &a.cache, a.rebuild)?;
            if let Err(e) = offline::free(&ours, case, &img, tmp.path()) {
                failures.push(format!("free {}: {e:#}", case.name()));
            }
        }
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    Ok(())
}

/// `e4defrag-r` as configured. Callers that name an unmounted image add
/// `--image`: an image kept on a disk lies on a mounted ext4 (the host's),
/// where a plain path names a file to defragment online, as for e4defrag.
pub(super) fn ours_cmd(ours: &[OsString]) -> Command {
    let mut c = Command::new(&ours[0]);
    c.args(&ours[1..]).arg("e4defrag");
    c
}

/// Runs a command, returning its stdout; fails on a signal or a spawn error
/// (a non-zero exit is the caller's to judge through `ok`).
pub(super) fn output(cmd: &mut Command, ok: &[i32]) -> Result<String> {
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", util::display_cmd(cmd)))?;
    let code = out.status.code().unwrap_or(-1);
    ensure!(
        ok.contains(&code),
        "{} exited {code}: {}",
        util::display_cmd(cmd),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(super) fn twin(img: &Path, dir: &Path, name: &str) -> Result<PathBuf> {
    let t = dir.join(name);
    let _ = std::fs::remove_file(&t);
    let st = Command::new("cp")
        .arg("--sparse=always")
        .arg(img)
        .arg(&t)
        .status()?;
    ensure!(st.success(), "cp {} failed", img.display());
    Ok(t)
}

/// sha256 of every file under `root` (lost+found aside), sorted by path.
pub(super) fn hashes(root: &Path) -> Result<String> {
    output(
        Command::new("sh").arg("-c").arg(format!(
            "cd '{}' && find . -type f ! -path './lost+found/*' -print0 | sort -z | xargs -0 -r sha256sum",
            root.display()
        )),
        &[0],
    )
}
