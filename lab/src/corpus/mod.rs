//! `cargo xtask corpus`: how a checker's verdicts on the e2fsprogs test images
//! (`../shared/corpus/e2fsprogs`, see its README) agree with e2fsck's.
//!
//! - `check`: `CMD -fn IMAGE` on each pristine image vs verdicts.tsv (the rule is
//!   in [`verdicts`]).
//! - `repair`: `CMD -fy`, then `e2fsck -fn` and `CMD -fn` on the result; with
//!   `--preen`, `CMD -p` vs a live `e2fsck -p` (cached).
//! - `diff [--mode fn|fy]`: the checker's output vs e2fsck's, line for line
//!   (normalised as [`diff`] says).
//! - `same --base BIN`: the checker against an earlier build of ours, byte
//!   for byte (output, exit, repaired image; see [`same`]).
//!
//! Every image is gunzipped into a private temp dir and deleted after use; the
//! corpus itself is only read. Each run of a checker has a time limit, after
//! which its process group is killed (e2fsck 1.47.0 loops on some images).
//! Logs of every run stay in `target/xtask-corpus/<mode>/` for reading.

mod check;
pub(crate) mod class;
mod diff;
mod repair;
mod same;
pub(crate) use same::now;
mod verdicts;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use crate::measure::{self, RunOpts};
use crate::util::{self, TempDir};
use class::Outcome;
use verdicts::Verdict;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// `CMD -fn` on every image; agreement with e2fsck's verdicts.
    Check(check::Args),
    /// `CMD -fy`, then `e2fsck -fn` and `CMD -fn` on the result (or `--preen`).
    Repair(repair::Args),
    /// `e2fsck -fn|-fy` and `CMD -fn|-fy`: is the output the same?
    Diff(diff::Args),
    /// `CMD` against an earlier build: -fn, -fy, output, exit, image bytes.
    Same(same::Args),
}

/// Options of both modes.
#[derive(clap::Args, Clone)]
struct Common {
    /// The checker, a whitespace-separated command line, given `-fn IMAGE` etc.
    /// [default: build and run `target/release/ext4r fsck`]
    #[arg(long, value_name = "CMD")]
    fsck: Option<String>,
    /// Seconds before a run is killed (its whole process group).
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    timeout: u64,
    /// Images checked in parallel [default: the number of CPUs].
    #[arg(long, short = 'j', value_name = "N")]
    jobs: Option<usize>,
    /// Only images whose test name contains this.
    #[arg(long, value_name = "SUBSTR")]
    filter: Option<String>,
    /// Also write the per-image results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// One line per image as it finishes.
    #[arg(long, short = 'v')]
    verbose: bool,
    /// The corpus (default: `<repo>/../shared/corpus/e2fsprogs`).
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,
    /// Where to unpack images (a private temp dir is made inside).
    #[arg(long, value_name = "DIR", default_value = "/tmp")]
    tmp: PathBuf,
}

pub fn run(args: &Args) -> Result<()> {
    util::install_interrupt_handler();
    match &args.mode {
        Mode::Check(a) => check::run(a),
        Mode::Repair(a) => repair::run(a),
        Mode::Diff(a) => diff::run(a),
        Mode::Same(a) => same::run(a),
    }
}

/// What a mode needs to run a checker on the corpus.
struct Ctx {
    dir: PathBuf,
    verdicts: Vec<Verdict>,
    fsck: Vec<OsString>,
    fsck_label: String,
    limit: Duration,
    jobs: usize,
    logdir: PathBuf,
    tmp: TempDir,
    verbose: bool,
}

/// The corpus at its default place, when it is there.
pub fn default_corpus_dir() -> Option<PathBuf> {
    let d = util::repo_root().join("../shared/corpus/e2fsprogs");
    d.join("verdicts.tsv").is_file().then_some(d)
}

