//! Extended attributes as stored: in the inode's extra space and in an
//! xattr block (its checksum verified); values kept in EA inodes are
//! named, not read ([`super::xattr`] reads them).

use ext4r_format::xattr::{
    parse_xattr_block, parse_xattr_ibody, xattr_prefix, XattrEntries, XattrValue,
};
use ext4r_format::FormatError;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::error::Location;

use super::source::{meta_block, wide, InodeInfo, Source};
use crate::error::{Error, Result};

/// Where a stored value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawVal {
    /// Next to its entry, in the inode or the block.
    Here(Vec<u8>),
    /// In EA inode `ino`, `size` bytes.
    Ea {
        /// The EA inode.
        ino: u32,
        /// The value's length.
        size: u32,
    },
}

/// One attribute as stored: prefix index, name after the prefix, value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawAttr {
    pub index: u8,
    pub name: Vec<u8>,
    pub value: RawVal,
}

impl RawAttr {
    /// Whether this is `system.data`, the continuation of inline data.
    pub(crate) fn is_system_data(&self) -> bool {
        self.index == ext4r_format::xattr::index::SYSTEM && self.name == b"data"
    }

    /// The full name, prefix included (`index<N>.` for an unknown index).
    pub(crate) fn full_name(&self) -> Vec<u8> {
        let mut name = match xattr_prefix(self.index) {
            Some(p) => p.as_bytes().to_vec(),
            None => format!("index{}.", self.index).into_bytes(),
        };
        name.extend_from_slice(&self.name);
        name
    }
}

/// An attribute block: its reference count and
/// attributes.
pub(crate) struct Block {
    pub refcount: u32,
    pub attrs: Vec<RawAttr>,
}

fn corrupt(place: &dyn Fn() -> Location, e: FormatError) -> Error {
    Error::corrupt(place(), e)
}

fn collect(es: &XattrEntries<'_>, place: &dyn Fn() -> Location) -> Result<Vec<RawAttr>> {
    let mut out = Vec::new();
    for e in es.iter() {
        let e = e.map_err(|e| corrupt(place, e))?;
        let value = match e.value {
            XattrValue::Inline(v) => RawVal::Here(v.to_vec()),
            XattrValue::EaInode { inode, size } => RawVal::Ea { ino: inode.0, size },
        };
        out.push(RawAttr {
            index: e.entry.e_name_index,
            name: e.name.to_vec(),
            value,
        });
    }
    Ok(out)
}

/// The attributes in the inode's extra space, in stored order.
///
/// # Errors
/// [`Error::Corrupt`] naming the inode when the area is malformed.
pub(crate) fn in_inode(info: &InodeInfo) -> Result<Vec<RawAttr>> {
    in_record(info.ino.0, &info.record)
}

/// The attributes in the extra space of inode `ino`'s record `record`.
///
/// # Errors
/// As [`in_inode`].
pub(crate) fn in_record(ino: u32, record: &[u8]) -> Result<Vec<RawAttr>> {
    let place = || Location::inode(ino).of("in-inode xattrs");
    match parse_xattr_ibody(record).map_err(|e| corrupt(&place, e))? {
        Some(es) => collect(&es, &place),
        None => Ok(Vec::new()),
    }
}

/// The inode's attribute block, if it has one, its checksum verified.
///
/// # Errors
/// [`Error::Corrupt`] naming the inode and block when it is malformed or
/// fails its checksum; I/O errors.
pub(crate) fn in_block(src: &(impl Source + ?Sized), info: &InodeInfo) -> Result<Option<Block>> {
    let acl = info.inode.file_acl(wide(src.superblock())).0;
    if acl == 0 {
        return Ok(None);
    }
    block_at(src, info.ino.0, acl).map(Some)
}

/// Attribute block `nr` of inode `owner`, its checksum verified.
///
/// # Errors
/// As [`in_block`].
pub(crate) fn block_at(src: &(impl Source + ?Sized), owner: u32, nr: u64) -> Result<Block> {
    let place = || Location::inode(owner).of("xattr block").at_block(nr);
    let b = meta_block(src, nr, BlockKind::Xattr)?;
    let (h, es) = parse_xattr_block(&b).map_err(|e| corrupt(&place, e))?;
    Ok(Block {
        refcount: h.h_refcount.get(),
        attrs: collect(&es, &place)?,
    })
}
