//! `cargo xtask fragment`: fragmented ext4 images, written by the kernel
//! through a loop mount, for the defragmenter's tests and benchmarks. Each
//! case is a recipe plus a seed (file sizes, orders and contents come from
//! a splitmix64 stream); images are cached as `<cache>/<case>-s<seed>.img`
//! with a stamp of the recipe, and rebuilt when it changes.
//!
//! - `interleave` (1 GiB): eight logs grown in turns by appends of 4–256
//!   KiB, each followed by fsync; and first a 160 MiB file written at once,
//!   contiguous but longer than one extent record can be (32768 blocks).
//! - `filldel` (1 GiB): the case — fill with 1 MiB files, delete
//!   every other, write six 48 MiB files into the holes, then delete the
//!   fill files of the upper half so that free space exists to defragment
//!   into.
//! - `small` (2 GiB): 24,000 files of 0.5–128 KiB in 600 directories (a
//!   source tree), created in a random order between scratch files that are
//!   deleted afterwards, one in ten appended to later: the `-r` case.
//! - `big` (4 GiB): a 1 GiB file in 1 MiB pieces — written, 1 MiB at a time
//!   with fsync, into the holes left by deleting every other 1 MiB fill
//!   file; then the fill files of the upper half are deleted.
//! - `tiny` (64 MiB, 1 KiB blocks): a few interleaved and small files, for
//!   the integration tests.
//! - `holes` (1 GiB): filled with files of 16 KiB–4 MiB, a fifth of them
//!   (picked by the seed) deleted: the free space scattered over the disk
//!   in holes of every size, the case of free-space defragmentation (`-f`).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::bench::filled;
use crate::util;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Case {
    /// Eight logs grown by interleaved, fsynced appends (1 GiB).
    Interleave,
    /// Fill, delete every other 1 MiB file, write six 48 MiB files (1 GiB).
    Filldel,
    /// 24,000 small files in 600 directories, aged (2 GiB).
    Small,
    /// A 1 GiB file in 1 MiB pieces, among 1 MiB fill files (4 GiB).
    Big,
    /// A small image for tests (64 MiB, 1 KiB blocks).
    Tiny,
    /// Filled with 16 KiB–4 MiB files, a fifth deleted (1 GiB).
    Holes,
}

impl Case {
    pub fn name(self) -> &'static str {
        match self {
            Case::Interleave => "interleave",
            Case::Filldel => "filldel",
            Case::Small => "small",
            Case::Big => "big",
            Case::Tiny => "tiny",
            Case::Holes => "holes",
        }
    }

    fn size(self) -> u64 {
        match self {
            Case::Interleave => 1 << 30,
            Case::Filldel => 1 << 30,
            Case::Small => 2 << 30,
            Case::Big => 4 << 30,
            Case::Tiny => 64 << 20,
            Case::Holes => 1 << 30,
        }
    }

    fn mke2fs_args(self) -> &'static [&'static str] {
        match self {
            Case::Tiny => &["-b", "1024"],
            _ => &[],
        }
    }

    /// Bump a case's version when what shapes its image changes.
    fn recipe(self) -> String {
        let what = match self {
            Case::Interleave => {
                "interleave v4: 1GiB, 160MiB file fallocated then written, 8 logs, appends 4-256KiB + \
                 fsync until 24MiB each"
            }
            Case::Filldel => {
                "filldel v1: 1MiB files to ENOSPC, rm even, 6x48MiB, rm odd fill above half"
            }
            Case::Small => {
                "small v1: 600 dirs x 40 files 512B-128KiB log-uniform, random order, \
                 scratch file every 10, rm scratch, 10% appended 4-64KiB"
            }
            Case::Big => {
                "big v2: 1MiB files to ENOSPC, rm even, 1GiB file by 1MiB appends + fsync, \
                 rm odd fill above half"
            }
            Case::Tiny => "tiny v1: 1KiB blocks, 4 logs x 40 appends 1-8KiB + fsync, 200 small files",
            Case::Holes => "holes v1: files 16KiB-4MiB log-uniform to ENOSPC, rm a random fifth",
        };
        format!(
            "{what}; {} sparse, mke2fs -F -q -t ext4 {}",
            util::fmt_bytes(self.size()),
            self.mke2fs_args().join(" ")
        )
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Which cases, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "interleave,filldel,small,big"
    )]
    pub cases: Vec<Case>,
    /// Seed of sizes, orders and contents.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where images are kept.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm/ext4r-defrag")]
    pub cache: PathBuf,
    /// Build again even when a cached image matches its recipe.
    #[arg(long)]
    pub rebuild: bool,
}

