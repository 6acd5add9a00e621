//! The write API refuses what cannot be done with a typed error and
//! leaves the image as it was: a full filesystem, no free inodes, a name
//! over 255 bytes, a path through a non-directory, a directory moved into
//! its own subtree, a filesystem marked read-only, an image on a read-only
//! mount, a read-only loop device, a mounted image or device. After each
//! refusal (and a close) the image is byte-identical to what it was before
//! the refused operation, and e2fsck-clean.
#![allow(clippy::unwrap_used)]

mod common;

use common::{missing_tools, run, TempDir};
use ext4r::device::{FileDevice, OpenMode};
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use ext4r::Error;
use ext4r_txn::testutil::{loop_unavailable, LoopDev, Mount};
use std::path::Path;
use std::sync::Arc;

fn mkfs(dir: &TempDir, name: &str, args: &[&str], size_k: u64) -> std::path::PathBuf {
    let img = dir.join(name);
    let size = format!("{size_k}k");
    let mut a = vec!["-q", "-F", "-t", "ext4"];
    a.extend_from_slice(args);
    a.extend_from_slice(&[img.to_str().unwrap(), &size]);
    run("mke2fs", &a, &[("E2FSPROGS_FAKE_TIME", "1700000000")]).unwrap();
    img
}

fn open(img: &Path) -> WriteFs {
    let dev = FileDevice::open(
        img,
        OpenMode {
            write: true,
            ..OpenMode::default()
        },
    )
    .unwrap();
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_000, 0));
    WriteFs::open(Arc::new(dev), o).unwrap()
}

fn e2fsck_clean(img: &Path) {
    let (code, out, _) =
        common::run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[]).unwrap();
    assert_eq!(code, 0, "e2fsck -fn on {}:\n{out}", img.display());
}

/// Runs `refused` on a freshly opened `img` (after `prepare` made and
/// synced its changes), checks the error with `expect`, closes, and
/// checks that the refused operation wrote nothing.
fn refuses(
    img: &Path,
    prepare: impl FnOnce(&mut WriteFs),
    refused: impl FnOnce(&mut WriteFs) -> ext4r::Result<()>,
    expect: impl FnOnce(&Error) -> bool,
) {
    let mut fs = open(img);
    prepare(&mut fs);
    fs.close().unwrap();
    let before = std::fs::read(img).unwrap();
    let verdict = |img: &Path| {
        common::run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[])
            .unwrap()
            .0
    };
    let clean_before = verdict(img) == 0;
    let mut fs = open(img);
    let e = refused(&mut fs).expect_err("the operation should be refused");
    assert!(expect(&e), "unexpected error: {e:?} ({e})");
    assert!(!e.to_string().is_empty());
    fs.close().unwrap();
    let after = std::fs::read(img).unwrap();
    let diff = before.iter().zip(&after).position(|(a, b)| a != b);
    assert!(
        diff.is_none(),
        "the image changed at byte {diff:?} after: {e}"
    );
    // Clean stays clean (an image made odd on purpose stays as odd).
    if clean_before {
        e2fsck_clean(img);
    }
}

/// Writes files `/f0`, `/f1`, ... of 1 MiB of 0xa5 until the space runs
/// out; the number written whole.
fn fill_with_mib_files(fs: &mut WriteFs) -> usize {
    let mut files = 0;
    for k in 0.. {
        let f = fs
            .create(ROOT_INO, format!("f{k}").as_bytes(), &NewNode::file(0o644))
            .unwrap();
        match fs.write(f, 0, &vec![0xa5; 1 << 20]) {
            Ok(_) => files += 1,
            Err(Error::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
    }
    files
}

#[test]
fn full_filesystem_is_no_space_and_nothing_changes() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-full");
    let img = mkfs(&dir, "full.img", &[], 8192);
    let mut big = 0;
    refuses(
        &img,
        |fs| big = fill_with_mib_files(fs),
        |fs| {
            let f = fs.lookup_path("/f0")?;
            fs.write(f, 1 << 20, &vec![1; 4 << 20]).map(drop)
        },
        |e| matches!(e, Error::NoSpace),
    );
    assert!(big > 2, "only {big} files fitted");
    // Growing past the end of a full filesystem by preallocation too.
    refuses(
        &img,
        |_| {},
        |fs| {
            let f = fs.lookup_path("/f1")?;
            fs.fallocate(f, 0, 64 << 20, false)
        },
        |e| matches!(e, Error::NoSpace),
    );
}

#[test]
fn no_free_inodes_is_its_own_error() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-inodes");
    // One group, as few inodes as mke2fs makes.
    let img = mkfs(&dir, "inodes.img", &["-N", "16"], 4096);
    refuses(
        &img,
        |fs| loop {
            let free = fs.free_inodes();
            if free == 0 {
                break;
            }
            fs.create(
                ROOT_INO,
                format!("i{free}").as_bytes(),
                &NewNode::file(0o644),
            )
            .unwrap();
        },
        |fs| {
            fs.create(ROOT_INO, b"one-more", &NewNode::file(0o644))
                .map(drop)
        },
        |e| matches!(e, Error::NoFreeInodes),
    );
    refuses(
        &img,
        |_| {},
        |fs| fs.mkdir(ROOT_INO, b"d", &NewNode::dir(0o755)).map(drop),
        |e| matches!(e, Error::NoFreeInodes),
    );
}

