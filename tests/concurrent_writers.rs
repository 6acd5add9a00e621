//! Two of our writers on one image at once — `ext4r cp` of a big file,
//! `mkdir`, `rm`, `mv`, `ln`, `tune -L`, `tune -O`, `fsck -fy`,
//! `e4defrag --image`, `mkfs -F`, and a library `WriteFs` writer in this
//! process — started in random pairs with a random delay between them.
//! Every time, either both ran (one after the other) or one was refused
//! at once with a message naming the other (its command and pid, from the
//! writers' lock every open for writing takes); the image is
//! e2fsck-clean, with both changes or the one that ran: no lost update.
//!
//! `EXT4R_LOCK_ITERATIONS` (default 200) sets the number of pairs (run it
//! larger by hand); `EXT4R_LOCK_SEED` repeats a run.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use ext4r::device::{FileDevice, OpenMode};
use ext4r::fs::Filesystem;
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

/// What each side of a pair may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Act {
    Cp,
    Mkdir,
    Rm,
    Mv,
    Ln,
    TuneLabel,
    TuneFeature,
    Fsck,
    Defrag,
    Mkfs,
    Library,
}

const ACTS: [Act; 11] = [
    Act::Cp,
    Act::Mkdir,
    Act::Rm,
    Act::Mv,
    Act::Ln,
    Act::TuneLabel,
    Act::TuneFeature,
    Act::Fsck,
    Act::Defrag,
    Act::Mkfs,
    Act::Library,
];

impl Act {
    /// The command line for slot `slot` (0 or 1: each slot has names of
    /// its own, so that two of a kind do not collide).
    fn command(self, img: &Path, big: &Path, slot: usize) -> Option<Command> {
        let at = |p: &str| format!("{}:{p}", img.display());
        let mut c = ext4r();
        match self {
            Act::Cp => c.arg("cp").arg(big).arg(at(&format!("/big{slot}"))),
            Act::Mkdir => c.arg("mkdir").arg(at(&format!("/new{slot}"))),
            Act::Rm => c.args(["rm", "-r"]).arg(at(&format!("/victim{slot}"))),
            Act::Mv => c
                .arg("mv")
                .arg(at(&format!("/mvsrc{slot}")))
                .arg(at(&format!("/mvdst{slot}"))),
            Act::Ln => c
                .arg("ln")
                .arg(at(&format!("/lnsrc{slot}")))
                .arg(at(&format!("/lndst{slot}"))),
            Act::TuneLabel => c.args(["tune", "-L", &format!("label{slot}")]).arg(img),
            Act::TuneFeature => c.args(["tune", "-O", "^metadata_csum"]).arg(img),
            Act::Fsck => c.args(["fsck", "-fy"]).arg(img),
            Act::Defrag => c.args(["e4defrag", "--image"]).arg(img),
            Act::Mkfs => c.args(["mkfs", "-q", "-F"]).arg(img),
            Act::Library => return None,
        };
        Some(c)
    }
}

/// How one side ended.
#[derive(Debug)]
enum End {
    /// Exit 0 (the library writer: no error).
    Ran,
    /// Refused at open because the image was in use: the message.
    Refused(String),
    /// Failed otherwise (after a mkfs wiped what it was to work on).
    Failed(String),
}

/// One side of a pair, started after `delay`.
fn start(act: Act, img: &Path, big: &Path, slot: usize, delay: Duration) -> Side {
    std::thread::sleep(delay);
    match act.command(img, big, slot) {
        Some(mut c) => {
            let child = c
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            Side::Child(child)
        }
        None => {
            let img = img.to_path_buf();
            Side::Thread(std::thread::spawn(move || library_writer(&img, slot)))
        }
    }
}

enum Side {
    Child(std::process::Child),
    Thread(std::thread::JoinHandle<Result<(), String>>),
}

impl Side {
    fn pid(&self) -> u32 {
        match self {
            Side::Child(c) => c.id(),
            Side::Thread(_) => std::process::id(),
        }
    }

