//! Inode records: what a new file, directory, link or node gets, and the
//! attributes that can be set on one.

use super::{Shape, WriteFs};
use crate::error::{Error, Result};
use ext4r_format::dir::ft;
use ext4r_format::inode::{mode, Inode, InodeFlags, Timestamp};
use ext4r_format::InodeNr;
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;

use crate::object::InodeInfo;

/// What to create.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewNode {
    /// `i_mode`: the type bits and permissions.
    pub mode: u16,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Major and minor number of a character or block device.
    pub rdev: (u32, u32),
    /// Times to set instead of now (access, modification, change).
    pub times: Option<[Timestamp; 3]>,
    /// Extended attributes stored with the inode, in the same operation
    /// (full names with their namespace prefix): the ACLs a new inode takes
    /// from its directory, a security label. As the kernel's create, the
    /// inode never exists without them, also after a power cut.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl NewNode {
    fn of(kind: u16, perm: u16) -> Self {
        NewNode {
            mode: kind | (perm & mode::PERM_MASK),
            uid: 0,
            gid: 0,
            rdev: (0, 0),
            times: None,
            xattrs: Vec::new(),
        }
    }

    /// A regular file.
    pub fn file(perm: u16) -> Self {
        Self::of(mode::S_IFREG, perm)
    }

    /// A directory.
    pub fn dir(perm: u16) -> Self {
        Self::of(mode::S_IFDIR, perm)
    }

    /// A named pipe.
    pub fn fifo(perm: u16) -> Self {
        Self::of(mode::S_IFIFO, perm)
    }

    /// A socket.
    pub fn socket(perm: u16) -> Self {
        Self::of(mode::S_IFSOCK, perm)
    }

    /// A character device.
    pub fn char_device(perm: u16, major: u32, minor: u32) -> Self {
        Self {
            rdev: (major, minor),
            ..Self::of(mode::S_IFCHR, perm)
        }
    }

    /// A block device.
    pub fn block_device(perm: u16, major: u32, minor: u32) -> Self {
        Self {
            rdev: (major, minor),
            ..Self::of(mode::S_IFBLK, perm)
        }
    }

    /// With this owner.
    pub fn owned_by(mut self, uid: u32, gid: u32) -> Self {
        self.uid = uid;
        self.gid = gid;
        self
    }

    /// With extended attribute `name` (e.g. `system.posix_acl_access`) set
    /// to `value` when it is made.
    pub fn with_xattr(mut self, name: &[u8], value: &[u8]) -> Self {
        self.xattrs.push((name.to_vec(), value.to_vec()));
        self
    }
}

/// Attributes to change; `None` leaves one alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetAttr {
    /// Permission bits (the type stays).
    pub perm: Option<u16>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Access time.
    pub atime: Option<Timestamp>,
    /// Modification time.
    pub mtime: Option<Timestamp>,
    /// Inode flags (`chattr`): the user-settable ones.
    pub flags: Option<u32>,
}

/// `i_flags` bits a user may set or clear (as the kernel's
/// `EXT4_FL_USER_MODIFIABLE`, less those needing other support).
const USER_FLAGS: u32 = InodeFlags::SYNC.bits()
    | InodeFlags::IMMUTABLE.bits()
    | InodeFlags::APPEND.bits()
    | InodeFlags::NODUMP.bits()
    | InodeFlags::NOATIME.bits()
    | InodeFlags::DIRSYNC.bits()
    | InodeFlags::TOPDIR.bits()
    | InodeFlags::NOTAIL.bits();

/// The directory entry file type of `i_mode`.
pub(crate) fn ftype(m: u16, sh: &Shape) -> u8 {
    if sh.filetype {
        ext4r_format::dir::file_type_from_mode(m)
    } else {
        ft::UNKNOWN
    }
}

