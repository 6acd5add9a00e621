//! `ext4r extract IMAGE DIR [PATH]`: recreate a tree of an image on the
//! host, as debugfs's rdump does, without mounting.
//!
//! Order matters for fidelity: contents first, then owner (chown clears
//! setuid bits), then xattrs (a read-only mode would refuse them), then
//! mode, then times — and a directory's
//! times only after everything inside it is written.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use ext4r::fs::{FileKind, Filesystem, InodeInfo, Metadata};
use ext4r_format::inode::Timestamp;
use rustix::fs::{AtFlags, Mode, Timespec, Timestamps, CWD};

use crate::read::{finish, open_fs, parse};

/// Copy a tree out of an ext2/3/4 image.
#[derive(Parser, Debug)]
#[command(version, about)]
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

/// Runs `ext4r extract`.
pub fn main(args: Vec<OsString>) -> ExitCode {
    match parse::<Args>(args) {
        Ok(a) => finish("ext4r extract", run(&a)),
        Err(c) => c,
    }
}

fn run(a: &Args) -> Result<bool> {
    let fs = open_fs(&a.image)?;
    let info = fs.resolve(&a.path)?;
    std::fs::create_dir_all(&a.dest)
        .with_context(|| format!("cannot create {}", a.dest.display()))?;
    let mut x = Extractor {
        fs: &fs,
        links: HashMap::new(),
        on_path: HashSet::new(),
        ok: true,
        verbose: a.verbose,
        root: geteuid_is_root(),
        buf: vec![0u8; 1 << 20],
    };
    let name = a.path.rsplit('/').find(|s| !s.is_empty());
    match name {
        None if info.inode.is_dir() => {
            // The root's contents into DEST; DEST itself gets the root's
            // attributes.
            x.on_path.insert(info.ino.0);
            x.dir_contents(&info, &a.dest)?;
            x.attributes(&info, &a.dest)?;
        }
        _ => {
            let target = a.dest.join(name.unwrap_or("root"));
            x.entry(&info, &target)?;
        }
    }
    Ok(x.ok)
}

fn geteuid_is_root() -> bool {
    rustix::process::geteuid().is_root()
}

struct Extractor<'a> {
    fs: &'a Filesystem,
    /// Inodes with more than one link already written, and where.
    links: HashMap<u32, PathBuf>,
    /// Directories being extracted, to stop at loops in a damaged image.
    on_path: HashSet<u32>,
    ok: bool,
    verbose: bool,
    root: bool,
    buf: Vec<u8>,
}

