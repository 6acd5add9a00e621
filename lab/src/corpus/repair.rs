//! `cargo xtask corpus repair`: does the checker repair what e2fsck repairs?
//!
//! Per image, on a fresh copy: `CMD -fy`, then `e2fsck -fn` on the result (the
//! oracle: exit 0 = repaired), then `CMD -fn` again (must be 0: a repair leaves
//! nothing for a second run). The bar is e2fsck 1.47.0's own count on the same
//! images (`e2fsck_fn_after` = 0 in verdicts.tsv: 133 of 141).
//!
//! `--preen`: `CMD -p` on one copy against `e2fsck -p` on another, by class.
//! verdicts.tsv has no -p column, so e2fsck runs live; its results are cached
//! in `target/xtask-corpus/e2fsck-preen.tsv`, keyed by image, e2fsck version
//! and time limit.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

use super::class::{Class, Outcome};
use super::verdicts::Verdict;
use super::{json_run, percent, print_columns, Common, Ctx, Run};
use crate::util;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Compare `CMD -p` with `e2fsck -p` instead.
    #[arg(long)]
    preen: bool,
    /// The oracle e2fsck.
    #[arg(long, value_name = "PROG", default_value = "e2fsck")]
    e2fsck: String,
    /// Fail unless at least this many images are repaired to clean.
    #[arg(long, value_name = "N")]
    min_clean: Option<usize>,
}

pub fn run(args: &Args) -> Result<()> {
    let e2fsck = util::resolve_cmd(&args.e2fsck)?;
    if args.preen {
        preen(args, &e2fsck)
    } else {
        repair(args, &e2fsck)
    }
}

struct Repaired {
    fy: Run,
    after: Run,
    again: Run,
}

fn with(args: &[OsString], flag: &str) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![flag.into()];
    v.extend(args.iter().cloned());
    v
}

