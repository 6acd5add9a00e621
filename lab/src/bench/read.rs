//! `cargo xtask bench read`: reading files out of an image, ours vs debugfs,
//! alternating, hot cache (one untimed warm-up run of each first), on one
//! cached 4 GiB ext4 image (see `image`):
//! - `big`: `ext4r cat IMG /big > /dev/null` vs `debugfs -R 'dump /big OUT' IMG`
//!   for a 1 GiB file of pseudo-random data;
//! - `tree`: `ext4r extract IMG OUTDIR /tree` vs `debugfs -R 'rdump /tree OUTDIR'
//!   IMG` for 100 directories × 1,000 files of 100–611 bytes.
//!
//! The outputs live in the temporary directory under `--dir` (tmpfs), are
//! checked after each run and removed before the next (untimed).

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};

use super::{filled, Common};
use crate::measure::{self, Check, Hooks, Row, Sample, Tool};
use crate::util::{self, fmt_bytes, TempDir};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Case {
    /// One 1 GiB file: `ext4r cat` vs `debugfs dump`.
    Big,
    /// 100,000 small files: `ext4r extract` vs `debugfs rdump`.
    Tree,
}

#[derive(clap::Args)]
pub struct ReadArgs {
    /// Which cases, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "big,tree")]
    cases: Vec<Case>,
    /// Where the image is cached between runs.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm/ext4r-bench")]
    cache: PathBuf,
    /// Build the cached image again even if its stamp matches.
    #[arg(long)]
    rebuild: bool,
    #[command(flatten)]
    common: Common,
}

const IMAGE_SIZE: u64 = 4 << 30;
const BIG: u64 = 1 << 30;
const DIRS: usize = 100;
const FILES_PER_DIR: usize = 1000;

/// Bump when anything that shapes the image changes.
const RECIPE: &str = "read v1: 4GiB sparse file, mke2fs -F -q -t ext4, mount -o noinit_itable, \
     /big 1GiB xorshift64 data, /tree/dNN/fNNNN 100x1000 files of 100+(i*37)%512 bytes";

pub fn run(args: &ReadArgs) -> Result<()> {
    let c = &args.common;
    ensure!(c.runs >= 1, "--runs must be at least 1");
    ensure!(!args.cases.is_empty(), "--cases is empty");
    ensure!(
        c.dir.is_dir(),
        "--dir {} is not a directory",
        c.dir.display()
    );
    let ours = match &c.ours_cmd {
        Some(cmd) => util::resolve_cmd(cmd)?,
        // Only the binary: each case adds its own subcommand.
        None => vec![util::shipped_ext4r()?.into()],
    };
    let theirs = util::resolve_cmd(c.theirs_cmd.as_deref().unwrap_or("debugfs"))?;
    let img = filled::cached(
        &args.cache,
        "read-4g",
        RECIPE,
        args.rebuild,
        |img, cache| filled::build(img, cache, IMAGE_SIZE, &[], populate),
    )?;
    let tmp = TempDir::new_in(&c.dir, "ext4r-bench-")?;
    let floor = measure::spawn_floor(tmp.path())?;

    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for &case in &args.cases {
        util::check_interrupted()?;
        let tool = |name: &str, base: &[OsString], args: &[OsString], discard_stdout| Tool {
            name: name.to_string(),
            argv: base.iter().chain(args).cloned().collect(),
            env: Vec::new(),
            discard_stdout,
        };
        let os = |s: &str| OsString::from(s);
        let out = tmp.path().join(match case {
            Case::Big => "big.out",
            Case::Tree => "tree.out",
        });
        let (label, tools) = match case {
            Case::Big => {
                let ours_args = [os("cat"), img.clone().into(), os("/big")];
                let dump = format!("dump /big {}", out.display());
                let theirs_args = [os("-R"), dump.into(), img.clone().into()];
                (
                    "cat 1GiB",
                    [
                        tool("ours", &ours, &ours_args, true),
                        tool("debugfs", &theirs, &theirs_args, false),
                    ],
                )
            }
            Case::Tree => {
                let ours_args = [
                    os("extract"),
                    img.clone().into(),
                    out.clone().into(),
                    os("/tree"),
                ];
                let rdump = format!("rdump /tree {}", out.display());
                let theirs_args = [os("-R"), rdump.into(), img.clone().into()];
                (
                    "extract 100k files",
                    [
                        tool("ours", &ours, &ours_args, false),
                        tool("debugfs", &theirs, &theirs_args, false),
                    ],
                )
            }
        };
        println!("== {label}: {}, {} runs each", img.display(), c.runs);
        for t in &tools {
            let mut shown = util::display_cmd(&t.command()?);
            if t.discard_stdout {
                shown += " > /dev/null";
            }
            println!("  {:<7} {shown}", t.name);
        }
        let mut hooks = ReadHooks { case, out };
        rows.extend(super::compare(
            label,
            &tools,
            c.runs,
            tmp.path(),
            &mut hooks,
            &mut failures,
        )?);
    }
    println!();
    measure::print_table("case", &rows);
    println!(
        "ours/theirs = median wall time ratio (<1: ours faster; only over runs that exited 0); \
         peak RSS includes the {} floor; image cached in {} (--rebuild to remake it)",
        fmt_bytes(floor),
        args.cache.display()
    );
    if !failures.is_empty() {
        for f in &failures {
            println!("FAILED: {f}");
        }
        bail!("{} tool(s) failed or wrote wrong output", failures.len());
    }
    Ok(())
}

