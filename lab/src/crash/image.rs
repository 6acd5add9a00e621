//! Base images for the crash workloads, made with mke2fs and filled by the
//! kernel through a loop mount, and the manifest of their files (path to
//! content hash) read back with our read path.

use anyhow::{bail, Context, Result};
use ext4r::device::{BlockDevice, MemDevice};
use ext4r::fs::{FileKind, Filesystem, OpenOptions};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::Command;

/// Path to (size, FNV-1a hash) of every regular file, and symlink targets.
pub type Manifest = BTreeMap<String, (u64, u64)>;

fn sh(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("{cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// A small deterministic generator (xorshift).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Makes `img` with mke2fs (`opts`, `size`), mounts it and writes a seeded
/// tree: directories, files of many sizes (some sparse), symlinks, hard
/// links. Returns the image in memory.
pub fn kernel_filled(
    dir: &Path,
    name: &str,
    opts: &str,
    size: &str,
    seed: u64,
) -> Result<MemDevice> {
    let img = dir.join(format!("{name}.img"));
    let _ = std::fs::remove_file(&img);
    let mut mk = Command::new("mke2fs");
    mk.args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
        .args(opts.split_whitespace())
        .arg(&img)
        .arg(size);
    sh(&mut mk)?;
    let mnt = dir.join(format!("{name}.mnt"));
    std::fs::create_dir_all(&mnt)?;
    sh(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&img)
        .arg(&mnt))?;
    let filled = fill(&mnt, seed);
    let umounted = umount(&mnt);
    filled?;
    umounted?;
    let bytes = std::fs::read(&img)?;
    let _ = std::fs::remove_file(&img);
    Ok(MemDevice::from_bytes(&bytes))
}

/// Unmounts, retrying while the mount is busy.
pub fn umount(mnt: &Path) -> Result<()> {
    for _ in 0..20 {
        if Command::new("umount").arg(mnt).status()?.success() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    sh(Command::new("umount").arg("-l").arg(mnt))
}

fn fill(root: &Path, seed: u64) -> Result<()> {
    let mut rng = Rng(seed | 1);
    for d in 0..6 {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(&dir)?;
        for f in 0..30 {
            let size = match rng.below(5) {
                0 => 0,
                1 => rng.below(60),
                2 => rng.below(4096 * 3),
                3 => rng.below(200_000),
                _ => rng.below(1_500_000),
            };
            let data: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
            let p = dir.join(format!("f{f}"));
            std::fs::write(&p, &data)?;
            if rng.below(8) == 0 {
                std::os::unix::fs::symlink(format!("f{f}"), dir.join(format!("l{f}")))?;
            }
            if rng.below(10) == 0 {
                let _ = std::fs::hard_link(&p, dir.join(format!("h{f}")));
            }
        }
    }
    // A sparse file.
    let f = std::fs::File::create(root.join("sparse"))?;
    f.set_len(40 << 20)?;
    use std::os::unix::fs::FileExt;
    f.write_at(b"end", (40 << 20) - 3)?;
    f.write_at(b"start", 0)?;
    Ok(())
}

/// Every file of the filesystem on `dev`, by path, with its size and hash.
pub fn manifest(dev: impl BlockDevice + 'static) -> Result<Manifest> {
    let mut o = OpenOptions::default();
    o.allow_encrypted = true;
    let fs = Filesystem::open_with(dev, o)?;
    let mut out = Manifest::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let path = if dir.is_empty() { "/" } else { &dir };
        for e in fs.read_dir_path(path)? {
            if e.is_dot() {
                continue;
            }
            let p = format!("{dir}/{}", e.name_lossy());
            let info = fs.inode(e.ino)?;
            match e.kind {
                FileKind::Directory if p != "/lost+found" => stack.push(p),
                FileKind::Regular => {
                    let mut r = fs.open_file(&info)?;
                    let mut h = 0xcbf2_9ce4_8422_2325u64;
                    let mut buf = vec![0u8; 1 << 16];
                    let mut n = 0u64;
                    loop {
                        let k = r.read(&mut buf)?;
                        if k == 0 {
                            break;
                        }
                        n += k as u64;
                        for &b in &buf[..k] {
                            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
                        }
                    }
                    out.insert(p, (n, h));
                }
                FileKind::Symlink => {
                    let t = fs.read_link(&info)?;
                    out.insert(p, (t.len() as u64, t.iter().map(|&b| u64::from(b)).sum()));
                }
                _ => {}
            }
        }
    }
    Ok(out)
}
