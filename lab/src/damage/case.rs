//! One case: damage a copy of a base image, run both checkers on copies of
//! the damaged image, read every file back after each repair, and judge.
//!
//! Ours: `-fn` (its image must be byte-identical afterwards), `-fy`, then
//! `e2fsck -fn` and our `-fn` again on the result. e2fsck: `-fn` on the
//! damaged image, `-fy` on another copy, then `-fn` again. Every run has a
//! time limit after which its process group is killed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::images::{self, Base};
use super::layout::Layout;
use super::mutate::{self, Ctx, Img};
use super::rng::Rng;
use crate::corpus::class::{Class, Outcome};
use crate::measure::{self, RunOpts};

/// What a case needs from the run.
pub struct Env<'a> {
    pub seed: u64,
    pub kinds: &'a [&'static str],
    /// Selected configurations with their base and layouts (the image's,
    /// and the live snapshot's when there is one).
    pub bases: &'a [(Base, Layout, Option<Layout>)],
    pub ext4r: PathBuf,
    pub xtask: PathBuf,
    pub limit: Duration,
    pub work: &'a Path,
}

/// One classified run.
#[derive(Clone, Debug)]
pub struct Ran {
    pub outcome: Outcome,
    /// The first lines of its output.
    pub head: Vec<String>,
}

impl Ran {
    pub fn class(&self) -> Class {
        self.outcome.class
    }
    pub fn clean(&self) -> bool {
        self.outcome.class == Class::Clean
    }
    pub fn bad(&self) -> bool {
        matches!(self.outcome.class, Class::Crash | Class::Timeout)
    }
}

pub struct CaseResult {
    pub index: u64,
    pub cfg: &'static str,
    pub kind: &'static str,
    pub snap: bool,
    pub desc: String,
    pub ours_fn: Ran,
    pub fn_wrote: bool,
    pub e2_fn: Ran,
    pub ours_fy: Ran,
    pub ours_then_e2: Ran,
    pub ours_again: Ran,
    pub e2_fy: Ran,
    pub e2_again: Ran,
    /// Files not intact after our repair / after e2fsck's, with reasons.
    pub ours_lost: Vec<(String, String)>,
    pub e2_lost: Vec<(String, String)>,
    /// The reader itself failed (crash or time limit) on an image.
    pub reader_failed: Vec<String>,
    /// The damaged image, kept until the case is judged.
    pub damaged: PathBuf,
}

impl CaseResult {
    /// Files e2fsck's repair kept intact and ours did not.
    pub fn lost_vs_e2(&self) -> Vec<&(String, String)> {
        let theirs: std::collections::HashSet<&str> =
            self.e2_lost.iter().map(|(p, _)| p.as_str()).collect();
        self.ours_lost
            .iter()
            .filter(|(p, _)| !theirs.contains(p.as_str()))
            .collect()
    }

    fn ours(&self) -> [&Ran; 3] {
        [&self.ours_fn, &self.ours_fy, &self.ours_again]
    }
    pub fn crashed(&self) -> bool {
        self.ours().iter().any(|r| r.class() == Class::Crash)
    }
    pub fn hung(&self) -> bool {
        self.ours().iter().any(|r| r.class() == Class::Timeout)
    }
    pub fn verdict_agrees(&self) -> bool {
        self.ours_fn.class() == self.e2_fn.class()
    }
    /// e2fsck's repair is clean under its own -fn, ours is not.
    pub fn worse_clean(&self) -> bool {
        self.e2_again.clean() && !self.ours_then_e2.clean()
    }
    /// Our second -fn is not clean where e2fsck's second run is.
    pub fn again_bad(&self) -> bool {
        self.e2_again.clean() && !self.ours_again.clean()
    }

    /// The reasons this case fails the acceptance, most serious first.
    pub fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        for (what, r) in [
            ("-fn", &self.ours_fn),
            ("-fy", &self.ours_fy),
            ("second -fn", &self.ours_again),
        ] {
            if r.bad() {
                f.push(format!("ours {what}: {} ({})", r.class(), r.outcome.detail));
            }
        }
        if self.fn_wrote {
            f.push("ours -fn changed the image".to_string());
        }
        let lost = self.lost_vs_e2();
        if !lost.is_empty() {
            f.push(format!("lost {} file(s) e2fsck kept", lost.len()));
        }
        if self.worse_clean() {
            f.push(format!(
                "not e2fsck-clean after our repair ({}), e2fsck's own is",
                self.ours_then_e2.outcome.detail
            ));
        }
        if self.again_bad() {
            f.push(format!(
                "our second -fn not clean ({})",
                self.ours_again.outcome.detail
            ));
        }
        if !self.verdict_agrees() {
            f.push(format!(
                "-fn verdicts differ: ours {}, e2fsck {}",
                self.ours_fn.outcome.detail, self.e2_fn.outcome.detail
            ));
        }
        for r in &self.reader_failed {
            f.push(format!("reader failed: {r}"));
        }
        f
    }

    /// Crash, hang, a write by -n, or files lost that e2fsck kept: what
    /// makes the run exit non-zero.
    pub fn fatal(&self) -> bool {
        self.crashed() || self.hung() || self.fn_wrote || !self.lost_vs_e2().is_empty()
    }
}

