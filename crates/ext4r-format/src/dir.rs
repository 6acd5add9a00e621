//! Linear directory blocks: a chain of variable-length entries
//! (`struct ext4_dir_entry_2`: inode, record length, name length, file
//! type, name), each record 4-byte aligned and the last one reaching the end
//! of the block. With metadata_csum a 12-byte fake entry
//! (`struct ext4_dir_entry_tail`) at the end of the block holds a checksum.
//!
//! See the kernel's `fs/ext4/ext4.h`, `fs/ext4/namei.c` and
//! `Documentation/filesystems/ext4/directory.rst`.

#[allow(unused_imports)]
use crate::prelude::*;

pub mod leaf;

use crate::checksum::crc32c;
use crate::error::{need, FormatError, Result};
use crate::inode::mode;
use crate::num;
use crate::types::InodeNr;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Size of the fixed part of a directory entry.
pub const DIR_ENTRY_HEADER_SIZE: usize = 8;
/// Longest name (`EXT4_NAME_LEN`).
pub const NAME_LEN: usize = 255;
/// Size of the checksum tail.
pub const DIR_TAIL_SIZE: usize = 12;
/// Smallest record (`EXT4_DIR_REC_LEN(1)`).
pub const MIN_REC_LEN: usize = 12;
/// On-disk `rec_len` meaning "the whole 64 KiB block" (`EXT4_MAX_REC_LEN`).
pub const MAX_REC_LEN: u16 = u16::MAX;

/// Directory entry file types (`EXT4_FT_*`), valid with the filetype feature.
pub mod ft {
    /// Unknown.
    pub const UNKNOWN: u8 = 0;
    /// Regular file.
    pub const REG_FILE: u8 = 1;
    /// Directory.
    pub const DIR: u8 = 2;
    /// Character device.
    pub const CHRDEV: u8 = 3;
    /// Block device.
    pub const BLKDEV: u8 = 4;
    /// FIFO.
    pub const FIFO: u8 = 5;
    /// Socket.
    pub const SOCK: u8 = 6;
    /// Symbolic link.
    pub const SYMLINK: u8 = 7;
    /// One past the largest valid type.
    pub const MAX: u8 = 8;
    /// Marker in the checksum tail's file type slot.
    pub const DIR_CSUM: u8 = 0xDE;
}

/// The directory entry file type for an inode mode (`fs_umode_to_ftype`).
pub fn file_type_from_mode(m: u16) -> u8 {
    match m & mode::S_IFMT {
        mode::S_IFREG => ft::REG_FILE,
        mode::S_IFDIR => ft::DIR,
        mode::S_IFCHR => ft::CHRDEV,
        mode::S_IFBLK => ft::BLKDEV,
        mode::S_IFIFO => ft::FIFO,
        mode::S_IFSOCK => ft::SOCK,
        mode::S_IFLNK => ft::SYMLINK,
        _ => ft::UNKNOWN,
    }
}

/// The fixed part of `struct ext4_dir_entry_2`; the name follows.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct DirEntry2 {
    /// Inode number, 0 for an unused record.
    pub inode: U32,
    /// Record length, encoded (see [`rec_len_from_disk`]).
    pub rec_len: U16,
    /// Name length.
    pub name_len: u8,
    /// File type ([`ft`]) with the filetype feature, else the high byte
    /// of an ext2 16-bit name length (always 0 in practice).
    pub file_type: u8,
}

/// `struct ext4_dir_entry_tail`: the checksum record at the end of a leaf
/// block, shaped as an unused entry so that old code skips it.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct DirEntryTail {
    /// 0 (the fake entry's inode).
    pub det_reserved_zero1: U32,
    /// 12.
    pub det_rec_len: U16,
    /// 0 (the fake entry's name length).
    pub det_reserved_zero2: u8,
    /// [`ft::DIR_CSUM`].
    pub det_reserved_ft: u8,
    /// See [`dir_block_checksum`].
    pub det_checksum: U32,
}

