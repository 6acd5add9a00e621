//! Extended attributes. They live in two places: after the extra fields of
//! a large inode (`struct ext4_xattr_ibody_header`, just a magic, then
//! entries), and in a block named by `i_file_acl`
//! (`struct ext4_xattr_header`, 32 bytes, then entries). Entries
//! (`struct ext4_xattr_entry` plus the name, padded to 4 bytes) grow from
//! the front and end with four zero bytes; values are packed from the end.
//! In a block, value offsets count from the block start; in an inode, from
//! the first entry. With ea_inode a value may live in its own inode.
//!
//! See the kernel's `fs/ext4/xattr.h` and `xattr.c`, e2fsprogs'
//! `lib/ext2fs/ext_attr.c`, and `Documentation/filesystems/ext4/attributes.rst`.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::crc32c;
use crate::error::{need, FormatError, Result};
use crate::types::{BlockNr, InodeNr};
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `h_magic` of xattr blocks and of the in-inode header.
pub const XATTR_MAGIC: u32 = 0xEA02_0000;
/// Size of the block header.
pub const XATTR_HEADER_SIZE: usize = 32;
/// Size of the in-inode header.
pub const XATTR_IBODY_HEADER_SIZE: usize = 4;
/// Size of the fixed part of an entry.
pub const XATTR_ENTRY_SIZE: usize = 16;
/// Largest value size accepted when checking (`EXT4_XATTR_SIZE_MAX`).
pub const XATTR_SIZE_MAX: u32 = 1 << 24;
/// Most inodes sharing one block (`EXT4_XATTR_REFCOUNT_MAX`).
pub const XATTR_REFCOUNT_MAX: u32 = 1024;

/// Name indexes (`e_name_index`): which prefix the stored name lacks.
pub mod index {
    /// `user.`
    pub const USER: u8 = 1;
    /// `system.posix_acl_access` (the whole name; stored name is empty).
    pub const POSIX_ACL_ACCESS: u8 = 2;
    /// `system.posix_acl_default` (the whole name).
    pub const POSIX_ACL_DEFAULT: u8 = 3;
    /// `trusted.`
    pub const TRUSTED: u8 = 4;
    /// Lustre (unused by Linux).
    pub const LUSTRE: u8 = 5;
    /// `security.`
    pub const SECURITY: u8 = 6;
    /// `system.`
    pub const SYSTEM: u8 = 7;
    /// `system.richacl` (the whole name).
    pub const RICHACL: u8 = 8;
    /// The encryption context (name "c", not visible to users).
    pub const ENCRYPTION: u8 = 9;
    /// `gnu.` (Hurd).
    pub const HURD: u8 = 10;
}

/// Prefixes by index, longest first so that [`split_xattr_name`] picks the
/// most specific one.
const PREFIXES: [(u8, &str); 8] = [
    (index::POSIX_ACL_DEFAULT, "system.posix_acl_default"),
    (index::POSIX_ACL_ACCESS, "system.posix_acl_access"),
    (index::RICHACL, "system.richacl"),
    (index::SECURITY, "security."),
    (index::TRUSTED, "trusted."),
    (index::SYSTEM, "system."),
    (index::HURD, "gnu."),
    (index::USER, "user."),
];

/// The prefix an index stands for.
pub fn xattr_prefix(name_index: u8) -> Option<&'static str> {
    PREFIXES
        .iter()
        .find(|(i, _)| *i == name_index)
        .map(|(_, p)| *p)
}

/// Splits a full attribute name into an index and the stored suffix.
pub fn split_xattr_name(full: &[u8]) -> Option<(u8, &[u8])> {
    PREFIXES
        .iter()
        .find(|(_, p)| full.starts_with(p.as_bytes()))
        .map(|(i, p)| (*i, &full[p.len()..]))
}

/// `struct ext4_xattr_header`, at the start of an xattr block.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct XattrHeader {
    /// [`XATTR_MAGIC`].
    pub h_magic: U32,
    /// Inodes sharing the block.
    pub h_refcount: U32,
    /// Blocks used: always 1.
    pub h_blocks: U32,
    /// See [`XattrEntries::block_hash`]; 0 keeps the block unshared.
    pub h_hash: U32,
    /// See [`xattr_block_checksum`].
    pub h_checksum: U32,
    /// Zero.
    pub h_reserved: [U32; 3],
}

impl XattrHeader {
    /// The header at the start of `block`, when the block carries the xattr
    /// magic; `None` for a block too short or without it.
    pub fn of_block(block: &[u8]) -> Option<&Self> {
        Self::ref_from_prefix(block)
            .ok()
            .map(|(h, _)| h)
            .filter(|h| h.h_magic.get() == XATTR_MAGIC)
    }

