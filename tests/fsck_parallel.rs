//! Pass 1 on N threads finds what one thread finds (issue 16): for every
//! image, `fsck -fn` with `-m 1`, `-m 2` and `-m 4` prints the same stdout
//! and stderr and exits the same; `-fy` and `-p` with `-m 1` and `-m 4`
//! do too, and leave the same image bytes.
//!
//! The images: every one of the e2fsprogs corpus (`../shared/corpus`,
//! read-only, unpacked into a temp dir; every other one in CI, all with
//! `EXT4R_PARALLEL_CORPUS=all`), and filesystems made here so that
//! the merge has work to do: thousands of kernel-written files of every
//! kind (xattr blocks, shared ones too, hard links, fast and slow
//! symlinks, devices, fifos, fragmented files, inline data) with damage on
//! about a hundred inodes spread over every chunk of the inode tables, so
//! that different workers find problems that must come out in inode
//! order; one with a bad block list and one with quota.
//!
//! The clock is pinned with `E2FSCK_TIME` (as for e2fsck), so that the
//! times a repair writes are the same in both runs. The one other thing
//! that legitimately differs is the random UUID a repair gives a
//! filesystem whose UUID is null: it is masked in the superblock copies
//! when the image came with a null UUID.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The thread counts compared for `-fn` (the first is the reference);
/// repairs compare the first and the last.
const THREADS: [&str; 3] = ["1", "2", "4"];
/// A run longer than this is killed and reported (a hang is a failure).
const LIMIT: Duration = Duration::from_secs(60);
/// Inode table bytes a worker takes at once (`pass1::CHUNK`).
const CHUNK_BYTES: u64 = 256 << 10;

/// One run of the checker: exit code, stdout, stderr.
#[derive(PartialEq, Eq)]
struct Run {
    code: Option<i32>,
    out: String,
    err: String,
}

/// `ext4r fsck ARGS -m THREADS IMG` at the pinned time, its output in
/// files of `dir` (no pipes to drain), killed after [`LIMIT`].
fn fsck(dir: &Path, args: &[&str], threads: &str, img: &Path, now: &str) -> Run {
    let (o, e) = (dir.join("run.out"), dir.join("run.err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .arg("fsck")
        .args(args)
        .args(["-m", threads])
        .arg(img)
        .env("E2FSCK_TIME", now)
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&o).unwrap())
        .stderr(fs::File::create(&e).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break Some(-999);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Run {
        code,
        out: String::from_utf8_lossy(&fs::read(&o).unwrap()).into_owned(),
        err: String::from_utf8_lossy(&fs::read(&e).unwrap()).into_owned(),
    }
}

/// What differs between a reference run and another, shortly.
fn run_diff(a: &Run, b: &Run) -> Option<String> {
    if a == b {
        return None;
    }
    let mut s = String::new();
    if a.code != b.code {
        s += &format!("  exit {:?} vs {:?}\n", a.code, b.code);
    }
    for (what, x, y) in [("stdout", &a.out, &b.out), ("stderr", &a.err, &b.err)] {
        if x != y {
            s += &format!("  {what}:\n{}", line_diff(x, y, 6));
        }
    }
    Some(s)
}

/// The first `n` differing lines of two texts, numbered.
fn line_diff(a: &str, b: &str, n: usize) -> String {
    let (al, bl): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    let mut shown = 0;
    for i in 0..al.len().max(bl.len()) {
        let (x, y) = (al.get(i), bl.get(i));
        if x != y {
            out += &format!("    line {i}:\n      -m1: {x:?}\n      -mN: {y:?}\n");
            shown += 1;
            if shown == n {
                break;
            }
        }
    }
    out
}

/// Whether the primary superblock's UUID is all zeros (a repair then
/// makes a random one).
fn null_uuid(img: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let mut u = [0u8; 16];
    let f = fs::File::open(img).unwrap();
    f.read_exact_at(&mut u, 1024 + 0x68).is_ok() && u == [0; 16]
}

/// Where two images differ, as byte offsets (the first few) and a count;
/// with `mask_uuid`, `s_uuid` in every superblock copy is not compared.
/// Read a MiB at a time (the generated images are hundreds of MiB).
fn image_diff(a: &Path, b: &Path, mask_uuid: bool) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let (fa, fb) = (fs::File::open(a).unwrap(), fs::File::open(b).unwrap());
    let (la, lb) = (fa.metadata().unwrap().len(), fb.metadata().unwrap().len());
    if la != lb {
        return Some(format!("  image sizes {la} vs {lb}\n"));
    }
    const STEP: u64 = 1 << 20;
    let (mut x, mut y) = (vec![0u8; STEP as usize], vec![0u8; STEP as usize]);
    let mut first = Vec::new();
    let mut count = 0u64;
    let sb = |c: &[u8]| c.len() == 1024 && c[0x38] == 0x53 && c[0x39] == 0xEF;
    let mut off = 0;
    while off < la {
        let n = (la - off).min(STEP) as usize;
        fa.read_exact_at(&mut x[..n], off).unwrap();
        fb.read_exact_at(&mut y[..n], off).unwrap();
        if x[..n] != y[..n] {
            for (k, (p, q)) in x[..n].chunks(1024).zip(y[..n].chunks(1024)).enumerate() {
                if p == q {
                    continue;
                }
                for (i, (s, t)) in p.iter().zip(q).enumerate() {
                    if s != t && !(mask_uuid && sb(p) && sb(q) && (0x68..0x78).contains(&i)) {
                        count += 1;
                        if first.len() < 8 {
                            first.push(off + (k * 1024 + i) as u64);
                        }
                    }
                }
            }
        }
        off += n as u64;
    }
    (count > 0).then(|| format!("  images differ in {count} bytes, first at {first:?}\n"))
}

