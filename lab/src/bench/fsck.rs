//! `cargo xtask bench fsck`: `ext4r fsck -fn` vs `e2fsck -fn` on the same clean
//! images, alternating, hot cache (one untimed warm-up run of each first):
//! - `empty15t`: an empty 15 TiB ext4 from `mke2fs -t ext4` on a sparse file in
//!   tmpfs (made fresh, removed afterwards);
//! - `files`: the cached 16 GiB image with 2,000,000 kernel-written files (see
//!   [`super::filled`]);
//! - `vol16t`: the cached 16 TiB image with 400,000 fallocated 10 MiB files
//!   (~4 TB in use) and `files10m`: the cached 40 GiB image with 10,000,000
//!   empty files (see [`super::large`]). Not in the default set: building them
//!   takes minutes and gigabytes of tmpfs (RAM); the build refuses when
//!   `MemAvailable` is too low.
//!
//! `--threads 1,0` runs ours with `-m 1` and with the default thread count in
//! the same alternation, each row with its ratio to e2fsck's.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

use super::{filled, large, resolve_ours, Common};
use crate::measure::{self, Row, Tool};
use crate::util::{self, fmt_bytes, fmt_duration, TempDir};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Image {
    /// Empty 15 TiB ext4 (`mke2fs -t ext4`), sparse, in --dir.
    Empty15t,
    /// 16 GiB ext4 with 2,000 dirs × 1,000 files (cached in --cache).
    Files,
    /// 16 TiB ext4 (`mke2fs -t ext4`) with 400 dirs × 1,000 files of 10 MiB,
    /// each one fallocate (~4 TB in use, unwritten extents); cached in --cache,
    /// 746 MiB of tmpfs, ~8 minutes to build.
    Vol16t,
    /// 40 GiB ext4 (`-N 10400000`) with 10,000 dirs × 1,000 empty files;
    /// cached in --cache, 2.9 GiB of tmpfs, ~15 minutes to build; the build
    /// needs MemAvailable ≥ its size + 8 GiB.
    Files10m,
}

#[derive(clap::Args)]
pub struct FsckArgs {
    /// Which images, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "empty15t,files"
    )]
    images: Vec<Image>,
    /// Where the built images (files, vol16t, files10m) are cached between runs.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm/ext4r-bench")]
    cache: PathBuf,
    /// Thread counts for ours, comma-separated: each is a row of its own
    /// against e2fsck, all run in turn in one alternation (`ours -m1`,
    /// `ours`, `e2fsck`, `ours -m1`, …). `0` is the default (no `-m`: the
    /// available cores); `--threads 1,0` reports one thread and the default.
    #[arg(long, value_delimiter = ',', value_name = "LIST", default_value = "0")]
    threads: Vec<usize>,
    /// Build the cached images named in --images again even if their stamps match.
    #[arg(long)]
    rebuild: bool,
    /// Directories of 1,000 files in the files10m image: less than 10000 makes
    /// a smaller trial image in its place (to time the build first).
    #[arg(long, value_name = "N", default_value_t = 10_000, hide = true)]
    files10m_dirs: usize,
    /// Instead of the comparison: per-pass times with `-m 1` and `-m 2`, the
    /// serial fraction of each pass, and what that gives on 16 and 64 threads
    /// (Amdahl), against e2fsck (see `scaling.rs`).
    #[arg(long)]
    scaling: bool,
    #[command(flatten)]
    common: Common,
}

const EMPTY_SIZE: u64 = 15 << 40;

