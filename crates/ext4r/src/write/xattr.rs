//! Extended attributes: set, removed and listed, in the inode's extra
//! space and in an attribute block, as the kernel keeps them (in-inode
//! first; the rest in one block, sorted, with entry and block hashes). A
//! block shared by several inodes (reference count above 1) is copied
//! before it changes. With ea_inode, a value too big for a block goes to
//! an EA inode of its own (`EA_INODE_FL`, the value's crc32c in `i_atime`,
//! its reference count in `i_ctime`), freed with its last reference.
//! `system.data` belongs to inline data (inline.rs): kept first in the
//! inode, never listed or set here.

use super::WriteFs;
use crate::error::{Error, Result};
use crate::object::xattr::{RawAttr, RawVal};
use crate::object::{self, Source};
use ext4r_format::inode::{mode, Inode, InodeFlags};
use ext4r_format::num;
use ext4r_format::xattr::{
    split_xattr_name, write_xattr_block, write_xattr_ibody, EaInodeRef, NewXattr, XattrHeader,
    XATTR_HEADER_SIZE, XATTR_IBODY_HEADER_SIZE,
};
use ext4r_format::InodeNr;
use ext4r_txn::csum::BlockKind;

/// Where an attribute's value is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Val {
    /// Next to its entry, in the inode or the block.
    Here(Vec<u8>),
    /// In an EA inode.
    Ea(EaInodeRef),
}

/// One attribute: prefix index, stored name, value.
pub(crate) type Attr = (u8, Vec<u8>, Val);

/// Room an attribute takes where its entry is.
fn room(a: &Attr) -> usize {
    match &a.2 {
        Val::Here(v) => entry_room(a.1.len(), v.len()),
        Val::Ea(_) => entry_room(a.1.len(), 0),
    }
}

/// The writer's view of attributes.
pub(crate) fn news(attrs: &[Attr]) -> Vec<NewXattr<'_>> {
    attrs
        .iter()
        .map(|(i, n, v)| match v {
            Val::Here(v) => NewXattr {
                name_index: *i,
                name: n,
                value: v,
                ea_inode: None,
            },
            Val::Ea(r) => NewXattr {
                name_index: *i,
                name: n,
                value: &[],
                ea_inode: Some(*r),
            },
        })
        .collect()
}

/// The attributes as stored, EA inode references completed with their
/// hash (the EA inode's `i_atime`).
fn complete(w: &WriteFs, raws: Vec<RawAttr>) -> Result<Vec<Attr>> {
    let mut out = Vec::with_capacity(raws.len());
    for a in raws {
        let v = match a.value {
            RawVal::Here(v) => Val::Here(v),
            RawVal::Ea { ino, size } => {
                let ea = w.inode(ino)?;
                Val::Ea(EaInodeRef {
                    ino,
                    size,
                    hash: ea.i_atime.get(),
                })
            }
        };
        out.push((a.index, a.name, v));
    }
    Ok(out)
}

/// The in-inode attributes of inode `ino` (record `rec`).
pub(crate) fn ibody_attrs(w: &WriteFs, ino: u32, rec: &[u8]) -> Result<Vec<Attr>> {
    complete(w, object::xattr::in_record(ino, rec)?)
}

fn corrupt(ino: u32, e: ext4r_format::FormatError) -> Error {
    Error::corrupt(ext4r_txn::error::Location::inode(ino).of("xattrs"), e)
}

fn entry_room(name: usize, value: usize) -> usize {
    ext4r_format::xattr::xattr_entry_len(name) + ext4r_format::xattr::xattr_value_len(value)
}

/// An attribute's name parsed for a change (see [`WriteFs::xattr_key`]).
pub(crate) struct XattrKey<'a> {
    index: u8,
    suffix: &'a [u8],
    /// The full name, for messages.
    shown: String,
    /// The value needs an EA inode (it fits no block).
    big: bool,
}

impl WriteFs {
    /// Every attribute of inode `ino`: in-inode ones, then the block's,
    /// the block's number and reference count.
    fn read_xattrs(&self, ino: u32) -> Result<(Vec<Attr>, Vec<Attr>, u64, u32)> {
        let rec = self.txn.read_inode(ino)?;
        let ibody = ibody_attrs(self, ino, &rec)?;
        let i = self.inode(ino)?;
        let acl = i.file_acl(self.txn.groups().wide()).0;
        let (block, refs) = if acl != 0 {
            let b = object::xattr::block_at(&self.txn, ino, acl)?;
            (complete(self, b.attrs)?, b.refcount)
        } else {
            (Vec::new(), 0)
        };
        Ok((ibody, block, acl, refs))
    }

