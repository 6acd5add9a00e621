//! Extended attributes as stored: in the inode's extra space, in an
//! xattr block (its checksum verified), values kept in EA inodes.

use ext4r_format::inode::InodeFlags;
use ext4r_format::xattr::{
    parse_xattr_block, parse_xattr_ibody, xattr_prefix, XattrEntries, XattrValue,
};
use ext4r_format::{FormatError, InodeNr};
use ext4r_txn::csum::BlockKind;
use ext4r_txn::error::Location;

use super::{meta_block, read_small, wide, InodeInfo, Source};
use crate::error::{Error, Result};

/// One extended attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xattr {
    /// The full name with its prefix (`user.mime_type`,
    /// `system.posix_acl_access`); an unknown name index is shown as
    /// `index<N>.`.
    pub name: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

impl Xattr {
    /// The name as text, invalid UTF-8 replaced.
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

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

/// EA inode values are read whole; the format caps them (`XATTR_SIZE_MAX`).
const EA_INODE_MAX: u64 = 1 << 24;
/// All values of one inode together. Entries may share an EA inode, so a
/// block of 200 entries naming one 16 MiB EA inode would otherwise ask for
/// 3 GiB. The VFS caps a value at 64 KiB, so real inodes stay far below.
const VALUES_MAX: u64 = 64 << 20;

fn corrupt(place: &Location, e: FormatError) -> Error {
    Error::corrupt(place.clone(), e)
}

fn collect(es: &XattrEntries<'_>, place: &Location) -> Result<Vec<RawAttr>> {
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
    let place = Location::inode(ino).of("in-inode xattrs");
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
    let place = Location::inode(owner).of("xattr block").at_block(nr);
    let b = meta_block(src, nr, BlockKind::Xattr)?;
    let (h, es) = parse_xattr_block(&b).map_err(|e| corrupt(&place, e))?;
    Ok(Block {
        refcount: h.h_refcount.get(),
        attrs: collect(&es, &place)?,
    })
}

/// The value kept in EA inode `ino` (`size` bytes), for an attribute of
/// inode `owner`: it must be an EA inode holding that many bytes.
///
/// # Errors
/// [`Error::Corrupt`] naming the owner when it is not.
pub(crate) fn ea_value(
    src: &(impl Source + ?Sized),
    owner: InodeNr,
    ino: u32,
    size: u32,
) -> Result<Vec<u8>> {
    let ea = src.inode(InodeNr(ino))?;
    if !ea.inode.flags().contains(InodeFlags::EA_INODE)
        || u64::from(size) > EA_INODE_MAX
        || ea.inode.size() < u64::from(size)
    {
        return Err(Error::corrupt(
            Location::inode(owner.0).of("xattrs"),
            FormatError::invalid(
                "xattr entry",
                format!("value inode {ino} is not a valid EA inode"),
            ),
        ));
    }
    let mut v = read_small(src, &ea)?;
    v.truncate(size as usize);
    Ok(v)
}

/// Every attribute of an inode with its value: those in the inode first,
/// then those in its block, each in stored order; `system.data` included.
///
/// # Errors
/// [`Error::Corrupt`] naming the inode (and block) when an area is
/// malformed or the values exceed what one inode may hold.
pub(crate) fn list(src: &(impl Source + ?Sized), info: &InodeInfo) -> Result<Vec<Xattr>> {
    let mut attrs = in_inode(info)?;
    if let Some(b) = in_block(src, info)? {
        attrs.extend(b.attrs);
    }
    let mut total = 0u64;
    let mut out = Vec::with_capacity(attrs.len());
    for a in attrs {
        total += match &a.value {
            RawVal::Here(v) => v.len() as u64,
            RawVal::Ea { size, .. } => u64::from(*size),
        };
        if total > VALUES_MAX {
            return Err(Error::corrupt(
                Location::inode(info.ino.0).of("xattrs"),
                FormatError::invalid(
                    "xattr values",
                    format!("more than {VALUES_MAX} bytes in one inode"),
                ),
            ));
        }
        let name = a.full_name();
        let value = match a.value {
            RawVal::Here(v) => v,
            RawVal::Ea { ino, size } => ea_value(src, info.ino, ino, size)?,
        };
        out.push(Xattr { name, value });
    }
    Ok(out)
}
