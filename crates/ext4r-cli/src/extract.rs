//! `ext4r extract IMAGE DIR [PATH]`: recreate a tree of an image on the
//! host, as debugfs's rdump does, without mounting.
//!
//! The walk runs on the main thread: it creates directories, symlinks and
//! device nodes itself and hands regular files to worker threads through a
//! bounded queue (so memory does not grow with the tree). Workers write the
//! contents and then set everything through the open descriptor — owner
//! (chown clears setuid bits, so first), xattrs (a read-only mode would
//! refuse them), mode, times. Hard links to files are made once all files
//! exist, and directories get their attributes last, deepest first, since
//! writing inside a directory changes its times.

use ext4r_format::num;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use anyhow::{Context, Result};
use clap::Parser;
use ext4r::fs::{FileKind, Filesystem, InodeInfo, Metadata};
use ext4r_format::inode::Timestamp;
use ext4r_format::InodeNr;
use rustix::fs::{AtFlags, Mode, Timespec, Timestamps, CWD};

use crate::read::{finish, open_fs, parse, EXIT_STATUS};

/// Copy a tree out of an ext2/3/4 image.
#[derive(Parser, Debug)]
#[command(name = "ext4r extract", version, after_help = EXIT_STATUS)]
struct Args {
    /// Image file or block device.
    image: PathBuf,
    /// Host directory to write into (created when missing).
    dest: PathBuf,
    /// What to extract: a directory's contents go into DEST when PATH is
    /// `/`; anything else goes to DEST/<its name>.
    #[arg(default_value = "/")]
    path: String,
    /// Report each file written.
    #[arg(short = 'v')]
    verbose: bool,
}

/// The command line's definition (for the man page and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// Runs `ext4r extract`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    match parse::<Args>(args) {
        Ok(a) => finish("ext4r extract", run(&a)),
        Err(c) => c,
    }
}

/// Files up to this size are read together with their neighbours.
const SMALL: u64 = 64 << 10;
/// Blocks between two small files' data still read as one span.
const GAP: u64 = 8;

/// Batches queued for the workers before the walk waits.
const QUEUE: usize = 16;
/// Files per batch at most. A batch holds files of one directory, so that
/// two workers do not queue on the same directory's lock in the kernel.
const BATCH: usize = 1024;

type Job = (InodeInfo, PathBuf);

fn run(a: &Args) -> Result<bool> {
    let fs = open_fs(&a.image)?;
    let info = fs.resolve(&a.path)?;
    std::fs::create_dir_all(&a.dest)
        .with_context(|| format!("cannot create {}", a.dest.display()))?;
    let name = a.path.rsplit('/').find(|s| !s.is_empty());
    let item = match name {
        // The root's contents into DEST; DEST itself gets the root's
        // attributes.
        None if info.inode.is_dir() => Item {
            info,
            target: a.dest.clone(),
            contents_only: true,
        },
        _ => Item {
            target: a.dest.join(name.unwrap_or("root")),
            info,
            contents_only: false,
        },
    };
    let o = OutOptions {
        tool: "ext4r extract",
        preserve: true,
        xattrs: true,
        sockets: false,
        links: true,
        verbose: a.verbose,
    };
    Ok(copy_out(&fs, vec![item], &o))
}

/// How [`copy_out`] copies.
pub(crate) struct OutOptions {
    /// The name messages start with.
    pub tool: &'static str,
    /// Keep owners (as root), modes and times; otherwise files get
    /// their permission bits less the umask and the time of the copy.
    pub preserve: bool,
    /// With `preserve`, the xattrs too (extract, cp -a; not cp -p).
    pub xattrs: bool,
    /// Make sockets (cp does); otherwise skip them with a note (rdump).
    pub sockets: bool,
    /// Names of one inode stay one file (extract, cp -a); otherwise each
    /// name is a copy of its own, as cp -r makes them.
    pub links: bool,
    /// Print each path made.
    pub verbose: bool,
}

/// One thing to copy out of the image.
pub(crate) struct Item {
    /// The inode.
    pub info: InodeInfo,
    /// Where it goes on the host.
    pub target: PathBuf,
    /// A directory whose contents go into `target` (which may exist).
    pub contents_only: bool,
}