/// Chooses and applies the damage of case `index`; returns the base index,
/// kind, whether the snapshot was used and the description.
fn damage(env: &Env<'_>, index: u64, img: &Path) -> Result<(usize, &'static str, bool, String)> {
    let mut rng = Rng::for_case(env.seed, index);
    anyhow::ensure!(!env.kinds.is_empty(), "no kinds selected");
    for attempt in 0..20 {
        // Kinds in turn, so that every kind gets its share of any run;
        // drawn at random when the first choice has no target.
        let kind = if attempt == 0 {
            env.kinds[((index + env.seed) % env.kinds.len() as u64) as usize]
        } else {
            *rng.pick(env.kinds).context("no kinds selected")?
        };
        let fit: Vec<usize> = (0..env.bases.len())
            .filter(|&i| mutate::applicable(kind, &env.bases[i].1))
            .collect();
        let Some(&bi) = rng.pick(&fit) else { continue };
        let (base, layout, snap_layout) = &env.bases[bi];
        let use_snap = kind == "journal" && snap_layout.is_some() && rng.chance(1, 2);
        let (src, l) = match (use_snap, &base.snap, snap_layout) {
            (true, Some(s), Some(sl)) => (s.as_path(), sl),
            _ => (base.img.as_path(), layout),
        };
        images::sparse_copy(src, img)?;
        let mut ctx = Ctx {
            l,
            img: Img::open(img, l.bs)?,
            rng: &mut rng,
        };
        if let Some(desc) = mutate::apply(kind, &mut ctx, use_snap)? {
            return Ok((bi, kind, use_snap, desc));
        }
    }
    anyhow::bail!("case {index}: no damage target found in 20 tries")
}

pub fn run(env: &Env<'_>, index: u64) -> Result<CaseResult> {
    let dir = env.work.join(format!("case-{index}"));
    std::fs::create_dir_all(&dir)?;
    let damaged = dir.join("damaged.img");
    let (bi, kind, snap, desc) = damage(env, index, &damaged)?;
    let base = &env.bases[bi].0;
    let ours_img = dir.join("ours.img");
    let e2_img = dir.join("e2fsck.img");
    let ours = |args: &[&str], img: &Path, log: &str| -> Result<Ran> {
        run_one(&env.ext4r, &["fsck"], args, img, &dir.join(log), env.limit)
    };
    let e2 = |args: &[&str], img: &Path, log: &str| -> Result<Ran> {
        run_one(
            Path::new("e2fsck"),
            &[],
            args,
            img,
            &dir.join(log),
            env.limit,
        )
    };
    // Ours, read-only: nothing may change.
    images::sparse_copy(&damaged, &ours_img)?;
    let before = images::hash_image(&ours_img)?;
    let ours_fn = ours(&["-fn"], &ours_img, "ours-fn.log")?;
    let fn_wrote = images::hash_image(&ours_img)? != before;
    if fn_wrote {
        images::sparse_copy(&damaged, &ours_img)?;
    }
    let e2_fn = e2(&["-fn"], &damaged, "e2fsck-fn.log")?;
    let ours_fy = ours(&["-fy"], &ours_img, "ours-fy.log")?;
    let ours_then_e2 = e2(&["-fn"], &ours_img, "ours-then-e2fsck-fn.log")?;
    let ours_again = ours(&["-fn"], &ours_img, "ours-again.log")?;
    images::sparse_copy(&damaged, &e2_img)?;
    let e2_fy = e2(&["-fy"], &e2_img, "e2fsck-fy.log")?;
    let e2_again = e2(&["-fn"], &e2_img, "e2fsck-again.log")?;
    let mut reader_failed = Vec::new();
    let mut read = |img: &Path, who: &str| -> Result<Vec<(String, String)>> {
        match readback(
            env,
            img,
            &base.manifest_path,
            &dir.join(format!("read-{who}.log")),
        )? {
            Ok(lost) => Ok(lost),
            Err(why) => {
                reader_failed.push(format!("{who}'s repair: {why}"));
                Ok(base
                    .manifest
                    .keys()
                    .map(|p| (p.clone(), why.clone()))
                    .collect())
            }
        }
    };
    let ours_lost = read(&ours_img, "ours")?;
    let e2_lost = read(&e2_img, "e2fsck")?;
    let _ = std::fs::remove_file(&ours_img);
    let _ = std::fs::remove_file(&e2_img);
    Ok(CaseResult {
        index,
        cfg: base.cfg.name,
        kind,
        snap,
        desc,
        ours_fn,
        fn_wrote,
        e2_fn,
        ours_fy,
        ours_then_e2,
        ours_again,
        e2_fy,
        e2_again,
        ours_lost,
        e2_lost,
        reader_failed,
        damaged,
    })
}

