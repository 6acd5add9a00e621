//! Copying trees into a filesystem through the write API: a host
//! directory (`mkfs.ext4r -d DIR`, `ext4r cp -r`) or a tar archive
//! (`mkfs.ext4r -d archive.tar`), as e2fsprogs' `mke2fs -d`
//! (misc/create_inode.c) copies them: regular files (holes kept as holes),
//! directories, symlinks, hard links (as hard links), device nodes, FIFOs
//! and sockets, with modes, owners and times.
//!
//! Everything is done in a fixed order — a directory's names sorted by
//! their bytes, a tar archive in archive order — so the same source gives
//! the same inodes and blocks. With [`CopyOptions::clamp`] (mkfs's
//! `SOURCE_DATE_EPOCH`) no time later than the given one is written, which
//! with the write API's own clock pinned makes the image reproducible.
//!
//! ```no_run
//! use ext4r::populate::{Copier, CopyOptions};
//! use ext4r::write::{WriteFs, WriteOptions, ROOT_INO};
//!
//! let mut fs = WriteFs::open_path("disk.img".as_ref(), WriteOptions::default())?;
//! let mut c = Copier::new(&mut fs, CopyOptions::mkfs());
//! c.copy_dir_contents("rootfs".as_ref(), ROOT_INO, "/")?;
//! drop(c); // the copier borrows the filesystem
//! fs.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod data;
mod host;
mod tar;
mod tar_read;
mod tar_sparse;

use crate::error::Error;
use crate::write::{NewNode, SetAttr, WriteFs};
use ext4r_format::acl;
use ext4r_format::inode::{mode, Timestamp};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// What to keep of the source and how to write it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CopyOptions {
    /// Keep the source's permission bits (setuid, setgid and sticky
    /// included); otherwise they lose `umask` and the special bits.
    pub keep_mode: bool,
    /// Applied when the mode is not kept (cp's new files).
    pub umask: u16,
    /// Keep the source's owner; otherwise `default_owner`.
    pub keep_owner: bool,
    /// The owner of what is copied when the source's is not kept.
    pub default_owner: (u32, u32),
    /// Owner forced on everything copied (uid, gid), whatever the source
    /// says: images built without root (mkfs's `-E uid=,gid=`).
    pub force_uid: Option<u32>,
    /// As `force_uid`, for the group.
    pub force_gid: Option<u32>,
    /// Keep access and modification times; otherwise they are now.
    pub keep_times: bool,
    /// No time written is later than this (seconds): `SOURCE_DATE_EPOCH`.
    pub clamp: Option<i64>,
    /// Copy extended attributes.
    pub xattrs: bool,
    /// Copy the names of one source file as hard links of one inode (mke2fs
    /// -d, cp -a); otherwise each name is a file of its own (cp -r).
    pub hard_links: bool,
    /// Leave blocks of zeros unwritten (holes), as mke2fs -d does;
    /// otherwise only the source's own holes are holes.
    pub zeros_as_holes: bool,
    /// After a failure, go on with the next file (cp) instead of stopping
    /// (mkfs); failures are reported through the callback either way.
    pub keep_going: bool,
    /// Commit (sync) whenever about this many bytes of changes gathered:
    /// memory stays near it. `None` leaves it to the write API (which
    /// gathers up to tens of MiB).
    pub sync_every: Option<u64>,
}

impl CopyOptions {
    /// As `mke2fs -d`: modes, owners, times kept, xattrs copied, zero
    /// blocks left as holes, the first failure stops.
    pub fn mkfs() -> Self {
        CopyOptions {
            keep_mode: true,
            umask: 0,
            keep_owner: true,
            default_owner: (0, 0),
            force_uid: None,
            force_gid: None,
            keep_times: true,
            clamp: None,
            xattrs: true,
            hard_links: true,
            zeros_as_holes: true,
            keep_going: false,
            sync_every: Some(256 << 10),
        }
    }

    /// As `cp -r` (`preserve`: `cp -p`): without `preserve` new files get
    /// the source's mode less `umask`, `owner` and the time of the copy.
    pub fn cp(preserve: bool, umask: u16, owner: (u32, u32)) -> Self {
        CopyOptions {
            keep_mode: preserve,
            umask,
            keep_owner: preserve,
            default_owner: owner,
            force_uid: None,
            force_gid: None,
            keep_times: preserve,
            clamp: None,
            xattrs: preserve,
            hard_links: false,
            zeros_as_holes: false,
            keep_going: true,
            sync_every: None,
        }
    }
}

