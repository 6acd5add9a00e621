//! `cargo xtask bench tune`: `ext4r tune` vs `tune2fs` turning metadata_csum
//! off and on over the cached 16 GiB image with 2,000,000 kernel-written files
//! (see [`super::filled`]), alternating. Each run works on a fresh copy of the
//! case's base image (copied before the run, untimed); after each run of
//! either tool `e2fsck -fn` must pass on the result.
//!
//! The `metadata_csum` case starts from the image with metadata_csum turned
//! off by tune2fs once, so both tools rewrite the same filesystem.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context, Result};

use super::{filled, resolve_ours, Common};
use crate::measure::{self, Hooks, Row, Sample, Tool};
use crate::util::{self, TempDir};

#[derive(clap::Args)]
pub struct TuneArgs {
    /// Where the many-files image is cached between runs.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm/ext4r-bench")]
    cache: PathBuf,
    /// Build the cached many-files image again even if its stamp matches.
    #[arg(long)]
    rebuild: bool,
    #[command(flatten)]
    common: Common,
}

pub fn run(args: &TuneArgs) -> Result<()> {
    let c = &args.common;
    ensure!(c.runs >= 1, "--runs must be at least 1");
    ensure!(
        c.dir.is_dir(),
        "--dir {} is not a directory",
        c.dir.display()
    );
    let e2fsck = util::find_program("e2fsck".as_ref()).context("e2fsck not found on $PATH")?;
    let ours = resolve_ours(c, "tune")?;
    let theirs = util::resolve_cmd(c.theirs_cmd.as_deref().unwrap_or("tune2fs"))?;
    let cached = filled::image(&args.cache, args.rebuild)?;
    let tmp = TempDir::new_in(&c.dir, "ext4r-bench-")?;
    let floor = measure::spawn_floor(tmp.path())?;
    let work = tmp.path().join("work.img");

    // The metadata_csum-off base, made once by the reference tool.
    let off = tmp.path().join("nocsum.img");
    super::copy_image(&cached, &off)?;
    util::run_step(
        "tune2fs -O ^metadata_csum (base of the 'on' case)",
        Command::new("tune2fs")
            .args(["-O", "^metadata_csum"])
            .arg(&off),
    )?;

    let cases: [(&str, &Path, &str); 2] = [
        ("^metadata_csum 2M files", &cached, "^metadata_csum"),
        ("metadata_csum 2M files", &off, "metadata_csum"),
    ];
    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for (label, base, feature) in cases {
        util::check_interrupted()?;
        let tool = |name: &str, cmd: &[OsString]| Tool {
            name: name.to_string(),
            argv: cmd
                .iter()
                .cloned()
                .chain(["-O".into(), feature.into(), work.clone().into_os_string()])
                .collect(),
            env: Vec::new(),
            discard_stdout: false,
        };
        let tools = [tool("ours", &ours), tool("tune2fs", &theirs)];
        println!(
            "== {label}: copies of {}, {} runs each",
            base.display(),
            c.runs
        );
        for t in &tools {
            println!("  {:<7} {}", t.name, util::display_cmd(&t.command()?));
        }
        let mut hooks = CopyHooks {
            base,
            work: &work,
            e2fsck: &e2fsck,
            logdir: tmp.path(),
        };
        rows.extend(super::compare(
            label,
            &tools,
            c.runs,
            tmp.path(),
            &mut hooks,
            &mut failures,
        )?);
    }
    let _ = std::fs::remove_file(&work);
    super::report_checked("change", &rows, floor, &failures)
}

/// A fresh copy of the base before each run; `e2fsck -fn` after it.
struct CopyHooks<'a> {
    base: &'a Path,
    work: &'a Path,
    e2fsck: &'a Path,
    logdir: &'a Path,
}

impl Hooks for CopyHooks<'_> {
    fn before(&mut self, _tool: usize, _run: usize) -> Result<()> {
        super::copy_image(self.base, self.work)
    }

    fn after(&mut self, tool: usize, run: usize, sample: &mut Sample) -> Result<()> {
        if !sample.status.success() {
            return Ok(());
        }
        let log = self.logdir.join(format!("e2fsck-{tool}-{run}.log"));
        sample.check = measure::e2fsck_check(self.e2fsck, self.work, &log)?;
        Ok(())
    }
}
