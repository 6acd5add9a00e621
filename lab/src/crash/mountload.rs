//! Workload: the FUSE driver, `ext4r mount`, served in this process
//! over the recording device, and a few hundred POSIX operations made
//! through `std::fs` on its mount point: files created, written (holes
//! included), appended to, truncated, renamed (over others too), linked,
//! unlinked; directories made, renamed and removed; symlinks; chmod;
//! user xattrs set and removed; fsync and fdatasync of files, fsync of
//! directories. The mount is then unmounted cleanly, so the log holds
//! everything the driver wrote.
//!
//! What a cut and a recovery must leave (see [`Model`]):
//! - **The tree is one the workload passed through.** The namespace
//!   (names, types, permissions, user xattrs, symlink targets, which names
//!   are links of one file) is the one after some operation, no earlier
//!   than the last fsync that returned before the cut and no later than
//!   the last operation begun before it. The driver, as ext4's journal
//!   without fast commits, commits its whole running transaction at any
//!   fsync, so every change before an fsync is durable with it.
//! - **Nothing fsynced is lost.** A file fsynced (or fdatasynced) and not
//!   touched (written, truncated, renamed, unlinked, its directories
//!   renamed) between that fsync's return and the cut has exactly its
//!   contents at the fsync.
//! - **No garbage.** Every byte the workload writes says where it belongs:
//!   an 8-byte word per position, `(position / 8, file, magic)`. Every
//!   byte of every file after recovery is 0 (a hole, or data not yet
//!   written) or the byte of that position written by a file that bore
//!   that path at some time: stale blocks of other files or of metadata
//!   never show through.
//! - After the last write (the unmount), every file is exactly as the
//!   workload left it; and the kernel-made files outside the workload's
//!   directory are untouched at every cut.

use super::image::Rng;
use anyhow::{bail, Context, Result};
use ext4r::device::BlockDevice;
use ext4r::fs::{FileKind, Filesystem, InodeInfo, OpenOptions};
use ext4r::write::{WriteFs, WriteOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The workload's directory in the image.
pub const DIR: &str = "/m";

/// User xattrs by name.
type Xattrs = BTreeMap<Vec<u8>, Vec<u8>>;

/// What the namespace holds at a path (relative to [`DIR`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    Dir {
        perm: u16,
        xattrs: Xattrs,
    },
    File {
        perm: u16,
        xattrs: Xattrs,
        /// Every path naming this file (itself included), sorted.
        links: Vec<String>,
    },
    Symlink(Vec<u8>),
}

/// The namespace under [`DIR`]: path -> shape.
pub type Tree = BTreeMap<String, Shape>;

/// A file's contents made durable by an fsync.
#[derive(Debug)]
pub struct Durable {
    /// The writes made when the fsync returned.
    pub ack: usize,
    /// The writes made when the file was next touched (`usize::MAX`:
    /// never).
    pub until: usize,
    pub path: String,
    node: usize,
    pub content: Vec<u8>,
}

/// What the workload did, for the judge.
#[derive(Debug, Default)]
pub struct Model {
    /// The namespace after each operation that changes it (0: before).
    pub states: Vec<Tree>,
    /// `begun[j]`: the writes made when the operation leading to state
    /// `j + 1` began.
    pub begun: Vec<usize>,
    /// Each fsync: the writes made when it returned, and the state then.
    pub syncs: Vec<(usize, usize)>,
    pub durable: Vec<Durable>,
    /// Each path and the files (by number in the stamps) that bore it.
    pub names: BTreeMap<String, BTreeSet<u16>>,
    /// Every file's contents at the end.
    pub last: BTreeMap<String, Vec<u8>>,
    /// Operations made, and how many of them were fsyncs.
    pub ops: usize,
    pub fsyncs: usize,
}

