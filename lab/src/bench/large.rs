//! The large-volume images of `bench fsck`, built through a loop mount by the
//! kernel and cached next to the many-files image like it (stamp, `--rebuild`):
//! - `vol16t`: a 16 TiB ext4 (`mke2fs -t ext4`, defaults) holding 400 dirs ×
//!   1,000 files of 10 MiB each, every file one `fallocate` (unwritten extents):
//!   about 4 TB in use, the "16 TB with 4 TB used" case of the seed paper;
//! - `files10m`: a 40 GiB ext4 (`-N 10400000`) holding 10,000 dirs × 1,000
//!   empty files: 10,000,000 inodes in use, but no data blocks, so the image in
//!   tmpfs holds only inode tables, directories and the journal.
//!
//! The images of `bench fsck --cold` (on the machine's disk, see `cold.rs`)
//! are made the same way:
//! - `files300k`: an 8 GiB ext4 holding 1,500 dirs × 200 files of 100 bytes
//!   (issue 33's image: 1.3 GB in use);
//! - `vol64g`: a 64 GiB ext4 with 40% of its space in 2,600 files of 10 MiB,
//!   each one `fallocate` (26 dirs × 100): unwritten extents, so the image
//!   file stays sparse;
//! - `dirs200k`: a 16 GiB ext4 holding 200 dirs × 1,000 empty directories.
//!
//! tmpfs is RAM shared with other jobs, and while the image is loop-mounted its
//! metadata is in RAM twice (the loop device's buffer cache and the tmpfs pages
//! behind it). So each build in tmpfs first reads `MemAvailable` and refuses,
//! saying why, unless it exceeds the image's estimated size plus
//! [`MEM_MARGIN`]; a build on a disk asks the same of the disk's free space
//! (with [`DISK_MARGIN`] left over).
//!
//! Safety (DESIGN.md §6): the images are files we create; the loop device is
//! the one [`filled::build`] attaches and its [`filled::LoopMount`] unmounts
//! and detaches on every exit path, including errors and Ctrl-C.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{ensure, Context, Result};

use super::{cold, filled};
use crate::util::{self, fmt_bytes, fmt_duration};

/// Memory to leave to everything else while an image is built.
const MEM_MARGIN: u64 = 8 << 30;

/// One kernel-built image: geometry, tree shape and what each file gets.
struct Recipe {
    /// Cache file stem.
    name: &'static str,
    /// Stamp text (the directory count is appended); bump the version when
    /// anything that shapes the image changes.
    recipe: &'static str,
    size: u64,
    mke2fs_args: &'static [&'static str],
    dirs: usize,
    files_per_dir: usize,
    /// Bytes `fallocate`d to each file (0: the file stays empty).
    falloc: u64,
    /// Bytes written to each file.
    data: usize,
    /// The entries of each directory are (empty) directories, not files.
    subdirs: bool,
    /// What the finished image occupies, measured (rounded up).
    estimate: u64,
}

const VOL16T: Recipe = Recipe {
    name: "vol16t",
    recipe: "vol16t v1: 16TiB sparse file, mke2fs -F -q -t ext4, mount -o noinit_itable, \
             1000 files per dir, each fallocate 10MiB",
    size: 16 << 40,
    mke2fs_args: &[],
    dirs: 400,
    files_per_dir: 1000,
    falloc: 10 << 20,
    data: 0,
    subdirs: false,
    // 746 MiB measured (built in 8m22s on 2 busy CPUs).
    estimate: 1 << 30,
};

const FILES10M: Recipe = Recipe {
    name: "files10m",
    recipe: "files10m v1: 40GiB sparse file, mke2fs -F -q -t ext4 -N 10400000, \
             mount -o noinit_itable, 1000 empty files per dir",
    size: 40 << 30,
    mke2fs_args: &["-N", "10400000"],
    dirs: 10_000,
    files_per_dir: 1000,
    falloc: 0,
    data: 0,
    subdirs: false,
    // 2.9 GiB measured (built in 15m on 2 busy CPUs; a 200-dir trial: 17 s).
    estimate: 3 << 30,
};

const FILES300K: Recipe = Recipe {
    name: "files300k",
    recipe: "files300k v1: 8GiB sparse file, mke2fs -F -q -t ext4, mount -o noinit_itable, \
             200 files per dir, 100 bytes each",
    size: 8 << 30,
    mke2fs_args: &[],
    dirs: 1500,
    files_per_dir: 200,
    falloc: 0,
    data: 100,
    subdirs: false,
    // A data block per file: 1.3 GiB measured (built in 38 s on the disk).
    estimate: 3 << 29,
};

