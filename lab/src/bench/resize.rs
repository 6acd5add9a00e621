//! `cargo xtask bench resize`: `ext4r resize` vs `resize2fs`, alternating,
//! each run on a fresh copy of the case's base image (copied before the
//! run, untimed), `e2fsck -fn` after every run of either tool.
//!
//! - grow: an empty ext4 of 1 TiB (mke2fs defaults) in an image file made
//!   16 TiB long, grown to the whole file;
//! - shrink: an 8 GiB ext4 half filled by the kernel (directories of
//!   files of mixed sizes, spread over the groups as the kernel spreads
//!   them), shrunk to its minimum (`-M`). The sizes reached are printed:
//!   ours goes lower than resize2fs's estimate, so it moves more.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

use super::{fresh_sparse, resolve_ours, Common};
use crate::measure::{self, Hooks, Row, Sample, Tool};
use crate::util::{self, fmt_bytes, TempDir};

#[derive(clap::Args)]
pub struct ResizeArgs {
    /// Only the cases whose names contain this (grow, shrink).
    #[arg(long)]
    only: Option<String>,
    #[command(flatten)]
    common: Common,
}

const TIB: u64 = 1 << 40;
const GIB: u64 = 1 << 30;

pub fn run(args: &ResizeArgs) -> Result<()> {
    let c = &args.common;
    ensure!(c.runs >= 1, "--runs must be at least 1");
    ensure!(
        c.dir.is_dir(),
        "--dir {} is not a directory",
        c.dir.display()
    );
    let e2fsck = util::find_program("e2fsck".as_ref()).context("e2fsck not found on $PATH")?;
    let ours = resolve_ours(c, "resize")?;
    let theirs = util::resolve_cmd(c.theirs_cmd.as_deref().unwrap_or("resize2fs"))?;
    let tmp = TempDir::new_in(&c.dir, "ext4r-bench-")?;
    let floor = measure::spawn_floor(tmp.path())?;
    let work = tmp.path().join("work.img");
    let wants = |name: &str| args.only.as_deref().is_none_or(|o| name.contains(o));

    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    if wants("grow") {
        let base = tmp.path().join("grow-base.img");
        fresh_sparse(&base, TIB)?;
        util::run_step(
            "mke2fs -t ext4 (1 TiB)",
            Command::new("mke2fs")
                .args(["-q", "-F", "-t", "ext4"])
                .arg(&base),
        )?;
        let label = "grow 1T -> 16T";
        rows.extend(case(
            label,
            &[&ours, &theirs],
            &[],
            Prepare {
                base: &base,
                work: &work,
                grow_to: Some(16 * TIB),
                e2fsck: &e2fsck,
                logdir: tmp.path(),
                sizes: Vec::new(),
            },
            c.runs,
            &mut failures,
        )?);
        let _ = std::fs::remove_file(&base);
    }
    if wants("shrink") {
        let base = tmp.path().join("shrink-base.img");
        half_full(&base, &tmp.path().join("mnt"))?;
        let label = "shrink 8G half full -M";
        rows.extend(case(
            label,
            &[&ours, &theirs],
            &["-M"],
            Prepare {
                base: &base,
                work: &work,
                grow_to: None,
                e2fsck: &e2fsck,
                logdir: tmp.path(),
                sizes: Vec::new(),
            },
            c.runs,
            &mut failures,
        )?);
        let _ = std::fs::remove_file(&base);
    }
    let _ = std::fs::remove_file(&work);
    super::report_checked("case", &rows, floor, &failures)
}

/// One case: both tools with `extra` before the image, alternating.
fn case(
    label: &str,
    cmds: &[&Vec<OsString>; 2],
    extra: &[&str],
    mut hooks: Prepare<'_>,
    runs: usize,
    failures: &mut Vec<String>,
) -> Result<Vec<Row>> {
    util::check_interrupted()?;
    let tool = |name: &str, cmd: &[OsString]| Tool {
        name: name.to_string(),
        argv: cmd
            .iter()
            .cloned()
            .chain(extra.iter().map(OsString::from))
            .chain([hooks.work.to_path_buf().into_os_string()])
            .collect(),
        env: Vec::new(),
        discard_stdout: false,
    };
    let tools = [tool("ours", cmds[0]), tool("resize2fs", cmds[1])];
    println!(
        "== {label}: copies of {}, {runs} runs each",
        hooks.base.display()
    );
    for t in &tools {
        println!("  {:<9} {}", t.name, util::display_cmd(&t.command()?));
    }
    let logdir = hooks.logdir;
    let rows = super::compare(label, &tools, runs, logdir, &mut hooks, failures)?;
    for (t, blocks) in &hooks.sizes {
        println!("  {:<9} left {blocks} blocks", tools[*t].name);
    }
    Ok(rows)
}