/// The byte the workload writes at `pos` of file `serial`.
fn stamp_byte(serial: u16, pos: u64) -> u8 {
    let word = pos / 8;
    let k = (pos % 8) as usize;
    match k {
        0..=3 => (word >> (8 * k)) as u8,
        4 | 5 => (serial >> (8 * (k - 4))) as u8,
        6 => 0xe4,
        _ => 0x52,
    }
}

fn stamp(serial: u16, at: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| stamp_byte(serial, at + i))
        .collect()
}

/// Whether every byte of `data` is 0 or what one of the files `serials`
/// wrote at its position (checked per word, one file per word).
pub fn no_garbage(data: &[u8], serials: &BTreeSet<u16>) -> Option<u64> {
    for (w, chunk) in data.chunks(8).enumerate() {
        let base = w as u64 * 8;
        let ok = chunk.iter().all(|&b| b == 0)
            || serials.iter().any(|&s| {
                chunk
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == 0 || b == stamp_byte(s, base + i as u64))
            });
        if !ok {
            return Some(base);
        }
    }
    None
}

enum Entry {
    Dir(usize),
    File(usize),
    Symlink(Vec<u8>),
}

struct Node {
    perm: u16,
    xattrs: Xattrs,
    content: Vec<u8>,
}

struct Run<'a> {
    /// The workload's directory on the mount.
    root: PathBuf,
    rng: Rng,
    nodes: Vec<Node>,
    tree: BTreeMap<String, Entry>,
    model: Model,
    writes: &'a dyn Fn() -> usize,
    next: usize,
    /// The writes made when the operation under way began.
    began: usize,
}

