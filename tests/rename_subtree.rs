//! A directory may not be moved into its own subtree, whatever form the
//! directories on the way have: linear, indexed (htree, one and two
//! levels), inline (`inline_data`). The kernel refuses every such rename
//! with EINVAL; ours must too — through the write API
//! (`WriteFs::rename`, `Error::MoveIntoItself`) and through `ext4r mv`
//! (coreutils' words, exit 1) — and leave the image byte for byte as it
//! was. Moves that are legal (sideways, up, into a sibling's indexed
//! subtree) must still work and leave the image e2fsck-clean, with the
//! tree the kernel makes of the same moves.
//!
//! The walk up from the target reads each `..` where the kernel reads it
//! (block 0, or `i_block` inline); it once asked the htree for `..`,
//! which hashed it to a leaf that does not hold it, concluded "not an
//! ancestor", and detached the tree (issue 35).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use ext4r::write::{WriteFs, WriteOptions};
use ext4r::Error;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

fn ready() -> bool {
    if !is_root() || !have("e2fsck") || !have("mke2fs") || !have("debugfs") {
        eprintln!("skipped: needs root (loop mounts), mke2fs, e2fsck and debugfs");
        return false;
    }
    true
}

/// Long names fill a 1 KiB leaf with three entries: a few hundred make
/// the index outgrow its root (two levels).
fn long_name(i: usize) -> String {
    format!("{i:04}-{}", "n".repeat(240))
}

/// A 1 KiB-block image (inline_data when `inline`) holding, made by the
/// kernel:
///
/// ```text
/// /d1/d2/            htree, one level: f001..f299 and x
/// /d1/d2/x/deep/     linear
/// /d1/d2/x/in2/      small (inline with inline_data) under the htree
/// /h2/               htree, two levels: 500 long names and s
/// /h2/s/t/u/         linear
/// /in/sub/leaf/      small (inline with inline_data)
/// /lin/a/b/          linear
/// /side/             empty
/// ```
fn make_tree(t: &TempDir, inline: bool) -> PathBuf {
    let img = t.path(if inline { "inline.img" } else { "plain.img" });
    let mut mk = Command::new("mke2fs");
    mk.args(["-q", "-F", "-t", "ext4", "-b", "1024", "-N", "2048"]);
    if inline {
        mk.args(["-O", "inline_data"]);
    }
    let o = run(mk.arg(&img).arg("32M"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut m = LoopMount::new(&img, &t.path("mk")).unwrap();
    let r = m.dir.clone();
    for d in [
        "d1/d2/x/deep",
        "d1/d2/x/in2",
        "h2/s/t/u",
        "in/sub/leaf",
        "lin/a/b",
        "side",
    ] {
        fs::create_dir_all(r.join(d)).unwrap();
    }
    for i in 1..300 {
        fs::write(r.join(format!("d1/d2/f{i:03}")), b"").unwrap();
    }
    for i in 0..500 {
        fs::write(r.join("h2").join(long_name(i)), b"").unwrap();
    }
    m.umount().unwrap();
    drop(m);
    // The forms the test is about, as debugfs sees them.
    assert_eq!(htree_levels(&img, "/d1/d2"), Some(0));
    assert_eq!(htree_levels(&img, "/h2"), Some(1));
    assert_eq!(htree_levels(&img, "/lin/a"), None);
    for d in ["/in/sub", "/in/sub/leaf", "/d1/d2/x/in2"] {
        assert_eq!(is_inline(&img, d), inline, "{d}");
    }
    img
}

/// The htree depth debugfs reports ("Indirect levels"), `None` for a
/// directory without an index.
fn htree_levels(img: &Path, dir: &str) -> Option<u32> {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("htree {dir}")])
        .arg(img));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Indirect levels: "))
        .map(|n| n.trim().parse().unwrap())
}

fn is_inline(img: &Path, path: &str) -> bool {
    let o = run(Command::new("debugfs")
        .args(["-R", &format!("stat {path}")])
        .arg(img));
    // "Inode: 13   Type: directory    Mode:  0755   Flags: 0x10000000"
    let s = String::from_utf8_lossy(&o.stdout);
    let flags = s
        .split_once("Flags: 0x")
        .and_then(|(_, f)| f.split_whitespace().next())
        .map(|f| u32::from_str_radix(f, 16).unwrap())
        .unwrap();
    flags & 0x1000_0000 != 0 // EXT4_INLINE_DATA_FL
}

