//! inline_data: files and directories whose contents live in the inode —
//! the 60 bytes of `i_block`, continued in the value of the in-inode
//! attribute `system.data`. They are read where they are; a change the
//! block path makes (a write, a truncate, a new or removed entry) first
//! moves the contents out into one block, as the kernel's
//! `ext4_convert_inline_data` does when an inline file or directory
//! grows past what the inode holds. A moved-out inode is an ordinary
//! extent-mapped (or block-mapped, without extents) one.

use super::node::info_of;
use super::xattr::{ibody_attrs, news, Val};
use super::WriteFs;
use crate::error::{Error, Result};
use crate::object::{self, dir::Entry};
use ext4r_format::dir::leaf;
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::xattr::{index, write_xattr_ibody};
use ext4r_format::InodeNr;
use ext4r_txn::error::Location;
use ext4r_txn::map::{self, BlockSource, Run};
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;

/// Bytes of `i_block`.
const I_BLOCK: usize = 60;

/// Whether `name` (index, suffix) is `system.data`, the continuation.
fn is_system_data(name_index: u8, name: &[u8]) -> bool {
    name_index == index::SYSTEM && name == b"data"
}

fn corrupt(ino: u32, what: &str) -> Error {
    Error::corrupt(
        Location::inode(ino).of("inline data"),
        ext4r_format::FormatError::invalid("inline data", what.to_string()),
    )
}

/// The inline bytes of inode `ino` (record `i`): `i_block`, then the
/// value of `system.data`, not cut at the size (see
/// [`object::inline::bytes`]).
pub(crate) fn inline_bytes(t: &Transaction<Volume>, ino: u32, i: &Inode) -> Result<Vec<u8>> {
    object::inline::bytes(&info_of(t, ino, i)?)
}

/// The contents of an inline file, cut at its size.
pub(crate) fn inline_file(t: &Transaction<Volume>, ino: u32, i: &Inode) -> Result<Vec<u8>> {
    object::inline::file(&info_of(t, ino, i)?)
}

/// An inline directory: its parent (the stored `..`) and its entries
/// (`.` and `..` are not stored), deleted records left out.
pub(crate) fn inline_dir(
    t: &Transaction<Volume>,
    ino: u32,
    i: &Inode,
) -> Result<(u32, Vec<Entry>)> {
    let bs = BlockSource::block_size(t);
    let max_ino = t.superblock().s_inodes_count.get();
    object::inline::dir(&info_of(t, ino, i)?, bs, max_ino)
}

impl WriteFs {
    /// Moves inode `ino`'s inline contents out into one block (none for an
    /// empty file) and drops `system.data`; returns the record as it is
    /// now. An inode without inline data is returned unchanged.
    pub(crate) fn uninline(&mut self, ino: u32) -> Result<Inode> {
        let i = self.inode(ino)?;
        if !i.flags().contains(InodeFlags::INLINE_DATA) {
            return Ok(i);
        }
        let sh = self.shape;
        let block = if i.is_dir() {
            let (parent, recs) = inline_dir(&self.txn, ino, &i)?;
            let dt = super::node::ftype(ext4r_format::inode::mode::S_IFDIR, &sh);
            let mut list = vec![(b".".to_vec(), ino, dt), (b"..".to_vec(), parent, dt)];
            list.extend(recs.into_iter().map(|r| (r.name, r.ino, r.ftype)));
            Some(leaf::build(sh.bs, &list, sh.csum).ok_or_else(|| {
                Error::Unsupported(format!(
                    "inode {ino}: an inline directory larger than a block"
                ))
            })?)
        } else if i.is_reg() || i.is_symlink() {
            let mut data = inline_file(&self.txn, ino, &i)?;
            if data.len() > sh.bs {
                return Err(corrupt(ino, "more inline bytes than a block holds"));
            }
            (!data.is_empty()).then(|| {
                data.resize(sh.bs, 0);
                data
            })
        } else {
            return Err(corrupt(ino, "inline data on a special file"));
        };
        self.drop_system_data(ino)?;
        let mut i = self.inode(ino)?;
        let mut flags = i.flags() - InodeFlags::INLINE_DATA;
        i.i_block = [0; I_BLOCK];
        if sh.extents {
            flags |= InodeFlags::EXTENTS;
            ext4r_format::extent::write_leaf(&mut i.i_block, &[])
                .map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
        }
        i.set_flags(flags);
        if let Some(b) = block {
            let goal = self.goal_for(ino);
            let (nr, _) = self.alloc_data(goal, 1)?;
            let runs = [Run {
                logical: 0,
                physical: nr,
                len: 1,
                unwritten: false,
            }];
            let tree = map::store(&mut self.txn, ino, &mut i, &runs, goal)?;
            self.set_blocks(ino, &mut i, &runs, tree)?;
            if i.is_dir() {
                i.set_size(sh.bs as u64);
                let kind = self.dir_kind(ino, &i);
                self.txn.write_block(nr, kind, b)?;
            } else {
                self.txn.write_data(nr, b)?;
            }
        } else if i.is_dir() {
            return Err(corrupt(ino, "a directory without its parent"));
        }
        self.put_inode(ino, &i)?;
        Ok(i)
    }

