//! The write API against the kernel: the same seeded sequence of
//! operations applied through `ext4r::write` to one image and through a
//! loop mount to its twin gives equal trees (type, mode, owner, size, link
//! count, contents, link targets, times set explicitly), both e2fsck-clean;
//! then each side goes on writing the other's image. The operations
//! include fallocate's collapse and insert and whiteout renames.
//!
//! `EXT4R_WRITE_OPS` sets the operations per image (default 400),
//! `EXT4R_WRITE_SEED` the first seed.
#![allow(clippy::unwrap_used)]

mod common;

use common::{copy_sparse, missing_tools, run, TempDir};
use ext4r::device::{FileDevice, OpenMode};
use ext4r::write::{NewNode, SetAttr, WriteFs, WriteOptions};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One operation on paths relative to the root.
#[derive(Debug, Clone)]
enum Op {
    Mkdir(String),
    Create(String, u16),
    Write(String, u64, Vec<u8>),
    Truncate(String, u64),
    Fallocate(String, u64, u64),
    /// fallocate's PUNCH_HOLE | KEEP_SIZE.
    Punch(String, u64, u64),
    /// fallocate's COLLAPSE_RANGE (true) or INSERT_RANGE, the range drawn
    /// from the two numbers and the file's size when applied (see
    /// [`shift_range`]).
    Shift(String, bool, u64, u64),
    /// renameat2's RENAME_WHITEOUT.
    Whiteout(String, String),
    Symlink(String, String),
    Link(String, String),
    Unlink(String),
    Rmdir(String),
    Rename(String, String),
    Chmod(String, u16),
    Chown(String, u32, u32),
    Fifo(String),
    SetXattr(String, String, Vec<u8>),
    RemoveXattr(String, String),
}

/// What the generator knows of the tree, to make operations that succeed.
#[derive(Default)]
struct Model {
    dirs: Vec<String>,
    files: Vec<String>,
    links: Vec<String>,
    next: usize,
    /// Attributes set, per file path.
    xattrs: BTreeMap<String, Vec<String>>,
    /// No truncates or preallocations: on inline_data the kernel (6.18)
    /// loses the first KiB of a later write to a small inline file that a
    /// truncate up or fallocate moved out of the inode (write 47 bytes,
    /// `ftruncate` to 173,277, write 8,365 bytes at 0: the file reads the
    /// old 47 bytes and zeros up to 1 KiB). Ours is checked against a
    /// model for those in write_inline.rs.
    no_resize: bool,
    /// Values too big for a block (ea_inode).
    big_values: bool,
    /// The cluster size (the block size without bigalloc): what collapse
    /// and insert move by.
    unit: u64,
}

impl Model {
    fn fresh(&mut self, rng: &mut Rng, width: usize) -> String {
        self.next += 1;
        let parent = self.dirs[rng.below(self.dirs.len())].clone();
        let name = if rng.below(6) == 0 {
            // Long names fill directory blocks sooner.
            format!("n{}-{}", self.next, "x".repeat(rng.below(width)))
        } else {
            format!("n{}", self.next)
        };
        format!("{parent}/{name}")
    }

