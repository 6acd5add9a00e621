//! What `bench fsck --cold` needs beyond the hot comparison: the page cache
//! dropped before every run (fsck at boot reads everything from the disk,
//! its own binary included), the disk's busy time during each run, and the
//! disk's own sequential read speed, measured in the same session, so that
//! the floor of a check (the bytes it must read at that speed) can be set
//! beside its time.
//!
//! The images live on the machine's disk (on tmpfs there is no cold cache:
//! its pages are the files), as files this bench made. The only device
//! files read are the kernel's counters in sysfs; the speed is measured by
//! reading our own image files with `O_DIRECT`.

use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::measure::{Hooks, Sample};
use crate::util::{self, fmt_bytes, fmt_duration};

/// Writes dirty pages back and drops the page cache, dentries and inodes
/// (`echo 3 > /proc/sys/vm/drop_caches`); an error when not allowed.
pub fn drop_caches() -> Result<()> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .context("cannot write /proc/sys/vm/drop_caches (needs root)")
}

/// `statfs`'s type of tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Whether `path` is on tmpfs (RAM: no cold cache there).
pub fn is_tmpfs(path: &Path) -> Result<bool> {
    let fs = rustix::fs::statfs(path).with_context(|| format!("statfs {}", path.display()))?;
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets
    Ok(fs.f_type as i64 == TMPFS_MAGIC)
}

/// The sysfs `stat` file of the block device holding `path` (a partition
/// has one too), if there is one.
fn disk_stat_of(path: &Path) -> Option<PathBuf> {
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let stat = PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat"));
    stat.is_file().then_some(stat)
}

/// Milliseconds the disk has had I/O in flight (`io_ticks`, the 10th field
/// of the block layer's stat file).
fn io_ticks(stat: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(stat).ok()?;
    parse_io_ticks(&text)
}

fn parse_io_ticks(text: &str) -> Option<u64> {
    text.split_whitespace().nth(9)?.parse().ok()
}

/// Drops the page cache before each run and records how long the disk was
/// busy during it ([`Sample::busy`]); when the cache cannot be dropped it
/// says so once and the runs go on hot.
pub struct Cold {
    stat: Option<PathBuf>,
    /// Whether the cache is dropped (false: not root).
    pub can_drop: bool,
    ticks: Option<u64>,
}

impl Cold {
    pub fn new(img_dir: &Path) -> Cold {
        let can_drop = match drop_caches() {
            Ok(()) => true,
            Err(e) => {
                println!("NOTE: {e:#}: the runs are NOT cold (the page cache stays)");
                false
            }
        };
        let stat = disk_stat_of(img_dir);
        match &stat {
            Some(s) => println!("disk busy time from {}", s.display()),
            None => println!(
                "note: no sysfs stat for the disk of {}: disk busy time not measured",
                img_dir.display()
            ),
        }
        Cold {
            stat,
            can_drop,
            ticks: None,
        }
    }
}

impl Hooks for Cold {
    fn before(&mut self, _tool: usize, _run: usize) -> Result<()> {
        if self.can_drop {
            drop_caches()?;
        }
        self.ticks = self.stat.as_deref().and_then(io_ticks);
        Ok(())
    }

    fn after(&mut self, _tool: usize, _run: usize, sample: &mut Sample) -> Result<()> {
        let now = self.stat.as_deref().and_then(io_ticks);
        if let (Some(a), Some(b)) = (self.ticks, now) {
            // The disk is shared: other jobs' I/O counts too, so never more
            // than the run itself.
            sample.busy = Some(Duration::from_millis(b.saturating_sub(a)).min(sample.wall));
        }
        Ok(())
    }
}

/// Size of each `O_DIRECT` read of [`sequential_speed`].
const CHUNK: u64 = 4 << 20;
/// Alignment `O_DIRECT` wants of offsets, lengths and buffers (a page
/// covers every logical block size a disk has).
const ALIGN: usize = 4096;

/// The aligned `CHUNK`-sized reads covering the data (not the holes) of
/// `runs`, up to `limit` bytes in all: `(offset, len)`.
fn chunks(runs: &[(u64, u64)], limit: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut total = 0u64;
    for &(start, end) in runs {
        let mut o = start.div_ceil(CHUNK) * CHUNK;
        while o + CHUNK <= end && total < limit {
            out.push((o, CHUNK));
            total += CHUNK;
            o += CHUNK;
        }
    }
    out
}

