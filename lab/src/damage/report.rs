//! The table per damage kind, the list of failing cases with what to
//! rerun, the per-case results file, and the kept images.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::case::CaseResult;
use crate::corpus::class::Class;

/// What the table needs of one case: from a run, or from a line of a
/// results file (so that runs cut short, or run in parts, add up).
pub struct Verdicts {
    kind: String,
    crash: bool,
    hang: bool,
    nwrite: bool,
    agree: bool,
    ours_clean: bool,
    e2_clean: bool,
    again_bad: bool,
    lost: usize,
    e2_bad: bool,
}

impl Verdicts {
    pub fn of(r: &CaseResult) -> Verdicts {
        Verdicts {
            kind: r.kind.to_string(),
            crash: r.crashed(),
            hang: r.hung(),
            nwrite: r.fn_wrote,
            agree: r.verdict_agrees(),
            ours_clean: r.ours_then_e2.clean(),
            e2_clean: r.e2_again.clean(),
            again_bad: r.again_bad(),
            lost: r.lost_vs_e2().len(),
            e2_bad: r.e2_fn.bad() || r.e2_fy.bad() || r.e2_again.bad(),
        }
    }

    /// A line of [`tsv_line`]; `None` for the header or a damaged line.
    pub fn parse(line: &str) -> Option<Verdicts> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 16 || f[0].parse::<u64>().is_err() {
            return None;
        }
        let c = |i: usize| class_of(f[i]);
        let ours = [c(4), c(7), c(9)];
        let e2_again = c(11);
        Some(Verdicts {
            kind: f[2].to_string(),
            crash: ours.contains(&Class::Crash),
            hang: ours.contains(&Class::Timeout),
            nwrite: f[6] == "true",
            agree: c(4) == c(5),
            ours_clean: c(8) == Class::Clean,
            e2_clean: e2_again == Class::Clean,
            again_bad: e2_again == Class::Clean && c(9) != Class::Clean,
            lost: f[14].parse().ok()?,
            e2_bad: [c(5), c(10), c(11)]
                .iter()
                .any(|k| matches!(k, Class::Crash | Class::Timeout)),
        })
    }
}

/// The class of an outcome's detail as [`crate::corpus::class::Outcome::of_run`] words it.
fn class_of(detail: &str) -> Class {
    if detail.starts_with("signal") || detail.contains("crash handler") {
        Class::Crash
    } else if detail.starts_with("killed after") {
        Class::Timeout
    } else {
        match detail
            .strip_prefix("exit ")
            .and_then(|d| d.split_whitespace().next())
            .and_then(|d| d.parse::<i32>().ok())
        {
            Some(124) => Class::Other,
            Some(code) => Class::of_code(code),
            None => Class::Other,
        }
    }
}

#[derive(Default)]
struct Row {
    cases: usize,
    crash: usize,
    hang: usize,
    nwrite: usize,
    agree: usize,
    ours_clean: usize,
    e2_clean: usize,
    worse: usize,
    again_bad: usize,
    lost_cases: usize,
    lost_files: usize,
    e2_bad: usize,
}

impl Row {
    fn add(&mut self, v: &Verdicts) {
        self.cases += 1;
        self.crash += usize::from(v.crash);
        self.hang += usize::from(v.hang);
        self.nwrite += usize::from(v.nwrite);
        self.agree += usize::from(v.agree);
        self.ours_clean += usize::from(v.ours_clean);
        self.e2_clean += usize::from(v.e2_clean);
        self.worse += usize::from(v.e2_clean && !v.ours_clean);
        self.again_bad += usize::from(v.again_bad);
        self.lost_cases += usize::from(v.lost > 0);
        self.lost_files += v.lost;
        self.e2_bad += usize::from(v.e2_bad);
    }

    fn line(&self, name: &str) -> String {
        format!(
            "{name:<12} {:>6} {:>6} {:>5} {:>7} {:>7} {:>13} {:>6} {:>8} {:>6} {:>7} {:>7}",
            self.cases,
            self.crash,
            self.hang,
            self.nwrite,
            format!("{}/{}", self.agree, self.cases),
            format!("{}/{}", self.ours_clean, self.e2_clean),
            self.worse,
            self.again_bad,
            self.lost_cases,
            self.lost_files,
            self.e2_bad,
        )
    }
}

pub fn table(results: &[Verdicts]) -> String {
    let mut rows: BTreeMap<&str, Row> = BTreeMap::new();
    let mut total = Row::default();
    for r in results {
        rows.entry(r.kind.as_str()).or_default().add(r);
        total.add(r);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:>6} {:>6} {:>5} {:>7} {:>7} {:>13} {:>6} {:>8} {:>6} {:>7} {:>7}",
        "kind",
        "cases",
        "crash",
        "hang",
        "-n wrt",
        "agree",
        "clean ours/e2",
        "worse",
        "again✗",
        "lost",
        "files",
        "e2 bad"
    );
    for (k, row) in &rows {
        let _ = writeln!(s, "{}", row.line(k));
    }
    let _ = writeln!(s, "{}", total.line("total"));
    s.push_str(
        "  agree: ours -fn exit class = e2fsck -fn's; clean: e2fsck -fn clean after ours' -fy / \
         after e2fsck's -fy;\n  worse: e2fsck's repair clean, ours not; again✗: our second -fn \
         not clean where e2fsck's second run is;\n  lost: cases with files intact after e2fsck's \
         repair and not after ours; files: how many; e2 bad: e2fsck crashed or timed out\n",
    );
    s
}