/// Case `index` for `--same-as`: damages an image as [`run`] does, then
/// runs the base build (`old`) and ours on it ([`crate::same`]); returns
/// the configuration, kind, description and the comparison.
pub fn run_same(
    env: &Env<'_>,
    index: u64,
    old: &[OsString],
    time: i64,
) -> Result<(&'static str, &'static str, String, crate::same::Outcome)> {
    let dir = env.work.join(format!("case-{index}"));
    std::fs::create_dir_all(&dir)?;
    let damaged = dir.join("damaged.img");
    let (bi, kind, _, desc) = damage(env, index, &damaged)?;
    let new: Vec<OsString> = vec![env.ext4r.clone().into(), "fsck".into()];
    let subject = crate::same::Subject {
        image: &damaged,
        journal: None,
        time,
    };
    let out = crate::same::compare(old, &new, &subject, &dir, env.limit)?;
    Ok((env.bases[bi].0.cfg.name, kind, desc, out))
}

/// What `ext4r mount` did with one case's damaged image
/// (`cargo xtask damage --mount`).
pub struct MountCase {
    pub cfg: &'static str,
    pub kind: &'static str,
    pub desc: String,
    /// `e2fsck -fn`'s exit before the mount (0: the damage is invisible).
    pub before: i32,
    /// Its exit after the unmount, for an image that was damaged and had
    /// no recovery to do (a replay or orphans may leave any image clean).
    pub after: Option<i32>,
    /// The mount: refused or served, or what crashed or hung.
    pub verdict: std::result::Result<crate::mountwalk::Verdict, String>,
    /// After a refused read-write mount, the same read-only (a filesystem
    /// the write API does not write, e.g. with quota, is still read).
    pub read_only: Option<std::result::Result<crate::mountwalk::Verdict, String>>,
}

/// Damages case `index`'s image and serves it with `ext4r mount`: walk,
/// read, a write in every directory, unmount (see [`crate::mountwalk`]).
pub fn run_mount(env: &Env<'_>, index: u64, max_entries: usize) -> Result<MountCase> {
    use crate::mountwalk;
    let dir = env.work.join(format!("case-{index}"));
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    let damaged = dir.join("damaged.img");
    let (bi, kind, _, desc) = damage(env, index, &damaged)?;
    let secs = u32::try_from(env.limit.as_secs()).unwrap_or(u32::MAX);
    let before = mountwalk::e2fsck_limited(&damaged, secs);
    let recovers = mountwalk::needs_recovery(&damaged);
    let verdict = mountwalk::serve(
        &env.ext4r,
        &damaged,
        &mnt,
        &dir.join("mount.log"),
        max_entries,
        env.limit,
    );
    let read_only = matches!(verdict, Ok(mountwalk::Verdict::Refused)).then(|| {
        mountwalk::serve_with(
            &env.ext4r,
            &damaged,
            &mnt,
            &dir.join("mount-ro.log"),
            max_entries,
            env.limit,
            true,
        )
    });
    let after = (before != 0 && !recovers).then(|| mountwalk::e2fsck_limited(&damaged, secs));
    Ok(MountCase {
        cfg: env.bases[bi].0.cfg.name,
        kind,
        desc,
        before,
        after,
        verdict,
        read_only,
    })
}

/// Runs `prog pre.. args.. img` under the time limit, output to `log`.
fn run_one(
    prog: &Path,
    pre: &[&str],
    args: &[&str],
    img: &Path,
    log: &Path,
    limit: Duration,
) -> Result<Ran> {
    let mut cmd = Command::new(prog);
    cmd.args(pre).args(args).arg(img);
    let opts = RunOpts {
        stderr: None,
        timeout: Some(limit),
        discard_stdout: false,
    };
    let sample = measure::run_measured_with(&mut cmd, log, opts)?;
    let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
    let outcome = Outcome::of_run(sample.status, sample.timed_out, &text, limit.as_secs());
    let head = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with("Pass ") && !l.starts_with("e2fsck 1.") && !l.contains("(y/n)?"))
        .take(6)
        .map(|l| l.chars().take(200).collect())
        .collect();
    Ok(Ran { outcome, head })
}

/// The reader in a child process: Ok(lost files) or Err(why it failed).
fn readback(
    env: &Env<'_>,
    img: &Path,
    manifest: &Path,
    log: &Path,
) -> Result<std::result::Result<Vec<(String, String)>, String>> {
    let mut cmd = Command::new(&env.xtask);
    let args: Vec<OsString> = vec![
        "damage".into(),
        "--readback".into(),
        img.into(),
        "--manifest".into(),
        manifest.into(),
    ];
    cmd.args(&args);
    let opts = RunOpts {
        stderr: None,
        timeout: Some(env.limit * 2),
        discard_stdout: false,
    };
    let sample = measure::run_measured_with(&mut cmd, log, opts)?;
    let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
    if sample.timed_out {
        return Ok(Err(format!("killed after {}s", (env.limit * 2).as_secs())));
    }
    if !sample.status.success() || !text.lines().any(|l| l == "done") {
        let last = text.lines().last().unwrap_or("").to_string();
        return Ok(Err(format!("{} ({last})", sample.status)));
    }
    Ok(Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("lost\t"))
        .map(|l| {
            let (p, why) = l.split_once('\t').unwrap_or((l, ""));
            (p.to_string(), why.to_string())
        })
        .collect()))
}
