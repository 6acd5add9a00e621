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
    /// Subdirectories to create in one directory (MANY_SUBDIRS on the
    /// dir_nlink subset).
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
    if subdirs > EXT4_LINK_MAX {
        // dir_nlink: past EXT4_LINK_MAX the kernel sets the count to 1.
        let nlink = std::os::unix::fs::MetadataExt::nlink(&fs::metadata(&sd)?);
        anyhow::ensure!(nlink == 1, "{subdirs} subdirectories, nlink {nlink}");
        made.push(("images: dir past 65,000 subdirs", 1));
    }
    // Some deletions, so freed inodes and blocks are in the bitmaps.
    for i in (0..entries).step_by(7) {
        let _ = fs::remove_file(w.join(format!("entry-with-a-longish-name-{i:06}")));
    }
    Ok(made)
}

/// EXT4_LINK_MAX (fs/ext4/ext4.h): link(2) answers EMLINK once a file has
/// this many links; a directory may pass it only with dir_nlink and an
/// htree, and then the kernel keeps its i_links_count at 1.
pub const EXT4_LINK_MAX: u64 = 65_000;

/// Subdirectories made in one directory for the dir_nlink shape.
pub const MANY_SUBDIRS: u64 = 66_000;

/// Hard links to one file until the kernel refuses with EMLINK, under
/// names of about 240 bytes, so that each leaf holds only a few entries
/// and the directories' htrees grow deep: three levels on 1 KiB blocks
/// with large_dir. Without large_dir the kernel stops at two levels and
/// answers ENOSPC ("index full"); the links then go on in a new directory.
pub fn link_limit(root: &Path, rng: &mut Rng) -> Result<Vec<(&'static str, u64)>> {
    let base = root.join("linkmax");
    fs::create_dir(&base)?;
    let target = base.join("target");
    fs::write(&target, b"linked")?;
    let mut dirs = 0u32;
    fs::create_dir(base.join("d0"))?;
    // Under encryption a long name grows past 255 bytes (ENAMETOOLONG):
    // shorter names then.
    let mut len = 230 + rng.below(20) as usize;
    let mut links = 1u64;
    let mut full = 0u64;
    let mut emlink = false;
    'outer: for i in 0u64.. {
        loop {
            let name = format!("{i:06}-{}", "x".repeat(len - 7));
            let err = match fs::hard_link(&target, base.join(format!("d{dirs}")).join(name)) {
                Ok(()) => {
                    links += 1;
                    break;
                }
                Err(e) => e,
            };
            match err.raw_os_error() {
                Some(libc::EMLINK) => {
                    emlink = true;
                    break 'outer;
                }
                Some(libc::ENAMETOOLONG) if len > 100 => len = 100,
                // The index is full (or the disk): on to a new directory,
                // a few times at most.
                Some(libc::ENOSPC) if dirs < 8 => {
                    dirs += 1;
                    full += 1;
                    if fs::create_dir(base.join(format!("d{dirs}"))).is_err() {
                        break 'outer;
                    }
                }
                _ => break 'outer,
            }
        }
    }
    let nlink = std::os::unix::fs::MetadataExt::nlink(&fs::metadata(&target)?);
    anyhow::ensure!(
        nlink == links,
        "linkmax/target has {nlink} links, {links} made"
    );
    let mut made = vec![("links to one file", links)];
    if emlink && links == EXT4_LINK_MAX {
        made.push(("images: EMLINK at 65,000 links", 1));
    }
    if full > 0 {
        made.push(("link dirs with a full 2-level htree", full));
    }
    Ok(made)
}