const _: () = assert!(core::mem::size_of::<DirEntry2>() == DIR_ENTRY_HEADER_SIZE);
const _: () = assert!(core::mem::size_of::<DirEntryTail>() == DIR_TAIL_SIZE);

/// Decodes an on-disk `rec_len`. Blocks of 64 KiB cannot express 65536 in
/// 16 bits, so there 65535 or 0 mean the whole block and the two low bits
/// carry bits 16-17 (`ext4_rec_len_from_disk`; e2fsprogs keys this on the
/// block size as done here, the kernel on its page size).
pub fn rec_len_from_disk(raw: u16, block_size: u32) -> u32 {
    let len = u32::from(raw);
    if block_size < 65536 {
        len
    } else if raw == MAX_REC_LEN || raw == 0 {
        block_size
    } else {
        (len & 65532) | ((len & 3) << 16)
    }
}

/// Encodes a record length (`ext4_rec_len_to_disk`).
///
/// # Errors
/// [`FormatError::Invalid`] when `len` is not 4-aligned or exceeds the block.
pub fn rec_len_to_disk(len: u32, block_size: u32) -> Result<u16> {
    if len > block_size || len % 4 != 0 || block_size > 1 << 18 {
        return Err(FormatError::invalid(
            "rec_len",
            format!("{len} in a block of {block_size}"),
        ));
    }
    Ok(if let Ok(short) = u16::try_from(len) {
        short
    } else if len == block_size {
        if block_size == 65536 {
            MAX_REC_LEN
        } else {
            0
        }
    } else {
        // 65536 < len <= 2^18: bits 16-17 move into the (always zero)
        // low two bits of the 16-bit field.
        num::lo16((len & 65532) | ((len >> 16) & 3))
    })
}

/// The smallest record holding a name of `name_len` bytes
/// (`EXT4_DIR_REC_LEN`): header plus name, rounded up to 4.
pub fn rec_len_for_name(name_len: usize) -> usize {
    (DIR_ENTRY_HEADER_SIZE + name_len + 3) & !3
}

/// A directory entry read from a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirEntry<'a> {
    /// Byte offset of the entry in the block.
    pub offset: usize,
    /// Inode number (0: unused record).
    pub inode: InodeNr,
    /// Decoded record length.
    pub rec_len: u32,
    /// File type byte.
    pub file_type: u8,
    /// The name (`name_len` bytes).
    pub name: &'a [u8],
}

/// What is wrong with a directory entry, in the kernel's
/// `__ext4_check_dir_entry` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DirEntryProblem {
    /// `rec_len` below 12.
    RecLenTooSmall,
    /// `rec_len` not a multiple of 4.
    RecLenUnaligned,
    /// `rec_len` too small for `name_len`.
    NameTooLong,
    /// The record runs past the end of the block, or fewer bytes than a
    /// record header are left where it starts (a record before it left
    /// them: that record is sound, as e2fsck and the kernel read it, and
    /// the bytes after it are what is damaged).
    Overrun,
}

/// A directory entry that failed validation, with its byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("directory entry at offset {offset}: {problem:?} (rec_len {rec_len}, name_len {name_len})")]
pub struct BadDirEntry {
    /// Byte offset of the bad entry in the block.
    pub offset: usize,
    /// Its decoded `rec_len` (0 when even the header did not fit).
    pub rec_len: u32,
    /// Its `name_len`.
    pub name_len: u8,
    /// What is wrong.
    pub problem: DirEntryProblem,
}

impl From<BadDirEntry> for FormatError {
    fn from(e: BadDirEntry) -> Self {
        FormatError::invalid("directory entry", e.to_string())
    }
}

/// Iterates over the entries of a directory block, validating each record
/// before yielding it, and stopping at the first bad one (yielded as an
/// error) or at the checksum tail (not yielded). Unused records
/// (inode 0) are yielded: callers skip them.
///
/// The inode number is not checked against `s_inodes_count` here.
#[derive(Clone, Debug)]
pub struct DirBlockIter<'a> {
    buf: &'a [u8],
    block_size: u32,
    pos: usize,
    done: bool,
}