/// (source, target directory, new name): every one moves a directory
/// into its own subtree.
const INTO_ITSELF: &[(&str, &str, &str)] = &[
    // Through a one-level htree.
    ("/d1", "/d1/d2", "n"),
    ("/d1", "/d1/d2/x", "n"),
    ("/d1", "/d1/d2/x/deep", "n"),
    ("/d1/d2", "/d1/d2", "n"),
    ("/d1/d2", "/d1/d2/x", "n"),
    // An inline (or small) directory under the htree.
    ("/d1", "/d1/d2/x/in2", "n"),
    ("/d1/d2/x", "/d1/d2/x/in2", "n"),
    // Through a two-level htree.
    ("/h2", "/h2", "n"),
    ("/h2", "/h2/s", "n"),
    ("/h2", "/h2/s/t/u", "n"),
    ("/h2/s", "/h2/s/t", "n"),
    // Inline directories (linear without inline_data).
    ("/in", "/in", "n"),
    ("/in", "/in/sub", "n"),
    ("/in", "/in/sub/leaf", "n"),
    ("/in/sub", "/in/sub/leaf", "n"),
    // Linear.
    ("/lin", "/lin/a/b", "n"),
    ("/lin/a", "/lin/a", "n"),
    // Onto an existing name inside itself: still EINVAL, not ENOTDIR.
    ("/d1", "/d1/d2", "f001"),
];

/// (source, target directory, new name), applied in order: legal moves.
const LEGAL: &[(&str, &str, &str)] = &[
    // Sideways, out of an htree into a linear directory.
    ("/d1/d2/x", "/side", "x"),
    // Up, into a two-level htree.
    ("/h2/s/t", "/h2", "t"),
    // Up, out of inline directories.
    ("/in/sub/leaf", "/", "leaf"),
    // Into a sibling's htree subtree (one level, two levels).
    ("/lin", "/d1/d2", "lin"),
    ("/in", "/h2/s", "in"),
    // Renamed in place in an htree, and moved back down.
    ("/h2/t", "/h2", "t2"),
    ("/side/x", "/d1/d2/lin/a", "x"),
];

fn split(p: &str) -> (&str, &str) {
    let (d, n) = p.rsplit_once('/').unwrap();
    (if d.is_empty() { "/" } else { d }, n)
}

fn join(d: &str, n: &str) -> String {
    format!("{}/{n}", d.trim_end_matches('/'))
}

/// One rename through the write API, on an image opened for it.
fn api_rename(w: &mut WriteFs, src: &str, dir: &str, name: &str) -> ext4r::Result<()> {
    let (sd, sn) = split(src);
    let from = w.lookup_path(sd)?;
    let to = w.lookup_path(dir)?;
    w.rename(from, sn.as_bytes(), to, name.as_bytes())
}