    /// The attributes of inode `ino` as (full name, value), in-inode first.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for damaged attributes, read errors.
    pub fn xattrs(&self, ino: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let info = Source::inode(&self.txn, InodeNr(ino))?;
        // system.data continues inline data: not an attribute to list.
        Ok(object::xattr::list(&self.txn, &info)?
            .into_iter()
            .filter(|x| x.name != b"system.data")
            .map(|x| (x.name, x.value))
            .collect())
    }

    /// Sets attribute `name` (with its namespace prefix: `user.`,
    /// `trusted.`, `security.`, `system.`) of inode `ino` to `value`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an unknown prefix or a name over 255
    /// bytes, [`Error::NoSpace`] when the value fits in neither the inode
    /// nor a block.
    pub fn set_xattr(&mut self, ino: u32, name: &[u8], value: &[u8]) -> Result<()> {
        self.change_xattr(ino, name, Some(value))
    }

    /// Removes attribute `name` of inode `ino`.
    ///
    /// # Errors
    /// [`Error::NotFound`] when it is not there.
    pub fn remove_xattr(&mut self, ino: u32, name: &[u8]) -> Result<()> {
        self.change_xattr(ino, name, None)
    }

    fn change_xattr(&mut self, ino: u32, name: &[u8], value: Option<&[u8]>) -> Result<()> {
        let key = self.xattr_key(name, value)?;
        self.op(|w| w.put_xattr(ino, &key, value))
    }

