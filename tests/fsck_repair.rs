//! fsck.ext4r -y against a damage generator: a kernel-filled image gets one
//! kind of damage at a time (through debugfs, or by flipping bytes), our
//! repair runs, and then e2fsck -fn and our own -fn must both find it
//! clean, with every file the damage did not touch unchanged.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::fnv;
use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

/// Regular files by path with a hash of their contents; what the kernel
/// cannot read (a repair left damage behind) is recorded as unreadable.
fn manifest(root: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(m) if m.is_file() => {
                    let h = fs::read(&p).map_or(u64::MAX, |data| fnv(&data));
                    out.insert(rel, h);
                }
                Ok(_) => {}
                Err(_) => {
                    out.insert(rel, u64::MAX);
                }
            }
        }
    }
    out
}

fn workload(root: &Path) {
    for d in 0..4 {
        fs::create_dir(root.join(format!("d{d}"))).unwrap();
        for i in 0..200 {
            let data: Vec<u8> = (0..(i * 37) % 9000).map(|x| (x * 7 + i) as u8).collect();
            fs::write(root.join(format!("d{d}/f{i}")), data).unwrap();
        }
    }
    fs::write(root.join("victim"), b"this file gets damaged").unwrap();
    fs::write(root.join("big"), vec![3u8; 2 << 20]).unwrap();
    // Two files written in turns and synced, with a hole after each piece:
    // the holes alone give each 24 extents, so "frag" has an extent tree
    // with a leaf block of its own however the allocator places them.
    let (a, b) = (
        fs::File::create(root.join("frag")).unwrap(),
        fs::File::create(root.join("frag2")).unwrap(),
    );
    for k in 0..24u8 {
        let at = u64::from(k);
        a.write_all_at(&vec![k; 8192], at * 16384).unwrap();
        a.sync_all().unwrap();
        b.write_all_at(&vec![!k; 4096], at * 8192).unwrap();
        b.sync_all().unwrap();
    }
}