    fn gen(&mut self, rng: &mut Rng, extents: bool) -> Op {
        let pick = |v: &Vec<String>, rng: &mut Rng| v[rng.below(v.len())].clone();
        loop {
            match rng.below(21) {
                19 if !self.files.is_empty() && extents && !self.no_resize && self.unit > 0 => {
                    let p = pick(&self.files, rng);
                    return Op::Shift(p, rng.below(2) == 0, rng.next(), rng.next());
                }
                20 if self.files.len() > 2 => {
                    self.xattrs.clear();
                    let i = rng.below(self.files.len());
                    let from = self.files[i].clone();
                    let to = self.fresh(rng, 30);
                    self.files[i] = to.clone();
                    // The whiteout: a character device, no file to write.
                    self.links.push(from.clone());
                    return Op::Whiteout(from, to);
                }
                17 if !self.files.is_empty() => {
                    let p = pick(&self.files, rng);
                    let n = format!(
                        "{}.k{}",
                        if rng.below(3) == 0 { "trusted" } else { "user" },
                        rng.below(8)
                    );
                    let len = if self.big_values && rng.below(3) == 0 {
                        // Past a block: an EA inode of its own.
                        4000 + rng.below(30_000)
                    } else if rng.below(4) == 0 {
                        rng.below(600)
                    } else {
                        rng.below(60)
                    };
                    let fill = rng.next() as u8;
                    let v: Vec<u8> = (0..len).map(|k| fill.wrapping_add(k as u8)).collect();
                    let set = self.xattrs.entry(p.clone()).or_default();
                    if !set.contains(&n) {
                        if set.len() >= 6 {
                            continue;
                        }
                        set.push(n.clone());
                    }
                    return Op::SetXattr(p, n, v);
                }
                18 if !self.xattrs.is_empty() => {
                    let keys: Vec<String> = self.xattrs.keys().cloned().collect();
                    let p = keys[rng.below(keys.len())].clone();
                    if !self.files.contains(&p) {
                        self.xattrs.remove(&p);
                        continue;
                    }
                    let set = self.xattrs.get_mut(&p).unwrap();
                    if set.is_empty() {
                        continue;
                    }
                    let n = set.remove(rng.below(set.len()));
                    return Op::RemoveXattr(p, n);
                }
                15 if self.dirs.len() > 2 => {
                    // An empty directory goes.
                    let empty: Vec<usize> = (1..self.dirs.len())
                        .filter(|&i| {
                            let d = format!("{}/", self.dirs[i]);
                            !self
                                .dirs
                                .iter()
                                .chain(&self.files)
                                .chain(&self.links)
                                .any(|p| p.starts_with(&d))
                        })
                        .collect();
                    if let Some(&i) = empty.get(rng.below(empty.len().max(1))) {
                        return Op::Rmdir(self.dirs.remove(i));
                    }
                }
                16 if self.dirs.len() > 2 => {
                    self.xattrs.clear();
                    // A directory moves, with everything under it.
                    let i = 1 + rng.below(self.dirs.len() - 1);
                    let from = self.dirs[i].clone();
                    let to = self.fresh(rng, 20);
                    if to.starts_with(&format!("{from}/")) {
                        continue;
                    }
                    let fix = |p: &mut String| {
                        if *p == from || p.starts_with(&format!("{from}/")) {
                            *p = format!("{to}{}", &p[from.len()..]);
                        }
                    };
                    self.dirs.iter_mut().for_each(fix);
                    self.files.iter_mut().for_each(fix);
                    self.links.iter_mut().for_each(fix);
                    return Op::Rename(from, to);
                }
                0 | 1 => {
                    let p = self.fresh(rng, 200);
                    self.dirs.push(p.clone());
                    return Op::Mkdir(p);
                }
                2..=4 => {
                    let p = self.fresh(rng, 100);
                    self.files.push(p.clone());
                    return Op::Create(p, 0o600 + rng.below(0o177) as u16);
                }
                5..=7 if !self.files.is_empty() => {
                    let p = pick(&self.files, rng);
                    let off = match rng.below(4) {
                        0 => 0,
                        1 => rng.below(70_000) as u64,
                        2 => rng.below(3 << 20) as u64,
                        _ => 5_000_000 + rng.below(1 << 20) as u64,
                    };
                    let len = match rng.below(3) {
                        0 => rng.below(100),
                        1 => rng.below(20_000),
                        _ => rng.below(300_000),
                    };
                    let fill = rng.next() as u8;
                    let data: Vec<u8> = (0..len).map(|k| fill.wrapping_add(k as u8)).collect();
                    return Op::Write(p, off, data);
                }
                8 if !self.files.is_empty() && !self.no_resize => {
                    let p = pick(&self.files, rng);
                    return Op::Truncate(p, rng.below(200_000) as u64);
                }
                9 if !self.files.is_empty() && extents && !self.no_resize => {
                    let p = pick(&self.files, rng);
                    let (off, len) = (rng.below(100_000) as u64, rng.below(80_000) as u64 + 1);
                    if rng.below(3) == 0 {
                        return Op::Punch(p, off, len);
                    }
                    return Op::Fallocate(p, off, len);
                }
                10 => {
                    let p = self.fresh(rng, 50);
                    let len = if rng.below(2) == 0 {
                        1 + rng.below(50)
                    } else {
                        60 + rng.below(900)
                    };
                    self.links.push(p.clone());
                    return Op::Symlink(p, "t".repeat(len));
                }
                11 if !self.files.is_empty() => {
                    let src = pick(&self.files, rng);
                    let p = self.fresh(rng, 20);
                    self.files.push(p.clone());
                    return Op::Link(src, p);
                }
                12 if self.files.len() > 3 => {
                    let i = rng.below(self.files.len());
                    let p = self.files.remove(i);
                    // Hard links share attributes: forget them all.
                    self.xattrs.clear();
                    return Op::Unlink(p);
                }
                13 if self.files.len() > 2 => {
                    self.xattrs.clear();
                    let i = rng.below(self.files.len());
                    let from = self.files[i].clone();
                    // Onto a fresh name or over another file.
                    if rng.below(3) == 0 {
                        let j = rng.below(self.files.len());
                        if j != i {
                            let to = self.files[j].clone();
                            // Both names of one inode (hard links) make the
                            // rename a no-op on both sides; fine.
                            self.files.remove(i);
                            return Op::Rename(from, to);
                        }
                    }
                    let to = self.fresh(rng, 30);
                    self.files[i] = to.clone();
                    return Op::Rename(from, to);
                }
                14 if !self.files.is_empty() => {
                    let p = pick(&self.files, rng);
                    return match rng.below(3) {
                        0 => Op::Chown(p, rng.below(2000) as u32, rng.below(2000) as u32),
                        1 => {
                            let f = self.fresh(rng, 10);
                            self.links.push(f.clone());
                            Op::Fifo(f)
                        }
                        _ => Op::Chmod(p, rng.below(0o7777) as u16),
                    };
                }
                _ => {}
            }
        }
    }
}

