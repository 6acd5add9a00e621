//! `cargo xtask bench mount`: `ext4r mount` against fuse2fs and the
//! kernel's ext4 on a loop mount (issue 32), alternating runs, each on a
//! fresh copy of the same image:
//! - `seqwrite`: `dd bs=1M` of `--size` bytes of pseudo-random data (from
//!   tmpfs) into a new file of an empty ext4;
//! - `seqread`: `dd bs=1M` of that file back to /dev/null;
//! - `randread`, `randwrite`: `--ops` reads or writes of 4 KiB at random
//!   aligned offsets of that file (the hidden `bench mount-io`);
//! - `untar`: `tar -x` of a tree of `--files` files (from tmpfs) into an
//!   empty ext4;
//! - `find`: `find -printf` of size, mode, owner and mtime of every name
//!   of that tree (a stat of each), the count checked;
//! - `rm`: `rm -rf` of that tree.
//!
//! A run is mount, workload, unmount, timed as one child (`sh -c`), and
//! ends when the data is on the image: the FUSE daemons run in the
//! foreground under `/usr/bin/time` and the run waits for them to exit
//! after the unmount (`ext4r umount` for ours, `umount` for fuse2fs); the
//! kernel's `umount` writes everything back itself. Before each run the
//! image is copied afresh from a template (made through a kernel loop
//! mount, the same for all three), the page cache is written back and
//! dropped: every run starts cold. Images live on the disk under `--dir`
//! (default: the target directory), not in tmpfs. Write cases are checked
//! with `e2fsck -fn` afterwards (untimed). The peak RSS in the table is
//! that of each FUSE daemon (GNU time's `%M`); the kernel's has none.

mod io;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

pub use io::{run as io_run, IoArgs};

use super::{cold, HASH_SEED, UUID};
use crate::measure::{self, Check, Hooks, Sample, Summary, Tool};
use crate::util::{self, fmt_bytes, fmt_duration, Size, TempDir};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Case {
    /// `dd` of `--size` bytes into a new file.
    Seqwrite,
    /// `dd` of that file to /dev/null.
    Seqread,
    /// `--ops` random 4 KiB reads of that file.
    Randread,
    /// `--ops` random 4 KiB writes into that file.
    Randwrite,
    /// `tar -x` of `--files` files.
    Untar,
    /// `find` + stat of every name of that tree.
    Find,
    /// `rm -rf` of that tree.
    Rm,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Seqwrite => "seqwrite",
            Case::Seqread => "seqread",
            Case::Randread => "randread",
            Case::Randwrite => "randwrite",
            Case::Untar => "untar",
            Case::Find => "find",
            Case::Rm => "rm",
        }
    }

    /// What the image holds before the run.
    fn template(self) -> Template {
        match self {
            Case::Seqwrite | Case::Untar => Template::Empty,
            Case::Seqread | Case::Randread | Case::Randwrite => Template::Big,
            Case::Find | Case::Rm => Template::Tree,
        }
    }

    /// Whether the run changes the image (checked with e2fsck after it).
    fn writes(self) -> bool {
        matches!(
            self,
            Case::Seqwrite | Case::Randwrite | Case::Untar | Case::Rm
        )
    }

    /// Sequential I/O: the cases with the "within 2x of the kernel" goal.
    fn sequential(self) -> bool {
        matches!(self, Case::Seqwrite | Case::Seqread)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Template {
    Empty,
    Big,
    Tree,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Driver {
    Ours,
    Fuse2fs,
    Kernel,
}

const DRIVERS: [Driver; 3] = [Driver::Ours, Driver::Fuse2fs, Driver::Kernel];

impl Driver {
    fn name(self) -> &'static str {
        match self {
            Driver::Ours => "ours",
            Driver::Fuse2fs => "fuse2fs",
            Driver::Kernel => "kernel",
        }
    }
}

#[derive(clap::Args)]
pub struct MountArgs {
    /// Which cases, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "seqwrite,seqread,randread,randwrite,untar,find,rm"
    )]
    cases: Vec<Case>,
    /// Size of the file of the sequential and random cases [default: 1G].
    #[arg(long)]
    size: Option<Size>,
    /// Random 4 KiB requests per random case [default: 20000].
    #[arg(long)]
    ops: Option<u64>,
    /// Files in the tree of untar, find and rm [default: 50000].
    #[arg(long)]
    files: Option<usize>,
    /// Size of the (sparse) images [default: 4G].
    #[arg(long)]
    image_size: Option<Size>,
    /// Runs per driver, alternating ours, fuse2fs, kernel [default: 3].
    #[arg(long)]
    runs: Option<usize>,
    /// A smoke test in seconds: 64 MiB file, 2,000 ops, 2,000 files,
    /// 512 MiB images, one run (explicit options still win).
    #[arg(long)]
    quick: bool,
    /// Where the images go (a directory on a disk, not tmpfs)
    /// [default: <target>/ext4r-bench-mount].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Our binary instead of `cargo xtask dist`'s (`mount`/`umount` are appended).
    #[arg(long, value_name = "BIN")]
    ours: Option<PathBuf>,
}