/// debugfs's answer to `cmd` (read-only).
fn debugfs_out(img: &Path, cmd: &str) -> String {
    let o = run(Command::new("debugfs").args(["-R", cmd]).arg(img));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes `bytes` at byte `offset` of the image.
fn poke(img: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = fs::OpenOptions::new().write(true).open(img).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

fn block_size(img: &Path) -> u64 {
    let d = debugfs_out(img, "stats");
    d.lines()
        .find_map(|l| l.strip_prefix("Block size:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// The physical block of logical block `lblk` of `path`.
fn bmap(img: &Path, path: &str, lblk: u64) -> u64 {
    debugfs_out(img, &format!("bmap {path} {lblk}"))
        .trim()
        .parse()
        .unwrap()
}

/// The first extent-tree leaf block of `path` (from `dump_extents`).
fn extent_leaf(img: &Path, path: &str) -> u64 {
    let d = debugfs_out(img, &format!("ex {path}"));
    // " 0/ 1   1/  1     0 - 71   1234            72": level 0 of a depth-1
    // tree names the leaf's block after the logical range.
    let line = d
        .lines()
        .find(|l| l.trim_start().starts_with("0/ 1"))
        .unwrap_or_else(|| panic!("{path} has no depth-1 extent tree:\n{d}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    let dash = f.iter().position(|x| *x == "-").unwrap();
    f[dash + 2].parse().unwrap()
}

/// An extent leaf block loses its header magic.
fn damage_extent_node(img: &Path) {
    let (leaf, bs) = (extent_leaf(img, "/frag"), block_size(img));
    poke(img, leaf * bs, &[0, 0]);
}

/// A directory block of /d2 (its second) gets a zero record length in its
/// first entry.
fn damage_dir_block(img: &Path) {
    let (b, bs) = (bmap(img, "/d2", 1), block_size(img));
    poke(img, b * bs + 4, &[0, 0]);
}

/// Group 1's descriptor gets a wrong checksum (debugfs would recompute
/// it), in the primary table right after the superblock.
fn damage_desc_checksum(img: &Path) {
    let bs = block_size(img);
    let table = if bs == 1024 { 2048 } else { bs };
    let d = debugfs_out(img, "stats");
    let dsize: u64 = d
        .lines()
        .find_map(|l| l.strip_prefix("Group descriptor size:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(32);
    poke(img, table + dsize + 0x1E, &[0x34, 0x12]);
}

/// The primary superblock loses its magic number: the backup must serve.
fn damage_superblock(img: &Path) {
    poke(img, 1024 + 56, &[0, 0]);
}

fn debugfs(img: &Path, cmd: &str) {
    let o = run(Command::new("debugfs").args(["-w", "-R", cmd]).arg(img));
    assert!(
        o.status.success(),
        "debugfs {cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs debugfs (read-write) on a script of commands, one session: what a
/// command opens (a journal transaction) stays open for the next.
fn debugfs_script(dir: &TempDir, img: &Path, script: &str) {
    let cmds = dir.path("debugfs-script");
    fs::write(&cmds, script).unwrap();
    let o = run(Command::new("debugfs")
        .arg("-w")
        .arg("-f")
        .arg(&cmds)
        .arg(img));
    assert!(o.status.success(), "debugfs: {o:?}");
}

/// The xattr block `path` names (its `File ACL`), panicking with the
/// inode's stat when there is none.
fn file_acl(img: &Path, path: &str) -> u64 {
    let stat = debugfs_out(img, &format!("stat {path}"));
    stat.split("File ACL: ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .filter(|&b| b != 0)
        .unwrap_or_else(|| panic!("no xattr block for {path}:\n{stat}"))
}

/// The inode number of `path`.
fn inum(img: &Path, path: &str) -> u64 {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("stat {path}")])
        .arg(img));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let rest = text.split("Inode: ").nth(1).unwrap();
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// Overwrites the start of block `blk` with `bytes`.
fn poke_block(img: &Path, blk: u64, bytes: &[u8]) {
    poke(img, blk * block_size(img), bytes);
}

/// The blocks of the resize inode: (its double-indirect block, the
/// lowest primary reserved GDT block), from debugfs's block list.
fn resize_blocks(img: &Path) -> (u64, u64) {
    let d = debugfs_out(img, "stat <7>");
    let num = |tag: &str| -> Vec<u64> {
        d.split(tag)
            .skip(1)
            .filter_map(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .collect()
    };
    let dind = num("(DIND):")[0];
    let gdt = num("(IND):").into_iter().min().unwrap();
    (dind, gdt)
}

/// debugfs's view of the resize inode without what a recreation changes
/// (times, and the checksum over them).
fn resize_inode_stat(img: &Path) -> String {
    debugfs_out(img, "stat <7>")
        .lines()
        .filter(|l| !l.contains("time") && !l.contains("checksum"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// (name, damage, paths it may lose or change)
type Damage = (&'static str, fn(&Path), &'static [&'static str]);

const DAMAGES: &[Damage] = &[
    (
        "group free counts",
        |i| debugfs(i, "set_bg 0 free_blocks_count 7"),
        &[],
    ),
    (
        "group inode counts",
        |i| debugfs(i, "set_bg 0 free_inodes_count 3"),
        &[],
    ),
    (
        "superblock counts",
        |i| debugfs(i, "ssv free_blocks_count 12"),
        &[],
    ),
    (
        "link count",
        |i| debugfs(i, "sif /victim links_count 5"),
        &[],
    ),
    (
        "i_size of a directory",
        |i| debugfs(i, "sif /d1 size 1"),
        &[],
    ),
    ("i_blocks", |i| debugfs(i, "sif /big blocks 8"), &[]),
    (
        "inode checksum",
        |i| debugfs(i, "sif /victim checksum 0x1234"),
        &[],
    ),
    ("block bitmap", |i| debugfs(i, "freeb 2000 40"), &[]),
    ("inode bitmap", |i| debugfs(i, "freei /victim"), &[]),
    ("cleared inode", |i| debugfs(i, "clri /victim"), &["victim"]),
    (
        "dtime on a live inode",
        |i| debugfs(i, "sif /d2/f3 dtime 12345"),
        &[],
    ),
    (
        // The victim's one extent pointed at the first block of /big:
        // the repair gives it a copy, /big keeps its data.
        "multiply-claimed block",
        |i| {
            let b = bmap(i, "/big", 0);
            debugfs(i, &format!("sif /victim block[5] {b}"));
        },
        &["victim"],
    ),
    (
        "missing lost+found",
        |i| debugfs(i, "rmdir /lost+found"),
        &[],
    ),
    (
        // A deleted file left on the orphan list: released before the
        // check, its name then cleared.
        "orphan list",
        |i| {
            let n = inum(i, "/victim");
            debugfs(i, "sif /victim links_count 0");
            debugfs(i, &format!("ssv last_orphan {n}"));
        },
        &["victim"],
    ),
    (
        "journal superblock magic",
        |i| {
            let b = bmap(i, "<8>", 0);
            poke_block(i, b, &[0, 0, 0, 0]);
        },
        &[],
    ),
    ("extent node", damage_extent_node, &["frag"]),
    // Entries of the broken block may end up in lost+found.
    ("directory block", damage_dir_block, &["d2/"]),
    ("group descriptor checksum", damage_desc_checksum, &[]),
    (
        "group descriptor bitmap location",
        |i| debugfs(i, "set_bg 2 block_bitmap 5"),
        &[],
    ),
    ("superblock magic", damage_superblock, &[]),
    // The resize inode is recreated as mke2fs makes it.
    ("resize inode cleared", |i| debugfs(i, "clri <7>"), &[]),
    (
        "resize inode block map",
        |i| debugfs(i, "sif <7> block[0] 1234"),
        &[],
    ),
    (
        "resize inode double-indirect block",
        |i| poke_block(i, resize_blocks(i).0, &[0xff; 64]),
        &[],
    ),
    (
        "resize inode reserved GDT block",
        |i| poke_block(i, resize_blocks(i).1, &[1, 2, 3, 4]),
        &[],
    ),
    // e2fsck's process_bad_inode: the high word of i_blocks is zero
    // without huge_file.
    (
        "i_blocks_hi without huge_file",
        |i| {
            debugfs(i, "feature ^huge_file");
            debugfs(i, "sif /victim blocks_hi 1024");
        },
        &[],
    ),
    // The imagic flag without the imagic_inodes feature is cleared.
    (
        "imagic flag",
        |i| {
            let stat = debugfs_out(i, "stat /victim");
            let flags = stat
                .split("Flags: 0x")
                .nth(1)
                .and_then(|r| u32::from_str_radix(r.split_whitespace().next()?, 16).ok())
                .unwrap_or(0);
            debugfs(i, &format!("sif /victim flags {:#x}", flags | 0x2000));
        },
        &[],
    ),
    // A size no block map (nor extent tree) can address: set to the
    // blocks it has, so its tail past the last block is gone.
    (
        "i_size past the largest file",
        |i| debugfs(i, "sif /victim size 0xffff00000000ff00"),
        &["victim"],
    ),
    // Reserved GDT blocks dropped with the feature, the inode cleared.
    (
        "resize_inode feature off",
        |i| debugfs(i, "feature ^resize_inode"),
        &[],
    ),
];

#[test]
fn repairs_leave_e2fsck_clean_images_and_untouched_files_intact() {
    if !is_root() || !have("losetup") || !have("debugfs") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("repair");
    let base = dir.path("base.img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &base, "64M").unwrap();
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(&base, &mnt).unwrap();
    workload(&mnt);
    let before = manifest(&mnt);
    lm.umount().unwrap();
    drop(lm);
    let mut failures = Vec::new();
    for (name, damage, may_lose) in DAMAGES {
        let img = dir.path("img");
        copy_sparse(&base, &img).unwrap();
        damage(&img);
        let (pre, _) = e2fsck_fn(&img);
        let o = run(ext4r().args(["fsck", "-fy"]).arg(&img));
        let rc = o.status.code();
        let (after, eout) = e2fsck_fn(&img);
        let again = run(ext4r().args(["fsck", "-fn"]).arg(&img)).status.code();
        let now = match LoopMount::new(&img, &mnt) {
            Ok(mut lm) => {
                let m = manifest(&mnt);
                lm.umount().unwrap();
                m
            }
            // Not mountable after the repair: every file counts as lost.
            Err(_) => BTreeMap::new(),
        };
        let lost: Vec<&String> = before
            .iter()
            .filter(|(k, v)| {
                // "dir/" covers the subtree.
                let spared = may_lose
                    .iter()
                    .any(|p| *k == p || p.ends_with('/') && k.starts_with(p));
                !spared && now.get(*k) != Some(v)
            })
            .map(|(k, _)| k)
            .collect();
        // e2fsck -n counts wrong superblock summaries, descriptor
        // checksums and a resize inode without its feature as harmless (exit 0, "IGNORED"), but reports them, and
        // looks for lost+found only when it may create it.
        let pre_ok = pre != 0
            || matches!(
                *name,
                "superblock counts"
                    | "group descriptor checksum"
                    | "missing lost+found"
                    | "resize_inode feature off"
            );
        // Clean means no question declined and nothing ignored either.
        let clean_after = after == 0 && !eout.contains("? no") && !eout.contains("IGNORED");
        // A descriptor checksum alone is rewritten by e2fsck without
        // counting as a modification (exit 0, as f_bad_gdt_csum).
        let want_rc = if *name == "group descriptor checksum" {
            0
        } else {
            1
        };
        // A journal deleted as invalid is made anew, as e2fsck does.
        let journal_back = *name != "journal superblock magic"
            || debugfs_out(&img, "features").contains("has_journal");
        // A recreated resize inode is mke2fs's.
        let resize_same = !name.starts_with("resize inode")
            || resize_inode_stat(&img) == resize_inode_stat(&base);
        let ok = pre_ok
            && journal_back
            && resize_same
            && rc == Some(want_rc)
            && clean_after
            && again == Some(0)
            && lost.is_empty();
        println!(
            "{}: {name}: e2fsck before {pre}, ours -fy {rc:?}, e2fsck after {after}, ours -fn {again:?}, \
             journal {journal_back}, resize inode {resize_same}, files changed {}",
            if ok { "ok" } else { "FAILED" },
            lost.len()
        );
        if !ok {
            println!("{}\n{eout}", String::from_utf8_lossy(&o.stdout));
            failures.push(*name);
        }
    }
    println!(
        "repair: {}/{} damages repaired",
        DAMAGES.len() - failures.len(),
        DAMAGES.len()
    );
    assert!(failures.is_empty(), "failed: {failures:?}");
}

/// Without -n/-p/-y fsck asks before each fix; with no terminal to ask on
/// it refuses as e2fsck does (exit 8) and writes nothing. Answers given
/// on stdin (E2FSCK_FORCE_INTERACTIVE, as e2fsck takes it) are obeyed:
/// what is declined stays.
#[test]
fn interactive_runs_need_a_terminal_and_obey_the_answers() {
    if !have("debugfs") || !have("e2fsck") {
        eprintln!("SKIP: needs debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("ask");
    let img = dir.path("img");
    // ext2: no descriptor checksums, so each damage is one question.
    make_image(Command::new("mke2fs"), &["-t", "ext2"], &img, "32M").unwrap();
    debugfs(&img, "set_bg 0 free_blocks_count 7");
    debugfs(&img, "set_bg 1 free_blocks_count 7");
    let was = fs::read(&img).unwrap();
    let o = run(ext4r()
        .args(["fsck", "-f"])
        .arg(&img)
        .env_remove("E2FSCK_FORCE_INTERACTIVE"));
    assert_eq!(o.status.code(), Some(8));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("need terminal for interactive repairs"),
        "{o:?}"
    );
    assert!(fs::read(&img).unwrap() == was, "a refused run wrote");

    // No to the first question, yes to the rest.
    let mut child = ext4r()
        .args(["fsck", "-f"])
        .arg(&img)
        .env("E2FSCK_FORCE_INTERACTIVE", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"n\ny\ny\ny\ny\ny\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{out}");
    assert!(
        out.contains("group #0") && out.contains("Fix<y>? no"),
        "{out}"
    );
    let (rc, eout) = e2fsck_fn(&img);
    assert_eq!(rc, 4, "{eout}");
    assert!(
        eout.contains("group #0") && !eout.contains("group #1"),
        "{eout}"
    );
}

/// A loop device on an image, detached when dropped.
struct Loop(String);

impl Loop {
    fn new(img: &Path) -> Self {
        let o = run(Command::new("losetup").args(["-f", "--show"]).arg(img));
        assert!(o.status.success(), "losetup: {o:?}");
        Loop(String::from_utf8_lossy(&o.stdout).trim().to_string())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// `-j`: transactions debugfs wrote to an external journal device are
/// replayed as e2fsck -fy -j replays them (the same filesystem and
/// journal afterwards, but for the superblock's write time and counters),
/// and a journal device of another filesystem stops the check as e2fsck
/// stops it.
#[test]
fn external_journal_is_replayed_as_e2fsck_does() {
    if !is_root() || !have("losetup") || !have("debugfs") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("extjournal");
    let (jdev, img) = (dir.path("journal.img"), dir.path("fs.img"));
    let mk = |args: &[&str], path: &Path, size: &str| {
        let o = run(Command::new("mke2fs")
            .args(["-q", "-F", "-b", "4096"])
            .args(args)
            .arg(path)
            .arg(size));
        assert!(o.status.success(), "mke2fs {args:?}: {o:?}");
    };
    mk(&["-O", "journal_dev"], &jdev, "4M");
    {
        // mke2fs takes only a block device as the journal.
        let lo = Loop::new(&jdev);
        mk(
            &["-t", "ext4", "-J", &format!("device={}", lo.0)],
            &img,
            "64M",
        );
    }
    // debugfs reads whole blocks from the data file.
    let (d1, d2) = (dir.path("d1"), dir.path("d2"));
    fs::write(&d1, b"hello-one\n".repeat(410)).unwrap();
    fs::write(&d2, b"hello-two\n".repeat(820)).unwrap();
    debugfs_script(
        &dir,
        &img,
        &format!(
            "jo -f {}\njw -b 10000 {}\njw -b 10001,10002 {}\njw -r 10002\njc\n",
            jdev.display(),
            d1.display(),
            d2.display()
        ),
    );
    assert!(debugfs_out(&img, "features").contains("needs_recovery"));

    let copy = |tag: &str| {
        let (f, j) = (
            dir.path(&format!("{tag}.img")),
            dir.path(&format!("{tag}.j")),
        );
        copy_sparse(&img, &f).unwrap();
        copy_sparse(&jdev, &j).unwrap();
        (f, j)
    };
    let (ours, ours_j) = copy("ours");
    let (theirs, theirs_j) = copy("theirs");
    let o = run(ext4r().args(["fsck", "-fy", "-j"]).arg(&ours_j).arg(&ours));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("recovering journal"), "{out}");
    let e = run(Command::new("e2fsck")
        .args(["-fy", "-j"])
        .arg(&theirs_j)
        .arg(&theirs));
    assert_eq!(o.status.code(), e.status.code(), "{out}\n{e:?}");
    // The superblock (write time, kbytes written, checksum) aside, the
    // filesystems and the journals are the same.
    let (a, b) = (fs::read(&ours).unwrap(), fs::read(&theirs).unwrap());
    let differ: Vec<usize> = (0..a.len())
        .filter(|&i| a[i] != b[i] && !(1024..2048).contains(&i))
        .take(10)
        .collect();
    assert!(differ.is_empty(), "filesystems differ at {differ:?}");
    assert!(fs::read(&ours_j).unwrap() == fs::read(&theirs_j).unwrap());
    assert!(a[10000 * 4096..].starts_with(b"hello-one"));
    assert!(a[10001 * 4096..].starts_with(b"hello-two"));
    // Block 10002 was revoked.
    assert!(a[10002 * 4096..10003 * 4096].iter().all(|&x| x == 0));
    let clean = run(Command::new("e2fsck")
        .args(["-fn", "-j"])
        .arg(&ours_j)
        .arg(&ours));
    assert_eq!(clean.status.code(), Some(0), "{clean:?}");

    // Another filesystem's journal device.
    let other = dir.path("other.j");
    mk(&["-O", "journal_dev"], &other, "4M");
    let o = run(ext4r().args(["fsck", "-fn", "-j"]).arg(&other).arg(&img));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("External journal does not support this filesystem"),
        "{out}"
    );
    // e2fsck's fatal_error: 8, and 4 for the errors left.
    let theirs = run(Command::new("e2fsck")
        .args(["-fn", "-j"])
        .arg(&other)
        .arg(&img));
    assert_eq!(theirs.status.code(), Some(12));
    assert_eq!(o.status.code(), Some(12), "{out}");
}

/// References to EA inodes, judged as e2fsck's check_large_ea_inode and
/// pass 4: an EA inode that lost its flag, and one whose stored reference
/// count is wrong, are found by -n and repaired to an e2fsck-clean image.
#[test]
fn ea_inode_references_are_checked() {
    if !have("mke2fs") || !have("debugfs") || !have("e2fsck") {
        println!("skipped: e2fsprogs not installed");
        return;
    }
    let dir = TempDir::new("repair-ea-inode");
    let value = dir.path("value");
    std::fs::write(
        &value,
        (0..6000u32).map(|i| (i * 7) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    let small = dir.path("small");
    std::fs::write(&small, b"x").unwrap();
    let base = dir.path("base.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-O", "ea_inode"],
        &base,
        "32M",
    )
    .unwrap();
    debugfs(&base, &format!("write {} /f", small.display()));
    debugfs(&base, &format!("ea_set -f {} /f user.big", value.display()));
    // debugfs does not charge the value to its owner's i_blocks (the
    // kernel does): e2fsck settles that first, so only the damage differs.
    run(Command::new("e2fsck").arg("-fy").arg(&base));
    assert_eq!(e2fsck_fn(&base).0, 0);
    let ea = inum(&base, "/f") + 1;
    let stat = debugfs_out(&base, &format!("stat <{ea}>"));
    assert!(
        stat.contains("Flags: 0x280000"),
        "inode {ea} is not the EA inode: {stat}"
    );
    for damage in [
        format!("sif <{ea}> flags 0x80000"),
        format!("sif <{ea}> version 5"),
    ] {
        let img = dir.path("d.img");
        copy_sparse(&base, &img).unwrap();
        debugfs(&img, &damage);
        let (pre, _) = e2fsck_fn(&img);
        assert_ne!(pre, 0, "{damage}: e2fsck must see the damage");
        let n = run(ext4r().args(["fsck", "-fn"]).arg(&img));
        assert_eq!(n.status.code(), Some(4), "{damage}: {n:?}");
        let y = run(ext4r().args(["fsck", "-fy"]).arg(&img));
        assert_eq!(y.status.code(), Some(1), "{damage}: {y:?}");
        let (rc, out) = e2fsck_fn(&img);
        assert_eq!(rc, 0, "{damage}: e2fsck after our repair: {out}");
    }
}

/// Our fsck on `img` with `args` and `-m threads`: exit code and output.
fn fsck_threads(img: &Path, args: &[&str], threads: &str) -> (Option<i32>, String) {
    // The clock pinned (as e2fsck's E2FSCK_TIME): a repair stamps it.
    let o = run(ext4r()
        .arg("fsck")
        .env("E2FSCK_TIME", "1700000000")
        .args(args)
        .args(["-m", threads])
        .arg(img));
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// Pass 5 compares the bitmaps on worker threads and raises what they
/// found on one, in group order. With bitmaps damaged in hundreds of
/// groups (more than the 64 whose differences are spelled out), bad
/// bitmap checksums, unset padding and uninit flags that are wrong, four
/// threads must report what one does, word for word and in the same
/// order, and repair the image to the same bytes.
#[test]
fn pass5_on_four_threads_finds_and_repairs_what_one_does() {
    if !have("mke2fs") || !have("debugfs") || !have("dumpe2fs") || !have("e2fsck") {
        eprintln!("SKIP: needs mke2fs, debugfs, dumpe2fs and e2fsck");
        return;
    }
    let t = TempDir::new("pass5-threads");
    // 2,000 files and 30 directories fill the inodes of groups 0-84 (24
    // per group); without flex_bg each of the 300 groups has its own
    // bitmaps and inode table.
    let src = t.path("src");
    fs::create_dir(&src).unwrap();
    for i in 0..2000 {
        fs::write(src.join(format!("f{i}")), b"").unwrap();
    }
    for i in 0..30 {
        fs::create_dir(src.join(format!("d{i}"))).unwrap();
    }
    let img = t.path("img");
    let src_arg = src.display().to_string();
    make_image(
        Command::new("mke2fs"),
        &[
            "-t", "ext4", "-b", "1024", "-g", "1024", "-N", "7200", "-O", "^flex_bg", "-d",
            &src_arg,
        ],
        &img,
        "300M",
    )
    .unwrap();
    let groups = 300;
    // Every group's bitmaps read from disk (never written where they were
    // uninitialised, so all zeros), but one group's flag says its block
    // bitmap is uninitialised where the journal is, and one group's that
    // its inodes are unused; a wrong block bitmap checksum in group 0.
    let mut cmds = String::new();
    for g in 2..groups {
        cmds += &format!("set_bg {g} flags 4\n");
    }
    cmds += "set_bg 148 flags 6\nset_bg 40 flags 5\nset_bg 0 block_bitmap_csum 0x1234\n";
    for g in 0..groups {
        cmds += &format!("set_bg {g} checksum calc\n");
    }
    debugfs_script(&t, &img, &cmds);
    // The inode bitmaps of groups 1-90 zeroed (differences and bad
    // checksums in 84 groups), and the last group's block bitmap (its
    // padding).
    let d = run(Command::new("dumpe2fs").arg(&img));
    let text = String::from_utf8_lossy(&d.stdout).into_owned();
    let at = |what: &str| -> Vec<u64> {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix(what))
            .map(|r| r.split_whitespace().next().unwrap().parse().unwrap())
            .collect()
    };
    let (ib, bb) = (at("Inode bitmap at "), at("Block bitmap at "));
    assert_eq!((ib.len(), bb.len()), (groups, groups));
    for &b in ib[1..=90].iter().chain(&bb[groups - 1..]) {
        poke(&img, b * 1024, &[0; 1024]);
    }
    let (rc1, out1) = fsck_threads(&img, &["-fn"], "1");
    let (rc4, out4) = fsck_threads(&img, &["-fn"], "4");
    assert_eq!(rc1, Some(4), "{out1}");
    assert!(
        rc1 == rc4 && out1 == out4,
        "-m 1 and -m 4 differ:\n{}",
        first_diffs(&out1, &out4, 5)
    );
    let count = |s: &str| out1.matches(s).count();
    for (what, least) in [
        // As e2fsck: one line of differences per bitmap (the first 64
        // groups spelled out), the checksums under its latch, the padding
        // said once.
        ("Block bitmap differences:  ", 1),
        ("Inode bitmap differences:  ", 1),
        ("(and the differences of ", 2),
        (
            "Inode bitmap differences: Group 1 inode bitmap does not match checksum.",
            1,
        ),
        ("Group 84 inode bitmap does not match checksum.", 1),
        ("Padding at end of block bitmap is not set. Fix", 1),
        ("Padding at end of inode bitmap is not set. Fix", 1),
        (
            "Group 148 block(s) in use but group is marked BLOCK_UNINIT",
            1,
        ),
        (
            "references inode 961 in group 40 where _INODE_UNINIT is set",
            1,
        ),
    ] {
        assert!(count(what) >= least, "{what}: {}\n{out1}", count(what));
    }
    // Repairs, one thread and four, to the same bytes (the clock pinned).
    let (a, b) = (t.path("a"), t.path("b"));
    let mut outs = Vec::new();
    for (copy, threads) in [(&a, "1"), (&b, "4")] {
        copy_sparse(&img, copy).unwrap();
        outs.push(fsck_threads(copy, &["-fy"], threads));
    }
    // The outputs name their image: one name for both.
    let (y1, y4) = (&outs[0], &outs[1]);
    assert_eq!(y1.0, Some(1), "{}", y1.1);
    let same = |s: &str, p: &Path| s.replace(&p.display().to_string(), "IMG");
    assert!(
        y1.0 == y4.0 && same(&y1.1, &a) == same(&y4.1, &b),
        "-fy -m 1 and -m 4 differ:\n{}",
        first_diffs(&y1.1, &y4.1, 5)
    );
    assert!(
        fs::read(&a).unwrap() == fs::read(&b).unwrap(),
        "-fy -m 1 and -m 4 leave different bytes"
    );
    let (rc, out) = e2fsck_fn(&a);
    assert_eq!(rc, 0, "e2fsck after our repair: {out}");
}

/// Entries naming inodes the descriptors call unused (the tail past
/// `bg_itable_unused`, a group flagged `INODE_UNINIT`): e2fsck -fy fixes
/// each descriptor the first time an entry shows it wrong (so a second
/// entry into a fixed group is not reported, unless the flag was cleared
/// and the unused count is still wrong), says "Restarting e2fsck from the
/// beginning..." after pass 2 and heads every pass again. Our -fy prints
/// the same, and the result is clean for e2fsck -fn and for a second run.
#[test]
fn entries_into_unused_inodes_restart_as_e2fsck_does() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("restart-unused");
    let img = dir.path("img");
    // 168 inodes per group, three groups.
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024", "-N", "512"],
        &img,
        "20M",
    )
    .unwrap();
    let (hi, empty) = (dir.path("hi"), dir.path("empty"));
    fs::write(&hi, "hi\n").unwrap();
    fs::write(&empty, "").unwrap();
    let (hi, empty) = (hi.to_string_lossy(), empty.to_string_lossy());
    let script = format!(
        "write {hi} a\nwrite {hi} b\nwrite {empty} c\n\
         copy_inode <14> <180>\ncopy_inode <14> <181>\nln <180> d\nln <181> e\n\
         unlink c\nsif <14> links_count 0\n\
         set_bg 0 free_inodes_count 160\nset_bg 0 itable_unused 157\n\
         set_bg 0 checksum calc\nset_bg 1 flags 1\nset_bg 1 checksum calc\n"
    );
    debugfs_script(&dir, &img, &script);
    same_fy_as_e2fsck(
        &dir,
        &img,
        &[
            "Entry 'a' in / (2) references inode 12 found in group 0's unused inodes area.",
            "Entry 'd' in / (2) references inode 180 in group 1 where _INODE_UNINIT is set.",
            "Entry 'e' in / (2) references inode 181 found in group 1's unused inodes area.",
            "Restarting e2fsck from the beginning...\nPass 1: Checking inodes, blocks, and sizes",
        ],
    );
}

/// e2fsck -fy on a copy of `img` says each of `said`; our -fy on `img`
/// prints the same and exits the same, e2fsck -fn finds our result clean
/// and a second run of ours finds nothing.
fn same_fy_as_e2fsck(dir: &TempDir, img: &Path, said: &[&str]) {
    let theirs = dir.path("theirs");
    fs::copy(img, &theirs).unwrap();
    let fy = |mut cmd: Command, img: &Path| {
        let o = run(cmd.arg("-fy").arg(img));
        let text = String::from_utf8_lossy(&o.stdout).replace(&*img.to_string_lossy(), "IMG");
        (o.status.code(), text)
    };
    let (their_rc, their_text) = fy(Command::new("e2fsck"), &theirs);
    let mut ours = ext4r();
    ours.arg("fsck");
    let (rc, text) = fy(ours, img);
    for line in said {
        assert!(their_text.contains(line), "e2fsck said:\n{their_text}");
    }
    assert_eq!(
        text,
        their_text,
        "our -fy differs from e2fsck -fy:\n{}",
        first_diffs(&their_text, &text, 8)
    );
    assert_eq!(rc, their_rc, "exit");
    let (fn_rc, out) = e2fsck_fn(img);
    assert_eq!(fn_rc, 0, "e2fsck -fn after our repair:\n{out}");
    let mut again = ext4r();
    again.arg("fsck");
    let (rc, out) = fy(again, img);
    assert_eq!(rc, Some(0), "our second -fy:\n{out}");
}

/// The resize inode's i_blocks has 48 bits with huge_file, as every
/// inode's: a damaged high word is found and mended as e2fsck does, on a
/// plain ext4 and on bigalloc (where the count is in clusters' sectors).
/// It went unseen, and -fy stamped the inode's checksum over it (damage
/// seed 313, case 54).
#[test]
fn the_resize_inodes_high_block_count_is_checked() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    for (name, opts) in [
        ("plain", &["-t", "ext4"][..]),
        (
            "bigalloc",
            &["-t", "ext4", "-O", "bigalloc", "-C", "16384"][..],
        ),
    ] {
        let dir = TempDir::new(&format!("resize-blocks-hi-{name}"));
        let img = dir.path("img");
        make_image(Command::new("mke2fs"), opts, &img, "64M").unwrap();
        debugfs(&img, "sif <7> blocks_hi 5");
        same_fy_as_e2fsck(&dir, &img, &["Inode 7, i_blocks is 21474"]);
    }
}

/// An inline-data directory without its system.data attribute: e2fsck -fy
/// truncates it, and the directory, left with nothing, is then a
/// zero-length directory it clears in the same pass (its name goes in
/// pass 2). Our -fy says the same.
#[test]
fn a_truncated_inline_directory_is_cleared_as_zero_length() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("inline-no-attr");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-O", "inline_data", "-b", "1024"],
        &img,
        "8M",
    )
    .unwrap();
    debugfs(&img, "mkdir d");
    debugfs(&img, "ea_rm d system.data");
    same_fy_as_e2fsck(
        &dir,
        &img,
        &[
            "Inode 12 has INLINE_DATA_FL flag but extended attribute not found.  Truncate? yes\n\n\
             Inode 12 is a zero-length directory.  Clear? yes",
            "Entry 'd' in / (2) has deleted/unused inode 12.  Clear? yes",
        ],
    );
}

/// Xattr blocks judged bad in e2fsck's words: one without its magic, one
/// whose entry hash no longer matches its value, one that passes every
/// check but its checksum. Our -fy says what e2fsck -fy says.
#[test]
fn bad_xattr_blocks_are_named_as_e2fsck_names_them() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("xattr-block-words");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024"],
        &img,
        "8M",
    )
    .unwrap();
    let (hi, val) = (dir.path("hi"), dir.path("val"));
    fs::write(&hi, "hi\n").unwrap();
    // Too big for the inode: the value goes to a block.
    fs::write(&val, "v".repeat(300)).unwrap();
    let mut acl = Vec::new();
    for f in ["a", "b", "c"] {
        debugfs(&img, &format!("write {} {f}", hi.display()));
        debugfs(&img, &format!("ea_set -f {} {f} user.big", val.display()));
        acl.push(file_acl(&img, f));
    }
    poke(&img, acl[0] * 1024, &[0; 4]); // the magic
    poke(&img, acl[1] * 1024 + 1023, b"w"); // the value's last byte
    poke(&img, acl[2] * 1024 + 20, b"x"); // h_reserved: only the checksum
    same_fy_as_e2fsck(
        &dir,
        &img,
        &[
            &format!(
                "Inode 12 has a bad extended attribute block {}.  Clear? yes",
                acl[0]
            ),
            "Extended attribute in inode 13 has a hash (",
            &format!(
                "Inode 14 extended attribute block {} passes checks, but checksum does not \
                 match block.  Fix? yes",
                acl[2]
            ),
        ],
    );
}

/// A fast symlink whose `i_blocks` is not 0 (an xattr inode's value
/// charged to it, or damage) keeps its target: its `i_block` is read as
/// the target, not as block numbers, and only the count is mended — the
/// rule upstream e2fsprogs fixed in 2025 (ae7370a5, the corpus'
/// f_ea_inode_fast_symlink). e2fsck 1.47.0 clears the "illegal blocks"
/// the target's bytes make, and then the symlink.
#[test]
fn a_fast_symlink_counted_blocks_keeps_its_target() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    for fs_type in ["ext2", "ext4"] {
        let dir = TempDir::new(&format!("fastlink-{fs_type}"));
        let img = dir.path("img");
        make_image(
            Command::new("mke2fs"),
            &["-t", fs_type, "-b", "1024"],
            &img,
            "8M",
        )
        .unwrap();
        debugfs_script(&dir, &img, "symlink ln /some/target\nsif ln blocks 8\n");
        let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("i_blocks is 8, should be 0.  Fix? yes"),
            "{out}"
        );
        assert!(
            !out.contains("illegal block") && !out.contains("invalid"),
            "{out}"
        );
        assert_eq!(o.status.code(), Some(1), "{out}");
        let stat = debugfs_out(&img, "stat ln");
        assert!(stat.contains("Fast link dest: \"/some/target\""), "{stat}");
        let (fn_rc, after) = e2fsck_fn(&img);
        assert_eq!(fn_rc, 0, "e2fsck -fn after our repair:\n{after}");
        let o = run(ext4r().arg("fsck").arg("-fn").arg(&img));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

/// A '.' and a '..' past a directory's first two entries are cleared
/// (PR_2_DUP_DOT, PR_2_DUP_DOT_DOT) and, cleared, are no repeated names:
/// e2fsck says nothing more of them (ours had said each again as a
/// duplicate entry to clear). With metadata_csum the block they were in
/// is written anew, so its checksum is not asked about either. The
/// corpus' f_dupdot is the first case without checksums.
#[test]
fn a_dot_or_dotdot_past_the_first_two_is_cleared_once() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    for fs_type in ["ext2", "ext4"] {
        let dir = TempDir::new(&format!("dupdot-{fs_type}"));
        let img = dir.path("img");
        make_image(
            Command::new("mke2fs"),
            &["-t", fs_type, "-b", "1024"],
            &img,
            "8M",
        )
        .unwrap();
        debugfs_script(
            &dir,
            &img,
            "mkdir d\nwrite /dev/null d/a\nwrite /dev/null d/bb\nwrite /dev/null d/ccc\n",
        );
        // d's block: '.', '..', then 'a' (record at 24, name at 32) and
        // 'bb' (record at 36, name at 44), renamed '.' and '..'.
        let b = bmap(&img, "d", 0);
        poke(&img, b * 1024 + 32, b".");
        poke(&img, b * 1024 + 44, b"..");
        let dup = [
            "is duplicate '.' entry.\nFix? yes",
            "is duplicate '..' entry.\nFix? yes",
        ];
        if fs_type == "ext2" {
            same_fy_as_e2fsck(&dir, &img, &dup);
            continue;
        }
        // With checksums e2fsck names the directory "???" (its path
        // lookup reads the block, which fails its checksum until
        // written); ours names it. The rest is the same.
        let theirs = dir.path("theirs");
        fs::copy(&img, &theirs).unwrap();
        let e = run(Command::new("e2fsck").arg("-fy").arg(&theirs));
        let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
        let text = |o: &std::process::Output| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.starts_with("Entry '"))
                .map(|l| l.rsplit_once(": ").map_or(l, |(_, rest)| rest))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let (ours, their) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&e.stdout),
        );
        for said in dup {
            assert!(
                ours.contains(said) && their.contains(said),
                "ours:\n{ours}\ne2fsck:\n{their}"
            );
        }
        assert!(!ours.contains("Duplicate entry"), "{ours}");
        assert!(!ours.contains("fails checksum"), "{ours}");
        assert_eq!(text(&o), text(&e), "ours:\n{ours}\ne2fsck:\n{their}");
        assert_eq!(o.status.code(), e.status.code(), "exit");
        let (fn_rc, out) = e2fsck_fn(&img);
        assert_eq!(fn_rc, 0, "e2fsck -fn after our repair:\n{out}");
    }
}

/// A journal copy whose tag checksum fails is skipped and the rest
/// replayed, as e2fsck does, and said in e2fsck's words: "JBD2: Invalid
/// checksum recovering data block N in log" for each, then "Journal
/// checksum error found in IMG" (its EFSBADCRC). So is a descriptor
/// block failing its checksum in a transaction that is not stale (nothing
/// replayed). The corpus' j_corrupt_journal_block is one of the first.
#[test]
fn journal_copies_failing_their_checksums_are_said_as_e2fsck_says_them() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    // (journal blocks to damage, at which byte, what e2fsck says of it)
    let cases: [(&[u64], u64, &[&str]); 3] = [
        (
            &[3],
            100,
            &["JBD2: Invalid checksum recovering data block 301 in log"],
        ),
        (
            &[2, 6],
            7,
            &["JBD2: Invalid checksum recovering data block 300 in log\n\
                 JBD2: Invalid checksum recovering data block 302 in log"],
        ),
        (&[1], 40, &[]),
    ];
    for (n, (blocks, byte, said)) in cases.into_iter().enumerate() {
        let dir = TempDir::new(&format!("jcsum{n}"));
        let img = dir.path("img");
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-b", "1024"],
            &img,
            "8M",
        )
        .unwrap();
        let data = dir.path("data");
        fs::write(
            &data,
            (0..2048u32)
                .map(|i| (i * 7 % 251) as u8)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        // Two checksummed transactions: descriptor (journal block 1),
        // copies of 300 and 301 (2, 3), commit (4); descriptor (5), copy
        // of 302 (6), commit (7).
        let d = data.display();
        debugfs_script(
            &dir,
            &img,
            &format!("jo -c\njw -b 300,301 {d}\njc\njo -c\njw -b 302 {d}\njc\n"),
        );
        for &b in blocks {
            poke(&img, bmap(&img, "<8>", b) * 1024 + byte, &[0xee]);
        }
        let mut want: Vec<&str> = said.to_vec();
        want.push("Journal checksum error found in IMG");
        same_fy_as_e2fsck(&dir, &img, &want);
    }
}

/// A revoke block whose r_count runs past the block stops e2fsck's journal
/// recovery with EINVAL, said on stderr ("Invalid argument while
/// recovering journal of IMG"), and the check goes on. Ours says the same
/// (under its own name) and prints what e2fsck prints.
#[test]
fn a_revoke_block_overflowing_its_count_is_an_invalid_argument() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("revoke-rcount");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024"],
        &img,
        "8M",
    )
    .unwrap();
    // One transaction: a revoke block (journal block 1) and its commit.
    debugfs_script(&dir, &img, "jo\njw -r 300\njc\n");
    let revoke = bmap(&img, "<8>", 1);
    // r_count (big-endian, after the 12-byte header): 65535.
    poke(&img, revoke * 1024 + 12, &[0, 0, 0xff, 0xff]);
    let theirs = dir.path("theirs");
    fs::copy(&img, &theirs).unwrap();
    let e = run(Command::new("e2fsck").arg("-fy").arg(&theirs));
    let their_err = String::from_utf8_lossy(&e.stderr);
    assert!(
        their_err.contains(&format!(
            "e2fsck: Invalid argument while recovering journal of {}",
            theirs.display()
        )),
        "e2fsck said:\n{their_err}"
    );
    let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "fsck.ext4r: Invalid argument while recovering journal of {}",
            img.display()
        )),
        "we said:\n{err}"
    );
    let name = |o: &std::process::Output, p: &Path| {
        String::from_utf8_lossy(&o.stdout).replace(&*p.to_string_lossy(), "IMG")
    };
    assert_eq!(name(&o, &img), name(&e, &theirs), "stdout");
    assert_eq!(o.status.code(), e.status.code(), "exit");
    let (fn_rc, out) = e2fsck_fn(&img);
    assert_eq!(fn_rc, 0, "e2fsck -fn after our repair:\n{out}");
}

/// Our -fn says what e2fsck -fn says, word for word but for the banners
/// (ours first on stdout, e2fsck's last, on stderr), with its exit code.
/// Returns e2fsck's output.
fn same_fn_as_e2fsck(img: &Path) -> String {
    let (their_rc, theirs) = e2fsck_fn(img);
    let o = run(ext4r().arg("fsck").arg("-fn").arg(img));
    let ours = String::from_utf8_lossy(&o.stdout).to_string();
    let body = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with("e2fsck ") && !l.starts_with("fsck.ext4r "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(body(&ours), body(&theirs), "-fn of {}", img.display());
    assert_eq!(o.status.code(), Some(their_rc), "-fn exit");
    theirs
}

/// A checker's stdout from "Pass 1" on, the image's path said as IMG: what
/// two runs on twin images are compared by.
fn from_pass1(o: &std::process::Output, img: &Path) -> String {
    String::from_utf8_lossy(&o.stdout)
        .replace(&*img.to_string_lossy(), "IMG")
        .lines()
        .skip_while(|l| !l.starts_with("Pass 1"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where inode `ino`'s record is, in bytes (debugfs's `imap`).
fn inode_offset(img: &Path, ino: u32) -> u64 {
    let d = debugfs_out(img, &format!("imap <{ino}>"));
    let num = |tag: &str| -> u64 {
        let rest = d.split(tag).nth(1).expect("imap output");
        let word: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_hexdigit() || *c == 'x')
            .collect();
        match word.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
            None => word.parse().unwrap(),
        }
    };
    num("located at block") * block_size(img) + num("offset")
}

/// A reserved inode with a bad mode whose checksum no longer matches
/// (the mode written over a stamped record): e2fsck -n asks to clear the
/// mode and then, the inode not rewritten, about the checksum; -fy clears
/// the mode, which stamps the checksum, and asks nothing more. Both runs
/// say what e2fsck says, the reserved inode named as e2fsck names it.
#[test]
fn a_reserved_inodes_bad_mode_and_checksum_are_both_said_with_n() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    // Inodes 9 and 10 may have no mode at all. (Inodes before 7 are left
    // out: see the next test.)
    for (ino, mode) in [(9u32, 0o100_644u16), (10, 0o020_644)] {
        let dir = TempDir::new(&format!("reserved-mode-csum-{ino}"));
        let img = dir.path("img");
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-O", "metadata_csum", "-b", "1024"],
            &img,
            "8M",
        )
        .unwrap();
        poke(&img, inode_offset(&img, ino), &mode.to_le_bytes());
        let theirs = same_fn_as_e2fsck(&img);
        assert!(
            theirs.contains(&format!("Inode {ino} passes checks, but checksum")),
            "e2fsck said:\n{theirs}"
        );
        same_fy_as_e2fsck(&dir, &img, &[&format!("Reserved inode {ino} (")]);
    }
}

/// e2fsck 1.47.0 stumbles on a checksum mismatch in inode 5 or 6: after
/// asking about it, it finds inode 7's blocks uncounted ("Inode 7,
/// i_blocks is 128, should be 0") and its double-indirect block free,
/// and -fy "fixes" both, leaving a resize inode that its own next -fn
/// rejects. We say the checksum only, and our repair leaves a filesystem
/// e2fsck finds clean.
#[test]
fn a_bad_checksum_before_inode_7_costs_the_resize_inode_nothing() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    for ino in [5u32, 6] {
        let dir = TempDir::new(&format!("csum-before-7-{ino}"));
        let img = dir.path("img");
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-O", "metadata_csum", "-b", "1024"],
            &img,
            "8M",
        )
        .unwrap();
        // A bit of i_flags' high byte: the record no longer matches.
        poke(&img, inode_offset(&img, ino) + 0x23, &[0x01]);
        let blocks_before = debugfs_out(&img, "stat <7>");
        let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
        let ours = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            ours.contains(&format!(
                "Inode {ino} passes checks, but checksum does not match inode.  Fix? yes"
            )),
            "{ours}"
        );
        assert!(!ours.contains("Inode 7"), "{ours}");
        assert_eq!(o.status.code(), Some(1), "{ours}");
        let (rc, out) = e2fsck_fn(&img);
        assert_eq!(rc, 0, "e2fsck -fn after our repair:\n{out}");
        let kept = |d: &str| {
            d.lines()
                .filter(|l| l.contains("Blockcount") || l.starts_with('('))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(kept(&debugfs_out(&img, "stat <7>")), kept(&blocks_before));
    }
}

