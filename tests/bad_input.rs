//! Bad input costs nothing: every tool, on inputs that hold no usable
//! filesystem or that it must not change, against its e2fsprogs
//! counterpart on a twin of the input. Each pair must land in the same
//! exit-code class, ours must never panic, and wherever ours refused or
//! failed the input must be byte-identical afterwards. Plus one
//! regression test per case of issue 17 that broke data before.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a tool's exit code means, coarsely enough to compare tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Ok,
    /// e2fsck: errors corrected (1, 2).
    Fixed,
    /// e2fsck: errors left (4, 12); mke2fs/tune2fs/read tools: failed.
    Failed,
    /// e2fsck: operational error (8).
    Operational,
    /// e2fsck: usage (16).
    Usage,
    /// A panic (101, 134) or a signal: never acceptable.
    Crash,
}

/// As `cargo xtask corpus` reads e2fsck: errors left (bit 4) first, then
/// an operational error (bit 8, with 1 or'ed in when it wrote before it
/// stopped), then corrected.
fn fsck_class(code: Option<i32>) -> Class {
    match code {
        Some(0) => Class::Ok,
        Some(16) => Class::Usage,
        Some(c @ 1..=15) if c & 4 != 0 => Class::Failed,
        Some(c @ 1..=15) if c & 8 != 0 => Class::Operational,
        Some(1..=3) => Class::Fixed,
        _ => Class::Crash,
    }
}

fn tool_class(code: Option<i32>) -> Class {
    match code {
        Some(0) => Class::Ok,
        Some(101 | 134) | None => Class::Crash,
        Some(_) => Class::Failed,
    }
}

/// How each tool is run: our arguments, theirs, and how to read the codes.
struct Tool {
    name: &'static str,
    ours: &'static [&'static str],
    theirs: &'static [&'static str],
    fsck: bool,
    /// debugfs exits 0 whatever happens: its failure is "Filesystem not open".
    debugfs: bool,
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "mkfs",
        ours: &["mkfs", "-q", "-F"],
        theirs: &["mke2fs", "-q", "-F", "-t", "ext4"],
        fsck: false,
        debugfs: false,
    },
    Tool {
        name: "fsck -n",
        ours: &["fsck", "-fn"],
        theirs: &["e2fsck", "-fn"],
        fsck: true,
        debugfs: false,
    },
    Tool {
        name: "fsck -y",
        ours: &["fsck", "-fy"],
        theirs: &["e2fsck", "-fy"],
        fsck: true,
        debugfs: false,
    },
    Tool {
        name: "fsck -p",
        ours: &["fsck", "-p"],
        theirs: &["e2fsck", "-p"],
        fsck: true,
        debugfs: false,
    },
    Tool {
        name: "tune -L",
        ours: &["tune", "-L", "x"],
        theirs: &["tune2fs", "-L", "x"],
        fsck: false,
        debugfs: false,
    },
    Tool {
        name: "ls",
        ours: &["ls"],
        theirs: &["debugfs", "-R", "ls"],
        fsck: false,
        debugfs: true,
    },
    Tool {
        name: "cat",
        ours: &["cat", "@", "/hello"],
        theirs: &["debugfs", "-R", "cat /hello"],
        fsck: false,
        debugfs: true,
    },
];

/// Deliberate differences, each with its reason.
fn expected_difference(tool: &str, input: &str) -> Option<&'static str> {
    match (tool, input) {
        ("tune -L", "truncated to half") => Some(
            "tune2fs writes the label and grows an image file past its end (and fails half \
             way on a block device); tune.ext4r refuses a filesystem larger than its device \
             and writes nothing",
        ),
        ("tune -L", "mounted image") => Some(
            "tune2fs writes the image file under the kernel's feet; tune.ext4r changes a \
             mounted filesystem only through its block device (see the README)",
        ),
        _ => None,
    }
}

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

