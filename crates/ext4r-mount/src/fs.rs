//! The FUSE operations, each a call of the write API under one lock.

use crate::attr::{decode_dev, file_attr, file_type, timestamp, to_ext4, to_fuse};
use crate::errno::{errno, is_fault};
use crate::options::Options;
use ext4r::error::Location;
use ext4r::format::acl::PosixAcl;
use ext4r::format::inode::mode;
use ext4r::format::num;
use ext4r::fs::FileKind;
use ext4r::write::{NewNode, OnError, SetAttr, WriteFs};
use ext4r::{Error, Timestamp};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

/// How long the kernel may keep names and attributes without asking
/// again. Nothing but this driver changes the image while it is mounted,
/// and every change goes through it, so the kernel's copies stay right.
const TTL: Duration = Duration::from_secs(1);

/// Longest name in a directory entry.
const NAME_MAX: usize = 255;

/// `setxattr(2)` flags.
const XATTR_CREATE: i32 = 1;
const XATTR_REPLACE: i32 = 2;

/// `fallocate(2)`'s modes served, those of the kernel's ext4: keep the
/// size, punch a hole (always with keep-size), zero a range, collapse a
/// range, insert a range. Unsharing is not among ext4's (it has no shared
/// extents), so it is refused with EOPNOTSUPP as the kernel refuses it.
const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
const FALLOC_FL_COLLAPSE_RANGE: i32 = 0x08;
const FALLOC_FL_ZERO_RANGE: i32 = 0x10;
const FALLOC_FL_INSERT_RANGE: i32 = 0x20;

/// The two POSIX ACLs' attribute names.
const ACL_ACCESS: &[u8] = b"system.posix_acl_access";
const ACL_DEFAULT: &[u8] = b"system.posix_acl_default";

/// A directory listing taken at `opendir`: `readdir` serves it by index,
/// so offsets stay valid while the directory changes (POSIX leaves it
/// open whether names added or removed after opendir show up).
type Listing = Vec<(INodeNo, FileType, Vec<u8>)>;

/// A directory's listing as `opendir` read it: its entries keep their
/// places (the offsets readdir hands out) while names change.
struct OpenDir {
    dir: u32,
    /// [`State::names_changed`] when it was read.
    as_of: u64,
    entries: Listing,
}

/// What the lock guards.
pub(crate) struct State {
    /// The filesystem; `None` once unmounted.
    pub(crate) fs: Option<WriteFs>,
    /// Open directory listings by handle.
    dirs: HashMap<u64, OpenDir>,
    /// Changes to names so far (creates, links, unlinks, renames): a
    /// listing made before the last of them may name what is gone.
    names_changed: u64,
    next_fh: u64,
    /// Open files: how many opens each inode has.
    open: HashMap<u32, u32>,
    /// The kernel's lookup count of each inode it was handed in an entry
    /// reply (lookup, create, mkdir, mknod, symlink, link), until it
    /// forgets them. While it is not zero the kernel may still send
    /// requests for the inode (an open after a lookup that raced an
    /// unlink, a write through a descriptor), so its number must not be
    /// freed and given to another file.
    looked: HashMap<u32, u64>,
    /// Inodes unlinked while open or looked up, freed once neither.
    kept: HashSet<u32>,
    /// Something changed since the last commit.
    pub(crate) dirty: bool,
    /// Damage stopped the writing (`errors=remount-ro`): inodes kept for
    /// the kernel stay on the orphan list, for fsck or the next mount.
    frozen: bool,
}

impl State {
    /// The kernel was handed inode `ino` in an entry reply.
    fn remember(&mut self, ino: u32) {
        *self.looked.entry(ino).or_insert(0) += 1;
    }

    /// Whether the kernel may still send requests for `ino`: it is open,
    /// or the kernel has not forgotten it.
    fn in_use(&self, ino: u32) -> bool {
        self.open.contains_key(&ino) || self.looked.contains_key(&ino)
    }

    /// Frees `ino` if it was kept for the kernel and is no longer in use.
    fn release_if_unused(&mut self, fs: &mut WriteFs, ino: u32) -> ext4r::Result<()> {
        if !self.frozen && !self.in_use(ino) && self.kept.remove(&ino) {
            self.dirty = true;
            fs.release_kept(ino)?;
        }
        Ok(())
    }
}

/// What an unmount leaves to tell: how closing the filesystem went.
pub type Outcome = Arc<Mutex<Option<ext4r::Result<()>>>>;

/// The FUSE filesystem over a [`WriteFs`].
pub struct Ext4rFuse {
    pub(crate) state: Arc<Mutex<State>>,
    read_only: bool,
    /// What to do on damage; `None`: what the superblock says.
    errors: Option<OnError>,
    /// POSIX ACLs served (`acl`, the default) or not (`noacl`).
    acl: bool,
    /// `uid=`, `gid=`: the owner and group every inode is shown with.
    uid: Option<u32>,
    gid: Option<u32>,
    /// Set once damage made an `errors=remount-ro` mount stop writing.
    stopped: AtomicBool,
    outcome: Outcome,
    /// Tells the kernel that what it keeps of an inode went stale, where
    /// a request changed more than the kernel's FUSE client knows of (set
    /// once the session exists; without it the attributes time out).
    pub(crate) notifier: Arc<OnceLock<fuser::Notifier>>,
}

impl std::fmt::Debug for Ext4rFuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ext4rFuse")
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// Logs a fault (damage, I/O error) once per failed request: an answer
/// like ENOENT is not worth a line.
fn note(what: &str, e: &Error) {
    if is_fault(e) {
        eprintln!("ext4r mount: {what}: {}", ext4r::error::chain(e));
    }
}