    /// [`XattrHeader::of_block`], to change the header in place.
    pub fn of_block_mut(block: &mut [u8]) -> Option<&mut Self> {
        Self::mut_from_prefix(block)
            .ok()
            .map(|(h, _)| h)
            .filter(|h| h.h_magic.get() == XATTR_MAGIC)
    }
}

/// `struct ext4_xattr_ibody_header`, at `128 + i_extra_isize` in an inode.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct XattrIbodyHeader {
    /// [`XATTR_MAGIC`].
    pub h_magic: U32,
}

/// `struct ext4_xattr_entry`; `e_name_len` name bytes follow.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct XattrEntry {
    /// Name length.
    pub e_name_len: u8,
    /// Prefix index ([`index`]).
    pub e_name_index: u8,
    /// Value offset (from the block start, or from the first in-inode entry).
    pub e_value_offs: U16,
    /// Inode holding the value (ea_inode), or 0.
    pub e_value_inum: U32,
    /// Value length.
    pub e_value_size: U32,
    /// See [`xattr_entry_hash`].
    pub e_hash: U32,
}

const _: () = assert!(core::mem::size_of::<XattrHeader>() == XATTR_HEADER_SIZE);
const _: () = assert!(core::mem::size_of::<XattrIbodyHeader>() == XATTR_IBODY_HEADER_SIZE);
const _: () = assert!(core::mem::size_of::<XattrEntry>() == XATTR_ENTRY_SIZE);

/// Whether a stored name is `want` as libext2fs compares names: as C
/// strings, up to the first NUL. A name whose `e_name_len` was damaged to
/// take in trailing NULs still names its attribute for e2fsck (it keeps
/// an inline file whose `system.data` entry says 36 bytes for "data").
pub fn xattr_name_is(stored: &[u8], want: &[u8]) -> bool {
    stored.split(|&b| b == 0).next() == Some(want)
}

/// Bytes an entry with a name of `name_len` bytes takes (`EXT4_XATTR_LEN`).
pub fn xattr_entry_len(name_len: usize) -> usize {
    (XATTR_ENTRY_SIZE + name_len + 3) & !3
}

/// Bytes a value of `size` bytes takes (`EXT4_XATTR_SIZE`).
pub fn xattr_value_len(size: usize) -> usize {
    size.saturating_add(3) & !3
}

const NAME_HASH_SHIFT: u32 = 5;
const VALUE_HASH_SHIFT: u32 = 16;
const BLOCK_HASH_SHIFT: u32 = 16;

fn name_hash(name: &[u8], signed: bool) -> u32 {
    name.iter().fold(0u32, |h, &b| {
        let c = if signed {
            i32::from(b as i8) as u32
        } else {
            u32::from(b)
        };
        h.rotate_left(NAME_HASH_SHIFT) ^ c
    })
}

/// The hash of an entry whose value is stored inline, as e2fsprogs'
/// `ext2fs_ext_attr_hash_entry` and the kernel's `ext4_xattr_hash_entry`:
/// the name bytes, then the value as little-endian words, zero-padded to
/// a multiple of 4. `signed` selects the old signed-char variant
/// (`ext2fs_ext_attr_hash_entry_signed`) that kernels before 6.2 computed
/// for names with bytes above 0x7f; checkers accept either.
pub fn xattr_entry_hash(name: &[u8], value: &[u8], signed: bool) -> u32 {
    value.chunks(4).fold(name_hash(name, signed), |h, c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        h.rotate_left(VALUE_HASH_SHIFT) ^ u32::from_le_bytes(w)
    })
}

/// The hash of an entry whose value lives in an EA inode: the name hash
/// folded with that inode's own value hash (kept in its `i_atime`).
pub fn xattr_ea_inode_entry_hash(name: &[u8], ea_inode_hash: u32, signed: bool) -> u32 {
    name_hash(name, signed).rotate_left(VALUE_HASH_SHIFT) ^ ea_inode_hash
}

/// Where an attribute's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrValue<'a> {
    /// In this block or inode (exactly `e_value_size` bytes).
    Inline(&'a [u8]),
    /// In an EA inode.
    EaInode {
        /// The inode holding the value.
        inode: InodeNr,
        /// The value's length.
        size: u32,
    },
}

/// One attribute, validated.
#[derive(Clone, Copy, Debug)]
pub struct XattrRef<'a> {
    /// Byte offset of the entry in the buffer given to the parser.
    pub offset: usize,
    /// The fixed part of the entry.
    pub entry: XattrEntry,
    /// The stored name (without the prefix of `e_name_index`).
    pub name: &'a [u8],
    /// The value.
    pub value: XattrValue<'a>,
    /// The value with its padding, as hashed.
    padded: &'a [u8],
    /// Offset of an inline value in the buffer.
    value_start: Option<usize>,
}