/// The sizes of one invocation, after `--quick` and the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    size: u64,
    ops: u64,
    files: usize,
    image_size: u64,
    runs: usize,
}

impl Plan {
    fn of(a: &MountArgs) -> Plan {
        let (size, ops, files, image, runs) = if a.quick {
            (64 << 20, 2_000, 2_000, 512 << 20, 1)
        } else {
            (1 << 30, 20_000, 50_000, 4 << 30, 3)
        };
        Plan {
            size: a.size.as_ref().map_or(size, |s| s.bytes),
            ops: a.ops.unwrap_or(ops),
            files: a.files.unwrap_or(files),
            image_size: a.image_size.as_ref().map_or(image, |s| s.bytes),
            runs: a.runs.unwrap_or(runs),
        }
    }
}

/// Directories of the tree: files are spread over them.
const TREE_DIRS: usize = 100;
/// Seed of the random cases.
const SEED: u64 = 0x0123_4567_89ab_cdef;

/// Programs and paths one invocation uses.
struct Env {
    ours: PathBuf,
    helper: PathBuf,
    mke2fs: PathBuf,
    e2fsck: PathBuf,
    fuse2fs: PathBuf,
    time: PathBuf,
    /// On the disk: templates, the run image, the mount point, logs.
    work: PathBuf,
    /// On tmpfs: the sources (data file, tarball).
    src: PathBuf,
    plan: Plan,
}

impl Env {
    fn img(&self) -> PathBuf {
        self.work.join("run.img")
    }
    fn mnt(&self) -> PathBuf {
        self.work.join("mnt")
    }
    fn rss(&self) -> PathBuf {
        self.work.join("daemon.rss")
    }
    fn data(&self) -> PathBuf {
        self.src.join("data")
    }
    fn tarball(&self) -> PathBuf {
        self.src.join("tree.tar")
    }
    fn template(&self, t: Template) -> PathBuf {
        self.work.join(match t {
            Template::Empty => "empty.img",
            Template::Big => "big.img",
            Template::Tree => "tree.img",
        })
    }
    /// Names in the tree as `find` lists them: the files, their
    /// directories and the top.
    fn tree_names(&self) -> usize {
        self.plan.files + TREE_DIRS.min(self.plan.files.max(1)) + 1
    }
}

