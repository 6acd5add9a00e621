//! `cargo xtask bench defrag`: `e4defrag-r` against `e4defrag` on the images
//! of `cargo xtask fragment` (kernel-written, cached with their seeds).
//!
//! - `score`: on a loop-mounted twin, `e4defrag -c -v` (run twice: its
//!   first run after a mount counts extent-tree records, later runs the
//!   kernel's merged extent cache) against `e4defrag-r -c -v` on the mount
//!   and on the unmounted image: per-file now/best/size lines, the
//!   numbering, the five ranked files and the totals must be identical.
//! - `online`: twins mounted, every file read (pages cached, as after
//!   writing them), then `e4defrag DIR` and `e4defrag-r DIR` timed,
//!   alternating which goes first; afterwards the total extent count, every
//!   file's sha256, and `e2fsck -fn` after unmounting.
//! - `relevant`: the `small` tree copied to twin images on the disk (not
//!   tmpfs), both mounted; `e4defrag-r -r` on one (its gap figures, hashes
//!   before and after, e2fsck after); then cold-cache reads of both trees,
//!   alternating between them, `--reads` times each: `tar cf - | cat`, which
//!   reads the data, the issue's `tar cf /dev/null`, which GNU tar answers
//!   without reading file data, and the first after the second (the data
//!   alone, the part -r changes). Medians are reported, with the read
//!   requests the disk served.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use super::filled::LoopMount;
use crate::fragment::{self, Case};
use crate::util::{self, fmt_duration, TempDir};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Score,
    Online,
    Relevant,
}

#[derive(clap::Args)]
pub struct DefragArgs {
    /// What to measure, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "score,online,relevant"
    )]
    parts: Vec<Part>,
    /// Images for `score` and `online`, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "interleave,filldel,small,big"
    )]
    cases: Vec<Case>,
    /// Seed of the images.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where `cargo xtask fragment` keeps the images.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm/ext4r-defrag")]
    cache: PathBuf,
    /// Build the images again.
    #[arg(long)]
    rebuild: bool,
    /// Timed runs per tool in `online` (alternating which goes first).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Where twins are made (tmpfs).
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Where the `relevant` image lives: must be on a disk, not tmpfs
    /// [default: target/xtask-defrag].
    #[arg(long)]
    disk_dir: Option<PathBuf>,
    /// Cold reads per measurement in `relevant` (the median is reported).
    #[arg(long, default_value_t = 5)]
    reads: usize,
    /// Our binary instead of `cargo xtask dist`'s (`e4defrag` is appended).
    #[arg(long, value_name = "CMD")]
    ours_cmd: Option<String>,
}