impl Run<'_> {
    fn on_mount(&self, p: &str) -> PathBuf {
        if p.is_empty() {
            self.root.clone()
        } else {
            self.root.join(&p[1..])
        }
    }

    fn pick<T>(&mut self, v: &[T]) -> Option<usize> {
        (!v.is_empty()).then(|| self.rng.below(v.len() as u64) as usize)
    }

    fn paths(&self, f: impl Fn(&Entry) -> bool) -> Vec<String> {
        self.tree
            .iter()
            .filter(|(_, e)| f(e))
            .map(|(p, _)| p.clone())
            .collect()
    }

    fn dirs(&self) -> Vec<String> {
        std::iter::once(String::new())
            .chain(self.paths(|e| matches!(e, Entry::Dir(_))))
            .collect()
    }

    fn files(&self) -> Vec<String> {
        self.paths(|e| matches!(e, Entry::File(_)))
    }

    fn node_of(&self, p: &str) -> usize {
        match self.tree.get(p) {
            Some(Entry::File(n) | Entry::Dir(n)) => *n,
            _ => usize::MAX,
        }
    }

    /// A new name in a random directory.
    fn fresh(&mut self, prefix: &str) -> String {
        let dirs = self.dirs();
        let d = self.pick(&dirs).map_or(String::new(), |i| dirs[i].clone());
        self.next += 1;
        format!("{d}/{prefix}{}", self.next)
    }

    fn begin(&mut self) {
        self.began = (self.writes)();
        self.model.ops += 1;
    }

    /// The namespace now.
    fn shape(&self) -> Tree {
        let mut links: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (p, e) in &self.tree {
            if let Entry::File(n) = e {
                links.entry(*n).or_default().push(p.clone());
            }
        }
        self.tree
            .iter()
            .map(|(p, e)| {
                let s = match e {
                    Entry::Dir(n) => Shape::Dir {
                        perm: self.nodes[*n].perm,
                        xattrs: self.nodes[*n].xattrs.clone(),
                    },
                    Entry::File(n) => Shape::File {
                        perm: self.nodes[*n].perm,
                        xattrs: self.nodes[*n].xattrs.clone(),
                        links: links.get(n).cloned().unwrap_or_default(),
                    },
                    Entry::Symlink(t) => Shape::Symlink(t.clone()),
                };
                (p.clone(), s)
            })
            .collect()
    }

    /// The namespace changed: a new state.
    fn changed(&mut self) {
        let s = self.shape();
        self.model.states.push(s);
        self.model.begun.push(self.began);
    }

    /// A file's contents change: its fsyncs no longer bind.
    fn touch_node(&mut self, n: usize) {
        let at = self.began;
        for d in &mut self.model.durable {
            if d.node == n && d.until == usize::MAX {
                d.until = at;
            }
        }
    }

    /// A path (and what is under it) goes or moves.
    fn touch_path(&mut self, p: &str) {
        let at = self.began;
        let under = format!("{p}/");
        for d in &mut self.model.durable {
            if (d.path == p || d.path.starts_with(&under)) && d.until == usize::MAX {
                d.until = at;
            }
        }
    }

    fn named(&mut self, p: &str, n: usize) {
        self.model
            .names
            .entry(p.to_string())
            .or_default()
            .insert(n as u16);
    }

    fn perm_on_mount(&self, p: &str) -> Result<u16> {
        let m = std::fs::symlink_metadata(self.on_mount(p))?;
        Ok((m.permissions().mode() & 0o7777) as u16)
    }

    /// Writes `len` stamped bytes at `at` of file `p` through `f`.
    fn write_at(&mut self, f: &std::fs::File, p: &str, at: u64, len: usize) -> Result<()> {
        let n = self.node_of(p);
        let data = stamp(n as u16, at, len);
        f.write_all_at(&data, at)?;
        let c = &mut self.nodes[n].content;
        let end = at as usize + len;
        if c.len() < end {
            c.resize(end, 0);
        }
        c[at as usize..end].copy_from_slice(&data);
        self.touch_node(n);
        Ok(())
    }

    /// fsync (or fdatasync) of `f`, the file at `p`: its contents durable.
    fn fsync_file(&mut self, f: &std::fs::File, p: &str) -> Result<()> {
        if self.rng.below(3) == 0 {
            f.sync_data()?;
        } else {
            f.sync_all()?;
        }
        let ack = (self.writes)();
        let n = self.node_of(p);
        self.model.syncs.push((ack, self.model.states.len() - 1));
        self.model.fsyncs += 1;
        self.model.durable.push(Durable {
            ack,
            until: usize::MAX,
            path: p.to_string(),
            node: n,
            content: self.nodes[n].content.clone(),
        });
        Ok(())
    }

    fn new_node(&mut self, perm: u16) -> usize {
        self.nodes.push(Node {
            perm,
            xattrs: Xattrs::new(),
            content: Vec::new(),
        });
        self.nodes.len() - 1
    }

    fn len(&mut self, max: u64) -> usize {
        // Small, page-sized and odd lengths.
        match self.rng.below(4) {
            0 => self.rng.below(100) as usize,
            1 => 4096 * (1 + self.rng.below(4) as usize),
            _ => self.rng.below(max) as usize,
        }
    }

    fn step(&mut self) -> Result<()> {
        let files = self.files();
        match self.rng.below(21) {
            0 | 1 => {
                let p = self.fresh("d");
                self.begin();
                std::fs::create_dir(self.on_mount(&p))?;
                let n = self.new_node(self.perm_on_mount(&p)?);
                self.tree.insert(p, Entry::Dir(n));
                self.changed();
            }
            2..=4 => {
                let p = self.fresh("f");
                self.begin();
                let f = std::fs::File::create(self.on_mount(&p))?;
                let n = self.new_node(0);
                self.nodes[n].perm = self.perm_on_mount(&p)?;
                self.tree.insert(p.clone(), Entry::File(n));
                self.named(&p, n);
                self.changed();
                let len = self.len(60_000);
                self.begin();
                self.write_at(&f, &p, 0, len)?;
                if self.rng.below(3) == 0 {
                    self.fsync_file(&f, &p)?;
                }
            }
            5..=7 if !files.is_empty() => {
                // An overwrite or an extension, past the end leaving a hole.
                let p = files[self.rng.below(files.len() as u64) as usize].clone();
                let n = self.node_of(&p);
                let size = self.nodes[n].content.len() as u64;
                let at = self.rng.below(size + 30_000);
                let len = self.len(30_000);
                self.begin();
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(self.on_mount(&p))?;
                self.write_at(&f, &p, at, len)?;
                if self.rng.below(2) == 0 {
                    self.fsync_file(&f, &p)?;
                }
            }
            8 if !files.is_empty() => {
                let p = files[self.rng.below(files.len() as u64) as usize].clone();
                let n = self.node_of(&p);
                let len = self.len(20_000);
                self.begin();
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(self.on_mount(&p))?;
                let at = self.nodes[n].content.len() as u64;
                let data = stamp(n as u16, at, len);
                f.write_all(&data)?;
                self.nodes[n].content.extend_from_slice(&data);
                self.touch_node(n);
                if self.rng.below(3) == 0 {
                    self.fsync_file(&f, &p)?;
                }
            }
            9 if !files.is_empty() => {
                let p = files[self.rng.below(files.len() as u64) as usize].clone();
                let n = self.node_of(&p);
                let size = self.nodes[n].content.len() as u64;
                let to = self.rng.below(size + size / 4 + 10);
                self.begin();
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(self.on_mount(&p))?;
                f.set_len(to)?;
                self.nodes[n].content.resize(to as usize, 0);
                self.touch_node(n);
                if self.rng.below(3) == 0 {
                    self.fsync_file(&f, &p)?;
                }
            }
            10 if !files.is_empty() => {
                // A file renamed, to a new name or over another file.
                let p = files[self.rng.below(files.len() as u64) as usize].clone();
                let q = if files.len() > 2 && self.rng.below(3) == 0 {
                    files[self.rng.below(files.len() as u64) as usize].clone()
                } else {
                    self.fresh("f")
                };
                // (Two names of one file: rename(2) leaves both.)
                if p == q || self.node_of(&p) == self.node_of(&q) {
                    return Ok(());
                }
                self.begin();
                std::fs::rename(self.on_mount(&p), self.on_mount(&q))?;
                self.touch_path(&p);
                self.touch_path(&q);
                let e = self.tree.remove(&p).context("renamed file")?;
                if let Entry::File(n) = e {
                    self.named(&q, n);
                }
                self.tree.insert(q, e);
                self.changed();
            }
            11 => {
                // A directory renamed, with what it holds.
                let dirs = self.paths(|e| matches!(e, Entry::Dir(_)));
                let Some(i) = self.pick(&dirs) else {
                    return Ok(());
                };
                let p = dirs[i].clone();
                let q = self.fresh("d");
                if q.starts_with(&format!("{p}/")) {
                    return Ok(());
                }
                self.begin();
                std::fs::rename(self.on_mount(&p), self.on_mount(&q))?;
                self.touch_path(&p);
                let under = format!("{p}/");
                let moved: Vec<String> = self
                    .tree
                    .keys()
                    .filter(|k| **k == p || k.starts_with(&under))
                    .cloned()
                    .collect();
                for k in moved {
                    let e = self.tree.remove(&k).context("moved")?;
                    let to = format!("{q}{}", &k[p.len()..]);
                    if let Entry::File(n) = e {
                        self.named(&to, n);
                    }
                    self.tree.insert(to, e);
                }
                self.changed();
            }
            12 if !files.is_empty() => {
                let p = files[self.rng.below(files.len() as u64) as usize].clone();
                let q = self.fresh("l");
                let n = self.node_of(&p);
                self.begin();
                std::fs::hard_link(self.on_mount(&p), self.on_mount(&q))?;
                self.named(&q, n);
                self.tree.insert(q, Entry::File(n));
                self.changed();
            }
            13 if files.len() > 3 => {
                let p = files[self.rng.below(files.len() as u64) as usize].clone();
                self.begin();
                std::fs::remove_file(self.on_mount(&p))?;
                self.touch_path(&p);
                self.tree.remove(&p);
                self.changed();
            }
            14 => {
                let p = self.fresh("s");
                let long = self.rng.below(200) as usize;
                let target = format!("../t{}/{}", self.rng.below(1000), "x".repeat(long));
                self.begin();
                std::os::unix::fs::symlink(&target, self.on_mount(&p))?;
                self.tree.insert(p, Entry::Symlink(target.into_bytes()));
                self.changed();
            }
            15 => {
                let all = self.paths(|e| !matches!(e, Entry::Symlink(_)));
                let Some(i) = self.pick(&all) else {
                    return Ok(());
                };
                let p = all[i].clone();
                let perm = [0o600, 0o640, 0o644, 0o700, 0o750, 0o755][self.rng.below(6) as usize];
                self.begin();
                std::fs::set_permissions(self.on_mount(&p), std::fs::Permissions::from_mode(perm))?;
                let n = self.node_of(&p);
                self.nodes[n].perm = perm as u16;
                self.changed();
            }
            16 | 17 => {
                let all = self.paths(|e| !matches!(e, Entry::Symlink(_)));
                let Some(i) = self.pick(&all) else {
                    return Ok(());
                };
                let p = all[i].clone();
                let n = self.node_of(&p);
                let have: Vec<Vec<u8>> = self.nodes[n].xattrs.keys().cloned().collect();
                self.begin();
                let on = self.on_mount(&p);
                if !have.is_empty() && self.rng.below(3) == 0 {
                    let k = have[self.rng.below(have.len() as u64) as usize].clone();
                    rustix::fs::removexattr(&on, k.as_slice())?;
                    self.nodes[n].xattrs.remove(&k);
                } else {
                    let k = format!("user.k{}", self.rng.below(6)).into_bytes();
                    let len = if self.rng.below(4) == 0 {
                        // Six of these fit in one 4 KiB xattr block, as
                        // ext4 (without ea_inode) needs them to.
                        300 + self.rng.below(300)
                    } else {
                        self.rng.below(60)
                    };
                    let fill = self.rng.next() as u8;
                    let v: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                    rustix::fs::setxattr(&on, k.as_slice(), &v, rustix::fs::XattrFlags::empty())?;
                    self.nodes[n].xattrs.insert(k, v);
                }
                self.changed();
            }
            18 => {
                // An empty directory removed.
                let empty: Vec<String> = self
                    .paths(|e| matches!(e, Entry::Dir(_)))
                    .into_iter()
                    .filter(|d| {
                        let under = format!("{d}/");
                        !self.tree.keys().any(|k| k.starts_with(&under))
                    })
                    .collect();
                let Some(i) = self.pick(&empty) else {
                    return Ok(());
                };
                let p = empty[i].clone();
                self.begin();
                std::fs::remove_dir(self.on_mount(&p))?;
                self.tree.remove(&p);
                self.changed();
            }
            19 if !files.is_empty() => {
                let p = files[self.rng.below(files.len() as u64) as usize].clone();
                self.begin();
                let f = std::fs::File::open(self.on_mount(&p))?;
                self.fsync_file(&f, &p)?;
            }
            20 => {
                let dirs = self.dirs();
                let Some(i) = self.pick(&dirs) else {
                    return Ok(());
                };
                let p = dirs[i].clone();
                self.begin();
                std::fs::File::open(self.on_mount(&p))?.sync_all()?;
                let ack = (self.writes)();
                self.model.syncs.push((ack, self.model.states.len() - 1));
                self.model.fsyncs += 1;
            }
            _ => {}
        }
        Ok(())
    }

    /// The mount shows what the model says (the model checked, before the
    /// cuts judge by it).
    fn verify_live(&self) -> Result<()> {
        for (p, e) in &self.tree {
            let on = self.on_mount(p);
            match e {
                Entry::File(n) => {
                    let got = std::fs::read(&on)?;
                    if got != self.nodes[*n].content {
                        bail!(
                            "the mount reads {p} as {} bytes, the workload wrote {}",
                            got.len(),
                            self.nodes[*n].content.len()
                        );
                    }
                }
                Entry::Symlink(t) => {
                    let got = std::fs::read_link(&on)?;
                    if got.as_os_str().as_encoded_bytes() != t.as_slice() {
                        bail!("the mount reads symlink {p} as {got:?}");
                    }
                }
                Entry::Dir(_) => {}
            }
        }
        let mut seen = 0;
        let mut stack = vec![self.root.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d)? {
                let e = e?;
                seen += 1;
                if e.file_type()?.is_dir() {
                    stack.push(e.path());
                }
            }
        }
        if seen != self.tree.len() {
            bail!(
                "the mount lists {seen} names, the workload made {}",
                self.tree.len()
            );
        }
        Ok(())
    }
}