pub fn run(args: &MountArgs) -> Result<()> {
    let plan = Plan::of(args);
    ensure!(plan.runs >= 1, "--runs must be at least 1");
    ensure!(!args.cases.is_empty(), "--cases is empty");
    ensure!(
        plan.size % io::RAND_CHUNK == 0,
        "--size must be a multiple of 4 KiB"
    );
    if !rustix::process::geteuid().is_root() {
        bail!("bench mount needs root (loop mounts, FUSE mounts, drop_caches)");
    }
    let find = |p: &str, pkg: &str| {
        util::find_program(p.as_ref()).with_context(|| format!("{p} not found (Debian: {pkg})"))
    };
    let fuse2fs = find("fuse2fs", "apt-get install fuse2fs")?;
    let time = find("/usr/bin/time", "apt-get install time")?;
    let mke2fs = find("mke2fs", "e2fsprogs")?;
    let e2fsck = find("e2fsck", "e2fsprogs")?;
    ensure!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing (modprobe fuse)"
    );
    let ours = match &args.ours {
        Some(b) => b.clone(),
        None => util::shipped_ext4r()?,
    };
    let helper = std::env::current_exe().context("cannot find this program for mount-io")?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| util::target_dir().join("ext4r-bench-mount"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if cold::is_tmpfs(&dir)? {
        bail!(
            "--dir {} is on tmpfs: the images belong on a disk",
            dir.display()
        );
    }
    let work = TempDir::new_in(&dir, "run-")?;
    let src = TempDir::new_in(Path::new("/dev/shm"), "ext4r-bench-mount-src-")?;
    let env = Env {
        ours,
        helper,
        mke2fs,
        e2fsck,
        fuse2fs,
        time,
        work: work.path().to_path_buf(),
        src: src.path().to_path_buf(),
        plan,
    };
    std::fs::create_dir(env.mnt())?;
    let result = bench(&env, &args.cases);
    // Never leave a mount behind on the way out.
    if is_mounted(&env.mnt()) {
        let _ = Command::new("umount").arg("-l").arg(env.mnt()).status();
    }
    result
}

fn bench(env: &Env, cases: &[Case]) -> Result<()> {
    let p = &env.plan;
    println!(
        "images ({} sparse, mke2fs -t ext4) in {}; sources in {}; {} run(s) each; \
         file {}, {} random ops, {} files",
        fmt_bytes(p.image_size),
        env.work.display(),
        env.src.display(),
        p.runs,
        fmt_bytes(p.size),
        p.ops,
        p.files
    );
    println!("load average before: {}", load_average());
    let mut results: Vec<CaseResult> = Vec::new();
    for &case in cases {
        util::check_interrupted()?;
        make_sources(env, case)?;
        let template = env.template(case.template());
        if !template.exists() {
            make_template(env, case.template())?;
        }
        let tools: Vec<Tool> = DRIVERS
            .iter()
            .map(|&d| Tool {
                name: d.name().into(),
                argv: vec!["sh".into(), "-c".into(), script(env, d, case).into()],
                env: Vec::new(),
                discard_stdout: false,
            })
            .collect();
        println!("== {} ({})", case.name(), describe(env, case));
        for t in &tools {
            println!("  {:<7} {}", t.name, util::display_cmd(&t.command()?));
        }
        let mut hooks = MountHooks {
            env,
            case,
            template: &template,
            rss: vec![Vec::new(); DRIVERS.len()],
        };
        let refs: Vec<&Tool> = tools.iter().collect();
        let samples = measure::alternate_all(&refs, p.runs, &env.work, &mut hooks)?;
        let _ = std::fs::remove_file(env.img());
        results.push(CaseResult {
            case,
            summaries: samples.iter().map(|s| Summary::of(s)).collect(),
            rss: hooks.rss.iter().map(|r| r.iter().copied().max()).collect(),
        });
    }
    println!();
    print!("{}", table(&results, p));
    println!("load average after: {}", load_average());
    let failed: usize = results
        .iter()
        .flat_map(|r| &r.summaries)
        .map(|s| s.failed)
        .sum();
    if failed > 0 {
        bail!("{failed} run(s) failed or left an image that e2fsck -fn rejects");
    }
    Ok(())
}

fn describe(env: &Env, case: Case) -> String {
    let p = &env.plan;
    match case {
        Case::Seqwrite => format!("dd bs=1M of {} into a new file", fmt_bytes(p.size)),
        Case::Seqread => format!("dd bs=1M of a {} file", fmt_bytes(p.size)),
        Case::Randread => format!("{} reads of 4 KiB in a {} file", p.ops, fmt_bytes(p.size)),
        Case::Randwrite => format!("{} writes of 4 KiB in a {} file", p.ops, fmt_bytes(p.size)),
        Case::Untar => format!("tar -x of {} files", p.files),
        Case::Find => format!("find + stat of {} names", env.tree_names()),
        Case::Rm => format!("rm -rf of {} files", p.files),
    }
}

