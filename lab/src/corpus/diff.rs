//! `cargo xtask corpus diff`: is the checker's output e2fsck's, word for word?
//!
//! Per image, on two fresh copies of the pristine image (one each, so that
//! `-fy` runs do not see each other's repairs): `e2fsck -fn` (or `-fy`) and
//! `CMD -fn` (`-fy`), with the test's `-j` journal and `E2FSCK_TIME` when it
//! has them. Each run's output is normalised before comparing:
//!
//! - stdout, then stderr after a `[stderr]` line (each stream keeps its own
//!   order; how the two interleave depends on stdio buffering, not on what
//!   was said);
//! - the version banner line dropped ("e2fsck 1.47.0 (5-Feb-2023)",
//!   "fsck.ext4r 0.1.0");
//! - the image's path replaced by `test.img` and an external journal's by
//!   `journal.img` (the copies have different names), and the program's
//!   name `fsck.ext4r` by `e2fsck` ("fsck.ext4r: Group descriptors look
//!   bad..." is e2fsck's message under our name);
//! - trailing blanks trimmed, and the exit status added as a last line
//!   ("Exit status is 4"), as upstream's expect files end.
//!
//! An image is *identical* when the two texts are. The normalised texts stay
//! in `target/xtask-corpus/diff-<mode>/<test>.{e2fsck,ours}.txt` for `diff`.

use std::ffi::OsString;
use std::fmt::Write as _;

use anyhow::{Context, Result};

use super::{Common, Ctx, Run};
use crate::util;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Which run to compare: `fn` (`-fn`, read-only) or `fy` (`-fy`, repair).
    #[arg(long, value_name = "fn|fy", default_value = "fn",
          value_parser = ["fn", "fy"])]
    mode: String,
    /// The oracle e2fsck.
    #[arg(long, value_name = "PROG", default_value = "e2fsck")]
    e2fsck: String,
    /// Lines of each differing stretch shown with -v.
    #[arg(long, default_value_t = 6, value_name = "N")]
    lines: usize,
}

/// One image's comparison.
enum Item {
    Skipped(String),
    Ran {
        theirs: String,
        ours: String,
        /// Runs that crashed or timed out (then the texts mean little).
        bad: Vec<String>,
    },
}

impl Item {
    fn identical(&self) -> Option<bool> {
        match self {
            Item::Skipped(_) => None,
            Item::Ran { theirs, ours, .. } => Some(theirs == ours),
        }
    }
}

pub fn run(args: &Args) -> Result<()> {
    let e2fsck = util::resolve_cmd(&args.e2fsck)?;
    let mode = args.mode.as_str();
    let ctx = Ctx::new(&args.common, &format!("diff-{mode}"))?;
    ctx.header(&format!("diff (e2fsck -{mode} vs CMD -{mode}, output)"));
    let flag = format!("-{mode}");
    let results = ctx.each(|v| {
        let journal = match ctx.journal_args(v)? {
            Ok(j) => j,
            Err(why) => return Ok(Item::Skipped(why)),
        };
        let mut a: Vec<OsString> = vec![flag.as_str().into()];
        a.extend(journal.args.iter().cloned());
        let jpath = journal
            .args
            .get(1)
            .map(|p| p.to_string_lossy().into_owned());
        let side = |argv: &[OsString], tag: &str| -> Result<(String, Run)> {
            let img = ctx.unpack(&v.test, tag)?;
            let name = format!("{}.{tag}", v.test);
            let run = ctx.run(argv, &a, img.path(), v, &name)?;
            let read = |ext: &str| {
                let p = ctx.logdir.join(format!("{name}.{ext}"));
                String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
            };
            let text = normalise(
                &read("out"),
                &read("err"),
                &run.outcome.detail,
                &img.path().to_string_lossy(),
                jpath.as_deref(),
            );
            let txt = ctx.logdir.join(format!("{}.{tag}.txt", v.test));
            std::fs::write(&txt, &text)
                .with_context(|| format!("cannot write {}", txt.display()))?;
            Ok((text, run))
        };
        let (theirs, trun) = side(&e2fsck, "e2fsck")?;
        let (ours, orun) = side(&ctx.fsck, "ours")?;
        let bad = [("e2fsck", &trun), ("ours", &orun)]
            .into_iter()
            .filter(|(_, r)| r.bad())
            .map(|(who, r)| format!("{who}: {}", r.outcome.detail))
            .collect();
        let item = Item::Ran { theirs, ours, bad };
        if ctx.verbose {
            println!("{}", line(&v.test, &item, args.lines));
        }
        Ok(item)
    })?;

    let mut identical = 0;
    let mut differ = 0;
    let mut skipped = Vec::new();
    println!();
    for (v, item) in ctx.verdicts.iter().zip(&results) {
        match item.identical() {
            Some(true) => identical += 1,
            Some(false) => differ += 1,
            None => {}
        }
        if let Item::Skipped(why) = item {
            skipped.push(format!("{}: {why}", v.test));
        }
        if !ctx.verbose {
            println!("{}", line(&v.test, item, 0));
        }
    }
    for s in &skipped {
        println!("skipped {s}");
    }
    let n = identical + differ;
    let summary = format!(
        "-{mode} output identical to e2fsck's: {identical}/{n}, different: {differ}/{n}, \
         skipped {}",
        skipped.len()
    );
    println!("{summary}");
    if let Some(path) = &args.common.json {
        let images: Vec<serde_json::Value> = ctx
            .verdicts
            .iter()
            .zip(&results)
            .map(|(v, i)| match i {
                Item::Skipped(why) => serde_json::json!({"test": v.test, "skipped": why}),
                Item::Ran { bad, .. } => serde_json::json!({
                    "test": v.test,
                    "identical": i.identical(),
                    "bad_runs": bad,
                }),
            })
            .collect();
        let doc = serde_json::json!({
            "mode": format!("diff-{mode}"),
            "fsck": ctx.fsck_label,
            "identical": identical,
            "different": differ,
            "skipped": skipped.len(),
            "summary": summary,
            "images": images,
        });
        super::write_json(path, &doc)?;
    }
    Ok(())
}

