//! What mkfs.ext4r says and asks on the way, against mke2fs: each case
//! runs through both with standard input not a terminal (so a question
//! gets no answer), and the warnings, questions and refusals they print —
//! on which stream — and their exit codes must be the same. Where mke2fs
//! goes on with -F, both run with -F too. A refused or failed mkfs leaves
//! no file it created and an existing image as it was; the questions
//! mke2fs asks only at a terminal (an existing filesystem or partition
//! table) are asked through a pseudo-terminal.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// One command line, run through mke2fs and ours.
struct Case {
    args: &'static [&'static str],
    /// The image before the run: a sparse file of this size, or none.
    image: Option<&'static str>,
    /// The size argument after the image, if any.
    size: Option<&'static str>,
    /// Whether the words are compared (else the exit code alone).
    words: bool,
}

const fn case(
    args: &'static [&'static str],
    image: Option<&'static str>,
    size: Option<&'static str>,
) -> Case {
    Case {
        args,
        image,
        size,
        words: true,
    }
}

/// A refusal whose exit code is mke2fs's but whose words are not: where
/// they name libext2fs's internals or a device the library is not told.
const fn code_only(
    args: &'static [&'static str],
    image: Option<&'static str>,
    size: Option<&'static str>,
) -> Case {
    Case {
        words: false,
        ..case(args, image, size)
    }
}

const M256: Option<&str> = Some("256M");
const M64: Option<&str> = Some("64M");

const CASES: &[Case] = &[
    // A block size above the page size: asked, no answer, exit 1; -F
    // goes on with a warning. Above 4 KiB mke2fs warns at -b.
    case(&["-t", "ext4", "-b", "65536"], M256, None),
    case(&["-t", "ext4", "-b", "65536", "-F"], M256, None),
    case(&["-t", "ext2", "-b", "8192"], M256, None),
    case(&["-t", "ext2", "-b", "8192", "-F"], M256, None),
    case(&["-t", "ext4", "-b", "5000"], M256, None),
    // The question before the image is made: nothing left behind.
    case(&["-t", "ext4", "-b", "65536"], None, Some("256M")),
    // Labels: cut at 16 bytes with a warning.
    case(
        &["-t", "ext4", "-L", "abcdefghijklmnopqrstuvwxyz"],
        M64,
        None,
    ),
    case(&["-t", "ext4", "-L", "exactly16bytes!!"], M64, None),
    // bigalloc: a cluster over 16 blocks is experimental (not with -q).
    case(&["-t", "ext4", "-O", "bigalloc", "-C", "65536"], M256, None),
    case(
        &["-t", "ext4", "-q", "-O", "bigalloc", "-C", "65536"],
        M256,
        None,
    ),
    case(&["-t", "ext4", "-O", "bigalloc", "-C", "16384"], M256, None),
    case(
        &["-t", "ext4", "-b", "4096", "-O", "bigalloc", "-C", "131072"],
        M256,
        None,
    ),
    // 128-byte inodes: on standard output, -q or not; not for the Hurd.
    case(&["-t", "ext4", "-I", "128"], M64, None),
    case(&["-t", "ext4", "-q", "-I", "128"], M64, None),
    case(&["-t", "ext4", "-o", "hurd"], M64, None),
    // RAID geometry, usage types.
    case(&["-t", "ext4", "-E", "stride=3,stripe_width=8"], M64, None),
    case(&["-t", "ext4", "-T", "bogus"], M64, None),
    // -t: a type mke2fs.conf does not define aborts unless forced; a
    // usage type is a type it defines.
    case(&["-t", "foo"], M64, None),
    case(&["-t", "foo", "-F"], M64, None),
    case(&["-t", "ext4dev"], M64, None),
    case(&["-t", "small"], M64, None),
    // Sizes: none, no blocks, not a size, too small, too big.
    case(&["-t", "ext4"], None, None),
    case(&["-t", "ext4"], Some("0"), None),
    case(&["-t", "ext4"], None, Some("0")),
    case(&["-t", "ext4"], None, Some("1x")),
    case(&["-t", "ext4"], None, Some("10K")),
    case(&["-t", "ext2"], None, Some("20K")),
    // mke2fs: "ext2fs_write_inode_full: Illegal inode number while writing
    // reserved inodes"; ours says how many inodes there would be.
    code_only(&["-t", "ext4"], None, Some("60K")),
    // mke2fs names the device in the middle of its sentence.
    code_only(&["-t", "ext4", "-O", "^64bit"], None, Some("20T")),
    // Inode counts.
    case(&["-t", "ext4", "-N", "60000"], None, Some("8M")),
    case(
        &["-t", "ext4", "-i", "1024", "-I", "1024"],
        None,
        Some("8M"),
    ),
    case(&["-t", "ext4", "-N", "5000000000"], None, Some("8M")),
];