/// An inline-data file's `system.data` attribute (empty: the data fits
/// in i_block) with its value offset moved past the in-inode area: the
/// kernel reads an empty value without looking at its offset, but
/// libext2fs refuses the area, so e2fsck finds no attribute and truncates
/// the file. Ours says and does the same (damage seed 331, case 15: our
/// repair once restamped the checksum and left e2fsck a truncation).
#[test]
fn an_empty_inline_data_attribute_out_of_its_area_is_not_found() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("inline-attr-offs");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &[
            "-t",
            "ext4",
            "-O",
            "inline_data,metadata_csum",
            "-b",
            "1024",
        ],
        &img,
        "8M",
    )
    .unwrap();
    let src = dir.path("small");
    fs::write(&src, "hello\n").unwrap();
    debugfs(&img, &format!("write {} f", src.display()));
    let ino = inum(&img, "f") as u32;
    assert!(debugfs_out(&img, "ea_list f").contains("system.data (0)"));
    // The first in-inode entry: after the 128-byte base, the 32 extra
    // bytes and the 4-byte magic; e_value_offs is its third and fourth.
    poke(
        &img,
        inode_offset(&img, ino) + 128 + 32 + 4 + 2,
        &128u16.to_le_bytes(),
    );
    same_fn_as_e2fsck(&img);
    same_fy_as_e2fsck(
        &dir,
        &img,
        &[&format!(
            "Inode {ino} has INLINE_DATA_FL flag but extended attribute not found.  Truncate? yes"
        )],
    );
}