impl XattrRef<'_> {
    /// The entry hash as it should be stored (see [`xattr_entry_hash`]);
    /// `None` for an EA inode value, whose hash needs that inode
    /// ([`xattr_ea_inode_entry_hash`]).
    pub fn compute_hash(&self, signed: bool) -> Option<u32> {
        match self.value {
            XattrValue::Inline(_) => Some(xattr_entry_hash(self.name, self.padded, signed)),
            XattrValue::EaInode { .. } => None,
        }
    }
}

/// The entries of an xattr block or in-inode area, with the end of the
/// name list already located and bounded.
#[derive(Clone, Copy, Debug)]
pub struct XattrEntries<'a> {
    buf: &'a [u8],
    first: usize,
    value_base: usize,
    names_end: usize,
}

fn bad(what: &'static str, off: usize, detail: &str) -> FormatError {
    FormatError::invalid(what, format!("entry at offset {off}: {detail}"))
}

impl<'a> XattrEntries<'a> {
    /// Walks the names from `first` to the terminating zero word, checking
    /// that every entry and the terminator lie inside `buf`.
    fn new(buf: &'a [u8], first: usize, value_base: usize) -> Result<Self> {
        let mut off = first;
        loop {
            let word = buf
                .get(off..off + 4)
                .ok_or_else(|| bad("xattr entry", off, "name list runs past the end"))?;
            if word == [0; 4] {
                break;
            }
            let name_len = usize::from(word[0]);
            let next = off + xattr_entry_len(name_len);
            if next >= buf.len() {
                return Err(bad("xattr entry", off, "name out of bounds"));
            }
            off = next;
        }
        Ok(XattrEntries {
            buf,
            first,
            value_base,
            names_end: off,
        })
    }

    /// Offset of the terminating zero word (where a new entry would go).
    pub fn names_end(&self) -> usize {
        self.names_end
    }

    /// Bytes free between the names (with terminator) and the lowest value.
    /// Values past the names are assumed valid; see [`Self::iter`].
    pub fn free_space(&self) -> usize {
        let mut min = self.buf.len();
        for e in self.iter().flatten() {
            if let Some(start) = e.value_start {
                min = min.min(start);
            }
        }
        min.saturating_sub(self.names_end + 4)
    }

    /// The attributes, each checked as the kernel's `check_xattrs`: size
    /// at most [`XATTR_SIZE_MAX`], an inline value starting after the name
    /// list and ending (with padding) inside the buffer. A bad entry is
    /// yielded as an error and ends the iteration. Whether `e_value_inum`
    /// is allowed (ea_inode) and valid is the caller's to check.
    pub fn iter(&self) -> impl Iterator<Item = Result<XattrRef<'a>>> + 'a {
        let this = *self;
        let mut off = self.first;
        let mut done = false;
        core::iter::from_fn(move || {
            if done || off >= this.names_end {
                return None;
            }
            let r = this.entry_at(off);
            match &r {
                Ok(e) => off += xattr_entry_len(e.name.len()),
                Err(_) => done = true,
            }
            Some(r)
        })
    }

    fn entry_at(&self, off: usize) -> Result<XattrRef<'a>> {
        // new() established that off + entry length < names_end <= len.
        let entry = XattrEntry::read_from_bytes(&self.buf[off..off + XATTR_ENTRY_SIZE])
            .map_err(|_| bad("xattr entry", off, "unreadable"))?;
        let name_start = off + XATTR_ENTRY_SIZE;
        let name = &self.buf[name_start..name_start + usize::from(entry.e_name_len)];
        let size = entry.e_value_size.get();
        if size > XATTR_SIZE_MAX {
            return Err(bad("xattr entry", off, "value size too large"));
        }
        let inum = entry.e_value_inum.get();
        let (value, padded, value_start) = if inum != 0 {
            (
                XattrValue::EaInode {
                    inode: InodeNr(inum),
                    size,
                },
                &[][..],
                None,
            )
        } else if size == 0 {
            (XattrValue::Inline(&[]), &[][..], None)
        } else {
            let start = self.value_base + usize::from(entry.e_value_offs.get());
            let size = size as usize;
            let padded_end = start + xattr_value_len(size);
            if start < self.names_end + 4 || padded_end > self.buf.len() {
                return Err(bad("xattr entry", off, "value out of bounds"));
            }
            (
                XattrValue::Inline(&self.buf[start..start + size]),
                &self.buf[start..padded_end],
                Some(start),
            )
        };
        Ok(XattrRef {
            offset: off,
            entry,
            name,
            value,
            padded,
            value_start,
        })
    }

    /// The block hash as the kernel's `ext4_xattr_rehash` computes it: the
    /// entry hashes folded in order, or 0 if any entry hash is 0 (which
    /// keeps the block from being shared).
    pub fn block_hash(&self) -> u32 {
        let mut hash = 0u32;
        let mut off = self.first;
        while off < self.names_end {
            let e = &self.buf[off..off + XATTR_ENTRY_SIZE];
            let h = u32::from_le_bytes([e[12], e[13], e[14], e[15]]);
            if h == 0 {
                return 0;
            }
            hash = hash.rotate_left(BLOCK_HASH_SHIFT) ^ h;
            off += xattr_entry_len(usize::from(e[0]));
        }
        hash
    }
}