pub fn run(args: &FsckArgs) -> Result<()> {
    let c = &args.common;
    ensure!(c.runs >= 1, "--runs must be at least 1");
    ensure!(!args.images.is_empty(), "--images is empty");
    ensure!(!args.threads.is_empty(), "--threads is empty");
    ensure!(
        c.dir.is_dir(),
        "--dir {} is not a directory",
        c.dir.display()
    );
    let ours = resolve_ours(c, "fsck")?;
    let theirs = util::resolve_cmd(c.theirs_cmd.as_deref().unwrap_or("e2fsck"))?;
    let tmp = TempDir::new_in(&c.dir, "ext4r-bench-")?;
    let floor = measure::spawn_floor(tmp.path())?;

    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for &which in &args.images {
        util::check_interrupted()?;
        let (label, img, _scratch) = match which {
            Image::Empty15t => {
                let img = tmp.path().join("empty-15t.img");
                make_empty(&img)?;
                ("empty 15T", img.clone(), Some(Scratch(img)))
            }
            Image::Files => (
                "2M files 16G",
                filled::image(&args.cache, args.rebuild)?,
                None,
            ),
            Image::Vol16t => (
                "16T 4T used",
                large::vol16t(&args.cache, args.rebuild)?,
                None,
            ),
            Image::Files10m => (
                if args.files10m_dirs == 10_000 {
                    "10M files 40G"
                } else {
                    "files10m trial"
                },
                large::files10m(&args.cache, args.rebuild, args.files10m_dirs)?,
                None,
            ),
        };
        if args.scaling {
            super::scaling::run(label, &img, &ours, &theirs, c.runs)?;
            continue;
        }
        let tool = |name: String, base: &[OsString], extra: Vec<OsString>| Tool {
            name,
            argv: base
                .iter()
                .cloned()
                .chain(extra)
                .chain([OsString::from("-fn"), img.clone().into_os_string()])
                .collect(),
            env: Vec::new(),
            discard_stdout: false,
        };
        let mut tools: Vec<Tool> = args
            .threads
            .iter()
            .map(|&n| match n {
                0 => tool("ours".into(), &ours, Vec::new()),
                n => tool(
                    format!("ours -m{n}"),
                    &ours,
                    vec!["-m".into(), n.to_string().into()],
                ),
            })
            .collect();
        tools.push(tool("e2fsck".into(), &theirs, Vec::new()));
        println!("== {label}: {}, {} runs each", img.display(), c.runs);
        for t in &tools {
            println!("  {:<7} {}", t.name, util::display_cmd(&t.command()?));
        }
        // Warm-up: reads the metadata into the page cache (tmpfs: faults in the
        // pages) and shows up front whether each tool accepts the image.
        rows.extend(super::compare(
            label,
            &tools,
            c.runs,
            tmp.path(),
            &mut super::NoHooks,
            &mut failures,
        )?);
    }
    if args.scaling {
        return Ok(());
    }
    println!();
    measure::print_table("image", &rows);
    println!(
        "ours/theirs = median wall time ratio (<1: ours faster; only over runs that exited 0); \
         peak RSS includes the {} floor",
        fmt_bytes(floor)
    );
    if args.images.iter().any(|i| *i != Image::Empty15t) {
        println!(
            "built images cached in {} (--rebuild to remake them)",
            args.cache.display()
        );
    }
    if !failures.is_empty() {
        for f in &failures {
            println!("FAILED: {f}");
        }
        bail!("{} tool(s) did not exit 0 on a clean image", failures.len());
    }
    Ok(())
}

fn make_empty(img: &Path) -> Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(img)
        .with_context(|| format!("cannot create {}", img.display()))?;
    f.set_len(EMPTY_SIZE)
        .with_context(|| format!("cannot size {} to 15 TiB", img.display()))?;
    drop(f);
    let took = util::run_step(
        "mke2fs 15T",
        Command::new("mke2fs")
            .args(["-F", "-q", "-t", "ext4"])
            .arg(img),
    )?;
    let used = std::fs::metadata(img).map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512)?;
    println!(
        "  made in {}, {} allocated",
        fmt_duration(took),
        fmt_bytes(used)
    );
    Ok(())
}

/// A fresh image removed as soon as its case is done (tmpfs memory is RAM).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
