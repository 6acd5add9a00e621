//! `cargo xtask bench fsck --scaling`: how fsck's passes scale with threads,
//! from what this machine can measure. For each image, `fsck -fn --json` with
//! `-m 1` and `-m 2` runs alternately (and `e2fsck -fn` for the ratio); each
//! pass's median times give its serial fraction by Amdahl's law,
//! `s = 2·T2/T1 − 1` (0 when the pass halves, 1 when it does not move), and
//! from those `T(n) = T1·(s + (1 − s)/n)` for 16 and 64 threads. Time outside
//! the passes (start, open, exit) counts as serial. On a 2-core machine the
//! two threads also share the cores with the readers of each pass, so the
//! fractions are an upper bound on the serial share.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// Per-pass times of one run of ours: (pass name, seconds), and the wall
/// time of the whole run.
struct Run {
    passes: Vec<(String, f64)>,
    wall: f64,
}

fn ours_once(ours: &[OsString], threads: usize, img: &Path) -> Result<Run> {
    let t = Instant::now();
    let out = Command::new(&ours[0])
        .args(&ours[1..])
        .args(["-fn", "--json", "-m", &threads.to_string()])
        .arg(img)
        .stderr(Stdio::null())
        .output()
        .context("running ours")?;
    let wall = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "ours -m {threads} exited {} on {}",
            out.status,
            img.display()
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("ours --json")?;
    let passes = v["passes"]
        .as_array()
        .context("no passes in the JSON")?
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or("?").to_string(),
                p["seconds"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    Ok(Run { passes, wall })
}

fn theirs_once(theirs: &[OsString], img: &Path) -> Result<f64> {
    let t = Instant::now();
    let st = Command::new(&theirs[0])
        .args(&theirs[1..])
        .arg("-fn")
        .arg(img)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running e2fsck")?;
    let wall = t.elapsed().as_secs_f64();
    if !st.success() {
        bail!("e2fsck -fn exited {st} on {}", img.display());
    }
    Ok(wall)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Serial fraction from the times on 1 and 2 threads (Amdahl), within
/// [0, 1].
pub(crate) fn serial_fraction(t1: f64, t2: f64) -> f64 {
    if t1 <= 0.0 {
        return 1.0;
    }
    (2.0 * t2 / t1 - 1.0).clamp(0.0, 1.0)
}

/// Amdahl's time on `n` threads of work taking `t1` on one with serial
/// fraction `s`.
pub(crate) fn amdahl(t1: f64, s: f64, n: f64) -> f64 {
    t1 * (s + (1.0 - s) / n)
}

/// Measures and prints the estimate for one image.
pub(super) fn run(
    label: &str,
    img: &Path,
    ours: &[OsString],
    theirs: &[OsString],
    runs: usize,
) -> Result<()> {
    // Warm-up (page cache, tmpfs faults).
    ours_once(ours, 1, img)?;
    theirs_once(theirs, img)?;
    let (mut r1, mut r2, mut e2) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        crate::util::check_interrupted()?;
        r1.push(ours_once(ours, 1, img)?);
        r2.push(ours_once(ours, 2, img)?);
        e2.push(theirs_once(theirs, img)?);
    }
    let names: Vec<String> = r1[0].passes.iter().map(|p| p.0.clone()).collect();
    let pass_median = |rs: &[Run], i: usize| median(rs.iter().map(|r| r.passes[i].1).collect());
    let outside = |rs: &[Run]| {
        median(
            rs.iter()
                .map(|r| (r.wall - r.passes.iter().map(|p| p.1).sum::<f64>()).max(0.0))
                .collect(),
        )
    };
    let e2 = median(e2);
    println!(
        "== {label}: {}, {runs} runs each of -m 1, -m 2, e2fsck -fn",
        img.display()
    );
    println!(
        "  {:<40} {:>9} {:>9} {:>7} {:>9} {:>9}",
        "pass", "1 thread", "2 threads", "serial", "16 (est)", "64 (est)"
    );
    let (mut t1s, mut t2s, mut t16, mut t64) = (0.0, 0.0, 0.0, 0.0);
    let mut rows: Vec<(String, f64, f64)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), pass_median(&r1, i), pass_median(&r2, i)))
        .collect();
    rows.push((
        "outside the passes (start, open, exit)".into(),
        outside(&r1),
        outside(&r2),
    ));
    let last = rows.len() - 1;
    for (i, (name, t1, t2)) in rows.iter().enumerate() {
        let s = if i == last {
            1.0
        } else {
            serial_fraction(*t1, *t2)
        };
        let (a, b) = (amdahl(*t1, s, 16.0), amdahl(*t1, s, 64.0));
        t1s += t1;
        t2s += t2;
        t16 += a;
        t64 += b;
        println!(
            "  {:<40} {:>8.3}s {:>8.3}s {:>6.0}% {:>8.3}s {:>8.3}s",
            name,
            t1,
            t2,
            s * 100.0,
            a,
            b
        );
    }
    println!(
        "  {:<40} {:>8.3}s {:>8.3}s {:>7} {:>8.3}s {:>8.3}s",
        "total", t1s, t2s, "", t16, t64
    );
    println!(
        "  e2fsck -fn {e2:.3}s: e2fsck/ours {:.1}x on 1 thread, {:.1}x on 2 (measured), \
         {:.1}x on 16, {:.1}x on 64 (estimated); ours 1→16 threads {:.1}x, 1→64 {:.1}x",
        e2 / t1s,
        e2 / t2s,
        e2 / t16,
        e2 / t64,
        t1s / t16,
        t1s / t64
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amdahl_from_two_points() {
        // A pass that halves is all parallel; one that does not move is
        // all serial; one from 1.0 to 0.6 is 20% serial.
        assert_eq!(serial_fraction(1.0, 0.5), 0.0);
        assert_eq!(serial_fraction(1.0, 1.0), 1.0);
        assert!((serial_fraction(1.0, 0.6) - 0.2).abs() < 1e-12);
        // Faster than halving (noise) or slower than one thread: clamped.
        assert_eq!(serial_fraction(1.0, 0.4), 0.0);
        assert_eq!(serial_fraction(1.0, 1.3), 1.0);
        assert!((amdahl(1.0, 0.2, 16.0) - 0.25).abs() < 1e-12);
        assert!((amdahl(1.0, 0.0, 64.0) - 1.0 / 64.0).abs() < 1e-12);
    }
}