/// Parses an xattr block: the header (magic, `h_blocks == 1`) and the
/// bounds of its entries.
///
/// # Errors
/// [`FormatError::Truncated`], [`FormatError::BadMagic`] or
/// [`FormatError::Invalid`].
pub fn parse_xattr_block(block: &[u8]) -> Result<(XattrHeader, XattrEntries<'_>)> {
    need("xattr block", block, XATTR_HEADER_SIZE + 4)?;
    let h = XattrHeader::read_from_bytes(&block[..XATTR_HEADER_SIZE])
        .map_err(|_| FormatError::invalid("xattr block", "unreadable header"))?;
    if h.h_magic.get() != XATTR_MAGIC {
        return Err(FormatError::BadMagic {
            what: "xattr block",
            found: h.h_magic.get(),
            expected: XATTR_MAGIC,
        });
    }
    if h.h_blocks.get() != 1 {
        return Err(FormatError::invalid(
            "xattr block",
            format!("h_blocks {}", h.h_blocks.get()),
        ));
    }
    Ok((h, XattrEntries::new(block, XATTR_HEADER_SIZE, 0)?))
}

/// Finds the in-inode attributes of an on-disk inode record: `None` when
/// the record has no room after `i_extra_isize` or no magic there.
///
/// # Errors
/// [`FormatError::Invalid`] when the entries run out of bounds.
pub fn parse_xattr_ibody(record: &[u8]) -> Result<Option<XattrEntries<'_>>> {
    match ibody_entries_at(record) {
        Some(first) => XattrEntries::new(record, first, first).map(Some),
        None => Ok(None),
    }
}

/// Where the first in-inode xattr entry of an on-disk inode record would
/// start: after the fixed part, `i_extra_isize` bytes and the magic. `None`
/// when the record has no area (no magic there, or too short): a check
/// that only needs to know whether there is one asks this, not the parse.
pub fn ibody_entries_at(record: &[u8]) -> Option<usize> {
    let extra = record.get(0x80..0x82)?;
    let start = 128 + usize::from(u16::from_le_bytes([extra[0], extra[1]]));
    let magic = record.get(start..start + XATTR_IBODY_HEADER_SIZE)?;
    (u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]) == XATTR_MAGIC)
        .then_some(start + XATTR_IBODY_HEADER_SIZE)
}

/// The checksum of an xattr block, as the kernel's `ext4_xattr_block_csum`:
/// CRC32C from the filesystem seed over the block number (64-bit
/// little-endian), then the block with `h_checksum` read as zero.
///
/// # Errors
/// [`FormatError::Truncated`] when the block cannot hold a header.
pub fn xattr_block_checksum(fs_seed: u32, block_nr: BlockNr, block: &[u8]) -> Result<u32> {
    need("xattr block", block, XATTR_HEADER_SIZE)?;
    let crc = crc32c(fs_seed, &block_nr.0.to_le_bytes());
    let crc = crc32c(crc, &block[..16]);
    let crc = crc32c(crc, &[0; 4]);
    Ok(crc32c(crc, &block[20..]))
}

/// Checks the checksum of an xattr block.
///
/// # Errors
/// As [`xattr_block_checksum`], or [`FormatError::BadChecksum`].
pub fn verify_xattr_block_checksum(fs_seed: u32, block_nr: BlockNr, block: &[u8]) -> Result<()> {
    let computed = xattr_block_checksum(fs_seed, block_nr, block)?;
    let stored = u32::from_le_bytes([block[16], block[17], block[18], block[19]]);
    if stored != computed {
        return Err(FormatError::BadChecksum {
            what: "xattr block",
            stored,
            computed,
        });
    }
    Ok(())
}

/// Computes and stores the checksum of an xattr block.
///
/// # Errors
/// As [`xattr_block_checksum`].
pub fn set_xattr_block_checksum(fs_seed: u32, block_nr: BlockNr, block: &mut [u8]) -> Result<()> {
    let crc = xattr_block_checksum(fs_seed, block_nr, block)?;
    block[16..20].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// An attribute to write: index, stored name, inline value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewXattr<'a> {
    /// Prefix index.
    pub name_index: u8,
    /// Stored name (at most 255 bytes).
    pub name: &'a [u8],
    /// Value (ignored when `ea_inode` holds it).
    pub value: &'a [u8],
    /// The EA inode holding the value instead (ea_inode feature).
    pub ea_inode: Option<EaInodeRef>,
}

