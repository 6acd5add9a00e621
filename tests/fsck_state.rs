//! What fsck records about itself in the superblock, against e2fsck 1.47:
//! each case damages an image with debugfs, runs `fsck.ext4r` on one copy
//! and `e2fsck` on its twin with the same options and the same clock
//! (`E2FSCK_TIME`), and compares the exit codes and the superblock's
//! `s_state`, `s_mnt_count`, `s_lastcheck` and the kernel's error record
//! (`s_error_count`, first and last error time, inode, block, function,
//! line and code), which every image starts with. Runs: `-n`; `-p` on a
//! clean filesystem (skipped, and forced by the mount count or `-f`),
//! fixing what preen may fix, and stopping at "UNEXPECTED INCONSISTENCY"
//! (after fixing what came before, which is compared too); `-y` clean and
//! fixing; and runs interrupted by SIGINT or SIGTERM. Then: after a clean
//! `-f` check of ours, `tune.ext4r -O metadata_csum` no longer asks for a
//! freshly checked filesystem.
//!
//! `s_wtime` and `s_kbytes_written` are not compared: e2fsck 1.47.0
//! rewrites its journal's superblock even when a preen run finds the
//! filesystem clean (so its superblock gets a new write time and lifetime
//! writes), where ours writes nothing then.
//!
//! Interrupting at a reproducible point: each checker writes its `-C`
//! progress lines into a FIFO of one page that nobody reads, so it blocks
//! in the middle of its passes (e2fsck in pass 1, ours in pass 5 of its
//! first round, as their lines fill the page); the signal comes then, and
//! the FIFO is drained so that each goes on to where it looks at the
//! signal's flag.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The checkers' clock: a day after the images were made.
const NOW: &str = "1700086400";

/// debugfs's clock for what it writes (s_wtime, inode times), before NOW
/// so that no time is in the future.
const DEBUGFS_TIME: &str = "set_current_time @1700000500";

/// What the kernel records when it meets an error, set on every image so
/// that clearing it shows.
const ERROR_RECORD: &[&str] = &[
    "ssv error_count 3",
    "ssv first_error_time @1699990000",
    "ssv first_error_ino 12",
    "ssv first_error_block 2328",
    "ssv first_error_func ext4_lookup",
    "ssv first_error_line 100",
    "ssv last_error_time @1699995000",
    "ssv last_error_ino 14",
    "ssv last_error_block 2330",
    "ssv last_error_func ext4_iget",
    "ssv last_error_line 200",
];

/// The superblock fields a check's bookkeeping touches.
#[derive(Debug, PartialEq, Eq)]
struct Bookkeeping {
    state: u16,
    mnt_count: u16,
    lastcheck: u32,
    lastcheck_hi: u8,
    error_count: u32,
    first_error: (u32, u32, u32, String),
    last_error: (u32, u32, u32, String),
    /// Bytes 0x194..0x200 (what e2fsck clears) and 0x27c..0x280 (the
    /// error times' high bytes and error codes, which it keeps).
    error_bytes: Vec<u8>,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn func(b: &[u8], at: usize) -> String {
    let f = &b[at..at + 32];
    let end = f.iter().position(|&c| c == 0).unwrap_or(32);
    String::from_utf8_lossy(&f[..end]).into_owned()
}

/// The primary superblock's bookkeeping fields, read at the kernel's
/// offsets (not through our parser).
fn bookkeeping(img: &Path) -> Bookkeeping {
    let mut f = std::fs::File::open(img).unwrap();
    let mut sb = vec![0u8; 2048];
    f.read_exact(&mut sb).unwrap();
    let sb = &sb[1024..];
    let mut error_bytes = sb[0x194..0x200].to_vec();
    error_bytes.extend_from_slice(&sb[0x27c..0x280]);
    Bookkeeping {
        state: le16(sb, 0x3a),
        mnt_count: le16(sb, 0x34),
        lastcheck: le32(sb, 0x40),
        lastcheck_hi: sb[0x277],
        error_count: le32(sb, 0x194),
        // (time, inode, line, function)
        first_error: (
            le32(sb, 0x198),
            le32(sb, 0x19c),
            le32(sb, 0x1c8),
            func(sb, 0x1a8),
        ),
        last_error: (
            le32(sb, 0x1cc),
            le32(sb, 0x1d0),
            le32(sb, 0x1d4),
            func(sb, 0x1e0),
        ),
        error_bytes,
    }
}

fn debugfs_w(img: &Path, cmds: &[String]) {
    let script = img.with_extension("debugfs");
    std::fs::write(&script, cmds.join("\n") + "\n").unwrap();
    let o = run(Command::new("debugfs")
        .arg("-w")
        .arg("-f")
        .arg(&script)
        .arg(img));
    assert!(o.status.success(), "debugfs {cmds:?}: {o:?}");
}

/// A fresh ext4 image (1 KiB blocks; `extra` mke2fs options) with
/// /file1 (inode 12), /d1 (13) and /d1/file2 (14), and the kernel's error
/// record filled in; filesystem state clean.
fn base_image(dir: &TempDir, img: &Path, extra: &[&str], size: &str) {
    let mut args = vec!["-t", "ext4", "-b", "1024"];
    args.extend_from_slice(extra);
    make_image(Command::new("mke2fs"), &args, img, size).unwrap();
    let data = dir.path("data.txt");
    std::fs::write(&data, b"hello\n").unwrap();
    let d = data.display();
    let mut cmds = vec![
        DEBUGFS_TIME.to_string(),
        format!("write {d} file1"),
        "mkdir d1".into(),
        format!("write {d} d1/file2"),
    ];
    cmds.extend(ERROR_RECORD.iter().map(|s| s.to_string()));
    debugfs_w(img, &cmds);
}

/// The physical block of `ino`'s first block.
fn first_block(img: &Path, ino: u32) -> String {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("bmap <{ino}> 0")])
        .arg(img));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `i_blocks` and links of an inode, as debugfs shows them.