/// What was being done when a copy failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Reading the source (stat, open, read, readlink, list).
    Read,
    /// Making a regular file.
    CreateFile,
    /// Making a directory.
    CreateDir,
    /// Making a symbolic link.
    CreateSymlink,
    /// Making a device node, FIFO or socket.
    CreateSpecial,
    /// Making a hard link.
    Link,
    /// Writing a file's contents.
    Write,
    /// Setting modes, owners, times.
    Attributes,
    /// Copying extended attributes.
    Xattrs,
    /// Replacing what the target name already held.
    Replace,
}

/// Why a copy failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PopulateError {
    /// Reading the source failed.
    #[error("{}", path.display())]
    Source {
        /// The source path (for a tar archive, the member's name).
        path: PathBuf,
        /// The system error.
        source: std::io::Error,
    },
    /// The filesystem refused or failed a change.
    #[error("{path}")]
    Image {
        /// What was being done.
        op: Op,
        /// The path in the filesystem.
        path: String,
        /// The write API's error.
        source: Error,
    },
    /// A directory would replace a non-directory (or the reverse).
    #[error("{}", overwrite_words(path, *dir_over, from.as_deref()))]
    Overwrite {
        /// The path in the filesystem.
        path: String,
        /// `true`: a directory would replace a non-directory.
        dir_over: bool,
        /// The source directory (named by cp's message), where known.
        from: Option<PathBuf>,
    },
    /// A tar archive that cannot be read, or a member that cannot be
    /// placed (a name that would leave the tree, a link to nothing before it).
    #[error("{0}")]
    Archive(String),
}

/// cp's words for a directory and a non-directory meeting.
fn overwrite_words(path: &str, dir_over: bool, from: Option<&std::path::Path>) -> String {
    match (dir_over, from) {
        (true, Some(f)) => format!(
            "cannot overwrite non-directory '{path}' with directory '{}'",
            f.display()
        ),
        (true, None) => format!("cannot overwrite non-directory '{path}' with directory"),
        (false, _) => format!("cannot overwrite directory '{path}' with non-directory"),
    }
}

impl PopulateError {
    fn image(op: Op, path: &str, source: Error) -> Self {
        PopulateError::Image {
            op,
            path: path.to_string(),
            source,
        }
    }
}

/// Results of copying.
pub type Result<T, E = PopulateError> = std::result::Result<T, E>;

/// What was copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Regular files made.
    pub files: u64,
    /// Directories made.
    pub dirs: u64,
    /// Symlinks made.
    pub symlinks: u64,
    /// Device nodes, FIFOs and sockets made.
    pub specials: u64,
    /// Extra names of files copied once (hard links).
    pub hard_links: u64,
    /// File bytes written (holes not counted).
    pub bytes: u64,
    /// Failures reported (and skipped, with `keep_going`).
    pub failures: u64,
}

/// The kind of node a source entry makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink(Vec<u8>),
    Char(u32, u32),
    Block(u32, u32),
    Fifo,
    Socket,
}

/// One source entry's attributes, as read (before the options apply).
#[derive(Debug, Clone)]
pub(crate) struct Attrs {
    pub kind: Kind,
    /// Permission bits with setuid, setgid and sticky (no type bits).
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Told the source (a host path; none for an archive member) and the
/// filesystem path of each thing made.
type Copied<'a> = Box<dyn FnMut(Option<&std::path::Path>, &str) + 'a>;

/// Copies sources into a filesystem opened for writing; remembers hard
/// links across calls (one `cp` command, one `mkfs -d`).
pub struct Copier<'a> {
    fs: &'a mut WriteFs,
    opts: CopyOptions,
    /// Sources with several links already copied: (device, inode) → inode
    /// in the filesystem.
    links: HashMap<(u64, u64), u32>,
    /// Directories this copier made, which hold only what it put there.
    fresh_dirs: HashSet<u32>,
    /// Whether names placed in a fresh directory are known to be new (a
    /// host directory's are; a tar archive may repeat a name).
    fresh_ok: bool,
    now: Timestamp,
    buf: Vec<u8>,
    stats: Stats,
    /// Bytes of changes since the last sync (data, and a block per node).
    pending: u64,
    /// Whether any change was made (a command that made none leaves the
    /// filesystem unclosed, byte for byte as it was).
    changed: bool,
    report: Box<dyn FnMut(&PopulateError) + 'a>,
    verbose: Option<Copied<'a>>,
    /// The host path being copied, for `verbose` (kept only with it).
    src_now: Option<PathBuf>,
}