/// The shell script of one timed run: mount, workload, unmount, and for
/// the FUSE daemons wait until they have exited (written everything out).
/// Exit 90: the mount failed; 91: the unmount; 92: the daemon's status.
fn script(env: &Env, d: Driver, case: Case) -> String {
    let q = |p: &Path| quote(&p.display().to_string());
    let (img, mnt) = (q(&env.img()), q(&env.mnt()));
    let mut s = String::new();
    let daemon = match d {
        Driver::Ours => Some(format!("{} mount -f {img} {mnt}", q(&env.ours))),
        Driver::Fuse2fs => Some(format!("{} {img} {mnt} -f", q(&env.fuse2fs))),
        Driver::Kernel => None,
    };
    match &daemon {
        Some(cmd) => {
            let _ = write!(
                s,
                "{} -f %M -o {} {cmd} & pid=$!; \
                 until mountpoint -q {mnt}; do kill -0 $pid 2>/dev/null || exit 90; sleep 0.01; done; ",
                q(&env.time),
                q(&env.rss())
            );
        }
        None => {
            let _ = write!(s, "mount -t ext4 -o loop {img} {mnt} || exit 90; ");
        }
    }
    let _ = write!(s, "{}; rc=$?; ", workload(env, case));
    match d {
        Driver::Ours => {
            let _ = write!(s, "{} umount {mnt} || rc=91; ", q(&env.ours));
        }
        Driver::Fuse2fs | Driver::Kernel => {
            let _ = write!(s, "umount {mnt} || rc=91; ");
        }
    }
    if daemon.is_some() {
        s.push_str("wait $pid || rc=92; ");
    }
    s.push_str("exit $rc");
    s
}

/// The workload of `case` on the mount point.
fn workload(env: &Env, case: Case) -> String {
    let q = |p: &Path| quote(&p.display().to_string());
    let mnt = env.mnt();
    let big = q(&mnt.join("big"));
    let tree = q(&mnt.join("tree"));
    let p = &env.plan;
    let helper = q(&env.helper);
    match case {
        Case::Seqwrite => format!("dd if={} of={big} bs=1M status=none", q(&env.data())),
        Case::Seqread => format!("dd if={big} of=/dev/null bs=1M status=none"),
        Case::Randread => format!("{helper} bench mount-io randread {big} {} {SEED}", p.ops),
        Case::Randwrite => format!("{helper} bench mount-io randwrite {big} {} {SEED}", p.ops),
        Case::Untar => format!("tar -xf {} -C {}", q(&env.tarball()), q(&mnt)),
        Case::Find => format!(
            "test \"$(find {tree} -printf '%s %m %U %G %T@\\n' | wc -l)\" -eq {}",
            env.tree_names()
        ),
        Case::Rm => format!("rm -rf {tree}"),
    }
}

/// A word for `sh`: plain, or in single quotes.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=+,./:@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Makes the template image: an empty ext4, or one holding the file or
/// the tree, written through a kernel loop mount.
fn make_template(env: &Env, t: Template) -> Result<()> {
    let start = std::time::Instant::now();
    let img = env.template(t);
    super::fresh_sparse(&img, env.plan.image_size)?;
    let mut mkfs = Command::new(&env.mke2fs);
    mkfs.args(["-F", "-q", "-t", "ext4", "-U", UUID, "-E"])
        .arg(format!("hash_seed={HASH_SEED}"))
        .arg(&img);
    run_quiet(&mut mkfs)?;
    let fill = match t {
        Template::Empty => None,
        Template::Big => Some(workload(env, Case::Seqwrite)),
        Template::Tree => Some(workload(env, Case::Untar)),
    };
    if let Some(fill) = fill {
        let (img_q, mnt_q) = (
            quote(&img.display().to_string()),
            quote(&env.mnt().display().to_string()),
        );
        let script = format!(
            "mount -t ext4 -o loop {img_q} {mnt_q} || exit 90; {fill}; rc=$?; \
             umount {mnt_q} || rc=91; exit $rc"
        );
        run_quiet(Command::new("sh").args(["-c", &script]))?;
    }
    println!(
        "template {} made in {}",
        img.display(),
        fmt_duration(start.elapsed())
    );
    Ok(())
}