#[test]
fn bad_names_and_paths_are_refused() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-names");
    let img = mkfs(&dir, "names.img", &[], 8192);
    let prepare = |fs: &mut WriteFs| {
        let a = fs.mkdir(ROOT_INO, b"a", &NewNode::dir(0o755)).unwrap();
        let b = fs.mkdir(a, b"b", &NewNode::dir(0o755)).unwrap();
        fs.mkdir(b, b"c", &NewNode::dir(0o755)).unwrap();
        let f = fs.create(ROOT_INO, b"file", &NewNode::file(0o644)).unwrap();
        fs.write(f, 0, b"data").unwrap();
    };
    let long = vec![b'n'; 256];
    refuses(
        &img,
        prepare,
        |fs| fs.create(ROOT_INO, &long, &NewNode::file(0o644)).map(drop),
        |e| matches!(e, Error::InvalidName(_)),
    );
    // 255 bytes is allowed: the limit is exact.
    {
        let mut fs = open(&img);
        fs.create(ROOT_INO, &long[..255], &NewNode::file(0o644))
            .unwrap();
        fs.close().unwrap();
        e2fsck_clean(&img);
    }
    for bad in [&b""[..], b"x/y", b"nul\0", b".", b".."] {
        refuses(
            &img,
            |_| {},
            |fs| fs.mkdir(ROOT_INO, bad, &NewNode::dir(0o755)).map(drop),
            |e| matches!(e, Error::InvalidName(_) | Error::AlreadyExists(_)),
        );
    }
    refuses(
        &img,
        |_| {},
        |fs| {
            let f = fs.lookup_path("/file")?;
            fs.create(f, b"inside", &NewNode::file(0o644)).map(drop)
        },
        |e| matches!(e, Error::NotADirectory(_)),
    );
    refuses(
        &img,
        |_| {},
        |fs| fs.lookup_path("/file/inside").map(drop),
        |e| matches!(e, Error::NotADirectory(_)),
    );
    refuses(
        &img,
        |_| {},
        |fs| fs.lookup_path("/a/nothing/here").map(drop),
        |e| matches!(e, Error::NotFound(_)),
    );
    // A directory into its own subtree, at every depth.
    for target in ["/a", "/a/b", "/a/b/c"] {
        refuses(
            &img,
            |_| {},
            |fs| {
                let t = fs.lookup_path(target)?;
                fs.rename(ROOT_INO, b"a", t, b"moved")
            },
            |e| matches!(e, Error::MoveIntoItself(_)),
        );
    }
    refuses(
        &img,
        |_| {},
        |fs| fs.rmdir(ROOT_INO, b"a"),
        |e| matches!(e, Error::DirectoryNotEmpty(_)),
    );
    refuses(
        &img,
        |_| {},
        |fs| fs.unlink(ROOT_INO, b"a"),
        |e| matches!(e, Error::IsADirectory(_)),
    );
}