/// How to rerun case `r` alone.
pub fn repro(seed: u64, r: &CaseResult, selection: &str) -> String {
    format!(
        "cargo xtask damage --seed {seed} --first {} --cases 1{selection}",
        r.index
    )
}

/// A failing case in full: damage, reasons, both checkers' first lines,
/// files lost.
pub fn describe(seed: u64, r: &CaseResult, selection: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "case {} [{}{}] {}: {}",
        r.index,
        r.cfg,
        if r.snap { ", live snapshot" } else { "" },
        r.kind,
        r.desc
    );
    for f in r.failures() {
        let _ = writeln!(s, "  FAIL {f}");
    }
    let _ = writeln!(
        s,
        "  -fn: ours {} e2fsck {}; after -fy, e2fsck -fn: ours {} e2fsck {}; second -fn: ours {} e2fsck {}",
        r.ours_fn.outcome.detail,
        r.e2_fn.outcome.detail,
        r.ours_then_e2.outcome.detail,
        r.e2_again.outcome.detail,
        r.ours_again.outcome.detail,
        r.e2_again.outcome.detail,
    );
    if !r.verdict_agrees() {
        for (who, run) in [("ours", &r.ours_fn), ("e2fsck", &r.e2_fn)] {
            let _ = writeln!(s, "  {who} -fn ({}):", run.outcome.detail);
            for l in &run.head {
                let _ = writeln!(s, "    | {l}");
            }
        }
    }
    let _ = writeln!(s, "  ours -fy ({}):", r.ours_fy.outcome.detail);
    for l in &r.ours_fy.head {
        let _ = writeln!(s, "    | {l}");
    }
    let _ = writeln!(s, "  e2fsck -fy ({}):", r.e2_fy.outcome.detail);
    for l in &r.e2_fy.head {
        let _ = writeln!(s, "    | {l}");
    }
    if !r.ours_then_e2.clean() {
        let _ = writeln!(s, "  e2fsck -fn after ours:");
        for l in &r.ours_then_e2.head {
            let _ = writeln!(s, "    | {l}");
        }
    }
    if !r.ours_again.clean() {
        let _ = writeln!(s, "  ours second -fn:");
        for l in &r.ours_again.head {
            let _ = writeln!(s, "    | {l}");
        }
    }
    let lost = r.lost_vs_e2();
    if !lost.is_empty() {
        let _ = writeln!(
            s,
            "  lost by ours, kept by e2fsck ({}; ours lost {} in all, e2fsck {}):",
            lost.len(),
            r.ours_lost.len(),
            r.e2_lost.len()
        );
        for (p, why) in lost.iter().take(8) {
            let _ = writeln!(s, "    {p}: {why}");
        }
    }
    let _ = writeln!(s, "  rerun: {}", repro(seed, r, selection));
    s
}

/// One tab-separated line per case, for later analysis.
pub fn tsv_line(r: &CaseResult) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
        r.index,
        r.cfg,
        r.kind,
        r.snap,
        r.ours_fn.outcome.detail,
        r.e2_fn.outcome.detail,
        r.fn_wrote,
        r.ours_fy.outcome.detail,
        r.ours_then_e2.outcome.detail,
        r.ours_again.outcome.detail,
        r.e2_fy.outcome.detail,
        r.e2_again.outcome.detail,
        r.ours_lost.len(),
        r.e2_lost.len(),
        r.lost_vs_e2().len(),
        r.desc.replace(['\t', '\n'], " "),
    )
}

pub const TSV_HEADER: &str = "case\tconfig\tkind\tsnapshot\tours_fn\te2fsck_fn\tfn_wrote\t\
     ours_fy\te2fsck_fn_after_ours\tours_fn_again\te2fsck_fy\te2fsck_fn_again\t\
     ours_lost\te2fsck_lost\tlost_vs_e2fsck\tdamage\n";

/// Keeps a failing case: the damaged image gzipped and a text file with
/// the damage, the reasons and the command that reruns it.
pub fn keep(dir: &Path, seed: u64, r: &CaseResult, selection: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let stem = format!("seed{seed}-case{}-{}-{}", r.index, r.cfg, r.kind);
    let gz = dir.join(format!("{stem}.img.gz"));
    let out = std::fs::File::create(&gz)?;
    let st = Command::new("gzip")
        .arg("-c")
        .arg(&r.damaged)
        .stdout(out)
        .stderr(Stdio::null())
        .status()
        .context("cannot run gzip")?;
    anyhow::ensure!(st.success(), "gzip {} failed", r.damaged.display());
    std::fs::write(
        dir.join(format!("{stem}.txt")),
        describe(seed, r, selection),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_lines_parse_back() {
        let line = "7\text3\tdir\tfalse\texit 4\texit 4\tfalse\texit 1\texit 4\t\
                    exit 0\texit 1\texit 0\t3\t1\t2\tdirectory /a block 1: zeroed";
        let v = Verdicts::parse(line).expect("parses");
        assert_eq!(v.kind, "dir");
        assert!(v.agree && !v.ours_clean && v.e2_clean && !v.again_bad && !v.crash);
        assert_eq!(v.lost, 2);
        assert!(Verdicts::parse(TSV_HEADER).is_none());
        assert_eq!(class_of("signal 6 (SIGABRT)"), Class::Crash);
        assert_eq!(class_of("killed after 120s"), Class::Timeout);
        assert_eq!(class_of("exit 101 (panic)"), Class::Crash);
        assert_eq!(class_of("exit 12"), Class::Errors);
    }
}