/// Serves the filesystem on `dev` at a mount point under `dir` and runs
/// `ops` operations on it; unmounts. Returns the model.
pub fn run(
    dev: Arc<dyn BlockDevice>,
    dir: &Path,
    ops: usize,
    seed: u64,
    writes: &dyn Fn() -> usize,
) -> Result<Model> {
    let mnt = dir.join("mountload.mnt");
    std::fs::create_dir_all(&mnt)?;
    let wfs = WriteFs::open(dev, WriteOptions::default())?;
    let (tx, rx) = std::sync::mpsc::channel();
    let served = {
        let mnt = mnt.clone();
        std::thread::Builder::new()
            .name("crash-mount".into())
            .spawn(move || {
                let opts = ext4r_mount::Options::default();
                ext4r_mount::serve(wfs, Path::new("ext4r-crash"), &mnt, &opts, || {
                    let _ = tx.send(());
                })
            })?
    };
    if rx.recv().is_err() {
        let e = match served.join() {
            Ok(Err(e)) => anyhow::anyhow!("{e}"),
            _ => anyhow::anyhow!("the driver's thread ended before mounting"),
        };
        return Err(e.context("mounting the recorded image"));
    }
    let mut r = Run {
        root: mnt.join(&DIR[1..]),
        rng: Rng(seed | 1),
        nodes: Vec::new(),
        tree: BTreeMap::new(),
        model: Model::default(),
        writes,
        next: 0,
        began: 0,
    };
    r.model.states.push(Tree::new());
    let worked = (|| -> Result<()> {
        r.begin();
        std::fs::create_dir(&r.root)?;
        r.changed();
        while r.model.ops < ops {
            crate::util::check_interrupted()?;
            let at = r.model.ops;
            r.step().with_context(|| format!("after operation {at}"))?;
        }
        r.verify_live()
    })();
    let unmounted = ext4r_mount::unmount(&mnt).or_else(|e| {
        // Still busy (a failed workload's open file): let go at once.
        ext4r_mount::detach(&mnt).map_err(|_| e)
    });
    let closed = served.join();
    worked?;
    unmounted.context("unmounting")?;
    match closed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => bail!("the driver: {e}"),
        Err(_) => bail!("the driver's thread panicked"),
    }
    for (p, e) in &r.tree {
        if let Entry::File(n) = e {
            r.model.last.insert(p.clone(), r.nodes[*n].content.clone());
        }
    }
    Ok(r.model)
}