pub fn run(args: &Args) -> Result<()> {
    util::install_interrupt_handler();
    for &c in &args.cases {
        let img = image(c, args.seed, &args.cache, args.rebuild)?;
        println!("{}: {}", c.name(), img.display());
    }
    Ok(())
}

/// The image of `case` with `seed`, built unless cached.
pub fn image(case: Case, seed: u64, cache: &Path, rebuild: bool) -> Result<PathBuf> {
    let name = format!("{}-s{seed}", case.name());
    let recipe = format!("{} seed {seed}", case.recipe());
    filled::cached(cache, &name, &recipe, rebuild, |img, cache| {
        filled::build(img, cache, case.size(), case.mke2fs_args(), |root| {
            let mut rng = Rng(seed);
            match case {
                Case::Interleave => {
                    long(&root.join("long"), &mut rng, 160 << 20)?;
                    interleave(root, &mut rng, 8, 24 << 20, 4 << 10, 256 << 10)
                }
                Case::Filldel => filldel(root, &mut rng),
                Case::Small => small(root, &mut rng, 600, 40),
                Case::Big => big(root, &mut rng),
                Case::Tiny => tiny(root, &mut rng),
                Case::Holes => holes(root, &mut rng),
            }?;
            // Give freed blocks back to the backing file (it lives in tmpfs).
            rustix::fs::sync();
            let _ = std::process::Command::new("fstrim").arg(root).status();
            Ok(())
        })
    })
}

/// splitmix64.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi]`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// Log-uniform in `[lo, hi]`.
    fn log_range(&mut self, lo: u64, hi: u64) -> u64 {
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((a + (b - a) * u).exp() as u64).clamp(lo, hi)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

fn append(path: &Path, rng: &mut Rng, len: u64, buf: &mut Vec<u8>, fsync: bool) -> Result<()> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    buf.resize(len as usize, 0);
    rng.fill(buf);
    f.write_all(buf)
        .with_context(|| format!("write {}", path.display()))?;
    if fsync {
        f.sync_data()?;
    }
    Ok(())
}

/// A file allocated in one `fallocate` (so contiguous where the free
/// space is) and then written.
fn long(path: &Path, rng: &mut Rng, len: u64) -> Result<()> {
    let f = File::create(path)?;
    rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, len)?;
    drop(f);
    let mut f = OpenOptions::new().write(true).open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..len >> 20 {
        rng.fill(&mut buf);
        f.write_all(&buf)?;
    }
    f.sync_all()?;
    Ok(())
}

fn interleave(root: &Path, rng: &mut Rng, logs: usize, size: u64, lo: u64, hi: u64) -> Result<()> {
    let mut sizes = vec![0u64; logs];
    let mut buf = Vec::new();
    let mut order: Vec<usize> = (0..logs).collect();
    while sizes.iter().any(|&s| s < size) {
        util::check_interrupted()?;
        rng.shuffle(&mut order);
        for &i in &order {
            if sizes[i] >= size {
                continue;
            }
            let n = rng.range(lo, hi).min(size - sizes[i]);
            append(&root.join(format!("log{i}")), rng, n, &mut buf, true)?;
            sizes[i] += n;
        }
    }
    Ok(())
}

fn filldel(root: &Path, rng: &mut Rng) -> Result<()> {
    let n = fill_and_thin(root, rng)?;
    let mut buf = vec![0u8; 1 << 20];
    for k in 0..6 {
        let p = root.join(format!("f{k}"));
        let mut f = File::create(&p)?;
        for _ in 0..48 {
            rng.fill(&mut buf);
            f.write_all(&buf)?;
        }
    }
    run_sync()?;
    unfill_upper_half(root, n)?;
    println!("  filldel: {n} fill files, six 48 MiB files");
    Ok(())
}

/// Fills the filesystem with 1 MiB files under `fill/`, then deletes every
/// other one; returns how many were written.
fn fill_and_thin(root: &Path, rng: &mut Rng) -> Result<usize> {
    let fill = root.join("fill");
    std::fs::create_dir(&fill)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0usize;
    loop {
        if n % 256 == 0 {
            util::check_interrupted()?;
        }
        rng.fill(&mut buf);
        let p = fill.join(format!("{n:05}"));
        let r = File::create(&p).and_then(|mut f| f.write_all(&buf));
        if r.is_err() {
            let _ = std::fs::remove_file(&p);
            break;
        }
        n += 1;
    }
    run_sync()?;
    for i in (0..n).step_by(2) {
        std::fs::remove_file(fill.join(format!("{i:05}")))?;
    }
    run_sync()?;
    Ok(n)
}