#[test]
fn moves_into_own_subtree_are_refused_in_every_directory_form() {
    if !ready() {
        return;
    }
    for inline in [false, true] {
        let t = TempDir::new(if inline { "subtree-inline" } else { "subtree" });
        let img = make_tree(&t, inline);
        let before = fs::read(&img).unwrap();

        // The kernel: EINVAL for each (nothing moves).
        let kimg = t.path("kernel.img");
        copy_sparse(&img, &kimg).unwrap();
        {
            let m = LoopMount::new(&kimg, &t.path("k")).unwrap();
            for &(src, dir, name) in INTO_ITSELF {
                let from = m.dir.join(&src[1..]);
                let to = m.dir.join(&join(dir, name)[1..]);
                let e = fs::rename(&from, &to).unwrap_err();
                assert_eq!(
                    e.raw_os_error(),
                    Some(22),
                    "kernel: {src} -> {dir}/{name}: {e}"
                );
            }
        }

        // The write API: MoveIntoItself, and not a byte changed.
        for &(src, dir, name) in INTO_ITSELF {
            let mut w = WriteFs::open_path(&img, WriteOptions::default()).unwrap();
            let r = api_rename(&mut w, src, dir, name);
            assert!(
                matches!(r, Err(Error::MoveIntoItself(_))),
                "inline={inline}: {src} -> {dir}/{name}: {r:?}"
            );
            drop(w);
            assert!(
                fs::read(&img).unwrap() == before,
                "inline={inline}: {src} -> {dir}/{name}: the image changed"
            );
        }

        // ext4r mv: coreutils' message, exit 1, not a byte changed; the
        // same words as mv(1) says on the kernel.
        let m = LoopMount::new(&kimg, &t.path("k")).unwrap();
        for &(src, dir, name) in INTO_ITSELF {
            let target = join(dir, name);
            let o = run(ext4r()
                .arg("mv")
                .arg(format!("{}:{src}", img.display()))
                .arg(format!("{}:{target}", img.display())));
            let ours = String::from_utf8_lossy(&o.stderr).into_owned();
            assert_eq!(o.status.code(), Some(1), "{src} -> {target}: {ours}");
            assert!(
                fs::read(&img).unwrap() == before,
                "inline={inline}: ext4r mv {src} {target}: the image changed"
            );
            let mnt = m.dir.display().to_string();
            let o = run(Command::new("mv")
                .env("LC_ALL", "C")
                .arg(format!("{mnt}{src}"))
                .arg(format!("{mnt}{target}")));
            assert_eq!(o.status.code(), Some(1));
            let theirs = String::from_utf8_lossy(&o.stderr).replace(&mnt, "");
            assert_eq!(
                ours.replacen("ext4r mv:", "mv:", 1),
                theirs,
                "{src} -> {target}"
            );
        }
        drop(m);
        let (rc, out) = e2fsck_fn(&img);
        assert_eq!(rc, 0, "e2fsck -fn: {out}");

        // Legal moves: through the write API, through ext4r mv and through
        // the kernel, each on its own copy; all e2fsck-clean, one tree.
        let api = t.path("api.img");
        let cli = t.path("cli.img");
        copy_sparse(&img, &api).unwrap();
        copy_sparse(&img, &cli).unwrap();
        let mut w = WriteFs::open_path(&api, WriteOptions::default()).unwrap();
        for &(src, dir, name) in LEGAL {
            api_rename(&mut w, src, dir, name)
                .unwrap_or_else(|e| panic!("api: {src} -> {dir}/{name}: {e}"));
        }
        w.close().unwrap();
        for &(src, dir, name) in LEGAL {
            let o = run(ext4r()
                .args(["mv", "-T"])
                .arg(format!("{}:{src}", cli.display()))
                .arg(format!("{}:{}", cli.display(), join(dir, name))));
            assert!(
                o.status.success(),
                "ext4r mv {src} {dir}/{name}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let kernel_tree = {
            let m = LoopMount::new(&kimg, &t.path("k")).unwrap();
            for &(src, dir, name) in LEGAL {
                fs::rename(m.dir.join(&src[1..]), m.dir.join(&join(dir, name)[1..]))
                    .unwrap_or_else(|e| panic!("kernel: {src} -> {dir}/{name}: {e}"));
            }
            no_times(manifest(&m.dir))
        };
        for (what, im) in [("api", &api), ("cli", &cli)] {
            let (rc, out) = e2fsck_fn(im);
            assert_eq!(rc, 0, "inline={inline}, {what}: e2fsck -fn: {out}");
            let m = LoopMount::new(im, &t.path("ours")).unwrap();
            let ours = no_times(manifest(&m.dir));
            assert!(
                ours == kernel_tree,
                "inline={inline}, {what}: not the kernel's tree"
            );
            // Every moved directory's `..` leads where it now is.
            for &(_, dir, name) in LEGAL {
                let p = m.dir.join(&join(dir, name)[1..]);
                if p.is_dir() {
                    let up = fs::metadata(p.join("..")).unwrap();
                    let parent = fs::metadata(p.parent().unwrap()).unwrap();
                    assert_eq!(up.ino(), parent.ino(), "{what}: {dir}/{name}/..");
                }
            }
        }
    }
}

/// The case issue 35 reported: `ext4r mv IMG:/d1 IMG:/d1/d2/x`, d2 an
/// indexed directory of 300 entries, exited 0 and left /d1 and its 301
/// descendants detached in a d1<->d2 loop.
#[test]
fn issue_35_move_into_a_300_entry_htree_child_is_refused() {
    if !ready() {
        return;
    }
    let t = TempDir::new("subtree-300");
    let img = t.path("a.img");
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-b", "1024"])
        .arg(&img)
        .arg("16M"));
    assert!(o.status.success());
    {
        let m = LoopMount::new(&img, &t.path("m")).unwrap();
        fs::create_dir_all(m.dir.join("d1/d2")).unwrap();
        for i in 0..300 {
            fs::write(m.dir.join(format!("d1/d2/f{i}")), b"").unwrap();
        }
    }
    assert_eq!(htree_levels(&img, "/d1/d2"), Some(0));
    let before = fs::read(&img).unwrap();
    let o = run(ext4r()
        .arg("mv")
        .arg(format!("{}:/d1", img.display()))
        .arg(format!("{}:/d1/d2/x", img.display())));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "ext4r mv: cannot move '/d1' to a subdirectory of itself, '/d1/d2/x'\n"
    );
    assert!(fs::read(&img).unwrap() == before, "the image changed");
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn: {out}");
}

/// Times differ between any two runs: the rest must not.
fn no_times(
    m: std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    m.into_iter()
        .map(|(k, v)| {
            let v = v
                .split(' ')
                .filter(|w| !w.starts_with("mtime="))
                .collect::<Vec<_>>()
                .join(" ");
            (k, v)
        })
        .collect()
}