fn inode_counts(img: &Path, ino: u32) -> String {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("stat <{ino}>")])
        .arg(img));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.contains("Blockcount"))
        .unwrap_or("")
        .trim()
        .to_string()
}

fn ours_fsck() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ext4r"));
    c.arg("fsck");
    c
}

/// Runs a checker on `img` at NOW: exit code and output.
fn check(mut cmd: Command, args: &[&str], img: &Path) -> (i32, String) {
    let o = run(cmd
        .env("E2FSCK_TIME", NOW)
        .args(args)
        .arg(img)
        .stdin(Stdio::null()));
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

struct Case {
    name: &'static str,
    /// debugfs commands after the base image; `{B12}` is /file1's block.
    damage: &'static [&'static str],
    /// Bytes the image is cut to afterwards (a filesystem larger than its
    /// device).
    truncate: Option<&'static str>,
    args: &'static [&'static str],
    /// e2fsck's exit code, so that a case is what its name says.
    e2fsck_exit: i32,
    /// An inode whose counts must come out the same (a preen-safe fix
    /// made before a stop).
    inode: Option<u32>,
    /// Words that must be in both outputs or in neither.
    words: Option<&'static str>,
}

const CASES: &[Case] = &[
    Case {
        name: "-fn clean",
        damage: &[],
        truncate: None,
        args: &["-fn"],
        e2fsck_exit: 0,
        inode: None,
        words: None,
    },
    Case {
        name: "-n, not cleanly unmounted, i_blocks wrong",
        damage: &["ssv state 0", "sif <12> blocks 10"],
        truncate: None,
        args: &["-n"],
        e2fsck_exit: 4,
        inode: None,
        words: None,
    },
    Case {
        name: "-p clean: skipped",
        damage: &[],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 0,
        inode: None,
        words: None,
    },
    Case {
        name: "-p clean, forced by the mount count",
        damage: &["ssv max_mnt_count 20", "ssv mnt_count 25"],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 0,
        inode: None,
        words: None,
    },
    Case {
        name: "-fp clean",
        damage: &["ssv mnt_count 7"],
        truncate: None,
        args: &["-fp"],
        e2fsck_exit: 0,
        inode: None,
        words: None,
    },
    Case {
        name: "-p fixes i_blocks (not cleanly unmounted)",
        damage: &["ssv state 0", "sif <12> blocks 10"],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 1,
        inode: Some(12),
        words: None,
    },
    Case {
        name: "-p, last write an hour ahead: e2fsck looks only with -f",
        damage: &["set_current_time @1700090000", "ssv state 0"],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 1,
        inode: None,
        words: Some("in the future"),
    },
    Case {
        name: "-p fixes free counts (errors flagged, orphan bit)",
        damage: &[
            "ssv state 6",
            "ssv free_blocks_count 100",
            "ssv free_inodes_count 50",
        ],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 1,
        inode: None,
        words: None,
    },
    Case {
        name: "-p clears an entry to an unused inode",
        damage: &["ssv state 0", "clri <12>"],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 1,
        inode: None,
        words: None,
    },
    Case {
        name: "-p stops at a bad extent header after fixing i_blocks",
        damage: &["ssv state 0", "sif <12> blocks 10", "sif <14> block[0] 0"],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 4,
        inode: Some(12),
        words: None,
    },
    Case {
        name: "-p forced by the mount count stops at a bad extent header",
        damage: &[
            "ssv max_mnt_count 20",
            "ssv mnt_count 25",
            "sif <14> block[0] 0",
        ],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 4,
        inode: None,
        words: None,
    },
    Case {
        name: "-p stops at a block claimed twice after fixing i_blocks",
        damage: &[
            "ssv state 0",
            "sif <13> blocks 10",
            "sif <14> block[5] {B12}",
        ],
        truncate: None,
        args: &["-p"],
        e2fsck_exit: 4,
        inode: Some(13),
        words: None,
    },
    Case {
        name: "-p stops at a filesystem larger than its device",
        damage: &[],
        truncate: Some("30M"),
        args: &["-p"],
        e2fsck_exit: 4,
        inode: None,
        words: None,
    },
    Case {
        name: "-fy clean",
        damage: &["ssv mnt_count 7"],
        truncate: None,
        args: &["-fy"],
        e2fsck_exit: 0,
        inode: None,
        words: None,
    },
    Case {
        name: "-y errors flagged, nothing wrong",
        damage: &["ssv state 3"],
        truncate: None,
        args: &["-y"],
        e2fsck_exit: 0,
        inode: None,
        words: None,
    },
    Case {
        name: "-y fixes i_blocks and a bad extent header",
        damage: &["ssv state 0", "sif <12> blocks 10", "sif <14> block[0] 0"],
        truncate: None,
        args: &["-y"],
        e2fsck_exit: 1,
        inode: Some(12),
        words: None,
    },
];