/// A primary superblock whose `s_first_data_block` is wrong for its block
/// size (0 with 1 KiB blocks, 1 with 4 KiB ones) moves every group's
/// start: e2fsck stops ("should have been 1", exit 8) or looks for its
/// backup in the wrong place, and the kernel will not mount it. We check from the first backup instead, as `e2fsck -b`
/// does when told, and say and repair what it says and repairs; e2fsck
/// is then satisfied. (Damage seed 331, case 163: the primary was taken
/// and the bitmaps "fixed" by its shifted groups.)
#[test]
fn a_wrong_first_data_block_is_checked_from_a_backup() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    // Sizes with a second group, whose superblock is the backup.
    for (bs, wrong, backup, size) in [("1024", 0, "8193", "64M"), ("4096", 1, "32768", "256M")] {
        let dir = TempDir::new(&format!("first-data-block-{bs}"));
        let img = dir.path("img");
        // No checksum to restamp: the field is all that changes (debugfs
        // would write through the shifted geometry as well).
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-O", "^metadata_csum", "-b", bs],
            &img,
            size,
        )
        .unwrap();
        poke(&img, 1024 + 0x14, &u32::to_le_bytes(wrong));
        let theirs = dir.path("theirs");
        fs::copy(&img, &theirs).unwrap();
        // e2fsck stops on 1 KiB blocks; on 4 KiB ones the descriptors
        // look bad and it looks for the backup by the wrong first block.
        let (rc, out) = e2fsck_fn(&img);
        assert_ne!(rc, 0, "{out}");
        if bs == "1024" {
            assert!(out.contains("should have been 1"), "{out}");
        }
        let e = run(Command::new("e2fsck")
            .args(["-fy", "-b", backup, "-B", bs])
            .arg(&theirs));
        let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
        let text = from_pass1;
        let ours = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(ours.contains("the check used a backup"), "{ours}");
        assert_eq!(text(&o, &img), text(&e, &theirs), "{bs}: ours\n{ours}");
        assert_eq!(o.status.code(), e.status.code(), "{bs}: exit");
        let (rc, out) = e2fsck_fn(&img);
        assert_eq!(rc, 0, "e2fsck -fn after our repair:\n{out}");
    }
}

