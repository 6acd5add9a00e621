//! The tree every damage image holds, written through a kernel loop mount:
//! a few thousand files of varied sizes, an htree directory with thousands
//! of entries, inline-sized files and directories, xattrs in the inode, in
//! a block of their own and in a block shared by many files, hard links
//! across directories, fast and slow symlinks, sparse and fragmented files
//! (extent trees with index and leaf blocks; double-indirect block maps),
//! preallocated extents, a deep path, and some deletions so that freed
//! inodes and blocks sit in the bitmaps.
//!
//! The same recipe runs on every configuration; only the filesystem
//! decides where things land. File contents are named by [`fill`]: any
//! block of any file differs from every other block, yet the images
//! compress well (a kept failing case is a few MiB gzipped).

use std::ffi::CString;
use std::fs::{self, File};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::rng::Rng;

/// Bump when the tree changes (part of the image cache stamp).
pub const RECIPE: &str = "tree v1: 16x100 docs, htree 3000 (-1/7), 150 tiny, 20 inline dirs, \
     60 xattr files (ibody, block, shared), 40 multi-linked, 60 symlinks, 8 sparse, \
     frag 1200 extents, 3 MiB file, prealloc, deep 12, deletions";

const CHUNK: u64 = 4096;

/// Bytes `off..off+buf.len()` of file `id`: each 4 KiB chunk starts with a
/// line naming file and chunk, and goes on with a 16-byte pattern of both.
pub fn fill(id: u64, off: u64, buf: &mut [u8]) {
    let mut pos = off;
    let mut i = 0;
    while i < buf.len() {
        let chunk = pos / CHUNK;
        let within = (pos % CHUNK) as usize;
        let head = format!("file {id:08} chunk {chunk:08} ----------------------------------\n");
        let pat = format!("{:08x}{:08x}", id as u32, chunk as u32);
        let n = (CHUNK as usize - within).min(buf.len() - i);
        for (k, b) in buf[i..i + n].iter_mut().enumerate() {
            let at = within + k;
            *b = if at < head.len() {
                head.as_bytes()[at]
            } else {
                pat.as_bytes()[at % 16]
            };
        }
        i += n;
        pos += n as u64;
    }
}

/// What the filesystem can hold, from its options.
pub struct Shape {
    pub block_size: u64,
    pub extents: bool,
}

struct Writer {
    next_id: u64,
    rng: Rng,
}

impl Writer {
    /// Creates `path` with `size` bytes of a fresh file's content.
    fn file(&mut self, path: &Path, size: u64) -> Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let mut f = File::create(path).with_context(|| format!("create {}", path.display()))?;
        write_range(&mut f, id, 0, size)
    }

    /// Creates `path` holding only the given `(offset, len)` pieces.
    fn sparse(&mut self, path: &Path, pieces: &[(u64, u64)]) -> Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let mut f = File::create(path).with_context(|| format!("create {}", path.display()))?;
        for &(off, len) in pieces {
            write_range(&mut f, id, off, len)?;
        }
        Ok(())
    }
}

