//! `cargo xtask bench <tool>`: an ext4r tool against its e2fsprogs counterpart on
//! the same input, alternating runs (DESIGN.md §4). The measuring lives in
//! [`crate::measure`]; a tool adds a [`Hooks`] impl that prepares the input
//! before each run and checks the result after it; `bench fsck` makes its
//! images once and runs `ext4r fsck -fn` vs `e2fsck -fn` on them; `bench read`
//! runs `ext4r cat`/`extract` vs `debugfs dump`/`rdump` on one cached image;
//! `bench tune` turns metadata_csum off and on with `ext4r tune` and `tune2fs`
//! on copies of the many-files image.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use clap::Subcommand;

use crate::measure::{self, Check, Hooks, Row, Sample, Tool};
use crate::util::{self, fmt_bytes, Size, TempDir};

mod cold;
mod defrag;
pub(crate) mod filled;
mod fsck;
mod large;
mod links;
mod mount;
mod populate;
mod read;
mod resize;
mod scaling;
mod tune;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand)]
enum Which {
    /// `ext4r mkfs` vs `mke2fs` on fresh sparse images of each size.
    Mkfs(MkfsArgs),
    /// `ext4r fsck -fn` vs `e2fsck -fn` on an empty 15 TiB image and on a cached
    /// 16 GiB image with 2,000,000 files; `--images vol16t,files10m` adds a
    /// 16 TiB image with 4 TB fallocated and a 40 GiB one with 10,000,000 files.
    /// `--cold`: images on the disk, page cache dropped before every run,
    /// bytes read, the disk's speed and each image's floor (issue 33).
    Fsck(fsck::FsckArgs),
    /// `ext4r cat` vs `debugfs dump` on a 1 GiB file and `ext4r extract` vs
    /// `debugfs rdump` on 100,000 small files, in a cached 4 GiB image.
    /// `--ours-cmd` replaces `target/release/ext4r` (the subcommand is appended).
    Read(read::ReadArgs),
    /// `ext4r tune` vs `tune2fs`: `-O ^metadata_csum` and `-O metadata_csum` on
    /// copies of the cached 16 GiB image with 2,000,000 files.
    Tune(tune::TuneArgs),
    /// `ext4r mkfs -d` vs `mke2fs -d` and `ext4r cp` vs the kernel (loop mount,
    /// `cp`, `umount`): a tree of 100,000 files and one 4 GiB file.
    Populate(populate::PopulateArgs),
    /// `e4defrag-r` vs `e4defrag` on the fragmented images of `cargo xtask
    /// fragment`: -c output, online time/extents/hashes/e2fsck, -r cold reads.
    Defrag(defrag::DefragArgs),
    /// `ext4r resize` vs `resize2fs` on copies: an empty 1 TiB ext4 grown to
    /// 16 TiB, and an 8 GiB ext4 half filled by the kernel shrunk to `-M`.
    Resize(resize::ResizeArgs),
    /// `ext4r mount` vs fuse2fs vs the kernel's loop mount: sequential and
    /// random I/O, untar, find + stat and rm -rf of a tree, cold cache,
    /// images on the disk (issue 32); `--quick` for a smoke test.
    Mount(mount::MountArgs),
    /// The random 4 KiB I/O that `bench mount` runs inside a mount.
    #[command(hide = true)]
    MountIo(mount::IoArgs),
}

/// Where the benchmarks make their images unless told (`--dir`).
const DEFAULT_DIR: &str = "/dev/shm";