/// Compares the runs on `pristine` (left as it was): `-fn` with every
/// count of [`THREADS`], then `-fy` (and `-p` when `preen`) with the
/// first and the last on fresh copies at one path. Differences are
/// pushed to `bad`; returns the `-fn -m1` run.
fn compare(
    dir: &Path,
    pristine: &Path,
    label: &str,
    preen: bool,
    now: &str,
    bad: &mut Vec<String>,
) -> Run {
    let fn_runs: Vec<Run> = THREADS
        .iter()
        .map(|t| fsck(dir, &["-fn"], t, pristine, now))
        .collect();
    for (t, r) in THREADS.iter().zip(&fn_runs).skip(1) {
        if let Some(d) = run_diff(&fn_runs[0], r) {
            bad.push(format!("{label}: -fn -m1 vs -m{t}:\n{d}"));
        }
    }
    let mask = null_uuid(pristine);
    let work = dir.join("work.img");
    let kept = dir.join("m1.img");
    let (m1, mn) = (THREADS[0], THREADS[THREADS.len() - 1]);
    let modes: &[&[&str]] = if preen {
        &[&["-fy"], &["-p"]]
    } else {
        &[&["-fy"]]
    };
    for mode in modes {
        copy_sparse(pristine, &work).unwrap();
        let a = fsck(dir, mode, m1, &work, now);
        fs::rename(&work, &kept).unwrap();
        copy_sparse(pristine, &work).unwrap();
        let b = fsck(dir, mode, mn, &work, now);
        let mut d = run_diff(&a, &b).unwrap_or_default();
        d += &image_diff(&kept, &work, mask).unwrap_or_default();
        if !d.is_empty() {
            bad.push(format!(
                "{label}: {} -m{m1} vs -m{mn}:\n{d}",
                mode.join(" ")
            ));
        }
    }
    let _ = fs::remove_file(&work);
    let _ = fs::remove_file(&kept);
    fn_runs.into_iter().next().unwrap()
}

/// Seconds since the epoch, as a string: one clock for every run.
fn pinned_now() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string()
}