impl Extractor<'_> {
    fn warn(&mut self, what: &Path, e: impl std::fmt::Display) {
        eprintln!("ext4r extract: {}: {e}", what.display());
        self.ok = false;
    }

    fn dir_contents(&mut self, dir: &InodeInfo, dest: &Path) -> Result<()> {
        let entries = match self.fs.read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                self.warn(dest, e);
                return Ok(());
            }
        };
        for e in entries.iter().filter(|e| !e.is_dot()) {
            if e.name.contains(&b'/') || e.name.is_empty() {
                self.warn(dest, format!("skipping unsafe name {:?}", e.name_lossy()));
                continue;
            }
            let target = dest.join(std::ffi::OsStr::from_bytes(&e.name));
            match self.fs.inode(e.ino) {
                Ok(child) => self.entry(&child, &target)?,
                Err(err) => self.warn(&target, err),
            }
        }
        Ok(())
    }

    /// Writes one inode at `target`.
    fn entry(&mut self, info: &InodeInfo, target: &Path) -> Result<()> {
        let m = self.fs.metadata(info);
        if m.kind != FileKind::Directory && m.links > 1 {
            if let Some(first) = self.links.get(&m.ino) {
                if let Err(e) = std::fs::hard_link(first, target) {
                    self.warn(target, format!("cannot link to {}: {e}", first.display()));
                }
                return Ok(());
            }
        }
        if self.verbose {
            println!("{}", target.display());
        }
        let made = match m.kind {
            FileKind::Regular => self.regular(info, target),
            FileKind::Directory => {
                if !self.on_path.insert(m.ino) {
                    self.warn(target, "directory loop; not descending");
                    return Ok(());
                }
                let r = std::fs::create_dir(target)
                    .or_else(|e| match e.kind() {
                        std::io::ErrorKind::AlreadyExists if target.is_dir() => Ok(()),
                        _ => Err(e),
                    })
                    .map_err(anyhow::Error::from)
                    .and_then(|()| self.dir_contents(info, target));
                self.on_path.remove(&m.ino);
                r
            }
            FileKind::Symlink => self
                .fs
                .read_link(info)
                .map_err(anyhow::Error::from)
                .and_then(|t| {
                    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&t), target)
                        .map_err(Into::into)
                }),
            FileKind::CharDevice | FileKind::BlockDevice | FileKind::Fifo => {
                special(target, &m).map_err(Into::into)
            }
            FileKind::Socket => {
                eprintln!("ext4r extract: {}: socket skipped", target.display());
                return Ok(());
            }
            _ => {
                self.warn(target, format!("inode {} has an unknown file type", m.ino));
                return Ok(());
            }
        };
        if let Err(e) = made {
            self.warn(target, format!("{e:#}"));
            return Ok(());
        }
        if m.kind != FileKind::Directory && m.links > 1 {
            self.links.insert(m.ino, target.to_path_buf());
        }
        self.attributes(info, target)
    }

    /// Copies a file's contents, leaving holes where the image has zeros.
    fn regular(&mut self, info: &InodeInfo, target: &Path) -> Result<()> {
        let mut r = self.fs.open_file(info)?;
        let mut f = File::create(target)?;
        let size = r.size();
        loop {
            let n = r.read(&mut self.buf)?;
            if n == 0 {
                break;
            }
            let chunk = &self.buf[..n];
            if chunk.iter().all(|&b| b == 0) {
                f.seek(SeekFrom::Current(n as i64))?;
            } else {
                f.write_all(chunk)?;
            }
        }
        f.set_len(size)?;
        Ok(())
    }

    /// Owner, mode, xattrs, times, in the order that keeps each.
    fn attributes(&mut self, info: &InodeInfo, target: &Path) -> Result<()> {
        let m = self.fs.metadata(info);
        let symlink = m.kind == FileKind::Symlink;
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
        match self.fs.xattrs(info) {
            Ok(xs) => {
                for x in xs {
                    let keep = [&b"user."[..], b"trusted.", b"security."]
                        .iter()
                        .any(|p| x.name.starts_with(p));
                    if !keep {
                        continue;
                    }
                    if let Err(e) = rustix::fs::lsetxattr(
                        target,
                        x.name.as_slice(),
                        &x.value,
                        rustix::fs::XattrFlags::empty(),
                    ) {
                        eprintln!(
                            "ext4r extract: {}: xattr {} not set: {e}",
                            target.display(),
                            x.name_lossy()
                        );
                    }
                }
            }
            Err(e) => self.warn(target, format!("xattrs unreadable: {e}")),
        }
        if !symlink {
            let perm = std::fs::Permissions::from_mode(u32::from(m.perm));
            if let Err(e) = std::fs::set_permissions(target, perm) {
                self.warn(target, format!("cannot set mode: {e}"));
            }
        }
        let ts = Timestamps {
            last_access: timespec(m.atime),
            last_modification: timespec(m.mtime),
        };
        if let Err(e) = rustix::fs::utimensat(CWD, target, &ts, AtFlags::SYMLINK_NOFOLLOW) {
            self.warn(target, format!("cannot set times: {e}"));
        }
        Ok(())
    }
}

fn timespec(t: Timestamp) -> Timespec {
    Timespec {
        tv_sec: t.secs,
        tv_nsec: i64::from(t.nsecs.min(999_999_999)),
    }
}

/// Makes a device node or FIFO.
fn special(target: &Path, m: &Metadata) -> std::io::Result<()> {
    let (kind, dev) = match m.kind {
        FileKind::CharDevice => (rustix::fs::FileType::CharacterDevice, m.rdev),
        FileKind::BlockDevice => (rustix::fs::FileType::BlockDevice, m.rdev),
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
