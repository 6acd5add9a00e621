//! Our words against e2fsprogs' for the same situations: each case runs
//! the e2fsprogs tool and ours on twin inputs, replaces the program and
//! image names, and compares the lines that say what happened (and the
//! exit codes). Where ours says something in its own words on purpose,
//! the case says so and checks only what must hold.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::process::{Command, Output};

fn ours(tool: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ext4r"));
    c.arg(tool);
    c
}

/// stdout and stderr with the program and image names made neutral.
fn said(o: &Output, names: &[(&str, &str)]) -> String {
    let mut s = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    for (from, to) in names {
        s = s.replace(from, to);
    }
    s
}

/// The lines of `text` that contain `needle`.
fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

fn twins(dir: &TempDir, args: &[&str], size: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let a = dir.path("theirs.img");
    make_image(Command::new("mke2fs"), args, &a, size).unwrap();
    let b = dir.path("ours.img");
    copy_sparse(&a, &b).unwrap();
    (a, b)
}

fn names<'a>(
    theirs: &'a str,
    ours: &'a str,
    tool: &'a str,
    mine: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        (theirs, "IMG"),
        (ours, "IMG"),
        (tool, "PROG"),
        (mine, "PROG"),
    ]
}

fn need(tools: &[&str]) -> bool {
    let missing: Vec<_> = tools.iter().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        eprintln!("SKIP: needs {missing:?}");
    }
    missing.is_empty()
}

