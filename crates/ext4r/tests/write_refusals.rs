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
    e2fsck_clean(img);
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
        |fs| {
            // Fill it with 1 MiB files until the space runs out.
            for k in 0.. {
                let f = fs
                    .create(ROOT_INO, format!("f{k}").as_bytes(), &NewNode::file(0o644))
                    .unwrap();
                match fs.write(f, 0, &vec![0xa5; 1 << 20]) {
                    Ok(_) => big += 1,
                    Err(Error::NoSpace) => break,
                    Err(e) => panic!("{e}"),
                }
            }
        },
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
