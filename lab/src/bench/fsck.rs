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
//!
//! `--cold` is fsck at boot (issue 33): the page cache dropped before every
//! run of either tool, warm-ups included, on images built on the machine's
//! disk (`--dir`, by default `<target>/ext4r-bench-cold`; tmpfs refused):
//! - `files300k`: 8 GiB, 1,500 dirs × 200 files of 100 bytes;
//! - `files`: the 2,000,000-file image above, built on the disk;
//! - `vol64g`: 64 GiB with 40% of it in 2,600 fallocated 10 MiB files;
//! - `dirs200k`: 16 GiB holding 200,000 empty directories;
//! - `links`: a backup tree, 20 hard-linked snapshots (see `links.rs`).
//!
//! Each run's `rchar` (what the tool asked for), `read_bytes` (what the disk
//! delivered) and disk busy time are reported, and the disk's own
//! sequential speed is measured at the end of the same session: the floor
//! of a check is what it must read (the smaller median `rchar` of the
//! tools) at that speed (see `cold.rs`).

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

use super::{cold, filled, large, links, resolve_ours, Common};
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
    /// 8 GiB ext4 with 1,500 dirs × 200 files of 100 bytes (cached).
    Files300k,
    /// 64 GiB ext4, 40% of it in 2,600 fallocated 10 MiB files (cached).
    Vol64g,
    /// 16 GiB ext4 holding 200 dirs × 1,000 empty directories (cached).
    Dirs200k,
    /// 8 GiB ext4 holding a backup tree: 20 hard-linked snapshots of 50,000
    /// files, most with 2–20 links (cached).
    Links,
}

/// The images of `--cold` when `--images` is not given.
const COLD_IMAGES: [Image; 5] = [
    Image::Files300k,
    Image::Files,
    Image::Vol64g,
    Image::Dirs200k,
    Image::Links,
];

/// The images without `--cold` when `--images` is not given.
const HOT_IMAGES: [Image; 2] = [Image::Empty15t, Image::Files];