impl std::fmt::Debug for Copier<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Copier")
            .field("opts", &self.opts)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The read buffer: large enough for few system calls, small enough
/// not to matter.
const BUF: usize = 256 << 10;

impl<'a> Copier<'a> {
    /// A copier writing into `fs` with `opts`. Failures that `keep_going`
    /// skips are only counted until [`Copier::on_error`] sets a callback.
    pub fn new(fs: &'a mut WriteFs, opts: CopyOptions) -> Self {
        let now = clamp(now_of(fs), opts.clamp);
        Copier {
            fs,
            opts,
            links: HashMap::new(),
            fresh_dirs: HashSet::new(),
            fresh_ok: true,
            now,
            buf: vec![0; BUF],
            stats: Stats::default(),
            pending: 0,
            changed: false,
            report: Box::new(|_| {}),
            verbose: None,
            src_now: None,
        }
    }

    /// Calls `f` with every failure (also the one that stops a copy
    /// without `keep_going`, which is returned as well).
    pub fn on_error(&mut self, f: impl FnMut(&PopulateError) + 'a) {
        self.report = Box::new(f);
    }

    /// Calls `f` with the source (a host path; `None` for a member of an
    /// archive) and the filesystem path of everything made.
    pub fn on_copied(&mut self, f: impl FnMut(Option<&std::path::Path>, &str) + 'a) {
        self.verbose = Some(Box::new(f));
    }

    /// What was copied so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Whether anything in the filesystem was changed.
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The filesystem being written.
    pub fn fs(&mut self) -> &mut WriteFs {
        self.fs
    }

    /// Counts `n` bytes of changes; syncs when `sync_every` is reached.
    pub(crate) fn note_pending(&mut self, n: u64, path: &str) -> Result<()> {
        self.pending += n;
        match self.opts.sync_every {
            Some(limit) if self.pending >= limit => {
                self.pending = 0;
                self.fs
                    .sync()
                    .map_err(|e| PopulateError::image(Op::Write, path, e))
            }
            _ => Ok(()),
        }
    }

    /// Reports `e`; with `keep_going` it is then skipped (`Ok`).
    fn fail(&mut self, e: PopulateError) -> Result<()> {
        self.stats.failures += 1;
        (self.report)(&e);
        if self.opts.keep_going {
            Ok(())
        } else {
            Err(e)
        }
    }

    /// The owner, mode and times the options give a source's `a`.
    fn effective(&self, a: &Attrs) -> (u16, u32, u32, Timestamp, Timestamp) {
        let perm = if self.opts.keep_mode {
            a.perm & mode::PERM_MASK
        } else {
            a.perm & 0o777 & !self.opts.umask
        };
        let (mut uid, mut gid) = if self.opts.keep_owner {
            (a.uid, a.gid)
        } else {
            self.opts.default_owner
        };
        uid = self.opts.force_uid.unwrap_or(uid);
        gid = self.opts.force_gid.unwrap_or(gid);
        let (at, mt) = if self.opts.keep_times {
            (
                clamp(a.atime, self.opts.clamp),
                clamp(a.mtime, self.opts.clamp),
            )
        } else {
            (self.now, self.now)
        };
        (perm, uid, gid, at, mt)
    }