#[test]
fn read_only_filesystems_are_refused() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck", "tune2fs"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-ro");
    let img = mkfs(&dir, "ro.img", &[], 8192);
    run("tune2fs", &["-O", "read-only", img.to_str().unwrap()], &[]).unwrap();
    let before = std::fs::read(&img).unwrap();
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_000, 0));
    let e = WriteFs::open_path(&img, o.clone()).unwrap_err();
    assert!(matches!(e, Error::ReadOnly(_)), "{e:?}");
    assert!(e.to_string().contains("read-only"), "{e}");
    assert_eq!(std::fs::read(&img).unwrap(), before);

    if let Some(why) = loop_unavailable() {
        eprintln!("read-only mounts and devices skipped: {why}");
        return;
    }
    run("tune2fs", &["-O", "^read-only", img.to_str().unwrap()], &[]).unwrap();
    let before = std::fs::read(&img).unwrap();
    // The image on a read-only bind mount of its directory.
    let ro = dir.join("ro-view");
    std::fs::create_dir_all(&ro).unwrap();
    let (d, r) = (dir.join(""), ro.to_str().unwrap().to_string());
    run("mount", &["--bind", d.to_str().unwrap(), &r], &[]).unwrap();
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = run("umount", &[&self.0], &[]);
        }
    }
    let guard = Unmount(r.clone());
    run("mount", &["-o", "remount,bind,ro", &r], &[]).unwrap();
    let e = WriteFs::open_path(&ro.join("ro.img"), o.clone()).unwrap_err();
    drop(guard);
    assert!(matches!(e, Error::ReadOnly(_)), "{e:?}");
    // A loop device attached read-only.
    let out = run(
        "losetup",
        &["-r", "-f", "--show", img.to_str().unwrap()],
        &[],
    )
    .unwrap();
    let lo = LoopDev(out.trim().into());
    let e = WriteFs::open_path(&lo.0, o).unwrap_err();
    drop(lo);
    assert!(matches!(e, Error::ReadOnly(_)), "{e:?}");
    assert_eq!(std::fs::read(&img).unwrap(), before);
}

/// A read-only view over a staging device (what `ext4r mount -o ro`
/// opens) accepts what the read API reads, a filesystem with quota too,
/// which the write API does not write; it reads the tree and refuses every
/// change, and the image stays byte for byte.
#[test]
fn a_staged_read_only_view_reads_what_writing_refuses() {
    if let Some(m) = missing_tools(&["mke2fs"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-view");
    let img = mkfs(&dir, "quota.img", &["-O", "quota"], 16384);
    let before = std::fs::read(&img).unwrap();
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_000, 0));
    let e = WriteFs::open_path(&img, o.clone()).unwrap_err();
    assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
    let dev = FileDevice::open(&img, OpenMode::default()).unwrap();
    let staged = Arc::new(ext4r::device::Staged::new(Arc::new(dev), 1024));
    o.staged_read_only = true;
    let mut w = WriteFs::open(staged, o).unwrap();
    assert!(w.lookup(ROOT_INO, b"lost+found").unwrap().is_some());
    let e = w
        .create(ROOT_INO, b"new", &NewNode::file(0o644))
        .unwrap_err();
    assert!(matches!(e, Error::ReadOnly(_)), "{e:?}");
    assert!(matches!(w.sync(), Err(Error::ReadOnly(_))));
    drop(w);
    assert_eq!(std::fs::read(&img).unwrap(), before);
}

/// A device opened for reading only is refused at open, not at the first
/// commit; after a commit fails, every call names that failure.
#[test]
fn read_only_devices_and_failed_commits() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-lifecycle");
    let img = mkfs(&dir, "life.img", &[], 8192);
    let before = std::fs::read(&img).unwrap();
    let reader = FileDevice::open(&img, OpenMode::default()).unwrap();
    let e = WriteFs::open(Arc::new(reader), WriteOptions::default()).unwrap_err();
    assert!(matches!(e, Error::ReadOnly(_)), "{e:?}");
    assert!(e.to_string().contains("reading only"), "{e}");
    assert_eq!(std::fs::read(&img).unwrap(), before);

    // Every write after the open fails: the first commit fails, and so
    // does every call after it, saying why.
    let dev = FileDevice::open(
        &img,
        OpenMode {
            write: true,
            ..OpenMode::default()
        },
    )
    .unwrap();
    let fault = Arc::new(ext4r::device::FaultDevice::new(dev));
    let mut o = WriteOptions::default();
    o.sync_every_op = true;
    let mut fs = WriteFs::open(fault.clone(), o).unwrap();
    fault.fail_after(0);
    let first = fs.mkdir(ROOT_INO, b"a", &NewNode::dir(0o755)).unwrap_err();
    for later in [
        fs.mkdir(ROOT_INO, b"b", &NewNode::dir(0o755)).unwrap_err(),
        fs.sync().unwrap_err(),
        fs.close().unwrap_err(),
    ] {
        assert!(matches!(later, Error::ReadOnly(_)), "{later:?}");
        assert!(
            later.to_string().contains(&first.to_string()),
            "'{later}' does not name the failed commit '{first}'"
        );
    }
    fault.heal();
    let (code, out, _) =
        common::run_status("e2fsck", &["-fy", img.to_str().unwrap()], &[]).unwrap();
    assert!(
        code <= 1,
        "e2fsck -fy after the failed commit: {code}\n{out}"
    );
}