/// A fresh inode record for `n`.
pub(crate) fn record(
    sh: &Shape,
    n: &NewNode,
    links: u16,
    now: Timestamp,
    generation: u32,
) -> Result<Vec<u8>> {
    let mut i = Inode::zeroed();
    i.set_mode(n.mode);
    i.set_links_count(links);
    i.set_uid(n.uid);
    i.set_gid(n.gid);
    // The extra fields first: the time setters write nanoseconds and
    // epoch bits only where i_extra_isize says the record has them.
    if sh.isz > 128 {
        i.i_extra_isize.set(32);
        i.set_crtime(now);
    }
    let [a, m, c] = n.times.unwrap_or([now; 3]);
    i.set_atime(a);
    i.set_mtime(m);
    i.set_ctime(c);
    i.i_generation.set(generation);
    let kind = n.mode & mode::S_IFMT;
    let with_blocks = kind == mode::S_IFREG || kind == mode::S_IFDIR;
    if sh.extents && with_blocks {
        i.set_flags(InodeFlags::EXTENTS);
        let mut root = [0u8; 60];
        ext4r_format::extent::write_leaf(&mut root, &[])
            .map_err(|e| Error::corrupt("new inode", e))?;
        i.i_block = root;
    }
    if kind == mode::S_IFCHR || kind == mode::S_IFBLK {
        // As the kernel's ext4 inode: the old encoding in i_block[0] where
        // major and minor are below 256, the new one in i_block[1]
        // otherwise.
        let (major, minor) = n.rdev;
        let mut w = [0u32; 15];
        if major < 256 && minor < 256 {
            w[0] = major << 8 | minor;
        } else {
            w[1] = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
        }
        i.set_block_words(&w);
    }
    let mut rec = vec![0u8; sh.isz];
    i.write(&mut rec)
        .map_err(|e| Error::corrupt("new inode", e))?;
    Ok(rec)
}

impl WriteFs {
    /// Changes attributes of inode `ino` (ctime becomes now).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for flags that are not the user's to set,
    /// read errors.
    pub fn setattr(&mut self, ino: u32, a: &SetAttr) -> Result<()> {
        if let Some(f) = a.flags {
            if f & !USER_FLAGS != 0 {
                return Err(Error::InvalidArgument(format!(
                    "inode flags {:#x} cannot be set here",
                    f & !USER_FLAGS
                )));
            }
        }
        let now = self.now();
        self.op(|w| {
            let mut i = w.inode(ino)?;
            if let Some(p) = a.perm {
                i.i_mode
                    .set((i.mode() & mode::S_IFMT) | (p & mode::PERM_MASK));
            }
            if let Some(u) = a.uid {
                i.set_uid(u);
            }
            if let Some(g) = a.gid {
                i.set_gid(g);
            }
            // As chown(2) on Linux, for root too: a non-directory loses
            // set-user-ID, and set-group-ID where group execute is set.
            if (a.uid.is_some() || a.gid.is_some()) && !i.is_dir() && a.perm.is_none() {
                let mut m = i.mode() & !mode::S_ISUID;
                if m & 0o010 != 0 {
                    m &= !mode::S_ISGID;
                }
                i.i_mode.set(m);
            }
            if let Some(t) = a.atime {
                i.set_atime(t);
            }
            if let Some(t) = a.mtime {
                i.set_mtime(t);
            }
            if let Some(f) = a.flags {
                let keep = i.flags().bits() & !USER_FLAGS;
                i.set_flags(InodeFlags::from_bits_retain(keep | f));
            }
            i.set_ctime(now);
            w.put_inode(ino, &i)
        })
    }

    /// Inode `ino` as the running transaction has it.
    pub(crate) fn inode(&self, ino: u32) -> Result<Inode> {
        let rec = self.txn.read_inode_checked(ino)?;
        Inode::parse(&rec).map_err(|e| Error::corrupt(ext4r_txn::error::Location::inode(ino), e))
    }

    /// Stores inode `ino` (the rest of its record, in-inode xattrs
    /// included, kept).
    pub(crate) fn put_inode(&mut self, ino: u32, i: &Inode) -> Result<()> {
        let rec = self.txn.inode_mut(ino)?;
        i.write(rec)
            .map_err(|e| Error::corrupt(format!("inode {ino}"), e))
    }
}

/// Inode `ino` (record `i`) as the object model reads it: the record as
/// the transaction has it.
pub(crate) fn info_of(t: &Transaction<Volume>, ino: u32, i: &Inode) -> Result<InodeInfo> {
    Ok(InodeInfo {
        ino: InodeNr(ino),
        inode: *i,
        record: t.read_inode(ino)?,
    })
}

/// Whether symlink `i` keeps its target in `i_block`.
pub(crate) fn fast_symlink(i: &Inode, sh: &Shape) -> bool {
    i.is_symlink()
        && !i
            .flags()
            .intersects(InodeFlags::EXTENTS | InodeFlags::INLINE_DATA)
        && i.size() < 60
        && i.blocks_count(sh.huge_file, sh.bs32)
            <= u64::from(i.i_file_acl_lo.get() != 0) * (sh.bs as u64 / 512)
}
