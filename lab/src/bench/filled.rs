//! The "many files" image of `bench fsck`: 16 GiB ext4 (`mke2fs -t ext4 -N
//! 2500000`) holding 2,000 directories × 1,000 files written by the kernel, one
//! file in ten with 4 KiB of data. Building it takes minutes, so the finished
//! image is cached with a stamp file recording the recipe; a changed recipe (or
//! `--rebuild`) builds it again. [`cached`] and [`build`] also make the image
//! of `bench read`.
//!
//! Safety (DESIGN.md §6): the only loop device touched is the one `losetup -f
//! --show` attached to our own image in this run; [`LoopMount`] unmounts and
//! detaches it on every exit path, including errors and Ctrl-C.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

use crate::util::{self, fmt_bytes, fmt_duration};

const SIZE: u64 = 16 << 30;
const INODES: &str = "2500000";
const DIRS: usize = 2000;
const FILES_PER_DIR: usize = 1000;
const DATA_EVERY: usize = 10;
const DATA_BYTES: usize = 4096;
/// What the image takes: 200,000 data blocks, 2,000,000 inodes' tables,
/// the directories and the journal.
const ESTIMATE: u64 = 2 << 30;

/// Bump when anything that shapes the image changes.
const RECIPE: &str =
    "files v2 (checked after the mount): 16GiB sparse file, mke2fs -F -q -t ext4 -N 2500000, \
     mount -o noinit_itable, 2000 dirs x 1000 files, every 10th file 4096 bytes";

/// Returns the cached image, building it first if it is missing, stale or
/// `rebuild` is set.
pub fn image(cache: &Path, rebuild: bool) -> Result<PathBuf> {
    cached(cache, "files-16g", RECIPE, rebuild, |img, cache| {
        super::large::check_room("files", ESTIMATE, cache)?;
        build(img, cache, SIZE, &["-N", INODES], populate)
    })
}

/// `<cache>/<name>.img`, reused when `<name>.stamp` holds `recipe` and the
/// mke2fs version; otherwise made by `make(partial image, cache)` and stamped.
pub(crate) fn cached(
    cache: &Path,
    name: &str,
    recipe: &str,
    rebuild: bool,
    make: impl FnOnce(&Path, &Path) -> Result<()>,
) -> Result<PathBuf> {
    let img = cache.join(format!("{name}.img"));
    let stamp = cache.join(format!("{name}.stamp"));
    let mke2fs_version = version("mke2fs")?;
    let want = format!("{recipe}\n{mke2fs_version}\n");
    let have = std::fs::read_to_string(&stamp).unwrap_or_default();
    if !rebuild && have == want && img.is_file() {
        println!(
            "reusing cached image {} ({})",
            img.display(),
            stamp.display()
        );
        return Ok(img);
    }
    if !have.is_empty() && have != want {
        println!("cached image is from another recipe; rebuilding");
    }
    std::fs::create_dir_all(cache).with_context(|| format!("cannot create {}", cache.display()))?;
    let _ = std::fs::remove_file(&stamp);
    let _ = std::fs::remove_file(&img);
    let tmp = cache.join(format!("{name}.img.partial"));
    println!("building {name} ({recipe})");
    let result = make(&tmp, cache);
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &img)?;
    std::fs::write(&stamp, want)?;
    Ok(img)
}