/// What a run said, normalized: exit code, standard output's lines,
/// standard error's lines. The banner, the layout summary and progress
/// (compared elsewhere) are left out; the program's name or the image's
/// in front of a message reads `PROG`.
type Said = (i32, Vec<String>, Vec<String>);

fn said_lines(text: &[u8], img: &Path) -> Vec<String> {
    const LAYOUT: &[&str] = &[
        "mke2fs 1.47",
        "mkfs.ext4r 0",
        "Discarding device blocks",
        "Creating filesystem with",
        "Filesystem UUID",
        "Superblock backups",
        "Allocating group tables",
        "Writing inode tables",
        "Creating journal",
        "Writing superblocks",
        "Creating regular file",
    ];
    let img = img.display().to_string();
    String::from_utf8_lossy(text)
        .replace('\r', "")
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !LAYOUT.iter().any(|p| l.starts_with(p)))
        // The backup superblocks' list.
        .filter(|l| !l.chars().all(|c| c.is_ascii_digit() || ", \t".contains(c)))
        .map(|l| {
            let mut l = l.to_string();
            for prog in ["mke2fs", "mkfs.ext4r", img.as_str()] {
                if let Some(rest) = l.strip_prefix(&format!("{prog}: ")) {
                    l = format!("PROG: {rest}");
                }
                l = l.replace(&format!("; {prog} forced anyway"), "; PROG forced anyway");
            }
            l.replace(&img, "IMG")
        })
        .collect()
}

fn run_case(mut cmd: Command, c: &Case, img: &Path) -> Said {
    cmd.env("MKE2FS_SKIP_CHECK_MSG", "1")
        .args(c.args)
        .arg(img)
        .args(c.size)
        .stdin(Stdio::null());
    let o = run(&mut cmd);
    (
        o.status.code().unwrap_or(-1),
        said_lines(&o.stdout, img),
        said_lines(&o.stderr, img),
    )
}

/// A marker at both ends of an existing image: a refusal must leave it.
fn mark(img: &Path) -> Option<Vec<u8>> {
    let len = std::fs::metadata(img).ok()?.len();
    if len < 8192 {
        return std::fs::read(img).ok();
    }
    let f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
    f.write_all_at(b"ext4r questions: must survive", 0).unwrap();
    f.write_all_at(b"ext4r questions: the end", len - 4096)
        .unwrap();
    std::fs::read(img).ok()
}