    /// Attribute `name` parsed and judged for `value` before anything
    /// changes: a name no namespace takes, a value too large for any place.
    pub(crate) fn xattr_key<'a>(
        &self,
        name: &'a [u8],
        value: Option<&[u8]>,
    ) -> Result<XattrKey<'a>> {
        let shown = String::from_utf8_lossy(name).into_owned();
        let (index, suffix) =
            split_xattr_name(name).ok_or_else(|| Error::InvalidName(shown.clone()))?;
        if suffix.len() > 255
            || (suffix.is_empty() && index != 2 && index != 3)
            || (index == ext4r_format::xattr::index::SYSTEM && suffix == b"data")
        {
            return Err(Error::InvalidName(shown));
        }
        let bs = self.shape.bs;
        let big =
            value.is_some_and(|v| entry_room(suffix.len(), v.len()) + XATTR_HEADER_SIZE + 4 > bs);
        if let Some(v) = value {
            if v.len() > EA_VALUE_MAX || (big && !self.shape.ea_inode) {
                return Err(Error::NoSpace);
            }
        }
        Ok(XattrKey {
            index,
            suffix,
            shown,
            big,
        })
    }

    /// Sets (`Some`) or removes (`None`) attribute `key` of inode `ino`,
    /// inside an operation.
    pub(crate) fn put_xattr(
        &mut self,
        ino: u32,
        key: &XattrKey<'_>,
        value: Option<&[u8]>,
    ) -> Result<()> {
        let XattrKey {
            index,
            suffix,
            ref shown,
            big,
        } = *key;
        let w = self;
        let (mut ib, mut blk, acl, refs) = w.read_xattrs(ino)?;
        if refs > 1 && blk.iter().any(|a| matches!(a.2, Val::Ea(_))) {
            // Copying a shared block would take a reference to each of
            // its EA inodes: not done here.
            return Err(Error::Unsupported(format!(
                "inode {ino}: changing xattrs in a shared block that names EA inodes"
            )));
        }
        let key = |a: &Attr| a.0 == index && a.1 == suffix;
        let old: Vec<Val> = ib
            .iter()
            .chain(blk.iter())
            .filter(|a| key(a))
            .map(|a| a.2.clone())
            .collect();
        if value.is_none() && old.is_empty() {
            return Err(Error::NotFound(shown.clone()));
        }
        ib.retain(|a| !key(a));
        blk.retain(|a| !key(a));
        if let Some(v) = value {
            let val = if big {
                Val::Ea(w.ea_create(ino, v)?)
            } else {
                Val::Here(v.to_vec())
            };
            ib.push((index, suffix.to_vec(), val));
        }
        match w.place_xattrs(ino, ib.clone(), blk.clone(), acl, refs) {
            Err(Error::NoSpace) if w.shape.ea_inode && value.is_some() && !big => {
                // No room beside the others: the value gets an inode.
                let v = value.unwrap_or_default();
                let r = w.ea_create(ino, v)?;
                if let Some(last) = ib.last_mut() {
                    last.2 = Val::Ea(r);
                }
                w.place_xattrs(ino, ib, blk, acl, refs)?;
            }
            other => other?,
        }
        // The owner is charged for the blocks of the values it keeps in
        // EA inodes (the kernel's quota charge, which e2fsck counts in
        // i_blocks).
        let sectors = |v: &Val| match v {
            Val::Ea(r) => w.ea_quota_sectors(r.size),
            Val::Here(_) => 0,
        };
        let removed: u64 = old.iter().map(sectors).sum();
        let (ib_now, blk_now, _, _) = w.read_xattrs(ino)?;
        let new_charge: u64 = ib_now
            .iter()
            .chain(blk_now.iter())
            .filter(|a| key(a))
            .map(|a| sectors(&a.2))
            .sum();
        if new_charge != removed {
            let sh = w.shape;
            let mut i = w.inode(ino)?;
            let b = (i.blocks_count(sh.huge_file, sh.bs32) + new_charge).saturating_sub(removed);
            i.set_blocks_count(b, sh.huge_file, sh.bs32)
                .map_err(|e| corrupt(ino, e))?;
            w.put_inode(ino, &i)?;
        }
        for v in old {
            if let Val::Ea(r) = v {
                w.ea_deref(r.ino)?;
            }
        }
        let mut i = w.inode(ino)?;
        i.set_ctime(w.now());
        w.put_inode(ino, &i)
    }

    /// Stores the attributes: as many as fit in the inode (those already
    /// there first), the rest in a block of this inode's own.
    fn place_xattrs(
        &mut self,
        ino: u32,
        ib: Vec<Attr>,
        blk: Vec<Attr>,
        acl: u64,
        refs: u32,
    ) -> Result<()> {
        let sh = self.shape;
        let rec_now = self.txn.read_inode(ino)?;
        // A 128-byte record has no extra fields (and no room for them).
        let extra = Inode::in_record(&rec_now)
            .filter(|_| sh.isz > 128)
            .map_or(0, |i| usize::from(i.i_extra_isize.get()));
        let ibody_room = if sh.isz > 128 {
            sh.isz
                .saturating_sub(128 + extra + XATTR_IBODY_HEADER_SIZE + 4)
        } else {
            0
        };
        let mut in_inode: Vec<Attr> = Vec::new();
        let mut used = 0;
        let mut rest: Vec<Attr> = Vec::new();
        for a in ib.into_iter().chain(blk) {
            let need = room(&a);
            if used + need <= ibody_room {
                used += need;
                in_inode.push(a);
            } else {
                rest.push(a);
            }
        }
        // The block part must fit in one block.
        let block_need: usize = rest.iter().map(room).sum();
        if block_need + XATTR_HEADER_SIZE + 4 > sh.bs {
            return Err(Error::NoSpace);
        }
        if sh.isz > 128 {
            let rec = self.txn.inode_mut(ino)?;
            write_xattr_ibody(rec, &news(&in_inode)).map_err(|e| corrupt(ino, e))?;
        }
        let r = sh.ratio;
        let sectors = r * (sh.bs as u64 / 512);
        let mut i = self.inode(ino)?;
        let mut blocks = i.blocks_count(sh.huge_file, sh.bs32);
        // The old block: ours to rewrite when not shared, else one
        // reference less.
        let mut target = None;
        if acl != 0 {
            if refs <= 1 {
                if rest.is_empty() {
                    self.txn.free_blocks(acl & !(r - 1), r)?;
                    blocks = blocks.saturating_sub(sectors);
                } else {
                    target = Some(acl);
                }
            } else {
                let b = self.txn.block_mut(acl, BlockKind::Xattr)?;
                // The block was read and verified as an xattr block above.
                if let Some(h) = XattrHeader::of_block_mut(b) {
                    h.h_refcount.set(refs - 1);
                }
                blocks = blocks.saturating_sub(sectors);
            }
        }
        if !rest.is_empty() && target.is_none() {
            let goal = self.goal_for(ino);
            let (b, _) = self.alloc_data(goal, 1)?;
            blocks += sectors;
            target = Some(b);
        }
        if let Some(b) = target {
            let mut buf = vec![0u8; sh.bs];
            write_xattr_block(&mut buf, &news(&rest)).map_err(|e| corrupt(ino, e))?;
            self.txn.write_block(b, BlockKind::Xattr, buf)?;
        }
        i = self.inode(ino)?;
        i.set_file_acl(ext4r_format::BlockNr(target.unwrap_or(0)));
        i.set_blocks_count(blocks, sh.huge_file, sh.bs32)
            .map_err(|e| corrupt(ino, e))?;
        self.put_inode(ino, &i)
    }
}

/// The largest value kept (the VFS's XATTR_SIZE_MAX).
const EA_VALUE_MAX: usize = 65_536;

