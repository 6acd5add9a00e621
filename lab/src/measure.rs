//! Measuring two command lines against each other (DESIGN.md §4: "measure against
//! the reference in one run"): alternate runs, per-child wall time, CPU time,
//! peak RSS and write volume, summaries and a table. Tool-agnostic, so that
//! `bench mkfs` and a later `bench fsck` share it.
//!
//! How each child is measured:
//! - **wall time**: `Instant` from just before spawn to the moment the child
//!   has exited (observed with `waitid(WEXITED|WNOWAIT)`).
//! - **peak RSS**: `ru_maxrss` from `wait4(2)` on that child's pid, i.e. the
//!   kernel's own per-process high-water mark, exact and not shared with other
//!   children (unlike `getrusage(RUSAGE_CHILDREN)`, which is a max over all of
//!   them). Caveat: at exec Linux folds the old (forked) address space's
//!   high-water mark into it, which would make xtask's own RSS a floor; the
//!   child resets that mark just before exec (see [`reset_peak_rss`]), and
//!   [`spawn_floor`] measures what floor remains so it can be printed.
//! - **I/O volume**: `wchar`, `write_bytes`, `rchar` and `read_bytes` from
//!   `/proc/<pid>/io`, read while the exited child is still a zombie (the
//!   `WNOWAIT` wait leaves it unreaped; the kernel keeps its I/O accounting
//!   until `wait4` reaps it). `wchar`/`rchar` count bytes passed to
//!   write-/read-like syscalls (the same hot or cold: what the tool asked
//!   for); `write_bytes`/`read_bytes` count bytes the block layer moved for
//!   the child, 0 on tmpfs or from a hot page cache. A cold run's
//!   `read_bytes` also holds the pages of the tool's own binary and the
//!   kernel's read-ahead around what it asked for.
//! - **timeout** (optional, [`RunOpts::timeout`]): the child gets its own
//!   process group and a watchdog thread SIGKILLs that group when the limit
//!   passes (or on Ctrl-C, which no longer reaches the child from the
//!   terminal). The main thread's blocking `waitid` keeps the wall time exact;
//!   the unreaped leader keeps the group id valid until the watchdog is joined.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::process::{Pid, WaitId, WaitIdOptions};

use crate::util::{self, fmt_bytes, fmt_duration};

/// One command line to measure: a name for the table, argv, extra environment.
#[derive(Clone, Debug)]
pub struct Tool {
    pub name: String,
    pub argv: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Send stdout to /dev/null instead of the log (for tools that stream data
    /// there, e.g. `ext4r cat`); stderr still goes to the log.
    pub discard_stdout: bool,
}

impl Tool {
    pub fn command(&self) -> Result<Command> {
        let (prog, args) = self
            .argv
            .split_first()
            .with_context(|| format!("{}: empty command line", self.name))?;
        let mut cmd = Command::new(prog);
        cmd.args(args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        Ok(cmd)
    }

    /// Runs this tool once with [`run_measured_with`], honouring `discard_stdout`.
    pub fn run_measured(&self, log: &Path) -> Result<Sample> {
        let opts = RunOpts {
            discard_stdout: self.discard_stdout,
            ..RunOpts::default()
        };
        run_measured_with(&mut self.command()?, log, opts)
    }
}

/// The outcome of a post-run check (e.g. `e2fsck -fn` on the image just made).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    NotRun,
    Passed,
    Failed(String),
}

/// What one run of one tool cost.
#[derive(Clone, Debug)]
pub struct Sample {
    pub status: ExitStatus,
    pub wall: Duration,
    pub user: Duration,
    pub sys: Duration,
    pub peak_rss: u64,
    pub wchar: Option<u64>,
    pub write_bytes: Option<u64>,
    /// Bytes the child asked of read-like syscalls (`rchar`).
    pub rchar: Option<u64>,
    /// Bytes the block layer read for the child (`read_bytes`).
    pub read_bytes: Option<u64>,
    /// How long the disk had I/O in flight while the child ran, filled in
    /// by a [`Hooks`] impl that watches the disk.
    pub busy: Option<Duration>,
    /// Where the child's stdout and stderr went.
    pub log: PathBuf,
    /// Filled in by [`Hooks::after`], e.g. an image's allocated bytes.
    pub allocated: Option<u64>,
    /// Filled in by [`Hooks::after`].
    pub check: Check,
    /// Killed by the [`RunOpts::timeout`] watchdog.
    pub timed_out: bool,
}

impl Sample {
    pub fn ok(&self) -> bool {
        self.status.success() && !matches!(self.check, Check::Failed(_))
    }

    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} (user {}, sys {}), peak RSS {}",
            fmt_duration(self.wall),
            fmt_duration(self.user),
            fmt_duration(self.sys),
            fmt_bytes(self.peak_rss)
        );
        if let Some(a) = self.allocated {
            s += &format!(", allocated {}", fmt_bytes(a));
        }
        if let Some(w) = self.wchar {
            s += &format!(", wchar {}", fmt_bytes(w));
        }
        if let Some(w) = self.write_bytes.filter(|&w| w > 0) {
            s += &format!(", write_bytes {}", fmt_bytes(w));
        }
        if let Some(r) = self.read_bytes.filter(|&r| r > 0) {
            s += &format!(", read_bytes {}", fmt_bytes(r));
            if let Some(c) = self.rchar {
                s += &format!(" (rchar {})", fmt_bytes(c));
            }
        }
        if let Some(b) = self.busy {
            s += &format!(", disk busy {}", fmt_duration(b));
        }
        if self.timed_out {
            s += ", TIMED OUT";
        } else if !self.status.success() {
            s += &format!(", FAILED: {}", self.status);
        }
        match &self.check {
            Check::NotRun => {}
            Check::Passed => s += ", check ok",
            Check::Failed(why) => s += &format!(", CHECK FAILED: {why}"),
        }
        s
    }
}