/// Options every benchmark takes.
#[derive(clap::Args)]
struct Common {
    /// Runs per tool, alternating ours, theirs, ours, …
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where to create the temporary directory for images (tmpfs takes sparse
    /// files beyond the 16 TiB a host ext4 allows); `bench fsck --cold`
    /// builds and keeps its images here too, on a disk [default there:
    /// `<target>/ext4r-bench-cold`].
    #[arg(long, default_value = DEFAULT_DIR)]
    dir: PathBuf,
    /// Our command line, whitespace-separated, instead of building and running
    /// `target/release/ext4r <tool>`. `--ours mke2fs` (or `--ours e2fsck` for
    /// fsck) validates the harness.
    #[arg(long, visible_alias = "ours", value_name = "CMD")]
    ours_cmd: Option<String>,
    /// The reference command line, whitespace-separated [default: the e2fsprogs tool].
    #[arg(long, visible_alias = "theirs", value_name = "CMD")]
    theirs_cmd: Option<String>,
}

#[derive(clap::Args)]
struct MkfsArgs {
    /// Image sizes, comma-separated, binary suffixes K M G T P.
    #[arg(long, value_delimiter = ',', default_value = "1T,15T")]
    sizes: Vec<Size>,
    #[command(flatten)]
    common: Common,
    /// Extra mke2fs options given to both tools (after `--`), e.g. `-- -O ^metadata_csum`.
    #[arg(last = true)]
    extra: Vec<String>,
}

/// Fixed identity and clock, so both tools lay out byte-comparable images.
const UUID: &str = "6d9d3b3e-5f0c-4c7a-9a53-0e4f3b2a1c5d";
const HASH_SEED: &str = "0c5e2b8a-3f61-4d27-b9e4-71a0d6c3f812";
const FAKE_TIME: &str = "1700000000";

pub fn run(args: &Args) -> Result<()> {
    util::install_interrupt_handler();
    match &args.which {
        Which::Mkfs(a) => mkfs(a),
        Which::Fsck(a) => fsck::run(a),
        Which::Read(a) => read::run(a),
        Which::Tune(a) => tune::run(a),
        Which::Defrag(a) => defrag::run(a),
        Which::Populate(a) => populate::run(a),
        Which::Resize(a) => resize::run(a),
        Which::Mount(a) => mount::run(a),
        Which::MountIo(a) => mount::io_run(a),
    }
}

fn mkfs(args: &MkfsArgs) -> Result<()> {
    let c = &args.common;
    ensure!(c.runs >= 1, "--runs must be at least 1");
    ensure!(!args.sizes.is_empty(), "--sizes is empty");
    let e2fsck = util::find_program("e2fsck".as_ref()).context("e2fsck not found on $PATH")?;
    let ours = resolve_ours(c, "mkfs")?;
    let theirs = util::resolve_cmd(c.theirs_cmd.as_deref().unwrap_or("mke2fs"))?;

    ensure!(
        c.dir.is_dir(),
        "--dir {} is not a directory",
        c.dir.display()
    );
    let tmp = TempDir::new_in(&c.dir, "ext4r-bench-")?;
    let img = tmp.path().join("bench.img");
    let free = rustix::fs::statvfs(tmp.path())
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
        .unwrap_or(0);
    println!(
        "images in {} ({} free)",
        tmp.path().display(),
        fmt_bytes(free)
    );

    let mut common_args: Vec<OsString> = ["-F", "-q", "-t", "ext4", "-U", UUID, "-E"]
        .iter()
        .map(OsString::from)
        .collect();
    common_args.push(format!("hash_seed={HASH_SEED}").into());
    common_args.extend(args.extra.iter().map(OsString::from));
    common_args.push(img.clone().into());
    let tool = |name: &str, base: &[OsString]| Tool {
        name: name.to_string(),
        argv: base.iter().chain(&common_args).cloned().collect(),
        env: vec![("E2FSPROGS_FAKE_TIME".into(), FAKE_TIME.into())],
        discard_stdout: false,
    };
    let tools = [tool("ours", &ours), tool("theirs", &theirs)];
    for t in &tools {
        println!("{:<7} {}", t.name, util::display_cmd(&t.command()?));
    }
    let floor = measure::spawn_floor(tmp.path())?;
    println!(
        "peak RSS of `true` spawned the same way (the measurement floor): {}",
        fmt_bytes(floor)
    );

    let mut rows: Vec<Row> = Vec::new();
    for size in &args.sizes {
        println!(
            "== {} ({} bytes), {} runs each",
            size.label, size.bytes, c.runs
        );
        let mut hooks = MkfsHooks {
            img: &img,
            size: size.bytes,
            e2fsck: &e2fsck,
            logdir: tmp.path(),
        };
        let samples = measure::alternate([&tools[0], &tools[1]], c.runs, tmp.path(), &mut hooks);
        // Give the memory back before the next (maybe larger) size.
        let _ = std::fs::remove_file(&img);
        let samples = samples?;
        rows.extend(measure::rows_for(
            &size.label,
            [&tools[0], &tools[1]],
            &samples,
        ));
    }
    println!();
    measure::print_table("size", &rows);
    println!(
        "ours/theirs = median wall time ratio (<1: ours faster); peak RSS includes the {} floor",
        fmt_bytes(floor)
    );
    let failed: usize = rows.iter().map(|r| r.summary.failed).sum();
    if failed > 0 {
        bail!("{failed} run(s) failed or left an image that e2fsck -fn rejects");
    }
    Ok(())
}

/// Recreates a fresh sparse image before each run; after it, records the
/// image's allocated bytes and, for ours, checks it with `e2fsck -fn`.
struct MkfsHooks<'a> {
    img: &'a Path,
    size: u64,
    e2fsck: &'a Path,
    logdir: &'a Path,
}

