//! The hard-link-heavy image of `bench fsck --cold`: a backup tree as
//! rsnapshot or `cp -al` + rsync leave it. 20 snapshots of a tree of 500
//! directories × 100 files; each snapshot links the files that did not
//! change since the one before and writes a new file (100 bytes) for those
//! that did. A file's version lives 2 to 20 snapshots (a hash of its path
//! and version), so most inodes have 2–20 links (the versions cut short by
//! the last snapshot fewer): 121,020 inodes under 1,000,000 names, 95% of
//! them with 2–20 links, the rest (born in the last snapshots) with one.
//! Built through a loop mount and cached like the others (see
//! [`super::filled`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};

use super::{filled, large};
use crate::util::{self, fmt_bytes, fmt_duration};

const RECIPE: &str = "links v1: 8GiB sparse file, mke2fs -F -q -t ext4, mount -o noinit_itable, \
     20 snapshots of 500 dirs x 100 files, versions living 2-20 snapshots, 100 bytes each";
const SIZE: u64 = 8 << 30;
const SNAPSHOTS: u32 = 20;
const DIRS: usize = 500;
const FILES: usize = 100;
/// What the image takes (a data block per version, directories, journal):
/// 612 MiB measured (121,020 files under 1,000,000 names, built in 23 s).
const ESTIMATE: u64 = 3 << 28;

/// The cached backup-tree image.
pub fn image(cache: &Path, rebuild: bool) -> Result<PathBuf> {
    filled::cached(cache, "links", RECIPE, rebuild, |img, cache| {
        large::check_room("links", ESTIMATE, cache)?;
        filled::build(img, cache, SIZE, &[], populate)
    })
}

/// How many snapshots version `v` of file `p` lives: 2 to 20.
fn life(p: usize, v: u32) -> u32 {
    // splitmix64: any fixed, well-spread hash will do.
    let mut z = ((p as u64) << 8) | u64::from(v);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    2 + (z % 19) as u32
}

fn populate(root: &Path) -> Result<()> {
    let data = [0x5a_u8; 100];
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    // Per file: the snapshot its current version was written in, its
    // version number and how long that version lives.
    let mut state: Vec<std::sync::Mutex<Vec<(u32, u32, u32)>>> = (0..DIRS)
        .map(|d| {
            std::sync::Mutex::new((0..FILES).map(|f| (0, 0, life(d * FILES + f, 0))).collect())
        })
        .collect();
    let inodes = AtomicUsize::new(0);
    let start = Instant::now();
    for s in 0..SNAPSHOTS {
        let snap = root.join(format!("snap{s:02}"));
        std::fs::create_dir(&snap).with_context(|| format!("mkdir {}", snap.display()))?;
        let prev = root.join(format!("snap{:02}", s.saturating_sub(1)));
        util::par_for(threads, DIRS, |d| {
            let dir = snap.join(format!("d{d:03}"));
            std::fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
            let mut files = state[d].lock().unwrap_or_else(|e| e.into_inner());
            for (f, (born, v, l)) in files.iter_mut().enumerate() {
                let path = dir.join(format!("f{f:03}"));
                if s > 0 && s - *born < *l {
                    let old = prev.join(format!("d{d:03}")).join(format!("f{f:03}"));
                    std::fs::hard_link(&old, &path)
                        .with_context(|| format!("link {}", path.display()))?;
                    continue;
                }
                if s > 0 {
                    *v += 1;
                    *born = s;
                    *l = life(d * FILES + f, *v);
                }
                std::fs::write(&path, data).with_context(|| format!("write {}", path.display()))?;
                inodes.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })?;
        if (s + 1) % 5 == 0 {
            println!(
                "  {}/{SNAPSHOTS} snapshots, {} files under {} names, after {}",
                s + 1,
                inodes.load(Ordering::Relaxed),
                (s as usize + 1) * DIRS * FILES,
                fmt_duration(start.elapsed())
            );
        }
    }
    state.clear();
    let used = rustix::fs::statvfs(root)
        .map(|v| (v.f_blocks - v.f_bfree) * v.f_frsize)
        .unwrap_or(0);
    println!("  {} of the filesystem in use", fmt_bytes(used));
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn lives_are_two_to_twenty_snapshots() {
        let lives: Vec<u32> = (0..10_000).map(|p| super::life(p, 0)).collect();
        assert!(lives.iter().all(|l| (2..=20).contains(l)));
        for l in 2..=20 {
            assert!(lives.contains(&l));
        }
    }
}
