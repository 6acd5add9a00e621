//! Helpers shared by the lab's campaigns and by `cargo xtask`: paths, running
//! steps, sizes, temp dirs, Ctrl-C.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

/// The workspace root: the parent of this crate's manifest directory.
pub fn repo_root() -> PathBuf {
    let lab = Path::new(env!("CARGO_MANIFEST_DIR"));
    lab.parent().unwrap_or(lab).to_path_buf()
}

/// `cargo` for plain builds: the very cargo that runs us (`$CARGO`), so the
/// toolchain matches (`cargo xtask fuzz` goes through the rustup proxy
/// instead, for `+nightly`).
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(repo_root());
    cmd
}

/// A command line as a shell would show it (for logs, not for re-parsing).
pub fn display_cmd(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&shell_word(arg));
    }
    s
}

fn shell_word(arg: &OsStr) -> String {
    let a = arg.to_string_lossy();
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=+,./:^@%".contains(c));
    if plain {
        a.into_owned()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// Runs one named step with inherited stdio; prints its name and duration.
/// Errors if it cannot start or exits non-zero.
pub fn run_step(name: &str, cmd: &mut Command) -> Result<Duration> {
    println!("==> {name}: {}", display_cmd(cmd));
    let start = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("{name}: cannot run {:?}", cmd.get_program()))?;
    let took = start.elapsed();
    if status.success() {
        println!("<== {name}: ok in {}", fmt_duration(took));
        Ok(took)
    } else {
        println!("<== {name}: FAILED ({status}) after {}", fmt_duration(took));
        bail!("step `{name}` failed: {status}");
    }
}

/// Whether `prog` can be found (absolute/relative path, or on `$PATH`).
pub fn find_program(prog: &OsStr) -> Option<PathBuf> {
    let p = Path::new(prog);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(p))
        .find(|c| c.is_file())
}

/// Builds `ext4r-cli` in release mode and returns `[target/release/ext4r, subcommand]`.
pub fn release_ext4r(subcommand: &str) -> Result<Vec<OsString>> {
    run_step(
        "build ext4r (release)",
        cargo().args(["build", "--release", "-p", "ext4r-cli"]),
    )?;
    let bin = target_dir().join("release").join("ext4r");
    if !bin.is_file() {
        bail!("{} was not built", bin.display());
    }
    Ok(vec![bin.into(), subcommand.into()])
}

/// The binary as shipped (static on glibc Linux, hot functions first),
/// which the benchmarks measure. How it is built is the build tool's
/// business, not the lab's: this runs `cargo xtask dist`, passes on its
/// progress lines and takes the path it prints last.
pub fn shipped_ext4r() -> Result<PathBuf> {
    use std::io::{BufRead, BufReader};
    let mut cmd = cargo();
    cmd.args(["xtask", "dist"])
        .stdout(std::process::Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", display_cmd(&cmd)))?;
    let out = child
        .stdout
        .take()
        .context("no stdout from cargo xtask dist")?;
    let mut last: Option<String> = None;
    for line in BufReader::new(out).lines() {
        if let Some(prev) = last.replace(line?) {
            println!("{prev}");
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("{} failed: {status}", display_cmd(&cmd));
    }
    let bin = PathBuf::from(last.unwrap_or_default().trim());
    if !bin.is_file() {
        bail!("`cargo xtask dist` printed no binary ({})", bin.display());
    }
    Ok(bin)
}

/// A command line given as one whitespace-separated string (`--fsck "e2fsck -C0"`);
/// errors if its program cannot be found.
pub fn resolve_cmd(cmd: &str) -> Result<Vec<OsString>> {
    let argv: Vec<OsString> = cmd.split_whitespace().map(OsString::from).collect();
    let prog = argv.first().context("empty command line")?;
    if find_program(prog).is_none() {
        bail!("{} not found", prog.to_string_lossy());
    }
    Ok(argv)
}

/// The data extents of `fd` (SEEK_DATA/SEEK_HOLE) up to `len`.
pub fn data_runs(f: &std::fs::File, len: u64) -> Vec<(u64, u64)> {
    let fd = std::os::fd::AsRawFd::as_raw_fd(f);
    let mut runs = Vec::new();
    let mut pos = 0u64;
    while pos < len {
        // SAFETY: lseek on a descriptor we own.
        let start = unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_DATA) };
        if start < 0 {
            break;
        }
        // SAFETY: as above.
        let end = unsafe { libc::lseek(fd, start, libc::SEEK_HOLE) };
        let (s, e) = (start as u64, if end < 0 { len } else { end as u64 });
        if e <= s {
            break;
        }
        runs.push((s, e.min(len)));
        pos = e;
    }
    runs
}