/// Superblock values out of e2fsck's ranges that the kernel reads past (a
/// descriptor size without 64bit, a reserve of more than half the
/// blocks): e2fsck stops ("Corruption found in superblock", exit 8). We
/// check from the first backup, say why, and the repair writes the
/// backup's values over them: e2fsck is then satisfied.
#[test]
fn superblock_values_out_of_e2fscks_ranges_are_taken_from_a_backup() {
    if !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs and e2fsck");
        return;
    }
    // (field, offset in the superblock, bytes, as e2fsck names it)
    let cases: [(&str, u64, Vec<u8>, &str); 2] = [
        (
            "desc_size",
            0xfe,
            65535u16.to_le_bytes().to_vec(),
            "desc_size = 65535",
        ),
        (
            "r_blocks",
            0x08,
            40_000u32.to_le_bytes().to_vec(),
            "r_blocks_count = 40000",
        ),
    ];
    for (name, off, bytes, said) in cases {
        let dir = TempDir::new(&format!("sb-range-{name}"));
        let img = dir.path("img");
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext3", "-b", "1024"],
            &img,
            "64M",
        )
        .unwrap();
        poke(&img, 1024 + off, &bytes);
        let (rc, out) = e2fsck_fn(&img);
        assert_eq!(rc, 8, "{name}: {out}");
        assert!(out.contains(&format!("({said})")), "{name}: {out}");
        let o = run(ext4r().arg("fsck").arg("-fn").arg(&img));
        let text =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(4), "{name}: {text}");
        assert!(text.contains(&format!("({said})")), "{name}: {text}");
        let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
        assert_eq!(o.status.code(), Some(1), "{name}");
        let (rc, out) = e2fsck_fn(&img);
        assert_eq!(rc, 0, "{name}: e2fsck -fn after our repair:\n{out}");
    }
}