/// How [`run_measured_with`] runs a child, beyond the defaults.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOpts<'a> {
    /// Where stderr goes; `None`: into the same log as stdout.
    pub stderr: Option<&'a Path>,
    /// Kill the child's process group after this long (see the module docs).
    pub timeout: Option<Duration>,
    /// Stdout to /dev/null rather than into `log` (see [`Tool::discard_stdout`]).
    pub discard_stdout: bool,
}

/// Runs `cmd` to completion with stdin from /dev/null and stdout+stderr to `log`,
/// and measures it (see the module docs for how).
pub fn run_measured(cmd: &mut Command, log: &Path) -> Result<Sample> {
    run_measured_with(cmd, log, RunOpts::default())
}

/// [`run_measured`] with a separate stderr file and/or a timeout.
pub fn run_measured_with(cmd: &mut Command, log: &Path, opts: RunOpts<'_>) -> Result<Sample> {
    let out = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let err = match opts.stderr {
        Some(path) => {
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?
        }
        None => out.try_clone()?,
    };
    let out = if opts.discard_stdout {
        Stdio::null()
    } else {
        out.into()
    };
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    if opts.timeout.is_some() {
        cmd.process_group(0);
    }
    // SAFETY: reset_peak_rss only makes raw syscalls and does not allocate, so it
    // is async-signal-safe as required between fork and exec.
    unsafe { cmd.pre_exec(reset_peak_rss) };
    let start = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", util::display_cmd(cmd)))?;
    let raw_pid = i32::try_from(child.id()).context("pid out of range")?;
    let pid = Pid::from_raw(raw_pid).context("spawn returned pid 0")?;
    let (stop, stopped) = mpsc::channel::<()>();
    let watchdog = opts
        .timeout
        .map(|limit| std::thread::spawn(move || watchdog(pid, limit, &stopped)));
    // Wait for the exit but leave the zombie, so /proc/<pid>/io is still readable.
    loop {
        match rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e).context("waitid"),
        }
    }
    let wall = start.elapsed();
    drop(stop);
    // A panicked watchdog cannot have killed anything we did not ask for.
    let timed_out = watchdog.is_some_and(|w| w.join().unwrap_or(false));
    let io = std::fs::read_to_string(format!("/proc/{raw_pid}/io")).unwrap_or_default();
    let (status, ru) = wait4(raw_pid).context("wait4")?;
    // `child` is reaped now; dropping a std Child neither waits nor kills.
    drop(child);
    Ok(Sample {
        status: ExitStatus::from_raw(status),
        wall,
        user: timeval(ru.ru_utime),
        sys: timeval(ru.ru_stime),
        peak_rss: u64::try_from(ru.ru_maxrss)
            .unwrap_or(0)
            .saturating_mul(1024),
        wchar: proc_io_field(&io, "wchar"),
        write_bytes: proc_io_field(&io, "write_bytes"),
        rchar: proc_io_field(&io, "rchar"),
        read_bytes: proc_io_field(&io, "read_bytes"),
        busy: None,
        log: log.to_path_buf(),
        allocated: None,
        check: Check::NotRun,
        timed_out,
    })
}