#[test]
fn mounted_images_and_devices_are_refused() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    if let Some(why) = loop_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = TempDir::new("wrefuse-mounted");
    let img = mkfs(&dir, "m.img", &[], 8192);
    let lo = LoopDev::attach(&img).unwrap();
    let m = Mount::new(&lo.0, &dir.join("mnt")).unwrap();
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_000, 0));
    for path in [&img, &lo.0] {
        let e = WriteFs::open_path(path, o.clone()).unwrap_err();
        assert!(
            matches!(e, Error::Mounted { .. } | Error::InUse(_)),
            "{}: {e:?}",
            path.display()
        );
        assert!(e.to_string().contains("mounted") || e.to_string().contains("in use"));
    }
    drop(m);
    drop(lo);
    e2fsck_clean(&img);
}

/// Directories whose names we cannot match or write (encrypted,
/// casefolded) and files whose data we cannot write (encrypted, verity)
/// are refused with an error naming the feature; nothing is written.
#[test]
fn encrypted_and_casefolded_directories_are_refused_by_name() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck", "debugfs"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("write-refusals-flags");
    let img = mkfs(&dir, "flags.img", &["-O", "encrypt,casefold,verity"], 8192);
    // Flags set the way the kernel stores them (debugfs: the kernel here
    // may lack the keys or Unicode tables to make them itself).
    let script = "mkdir cf\nset_inode_field cf flags 0x40000000\nmkdir enc\nset_inode_field enc flags 0x800\nwrite /dev/null ef\nset_inode_field ef flags 0x80800\nwrite /dev/null vf\nset_inode_field vf flags 0x180000\n";
    let cmds = dir.join("cmds");
    std::fs::write(&cmds, script).unwrap();
    run(
        "debugfs",
        &["-w", "-f", cmds.to_str().unwrap(), img.to_str().unwrap()],
        &[],
    )
    .unwrap();
    let named = |feature: &'static str| move |e: &Error| matches!(e, Error::Unsupported(m) if m.contains(feature));
    for (d, feature) in [("cf", "casefold"), ("enc", "encrypt")] {
        refuses(
            &img,
            |_| {},
            |fs| {
                let di = fs.lookup_path(format!("/{d}")).unwrap();
                fs.create(di, b"new", &NewNode::file(0o644)).map(|_| ())
            },
            named(feature),
        );
        refuses(
            &img,
            |_| {},
            |fs| fs.lookup_path(format!("/{d}/x")).map(|_| ()),
            named(feature),
        );
    }
    for (f, feature) in [("ef", "encrypt"), ("vf", "verity")] {
        refuses(
            &img,
            |_| {},
            |fs| {
                let fi = fs.lookup_path(format!("/{f}")).unwrap();
                fs.write(fi, 0, b"data").map(|_| ())
            },
            named(feature),
        );
        refuses(
            &img,
            |_| {},
            |fs| {
                let fi = fs.lookup_path(format!("/{f}")).unwrap();
                fs.truncate(fi, 100)
            },
            named(feature),
        );
    }
}