#[test]
fn bookkeeping_equals_e2fscks() {
    if !have("e2fsck") || !have("debugfs") || !have("mke2fs") {
        eprintln!("skipped: e2fsprogs not installed");
        return;
    }
    let dir = TempDir::new("fsck-state");
    let base = dir.path("base.img");
    base_image(&dir, &base, &[], "32M");
    let b12 = first_block(&base, 12);
    let mut failures = Vec::new();
    for case in CASES {
        let (ours, theirs) = (dir.path("ours.img"), dir.path("theirs.img"));
        copy_sparse(&base, &ours).unwrap();
        let mut cmds = vec![DEBUGFS_TIME.to_string()];
        cmds.extend(case.damage.iter().map(|c| c.replace("{B12}", &b12)));
        debugfs_w(&ours, &cmds);
        if let Some(size) = case.truncate {
            let o = run(Command::new("truncate").args(["-s", size]).arg(&ours));
            assert!(o.status.success());
        }
        copy_sparse(&ours, &theirs).unwrap();
        let before = bookkeeping(&ours);
        let (ro, out_o) = check(ours_fsck(), case.args, &ours);
        let (rt, out_t) = check(Command::new("e2fsck"), case.args, &theirs);
        let (bo, bt) = (bookkeeping(&ours), bookkeeping(&theirs));
        let inodes = case
            .inode
            .map(|i| (inode_counts(&ours, i), inode_counts(&theirs, i)));
        println!(
            "{:<62} exit {ro} (e2fsck {rt})  state {:#x} -> {:#x} ({:#x})  mnt {} -> {} ({})  \
             lastcheck {} -> {} ({})  errors {} -> {} ({})",
            case.name,
            before.state,
            bo.state,
            bt.state,
            before.mnt_count,
            bo.mnt_count,
            bt.mnt_count,
            before.lastcheck,
            bo.lastcheck,
            bt.lastcheck,
            before.error_count,
            bo.error_count,
            bt.error_count,
        );
        let mut why = Vec::new();
        if rt != case.e2fsck_exit {
            why.push(format!(
                "e2fsck exit {rt}, the case expects {}: {out_t}",
                case.e2fsck_exit
            ));
        }
        if ro != rt {
            why.push(format!("exit {ro}, e2fsck's {rt}"));
        }
        if bo != bt {
            why.push(format!("superblock\n  ours   {bo:?}\n  e2fsck {bt:?}"));
        }
        if let Some(w) = case.words {
            if out_o.contains(w) != out_t.contains(w) {
                why.push(format!("{w:?} said by one of the two only"));
            }
        }
        if let Some((o, t)) = inodes {
            if o != t {
                why.push(format!("inode counts: ours {o:?}, e2fsck {t:?}"));
            }
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n--- ours:\n{out_o}--- e2fsck:\n{out_t}",
                case.name,
                why.join("; ")
            ));
        }
    }
    println!(
        "{} of {} cases: exit code and bookkeeping equal to e2fsck's",
        CASES.len() - failures.len(),
        CASES.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Runs `cmd ... -C 3 img 3>FIFO` with a one-page FIFO nobody reads until
/// the checker blocks on it, sends `signal`, drains the FIFO, and returns
/// the exit code, the output, and the progress line it was blocked after.
fn interrupted(
    dir: &TempDir,
    program: &str,
    args: &[&str],
    img: &Path,
    signal: rustix::process::Signal,
) -> (i32, String, String) {
    let fifo = dir.path("progress.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(run(Command::new("mkfifo").arg(&fifo)).status.success());
    // The reading end first (without blocking), so that the checker's
    // open for writing does not wait; one page, so that it fills early.
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&fifo)
        .unwrap();
    rustix::pipe::fcntl_setpipe_size(&reader, 4096).unwrap();
    let line = format!(
        "exec {program} {} -C 3 '{}' 3>'{}'",
        args.join(" "),
        img.display(),
        fifo.display()
    );
    let child = Command::new("sh")
        .args(["-c", &line])
        .env("E2FSCK_TIME", NOW)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    // Blocked: the page holds all but less than a line, and stays so.
    let start = Instant::now();
    let (mut last, mut steady) = (0u64, 0);
    loop {
        let n = rustix::io::ioctl_fionread(&reader).unwrap();
        steady = if n == last && n > 3500 { steady + 1 } else { 0 };
        last = n;
        if steady >= 10 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{program} never blocked on its progress FIFO ({n} bytes in it)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    rustix::process::kill_process(pid, signal).unwrap();
    // Drained until the checker is gone (it closes its end as it exits).
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("reading the progress FIFO: {e}"),
        }
    }
    let o = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&all);
    let lines: Vec<&str> = text.lines().collect();
    // The line it was about to write when it blocked follows the page.
    let blocked_at = lines
        .iter()
        .scan(0usize, |bytes, l| {
            *bytes += l.len() + 1;
            Some((*bytes, *l))
        })
        .find(|(bytes, _)| *bytes > last as usize)
        .map_or(String::new(), |(_, l)| {
            l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
        });
    let code = o.status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + o.status.signal().unwrap_or(0)
    });
    (
        code,
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        blocked_at,
    )
}