/// Waits until `limit` has passed (then SIGKILLs the process group `pid` leads
/// and returns true) or until `stopped` is signalled or dropped (returns false).
/// Ctrl-C also kills the group, as the terminal's SIGINT no longer reaches it.
fn watchdog(pid: Pid, limit: Duration, stopped: &mpsc::Receiver<()>) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let now = Instant::now();
        if now >= deadline {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            return true;
        }
        match stopped.recv_timeout((deadline - now).min(Duration::from_millis(100))) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if util::interrupted() {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                    return false;
                }
            }
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return false,
        }
    }
}

/// Runs in the forked child just before exec: resets the address space's RSS
/// high-water mark (`echo 5 > /proc/self/clear_refs`, Linux >= 4.0) to the few
/// pages the fork copied. Exec folds the old address space's high-water mark
/// into the child's `ru_maxrss`; without this it would be xtask's whole RSS.
/// Best effort: if it fails, the spawn floor is just higher.
fn reset_peak_rss() -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    if let Ok(fd) = rustix::fs::open(
        c"/proc/self/clear_refs",
        OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        let _ = rustix::io::write(&fd, b"5");
    }
    Ok(())
}

/// Reaps `pid` and returns its wait status and its own resource usage.
fn wait4(pid: i32) -> io::Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain old data, for which all-zero bytes are valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers point to live locals for the whole call.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            return Ok((status, ru));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn timeval(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u32::try_from(tv.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros.into())
}

fn proc_io_field(io: &str, key: &str) -> Option<u64> {
    io.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim().parse().ok())?
    })
}

/// Peak RSS of a trivial child (`true`) spawned the same way: the floor below
/// which no [`Sample::peak_rss`] can go (see the module docs).
pub fn spawn_floor(logdir: &Path) -> Result<u64> {
    let mut cmd = Command::new("true");
    Ok(run_measured(&mut cmd, &logdir.join("floor.log"))?.peak_rss)
}

/// Per-run preparation and post-processing around [`alternate`].
pub trait Hooks {
    /// Called before run `run` (0-based) of `tools[tool]`, e.g. to recreate an image.
    fn before(&mut self, tool: usize, run: usize) -> Result<()>;
    /// Called after that run; may fill `sample.allocated` and `sample.check`.
    fn after(&mut self, tool: usize, run: usize, sample: &mut Sample) -> Result<()>;
}

/// Runs `tools[0]`, `tools[1]`, `tools[0]`, … `runs` times each, alternating so
/// that drift (thermal, page cache, neighbours) hits both alike. A failed run is
/// recorded, not fatal; a hook error or Ctrl-C stops everything.
pub fn alternate(
    tools: [&Tool; 2],
    runs: usize,
    logdir: &Path,
    hooks: &mut dyn Hooks,
) -> Result<[Vec<Sample>; 2]> {
    let mut all = alternate_all(&tools, runs, logdir, hooks)?.into_iter();
    Ok([
        all.next().unwrap_or_default(),
        all.next().unwrap_or_default(),
    ])
}

/// [`alternate`] over any number of tools, in turn: run 1 of each in the
/// given order, then run 2 of each, …; one `Vec` of samples per tool.
pub fn alternate_all(
    tools: &[&Tool],
    runs: usize,
    logdir: &Path,
    hooks: &mut dyn Hooks,
) -> Result<Vec<Vec<Sample>>> {
    let mut samples = vec![Vec::new(); tools.len()];
    for run in 0..runs {
        for (i, tool) in tools.iter().enumerate() {
            util::check_interrupted()?;
            hooks.before(i, run)?;
            let log = logdir.join(format!("run-{i}-{run}.log"));
            let mut sample = tool.run_measured(&log)?;
            util::check_interrupted()?;
            hooks.after(i, run, &mut sample)?;
            println!(
                "  run {}/{runs} {:<7} {}",
                run + 1,
                tool.name,
                sample.describe()
            );
            if !sample.status.success() {
                print!("{}", util::tail(&sample.log, 10));
            }
            samples[i].push(sample);
        }
    }
    Ok(samples)
}

