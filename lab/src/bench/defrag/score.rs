//! `score`: `e4defrag-r -c -v` against `e4defrag -c -v`, line by line.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, ensure, Result};

use super::{ours_cmd, output, twin};
use crate::bench::filled::LoopMount;
use crate::fragment::Case;

/// One `-c -v` report, parsed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Report {
    /// `[i/N]path` → now, best, KB per extent.
    files: Vec<(String, u64, u64, u64)>,
    /// The ranked files.
    top: Vec<(String, u64, u64, u64)>,
    /// Total/best extents, average KB, score.
    totals: Option<(String, String, String)>,
}

/// Strips e4defrag's progress output: the text a terminal would show.
fn visible(line: &str) -> &str {
    let l = line.rsplit("\x1b[K").next().unwrap_or(line);
    if l.chars().all(|c| c.is_ascii_digit() || "[]/".contains(c)) {
        ""
    } else {
        l
    }
}

fn figures(line: &str) -> Option<(String, u64, u64, u64)> {
    let l = line.trim_end().strip_suffix(" KB")?;
    let (rest, size) = l.trim_end().rsplit_once(' ')?;
    let (name, nb) = rest
        .trim_end()
        .rsplit_once(' ')
        .unwrap_or(("", rest.trim()));
    let (now, best) = nb.split_once('/')?;
    Some((
        name.trim().to_string(),
        now.parse().ok()?,
        best.parse().ok()?,
        size.parse().ok()?,
    ))
}

fn parse(text: &str, strip: &str) -> Report {
    let mut r = Report::default();
    let mut prev = String::new();
    let mut in_top = false;
    let mut total = String::new();
    let mut avg = String::new();
    for raw in text.lines() {
        let line = visible(raw);
        if line.starts_with("<Fragmented files>") {
            in_top = true;
            continue;
        }
        if let Some(v) = line.strip_prefix(" Total/best extents") {
            total = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix(" Average size per extent") {
            avg = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix(" Fragmentation score") {
            r.totals = Some((total.clone(), avg.clone(), v.trim().to_string()));
        } else if let Some((mut name, now, best, size)) = figures(line) {
            if name.is_empty() {
                name = prev.clone();
            }
            let name = name.replacen(strip, "", 1);
            if in_top {
                r.top.push((name, now, best, size));
            } else {
                r.files.push((name, now, best, size));
            }
        }
        prev = line.to_string();
    }
    r
}

fn compare(what: &str, ours: &Report, theirs: &Report) -> Result<()> {
    ensure!(!theirs.files.is_empty(), "{what}: e4defrag listed no files");
    let mut diffs = Vec::new();
    let n = ours.files.len().max(theirs.files.len());
    for i in 0..n {
        let (o, t) = (ours.files.get(i), theirs.files.get(i));
        if o != t {
            diffs.push(format!("  line {i}: ours {o:?}\n          e4defrag {t:?}"));
        }
    }
    if ours.top != theirs.top {
        diffs.push(format!(
            "  ranking: ours {:?}\n           e4defrag {:?}",
            ours.top, theirs.top
        ));
    }
    if ours.totals != theirs.totals {
        diffs.push(format!(
            "  totals: ours {:?} e4defrag {:?}",
            ours.totals, theirs.totals
        ));
    }
    if diffs.is_empty() {
        println!(
            "  {what}: identical ({} files, totals {:?})",
            ours.files.len(),
            ours.totals
        );
        return Ok(());
    }
    let shown: Vec<String> = diffs.iter().take(10).cloned().collect();
    bail!("{what}: {} differences\n{}", diffs.len(), shown.join("\n"))
}

pub(super) fn score(ours: &[OsString], case: Case, img: &Path, dir: &Path) -> Result<()> {
    println!("== score {}", case.name());
    let t = twin(img, dir, "score.img")?;
    let unmounted = output(
        ours_cmd(ours).args(["-c", "-v", "--image"]).arg(&t),
        &[0, 1],
    )?;
    let mnt = dir.join("score-mnt");
    std::fs::create_dir_all(&mnt)?;
    let mount = LoopMount::attach(&t, &mnt)?;
    let prefix = mnt.to_string_lossy().into_owned();
    let first = output(
        Command::new("e4defrag").args(["-c", "-v"]).arg(&mnt),
        &[0, 1],
    )?;
    let second = output(
        Command::new("e4defrag").args(["-c", "-v"]).arg(&mnt),
        &[0, 1],
    )?;
    let mounted = output(ours_cmd(ours).args(["-c", "-v"]).arg(&mnt), &[0, 1])?;
    let plain_theirs = output(Command::new("e4defrag").arg("-c").arg(&mnt), &[0, 1])?;
    let plain_ours = output(ours_cmd(ours).arg("-c").arg(&mnt), &[0, 1])?;
    mount.release()?;
    let _ = std::fs::remove_file(&t);
    let e1 = parse(&first, "");
    let e2 = parse(&second, "");
    let cold = e1
        .files
        .iter()
        .zip(&e2.files)
        .filter(|(a, b)| a != b)
        .count();
    println!(
        "  e4defrag's first run after mounting differs from its second on {cold} files \
         (extent-tree records vs the kernel's merged extent cache); compared with the second"
    );
    let mut res = compare("mounted -c -v", &parse(&mounted, ""), &e2);
    let strip = |s: &str| -> String {
        s.lines()
            .skip(1)
            .filter(|l| !l.starts_with(" Extents below 1 MiB"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if strip(&plain_ours) == strip(&plain_theirs) {
        println!(
            "  mounted -c: identical text (after the version line; our extra figures line aside)"
        );
    } else {
        res = res.and(Err(anyhow::anyhow!(
            "mounted -c text differs:\n--- e4defrag\n{plain_theirs}\n--- ours\n{plain_ours}"
        )));
    }
    let r2 = compare(
        "unmounted -c -v (paths without the mount point)",
        &parse(&unmounted, ""),
        &parse(&second, &prefix),
    );
    res.and(r2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_e4defrag_lines() {
        let text = "e4defrag 1.47.0 (5-Feb-2023)\n\
<File>                                         now/best       size/ext\n\
[1/5][2/5]\x1b[79;0H\x1b[K[2/5]/m/x                           19/1              4 KB\n\
[3/5]\x1b[79;0H\x1b[K[3/5]/m/a-very-long-name-that-does-not-fit-in-forty\n\
                                                 3/1         102400 KB\n\
[4/5][5/5]\n\
\n\
<Fragmented files>                             now/best       size/ext\n\
1. /m/x                                19/1              4 KB\n\
\n Total/best extents\t\t\t\t41/3\n Average size per extent\t\t\t7496 KB\n Fragmentation score\t\t\t\t0\n";
        let r = parse(text, "/m");
        assert_eq!(
            r.files,
            vec![
                ("[2/5]/x".to_string(), 19, 1, 4),
                (
                    "[3/5]/a-very-long-name-that-does-not-fit-in-forty".to_string(),
                    3,
                    1,
                    102400
                )
            ]
        );
        assert_eq!(r.top, vec![("1. /x".to_string(), 19, 1, 4)]);
        assert_eq!(
            r.totals,
            Some(("41/3".into(), "7496 KB".into(), "0".into()))
        );
    }
}
