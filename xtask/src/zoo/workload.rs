//! The seeded workload that fills a mounted zoo image: every file shape the
//! checker must accept (sizes from empty to sparse, symlinks of every length
//! with and without xattrs, xattrs in the inode, in a block and in EA inodes,
//! wide directories, hard links, unwritten extents).

use anyhow::{Context, Result};
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::process::Command;

/// xorshift64*: a seed names the same workload on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// What the filesystem under `root` can hold, from its mkfs options.
pub struct Shape {
    pub block_size: u64,
    pub ea_inode: bool,
    pub huge_file: bool,
    pub extents: bool,
    /// Subdirectories to create in one directory (past 65,000 in full runs
    /// with dir_nlink).
    pub wide_dir: u64,
    pub xattrs: bool,
}

fn xattr(path: &Path, name: &str, len: usize) -> bool {
    // setfattr -h: on the link itself, never its target. Trusted names,
    // since the kernel refuses user.* on symlinks.
    Command::new("setfattr")
        .arg("-h")
        .args(["-n", name, "-v"])
        .arg(format!("0s{}", base64_of(len)))
        .arg(path)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `len` bytes of 'z' as base64 (setfattr takes binary values as 0s...).
fn base64_of(len: usize) -> String {
    // "zzz" encodes to "enp6"; pad the tail by hand.
    let mut s = "enp6".repeat(len / 3);
    match len % 3 {
        1 => s.push_str("eg=="),
        2 => s.push_str("eno="),
        _ => {}
    }
    s
}

/// Fills `root`; returns how many objects of each kind were made.
pub fn fill(root: &Path, shape: &Shape, rng: &mut Rng) -> Result<Vec<(&'static str, u64)>> {
    let bs = shape.block_size;
    let mut made = Vec::new();
    let d = root.join("files");
    fs::create_dir(&d).context("mkdir files")?;
    // Size classes: empty, inline-sized, one block, multi-block, odd tails.
    let sizes = [0, 1, 60, 100, 150, bs - 1, bs, bs + 1, 5 * bs + 7, 40 * bs];
    for (i, &sz) in sizes.iter().enumerate() {
        let mut f = fs::File::create(d.join(format!("f{i}")))?;
        let buf = vec![(rng.next() & 0xff) as u8; sz as usize];
        f.write_all(&buf)?;
    }
    made.push(("files", sizes.len() as u64));
    // Sparse: a hole then a block; past 2 TiB where huge_file and extents
    // allow it (block maps stop far earlier).
    let far = if shape.huge_file && shape.extents {
        3u64 << 40
    } else {
        64 << 20
    };
    for (i, off) in [1u64 << 20, far].iter().enumerate() {
        let mut f = fs::File::create(d.join(format!("sparse{i}")))?;
        if f.seek(SeekFrom::Start(*off)).is_ok() && f.write_all(b"end").is_ok() {
            made.push(("sparse", 1));
        }
    }
    // Unwritten extents.
    if shape.extents {
        let p = d.join("prealloc");
        let ok = Command::new("fallocate")
            .args(["-l", &(8 * bs).to_string()])
            .arg(&p)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        let ok2 = Command::new("fallocate")
            .args([
                "-n",
                "-o",
                &(16 * bs).to_string(),
                "-l",
                &(4 * bs).to_string(),
            ])
            .arg(d.join("f9"))
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        made.push(("unwritten", u64::from(ok) + u64::from(ok2)));
    }
    // Symlinks of every length class, some with xattrs.
    let s = root.join("links");
    fs::create_dir(&s)?;
    let mut links = 0;
    let mut link_xattrs = 0;
    for len in [
        1usize,
        30,
        59,
        60,
        61,
        100,
        500,
        (bs as usize).min(4095) - 1,
    ] {
        let target: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        for variant in 0..3 {
            let p = s.join(format!("l{len}-{variant}"));
            // Encrypted names and targets grow when encrypted: the longest
            // targets do not fit there (ENAMETOOLONG), which is no error.
            if std::os::unix::fs::symlink(&target, &p).is_err() {
                continue;
            }
            links += 1;
            if shape.xattrs && variant > 0 {
                let vlen = if variant == 1 {
                    8
                } else {
                    200 + rng.below(400) as usize
                };
                link_xattrs += u64::from(xattr(&p, "trusted.zoo", vlen));
            }
        }
    }
    made.push(("symlinks", links));
    made.push(("symlink xattrs", link_xattrs));
    // Xattrs of every size on regular files: in the inode, in a block, and
    // (ea_inode) values larger than a block.
    if shape.xattrs {
        let mut n = 0;
        let mut lens = vec![4usize, 40, 100, 1000, (bs as usize) / 2];
        if shape.ea_inode {
            lens.extend([bs as usize + 10, 3 * bs as usize, 20000]);
        }
        for (i, len) in lens.iter().enumerate() {
            let p = d.join(format!("f{}", i % sizes.len()));
            n += u64::from(xattr(&p, &format!("trusted.x{i}"), *len));
        }
        // The same value on many files: a shared xattr block.
        for i in 0..4 {
            n += u64::from(xattr(&d.join(format!("f{i}")), "trusted.shared", 700));
        }
        made.push(("xattrs", n));
    }
    // Hard links.
    let h = root.join("hard");
    fs::create_dir(&h)?;
    let nlinks = 2 + rng.below(40);
    for i in 0..nlinks {
        fs::hard_link(d.join("f3"), h.join(format!("h{i}")))?;
    }
    made.push(("hard links", nlinks));
    // A wide directory (htree past one level) and many subdirectories.
    let w = root.join("wide");
    fs::create_dir(&w)?;
    let entries = 800 + rng.below(1500);
    for i in 0..entries {
        fs::File::create(w.join(format!("entry-with-a-longish-name-{i:06}")))?;
    }
    made.push(("dir entries", entries));
    let sd = root.join("subdirs");
    fs::create_dir(&sd)?;
    let mut subdirs = 0;
    for i in 0..shape.wide_dir {
        if fs::create_dir(sd.join(format!("{i}"))).is_err() {
            break;
        }
        subdirs += 1;
    }
    made.push(("subdirs", subdirs));
    // Some deletions, so freed inodes and blocks are in the bitmaps.
    for i in (0..entries).step_by(7) {
        let _ = fs::remove_file(w.join(format!("entry-with-a-longish-name-{i:06}")));
    }
    Ok(made)
}