/// Median, range and maxima of one tool's runs.
#[derive(Clone, Debug)]
pub struct Summary {
    pub runs: usize,
    pub failed: usize,
    /// Wall-time statistics over the runs that exited successfully (None: no such run).
    pub median: Option<Duration>,
    pub min: Option<Duration>,
    pub max: Option<Duration>,
    pub peak_rss: u64,
    pub allocated: Option<u64>,
    pub wchar: Option<u64>,
    /// Median `rchar`.
    pub rchar: Option<u64>,
    /// Median `read_bytes`.
    pub read_bytes: Option<u64>,
    /// Median time the disk was busy during a run.
    pub busy: Option<Duration>,
}

impl Summary {
    pub fn of(samples: &[Sample]) -> Summary {
        let walls: Vec<u128> = samples
            .iter()
            .filter(|s| s.status.success())
            .map(|s| s.wall.as_nanos())
            .collect();
        let nanos = |n: u128| Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX));
        Summary {
            runs: samples.len(),
            failed: samples.iter().filter(|s| !s.ok()).count(),
            median: median(walls.clone()).map(nanos),
            min: walls.iter().copied().min().map(nanos),
            max: walls.iter().copied().max().map(nanos),
            peak_rss: samples.iter().map(|s| s.peak_rss).max().unwrap_or(0),
            allocated: median_u64(samples.iter().filter_map(|s| s.allocated)),
            wchar: median_u64(samples.iter().filter_map(|s| s.wchar)),
            rchar: median_u64(samples.iter().filter_map(|s| s.rchar)),
            read_bytes: median_u64(samples.iter().filter_map(|s| s.read_bytes)),
            busy: median(
                samples
                    .iter()
                    .filter_map(|s| s.busy.map(|b| b.as_nanos()))
                    .collect(),
            )
            .map(nanos),
        }
    }
}

fn median(mut v: Vec<u128>) -> Option<u128> {
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2),
    }
}

fn median_u64(it: impl Iterator<Item = u64>) -> Option<u64> {
    median(it.map(u128::from).collect()).and_then(|m| u64::try_from(m).ok())
}

/// One line of the result table: one tool on one case (e.g. an image size).
pub struct Row {
    pub case: String,
    pub tool: String,
    pub summary: Summary,
    /// Median wall time of this tool over the reference's (<1: faster).
    pub ratio: Option<f64>,
}

/// Builds the two rows for a case; the ratio goes on the first (ours) row.
pub fn rows_for(case: &str, tools: [&Tool; 2], samples: &[Vec<Sample>; 2]) -> [Row; 2] {
    let ours = Summary::of(&samples[0]);
    let theirs = Summary::of(&samples[1]);
    let ratio = match (ours.median, theirs.median) {
        (Some(o), Some(t)) if !t.is_zero() => Some(o.as_secs_f64() / t.as_secs_f64()),
        _ => None,
    };
    [
        Row {
            case: case.to_string(),
            tool: tools[0].name.clone(),
            summary: ours,
            ratio,
        },
        Row {
            case: case.to_string(),
            tool: tools[1].name.clone(),
            summary: theirs,
            ratio: None,
        },
    ]
}

/// The rows for a case of several tools, the last one the reference: every
/// other row carries the ratio of its median to the reference's.
pub fn rows_vs_last(case: &str, tools: &[&Tool], samples: &[Vec<Sample>]) -> Vec<Row> {
    let sums: Vec<Summary> = samples.iter().map(|s| Summary::of(s)).collect();
    let reference = sums.last().and_then(|s| s.median);
    let last = tools.len().saturating_sub(1);
    tools
        .iter()
        .zip(sums)
        .enumerate()
        .map(|(i, (t, summary))| {
            let ratio = match (summary.median, reference) {
                (Some(o), Some(r)) if i < last && !r.is_zero() => {
                    Some(o.as_secs_f64() / r.as_secs_f64())
                }
                _ => None,
            };
            Row {
                case: case.to_string(),
                tool: t.name.clone(),
                summary,
                ratio,
            }
        })
        .collect()
}