/// The per-image line, with the first differing stretches when `lines` > 0.
fn line(test: &str, item: &Item, lines: usize) -> String {
    match item {
        Item::Skipped(why) => format!("  {test:<34} skipped: {why}"),
        Item::Ran { theirs, ours, bad } => {
            let mut s = format!(
                "  {test:<34} {}",
                if theirs == ours {
                    "identical"
                } else {
                    "DIFFERS"
                }
            );
            if !bad.is_empty() {
                let _ = write!(s, " ({})", bad.join(", "));
            }
            if lines > 0 && theirs != ours {
                for l in first_difference(theirs, ours, lines) {
                    let _ = write!(s, "\n      {l}");
                }
            }
            s
        }
    }
}

/// A run's output as compared (see the module docs).
fn normalise(
    stdout: &str,
    stderr: &str,
    detail: &str,
    image: &str,
    journal: Option<&str>,
) -> String {
    let fix = |l: &str| {
        let mut l = l.replace(image, "test.img");
        if let Some(j) = journal {
            l = l.replace(j, "journal.img");
        }
        l.replace("fsck.ext4r", "e2fsck").trim_end().to_string()
    };
    let mut text = String::new();
    for l in stdout.lines() {
        text += &fix(l);
        text.push('\n');
    }
    text += "[stderr]\n";
    for l in stderr.lines().filter(|l| !super::is_banner(l.trim_end())) {
        text += &fix(l);
        text.push('\n');
    }
    // "exit 4" -> "Exit status is 4"; a signal or timeout as it is.
    match detail.strip_prefix("exit ") {
        Some(code) => {
            let code = code.split_whitespace().next().unwrap_or(code);
            let _ = writeln!(text, "Exit status is {code}");
        }
        None => {
            let _ = writeln!(text, "Exit status: {detail}");
        }
    }
    text
}

/// The first stretch where the texts differ, as `-` (e2fsck) and `+` (ours)
/// lines, at most `n` of each, after a line naming where it starts. Lines
/// common to both ends are skipped; inside, a longest common subsequence
/// aligns the two when they are small enough, so that one missing line
/// does not make everything after it differ.
fn first_difference(theirs: &str, ours: &str, n: usize) -> Vec<String> {
    let a: Vec<&str> = theirs.lines().collect();
    let b: Vec<&str> = ours.lines().collect();
    let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let hunk = first_hunk(ma, mb);
    let mut out = vec![format!("at line {}:", pre + hunk.start + 1)];
    out.extend(hunk.del.iter().take(n).map(|l| format!("- {l}")));
    if hunk.del.len() > n {
        out.push(format!("- … {} more", hunk.del.len() - n));
    }
    out.extend(hunk.add.iter().take(n).map(|l| format!("+ {l}")));
    if hunk.add.len() > n {
        out.push(format!("+ … {} more", hunk.add.len() - n));
    }
    out
}

struct Hunk<'a> {
    /// Index in `a` where it starts.
    start: usize,
    del: Vec<&'a str>,
    add: Vec<&'a str>,
}

/// The first run of changed lines between `a` and `b` (which differ at
/// their first line or are of different lengths).
fn first_hunk<'a>(a: &[&'a str], b: &[&'a str]) -> Hunk<'a> {
    // Past this size an O(n·m) table is too big: everything left differs.
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        return Hunk {
            start: 0,
            del: a.to_vec(),
            add: b.to_vec(),
        };
    }
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if a[i] == b[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut hunk = Hunk {
        start: 0,
        del: Vec::new(),
        add: Vec::new(),
    };
    let mut started = false;
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            if started {
                break;
            }
            i += 1;
            j += 1;
            continue;
        }
        if !started {
            started = true;
            hunk.start = i;
        }
        if j < m && (i == n || lcs[at(i, j + 1)] >= lcs[at(i + 1, j)]) {
            hunk.add.push(b[j]);
            j += 1;
        } else {
            hunk.del.push(a[i]);
            i += 1;
        }
    }
    hunk
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_names_banner_and_exit() {
        let t = normalise(
            "Pass 1: x\n/tmp/a/t.ours.img: 11/16 files  \n",
            "fsck.ext4r 0.1.0\nfsck.ext4r: Bad magic in /tmp/a/t.ours.img\n",
            "exit 8",
            "/tmp/a/t.ours.img",
            None,
        );
        assert_eq!(
            t,
            "Pass 1: x\ntest.img: 11/16 files\n[stderr]\ne2fsck: Bad magic in test.img\n\
             Exit status is 8\n"
        );
    }

    #[test]
    fn first_difference_aligns() {
        let a = "x\na\nb\nc\nd\n";
        let b = "x\na\nc\nd\ne\n";
        assert_eq!(first_difference(a, b, 3), vec!["at line 3:", "- b"]);
        let d = first_difference("x\ny\n", "x\nz\nw\n", 1);
        assert_eq!(d, vec!["at line 2:", "- y", "+ z", "+ … 1 more"]);
    }
}