/// The data file or the tarball in tmpfs, when `case` or its template
/// reads it and it is not there yet.
fn make_sources(env: &Env, case: Case) -> Result<()> {
    let start = std::time::Instant::now();
    let data = matches!(case, Case::Seqwrite) || case.template() == Template::Big;
    if data && !env.data().exists() {
        write_data(&env.data(), env.plan.size)?;
        println!(
            "source file {} made in {}",
            env.data().display(),
            fmt_duration(start.elapsed())
        );
    }
    let tree = matches!(case, Case::Untar) || case.template() == Template::Tree;
    if tree && !env.tarball().exists() {
        make_tarball(env)?;
        println!(
            "source tarball {} made in {}",
            env.tarball().display(),
            fmt_duration(start.elapsed())
        );
    }
    Ok(())
}

fn run_quiet(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {}", util::display_cmd(cmd)))?;
    ensure!(
        out.status.success(),
        "{} failed ({}): {}",
        util::display_cmd(cmd),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// `bytes` of xorshift64 output (no holes, nothing to compress).
fn write_data(path: &Path, bytes: u64) -> Result<()> {
    use std::io::Write as _;
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?,
    );
    let mut rng = io::Xorshift::new(0x9e37_79b9_7f4a_7c15);
    for _ in 0..bytes / 8 {
        f.write_all(&rng.next().to_le_bytes())?;
    }
    f.flush()?;
    Ok(())
}

/// The tree as a tarball: `files` files of 0..16 KiB (most small, as in a
/// source tree) in 100 directories, made in tmpfs and packed by `tar`.
fn make_tarball(env: &Env) -> Result<()> {
    let root = env.src.join("tree-src");
    let top = root.join("tree");
    std::fs::create_dir_all(&top)?;
    let dirs = TREE_DIRS.min(env.plan.files.max(1));
    for d in 0..dirs {
        std::fs::create_dir(top.join(format!("d{d:03}")))?;
    }
    let mut rng = io::Xorshift::new(SEED);
    let data: Vec<u8> = (0..16_384u32).map(|i| b'a' + (i % 26) as u8).collect();
    for i in 0..env.plan.files {
        if i % 10_000 == 0 {
            util::check_interrupted()?;
        }
        // Three in four files under 2 KiB, the rest up to 16 KiB.
        let r = rng.next();
        let len = if r % 4 == 0 {
            (r >> 8) % 16_384
        } else {
            (r >> 8) % 2_048
        };
        let path = top.join(format!("d{:03}/f{i:06}", i % dirs));
        std::fs::write(&path, &data[..usize::try_from(len)?])
            .with_context(|| format!("write {}", path.display()))?;
    }
    let mut tar = Command::new("tar");
    tar.arg("-cf")
        .arg(env.tarball())
        .arg("-C")
        .arg(&root)
        .arg("tree");
    run_quiet(&mut tar)?;
    std::fs::remove_dir_all(&root)?;
    Ok(())
}

fn is_mounted(mnt: &Path) -> bool {
    Command::new("mountpoint")
        .arg("-q")
        .arg(mnt)
        .status()
        .is_ok_and(|s| s.success())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| {
            let f: Vec<&str> = l.split_whitespace().take(3).collect();
            (f.len() == 3).then(|| f.join(" "))
        })
        .unwrap_or_else(|| "?".into())
}

/// Copies the template before each run and drops the page cache; after
/// it, reads the daemon's peak RSS and checks a changed image.
struct MountHooks<'a> {
    env: &'a Env,
    case: Case,
    template: &'a Path,
    /// Peak RSS of each driver's daemon, per run.
    rss: Vec<Vec<u64>>,
}