/// A value kept in an EA inode, as an entry names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EaInodeRef {
    /// The EA inode.
    pub ino: u32,
    /// The value's length.
    pub size: u32,
    /// The EA inode's value hash (its `i_atime`), folded into the entry
    /// hash, which e2fsck and the kernel check in the inode and in blocks.
    pub hash: u32,
}

/// Lays out entries from `first` and values down from the end of `buf`,
/// in the order given; with `hash`, entry hashes are stored (the kernel
/// stores them in blocks and leaves in-inode ones 0).
fn write_entries(
    buf: &mut [u8],
    first: usize,
    value_base: usize,
    attrs: &[NewXattr<'_>],
    hash: bool,
) -> Result<()> {
    let full = || FormatError::invalid("xattr", "attributes do not fit");
    buf[first..].fill(0);
    let mut off = first;
    let mut min_value = buf.len();
    for a in attrs {
        let name_len = u8::try_from(a.name.len())
            .map_err(|_| FormatError::invalid("xattr", "name longer than 255 bytes"))?;
        let elen = xattr_entry_len(a.name.len());
        if let Some(ea) = a.ea_inode {
            // The value is elsewhere: an entry alone, its hash always set.
            if off + elen + 4 > min_value {
                return Err(full());
            }
            let e = XattrEntry {
                e_name_len: name_len,
                e_name_index: a.name_index,
                e_value_offs: 0.into(),
                e_value_inum: ea.ino.into(),
                e_value_size: ea.size.into(),
                e_hash: xattr_ea_inode_entry_hash(a.name, ea.hash, false).into(),
            };
            buf[off..off + XATTR_ENTRY_SIZE].copy_from_slice(e.as_bytes());
            buf[off + XATTR_ENTRY_SIZE..off + XATTR_ENTRY_SIZE + a.name.len()]
                .copy_from_slice(a.name);
            off += elen;
            continue;
        }
        let vlen = xattr_value_len(a.value.len());
        let value_at = if a.value.is_empty() {
            min_value
        } else {
            min_value.checked_sub(vlen).ok_or_else(full)?
        };
        // Keep room for this entry and the terminating zero word.
        if off + elen + 4 > value_at {
            return Err(full());
        }
        let offs = if a.value.is_empty() {
            0
        } else {
            u16::try_from(value_at - value_base).map_err(|_| full())?
        };
        let e = XattrEntry {
            e_name_len: name_len,
            e_name_index: a.name_index,
            e_value_offs: offs.into(),
            e_value_inum: 0.into(),
            e_value_size: u32::try_from(a.value.len()).map_err(|_| full())?.into(),
            e_hash: if hash {
                xattr_entry_hash(a.name, a.value, false)
            } else {
                0
            }
            .into(),
        };
        buf[off..off + XATTR_ENTRY_SIZE].copy_from_slice(e.as_bytes());
        buf[off + XATTR_ENTRY_SIZE..off + XATTR_ENTRY_SIZE + a.name.len()].copy_from_slice(a.name);
        buf[value_at..value_at + a.value.len()].copy_from_slice(a.value);
        off += elen;
        min_value = value_at;
    }
    Ok(())
}

/// Writes a fresh xattr block (refcount 1) holding `attrs`, sorted as the
/// kernel keeps block entries (by index, name length, then name), with
/// entry and block hashes. The checksum is left for
/// [`set_xattr_block_checksum`].
///
/// # Errors
/// [`FormatError::Invalid`] when the attributes do not fit or a name is
/// too long; [`FormatError::Truncated`] for a tiny buffer.
pub fn write_xattr_block(block: &mut [u8], attrs: &[NewXattr<'_>]) -> Result<()> {
    need("xattr block", block, XATTR_HEADER_SIZE + 4)?;
    let mut sorted = attrs.to_vec();
    sorted.sort_by(|a, b| {
        (a.name_index, a.name.len(), a.name).cmp(&(b.name_index, b.name.len(), b.name))
    });
    write_entries(block, XATTR_HEADER_SIZE, 0, &sorted, true)?;
    let hash = XattrEntries::new(block, XATTR_HEADER_SIZE, 0)?.block_hash();
    let h = XattrHeader {
        h_magic: XATTR_MAGIC.into(),
        h_refcount: 1.into(),
        h_blocks: 1.into(),
        h_hash: hash.into(),
        h_checksum: 0.into(),
        h_reserved: [0.into(); 3],
    };
    block[..XATTR_HEADER_SIZE].copy_from_slice(h.as_bytes());
    Ok(())
}

/// Writes `attrs` into the in-inode area of an on-disk inode record (after
/// `i_extra_isize`, which must already be set), in the order given, with
/// entry hashes 0 as the kernel leaves them. With no attributes the area is
/// zeroed and has no magic.
///
/// # Errors
/// [`FormatError::Invalid`] when there is no room or the attributes do not
/// fit.
pub fn write_xattr_ibody(record: &mut [u8], attrs: &[NewXattr<'_>]) -> Result<()> {
    let start = ibody_start(record)?;
    let first = start + XATTR_IBODY_HEADER_SIZE;
    if first + 4 > record.len() {
        return Err(FormatError::invalid(
            "xattr",
            "inode has no room for xattrs",
        ));
    }
    if attrs.is_empty() {
        record[start..].fill(0);
        return Ok(());
    }
    write_entries(record, first, first, attrs, false)?;
    record[start..first].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
    Ok(())
}

/// Where the in-inode area of `record` begins: `128 + i_extra_isize`.
fn ibody_start(record: &[u8]) -> Result<usize> {
    record
        .get(0x80..0x82)
        .map(|b| 128 + usize::from(u16::from_le_bytes([b[0], b[1]])))
        .ok_or_else(|| FormatError::invalid("xattr", "inode has no extra space"))
}

/// Leaves the in-inode area of `record` empty but headed by its magic: what
/// the kernel leaves once the last attribute (inline data moved out to a
/// block) is gone, and what mke2fs writes into lost+found on inline_data.
///
/// # Errors
/// As [`write_xattr_ibody`].
pub fn empty_xattr_ibody_with_magic(record: &mut [u8]) -> Result<()> {
    write_xattr_ibody(record, &[])?;
    let start = ibody_start(record)?;
    let header = XattrIbodyHeader {
        h_magic: U32::new(XATTR_MAGIC),
    };
    record[start..start + XATTR_IBODY_HEADER_SIZE].copy_from_slice(header.as_bytes());
    Ok(())
}

/// Points the entry at `entry_off` of an xattr block or in-inode area (an
/// offset the parsers report) at EA inode `ino` (`e_value_inum`); `false`
/// when no entry fits there.
pub fn set_value_inum(area: &mut [u8], entry_off: usize, ino: u32) -> bool {
    match area.get_mut(entry_off..).map(XattrEntry::mut_from_prefix) {
        Some(Ok((e, _))) => {
            e.e_value_inum.set(ino);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inode::tests::sparse;
    use proptest::prelude::*;

    #[test]
    fn value_inum_is_set_by_entry_offset() {
        let mut area = [0u8; 64];
        assert!(set_value_inum(&mut area, 16, 0x0102_0304));
        let (e, _) = XattrEntry::read_from_prefix(&area[16..]).unwrap();
        assert_eq!(e.e_value_inum.get(), 0x0102_0304);
        assert_eq!(area.iter().filter(|&&b| b != 0).count(), 4);
        assert!(!set_value_inum(&mut area, 56, 1));
        assert!(!set_value_inum(&mut area, 100, 1));
    }

    #[test]
    fn names_compare_as_c_strings() {
        assert!(xattr_name_is(b"data", b"data"));
        assert!(xattr_name_is(b"data\0\0\0", b"data"));
        assert!(!xattr_name_is(b"dat", b"data"));
        assert!(!xattr_name_is(b"datax", b"data"));
        assert!(!xattr_name_is(b"\0data", b"data"));
    }

    const KERNEL_UUID: [u8; 16] = [
        0x66, 0x66, 0x66, 0x66, 0x77, 0x77, 0x88, 0x88, 0x99, 0x99, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa,
        0xaa,
    ];

    /// Block 1330 of an image made by `mke2fs -t ext4 -b 1024 -U
    /// 66666666-7777-8888-9999-aaaaaaaaaaaa`, loop-mounted, with
    /// `user.alpha` = 200 × 'A' and `trusted.gamma` = 150 × 'B' set by the
    /// kernel (which also set `user.beta` in the inode).
    fn kernel_block() -> Vec<u8> {
        let mut b = sparse(
            1024,
            &[(
                0x0,
                "000002ea0100000001000000e63f62896266905000000000000000000000000005013803\
                 00000000c800000061cd2706616c7068610000000504a0020000000096000000c1390344\
                 67616d6d61",
            )],
        );
        b[0x2a0..0x2a0 + 150].fill(b'B');
        b[0x338..0x400].fill(b'A');
        b
    }

    #[test]
    fn offsets_match_the_kernel() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(XattrHeader, h_hash), 12);
        assert_eq!(offset_of!(XattrHeader, h_checksum), 16);
        assert_eq!(offset_of!(XattrEntry, e_value_offs), 2);
        assert_eq!(offset_of!(XattrEntry, e_value_inum), 4);
        assert_eq!(offset_of!(XattrEntry, e_value_size), 8);
        assert_eq!(offset_of!(XattrEntry, e_hash), 12);
        assert_eq!(xattr_entry_len(5), 24);
        assert_eq!(xattr_value_len(150), 152);
    }

    #[test]
    fn kernel_block_parses_hashes_and_verifies() {
        let block = kernel_block();
        let (h, entries) = parse_xattr_block(&block).unwrap();
        assert_eq!(h.h_refcount.get(), 1);
        let all: Vec<_> = entries.iter().map(|e| e.unwrap()).collect();
        assert_eq!(all.len(), 2);
        assert_eq!(
            (all[0].entry.e_name_index, all[0].name),
            (index::USER, &b"alpha"[..])
        );
        assert_eq!(all[0].value, XattrValue::Inline(&[b'A'; 200][..]));
        assert_eq!(
            (all[1].entry.e_name_index, all[1].name),
            (index::TRUSTED, &b"gamma"[..])
        );
        assert_eq!(all[1].value, XattrValue::Inline(&[b'B'; 150][..]));
        for e in &all {
            assert_eq!(e.compute_hash(false), Some(e.entry.e_hash.get()));
        }
        assert_eq!(entries.block_hash(), h.h_hash.get());
        assert_eq!(entries.block_hash(), 0x8962_3fe6);
        assert_eq!(entries.names_end(), 0x50);
        assert_eq!(entries.free_space(), 0x2a0 - 0x54);

        let seed = crate::checksum::fs_csum_seed(&KERNEL_UUID);
        assert_eq!(
            xattr_block_checksum(seed, BlockNr(1330), &block).unwrap(),
            0x5090_6662
        );
        verify_xattr_block_checksum(seed, BlockNr(1330), &block).unwrap();
        assert!(verify_xattr_block_checksum(seed, BlockNr(1331), &block).is_err());

        // Writing the same attributes reproduces the kernel's block.
        let mut out = vec![0xCCu8; 1024];
        write_xattr_block(
            &mut out,
            &[
                NewXattr {
                    name_index: index::TRUSTED,
                    name: b"gamma",
                    value: &[b'B'; 150],
                    ea_inode: None,
                },
                NewXattr {
                    name_index: index::USER,
                    name: b"alpha",
                    value: &[b'A'; 200],
                    ea_inode: None,
                },
            ],
        )
        .unwrap();
        set_xattr_block_checksum(seed, BlockNr(1330), &mut out).unwrap();
        assert_eq!(out, block);
    }

    /// The same file's inode: `user.beta` = "hello" in the inode body.
    #[test]
    fn kernel_ibody() {
        let rec = sparse(
            256,
            &[
                (
                    0x0,
                    "a4810000010000004f8b036b4f8b036b4f8b036b000000000000010004000000000008000500\
                     00000af3010004",
                ),
                (0x38, "01000000010c"),
                (0x64, "ba1c65933205"),
                (
                    0x7c,
                    "626c0000200066c694042c1d94042c1da8b5681b4f8b036ba8b5681b",
                ),
                (0xa2, "02ea0401540000000000050000000000000062657461"),
                (0xf8, "68656c6c6f"),
            ],
        );
        let seed = crate::checksum::fs_csum_seed(&KERNEL_UUID);
        crate::inode::verify_inode_checksum(seed, InodeNr(12), &rec).unwrap();
        let ino = crate::inode::Inode::parse(&rec).unwrap();
        assert_eq!(ino.file_acl(true), BlockNr(1330));
        let entries = parse_xattr_ibody(&rec).unwrap().unwrap();
        let all: Vec<_> = entries.iter().map(|e| e.unwrap()).collect();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].name, b"beta");
        assert_eq!(all[0].value, XattrValue::Inline(b"hello"));
        assert_eq!(all[0].offset, 0xa4);
        // The kernel leaves in-inode entry hashes at 0.
        assert_eq!(entries.block_hash(), 0);

        let mut out = rec.clone();
        write_xattr_ibody(
            &mut out,
            &[NewXattr {
                name_index: index::USER,
                name: b"beta",
                value: b"hello",
                ea_inode: None,
            }],
        )
        .unwrap();
        assert_eq!(out, rec);

        // No xattrs: 128-byte records, or no magic.
        assert!(parse_xattr_ibody(&rec[..128]).unwrap().is_none());
        let mut none = rec.clone();
        none[0xa3] = 0;
        assert!(parse_xattr_ibody(&none).unwrap().is_none());
    }

    #[test]
    fn names_and_prefixes() {
        assert_eq!(
            split_xattr_name(b"system.posix_acl_access"),
            Some((index::POSIX_ACL_ACCESS, &b""[..]))
        );
        assert_eq!(
            split_xattr_name(b"system.foo"),
            Some((index::SYSTEM, &b"foo"[..]))
        );
        assert_eq!(
            split_xattr_name(b"security.selinux"),
            Some((index::SECURITY, &b"selinux"[..]))
        );
        assert_eq!(split_xattr_name(b"user.x"), Some((index::USER, &b"x"[..])));
        assert_eq!(split_xattr_name(b"bogus.x"), None);
        assert_eq!(xattr_prefix(index::TRUSTED), Some("trusted."));
        assert_eq!(xattr_prefix(index::RICHACL), Some("system.richacl"));
        assert_eq!(xattr_prefix(0), None);
    }

    #[test]
    fn hash_variants() {
        // Signed and unsigned agree on ASCII, differ on high bytes.
        assert_eq!(
            xattr_entry_hash(b"abc", b"v", true),
            xattr_entry_hash(b"abc", b"v", false)
        );
        assert_ne!(
            xattr_entry_hash("é".as_bytes(), b"", true),
            xattr_entry_hash("é".as_bytes(), b"", false)
        );
        let name_only = xattr_entry_hash(b"n", b"", false);
        assert_eq!(
            xattr_ea_inode_entry_hash(b"n", 0x1234, false),
            name_only.rotate_left(16) ^ 0x1234
        );
    }

    #[test]
    fn bounds_are_checked() {
        let block = kernel_block();
        assert!(matches!(
            parse_xattr_block(&block[..20]),
            Err(FormatError::Truncated { .. })
        ));
        let mut b = block.clone();
        b[3] = 0;
        assert!(matches!(
            parse_xattr_block(&b),
            Err(FormatError::BadMagic { .. })
        ));
        let mut b = block.clone();
        b[8] = 2;
        assert!(parse_xattr_block(&b).is_err());
        // Value offset into the names.
        let mut b = block.clone();
        b[0x22] = 0x40;
        b[0x23] = 0;
        let (_, e) = parse_xattr_block(&b).unwrap();
        assert!(e.iter().next().unwrap().is_err());
        // Value past the end.
        let mut b = block.clone();
        b[0x28] = 201;
        let (_, e) = parse_xattr_block(&b).unwrap();
        assert!(e.iter().next().unwrap().is_err());
        // Huge value size.
        let mut b = block.clone();
        b[0x2b] = 0x10;
        let (_, e) = parse_xattr_block(&b).unwrap();
        assert!(e.iter().next().unwrap().is_err());
        // No terminator: the name list runs off the block.
        let mut b = vec![0x01u8; 64];
        b[..32].copy_from_slice(&block[..32]);
        assert!(parse_xattr_block(&b).is_err());
        // Too much to write.
        let mut out = vec![0u8; 1024];
        let big = NewXattr {
            name_index: index::USER,
            name: b"x",
            value: &[0; 1000],
            ea_inode: None,
        };
        assert!(write_xattr_block(&mut out, &[big]).is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1100), magic: bool) {
            let mut bytes = bytes;
            if magic && bytes.len() >= 12 {
                bytes[..4].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
                bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
            }
            if let Ok((_, e)) = parse_xattr_block(&bytes) {
                let n = e.iter().count();
                prop_assert!(n <= bytes.len() / XATTR_ENTRY_SIZE);
                let _ = (e.block_hash(), e.free_space());
            }
            if let Ok(Some(e)) = parse_xattr_ibody(&bytes) {
                let _ = e.iter().count();
            }
            let _ = verify_xattr_block_checksum(1, BlockNr(2), &bytes);
        }

        #[test]
        fn round_trip(
            attrs in proptest::collection::vec(
                (1u8..=8, proptest::collection::vec(any::<u8>(), 0..16), proptest::collection::vec(any::<u8>(), 0..40)),
                0..12,
            ),
        ) {
            let new: Vec<NewXattr<'_>> = attrs
                .iter()
                .map(|(i, n, v)| NewXattr { name_index: *i, name: n, value: v, ea_inode: None })
                .collect();
            let mut block = vec![0u8; 1024];
            write_xattr_block(&mut block, &new).unwrap();
            let (h, e) = parse_xattr_block(&block).unwrap();
            let mut got: Vec<(u8, Vec<u8>, Vec<u8>)> = Vec::new();
            for x in e.iter() {
                let x = x.unwrap();
                prop_assert_eq!(x.compute_hash(false), Some(x.entry.e_hash.get()));
                let XattrValue::Inline(v) = x.value else { panic!("inline expected") };
                got.push((x.entry.e_name_index, x.name.to_vec(), v.to_vec()));
            }
            let mut want: Vec<_> = attrs.clone();
            want.sort_by(|a, b| (a.0, a.1.len(), &a.1).cmp(&(b.0, b.1.len(), &b.1)));
            prop_assert_eq!(got, want);
            prop_assert_eq!(h.h_hash.get(), e.block_hash());
            // Re-serialising the parsed header gives the same bytes.
            prop_assert_eq!(h.as_bytes(), &block[..32]);
        }
    }
}