const VOL64G: Recipe = Recipe {
    name: "vol64g",
    recipe: "vol64g v1: 64GiB sparse file, mke2fs -F -q -t ext4 -E lazy_journal_init=1, \
             mount -o noinit_itable, 100 files per dir, each fallocate 10MiB",
    size: 64 << 30,
    // The 512 MiB journal left unwritten (its superblock is written, which
    // is all a check reads of it): the image stays small on a shared disk.
    mke2fs_args: &["-E", "lazy_journal_init=1"],
    // 2,600 files of 10 MiB: 40% of the 64 GiB.
    dirs: 26,
    files_per_dir: 100,
    falloc: 10 << 20,
    data: 0,
    subdirs: false,
    // Unwritten extents take no space in the image file: the metadata,
    // 8.5 MiB measured (built in 0.8 s).
    estimate: 1 << 28,
};

const DIRS200K: Recipe = Recipe {
    name: "dirs200k",
    recipe: "dirs200k v1: 16GiB sparse file, mke2fs -F -q -t ext4, mount -o noinit_itable, \
             1000 empty subdirectories per dir",
    size: 16 << 30,
    mke2fs_args: &[],
    dirs: 200,
    files_per_dir: 1000,
    falloc: 0,
    data: 0,
    subdirs: true,
    // A block per directory, inode tables and the journal: 969 MiB
    // measured (built in 12 s in tmpfs).
    estimate: 5 << 28,
};

/// The cached 8 GiB image with 300,000 files of 100 bytes.
pub fn files300k(cache: &Path, rebuild: bool) -> Result<PathBuf> {
    image(FILES300K, cache, rebuild)
}

/// The cached 64 GiB image with 40% of its space in fallocated 10 MiB files.
pub fn vol64g(cache: &Path, rebuild: bool) -> Result<PathBuf> {
    image(VOL64G, cache, rebuild)
}

/// The cached 16 GiB image with 200,000 directories.
pub fn dirs200k(cache: &Path, rebuild: bool) -> Result<PathBuf> {
    image(DIRS200K, cache, rebuild)
}

/// The cached 16 TiB image with 400,000 fallocated 10 MiB files.
pub fn vol16t(cache: &Path, rebuild: bool) -> Result<PathBuf> {
    image(VOL16T, cache, rebuild)
}

/// The cached 40 GiB image with 10,000,000 empty files; `dirs` (of 1,000
/// files each) other than 10,000 makes a smaller trial image in its place.
pub fn files10m(cache: &Path, rebuild: bool, dirs: usize) -> Result<PathBuf> {
    ensure!(dirs >= 1, "--files10m-dirs must be at least 1");
    image(Recipe { dirs, ..FILES10M }, cache, rebuild)
}

fn image(r: Recipe, cache: &Path, rebuild: bool) -> Result<PathBuf> {
    let recipe = format!("{}, {} dirs", r.recipe, r.dirs);
    filled::cached(cache, r.name, &recipe, rebuild, |img, cache| {
        check_room(r.name, r.estimate, cache)?;
        filled::build(img, cache, r.size, r.mke2fs_args, |root| populate(&r, root))
    })
}

/// Disk space to leave to everyone else while an image is built on a disk.
const DISK_MARGIN: u64 = 2 << 30;

/// Refuses to start a build that could push the machine out of memory (an
/// image in tmpfs) or fill its disk (anywhere else).
pub(crate) fn check_room(name: &str, estimate: u64, cache: &Path) -> Result<()> {
    std::fs::create_dir_all(cache).with_context(|| format!("cannot create {}", cache.display()))?;
    if cold::is_tmpfs(cache)? {
        return enough_memory(name, estimate, mem_available()?);
    }
    let vfs = rustix::fs::statvfs(cache).with_context(|| format!("statvfs {}", cache.display()))?;
    enough_disk(
        name,
        estimate,
        vfs.f_bavail.saturating_mul(vfs.f_frsize),
        cache,
    )
}

fn enough_disk(name: &str, estimate: u64, free: u64, cache: &Path) -> Result<()> {
    let need = estimate + DISK_MARGIN;
    ensure!(
        free >= need,
        "not building {name}: {} has {} free, it needs about {} (the image takes ~{}, \
         plus {} left for everyone else)",
        cache.display(),
        fmt_bytes(free),
        fmt_bytes(need),
        fmt_bytes(estimate),
        fmt_bytes(DISK_MARGIN)
    );
    println!(
        "{} free on the disk of {} ≥ {} needed for {name}",
        fmt_bytes(free),
        cache.display(),
        fmt_bytes(need)
    );
    Ok(())
}