fn write_range(f: &mut File, id: u64, off: u64, len: u64) -> Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    f.seek(SeekFrom::Start(off))?;
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len() as u64) as usize;
        fill(id, off + done, &mut buf[..n]);
        f.write_all(&buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

fn setxattr(path: &Path, name: &str, value: &[u8]) -> Result<()> {
    let p = CString::new(path.as_os_str().as_bytes())?;
    let n = CString::new(name)?;
    // SAFETY: both strings are NUL-terminated and live across the call;
    // value points to value.len() readable bytes.
    let r = unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r != 0 {
        bail!(
            "setxattr {name} on {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn fallocate(path: &Path, keep_size: bool, off: u64, len: u64) -> Result<()> {
    let f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let mode = if keep_size {
        libc::FALLOC_FL_KEEP_SIZE
    } else {
        0
    };
    // SAFETY: a plain syscall on a descriptor we own.
    let r = unsafe {
        libc::fallocate(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            mode,
            off as libc::off_t,
            len as libc::off_t,
        )
    };
    if r != 0 {
        bail!(
            "fallocate {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// A size drawn from the mix of a typical tree: a fifth tiny (inline where
/// the filesystem allows), most under a few blocks, a tenth up to 128 KiB,
/// a few up to 512 KiB.
fn file_size(rng: &mut Rng) -> u64 {
    match rng.below(100) {
        0..=19 => rng.range(0, 60),
        20..=59 => rng.range(61, 4096),
        60..=87 => rng.range(4097, 24 << 10),
        88..=97 => rng.range(24 << 10, 128 << 10),
        _ => rng.range(128 << 10, 512 << 10),
    }
}

/// Writes the tree under `root` (a fresh mount point).
pub fn populate(root: &Path, shape: &Shape) -> Result<()> {
    let mut w = Writer {
        next_id: 1,
        rng: Rng::new(0x0da3_a6e5),
    };
    let bs = shape.block_size;
    // Ordinary files.
    let docs = root.join("docs");
    fs::create_dir(&docs)?;
    for d in 0..16 {
        let dir = docs.join(format!("d{d:02}"));
        fs::create_dir(&dir)?;
        for i in 0..100 {
            let size = file_size(&mut w.rng);
            w.file(&dir.join(format!("file-{i:03}.dat")), size)?;
        }
    }
    // A directory indexed by an htree (two levels with 1 KiB blocks).
    let htree = root.join("htree");
    fs::create_dir(&htree)?;
    for i in 0..3000 {
        let size = if i % 3 == 0 { 20 } else { 0 };
        w.file(
            &htree.join(format!("entry-with-a-longish-name-{i:06}")),
            size,
        )?;
    }
    // Tiny files and tiny directories (inline data where enabled).
    let small = root.join("small");
    fs::create_dir(&small)?;
    for i in 0..150 {
        let size = 1 + (i % 60);
        w.file(&small.join(format!("tiny{i:03}")), size)?;
    }
    for i in 0..20 {
        let d = small.join(format!("dir{i:02}"));
        fs::create_dir(&d)?;
        for j in 0..(i % 3) {
            w.file(&d.join(format!("x{j}")), 10 + j)?;
        }
    }
    xattrs(root, &mut w, bs)?;
    // Hard links across directories.
    let links = root.join("links");
    fs::create_dir(&links)?;
    fs::create_dir(links.join("a"))?;
    fs::create_dir(links.join("b"))?;
    for i in 0..40u64 {
        let first = links.join("a").join(format!("multi{i:02}"));
        let size = file_size(&mut w.rng);
        w.file(&first, size)?;
        for k in 0..(1 + i % 4) {
            let other = if k % 2 == 0 {
                links.join("b").join(format!("multi{i:02}-{k}"))
            } else {
                docs.join(format!("d{:02}", i % 16))
                    .join(format!("link-{i:02}-{k}"))
            };
            fs::hard_link(&first, &other)?;
        }
    }
    symlinks(root, &mut w, bs)?;
    // Sparse files: holes before, between and after data.
    let sparse = root.join("sparse");
    fs::create_dir(&sparse)?;
    for i in 0..8u64 {
        let mut pieces = Vec::new();
        let mut off = w.rng.range(0, 4) * (1 << 20);
        for _ in 0..(1 + i % 4) {
            let len = w.rng.range(1, 3 * bs);
            pieces.push((off, len));
            off += len + w.rng.range(1, 3) * (1 << 20) + w.rng.below(bs);
        }
        let p = sparse.join(format!("sparse{i}"));
        w.sparse(&p, &pieces)?;
        if i % 2 == 0 {
            // A hole at the end too.
            let f = fs::OpenOptions::new().write(true).open(&p)?;
            f.set_len(off + (1 << 20))?;
        }
    }
    // Many extents: index and leaf blocks (depth 2 with 1 KiB blocks), or
    // indirect blocks past the double-indirect range on block maps.
    let frag = root.join("frag");
    fs::create_dir(&frag)?;
    let pieces: Vec<(u64, u64)> = (0..1200).map(|k| (2 * k * bs, bs)).collect();
    w.sparse(&frag.join("fragmented"), &pieces)?;
    w.file(&frag.join("contiguous"), 3 << 20)?;
    if shape.extents {
        let p = frag.join("prealloc");
        w.file(&p, 3 * bs + 17)?;
        fallocate(&p, true, 8 * bs, 16 * bs)?;
        fallocate(&p, false, 40 * bs, 4 * bs)?;
    }
    // A deep path and an empty directory.
    let mut deep = root.join("deep");
    for l in 0..12 {
        deep = deep.join(format!("level{l:02}"));
    }
    fs::create_dir_all(&deep)?;
    w.file(&deep.join("bottom"), 5000)?;
    fs::create_dir(root.join("empty"))?;
    // Deletions leave free inodes and blocks between used ones.
    for i in (0..3000).step_by(7) {
        fs::remove_file(htree.join(format!("entry-with-a-longish-name-{i:06}")))?;
    }
    for d in 0..16 {
        for i in (0..100).step_by(11) {
            fs::remove_file(
                docs.join(format!("d{d:02}"))
                    .join(format!("file-{i:03}.dat")),
            )?;
        }
    }
    Ok(())
}

/// Xattrs: small ones in the inode, large ones in a block of their own, and
/// one identical set on many files so that they share a block.
fn xattrs(root: &Path, w: &mut Writer, bs: u64) -> Result<()> {
    let dir = root.join("xattr");
    fs::create_dir(&dir)?;
    let big = (bs as usize / 2).min(900);
    let shared: Vec<u8> = (0..700u32).map(|i| b'a' + (i % 26) as u8).collect();
    for i in 0..60u64 {
        let p = dir.join(format!("xa{i:02}"));
        let size = file_size(&mut w.rng);
        w.file(&p, size)?;
        match i % 3 {
            0 => setxattr(&p, "user.small", format!("small value {i:04}").as_bytes())?,
            1 => {
                setxattr(&p, "user.tag", format!("{i}").as_bytes())?;
                let v: Vec<u8> = (0..big)
                    .map(|k| b'A' + ((k as u64 + i) % 26) as u8)
                    .collect();
                setxattr(&p, "user.big", &v)?;
            }
            _ => setxattr(&p, "user.shared", &shared)?,
        }
    }
    for i in 0..5 {
        let d = dir.join(format!("xdir{i}"));
        fs::create_dir(&d)?;
        setxattr(&d, "user.dir", format!("directory {i}").as_bytes())?;
        if i % 2 == 0 {
            setxattr(&d, "user.shared", &shared)?;
        }
        w.file(&d.join("inside"), 100 * i)?;
    }
    Ok(())
}

/// Fast symlinks (target in the inode), slow ones (target in a block),
/// relative and absolute, dangling, some with an xattr.
fn symlinks(root: &Path, w: &mut Writer, bs: u64) -> Result<()> {
    let dir = root.join("sym");
    fs::create_dir(&dir)?;
    for i in 0..40u64 {
        let target = match i % 4 {
            0 => format!("../docs/d{:02}/file-{:03}.dat", i % 16, 1 + i % 50),
            1 => format!("/htree/entry-with-a-longish-name-{:06}", 1 + i * 5),
            2 => format!("dangling-{i}"),
            _ => "x".repeat(1 + (i as usize % 59)),
        };
        std::os::unix::fs::symlink(&target, dir.join(format!("fast{i:02}")))?;
    }
    let longest = (bs as usize - 1).min(3000);
    for i in 0..20u64 {
        let len = w.rng.range(61, longest as u64) as usize;
        let mut target = String::from("../docs/");
        while target.len() < len {
            target.push_str("deep/");
        }
        target.truncate(len);
        let p = dir.join(format!("slow{i:02}"));
        std::os::unix::fs::symlink(&target, &p)?;
        if i % 5 == 0 {
            setxattr(&p, "trusted.note", b"on a symlink")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_are_position_dependent() {
        let mut a = vec![0u8; 8192];
        fill(7, 0, &mut a);
        let mut b = vec![0u8; 100];
        fill(7, 4090, &mut b);
        assert_eq!(&a[4090..4190], &b[..]);
        let mut c = vec![0u8; 4096];
        fill(8, 4096, &mut c);
        assert_ne!(&a[4096..], &c[..]);
        // Every 1 KiB block of a chunk differs from the same block of another file's.
        for k in 0..4 {
            assert_ne!(
                &a[4096 + k * 1024..4096 + (k + 1) * 1024],
                &c[k * 1024..(k + 1) * 1024]
            );
        }
    }
}
