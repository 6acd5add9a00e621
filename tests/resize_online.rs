//! Online resize through the CLI, as resize2fs is used on a mounted
//! filesystem: mke2fs formats an image, the kernel mounts it from a loop
//! device and files go in, the image file grows (and the loop device is
//! told, `losetup -c`), then `ext4r resize` on the mounted device (or on
//! the image file behind it) asks the kernel to grow. `statfs` of the
//! mount must show the new size at once and the new space must take a
//! file larger than the old free space; after unmounting, `e2fsck -fn`
//! exits 0, dumpe2fs shows the new size and every file reads back as it
//! was. Shrinking a mounted filesystem (a size or `-M`) is refused with
//! resize2fs's message and changes nothing. Needs root and loop devices;
//! skipped with a printed reason otherwise.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::path::Path;
use std::process::Command;

/// (name, mke2fs arguments, image size, grown size in MiB, resize the
/// loop device (true) or the image file behind it (false)).
const LAYOUTS: &[(&str, &str, u64, u64, bool)] = &[
    // mke2fs's default for ext4 at this size: 4 KiB blocks, resize_inode.
    ("ext4-default", "-t ext4", 512, 3072, true),
    // 1 KiB blocks without resize_inode: the kernel turns it to meta_bg
    // once the descriptor table must grow.
    (
        "ext4-1k-noresize",
        "-t ext4 -b 1024 -O ^resize_inode",
        64,
        512,
        false,
    ),
    ("ext4-1k", "-t ext4 -b 1024", 64, 256, true),
];

/// `ext4r resize ARGS`: exit code, stdout, stderr.
fn resize(args: &[&str]) -> (i32, String, String) {
    let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .arg("resize")
        .args(args));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// dumpe2fs's block count of `dev` (read-only: fine while mounted).
fn block_count(dev: &Path) -> u64 {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(dev));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Block count:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("dumpe2fs -h {}: no block count", dev.display()))
}

/// (blocks the kernel reports for the mount, free blocks, block size).
fn statfs(mnt: &Path) -> (u64, u64, u64) {
    let s = rustix::fs::statfs(mnt).unwrap();
    (s.f_blocks, s.f_bfree, s.f_bsize as u64)
}

/// A deterministic byte stream.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn fill(root: &Path) {
    let d = root.join("files");
    std::fs::create_dir_all(&d).unwrap();
    for i in 1..=60u64 {
        std::fs::write(d.join(format!("f{i}")), bytes(i, (i * 13_331) as usize)).unwrap();
    }
    let big = root.join("big");
    std::fs::create_dir_all(&big).unwrap();
    for i in 0..4u64 {
        std::fs::write(big.join(format!("b{i}")), bytes(100 + i, 4 << 20)).unwrap();
    }
    std::fs::hard_link(d.join("f1"), big.join("link1")).unwrap();
    std::os::unix::fs::symlink("files/f2", root.join("sym")).unwrap();
    rustix::fs::lsetxattr(
        d.join("f3"),
        "user.k",
        b"value",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
}