    /// Makes `name` in `parent` for a source with attributes `a` (a regular
    /// file's contents are the caller's to write). What the name holds
    /// already is reused (a directory for a directory; a regular file for
    /// a regular file, emptied, when `in_place`) or replaced. Returns the
    /// inode and whether it was there before.
    ///
    /// In a directory this copier made, names come from one source
    /// directory and are new: they are not looked up first.
    fn place(
        &mut self,
        parent: u32,
        name: &[u8],
        a: &Attrs,
        path: &str,
        in_place: bool,
    ) -> Result<(u32, bool)> {
        let (perm, uid, gid, at, mt) = self.effective(a);
        let op = op_of(&a.kind);
        let img = |e: Error| PopulateError::image(op, path, e);
        let old = if self.fresh_dirs.contains(&parent) {
            None
        } else {
            self.fs.lookup(parent, name).map_err(img)?
        };
        if let Some(old) = old {
            let oi = self.fs.stat(old).map_err(img)?;
            match (&a.kind, oi.is_dir()) {
                (Kind::Dir, true) => return Ok((old, true)),
                (Kind::Dir, false) => {
                    return Err(PopulateError::Overwrite {
                        path: path.into(),
                        dir_over: true,
                        from: None,
                    })
                }
                (_, true) => {
                    return Err(PopulateError::Overwrite {
                        path: path.into(),
                        dir_over: false,
                        from: None,
                    })
                }
                (Kind::File, false) if in_place && oi.is_reg() => {
                    self.fs
                        .truncate(old, 0)
                        .map_err(|e| PopulateError::image(Op::Write, path, e))?;
                    self.changed = true;
                    return Ok((old, true));
                }
                _ => {
                    self.fs
                        .unlink(parent, name)
                        .map_err(|e| PopulateError::image(Op::Replace, path, e))?;
                    self.changed = true;
                }
            }
        }
        let times = Some([at, mt, self.now]);
        let node = |m: u16, rdev: (u32, u32)| {
            let mut n = NewNode::file(0).owned_by(uid, gid);
            n.mode = m | perm;
            n.rdev = rdev;
            n.times = times;
            n
        };
        let made = match &a.kind {
            Kind::File => self.fs.create(parent, name, &node(mode::S_IFREG, (0, 0))),
            Kind::Dir => self.fs.mkdir(parent, name, &node(mode::S_IFDIR, (0, 0))),
            Kind::Symlink(t) => self.fs.symlink(parent, name, t, uid, gid),
            Kind::Char(ma, mi) => self
                .fs
                .create(parent, name, &node(mode::S_IFCHR, (*ma, *mi))),
            Kind::Block(ma, mi) => self
                .fs
                .create(parent, name, &node(mode::S_IFBLK, (*ma, *mi))),
            Kind::Fifo => self.fs.create(parent, name, &node(mode::S_IFIFO, (0, 0))),
            Kind::Socket => self.fs.create(parent, name, &node(mode::S_IFSOCK, (0, 0))),
        };
        let ino = made.map_err(img)?;
        self.changed = true;
        // An inode record, a directory entry, perhaps a block.
        self.note_pending(self.fs.block_size(), path)?;
        match a.kind {
            Kind::File => self.stats.files += 1,
            Kind::Dir => {
                self.stats.dirs += 1;
                if self.fresh_ok {
                    self.fresh_dirs.insert(ino);
                }
            }
            Kind::Symlink(_) => self.stats.symlinks += 1,
            _ => self.stats.specials += 1,
        }
        if let Some(v) = &mut self.verbose {
            v(self.src_now.as_deref(), path);
        }
        Ok((ino, old.is_some()))
    }

    /// Sets what creation could not, or what writing inside changed: the
    /// times (contents and entries written move them), and on a reused
    /// inode the mode and owner too.
    fn finish(&mut self, ino: u32, a: &Attrs, path: &str, reused: bool) -> Result<()> {
        let (perm, uid, gid, at, mt) = self.effective(a);
        let o = &self.opts;
        let mut s = SetAttr::default();
        if reused && o.keep_mode {
            s.perm = Some(perm);
        }
        if reused && (o.keep_owner || o.force_uid.is_some() || o.force_gid.is_some()) {
            s.uid = Some(uid);
            s.gid = Some(gid);
            // chown clears setuid and setgid unless the mode is set too.
            s.perm = Some(if o.keep_mode {
                perm
            } else {
                self.fs_perm(ino)?
            });
        }
        // Creation set the times; what changed the inode since (contents,
        // entries, a symlink's own creation) moved them.
        let moved = reused || matches!(a.kind, Kind::File | Kind::Dir | Kind::Symlink(_));
        if o.keep_times && moved {
            s.atime = Some(at);
            s.mtime = Some(mt);
        }
        if s != SetAttr::default() {
            self.fs
                .setattr(ino, &s)
                .map_err(|e| PopulateError::image(Op::Attributes, path, e))?;
            self.changed = true;
        }
        self.set_xattrs(ino, &a.xattrs, path)
    }

