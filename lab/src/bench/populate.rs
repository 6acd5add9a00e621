//! `cargo xtask bench populate`: writing trees and big files into images,
//! ours against e2fsprogs and the kernel, alternating runs (no warm-up
//! beyond the first pair; every run starts from a fresh image):
//! - `mkfs`: `ext4r mkfs -d SRC` vs `mke2fs -d SRC` with the same options,
//!   UUID, hash seed and fake time, on a fresh sparse image;
//! - `cp`: `ext4r cp -r SRC IMG:/tree` vs `mount -o loop` + `cp -r SRC
//!   MNT/tree` + `umount`, into an empty ext4 made by mke2fs before each run;
//! - `big`: `ext4r cp FILE IMG:/big` vs the same through the kernel, for
//!   one file of pseudo-random data (4 GiB by default).
//!
//! SRC is a tree of `--files` small files (100 directories; 100..611 bytes
//! each) made in the temporary directory under `--dir` (tmpfs). After each
//! run `e2fsck -fn` must pass and the image must hold as many inodes as the
//! reference's first run left (the whole tree arrived). The kernel's peak
//! RSS is that of `sh`, `mount`, `cp` and `umount`: the kernel's own memory
//! (page cache, the loop device) is not counted.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

use super::{Common, FAKE_TIME, HASH_SEED, UUID};
use crate::measure::{self, Check, Hooks, Row, Sample, Tool};
use crate::util::{self, fmt_bytes, Size, TempDir};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Case {
    /// `ext4r mkfs -d` vs `mke2fs -d` on the tree.
    Mkfs,
    /// `ext4r cp -r` vs loop mount + `cp -r` + `umount` of the tree.
    Cp,
    /// `ext4r cp` vs loop mount + `cp` + `umount` of one big file.
    Big,
}

#[derive(clap::Args)]
pub struct PopulateArgs {
    /// Which cases, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "mkfs,cp,big")]
    cases: Vec<Case>,
    /// Files in the source tree (spread over 100 directories).
    #[arg(long, default_value_t = 100_000)]
    files: usize,
    /// Size of the big file (binary suffixes K M G T).
    #[arg(long, default_value = "4G")]
    big: Size,
    #[command(flatten)]
    common: Common,
}

const DIRS: usize = 100;
/// Images for the tree: room for the inodes of 100,000 files and more.
const TREE_IMAGE: u64 = 4 << 30;