fn split(path: &str) -> (&str, &str) {
    let i = path.rfind('/').unwrap();
    (if i == 0 { "/" } else { &path[..i] }, &path[i + 1..])
}

/// The range a shift covers in a file of `size` bytes, moving by `unit`:
/// a collapse ends below the size, an insert starts below it; `None`
/// when the file is too small for one (nothing done on either side).
fn shift_range(size: u64, unit: u64, collapse: bool, a: u64, b: u64) -> Option<(u64, u64)> {
    if size == 0 {
        return None;
    }
    // Whole units starting below the size.
    let below = (size - 1) / unit;
    if collapse {
        if below == 0 {
            return None;
        }
        let len = 1 + b % below.min(4);
        let off = a % (below - len + 1);
        Some((off * unit, len * unit))
    } else {
        Some((a % (below + 1) * unit, (1 + b % 4) * unit))
    }
}

fn ours(fs: &mut WriteFs, op: &Op, unit: u64) {
    let dir = |fs: &WriteFs, p: &str| fs.lookup_path(split(p).0).unwrap();
    let name = |p: &str| split(p).1.as_bytes().to_vec();
    match op {
        Op::Mkdir(p) => {
            let d = dir(fs, p);
            fs.mkdir(d, &name(p), &NewNode::dir(0o755)).unwrap();
        }
        Op::Create(p, m) => {
            let d = dir(fs, p);
            fs.create(d, &name(p), &NewNode::file(*m)).unwrap();
        }
        Op::Write(p, off, data) => {
            let i = fs.lookup_path(p).unwrap();
            fs.write(i, *off, data).unwrap();
        }
        Op::Truncate(p, n) => {
            let i = fs.lookup_path(p).unwrap();
            fs.truncate(i, *n).unwrap();
        }
        Op::Fallocate(p, off, len) => {
            let i = fs.lookup_path(p).unwrap();
            fs.fallocate(i, *off, *len, false).unwrap();
        }
        Op::Punch(p, off, len) => {
            let i = fs.lookup_path(p).unwrap();
            fs.punch_hole(i, *off, *len).unwrap();
        }
        Op::Shift(p, collapse, a, b) => {
            let i = fs.lookup_path(p).unwrap();
            let size = fs.stat(i).unwrap().size();
            if let Some((off, len)) = shift_range(size, unit, *collapse, *a, *b) {
                if *collapse {
                    fs.collapse_range(i, off, len).unwrap();
                } else {
                    fs.insert_range(i, off, len).unwrap();
                }
            }
        }
        Op::Whiteout(a, b) => {
            let (da, db) = (dir(fs, a), dir(fs, b));
            fs.rename_whiteout(da, &name(a), db, &name(b), 0, 0)
                .unwrap();
        }
        Op::Symlink(p, t) => {
            let d = dir(fs, p);
            fs.symlink(d, &name(p), t.as_bytes(), 0, 0).unwrap();
        }
        Op::Link(src, p) => {
            let i = fs.lookup_path(src).unwrap();
            let d = dir(fs, p);
            fs.link(i, d, &name(p)).unwrap();
        }
        Op::Unlink(p) => {
            let d = dir(fs, p);
            fs.unlink(d, &name(p)).unwrap();
        }
        Op::Rmdir(p) => {
            let d = dir(fs, p);
            fs.rmdir(d, &name(p)).unwrap();
        }
        Op::Rename(a, b) => {
            let (da, db) = (dir(fs, a), dir(fs, b));
            fs.rename(da, &name(a), db, &name(b)).unwrap();
        }
        Op::Chmod(p, m) => {
            let i = fs.lookup_path(p).unwrap();
            let mut a = SetAttr::default();
            a.perm = Some(*m);
            fs.setattr(i, &a).unwrap();
        }
        Op::Chown(p, u, g) => {
            let i = fs.lookup_path(p).unwrap();
            let mut a = SetAttr::default();
            a.uid = Some(*u);
            a.gid = Some(*g);
            fs.setattr(i, &a).unwrap();
        }
        Op::Fifo(p) => {
            let d = dir(fs, p);
            fs.create(d, &name(p), &NewNode::fifo(0o644)).unwrap();
        }
        Op::SetXattr(p, n, v) => {
            let i = fs.lookup_path(p).unwrap();
            // The model does not count the room of a file's attributes:
            // on 1 KiB blocks several of up to 600 bytes may not fit one
            // block, and both sides refuse it (the trees' attributes are
            // compared after).
            match fs.set_xattr(i, n.as_bytes(), v) {
                Ok(()) | Err(ext4r::Error::NoSpace) => {}
                Err(e) => panic!("set {n} on {p}: {e}"),
            }
        }
        Op::RemoveXattr(p, n) => {
            let i = fs.lookup_path(p).unwrap();
            // Cleared model entries may name one already gone: both
            // sides then fail alike.
            let _ = fs.remove_xattr(i, n.as_bytes());
        }
    }
}