/// The same with no backup to take (one group): we stop as e2fsck stops,
/// with its words and exit 8, and write nothing; checking by the values
/// would have called the filesystem clean.
#[test]
fn superblock_values_out_of_range_without_a_backup_stop_the_check() {
    if !have("e2fsck") || !have("mke2fs") || !have("debugfs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("sb-range-alone");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024"],
        &img,
        "4M",
    )
    .unwrap();
    // debugfs stamps the superblock's checksum again: the values alone
    // are wrong.
    debugfs(&img, "ssv r_blocks_count 3000");
    let before = fs::read(&img).unwrap();
    let e = run(Command::new("e2fsck").arg("-fn").arg(&img));
    assert_eq!(e.status.code(), Some(8));
    for args in [&["-fn"][..], &["-fy"], &["-p"]] {
        let o = run(ext4r().arg("fsck").args(args).arg(&img));
        assert_eq!(o.status.code(), Some(8), "{args:?}");
        let ours = String::from_utf8_lossy(&o.stdout).replace("fsck.ext4r", "e2fsck");
        let e = run(Command::new("e2fsck").args(args).arg(&img));
        assert_eq!(ours, String::from_utf8_lossy(&e.stdout), "{args:?}");
        assert!(
            ours.contains("Corruption found in superblock.  (r_blocks_count = 3000)."),
            "{ours}"
        );
        assert!(fs::read(&img).unwrap() == before, "{args:?} wrote");
    }
}

