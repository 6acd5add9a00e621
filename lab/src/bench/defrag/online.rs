//! `online`: e4defrag-r and e4defrag on twins with every page cached.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{ensure, Context, Result};

use super::{hashes, ours_cmd, output, twin};
use crate::bench::filled::LoopMount;
use crate::fragment::Case;
use crate::util;

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

pub(super) fn online(
    ours: &[OsString],
    case: Case,
    img: &Path,
    dir: &Path,
    runs: usize,
) -> Result<()> {
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
