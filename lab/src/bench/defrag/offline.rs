//! `offline`: e4defrag-r on the unmounted image against e4defrag-r online
//! on a twin (extent totals, time, hashes, e2fsck); `free`: `-f` on an
//! unmounted twin, its largest free extent and e2freefrag's histogram
//! before and after.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{ensure, Context, Result};

use super::{hashes, ours_cmd, output, twin};
use crate::bench::filled::LoopMount;
use crate::fragment::Case;

/// Total extents from `e4defrag-r -c` (mounted or not).
fn total_extents(ours: &[OsString], target: &Path) -> Result<u64> {
    let text = output(ours_cmd(ours).args(["-c", "--image"]).arg(target), &[0, 1])?;
    text.lines()
        .find_map(|l| l.strip_prefix(" Total/best extents"))
        .and_then(|v| v.trim().split('/').next())
        .and_then(|n| n.parse().ok())
        .context("no totals in e4defrag-r -c")
}

/// sha256 of every file of an unmounted image, through a mount.
fn image_hashes(img: &Path, mnt: &Path) -> Result<String> {
    std::fs::create_dir_all(mnt)?;
    let m = LoopMount::attach(img, mnt)?;
    let h = hashes(mnt);
    m.release()?;
    h
}

fn e2fsck_clean(img: &Path) -> Result<bool> {
    Ok(Command::new("e2fsck")
        .arg("-fn")
        .arg(img)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?
        .success())
}

pub(super) fn offline(ours: &[OsString], case: Case, img: &Path, dir: &Path) -> Result<()> {
    println!("== offline {}", case.name());
    let mnt = dir.join("offline-mnt");
    let before = image_hashes(img, &mnt)?;
    let extents_before = total_extents(ours, img)?;
    // Online on a twin, for the extent count to meet.
    let on = twin(img, dir, "online.img")?;
    std::fs::create_dir_all(&mnt)?;
    let m = LoopMount::attach(&on, &mnt)?;
    let start = Instant::now();
    output(ours_cmd(ours).arg(&mnt).stdout(Stdio::null()), &[0, 1])?;
    let online_secs = start.elapsed().as_secs_f64();
    m.release()?;
    let online = total_extents(ours, &on)?;
    let _ = std::fs::remove_file(&on);
    // Offline on the other twin.
    let off = twin(img, dir, "offline.img")?;
    let start = Instant::now();
    let report = output(ours_cmd(ours).arg("--image").arg(&off), &[0, 1])?;
    let offline_secs = start.elapsed().as_secs_f64();
    let offline = total_extents(ours, &off)?;
    let clean = e2fsck_clean(&off)?;
    let after = image_hashes(&off, &mnt)?;
    let _ = std::fs::remove_file(&off);
    for l in report.lines().filter(|l| l.starts_with(' ')) {
        println!("  offline:{l}");
    }
    println!(
        "  total extents {extents_before} -> online {online} ({online_secs:.2} s), offline \
         {offline} ({offline_secs:.2} s); hashes {}; e2fsck -fn {}; the kernel mounted it",
        if before == after {
            "unchanged"
        } else {
            "CHANGED"
        },
        if clean { "clean" } else { "NOT CLEAN" }
    );
    ensure!(before == after, "offline changed file contents");
    ensure!(clean, "offline left e2fsck -fn unclean");
    ensure!(
        offline <= online,
        "offline left {offline} extents, online {online}"
    );
    Ok(())
}

pub(super) fn free(ours: &[OsString], case: Case, img: &Path, dir: &Path) -> Result<()> {
    println!("== free space (-f) on {}", case.name());
    let mnt = dir.join("free-mnt");
    let before = image_hashes(img, &mnt)?;
    let t = twin(img, dir, "free.img")?;
    let start = Instant::now();
    let report = output(ours_cmd(ours).args(["-f", "--image"]).arg(&t), &[0, 1])?;
    let secs = start.elapsed().as_secs_f64();
    let clean = e2fsck_clean(&t)?;
    let after = image_hashes(&t, &mnt)?;
    let freefrag = output(Command::new("e2freefrag").arg(&t), &[0]);
    let _ = std::fs::remove_file(&t);
    for l in report.lines().skip(1) {
        println!("  {l}");
    }
    if let Ok(f) = freefrag {
        for l in f.lines().filter(|l| l.starts_with("Max. free extent")) {
            println!("  e2freefrag after: {l}");
        }
    }
    println!(
        "  -f took {secs:.2} s; hashes {}; e2fsck -fn {}",
        if before == after {
            "unchanged"
        } else {
            "CHANGED"
        },
        if clean { "clean" } else { "NOT CLEAN" }
    );
    ensure!(before == after, "-f changed file contents");
    ensure!(clean, "-f left e2fsck -fn unclean");
    let (largest, free) = kb_pair(&report, " Largest free extent after:")
        .context("no 'Largest free extent after' line in the -f report")?;
    // A free extent cannot cross a block -f may not move (backup
    // superblocks and descriptors sit at fixed places), so when the free
    // space is larger than the largest stretch without such blocks, that
    // stretch is what any tool can reach.
    let stretch = report
        .lines()
        .find_map(|l| l.split("immovable blocks is ").nth(1))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok());
    let reachable = stretch.map_or(free, |s| s.min(free));
    let pct = |n: u64, of: u64| {
        if of == 0 {
            100.0
        } else {
            n as f64 * 100.0 / of as f64
        }
    };
    println!(
        "  largest free extent after: {largest} KB = {:.1}% of the {free} KB free; \
         {:.1}% of the {reachable} KB reachable (free space, at most the largest stretch \
         without immovable blocks{})",
        pct(largest, free),
        pct(largest, reachable),
        stretch.map_or(String::new(), |s| format!(": {s} KB"))
    );
    ensure!(
        pct(largest, reachable) >= 90.0,
        "-f left a largest free extent of {largest} KB, under 90% of the {reachable} KB reachable"
    );
    Ok(())
}

/// `A KB of B KB` after `prefix` in a report.
fn kb_pair(report: &str, prefix: &str) -> Option<(u64, u64)> {
    let rest = report.lines().find_map(|l| l.strip_prefix(prefix))?;
    let mut w = rest.split_whitespace();
    let a = w.next()?.parse().ok()?;
    let b = w.nth(2)?.parse().ok()?;
    Some((a, b))
}