#[test]
fn corpus_images_alike_on_any_thread_count() {
    let Some(root) = corpus::corpus_dir() else {
        println!("skipped: e2fsprogs corpus not found");
        return;
    };
    if !have("gzip") {
        println!("skipped: no gzip");
        return;
    }
    let start = Instant::now();
    let now = pinned_now();
    let dir = TempDir::new("par-corpus");
    let mut names: Vec<String> = fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // CI compares every other image (`cargo xtask corpus check` runs them
    // all against e2fsck); EXT4R_PARALLEL_CORPUS=all compares every one.
    if !std::env::var("EXT4R_PARALLEL_CORPUS").is_ok_and(|v| v == "all") {
        names = names.into_iter().step_by(2).collect();
    }
    let (mut compared, mut with_errors) = (0, 0);
    let mut bad = Vec::new();
    for name in &names {
        let pristine = dir.path("pristine.img");
        let (gz, raw) = (
            root.join(name).join("image.gz"),
            root.join(name).join("image"),
        );
        if gz.is_file() {
            let o = run(Command::new("sh").arg("-c").arg(format!(
                "gzip -dc '{}' > '{}'",
                gz.display(),
                pristine.display()
            )));
            assert!(o.status.success(), "{name}: gunzip failed");
        } else if raw.is_file() {
            copy_sparse(&raw, &pristine).unwrap();
        } else {
            continue;
        }
        let r = compare(&dir.0, &pristine, name, true, &now, &mut bad);
        compared += 1;
        with_errors += usize::from(r.code != Some(0));
    }
    println!(
        "corpus: {compared} images, -fn -m1/-m2/-m4 and -fy, -p -m1/-m4 compared \
         ({with_errors} with -fn exit other than 0), {} differ, {:.1} s",
        bad.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(compared > 0, "no image in {}", root.display());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// How a generated image is made and filled.
struct Gen {
    name: &'static str,
    mkfs: Vec<String>,
    size: &'static str,
    /// Directories and files per directory.
    dirs: usize,
    files: usize,
    /// Small files, most of them inline on an inline_data filesystem.
    small: bool,
}

/// Fills a mounted filesystem: files of many sizes in `g.dirs`
/// directories (the kernel spreads directories over the groups), every
/// seventh with an xattr too big for the inode (an xattr block; one value
/// in three is shared, so the kernel shares the block), hard links,
/// fast and slow symlinks, fifos, devices and three files written in turns
/// (fragmented). Returns the inode numbers in use, sorted.
fn fill(root: &Path, g: &Gen) -> Vec<u64> {
    use rustix::fs::{makedev, mknodat, setxattr, FileType, Mode, XattrFlags, CWD};
    for d in 0..g.dirs {
        let dp = root.join(format!("d{d}"));
        fs::create_dir(&dp).unwrap();
        for i in 0..g.files {
            let n = d * g.files + i;
            let p = dp.join(format!("f{i}"));
            match n % 10 {
                7 => std::os::unix::fs::symlink(format!("t{n}"), &p).unwrap(),
                8 => std::os::unix::fs::symlink("s".repeat(80 + n % 100), &p).unwrap(),
                9 if n % 20 == 9 => mknodat(
                    CWD,
                    &p,
                    FileType::Fifo,
                    Mode::from_raw_mode(0o644),
                    makedev(0, 0),
                )
                .unwrap(),
                9 => mknodat(
                    CWD,
                    &p,
                    if n % 40 == 19 {
                        FileType::CharacterDevice
                    } else {
                        FileType::BlockDevice
                    },
                    Mode::from_raw_mode(0o600),
                    makedev(8, (n % 256) as u32),
                )
                .unwrap(),
                _ => {
                    let len = if g.small {
                        [0, 20, 50, 90, 140, 3000][n % 6]
                    } else {
                        (n * 211) % 20_000
                    };
                    let data: Vec<u8> = (0..len).map(|x| (x * 7 + n) as u8).collect();
                    fs::write(&p, data).unwrap();
                    if n % 7 == 0 {
                        let v = if n % 21 == 0 {
                            vec![b's'; 300]
                        } else {
                            format!("{n}:").repeat(80).into_bytes()
                        };
                        setxattr(&p, "user.big", &v, XattrFlags::empty()).unwrap();
                    }
                    if n % 13 == 0 {
                        fs::hard_link(&p, dp.join(format!("h{i}"))).unwrap();
                    }
                }
            }
        }
    }
    // Fragmented: written in turns, each piece synced.
    let mut fr: Vec<fs::File> = (0..3)
        .map(|k| fs::File::create(root.join(format!("d0/frag{k}"))).unwrap())
        .collect();
    for round in 0..40u8 {
        for (k, f) in fr.iter_mut().enumerate() {
            use std::io::Write;
            f.write_all(&vec![round ^ k as u8; 8192 * (k + 1)]).unwrap();
            f.sync_all().unwrap();
        }
    }
    drop(fr);
    let mut inos = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let m = fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() && e.file_name() != "lost+found" {
                stack.push(e.path());
            }
            inos.push(m.ino());
        }
    }
    inos.sort_unstable();
    inos.dedup();
    inos
}