/// A damaged extent block is a corruption error that names the inode and
/// the block as numbers (not only in words), and nothing is written.
#[test]
fn a_damaged_extent_block_is_a_typed_corruption_error() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck", "debugfs"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("write-refusals-typed");
    let img = mkfs(&dir, "typed.img", &[], 16384);
    // A file of many extents: one piece in every other block.
    let mut fs = open(&img);
    let f = fs.create(ROOT_INO, b"frag", &NewNode::file(0o644)).unwrap();
    let bs = fs.block_size();
    for k in 0..40u64 {
        fs.write(f, k * 2 * bs, &[7u8; 100]).unwrap();
    }
    fs.close().unwrap();
    let (_, out, _) =
        common::run_status("debugfs", &["-R", "stat /frag", img.to_str().unwrap()], &[]).unwrap();
    let etb: u64 = out
        .split("(ETB0):")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .expect("an extent block");
    // Its magic broken.
    let mut bytes = std::fs::read(&img).unwrap();
    let at = (etb * bs) as usize;
    bytes[at] ^= 0xff;
    std::fs::write(&img, &bytes).unwrap();
    let mut fs = open(&img);
    let e = fs.write(f, 0, b"x").expect_err("a damaged tree is refused");
    let loc = e.location().expect("a corruption error");
    assert_eq!(loc.inode, Some(f), "{e}");
    assert_eq!(loc.block, Some(etb), "{e}");
    assert!(
        e.to_string().contains(&format!("extent block {etb}")),
        "{e}"
    );
    fs.close().unwrap();
    assert_eq!(std::fs::read(&img).unwrap(), bytes, "nothing written");
}

/// The htree depth debugfs reports for `dir` ("Indirect levels").
fn htree_levels(img: &Path, dir: &str) -> Option<u32> {
    let out = run(
        "debugfs",
        &["-R", &format!("htree {dir}"), img.to_str().unwrap()],
        &[],
    )
    .ok()?;
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Indirect levels: "))
        .map(|n| n.trim().parse().unwrap())
}

/// `..` is read where the kernel reads it, whatever the directory's form
/// (block 0 of a linear or indexed directory, `i_block` of an inline one),
/// here with directories the write API made itself: a move into its own
/// subtree through indexed (one and two levels) and inline directories is
/// refused, and `.` and `..` are looked up as the kernel does (issue 35:
/// the htree hashed `..` to a leaf, found nothing, and allowed the move).
#[test]
fn moves_into_itself_through_indexed_and_inline_directories() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck", "debugfs"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-subtree");
    for inline in [false, true] {
        let mut args = vec!["-b", "1024", "-N", "4096"];
        if inline {
            args.extend(["-O", "inline_data"]);
        }
        let img = mkfs(
            &dir,
            if inline { "in.img" } else { "plain.img" },
            &args,
            32768,
        );
        {
            let mut fs = open(&img);
            let d = NewNode::dir(0o755);
            let a = fs.mkdir(ROOT_INO, b"a", &d).unwrap();
            let h1 = fs.mkdir(a, b"h1", &d).unwrap();
            for i in 0..300 {
                fs.create(h1, format!("f{i}").as_bytes(), &NewNode::file(0o644))
                    .unwrap();
            }
            let h2 = fs.mkdir(h1, b"h2", &d).unwrap();
            for i in 0..600 {
                let name = format!("{i:04}-{}", "n".repeat(240));
                fs.create(h2, name.as_bytes(), &NewNode::file(0o644))
                    .unwrap();
            }
            let s = fs.mkdir(h2, b"s", &d).unwrap();
            fs.mkdir(s, b"i", &d).unwrap();
            fs.close().unwrap();
        }
        e2fsck_clean(&img);
        assert_eq!(htree_levels(&img, "/a/h1"), Some(0));
        assert_eq!(htree_levels(&img, "/a/h1/h2"), Some(1));
        {
            let fs = open(&img);
            let ino = |p: &str| fs.lookup_path(p).unwrap();
            let i = ino("/a/h1/h2/s/i");
            let is_inline = fs
                .stat(i)
                .unwrap()
                .flags()
                .contains(ext4r_format::inode::InodeFlags::INLINE_DATA);
            assert_eq!(is_inline, inline);
            for (d, parent) in [
                ("/a/h1", "/a"),
                ("/a/h1/h2", "/a/h1"),
                ("/a/h1/h2/s", "/a/h1/h2"),
                ("/a/h1/h2/s/i", "/a/h1/h2/s"),
            ] {
                assert_eq!(
                    fs.lookup(ino(d), b"..").unwrap(),
                    Some(ino(parent)),
                    "{d}/.."
                );
                assert_eq!(fs.lookup(ino(d), b".").unwrap(), Some(ino(d)), "{d}/.");
                assert!(fs.contains(ino("/a"), ino(d)).unwrap());
                assert!(!fs.contains(ino(d), ino("/a")).unwrap());
            }
        }
        for target in ["/a", "/a/h1", "/a/h1/h2", "/a/h1/h2/s", "/a/h1/h2/s/i"] {
            refuses(
                &img,
                |_| {},
                |fs| {
                    let t = fs.lookup_path(target)?;
                    fs.rename(ROOT_INO, b"a", t, b"moved")
                },
                |e| matches!(e, Error::MoveIntoItself(_)),
            );
        }
        for (src, target) in [("/a/h1", "/a/h1/h2/s/i"), ("/a/h1/h2", "/a/h1/h2/s")] {
            refuses(
                &img,
                |_| {},
                |fs| {
                    let (p, name) = src.rsplit_once('/').unwrap();
                    let p = fs.lookup_path(p)?;
                    let t = fs.lookup_path(target)?;
                    fs.rename(p, name.as_bytes(), t, b"f1")
                },
                |e| matches!(e, Error::MoveIntoItself(_)),
            );
        }
    }
}