/// Runs our tool on `input`; the image argument goes where `@` is, or last.
fn run_ours(t: &Tool, input: &Path) -> (Class, String) {
    let mut cmd = ext4r();
    let mut placed = false;
    for a in t.ours {
        if *a == "@" {
            cmd.arg(input);
            placed = true;
        } else {
            cmd.arg(a);
        }
    }
    if !placed {
        cmd.arg(input);
    }
    cmd.stdin(std::process::Stdio::null());
    let o = run(&mut cmd);
    let class = if t.fsck {
        fsck_class(o.status.code())
    } else {
        tool_class(o.status.code())
    };
    (class, String::from_utf8_lossy(&o.stderr).into_owned())
}

fn run_theirs(t: &Tool, input: &Path) -> Class {
    let mut cmd = Command::new(t.theirs[0]);
    cmd.args(&t.theirs[1..]).arg(input);
    cmd.stdin(std::process::Stdio::null());
    let o = run(&mut cmd);
    if t.fsck {
        fsck_class(o.status.code())
    } else if t.debugfs {
        let err = String::from_utf8_lossy(&o.stderr);
        if err.contains("Filesystem not open") || err.contains("File not found") {
            Class::Failed
        } else {
            Class::Ok
        }
    } else {
        tool_class(o.status.code())
    }
}

fn hash(p: &Path) -> Option<Vec<u8>> {
    std::fs::read(p).ok()
}

/// A read-only loop device over an image, detached on drop.
struct RoLoop(String);

impl RoLoop {
    fn new(img: &Path) -> Option<Self> {
        let o = run(Command::new("losetup")
            .args(["-r", "-f", "--show"])
            .arg(img));
        o.status
            .success()
            .then(|| RoLoop(String::from_utf8_lossy(&o.stdout).trim().to_string()))
    }
}

impl Drop for RoLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.0).output();
    }
}

/// The inputs: (name, path to hand to the tool, file to copy per run if
/// any). Copies keep each run's input fresh and let its bytes be compared.
fn inputs(dir: &TempDir) -> Vec<(&'static str, PathBuf, bool)> {
    let good = dir.path("good.img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &good, "32M").unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let hello = write("hello.txt", b"hello\n");
    let w = run(Command::new("debugfs")
        .arg("-w")
        .arg("-R")
        .arg(format!("write {} hello", hello.display()))
        .arg(&good));
    assert!(w.status.success(), "{w:?}");
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let random: Vec<u8> = (0..1 << 20)
        .map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng as u8
        })
        .collect();
    let half = dir.path("half.img");
    copy_sparse(&good, &half).unwrap();
    run(Command::new("truncate").args(["-s", "16M"]).arg(&half));
    // Feature bits no e2fsprogs or ext4r release knows, one per word:
    // e2fsck refuses to check each (exit 12 or 8), and so must we.
    let featured = |name: &str, feature: &str| {
        let p = dir.path(name);
        copy_sparse(&good, &p).unwrap();
        let o = run(Command::new("debugfs")
            .arg("-w")
            .arg("-R")
            .arg(format!("feature {feature}"))
            .arg(&p));
        assert!(o.status.success(), "{o:?}");
        p
    };
    let unknown = [
        (
            "unknown compat feature",
            featured("compat.img", "FEATURE_C14"),
        ),
        (
            "unknown ro_compat feature",
            featured("ro_compat.img", "FEATURE_R24"),
        ),
        (
            "unknown incompat feature",
            featured("incompat.img", "FEATURE_I18"),
        ),
    ];
    // metadata_csum naming an algorithm other than CRC32C (its own
    // checksum sound): libext2fs and the kernel refuse to open it, and
    // e2fsck tries no backup.
    let csum_type = dir.path("csum_type.img");
    copy_sparse(&good, &csum_type).unwrap();
    let o = run(Command::new("debugfs")
        .arg("-w")
        .arg("-R")
        .arg("ssv checksum_type 2")
        .arg(&csum_type));
    assert!(o.status.success(), "{o:?}");
    let sub = dir.path("a-directory");
    std::fs::create_dir_all(&sub).unwrap();
    vec![
        ("nonexistent path", dir.path("no-such-file"), false),
        ("a directory", sub, false),
        ("/dev/null", PathBuf::from("/dev/null"), false),
        ("empty file", write("empty.img", &[]), true),
        ("4 KiB of zeros", write("zero4k.img", &[0; 4096]), true),
        ("1 MiB of random bytes", write("random.img", &random), true),
        ("truncated to half", half, true),
        ("a valid image", good, true),
        ("unknown checksum algorithm", csum_type, true),
    ]
    .into_iter()
    .chain(unknown.map(|(name, p)| (name, p, true)))
    .collect()
}