/// A recovered image's namespace under [`DIR`] and its files' contents
/// (nothing while the directory is not there).
pub fn observe(dev: impl BlockDevice + 'static) -> Result<(Tree, BTreeMap<String, Vec<u8>>)> {
    let fs = Filesystem::open_with(dev, OpenOptions::default())?;
    let mut tree = Tree::new();
    let mut contents = BTreeMap::new();
    if fs.resolve(DIR).is_err() {
        return Ok((tree, contents));
    }
    let user = |info: &InodeInfo| -> Result<Xattrs> {
        Ok(fs
            .xattrs(info)?
            .into_iter()
            .filter(|x| x.name.starts_with(b"user."))
            .map(|x| (x.name, x.value))
            .collect())
    };
    let mut links: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut stack = vec![String::new()];
    while let Some(d) = stack.pop() {
        for e in fs.read_dir_path(&format!("{DIR}{d}"))? {
            if e.is_dot() {
                continue;
            }
            let p = format!("{d}/{}", e.name_lossy());
            let info = fs.inode(e.ino)?;
            let meta = fs.metadata(&info);
            let shape = match meta.kind {
                FileKind::Directory => {
                    stack.push(p.clone());
                    Shape::Dir {
                        perm: meta.perm,
                        xattrs: user(&info)?,
                    }
                }
                FileKind::Regular => {
                    let mut data = Vec::new();
                    fs.open_file(&info)?.read_to_end(&mut data)?;
                    contents.insert(p.clone(), data);
                    links.entry(e.ino.0).or_default().push(p.clone());
                    Shape::File {
                        perm: meta.perm,
                        xattrs: user(&info)?,
                        links: Vec::new(),
                    }
                }
                FileKind::Symlink => Shape::Symlink(fs.read_link(&info)?),
                k => bail!("{p}: a {k:?}, which the workload never makes"),
            };
            tree.insert(p, shape);
        }
    }
    for mut names in links.into_values() {
        names.sort();
        for p in &names {
            if let Some(Shape::File { links, .. }) = tree.get_mut(p) {
                links.clone_from(&names);
            }
        }
    }
    Ok((tree, contents))
}

