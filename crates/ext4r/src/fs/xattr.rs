//! Extended attributes: in the inode, in an xattr block, and values kept
//! in EA inodes; and the `system.data` attribute that continues inline data.

use std::io::Read;

use ext4r_format::inode::{InodeFlags, I_BLOCK_SIZE};
use ext4r_format::xattr::{
    index, parse_xattr_block, parse_xattr_ibody, verify_xattr_block_checksum, xattr_prefix,
    XattrEntries, XattrValue,
};
use ext4r_format::{BlockNr, FormatError};

use super::inode::InodeInfo;
use super::Filesystem;
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

impl Filesystem {
    /// All extended attributes of an inode: those in the inode first, then
    /// those in its xattr block, each in stored order. The inline-data
    /// attribute (`system.data`) is included.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the inode (and block) when the attribute
    /// area is malformed.
    pub fn xattrs(&self, info: &InodeInfo) -> Result<Vec<Xattr>> {
        let mut out = Vec::new();
        let mut total = 0u64;
        let place = format!("inode {}, in-inode xattrs", info.ino.0);
        if let Some(entries) =
            parse_xattr_ibody(&info.record).map_err(|e| Error::corrupt(&place, e))?
        {
            self.collect(entries, &place, &mut total, &mut out)?;
        }
        let acl = info.inode.file_acl(self.is_64bit()).0;
        if acl != 0 {
            let place = format!("inode {}, xattr block {acl}", info.ino.0);
            let blk = self.read_block(acl, &place)?;
            if self.verify() {
                verify_xattr_block_checksum(self.csum_seed(), BlockNr(acl), &blk)
                    .map_err(|e| Error::corrupt(&place, e))?;
            }
            let (_, entries) = parse_xattr_block(&blk).map_err(|e| Error::corrupt(&place, e))?;
            self.collect(entries, &place, &mut total, &mut out)?;
        }
        Ok(out)
    }

    fn collect(
        &self,
        entries: XattrEntries<'_>,
        place: &str,
        total: &mut u64,
        out: &mut Vec<Xattr>,
    ) -> Result<()> {
        for e in entries.iter() {
            let e = e.map_err(|e| Error::corrupt(place, e))?;
            let len = match e.value {
                XattrValue::Inline(v) => v.len() as u64,
                XattrValue::EaInode { size, .. } => u64::from(size),
            };
            *total += len;
            if *total > VALUES_MAX {
                return Err(Error::corrupt(
                    place,
                    FormatError::invalid(
                        "xattr values",
                        format!("more than {VALUES_MAX} bytes in one inode"),
                    ),
                ));
            }
            let mut name = match xattr_prefix(e.entry.e_name_index) {
                Some(p) => p.as_bytes().to_vec(),
                None => format!("index{}.", e.entry.e_name_index).into_bytes(),
            };
            name.extend_from_slice(e.name);
            let value = match e.value {
                XattrValue::Inline(v) => v.to_vec(),
                XattrValue::EaInode { inode, size } => {
                    let ea = self.inode(inode)?;
                    if !ea.inode.flags().contains(InodeFlags::EA_INODE)
                        || u64::from(size) > EA_INODE_MAX
                        || ea.inode.size() < u64::from(size)
                    {
                        return Err(Error::corrupt(
                            place,
                            FormatError::invalid(
                                "xattr entry",
                                format!("value inode {} is not a valid EA inode", inode.0),
                            ),
                        ));
                    }
                    let mut v = vec![0u8; size as usize];
                    self.open_file(&ea)?.read_exact(&mut v).map_err(|e| {
                        Error::corrupt(
                            place,
                            FormatError::invalid(
                                "EA inode",
                                format!("unreadable: {}", crate::error::chain(&e)),
                            ),
                        )
                    })?;
                    v
                }
            };
            out.push(Xattr { name, value });
        }
        Ok(())
    }

    /// The contents of an inline-data inode: `i_block`, then the value of
    /// `system.data`, cut at the file size.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the size exceeds what the inode holds.
    pub(crate) fn inline_data(&self, info: &InodeInfo) -> Result<Vec<u8>> {
        let mut data = info.inode.i_block[..I_BLOCK_SIZE].to_vec();
        let place = format!("inode {}, inline data", info.ino.0);
        if let Some(entries) =
            parse_xattr_ibody(&info.record).map_err(|e| Error::corrupt(&place, e))?
        {
            for e in entries.iter() {
                let e = e.map_err(|e| Error::corrupt(&place, e))?;
                if e.entry.e_name_index == index::SYSTEM
                    && ext4r_format::xattr::xattr_name_is(e.name, b"data")
                {
                    if let XattrValue::Inline(v) = e.value {
                        data.extend_from_slice(v);
                    }
                }
            }
        }
        let size = info.inode.size();
        if size > data.len() as u64 {
            return Err(Error::corrupt(
                place,
                FormatError::invalid(
                    "i_size",
                    format!("{size} exceeds the {} bytes held inline", data.len()),
                ),
            ));
        }
        data.truncate(size as usize);
        Ok(data)
    }
}