/// How fast the disk reads sequentially, cold: up to `limit` bytes of the
/// allocated parts of `files` (holes would read nothing from the disk), in
/// `O_DIRECT` reads of 4 MiB in file order, `depth` of them in flight (a
/// thread each). Returns bytes per second and the bytes read.
pub fn sequential_speed(files: &[PathBuf], limit: u64, depth: usize) -> Result<(f64, u64)> {
    let mut handles = Vec::new();
    let mut reads: Vec<(usize, u64, u64)> = Vec::new();
    let mut total = 0u64;
    for f in files {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(f)
            .with_context(|| format!("cannot open {} with O_DIRECT", f.display()))?;
        let len = file.metadata()?.len();
        let runs = util::data_runs(&file, len);
        for (off, n) in chunks(&runs, limit.saturating_sub(total)) {
            reads.push((handles.len(), off, n));
            total += n;
        }
        handles.push(file);
    }
    ensure!(total > 0, "nothing allocated to read in the images");
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..depth.max(1))
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    let mut raw = vec![0u8; CHUNK as usize + ALIGN];
                    let shift = raw.as_ptr().align_offset(ALIGN);
                    let buf = &mut raw[shift..shift + CHUNK as usize];
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(f, off, len)) = reads.get(k) else {
                            return Ok(());
                        };
                        let mut done = 0usize;
                        while (done as u64) < len {
                            let n = handles[f]
                                .read_at(&mut buf[done..], off + done as u64)
                                .context("O_DIRECT read")?;
                            if n == 0 {
                                break;
                            }
                            done += n;
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("reader panicked")))?;
        }
        Ok(())
    })?;
    let took = start.elapsed().as_secs_f64().max(1e-9);
    Ok((total as f64 / took, total))
}

/// Size of the file [`speed_file`] keeps for the speed measurement.
const SPEED_FILE: u64 = 256 << 20;

/// `<dir>/seqread.dat`, 256 MiB written in one sequential pass (made when
/// missing or of another size): what [`measure_speed`] reads. The images
/// themselves are no good for it: a sparse image's data can be a few MiB
/// in scattered runs (`vol64g` allocates 8.5 MiB).
pub fn speed_file(dir: &Path) -> Result<PathBuf> {
    use std::io::Write as _;
    let path = dir.join("seqread.dat");
    if std::fs::metadata(&path)
        .is_ok_and(|m| m.len() == SPEED_FILE && m.blocks() * 512 >= SPEED_FILE)
    {
        return Ok(path);
    }
    let tmp = dir.join("seqread.dat.partial");
    let mut f =
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    // Not zeros, so that no layer below can skip them.
    let mut block = vec![0u8; CHUNK as usize];
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for b in block.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.copy_from_slice(&x.to_le_bytes());
    }
    for _ in 0..SPEED_FILE / CHUNK {
        f.write_all(&block)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
    }
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Runs [`sequential_speed`] over `files`, with 1 and with 4 reads in
/// flight, prints both and returns the faster: the floor is what the disk
/// can do at its best.
pub fn measure_speed(files: &[PathBuf]) -> Result<f64> {
    let mut best = 0f64;
    for depth in [1, 4] {
        let t = Instant::now();
        let (speed, bytes) = sequential_speed(files, 1 << 30, depth)?;
        println!(
            "  disk: {} read with O_DIRECT in 4 MiB reads, {depth} in flight: {}/s ({})",
            fmt_bytes(bytes),
            fmt_bytes(speed as u64),
            fmt_duration(t.elapsed())
        );
        best = best.max(speed);
    }
    Ok(best)
}

/// The system's load averages (1, 5, 15 minutes), to say how busy the
/// machine was: the disk and the CPUs are shared.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_ticks_is_the_tenth_field() {
        let stat = "  5138  1234 400000  2500  800  90 12000  700  0  3456  4000  0 0 0 0";
        assert_eq!(parse_io_ticks(stat), Some(3456));
        assert_eq!(parse_io_ticks("1 2 3"), None);
    }

    #[test]
    fn chunks_are_aligned_and_inside_the_data() {
        let runs = [(1000, 3 * CHUNK + 5), (10 * CHUNK, 12 * CHUNK)];
        let c = chunks(&runs, u64::MAX);
        assert_eq!(
            c,
            vec![
                (CHUNK, CHUNK),
                (2 * CHUNK, CHUNK),
                (10 * CHUNK, CHUNK),
                (11 * CHUNK, CHUNK)
            ]
        );
        assert_eq!(chunks(&runs, CHUNK).len(), 1);
    }

    #[test]
    fn reads_a_file_on_disk_with_o_direct() {
        // Under the target directory: on the disk, where O_DIRECT works
        // (tmpfs refuses it).
        let dir = util::target_dir();
        std::fs::create_dir_all(&dir).unwrap();
        if is_tmpfs(&dir).unwrap() {
            println!("skipped: {} is tmpfs (no O_DIRECT)", dir.display());
            return;
        }
        let tmp = util::TempDir::new_in(&dir, "cold-test-").unwrap();
        let f = tmp.path().join("data");
        std::fs::write(&f, vec![7u8; 2 * CHUNK as usize]).unwrap();
        let (speed, bytes) = sequential_speed(&[f], u64::MAX, 2).unwrap();
        assert_eq!(bytes, 2 * CHUNK);
        assert!(speed > 0.0);
    }
}