fn kernel(root: &Path, op: &Op, unit: u64) {
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    match op {
        Op::Mkdir(p) => {
            std::fs::create_dir(at(p)).unwrap();
            std::fs::set_permissions(at(p), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Op::Create(p, m) => {
            std::fs::File::create(at(p)).unwrap();
            std::fs::set_permissions(at(p), std::fs::Permissions::from_mode(u32::from(*m)))
                .unwrap();
        }
        Op::Write(p, off, data) => {
            let f = std::fs::OpenOptions::new().write(true).open(at(p)).unwrap();
            f.write_all_at(data, *off).unwrap();
        }
        Op::Truncate(p, n) => {
            let f = std::fs::OpenOptions::new().write(true).open(at(p)).unwrap();
            f.set_len(*n).unwrap();
        }
        Op::Fallocate(p, off, len) => {
            let f = std::fs::OpenOptions::new().write(true).open(at(p)).unwrap();
            rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), *off, *len).unwrap();
        }
        Op::Punch(p, off, len) => {
            let f = std::fs::OpenOptions::new().write(true).open(at(p)).unwrap();
            let mode =
                rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
            rustix::fs::fallocate(&f, mode, *off, *len).unwrap();
        }
        Op::Shift(p, collapse, a, b) => {
            let f = std::fs::OpenOptions::new().write(true).open(at(p)).unwrap();
            let size = f.metadata().unwrap().len();
            if let Some((off, len)) = shift_range(size, unit, *collapse, *a, *b) {
                let mode = if *collapse {
                    rustix::fs::FallocateFlags::COLLAPSE_RANGE
                } else {
                    rustix::fs::FallocateFlags::INSERT_RANGE
                };
                rustix::fs::fallocate(&f, mode, off, len).unwrap();
            }
        }
        Op::Whiteout(a, b) => rustix::fs::renameat_with(
            rustix::fs::CWD,
            at(a),
            rustix::fs::CWD,
            at(b),
            rustix::fs::RenameFlags::WHITEOUT,
        )
        .unwrap(),
        Op::Symlink(p, t) => std::os::unix::fs::symlink(t, at(p)).unwrap(),
        Op::Link(src, p) => std::fs::hard_link(at(src), at(p)).unwrap(),
        Op::Unlink(p) => std::fs::remove_file(at(p)).unwrap(),
        Op::Rmdir(p) => std::fs::remove_dir(at(p)).unwrap(),
        Op::Rename(a, b) => std::fs::rename(at(a), at(b)).unwrap(),
        Op::Chmod(p, m) => {
            std::fs::set_permissions(at(p), std::fs::Permissions::from_mode(u32::from(*m))).unwrap()
        }
        Op::Chown(p, u, g) => std::os::unix::fs::lchown(at(p), Some(*u), Some(*g)).unwrap(),
        Op::SetXattr(p, n, v) => {
            match rustix::fs::lsetxattr(at(p), n.as_str(), v, rustix::fs::XattrFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOSPC) => {}
                Err(e) => panic!("set {n} on {p}: {e}"),
            }
        }
        Op::RemoveXattr(p, n) => {
            let _ = rustix::fs::lremovexattr(at(p), n.as_str());
        }
        Op::Fifo(p) => {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                at(p),
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_bits_truncate(0o644),
                0,
            )
            .unwrap();
        }
    }
}

