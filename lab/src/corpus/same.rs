//! `cargo xtask corpus same --base BIN`: does the checker under test
//! (`--fsck`, by default this tree's release build) behave byte for byte
//! as an earlier build (`BIN fsck`) on every image of the corpus? For a
//! refactor whose contract is that nothing changes (issue 30); how each
//! image is compared is [`crate::same`]'s.
//!
//! The clock is fixed for both sides: the test's `E2FSCK_TIME` when it
//! has one, else `--time` (default: the second the run started, printed so
//! that a rerun can pin it). A test that needs an external journal it does
//! not have is skipped, as in the other modes. Exit status 1 when any
//! image differs.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Result};

use super::{Common, Ctx};
use crate::same::{self, Subject};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// The earlier build: an `ext4r` binary, run as `BIN fsck`.
    #[arg(long, value_name = "BIN")]
    base: PathBuf,
    /// `E2FSCK_TIME` for images whose test sets none [default: now].
    #[arg(long, value_name = "SECS")]
    time: Option<i64>,
}

pub fn run(args: &Args) -> Result<()> {
    if !args.base.is_file() {
        bail!("--base {}: no such file", args.base.display());
    }
    let old: Vec<OsString> = vec![args.base.clone().into(), "fsck".into()];
    let time = args.time.unwrap_or_else(now);
    let ctx = Ctx::new(&args.common, "same")?;
    ctx.header(&format!(
        "same (`{} fsck` vs CMD: -fn, -fy, output, exit and image bytes)",
        args.base.display()
    ));
    println!("clock: E2FSCK_TIME from the test, else --time {time}");
    let results = ctx.each(|v| {
        let journal = match ctx.journal_args(v)? {
            Ok(j) => j,
            Err(why) => return Ok(Err(why)),
        };
        let img = ctx.unpack(&v.test, "pristine")?;
        let jpath = journal.args.get(1).map(PathBuf::from);
        let t = v.e2fsck_time().and_then(|t| t.parse().ok()).unwrap_or(time);
        let subject = Subject {
            image: img.path(),
            journal: jpath.as_deref(),
            time: t,
        };
        let work = ctx.tmp.path().join(format!("{}.same", v.test));
        let out = same::compare(&old, &ctx.fsck, &subject, &work, ctx.limit)?;
        let _ = std::fs::remove_dir_all(&work);
        if ctx.verbose {
            println!("{}", line(&v.test, &Ok(&out)));
        }
        Ok(Ok(out))
    })?;
    let (mut identical, mut differ, mut skipped) = (0, 0, 0);
    let noted = results
        .iter()
        .filter(|r| matches!(r, Ok(o) if o.identical() && !o.notes.is_empty()))
        .count();
    println!();
    for (v, r) in ctx.verdicts.iter().zip(&results) {
        match r {
            Ok(o) if o.identical() => identical += 1,
            Ok(_) => differ += 1,
            Err(_) => skipped += 1,
        }
        let shown = r.as_ref().map_err(String::as_str);
        let plain = matches!(shown, Ok(o) if o.identical() && o.notes.is_empty());
        if !ctx.verbose || !plain {
            println!("{}", line(&v.test, &shown));
        }
    }
    let n = identical + differ;
    println!(
        "corpus same: {n} images compared, {identical} identical ({noted} of them but for \
         a random UUID), {differ} different, {skipped} skipped"
    );
    if differ > 0 {
        bail!("{differ} image(s) differ from the base build");
    }
    Ok(())
}

fn line(test: &str, r: &std::result::Result<&same::Outcome, &str>) -> String {
    match r {
        Err(why) => format!("  {test:<34} skipped: {why}"),
        Ok(o) if o.identical() => {
            let mut s = format!("  {test:<34} identical ({})", o.summary);
            for n in &o.notes {
                s += &format!("\n      note: {n}");
            }
            s
        }
        Ok(o) => {
            let mut s = format!("  {test:<34} DIFFERS ({})", o.summary);
            for d in &o.differences {
                s += &format!("\n      {d}");
            }
            s
        }
    }
}

/// Seconds since the epoch.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