#[test]
fn unknown_extended_option() {
    if !need(&["mke2fs", "e2fsck"]) {
        return;
    }
    let dir = TempDir::new("msg-ext");
    let (a, b) = twins(&dir, &["-t", "ext4"], "16M");
    let t = run(Command::new("e2fsck").args(["-fn", "-E", "bogus"]).arg(&a));
    let o = run(ours("fsck").args(["-fn", "-E", "bogus"]).arg(&b));
    let n = names(
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "e2fsck",
        "fsck.ext4r",
    );
    // e2fsck 1.47.0: the option named, its list of valid ones, exit 1.
    let strip_banner = |s: String| {
        s.lines()
            .filter(|l| !l.starts_with("PROG "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip_banner(said(&o, &n)), strip_banner(said(&t, &n)));
    assert_eq!(o.status.code(), t.status.code());
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn a_missing_device() {
    if !need(&["e2fsck"]) {
        return;
    }
    let dir = TempDir::new("msg-missing");
    let gone = dir.path("gone.img");
    let g = gone.to_str().unwrap();
    let n = [(g, "IMG"), ("e2fsck", "PROG"), ("fsck.ext4r", "PROG")];
    for mode in ["-fn", "-fy"] {
        let t = run(Command::new("e2fsck").arg(mode).arg(&gone));
        let o = run(ours("fsck").arg(mode).arg(&gone));
        let (ts, os) = (said(&t, &n), said(&o, &n));
        for needle in ["while trying to open", "Possibly non-existent device?"] {
            assert_eq!(
                lines_with(&os, needle),
                lines_with(&ts, needle),
                "{mode}\n{os}"
            );
        }
        assert_eq!(o.status.code(), t.status.code(), "{mode}");
        // Said once: no "X: X" repetition, no Rust OS error suffix.
        assert!(!os.contains("(os error"), "{os}");
    }
}

#[test]
fn a_busy_device_is_refused_in_fscks_words() {
    if !need(&["mke2fs", "e2fsck", "losetup"]) || !is_root() {
        eprintln!("SKIP: needs root and loop devices");
        return;
    }
    let dir = TempDir::new("msg-busy");
    let img = dir.path("img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "16M").unwrap();
    let o = run(Command::new("losetup").args(["-f", "--show"]).arg(&img));
    if !o.status.success() {
        eprintln!("SKIP: no loop device: {o:?}");
        return;
    }
    let lo = String::from_utf8_lossy(&o.stdout).trim().to_string();
    struct Detach(String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let _detach = Detach(lo.clone());
    // Someone else holds it exclusively, as a mount or another fsck does.
    use std::os::unix::fs::OpenOptionsExt;
    let _held = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::EXCL.bits() as i32)
        .open(&lo)
        .expect("exclusive open");
    let n = [
        (lo.as_str(), "DEV"),
        ("e2fsck", "PROG"),
        ("fsck.ext4r", "PROG"),
    ];
    let t = run(Command::new("e2fsck").args(["-fy", &lo]));
    let o = run(ours("fsck").args(["-fy", &lo]));
    let (ts, os) = (said(&t, &n), said(&o, &n));
    assert!(!os.contains("will not make a filesystem"), "{os}");
    for needle in ["is in use", "Cannot continue, aborting."] {
        assert_eq!(
            lines_with(&os, needle),
            lines_with(&ts, needle),
            "{os}\n--\n{ts}"
        );
    }
    assert_eq!(o.status.code(), t.status.code());
    assert_eq!(o.status.code(), Some(8));
    // A read-only check goes on, with e2fsck's warning.
    let t = run(Command::new("e2fsck").args(["-fn", &lo]));
    let o = run(ours("fsck").args(["-fn", &lo]));
    let (ts, os) = (said(&t, &n), said(&o, &n));
    assert_eq!(lines_with(&os, "in use"), lines_with(&ts, "in use"), "{os}");
    assert_eq!(lines_with(&os, "in use"), vec!["Warning!  DEV is in use."]);
    assert_eq!(o.status.code(), t.status.code());
}

/// Damage in a directory two levels down: the entry is named with its
/// directory's path; the summary line, with its non-contiguous share, is
/// e2fsck's in -n, -y and -p.
#[test]
fn paths_and_summaries() {
    if !need(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let dir = TempDir::new("msg-path");
    let a = dir.path("theirs.img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &a, "16M").unwrap();
    for cmd in [
        "mkdir d1",
        "mkdir d1/d2",
        "write /etc/hostname d1/d2/f20",
        "clri d1/d2/f20",
    ] {
        let o = run(Command::new("debugfs").args(["-w", "-R", cmd]).arg(&a));
        assert!(o.status.success(), "{cmd}: {o:?}");
    }
    let b = dir.path("ours.img");
    copy_sparse(&a, &b).unwrap();
    let n = names(
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "e2fsck",
        "fsck.ext4r",
    );
    let t = run(Command::new("e2fsck").arg("-fn").arg(&a));
    let o = run(ours("fsck").arg("-fn").arg(&b));
    let (ts, os) = (said(&t, &n), said(&o, &n));
    let entry = |s: &str| -> Vec<String> {
        lines_with(s, "Entry 'f20'")
            .iter()
            .map(|l| l.split(" has ").next().unwrap_or("").to_string())
            .collect()
    };
    assert!(
        entry(&ts).contains(&"Entry 'f20' in /d1/d2 (13)".to_string()),
        "{ts}"
    );
    assert_eq!(entry(&os).first(), entry(&ts).first(), "{os}");
    // The whole line: the question on the message's line, as e2fsck asks
    // it ("...inode 14.  Clear? no").
    assert_eq!(
        lines_with(&os, "Entry 'f20'").first(),
        lines_with(&ts, "Entry 'f20'").first(),
        "{os}\n--\n{ts}"
    );
    // (The counts of a -n summary differ where the superblock's are wrong:
    // e2fsck prints the superblock's, ours what was counted.)
    assert_eq!(lines_with(&os, "(0.0% non-contiguous)").len(), 1, "{os}");
    for mode in ["-fy", "-p"] {
        let (a2, b2) = (dir.path("t2.img"), dir.path("o2.img"));
        copy_sparse(&a, &a2).unwrap();
        copy_sparse(&b, &b2).unwrap();
        if mode == "-p" {
            // Not cleanly unmounted: -p checks, and says why.
            for img in [&a2, &b2] {
                run(Command::new("debugfs")
                    .args(["-w", "-R", "ssv state 0"])
                    .arg(img));
            }
        }
        let n = names(
            a2.to_str().unwrap(),
            b2.to_str().unwrap(),
            "e2fsck",
            "fsck.ext4r",
        );
        let t = run(Command::new("e2fsck").arg(mode).arg(&a2));
        let o = run(ours("fsck").arg(mode).arg(&b2));
        let (ts, os) = (said(&t, &n), said(&o, &n));
        for needle in ["non-contiguous", "check forced"] {
            assert_eq!(
                lines_with(&os, needle),
                lines_with(&ts, needle),
                "{mode}\n{os}\n--\n{ts}"
            );
        }
        if mode == "-p" {
            // All of it: the entry with e2fsck's "CLEARED.", the bitmaps
            // and counts fixed without a word (PR_PREEN_NOMSG).
            assert_eq!(os, ts, "-p");
            assert_eq!(o.status.code(), t.status.code());
        }
    }
}

/// The version banner on stderr, the reasons for a check without -f.
#[test]
fn banner_and_check_forced() {
    if !need(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let dir = TempDir::new("msg-forced");
    for (set, why) in [
        (&["ssv state 0"][..], "was not cleanly unmounted"),
        (&["ssv state 3"], "contains a file system with errors"),
        (
            &["ssv max_mnt_count 20", "ssv mnt_count 40"],
            "has been mounted 40 times without being checked",
        ),
        (
            &["ssv checkinterval 86400", "ssv lastcheck 20200101"],
            "days without being checked",
        ),
    ] {
        let (a, b) = twins(&dir, &["-t", "ext4"], "16M");
        for img in [&a, &b] {
            for cmd in set {
                let o = run(Command::new("debugfs").args(["-w", "-R", cmd]).arg(img));
                assert!(o.status.success(), "{o:?}");
            }
        }
        let n = names(
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "e2fsck",
            "fsck.ext4r",
        );
        let t = run(Command::new("e2fsck").arg("-n").arg(&a));
        let o = run(ours("fsck").arg("-n").arg(&b));
        let (ts, os) = (said(&t, &n), said(&o, &n));
        let forced = lines_with(&ts, "check forced");
        assert_eq!(forced.len(), 1, "{ts}");
        assert!(
            forced[0].starts_with("IMG ") && forced[0].contains(why),
            "{ts}"
        );
        assert_eq!(lines_with(&os, "check forced"), forced, "{set:?}\n{os}");
        // The banner: e2fsck's is "e2fsck 1.47.0 (5-Feb-2023)"; ours
        // names our tool and version the same way, first on stderr.
        let banner = String::from_utf8_lossy(&o.stderr)
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        assert_eq!(banner, format!("fsck.ext4r {}", env!("CARGO_PKG_VERSION")));
    }
}

/// tune's messages carry its own name where tune2fs says "tune2fs:";
/// an error is said once.
#[test]
fn tune_names_itself_and_says_errors_once() {
    if !need(&["mke2fs", "tune2fs"]) {
        return;
    }
    let dir = TempDir::new("msg-tune");
    let (a, b) = twins(&dir, &["-t", "ext4"], "16M");
    let n = names(
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "tune2fs",
        "tune.ext4r",
    );
    let t = run(Command::new("tune2fs").args(["-U", "bogus"]).arg(&a));
    let o = run(ours("tune").args(["-U", "bogus"]).arg(&b));
    let (ts, os) = (said(&t, &n), said(&o, &n));
    assert_eq!(
        lines_with(&os, "Invalid UUID"),
        lines_with(&ts, "Invalid UUID")
    );
    assert_eq!(
        lines_with(&os, "Invalid UUID"),
        vec!["PROG: Invalid UUID format"]
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains("tune2fs"));
    assert_eq!(o.status.code(), t.status.code());

    // No superblock: one message, nothing repeated.
    let zero = dir.path("zero.img");
    std::fs::write(&zero, vec![0u8; 4 << 20]).unwrap();
    for (tool, args) in [("tune", vec!["-l"]), ("fsck", vec!["-fn"]), ("ls", vec![])] {
        let o = run(ours(tool).args(&args).arg(&zero));
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(no_repeats(&e), "{tool}: {e}");
        assert_ne!(o.status.code(), Some(0));
    }
}

/// Whether no line says the same ": "-separated part twice in a row.
fn no_repeats(text: &str) -> bool {
    text.lines().all(|l| {
        let parts: Vec<&str> = l.split(": ").collect();
        parts.windows(2).all(|w| w[0] != w[1]) && !l.contains("(os error")
    })
}

/// `ext4r --help` is a request, not a mistake; the tools' help starts with
/// what they do.
#[test]
fn help_exits_zero_and_says_what_each_tool_does() {
    let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r")).arg("--help"));
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    for tool in ["mkfs", "fsck", "tune", "ls", "cat", "extract"] {
        assert!(text.contains(&format!("  {tool} ")), "{text}");
    }
    let o = run(&mut Command::new(env!("CARGO_BIN_EXE_ext4r")));
    assert_eq!(o.status.code(), Some(16), "no tool named is a usage error");
    for (tool, first) in [
        ("mkfs", "Make an ext2/ext3/ext4 filesystem"),
        ("fsck", "Check an ext2/ext3/ext4 filesystem"),
        ("ls", "List a directory"),
    ] {
        let o = run(ours(tool).arg("--help"));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.starts_with(first), "{tool}: {text}");
        assert!(!text.contains("more to come"), "{tool}: {text}");
        assert_eq!(o.status.code(), Some(0), "{tool}");
    }
}

/// Every tool answers -V and --version with exit 0, its name and version
/// on the first line: mkfs.ext4r on standard error, as mke2fs -V (and as
/// its banner on every run), the others on standard output. And every
/// tool answers -h and --help with exit 0 — tune.ext4r too, where
/// tune2fs refuses both as invalid options.
#[test]
fn every_tool_answers_version_and_help() {
    let v = env!("CARGO_PKG_VERSION");
    for (tool, name) in [
        ("mkfs", "mkfs.ext4r"),
        ("fsck", "fsck.ext4r"),
        ("tune", "tune.ext4r"),
        ("e4defrag", "e4defrag-r"),
        ("ls", "ext4r ls"),
        ("cat", "ext4r cat"),
        ("extract", "ext4r extract"),
        ("cp", "ext4r cp"),
        ("mkdir", "ext4r mkdir"),
        ("rm", "ext4r rm"),
        ("mv", "ext4r mv"),
        ("ln", "ext4r ln"),
        ("mount", "ext4r mount"),
        ("umount", "ext4r umount"),
    ] {
        for flag in ["-V", "--version"] {
            let o = run(ours(tool).arg(flag));
            assert_eq!(o.status.code(), Some(0), "{tool} {flag}: {o:?}");
            let text = if tool == "mkfs" { &o.stderr } else { &o.stdout };
            let text = String::from_utf8_lossy(text);
            assert_eq!(
                text.lines().next(),
                Some(format!("{name} {v}").as_str()),
                "{tool} {flag}"
            );
        }
        for flag in ["-h", "--help"] {
            let o = run(ours(tool).arg(flag));
            assert_eq!(o.status.code(), Some(0), "{tool} {flag}: {o:?}");
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains("Usage: "), "{tool} {flag}: {text}");
        }
    }
    // mke2fs -V's second line, with our library.
    let o = run(ours("mkfs").arg("-V"));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("mkfs.ext4r {v}\n\tUsing ext4r library version {v}\n")
    );
    // A value is not an option: -L -h sets the label "-h" (and the missing
    // image is then the error).
    let o = run(ours("tune").args(["-L", "-h", "/nonexistent.img"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("Usage: "));
}

/// The question on the message's line where e2fsck's message does not end
/// the line ("...should be 3.  Fix? no"), on the next line where it does.
#[test]
fn questions_sit_where_e2fsck_puts_them() {
    if !need(&["mke2fs", "e2fsck", "debugfs"]) {
        return;
    }
    let dir = TempDir::new("msg-question");
    let (a, b) = twins(&dir, &["-t", "ext2"], "8M");
    for img in [&a, &b] {
        for cmd in [
            "set_inode_field <2> links_count 9",
            "set_bg 0 free_blocks_count 7",
        ] {
            let o = run(Command::new("debugfs").args(["-w", "-R", cmd]).arg(img));
            assert!(o.status.success(), "{o:?}");
        }
    }
    let n = names(
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "e2fsck",
        "fsck.ext4r",
    );
    let t = run(Command::new("e2fsck").arg("-fn").arg(&a));
    let o = run(ours("fsck").arg("-fn").arg(&b));
    let (ts, os) = (said(&t, &n), said(&o, &n));
    let after = |s: &str, needle: &str| -> Vec<String> {
        let l: Vec<&str> = s.lines().collect();
        let i = l.iter().position(|x| x.contains(needle)).unwrap_or(l.len());
        l.iter().skip(i).take(2).map(|x| x.to_string()).collect()
    };
    for needle in ["ref count is 9", "Free blocks count wrong for group #0"] {
        assert_eq!(after(&os, needle), after(&ts, needle), "{os}\n--\n{ts}");
    }
    assert_eq!(
        lines_with(&os, "ref count"),
        vec!["Inode 2 ref count is 9, should be 3.  Fix? no"]
    );
}

/// Htree problems come in e2fsck's order (per directory, per block in
/// logical order, then the question with the directory's path), the same
/// on every run: `f_h_reindex` of e2fsprogs' tests, where one directory
/// has 15 hash ranges wrong, from `../shared/corpus` when it is there.
#[test]
fn htree_problems_in_e2fscks_order() {
    let corpus = corpus::corpus_dir()
        .map(|d| d.join("f_h_reindex/image.gz"))
        .filter(|p| p.exists());
    let Some(corpus) = corpus.filter(|_| need(&["e2fsck", "gzip"])) else {
        eprintln!("SKIP: needs ../shared/corpus and e2fsprogs");
        return;
    };
    let dir = TempDir::new("msg-htree");
    let img = dir.path("base.img");
    let o = run(Command::new("sh").arg("-c").arg(format!(
        "gzip -dc '{}' > '{}'",
        corpus.display(),
        img.display()
    )));
    assert!(o.status.success());
    let (a, b) = (dir.path("theirs.img"), dir.path("ours.img"));
    copy_sparse(&img, &a).unwrap();
    let theirs = run(Command::new("e2fsck").arg("-fy").arg(&a));
    let want = said(&theirs, &[(a.to_str().unwrap(), "IMG")]);
    let want = lines_with(&want, "HTREE directory inode 16001");
    assert!(want.len() > 10, "{want:?}");
    for _ in 0..3 {
        copy_sparse(&img, &b).unwrap();
        let o = run(ours("fsck").arg("-fy").arg(&b));
        let got = said(&o, &[(b.to_str().unwrap(), "IMG")]);
        assert_eq!(lines_with(&got, "HTREE directory inode 16001"), want);
    }
}