impl Hooks for MkfsHooks<'_> {
    fn before(&mut self, _tool: usize, _run: usize) -> Result<()> {
        fresh_sparse(self.img, self.size)
    }

    fn after(&mut self, tool: usize, run: usize, sample: &mut Sample) -> Result<()> {
        let meta = std::fs::metadata(self.img)?;
        sample.allocated = Some(meta.blocks().saturating_mul(512));
        if tool == 0 && sample.status.success() {
            let log = self.logdir.join(format!("e2fsck-{run}.log"));
            sample.check = measure::e2fsck_check(self.e2fsck, self.img, &log)?;
        }
        Ok(())
    }
}

/// Our command line: `--ours-cmd` as given, else the freshly built binary as it
/// is shipped ([`util::shipped_ext4r`]) with the tool's subcommand.
/// `img` made an empty sparse file of `size` bytes before a run:
/// truncating first frees the pages of the last run (tmpfs), `set_len`
/// makes it sparse.
pub(crate) fn fresh_sparse(img: &Path, size: u64) -> Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(img)
        .with_context(|| format!("cannot create {}", img.display()))?;
    f.set_len(size)
        .with_context(|| format!("cannot size {} to {size}", img.display()))?;
    Ok(())
}

fn resolve_ours(c: &Common, subcommand: &str) -> Result<Vec<OsString>> {
    match &c.ours_cmd {
        Some(cmd) => util::resolve_cmd(cmd),
        None => Ok(vec![util::shipped_ext4r()?.into(), subcommand.into()]),
    }
}

/// One case of a comparison on a read-only input: one untimed warm-up run of
/// each tool (the reference, the last tool, first; bails if it fails, as
/// then the input is bad), then `runs` alternating timed runs. Returns the
/// table rows, one per tool, each but the reference's with its ratio to
/// the reference; runs that failed or failed their check are described in
/// `failures`.
fn compare(
    label: &str,
    tools: &[Tool],
    runs: usize,
    logdir: &Path,
    hooks: &mut dyn Hooks,
    failures: &mut Vec<String>,
) -> Result<Vec<Row>> {
    let reference = tools.len().saturating_sub(1);
    for (i, t) in tools.iter().enumerate().rev() {
        util::check_interrupted()?;
        hooks.before(i, 0)?;
        let log = logdir.join(format!("warmup-{i}.log"));
        let mut s = t.run_measured(&log)?;
        util::check_interrupted()?;
        hooks.after(i, 0, &mut s)?;
        println!("  warm-up {:<7} {}", t.name, s.describe());
        if !s.ok() {
            print!("{}", util::tail(&log, 10));
            if i == reference {
                bail!("the reference failed its warm-up run on {label}: the input is bad");
            }
        }
    }
    let tools: Vec<&Tool> = tools.iter().collect();
    let samples = measure::alternate_all(&tools, runs, logdir, hooks)?;
    for (t, ss) in tools.iter().zip(&samples) {
        let bad: Vec<String> = ss
            .iter()
            .filter(|s| !s.ok())
            .map(|s| match &s.check {
                Check::Failed(why) => why.clone(),
                _ => s.status.to_string(),
            })
            .collect();
        if !bad.is_empty() {
            failures.push(format!(
                "{label}: {} failed {} of {} runs ({})",
                t.name,
                bad.len(),
                ss.len(),
                bad.join(", ")
            ));
        }
    }
    Ok(measure::rows_vs_last(label, &tools, &samples))
}

/// For read-only inputs: nothing to prepare or check per run.
struct NoHooks;

impl Hooks for NoHooks {
    fn before(&mut self, _tool: usize, _run: usize) -> Result<()> {
        Ok(())
    }

    fn after(&mut self, _tool: usize, _run: usize, _sample: &mut Sample) -> Result<()> {
        Ok(())
    }
}

/// A fresh sparse copy of a bench image (tmpfs would fill the holes of a
/// plain copy).
pub(crate) fn copy_image(from: &Path, to: &Path) -> Result<()> {
    ext4r_txn::testutil::copy_sparse(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// The table of a bench whose runs are each checked by `e2fsck -fn`, its
/// legend, and an error when a run failed or left an unclean image.
pub(crate) fn report_checked(
    column: &str,
    rows: &[measure::Row],
    floor: u64,
    failures: &[String],
) -> Result<()> {
    println!();
    measure::print_table(column, rows);
    println!(
        "ours/theirs = median wall time ratio (<1: ours faster; only over runs that exited 0 \
         and left an e2fsck-clean image); peak RSS includes the {} floor",
        util::fmt_bytes(floor)
    );
    if !failures.is_empty() {
        for f in failures {
            println!("FAILED: {f}");
        }
        bail!("{} tool(s) failed or left an unclean image", failures.len());
    }
    Ok(())
}
