//! `cargo xtask corpus check`: `CMD -fn` on every pristine image, compared with
//! e2fsck's verdict by the rule in [`super::verdicts`].

use std::ffi::OsString;

use anyhow::{bail, Result};

use super::class::Class;
use super::verdicts::{Basis, Expected, Verdict};
use super::{json_run, percent, print_columns, Common, Ctx, Run};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Fail unless at least this percentage of the compared images agree.
    #[arg(long, value_name = "PCT")]
    min_agree: Option<f64>,
}

enum Result1 {
    Skipped(String),
    Ran {
        expected: Expected,
        run: Run,
        /// Whether the external journal was given with `-j`.
        with_journal: bool,
    },
}

struct Item<'a> {
    v: &'a Verdict,
    r: Result1,
}

impl Item<'_> {
    fn agrees(&self) -> Option<bool> {
        match &self.r {
            Result1::Skipped(_) => None,
            Result1::Ran { expected, run, .. } => Some(expected.agrees(run.outcome.class)),
        }
    }
}

pub fn run(args: &Args) -> Result<()> {
    let ctx = Ctx::new(&args.common, "check")?;
    ctx.header("check (CMD -fn IMAGE)");
    let results = ctx.each(|v| {
        let r = check_one(&ctx, v)?;
        if ctx.verbose {
            match &r {
                Result1::Skipped(why) => println!("  {:<34} skipped: {why}", v.test),
                Result1::Ran { expected, run, .. } => println!(
                    "  {:<34} e2fsck {:<22} ours {:<8} {:<8} {}",
                    v.test,
                    expected.to_string(),
                    run.outcome.class.token(),
                    if expected.agrees(run.outcome.class) {
                        "ok"
                    } else {
                        "DIFFERS"
                    },
                    run.outcome.detail
                ),
            }
        }
        Ok(r)
    })?;
    let items: Vec<Item> = ctx
        .verdicts
        .iter()
        .zip(results)
        .map(|(v, r)| Item { v, r })
        .collect();
    report(&ctx, args, &items)
}

fn check_one(ctx: &Ctx, v: &Verdict) -> Result<Result1> {
    let journal = match ctx.journal_args(v)? {
        Ok(j) => j,
        Err(why) => return Ok(Result1::Skipped(why)),
    };
    let with_journal = !journal.args.is_empty();
    let expected = if with_journal {
        v.expected_with_journal()
    } else {
        v.expected()
    };
    let mut args: Vec<OsString> = vec!["-fn".into()];
    args.extend(journal.args.iter().cloned());
    let img = ctx.unpack(&v.test, "check")?;
    let run = ctx.run(&ctx.fsck, &args, img.path(), v, &v.test)?;
    Ok(Result1::Ran {
        expected,
        run,
        with_journal,
    })
}

fn report(ctx: &Ctx, args: &Args, items: &[Item]) -> Result<()> {
    let compared: Vec<&Item> = items.iter().filter(|i| i.agrees().is_some()).collect();
    let agree = compared.iter().filter(|i| i.agrees() == Some(true)).count();
    let runs = || {
        items.iter().filter_map(|i| match &i.r {
            Result1::Ran { run, .. } => Some(run),
            Result1::Skipped(_) => None,
        })
    };
    let crashes = runs().filter(|r| r.outcome.class == Class::Crash).count();
    let timeouts = runs().filter(|r| r.outcome.class == Class::Timeout).count();
    let skipped = items.len() - compared.len();

    let mut rows = vec![vec![
        "image".to_string(),
        "e2fsck".to_string(),
        "ours".to_string(),
        "first lines of our stderr".to_string(),
    ]];
    for i in items {
        if let Result1::Ran { expected, run, .. } = &i.r {
            if !expected.agrees(run.outcome.class) {
                let ours = format!("{} ({})", run.outcome.class, run.outcome.detail);
                let first = run.head.first().cloned().unwrap_or_default();
                rows.push(vec![i.v.test.clone(), expected.to_string(), ours, first]);
                for more in run.head.iter().skip(1) {
                    rows.push(vec![
                        String::new(),
                        String::new(),
                        String::new(),
                        more.clone(),
                    ]);
                }
            }
        }
    }
    println!();
    if rows.len() > 1 {
        println!("disagreements:");
        print_columns(&rows);
    } else {
        println!("no disagreements");
    }
    let skips: Vec<String> = items
        .iter()
        .filter_map(|i| match &i.r {
            Result1::Skipped(why) => Some(format!("{}: {why}", i.v.test)),
            Result1::Ran { .. } => None,
        })
        .collect();
    for s in &skips {
        println!("skipped {s}");
    }
    let upstream: Vec<String> = items
        .iter()
        .filter_map(|i| match &i.r {
            Result1::Ran {
                expected,
                with_journal,
                ..
            } if expected.basis == Basis::Upstream && !with_journal => Some(format!(
                "{} ({}, so expected {})",
                i.v.test,
                i.v.e2fsck_failed().unwrap_or("e2fsck unreliable"),
                expected.class
            )),
            _ => None,
        })
        .collect();
    if !upstream.is_empty() {
        println!(
            "expected class taken from the upstream test's expected exit where e2fsck 1.47.0 \
             itself failed: {}",
            upstream.join("; ")
        );
    }
    println!(
        "rule: classes must match (0 clean, bit 4 errors, 8 operational); where e2fsck -fn \
         exits 0 but -fy exits 1, clean and errors both agree"
    );
    if let Some(slow) = runs().max_by_key(|r| r.wall) {
        let rss = runs().map(|r| r.peak_rss).max().unwrap_or(0);
        println!(
            "slowest run {}, largest peak RSS {}",
            crate::util::fmt_duration(slow.wall),
            crate::util::fmt_bytes(rss)
        );
    }
    let pct = percent(agree, compared.len());
    let summary = format!(
        "agreement {agree}/{} ({pct:.1}%), crashes {crashes}, timeouts {timeouts}, skipped {skipped}",
        compared.len()
    );
    println!("{summary}");

    if let Some(path) = &args.common.json {
        let images: Vec<serde_json::Value> = items.iter().map(json_item).collect();
        let doc = serde_json::json!({
            "mode": "check",
            "fsck": ctx.fsck_label,
            "timeout_secs": ctx.limit.as_secs(),
            "agree": agree,
            "compared": compared.len(),
            "crashes": crashes,
            "timeouts": timeouts,
            "skipped": skipped,
            "summary": summary,
            "images": images,
        });
        super::write_json(path, &doc)?;
    }

    if crashes + timeouts > 0 {
        bail!("{crashes} crash(es) and {timeouts} timeout(s)");
    }
    if let Some(min) = args.min_agree {
        if pct < min {
            bail!("agreement {pct:.1}% is below --min-agree {min}%");
        }
    }
    Ok(())
}

fn json_item(i: &Item) -> serde_json::Value {
    let mut f = serde_json::Map::new();
    f.insert("test".into(), i.v.test.clone().into());
    match &i.r {
        Result1::Skipped(why) => {
            f.insert("skipped".into(), why.clone().into());
        }
        Result1::Ran { expected, run, .. } => {
            f.insert("expected".into(), expected.class.token().into());
            if let Some(also) = expected.also {
                f.insert("also".into(), also.token().into());
            }
            let basis = match expected.basis {
                Basis::E2fsck => "e2fsck",
                Basis::Upstream => "upstream",
            };
            f.insert("basis".into(), basis.into());
            f.insert("agree".into(), expected.agrees(run.outcome.class).into());
            f.insert("ours".into(), json_run(run));
        }
    }
    serde_json::Value::Object(f)
}