fn version(prog: &str) -> Result<String> {
    let out = Command::new(prog)
        .arg("-V")
        .output()
        .with_context(|| format!("cannot run {prog} -V"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    Ok(text.lines().next().unwrap_or("unknown").trim().to_string())
}

/// Makes `img` a sparse file of `size` bytes, runs `mke2fs -F -q -t ext4
/// <mke2fs_args>` on it, loop-mounts it in a temporary directory under `cache`,
/// runs `populate` on the mount point and unmounts (also when `populate` fails).
pub(crate) fn build(
    img: &Path,
    cache: &Path,
    size: u64,
    mke2fs_args: &[&str],
    populate: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    ensure!(
        rustix::process::geteuid().is_root(),
        "building a benchmark image needs root (loop device and mount)"
    );
    // A loop device left attached by an earlier, killed run: say so rather than
    // touch a device this run did not attach.
    if img.exists() {
        let out = Command::new("losetup").arg("-j").arg(img).output()?;
        let attached = String::from_utf8_lossy(&out.stdout);
        if !attached.trim().is_empty() {
            bail!(
                "{} is still attached from an earlier run:\n{attached}detach it (losetup -d) first",
                img.display()
            );
        }
    }
    println!("building {}", img.display());
    let start = Instant::now();
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(img)
        .with_context(|| format!("cannot create {}", img.display()))?;
    f.set_len(size)?;
    drop(f);
    util::run_step(
        "mke2fs",
        Command::new("mke2fs")
            .args(["-F", "-q", "-t", "ext4"])
            .args(mke2fs_args)
            .arg(img),
    )?;
    let mnt = util::TempDir::new_in(cache, "mnt-")?;
    let mount = LoopMount::attach(img, mnt.path())?;
    let filled = populate(mnt.path());
    let unmounted = mount.release();
    filled?;
    unmounted?;
    // Checked after its mount, as an administrator leaves a volume before
    // tune2fs: tune2fs refuses feature changes ("requires a freshly checked
    // filesystem") when the last check is older than the last mount, which
    // it is unless mke2fs and the mount fell in the same second.
    util::run_step(
        "e2fsck -fp",
        Command::new("e2fsck").args(["-f", "-p"]).arg(img),
    )?;
    let used = std::fs::metadata(img).map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512)?;
    println!(
        "built in {}, {} allocated",
        fmt_duration(start.elapsed()),
        fmt_bytes(used)
    );
    Ok(())
}

/// Writes the directories and files, on as many threads as there are CPUs
/// (at most 4): the kernel does the work, we only issue the calls.
fn populate(root: &Path) -> Result<()> {
    let done = AtomicUsize::new(0);
    let data = vec![0x5a_u8; DATA_BYTES];
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    let start = Instant::now();
    util::par_for(threads, DIRS, |d| {
        let dir = root.join(format!("d{d:04}"));
        std::fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        for i in 0..FILES_PER_DIR {
            let path = dir.join(format!("f{i:04}"));
            let mut f = std::fs::File::create(&path)
                .with_context(|| format!("create {}", path.display()))?;
            if i % DATA_EVERY == 0 {
                f.write_all(&data)
                    .with_context(|| format!("write {}", path.display()))?;
            }
        }
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        if n % 200 == 0 {
            println!(
                "  {n}/{DIRS} directories ({} files) after {}",
                n * FILES_PER_DIR,
                fmt_duration(start.elapsed())
            );
        }
        Ok(())
    })?;
    Ok(())
}

/// Our image attached to a loop device and mounted; unmounted and detached when
/// released or dropped.
pub(crate) struct LoopMount {
    dev: String,
    mnt: PathBuf,
    mounted: bool,
    attached: bool,
}

impl LoopMount {
    pub(crate) fn attach(img: &Path, mnt: &Path) -> Result<LoopMount> {
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(img)
            .stderr(Stdio::inherit())
            .output()
            .context("cannot run losetup")?;
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        ensure!(
            out.status.success(),
            "losetup -f --show {} failed",
            img.display()
        );
        ensure!(
            dev.starts_with("/dev/loop"),
            "losetup printed {dev:?}, not a loop device"
        );
        println!("attached {} to {dev}", img.display());
        let mut lm = LoopMount {
            dev,
            mnt: mnt.to_path_buf(),
            mounted: false,
            attached: true,
        };
        util::run_step(
            "mount",
            Command::new("mount")
                .args(["-t", "ext4", "-o", "noinit_itable"])
                .arg(&lm.dev)
                .arg(&lm.mnt),
        )?;
        lm.mounted = true;
        Ok(lm)
    }

    /// Unmounts and detaches, reporting failures (drop only warns).
    pub(crate) fn release(mut self) -> Result<()> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> Result<()> {
        if self.mounted {
            // Busy for a moment when something walks the tree (a `du`, an
            // indexer): a few more tries before giving up.
            let mut tries = 0;
            while let Err(e) = util::run_step("umount", Command::new("umount").arg(&self.mnt)) {
                tries += 1;
                if tries == 5 {
                    return Err(e);
                }
                std::thread::sleep(std::time::Duration::from_secs(2));
            }
            self.mounted = false;
        }
        if self.attached {
            util::run_step("detach", Command::new("losetup").arg("-d").arg(&self.dev))?;
            self.attached = false;
        }
        Ok(())
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            eprintln!(
                "warning: could not unmount {} / detach {}: {e:#}",
                self.mnt.display(),
                self.dev
            );
        }
    }
}