/// A `..` chain that never reaches the root (a loop two directories make
/// of each other) is corruption: the rename is refused with a typed
/// error, never allowed on a "not an ancestor" it could not establish.
#[test]
fn a_dotdot_loop_is_corruption_not_permission() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck", "debugfs"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-loop");
    // No metadata_csum: the edited `..` is read, not refused for its
    // checksum.
    let img = mkfs(
        &dir,
        "loop.img",
        &["-b", "1024", "-O", "^metadata_csum"],
        8192,
    );
    {
        let mut fs = open(&img);
        let d = NewNode::dir(0o755);
        let a = fs.mkdir(ROOT_INO, b"a", &d).unwrap();
        let b = fs.mkdir(a, b"b", &d).unwrap();
        fs.mkdir(b, b"c", &d).unwrap();
        fs.mkdir(ROOT_INO, b"x", &d).unwrap();
        fs.close().unwrap();
    }
    // b's `..` (at byte 12 of its block 0) pointed at c: c -> b -> c.
    let bmap = |p: &str| -> u64 {
        run(
            "debugfs",
            &["-R", &format!("bmap {p} 0"), img.to_str().unwrap()],
            &[],
        )
        .unwrap()
        .trim()
        .parse()
        .unwrap()
    };
    let c_ino = {
        let fs = open(&img);
        fs.lookup_path("/a/b/c").unwrap()
    };
    let dev = common::open_rw(&img).unwrap();
    ext4r::device::BlockDevice::write_at(&dev, &c_ino.to_le_bytes(), bmap("/a/b") * 1024 + 12)
        .unwrap();
    drop(dev);
    refuses(
        &img,
        |_| {},
        |fs| {
            let c = fs.lookup_path("/a/b/c")?;
            fs.rename(ROOT_INO, b"x", c, b"moved")
        },
        |e| matches!(e, Error::Corrupt { .. }) && ext4r::error::chain(e).contains("loops"),
    );
}

/// A filesystem the write API will refuse (here multiple-mount
/// protection, which the writers do not take offline) whose journal needs
/// recovery: refused before the replay, so the image is not written at
/// all (the replay used to run first, then the refusal came).
#[test]
fn a_refused_filesystem_is_not_replayed_first() {
    if let Some(m) = missing_tools(&["mke2fs", "debugfs"]) {
        eprintln!("skipping: {m}");
        return;
    }
    let dir = TempDir::new("refuse-before-replay");
    let img = mkfs(&dir, "mmp.img", &["-O", "mmp"], 32 * 1024);
    let blk = dir.join("blk.bin");
    std::fs::write(&blk, vec![0x5a; 1024]).unwrap();
    let cmds = dir.join("cmds");
    std::fs::write(
        &cmds,
        format!("jo -c\njw -b 3000,3001 {}\njc\n", blk.display()),
    )
    .unwrap();
    run(
        "debugfs",
        &["-w", "-f", cmds.to_str().unwrap(), img.to_str().unwrap()],
        &[],
    )
    .unwrap();
    let before = std::fs::read(&img).unwrap();
    let dev = FileDevice::open(
        &img,
        OpenMode {
            write: true,
            ..OpenMode::default()
        },
    )
    .unwrap();
    let e = WriteFs::open(Arc::new(dev), WriteOptions::default())
        .expect_err("a filesystem with mmp is not opened for writing");
    assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
    let after = std::fs::read(&img).unwrap();
    let diff = before.iter().zip(&after).position(|(a, b)| a != b);
    assert!(diff.is_none(), "the image changed at byte {diff:?}: {e}");
}