/// A name from the kernel, checked for length.
fn name_bytes(name: &OsStr) -> Result<&[u8], Errno> {
    let b = name.as_bytes();
    if b.len() > NAME_MAX {
        return Err(Errno::from_i32(libc::ENAMETOOLONG));
    }
    Ok(b)
}

impl Ext4rFuse {
    /// A FUSE filesystem serving `fs`; with `read_only`, every request
    /// that would change it is refused (EROFS) before it reaches `fs`.
    /// The result of closing `fs` at unmount lands in `outcome`.
    pub fn new(fs: WriteFs, read_only: bool, outcome: Outcome) -> Self {
        let o = Options {
            read_only,
            ..Options::default()
        };
        Self::with_options(fs, &o, outcome)
    }

    /// As [`Ext4rFuse::new`], with what `opts` say: read-only, what to
    /// do on damage (`errors=`), POSIX ACLs (`acl`/`noacl`).
    pub fn with_options(fs: WriteFs, opts: &Options, outcome: Outcome) -> Self {
        Ext4rFuse {
            state: Arc::new(Mutex::new(State {
                fs: Some(fs),
                dirs: HashMap::new(),
                names_changed: 0,
                next_fh: 1,
                open: HashMap::new(),
                looked: HashMap::new(),
                kept: HashSet::new(),
                dirty: false,
                frozen: false,
            })),
            read_only: opts.read_only,
            errors: opts.errors,
            acl: opts.acl,
            uid: opts.uid,
            gid: opts.gid,
            stopped: AtomicBool::new(false),
            outcome,
            notifier: Arc::new(OnceLock::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the filesystem under the lock; EIO once unmounted.
    fn with<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut State, &mut WriteFs) -> ext4r::Result<T>,
    ) -> Result<T, Errno> {
        let mut st = self.lock();
        let Some(mut fs) = st.fs.take() else {
            return Err(Errno::EIO);
        };
        let r = f(&mut st, &mut fs);
        if let Err(e) = &r {
            self.damage(&mut st, &mut fs, what, e);
        }
        st.fs = Some(fs);
        r.map_err(|e| {
            note(what, &e);
            errno(&e)
        })
    }

    /// What an operation that failed with `e` leaves to do, when `e` is
    /// damage or an I/O error (as the kernel's `ext4_error`): the error
    /// recorded in the superblock, so that the next `e2fsck -p` checks
    /// the filesystem, then what `errors=` (or the superblock's
    /// `s_errors`) asks: go on; stop writing (what was done before is
    /// committed, every change after is refused with EROFS); or stop the
    /// driver at once with nothing more written (the mount is left
    /// broken, "transport endpoint is not connected", until unmounted).
    fn damage(&self, st: &mut State, fs: &mut WriteFs, what: &str, e: &Error) {
        if !ext4r::write::is_damage(e) {
            return;
        }
        let policy = self.errors.unwrap_or_else(|| fs.on_error());
        if policy == OnError::Panic {
            eprintln!(
                "ext4r mount: {what}: {}; errors=panic: stopping the driver, nothing more written",
                ext4r::error::chain(e)
            );
            std::process::abort();
        }
        if self.read_only || self.stopped.load(Ordering::Acquire) {
            return;
        }
        match fs.record_error(e, what) {
            Ok(recorded) => st.dirty |= recorded,
            Err(x) => note("recording the error in the superblock", &x),
        }
        if policy == OnError::RemountReadOnly {
            if let Err(x) = fs.sync() {
                note("commit", &x);
            }
            st.dirty = false;
            st.frozen = true;
            self.stopped.store(true, Ordering::Release);
            eprintln!(
                "ext4r mount: {what}: {}; errors=remount-ro: no more changes are written",
                ext4r::error::chain(e)
            );
        }
    }

    /// As [`Ext4rFuse::with`] for a change: EROFS on a read-only mount.
    fn change<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut State, &mut WriteFs) -> ext4r::Result<T>,
    ) -> Result<T, Errno> {
        if self.read_only || self.stopped.load(Ordering::Acquire) {
            return Err(Errno::from_i32(libc::EROFS));
        }
        self.with(what, |st, fs| {
            st.dirty = true;
            f(st, fs)
        })
    }

    /// [`Self::change`] of names (a create, link, unlink or rename):
    /// counted, for the listings read before it.
    fn change_names<T>(
        &self,
        what: &str,
        f: impl FnOnce(&mut State, &mut WriteFs) -> ext4r::Result<T>,
    ) -> Result<T, Errno> {
        self.change(what, |st, fs| {
            st.names_changed += 1;
            f(st, fs)
        })
    }

    /// The attributes and generation of ext4 inode `ino`.
    /// With `uid=`/`gid=`, every inode is shown as owned by them.
    fn entry_of(&self, fs: &WriteFs, ino: u32) -> ext4r::Result<(FileAttr, Generation)> {
        if to_fuse(ino).is_none() {
            return Err(bad_inode(ino));
        }
        let i = fs.stat(ino)?;
        let mut attr = file_attr(fs, ino, &i);
        attr.uid = self.uid.unwrap_or(attr.uid);
        attr.gid = self.gid.unwrap_or(attr.gid);
        Ok((attr, Generation(u64::from(i.generation()))))
    }

    /// The owner of a new inode in `parent`, and its mode: as the kernel's
    /// `inode_init_owner`, a set-group-ID directory hands its group down,
    /// and its set-group-ID bit to subdirectories.
    fn owner(fs: &WriteFs, req: &Request, parent: u32, m: u16) -> ext4r::Result<(u32, u32, u16)> {
        let p = fs.stat(parent)?;
        if p.mode() & mode::S_ISGID != 0 {
            let m = if m & mode::S_IFMT == mode::S_IFDIR {
                m | mode::S_ISGID
            } else {
                m
            };
            return Ok((req.uid(), p.gid(), m));
        }
        Ok((req.uid(), req.gid(), m))
    }
}