#[test]
fn warnings_and_questions_match_mke2fs() {
    if !have("mke2fs") {
        println!("skipped: mke2fs not installed");
        return;
    }
    let dir = TempDir::new("questions");
    let mut failures = Vec::new();
    for c in CASES {
        let line = format!(
            "{} IMG {} (image {})",
            c.args.join(" "),
            c.size.unwrap_or(""),
            c.image.unwrap_or("none")
        );
        let mut results = Vec::new();
        for (who, cmd) in [("mke2fs", Command::new("mke2fs")), ("ours", ours_cmd())] {
            let img = dir.path(&format!("{who}.img"));
            let _ = std::fs::remove_file(&img);
            if let Some(s) = c.image {
                run(Command::new("truncate").args(["-s", s]).arg(&img));
            }
            let before = if who == "ours" { mark(&img) } else { None };
            let r = run_case(cmd, c, &img);
            if who == "ours" && r.0 != 0 {
                // Refused or failed: an image it made is gone, one that was
                // there is as it was.
                match (&c.image, &before) {
                    (None, _) if img.exists() => failures.push(format!(
                        "{line}: ours exited {} and left {}",
                        r.0,
                        img.display()
                    )),
                    (Some(_), Some(b)) if std::fs::read(&img).ok().as_ref() != Some(b) => {
                        failures.push(format!("{line}: refused, but the image changed"))
                    }
                    _ => {}
                }
            }
            results.push(r);
        }
        let (theirs, ours) = (&results[0], &results[1]);
        println!("{line}: exit {}, {:?} {:?}", ours.0, ours.1, ours.2);
        if theirs != ours && (c.words || theirs.0 != ours.0) {
            failures.push(format!(
                "{line}:\n    mke2fs: exit {}, stdout {:?}, stderr {:?}\n    ours:   exit {}, \
                 stdout {:?}, stderr {:?}",
                theirs.0, theirs.1, theirs.2, ours.0, ours.1, ours.2
            ));
        }
    }
    println!(
        "{} cases through mke2fs and mkfs.ext4r, {} differ",
        CASES.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// `-q -n` prints the layout, as `mke2fs -q -n` does (its quiet run
/// still shows what it would make), the same lines: no UUID or backups
/// for one group, the backups wrapped as mke2fs wraps them for many;
/// nothing on standard error; nothing written.
#[test]
fn quiet_dry_run_prints_the_layout_as_mke2fs() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("skipped: mke2fs or e2fsck not installed");
        return;
    }
    let dir = TempDir::new("questions-qn");
    let img = dir.path("qn.img");
    for (args, size) in [
        (&["-t", "ext4"][..], "64M"),
        (&["-t", "ext2", "-b", "4096"], "64M"),
        (&["-t", "ext4", "-b", "1024"], "1G"),
        (&["-t", "ext4", "-b", "1024", "-g", "1024"], "1G"),
    ] {
        let _ = std::fs::remove_file(&img);
        run(Command::new("truncate").args(["-s", size]).arg(&img));
        let mut outs = Vec::new();
        for mut cmd in [Command::new("mke2fs"), ours_cmd()] {
            let o = run(cmd
                .args(["-q", "-n", "-U", UUID])
                .args(args)
                .arg(&img)
                .stdin(Stdio::null()));
            assert_eq!(o.status.code(), Some(0), "{o:?}");
            assert!(o.stderr.is_empty(), "{o:?}");
            outs.push(String::from_utf8_lossy(&o.stdout).into_owned());
        }
        assert_eq!(outs[0], outs[1], "{args:?}");
        assert!(
            outs[1].starts_with("Creating filesystem with"),
            "{}",
            outs[1]
        );
        let (rc, _) = e2fsck_fn(&img);
        assert_eq!(rc, 8, "-n wrote a filesystem");
    }
}

/// A mounted image: refused in mke2fs's words with no -F or one; two go
/// on (here with -n, which writes nothing).
#[test]
fn a_mounted_image_needs_force_twice() {
    if !have("mke2fs") || !is_root() || !have("losetup") {
        println!("skipped: needs mke2fs, root and losetup");
        return;
    }
    let dir = TempDir::new("questions-mounted");
    let img = dir.path("m.img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "64M").unwrap();
    let _mount = match LoopMount::new(&img, &dir.path("mnt")) {
        Ok(m) => m,
        Err(e) => {
            println!("skipped: cannot loop-mount: {e}");
            return;
        }
    };
    let before = std::fs::read(&img).unwrap();
    for args in [
        &["-t", "ext4"][..],
        &["-t", "ext4", "-F"],
        &["-t", "ext4", "-F", "-F", "-n"],
    ] {
        let c = case(args, None, None);
        let theirs = run_case(Command::new("mke2fs"), &c, &img);
        let ours = run_case(ours_cmd(), &c, &img);
        assert_eq!(theirs, ours, "{args:?}");
        let want = if args.contains(&"-n") { 0 } else { 1 };
        assert_eq!(ours.0, want, "{args:?}: {ours:?}");
    }
    assert!(
        std::fs::read(&img).unwrap() == before,
        "the mounted image changed"
    );
}

/// A size past the end of a block device (a loop device this test
/// attaches) is refused before anything is written: a device cannot grow.
/// (mke2fs 1.47 means to ask here, but learns that the target is a device
/// only later, goes on, and fails writing past the end.)
#[test]
fn a_size_past_a_devices_end_is_refused() {
    if !is_root() || !have("losetup") {
        println!("skipped: needs root and losetup");
        return;
    }
    let dir = TempDir::new("questions-dev");
    let img = dir.path("dev.img");
    run(Command::new("truncate").args(["-s", "16M"]).arg(&img));
    mark(&img);
    let before = std::fs::read(&img).unwrap();
    let o = run(Command::new("losetup").args(["-f", "--show"]).arg(&img));
    if !o.status.success() {
        println!("skipped: losetup: {}", String::from_utf8_lossy(&o.stderr));
        return;
    }
    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let o = run(ours_cmd().args(["-F", &dev, "32M"]).stdin(Stdio::null()));
    let _ = Command::new("losetup").args(["-d", &dev]).output();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Filesystem larger than apparent device size."),
        "{o:?}"
    );
    assert!(std::fs::read(&img).unwrap() == before, "the device changed");
}