/// Uninit flags on a filesystem without group checksums are damage (the
/// kernel ignores them and e2fsck reports them): a write there leaves
/// them as they are, where it used to clear them and so hide the damage.
#[test]
fn uninit_flags_without_group_checksums_stay_for_fsck() {
    if let Some(m) = missing_tools(&["mke2fs", "debugfs", "e2fsck"]) {
        eprintln!("skipping: {m}");
        return;
    }
    let dir = TempDir::new("flags-no-csum");
    let img = dir.join("ext2.img");
    run(
        "mke2fs",
        &["-q", "-F", "-t", "ext2", img.to_str().unwrap(), "16M"],
        &[],
    )
    .unwrap();
    run(
        "debugfs",
        &["-w", "-R", "set_bg 0 flags 3", img.to_str().unwrap()],
        &[],
    )
    .unwrap();
    let verdict = || {
        common::run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[])
            .unwrap()
            .0
    };
    assert_ne!(verdict(), 0, "debugfs made the damage");
    let mut fs = open(&img);
    let f = fs.create(ROOT_INO, b"new", &NewNode::file(0o644)).unwrap();
    fs.write(f, 0, &[7; 5000]).unwrap();
    fs.mkdir(ROOT_INO, b"dir", &NewNode::dir(0o755)).unwrap();
    fs.close().unwrap();
    assert_ne!(verdict(), 0, "the write made the damaged flags look clean");
}

/// A new inode's attributes are stored in the operation that makes it
/// (the ACLs it takes from its directory): a create whose attribute is
/// refused makes nothing at all, and one that succeeds has them, on an
/// inline directory too (the attribute first, as the kernel's create).
#[test]
fn a_create_whose_attribute_is_refused_makes_nothing() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-xattr");
    let img = mkfs(&dir, "x.img", &["-O", "inline_data", "-I", "256"], 8192);
    refuses(
        &img,
        |_| {},
        |fs| {
            let n = NewNode::file(0o640).with_xattr(b"nonsense.name", b"v");
            fs.create(ROOT_INO, b"f", &n).map(drop)
        },
        |e| matches!(e, Error::InvalidName(_)),
    );
    refuses(
        &img,
        |_| {},
        |fs| {
            // No block takes a value this large, and no ea_inode.
            let n = NewNode::dir(0o750).with_xattr(b"user.big", &[7; 70_000]);
            fs.mkdir(ROOT_INO, b"d", &n).map(drop)
        },
        |e| matches!(e, Error::NoSpace),
    );
    // ext4's ACL format: version 1; user::rw-, group::r--, other::---.
    let acl = [1u8, 0, 0, 0, 1, 0, 6, 0, 4, 0, 4, 0, 0x20, 0, 0, 0];
    let mut fs = open(&img);
    let f = NewNode::file(0o640).with_xattr(b"system.posix_acl_access", &acl);
    let f = fs.create(ROOT_INO, b"f", &f).unwrap();
    let d = NewNode::dir(0o750)
        .with_xattr(b"system.posix_acl_default", &acl)
        .with_xattr(b"user.k", &[1; 40]);
    let d = fs.mkdir(ROOT_INO, b"d", &d).unwrap();
    let names = |fs: &WriteFs, ino| -> Vec<Vec<u8>> {
        fs.xattrs(ino).unwrap().into_iter().map(|x| x.0).collect()
    };
    assert_eq!(names(&fs, f), vec![b"system.posix_acl_access".to_vec()]);
    assert_eq!(
        names(&fs, d),
        vec![b"system.posix_acl_default".to_vec(), b"user.k".to_vec()]
    );
    fs.create(d, b"in", &NewNode::file(0o600)).unwrap();
    fs.close().unwrap();
    e2fsck_clean(&img);
}