#[derive(clap::Args)]
pub struct FsckArgs {
    /// Which images, comma-separated [default: empty15t,files; with --cold:
    /// files300k,files,vol64g,dirs200k,links].
    #[arg(long, value_enum, value_delimiter = ',')]
    images: Vec<Image>,
    /// Where the built images are cached between runs [default:
    /// /dev/shm/ext4r-bench; with --cold: the --dir].
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Cold cache, as at boot: the page cache dropped before every run
    /// (needs root; says so when it cannot), images built on the disk in
    /// --dir (default `<target>/ext4r-bench-cold`; tmpfs is refused). Adds
    /// bytes read, disk busy time, the disk's sequential speed and each
    /// image's floor.
    #[arg(long)]
    cold: bool,
    /// Also run the binary `cargo build --release` makes (the README's
    /// set-up command), as a row of its own beside the shipped one.
    #[arg(long)]
    release_too: bool,
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

/// The `--dir` of a cold run when none is given: on the disk, beside the builds.
fn cold_dir(given: &Path) -> Result<PathBuf> {
    if given != Path::new(super::DEFAULT_DIR) {
        return Ok(given.to_path_buf());
    }
    let d = util::target_dir().join("ext4r-bench-cold");
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    Ok(d)
}

pub fn run(args: &FsckArgs) -> Result<()> {
    let c = &args.common;
    ensure!(c.runs >= 1, "--runs must be at least 1");
    ensure!(!args.threads.is_empty(), "--threads is empty");
    let dir = if args.cold {
        cold_dir(&c.dir)?
    } else {
        c.dir.clone()
    };
    ensure!(dir.is_dir(), "--dir {} is not a directory", dir.display());
    let images: Vec<Image> = match (&args.images[..], args.cold) {
        ([], true) => COLD_IMAGES.to_vec(),
        ([], false) => HOT_IMAGES.to_vec(),
        (list, _) => list.to_vec(),
    };
    let cache = match &args.cache {
        Some(c) => c.clone(),
        None if args.cold => dir.clone(),
        None => PathBuf::from("/dev/shm/ext4r-bench"),
    };
    if args.cold {
        std::fs::create_dir_all(&cache)
            .with_context(|| format!("cannot create {}", cache.display()))?;
        for d in [&dir, &cache] {
            ensure!(
                !cold::is_tmpfs(d)?,
                "--cold: {} is tmpfs, whose pages are the files themselves (no cold cache \
                 there); give a --dir on a disk",
                d.display()
            );
        }
        println!("load average at the start: {}", cold::load());
    }
    let ours = resolve_ours(c, "fsck")?;
    let release = if args.release_too {
        Some(util::release_ext4r("fsck")?)
    } else {
        None
    };
    let theirs = util::resolve_cmd(c.theirs_cmd.as_deref().unwrap_or("e2fsck"))?;
    let tmp = TempDir::new_in(&dir, "ext4r-bench-")?;
    let floor = measure::spawn_floor(tmp.path())?;
    let mut dropped = false;
    let mut hooks: Box<dyn measure::Hooks> = if args.cold {
        let c = cold::Cold::new(&cache);
        dropped = c.can_drop;
        Box::new(c)
    } else {
        Box::new(super::NoHooks)
    };

    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    // Per image: its label and file, for the floors of a cold run.
    let mut checked: Vec<(&'static str, PathBuf)> = Vec::new();
    for &which in &images {
        util::check_interrupted()?;
        let (label, img, _scratch) = match which {
            Image::Empty15t => {
                let img = tmp.path().join("empty-15t.img");
                make_empty(&img)?;
                ("empty 15T", img.clone(), Some(Scratch(img)))
            }
            Image::Files => ("2M files 16G", filled::image(&cache, args.rebuild)?, None),
            Image::Vol16t => ("16T 4T used", large::vol16t(&cache, args.rebuild)?, None),
            Image::Files10m => (
                if args.files10m_dirs == 10_000 {
                    "10M files 40G"
                } else {
                    "files10m trial"
                },
                large::files10m(&cache, args.rebuild, args.files10m_dirs)?,
                None,
            ),
            Image::Files300k => (
                "300k files 8G",
                large::files300k(&cache, args.rebuild)?,
                None,
            ),
            Image::Vol64g => (
                "64G 40% in 10M files",
                large::vol64g(&cache, args.rebuild)?,
                None,
            ),
            Image::Dirs200k => (
                "200k dirs 16G",
                large::dirs200k(&cache, args.rebuild)?,
                None,
            ),
            Image::Links => (
                "backup tree, links",
                links::image(&cache, args.rebuild)?,
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
        if let Some(r) = &release {
            tools.push(tool("ours (release)".into(), r, Vec::new()));
        }
        tools.push(tool("e2fsck".into(), &theirs, Vec::new()));
        println!("== {label}: {}, {} runs each", img.display(), c.runs);
        for t in &tools {
            println!("  {:<7} {}", t.name, util::display_cmd(&t.command()?));
        }
        // Warm-up: hot, it reads the metadata into the page cache (tmpfs:
        // faults in the pages); cold, it is one more cold run. Either way
        // it shows up front whether each tool accepts the image.
        rows.extend(super::compare(
            label,
            &tools,
            c.runs,
            tmp.path(),
            hooks.as_mut(),
            &mut failures,
        )?);
        checked.push((label, img));
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
    if args.cold {
        println!(
            "{}; rchar = bytes asked of read calls, read_bytes = bytes the disk delivered \
             (the binary's own pages and the kernel's read-ahead included), disk busy = \
             time the disk had I/O in flight (anyone's); medians",
            if dropped {
                "cold: page cache dropped before every run"
            } else {
                "NOT cold: the page cache could not be dropped"
            }
        );
        println!("load average at the end: {}", cold::load());
        print_floors(&checked, &rows, &cache)?;
    }
    if images.iter().any(|i| *i != Image::Empty15t) {
        println!(
            "built images cached in {} (--rebuild to remake them)",
            cache.display()
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

/// The disk's sequential speed, measured now on a file beside the images,
/// and each image's floor: what a check must read (the smaller median
/// `rchar` of the tools) at that speed, beside each tool's median.
fn print_floors(checked: &[(&'static str, PathBuf)], rows: &[Row], dir: &Path) -> Result<()> {
    println!();
    let file = cold::speed_file(dir)?;
    println!(
        "the disk's sequential read speed (O_DIRECT reads of {}), measured now:",
        file.display()
    );
    let speed = cold::measure_speed(&[file])?;
    println!(
        "floor = the bytes a check must read (the smaller median rchar) / {}/s; \
         ×floor = median / floor; idle = 1 - disk busy / median",
        fmt_bytes(speed as u64)
    );
    for (label, _) in checked {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.case == *label).collect();
        let Some(must) = mine.iter().filter_map(|r| r.summary.rchar).min() else {
            println!("  {label}: no rchar measured");
            continue;
        };
        let floor = must as f64 / speed.max(1.0);
        let mut line = format!(
            "  {label}: must read {} → floor {}",
            fmt_bytes(must),
            fmt_duration(std::time::Duration::from_secs_f64(floor))
        );
        for r in &mine {
            let Some(m) = r.summary.median else { continue };
            let m = m.as_secs_f64();
            let idle = r
                .summary
                .busy
                .map(|b| 1.0 - b.as_secs_f64() / m.max(1e-9))
                .map_or(String::new(), |i| {
                    format!(", idle {:.0}%", i.max(0.0) * 100.0)
                });
            line += &format!(
                "; {} {:.3}s = {:.2}× floor{idle}",
                r.tool,
                m,
                m / floor.max(1e-9)
            );
        }
        println!("{line}");
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