impl Ctx {
    fn new(c: &Common, mode: &str) -> Result<Ctx> {
        let dir = match &c.corpus {
            Some(d) => d.clone(),
            None => util::repo_root().join("../shared/corpus/e2fsprogs"),
        };
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        let tsv = dir.join("verdicts.tsv");
        let text = std::fs::read_to_string(&tsv).with_context(|| {
            format!(
                "cannot read {} (is the corpus there? --corpus DIR)",
                tsv.display()
            )
        })?;
        let mut verdicts = verdicts::parse(&text)?;
        if let Some(f) = &c.filter {
            verdicts.retain(|v| v.test.contains(f.as_str()));
            if verdicts.is_empty() {
                bail!("--filter {f:?} matches no image");
            }
        }
        let fsck = match &c.fsck {
            Some(cmd) => util::resolve_cmd(cmd)?,
            None => util::release_ext4r("fsck")?,
        };
        let fsck_label = fsck
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        let logdir = util::target_dir().join("xtask-corpus").join(mode);
        if logdir.exists() {
            std::fs::remove_dir_all(&logdir)
                .with_context(|| format!("cannot clear {}", logdir.display()))?;
        }
        std::fs::create_dir_all(&logdir)
            .with_context(|| format!("cannot create {}", logdir.display()))?;
        let jobs = c
            .jobs
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1)
            .max(1);
        if c.timeout == 0 {
            bail!("--timeout must be at least 1 second");
        }
        Ok(Ctx {
            dir,
            verdicts,
            fsck,
            fsck_label,
            limit: Duration::from_secs(c.timeout),
            jobs,
            logdir,
            tmp: TempDir::new_in(&c.tmp, "ext4r-corpus-")?,
            verbose: c.verbose,
        })
    }

    fn header(&self, what: &str) {
        println!(
            "corpus {what}: {} images from {}, checker `{}`, timeout {}s, {} jobs",
            self.verdicts.len(),
            self.dir.display(),
            self.fsck_label,
            self.limit.as_secs(),
            self.jobs
        );
        println!("logs in {}", self.logdir.display());
    }

    /// Gunzips `<test>/image.gz` to a fresh file `<tmp>/<test>.<tag>.img`.
    fn unpack(&self, test: &str, tag: &str) -> Result<Scratch> {
        let dest = self.tmp.path().join(format!("{test}.{tag}.img"));
        gunzip(&self.dir.join(test).join("image.gz"), &dest)?;
        Ok(Scratch(dest))
    }

    /// The `-j JOURNAL` arguments an image needs (none for most), or why it is
    /// skipped: its upstream test passes an external journal (`-j journal.img`,
    /// from the test's `journal.gz`), and without it there is no fair verdict.
    fn journal_args(&self, v: &Verdict) -> Result<Result<Journal, String>> {
        if !v.needs_external_journal() {
            return Ok(Ok(Journal {
                args: Vec::new(),
                _file: None,
            }));
        }
        let gz = self.dir.join(&v.test).join("journal.gz");
        if !gz.is_file() {
            return Ok(Err(
                "needs its external journal (upstream passes -j journal.img), \
                 and the corpus has no journal.gz"
                    .into(),
            ));
        }
        let dest = self.tmp.path().join(format!("{}.journal.img", v.test));
        gunzip(&gz, &dest)?;
        let file = Scratch(dest);
        Ok(Ok(Journal {
            args: vec!["-j".into(), file.path().into()],
            _file: Some(file),
        }))
    }

    /// Runs `argv ARGS IMAGE` with the time limit; logs to `<logdir>/<name>.{out,err}`.
    fn run(
        &self,
        argv: &[OsString],
        args: &[OsString],
        image: &Path,
        v: &Verdict,
        name: &str,
    ) -> Result<Run> {
        let (prog, pre) = argv.split_first().context("empty command line")?;
        let mut cmd = Command::new(prog);
        cmd.args(pre).args(args).arg(image);
        if let Some(t) = v.e2fsck_time() {
            cmd.env("E2FSCK_TIME", t);
        }
        let out = self.logdir.join(format!("{name}.out"));
        let err = self.logdir.join(format!("{name}.err"));
        let opts = RunOpts {
            stderr: Some(&err),
            timeout: Some(self.limit),
            discard_stdout: false,
        };
        let sample = measure::run_measured_with(&mut cmd, &out, opts)?;
        let stderr = String::from_utf8_lossy(&std::fs::read(&err).unwrap_or_default()).into_owned();
        let outcome = Outcome::of_run(
            sample.status,
            sample.timed_out,
            &stderr,
            self.limit.as_secs(),
        );
        let mut head = first_lines(&stderr, 3);
        if head.is_empty() {
            let stdout =
                String::from_utf8_lossy(&std::fs::read(&out).unwrap_or_default()).into_owned();
            head = first_lines(&stdout, 3)
                .into_iter()
                .map(|l| format!("(stdout) {l}"))
                .collect();
        }
        Ok(Run {
            outcome,
            wall: sample.wall,
            peak_rss: sample.peak_rss,
            head,
        })
    }

    /// Calls `f` on every verdict, `jobs` at a time, and returns the results in
    /// corpus order. Stops early on Ctrl-C or the first error.
    fn each<R: Send>(&self, f: impl Fn(&Verdict) -> Result<R> + Sync) -> Result<Vec<R>> {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<R>>> =
            Mutex::new((0..self.verdicts.len()).map(|_| None).collect());
        let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..self.jobs.min(self.verdicts.len()) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(v) = self.verdicts.get(i) else { break };
                    let stop =
                        util::interrupted() || failure.lock().map(|g| g.is_some()).unwrap_or(true);
                    if stop {
                        break;
                    }
                    match f(v).with_context(|| v.test.clone()) {
                        Ok(r) => {
                            if let Ok(mut g) = results.lock() {
                                g[i] = Some(r);
                            }
                        }
                        Err(e) => {
                            if let Ok(mut g) = failure.lock() {
                                g.get_or_insert(e);
                            }
                        }
                    }
                });
            }
        });
        util::check_interrupted()?;
        if let Some(e) = failure.into_inner().ok().flatten() {
            return Err(e);
        }
        let results = results
            .into_inner()
            .map_err(|_| anyhow::anyhow!("a worker panicked"))?;
        results
            .into_iter()
            .collect::<Option<Vec<R>>>()
            .context("a worker stopped early")
    }
}