/// The largest file size is the kernel's, per block size, huge_file and
/// mapping (extents or a block map): found on a loop mount by bisecting
/// ftruncate's EFBIG, it is where the library's truncate, write and
/// fallocate stop too. Up to it a truncate is taken; past it each is
/// refused with `FileTooLarge` (EFBIG); a write across it is short.
#[test]
fn the_largest_file_is_the_kernels() {
    use std::os::unix::fs::FileExt;
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    if let Some(why) = loop_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = TempDir::new("wrefuse-efbig");
    let shapes: [&[&str]; 4] = [
        &["-b", "4096"],
        &["-b", "1024", "-O", "^huge_file"],
        &["-b", "2048", "-O", "^extent,^64bit"],
        &["-b", "4096", "-O", "^extent,^64bit,^huge_file"],
    ];
    for (k, args) in shapes.iter().enumerate() {
        let img = mkfs(&dir, &format!("s{k}.img"), args, 16384);
        let kernel = {
            let lo = LoopDev::attach(&img).unwrap();
            let m = Mount::new(&lo.0, &dir.join("mnt")).unwrap();
            let f = std::fs::File::create(m.0.join("f")).unwrap();
            let (mut lo_ok, mut hi_bad) = (0u64, i64::MAX as u64);
            while hi_bad - lo_ok > 1 {
                let mid = lo_ok + (hi_bad - lo_ok) / 2;
                match f.set_len(mid) {
                    Ok(()) => lo_ok = mid,
                    Err(e) if e.raw_os_error() == Some(27) => hi_bad = mid,
                    Err(e) => panic!("{args:?}: ftruncate {mid}: {e}"),
                }
            }
            // The kernel's short write at the limit, for the record.
            f.set_len(0).unwrap();
            assert_eq!(f.write_at(b"ab", lo_ok - 1).unwrap(), 1, "{args:?}");
            drop(f);
            std::fs::remove_file(m.0.join("f")).unwrap();
            drop(m);
            drop(lo);
            lo_ok
        };
        let mut fs = open(&img);
        let f = fs.create(ROOT_INO, b"f", &NewNode::file(0o644)).unwrap();
        fs.truncate(f, kernel).unwrap();
        let e = fs.truncate(f, kernel + 1).unwrap_err();
        assert!(matches!(e, Error::FileTooLarge(_)), "{args:?}: {e:?}");
        fs.truncate(f, 0).unwrap();
        assert_eq!(fs.write(f, kernel - 1, b"ab").unwrap(), 1, "{args:?}");
        assert_eq!(fs.stat(f).unwrap().size(), kernel);
        let e = fs.write(f, kernel, b"a").unwrap_err();
        assert!(matches!(e, Error::FileTooLarge(_)), "{args:?}: {e:?}");
        if !args.iter().any(|a| a.starts_with("^extent")) {
            let e = fs.fallocate(f, kernel - 4096, 8192, true).unwrap_err();
            assert!(matches!(e, Error::FileTooLarge(_)), "{args:?}: {e:?}");
        }
        fs.close().unwrap();
        e2fsck_clean(&img);
    }
}

/// Space a deletion frees is used again in the same session, as the
/// kernel's: the freed blocks are held until their transaction commits
/// (ordered mode), so an allocation that finds no other room commits
/// first and tries again (the kernel's `ext4_should_retry_alloc`),
/// instead of failing with no space on a filesystem that has it.
#[test]
fn space_freed_before_the_commit_is_used_after_it() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("wrefuse-held");
    let img = mkfs(&dir, "held.img", &[], 8192);
    let mut fs = open(&img);
    let files = fill_with_mib_files(&mut fs);
    assert!(files > 2, "only {files} files fitted");
    fs.sync().unwrap();
    // In one transaction: two files go, and two new ones take their room
    // (and a directory, whose block needs some too).
    fs.unlink(ROOT_INO, b"f0").unwrap();
    fs.unlink(ROOT_INO, b"f1").unwrap();
    for name in [&b"g0"[..], b"g1"] {
        let g = fs.create(ROOT_INO, name, &NewNode::file(0o644)).unwrap();
        let n = fs.write(g, 0, &vec![0x5a; 1 << 20]).unwrap();
        assert_eq!(n, 1 << 20);
    }
    fs.close().unwrap();
    e2fsck_clean(&img);
    let fs = open(&img);
    for name in ["/g0", "/g1"] {
        let g = fs.lookup_path(name).unwrap();
        let mut buf = vec![0; 1 << 20];
        assert_eq!(fs.read(g, 0, &mut buf).unwrap(), 1 << 20);
        assert!(buf.iter().all(|&b| b == 0x5a), "{name}'s contents");
    }
    assert!(fs.lookup_path("/f0").is_err());
}
