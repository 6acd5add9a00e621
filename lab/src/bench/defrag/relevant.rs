//! `relevant`: `-r` on one of twin disk-backed images, then alternating
//! cold-cache reads of both trees.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use super::{hashes, ours_cmd, output};
use crate::bench::filled::LoopMount;
use crate::util::{self, fmt_duration};

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
pub(super) fn relevant(
    ours: &[OsString],
    img: &Path,
    disk: &Path,
    reads: usize,
    offline: bool,
) -> Result<()> {
    println!(
        "== relevant (-r{}) on the small tree",
        if offline { ", offline" } else { "" }
    );
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
    let mut mount_b = LoopMount::attach(&imgs[1], &mnts[1])?;
    let tree = mnts[1].join("tree");
    let files = output(
        Command::new("sh")
            .arg("-c")
            .arg(format!("find '{}' -type f | wc -l", tree.display())),
        &[0],
    )?;
    println!("  {} files under {}", files.trim(), tree.display());
    let before_hash = hashes(&tree)?;
    let (report, took) = if offline {
        mount_b.release()?;
        let start = Instant::now();
        let report = output(
            ours_cmd(ours)
                .args(["-r", "--image", "--path", "/tree"])
                .arg(&imgs[1]),
            &[0, 1],
        )?;
        let took = start.elapsed();
        mount_b = LoopMount::attach(&imgs[1], &mnts[1])?;
        (report, took)
    } else {
        let start = Instant::now();
        let report = output(ours_cmd(ours).arg("-r").arg(&tree), &[0, 1])?;
        (report, start.elapsed())
    };
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
