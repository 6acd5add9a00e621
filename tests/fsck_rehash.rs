//! Pass 3A: fsck.ext4r rebuilds hash indexes. A kernel-made two-level
//! htree directory whose root is damaged gets a new index from `-fy`
//! (not just a cleared one), and `-fyD` rebuilds every directory of a
//! kernel-filled image; e2fsck -fn must find the results clean, debugfs
//! must walk the new index, and the kernel must read every file back.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

/// Long names so that ~2000 of them need a two-level tree at 1 KiB.
fn name(i: u32) -> String {
    format!("file_with_a_rather_long_name_to_fill_blocks_quickly_{i:05}")
}

/// A 1 KiB-block ext4 image with /big (2000 files, a two-level htree),
/// /small (three files) and, with `holes`, names deleted from /big so
/// that some of its leaves are nearly empty.
fn kernel_image(dir: &TempDir, extra: &[&str], holes: bool) -> (std::path::PathBuf, Manifest) {
    let img = dir.path("img");
    let mut args = vec!["-t", "ext4", "-b", "1024"];
    args.extend_from_slice(extra);
    make_image(Command::new("mke2fs"), &args, &img, "32M").unwrap();
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(&img, &mnt).unwrap();
    fs::create_dir(mnt.join("big")).unwrap();
    for i in 0..2000 {
        fs::write(mnt.join("big").join(name(i)), format!("content {i}\n")).unwrap();
    }
    if holes {
        for i in (0..2000).filter(|i| i % 3 != 0) {
            fs::remove_file(mnt.join("big").join(name(i))).unwrap();
        }
    }
    fs::create_dir(mnt.join("small")).unwrap();
    for i in 0..3 {
        fs::write(mnt.join(format!("small/f{i}")), [i as u8; 100]).unwrap();
    }
    let m = manifest(&mnt);
    lm.umount().unwrap();
    (img, m)
}

type Manifest = std::collections::BTreeMap<String, String>;

fn debugfs_out(img: &Path, cmd: &str) -> (bool, String) {
    let o = run(Command::new("debugfs").args(["-R", cmd]).arg(img));
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn bmap(img: &Path, path: &str, lblk: u64) -> u64 {
    let (_, out) = debugfs_out(img, &format!("bmap {path} {lblk}"));
    out.lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("bmap {path} {lblk}: {out}"))
}

/// /big's flags word from debugfs `stat`.
fn flags(img: &Path, path: &str) -> u32 {
    let (_, out) = debugfs_out(img, &format!("stat {path}"));
    let f = out.split("Flags: 0x").nth(1).unwrap();
    let hex: String = f.chars().take_while(char::is_ascii_hexdigit).collect();
    u32::from_str_radix(&hex, 16).unwrap()
}

/// A file's `i_size` from debugfs `stat`.
fn size(img: &Path, path: &str) -> u64 {
    let (_, out) = debugfs_out(img, &format!("stat {path}"));
    let f = out.split("Size: ").nth(1).unwrap();
    f.split_whitespace().next().unwrap().parse().unwrap()
}

/// The image is clean for e2fsck, /big is indexed with a tree debugfs
/// walks, and the kernel reads back what was written.
fn assert_sound(dir: &TempDir, img: &Path, want: &Manifest, what: &str) {
    let (rc, out) = e2fsck_fn(img);
    assert_eq!(rc, 0, "{what}: e2fsck -fn after repair:\n{out}");
    assert_ne!(flags(img, "/big") & 0x1000, 0, "{what}: /big lost INDEX_FL");
    let (ok, out) = debugfs_out(img, "htree /big");
    assert!(
        ok && out.contains("Root node dump"),
        "{what}: htree:\n{out}"
    );
    assert!(
        !out.contains("rror") && !out.contains("orrupt"),
        "{what}: htree:\n{out}"
    );
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(img, &mnt).unwrap();
    let now = manifest(&mnt);
    // The kernel looks names up through the index, not only by readdir.
    let probe = fs::read_to_string(mnt.join("big").join(name(1998))).ok();
    lm.umount().unwrap();
    assert_eq!(&now, want, "{what}: files differ after repair");
    assert_eq!(probe.as_deref(), Some("content 1998\n"), "{what}: lookup");
}

/// One loop device at a time: `losetup -f` in two tests at once may
/// hand both the same device.
static LOOP: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn usable() -> bool {
    if !is_root() || !have("losetup") || !have("debugfs") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup, debugfs and e2fsck");
        return false;
    }
    true
}

#[test]
fn damaged_root_is_rebuilt_not_just_cleared() {
    if !usable() {
        return;
    }
    let _one = LOOP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for extra in [&[][..], &["-O", "^metadata_csum"][..]] {
        let dir = TempDir::new("rehash-root");
        let (img, want) = kernel_image(&dir, extra, false);
        let (_, htree) = debugfs_out(&img, "htree /big");
        assert!(
            htree.contains("Indirect levels: 1"),
            "{extra:?}: the kernel made no two-level tree:\n{}",
            &htree[..htree.len().min(600)]
        );
        // Zero the root's count and limit.
        let root = bmap(&img, "/big", 0);
        let mut f = fs::OpenOptions::new().write(true).open(&img).unwrap();
        use std::io::{Seek, SeekFrom, Write};
        f.seek(SeekFrom::Start(root * 1024 + 32)).unwrap();
        f.write_all(&[0; 4]).unwrap();
        drop(f);
        assert_ne!(e2fsck_fn(&img).0, 0, "{extra:?}: the damage went unseen");
        let o = run(ext4r().arg("fsck").arg("-fy").arg(&img));
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: fsck -fy:\n{text}");
        assert!(text.contains("Pass 3A"), "{extra:?}: no rebuild:\n{text}");
        assert_sound(&dir, &img, &want, &format!("root damage {extra:?}"));
    }
}

