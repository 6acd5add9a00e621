//! Before/after equivalence of two checker builds (issue 30: a refactor
//! of fsck whose contract is that nothing a user sees changes).
//!
//! [`compare`] runs an old and a new checker the same way on private
//! copies of one image: `-fn`, then `-fy` on the same copy (a `-fn` that
//! wrote would show as a difference of the image after `-fn`). Each side
//! runs in its own directory with the image under the same relative name
//! (`image.img`, an external journal as `journal.img`), so that paths in
//! the output are the same text, and with the same `E2FSCK_TIME`, so that
//! the clock stamps the same seconds. Compared, run by run: stdout, stderr,
//! the exit status, and the bytes of the image (and journal) afterwards.
//!
//! Used by `cargo xtask corpus same --base BIN` (the e2fsprogs test images)
//! and `cargo xtask damage --same-as BIN` (a damage campaign's images).
//! Both sides differ only where one of them is nondeterministic or where
//! the change under test changed behaviour; each difference is reported
//! with where it is (for images: the first differing byte and the number
//! of differing 4 KiB blocks).
//!
//! One difference is expected and not counted: an image whose superblock
//! has no UUID (all zeros) gets a random one from both sides' `-fy`; when
//! the repaired images differ in the 16 bytes of `s_uuid` of the primary
//! superblock and nowhere else, the image is identical but for that, and
//! the outcome says so in a note.

use std::ffi::OsString;
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::measure::{self, RunOpts};

/// One image to run both checkers on.
pub struct Subject<'a> {
    pub image: &'a Path,
    /// An external journal the checker is given with `-j`.
    pub journal: Option<&'a Path>,
    /// `E2FSCK_TIME` for both sides.
    pub time: i64,
}

/// Both sides' runs of one image, and how they differ (nothing: identical).
pub struct Outcome {
    pub differences: Vec<String>,
    /// Expected differences that are not counted (the random UUID).
    pub notes: Vec<String>,
    /// Status words of the new side's runs ("-fn exit 4, -fy exit 1").
    pub summary: String,
}

impl Outcome {
    pub fn identical(&self) -> bool {
        self.differences.is_empty()
    }
}

/// What one side's run left behind.
struct Ran {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    status: String,
}

/// Runs `old` and `new` (command lines to which `-fn`/`-fy IMAGE` are
/// added) on copies of `s.image` made in `work/old` and `work/new`, which
/// are removed afterwards.
pub fn compare(
    old: &[OsString],
    new: &[OsString],
    s: &Subject<'_>,
    work: &Path,
    limit: Duration,
) -> Result<Outcome> {
    let sides = [("old", old), ("new", new)];
    let dirs: Vec<PathBuf> = sides.iter().map(|(n, _)| work.join(n)).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
        copy(s.image, &d.join("image.img"))?;
        if let Some(j) = s.journal {
            copy(j, &d.join("journal.img"))?;
        }
    }
    let null_uuid = read_at(s.image, UUID.0, UUID.1 - UUID.0)?
        .iter()
        .all(|&b| b == 0);
    let mut differences = Vec::new();
    let mut notes = Vec::new();
    let mut summary = Vec::new();
    for mode in ["-fn", "-fy"] {
        let mut runs = Vec::new();
        for ((_, argv), dir) in sides.iter().zip(&dirs) {
            runs.push(run(argv, mode, s, dir, limit)?);
        }
        let (a, b) = (&runs[0], &runs[1]);
        summary.push(format!("{mode} {}", b.status));
        if a.status != b.status {
            differences.push(format!("{mode}: status {} -> {}", a.status, b.status));
        }
        for (what, x, y) in [
            ("stdout", &a.stdout, &b.stdout),
            ("stderr", &a.stderr, &b.stderr),
        ] {
            if let Some(d) = text_difference(x, y) {
                differences.push(format!("{mode}: {what} {d}"));
            }
        }
        let mut files = vec!["image.img"];
        if s.journal.is_some() {
            files.push("journal.img");
        }
        for f in files {
            let mask = if null_uuid && f == "image.img" {
                Some(UUID)
            } else {
                None
            };
            match file_difference(&dirs[0].join(f), &dirs[1].join(f), mask)? {
                Diff::Same => {}
                Diff::Masked => notes.push(format!(
                    "{mode}: {f} differs only in the random s_uuid given to a null UUID"
                )),
                Diff::At(d) => differences.push(format!("{mode}: {f} after the run {d}")),
            }
        }
    }
    for d in &dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok(Outcome {
        differences,
        notes,
        summary: summary.join(", "),
    })
}

fn copy(src: &Path, dst: &Path) -> Result<()> {
    ext4r_txn::testutil::copy_sparse(src, dst)
        .with_context(|| format!("cannot copy {} to {}", src.display(), dst.display()))?;
    Ok(())
}