    /// Takes `system.data` out of inode `ino`'s in-inode attributes (the
    /// others stay in order).
    fn drop_system_data(&mut self, ino: u32) -> Result<()> {
        let rec = self.txn.read_inode(ino)?;
        let mut keep = ibody_attrs(self, ino, &rec)?;
        keep.retain(|a| !is_system_data(a.0, &a.1));
        let rec = self.txn.inode_mut(ino)?;
        write_xattr_ibody(rec, &news(&keep))
            .map_err(|e| Error::corrupt(format!("inode {ino}, xattrs"), e))
    }

    /// Stores `data` as inode `ino`'s inline contents — `i_block`, the rest
    /// as the value of `system.data`, kept first among the in-inode
    /// attributes — and marks the inode inline (an inline directory's size
    /// is what it holds). `false`, nothing changed, when the inode has no
    /// room for it.
    pub(crate) fn inline_store(&mut self, ino: u32, data: &[u8]) -> Result<bool> {
        if !self.shape.inline || self.shape.isz <= 128 {
            return Ok(false);
        }
        let mut rec = self.txn.read_inode(ino)?;
        let mut attrs = ibody_attrs(self, ino, &rec)?;
        attrs.retain(|a| !is_system_data(a.0, &a.1));
        let value = data.get(I_BLOCK..).unwrap_or(&[]);
        attrs.insert(
            0,
            (index::SYSTEM, b"data".to_vec(), Val::Here(value.to_vec())),
        );
        if write_xattr_ibody(&mut rec, &news(&attrs)).is_err() {
            return Ok(false);
        }
        let mut i = Inode::parse(&rec).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
        let n = data.len().min(I_BLOCK);
        i.i_block = [0; I_BLOCK];
        i.i_block[..n].copy_from_slice(&data[..n]);
        i.set_flags((i.flags() - InodeFlags::EXTENTS) | InodeFlags::INLINE_DATA);
        if i.is_dir() {
            i.set_size(data.len().max(I_BLOCK) as u64);
        }
        i.write(&mut rec)
            .map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
        *self.txn.inode_mut(ino)? = rec;
        Ok(true)
    }

    /// Applies `f` to each entry region of inline directory `dir` (after
    /// the stored parent in `i_block`, then `system.data`) until it
    /// answers; stores the result.
    pub(crate) fn inline_dir_edit<T>(
        &mut self,
        dir: u32,
        mut f: impl FnMut(&mut [u8]) -> Option<T>,
    ) -> Result<Option<T>> {
        let i = self.inode(dir)?;
        let mut data = inline_bytes(&self.txn, dir, &i)?;
        let (head, rest) = data.split_at_mut(I_BLOCK);
        let out = match f(&mut head[4..]) {
            Some(v) => Some(v),
            None if !rest.is_empty() => f(rest),
            None => None,
        };
        if out.is_some() && !self.inline_store(dir, &data)? {
            return Err(corrupt(dir, "an inline directory that no longer fits"));
        }
        Ok(out)
    }

    /// Makes new directory `dir` (child of `parent`) an empty inline one,
    /// as the kernel's mkdir does on inline_data; `false` when the inode
    /// has no room (it then gets a block).
    pub(crate) fn make_inline_dir(&mut self, dir: u32, parent: u32) -> Result<bool> {
        let data = ext4r_format::dir::new_inline_dir(InodeNr(parent));
        self.inline_store(dir, &data)
    }

    /// Points inline directory `dir`'s stored parent at `parent`.
    pub(crate) fn inline_set_parent(&mut self, dir: u32, parent: u32) -> Result<()> {
        let mut i = self.inode(dir)?;
        ext4r_format::dir::set_inline_dir_parent(&mut i.i_block, InodeNr(parent));
        self.put_inode(dir, &i)
    }
}
