//! mkfs.ext4r against mke2fs on random option sets and sizes, most of
//! them bad: where mke2fs refuses we refuse (and leave the image as it
//! was), where it succeeds we succeed and e2fsck -fn is clean. Seeded, so a
//! failure names a case that can be re-run: `EXT4R_REFUSALS_SEED=N` picks
//! another sample, `EXT4R_REFUSALS_CASES=N` a larger one.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A small xorshift generator: the cases must be the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
    fn chance(&mut self, in_n: u64) -> bool {
        self.next() % in_n == 0
    }
}

const SIZES: &[&str] = &[
    "0", "4K", "50K", "57K", "60K", "103K", "104K", "200K", "1M", "3M", "8M", "20M", "64M", "300M",
    "1G",
];

const FEATURES: &[&str] = &[
    "bigalloc",
    "^64bit",
    "64bit",
    "^metadata_csum",
    "uninit_bg",
    "^flex_bg",
    "inline_data",
    "meta_bg",
    "^resize_inode",
    "sparse_super2",
    "^sparse_super",
    "orphan_file",
    "^has_journal",
    "^extent",
    "ea_inode",
    "large_dir",
    "encrypt",
    "no_such_feature",
];

const EXTENDED: &[&str] = &[
    "stride=8",
    "stripe_width=64",
    "stride=0",
    "num_backup_sb=1",
    "num_backup_sb=3",
    "packed_meta_blocks=1",
    "resize=100000",
    "resize=10",
    "orphan_file_size=1048576",
    "orphan_file_size=1",
    "root_owner=1000:1000",
    "root_owner=x",
    "lazy_itable_init=1",
    "bogus_option",
    "encoding=utf8",
    "encoding=bogus",
];

/// One random command line (without the image): most options absent, a
/// few present with a valid or an invalid value.
fn case(rng: &mut Rng) -> (String, Vec<String>) {
    let size = if rng.chance(3) {
        format!("{}K", rng.next() % 4096)
    } else {
        rng.pick(SIZES).to_string()
    };
    let mut a: Vec<String> = vec![
        "-t".into(),
        rng.pick(&["ext4", "ext4", "ext3", "ext2"]).into(),
    ];
    let mut opt = |rng: &mut Rng, flag: &str, values: &[&str]| {
        if rng.chance(4) {
            a.push(flag.into());
            a.push(rng.pick(values).into());
        }
    };
    opt(
        rng,
        "-b",
        &["1024", "2048", "4096", "8192", "65536", "3000", "0"],
    );
    opt(
        rng,
        "-I",
        &["128", "256", "512", "1024", "100", "4096", "300"],
    );
    opt(
        rng,
        "-i",
        &["1024", "4096", "16384", "65536", "100", "67108864"],
    );
    opt(rng, "-N", &["10", "1000", "100000000", "0"]);
    opt(rng, "-m", &["0", "5", "50", "51", "-1", "x"]);
    opt(rng, "-g", &["8192", "1024", "256", "65536", "1000", "7"]);
    opt(rng, "-G", &["1", "4", "16", "3", "1048576"]);
    opt(rng, "-C", &["16384", "65536", "1000", "4096"]);
    opt(rng, "-J", &["size=4", "size=1024", "size=10000", "size=x"]);
    opt(rng, "-r", &["0", "1", "2"]);
    opt(rng, "-T", &["small", "floppy", "huge", "news", "bogus"]);
    opt(rng, "-e", &["continue", "remount-ro", "panic", "explode"]);
    if rng.chance(3) {
        let n = 1 + rng.next() % 3;
        let f: Vec<&str> = (0..n).map(|_| rng.pick(FEATURES)).collect();
        a.push("-O".into());
        a.push(f.join(","));
    }
    if rng.chance(4) {
        a.push("-E".into());
        a.push(rng.pick(EXTENDED).into());
    }
    (size, a)
}

fn hash(path: &std::path::Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

#[test]
fn refusals_match_mke2fs() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("skipped: mke2fs or e2fsck not installed");
        return;
    }
    let seed: u64 = std::env::var("EXT4R_REFUSALS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let count: usize = std::env::var("EXT4R_REFUSALS_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        // CI samples 250; the whole campaign is 500 or more by hand.
        .unwrap_or(250);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
    let cases: Vec<_> = (0..count).map(|_| case(&mut rng)).collect();
    let dir = TempDir::new("refusals");
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::<String>::new());
    let counts = Mutex::new([0usize; 4]); // both ok, both refused, code equal, untouched
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (dir, next, failures, counts, cases) = (&dir, &next, &failures, &counts, &cases);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((size, args)) = cases.get(i) else {
                    break;
                };
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let ours = dir.path(&format!("ours{worker}.img"));
                let theirs = dir.path(&format!("theirs{worker}.img"));
                let t = try_make_image(Command::new("mke2fs"), &args, &theirs, size).unwrap();
                // Our image starts as a copy of an existing filesystem
                // where there is room, so that a refusal must leave it.
                let (o, before) = {
                    let _ = std::fs::remove_file(&ours);
                    run(Command::new("truncate").args(["-s", size]).arg(&ours));
                    let made = try_make_image(Command::new("mke2fs"), &["-t", "ext4"], &ours, size)
                        .is_ok_and(|(rc, _)| rc == 0);
                    let before = made.then(|| hash(&ours)).flatten();
                    let mut cmd = ours_cmd();
                    cmd.env("E2FSPROGS_FAKE_TIME", FAKE_TIME)
                        .args(["-q", "-F", "-U", UUID])
                        .args(&args)
                        .arg(&ours);
                    let out = run(&mut cmd);
                    (out, before)
                };
                let oc = o.status.code().unwrap_or(-1);
                let line = format!("{size} {}", args.join(" "));
                let mut c = counts.lock().unwrap();
                let fail = |why: String| failures.lock().unwrap().push(format!("{line}: {why}"));
                if !matches!(oc, 0 | 1) {
                    fail(format!(
                        "ours exited {oc} (panic or signal?): {}",
                        String::from_utf8_lossy(&o.stderr)
                    ));
                } else if (oc == 0) != (t.0 == 0) {
                    fail(format!(
                        "ours exit {oc}, mke2fs exit {}: ours said {:?}; {}",
                        t.0,
                        String::from_utf8_lossy(&o.stderr).trim(),
                        t.1.trim()
                    ));
                } else if oc == 0 {
                    c[0] += 1;
                    let (rc, out) = e2fsck_fn(&ours);
                    if rc != 0 {
                        fail(format!("e2fsck -fn exit {rc} on ours: {out}"));
                    }
                } else {
                    c[1] += 1;
                    if let Some(before) = before {
                        if hash(&ours).as_ref() != Some(&before) {
                            fail("refused, but the image changed".into());
                        } else {
                            c[3] += 1;
                        }
                    }
                }
                if oc == t.0 {
                    c[2] += 1;
                }
            });
        }
    });
    let c = counts.lock().unwrap();
    let failures = failures.into_inner().unwrap();
    println!(
        "mkfs vs mke2fs, seed {seed}: {count} cases, {} made by both (e2fsck-clean), {} refused by \
         both ({} with an existing filesystem left byte-identical), {} with the same exit code, \
         {} disagreements",
        c[0],
        c[1],
        c[3],
        c[2],
        failures.len()
    );
    for f in failures.iter().take(30) {
        println!("  {f}");
    }
    assert!(
        failures.is_empty(),
        "{} cases differ from mke2fs",
        failures.len()
    );
}