impl<'a> DirBlockIter<'a> {
    /// Iterates over a whole directory block.
    pub fn new(block: &'a [u8]) -> Self {
        let bs = u32::try_from(block.len()).unwrap_or(u32::MAX);
        Self::with_block_size(block, bs)
    }

    /// Iterates over a region that is not a whole block (inline data), with
    /// `rec_len` decoded for `block_size`.
    pub fn with_block_size(buf: &'a [u8], block_size: u32) -> Self {
        DirBlockIter {
            buf,
            block_size,
            pos: 0,
            done: false,
        }
    }

    fn check(&self, off: usize) -> core::result::Result<DirEntry<'a>, BadDirEntry> {
        let size = self.buf.len();
        let bad = |rec_len, name_len, problem| BadDirEntry {
            offset: off,
            rec_len,
            name_len,
            problem,
        };
        let Some(hdr) = self.buf.get(off..off + DIR_ENTRY_HEADER_SIZE) else {
            return Err(bad(0, 0, DirEntryProblem::Overrun));
        };
        let h = DirEntry2::read_from_bytes(hdr).map_err(|_| bad(0, 0, DirEntryProblem::Overrun))?;
        let rec = rec_len_from_disk(h.rec_len.get(), self.block_size);
        let rlen = rec as usize;
        let nl = h.name_len;
        let problem = if rlen < MIN_REC_LEN {
            Some(DirEntryProblem::RecLenTooSmall)
        } else if rlen % 4 != 0 {
            Some(DirEntryProblem::RecLenUnaligned)
        } else if rlen < rec_len_for_name(nl.into()) {
            Some(DirEntryProblem::NameTooLong)
        } else if off + rlen > size {
            Some(DirEntryProblem::Overrun)
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(bad(rec, nl, p));
        }
        let name_start = off + DIR_ENTRY_HEADER_SIZE;
        Ok(DirEntry {
            offset: off,
            inode: InodeNr(h.inode.get()),
            rec_len: rec,
            file_type: h.file_type,
            name: &self.buf[name_start..name_start + usize::from(nl)],
        })
    }
}