/// What a new inode takes from its directory, as the kernel's ext4 gives
/// it (`posix_acl_create`): its mode and the ACLs to store with it.
struct Inherited {
    /// The mode, masked by the directory's default ACL or by the umask.
    mode: u16,
    /// The access ACL, when the default ACL says more than the mode.
    access: Option<PosixAcl>,
    /// The default ACL (a new directory keeps its parent's).
    default: Option<PosixAcl>,
}

impl Inherited {
    /// `node` with the ACLs to store, stored in the same operation as the
    /// inode is made (as the kernel's create, which fails whole).
    fn onto(&self, mut node: NewNode) -> NewNode {
        if let Some(a) = &self.access {
            node = node.with_xattr(ACL_ACCESS, &a.to_disk());
        }
        if let Some(d) = &self.default {
            node = node.with_xattr(ACL_DEFAULT, &d.to_disk());
        }
        node
    }
}

/// ACL `name` of `ino` as stored, read.
fn stored_acl(fs: &WriteFs, ino: u32, name: &[u8]) -> ext4r::Result<Option<PosixAcl>> {
    match fs.xattrs(ino)?.into_iter().find(|(n, _)| n == name) {
        Some((_, v)) => PosixAcl::from_disk(&v)
            .map(Some)
            .map_err(|e| Error::corrupt(Location::inode(ino).of("POSIX ACL"), e)),
        None => Ok(None),
    }
}

impl Ext4rFuse {
    /// The mode and ACLs of a new inode of mode `m` (type and permission
    /// bits, the umask not yet applied) in directory `parent`: with ACLs
    /// on and a default ACL on the directory, the mode is masked by it
    /// (and the umask ignored), else by `umask`. Without ACLs the kernel
    /// has applied the umask already.
    fn inherit(&self, fs: &WriteFs, parent: u32, m: u16, umask: u32) -> ext4r::Result<Inherited> {
        if !self.acl || m & mode::S_IFMT == mode::S_IFLNK {
            return Ok(Inherited {
                mode: m,
                access: None,
                default: None,
            });
        }
        let Some(default) = stored_acl(fs, parent, ACL_DEFAULT)? else {
            return Ok(Inherited {
                mode: m & !(num::lo16(umask) & 0o777),
                access: None,
                default: None,
            });
        };
        let mut mode = m;
        let mut access = default.clone();
        let says_more = access
            .create_masq(&mut mode)
            .map_err(|e| Error::corrupt(Location::inode(parent).of("default POSIX ACL"), e))?;
        Ok(Inherited {
            mode,
            access: says_more.then_some(access),
            default: (m & mode::S_IFMT == mode::S_IFDIR).then_some(default),
        })
    }
}

/// The error for a directory entry naming an inode no entry may name.
fn bad_inode(ino: u32) -> Error {
    Error::corrupt(
        ext4r::error::Location::inode(ino).of("directory entry"),
        ext4r::format::FormatError::invalid("directory entry", "names a reserved inode"),
    )
}

/// A time to set.
fn when(t: TimeOrNow) -> Timestamp {
    match t {
        TimeOrNow::SpecificTime(t) => timestamp(t),
        TimeOrNow::Now => timestamp(SystemTime::now()),
    }
}