#[test]
fn optimize_every_directory() {
    if !usable() {
        return;
    }
    let _one = LOOP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for extra in [&[][..], &["-O", "^metadata_csum"][..]] {
        let dir = TempDir::new("rehash-all");
        let (img, want) = kernel_image(&dir, extra, true);
        let before = size(&img, "/big");
        let o = run(ext4r().arg("fsck").arg("-fyD").arg(&img));
        let text = String::from_utf8_lossy(&o.stdout);
        // Rebuilt, but no problem fixed: exit 0, as e2fsck -fyD.
        assert!(
            text.contains("FILE SYSTEM WAS MODIFIED"),
            "{extra:?}: {text}"
        );
        assert_eq!(o.status.code(), Some(0), "{extra:?}: fsck -fyD:\n{text}");
        assert_sound(&dir, &img, &want, &format!("-D {extra:?}"));
        // Two thirds of the names gone: the rebuilt /big is smaller.
        let after = size(&img, "/big");
        assert!(after < before, "{extra:?}: /big {before} -> {after} bytes");
        // The rebuilt filesystem is clean for our own check too, and a
        // second -D run leaves it clean.
        let o = run(ext4r().arg("fsck").arg("-fn").arg(&img));
        assert_eq!(o.status.code(), Some(0), "{extra:?}: our -fn after -D");
        let o = run(ext4r().arg("fsck").arg("-pfD").arg(&img));
        assert!(o.status.code().unwrap_or(9) <= 1, "{extra:?}: -pfD");
        assert_eq!(e2fsck_fn(&img).0, 0, "{extra:?}: e2fsck after -pfD");
    }
}

fn fsck() -> Command {
    let mut c = ext4r();
    c.arg("fsck");
    c
}

/// `-fy`'s output with the image's path taken out, and its exit code.
fn fy_output(mut cmd: Command, img: &Path) -> (Option<i32>, String) {
    let o = run(cmd.arg("-fy").arg(img));
    let text = String::from_utf8_lossy(&o.stdout).replace(&*img.to_string_lossy(), "IMG");
    (o.status.code(), text)
}

/// e2fsck's order around pass 3A, on images debugfs damages (no root
/// needed): a name twice in a directory is said in pass 2 and settled
/// after "Pass 3A: Optimizing directories", between pass 3 and pass 4;
/// a linear directory of four blocks is rebuilt there too (with extents
/// or a block map). Our `-fy`
/// prints what e2fsck -fy prints, e2fsck -fn finds our result clean, and
/// a second run of ours finds nothing.
#[test]
fn pass_3a_comes_between_pass_3_and_pass_4() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs and e2fsck");
        return;
    }
    // (what, debugfs commands, a line e2fsck prints after the heading)
    let cases: [(&str, &str, Option<&str>); 3] = [
        (
            "duplicate entries",
            "mkdir d\nwrite HI d/a\nwrite HI d/b\nln d/a d\nln d/b d\nsif d/b links_count 2\n",
            Some("Duplicate entry 'a' in /d (12) found.  Clear? yes"),
        ),
        (
            "one name for two files",
            "mkdir d\nmkdir x\nwrite HI d/a\nwrite HI x/a\nln x/a d\nunlink x/a\n",
            Some("Entry 'a' in /d (12) has a non-unique filename."),
        ),
        (
            "a linear directory of four blocks",
            "mkdir d\nwrite HI d/a\nexpand_dir d\nexpand_dir d\nexpand_dir d\n",
            None,
        ),
    ];
    // Extents, and block maps (whose direct blocks a rebuild releases too).
    let kinds = [
        &["-t", "ext4", "-b", "1024"][..],
        &["-t", "ext3", "-b", "1024"][..],
    ];
    for (mkfs, (what, script, said)) in kinds
        .iter()
        .flat_map(|k| cases.iter().map(move |c| (*k, *c)))
    {
        let what = format!("{what} ({mkfs:?})");
        let dir = TempDir::new("rehash-order");
        let img = dir.path("img");
        make_image(Command::new("mke2fs"), mkfs, &img, "8M").unwrap();
        let hi = dir.path("hi");
        fs::write(&hi, "hi\n").unwrap();
        let cmds = dir.path("cmds");
        fs::write(&cmds, script.replace("HI", &hi.to_string_lossy())).unwrap();
        run(Command::new("debugfs")
            .arg("-w")
            .arg("-f")
            .arg(&cmds)
            .arg(&img));
        let theirs = dir.path("theirs");
        fs::copy(&img, &theirs).unwrap();
        let (their_rc, their_text) = fy_output(Command::new("e2fsck"), &theirs);
        let (rc, text) = fy_output(fsck(), &img);
        let theirs_named = their_text.replace("IMG", "");
        let ours_named = text.replace("IMG", "");
        assert!(
            their_text.contains("Pass 3: Checking directory connectivity\nPass 3A: Optimizing"),
            "{what}: e2fsck did not rebuild:\n{their_text}"
        );
        if let Some(line) = said {
            assert!(
                their_text.contains(line),
                "{what}: e2fsck said:\n{their_text}"
            );
        }
        assert_eq!(
            ours_named,
            theirs_named,
            "{what}: our -fy differs from e2fsck -fy:\n{}",
            first_diffs(&theirs_named, &ours_named, 8)
        );
        assert_eq!(rc, their_rc, "{what}: exit");
        let (fn_rc, out) = e2fsck_fn(&img);
        assert_eq!(fn_rc, 0, "{what}: e2fsck -fn after our repair:\n{out}");
        let (again, out) = fy_output(fsck(), &img);
        assert_eq!(again, Some(0), "{what}: our second -fy:\n{out}");
    }
}