/// Recreates `items` from `fs` on the host; false when anything failed
/// (each failure said on stderr).
pub(crate) fn copy_out(fs: &Filesystem, items: Vec<Item>, o: &OutOptions) -> bool {
    // Read the umask by setting it (the only way) and putting it back.
    let umask = rustix::process::umask(Mode::empty());
    rustix::process::umask(umask);
    let first_dir = items
        .first()
        .map(|i| {
            if i.contents_only {
                i.target.clone()
            } else {
                i.target.parent().map(Path::to_path_buf).unwrap_or_default()
            }
        })
        .unwrap_or_default();
    let shared = Shared {
        fs,
        ok: AtomicBool::new(true),
        root: rustix::process::geteuid().is_root(),
        uid: rustix::process::geteuid().as_raw(),
        // Under a setgid directory new files take its group: never assume.
        gid: if std::fs::metadata(&first_dir).is_ok_and(|m| m.permissions().mode() & 0o2000 != 0) {
            u32::MAX
        } else {
            rustix::process::getegid().as_raw()
        },
        umask: (umask.bits() & 0o777) as u16,
        tool: o.tool,
        preserve: o.preserve,
        xattrs: o.xattrs,
        sockets: o.sockets,
    };
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let (tx, rx) = mpsc::sync_channel::<Vec<Job>>(QUEUE);
    let rx = Mutex::new(rx);
    let mut walk = Walk {
        sh: &shared,
        tx: Some(tx),
        batch: Vec::with_capacity(BATCH),
        links: HashMap::new(),
        deferred_links: Vec::new(),
        dirs: Vec::new(),
        on_path: HashSet::new(),
        verbose: o.verbose,
        keep_links: o.links,
    };
    std::thread::scope(|s| {
        for _ in 0..workers {
            let rx = &rx;
            let sh = &shared;
            s.spawn(move || {
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let jobs = rx.lock().map_or(None, |r| r.recv().ok());
                    let Some(jobs) = jobs else { break };
                    sh.regular_batch(jobs, &mut buf);
                }
            });
        }
        for item in items {
            if item.contents_only {
                walk.on_path.insert(item.info.ino.0);
                walk.dir_contents(&item.info, &item.target, 0);
                walk.dirs.push((item.info.ino, item.target.clone(), 0));
                walk.on_path.remove(&item.info.ino.0);
            } else {
                walk.entry(item.info, &item.target, 0);
            }
        }
        walk.flush();
        // Closing the queue lets the workers finish.
        walk.tx = None;
    });
    for (first, target) in std::mem::take(&mut walk.deferred_links) {
        if let Err(e) = std::fs::hard_link(&first, &target) {
            shared.warn(&target, format!("cannot link to {}: {e}", first.display()));
        }
    }
    // Deepest first: a parent's times must be set after its children.
    walk.dirs.sort_by_key(|d| std::cmp::Reverse(d.2));
    for (ino, path, _) in std::mem::take(&mut walk.dirs) {
        match fs.inode(ino) {
            Ok(info) => shared.attributes_path(&info, &path),
            Err(e) => shared.warn(&path, crate::errors::message(&e)),
        }
    }
    shared.ok.load(Ordering::Relaxed)
}

/// What the walk and the workers share.
struct Shared<'a> {
    fs: &'a Filesystem,
    ok: AtomicBool,
    root: bool,
    /// Our own ids: new files get them, so equal owners need no chown.
    uid: u32,
    gid: u32,
    /// The process umask, which new files' modes lose.
    umask: u16,
    tool: &'static str,
    preserve: bool,
    xattrs: bool,
    sockets: bool,
}