    fn finish(self, act: Act) -> End {
        match self {
            Side::Child(c) => {
                let o = c.wait_with_output().unwrap();
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
                if o.status.success() {
                    return End::Ran;
                }
                // The tools' usual codes for "could not open it": fsck's
                // operational error 8, 1 for the others (mke2fs, tune2fs,
                // e4defrag, coreutils).
                if !text.contains("in use by") {
                    return End::Failed(format!("exit {:?}: {text}", o.status.code()));
                }
                let want = if act == Act::Fsck { 8 } else { 1 };
                assert_eq!(o.status.code(), Some(want), "{act:?}: {text}");
                End::Refused(text)
            }
            Side::Thread(h) => match h.join().unwrap() {
                Ok(()) => End::Ran,
                Err(m) => End::Refused(m),
            },
        }
    }
}

/// The library side: `/lib{slot}` with a file in it, through `WriteFs`.
fn library_writer(img: &Path, slot: usize) -> Result<(), String> {
    let mut fs = match WriteFs::open_path(img, WriteOptions::default()) {
        Ok(fs) => fs,
        Err(e @ ext4r::Error::Locked { .. }) => return Err(e.to_string()),
        Err(e) => panic!("library writer: {e}"),
    };
    let d = fs
        .mkdir(
            ROOT_INO,
            format!("lib{slot}").as_bytes(),
            &NewNode::dir(0o755),
        )
        .unwrap();
    let f = fs.create(d, b"data", &NewNode::file(0o644)).unwrap();
    fs.write(f, 0, &vec![7u8; 256 << 10]).unwrap();
    fs.close().unwrap();
    Ok(())
}

/// Whether `act` of slot `slot` left its mark on the image.
fn effect(fs: &Filesystem, act: Act, slot: usize, big_len: u64) -> Option<bool> {
    let has = |p: &str| fs.resolve(p).is_ok();
    Some(match act {
        Act::Cp => fs
            .resolve(&format!("/big{slot}"))
            .is_ok_and(|f| f.inode.size() == big_len),
        Act::Mkdir => has(&format!("/new{slot}")),
        Act::Rm => !has(&format!("/victim{slot}")),
        Act::Mv => has(&format!("/mvdst{slot}")) && !has(&format!("/mvsrc{slot}")),
        Act::Ln => has(&format!("/lndst{slot}")),
        Act::TuneLabel => fs.superblock().volume_name() == format!("label{slot}").as_bytes(),
        Act::TuneFeature => !fs
            .superblock()
            .has_ro_compat(ext4r_format::features::RoCompat::METADATA_CSUM),
        Act::Library => fs
            .resolve(&format!("/lib{slot}/data"))
            .is_ok_and(|f| f.inode.size() == 256 << 10),
        // No mark to look for: fsck and defrag of a clean image, mkfs.
        Act::Fsck | Act::Defrag | Act::Mkfs => return None,
    })
}

/// xorshift64*: reproducible choices without a dependency.
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