fn repair(args: &Args, e2fsck: &[OsString]) -> Result<()> {
    let ctx = Ctx::new(&args.common, "repair")?;
    ctx.header("repair (CMD -fy; e2fsck -fn; CMD -fn)");
    let results = ctx.each(|v| {
        let journal = match ctx.journal_args(v)? {
            Ok(j) => j,
            Err(why) => {
                if ctx.verbose {
                    println!("  {:<34} skipped: {why}", v.test);
                }
                return Ok(Err(why));
            }
        };
        let jargs = &journal.args;
        let img = ctx.unpack(&v.test, "repair")?;
        let p = img.path();
        let fy = ctx.run(
            &ctx.fsck,
            &with(jargs, "-fy"),
            p,
            v,
            &format!("{}.fy", v.test),
        )?;
        let after = ctx.run(
            e2fsck,
            &with(jargs, "-fn"),
            p,
            v,
            &format!("{}.e2fsck-after", v.test),
        )?;
        let again = ctx.run(
            &ctx.fsck,
            &with(jargs, "-fn"),
            p,
            v,
            &format!("{}.again", v.test),
        )?;
        if ctx.verbose {
            println!(
                "  {:<34} -fy {:<8} e2fsck -fn after {:<8} (e2fsck's own: {:<3}) -fn again {}",
                v.test, fy.outcome.detail, after.outcome.class, v.fn_after, again.outcome.class
            );
        }
        Ok(Ok(Repaired { fy, after, again }))
    })?;

    let items: Vec<(&Verdict, &Repaired)> = ctx
        .verdicts
        .iter()
        .zip(&results)
        .filter_map(|(v, r)| r.as_ref().ok().map(|r| (v, r)))
        .collect();
    let n = items.len();
    let skipped: Vec<String> = ctx
        .verdicts
        .iter()
        .zip(&results)
        .filter_map(|(v, r)| r.as_ref().err().map(|why| format!("{}: {why}", v.test)))
        .collect();
    let clean = items
        .iter()
        .filter(|(_, r)| r.after.outcome.class == Class::Clean)
        .count();
    let theirs = items.iter().filter(|(v, _)| v.e2fsck_repairs()).count();
    let again_ok = items
        .iter()
        .filter(|(_, r)| r.again.outcome.class == Class::Clean)
        .count();
    let ours = || items.iter().flat_map(|(_, r)| [&r.fy, &r.again]);
    let crashes = ours().filter(|r| r.outcome.class == Class::Crash).count();
    let timeouts = ours().filter(|r| r.outcome.class == Class::Timeout).count();
    let oracle_bad = items.iter().filter(|(_, r)| r.after.bad()).count();
    let fy_agree = items
        .iter()
        .filter(|(v, r)| r.fy.outcome.class == Class::of_code(v.fy_exit))
        .count();

    let mut rows = vec![vec![
        "image".to_string(),
        "ours -fy".to_string(),
        "e2fsck -fn after (e2fsck's own)".to_string(),
        "ours -fn again".to_string(),
        "first lines of our -fy stderr".to_string(),
    ]];
    for (v, r) in &items {
        let after_clean = r.after.outcome.class == Class::Clean;
        let problem = !after_clean || r.again.outcome.class != Class::Clean || r.fy.bad();
        if problem {
            let mark = if !after_clean && v.e2fsck_repairs() {
                " WORSE"
            } else {
                ""
            };
            rows.push(vec![
                v.test.clone(),
                format!("{} ({})", r.fy.outcome.class, r.fy.outcome.detail),
                format!("{} ({}){mark}", r.after.outcome.detail, v.fn_after),
                format!("{} ({})", r.again.outcome.class, r.again.outcome.detail),
                r.fy.head.first().cloned().unwrap_or_default(),
            ]);
        }
    }
    println!();
    if rows.len() > 1 {
        println!("images not repaired to clean, or not clean on a second run (WORSE: e2fsck repairs it):");
        print_columns(&rows);
    } else {
        println!("every image repaired to clean and clean on a second run");
    }
    for s in &skipped {
        println!("skipped {s}");
    }
    if oracle_bad > 0 {
        println!("e2fsck -fn crashed or timed out on {oracle_bad} repaired image(s)");
    }
    println!("-fy exit class same as e2fsck -fy's: {fy_agree}/{n}");
    let summary = format!(
        "repaired to clean (e2fsck -fn after): {clean}/{n} (e2fsck 1.47.0's own: {theirs}/{n}), \
         clean on a second -fn: {again_ok}/{n} ({:.1}%), crashes {crashes}, timeouts {timeouts}, \
         skipped {}",
        percent(again_ok, n),
        skipped.len()
    );
    println!("{summary}");
    if let Some(path) = &args.common.json {
        let images: Vec<serde_json::Value> = items
            .iter()
            .map(|(v, r)| {
                serde_json::json!({
                    "test": v.test,
                    "e2fsck_fn_after": v.fn_after,
                    "fy": json_run(&r.fy),
                    "e2fsck_after": json_run(&r.after),
                    "again": json_run(&r.again),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "mode": "repair",
            "fsck": ctx.fsck_label,
            "clean": clean,
            "e2fsck_clean": theirs,
            "again_clean": again_ok,
            "images_compared": n,
            "crashes": crashes,
            "timeouts": timeouts,
            "skipped": skipped.len(),
            "summary": summary,
            "images": images,
        });
        super::write_json(path, &doc)?;
    }
    if crashes + timeouts > 0 {
        bail!("{crashes} crash(es) and {timeouts} timeout(s)");
    }
    if let Some(min) = args.min_clean {
        if clean < min {
            bail!("{clean} images repaired to clean, below --min-clean {min}");
        }
    }
    Ok(())
}

/// e2fsck -p results from earlier runs: `test\tkey\tclass\tdetail` lines.
struct PreenCache {
    path: PathBuf,
    entries: Mutex<HashMap<String, (String, Outcome)>>,
}

impl PreenCache {
    fn load(path: PathBuf) -> PreenCache {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let entries = text
            .lines()
            .filter_map(|l| {
                let mut c = l.splitn(4, '\t');
                let (test, key, class, detail) = (c.next()?, c.next()?, c.next()?, c.next()?);
                let outcome = Outcome {
                    class: Class::from_token(class)?,
                    detail: detail.to_string(),
                };
                Some((test.to_string(), (key.to_string(), outcome)))
            })
            .collect();
        PreenCache {
            path,
            entries: Mutex::new(entries),
        }
    }

    fn get(&self, test: &str, key: &str) -> Option<Outcome> {
        let g = self.entries.lock().ok()?;
        g.get(test)
            .filter(|(k, _)| k == key)
            .map(|(_, o)| o.clone())
    }

    fn put(&self, test: &str, key: String, o: Outcome) {
        if let Ok(mut g) = self.entries.lock() {
            g.insert(test.to_string(), (key, o));
        }
    }

    fn save(&self) -> Result<()> {
        let g = self
            .entries
            .lock()
            .map_err(|_| anyhow::anyhow!("cache lock poisoned"))?;
        let mut lines: Vec<String> = g
            .iter()
            .map(|(t, (k, o))| format!("{t}\t{k}\t{}\t{}\n", o.class.token(), o.detail))
            .collect();
        lines.sort();
        std::fs::write(&self.path, lines.concat())
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// What e2fsck says about itself (`e2fsck -V` prints to stderr).
fn version(e2fsck: &[OsString]) -> Result<String> {
    let (prog, _) = e2fsck.split_first().context("empty e2fsck command")?;
    let out = Command::new(prog).arg("-V").output().context("e2fsck -V")?;
    let text = String::from_utf8_lossy(&out.stderr);
    Ok(text
        .lines()
        .next()
        .unwrap_or("unknown")
        .trim()
        .replace('\t', " "))
}

fn cache_key(gz: &Path, version: &str, limit: u64, args: &[OsString]) -> Result<String> {
    let m = std::fs::metadata(gz).with_context(|| format!("cannot stat {}", gz.display()))?;
    let argv: Vec<_> = args.iter().map(|a| a.to_string_lossy()).collect();
    Ok(format!(
        "{}:{}:{version}:{limit}s:{}",
        m.len(),
        m.mtime(),
        argv.join(" ")
    ))
}

fn preen(args: &Args, e2fsck: &[OsString]) -> Result<()> {
    let ctx = Ctx::new(&args.common, "preen")?;
    ctx.header("repair --preen (CMD -p vs e2fsck -p)");
    let cache_path = util::target_dir()
        .join("xtask-corpus")
        .join("e2fsck-preen.tsv");
    let cache = PreenCache::load(cache_path.clone());
    let version = version(e2fsck)?;
    let results = ctx.each(|v| {
        let journal = match ctx.journal_args(v)? {
            Ok(j) => j,
            Err(why) => return Ok(Err(why)),
        };
        let jargs = &journal.args;
        let pargs = with(jargs, "-p");
        // The journal path differs per run; key on the flags, not the path.
        let key_args = if jargs.is_empty() {
            vec!["-p".into()]
        } else {
            vec!["-p -j".into()]
        };
        let key = cache_key(
            &ctx.dir.join(&v.test).join("image.gz"),
            &version,
            ctx.limit.as_secs(),
            &key_args,
        )?;
        let theirs = match cache.get(&v.test, &key) {
            Some(o) => o,
            None => {
                let img = ctx.unpack(&v.test, "e2fsck-p")?;
                let r = ctx.run(
                    e2fsck,
                    &pargs,
                    img.path(),
                    v,
                    &format!("{}.e2fsck-p", v.test),
                )?;
                cache.put(&v.test, key, r.outcome.clone());
                r.outcome
            }
        };
        let img = ctx.unpack(&v.test, "p")?;
        let ours = ctx.run(&ctx.fsck, &pargs, img.path(), v, &format!("{}.p", v.test))?;
        if ctx.verbose {
            println!(
                "  {:<34} e2fsck -p {:<10} ours {:<10} {}",
                v.test,
                theirs.detail,
                ours.outcome.detail,
                if ours.outcome.class == theirs.class {
                    "ok"
                } else {
                    "DIFFERS"
                }
            );
        }
        Ok(Ok((theirs, ours)))
    });
    // Keep what was learnt even if a run failed.
    cache.save()?;
    let results = results?;
    println!("e2fsck -p results cached in {}", cache_path.display());

    let items: Vec<(&Verdict, &(Outcome, Run))> = ctx
        .verdicts
        .iter()
        .zip(&results)
        .filter_map(|(v, r)| r.as_ref().ok().map(|r| (v, r)))
        .collect();
    let skipped: Vec<String> = ctx
        .verdicts
        .iter()
        .zip(&results)
        .filter_map(|(v, r)| r.as_ref().err().map(|why| format!("{}: {why}", v.test)))
        .collect();
    let n = items.len();
    let agree = items
        .iter()
        .filter(|(_, (t, o))| t.class == o.outcome.class)
        .count();
    let crashes = items
        .iter()
        .filter(|(_, (_, o))| o.outcome.class == Class::Crash)
        .count();
    let timeouts = items
        .iter()
        .filter(|(_, (_, o))| o.outcome.class == Class::Timeout)
        .count();
    let mut rows = vec![vec![
        "image".to_string(),
        "e2fsck -p".to_string(),
        "ours -p".to_string(),
        "first lines of our stderr".to_string(),
    ]];
    for (v, (t, o)) in &items {
        if t.class != o.outcome.class {
            rows.push(vec![
                v.test.clone(),
                format!("{} ({})", t.class, t.detail),
                format!("{} ({})", o.outcome.class, o.outcome.detail),
                o.head.first().cloned().unwrap_or_default(),
            ]);
        }
    }
    println!();
    if rows.len() > 1 {
        println!("disagreements:");
        print_columns(&rows);
    } else {
        println!("no disagreements");
    }
    for s in &skipped {
        println!("skipped {s}");
    }
    println!(
        "rule: exit classes must match (0 clean, 1-3 fixed, bit 4 errors left, 8 operational)"
    );
    let summary = format!(
        "preen agreement {agree}/{n} ({:.1}%), crashes {crashes}, timeouts {timeouts}, skipped {}",
        percent(agree, n),
        skipped.len()
    );
    println!("{summary}");
    if let Some(path) = &args.common.json {
        let images: Vec<serde_json::Value> = items
            .iter()
            .map(|(v, (t, o))| {
                serde_json::json!({
                    "test": v.test,
                    "e2fsck_p": t.class.token(),
                    "e2fsck_p_detail": t.detail,
                    "agree": t.class == o.outcome.class,
                    "ours": json_run(o),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "mode": "preen",
            "fsck": ctx.fsck_label,
            "agree": agree,
            "compared": n,
            "crashes": crashes,
            "timeouts": timeouts,
            "skipped": skipped.len(),
            "summary": summary,
            "images": images,
        });
        super::write_json(path, &doc)?;
    }
    if crashes + timeouts > 0 {
        bail!("{crashes} crash(es) and {timeouts} timeout(s)");
    }
    Ok(())
}
