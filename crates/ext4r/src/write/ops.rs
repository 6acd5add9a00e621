//! The namespace operations: create, mkdir, symlink, link, unlink, rmdir,
//! rename. Each is one atomic change (see the module docs of
//! [`super`]).

use super::dir::{self, check_name, dir_inode};
use super::node::{self, NewNode};
use super::orphan::Pending;
use super::{WriteFs, ROOT_INO};
use crate::error::{Error, Result};
use ext4r_format::dir::leaf;
use ext4r_format::inode::{mode, Inode, InodeFlags};
use ext4r_format::num;
use ext4r_format::xattr::XattrHeader;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::map::{self, Run};

/// Links a directory or file may have (`EXT4_LINK_MAX`).
const LINK_MAX: u16 = 65000;

fn shown(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

impl WriteFs {
    pub(crate) fn generation(&mut self) -> u32 {
        let t = self.now();
        // A mix of the clock and the free count: their low bits are enough.
        num::lo32(t.secs as u64).wrapping_mul(2_654_435_761)
            ^ t.nsecs
            ^ num::lo32(self.txn.groups().free_inodes())
    }

    /// Checks that `name` can be added to `parent`: a directory, the name
    /// valid and new, an inode free and room for the entry.
    fn check_new(&self, parent: u32, name: &[u8]) -> Result<()> {
        check_name(name)?;
        dir_inode(&self.txn, parent)?;
        if dir::lookup(&self.txn, parent, name)?.is_some() {
            return Err(Error::AlreadyExists(shown(name)));
        }
        if self.txn.groups().free_inodes() == 0 {
            return Err(Error::NoFreeInodes);
        }
        // An entry may need a new directory block (and index blocks).
        if self.txn.groups().free_blocks() < 4 * self.shape.ratio && !self.room_for(parent, name)? {
            return Err(Error::NoSpace);
        }
        Ok(())
    }

    /// Whether a block of linear directory `dir` has room for `name`.
    fn room_for(&self, dir: u32, name: &[u8]) -> Result<bool> {
        let i = dir_inode(&self.txn, dir)?;
        if i.flags().contains(InodeFlags::INDEX) {
            return Ok(false);
        }
        if i.flags().contains(InodeFlags::INLINE_DATA) {
            let mut data = super::inline::inline_bytes(&self.txn, dir, &i)?;
            let (head, rest) = data.split_at_mut(60);
            return Ok(leaf::insert(&mut head[4..], name, 1, 0)
                || (!rest.is_empty() && leaf::insert(rest, name, 1, 0)));
        }
        for (_, nr) in dir::blocks(&self.txn, dir, &i)? {
            let mut b = dir::dir_block(&self.txn, dir, &i, nr)?;
            if leaf::insert(&mut b, name, 1, 0) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A new inode as `n` describes it, its attributes stored (links set
    /// by the caller).
    fn new_inode(&mut self, parent: u32, n: &NewNode, links: u16) -> Result<u32> {
        // Names and sizes judged before anything is allocated.
        let keys = n
            .xattrs
            .iter()
            .map(|(name, value)| Ok((self.xattr_key(name, Some(value))?, value)))
            .collect::<Result<Vec<_>>>()?;
        let dirflag = n.mode & mode::S_IFMT == mode::S_IFDIR;
        let ino = self.txn.alloc_inode(parent, dirflag)?;
        let now = self.now();
        let generation = self.generation();
        let rec = node::record(&self.shape, n, links, now, generation)?;
        self.txn.write_inode(ino, rec)?;
        for (key, value) in &keys {
            self.put_xattr(ino, key, Some(value))?;
        }
        if let (Some([.., ctime]), false) = (n.times, keys.is_empty()) {
            // Storing an attribute stamps the change time: the one asked
            // for stands.
            let mut i = self.inode(ino)?;
            i.set_ctime(ctime);
            self.put_inode(ino, &i)?;
        }
        Ok(ino)
    }

    /// The directory's times and link count after a change in it.
    pub(crate) fn touch_dir(&mut self, dir: u32, links: i32) -> Result<()> {
        let mut i = dir_inode(&self.txn, dir)?;
        let now = self.now();
        i.set_mtime(now);
        i.set_ctime(now);
        if links != 0 {
            let n = i32::from(i.links_count()) + links;
            // dir_nlink: past the limit a directory counts 1 ("many").
            let n = if n >= i32::from(LINK_MAX) || i.links_count() == 1 {
                1
            } else {
                n.max(1)
            };
            i.i_links_count.set(num::sat_u16(n)); // 1..LINK_MAX
        }
        self.put_inode(dir, &i)
    }

    /// Creates a regular file, FIFO, socket or device node `name` in
    /// directory `parent`.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`], [`Error::InvalidName`], [`Error::NoSpace`],
    /// [`Error::NoFreeInodes`],
    /// [`Error::NotADirectory`], [`Error::InvalidArgument`] for a directory
    /// or symlink mode (use [`WriteFs::mkdir`], [`WriteFs::symlink`]).
    pub fn create(&mut self, parent: u32, name: &[u8], n: &NewNode) -> Result<u32> {
        let kind = n.mode & mode::S_IFMT;
        if ![
            mode::S_IFREG,
            mode::S_IFIFO,
            mode::S_IFSOCK,
            mode::S_IFCHR,
            mode::S_IFBLK,
        ]
        .contains(&kind)
        {
            return Err(Error::InvalidArgument(format!(
                "mode {:#o}: create makes files, FIFOs, sockets and devices",
                n.mode
            )));
        }
        self.op(|w| {
            w.check_new(parent, name)?;
            let ino = w.new_inode(parent, n, 1)?;
            let ft = node::ftype(n.mode, &w.shape);
            w.dir_insert(parent, name, ino, ft)?;
            w.touch_dir(parent, 0)?;
            Ok(ino)
        })
    }

    /// Creates directory `name` in `parent`.
    ///
    /// # Errors
    /// As [`WriteFs::create`]; [`Error::TooManyLinks`] when `parent` has
    /// the most subdirectories it may (without dir_nlink).
    pub fn mkdir(&mut self, parent: u32, name: &[u8], n: &NewNode) -> Result<u32> {
        let mut n = n.clone();
        n.mode = mode::S_IFDIR | (n.mode & mode::PERM_MASK);
        self.op(|w| {
            w.check_new(parent, name)?;
            let p = dir_inode(&w.txn, parent)?;
            if p.links_count() >= LINK_MAX && !w.shape.dir_nlink {
                return Err(Error::TooManyLinks(shown(name)));
            }
            let ino = w.new_inode(parent, &n, 2)?;
            if w.make_inline_dir(ino, parent)? {
                let ft = node::ftype(mode::S_IFDIR, &w.shape);
                w.dir_insert(parent, name, ino, ft)?;
                w.touch_dir(parent, 1)?;
                return Ok(ino);
            }
            let (_, nr) = w.dir_grow(ino)?;
            let ft = node::ftype(mode::S_IFDIR, &w.shape);
            let b = leaf::build(
                w.shape.bs,
                &[(b".".to_vec(), ino, ft), (b"..".to_vec(), parent, ft)],
                w.shape.csum,
            )
            .ok_or_else(|| Error::InvalidArgument("new directory block".into()))?;
            let i = dir_inode(&w.txn, ino)?;
            let kind = w.dir_kind(ino, &i);
            *w.txn.block_mut(nr, kind)? = b;
            w.dir_insert(parent, name, ino, ft)?;
            w.touch_dir(parent, 1)?;
            Ok(ino)
        })
    }

    /// Creates symbolic link `name` in `parent` pointing at `target`: in
    /// the inode below 60 bytes, in a block of its own above.
    ///
    /// # Errors
    /// As [`WriteFs::create`]; [`Error::InvalidArgument`] for an empty
    /// target or one of a block or more.
    pub fn symlink(
        &mut self,
        parent: u32,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<u32> {
        if target.is_empty() || target.len() >= self.shape.bs || target.contains(&0) {
            return Err(Error::InvalidArgument(format!(
                "symlink target of {} bytes",
                target.len()
            )));
        }
        self.op(|w| {
            w.check_new(parent, name)?;
            let n = NewNode {
                mode: mode::S_IFLNK | 0o777,
                uid,
                gid,
                rdev: (0, 0),
                times: None,
                xattrs: Vec::new(),
            };
            let ino = w.new_inode(parent, &n, 1)?;
            let mut i = w.inode(ino)?;
            if target.len() < 60 {
                // A fast symlink: no blocks, no extent header.
                let mut b = [0u8; 60];
                b[..target.len()].copy_from_slice(target);
                i.i_block = b;
                i.set_flags(i.flags() - InodeFlags::EXTENTS);
            } else {
                if w.shape.extents {
                    i.set_flags(i.flags() | InodeFlags::EXTENTS);
                    let mut root = [0u8; 60];
                    ext4r_format::extent::write_leaf(&mut root, &[])
                        .map_err(|e| Error::corrupt("symlink", e))?;
                    i.i_block = root;
                }
                let goal = w.goal_for(ino);
                let (p, _) = w.alloc_data(goal, 1)?;
                let mut blk = vec![0u8; w.shape.bs];
                blk[..target.len()].copy_from_slice(target);
                w.txn.write_data(p, blk)?;
                w.put_inode(ino, &i)?;
                let runs = [Run {
                    logical: 0,
                    physical: p,
                    len: 1,
                    unwritten: false,
                }];
                let tree = map::store(&mut w.txn, ino, &mut i, &runs, goal)?;
                w.set_blocks(ino, &mut i, &runs, tree)?;
            }
            i.set_size(target.len() as u64);
            w.put_inode(ino, &i)?;
            let ft = node::ftype(mode::S_IFLNK, &w.shape);
            w.dir_insert(parent, name, ino, ft)?;
            w.touch_dir(parent, 0)?;
            Ok(ino)
        })
    }

    /// Adds name `name` in `parent` for existing inode `ino` (not a
    /// directory).
    ///
    /// # Errors
    /// [`Error::IsADirectory`], [`Error::TooManyLinks`], and as
    /// [`WriteFs::create`].
    pub fn link(&mut self, ino: u32, parent: u32, name: &[u8]) -> Result<()> {
        self.op(|w| {
            w.check_new(parent, name)?;
            let mut i = w.inode(ino)?;
            if i.is_dir() {
                return Err(Error::IsADirectory(format!("inode {ino}")));
            }
            if i.links_count() == 0 {
                return Err(Error::NotFound(format!("inode {ino} (deleted)")));
            }
            if i.links_count() >= LINK_MAX {
                return Err(Error::TooManyLinks(shown(name)));
            }
            i.i_links_count.set(i.links_count() + 1);
            i.set_ctime(w.now());
            w.put_inode(ino, &i)?;
            let ft = node::ftype(i.mode(), &w.shape);
            w.dir_insert(parent, name, ino, ft)?;
            w.touch_dir(parent, 0)
        })
    }

    /// Removes name `name` from `parent`; the inode goes when its last
    /// name does.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::IsADirectory`] (use
    /// [`WriteFs::rmdir`]), read errors.
    pub fn unlink(&mut self, parent: u32, name: &[u8]) -> Result<()> {
        self.op(|w| {
            check_name(name)?;
            let Some((ino, _)) = dir::lookup(&w.txn, parent, name)? else {
                return Err(Error::NotFound(shown(name)));
            };
            let i = w.inode(ino)?;
            if i.is_dir() {
                return Err(Error::IsADirectory(shown(name)));
            }
            w.dir_remove(parent, name)?;
            w.drop_link(ino)?;
            w.touch_dir(parent, 0)
        })
    }

    /// Removes empty directory `name` from `parent`.
    ///
    /// # Errors
    /// [`Error::DirectoryNotEmpty`], [`Error::NotADirectory`],
    /// [`Error::NotFound`].
    pub fn rmdir(&mut self, parent: u32, name: &[u8]) -> Result<()> {
        self.op(|w| {
            check_name(name)?;
            let Some((ino, _)) = dir::lookup(&w.txn, parent, name)? else {
                return Err(Error::NotFound(shown(name)));
            };
            let i = w.inode(ino)?;
            if !i.is_dir() {
                return Err(Error::NotADirectory(shown(name)));
            }
            if !w.dir_is_empty(ino)? {
                return Err(Error::DirectoryNotEmpty(shown(name)));
            }
            w.dir_remove(parent, name)?;
            w.release(ino, &i)?;
            w.touch_dir(parent, -1)
        })
    }

    /// One name of `ino` gone: its link count down, the inode released at
    /// zero.
    fn drop_link(&mut self, ino: u32) -> Result<()> {
        let mut i = self.inode(ino)?;
        let n = i.links_count().saturating_sub(1);
        if n == 0 {
            return self.release(ino, &i);
        }
        i.i_links_count.set(n);
        i.set_ctime(self.now());
        self.put_inode(ino, &i)
    }

    /// Frees an inode and everything it holds: its blocks (data and
    /// mapping), its xattr block's reference, its bitmap bit; the record
    /// keeps its mode with no links and a deletion time, as the kernel
    /// leaves one. A file of more runs than one operation frees goes on
    /// the orphan list instead, to be finished after the operation (see
    /// [`super::orphan`]).
    fn release(&mut self, ino: u32, i: &Inode) -> Result<()> {
        if self.too_many_runs(ino, i, 0)? {
            let mut d = *i;
            d.i_links_count.set(0);
            d.set_ctime(self.now());
            self.orphan_add(ino, &mut d);
            self.put_inode(ino, &d)?;
            self.deferred.push(Pending::Delete(ino));
            return Ok(());
        }
        self.release_now(ino, i)
    }

    /// [`WriteFs::release`] in the running operation.
    pub(crate) fn release_now(&mut self, ino: u32, i: &Inode) -> Result<()> {
        let mut i = *i;
        self.cut_mapping(ino, &mut i, 0, usize::MAX)?;
        let acl = i.file_acl(self.txn.groups().wide()).0;
        if self.shape.ea_inode && !i.flags().contains(InodeFlags::EA_INODE) {
            // Its values in EA inodes lose a reference (the block's only
            // when the block goes with it).
            let last = acl != 0 && self.xattr_block_refs(acl)? <= 1;
            self.ea_release_all(ino, last.then_some(acl))?;
        }
        if acl != 0 {
            self.drop_xattr_block(acl)?;
        }
        self.txn.free_inode(ino, i.is_dir())?;
        let mut dead = i;
        dead.i_links_count.set(0);
        // i_dtime is 32 bits; the kernel keeps the low ones too.
        dead.i_dtime.set(num::lo32(self.now().secs as u64));
        dead.set_size(0);
        dead.set_blocks_count(0, self.shape.huge_file, self.shape.bs32)
            .map_err(|e| Error::corrupt("inode", e))?;
        dead.i_block = [0; 60];
        dead.i_file_acl_lo.set(0);
        dead.l_i_file_acl_high.set(0);
        dead.set_flags(InodeFlags::empty());
        self.put_inode(ino, &dead)
    }

    /// The reference count of xattr block `b` (0 for a block without the
    /// magic).
    fn xattr_block_refs(&self, b: u64) -> Result<u32> {
        let buf = self.txn.read_block_checked(b, BlockKind::Xattr)?;
        Ok(XattrHeader::of_block(&buf).map_or(0, |h| h.h_refcount.get()))
    }

    /// One reference to xattr block `b` gone; the block freed at zero.
    fn drop_xattr_block(&mut self, b: u64) -> Result<()> {
        let buf = self.txn.read_block_checked(b, BlockKind::Xattr)?;
        let Some(refs) = XattrHeader::of_block(&buf).map(|h| h.h_refcount.get()) else {
            return Ok(());
        };
        if refs <= 1 {
            let r = self.shape.ratio;
            self.txn.free_blocks(b & !(r - 1), r)?;
        } else {
            let blk = self.txn.block_mut(b, BlockKind::Xattr)?;
            if let Some(h) = XattrHeader::of_block_mut(blk) {
                h.h_refcount.set(refs - 1);
            }
        }
        Ok(())
    }

    /// Renames `from` in `from_dir` to `to` in `to_dir`, replacing what
    /// `to` names (a file by a file, an empty directory by a directory).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::IsADirectory`],
    /// [`Error::NotADirectory`], [`Error::DirectoryNotEmpty`],
    /// [`Error::MoveIntoItself`] for a directory moved into its subtree.
    pub fn rename(&mut self, from_dir: u32, from: &[u8], to_dir: u32, to: &[u8]) -> Result<()> {
        self.op(|w| w.rename_now(from_dir, from, to_dir, to, None))
            .map(|_| ())
    }

    /// As [`WriteFs::rename`], leaving a whiteout at the old name
    /// (renameat2's `RENAME_WHITEOUT`, what overlay filesystems ask of
    /// their upper layer): a character device 0:0 of mode 0, owned by
    /// `uid`/`gid`, takes the place of `from` in `from_dir`, in the same
    /// operation as the rename, as the kernel's `ext4_rename` makes it.
    /// Returns the whiteout's inode number; `None` when `from` and `to`
    /// already name the same inode (nothing changes, as on the kernel).
    ///
    /// # Errors
    /// As [`WriteFs::rename`]; [`Error::NoFreeInodes`] when no inode is
    /// left for the whiteout (nothing changes).
    pub fn rename_whiteout(
        &mut self,
        from_dir: u32,
        from: &[u8],
        to_dir: u32,
        to: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Option<u32>> {
        let owner = NewNode::char_device(0, 0, 0).owned_by(uid, gid);
        self.rename_whiteout_as(from_dir, from, to_dir, to, &owner)
    }

    /// [`WriteFs::rename_whiteout`] with the whiteout's owner, times and
    /// extended attributes (the ACL it takes from `from_dir`) from `node`;
    /// its type, mode and device number are a whiteout's whatever `node`
    /// says. The attributes are stored in the same operation.
    ///
    /// # Errors
    /// As [`WriteFs::rename_whiteout`]; as [`WriteFs::set_xattr`] for the
    /// attributes.
    pub fn rename_whiteout_as(
        &mut self,
        from_dir: u32,
        from: &[u8],
        to_dir: u32,
        to: &[u8],
        node: &NewNode,
    ) -> Result<Option<u32>> {
        let wh = NewNode {
            times: node.times,
            xattrs: node.xattrs.clone(),
            ..NewNode::char_device(0, 0, 0).owned_by(node.uid, node.gid)
        };
        self.op(|w| w.rename_now(from_dir, from, to_dir, to, Some(&wh)))
    }

    /// The rename in the running operation; with `whiteout`, that node
    /// takes the old name. Returns the whiteout's inode.
    fn rename_now(
        &mut self,
        from_dir: u32,
        from: &[u8],
        to_dir: u32,
        to: &[u8],
        whiteout: Option<&NewNode>,
    ) -> Result<Option<u32>> {
        let w = self;
        {
            check_name(from)?;
            check_name(to)?;
            let sh = w.shape;
            let Some((src, _)) = dir::lookup(&w.txn, from_dir, from)? else {
                return Err(Error::NotFound(shown(from)));
            };
            dir_inode(&w.txn, to_dir)?;
            let si = w.inode(src)?;
            // Before the target is looked at, in the kernel's order
            // (do_renameat2 answers EINVAL before vfs_rename's type
            // checks): nothing else about a move into its own subtree
            // matters.
            if si.is_dir() && w.is_ancestor(src, to_dir)? {
                return Err(Error::MoveIntoItself(shown(from)));
            }
            let dst = dir::lookup(&w.txn, to_dir, to)?;
            if let Some((d, _)) = dst {
                if d == src {
                    return Ok(None);
                }
                let di = w.inode(d)?;
                match (si.is_dir(), di.is_dir()) {
                    (true, false) => return Err(Error::NotADirectory(shown(to))),
                    (false, true) => return Err(Error::IsADirectory(shown(to))),
                    (true, true) if !w.dir_is_empty(d)? => {
                        return Err(Error::DirectoryNotEmpty(shown(to)))
                    }
                    _ => {}
                }
            }
            if dst.is_none()
                && w.txn.groups().free_blocks() < 4 * sh.ratio
                && !w.room_for(to_dir, to)?
            {
                return Err(Error::NoSpace);
            }
            // The whiteout's inode comes first, as the kernel makes it
            // before changing anything: no inode left changes nothing.
            let wh = match whiteout {
                Some(n) => {
                    if w.txn.groups().free_inodes() == 0 {
                        return Err(Error::NoFreeInodes);
                    }
                    Some((w.new_inode(from_dir, n, 1)?, node::ftype(n.mode, &sh)))
                }
                None => None,
            };
            let ft = node::ftype(si.mode(), &sh);
            match dst {
                Some((d, _)) => {
                    w.dir_retarget(to_dir, to, src, ft)?;
                    let di = w.inode(d)?;
                    if di.is_dir() {
                        w.release(d, &di)?;
                        w.touch_dir(to_dir, -1)?;
                    } else {
                        w.drop_link(d)?;
                    }
                }
                None => w.dir_insert(to_dir, to, src, ft)?,
            }
            match wh {
                // The old entry names the whiteout from now on, in place
                // (ext4_setent), as the kernel leaves it.
                Some((ino, wft)) => w.dir_retarget(from_dir, from, ino, wft)?,
                None => {
                    w.dir_remove(from_dir, from)?;
                }
            }
            if si.is_dir() && from_dir != to_dir {
                w.dir_set_dotdot(src, to_dir)?;
                w.touch_dir(from_dir, -1)?;
                w.touch_dir(to_dir, 1)?;
            } else {
                w.touch_dir(from_dir, 0)?;
                if from_dir != to_dir {
                    w.touch_dir(to_dir, 0)?;
                }
            }
            let mut si = w.inode(src)?;
            si.set_ctime(w.now());
            w.put_inode(src, &si)?;
            Ok(wh.map(|(ino, _)| ino))
        }
    }

    /// Swaps what two names name, both or neither (renameat2's
    /// `RENAME_EXCHANGE`): `a` in `a_dir` comes to name what `b` in
    /// `b_dir` named, and the other way round. Directories that change
    /// parent get their `..` and the parents' link counts follow; both
    /// inodes' change times and both parents' times are stamped, as the
    /// kernel's `ext4_cross_rename` does.
    ///
    /// # Errors
    /// [`Error::NotFound`] when either name is missing,
    /// [`Error::MoveIntoItself`] when a directory would land in its own
    /// subtree, [`Error::Corrupt`] for damaged directories.
    pub fn exchange(&mut self, a_dir: u32, a: &[u8], b_dir: u32, b: &[u8]) -> Result<()> {
        self.op(|w| {
            check_name(a)?;
            check_name(b)?;
            let Some((ia, _)) = dir::lookup(&w.txn, a_dir, a)? else {
                return Err(Error::NotFound(shown(a)));
            };
            let Some((ib, _)) = dir::lookup(&w.txn, b_dir, b)? else {
                return Err(Error::NotFound(shown(b)));
            };
            if ia == ib {
                return Ok(());
            }
            let sh = w.shape;
            let (na, nb) = (w.inode(ia)?, w.inode(ib)?);
            if na.is_dir() && w.is_ancestor(ia, b_dir)? {
                return Err(Error::MoveIntoItself(shown(a)));
            }
            if nb.is_dir() && w.is_ancestor(ib, a_dir)? {
                return Err(Error::MoveIntoItself(shown(b)));
            }
            w.dir_retarget(a_dir, a, ib, node::ftype(nb.mode(), &sh))?;
            w.dir_retarget(b_dir, b, ia, node::ftype(na.mode(), &sh))?;
            if a_dir == b_dir {
                w.touch_dir(a_dir, 0)?;
            } else {
                if na.is_dir() {
                    w.dir_set_dotdot(ia, b_dir)?;
                }
                if nb.is_dir() {
                    w.dir_set_dotdot(ib, a_dir)?;
                }
                // a_dir gains b's directory and loses a's.
                let gain = i32::from(nb.is_dir()) - i32::from(na.is_dir());
                w.touch_dir(a_dir, gain)?;
                w.touch_dir(b_dir, -gain)?;
            }
            let now = w.now();
            for ino in [ia, ib] {
                let mut i = w.inode(ino)?;
                i.set_ctime(now);
                w.put_inode(ino, &i)?;
            }
            Ok(())
        })
    }

    /// Whether directory `a` is `b` or holds it, following `..` up from
    /// `b` as [`dir::parent`] reads it (the same record in every form of
    /// directory: block 0 of a linear or indexed one, `i_block` of an
    /// inline one). A chain that cannot be followed — a `..` missing, or
    /// leading round in a loop — is corruption, never a "no": answering no
    /// would let a rename cut a tree off.
    pub(crate) fn is_ancestor(&self, a: u32, b: u32) -> Result<bool> {
        let mut seen = std::collections::HashSet::new();
        let mut cur = b;
        loop {
            if cur == a {
                return Ok(true);
            }
            if cur == ROOT_INO {
                return Ok(false);
            }
            if !seen.insert(cur) {
                return Err(Error::corrupt(
                    format!("inode {b}"),
                    ext4r_format::FormatError::invalid(
                        "directory",
                        format!("the '..' chain loops at inode {cur} and never reaches the root"),
                    ),
                ));
            }
            cur = dir::parent(&self.txn, cur)?;
        }
    }
}