fn enough_memory(name: &str, estimate: u64, avail: u64) -> Result<()> {
    let need = estimate + MEM_MARGIN;
    ensure!(
        avail >= need,
        "not building {}: MemAvailable is {}, it needs about {} (the image takes ~{} of \
         tmpfs, i.e. RAM, plus {} left for the loop device's cache and other jobs); \
         free some memory (other images in /dev/shm?) and try again",
        name,
        fmt_bytes(avail),
        fmt_bytes(need),
        fmt_bytes(estimate),
        fmt_bytes(MEM_MARGIN)
    );
    println!(
        "MemAvailable {} ≥ {} needed for {}",
        fmt_bytes(avail),
        fmt_bytes(need),
        name
    );
    Ok(())
}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn mem_available() -> Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").context("cannot read /proc/meminfo")?;
    let kib = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .context("no MemAvailable line in /proc/meminfo")?;
    Ok(kib * 1024)
}

/// Makes the directories and files on as many threads as there are CPUs (at
/// most 4): the kernel does the work, we only issue the calls.
fn populate(r: &Recipe, root: &Path) -> Result<()> {
    let done = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    let report = (r.dirs / 20).max(1);
    let data = vec![0x5a_u8; r.data];
    let start = Instant::now();
    util::par_for(threads, r.dirs, |d| {
        let dir = root.join(format!("d{d:05}"));
        std::fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        for i in 0..r.files_per_dir {
            let path = dir.join(format!("f{i:04}"));
            if r.subdirs {
                std::fs::create_dir(&path).with_context(|| format!("mkdir {}", path.display()))?;
                continue;
            }
            let mut f = std::fs::File::create(&path)
                .with_context(|| format!("create {}", path.display()))?;
            if !data.is_empty() {
                f.write_all(&data)
                    .with_context(|| format!("write {}", path.display()))?;
            }
            if r.falloc > 0 {
                rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, r.falloc)
                    .with_context(|| format!("fallocate {}", path.display()))?;
            }
        }
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        if n % report == 0 {
            println!(
                "  {n}/{} directories ({} entries) after {}",
                r.dirs,
                n * r.files_per_dir,
                fmt_duration(start.elapsed())
            );
        }
        Ok(())
    })?;
    println!(
        "  {} entries in {} ({} of the filesystem in use)",
        r.dirs * r.files_per_dir,
        fmt_duration(start.elapsed()),
        fmt_bytes(fs_used(root))
    );
    Ok(())
}

/// Blocks in use on the mounted filesystem, as the kernel counts them.
fn fs_used(root: &Path) -> u64 {
    rustix::fs::statvfs(root)
        .map(|s| (s.f_blocks - s.f_bfree) * s.f_frsize)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_build_when_memory_is_short() {
        let big = |avail| enough_memory(FILES10M.name, FILES10M.estimate, avail);
        let err = big(10 << 30).unwrap_err().to_string();
        assert!(err.contains("not building files10m"), "{err}");
        assert!(err.contains("MemAvailable is 10.0GiB"), "{err}");
        big(12 << 30).unwrap();
        enough_memory(VOL16T.name, VOL16T.estimate, 9 << 30).unwrap();
    }

    #[test]
    fn refuses_a_build_when_the_disk_is_short() {
        let dir = Path::new("/somewhere");
        let err = enough_disk("vol64g", VOL64G.estimate, 2 << 30, dir)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not building vol64g"), "{err}");
        assert!(err.contains("has 2.0GiB free"), "{err}");
        enough_disk("vol64g", VOL64G.estimate, 3 << 30, dir).unwrap();
    }

    #[test]
    fn cold_images_are_what_issue_33_asks_for() {
        assert_eq!(FILES300K.dirs * FILES300K.files_per_dir, 300_000);
        assert_eq!(DIRS200K.dirs * DIRS200K.files_per_dir, 200_000);
        // 40% of 64 GiB in 10 MiB files, to within one directory of them.
        let falloc = (VOL64G.dirs * VOL64G.files_per_dir) as u64 * VOL64G.falloc;
        let want = VOL64G.size * 4 / 10;
        assert!(falloc.abs_diff(want) < VOL64G.files_per_dir as u64 * VOL64G.falloc);
    }

    #[test]
    fn reads_mem_available() {
        assert!(mem_available().unwrap() > 0);
    }
}