/// The checks of one recovered image at `cut` of `total` writes (see the
/// module's doc).
pub fn judge(
    model: &Model,
    seen: &Tree,
    contents: &BTreeMap<String, Vec<u8>>,
    cut: usize,
    total: usize,
) -> Result<()> {
    let lo = model
        .syncs
        .iter()
        .filter(|s| s.0 <= cut)
        .map(|s| s.1)
        .max()
        .unwrap_or(0);
    let hi = model.begun.iter().take_while(|&&b| b < cut).count();
    if !(lo..=hi.max(lo)).any(|j| model.states.get(j) == Some(seen)) {
        let want = &model.states[lo.min(model.states.len() - 1)];
        let first = want
            .keys()
            .chain(seen.keys())
            .find(|&p| want.get(p) != seen.get(p))
            .map(|p| {
                format!(
                    "{p}: {:?} after the fsync, found {:?}",
                    want.get(p),
                    seen.get(p)
                )
            });
        bail!(
            "the tree ({} names) is no state of operations {lo}..={hi} (the last fsync \
             before the cut was after operation {lo}; first difference from it: {})",
            seen.len(),
            first.unwrap_or_default()
        );
    }
    for d in &model.durable {
        if d.ack > cut || cut >= d.until {
            continue;
        }
        match contents.get(&d.path) {
            Some(c) if *c == d.content => {}
            Some(c) => {
                let at = c.iter().zip(&d.content).position(|(a, b)| a != b);
                bail!(
                    "{} lost fsynced data (fsync returned at write {}): {} bytes, {} \
                     fsynced, first difference at byte {:?}",
                    d.path,
                    d.ack,
                    c.len(),
                    d.content.len(),
                    at
                );
            }
            None => bail!(
                "{} is gone, fsynced (returned at write {}) with {} bytes",
                d.path,
                d.ack,
                d.content.len()
            ),
        }
    }
    let none = BTreeSet::new();
    for (p, c) in contents {
        if let Some(at) = no_garbage(c, model.names.get(p).unwrap_or(&none)) {
            bail!(
                "{p} holds bytes at {at} that no file of that name wrote there: {:02x?}",
                &c[at as usize..c.len().min(at as usize + 8)]
            );
        }
    }
    if cut == total && *contents != model.last {
        let p = model
            .last
            .keys()
            .chain(contents.keys())
            .find(|&p| model.last.get(p) != contents.get(p));
        bail!("after the unmount's last write, a file is not as written: {p:?}");
    }
    Ok(())
}