impl Shared<'_> {
    fn warn(&self, what: &Path, e: impl std::fmt::Display) {
        eprintln!("{}: {}: {e}", self.tool, what.display());
        self.ok.store(false, Ordering::Relaxed);
    }

    /// Writes a batch of files (one directory's). Small files whose data is
    /// one run are read together: their blocks usually follow each other
    /// on disk, so one read serves many files. The rest go one by one.
    fn regular_batch(&self, jobs: Vec<Job>, buf: &mut [u8]) {
        let bs = u64::from(self.fs.block_size());
        // (physical block, blocks, size, job index) of the small files.
        let mut small: Vec<(u64, u64, u64, usize)> = Vec::new();
        let mut rest: Vec<usize> = Vec::new();
        for (i, (info, _)) in jobs.iter().enumerate() {
            let one_run = self.fs.open_file(info).ok().and_then(|r| {
                let runs = r.runs();
                let size = r.size();
                match runs {
                    [run]
                        if run.logical == 0
                            && !run.unwritten
                            && size > 0
                            && size <= SMALL
                            && run.len == size.div_ceil(bs) =>
                    {
                        Some((run.physical, run.len, size))
                    }
                    _ => None,
                }
            });
            match one_run {
                Some((p, n, size)) => small.push((p, n, size, i)),
                None => rest.push(i),
            }
        }
        small.sort_unstable();
        let mut k = 0;
        while k < small.len() {
            // A span of files close together on disk, read at once.
            let start = small[k].0;
            let mut end = small[k].0 + small[k].1;
            let mut j = k + 1;
            while j < small.len()
                && small[j].0 >= end
                && small[j].0 - end <= GAP
                && (small[j].0 + small[j].1 - start) * bs <= buf.len() as u64
            {
                end = small[j].0 + small[j].1;
                j += 1;
            }
            let span = num::index((end - start) * bs);
            if span > buf.len()
                || self
                    .fs
                    .device()
                    .read_at(&mut buf[..span], start * bs)
                    .is_err()
            {
                rest.extend(small[k..j].iter().map(|x| x.3));
                k = j;
                continue;
            }
            for &(p, _, size, i) in &small[k..j] {
                let (info, target) = &jobs[i];
                let at = num::index((p - start) * bs);
                let data = &buf[at..at + num::index(size)];
                if let Err(e) = self.write_small(info, target, data) {
                    self.warn(target, crate::errors::message(e.as_ref()));
                }
            }
            k = j;
        }
        for i in rest {
            let (info, target) = &jobs[i];
            if let Err(e) = self.regular(info, target, buf) {
                self.warn(target, crate::errors::message(e.as_ref()));
            }
        }
    }

    /// Creates a small file from bytes already read.
    fn write_small(&self, info: &InodeInfo, target: &Path, data: &[u8]) -> Result<()> {
        let m = self.fs.metadata(info);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(u32::from(m.perm & 0o777))
            .open(target)?;
        f.write_all(data)?;
        self.attributes_fd(info, &m, &f, target);
        Ok(())
    }

    /// Writes a file's contents, leaving holes where the image has zeros,
    /// then its attributes through the same descriptor.
    fn regular(&self, info: &InodeInfo, target: &Path, buf: &mut [u8]) -> Result<()> {
        let mut r = self.fs.open_file(info)?;
        let m = self.fs.metadata(info);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(u32::from(m.perm & 0o777))
            .open(target)?;
        let size = r.size();
        let mut written = 0u64;
        let mut hole_at_end = false;
        loop {
            let n = r.read(buf)?;
            if n == 0 {
                break;
            }
            let chunk = &buf[..n];
            if chunk.iter().all(|&b| b == 0) {
                f.seek(SeekFrom::Current(n as i64))?;
                hole_at_end = true;
            } else {
                f.write_all(chunk)?;
                hole_at_end = false;
            }
            written += n as u64;
        }
        if hole_at_end || written != size {
            f.set_len(size)?;
        }
        self.attributes_fd(info, &m, &f, target);
        Ok(())
    }

    /// Owner, xattrs, mode and times through an open file just created
    /// with the permission bits of `m` (less the umask). System calls that
    /// would change nothing are skipped: this runs once per file.
    fn attributes_fd(&self, info: &InodeInfo, m: &Metadata, f: &File, target: &Path) {
        if !self.preserve {
            // Created with the permission bits less the umask: all cp does.
            return;
        }
        let owner_differs = m.uid != self.uid || m.gid != self.gid;
        if self.root && owner_differs {
            if let Err(e) = rustix::fs::fchown(
                f,
                Some(rustix::fs::Uid::from_raw(m.uid)),
                Some(rustix::fs::Gid::from_raw(m.gid)),
            ) {
                self.warn(target, format!("cannot set owner: {e}"));
            }
        }
        self.xattrs(info, target, |name, value| {
            rustix::fs::fsetxattr(f, name, value, rustix::fs::XattrFlags::empty())
        });
        // chown clears setuid/setgid; the umask may have cut bits.
        let created = m.perm & 0o777 & !self.umask;
        if owner_differs || created != m.perm {
            if let Err(e) = rustix::fs::fchmod(f, Mode::from_raw_mode(u32::from(m.perm))) {
                self.warn(target, format!("cannot set mode: {e}"));
            }
        }
        if let Err(e) = rustix::fs::futimens(f, &times(m)) {
            self.warn(target, format!("cannot set times: {e}"));
        }
    }

    /// The same by path, not following a symlink (directories, symlinks,
    /// device nodes, FIFOs).
    fn attributes_path(&self, info: &InodeInfo, target: &Path) {
        let m = self.fs.metadata(info);
        if !self.preserve {
            // A directory was made 0777 less the umask (and written in);
            // cp gives it the source's bits less the umask.
            if m.kind == FileKind::Directory {
                let perm = std::fs::Permissions::from_mode(u32::from(m.perm & 0o777 & !self.umask));
                if let Err(e) = std::fs::set_permissions(target, perm) {
                    self.warn(target, format!("cannot set mode: {e}"));
                }
            }
            return;
        }
        if self.root {
            if let Err(e) = rustix::fs::chownat(
                CWD,
                target,
                Some(rustix::fs::Uid::from_raw(m.uid)),
                Some(rustix::fs::Gid::from_raw(m.gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            ) {
                self.warn(target, format!("cannot set owner: {e}"));
            }
        }
        self.xattrs(info, target, |name, value| {
            rustix::fs::lsetxattr(target, name, value, rustix::fs::XattrFlags::empty())
        });
        if m.kind != FileKind::Symlink {
            let perm = std::fs::Permissions::from_mode(u32::from(m.perm));
            if let Err(e) = std::fs::set_permissions(target, perm) {
                self.warn(target, format!("cannot set mode: {e}"));
            }
        }
        if let Err(e) = rustix::fs::utimensat(CWD, target, &times(&m), AtFlags::SYMLINK_NOFOLLOW) {
            self.warn(target, format!("cannot set times: {e}"));
        }
    }

    /// Sets the user, trusted and security xattrs with `set`; a host that
    /// refuses one gets a note, not a failure.
    fn xattrs(
        &self,
        info: &InodeInfo,
        target: &Path,
        set: impl Fn(&[u8], &[u8]) -> rustix::io::Result<()>,
    ) {
        if !self.xattrs {
            return;
        }
        // Most inodes have none: skip the decoding then.
        let has_ibody = info.record.len() > 128 + 4
            && info.inode.i_extra_isize.get() > 0
            && ext4r_format::xattr::parse_xattr_ibody(&info.record).is_ok_and(|e| e.is_some());
        if !has_ibody && info.inode.file_acl(true).0 == 0 && info.inode.file_acl(false).0 == 0 {
            return;
        }
        match self.fs.xattrs(info) {
            Ok(xs) => {
                for x in xs {
                    let keep = [&b"user."[..], b"trusted.", b"security."]
                        .iter()
                        .any(|p| x.name.starts_with(p));
                    if keep {
                        if let Err(e) = set(&x.name, &x.value) {
                            eprintln!(
                                "{}: {}: xattr {} not set: {e}",
                                self.tool,
                                target.display(),
                                x.name_lossy()
                            );
                        }
                    }
                }
            }
            Err(e) => self.warn(
                target,
                format!("xattrs unreadable: {}", crate::errors::message(&e)),
            ),
        }
    }
}

struct Walk<'a, 'b> {
    sh: &'b Shared<'a>,
    tx: Option<mpsc::SyncSender<Vec<Job>>>,
    batch: Vec<Job>,
    /// Inodes with more than one link already placed, and where.
    links: HashMap<u32, PathBuf>,
    /// Hard links to make once every file exists: (first path, new path).
    deferred_links: Vec<(PathBuf, PathBuf)>,
    /// Directories made, with their depth, for their attributes at the end.
    dirs: Vec<(InodeNr, PathBuf, u32)>,
    /// Directories being extracted, to stop at loops in a damaged image.
    on_path: HashSet<u32>,
    verbose: bool,
    /// Whether names of one inode stay one file.
    keep_links: bool,
}

impl Walk<'_, '_> {
    /// Hands the pending files to the workers.
    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let jobs = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        if let Some(tx) = &self.tx {
            // A send fails only when every worker is gone.
            if let Err(e) = tx.send(jobs) {
                for (_, target) in e.0 {
                    self.sh.warn(&target, "no worker left to write it");
                }
            }
        }
    }

    fn dir_contents(&mut self, dir: &InodeInfo, dest: &Path, depth: u32) {
        let mut entries = match self.sh.fs.read_dir(dir) {
            Ok(e) => e,
            Err(e) => return self.sh.warn(dest, crate::errors::message(&e)),
        };
        // Htree directories list names in hash order; inode order reads the
        // inode table (and usually the data) front to back.
        entries.sort_by_key(|e| e.ino.0);
        // Files of the parent directory are handed over before these.
        self.flush();
        for e in entries.iter().filter(|e| !e.is_dot()) {
            if e.name.contains(&b'/') || e.name.is_empty() {
                self.sh.warn(
                    dest,
                    format!(
                        "skipping a name that is not one path component: {:?}",
                        e.name_lossy()
                    ),
                );
                continue;
            }
            let target = dest.join(std::ffi::OsStr::from_bytes(&e.name));
            match self.sh.fs.inode(e.ino) {
                Ok(child) => self.entry(child, &target, depth + 1),
                Err(err) => self.sh.warn(&target, crate::errors::message(&err)),
            }
        }
        self.flush();
    }

    /// Places one inode at `target`.
    fn entry(&mut self, info: InodeInfo, target: &Path, depth: u32) {
        let m = self.sh.fs.metadata(&info);
        if self.keep_links && m.kind != FileKind::Directory && m.links > 1 {
            if let Some(first) = self.links.get(&m.ino) {
                self.deferred_links
                    .push((first.clone(), target.to_path_buf()));
                return;
            }
            self.links.insert(m.ino, target.to_path_buf());
        }
        if self.verbose {
            println!("{}", target.display());
        }
        let made: Result<()> = match m.kind {
            FileKind::Regular => {
                self.batch.push((info, target.to_path_buf()));
                if self.batch.len() == BATCH {
                    self.flush();
                }
                return;
            }
            FileKind::Directory => {
                if !self.on_path.insert(m.ino) {
                    self.sh.warn(target, "directory loop; not descending");
                    return;
                }
                let r = std::fs::create_dir(target).or_else(|e| match e.kind() {
                    std::io::ErrorKind::AlreadyExists if target.is_dir() => Ok(()),
                    _ => Err(e),
                });
                match r {
                    Ok(()) => {
                        self.dir_contents(&info, target, depth);
                        self.dirs.push((info.ino, target.to_path_buf(), depth));
                    }
                    Err(e) => self.sh.warn(target, e),
                }
                self.on_path.remove(&m.ino);
                return;
            }
            FileKind::Symlink => self
                .sh
                .fs
                .read_link(&info)
                .map_err(anyhow::Error::from)
                .and_then(|t| {
                    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&t), target)
                        .map_err(Into::into)
                }),
            FileKind::CharDevice | FileKind::BlockDevice | FileKind::Fifo => {
                special(target, &m).map_err(Into::into)
            }
            FileKind::Socket if self.sh.sockets => special(target, &m).map_err(Into::into),
            FileKind::Socket => {
                eprintln!("{}: {}: socket skipped", self.sh.tool, target.display());
                return;
            }
            _ => {
                self.sh
                    .warn(target, format!("inode {} has an unknown file type", m.ino));
                return;
            }
        };
        match made {
            Ok(()) => self.sh.attributes_path(&info, target),
            Err(e) => self.sh.warn(target, crate::errors::message(e.as_ref())),
        }
    }
}

fn times(m: &Metadata) -> Timestamps {
    Timestamps {
        last_access: timespec(m.atime),
        last_modification: timespec(m.mtime),
    }
}

fn timespec(t: Timestamp) -> Timespec {
    Timespec {
        tv_sec: t.secs,
        tv_nsec: i64::from(t.nsecs.min(999_999_999)),
    }
}

/// Makes a device node, FIFO or socket.
fn special(target: &Path, m: &Metadata) -> std::io::Result<()> {
    let (kind, dev) = match m.kind {
        FileKind::CharDevice => (rustix::fs::FileType::CharacterDevice, m.rdev),
        FileKind::BlockDevice => (rustix::fs::FileType::BlockDevice, m.rdev),
        FileKind::Socket => (rustix::fs::FileType::Socket, None),
        _ => (rustix::fs::FileType::Fifo, None),
    };
    let (maj, min) = dev.unwrap_or((0, 0));
    rustix::fs::mknodat(
        CWD,
        target,
        kind,
        Mode::from_raw_mode(u32::from(m.perm)),
        rustix::fs::makedev(maj, min),
    )?;
    Ok(())
}
