//! Extended attributes with their values: those stored in the inode and
//! its block ([`super::xattr_raw`]), values kept in EA inodes read.

use ext4r_format::inode::InodeFlags;
use ext4r_format::{FormatError, InodeNr};
use ext4r_txn::error::Location;

use super::data::read_small;
use super::source::{InodeInfo, Source};
pub(crate) use super::xattr_raw::{block_at, in_record, RawAttr, RawVal};
use super::xattr_raw::{in_block, in_inode};
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

/// EA inode values are read whole; the format caps them (`XATTR_SIZE_MAX`).
const EA_INODE_MAX: u64 = 1 << 24;
/// All values of one inode together. Entries may share an EA inode, so a
/// block of 200 entries naming one 16 MiB EA inode would otherwise ask for
/// 3 GiB. The VFS caps a value at 64 KiB, so real inodes stay far below.
const VALUES_MAX: u64 = 64 << 20;

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