/// Clears the output before each run; after it, checks the output's size or
/// file count and removes it.
struct ReadHooks {
    case: Case,
    /// `big`: debugfs's dump file; `tree`: the extraction directory.
    out: PathBuf,
}

impl ReadHooks {
    fn clear(&self) -> Result<()> {
        let r = match self.case {
            Case::Big => std::fs::remove_file(&self.out),
            Case::Tree => std::fs::remove_dir_all(&self.out),
        };
        match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", self.out.display()))
            }
            _ => Ok(()),
        }
    }

    fn verdict(&self, tool: usize, sample: &Sample) -> Result<Check> {
        Ok(match self.case {
            // Ours writes to /dev/null: count what it wrote (plus the one
            // byte measure's pre-exec writes to /proc/self/clear_refs).
            Case::Big if tool == 0 => match sample.wchar {
                Some(w) if (BIG..=BIG + 1).contains(&w) => Check::Passed,
                w => Check::Failed(format!("wrote {w:?} bytes, want {BIG}")),
            },
            Case::Big => match std::fs::metadata(&self.out) {
                Ok(m) if m.len() == BIG => Check::Passed,
                Ok(m) => Check::Failed(format!("dump has {} bytes, want {BIG}", m.len())),
                Err(e) => Check::Failed(format!("no dump: {e}")),
            },
            Case::Tree => {
                let (dirs, files) = count(&self.out.join("tree"))?;
                if dirs == DIRS && files == DIRS * FILES_PER_DIR {
                    Check::Passed
                } else {
                    Check::Failed(format!("extracted {dirs} dirs, {files} files"))
                }
            }
        })
    }
}

impl Hooks for ReadHooks {
    fn before(&mut self, _tool: usize, _run: usize) -> Result<()> {
        self.clear()?;
        if self.case == Case::Tree {
            // rdump wants an existing directory; ours would create it.
            std::fs::create_dir(&self.out)
                .with_context(|| format!("cannot create {}", self.out.display()))?;
        }
        Ok(())
    }

    fn after(&mut self, tool: usize, _run: usize, sample: &mut Sample) -> Result<()> {
        if sample.status.success() {
            sample.check = self.verdict(tool, sample)?;
        }
        self.clear()
    }
}

/// Directories and regular files below `dir` (0, 0 if it is missing).
fn count(dir: &Path) -> Result<(usize, usize)> {
    let (mut dirs, mut files) = (0, 0);
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", d.display())),
        };
        for e in entries {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                dirs += 1;
                todo.push(e.path());
            } else if t.is_file() {
                files += 1;
            }
        }
    }
    Ok((dirs, files))
}

/// Writes /big and /tree into the mounted image: the big file from one thread
/// while a second writes the tree (the kernel does the work).
fn populate(root: &Path) -> Result<()> {
    std::thread::scope(|s| {
        let big = s.spawn(|| write_big(&root.join("big")));
        let tree = write_tree(&root.join("tree"));
        let big = big
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("writer panicked")));
        tree.and(big)
    })
}

fn write_big(path: &Path) -> Result<()> {
    let mut f =
        std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..BIG / buf.len() as u64 {
        util::check_interrupted()?;
        for chunk in buf.chunks_exact_mut(8) {
            // xorshift64: cheap, and not compressible or all-equal blocks.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes());
        }
        f.write_all(&buf)
            .with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

fn write_tree(root: &Path) -> Result<()> {
    std::fs::create_dir(root).with_context(|| format!("mkdir {}", root.display()))?;
    let data: Vec<u8> = (0..612u32).map(|i| b'a' + (i % 26) as u8).collect();
    for d in 0..DIRS {
        util::check_interrupted()?;
        let dir = root.join(format!("d{d:02}"));
        std::fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        for i in 0..FILES_PER_DIR {
            let path = dir.join(format!("f{i:04}"));
            let len = 100 + (d * FILES_PER_DIR + i) * 37 % 512;
            std::fs::write(&path, &data[..len])
                .with_context(|| format!("write {}", path.display()))?;
        }
    }
    Ok(())
}
