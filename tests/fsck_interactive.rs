//! Interactive fsck.ext4r at a terminal (a pseudo-terminal this test
//! opens): headings appear as each pass starts, a question blocks the run
//! until one key is pressed (no Enter), and after `a` every remaining fix
//! is listed with "Fix? yes", as e2fsck does. Timestamps of what the
//! terminal shows, taken as it arrives, give the order.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the terminal showed, and when each chunk arrived.
#[derive(Default)]
struct Screen {
    text: String,
    /// (byte offset where a chunk starts, when it arrived).
    chunks: Vec<(usize, Instant)>,
    closed: bool,
}

impl Screen {
    /// When the first occurrence of `pat` (at or after byte `from`) had
    /// fully arrived.
    fn seen(&self, pat: &str, from: usize) -> Option<(usize, Instant)> {
        let at = self.text.get(from..)?.find(pat)? + from;
        let end = at + pat.len();
        let t = self
            .chunks
            .iter()
            .filter(|(start, _)| *start < end)
            .map(|(_, t)| *t)
            .next_back()?;
        Some((at, t))
    }
}

/// A child process on a pseudo-terminal.
struct Pty {
    master: File,
    screen: Arc<Mutex<Screen>>,
}

impl Pty {
    fn spawn(cmd: &mut Command) -> (Pty, std::process::Child) {
        use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
        let master: OwnedFd =
            openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().expect("pts name"))
            .expect("open pts");
        let child = cmd
            .stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave.try_clone().expect("dup")))
            .stderr(Stdio::from(slave))
            .spawn()
            .expect("spawn");
        let master = File::from(master);
        let screen = Arc::new(Mutex::new(Screen::default()));
        let (mut rd, sc) = (master.try_clone().expect("dup"), screen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                // EIO once the last holder of the terminal's other end exits.
                let n = rd.read(&mut buf).unwrap_or(0);
                let mut s = sc.lock().unwrap();
                if n == 0 {
                    s.closed = true;
                    return;
                }
                let start = s.text.len();
                s.chunks.push((start, Instant::now()));
                s.text.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        (Pty { master, screen }, child)
    }

    /// Waits until `pat` shows (at or after byte `from`); its offset and
    /// arrival time.
    fn wait(&self, pat: &str, from: usize) -> (usize, Instant) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            {
                let s = self.screen.lock().unwrap();
                if let Some(hit) = s.seen(pat, from) {
                    return hit;
                }
                assert!(
                    !s.closed && Instant::now() < deadline,
                    "{pat:?} never showed; the screen:\n{}",
                    s.text
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn text(&self) -> String {
        self.screen.lock().unwrap().text.clone()
    }

    /// Types `k`; the time just before it was typed (taken after, a busy
    /// machine could let the child answer, and the reader stamp that,
    /// first).
    fn key(&mut self, k: u8) -> Instant {
        let t = Instant::now();
        self.master.write_all(&[k]).expect("type");
        t
    }
}

fn debugfs_w(img: &Path, cmd: &str) {
    let o = run(Command::new("debugfs").args(["-w", "-R", cmd]).arg(img));
    assert!(o.status.success(), "debugfs {cmd}: {o:?}");
}

#[test]
fn questions_take_one_key_and_all_lists_the_remaining_fixes() {
    if !have("debugfs") || !have("mke2fs") || !have("e2fsck") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("interactive");
    let img = dir.path("img");
    // ext2: no checksums, so each damage is one problem in one pass.
    make_image(Command::new("mke2fs"), &["-t", "ext2"], &img, "32M").unwrap();
    debugfs_w(&img, "write /etc/hostname f");
    // Pass 1: an inode in use with a deletion time.
    debugfs_w(&img, "set_inode_field f dtime 12345");
    // Pass 4: the root's link count.
    debugfs_w(&img, "set_inode_field <2> links_count 9");
    // Pass 5: four groups' free block counts.
    for g in 0..4 {
        debugfs_w(&img, &format!("set_bg {g} free_blocks_count 7"));
    }
    let (mut pty, mut child) = Pty::spawn(
        Command::new(env!("CARGO_BIN_EXE_ext4r"))
            .args(["fsck", "-f"])
            .arg(&img)
            .env_remove("E2FSCK_FORCE_INTERACTIVE"),
    );

    // Pass 1's question, under its heading, before pass 2 starts.
    let (p1, t_p1) = pty.wait("Pass 1: Checking inodes, blocks, and sizes", 0);
    let (q1, _) = pty.wait("dtime", p1);
    let (ask1, t_ask1) = pty.wait("<y>? ", q1);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !pty.text().contains("Pass 2"),
        "pass 2 started before the question was answered:\n{}",
        pty.text()
    );
    // One key, no Enter; the answer is written out (the key not echoed).
    let t_y = pty.key(b'y');
    let (yes1, _) = pty.wait("yes", ask1);
    assert_eq!(&pty.text()[ask1..yes1], "<y>? ", "the key was echoed");
    let (p2, t_p2) = pty.wait("Pass 2: Checking directory structure", yes1);

    // Pass 4's question: headings 3 and 4 before it, 5 not.
    let (p4, t_p4) = pty.wait("Pass 4: Checking reference counts", p2);
    let (q4, _) = pty.wait("Inode 2 ref count is 9", p4);
    let (ask4, _) = pty.wait("<y>? ", q4);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!pty.text().contains("Pass 5"), "{}", pty.text());
    let t_n = pty.key(b'n');
    let (no4, _) = pty.wait("no", ask4);

    // Pass 5: the first group asked, `a`, the other three listed.
    let (p5, t_p5) = pty.wait("Pass 5: Checking group summary information", no4);
    let (g0, _) = pty.wait("group #0", p5);
    let (ask5, _) = pty.wait("<y>? ", g0);
    std::thread::sleep(Duration::from_millis(200));
    pty.key(b'a');
    let (all, _) = pty.wait("yes to all", ask5);
    let mut at = all;
    for g in 1..4 {
        let (hit, _) = pty.wait(&format!("group #{g}"), at);
        let (yes, _) = pty.wait("Fix? yes", hit);
        at = yes;
    }
    let status = child.wait().expect("wait");
    let _ = pty.wait("blocks", at);
    let screen = pty.text();
    assert_eq!(
        screen.matches("<y>? ").count(),
        3,
        "asked more than three times:\n{screen}"
    );
    // Declined: errors left, exit 4.
    assert_eq!(status.code(), Some(4), "{screen}");

    // The order in time: each heading before its pass's question, the
    // next heading only after the answer.
    assert!(t_p1 <= t_ask1 && t_ask1 < t_y && t_y < t_p2, "{screen}");
    assert!(t_p4 < t_n && t_n < t_p5, "{screen}");
    eprintln!(
        "pass 1 heading -> question {:?}; answer -> pass 2 heading {:?}; \
         answer -> pass 5 heading {:?}",
        t_ask1 - t_p1,
        t_p2 - t_y,
        t_p5 - t_n
    );

    // What was declined is still there, the rest was fixed.
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 4, "{out}");
    assert!(out.contains("Inode 2 ref count is 9"), "{out}");
    assert!(
        !out.contains("dtime") && !out.contains("Free blocks count wrong for group"),
        "{out}"
    );
}