/// Path -> (kind and mode, uid, gid, size, links, contents hash or target,
/// attributes hash).
type Tree = BTreeMap<String, (u32, u32, u32, u64, u64, u64, u64)>;

/// The attributes of a path, names sorted, hashed with their values.
fn xattr_hash(p: &Path) -> u64 {
    let mut names = vec![0u8; 65536];
    let n = rustix::fs::llistxattr(p, &mut names).unwrap_or(0);
    let mut list: Vec<&[u8]> = names[..n]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .collect();
    list.sort();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for name in list {
        let mut v = vec![0u8; 65536];
        let cname = std::str::from_utf8(name).unwrap();
        let k = rustix::fs::lgetxattr(p, cname, &mut v).unwrap_or(0);
        for &b in name.iter().chain(&[0u8]).chain(&v[..k]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

/// How many inodes of image `img` are EA inodes in use.
fn ea_inode_count(img: &Path) -> usize {
    let fs =
        ext4r::fs::Filesystem::open(FileDevice::open(img, OpenMode::default()).unwrap()).unwrap();
    let n = fs.superblock().s_inodes_count.get();
    (1..=n)
        .filter(|&k| {
            fs.inode(ext4r_format::InodeNr(k)).is_ok_and(|i| {
                i.inode.links_count() > 0
                    && i.inode
                        .flags()
                        .contains(ext4r_format::inode::InodeFlags::EA_INODE)
            })
        })
        .count()
}

/// How many of `paths` are inline-data inodes in image `img`.
fn inline_count<'a>(img: &Path, paths: impl Iterator<Item = &'a String>) -> usize {
    let fs =
        ext4r::fs::Filesystem::open(FileDevice::open(img, OpenMode::default()).unwrap()).unwrap();
    paths
        .filter(|p| {
            fs.resolve(&format!("/{p}")).is_ok_and(|i| {
                i.inode
                    .flags()
                    .contains(ext4r_format::inode::InodeFlags::INLINE_DATA)
            })
        })
        .count()
}

fn walk(root: &Path) -> Tree {
    let mut out = Tree::new();
    let mut stack = vec![PathBuf::from(root)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == "lost+found" {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            let content = if m.file_type().is_file() {
                let data = std::fs::read(&p).unwrap();
                data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                })
            } else if m.file_type().is_symlink() {
                std::fs::read_link(&p).unwrap().to_string_lossy().len() as u64
            } else {
                0
            };
            // Directory sizes depend on how entries were packed.
            let size = if m.is_dir() { 0 } else { m.size() };
            out.insert(
                rel,
                (
                    m.mode(),
                    m.uid(),
                    m.gid(),
                    size,
                    m.nlink(),
                    content,
                    xattr_hash(&p),
                ),
            );
            if m.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

/// The cluster size of image `img` (its block size without bigalloc), as
/// dumpe2fs tells it.
fn cluster_size(img: &Path) -> u64 {
    let out = run("dumpe2fs", &["-h", img.to_str().unwrap()], &[]).unwrap();
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    field("Cluster size:")
        .or_else(|| field("Block size:"))
        .unwrap()
}

fn mounted<T>(img: &Path, dir: &TempDir, f: impl FnOnce(&Path) -> T) -> T {
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    run(
        "mount",
        &["-o", "loop", img.to_str().unwrap(), mnt.to_str().unwrap()],
        &[],
    )
    .unwrap();
    let out = f(&mnt);
    for _ in 0..20 {
        if run("umount", &[mnt.to_str().unwrap()], &[]).is_ok() {
            return out;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    run("umount", &["-l", mnt.to_str().unwrap()], &[]).unwrap();
    out
}

fn e2fsck_clean(img: &Path) -> Result<(), String> {
    let (code, out, _) = common::run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[])?;
    if code == 0 {
        Ok(())
    } else {
        Err(out.lines().take(12).collect::<Vec<_>>().join("\n"))
    }
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
    o.now = Some((1_700_000_000, 123_456_789));
    WriteFs::open(Arc::new(dev), o).unwrap()
}

#[test]
fn operation_sequences_match_the_kernel() {
    if !rustix::process::geteuid().is_root() {
        println!("skipped: needs root for loop mounts");
        return;
    }
    if let Some(why) = missing_tools(&["mke2fs", "e2fsck", "dumpe2fs", "mount", "umount"]) {
        println!("skipped: {why}");
        return;
    }
    let ops: usize = std::env::var("EXT4R_WRITE_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let seed: u64 = std::env::var("EXT4R_WRITE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let configs: &[(&str, &str, bool)] = &[
        ("ext4", "-t ext4", true),
        ("ext4-nocsum", "-t ext4 -O ^metadata_csum,uninit_bg", true),
        ("ext4-1k", "-t ext4 -b 1024", true),
        ("ext4-2k-64bit", "-t ext4 -b 2048 -O 64bit", true),
        ("ext3", "-t ext3", false),
        ("bigalloc", "-t ext4 -O bigalloc -C 16384", true),
        ("inline", "-t ext4 -O inline_data", true),
        ("ea_inode", "-t ext4 -O ea_inode", true),
    ];
    let mut total = 0;
    let only = std::env::var("EXT4R_WRITE_ONLY").unwrap_or_default();
    for (k, (name, mkfs, extents)) in configs.iter().enumerate() {
        if !only.is_empty() && !name.contains(only.as_str()) {
            continue;
        }
        let dir = TempDir::new(&format!("write-{name}"));
        let a = dir.join("ours.img");
        let b = dir.join("kernel.img");
        let mut args: Vec<&str> = vec!["-q", "-F"];
        args.extend(mkfs.split_whitespace());
        args.extend([a.to_str().unwrap(), "128M"]);
        run("mke2fs", &args, &[("E2FSPROGS_FAKE_TIME", "1700000000")]).unwrap();
        copy_sparse(&a, &b).unwrap();
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9).wrapping_add(k as u64) | 1);
        let unit = cluster_size(&a);
        let mut model = Model {
            dirs: vec![String::new()],
            no_resize: mkfs.contains("inline_data"),
            big_values: mkfs.contains("ea_inode"),
            unit,
            ..Model::default()
        };
        let seq: Vec<Op> = (0..ops).map(|_| model.gen(&mut rng, *extents)).collect();
        // Ours.
        let mut fs = open(&a);
        let trace = std::env::var_os("EXT4R_WRITE_TRACE").is_some();
        for op in &seq {
            if trace {
                let short = match op {
                    Op::Write(p, o, d) => format!("Write({p}, {o}, {} bytes)", d.len()),
                    other => format!("{other:?}"),
                };
                println!("{name}: {short}");
            }
            ours(&mut fs, op, unit);
        }
        fs.close().unwrap();
        // The kernel's.
        mounted(&b, &dir, |root| {
            for op in &seq {
                kernel(root, op, unit);
            }
        });
        if let Err(e) = e2fsck_clean(&a) {
            panic!("{name}: e2fsck -fn on ours:\n{e}");
        }
        let ta = mounted(&a, &dir, walk);
        let tb = mounted(&b, &dir, walk);
        if mkfs.contains("ea_inode") {
            // Not vacuous: ours made EA inodes for the big values.
            let n = ea_inode_count(&a);
            assert!(n > 0, "{name}: no EA inode in ours");
            println!("{name}: {n} EA inodes in ours");
        }
        if mkfs.contains("inline_data") {
            // Not vacuous: ours kept small files and new directories inline.
            let n = inline_count(&a, ta.keys());
            assert!(n > 0, "{name}: nothing inline in ours");
            println!("{name}: {n} of {} inodes inline in ours", ta.len());
        }
        let diff: Vec<_> = ta
            .iter()
            .filter(|(p, v)| tb.get(*p) != Some(v))
            .map(|(p, v)| format!("{p}: ours {v:?}, kernel {:?}", tb.get(p)))
            .chain(
                tb.keys()
                    .filter(|p| !ta.contains_key(*p))
                    .map(|p| format!("{p}: only the kernel's")),
            )
            .take(10)
            .collect();
        assert!(
            diff.is_empty(),
            "{name}: trees differ:\n{}",
            diff.join("\n")
        );
        // Then each side goes on with the other's image.
        let more: Vec<Op> = (0..ops / 4)
            .map(|_| model.gen(&mut rng, *extents))
            .collect();
        let mut fs = open(&b);
        for op in &more {
            ours(&mut fs, op, unit);
        }
        fs.close().unwrap();
        mounted(&a, &dir, |root| {
            for op in &more {
                kernel(root, op, unit);
            }
        });
        for img in [&a, &b] {
            if let Err(e) = e2fsck_clean(img) {
                panic!(
                    "{name}: e2fsck -fn on {} after the swap:\n{e}",
                    img.display()
                );
            }
        }
        let ta = mounted(&a, &dir, walk);
        let tb = mounted(&b, &dir, walk);
        assert_eq!(ta, tb, "{name}: trees differ after the swap");
        total += seq.len() + more.len();
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for op in seq.iter().chain(&more) {
            let k = format!("{op:?}");
            let k = k[..k.find('(').unwrap_or(k.len())].to_string();
            *kinds.entry(k).or_default() += 1;
        }
        println!(
            "{name}: {} operations {kinds:?}, {} entries, equal to the kernel's",
            seq.len() + more.len(),
            ta.len()
        );
    }
    println!("write API against the kernel: {total} operations, 0 differences");
}

/// The names of a big directory's entries in one seeded order: lengths
/// from 1 to 60 bytes, so leaves split at every fill.
fn big_names(n: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .map(|k| {
            let pad = rng.below(52);
            format!("{k:x}-{}", &"abcdefghijklmnopqrstuvwxyz".repeat(2)[..pad])
        })
        .collect()
}

/// A directory grown past 50,000 entries (htree leaves and index nodes
/// split, a second index level on 1 KiB blocks), a third of them removed
/// and more added: our directory holds what the kernel's holds, both
/// e2fsck-clean, and we go on adding to the kernel's.
#[test]
fn a_directory_of_50000_entries_matches_the_kernel() {
    if !rustix::process::geteuid().is_root() {
        println!("skipped: needs root for loop mounts");
        return;
    }
    if let Some(why) = missing_tools(&["mke2fs", "e2fsck", "mount", "umount"]) {
        println!("skipped: {why}");
        return;
    }
    let n: usize = std::env::var("EXT4R_WRITE_BIGDIR")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_500);
    for (name, mkfs) in [
        ("1k", "-t ext4 -b 1024 -N 80000"),
        ("4k", "-t ext4 -N 80000"),
    ] {
        let dir = TempDir::new(&format!("write-bigdir-{name}"));
        let a = dir.join("ours.img");
        let b = dir.join("kernel.img");
        let mut args: Vec<&str> = vec!["-q", "-F"];
        args.extend(mkfs.split_whitespace());
        args.extend([a.to_str().unwrap(), "160M"]);
        run("mke2fs", &args, &[("E2FSPROGS_FAKE_TIME", "1700000000")]).unwrap();
        copy_sparse(&a, &b).unwrap();
        let names = big_names(n, 7);
        let gone: Vec<&String> = names.iter().step_by(3).collect();
        let more = big_names(n / 10, 11)
            .into_iter()
            .map(|s| format!("m{s}"))
            .collect::<Vec<_>>();

        let mut fs = open(&a);
        let big = fs.mkdir(2, b"big", &NewNode::dir(0o755)).unwrap();
        for s in &names {
            fs.create(big, s.as_bytes(), &NewNode::file(0o644)).unwrap();
        }
        for s in &gone {
            fs.unlink(big, s.as_bytes()).unwrap();
        }
        for s in &more {
            fs.create(big, s.as_bytes(), &NewNode::file(0o644)).unwrap();
        }
        fs.close().unwrap();
        mounted(&b, &dir, |root| {
            let d = root.join("big");
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
            for s in &names {
                std::fs::File::create(d.join(s)).unwrap();
            }
            for s in &gone {
                std::fs::remove_file(d.join(s)).unwrap();
            }
            for s in &more {
                std::fs::File::create(d.join(s)).unwrap();
            }
        });
        if let Err(e) = e2fsck_clean(&a) {
            panic!("{name}: e2fsck -fn on ours:\n{e}");
        }
        let list = |root: &Path| -> std::collections::BTreeSet<String> {
            std::fs::read_dir(root.join("big"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        let (la, lb) = (mounted(&a, &dir, list), mounted(&b, &dir, list));
        assert_eq!(la.len(), n - gone.len() + more.len(), "{name}");
        assert!(la == lb, "{name}: the directories differ");
        // Ours goes on with the kernel's directory, and finds every name.
        let mut fs = open(&b);
        let big = fs.lookup_path("/big").unwrap();
        for s in names.iter().skip(1).step_by(3).take(2000) {
            fs.unlink(big, s.as_bytes()).unwrap();
        }
        for k in 0..2000 {
            let s = format!("after-{k}");
            fs.create(big, s.as_bytes(), &NewNode::file(0o600)).unwrap();
        }
        fs.close().unwrap();
        if let Err(e) = e2fsck_clean(&b) {
            panic!("{name}: e2fsck -fn on the kernel's after ours:\n{e}");
        }
        let lb = mounted(&b, &dir, list);
        assert_eq!(lb.len(), la.len(), "{name}");
        assert!(lb.contains("after-1999") && !lb.contains(&names[1]));
        println!(
            "{name}: {} entries made, {} removed, equal to the kernel's; 2,000 more each way on its image",
            names.len() + more.len(),
            gone.len()
        );
    }
}