fn run(argv: &[OsString], mode: &str, s: &Subject<'_>, dir: &Path, limit: Duration) -> Result<Ran> {
    let (prog, pre) = argv.split_first().context("empty command line")?;
    let mut cmd = Command::new(prog);
    cmd.args(pre).arg(mode);
    if s.journal.is_some() {
        cmd.args(["-j", "journal.img"]);
    }
    cmd.arg("image.img")
        .current_dir(dir)
        .env("E2FSCK_TIME", s.time.to_string());
    let out = dir.join(format!("{mode}.out"));
    let err = dir.join(format!("{mode}.err"));
    let opts = RunOpts {
        stderr: Some(&err),
        timeout: Some(limit),
        discard_stdout: false,
    };
    let sample = measure::run_measured_with(&mut cmd, &out, opts)?;
    let status = if sample.timed_out {
        format!("killed after {}s", limit.as_secs())
    } else if let Some(c) = sample.status.code() {
        format!("exit {c}")
    } else {
        format!("signal {}", sample.status.signal().unwrap_or(0))
    };
    Ok(Ran {
        stdout: std::fs::read(&out).unwrap_or_default(),
        stderr: std::fs::read(&err).unwrap_or_default(),
        status,
    })
}

/// `None` when equal; else the first differing line of each.
fn text_difference(a: &[u8], b: &[u8]) -> Option<String> {
    if a == b {
        return None;
    }
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let (mut la, mut lb) = (a.lines(), b.lines());
    let mut n = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            (x, y) => {
                return Some(format!(
                    "differs at line {n}: {:?} -> {:?}",
                    x.unwrap_or("<end>"),
                    y.unwrap_or("<end>")
                ))
            }
        }
    }
}

/// Bytes `[start, end)` of the primary superblock's `s_uuid`.
const UUID: (u64, u64) = (1024 + 0x68, 1024 + 0x78);

fn read_at(path: &Path, off: u64, len: u64) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, off)?;
    Ok(buf)
}

#[derive(Debug, PartialEq)]
enum Diff {
    Same,
    /// Different only inside the mask.
    Masked,
    /// Different there (a description).
    At(String),
}

/// Whether the two files read the same (holes as zeros), else where they
/// differ; differences inside `mask` (a byte range) alone are `Masked`.
fn file_difference(a: &Path, b: &Path, mask: Option<(u64, u64)>) -> Result<Diff> {
    let fa = std::fs::File::open(a).with_context(|| format!("cannot open {}", a.display()))?;
    let fb = std::fs::File::open(b).with_context(|| format!("cannot open {}", b.display()))?;
    let (na, nb) = (fa.metadata()?.len(), fb.metadata()?.len());
    if na != nb {
        return Ok(Diff::At(format!("size {na} -> {nb}")));
    }
    const CHUNK: usize = 1 << 20;
    let (mut ba, mut bb) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let mut first = None;
    let mut blocks = 0u64;
    let mut masked = false;
    let mut off = 0u64;
    while off < na {
        let n = ((na - off) as usize).min(CHUNK);
        fa.read_exact_at(&mut ba[..n], off)?;
        fb.read_exact_at(&mut bb[..n], off)?;
        if let Some((ms, me)) = mask.filter(|&(ms, me)| ms >= off && me <= off + n as u64) {
            let (ms, me) = ((ms - off) as usize, (me - off) as usize);
            if ba[ms..me] != bb[ms..me] {
                masked = true;
                bb[ms..me].copy_from_slice(&ba[ms..me]);
            }
        }
        if ba[..n] != bb[..n] {
            for (i, (x, y)) in ba[..n].chunks(4096).zip(bb[..n].chunks(4096)).enumerate() {
                if x != y {
                    blocks += 1;
                    if first.is_none() {
                        let j = x.iter().zip(y).position(|(p, q)| p != q).unwrap_or(0);
                        first = Some(off + i as u64 * 4096 + j as u64);
                    }
                }
            }
        }
        off += n as u64;
    }
    Ok(match first {
        Some(f) => Diff::At(format!(
            "differs from byte {f} ({blocks} 4 KiB block(s) differ)"
        )),
        None if masked => Diff::Masked,
        None => Diff::Same,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        assert_eq!(text_difference(b"a\nb\n", b"a\nb\n"), None);
        assert_eq!(
            text_difference(b"a\nb\n", b"a\nc\n").as_deref(),
            Some("differs at line 2: \"b\" -> \"c\"")
        );
        assert_eq!(
            text_difference(b"a\n", b"a\nc\n").as_deref(),
            Some("differs at line 2: \"<end>\" -> \"c\"")
        );
    }

    #[test]
    fn files() -> Result<()> {
        let dir = crate::util::TempDir::new_in(&std::env::temp_dir(), "ext4r-same-")?;
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let mut data = vec![7u8; 3 * 4096];
        std::fs::write(&a, &data)?;
        std::fs::write(&b, &data)?;
        assert_eq!(file_difference(&a, &b, None)?, Diff::Same);
        data[1130] = 9;
        std::fs::write(&b, &data)?;
        assert_eq!(file_difference(&a, &b, Some(UUID))?, Diff::Masked);
        assert!(matches!(file_difference(&a, &b, None)?, Diff::At(_)));
        data[5000] = 8;
        data[9000] = 8;
        std::fs::write(&b, &data)?;
        assert_eq!(
            file_difference(&a, &b, Some(UUID))?,
            Diff::At("differs from byte 5000 (2 4 KiB block(s) differ)".into())
        );
        std::fs::write(&b, &data[..10])?;
        assert_eq!(
            file_difference(&a, &b, None)?,
            Diff::At("size 12288 -> 10".into())
        );
        Ok(())
    }
}