/// The image every pair starts from: small, with what each slot's
/// commands work on, and a few fragmented files for the defragmenter.
fn template(t: &TempDir) -> PathBuf {
    let img = t.path("template.img");
    let o = run(ext4r().args(["mkfs", "-q"]).arg(&img).arg("24M"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut fs = WriteFs::open_path(&img, WriteOptions::default()).unwrap();
    let file = NewNode::file(0o644);
    for slot in 0..2 {
        let v = fs
            .mkdir(
                ROOT_INO,
                format!("victim{slot}").as_bytes(),
                &NewNode::dir(0o755),
            )
            .unwrap();
        let f = fs.create(v, b"f", &file).unwrap();
        fs.write(f, 0, b"to be removed").unwrap();
        fs.mkdir(
            ROOT_INO,
            format!("mvsrc{slot}").as_bytes(),
            &NewNode::dir(0o755),
        )
        .unwrap();
        let f = fs
            .create(ROOT_INO, format!("lnsrc{slot}").as_bytes(), &file)
            .unwrap();
        fs.write(f, 0, b"linked").unwrap();
    }
    // Two files written in turns: interleaved extents to defragment.
    let a = fs.create(ROOT_INO, b"frag-a", &file).unwrap();
    let b = fs.create(ROOT_INO, b"frag-b", &file).unwrap();
    for k in 0..32u64 {
        fs.write(a, k * 4096, &[1u8; 4096]).unwrap();
        fs.sync().unwrap();
        fs.write(b, k * 4096, &[2u8; 4096]).unwrap();
        fs.sync().unwrap();
    }
    fs.close().unwrap();
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "template: {out}");
    img
}

#[test]
fn pairs_of_writers_take_turns_or_one_is_refused() {
    if !have("e2fsck") {
        eprintln!("skipped: needs e2fsck");
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
    let t = TempDir::new("concurrent-writers");
    let big = t.path("big");
    let big_len: u64 = 3 << 20;
    fs::write(
        &big,
        (0..big_len).map(|i| (i % 253) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    let tmpl = template(&t);
    let img = t.path("img");
    let started = Instant::now();
    let mut refused = 0;
    let mut turns = 0;
    let mut by_pair: BTreeMap<(Act, Act), (u32, u32)> = BTreeMap::new();
    for i in 0..iterations {
        copy_sparse(&tmpl, &img).unwrap();
        let acts = [
            ACTS[rng.below(ACTS.len() as u64) as usize],
            ACTS[rng.below(ACTS.len() as u64) as usize],
        ];
        let delay = Duration::from_millis(rng.below(12));
        let what = format!("pair {i} {acts:?}, second after {delay:?} (seed {seed})");
        let first = start(acts[0], &img, &big, 0, Duration::ZERO);
        let second = start(acts[1], &img, &big, 1, delay);
        let pids = [first.pid(), second.pid()];
        let ends = [first.finish(acts[0]), second.finish(acts[1])];
        let ran: Vec<bool> = ends.iter().map(|e| matches!(e, End::Ran)).collect();
        let mkfs_ran = (0..2).any(|k| acts[k] == Act::Mkfs && ran[k]);
        for (k, e) in ends.iter().enumerate() {
            // Only a fresh filesystem under it makes a command fail here
            // (the names it was to work on are gone).
            if let End::Failed(m) = e {
                assert!(
                    acts[1 - k] == Act::Mkfs && ran[1 - k],
                    "{what}: side {k} failed, not for the lock: {m}"
                );
            }
        }
        for (k, e) in ends.iter().enumerate() {
            if let End::Refused(msg) = e {
                // Named: the other's pid, and for a command its name.
                let other = 1 - k;
                assert!(
                    msg.contains(&format!("(pid {})", pids[other])),
                    "{what}: side {k} refused without naming pid {}: {msg}",
                    pids[other]
                );
                if acts[other] != Act::Library {
                    assert!(
                        msg.contains(&format!("ext4r (pid {})", pids[other])),
                        "{what}: {msg}"
                    );
                }
            }
        }
        assert!(ran.iter().any(|&r| r), "{what}: neither ran: {ends:?}");
        let refusals = ends.iter().filter(|e| matches!(e, End::Refused(_))).count();
        let entry = by_pair.entry((acts[0].min(acts[1]), acts[0].max(acts[1])));
        let counts = entry.or_default();
        if refusals == 0 {
            turns += 1;
            counts.0 += 1;
        } else {
            refused += 1;
            counts.1 += 1;
        }
        let (rc, out) = e2fsck_fn(&img);
        assert_eq!(rc, 0, "{what}: e2fsck -fn: {out}");
        // Each change is there exactly when its command ran (a mkfs that
        // ran may have come after the other and wiped it: no mark then).
        if !mkfs_ran {
            let fs =
                Filesystem::open(FileDevice::open(&img, OpenMode::default()).unwrap()).unwrap();
            for k in 0..2 {
                // Two label changes that both ran: the later one stays.
                if acts == [Act::TuneLabel; 2] && ran[0] && ran[1] {
                    continue;
                }
                if let Some(mark) = effect(&fs, acts[k], k, big_len) {
                    // Two feature changes: either one's run turns it off.
                    let expected = ran[k] || (acts == [Act::TuneFeature; 2] && ran[1 - k]);
                    assert_eq!(
                        mark,
                        expected,
                        "{what}: side {k} ({:?}); {ends:?}; / holds {:?}",
                        acts[k],
                        fs.read_dir_path("/")
                            .map(|es| es.iter().map(|e| e.name_lossy()).collect::<Vec<_>>())
                    );
                }
            }
        }
    }
    println!(
        "{iterations} pairs of writers on one image (seed {seed}): {refused} with one refused \
         naming the other, {turns} that ran one after the other; every image e2fsck-clean; \
         {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for ((a, b), (t, r)) in &by_pair {
        println!("  {a:?} + {b:?}: {t} in turn, {r} refused");
    }
}