/// 1,500 files whose directory is gone, on a filesystem whose first free
/// blocks are scattered (every other file of a run deleted): lost+found
/// (an extent root) must grow to take them. The blocks it grows by are
/// taken in runs its root can map; first-fit single blocks could not be
/// mapped, and 599 files were left unattached (exit 4).
#[test]
fn lost_found_grows_past_scattered_free_blocks() {
    if !have("e2fsck") || !have("mke2fs") || !have("debugfs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("lpf-grow");
    let src = dir.path("src");
    fs::create_dir_all(src.join("a_fill")).unwrap();
    fs::create_dir_all(src.join("big")).unwrap();
    for i in 0..1500 {
        fs::write(src.join(format!("big/f{i:04}")), [b'x'; 100]).unwrap();
    }
    for i in 0..400 {
        fs::write(src.join(format!("a_fill/g{i:03}")), [b'y'; 1024]).unwrap();
    }
    let img = dir.path("img");
    let d = src.to_string_lossy().into_owned();
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024", "-d", &d],
        &img,
        "32M",
    )
    .unwrap();
    let mut cmds: String = (1..400)
        .step_by(2)
        .map(|i| format!("rm a_fill/g{i:03}\n"))
        .collect();
    cmds.push_str("clri big\n");
    debugfs_script(&dir, &img, &cmds);
    let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}");
    let (rc, after) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn after our repair:\n{after}");
    let listed = debugfs_out(&img, "ls /lost+found");
    let names = listed
        .split_whitespace()
        .filter(|w| w.starts_with('#'))
        .count();
    assert_eq!(names, 1500, "{listed}");
}

/// Extent trees the kernel leaves deeper or wider than they need be
/// (fragmented files cut short): e2fsck's pass 1E says each "could be
/// shorter" or "narrower", and a repair rebuilds them, frees the blocks
/// the new trees do not use and sets `i_blocks`, all in the same run, so
/// that pass 5 finds nothing, and exits 0 (not a fix). Ours says and does
/// the same: the output and exit code are e2fsck's, the data the same.
#[test]
fn extent_trees_that_could_be_smaller_are_rebuilt_as_e2fsck_does() {
    if !is_root() || !have("e2fsck") || !have("mke2fs") || !have("debugfs") || !have("fallocate") {
        eprintln!("SKIP: needs root (a loop mount), mke2fs, debugfs, fallocate and e2fsck");
        return;
    }
    let dir = TempDir::new("pass1e");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024", "-O", "^flex_bg"],
        &img,
        "32M",
    )
    .unwrap();
    {
        let mut m = LoopMount::new(&img, &dir.path("mnt")).unwrap();
        // Two files written whole (one extent each), then every other
        // block punched out: an extent per block left, a tree of depth 1.
        // f0 (20 blocks) is then cut to 4 blocks: 2 extents under a leaf
        // the root could hold (shorter); of f1 (600 blocks) one block in
        // 8 is kept, its 4 leaves left a quarter full (narrower).
        let punch = |name: &str, from: u64, len: u64| {
            let o = run(Command::new("fallocate")
                .args(["-p", "-o", &from.to_string(), "-l", &len.to_string()])
                .arg(m.dir.join(name)));
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        for (name, blocks) in [("f0", 20u64), ("f1", 600)] {
            let data: Vec<u8> = (0..blocks * 1024).map(|i| (i % 251) as u8).collect();
            fs::write(m.dir.join(name), data).unwrap();
        }
        run(&mut Command::new("sync"));
        for (name, blocks) in [("f0", 20u64), ("f1", 600)] {
            for k in 0..blocks / 2 {
                punch(name, k * 2048 + 1024, 1024);
            }
        }
        fs::OpenOptions::new()
            .write(true)
            .open(m.dir.join("f0"))
            .unwrap()
            .set_len(4 * 1024)
            .unwrap();
        for k in 0..75 {
            punch("f1", k * 8192 + 1024, 7168);
        }
        m.umount().unwrap();
    }
    let theirs = dir.path("theirs");
    fs::copy(&img, &theirs).unwrap();
    let untouched = dir.path("untouched");
    fs::copy(&img, &untouched).unwrap();
    let sums = |p: &Path| {
        (0..2)
            .map(|i| fnv(debugfs_out(p, &format!("cat /f{i}")).as_bytes()))
            .collect::<Vec<_>>()
    };
    let before = sums(&img);
    let e = run(Command::new("e2fsck").arg("-fy").arg(&theirs));
    let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
    let text = from_pass1;
    let (ours, their) = (text(&o, &img), text(&e, &theirs));
    assert!(their.contains("could be shorter"), "{their}");
    assert!(their.contains("could be narrower"), "{their}");
    assert!(
        their.contains("Pass 1E: Optimizing extent trees"),
        "{their}"
    );
    assert_eq!(ours, their);
    assert_eq!(o.status.code(), e.status.code());
    assert_eq!(o.status.code(), Some(0));
    let (rc, after) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn after our repair:\n{after}");
    assert_eq!(sums(&img), before);
    // -n says the same ("Optimize? no"), exits 0 and writes nothing.
    let bytes = fs::read(&untouched).unwrap();
    let o = run(ext4r().arg("fsck").arg("-fn").arg(&untouched));
    let e = run(Command::new("e2fsck").arg("-fn").arg(&untouched));
    assert_eq!(text(&o, &untouched), text(&e, &untouched));
    assert!(text(&o, &untouched).contains("Optimize? no"));
    assert_eq!(o.status.code(), Some(0));
    assert!(fs::read(&untouched).unwrap() == bytes);
}