/// The attributes of an entry whose inode cannot be read, for a
/// readdirplus reply: its number and the type its entry gives, nothing else.
fn unreadable(ino: INodeNo, kind: FileType) -> FileAttr {
    FileAttr {
        ino,
        size: 0,
        blocks: 0,
        atime: std::time::UNIX_EPOCH,
        mtime: std::time::UNIX_EPOCH,
        ctime: std::time::UNIX_EPOCH,
        crtime: std::time::UNIX_EPOCH,
        kind,
        perm: 0,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl fuser::Filesystem for Ext4rFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Larger writes, fewer operations; the kernel caps it at what it
        // allows and says so, which is fine either way.
        let _ = config.set_max_write(1 << 20);
        // Read ahead as far as the kernel offers (it says how far when
        // asked for more), with enough requests in flight to keep it going.
        if let Err(max) = config.set_max_readahead(u32::MAX) {
            let _ = config.set_max_readahead(max);
        }
        let _ = config.set_max_background(64);
        // The kernel keeps written pages and hands them over in large
        // writes at writeback, as it does for its own ext4: a 4 KiB
        // write(2) is no longer a request here. fsync still reaches us
        // after the kernel has written the file's pages (and so commits
        // them), and an unmount writes every page back before the session
        // ends, so nothing is less durable than before.
        if !self.read_only {
            let _ = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE);
        }
        // Directory listings with each entry's attributes (readdirplus),
        // when the kernel sees them used (`ls -l`, `find`, not `ls`).
        let _ = config
            .add_capabilities(InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO);
        // POSIX ACLs as on the kernel's ext4: the kernel checks them (with
        // default_permissions) and hands their attributes here; the umask
        // comes with each create, to be applied here only when the
        // directory has no default ACL.
        if self.acl {
            let _ = config.add_capabilities(InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        let mut st = self.lock();
        let kept: Vec<u32> = st.kept.drain().collect();
        let result = match st.fs.take() {
            Some(mut fs) => {
                let mut r = Ok(());
                if !self.read_only && !st.frozen {
                    for ino in kept {
                        if let Err(e) = fs.release_kept(ino) {
                            note("release", &e);
                            r = Err(e);
                        }
                    }
                }
                // A read-only mount's changes (journal replay, orphans)
                // were staged in memory: nothing reaches the image.
                let closed = if self.read_only { Ok(()) } else { fs.close() };
                r.and(closed)
            }
            None => Ok(()),
        };
        if let Err(e) = &result {
            eprintln!("ext4r mount: unmount: {}", ext4r::error::chain(e));
        }
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = name_bytes(name).and_then(|name| {
            self.with("lookup", |st, fs| {
                match fs.lookup(to_ext4(parent), name)? {
                    Some(ino) => {
                        let e = self.entry_of(fs, ino)?;
                        st.remember(ino);
                        Ok(Some(e))
                    }
                    None => Ok(None),
                }
            })
        });
        match r {
            Ok(Some((attr, g))) => reply.entry(&TTL, &attr, g),
            Ok(None) => reply.error(Errno::ENOENT),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let e4 = to_ext4(ino);
        // No reply to give: a failure to free is logged by `with`, and the
        // inode stays on the orphan list for the next mount or fsck.
        let _ = self.with("forget", |st, fs| {
            match st.looked.get_mut(&e4) {
                Some(n) if *n > nlookup => *n -= nlookup,
                Some(_) => {
                    st.looked.remove(&e4);
                }
                None => {}
            }
            // (A read-only mount keeps nothing: its unlinks are refused.)
            st.release_if_unused(fs, e4)
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with("getattr", |_, fs| self.entry_of(fs, to_ext4(ino))) {
            Ok((attr, _)) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let e4 = to_ext4(ino);
        let r = self.change("setattr", |_, fs| {
            if let Some(size) = size {
                fs.truncate(e4, size)?;
            }
            let mut a = SetAttr::default();
            a.perm = mode.map(|m| (m & 0o7777) as u16);
            a.uid = uid;
            a.gid = gid;
            a.atime = atime.map(when);
            a.mtime = mtime.map(when);
            if a != SetAttr::default() {
                fs.setattr(e4, &a)?;
            }
            // As ext4_setattr's posix_acl_chmod: the access ACL follows
            // the new mode.
            if let (Some(perm), true) = (a.perm, self.acl) {
                if let Some(mut acl) = stored_acl(fs, e4, ACL_ACCESS)? {
                    acl.chmod(perm);
                    fs.set_xattr(e4, ACL_ACCESS, &acl.to_disk())?;
                }
            }
            self.entry_of(fs, e4)
        });
        match r {
            Ok((attr, _)) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.with("readlink", |_, fs| fs.read_link(to_ext4(ino))) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let p = to_ext4(parent);
        let r = name_bytes(name).and_then(|name| {
            self.change_names("mknod", |st, fs| {
                let (uid, gid, m) = Self::owner(fs, req, p, mode16(mode)?)?;
                let inh = self.inherit(fs, p, m, umask)?;
                let m = inh.mode;
                let perm = m & 0o7777;
                let (major, minor) = decode_dev(rdev);
                let node = match m & mode::S_IFMT {
                    mode::S_IFREG => NewNode::file(perm),
                    mode::S_IFIFO => NewNode::fifo(perm),
                    mode::S_IFSOCK => NewNode::socket(perm),
                    mode::S_IFCHR => NewNode::char_device(perm, major, minor),
                    mode::S_IFBLK => NewNode::block_device(perm, major, minor),
                    _ => return Err(Error::InvalidArgument(format!("mknod of mode {mode:#o}"))),
                };
                let ino = fs.create(p, name, &inh.onto(node.owned_by(uid, gid)))?;
                let e = self.entry_of(fs, ino)?;
                st.remember(ino);
                Ok(e)
            })
        });
        match r {
            Ok((attr, g)) => reply.entry(&TTL, &attr, g),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let p = to_ext4(parent);
        let r = name_bytes(name).and_then(|name| {
            self.change_names("mkdir", |st, fs| {
                let m = mode::S_IFDIR | num::lo16(mode & 0o7777);
                let (uid, gid, m) = Self::owner(fs, req, p, m)?;
                let inh = self.inherit(fs, p, m, umask)?;
                let m = inh.mode;
                let node = NewNode::dir(m & 0o7777).owned_by(uid, gid);
                let ino = fs.mkdir(p, name, &inh.onto(node))?;
                let e = self.entry_of(fs, ino)?;
                st.remember(ino);
                Ok(e)
            })
        });
        match r {
            Ok((attr, g)) => reply.entry(&TTL, &attr, g),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = to_ext4(parent);
        let r = name_bytes(name).and_then(|name| {
            self.change_names("unlink", |st, fs| unlink_keeping_open(st, fs, p, name))
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = name_bytes(name)
            .and_then(|name| self.change_names("rmdir", |_, fs| fs.rmdir(to_ext4(parent), name)));
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let p = to_ext4(parent);
        let r = name_bytes(link_name).and_then(|name| {
            let target = target.as_os_str().as_bytes();
            self.change_names("symlink", |st, fs| {
                // As ext4_symlink: the target and its NUL fit in a block.
                if target.len() >= num::index(fs.block_size()) {
                    return Ok(Err(Errno::from_i32(libc::ENAMETOOLONG)));
                }
                let (uid, gid, _) = Self::owner(fs, req, p, mode::S_IFLNK)?;
                let ino = fs.symlink(p, name, target, uid, gid)?;
                let e = self.entry_of(fs, ino)?;
                st.remember(ino);
                Ok(Ok(e))
            })
            .and_then(|r| r)
        });
        match r {
            Ok((attr, g)) => reply.entry(&TTL, &attr, g),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (from_dir, to_dir) = (to_ext4(parent), to_ext4(newparent));
        let r = name_bytes(name).and_then(|from| {
            name_bytes(newname).and_then(|to| {
                let whiteout = flags.contains(RenameFlags::RENAME_WHITEOUT);
                if flags.contains(RenameFlags::RENAME_EXCHANGE) {
                    if whiteout {
                        // As do_renameat2: the two cannot go together.
                        return Err(Errno::EINVAL);
                    }
                    return self
                        .change_names("rename", |_, fs| fs.exchange(from_dir, from, to_dir, to));
                }
                self.change_names("rename", |st, fs| {
                    let target = fs.lookup(to_dir, to)?;
                    if target.is_some() && flags.contains(RenameFlags::RENAME_NOREPLACE) {
                        return Err(Error::AlreadyExists(String::from_utf8_lossy(to).into()));
                    }
                    if let Some(t) = target {
                        // A file still open keeps its data when a rename
                        // replaces its last name, as on the kernel's ext4.
                        // Only where the rename will replace it: a
                        // non-directory by another.
                        let src = fs.lookup(from_dir, from)?;
                        let replaces = match src {
                            Some(s) if s != t => !fs.stat(s)?.is_dir() && !fs.stat(t)?.is_dir(),
                            _ => false,
                        };
                        if replaces && st.in_use(t) {
                            if let Some(k) = fs.unlink_keep(to_dir, to)? {
                                st.kept.insert(k);
                            }
                        }
                    }
                    if !whiteout {
                        return fs.rename(from_dir, from, to_dir, to);
                    }
                    // A whiteout (for overlay filesystems' upper layers):
                    // a character device 0:0 of mode 0 at the old name,
                    // owned as any new inode there (ext4_whiteout_for_rename
                    // makes it through ext4_new_inode, ACLs included).
                    let (uid, gid, m) = Self::owner(fs, req, from_dir, mode::S_IFCHR)?;
                    let inh = self.inherit(fs, from_dir, m, 0)?;
                    let wh = inh.onto(NewNode::char_device(0, 0, 0).owned_by(uid, gid));
                    let made = fs.rename_whiteout_as(from_dir, from, to_dir, to, &wh);
                    if let Err(Error::DirectoryNotEmpty(_) | Error::TooManyLinks(_)) = &made {
                        // The kernel's ext4_rename checks these two after
                        // the whiteout has taken the old name; putting the
                        // old entry back (ext4_resetent) stamps the
                        // directory's times, though the rename failed. The
                        // kernel's FUSE client does not expect that: told.
                        let mut a = SetAttr::default();
                        a.mtime = Some(timestamp(SystemTime::now()));
                        fs.setattr(from_dir, &a)?;
                        self.stale(parent);
                    }
                    made?;
                    Ok(())
                })
            })
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let e4 = to_ext4(ino);
        let r = name_bytes(newname).and_then(|name| {
            self.change_names("link", |st, fs| {
                fs.link(e4, to_ext4(newparent), name)?;
                let e = self.entry_of(fs, e4)?;
                st.remember(e4);
                Ok(e)
            })
        });
        match r {
            Ok((attr, g)) => reply.entry(&TTL, &attr, g),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let e4 = to_ext4(ino);
        let r = self.with("open", |st, fs| {
            fs.stat(e4)?;
            *st.open.entry(e4).or_insert(0) += 1;
            Ok(())
        });
        match r {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let r = self.with("read", |_, fs| {
            let mut buf = vec![0u8; size as usize];
            let n = fs.read(to_ext4(ino), offset, &mut buf)?;
            buf.truncate(n);
            Ok(buf)
        });
        match r {
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.change("write", |_, fs| fs.write(to_ext4(ino), offset, data)) {
            // No more than the request's data, whose size FUSE gives in a u32.
            Ok(n) => reply.written(num::sat_u32(n)),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) does not make data durable on ext4 either; fsync does.
        // Nothing to do, and said so: the kernel then sends no FLUSH at
        // any later close (a request less per file; it still writes the
        // file's cached pages back at close itself).
        reply.error(Errno::ENOSYS);
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let e4 = to_ext4(ino);
        let r = self.with("release", |st, fs| {
            match st.open.get_mut(&e4) {
                Some(n) if *n > 1 => *n -= 1,
                Some(_) => {
                    st.open.remove(&e4);
                }
                None => {}
            }
            st.release_if_unused(fs, e4)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        match self.sync_now() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = self.with("opendir", |st, fs| {
            let mut list = Listing::new();
            for d in fs.read_dir(to_ext4(ino))? {
                let Some(n) = to_fuse(d.ino.0) else {
                    // A damaged entry: left out of the listing, as the
                    // lookup of it would fail.
                    continue;
                };
                let kind = match d.kind {
                    FileKind::Unknown => match fs.stat(d.ino.0) {
                        Ok(i) => file_type(i.mode()),
                        Err(_) => FileType::RegularFile,
                    },
                    k => kind_of(k),
                };
                list.push((n, kind, d.name));
            }
            let fh = st.next_fh;
            st.next_fh += 1;
            let as_of = st.names_changed;
            st.dirs.insert(
                fh,
                OpenDir {
                    dir: to_ext4(ino),
                    as_of,
                    entries: list,
                },
            );
            Ok(fh)
        });
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let st = self.lock();
        let Some(open) = st.dirs.get(&fh.0) else {
            reply.error(Errno::EBADF);
            return;
        };
        for (k, (n, kind, name)) in open.entries.iter().enumerate().skip(num::index(offset)) {
            if reply.add(*n, k as u64 + 1, *kind, OsStr::from_bytes(name)) {
                break;
            }
        }
        reply.ok();
    }

    /// As `readdir`, each entry with its attributes, which the kernel
    /// keeps as a lookup's: `ls -l` and `find` ask nothing more per name.
    /// Every entry but `.` and `..` counts as a lookup of its inode (the
    /// kernel links it, and forgets it later); an entry whose inode cannot
    /// be read goes with its type only and no time to keep it, so that
    /// using it asks for a lookup, which answers the error.
    fn readdirplus(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let r = self.with("readdirplus", |st, fs| {
            let Some(open) = st.dirs.get(&fh.0) else {
                return Ok(false);
            };
            // The kernel links each name to the inode given with it (and
            // takes a known inode with other attributes as changed): after
            // a change of names, each is looked up again, and one gone is
            // left out (readdir may or may not show what went meanwhile).
            let changed = open.as_of != st.names_changed;
            let mut linked = Vec::new();
            for (k, (n, kind, name)) in open.entries.iter().enumerate().skip(num::index(offset)) {
                let dots = name == b"." || name == b"..";
                let ino = if changed && !dots {
                    match fs.lookup(open.dir, name) {
                        Ok(Some(now)) => now,
                        Ok(None) | Err(_) => continue,
                    }
                } else {
                    to_ext4(*n)
                };
                let Some(fuse_ino) = to_fuse(ino) else {
                    continue;
                };
                let (attr, g, ttl) = match self.entry_of(fs, ino) {
                    Ok((attr, g)) => (attr, g, TTL),
                    Err(_) => (unreadable(fuse_ino, *kind), Generation(0), Duration::ZERO),
                };
                if reply.add(
                    fuse_ino,
                    k as u64 + 1,
                    OsStr::from_bytes(name),
                    &ttl,
                    &attr,
                    g,
                ) {
                    break;
                }
                if !dots {
                    linked.push(ino);
                }
            }
            for ino in linked {
                st.remember(ino);
            }
            Ok(true)
        });
        match r {
            Ok(true) => reply.ok(),
            Ok(false) => reply.error(Errno::EBADF),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.lock().dirs.remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _ds: bool,
        reply: ReplyEmpty,
    ) {
        match self.sync_now() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.with("statfs", |_, fs| Ok(fs.fs_stats())) {
            Ok(s) => reply.statfs(
                s.blocks,
                s.free_blocks,
                s.avail_blocks,
                s.inodes,
                s.free_inodes,
                num::sat_u32(s.block_size),
                num::sat_u32(NAME_MAX),
                num::sat_u32(s.block_size),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let e4 = to_ext4(ino);
        let name = name.as_bytes();
        if ext4r::format::acl::is_acl_name(name) {
            let r = if self.acl {
                self.change("setxattr", |_, fs| {
                    // As posix_acl_update_mode: the group the kernel
                    // shows decides, `gid=` included.
                    let gid = self.gid.unwrap_or(fs.stat(e4)?.gid());
                    let keep_sgid = in_group_or_capable(req, gid);
                    set_acl(fs, e4, name, value, keep_sgid)
                })
                .and_then(|r| r)
            } else {
                Err(Errno::from_i32(libc::EOPNOTSUPP))
            };
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
            return;
        }
        let r = self
            .change("setxattr", |_, fs| {
                if flags & (XATTR_CREATE | XATTR_REPLACE) != 0 {
                    let there = fs.xattrs(e4)?.iter().any(|(n, _)| n == name);
                    if flags & XATTR_CREATE != 0 && there {
                        return Ok(Err(Errno::EEXIST));
                    }
                    if flags & XATTR_REPLACE != 0 && !there {
                        return Ok(Err(Errno::NO_XATTR));
                    }
                }
                match fs.set_xattr(e4, name, value) {
                    // An unknown namespace: the kernel's answer.
                    Err(Error::InvalidName(_)) => Ok(Err(Errno::from_i32(libc::EOPNOTSUPP))),
                    // No room in the inode or a block: the kernel's ext4 says
                    // ENOSPC too.
                    r => r.map(Ok),
                }
            })
            .and_then(|r| r);
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let name = name.as_bytes();
        let is_acl = ext4r::format::acl::is_acl_name(name);
        if is_acl && !self.acl {
            reply.error(Errno::from_i32(libc::EOPNOTSUPP));
            return;
        }
        let r = self.with("getxattr", |_, fs| {
            let e4 = to_ext4(ino);
            if is_acl {
                // Stored in ext4's short form, given in the system calls'.
                return Ok(stored_acl(fs, e4, name)?.map(|a| a.to_vfs()));
            }
            Ok(fs
                .xattrs(e4)?
                .into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v))
        });
        match r {
            Ok(Some(v)) => sized(reply, size, &v),
            Ok(None) => reply.error(Errno::NO_XATTR),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = self.with("listxattr", |_, fs| {
            let mut out = Vec::new();
            for (n, _) in fs.xattrs(to_ext4(ino))? {
                out.extend_from_slice(&n);
                out.push(0);
            }
            Ok(out)
        });
        match r {
            Ok(list) => sized(reply, size, &list),
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name.as_bytes();
        if ext4r::format::acl::is_acl_name(name) && !self.acl {
            reply.error(Errno::from_i32(libc::EOPNOTSUPP));
            return;
        }
        let r = self
            .change("removexattr", |_, fs| {
                match fs.remove_xattr(to_ext4(ino), name) {
                    Err(Error::NotFound(_)) => Ok(Err(Errno::NO_XATTR)),
                    Err(Error::InvalidName(_)) => Ok(Err(Errno::from_i32(libc::EOPNOTSUPP))),
                    r => r.map(Ok),
                }
            })
            .and_then(|r| r);
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let p = to_ext4(parent);
        let r = name_bytes(name).and_then(|name| {
            self.change_names("create", |st, fs| {
                let (uid, gid, m) = Self::owner(fs, req, p, mode16(mode)?)?;
                if m & mode::S_IFMT != mode::S_IFREG && m & mode::S_IFMT != 0 {
                    return Err(Error::InvalidArgument(format!("create of mode {m:#o}")));
                }
                let inh = self.inherit(fs, p, mode::S_IFREG | (m & 0o7777), umask)?;
                let m = inh.mode;
                let node = NewNode::file(m & 0o7777).owned_by(uid, gid);
                let ino = fs.create(p, name, &inh.onto(node))?;
                let e = self.entry_of(fs, ino)?;
                *st.open.entry(ino).or_insert(0) += 1;
                st.remember(ino);
                Ok(e)
            })
        });
        match r {
            Ok((attr, g)) => reply.created(&TTL, &attr, g, FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        match fallocate_mode(mode) {
            Ok(()) => {}
            Err(e) => {
                reply.error(e);
                return;
            }
        }
        let keep = mode & FALLOC_FL_KEEP_SIZE != 0;
        let how = mode & !FALLOC_FL_KEEP_SIZE;
        match self.change("fallocate", |_, fs| {
            let e4 = to_ext4(ino);
            match how {
                FALLOC_FL_PUNCH_HOLE => fs.punch_hole(e4, offset, length)?,
                FALLOC_FL_ZERO_RANGE => fs.zero_range(e4, offset, length, keep)?,
                FALLOC_FL_COLLAPSE_RANGE => fs.collapse_range(e4, offset, length)?,
                FALLOC_FL_INSERT_RANGE => fs.insert_range(e4, offset, length)?,
                _ => fs.fallocate(e4, offset, length, keep)?,
            }
            // As the kernel's ext4_fallocate (file_modified): every mode
            // stamps the modification and change times.
            let mut a = SetAttr::default();
            a.mtime = Some(timestamp(SystemTime::now()));
            fs.setattr(e4, &a)
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

impl Ext4rFuse {
    /// Tells the kernel its copy of `ino`'s attributes is stale (when the
    /// session can be reached; else they time out after [`TTL`]).
    fn stale(&self, ino: INodeNo) {
        if let Some(n) = self.notifier.get() {
            // ENOENT: the kernel keeps nothing of it, nothing to drop.
            let _ = n.inval_inode(ino, -1, 0);
        }
    }

    /// Commits what changed (fsync, fsyncdir).
    fn sync_now(&self) -> Result<(), Errno> {
        if self.read_only || self.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        self.with("sync", |st, fs| {
            st.dirty = false;
            fs.sync()
        })
    }
}

/// Removes `name` from `parent`: an inode that is still open, or that
/// the kernel has not forgotten, and loses its last name is kept until
/// neither holds.
fn unlink_keeping_open(
    st: &mut State,
    fs: &mut WriteFs,
    parent: u32,
    name: &[u8],
) -> ext4r::Result<()> {
    let target = fs.lookup(parent, name)?;
    match target {
        Some(t) if st.in_use(t) => {
            if let Some(k) = fs.unlink_keep(parent, name)? {
                st.kept.insert(k);
            }
            Ok(())
        }
        _ => fs.unlink(parent, name),
    }
}

/// `CAP_FSETID`'s bit in a capability set.
const CAP_FSETID: u32 = 4;

/// Whether the process behind `req` is in group `gid` (its filesystem
/// group or one of its supplementary groups) or holds `CAP_FSETID`: the
/// kernel's `in_group_or_capable`, which decides whether setting an
/// access ACL keeps a file's set-group-ID bit. The kernel's FUSE client
/// hands its own answer over only with `FUSE_SETXATTR_EXT`, which the
/// FUSE crate cannot parse, so it is asked of `/proc` here. A process
/// already gone: root is taken as capable, anyone else as not in the
/// group (the bit dropped, the safe side).
fn in_group_or_capable(req: &Request, gid: u32) -> bool {
    if req.gid() == gid {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{}/status", req.pid())) {
        Ok(status) => status_in_group_or_capable(&status, gid),
        Err(_) => req.uid() == 0,
    }
}

/// Whether a process whose `/proc/PID/status` reads `status` has group
/// `gid` among its supplementary groups or `CAP_FSETID` in its effective
/// capabilities.
fn status_in_group_or_capable(status: &str, gid: u32) -> bool {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let in_group =
        field("Groups:").is_some_and(|g| g.split_whitespace().any(|x| x.parse::<u32>() == Ok(gid)));
    let capable = field("CapEff:")
        .and_then(|c| u64::from_str_radix(c, 16).ok())
        .is_some_and(|c| c & (1 << CAP_FSETID) != 0);
    in_group || capable
}

/// Sets ACL `name` of `ino` from the system calls' form `value`, as the
/// kernel's ext4_set_acl: an access ACL also sets the mode's permission
/// bits, and is not stored when it says no more than they do; and, unless
/// `keep_sgid` (the caller is in the file's group or may keep the bit, see
/// [`in_group_or_capable`]), it drops the set-group-ID bit, as
/// `posix_acl_update_mode` does.
fn set_acl(
    fs: &mut WriteFs,
    ino: u32,
    name: &[u8],
    value: &[u8],
    keep_sgid: bool,
) -> ext4r::Result<Result<(), Errno>> {
    let Ok(acl) = PosixAcl::from_vfs(value) else {
        return Ok(Err(Errno::EINVAL));
    };
    if name == ACL_ACCESS {
        let (perm, equiv) = acl.equiv_mode();
        let mut a = SetAttr::default();
        let mut special = fs.stat(ino)?.mode() & 0o7000;
        if !keep_sgid {
            special &= !mode::S_ISGID;
        }
        a.perm = Some(special | perm);
        fs.setattr(ino, &a)?;
        if equiv {
            return match fs.remove_xattr(ino, name) {
                Ok(()) | Err(Error::NotFound(_)) => Ok(Ok(())),
                Err(e) => Err(e),
            };
        }
    }
    fs.set_xattr(ino, name, &acl.to_disk()).map(Ok)
}

/// Whether `fallocate(2)` mode `mode` is one this driver serves, with
/// the kernel's answers for those it does not: collapse and insert go
/// alone (EINVAL with any other flag, as vfs_fallocate), punching keeps
/// the size, and any other mode (unshare among them: not in ext4's
/// supported set) is EOPNOTSUPP.
fn fallocate_mode(mode: i32) -> Result<(), Errno> {
    let keep = mode & FALLOC_FL_KEEP_SIZE != 0;
    for alone in [FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE] {
        if mode & alone != 0 && mode != alone {
            return Err(Errno::EINVAL);
        }
    }
    match mode & !FALLOC_FL_KEEP_SIZE {
        0 | FALLOC_FL_ZERO_RANGE => Ok(()),
        FALLOC_FL_PUNCH_HOLE if keep => Ok(()),
        FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE => Ok(()),
        _ => Err(Errno::from_i32(libc::EOPNOTSUPP)),
    }
}

/// The 16-bit `i_mode` of a mode FUSE passes as `u32`; bits above 16
/// (no mode_t has them) are refused, not dropped.
fn mode16(mode: u32) -> ext4r::Result<u16> {
    u16::try_from(mode).map_err(|_| Error::InvalidArgument(format!("mode {mode:#o}")))
}

/// Answers a getxattr/listxattr: the size asked for with 0, the bytes
/// when they fit, ERANGE when not.
fn sized(reply: ReplyXattr, size: u32, bytes: &[u8]) {
    if size == 0 {
        match u32::try_from(bytes.len()) {
            Ok(n) => reply.size(n),
            Err(_) => reply.error(Errno::from_i32(libc::E2BIG)),
        }
    } else if bytes.len() <= size as usize {
        reply.data(bytes);
    } else {
        reply.error(Errno::from_i32(libc::ERANGE));
    }
}

/// A directory entry's kind as FUSE's.
fn kind_of(k: FileKind) -> FileType {
    match k {
        FileKind::Directory => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// Commits what changed every `interval` until the filesystem is
/// unmounted (the kernel's jbd2 commit interval, so that a crash loses at
/// most that much of what nobody fsynced).
pub(crate) fn commit_every(state: &Mutex<State>, interval: Duration) {
    loop {
        std::thread::sleep(interval);
        let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.fs.is_none() {
            return;
        }
        if !st.dirty {
            continue;
        }
        st.dirty = false;
        if let Some(fs) = st.fs.as_mut() {
            if let Err(e) = fs.sync() {
                note("commit", &e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallocate_modes_are_ext4s() {
        let unsupported = Err(Errno::from_i32(libc::EOPNOTSUPP));
        for ok in [
            0,
            FALLOC_FL_KEEP_SIZE,
            FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            FALLOC_FL_ZERO_RANGE,
            FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
            FALLOC_FL_COLLAPSE_RANGE,
            FALLOC_FL_INSERT_RANGE,
        ] {
            assert_eq!(fallocate_mode(ok), Ok(()), "{ok:#x}");
        }
        // Punching must keep the size; unsharing (0x40) is not ext4's.
        assert_eq!(fallocate_mode(FALLOC_FL_PUNCH_HOLE), unsupported);
        assert_eq!(fallocate_mode(0x40), unsupported);
        assert_eq!(fallocate_mode(0x40 | FALLOC_FL_KEEP_SIZE), unsupported);
        // Collapse and insert go alone.
        for bad in [
            FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE,
            FALLOC_FL_INSERT_RANGE | FALLOC_FL_KEEP_SIZE,
            FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE,
        ] {
            assert_eq!(fallocate_mode(bad), Err(Errno::EINVAL), "{bad:#x}");
        }
    }

    #[test]
    fn group_or_capability_from_proc_status() {
        let status = "Name:\tsh\nGroups:\t10 77 100 \nCapEff:\t0000000000000000\n";
        assert!(status_in_group_or_capable(status, 77));
        assert!(!status_in_group_or_capable(status, 7));
        let root = "Groups:\t\nCapEff:\t000001ffffffffff\n";
        assert!(status_in_group_or_capable(root, 7));
        // CAP_FSETID alone (bit 4).
        assert!(status_in_group_or_capable("CapEff:\t0000000000000010\n", 7));
        assert!(!status_in_group_or_capable(
            "CapEff:\t00000000000000ef\n",
            7
        ));
        assert!(!status_in_group_or_capable("", 7));
    }
}
