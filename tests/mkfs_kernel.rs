//! Images made by mkfs.ext4r, mounted by Linux: a mixed workload goes in,
//! the image is unmounted and checked with e2fsck -fn, remounted, and every
//! file must read back as written.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const CONFIGS: &[(&str, &str)] = &[
    ("256M", "-t ext4"),
    ("64M", "-t ext4 -b 1024"),
    ("512M", "-t ext4 -O ^metadata_csum,uninit_bg"),
    ("128M", "-t ext3"),
    ("128M", "-t ext2"),
    ("4G", "-t ext4"),
    ("1G", "-t ext4 -O bigalloc"),
    ("512M", "-t ext4 -O bigalloc -C 16384"),
    ("512M", "-t ext4 -b 1024 -O bigalloc -C 16384"),
    ("1G", "-t ext4 -E packed_meta_blocks=1"),
    ("256M", "-t ext4 -O encrypt"),
];

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn workload(root: &Path) {
    let sizes = [0usize, 1, 4095, 4096, 4097, 65536, (1 << 20) + 1, 20 << 20];
    fs::create_dir(root.join("files")).unwrap();
    for (i, s) in sizes.iter().enumerate() {
        fs::write(root.join(format!("files/f{i}")), pattern(*s, i as u8)).unwrap();
    }
    // Sparse: data at 0 and far out.
    let mut f = fs::File::create(root.join("sparse")).unwrap();
    f.write_all(b"start").unwrap();
    f.seek(SeekFrom::Start(100 << 20)).unwrap();
    f.write_all(b"end").unwrap();
    drop(f);
    // A directory big enough for an htree.
    fs::create_dir(root.join("big")).unwrap();
    for i in 0..3000 {
        fs::write(
            root.join(format!("big/entry-with-a-longish-name-{i:05}")),
            i.to_string(),
        )
        .unwrap();
    }
    // Symlinks: fast (fits in the inode) and slow (needs a block).
    std::os::unix::fs::symlink("files/f1", root.join("fast-link")).unwrap();
    let long = format!("{}/target", "d".repeat(100));
    std::os::unix::fs::symlink(&long, root.join("slow-link")).unwrap();
    // Hard links.
    fs::hard_link(root.join("files/f3"), root.join("hard1")).unwrap();
    fs::hard_link(root.join("files/f3"), root.join("hard2")).unwrap();
    // User xattrs (ext2/3 images also have ext_attr).
    let x = root.join("files/f2");
    rustix::fs::setxattr(&x, "user.color", b"blue", rustix::fs::XattrFlags::empty()).unwrap();
    rustix::fs::setxattr(
        &x,
        "user.big",
        &pattern(800, 7),
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    // Deletions and renames.
    for i in (0..3000).step_by(7) {
        fs::remove_file(root.join(format!("big/entry-with-a-longish-name-{i:05}"))).unwrap();
    }
    fs::rename(root.join("files/f4"), root.join("renamed")).unwrap();
    fs::rename(
        root.join("big/entry-with-a-longish-name-00001"),
        root.join("files/moved"),
    )
    .unwrap();
    fs::set_permissions(root.join("renamed"), fs::Permissions::from_mode(0o640)).unwrap();
}

#[test]
fn kernel_mounts_fills_and_keeps_our_images() {
    if !is_root() || !have("losetup") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup and e2fsck");
        return;
    }
    let dir = TempDir::new("kernel");
    let mut failures = Vec::new();
    for (size, args) in CONFIGS {
        let name = format!("{size} {args}");
        let img = dir.path("img");
        let mnt = dir.path("mnt");
        let argv: Vec<&str> = args.split_whitespace().collect();
        let r = (|| -> Result<usize, String> {
            make_image(ours_cmd(), &argv, &img, size)?;
            let mut lm = LoopMount::new(&img, &mnt)?;
            workload(&mnt);
            let before = manifest(&mnt);
            lm.umount()?;
            let (rc, out) = e2fsck_fn(&img);
            if rc != 0 {
                return Err(format!("e2fsck -fn after the workload exit {rc}:\n{out}"));
            }
            lm.mount()?;
            let after = manifest(&mnt);
            lm.umount()?;
            if before != after {
                let diff: Vec<_> = before
                    .iter()
                    .filter(|(k, v)| after.get(*k) != Some(v))
                    .take(5)
                    .collect();
                return Err(format!("files changed across remount: {diff:?}"));
            }
            Ok(before.len())
        })();
        match r {
            Ok(n) => println!("ok: {name}: {n} files intact"),
            Err(e) => {
                println!("FAILED: {name}: {e}");
                failures.push(name);
            }
        }
        let _ = fs::remove_file(&img);
    }
    assert!(failures.is_empty(), "failed: {failures:?}");
}