/// Prints the rows as a table; `case` heads the first column (e.g. "size").
/// The read columns (`rchar`, `read_bytes`, disk busy time) appear only when
/// some run read from the block layer or was watched on the disk (cold-cache
/// runs): hot runs read nothing there, and their tables stay as they were.
pub fn print_table(case: &str, rows: &[Row]) {
    let reads = rows
        .iter()
        .any(|r| r.summary.read_bytes.is_some_and(|b| b > 0) || r.summary.busy.is_some());
    let mut header = vec![
        case,
        "tool",
        "runs",
        "median",
        "min..max",
        "ours/theirs",
        "peak RSS",
        "allocated",
        "wchar",
    ];
    if reads {
        header.extend(["rchar", "read_bytes", "disk busy"]);
    }
    header.push("failed");
    let opt = |v: Option<u64>| v.map_or("-".to_string(), fmt_bytes);
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for r in rows {
        let s = &r.summary;
        let mut line = vec![
            r.case.clone(),
            r.tool.clone(),
            s.runs.to_string(),
            s.median.map_or("-".to_string(), fmt_duration),
            match (s.min, s.max) {
                (Some(lo), Some(hi)) => format!("{}..{}", fmt_duration(lo), fmt_duration(hi)),
                _ => "-".to_string(),
            },
            r.ratio.map_or(String::new(), |x| format!("{x:.3}")),
            fmt_bytes(s.peak_rss),
            opt(s.allocated),
            opt(s.wchar),
        ];
        if reads {
            line.extend([
                opt(s.rchar),
                opt(s.read_bytes),
                s.busy.map_or("-".to_string(), fmt_duration),
            ]);
        }
        line.push(if s.failed == 0 {
            "0".to_string()
        } else {
            format!("{} FAILED", s.failed)
        });
        lines.push(line);
    }
    let mut widths = vec![0; header.len()];
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.len());
        }
    }
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            // Text columns left-aligned, numbers right-aligned.
            .map(|(i, (c, w))| {
                if i < 2 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
}

/// `e2fsck -fn IMG` as a post-run check: its verdict for [`Sample::check`],
/// with the tail of its output printed on failure. A Ctrl-C also cancels
/// e2fsck (exit 32), which is not a verdict on the image: it is an error.
pub fn e2fsck_check(e2fsck: &Path, img: &Path, log: &Path) -> Result<Check> {
    let mut cmd = Command::new(e2fsck);
    cmd.arg("-fn").arg(img);
    let fsck = run_measured(&mut cmd, log)?;
    util::check_interrupted()?;
    Ok(if fsck.status.success() {
        Check::Passed
    } else {
        print!("  e2fsck -fn output:\n{}", util::tail(log, 20));
        Check::Failed(format!("e2fsck -fn: {}", fsck.status))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3, 1, 2]), Some(2));
        assert_eq!(median(vec![4, 1, 2, 3]), Some(2));
    }

    #[test]
    fn proc_io() {
        let io = "rchar: 10\nwchar: 4096\nsyscr: 1\nwrite_bytes: 0\n";
        assert_eq!(proc_io_field(io, "wchar"), Some(4096));
        assert_eq!(proc_io_field(io, "rchar"), Some(10));
        assert_eq!(proc_io_field(io, "write_bytes"), Some(0));
        assert_eq!(proc_io_field(io, "nope"), None);
    }

    #[test]
    fn measures_a_child() {
        let dir = std::env::temp_dir();
        let log = dir.join(format!("xtask-measure-{}.log", std::process::id()));
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "head -c 1000000 /dev/zero > /dev/null; exit 3"]);
        let s = run_measured(&mut cmd, &log).unwrap();
        let _ = std::fs::remove_file(&log);
        assert_eq!(s.status.code(), Some(3));
        assert!(s.peak_rss > 0);
        // Read from the zombie's /proc/<pid>/io; includes the reaped `head`.
        assert!(s.wchar.unwrap() >= 1_000_000, "{s:?}");
        assert!(!s.timed_out);
    }

    #[test]
    fn kills_the_group_on_timeout() {
        let dir = std::env::temp_dir();
        let log = dir.join(format!("xtask-timeout-{}.log", std::process::id()));
        let err = dir.join(format!("xtask-timeout-{}.err", std::process::id()));
        // The grandchild `sleep` must die too, or the run would last 30 s.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo to-err >&2; sleep 30; true"]);
        let opts = RunOpts {
            stderr: Some(&err),
            timeout: Some(Duration::from_millis(300)),
            ..RunOpts::default()
        };
        let s = run_measured_with(&mut cmd, &log, opts).unwrap();
        let stderr = std::fs::read_to_string(&err).unwrap();
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&err);
        assert!(s.timed_out);
        assert!(s.wall < Duration::from_secs(10), "{s:?}");
        assert_eq!(s.status.signal(), Some(libc::SIGKILL));
        assert_eq!(stderr, "to-err\n");
    }
}
