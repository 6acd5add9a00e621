//! A crash cut into a running write load, left to the journal.
//!
//! The kernel here has no device-mapper (no /dev/mapper/control, dmsetup
//! cannot reach the driver, no modules to load), no fault injection and
//! no nbd or ublk, so the device cannot be switched to an `error` target.
//! The cut is made by the filesystem instead, as xfstests' `godown` does:
//! EXT4_IOC_SHUTDOWN with EXT4_GOING_FLAGS_NOLOGFLUSH aborts the journal
//! without flushing it and fails every later write, so the image holds
//! exactly what reached the device before the cut (committed transactions
//! not yet checkpointed included) and needs journal recovery.

use super::workload::Rng;
use anyhow::{bail, Context, Result};
use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// `_IOR('X', 125, __u32)` (fs/ext4/ext4.h).
const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587D;
/// Shut down without flushing the journal: a power cut.
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;

/// Runs a write load on the mounted `mnt` (creates, fsyncs every tenth,
/// unlinks, mkdirs, renames) and cuts it after a seeded number of
/// operations while it keeps writing. Returns the operations done.
pub fn cut(mnt: &Path, rng: &mut Rng) -> Result<u64> {
    let at = 30 + rng.below(300);
    let seed = rng.next();
    let done = AtomicU64::new(0);
    let dir = mnt.join("cut");
    fs::create_dir(&dir)?;
    let shut = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut r = Rng::new(seed);
            for i in 0u64..20_000 {
                if step(&dir, i, &mut r).is_err() {
                    break;
                }
                done.store(i + 1, Ordering::Release);
            }
        });
        while done.load(Ordering::Acquire) < at && !writer.is_finished() {
            std::thread::yield_now();
        }
        let r = shutdown(mnt);
        let _ = writer.join();
        r
    });
    shut?;
    Ok(done.load(Ordering::Acquire))
}

fn step(dir: &Path, i: u64, r: &mut Rng) -> std::io::Result<()> {
    let len = 1 + r.below(20_000) as usize;
    let mut f = fs::File::create(dir.join(format!("c{i}")))?;
    f.write_all(&vec![(i & 0xff) as u8; len])?;
    if i % 10 == 0 {
        f.sync_all()?;
    }
    // Every third file goes again, unless renamed away (i % 7 == 1).
    if i % 3 == 0 && i >= 3 && (i - 3) % 7 != 1 {
        fs::remove_file(dir.join(format!("c{}", i - 3)))?;
    }
    if i % 5 == 0 {
        fs::create_dir(dir.join(format!("d{i}")))?;
    }
    if i % 7 == 1 {
        fs::rename(dir.join(format!("c{i}")), dir.join(format!("r{i}")))?;
    }
    Ok(())
}

fn shutdown(mnt: &Path) -> Result<()> {
    let f = fs::File::open(mnt).with_context(|| format!("open {}", mnt.display()))?;
    let flags: u32 = EXT4_GOING_FLAGS_NOLOGFLUSH;
    // SAFETY: the ioctl reads one u32 from a pointer to a live local, on
    // an fd we own for the duration of the call.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), EXT4_IOC_SHUTDOWN, &flags as *const u32) };
    if rc != 0 {
        bail!("EXT4_IOC_SHUTDOWN: {}", std::io::Error::last_os_error());
    }
    Ok(())
}
