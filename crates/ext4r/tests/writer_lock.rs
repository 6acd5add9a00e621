//! Two writers through the library on one image at once: the writers'
//! lock (ext4r::device::lock) lets one in and refuses the other at once
//! with `Error::Locked` naming the holder; the image is e2fsck-clean
//! afterwards with both writers' changes (one after the other) or the
//! one that got in — never a lost update.
//!
//! `EXT4R_LOCK_ITERATIONS` (default 200) sets how many pairs run;
//! `EXT4R_LOCK_SEED` repeats a run's random delays.
#![allow(clippy::unwrap_used)]

mod common;

use common::{copy_sparse, missing_tools, run, TempDir};
use ext4r::device::{FileDevice, OpenMode};
use ext4r::fs::Filesystem;
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use ext4r::Error;
use std::path::Path;
use std::time::{Duration, Instant};

/// xorshift64*: reproducible delays without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// What one writer did: got in, or was refused naming a holder.
enum Outcome {
    Done,
    Refused(ext4r::device::LockHolder),
}

/// One writer: after `delay`, opens the image, makes `/w{slot}` with a
/// file of some size in it, and closes.
fn writer(img: &Path, slot: usize, delay: Duration) -> Outcome {
    std::thread::sleep(delay);
    let mut fs = match WriteFs::open_path(img, WriteOptions::default()) {
        Ok(fs) => fs,
        Err(Error::Locked { holder, .. }) => return Outcome::Refused(holder),
        Err(e) => panic!("writer {slot}: {e}"),
    };
    let d = fs
        .mkdir(
            ROOT_INO,
            format!("w{slot}").as_bytes(),
            &NewNode::dir(0o755),
        )
        .unwrap();
    let f = fs.create(d, b"data", &NewNode::file(0o644)).unwrap();
    fs.write(f, 0, &vec![slot as u8 + 1; 192 << 10]).unwrap();
    fs.close().unwrap();
    Outcome::Done
}

#[test]
fn two_library_writers_one_at_a_time() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let iterations = env_u64("EXT4R_LOCK_ITERATIONS").unwrap_or(200);
    let seed = env_u64("EXT4R_LOCK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1
    });
    let mut rng = Rng(seed);
    let dir = TempDir::new("writer-lock");
    let template = dir.join("template.img");
    run(
        "mke2fs",
        &["-q", "-F", "-t", "ext4", template.to_str().unwrap(), "16M"],
        &[("E2FSPROGS_FAKE_TIME", "1700000000")],
    )
    .unwrap();
    let img = dir.join("img");
    let started = Instant::now();
    let (mut refused, mut both) = (0, 0);
    for i in 0..iterations {
        copy_sparse(&template, &img).unwrap();
        let delays = [
            Duration::from_millis(rng.below(40)),
            Duration::from_millis(rng.below(40)),
        ];
        let outcomes: Vec<Outcome> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|slot| {
                    let img = &img;
                    let d = delays[slot];
                    s.spawn(move || writer(img, slot, d))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let what = format!("iteration {i} (seed {seed}, delays {delays:?})");
        let done: Vec<bool> = outcomes
            .iter()
            .map(|o| matches!(o, Outcome::Done))
            .collect();
        for o in &outcomes {
            if let Outcome::Refused(h) = o {
                // Both writers are this process: the holder is named as
                // this very process, by pid.
                assert_eq!(h.pid, Some(std::process::id()), "{what}");
                assert!(h.this_process, "{what}");
                assert!(h.to_string().contains("already open for writing here"));
            }
        }
        assert!(done.iter().any(|&d| d), "{what}: neither writer got in");
        if done.iter().all(|&d| d) {
            both += 1;
        } else {
            refused += 1;
        }
        let (code, out, _) =
            common::run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[]).unwrap();
        assert_eq!(code, 0, "{what}: e2fsck -fn:\n{out}");
        // Each writer's change is there exactly when it got in.
        let fs = Filesystem::open(FileDevice::open(&img, OpenMode::default()).unwrap()).unwrap();
        for (slot, &d) in done.iter().enumerate() {
            let got = fs.resolve(&format!("/w{slot}/data"));
            assert_eq!(got.is_ok(), d, "{what}: writer {slot}");
            if let Ok(f) = got {
                assert_eq!(f.inode.size(), 192 << 10, "{what}: writer {slot}");
            }
        }
    }
    println!(
        "{iterations} pairs of library writers (seed {seed}): {refused} with one refused, \
         {both} one after the other, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