pub fn run(args: &PopulateArgs) -> Result<()> {
    let c = &args.common;
    ensure!(c.runs >= 1, "--runs must be at least 1");
    ensure!(!args.cases.is_empty(), "--cases is empty");
    ensure!(
        c.dir.is_dir(),
        "--dir {} is not a directory",
        c.dir.display()
    );
    let needs_root = args.cases.iter().any(|c| *c != Case::Mkfs);
    if needs_root && !rustix::process::geteuid().is_root() {
        bail!("the cp and big cases mount images: run as root or use --cases mkfs");
    }
    let e2fsck = util::find_program("e2fsck".as_ref()).context("e2fsck not found on $PATH")?;
    let mke2fs = util::find_program("mke2fs".as_ref()).context("mke2fs not found on $PATH")?;
    let ours = match &c.ours_cmd {
        Some(cmd) => util::resolve_cmd(cmd)?,
        // Only the binary: each case adds its own subcommand.
        None => vec![util::shipped_ext4r()?.into()],
    };
    let tmp = TempDir::new_in(&c.dir, "ext4r-bench-")?;
    let floor = measure::spawn_floor(tmp.path())?;
    let src = tmp.path().join("src");
    let img = tmp.path().join("bench.img");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt)?;
    let os = |s: &str| OsString::from(s);
    let sh = |script: String| Tool {
        name: "kernel".into(),
        argv: vec![os("sh"), os("-c"), os(&script)],
        env: Vec::new(),
        discard_stdout: false,
    };
    // Mount, copy, unmount; unmount also when cp failed (the loop device is
    // set up by mount -o loop and freed by umount: autoclear).
    let kernel = |cp: &str| {
        format!(
            "mount -t ext4 -o loop,noinit_itable {img} {mnt} || exit 1; {cp}; rc=$?; \
             umount {mnt} || exit 1; exit $rc",
            img = img.display(),
            mnt = mnt.display()
        )
    };

    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for &case in &args.cases {
        util::check_interrupted()?;
        let started = std::time::Instant::now();
        let (label, tools, image_size) = match case {
            Case::Mkfs | Case::Cp => {
                if !src.exists() {
                    make_tree(&src, args.files)?;
                    println!(
                        "source tree: {} files in {} directories at {} (made in {})",
                        args.files,
                        DIRS,
                        src.display(),
                        util::fmt_duration(started.elapsed())
                    );
                }
                if case == Case::Mkfs {
                    let mut common: Vec<OsString> = ["-F", "-q", "-t", "ext4", "-U", UUID, "-E"]
                        .iter()
                        .map(|s| os(s))
                        .collect();
                    common.push(format!("hash_seed={HASH_SEED}").into());
                    common.push(os("-d"));
                    common.push(src.clone().into());
                    common.push(img.clone().into());
                    let env = vec![(os("E2FSPROGS_FAKE_TIME"), os(FAKE_TIME))];
                    let ours_tool = Tool {
                        name: "ours".into(),
                        argv: ours
                            .iter()
                            .cloned()
                            .chain([os("mkfs")])
                            .chain(common.iter().cloned())
                            .collect(),
                        env: env.clone(),
                        discard_stdout: false,
                    };
                    let theirs = Tool {
                        name: "mke2fs".into(),
                        argv: std::iter::once(mke2fs.clone().into())
                            .chain(common.iter().cloned())
                            .collect(),
                        env,
                        discard_stdout: false,
                    };
                    (
                        format!("mkfs -d {}k files", args.files / 1000),
                        [ours_tool, theirs],
                        TREE_IMAGE,
                    )
                } else {
                    let dest = format!("{}:/tree", img.display());
                    let ours_tool = Tool {
                        name: "ours".into(),
                        argv: ours
                            .iter()
                            .cloned()
                            .chain([os("cp"), os("-r"), src.clone().into(), os(&dest)])
                            .collect(),
                        env: Vec::new(),
                        discard_stdout: false,
                    };
                    let cp = format!("cp -r {} {}/tree", src.display(), mnt.display());
                    (
                        format!("cp -r {}k files", args.files / 1000),
                        [ours_tool, sh(kernel(&cp))],
                        TREE_IMAGE,
                    )
                }
            }
            Case::Big => {
                let file = tmp.path().join("big.src");
                if !file.exists() {
                    write_big(&file, args.big.bytes)?;
                    println!(
                        "source file: {} of pseudo-random data at {} (made in {})",
                        fmt_bytes(args.big.bytes),
                        file.display(),
                        util::fmt_duration(started.elapsed())
                    );
                }
                let dest = format!("{}:/big", img.display());
                let ours_tool = Tool {
                    name: "ours".into(),
                    argv: ours
                        .iter()
                        .cloned()
                        .chain([os("cp"), file.clone().into(), os(&dest)])
                        .collect(),
                    env: Vec::new(),
                    discard_stdout: false,
                };
                let cp = format!("cp {} {}/big", file.display(), mnt.display());
                // Room for the file, the journal and the metadata.
                let size = args.big.bytes + args.big.bytes / 8 + (256 << 20);
                (
                    format!("cp {}", args.big.label),
                    [ours_tool, sh(kernel(&cp))],
                    size,
                )
            }
        };
        println!("== {label}, {} runs each", c.runs);
        for t in &tools {
            println!("  {:<7} {}", t.name, util::display_cmd(&t.command()?));
        }
        let mut hooks = PopulateHooks {
            img: &img,
            mnt: &mnt,
            size: image_size,
            fresh_fs: case != Case::Mkfs,
            mke2fs: &mke2fs,
            e2fsck: &e2fsck,
            logdir: tmp.path(),
            want_inodes: None,
        };
        let samples = measure::alternate([&tools[0], &tools[1]], c.runs, tmp.path(), &mut hooks);
        let _ = std::fs::remove_file(&img);
        let samples = samples?;
        for (t, ss) in tools.iter().zip(&samples) {
            let bad = ss.iter().filter(|s| !s.ok()).count();
            if bad > 0 {
                failures.push(format!(
                    "{label}: {} failed {bad} of {} runs",
                    t.name,
                    ss.len()
                ));
            }
        }
        rows.extend(measure::rows_for(&label, [&tools[0], &tools[1]], &samples));
        if case == Case::Big {
            let _ = std::fs::remove_file(tmp.path().join("big.src"));
        }
    }
    println!();
    measure::print_table("case", &rows);
    println!(
        "ours/theirs = median wall time ratio (<1: ours faster; only over runs that exited 0); \
         peak RSS includes the {} floor; the kernel's peak RSS is that of sh, mount, cp and \
         umount only (not the kernel's page cache or loop device)",
        fmt_bytes(floor)
    );
    if !failures.is_empty() {
        for f in &failures {
            println!("FAILED: {f}");
        }
        bail!("{} tool(s) failed or left a wrong image", failures.len());
    }
    Ok(())
}