/// `-C 0`: the bar is drawn below the output, never before the first
/// heading, and is gone before the summary line.
#[test]
fn the_progress_bar_stays_below_the_headings() {
    if !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs");
        return;
    }
    let dir = TempDir::new("bar");
    let img = dir.path("img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "64M").unwrap();
    let (pty, mut child) = Pty::spawn(
        Command::new(env!("CARGO_BIN_EXE_ext4r"))
            .args(["fsck", "-fn", "-C", "0"])
            .arg(&img),
    );
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    let (summary, _) = pty.wait("non-contiguous", 0);
    let screen = pty.text();
    let pass1 = screen.find("Pass 1:").expect("pass 1 heading");
    let bar = format!("{}: |", img.display());
    let first_bar = screen.find(&bar).expect("a bar was drawn");
    assert!(
        first_bar > pass1,
        "bar before the first heading:\n{screen:?}"
    );
    // The bar was erased (a line clear) before the summary line.
    let last_bar = screen.rfind(&bar).unwrap_or(0);
    assert!(last_bar < summary, "{screen:?}");
    assert!(screen[last_bar..summary].contains("\x1b[2K"), "{screen:?}");
}

/// Each heading reaches the terminal when its pass starts, not with the
/// pass's results: on an image whose pass 1 takes a while, the "Pass 2"
/// heading arrives about pass 1's time (as `-t` reports it) after the
/// "Pass 1" heading.
#[test]
fn headings_arrive_as_the_passes_start() {
    if !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs");
        return;
    }
    let dir = TempDir::new("headings");
    // A pass 1 quicker than the terminal can tell apart tells nothing:
    // the tree grows until it is not (the checker got faster than the
    // first size allows on an idle machine).
    let mut measured = None;
    for (round, (per_dir, size)) in [(500, "256M"), (4000, "1G")].into_iter().enumerate() {
        let tree = dir.path(&format!("tree{round}"));
        for d in 0..40 {
            let sub = tree.join(format!("d{d}"));
            std::fs::create_dir_all(&sub).unwrap();
            for f in 0..per_dir {
                File::create(sub.join(format!("f{f}"))).unwrap();
            }
        }
        let img = dir.path(&format!("img{round}"));
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-N", "200000", "-d", tree.to_str().unwrap()],
            &img,
            size,
        )
        .unwrap();
        std::fs::remove_dir_all(&tree).unwrap();
        let (pty, mut child) = Pty::spawn(
            Command::new(env!("CARGO_BIN_EXE_ext4r"))
                .args(["fsck", "-fn", "-t"])
                .arg(&img),
        );
        let status = child.wait().expect("wait");
        let _ = pty.wait("non-contiguous", 0);
        assert_eq!(status.code(), Some(0), "{}", pty.text());
        let (h1, t1) = pty.wait("Pass 1: ", 0);
        let (h2, t2) = pty.wait("Pass 2: ", h1);
        let screen = pty.text();
        // "  (0.174s)" after the pass 1 heading: pass 1's own time.
        let took: f64 = screen[h1..h2]
            .rsplit_once("  (")
            .and_then(|(_, t)| t.split_once("s)"))
            .and_then(|(t, _)| t.parse().ok())
            .unwrap_or_else(|| panic!("no pass 1 time:\n{screen}"));
        measured = Some((took, t1, t2, screen));
        if took > 0.02 {
            break;
        }
    }
    let (took, t1, t2, screen) = measured.unwrap();
    let gap = (t2 - t1).as_secs_f64();
    eprintln!("pass 1 took {took:.3}s; its heading came {gap:.3}s before pass 2's");
    assert!(took > 0.02, "pass 1 too quick to tell: {took}s\n{screen}");
    // Held back to the end, both would arrive together (gap near 0); a
    // quarter leaves room for a reader thread kept waiting on a busy
    // machine.
    assert!(
        gap >= took * 0.25,
        "pass 2's heading came {gap:.3}s after pass 1's, pass 1 took {took:.3}s:\n{screen}"
    );
}