/// One classified checker run.
#[derive(Clone, Debug)]
struct Run {
    outcome: Outcome,
    wall: Duration,
    peak_rss: u64,
    /// The first lines of stderr (or, if it was empty, of stdout).
    head: Vec<String>,
}

impl Run {
    fn bad(&self) -> bool {
        matches!(
            self.outcome.class,
            class::Class::Crash | class::Class::Timeout
        )
    }
}

/// Extra arguments for an external journal, and the unpacked journal they name.
struct Journal {
    args: Vec<OsString>,
    _file: Option<Scratch>,
}

/// An unpacked image, deleted when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn gunzip(src: &Path, dest: &Path) -> Result<()> {
    let out = File::create(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let status = Command::new("gzip")
        .arg("-dc")
        .arg(src)
        .stdin(Stdio::null())
        .stdout(out)
        .status()
        .context("cannot run gzip")?;
    if !status.success() {
        bail!("gzip -dc {} failed: {status}", src.display());
    }
    Ok(())
}

fn first_lines(text: &str, n: usize) -> Vec<String> {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !is_banner(l))
        .take(n)
        .map(|l| {
            if l.chars().count() > 110 {
                format!("{}…", l.chars().take(110).collect::<String>())
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// A checker's version line ("e2fsck 1.47.0 (5-Feb-2023)", "fsck.ext4r
/// 0.1.0"), which both print first on stderr and which says nothing
/// about the run.
fn is_banner(line: &str) -> bool {
    let mut w = line.split(' ');
    let (Some(prog), Some(ver)) = (w.next(), w.next()) else {
        return false;
    };
    (prog == "e2fsck" || prog.starts_with("fsck."))
        && ver.split('.').count() == 3
        && ver
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn percent(x: usize, y: usize) -> f64 {
    if y == 0 {
        0.0
    } else {
        100.0 * x as f64 / y as f64
    }
}

/// Prints rows as left-aligned columns; the last column is free text.
fn print_columns(rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r.iter().take(cols.saturating_sub(1))) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            let w = widths[i];
            let _ = write!(line, "{c:<w$}  ");
        }
        println!("{}", line.trim_end());
    }
}

/// One run's record in the `--json` report.
fn json_run(r: &Run) -> serde_json::Value {
    serde_json::json!({
        "class": r.outcome.class.token(),
        "detail": r.outcome.detail,
        "wall_ms": (r.wall.as_secs_f64() * 10_000.0).round() / 10.0,
        "peak_rss": r.peak_rss,
        "head": r.head,
    })
}

fn write_json(path: &Path, doc: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads() {
        assert_eq!(first_lines("\n a\n\nb  \nc\nd\n", 3), vec![" a", "b", "c"]);
        assert!(first_lines(&"x".repeat(200), 1)[0].ends_with('…'));
        assert_eq!(
            first_lines(
                "e2fsck 1.47.0 (5-Feb-2023)\nfsck.ext4r 0.1.0\nBad magic\n",
                3
            ),
            vec!["Bad magic"]
        );
    }
}