#[test]
fn bad_input_matrix() {
    if !have("mke2fs") || !have("e2fsck") || !have("tune2fs") || !have("debugfs") {
        println!("skipped: e2fsprogs not installed");
        return;
    }
    let dir = TempDir::new("bad-input");
    let mut rows = inputs(&dir);
    // A read-only block device and a mounted image need root.
    let ro = if is_root() {
        RoLoop::new(&dir.path("good.img"))
    } else {
        println!("read-only and mounted inputs skipped: not root");
        None
    };
    if let Some(ro) = &ro {
        rows.push(("read-only loop device", PathBuf::from(&ro.0), false));
    }
    let mounted_img = dir.path("mounted.img");
    copy_sparse(dir.path("good.img"), &mounted_img).unwrap();
    let _mount = is_root()
        .then(|| LoopMount::new(&mounted_img, &dir.path("mnt")).ok())
        .flatten();
    if _mount.is_some() {
        rows.push(("mounted image", mounted_img.clone(), false));
    }

    let (mut same, mut differ, mut deliberate, mut untouched, mut marked) = (0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    for (input, path, copy) in &rows {
        for t in TOOLS {
            let (ours_in, theirs_in) = if *copy {
                let a = dir.path("ours.img");
                let b = dir.path("theirs.img");
                copy_sparse(path, &a).unwrap();
                copy_sparse(path, &b).unwrap();
                (a, b)
            } else {
                (path.clone(), path.clone())
            };
            let before = hash(&ours_in);
            let (ours, err) = run_ours(t, &ours_in);
            let theirs = run_theirs(t, &theirs_in);
            let line = format!(
                "{:<22} {:<8} ours {ours:?}, theirs {theirs:?}",
                input, t.name
            );
            if ours == Class::Crash {
                failures.push(format!("{line}: crashed: {err}"));
                continue;
            }
            if ours == theirs {
                same += 1;
            } else if let Some(why) = expected_difference(t.name, input) {
                deliberate += 1;
                println!("  deliberate: {line}: {why}");
            } else {
                differ += 1;
                failures.push(format!("{line}: {}", err.trim()));
            }
            let refused = !matches!(ours, Class::Ok | Class::Fixed);
            if refused && before.is_some() {
                if hash(&ours_in) == before {
                    untouched += 1;
                } else if *copy && hash(&ours_in) == hash(&theirs_in) {
                    // Written as e2fsprogs writes it: e2fsck -p records
                    // the error state when it stops (preenhalt).
                    marked += 1;
                } else {
                    failures.push(format!("{line}: refused or failed, but changed the input"));
                }
            }
        }
    }

    // Option values and unknown -E options, on a valid image.
    let good = dir.path("good.img");
    let options: &[(&[&str], &[&str], bool)] = &[
        (
            &["fsck", "-fn", "-E", "bogus"],
            &["e2fsck", "-fn", "-E", "bogus"],
            true,
        ),
        (
            &["fsck", "-fn", "-b", "x"],
            &["e2fsck", "-fn", "-b", "x"],
            true,
        ),
        (&["fsck", "-fy", "-n"], &["e2fsck", "-fy", "-n"], true),
        (&["fsck", "-fn", "-z"], &["e2fsck", "-fn", "-z"], true),
        (&["tune", "-c", "x"], &["tune2fs", "-c", "x"], false),
        (&["tune", "-E", "bogus"], &["tune2fs", "-E", "bogus"], false),
        (
            &["tune", "-e", "explode"],
            &["tune2fs", "-e", "explode"],
            false,
        ),
        (&["tune", "-O", "bogus"], &["tune2fs", "-O", "bogus"], false),
        (&["tune", "-m", "80"], &["tune2fs", "-m", "80"], false),
        (&["tune", "-U", "nope"], &["tune2fs", "-U", "nope"], false),
        (
            &["mkfs", "-F", "-E", "bogus"],
            &["mke2fs", "-F", "-E", "bogus"],
            false,
        ),
        (
            &["mkfs", "-F", "-b", "x"],
            &["mke2fs", "-F", "-b", "x"],
            false,
        ),
        (
            &["mkfs", "-F", "-O", "bogus"],
            &["mke2fs", "-F", "-O", "bogus"],
            false,
        ),
        (
            &["mkfs", "-F", "-J", "size=10000"],
            &["mke2fs", "-F", "-J", "size=10000"],
            false,
        ),
    ];
    for (ours_args, theirs_args, fsck) in options {
        let a = dir.path("ours.img");
        let b = dir.path("theirs.img");
        copy_sparse(&good, &a).unwrap();
        copy_sparse(&good, &b).unwrap();
        let before = hash(&a);
        let o = run(ext4r()
            .args(*ours_args)
            .arg(&a)
            .stdin(std::process::Stdio::null()));
        let t = run(Command::new(theirs_args[0]).args(&theirs_args[1..]).arg(&b));
        let class = if *fsck { fsck_class } else { tool_class };
        let (ours, theirs) = (class(o.status.code()), class(t.status.code()));
        let line = format!(
            "{:<30} ours {ours:?}, theirs {theirs:?}",
            ours_args.join(" ")
        );
        if ours == Class::Crash {
            failures.push(format!("{line}: crashed"));
        } else if ours == theirs {
            same += 1;
        } else {
            differ += 1;
            failures.push(line.clone());
        }
        if ours != Class::Ok {
            if hash(&a) == before {
                untouched += 1;
            } else {
                failures.push(format!("{line}: refused, but changed the image"));
            }
        }
    }
    println!(
        "bad input: {same} runs in e2fsprogs' exit class, {deliberate} deliberate differences, \
         {differ} other differences; {untouched} refusals left the input byte-identical, \
         {marked} changed it exactly as e2fsprogs did"
    );
    for f in &failures {
        println!("  FAIL {f}");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}

/// Regressions of issue 17, each of which lost data or panicked before.
mod regressions {
    use super::*;

    /// mkfs on 57–103 KiB panicked (an inode beyond the 8 the geometry
    /// leaves); now refused as mke2fs refuses, writing nothing.
    #[test]
    fn tiny_sizes_are_refused_not_a_panic() {
        let dir = TempDir::new("bi-tiny");
        for kib in [57u64, 60, 80, 103] {
            let img = dir.path("t.img");
            std::fs::write(&img, vec![0xA5; kib as usize * 1024]).unwrap();
            for extra in [&[][..], &["-n"], &["-t", "ext2"], &["-O", "^has_journal"]] {
                let o = run(ext4r().args(["mkfs", "-q", "-F"]).args(extra).arg(&img));
                assert_eq!(o.status.code(), Some(1), "{kib} KiB {extra:?}: {o:?}");
                assert_eq!(
                    std::fs::read(&img).unwrap(),
                    vec![0xA5; kib as usize * 1024]
                );
            }
        }
    }

    /// A journal too big for the filesystem was refused only after the
    /// device had been discarded: the old filesystem was gone.
    #[test]
    fn a_refused_mkfs_leaves_the_old_filesystem() {
        if !have("mke2fs") {
            println!("skipped: no mke2fs");
            return;
        }
        let dir = TempDir::new("bi-journal");
        let img = dir.path("old.img");
        make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "64M").unwrap();
        let before = std::fs::read(&img).unwrap();
        let o = run(ext4r()
            .args(["mkfs", "-q", "-F", "-J", "size=10000"])
            .arg(&img));
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("Total journal size too big"));
        assert!(std::fs::read(&img).unwrap() == before, "the image changed");
        // A 4 KiB file: too small, and left as it was.
        let small = dir.path("small.img");
        std::fs::write(&small, [0x5A; 4096]).unwrap();
        let o = run(ext4r().args(["mkfs", "-q", "-F"]).arg(&small));
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(std::fs::read(&small).unwrap(), vec![0x5A; 4096]);
    }

    fn truncated(dir: &TempDir) -> Option<PathBuf> {
        if !have("mke2fs") {
            println!("skipped: no mke2fs");
            return None;
        }
        let img = dir.path("half.img");
        // 256 MiB: the journal sits in the middle group, past the cut.
        make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "256M").unwrap();
        run(Command::new("truncate").args(["-s", "128M"]).arg(&img));
        Some(img)
    }

    /// fsck -fy on a filesystem larger than its device cleared the journal
    /// and wrote before failing; -n said nothing about the size.
    #[test]
    fn fsck_says_the_device_is_too_small_before_writing() {
        let dir = TempDir::new("bi-fsck-half");
        let Some(img) = truncated(&dir) else { return };
        let before = std::fs::read(&img).unwrap();
        let o = run(ext4r().args(["fsck", "-fn"]).arg(&img));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("The physical size of the device is 131072 blocks"),
            "{out}"
        );
        assert!(out.contains("Abort? no"));
        let o = run(ext4r().args(["fsck", "-fy"]).arg(&img));
        assert_eq!(o.status.code(), Some(8), "{o:?}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("Abort? yes"));
        assert!(
            std::fs::read(&img).unwrap() == before,
            "fsck -n or -y wrote to a truncated image"
        );
        // -p stops, and records the error state as e2fsck -p does
        // (preenhalt): the same bytes on a twin.
        let twin = dir.path("twin.img");
        copy_sparse(&img, &twin).unwrap();
        let o = run(ext4r().args(["fsck", "-p"]).arg(&img));
        assert_eq!(o.status.code(), Some(4), "{o:?}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("UNEXPECTED INCONSISTENCY"));
        let e = run(Command::new("e2fsck").arg("-p").arg(&twin));
        assert_eq!(e.status.code(), Some(4), "{e:?}");
        assert!(
            std::fs::read(&img).unwrap() == std::fs::read(&twin).unwrap(),
            "fsck -p wrote other than e2fsck -p"
        );
    }

    /// tune wrote the label into backups it could reach, then failed.
    #[test]
    fn tune_refuses_a_truncated_image_whole() {
        let dir = TempDir::new("bi-tune-half");
        let Some(img) = truncated(&dir) else { return };
        let before = std::fs::read(&img).unwrap();
        let o = run(ext4r().args(["tune", "-L", "x"]).arg(&img));
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("physical size of the device"));
        assert!(
            std::fs::read(&img).unwrap() == before,
            "tune wrote to a truncated image"
        );
    }

    /// Output into a pipe its reader closed (`fsck -fn IMG | head -1`)
    /// ends the run quietly, as it ends e2fsck (SIGPIPE), not with a
    /// panic about a failed print.
    #[test]
    fn a_closed_pipe_ends_the_output_quietly() {
        use std::io::Read;
        use std::os::unix::process::ExitStatusExt;
        use std::process::Stdio;
        let dir = TempDir::new("bi-pipe");
        let img = dir.path("p.img");
        let o = run(ext4r().args(["mkfs", "-q"]).arg(&img).arg("64M"));
        assert!(o.status.success(), "{o:?}");
        let mut child = ext4r()
            .args(["fsck", "-fn"])
            .arg(&img)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        let status = child.wait().unwrap();
        assert!(!err.contains("panick"), "{err}");
        assert!(
            status.signal() == Some(13) || status.code() == Some(0),
            "{status:?}: {err}"
        );
    }

    /// Bad numbers in the resize inode's double-indirect block and in a
    /// reserved GDT block's list of copies: found by -n, and repaired to
    /// an image e2fsck finds clean (it said clean and left them before).
    #[test]
    fn resize_inode_block_numbers_are_checked() {
        if !have("mke2fs") || !have("e2fsck") || !have("debugfs") {
            println!("skipped: e2fsprogs not installed");
            return;
        }
        let dir = TempDir::new("bi-resize");
        let base = dir.path("base.img");
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-b", "1024"],
            &base,
            "256M",
        )
        .unwrap();
        let stat = run(Command::new("debugfs").args(["-R", "stat <7>"]).arg(&base));
        let stat = String::from_utf8_lossy(&stat.stdout).into_owned();
        let number_after = |tag: &str| -> u64 {
            let at = stat.find(tag).unwrap() + tag.len();
            stat[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap()
        };
        let dind = number_after("(DIND):");
        let ind = number_after("(IND):");
        // (block, word index, value): an indirect block and a copy's
        // address out of range; then garbage over a whole reserved block.
        let cases: &[(u64, u64, Option<u32>)] = &[
            (dind, 200, Some(4_000_000)),
            (ind, 3, Some(4_000_000)),
            (ind, 0, None),
        ];
        for &(blk, word, value) in cases {
            let img = dir.path("d.img");
            copy_sparse(&base, &img).unwrap();
            let mut bytes = std::fs::read(&img).unwrap();
            let at = (blk * 1024 + word * 4) as usize;
            match value {
                Some(v) => bytes[at..at + 4].copy_from_slice(&v.to_le_bytes()),
                None => {
                    for (k, b) in bytes[at..at + 1024].iter_mut().enumerate() {
                        *b = (k as u8).wrapping_mul(151).wrapping_add(0xC3);
                    }
                }
            }
            std::fs::write(&img, &bytes).unwrap();
            let o = run(ext4r().args(["fsck", "-fn"]).arg(&img));
            assert_eq!(o.status.code(), Some(4), "{blk}/{word}: {o:?}");
            let o = run(ext4r().args(["fsck", "-fy"]).arg(&img));
            assert_eq!(o.status.code(), Some(1), "{blk}/{word}: {o:?}");
            let (rc, out) = e2fsck_fn(&img);
            assert_eq!(rc, 0, "{blk}/{word}: e2fsck after our repair: {out}");
        }
    }
}

/// An image no superblock serves (the primary's nor a backup's) is said as
/// e2fsck says it under -n, -y and -p alike: the error "while trying to
/// open", then the advice to name a backup (on stdout, after the device's
/// name when preening), exit 8, nothing written.
#[test]
fn no_superblock_is_said_as_e2fsck_says_it_in_every_mode() {
    let dir = TempDir::new("no-superblock");
    let img = dir.path("zero.img");
    std::fs::write(&img, vec![0u8; 8 << 20]).unwrap();
    for mode in ["-fn", "-fy", "-p"] {
        let o = run(ext4r().args(["fsck", mode]).arg(&img));
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert_eq!(o.status.code(), Some(8), "{mode}: {err}");
        assert!(
            err.contains(&format!("while trying to open {}", img.display())),
            "{mode}: {err}"
        );
        assert!(
            out.contains("you might try running fsck.ext4r with an alternate superblock"),
            "{mode}: {out}"
        );
        assert!(
            std::fs::read(&img).unwrap().iter().all(|&b| b == 0),
            "{mode} wrote"
        );
    }
}