impl WriteFs {
    /// A new EA inode holding `value` for owner `owner`: a regular file
    /// flagged `EA_INODE`, in no directory, owned as its owner, one
    /// reference.
    fn ea_create(&mut self, owner: u32, value: &[u8]) -> Result<EaInodeRef> {
        let size = u32::try_from(value.len())
            .map_err(|_| Error::InvalidArgument("extended attribute value too large".into()))?;
        let o = self.inode(owner)?;
        let mut n = super::NewNode::file(0o600).owned_by(o.uid(), o.gid());
        n.mode = mode::S_IFREG | 0o600;
        let ino = self.txn.alloc_inode(owner, false)?;
        let (now, generation) = (self.now(), self.generation());
        let rec = super::node::record(&self.shape, &n, 1, now, generation)?;
        self.txn.write_inode(ino, rec)?;
        let mut i = self.inode(ino)?;
        i.set_flags(i.flags() | InodeFlags::EA_INODE);
        self.put_inode(ino, &i)?;
        if !value.is_empty() {
            self.write_chunk(ino, 0, value)?;
        }
        let hash = self.txn.checksums().ea_inode_hash(value);
        let mut i = self.inode(ino)?;
        set_ea_fields(&mut i, hash, 1);
        self.put_inode(ino, &i)?;
        Ok(EaInodeRef { ino, size, hash })
    }

    /// The 512-byte sectors an owner is charged for a value of `size`
    /// bytes in an EA inode: whole clusters, as the kernel's quota charge.
    fn ea_quota_sectors(&self, size: u32) -> u64 {
        let cluster = self.shape.bs as u64 * self.shape.ratio;
        u64::from(size).div_ceil(cluster) * cluster / 512
    }

    /// The sectors inode `ino` (record `i`) is charged for its values in
    /// EA inodes, in the inode and in its xattr block.
    pub(crate) fn ea_charge(&self, ino: u32, i: &Inode) -> Result<u64> {
        let rec = self.txn.read_inode(ino)?;
        let mut attrs = ibody_attrs(self, ino, &rec)?;
        let acl = i.file_acl(self.txn.groups().wide()).0;
        if acl != 0 {
            let b = object::xattr::block_at(&self.txn, ino, acl)?;
            attrs.extend(complete(self, b.attrs)?);
        }
        Ok(attrs
            .iter()
            .map(|a| match &a.2 {
                Val::Ea(r) => self.ea_quota_sectors(r.size),
                Val::Here(_) => 0,
            })
            .sum())
    }

    /// One reference to EA inode `ino` gone; the inode freed at zero.
    pub(crate) fn ea_deref(&mut self, ino: u32) -> Result<()> {
        let mut i = self.inode(ino)?;
        if !i.flags().contains(InodeFlags::EA_INODE) || i.links_count() == 0 {
            return Ok(());
        }
        let refs = u64::from(i.i_ctime.get()) << 32 | u64::from(i.l_i_version.get());
        if refs <= 1 {
            return self.release_now(ino, &i);
        }
        let hash = i.i_atime.get();
        set_ea_fields(&mut i, hash, refs - 1);
        self.put_inode(ino, &i)
    }

    /// Drops the EA inode references of inode `ino`'s own attributes (the
    /// in-inode ones, and the block's when `block_too`, the block going).
    pub(crate) fn ea_release_all(&mut self, ino: u32, block: Option<u64>) -> Result<()> {
        let rec = self.txn.read_inode(ino)?;
        let mut refs: Vec<u32> = ibody_attrs(self, ino, &rec)?
            .iter()
            .filter_map(|a| match a.2 {
                Val::Ea(r) => Some(r.ino),
                Val::Here(_) => None,
            })
            .collect();
        if let Some(b) = block {
            let blk = object::xattr::block_at(&self.txn, ino, b)?;
            refs.extend(blk.attrs.iter().filter_map(|a| match a.value {
                RawVal::Ea { ino, .. } => Some(ino),
                RawVal::Here(_) => None,
            }));
        }
        for r in refs {
            self.ea_deref(r)?;
        }
        Ok(())
    }
}

/// An EA inode's value hash (`i_atime`) and reference count (the low
/// half in `l_i_version`, the high half in `i_ctime`), as the kernel and
/// e2fsprogs keep them.
fn set_ea_fields(i: &mut Inode, hash: u32, refs: u64) {
    i.i_atime.set(hash);
    i.l_i_version.set(num::lo32(refs));
    i.i_ctime.set(num::hi32(refs));
    i.i_atime_extra.set(0);
    i.i_ctime_extra.set(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r_format::xattr::XATTR_ENTRY_SIZE;

    #[test]
    fn entry_room_counts_padding() {
        assert_eq!(entry_room(4, 5), XATTR_ENTRY_SIZE + 4 + 8);
    }
}