/// A mkfs that fails because the host filesystem cannot hold the image
/// (a 16 TiB file on ext4; here 20 GiB on a 1 KiB-block ext2, mounted
/// for the test) leaves no file behind, and says why.
#[test]
fn an_image_the_host_cannot_hold_is_not_left_behind() {
    if !have("mke2fs") || !is_root() || !have("losetup") {
        println!("skipped: needs mke2fs, root and losetup");
        return;
    }
    let dir = TempDir::new("questions-host");
    let host = dir.path("host.img");
    // ext2 with 1 KiB blocks: files end at about 16 GiB.
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext2", "-b", "1024"],
        &host,
        "16M",
    )
    .unwrap();
    let mnt = dir.path("mnt");
    let _mount = match LoopMount::new(&host, &mnt) {
        Ok(m) => m,
        Err(e) => {
            println!("skipped: cannot loop-mount: {e}");
            return;
        }
    };
    let img = mnt.join("big.img");
    let o = run(ours_cmd().arg(&img).arg("20G").stdin(Stdio::null()));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(!img.exists(), "a failed mkfs left {}", img.display());
    // Files it did not make are not its to remove.
    std::fs::write(&img, b"").unwrap();
    let o = run(ours_cmd().arg(&img).arg("20G").stdin(Stdio::null()));
    assert_eq!(o.status.code(), Some(1));
    assert!(img.exists(), "mkfs removed a file it did not create");
}

/// A child on a pseudo-terminal: what it showed after `answer` was typed
/// at the first "(y,N)", and its exit code.
fn at_terminal(cmd: &mut Command, answer: &[u8]) -> (i32, String) {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    use std::time::{Duration, Instant};
    let master =
        openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().expect("pts name"))
        .expect("open pts");
    cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    let mut child = cmd.spawn().expect("spawn");
    let mut master = std::fs::File::from(master);
    let screen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (mut rd, sc) = (master.try_clone().unwrap(), screen.clone());
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // EIO once the child, the last holder of the other end, is gone.
        while let Ok(n @ 1..) = rd.read(&mut buf) {
            sc.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !screen.lock().unwrap().contains("(y,N)") {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    master.write_all(answer).unwrap();
    let status = child.wait().unwrap();
    // The command's copies of the terminal's end are ours to drop.
    drop(std::mem::replace(cmd, Command::new("true")));
    reader.join().unwrap();
    let text = screen.lock().unwrap().clone();
    (status.code().unwrap_or(-1), text)
}

/// At a terminal, mke2fs names what the target holds and asks; "n" (or
/// anything but y) stops it with exit 1 and the image as it was.
#[test]
fn an_existing_filesystem_or_partition_table_is_asked_about_at_a_terminal() {
    if !have("mke2fs") {
        println!("skipped: mke2fs not installed");
        return;
    }
    let dir = TempDir::new("questions-tty");
    let fs = dir.path("fs.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-L", "data"],
        &fs,
        "64M",
    )
    .unwrap();
    // A whole-disk image with one DOS partition and no filesystem.
    let pt = dir.path("pt.img");
    run(Command::new("truncate").args(["-s", "64M"]).arg(&pt));
    let mut mbr = [0u8; 512];
    mbr[446 + 4] = 0x83;
    mbr[446 + 8..446 + 12].copy_from_slice(&2048u32.to_le_bytes());
    mbr[446 + 12..446 + 16].copy_from_slice(&(131072u32 - 2048).to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xAA;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pt)
        .unwrap()
        .write_all_at(&mbr, 0)
        .unwrap();
    for img in [&fs, &pt] {
        let before = std::fs::read(img).unwrap();
        let mut shown = Vec::new();
        for mut cmd in [Command::new("mke2fs"), ours_cmd()] {
            // libmagic's description (mke2fs's, where blkid finds nothing)
            // is not ours to copy; the times are in one zone.
            cmd.env("E2FSPROGS_LIBMAGIC_SUPPRESS", "1")
                .env("TZ", "UTC")
                .args(["-t", "ext4"])
                .arg(img);
            let (rc, text) = at_terminal(&mut cmd, b"n\n");
            shown.push((rc, said_lines(text.as_bytes(), img)));
        }
        println!("{}: {:?}", img.display(), shown[1]);
        assert_eq!(shown[0], shown[1], "{}", img.display());
        assert_eq!(shown[1].0, 1);
        assert!(
            shown[1]
                .1
                .iter()
                .any(|l| l.starts_with("Proceed anyway? (y,N)")),
            "{:?}",
            shown[1]
        );
        assert!(
            std::fs::read(img).unwrap() == before,
            "{} changed",
            img.display()
        );
    }
}
