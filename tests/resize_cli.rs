//! `resize.ext4r` on image files, beside resize2fs: `-M` cuts the file to
//! the new size as resize2fs does, and a size past what the format can
//! express is refused in resize2fs's words (32 bits) or by naming the
//! limit (2^48 blocks), with the image untouched.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

fn mke2fs(img: &Path, args: &[&str], size: &str) {
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4"])
        .args(args)
        .arg(img)
        .arg(size));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn field(img: &Path, name: &str) -> u64 {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn shrink_to_minimum_cuts_the_file() {
    if !have("mke2fs") || !have("resize2fs") || !have("dumpe2fs") {
        eprintln!("skipped: e2fsprogs not installed");
        return;
    }
    let t = TempDir::new("resize-cli-cut");
    let src = t.path("src");
    fs::create_dir_all(&src).unwrap();
    for i in 0..50 {
        fs::write(src.join(format!("f{i}")), vec![i as u8; 20_000]).unwrap();
    }
    let ours = t.path("ours.img");
    let theirs = t.path("theirs.img");
    for img in [&ours, &theirs] {
        mke2fs(img, &["-d", src.to_str().unwrap()], "64M");
    }
    let o = run(ext4r().args(["resize", "-M"]).arg(&ours));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(Command::new("resize2fs").arg("-M").arg(&theirs));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for img in [&ours, &theirs] {
        let len = fs::metadata(img).unwrap().len();
        let want = field(img, "Block count:") * field(img, "Block size:");
        assert_eq!(
            len,
            want,
            "{}: file length against the filesystem",
            img.display()
        );
        let (rc, out) = e2fsck_fn(img);
        assert_eq!(rc, 0, "{out}");
    }
    assert!(fs::metadata(&ours).unwrap().len() <= fs::metadata(&theirs).unwrap().len());
}

#[test]
fn sizes_past_the_format_are_refused_in_words() {
    if !have("mke2fs") || !have("resize2fs") {
        eprintln!("skipped: e2fsprogs not installed");
        return;
    }
    let t = TempDir::new("resize-cli-limit");
    let img = t.path("narrow.img");
    // 1 KiB blocks without 64bit: 17T is 2^34 blocks and more.
    mke2fs(&img, &["-O", "^64bit"], "64M");
    let before = fs::read(&img).unwrap();
    let o = run(ext4r().arg("resize").arg(&img).arg("17T"));
    let ours = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{ours}");
    let o = run(Command::new("resize2fs").arg(&img).arg("17T"));
    let theirs = String::from_utf8_lossy(&o.stderr).into_owned();
    let line = "New size too large to be expressed in 32 bits";
    assert!(theirs.contains(line), "resize2fs said: {theirs}");
    assert!(ours.contains(line), "we said: {ours}");
    assert!(fs::read(&img).unwrap() == before, "the image changed");

    let wide = t.path("wide.img");
    mke2fs(&wide, &[], "64M");
    let before = fs::read(&wide).unwrap();
    let o = run(ext4r()
        .arg("resize")
        .arg(&wide)
        .arg(((1u64 << 48) + 1).to_string()));
    let ours = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{ours}");
    assert!(ours.contains("2^48"), "we said: {ours}");
    assert!(fs::read(&wide).unwrap() == before, "the image changed");
}