/// Deletes the remaining fill files of the upper half, making room to
/// defragment into.
fn unfill_upper_half(root: &Path, n: usize) -> Result<()> {
    let fill = root.join("fill");
    for i in (1..n).step_by(2).filter(|&i| i > n / 2) {
        std::fs::remove_file(fill.join(format!("{i:05}")))?;
    }
    Ok(())
}

fn small(root: &Path, rng: &mut Rng, dirs: usize, per_dir: usize) -> Result<()> {
    let tree = root.join("tree");
    let scratch = root.join("scratch");
    std::fs::create_dir(&tree)?;
    std::fs::create_dir(&scratch)?;
    for d in 0..dirs {
        std::fs::create_dir(tree.join(format!("d{d:03}")))?;
    }
    let mut files: Vec<(usize, usize)> = (0..dirs)
        .flat_map(|d| (0..per_dir).map(move |f| (d, f)))
        .collect();
    rng.shuffle(&mut files);
    let mut buf = Vec::new();
    for (k, &(d, f)) in files.iter().enumerate() {
        if k % 1000 == 0 {
            util::check_interrupted()?;
        }
        let len = rng.log_range(512, 128 << 10);
        let p = tree.join(format!("d{d:03}/f{f:03}.c"));
        append(&p, rng, len, &mut buf, false)?;
        if k % 10 == 0 {
            let len = rng.range(4 << 10, 64 << 10);
            append(&scratch.join(format!("s{k}")), rng, len, &mut buf, false)?;
        }
        if k % 2000 == 1999 {
            // Let writeback allocate, so that the order of creation shows.
            run_sync()?;
        }
    }
    run_sync()?;
    std::fs::remove_dir_all(&scratch)?;
    rng.shuffle(&mut files);
    for &(d, f) in files.iter().take(files.len() / 10) {
        let len = rng.range(4 << 10, 64 << 10);
        append(
            &tree.join(format!("d{d:03}/f{f:03}.c")),
            rng,
            len,
            &mut buf,
            true,
        )?;
    }
    println!("  small: {} files in {dirs} directories", files.len());
    Ok(())
}

fn big(root: &Path, rng: &mut Rng) -> Result<()> {
    let n = fill_and_thin(root, rng)?;
    let mut buf = Vec::new();
    for i in 0..1024 {
        if i % 64 == 0 {
            util::check_interrupted()?;
        }
        append(&root.join("big"), rng, 1 << 20, &mut buf, true)?;
    }
    unfill_upper_half(root, n)?;
    println!("  big: {n} fill files, a 1 GiB file");
    Ok(())
}

fn tiny(root: &Path, rng: &mut Rng) -> Result<()> {
    interleave(root, rng, 4, 160 << 10, 1 << 10, 8 << 10)?;
    let dir = root.join("many");
    std::fs::create_dir(&dir)?;
    let mut buf = Vec::new();
    for i in 0..200 {
        let len = rng.range(1, 12 << 10);
        append(
            &dir.join(format!("n{i:03}")),
            rng,
            len,
            &mut buf,
            i % 7 == 0,
        )?;
    }
    std::fs::create_dir(root.join("empty-dir"))?;
    File::create(root.join("empty"))?;
    std::os::unix::fs::symlink("many/n001", root.join("link"))?;
    Ok(())
}

fn holes(root: &Path, rng: &mut Rng) -> Result<()> {
    let dir = root.join("data");
    std::fs::create_dir(&dir)?;
    let mut buf = Vec::new();
    let mut n = 0usize;
    loop {
        if n % 256 == 0 {
            util::check_interrupted()?;
        }
        let len = rng.log_range(16 << 10, 4 << 20);
        let p = dir.join(format!("{n:05}"));
        if append(&p, rng, len, &mut buf, false).is_err() {
            let _ = std::fs::remove_file(&p);
            break;
        }
        n += 1;
    }
    run_sync()?;
    let mut gone = 0;
    for i in 0..n {
        if rng.next() % 5 == 0 {
            std::fs::remove_file(dir.join(format!("{i:05}")))?;
            gone += 1;
        }
    }
    println!("  holes: {n} files, {gone} deleted");
    Ok(())
}

fn run_sync() -> Result<()> {
    rustix::fs::sync();
    Ok(())
}