/// `s_first_ino` raised past a populated tree: pass 1 clears the now
/// reserved inodes, pass 2 their names, pass 3 makes lost+found, pass 4
/// reconnects what is left and clears the empty files, pass 5 counts.
/// e2fsck's libext2fs moves bitmaps and counts as it makes lost+found and
/// frees the empty files, so its pass 5 says only what was wrong before;
/// ours says the same, line for line, in one round, and the repair leaves
/// what e2fsck's leaves (lost+found at the same inode).
#[test]
fn first_ino_raised_is_repaired_in_e2fscks_words() {
    if !have("e2fsck") || !have("mke2fs") || !have("debugfs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("first-ino");
    let src = dir.path("src");
    for d in ["a", "b", "c"] {
        fs::create_dir_all(src.join(d)).unwrap();
        for i in 1..=30 {
            // Every third file empty: pass 4 clears those.
            let body = if i % 3 == 0 {
                String::new()
            } else {
                format!("{d}{i}\n")
            };
            fs::write(src.join(format!("{d}/f{i}")), body).unwrap();
        }
    }
    let img = dir.path("img");
    let d = src.to_string_lossy().into_owned();
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024", "-d", &d],
        &img,
        "16M",
    )
    .unwrap();
    debugfs(&img, "ssv first_ino 100");
    let theirs = dir.path("theirs");
    fs::copy(&img, &theirs).unwrap();
    let e = run(Command::new("e2fsck").arg("-fy").arg(&theirs));
    let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
    let text = from_pass1;
    let their = text(&e, &theirs);
    assert!(
        their.contains("/lost+found not found.  Create? yes"),
        "{their}"
    );
    assert!(their.contains("Unattached zero-length inode"), "{their}");
    assert_eq!(text(&o, &img), their);
    assert_eq!(o.status.code(), e.status.code());
    let (rc, after) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn after our repair:\n{after}");
    assert_eq!(inum(&img, "/lost+found"), inum(&theirs, "/lost+found"));
}

/// A reserved inode naming an xattr block another file uses (damage seed
/// 397 case 139 hit inode 7, the resize inode): e2fsck counts the
/// reference and the block in `i_blocks` as for any inode. Inode 7 was
/// checked by its block map alone, and the damage went unseen (exit 0).
#[test]
fn a_reserved_inodes_xattr_block_is_counted() {
    if !have("e2fsck") || !have("mke2fs") || !have("debugfs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("reserved-xattr");
    let base = dir.path("base");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &base, "8M").unwrap();
    let value = dir.path("value");
    fs::write(&value, vec![b'v'; 300]).unwrap();
    debugfs(&base, &format!("write {} f", value.display()));
    debugfs(&base, &format!("ea_set -f {} f user.big", value.display()));
    let acl = file_acl(&base, "f");
    for ino in [5u32, 7, 9] {
        let img = dir.path(&format!("img{ino}"));
        fs::copy(&base, &img).unwrap();
        debugfs(&img, &format!("sif <{ino}> file_acl {acl}"));
        let said = same_fn_as_e2fsck(&img);
        assert!(
            said.contains("has reference count 1, should be 2"),
            "{ino}: {said}"
        );
        let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
        assert_eq!(o.status.code(), Some(1), "{ino}");
        let (rc, after) = e2fsck_fn(&img);
        assert_eq!(rc, 0, "{ino}: e2fsck -fn after our repair:\n{after}");
    }
}

/// A regular file with inline data and a size past what a block map can
/// address (damage seed 401 case 31: a bit of `i_size_high` flipped):
/// e2fsck holds it to a block map's largest size and truncates it (size
/// 0, i_block and the flag cleared); ours skipped every size rule for
/// inline files and called the damage a bad checksum alone.
#[test]
fn an_inline_file_past_the_largest_size_is_truncated() {
    if !have("e2fsck") || !have("mke2fs") || !have("debugfs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("inline-size");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024", "-O", "inline_data"],
        &img,
        "8M",
    )
    .unwrap();
    let small = dir.path("small");
    fs::write(&small, b"a few bytes").unwrap();
    debugfs(&img, &format!("write {} f", small.display()));
    assert!(debugfs_out(&img, "stat f").contains("Flags: 0x10000000"));
    debugfs(&img, "sif f size 8796093022219");
    let said = same_fn_as_e2fsck(&img);
    assert!(
        said.contains("i_size is 8796093022219, should be 0."),
        "{said}"
    );
    let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
    assert_eq!(o.status.code(), Some(1));
    let (rc, after) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn after our repair:\n{after}");
}

/// lost+found's inode made reserved (`s_first_ino` raised past it): pass 1
/// clears its mode and pass 2 its name in the root, so pass 3, as
/// e2fsck's, finds no lost+found and makes one, rather than asking to
/// unlink a name the repair has already cleared.
#[test]
fn a_lost_found_name_pass_2_cleared_is_made_again() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("lpf-cleared");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-b", "1024"],
        &img,
        "16M",
    )
    .unwrap();
    debugfs(&img, "ssv first_ino 12");
    let theirs = dir.path("theirs");
    fs::copy(&img, &theirs).unwrap();
    let e = run(Command::new("e2fsck").arg("-fy").arg(&theirs));
    let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
    let (ours, their) = (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&e.stdout).to_string(),
    );
    for text in [&ours, &their] {
        assert!(
            text.contains("Entry 'lost+found' in / (2) has invalid inode #: 11.\nClear? yes"),
            "{text}"
        );
        assert!(
            text.contains("/lost+found not found.  Create? yes"),
            "{text}"
        );
        assert!(!text.contains("is not a directory"), "{text}");
    }
    assert_eq!(o.status.code(), Some(1), "{ours}");
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn after our repair:\n{out}");
}

/// A fast symlink whose `i_blocks` high word alone is set: libext2fs
/// decides "fast" by the low word, so e2fsck keeps the link and mends the
/// count. We had read its target as block numbers and cleared the inode
/// (damage seed 353, case 27).
#[test]
fn a_fast_symlink_with_a_high_block_count_stays_a_link() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("fast-symlink-hi");
    let img = dir.path("img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-O", "^metadata_csum"],
        &img,
        "16M",
    )
    .unwrap();
    debugfs(&img, "symlink s ../docs/some/target.dat");
    let ino = inum(&img, "s") as u32;
    // osd2's l_i_blocks_high.
    poke(&img, inode_offset(&img, ino) + 0x74, &32u16.to_le_bytes());
    same_fy_as_e2fsck(
        &dir,
        &img,
        &[&format!(
            "Inode {ino}, i_blocks is 137438953472, should be 0.  Fix? yes"
        )],
    );
    assert!(debugfs_out(&img, "stat s").contains("Fast link dest: \"../docs/some/target.dat\""));
}