/// A fresh copy of the base before each run (made `grow_to` long);
/// `e2fsck -fn` after it, and the block count it left.
struct Prepare<'a> {
    base: &'a Path,
    work: &'a Path,
    grow_to: Option<u64>,
    e2fsck: &'a Path,
    logdir: &'a Path,
    /// (tool, blocks) of each run, the first of each tool's.
    sizes: Vec<(usize, u64)>,
}

impl Hooks for Prepare<'_> {
    fn before(&mut self, _tool: usize, _run: usize) -> Result<()> {
        super::copy_image(self.base, self.work)?;
        if let Some(n) = self.grow_to {
            std::fs::OpenOptions::new()
                .write(true)
                .open(self.work)?
                .set_len(n)?;
        }
        Ok(())
    }

    fn after(&mut self, tool: usize, run: usize, sample: &mut Sample) -> Result<()> {
        if !sample.status.success() {
            return Ok(());
        }
        let log = self.logdir.join(format!("e2fsck-{tool}-{run}.log"));
        sample.check = measure::e2fsck_check(self.e2fsck, self.work, &log)?;
        if !self.sizes.iter().any(|s| s.0 == tool) {
            let dev = ext4r::device::FileDevice::open(self.work, Default::default())?;
            self.sizes
                .push((tool, ext4r::resize::superblock(&dev)?.blocks_count()));
        }
        Ok(())
    }
}

/// An 8 GiB ext4 (mke2fs defaults) half filled by the kernel, checked
/// with `e2fsck -f` afterwards (resize2fs asks for a check since the
/// last mount).
fn half_full(img: &Path, mnt: &Path) -> Result<()> {
    fresh_sparse(img, 8 * GIB)?;
    util::run_step(
        "mke2fs -t ext4 (8 GiB)",
        Command::new("mke2fs")
            .args(["-q", "-F", "-t", "ext4"])
            .arg(img),
    )?;
    std::fs::create_dir_all(mnt)?;
    util::run_step(
        "mount",
        Command::new("mount").args(["-o", "loop"]).arg(img).arg(mnt),
    )?;
    let filled = fill(mnt, 4 * GIB);
    let mut umounted = false;
    for _ in 0..20 {
        if Command::new("umount").arg(mnt).status()?.success() {
            umounted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    if !umounted {
        let _ = Command::new("umount").arg("-l").arg(mnt).status();
        bail!("cannot unmount {}", mnt.display());
    }
    filled?;
    let st = Command::new("e2fsck").arg("-fy").arg(img).status()?;
    ensure!(
        st.code().is_some_and(|c| c <= 1),
        "e2fsck -fy of the filled image: {st}"
    );
    Ok(())
}

/// `total` bytes in 64 directories of files from 4 KiB to 16 MiB.
fn fill(root: &Path, total: u64) -> Result<()> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let chunk: Vec<u8> = (0..1 << 20).map(|_| next() as u8).collect();
    let mut written = 0u64;
    let mut k = 0u64;
    while written < total {
        let dir = root.join(format!("d{}", k % 64));
        std::fs::create_dir_all(&dir)?;
        let size = 4096 << (next() % 13);
        let mut f = std::fs::File::create(dir.join(format!("f{k}")))?;
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            let at = (k as usize * 4099) % (chunk.len() - n + 1);
            std::io::Write::write_all(&mut f, &chunk[at..at + n])?;
            left -= n as u64;
        }
        written += size;
        k += 1;
    }
    println!("filled: {k} files, {}", fmt_bytes(written));
    Ok(())
}