/// Cargo's target directory (`$CARGO_TARGET_DIR` or `<repo>/target`); xtask keeps
/// its logs and caches in subdirectories of it.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{:.1}ms", s * 1000.0)
    } else if s < 120.0 {
        format!("{s:.2}s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

/// Binary units, e.g. `12.3MiB`.
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n}B")
    } else {
        format!("{v:.1}{}", UNITS[unit])
    }
}

/// A size given as `<number>[K|M|G|T|P]` (binary multiples, like mke2fs), e.g. `15T`.
#[derive(Clone, Debug)]
pub struct Size {
    pub bytes: u64,
    pub label: String,
}

impl std::str::FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let (num, shift) = match t.char_indices().last() {
            Some((i, c)) if c.is_ascii_alphabetic() => {
                let shift = match c.to_ascii_uppercase() {
                    'K' => 10,
                    'M' => 20,
                    'G' => 30,
                    'T' => 40,
                    'P' => 50,
                    _ => return Err(format!("bad size suffix in {s:?} (use K, M, G, T or P)")),
                };
                (&t[..i], shift)
            }
            _ => (t, 0),
        };
        let n: u64 = num
            .parse()
            .map_err(|_| format!("bad size {s:?} (expected e.g. 1G, 15T)"))?;
        let bytes = n
            .checked_mul(1u64 << shift)
            .filter(|&b| b > 0)
            .ok_or_else(|| format!("size {s:?} is zero or too large"))?;
        Ok(Size {
            bytes,
            label: t.to_string(),
        })
    }
}

/// A directory removed (recursively) when dropped, also on error and unwinding.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<parent>/<prefix><pid>-<nanos>`, mode 0700; fails if it exists.
    pub fn new_in(parent: &Path, prefix: &str) -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = parent.join(format!("{prefix}{}-{nanos:08x}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("cannot create temp dir {}", path.display()))?;
        Ok(TempDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.path) {
            Ok(()) => println!("removed {}", self.path.display()),
            Err(e) => eprintln!("warning: cannot remove {}: {e}", self.path.display()),
        }
    }
}

/// The last `n` lines of a (log) file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for line in &lines[lines.len().saturating_sub(n)..] {
        let _ = writeln!(out, "    {line}");
    }
    out
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT/SIGTERM set a flag instead of killing us, so long-running
/// loops can stop and drop their [`TempDir`]s. Children in our process group
/// still get the terminal's SIGINT and die, which ends the current run.
pub fn install_interrupt_handler() {
    let handler: extern "C" fn(libc::c_int) = on_signal;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic; glibc's signal() installs
        // it with SA_RESTART, so our blocking syscalls are restarted, not failed.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Errors out if Ctrl-C (or SIGTERM) has been received.
pub fn check_interrupted() -> Result<()> {
    if interrupted() {
        bail!("interrupted");
    }
    Ok(())
}

/// Runs `job(i)` for every `i` in `0..n` on `threads` scoped threads, each
/// taking the next index as it finishes one; stops at the first error, an
/// interrupt or a panicking job (the image builders' pools).
pub fn par_for(
    threads: usize,
    n: usize,
    job: impl Fn(usize) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<()> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| -> anyhow::Result<()> {
                    loop {
                        check_interrupted()?;
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        if i >= n {
                            return Ok(());
                        }
                        job(i)?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker panicked")))
            })
            .collect::<anyhow::Result<Vec<()>>>()
            .map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!("1G".parse::<Size>().unwrap().bytes, 1 << 30);
        assert_eq!("15t".parse::<Size>().unwrap().bytes, 15 << 40);
        assert_eq!("4096".parse::<Size>().unwrap().bytes, 4096);
        assert!("0G".parse::<Size>().is_err());
        assert!("1X".parse::<Size>().is_err());
        assert!("99999999P".parse::<Size>().is_err());
        assert!("".parse::<Size>().is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_bytes(512), "512B");
        assert_eq!(fmt_bytes(3 << 20), "3.0MiB");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.50s");
        assert_eq!(shell_word(OsStr::new("a b")), "'a b'");
        assert_eq!(shell_word(OsStr::new("hash_seed=x")), "hash_seed=x");
    }
}