/// A run interrupted by a signal.
struct SigCase {
    name: &'static str,
    damage: &'static [&'static str],
    args: &'static [&'static str],
    signal: rustix::process::Signal,
    e2fsck_exit: i32,
}

#[test]
fn interrupted_runs_leave_the_state_as_e2fsck() {
    if !have("e2fsck") || !have("debugfs") || !have("mke2fs") || !have("mkfifo") {
        eprintln!("skipped: e2fsprogs or mkfifo not installed");
        return;
    }
    let dir = TempDir::new("fsck-state-sig");
    // 256 groups, and a long path in every progress line: both checkers
    // fill the page before they end.
    let long = dir.path(&"x".repeat(150));
    std::fs::create_dir_all(&long).unwrap();
    let base = long.join("base.img");
    base_image(&dir, &base, &["-g", "256"], "64M");
    use rustix::process::Signal;
    let cases = [
        SigCase {
            name: "-fy clean, SIGINT",
            damage: &[],
            args: &["-fy"],
            signal: Signal::INT,
            e2fsck_exit: 32,
        },
        SigCase {
            name: "-y errors flagged, i_blocks wrong, SIGTERM",
            damage: &["ssv state 3", "sif <12> blocks 10"],
            args: &["-y"],
            signal: Signal::TERM,
            e2fsck_exit: 36,
        },
        SigCase {
            name: "-p not cleanly unmounted, SIGINT",
            damage: &["ssv state 0"],
            args: &["-p"],
            signal: Signal::INT,
            e2fsck_exit: 32,
        },
        SigCase {
            name: "-fn i_blocks wrong, SIGINT",
            damage: &["sif <12> blocks 10"],
            args: &["-fn"],
            signal: Signal::INT,
            e2fsck_exit: 36,
        },
    ];
    let ext4r = env!("CARGO_BIN_EXE_ext4r");
    let mut failures = Vec::new();
    for SigCase {
        name,
        damage,
        args,
        signal,
        e2fsck_exit: want,
    } in cases
    {
        let (ours, theirs) = (long.join("ours.img"), long.join("theirs.img"));
        copy_sparse(&base, &ours).unwrap();
        let mut cmds = vec![DEBUGFS_TIME.to_string()];
        cmds.extend(damage.iter().map(|c| c.to_string()));
        debugfs_w(&ours, &cmds);
        copy_sparse(&ours, &theirs).unwrap();
        let before = bookkeeping(&ours);
        let (ro, out_o, at_o) = interrupted(&dir, &format!("{ext4r} fsck"), args, &ours, signal);
        let (rt, out_t, at_t) = interrupted(&dir, "e2fsck", args, &theirs, signal);
        let (bo, bt) = (bookkeeping(&ours), bookkeeping(&theirs));
        println!(
            "{name:<45} blocked at \"{at_o}\" (e2fsck \"{at_t}\"), exit {ro} (e2fsck {rt})  \
             state {:#x} -> {:#x} ({:#x})  mnt {} -> {} ({})  lastcheck {} -> {} ({})  \
             errors {} -> {} ({})",
            before.state,
            bo.state,
            bt.state,
            before.mnt_count,
            bo.mnt_count,
            bt.mnt_count,
            before.lastcheck,
            bo.lastcheck,
            bt.lastcheck,
            before.error_count,
            bo.error_count,
            bt.error_count,
        );
        let mut why = Vec::new();
        if rt != want {
            why.push(format!("e2fsck exit {rt}, the case expects {want}"));
        }
        if ro != rt {
            why.push(format!("exit {ro}, e2fsck's {rt}"));
        }
        if bo != bt {
            why.push(format!("superblock\n  ours   {bo:?}\n  e2fsck {bt:?}"));
        }
        if bo != before {
            why.push("ours changed the bookkeeping".to_string());
        }
        if !out_o.contains("canceled") {
            why.push("ours did not say it was canceled".to_string());
        }
        if !why.is_empty() {
            failures.push(format!(
                "{name}: {}\n--- ours:\n{out_o}--- e2fsck:\n{out_t}",
                why.join("; ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// tune2fs's rule for changes that rewrite metadata: the filesystem must
/// be valid, without errors, and checked after it was last mounted. A
/// clean `-f` check of ours makes it so, as e2fsck's does.
#[test]
fn tune_takes_our_check_as_fresh() {
    if !have("e2fsck") || !have("debugfs") || !have("mke2fs") || !have("tune2fs") {
        eprintln!("skipped: e2fsprogs not installed");
        return;
    }
    let dir = TempDir::new("fsck-state-tune");
    let base = dir.path("base.img");
    base_image(&dir, &base, &["-O", "^metadata_csum"], "32M");
    // Mounted after the last check, as the kernel leaves it.
    debugfs_w(
        &base,
        &[DEBUGFS_TIME.to_string(), "ssv mtime @1700000600".into()],
    );
    let refused = "requires a freshly checked filesystem";
    let (r, out) = tune_at(ours_tune().args(["-O", "metadata_csum"]), &base);
    assert!(
        r != 0 && out.contains(refused),
        "tune took an unchecked filesystem: exit {r}: {out}"
    );
    for args in [&["-fy"][..], &["-fp"], &["-fn"]] {
        let img = dir.path("ours.img");
        copy_sparse(&base, &img).unwrap();
        let (rc, out) = check(ours_fsck(), args, &img);
        assert_eq!(rc, 0, "fsck {args:?}: {out}");
        let (r, tout) = tune_at(ours_tune().args(["-O", "metadata_csum"]), &img);
        println!(
            "fsck.ext4r {args:?} (exit {rc}), then tune.ext4r -O metadata_csum: exit {r}{}",
            if tout.contains(refused) {
                " (refused: not freshly checked)"
            } else {
                ""
            }
        );
        if args == ["-fn"] {
            // A read-only check records nothing.
            assert!(r != 0 && tout.contains(refused), "after -fn: {tout}");
            continue;
        }
        assert_eq!(r, 0, "tune after fsck {args:?}: {tout}");
        let (rc, eout) = e2fsck_fn(&img);
        assert_eq!(rc, 0, "e2fsck -fn after tune: {eout}");
        // The oracle: the same on e2fsck's twin.
        let twin = dir.path("theirs.img");
        copy_sparse(&base, &twin).unwrap();
        let (rc, out) = check(Command::new("e2fsck"), args, &twin);
        assert_eq!(rc, 0, "e2fsck {args:?}: {out}");
        let (r, tout) = tune_at(Command::new("tune2fs").args(["-O", "metadata_csum"]), &twin);
        assert_eq!(r, 0, "tune2fs after e2fsck {args:?}: {tout}");
    }
}