impl<'a> Iterator for DirBlockIter<'a> {
    type Item = core::result::Result<DirEntry<'a>, BadDirEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.buf.len() {
            return None;
        }
        if self.pos + DIR_TAIL_SIZE == self.buf.len() && DirEntryTail::find(self.buf).is_some() {
            self.done = true;
            return None;
        }
        match self.check(self.pos) {
            Ok(e) => {
                self.pos += e.rec_len as usize;
                Some(Ok(e))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl DirEntryTail {
    /// A tail with a zero checksum.
    pub fn new() -> Self {
        DirEntryTail {
            det_reserved_zero1: 0.into(),
            #[allow(clippy::cast_possible_truncation)] // DIR_TAIL_SIZE is 12
            det_rec_len: (DIR_TAIL_SIZE as u16).into(),
            det_reserved_zero2: 0,
            det_reserved_ft: ft::DIR_CSUM,
            det_checksum: 0.into(),
        }
    }

    /// The tail in the last 12 bytes of `block`, if they form one (checked
    /// as the kernel's `get_dirent_tail`: zero inode and name length,
    /// `rec_len` 12, file type 0xDE).
    pub fn find(block: &[u8]) -> Option<Self> {
        let start = block.len().checked_sub(DIR_TAIL_SIZE)?;
        let t = DirEntryTail::read_from_bytes(&block[start..]).ok()?;
        let ok = t.det_reserved_zero1.get() == 0
            && usize::from(t.det_rec_len.get()) == DIR_TAIL_SIZE
            && t.det_reserved_zero2 == 0
            && t.det_reserved_ft == ft::DIR_CSUM;
        ok.then_some(t)
    }
}

impl Default for DirEntryTail {
    fn default() -> Self {
        Self::new()
    }
}

/// The checksum of a directory leaf block, as the kernel's
/// `ext4_dirblock_csum`: CRC32C from the directory inode's seed
/// ([`crate::inode::inode_csum_seed`]) over the block before the tail.
///
/// # Errors
/// [`FormatError::Truncated`] when the block cannot hold a tail.
pub fn dir_block_checksum(inode_seed: u32, block: &[u8]) -> Result<u32> {
    need("directory block", block, DIR_TAIL_SIZE)?;
    Ok(crc32c(inode_seed, &block[..block.len() - DIR_TAIL_SIZE]))
}

fn missing_tail() -> FormatError {
    FormatError::invalid("directory block", "no checksum tail")
}

/// Checks the tail checksum of a directory leaf block.
///
/// # Errors
/// [`FormatError::Invalid`] when there is no tail, or
/// [`FormatError::BadChecksum`].
pub fn verify_dir_block_checksum(inode_seed: u32, block: &[u8]) -> Result<()> {
    let tail = DirEntryTail::find(block).ok_or_else(missing_tail)?;
    let computed = dir_block_checksum(inode_seed, block)?;
    let stored = tail.det_checksum.get();
    if stored != computed {
        return Err(FormatError::BadChecksum {
            what: "directory block",
            stored,
            computed,
        });
    }
    Ok(())
}

/// Computes and stores the tail checksum of a directory leaf block.
///
/// # Errors
/// [`FormatError::Invalid`] when there is no tail.
pub fn set_dir_block_checksum(inode_seed: u32, block: &mut [u8]) -> Result<()> {
    DirEntryTail::find(block).ok_or_else(missing_tail)?;
    let crc = dir_block_checksum(inode_seed, block)?;
    let n = block.len();
    block[n - 4..].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Lays out directory entries into a fresh block, each at its minimal
/// record length, the last stretched to the end (or to the tail). mkfs uses
/// it for the root directory and lost+found.
#[derive(Clone, Debug)]
pub struct DirBlockBuilder {
    buf: Vec<u8>,
    block_size: u32,
    end: usize,
    pos: usize,
    last: Option<usize>,
}

impl DirBlockBuilder {
    /// A builder for a block of `block_size` bytes, leaving room for the
    /// checksum tail when `with_tail`.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] for a block size outside 1 KiB..64 KiB.
    pub fn new(block_size: u32, with_tail: bool) -> Result<Self> {
        if !(1024..=65536).contains(&block_size) || !block_size.is_power_of_two() {
            return Err(FormatError::invalid(
                "directory block",
                format!("block size {block_size}"),
            ));
        }
        let len = block_size as usize;
        Ok(DirBlockBuilder {
            buf: vec![0; len],
            block_size,
            end: if with_tail { len - DIR_TAIL_SIZE } else { len },
            pos: 0,
            last: None,
        })
    }

    /// Whether an entry with a name of `name_len` bytes still fits.
    pub fn fits(&self, name_len: usize) -> bool {
        self.pos + rec_len_for_name(name_len) <= self.end
    }

    /// Appends an entry.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] for an empty or over-long name, or when the
    /// block is full.
    pub fn push(&mut self, inode: InodeNr, name: &[u8], file_type: u8) -> Result<()> {
        if name.is_empty() || name.len() > NAME_LEN {
            return Err(FormatError::invalid(
                "directory entry",
                format!("name of {} bytes", name.len()),
            ));
        }
        if !self.fits(name.len()) {
            return Err(FormatError::invalid("directory block", "full"));
        }
        let rec = rec_len_for_name(name.len());
        self.write_entry(self.pos, inode.0, num::sat_u32(rec), name, file_type)?;
        self.last = Some(self.pos);
        self.pos += rec;
        Ok(())
    }

    fn write_entry(
        &mut self,
        at: usize,
        inode: u32,
        rec: u32,
        name: &[u8],
        ftype: u8,
    ) -> Result<()> {
        let name_len = u8::try_from(name.len()).map_err(|_| {
            FormatError::invalid("directory entry", format!("name of {} bytes", name.len()))
        })?;
        let h = DirEntry2 {
            inode: inode.into(),
            rec_len: rec_len_to_disk(rec, self.block_size)?.into(),
            name_len,
            file_type: ftype,
        };
        self.buf[at..at + DIR_ENTRY_HEADER_SIZE].copy_from_slice(h.as_bytes());
        self.buf[at + DIR_ENTRY_HEADER_SIZE..at + DIR_ENTRY_HEADER_SIZE + name.len()]
            .copy_from_slice(name);
        Ok(())
    }

    /// The finished block: the last entry reaches the end (an empty block
    /// gets one unused entry covering it), then the tail if asked for, with
    /// a zero checksum for [`set_dir_block_checksum`] to fill in.
    ///
    /// # Errors
    /// Only on internal inconsistency (a record length that cannot be
    /// encoded), which the constructor rules out.
    pub fn finish(mut self) -> Result<Vec<u8>> {
        match self.last {
            Some(at) => {
                let rec = num::sat_u32(self.end - at);
                self.buf[at + 4..at + 6]
                    .copy_from_slice(&rec_len_to_disk(rec, self.block_size)?.to_le_bytes());
            }
            None => self.write_entry(0, 0, num::sat_u32(self.end), &[], 0)?,
        }
        if self.end < self.buf.len() {
            let end = self.end;
            self.buf[end..].copy_from_slice(DirEntryTail::new().as_bytes());
        }
        Ok(self.buf)
    }
}

impl DirBlockBuilder {
    /// The finished block with every entry at its minimal length and one
    /// unused record (inode 0, no name) over the rest: a block as the
    /// kernel leaves it when it moves an inline directory's entries out
    /// (mke2fs's lost+found on inline_data). Without entries, or when
    /// fewer than [`MIN_REC_LEN`] bytes are left, as [`Self::finish`].
    ///
    /// # Errors
    /// As [`Self::finish`].
    pub fn finish_with_unused_rest(mut self) -> Result<Vec<u8>> {
        if self.last.is_some() && self.end - self.pos >= MIN_REC_LEN {
            let at = self.pos;
            self.write_entry(at, 0, num::sat_u32(self.end - at), &[], 0)?;
            self.last = Some(at);
            self.pos = self.end;
        }
        self.finish()
    }
}

/// An inline directory's parent: the first four bytes of its inline data
/// (`EXT4_INLINE_DOTDOT_SIZE`), stored where a block's `..` entry would be;
/// `None` when the data is shorter.
pub fn inline_dir_parent(data: &[u8]) -> Option<InodeNr> {
    let (n, _) = U32::read_from_prefix(data).ok()?;
    Some(InodeNr(n.get()))
}

/// Stores an inline directory's parent ([`inline_dir_parent`]); `false`
/// when the data is shorter than its four bytes.
pub fn set_inline_dir_parent(data: &mut [u8], parent: InodeNr) -> bool {
    match U32::mut_from_prefix(data) {
        Ok((n, _)) => {
            n.set(parent.0);
            true
        }
        Err(_) => false,
    }
}

/// The `i_block` of a new, empty inline directory: the parent's number,
/// then one unused record over the other 56 bytes (as the kernel's mkdir
/// makes it on inline_data).
pub fn new_inline_dir(parent: InodeNr) -> [u8; 60] {
    let mut data = [0u8; 60];
    data[..4].copy_from_slice(U32::new(parent.0).as_bytes());
    let empty = DirEntry2 {
        inode: U32::new(0),
        rec_len: U16::new(56),
        name_len: 0,
        file_type: 0,
    };
    data[4..4 + core::mem::size_of::<DirEntry2>()].copy_from_slice(empty.as_bytes());
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inode::inode_csum_seed;
    use crate::inode::tests::{sample_fs_seed, sparse};
    use proptest::prelude::*;

    /// The root directory block of the sample image (root generation
    /// 0x2a2b2c2d), as written by mke2fs -d; debugfs reads it clean.
    fn real_root_block() -> Vec<u8> {
        sparse(
            1024,
            &[
                (
                    0x0,
                    "020000000c0001022e000000020000000c0002022e2e00000b00000014000a026c6f73742b\
                     666f756e6400000c0000000c000302626967005d0000001400090168656c6c6f2e747874\
                     0000005e0000000c0004076c696e6b5f000000100006017370617273650000600000008c\
                     030302737562",
                ),
                (0x3f8, "0c0000deb3b04138"),
            ],
        )
    }

    #[test]
    fn offsets_match_the_kernel() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(DirEntry2, rec_len), 4);
        assert_eq!(offset_of!(DirEntry2, name_len), 6);
        assert_eq!(offset_of!(DirEntry2, file_type), 7);
        assert_eq!(offset_of!(DirEntryTail, det_reserved_ft), 7);
        assert_eq!(offset_of!(DirEntryTail, det_checksum), 8);
    }

    #[test]
    fn real_block_iterates_and_verifies() {
        let block = real_root_block();
        let names: Vec<(u32, Vec<u8>, u8)> = DirBlockIter::new(&block)
            .map(|e| {
                let e = e.unwrap();
                (e.inode.0, e.name.to_vec(), e.file_type)
            })
            .collect();
        let want: Vec<(u32, Vec<u8>, u8)> = [
            (2, ".", ft::DIR),
            (2, "..", ft::DIR),
            (11, "lost+found", ft::DIR),
            (12, "big", ft::DIR),
            (93, "hello.txt", ft::REG_FILE),
            (94, "link", ft::SYMLINK),
            (95, "sparse", ft::REG_FILE),
            (96, "sub", ft::DIR),
        ]
        .iter()
        .map(|&(i, n, t)| (i, n.as_bytes().to_vec(), t))
        .collect();
        assert_eq!(names, want);
        let seed = inode_csum_seed(sample_fs_seed(), InodeNr(2), 0x2a2b_2c2d);
        assert_eq!(dir_block_checksum(seed, &block).unwrap(), 0x3841_b0b3);
        verify_dir_block_checksum(seed, &block).unwrap();
        let mut bad = block.clone();
        bad[200] = 1;
        assert!(matches!(
            verify_dir_block_checksum(seed, &bad),
            Err(FormatError::BadChecksum { .. })
        ));
    }

    #[test]
    fn builder_reproduces_mke2fs() {
        let mut b = DirBlockBuilder::new(1024, true).unwrap();
        for (ino, name, t) in [
            (2, ".", ft::DIR),
            (2, "..", ft::DIR),
            (11, "lost+found", ft::DIR),
            (12, "big", ft::DIR),
            (93, "hello.txt", ft::REG_FILE),
            (94, "link", ft::SYMLINK),
            (95, "sparse", ft::REG_FILE),
            (96, "sub", ft::DIR),
        ] {
            b.push(InodeNr(ino), name.as_bytes(), t).unwrap();
        }
        let mut block = b.finish().unwrap();
        let seed = inode_csum_seed(sample_fs_seed(), InodeNr(2), 0x2a2b_2c2d);
        set_dir_block_checksum(seed, &mut block).unwrap();
        assert_eq!(block, real_root_block());

        // /sub (inode 96, generation 0x5eed0001): "." and ".." only.
        let real_sub = sparse(
            1024,
            &[
                (0x0, "600000000c0001022e00000002000000e80302022e2e"),
                (0x3f8, "0c0000de519152d2"),
            ],
        );
        let mut b = DirBlockBuilder::new(1024, true).unwrap();
        b.push(InodeNr(96), b".", ft::DIR).unwrap();
        b.push(InodeNr(2), b"..", ft::DIR).unwrap();
        let mut block = b.finish().unwrap();
        let seed = inode_csum_seed(sample_fs_seed(), InodeNr(96), 0x5eed_0001);
        set_dir_block_checksum(seed, &mut block).unwrap();
        assert_eq!(block, real_sub);
    }

    #[test]
    fn empty_and_full_blocks() {
        let block = DirBlockBuilder::new(4096, false).unwrap().finish().unwrap();
        let e: Vec<_> = DirBlockIter::new(&block).collect();
        assert_eq!(e.len(), 1);
        let e = e[0].unwrap();
        assert_eq!((e.inode, e.rec_len), (InodeNr(0), 4096));
        assert!(verify_dir_block_checksum(0, &block).is_err());

        let mut b = DirBlockBuilder::new(1024, true).unwrap();
        let name = [b'x'; 250];
        for _ in 0..3 {
            b.push(InodeNr(5), &name, ft::REG_FILE).unwrap();
        }
        assert!(!b.fits(250));
        assert!(b.push(InodeNr(5), &name, ft::REG_FILE).is_err());
        assert!(b.push(InodeNr(5), b"", ft::REG_FILE).is_err());
        assert!(b.push(InodeNr(5), &[b'y'; 256], ft::REG_FILE).is_err());
    }

    #[test]
    fn inline_parent_is_set_in_place() {
        let mut data = new_inline_dir(InodeNr(2));
        assert!(set_inline_dir_parent(&mut data, InodeNr(0x0102_0304)));
        assert_eq!(inline_dir_parent(&data), Some(InodeNr(0x0102_0304)));
        assert_eq!(&data[4..], &new_inline_dir(InodeNr(2))[4..]);
        assert!(!set_inline_dir_parent(&mut [0u8; 3], InodeNr(1)));
    }

    #[test]
    fn unused_rest_follows_minimal_entries() {
        let mut b = DirBlockBuilder::new(1024, true).unwrap();
        b.push(InodeNr(11), b".", ft::DIR).unwrap();
        b.push(InodeNr(2), b"..", ft::DIR).unwrap();
        let block = b.finish_with_unused_rest().unwrap();
        let e: Vec<_> = DirBlockIter::new(&block).map(|e| e.unwrap()).collect();
        assert_eq!(e.len(), 3);
        assert_eq!((e[1].inode, e[1].rec_len), (InodeNr(2), 12));
        assert_eq!(
            (e[2].inode, e[2].offset, e[2].rec_len),
            (InodeNr(0), 24, 1024 - 24 - 12)
        );
        assert_eq!(e[2].name, b"");
        assert!(DirEntryTail::find(&block).is_some());
        // No entries: the same block finish gives.
        let empty = DirBlockBuilder::new(1024, false).unwrap();
        let plain = DirBlockBuilder::new(1024, false).unwrap().finish().unwrap();
        assert_eq!(empty.finish_with_unused_rest().unwrap(), plain);
    }

    #[test]
    fn large_block_rec_len_encoding() {
        assert_eq!(rec_len_to_disk(65536, 65536).unwrap(), 0xFFFF);
        assert_eq!(rec_len_from_disk(0xFFFF, 65536), 65536);
        assert_eq!(rec_len_from_disk(0, 65536), 65536);
        assert_eq!(rec_len_from_disk(12, 65536), 12);
        assert_eq!(rec_len_from_disk(12, 4096), 12);
        assert!(rec_len_to_disk(13, 4096).is_err());
        assert!(rec_len_to_disk(8192, 4096).is_err());
        let block = DirBlockBuilder::new(65536, false)
            .unwrap()
            .finish()
            .unwrap();
        assert_eq!(&block[4..6], &[0xFF, 0xFF]);
        assert_eq!(
            DirBlockIter::new(&block).next().unwrap().unwrap().rec_len,
            65536
        );
        let mut b = DirBlockBuilder::new(65536, true).unwrap();
        b.push(InodeNr(2), b".", ft::DIR).unwrap();
        let block = b.finish().unwrap();
        assert_eq!(DirBlockIter::new(&block).count(), 1);
    }

    #[test]
    fn bad_entries_report_their_offset() {
        let mut block = real_root_block();
        // "big" at offset 44: rec_len 12 -> 13.
        block[48] = 13;
        let errs: Vec<_> = DirBlockIter::new(&block).filter_map(|e| e.err()).collect();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].offset, 44);
        assert_eq!(errs[0].problem, DirEntryProblem::RecLenUnaligned);
        block[48] = 8;
        let e = DirBlockIter::new(&block).find_map(|e| e.err()).unwrap();
        assert_eq!(e.problem, DirEntryProblem::RecLenTooSmall);
        // name_len 20 in a 12-byte record.
        block[48] = 12;
        block[50] = 20;
        let e = DirBlockIter::new(&block).find_map(|e| e.err()).unwrap();
        assert_eq!(e.problem, DirEntryProblem::NameTooLong);
        block[50] = 3;
        // Last entry "sub" at 104 overruns.
        block[108] = 0x9c;
        let e = DirBlockIter::new(&block).find_map(|e| e.err()).unwrap();
        assert_eq!((e.offset, e.problem), (104, DirEntryProblem::Overrun));
        // Or leaves 8 bytes, too few for another entry: the record is
        // read, the 8 bytes after it are the bad entry, as e2fsck's
        // check_dir_block and the kernel find them.
        block[108] = 0x90;
        let mut it = DirBlockIter::new(&block);
        assert!(it
            .by_ref()
            .any(|e| e.is_ok_and(|e| e.offset == 104 && e.rec_len == 912)));
        let e = it.next().unwrap().unwrap_err();
        assert_eq!(e.offset, 1016);
        let fe: FormatError = e.into();
        assert!(fe.to_string().contains("offset 1016"));
        // Or 4, too few for a header.
        block[108] = 0x94;
        let e = DirBlockIter::new(&block).find_map(|e| e.err()).unwrap();
        assert_eq!((e.offset, e.problem), (1020, DirEntryProblem::Overrun));
        // Truncated input.
        assert!(DirBlockIter::new(&[1, 2, 3]).next().unwrap().is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let n = DirBlockIter::new(&bytes).count();
            prop_assert!(n <= bytes.len() / MIN_REC_LEN + 1);
            let _ = verify_dir_block_checksum(3, &bytes);
        }

        #[test]
        fn round_trip(names in proptest::collection::vec(proptest::collection::vec(1u8..=255, 1..=40), 0..20), tail: bool) {
            let mut b = DirBlockBuilder::new(1024, tail).unwrap();
            let mut pushed = Vec::new();
            for (i, n) in names.iter().enumerate() {
                if b.fits(n.len()) {
                    b.push(InodeNr(i as u32 + 1), n, ft::REG_FILE).unwrap();
                    pushed.push(n.clone());
                }
            }
            let block = b.finish().unwrap();
            let mut rebuilt = DirBlockBuilder::new(1024, tail).unwrap();
            let mut seen = Vec::new();
            for e in DirBlockIter::new(&block) {
                let e = e.unwrap();
                if e.inode.0 != 0 {
                    rebuilt.push(e.inode, e.name, e.file_type).unwrap();
                    seen.push(e.name.to_vec());
                }
            }
            prop_assert_eq!(seen, pushed);
            prop_assert_eq!(rebuilt.finish().unwrap(), block);
        }

        #[test]
        fn structs_round_trip(bytes in proptest::collection::vec(any::<u8>(), 12)) {
            let h = DirEntry2::read_from_bytes(&bytes[..8]).unwrap();
            prop_assert_eq!(h.as_bytes(), &bytes[..8]);
            let t = DirEntryTail::read_from_bytes(&bytes).unwrap();
            prop_assert_eq!(t.as_bytes(), &bytes[..]);
        }

        #[test]
        fn rec_len_round_trip(quarter in 3u32..=16384, shift in 10u32..=16) {
            let bs = 1u32 << shift;
            let len = (quarter * 4).min(bs);
            let raw = rec_len_to_disk(len, bs).unwrap();
            prop_assert_eq!(rec_len_from_disk(raw, bs), len);
        }
    }
}