/// Writes `n` bytes to `p` in 1 MiB pieces (a file larger than the old
/// filesystem's free space lands in the new groups).
fn write_large(p: &Path, n: u64) -> Result<(), String> {
    use std::io::Write;
    let mut f = std::fs::File::create(p).map_err(|e| e.to_string())?;
    let chunk = bytes(7, 1 << 20);
    for _ in 0..n >> 20 {
        f.write_all(&chunk)
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    f.sync_all().map_err(|e| e.to_string())
}

/// Whether this process holds CAP_SYS_RESOURCE (bit 24 of CapEff),
/// which the kernel's online resize asks for.
fn cap_sys_resource() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

#[allow(clippy::too_many_arguments)]
fn layout(
    can_resize: bool,
    dir: &TempDir,
    name: &str,
    args: &str,
    mib: u64,
    grown_mib: u64,
    via_loop: bool,
) -> Result<String, String> {
    let img = dir.path(&format!("{name}.img"));
    let mnt = dir.path(&format!("{name}.mnt"));
    let argv: Vec<&str> = args.split_whitespace().collect();
    make_image(Command::new("mke2fs"), &argv, &img, &format!("{mib}M"))?;
    let mut lm = LoopMount::new(&img, &mnt)?;
    let dev = Path::new(&lm.dev).to_path_buf();
    fill(&mnt);
    rustix::fs::sync();
    let old_blocks = block_count(&dev);
    let before = statfs(&mnt);
    let bs = before.2;

    // Shrinking while mounted: refused, nothing changes.
    for shrink in [vec!["-f", &lm.dev, "16M"], vec!["-M", &lm.dev]] {
        let (rc, _, err) = resize(&shrink);
        if rc != 1 || !err.contains("On-line shrinking not supported") {
            return Err(format!(
                "{shrink:?} on the mounted device: exit {rc}, stderr {err:?}"
            ));
        }
    }
    if block_count(&dev) != old_blocks || statfs(&mnt).0 != before.0 {
        return Err("a refused online shrink changed the size".into());
    }

    // Grow the image, then the filesystem while mounted.
    let new_bytes = grown_mib << 20;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&img)
        .unwrap()
        .set_len(new_bytes)
        .unwrap();
    let c = run(Command::new("losetup").arg("-c").arg(&lm.dev));
    if !c.status.success() {
        return Err(format!(
            "losetup -c: {}",
            String::from_utf8_lossy(&c.stderr)
        ));
    }
    let target = if via_loop {
        lm.dev.clone()
    } else {
        img.to_str().unwrap().to_string()
    };
    let (rc, out, err) = resize(&[&target]);
    if !can_resize {
        // The kernel asks for CAP_SYS_RESOURCE (fs/ext4/resize.c,
        // ext4_resize_begin); without it resize2fs is refused as we are.
        let r2 = run(Command::new("resize2fs").arg(&lm.dev));
        let r2err = String::from_utf8_lossy(&r2.stderr);
        let denied = "Permission denied to resize filesystem";
        if rc != 1 || !err.contains(denied) || !r2err.contains(denied) {
            return Err(format!(
                "without CAP_SYS_RESOURCE: ours exit {rc} {err:?}, resize2fs {:?} {r2err:?}",
                r2.status.code()
            ));
        }
        if block_count(&dev) != old_blocks || statfs(&mnt).0 != before.0 {
            return Err("a refused online grow changed the size".into());
        }
        let files = manifest(&mnt);
        lm.umount()?;
        let (rc, fsck) = e2fsck_fn(&img);
        if rc != 0 {
            return Err(format!("e2fsck -fn after the refusals: exit {rc}\n{fsck}"));
        }
        lm.mount()?;
        let again = manifest(&mnt);
        lm.umount()?;
        if again != files {
            return Err("files differ after the refusals".into());
        }
        return Ok(format!(
            "shrink refused; online grow NOT RUN: no CAP_SYS_RESOURCE here, the kernel \
             refuses it to us and to resize2fs alike ({} files intact, e2fsck clean)",
            files.len()
        ));
    }
    if rc != 0 {
        return Err(format!("online grow of {target}: exit {rc}\n{out}{err}"));
    }
    if !out.contains("on-line resizing required") {
        return Err(format!("the grow did not go online: {out}"));
    }
    let want = new_bytes / bs;
    let after = statfs(&mnt);
    // statfs reports the blocks less the metadata overhead: the new
    // groups' tables are a small part of them.
    let gained = after.0.saturating_sub(before.0);
    let added = want - old_blocks;
    if after.2 != bs || gained < added * 9 / 10 || gained > added {
        return Err(format!(
            "statfs after the grow: {} blocks (was {}), {added} added",
            after.0, before.0
        ));
    }
    // The new space takes a file the old free space could not.
    let large = before.1 * bs + (8 << 20);
    write_large(&mnt.join("after-grow"), large)?;
    let files = manifest(&mnt);
    lm.umount()?;
    let (rc, fsck) = e2fsck_fn(&img);
    if rc != 0 {
        return Err(format!(
            "e2fsck -fn after the online grow: exit {rc}\n{fsck}"
        ));
    }
    let n = block_count(&img);
    if n != want {
        return Err(format!("dumpe2fs shows {n} blocks, not {want}"));
    }
    lm.mount()?;
    let again = manifest(&mnt);
    lm.umount()?;
    if again != files {
        let diff: Vec<_> = files
            .iter()
            .filter(|(k, v)| again.get(*k) != Some(v))
            .map(|(k, _)| k)
            .take(5)
            .collect();
        return Err(format!("files differ after remount: {diff:?}"));
    }
    Ok(format!(
        "{old_blocks} -> {n} blocks ({bs} B), statfs {} -> {}, {} files intact",
        before.0,
        after.0,
        files.len()
    ))
}

#[test]
fn online_grow_through_the_cli() {
    if !is_root() {
        println!("skipped: needs root for loop devices and mounts");
        return;
    }
    if !Path::new("/dev/loop-control").exists() {
        println!("skipped: no loop devices (/dev/loop-control)");
        return;
    }
    if let Some(t) = ["losetup", "mount", "umount", "mke2fs", "e2fsck", "dumpe2fs"]
        .into_iter()
        .find(|t| !have(t))
    {
        println!("skipped: {t} not found");
        return;
    }
    let can_resize = cap_sys_resource();
    if !can_resize {
        println!(
            "online grow skipped: no CAP_SYS_RESOURCE in this process, which the kernel's \
             EXT4_IOC_RESIZE_FS needs; checking the refusals instead"
        );
    }
    let dir = TempDir::new("resize-online");
    let mut failures = Vec::new();
    for &(name, args, mib, grown, via_loop) in LAYOUTS {
        match layout(can_resize, &dir, name, args, mib, grown, via_loop) {
            Ok(s) => println!("ok: {name}: {s}"),
            Err(e) => {
                println!("FAILED: {name}: {e}");
                failures.push(name);
            }
        }
    }
    assert!(failures.is_empty(), "failed: {failures:?}");
}