/// Makes a fresh image before each run (sparse for mkfs, an empty ext4 for
/// the copies); after it, `e2fsck -fn` and the inode count.
struct PopulateHooks<'a> {
    img: &'a Path,
    mnt: &'a Path,
    size: u64,
    fresh_fs: bool,
    mke2fs: &'a Path,
    e2fsck: &'a Path,
    logdir: &'a Path,
    /// Inodes in use after the first run of the reference.
    want_inodes: Option<u64>,
}

impl Hooks for PopulateHooks<'_> {
    fn before(&mut self, _tool: usize, _run: usize) -> Result<()> {
        super::fresh_sparse(self.img, self.size)?;
        if self.fresh_fs {
            let out = Command::new(self.mke2fs)
                .args(["-F", "-q", "-t", "ext4"])
                .arg(self.img)
                .output()
                .context("cannot run mke2fs")?;
            ensure!(
                out.status.success(),
                "mke2fs failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    fn after(&mut self, tool: usize, run: usize, sample: &mut Sample) -> Result<()> {
        // A kernel run that failed between mount and umount: unmount here.
        if tool == 1 && !sample.status.success() {
            let _ = Command::new("umount").arg(self.mnt).status();
        }
        if !sample.status.success() {
            return Ok(());
        }
        let log = self.logdir.join(format!("e2fsck-{tool}-{run}.log"));
        sample.check = measure::e2fsck_check(self.e2fsck, self.img, &log)?;
        if sample.check != Check::Passed {
            return Ok(());
        }
        let text = std::fs::read_to_string(&log)?;
        let Some(used) = inodes_used(&text) else {
            sample.check = Check::Failed("no inode count in e2fsck's output".into());
            return Ok(());
        };
        match self.want_inodes {
            None if tool == 1 => self.want_inodes = Some(used),
            Some(want) if want != used => {
                sample.check = Check::Failed(format!("{used} inodes in use, the reference {want}"))
            }
            _ => {}
        }
        Ok(())
    }
}

/// `N` of e2fsck's summary line `IMG: N/M files (...)`.
fn inodes_used(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (_, rest) = l.rsplit_once(": ")?;
        let (used, rest) = rest.split_once('/')?;
        rest.split_once(" files")?;
        used.trim().parse().ok()
    })
}

/// The source tree: `files` regular files of 100..611 bytes in 100
/// directories (as `bench read`'s tree).
fn make_tree(root: &Path, files: usize) -> Result<()> {
    std::fs::create_dir(root).with_context(|| format!("mkdir {}", root.display()))?;
    let data: Vec<u8> = (0..612u32).map(|i| b'a' + (i % 26) as u8).collect();
    for d in 0..DIRS {
        std::fs::create_dir(root.join(format!("d{d:02}")))?;
    }
    for i in 0..files {
        if i % 10_000 == 0 {
            util::check_interrupted()?;
        }
        let path = root.join(format!("d{:02}/f{i:06}", i % DIRS));
        let len = 100 + i * 37 % 512;
        std::fs::write(&path, &data[..len]).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

/// `bytes` of xorshift64 output: neither compressible nor holes.
fn write_big(path: &PathBuf, bytes: u64) -> Result<()> {
    let mut f =
        std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        util::check_interrupted()?;
        for chunk in buf.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes());
        }
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])
            .with_context(|| format!("write {}", path.display()))?;
        left -= n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::inodes_used;

    #[test]
    fn e2fsck_summary() {
        let out = "Pass 5: Checking group summary information\n\
                   /dev/shm/x/bench.img: 100112/262144 files (0.0% non-contiguous), 1/2 blocks\n";
        assert_eq!(inodes_used(out), Some(100_112));
    }
}