    /// The permission bits inode `ino` has now.
    fn fs_perm(&self, ino: u32) -> Result<u16> {
        let i = self
            .fs
            .stat(ino)
            .map_err(|e| PopulateError::image(Op::Attributes, "", e))?;
        Ok(i.mode() & mode::PERM_MASK)
    }

    /// Copies extended attributes (names with their namespace prefix,
    /// values as the host's system calls give them: POSIX ACLs are
    /// converted to ext4's form). A filesystem without the `ext_attr`
    /// feature gets none, as from mke2fs -d.
    fn set_xattrs(&mut self, ino: u32, xattrs: &[(Vec<u8>, Vec<u8>)], path: &str) -> Result<()> {
        if !self.opts.xattrs || xattrs.is_empty() || !self.fs.has_xattr_feature() {
            return Ok(());
        }
        for (name, value) in xattrs {
            let converted;
            let v = if acl::is_acl_name(name) {
                converted = acl::acl_to_disk(value).map_err(|e| {
                    PopulateError::image(
                        Op::Xattrs,
                        path,
                        Error::corrupt(format!("{}", String::from_utf8_lossy(name)), e),
                    )
                })?;
                &converted
            } else {
                value
            };
            self.fs
                .set_xattr(ino, name, v)
                .map_err(|e| PopulateError::image(Op::Xattrs, path, e))?;
            self.changed = true;
            self.note_pending(v.len() as u64, path)?;
        }
        Ok(())
    }

    /// Adds `name` in `parent` as another name of `ino` (a hard link
    /// copied as one), replacing a non-directory the name held.
    fn link_to(&mut self, ino: u32, parent: u32, name: &[u8], path: &str) -> Result<()> {
        let img = |e: Error| PopulateError::image(Op::Link, path, e);
        let old = if self.fresh_dirs.contains(&parent) {
            None
        } else {
            self.fs.lookup(parent, name).map_err(img)?
        };
        if let Some(old) = old {
            if old == ino {
                return Ok(());
            }
            if self.fs.stat(old).map_err(img)?.is_dir() {
                return Err(PopulateError::Overwrite {
                    path: path.into(),
                    dir_over: false,
                    from: None,
                });
            }
            self.fs
                .unlink(parent, name)
                .map_err(|e| PopulateError::image(Op::Replace, path, e))?;
            self.changed = true;
        }
        self.fs.link(ino, parent, name).map_err(img)?;
        self.changed = true;
        self.stats.hard_links += 1;
        if let Some(v) = &mut self.verbose {
            v(self.src_now.as_deref(), path);
        }
        Ok(())
    }
}

fn op_of(k: &Kind) -> Op {
    match k {
        Kind::File => Op::CreateFile,
        Kind::Dir => Op::CreateDir,
        Kind::Symlink(_) => Op::CreateSymlink,
        _ => Op::CreateSpecial,
    }
}

/// `t`, no later than `limit`.
fn clamp(t: Timestamp, limit: Option<i64>) -> Timestamp {
    match limit {
        Some(l) if t.secs >= l => Timestamp { secs: l, nsecs: 0 },
        _ => t,
    }
}

/// The time the write API stamps (its clock, pinned or not).
fn now_of(fs: &WriteFs) -> Timestamp {
    fs.now()
}

/// `dir/name` for messages.
pub(crate) fn join(dir: &str, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    /// Each cause is said once: in the message or as `source()`, not both.
    #[test]
    fn causes_are_not_repeated() {
        let errors = [
            PopulateError::Source {
                path: "/src/f".into(),
                source: std::io::Error::other("the io cause"),
            },
            PopulateError::image(
                Op::Write,
                "/f",
                Error::Open {
                    path: "/tmp/img".into(),
                    source: std::io::Error::other("the io cause"),
                },
            ),
        ];
        for e in &errors {
            let text = crate::error::chain(e);
            let cause = std::error::Error::source(e)
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(!cause.is_empty(), "{e:?} has no source");
            assert!(!e.to_string().contains(&cause), "{text}");
            assert_eq!(text.matches("the io cause").count(), 1, "{text}");
        }
        assert_eq!(crate::error::chain(&errors[0]), "/src/f: the io cause");
    }
}