/// A `dumpe2fs -h` field as a number.
fn sb_field(img: &Path, key: &str) -> u64 {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("dumpe2fs -h: no {key}"))
}

/// Damages about `want` inodes of `inos` taken evenly across them: by
/// debugfs (which keeps the checksum right) a wrong link count, size,
/// block count, a deletion time, a broken extent header or inline data,
/// a uid; by hand (checksum left wrong) a flipped size byte, a zeroed
/// record, a flipped checksum. Returns how many inode-table chunks the
/// damage touches.
fn damage(dir: &Path, img: &Path, inos: &[u64], want: usize) -> usize {
    use std::os::unix::fs::FileExt;
    let bs = sb_field(img, "Block size");
    let isz = sb_field(img, "Inode size");
    let ipg = sb_field(img, "Inodes per group");
    let per_chunk = (CHUNK_BYTES / isz).max(1);
    let step = (inos.len() / want).max(1);
    let picked: Vec<u64> = inos.iter().step_by(step).copied().collect();
    let mut sif = String::new();
    let mut imap = String::new();
    let mut raw = Vec::new();
    let mut chunks = std::collections::BTreeSet::new();
    for (j, &i) in picked.iter().enumerate() {
        let g = (i - 1) / ipg;
        chunks.insert((g, ((i - 1) % ipg) / per_chunk));
        let cmd = match j % 9 {
            0 => format!("sif <{i}> links_count {}", 2 + j % 5),
            1 => format!("sif <{i}> size {}", if j % 2 == 0 { 1 } else { 1u64 << 40 }),
            2 => format!("sif <{i}> blocks {}", 8 * j + 5),
            3 => format!("sif <{i}> dtime 1600000000"),
            4 => format!("sif <{i}> block[0] 0x1234"),
            5 => format!("sif <{i}> uid {}", 1000 + j),
            6 => format!("sif <{i}> mode 0{:o}", 0o170644),
            _ => {
                imap += &format!("imap <{i}>\n");
                raw.push((i, j % 3));
                continue;
            }
        };
        sif += &cmd;
        sif.push('\n');
    }
    let cmds = dir.join("sif.cmds");
    fs::write(&cmds, sif).unwrap();
    let o = run(Command::new("debugfs")
        .args(["-w", "-f"])
        .arg(&cmds)
        .arg(img));
    assert!(o.status.success(), "debugfs -f: {o:?}");
    fs::write(&cmds, imap).unwrap();
    let o = run(Command::new("debugfs").arg("-f").arg(&cmds).arg(img));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    // "\tlocated at block 1234, offset 0x0b00", one per imap, in order.
    let places: Vec<u64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("located at block "))
        .map(|l| {
            let (b, off) = l.split_once(", offset 0x").unwrap();
            b.parse::<u64>().unwrap() * bs + u64::from_str_radix(off.trim(), 16).unwrap()
        })
        .collect();
    assert_eq!(places.len(), raw.len(), "debugfs imap:\n{text}");
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    for (&at, &(_, how)) in places.iter().zip(&raw) {
        let mut rec = vec![0u8; isz as usize];
        f.read_exact_at(&mut rec, at).unwrap();
        match how {
            0 => rec[4] ^= 0x5a,
            1 => rec.fill(0),
            _ => rec[0x7C] ^= 0xff,
        }
        f.write_all_at(&rec, at).unwrap();
    }
    chunks.len()
}