impl Hooks for MountHooks<'_> {
    fn before(&mut self, _tool: usize, _run: usize) -> Result<()> {
        let _ = std::fs::remove_file(self.env.rss());
        run_quiet(
            Command::new("cp")
                .arg("--sparse=always")
                .arg(self.template)
                .arg(self.env.img()),
        )?;
        cold::drop_caches()
    }

    fn after(&mut self, tool: usize, run: usize, sample: &mut Sample) -> Result<()> {
        let mnt = self.env.mnt();
        if !sample.status.success() && is_mounted(&mnt) {
            let _ = Command::new("umount").arg("-l").arg(&mnt).status();
        }
        if DRIVERS[tool] != Driver::Kernel {
            let text = std::fs::read_to_string(self.env.rss()).unwrap_or_default();
            if let Some(kib) = gnu_time_max_rss(&text) {
                self.rss[tool].push(kib * 1024);
            }
        }
        if sample.status.success() && self.case.writes() {
            let log = self.env.work.join(format!("e2fsck-{tool}-{run}.log"));
            sample.check = measure::e2fsck_check(&self.env.e2fsck, &self.env.img(), &log)?;
        }
        if sample.check == Check::NotRun && !sample.status.success() {
            sample.check = Check::Failed(sample.status.to_string());
        }
        Ok(())
    }
}

/// The `%M` line GNU time wrote (KiB); a daemon killed by a signal makes
/// time write "Command terminated by signal N" first.
fn gnu_time_max_rss(text: &str) -> Option<u64> {
    text.lines().rev().find_map(|l| l.trim().parse().ok())
}

struct CaseResult {
    case: Case,
    /// One per driver, in [`DRIVERS`] order.
    summaries: Vec<Summary>,
    rss: Vec<Option<u64>>,
}

/// Median wall time of `a` over `b`'s.
fn ratio(a: &Summary, b: &Summary) -> Option<f64> {
    match (a.median, b.median) {
        (Some(x), Some(y)) if !y.is_zero() => Some(x.as_secs_f64() / y.as_secs_f64()),
        _ => None,
    }
}