pub fn run(a: &DefragArgs) -> Result<()> {
    ensure!(
        rustix::process::geteuid().is_root(),
        "bench defrag needs root (loop devices, mounts, drop_caches)"
    );
    for tool in ["e4defrag", "e2fsck", "sha256sum", "tar"] {
        ensure!(
            util::find_program(tool.as_ref()).is_some(),
            "{tool} not found on $PATH"
        );
    }
    let ours: Vec<OsString> = match &a.ours_cmd {
        Some(c) => util::resolve_cmd(c)?,
        None => vec![util::dist_ext4r()?.into()],
    };
    let tmp = TempDir::new_in(&a.dir, "ext4r-defrag-bench-")?;
    let mut failures = Vec::new();
    if a.parts.contains(&Part::Score) || a.parts.contains(&Part::Online) {
        for &case in &a.cases {
            let img = fragment::image(case, a.seed, &a.cache, a.rebuild)?;
            if a.parts.contains(&Part::Score) {
                if let Err(e) = score(&ours, case, &img, tmp.path()) {
                    failures.push(format!("score {}: {e:#}", case.name()));
                }
            }
            if a.parts.contains(&Part::Online) {
                if let Err(e) = online(&ours, case, &img, tmp.path(), a.runs) {
                    failures.push(format!("online {}: {e:#}", case.name()));
                }
            }
        }
    }
    if a.parts.contains(&Part::Relevant) {
        let img = fragment::image(Case::Small, a.seed, &a.cache, a.rebuild)?;
        let disk = a
            .disk_dir
            .clone()
            .unwrap_or_else(|| util::target_dir().join("xtask-defrag"));
        if let Err(e) = relevant(&ours, &img, &disk, a.reads) {
            failures.push(format!("relevant: {e:#}"));
        }
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    Ok(())
}

fn ours_cmd(ours: &[OsString]) -> Command {
    let mut c = Command::new(&ours[0]);
    c.args(&ours[1..]).arg("e4defrag");
    c
}

/// Runs a command, returning its stdout; fails on a signal or a spawn error
/// (a non-zero exit is the caller's to judge through `ok`).
fn output(cmd: &mut Command, ok: &[i32]) -> Result<String> {
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", util::display_cmd(cmd)))?;
    let code = out.status.code().unwrap_or(-1);
    ensure!(
        ok.contains(&code),
        "{} exited {code}: {}",
        util::display_cmd(cmd),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn twin(img: &Path, dir: &Path, name: &str) -> Result<PathBuf> {
    let t = dir.join(name);
    let _ = std::fs::remove_file(&t);
    let st = Command::new("cp")
        .arg("--sparse=always")
        .arg(img)
        .arg(&t)
        .status()?;
    ensure!(st.success(), "cp {} failed", img.display());
    Ok(t)
}

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

fn score(ours: &[OsString], case: Case, img: &Path, dir: &Path) -> Result<()> {
    println!("== score {}", case.name());
    let t = twin(img, dir, "score.img")?;
    let unmounted = output(ours_cmd(ours).args(["-c", "-v"]).arg(&t), &[0, 1])?;
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

/// sha256 of every file under `root` (lost+found aside), sorted by path.
fn hashes(root: &Path) -> Result<String> {
    output(
        Command::new("sh").arg("-c").arg(format!(
            "cd '{}' && find . -type f ! -path './lost+found/*' -print0 | sort -z | xargs -0 -r sha256sum",
            root.display()
        )),
        &[0],
    )
}

fn total_extents(ours: &[OsString], mnt: &Path) -> Result<String> {
    let text = output(ours_cmd(ours).arg("-c").arg(mnt), &[0, 1])?;
    text.lines()
        .find_map(|l| l.strip_prefix(" Total/best extents"))
        .map(|v| v.trim().to_string())
        .context("no totals in e4defrag-r -c")
}

struct OnlineRun {
    secs: f64,
    extents: String,
}

fn online(ours: &[OsString], case: Case, img: &Path, dir: &Path, runs: usize) -> Result<()> {
    println!("== online {}", case.name());
    let mut times: BTreeMap<&str, Vec<OnlineRun>> = BTreeMap::new();
    for r in 0..runs.max(1) {
        let order: [&str; 2] = if r % 2 == 0 {
            ["e4defrag-r", "e4defrag"]
        } else {
            ["e4defrag", "e4defrag-r"]
        };
        for tool in order {
            util::check_interrupted()?;
            let t = twin(img, dir, "online.img")?;
            let mnt = dir.join("online-mnt");
            std::fs::create_dir_all(&mnt)?;
            let mount = LoopMount::attach(&t, &mnt)?;
            let before = hashes(&mnt)?;
            let extents_before = total_extents(ours, &mnt)?;
            // Cache every page, as after writing the files.
            output(
                Command::new("sh").arg("-c").arg(format!(
                    "find '{}' -type f -exec cat {{}} + > /dev/null",
                    mnt.display()
                )),
                &[0],
            )?;
            let mut cmd = if tool == "e4defrag" {
                Command::new("e4defrag")
            } else {
                ours_cmd(ours)
            };
            cmd.arg(&mnt).stdout(Stdio::null()).stderr(Stdio::null());
            let start = Instant::now();
            let st = cmd.status()?;
            let secs = start.elapsed().as_secs_f64();
            let after = hashes(&mnt)?;
            let extents = total_extents(ours, &mnt)?;
            mount.release()?;
            let fsck = Command::new("e2fsck")
                .arg("-fn")
                .arg(&t)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?;
            let _ = std::fs::remove_file(&t);
            println!(
                "  {tool:<10} {:>8.2} s  exit {:?}  extents {extents_before} -> {extents}  hashes {}  e2fsck -fn {}",
                secs,
                st.code(),
                if before == after { "unchanged" } else { "CHANGED" },
                if fsck.success() { "clean" } else { "NOT CLEAN" }
            );
            ensure!(before == after, "{tool} changed file contents");
            ensure!(fsck.success(), "{tool} left e2fsck -fn unclean");
            times
                .entry(tool)
                .or_default()
                .push(OnlineRun { secs, extents });
        }
    }
    let med = |v: &[OnlineRun]| {
        let mut s: Vec<f64> = v.iter().map(|r| r.secs).collect();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    let (o, t) = (&times["e4defrag-r"], &times["e4defrag"]);
    let ext = |v: &[OnlineRun]| {
        v.last()
            .and_then(|r| r.extents.split('/').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    };
    println!(
        "  median e4defrag-r {:.2} s, e4defrag {:.2} s: ratio {:.3}; total extents after: e4defrag-r {}, e4defrag {}",
        med(o),
        med(t),
        med(o) / med(t).max(1e-9),
        ext(o),
        ext(t)
    );
    ensure!(
        ext(o) <= ext(t),
        "e4defrag-r left more extents ({}) than e4defrag ({})",
        ext(o),
        ext(t)
    );
    Ok(())
}

fn drop_caches() -> Result<()> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").context("drop caches")?;
    Ok(())
}

/// The block device holding `path` as /proc/diskstats names it.
fn disk_of(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let link = format!(
        "/sys/dev/block/{}:{}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev)
    );
    let target = std::fs::read_link(link).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// Reads completed and sectors read on `disk`.
fn disk_reads(disk: &str) -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&disk))
        .and_then(|f| Some((f.get(3)?.parse().ok()?, f.get(5)?.parse().ok()?)))
        .unwrap_or((0, 0))
}

/// One cold run of `sh -c script` (after `sh -c warm`, untimed, when
/// given): its time, and the read requests and sectors the disk served
/// meanwhile (other users' reads count too).
fn cold_read(script: &str, warm: Option<&str>, disk: Option<&str>) -> Result<(Duration, u64, u64)> {
    util::check_interrupted()?;
    drop_caches()?;
    if let Some(w) = warm {
        output(Command::new("sh").arg("-c").arg(w), &[0])?;
    }
    let r0 = disk.map(disk_reads).unwrap_or_default();
    let start = Instant::now();
    output(Command::new("sh").arg("-c").arg(script), &[0])?;
    let took = start.elapsed();
    let r1 = disk.map(disk_reads).unwrap_or_default();
    Ok((took, r1.0.saturating_sub(r0.0), r1.1.saturating_sub(r0.1)))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Twin images of the `small` tree on the disk: `-r` on one, then cold
/// reads of both, alternating (the disk is shared: alternating keeps drift
/// out of the comparison).
fn relevant(ours: &[OsString], img: &Path, disk: &Path, reads: usize) -> Result<()> {
    println!("== relevant (-r) on the small tree");
    std::fs::create_dir_all(disk)?;
    let fs_type = rustix::fs::statfs(disk)?.f_type;
    ensure!(
        fs_type != 0x0102_1994,
        "{} is on tmpfs; -r must be measured on a disk (--disk-dir)",
        disk.display()
    );
    let imgs = [disk.join("before.img"), disk.join("after.img")];
    let mnts = [disk.join("before-mnt"), disk.join("after-mnt")];
    for (t, m) in imgs.iter().zip(&mnts) {
        let _ = std::fs::remove_file(t);
        let st = Command::new("cp")
            .arg("--sparse=always")
            .arg(img)
            .arg(t)
            .status()?;
        ensure!(st.success(), "cp to {} failed", disk.display());
        std::fs::create_dir_all(m)?;
    }
    let mount_a = LoopMount::attach(&imgs[0], &mnts[0])?;
    let mount_b = LoopMount::attach(&imgs[1], &mnts[1])?;
    let tree = mnts[1].join("tree");
    let files = output(
        Command::new("sh")
            .arg("-c")
            .arg(format!("find '{}' -type f | wc -l", tree.display())),
        &[0],
    )?;
    println!("  {} files under {}", files.trim(), tree.display());
    let before_hash = hashes(&tree)?;
    let start = Instant::now();
    let report = output(ours_cmd(ours).arg("-r").arg(&tree), &[0, 1])?;
    let took = start.elapsed();
    for l in report.lines().filter(|l| l.starts_with(' ')) {
        println!("  e4defrag-r -r:{l}");
    }
    let after_hash = hashes(&tree)?;
    let data = |m: &Path| format!("cd '{}' && tar cf - tree | cat > /dev/null", m.display());
    let meta = |m: &Path| format!("cd '{}' && tar cf /dev/null tree", m.display());
    let disk_name = disk_of(disk);
    let mut t: [[Vec<Duration>; 2]; 3] = Default::default();
    let mut io: [[(u64, u64); 2]; 3] = Default::default();
    for r in 0..reads.max(1) {
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let runs = [
                (data(&mnts[i]), None),
                (meta(&mnts[i]), None),
                // The data alone: directories and inodes read first.
                (data(&mnts[i]), Some(meta(&mnts[i]))),
            ];
            for (k, (script, warm)) in runs.iter().enumerate() {
                let (d, req, sec) = cold_read(script, warm.as_deref(), disk_name.as_deref())?;
                t[k][i].push(d);
                io[k][i].0 += req;
                io[k][i].1 += sec;
            }
        }
    }
    mount_a.release()?;
    mount_b.release()?;
    let fsck = Command::new("e2fsck")
        .arg("-fn")
        .arg(&imgs[1])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    for i in &imgs {
        let _ = std::fs::remove_file(i);
    }
    let [[d_b, d_a], [m_b, m_a], [w_b, w_a]] = t;
    let show = |what: &str, b: Vec<Duration>, a: Vec<Duration>| {
        let (mb, ma) = (median(b.clone()), median(a.clone()));
        println!(
            "  cold {what}, median of {}: {} -> {} ({:.0}% less); runs before {:?}, after {:?}",
            b.len(),
            fmt_duration(mb),
            fmt_duration(ma),
            100.0 * (1.0 - ma.as_secs_f64() / mb.as_secs_f64()),
            b.iter().map(|d| fmt_duration(*d)).collect::<Vec<_>>(),
            a.iter().map(|d| fmt_duration(*d)).collect::<Vec<_>>(),
        );
    };
    show("`tar cf - tree | cat` (reads the data)", d_b, d_a);
    show(
        "`tar cf /dev/null tree` (GNU tar skips file data)",
        m_b,
        m_a,
    );
    show(
        "`tar cf - tree | cat` after `tar cf /dev/null tree` (the data alone)",
        w_b,
        w_a,
    );
    let n = reads.max(1) as u64;
    if let Some(d) = &disk_name {
        let whats = [
            "tar cf - | cat",
            "tar cf /dev/null",
            "tar cf - | cat, metadata cached",
        ];
        for (k, what) in whats.iter().enumerate() {
            println!(
                "  {d} reads per `{what}` (the disk is shared: others' reads count too): \
                 {} requests / {} MiB before, {} requests / {} MiB after",
                io[k][0].0 / n,
                io[k][0].1 / n / 2048,
                io[k][1].0 / n,
                io[k][1].1 / n / 2048
            );
        }
    }
    println!(
        "  -r took {}; hashes {}; e2fsck -fn {}",
        fmt_duration(took),
        if before_hash == after_hash {
            "unchanged"
        } else {
            "CHANGED"
        },
        if fsck.success() { "clean" } else { "NOT CLEAN" }
    );
    ensure!(before_hash == after_hash, "-r changed file contents");
    ensure!(fsck.success(), "-r left e2fsck -fn unclean");
    Ok(())
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