fn strs(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Makes, fills (through a loop mount), damages and compares one image.
fn generated(g: &Gen) {
    if !is_root() || !have("mke2fs") || !have("debugfs") || !have("dumpe2fs") {
        println!("skipped {}: needs root (loop mount) and e2fsprogs", g.name);
        return;
    }
    let start = Instant::now();
    let dir = TempDir::new(&format!("par-{}", g.name));
    let img = dir.path("gen.img");
    let args: Vec<&str> = g.mkfs.iter().map(String::as_str).collect();
    make_image(Command::new("mke2fs"), &args, &img, g.size).unwrap();
    let inos = {
        let _m = LoopMount::new(&img, &dir.path("mnt")).unwrap();
        fill(&dir.path("mnt"), g)
    };
    let chunks = damage(&dir.0, &img, &inos, 120);
    let mut bad = Vec::new();
    let r = compare(&dir.0, &img, g.name, true, &pinned_now(), &mut bad);
    let problems = r.out.lines().filter(|l| l.ends_with("? no")).count();
    println!(
        "{}: {} inodes in use, damage over {chunks} inode-table chunks, -fn -m1 exit {:?} \
         with {problems} questions; {} differ, {:.1} s",
        g.name,
        inos.len(),
        r.code,
        bad.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert_eq!(r.code, Some(4), "the damage must be found: {}", r.out);
    assert!(chunks >= 8, "the damage must be spread: {chunks} chunks");
}

#[test]
fn kernel_filled_ext4_damaged_in_every_chunk() {
    generated(&Gen {
        name: "ext4",
        // 16 groups of 2,048 inodes: two chunks of inode table each.
        mkfs: strs(&[
            "-t", "ext4", "-b", "4096", "-g", "2048", "-O", "^flex_bg", "-N", "32768",
        ]),
        size: "256M",
        dirs: 48,
        files: 100,
        small: false,
    });
}

#[test]
fn kernel_filled_inline_data_damaged_in_every_chunk() {
    generated(&Gen {
        name: "inline",
        mkfs: strs(&[
            "-t",
            "ext4",
            "-b",
            "1024",
            "-O",
            "inline_data",
            "-g",
            "4096",
            "-G",
            "2",
            "-N",
            "16384",
        ]),
        size: "96M",
        dirs: 32,
        files: 80,
        small: true,
    });
}

#[test]
fn kernel_filled_with_a_bad_block_list() {
    if !have("mke2fs") {
        println!("skipped: no mke2fs");
        return;
    }
    let list = std::env::temp_dir().join(format!("ext4r-par-bb-{}", std::process::id()));
    fs::write(&list, "20000\n20001\n40000\n60123\n").unwrap();
    let l = list.to_str().unwrap().to_string();
    generated(&Gen {
        name: "badblocks",
        mkfs: strs(&[
            "-t", "ext4", "-b", "4096", "-g", "4096", "-O", "^flex_bg", "-N", "16384", "-l", &l,
        ]),
        size: "256M",
        dirs: 24,
        files: 60,
        small: false,
    });
    let _ = fs::remove_file(&list);
}

/// Quota without a mount (the kernel here has no quota support): filled
/// by `mke2fs -d` from a tree of files with several owners, then damaged.
#[test]
fn quota_filled_by_mke2fs() {
    if !have("mke2fs") || !have("debugfs") || !have("dumpe2fs") {
        println!("skipped: needs e2fsprogs");
        return;
    }
    let start = Instant::now();
    let dir = TempDir::new("par-quota");
    let src = dir.path("src");
    let mut n = 0u32;
    for d in 0..24 {
        let dp = src.join(format!("d{d}"));
        fs::create_dir_all(&dp).unwrap();
        for i in 0..80 {
            let p = dp.join(format!("f{i}"));
            fs::write(&p, vec![n as u8; (n as usize * 331) % 9000]).unwrap();
            if is_root() {
                std::os::unix::fs::chown(&p, Some(1000 + n % 5), Some(2000 + n % 3)).unwrap();
            }
            n += 1;
        }
    }
    let img = dir.path("q.img");
    let s = src.to_str().unwrap();
    make_image(
        Command::new("mke2fs"),
        &[
            "-t", "ext4", "-b", "1024", "-O", "quota", "-g", "2048", "-N", "16384", "-d", s,
        ],
        &img,
        "64M",
    )
    .unwrap();
    let o = run(Command::new("debugfs").args(["-R", "ls -l /"]).arg(&img));
    assert!(o.status.success());
    // Every inode mke2fs used (it allocates them in order).
    let used = sb_field(&img, "Inode count") - sb_field(&img, "Free inodes");
    let first = sb_field(&img, "First inode");
    let inos: Vec<u64> = (first..=used).collect();
    let chunks = damage(&dir.0, &img, &inos, 100);
    let mut bad = Vec::new();
    let r = compare(&dir.0, &img, "quota", true, &pinned_now(), &mut bad);
    println!(
        "quota: {} files, damage over {chunks} inode-table chunks, -fn -m1 exit {:?}; \
         {} differ, {:.1} s",
        n,
        r.code,
        bad.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert_eq!(r.code, Some(4), "the damage must be found: {}", r.out);
}