/// The result table (Markdown, so that it goes into the README as is):
/// median wall times, ours/fuse2fs and ours/kernel (time ratios, < 1:
/// ours faster) with the goals (ours/fuse2fs <= 0.2 everywhere, ours/kernel
/// <= 2 on sequential I/O), throughput of the data cases, daemons' peak RSS.
fn table(results: &[CaseResult], plan: &Plan) -> String {
    let mut s = String::from(
        "| case | ours | fuse2fs | kernel | ours/fuse2fs | ours/kernel | MB/s ours / fuse2fs / kernel | peak RSS ours / fuse2fs | failed |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let med = |x: &Summary| x.median.map_or("-".to_string(), fmt_duration);
    for r in results {
        let [o, f, k] = [&r.summaries[0], &r.summaries[1], &r.summaries[2]];
        let of = ratio(o, f);
        let ok = ratio(o, k);
        let mark = |v: Option<f64>, goal: Option<f64>| match (v, goal) {
            (None, _) => "-".to_string(),
            (Some(v), Some(g)) if v > g => format!("{v:.3} (goal ≤ {g})"),
            (Some(v), _) => format!("{v:.3}"),
        };
        let bytes = match r.case {
            Case::Seqwrite | Case::Seqread => Some(plan.size),
            Case::Randread | Case::Randwrite => Some(plan.ops * io::RAND_CHUNK),
            _ => None,
        };
        let mbs = |x: &Summary| match (bytes, x.median) {
            (Some(b), Some(m)) if !m.is_zero() => {
                format!("{:.0}", b as f64 / 1e6 / m.as_secs_f64())
            }
            _ => "-".to_string(),
        };
        let rss = |v: Option<u64>| v.map_or("-".to_string(), fmt_bytes);
        let failed: usize = r.summaries.iter().map(|x| x.failed).sum();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
            r.case.name(),
            med(o),
            med(f),
            med(k),
            mark(of, Some(0.2)),
            mark(ok, r.case.sequential().then_some(2.0)),
            if bytes.is_some() {
                format!("{} / {} / {}", mbs(o), mbs(f), mbs(k))
            } else {
                "-".to_string()
            },
            rss(r.rss[0]),
            rss(r.rss[1]),
            failed
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn summary(ms: u64) -> Summary {
        Summary {
            runs: 1,
            failed: 0,
            median: Some(Duration::from_millis(ms)),
            min: Some(Duration::from_millis(ms)),
            max: Some(Duration::from_millis(ms)),
            peak_rss: 0,
            allocated: None,
            wchar: None,
            rchar: None,
            read_bytes: None,
            busy: None,
        }
    }

    #[test]
    fn time_output() {
        assert_eq!(gnu_time_max_rss("12345\n"), Some(12345));
        assert_eq!(
            gnu_time_max_rss("Command exited with non-zero status 1\n2048\n"),
            Some(2048)
        );
        assert_eq!(gnu_time_max_rss("Command terminated by signal 9\n"), None);
        assert_eq!(gnu_time_max_rss(""), None);
    }

    #[test]
    fn table_rows() {
        let plan = Plan {
            size: 1 << 30,
            ops: 1000,
            files: 10,
            image_size: 4 << 30,
            runs: 1,
        };
        let results = [
            CaseResult {
                case: Case::Seqwrite,
                summaries: vec![summary(1000), summary(10_000), summary(400)],
                rss: vec![Some(8 << 20), Some(3 << 20), None],
            },
            CaseResult {
                case: Case::Find,
                summaries: vec![summary(300), summary(1000), summary(100)],
                rss: vec![None, None, None],
            },
        ];
        let t = table(&results, &plan);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert_eq!(
            lines[2],
            "| seqwrite | 1.00s | 10.00s | 400.0ms | 0.100 | 2.500 (goal ≤ 2) | 1074 / 107 / 2684 | 8.0MiB / 3.0MiB | 0 |"
        );
        // Not sequential: no kernel goal; short of the fuse2fs goal.
        assert_eq!(
            lines[3],
            "| find | 300.0ms | 1.00s | 100.0ms | 0.300 (goal ≤ 0.2) | 3.000 | - | - / - | 0 |"
        );
    }

    #[test]
    fn plans() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            a: MountArgs,
        }
        let p = |args: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
                .map_err(|e| e.to_string())
                .unwrap_or_else(|e| panic!("{e}"));
            Plan::of(&cli.a)
        };
        assert_eq!(p(&[]).size, 1 << 30);
        assert_eq!(p(&[]).files, 50_000);
        assert_eq!(p(&["--quick"]).runs, 1);
        assert_eq!(p(&["--quick", "--size", "8M"]).size, 8 << 20);
        assert_eq!(p(&["--quick", "--runs", "2"]).runs, 2);
    }

    #[test]
    fn scripts() {
        let env = Env {
            ours: "/b/ext4r".into(),
            helper: "/b/xtask".into(),
            mke2fs: "mke2fs".into(),
            e2fsck: "e2fsck".into(),
            fuse2fs: "/usr/bin/fuse2fs".into(),
            time: "/usr/bin/time".into(),
            work: "/w".into(),
            src: "/s".into(),
            plan: Plan {
                size: 1 << 20,
                ops: 10,
                files: 7,
                image_size: 1 << 30,
                runs: 1,
            },
        };
        assert_eq!(
            script(&env, Driver::Kernel, Case::Rm),
            "mount -t ext4 -o loop /w/run.img /w/mnt || exit 90; rm -rf /w/mnt/tree; rc=$?; \
             umount /w/mnt || rc=91; exit $rc"
        );
        let ours = script(&env, Driver::Ours, Case::Randread);
        assert!(
            ours.starts_with("/usr/bin/time -f %M -o /w/daemon.rss /b/ext4r mount -f /w/run.img /w/mnt & pid=$!;"),
            "{ours}"
        );
        assert!(
            ours.ends_with(
                "/b/xtask bench mount-io randread /w/mnt/big 10 81985529216486895; rc=$?; \
                 /b/ext4r umount /w/mnt || rc=91; wait $pid || rc=92; exit $rc"
            ),
            "{ours}"
        );
        // 7 files in 7 directories, and the top.
        assert!(workload(&env, Case::Find).ends_with("-eq 15"));
        assert_eq!(quote("a b'c"), r"'a b'\''c'");
    }
}
