//! Hashed b-tree (htree, dir_index) directories. Block 0 of an indexed
//! directory is the root (`struct dx_root`): fake "." and ".." entries, the
//! last of which spans the block so that old code sees an ordinary
//! directory block, then `struct dx_root_info` and the index entries.
//! Interior blocks (`struct dx_node`) start with one fake empty entry
//! spanning the block. Index entries (`struct dx_entry`) are (hash, block)
//! pairs; the first one's hash field holds `struct dx_countlimit` instead.
//! With metadata_csum, `struct dx_tail` follows the `limit` slots.
//!
//! Also here: the directory name hashes (legacy, half-MD4, TEA, each in a
//! signed-char and an unsigned-char flavour).
//!
//! See the kernel's `fs/ext4/namei.c` and `fs/ext4/hash.c`, e2fsprogs'
//! `lib/ext2fs/dirhash.c` and `Documentation/filesystems/ext4/directory.rst`.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::crc32c;
use crate::dir::{rec_len_from_disk, rec_len_to_disk, DirEntry2, DIR_ENTRY_HEADER_SIZE};
use crate::error::{need, FormatError, Result};
use crate::num;
use crate::types::InodeNr;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Size of `struct dx_root_info` (its required `info_length`).
pub const DX_ROOT_INFO_SIZE: usize = 8;
/// Size of an index entry.
pub const DX_ENTRY_SIZE: usize = 8;
/// Size of the checksum tail.
pub const DX_TAIL_SIZE: usize = 8;
/// Offset of the count/limit in a root block.
pub const DX_ROOT_COUNT_OFFSET: usize = 32;
/// Offset of the count/limit in an interior block.
pub const DX_NODE_COUNT_OFFSET: usize = 8;
/// Most `indirect_levels` any filesystem may use (3 levels with largedir;
/// 2 levels, i.e. `indirect_levels <= 1`, without).
pub const DX_MAX_INDIRECT_LEVELS: u8 = 2;
/// `unused_flags` bit the kernel rejects (`EXT2_HASH_FLAG_INCOMPAT`).
pub const DX_FLAG_INCOMPAT: u8 = 0x1;

/// Hash versions (`dx_root_info.hash_version`, `s_def_hash_version`). The
/// unsigned variants are never stored: they are what the stored version
/// means on a filesystem with the unsigned-hash flag in `s_flags`.
pub mod hash_version {
    /// Legacy (`dx_hack_hash`).
    pub const LEGACY: u8 = 0;
    /// Half MD4.
    pub const HALF_MD4: u8 = 1;
    /// TEA.
    pub const TEA: u8 = 2;
    /// Legacy over unsigned chars.
    pub const LEGACY_UNSIGNED: u8 = 3;
    /// Half MD4 over unsigned chars.
    pub const HALF_MD4_UNSIGNED: u8 = 4;
    /// TEA over unsigned chars.
    pub const TEA_UNSIGNED: u8 = 5;
    /// SipHash of casefolded encrypted names (needs the encryption key).
    pub const SIPHASH: u8 = 6;
}

/// `struct dx_root_info`.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct DxRootInfo {
    /// 0.
    pub reserved_zero: U32,
    /// A [`hash_version`] value.
    pub hash_version: u8,
    /// 8, the size of this structure.
    pub info_length: u8,
    /// Levels of interior nodes below the root.
    pub indirect_levels: u8,
    /// Flags; [`DX_FLAG_INCOMPAT`] must be clear.
    pub unused_flags: u8,
}

/// The fixed part of `struct dx_root`, up to the count/limit.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct DxRoot {
    /// The "." entry (`rec_len` 12).
    pub dot: DirEntry2,
    /// ".\0\0\0".
    pub dot_name: [u8; 4],
    /// The ".." entry, spanning the rest of the block.
    pub dotdot: DirEntry2,
    /// "..\0\0".
    pub dotdot_name: [u8; 4],
    /// The index description.
    pub info: DxRootInfo,
}

/// `struct dx_countlimit`, overlaying the hash of the first index entry.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct DxCountLimit {
    /// Slots in the block.
    pub limit: U16,
    /// Slots in use, including the first.
    pub count: U16,
}

/// `struct dx_entry`.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct DxEntry {
    /// Lowest hash that goes to `block` (unused in the first entry).
    pub hash: U32,
    /// Logical block within the directory.
    pub block: U32,
}

/// The fixed part of `struct dx_node`: one unused entry spanning the block.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct DxNode {
    /// Inode 0, `rec_len` = block size, name length 0.
    pub fake: DirEntry2,
}

/// `struct dx_tail`.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct DxTail {
    /// 0.
    pub dt_reserved: U32,
    /// See [`dx_checksum`].
    pub dt_checksum: U32,
}

const _: () = assert!(core::mem::size_of::<DxRootInfo>() == DX_ROOT_INFO_SIZE);
const _: () = assert!(core::mem::size_of::<DxRoot>() == DX_ROOT_COUNT_OFFSET);
const _: () = assert!(core::mem::size_of::<DxCountLimit>() == 4);
const _: () = assert!(core::mem::size_of::<DxEntry>() == DX_ENTRY_SIZE);
const _: () = assert!(core::mem::size_of::<DxNode>() == DX_NODE_COUNT_OFFSET);
const _: () = assert!(core::mem::size_of::<DxTail>() == DX_TAIL_SIZE);

impl DxEntry {
    /// An index entry.
    pub fn new(hash: u32, block: u32) -> Self {
        DxEntry {
            hash: hash.into(),
            block: block.into(),
        }
    }
}

/// Slots an index block holds (`dx_root_limit`, `dx_node_limit`): the space
/// after the count/limit, less the tail with metadata_csum.
pub fn dx_limit(block_size: usize, count_offset: usize, csum: bool) -> u16 {
    let tail = if csum { DX_TAIL_SIZE } else { 0 };
    let n = block_size.saturating_sub(count_offset + tail) / DX_ENTRY_SIZE;
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// The index entries of a root or interior block.
#[derive(Clone, Copy, Debug)]
pub struct DxEntries<'a> {
    /// Offset of the count/limit (32 in a root, 8 in a node).
    pub count_offset: usize,
    /// `limit`.
    pub limit: u16,
    entries: &'a [DxEntry],
}

impl<'a> DxEntries<'a> {
    /// `count`.
    pub fn count(&self) -> u16 {
        // The slice was cut to a `count` read as u16.
        num::sat_u16(self.entries.len())
    }

    /// Entry `i` as (hash, block); the first entry's hash is 0 (its slot
    /// holds the count/limit).
    pub fn get(&self, i: usize) -> Option<(u32, u32)> {
        let e = self.entries.get(i)?;
        let hash = if i == 0 { 0 } else { e.hash.get() };
        Some((hash, e.block.get()))
    }

    /// All entries as (hash, block).
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + 'a {
        let entries = self.entries;
        entries
            .iter()
            .enumerate()
            .map(|(i, e)| (if i == 0 { 0 } else { e.hash.get() }, e.block.get()))
    }
}

fn bad(detail: String) -> FormatError {
    FormatError::invalid("htree block", detail)
}

/// Reads count/limit at `count_offset` and borrows `count` entries,
/// checking `1 <= count <= limit` and that `limit` slots fit.
fn entries_at(block: &[u8], count_offset: usize) -> Result<DxEntries<'_>> {
    need("htree block", block, count_offset + DX_ENTRY_SIZE)?;
    let cl = DxCountLimit::read_from_bytes(&block[count_offset..count_offset + 4])
        .map_err(|_| bad("unreadable count/limit".into()))?;
    let (limit, count) = (cl.limit.get(), cl.count.get());
    if usize::from(limit) > (block.len() - count_offset) / DX_ENTRY_SIZE {
        return Err(bad(format!("limit {limit} does not fit in the block")));
    }
    if count == 0 || count > limit {
        return Err(bad(format!("count {count} with limit {limit}")));
    }
    let end = count_offset + usize::from(count) * DX_ENTRY_SIZE;
    let entries = <[DxEntry]>::ref_from_bytes(&block[count_offset..end])
        .map_err(|_| bad("unreadable entries".into()))?;
    Ok(DxEntries {
        count_offset,
        limit,
        entries,
    })
}

/// A parsed htree root block.
#[derive(Clone, Copy, Debug)]
pub struct DxRootBlock<'a> {
    /// The fake entries and `dx_root_info`.
    pub root: DxRoot,
    /// The index entries.
    pub entries: DxEntries<'a>,
}

/// Parses a directory's block 0 as an htree root, checking the fake "."
/// and ".." records, `info_length == 8`, `indirect_levels <= 2` and the
/// count/limit bounds. The hash version, `unused_flags`, whether `limit` is
/// the exact capacity and whether levels above 1 are allowed (largedir) are
/// the caller's to judge.
///
/// # Errors
/// [`FormatError::Truncated`] or [`FormatError::Invalid`].
pub fn parse_dx_root(block: &[u8]) -> Result<DxRootBlock<'_>> {
    need("htree root", block, DX_ROOT_COUNT_OFFSET)?;
    let root = DxRoot::read_from_bytes(&block[..DX_ROOT_COUNT_OFFSET])
        .map_err(|_| bad("unreadable root".into()))?;
    let bs = u32::try_from(block.len()).unwrap_or(u32::MAX);
    let dot_len = rec_len_from_disk(root.dot.rec_len.get(), bs);
    let dotdot_len = rec_len_from_disk(root.dotdot.rec_len.get(), bs);
    if dot_len != 12 || u64::from(dotdot_len) != u64::from(bs) - 12 {
        return Err(bad(format!(
            "root rec_len {dot_len}/{dotdot_len} in a block of {bs}"
        )));
    }
    if usize::from(root.info.info_length) != DX_ROOT_INFO_SIZE {
        return Err(bad(format!("info_length {}", root.info.info_length)));
    }
    if root.info.indirect_levels > DX_MAX_INDIRECT_LEVELS {
        return Err(bad(format!(
            "indirect_levels {}",
            root.info.indirect_levels
        )));
    }
    let entries = entries_at(block, DX_ROOT_COUNT_OFFSET)?;
    Ok(DxRootBlock { root, entries })
}

/// Parses an interior htree block (fake entry with `rec_len` = block size
/// and name length 0, then count/limit and entries).
///
/// # Errors
/// [`FormatError::Truncated`] or [`FormatError::Invalid`].
pub fn parse_dx_node(block: &[u8]) -> Result<DxEntries<'_>> {
    need("htree node", block, DX_NODE_COUNT_OFFSET)?;
    let node = DxNode::read_from_bytes(&block[..DX_NODE_COUNT_OFFSET])
        .map_err(|_| bad("unreadable node".into()))?;
    let bs = u32::try_from(block.len()).unwrap_or(u32::MAX);
    let rec = rec_len_from_disk(node.fake.rec_len.get(), bs);
    if rec != bs || node.fake.name_len != 0 {
        return Err(bad(format!(
            "node fake entry rec_len {rec}, name_len {}",
            node.fake.name_len
        )));
    }
    entries_at(block, DX_NODE_COUNT_OFFSET)
}

/// Where the count/limit pair of an htree root or interior node is, if
/// `block` looks like one, as libext2fs's `__get_dx_countlimit` decides
/// (tune2fs's rewrite of directory blocks uses it): an interior node's
/// unused record over the whole block, or a root's 12-byte `.` and a `..`
/// reaching the end with `dx_root_info` of length 8; count and limit
/// within the block.
pub fn dx_countlimit_offset(block: &[u8]) -> Option<usize> {
    let bs = u32::try_from(block.len()).ok()?;
    let (first, _) = DirEntry2::read_from_prefix(block).ok()?;
    let first_len = rec_len_from_disk(first.rec_len.get(), bs);
    let off = if first_len == bs && first.name_len == 0 && first.file_type == 0 {
        DX_NODE_COUNT_OFFSET
    } else if first_len == 12 {
        let (root, _) = DxRoot::read_from_prefix(block).ok()?;
        let second = rec_len_from_disk(root.dotdot.rec_len.get(), bs);
        if u64::from(second) != u64::from(bs) - 12
            || root.info.reserved_zero.get() != 0
            || usize::from(root.info.info_length) != DX_ROOT_INFO_SIZE
        {
            return None;
        }
        DX_ROOT_COUNT_OFFSET
    } else {
        return None;
    };
    let (cl, _) = DxCountLimit::read_from_prefix(block.get(off..)?).ok()?;
    let sane = (block.len() - off) / DX_ENTRY_SIZE;
    (usize::from(cl.limit.get()) <= sane && usize::from(cl.count.get()) <= sane).then_some(off)
}

/// The count/limit pair at `off` (from [`dx_countlimit_offset`]), to read
/// or change in place.
pub fn dx_countlimit_mut(block: &mut [u8], off: usize) -> Option<&mut DxCountLimit> {
    DxCountLimit::mut_from_prefix(block.get_mut(off..)?)
        .ok()
        .map(|(cl, _)| cl)
}

/// Locates count/limit the way the checksum code of e2fsprogs
/// (`__get_dx_countlimit`) and the kernel (`get_dx_countlimit`) do, and
/// the tail after `limit` slots: (count offset, count, tail offset).
fn csum_layout(block: &[u8]) -> Result<(usize, usize, usize)> {
    need("htree block", block, DX_ROOT_COUNT_OFFSET + 4)?;
    let bs = u32::try_from(block.len()).unwrap_or(u32::MAX);
    let first = rec_len_from_disk(u16::from_le_bytes([block[4], block[5]]), bs);
    let count_offset = if first == bs && block[6] == 0 {
        DX_NODE_COUNT_OFFSET
    } else if first == 12 {
        let second = rec_len_from_disk(u16::from_le_bytes([block[16], block[17]]), bs);
        let reserved = u32::from_le_bytes([block[24], block[25], block[26], block[27]]);
        if u64::from(second) != u64::from(bs) - 12
            || reserved != 0
            || usize::from(block[29]) != DX_ROOT_INFO_SIZE
        {
            return Err(bad("not an htree root".into()));
        }
        DX_ROOT_COUNT_OFFSET
    } else {
        return Err(bad("not an htree block".into()));
    };
    let limit = usize::from(u16::from_le_bytes([
        block[count_offset],
        block[count_offset + 1],
    ]));
    let count = usize::from(u16::from_le_bytes([
        block[count_offset + 2],
        block[count_offset + 3],
    ]));
    let sane = (block.len() - count_offset) / DX_ENTRY_SIZE;
    if limit > sane || count > sane {
        return Err(bad(format!("count {count} / limit {limit} out of range")));
    }
    let tail = count_offset + limit * DX_ENTRY_SIZE;
    if tail + DX_TAIL_SIZE > block.len() {
        return Err(bad("no space for the checksum tail".into()));
    }
    Ok((count_offset, count, tail))
}

/// The checksum of an htree root or interior block, as the kernel's
/// `ext4_dx_csum`: CRC32C from the directory inode's seed
/// ([`crate::inode::inode_csum_seed`]) over the block up to the end of the
/// `count` used entries, then the tail's `dt_reserved`, then four zero
/// bytes in place of `dt_checksum`. The tail sits after `limit` slots.
///
/// # Errors
/// [`FormatError::Invalid`] when the block is not an htree block or has no
/// room for the tail.
pub fn dx_checksum(inode_seed: u32, block: &[u8]) -> Result<u32> {
    let (count_offset, count, tail) = csum_layout(block)?;
    let crc = crc32c(inode_seed, &block[..count_offset + count * DX_ENTRY_SIZE]);
    let crc = crc32c(crc, &block[tail..tail + 4]);
    Ok(crc32c(crc, &[0; 4]))
}

/// Checks the checksum of an htree root or interior block.
///
/// # Errors
/// As [`dx_checksum`], or [`FormatError::BadChecksum`].
pub fn verify_dx_checksum(inode_seed: u32, block: &[u8]) -> Result<()> {
    let (_, _, tail) = csum_layout(block)?;
    let computed = dx_checksum(inode_seed, block)?;
    let t = &block[tail + 4..tail + 8];
    let stored = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    if stored != computed {
        return Err(FormatError::BadChecksum {
            what: "htree block",
            stored,
            computed,
        });
    }
    Ok(())
}

/// Computes and stores the checksum of an htree root or interior block.
///
/// # Errors
/// As [`dx_checksum`].
pub fn set_dx_checksum(inode_seed: u32, block: &mut [u8]) -> Result<()> {
    let (_, _, tail) = csum_layout(block)?;
    let crc = dx_checksum(inode_seed, block)?;
    block[tail + 4..tail + 8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

impl DxRoot {
    /// The fixed part of a root block for directory `dir` in `parent`.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] for a block size outside 1 KiB..64 KiB.
    pub fn new(
        dir: InodeNr,
        parent: InodeNr,
        block_size: u32,
        hash_version: u8,
        indirect_levels: u8,
    ) -> Result<Self> {
        if !(1024..=65536).contains(&block_size) || !block_size.is_power_of_two() {
            return Err(bad(format!("block size {block_size}")));
        }
        let dir_ft = crate::dir::ft::DIR;
        Ok(DxRoot {
            dot: DirEntry2 {
                inode: dir.0.into(),
                rec_len: 12.into(),
                name_len: 1,
                file_type: dir_ft,
            },
            dot_name: *b".\0\0\0",
            dotdot: DirEntry2 {
                inode: parent.0.into(),
                rec_len: rec_len_to_disk(block_size - 12, block_size)?.into(),
                name_len: 2,
                file_type: dir_ft,
            },
            dotdot_name: *b"..\0\0",
            info: DxRootInfo {
                reserved_zero: 0.into(),
                hash_version,
                #[allow(clippy::cast_possible_truncation)] // DX_ROOT_INFO_SIZE is 8
                info_length: DX_ROOT_INFO_SIZE as u8,
                indirect_levels,
                unused_flags: 0,
            },
        })
    }
}

/// Writes count/limit and entries at `count_offset`, zeroing the rest of
/// the block (including the tail, for [`set_dx_checksum`]).
fn write_entries(
    block: &mut [u8],
    count_offset: usize,
    entries: &[DxEntry],
    csum: bool,
) -> Result<()> {
    let limit = dx_limit(block.len(), count_offset, csum);
    if entries.is_empty() || entries.len() > usize::from(limit) {
        return Err(bad(format!("{} entries for limit {limit}", entries.len())));
    }
    block[count_offset..].fill(0);
    let bytes = entries.as_bytes();
    block[count_offset..count_offset + bytes.len()].copy_from_slice(bytes);
    let cl = DxCountLimit {
        limit: limit.into(),
        // At most `limit`, a u16, as checked above.
        count: num::sat_u16(entries.len()).into(),
    };
    block[count_offset..count_offset + 4].copy_from_slice(cl.as_bytes());
    Ok(())
}

/// Lays out a root block. The first entry's hash is ignored (count/limit
/// takes its place); `limit` is the block's capacity.
///
/// # Errors
/// [`FormatError::Invalid`] when the entries do not fit, or the block size
/// does not match the root's ".." record.
pub fn write_dx_root(
    block: &mut [u8],
    root: &DxRoot,
    entries: &[DxEntry],
    csum: bool,
) -> Result<()> {
    need("htree root", block, DX_ROOT_COUNT_OFFSET + DX_ENTRY_SIZE)?;
    let bs = u32::try_from(block.len()).unwrap_or(u32::MAX);
    if u64::from(rec_len_from_disk(root.dotdot.rec_len.get(), bs)) != u64::from(bs) - 12 {
        return Err(bad("root built for another block size".into()));
    }
    block[..DX_ROOT_COUNT_OFFSET].copy_from_slice(root.as_bytes());
    write_entries(block, DX_ROOT_COUNT_OFFSET, entries, csum)
}

/// Lays out an interior block, as [`write_dx_root`].
///
/// # Errors
/// [`FormatError::Invalid`] when the entries do not fit or the block size
/// is not valid.
pub fn write_dx_node(block: &mut [u8], entries: &[DxEntry], csum: bool) -> Result<()> {
    need("htree node", block, DX_NODE_COUNT_OFFSET + DX_ENTRY_SIZE)?;
    let bs = u32::try_from(block.len()).unwrap_or(u32::MAX);
    let node = DxNode {
        fake: DirEntry2 {
            inode: 0.into(),
            rec_len: rec_len_to_disk(bs, bs)?.into(),
            name_len: 0,
            file_type: 0,
        },
    };
    block[..DIR_ENTRY_HEADER_SIZE].copy_from_slice(node.as_bytes());
    write_entries(block, DX_NODE_COUNT_OFFSET, entries, csum)
}

// ---------------------------------------------------------------------------
// Name hashes.

/// A directory name hash: the major hash (bit 0 clear) orders entries in
/// the tree, the minor one breaks ties in readdir cookies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DxHash {
    /// Major hash.
    pub major: u32,
    /// Minor hash (0 for the legacy hash).
    pub minor: u32,
}

/// The seed used when the superblock's `s_hash_seed` is all zero: MD4's
/// initial state.
pub const DEFAULT_HASH_SEED: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// The hash version to use for a stored version: the signed versions
/// become unsigned on filesystems whose `s_flags` say so.
pub fn effective_hash_version(stored: u8, unsigned: bool) -> u8 {
    if unsigned && stored <= hash_version::TEA {
        stored + 3
    } else {
        stored
    }
}

/// A name byte as the hash sees it: a C `char` is signed on x86, so the
/// "signed" hashes sign-extend bytes above 0x7f.
fn char_val(b: u8, signed: bool) -> u32 {
    if signed {
        i32::from(b as i8) as u32
    } else {
        u32::from(b)
    }
}

/// The legacy hash (`dx_hack_hash`).
fn legacy_hash(name: &[u8], signed: bool) -> u32 {
    let (mut h0, mut h1) = (0x12a3_fe2du32, 0x37ab_e8f9u32);
    for &b in name {
        let mut h = h1.wrapping_add(h0 ^ char_val(b, signed).wrapping_mul(7_152_373));
        if h & 0x8000_0000 != 0 {
            h = h.wrapping_sub(0x7fff_ffff);
        }
        h1 = h0;
        h0 = h;
    }
    h0 << 1
}

/// Packs up to `out.len() * 4` bytes of `msg` big-end-first into words,
/// padding with a pattern of the remaining length (`str2hashbuf`).
fn str2hashbuf(msg: &[u8], out: &mut [u32], signed: bool) {
    // The kernel's `(__u32)len`.
    let len = num::lo32(msg.len() as u64);
    let mut pad = len | (len << 8);
    pad |= pad << 16;
    let take = msg.len().min(out.len() * 4);
    // Word by word: a byte loop asking "end of a word?" at every byte
    // cost as much as the hash it feeds.
    let pack = |bytes: &[u8]| {
        bytes
            .iter()
            .fold(pad, |val, &b| char_val(b, signed).wrapping_add(val << 8))
    };
    let mut words = msg[..take].chunks_exact(4);
    let mut k = 0;
    for (slot, word) in out.iter_mut().zip(&mut words) {
        // Four whole bytes shift the pad out: a word read big-endian,
        // unless a signed hash sign-extends a byte above 0x7f.
        let be = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        *slot = if !signed || be & 0x8080_8080 == 0 {
            be
        } else {
            pack(word)
        };
        k += 1;
    }
    if k < out.len() {
        // The partial word (or the pad alone when there is none).
        out[k] = pack(words.remainder());
        k += 1;
    }
    out[k..].fill(pad);
}

/// The TEA block cipher in Davies-Meyer mode, 16 rounds.
fn tea_transform(buf: &mut [u32; 4], input: &[u32; 4]) {
    const DELTA: u32 = 0x9E37_79B9;
    let (mut b0, mut b1) = (buf[0], buf[1]);
    let [a, b, c, d] = *input;
    let mut sum = 0u32;
    for _ in 0..16 {
        sum = sum.wrapping_add(DELTA);
        b0 = b0.wrapping_add(
            (b1 << 4).wrapping_add(a) ^ b1.wrapping_add(sum) ^ (b1 >> 5).wrapping_add(b),
        );
        b1 = b1.wrapping_add(
            (b0 << 4).wrapping_add(c) ^ b0.wrapping_add(sum) ^ (b0 >> 5).wrapping_add(d),
        );
    }
    buf[0] = buf[0].wrapping_add(b0);
    buf[1] = buf[1].wrapping_add(b1);
}

/// A word of the half-MD4 state: one hash's (`u32`), or the same word of
/// four hashes run side by side (`[u32; 4]`, lane `k` being hash `k`'s).
trait Md4Word: Copy {
    fn lanes(f: impl Fn(usize) -> u32) -> Self;
    fn lane(self, k: usize) -> u32;
}

impl Md4Word for u32 {
    #[inline(always)]
    fn lanes(f: impl Fn(usize) -> u32) -> Self {
        f(0)
    }
    #[inline(always)]
    fn lane(self, _: usize) -> u32 {
        self
    }
}

impl Md4Word for [u32; 4] {
    #[inline(always)]
    fn lanes(f: impl Fn(usize) -> u32) -> Self {
        [f(0), f(1), f(2), f(3)]
    }
    #[inline(always)]
    fn lane(self, k: usize) -> u32 {
        self[k]
    }
}

/// MD4's three rounds cut down to eight steps each, written out step by
/// step (a loop over a table of (word, shift) matched the step's roles
/// through a jump table, a mispredicted branch per step: a fsck hashes
/// every name of every indexed directory). On `[u32; 4]` words it runs
/// four hashes at once: the steps of one wait each for the one before,
/// and four chains side by side keep the processor's units busy.
#[inline(always)]
fn half_md4_transform<W: Md4Word>(buf: &mut [W; 4], x: &[W; 8]) {
    const K2: u32 = 0x5A82_7999;
    const K3: u32 = 0x6ED9_EBA1;
    #[inline(always)]
    fn f<W: Md4Word>(x: W, y: W, z: W) -> W {
        W::lanes(|k| {
            let (x, y, z) = (x.lane(k), y.lane(k), z.lane(k));
            z ^ (x & (y ^ z))
        })
    }
    #[inline(always)]
    fn g<W: Md4Word>(x: W, y: W, z: W) -> W {
        W::lanes(|k| {
            let (x, y, z) = (x.lane(k), y.lane(k), z.lane(k));
            (x & y).wrapping_add((x ^ y) & z)
        })
    }
    #[inline(always)]
    fn h<W: Md4Word>(x: W, y: W, z: W) -> W {
        W::lanes(|k| x.lane(k) ^ y.lane(k) ^ z.lane(k))
    }
    // a = (a + fn(b, c, d) + word + k) <<< s
    #[inline(always)]
    fn step<W: Md4Word>(v: W, fx: W, w: W, k: u32, s: u32) -> W {
        W::lanes(|i| {
            v.lane(i)
                .wrapping_add(fx.lane(i))
                .wrapping_add(w.lane(i))
                .wrapping_add(k)
                .rotate_left(s)
        })
    }
    let [mut a, mut b, mut c, mut d] = *buf;
    // Four steps, the roles rotating a, d, c, b.
    macro_rules! four {
        ($fn:ident, $k:expr, $($w:expr, $s:expr),+) => {
            let [(w0, s0), (w1, s1), (w2, s2), (w3, s3)] = [$(($w, $s)),+];
            a = step(a, $fn(b, c, d), x[w0], $k, s0);
            d = step(d, $fn(a, b, c), x[w1], $k, s1);
            c = step(c, $fn(d, a, b), x[w2], $k, s2);
            b = step(b, $fn(c, d, a), x[w3], $k, s3);
        };
    }
    four!(f, 0, 0, 3, 1, 7, 2, 11, 3, 19);
    four!(f, 0, 4, 3, 5, 7, 6, 11, 7, 19);
    four!(g, K2, 1, 3, 3, 5, 5, 9, 7, 13);
    four!(g, K2, 0, 3, 2, 5, 4, 9, 6, 13);
    four!(h, K3, 3, 3, 7, 9, 2, 11, 6, 15);
    four!(h, K3, 1, 3, 5, 9, 0, 11, 4, 15);
    for (out, v) in buf.iter_mut().zip([a, b, c, d]) {
        let was = *out;
        *out = W::lanes(|k| was.lane(k).wrapping_add(v.lane(k)));
    }
}

/// The major hash as both hashes end: the low bit cleared, and the 32-bit
/// EOF cookie moved (see [`dx_hash`]).
fn finish_major(major: u32) -> u32 {
    let major = major & !1;
    if major == 0x7fff_ffff << 1 {
        (0x7fff_ffff - 1) << 1
    } else {
        major
    }
}

/// [`dx_hash`] of four names, the same four results: names of up to 32
/// bytes under the half-MD4 hashes (nearly every name, under the default
/// hash) go through the hash side by side, about twice as fast as one at
/// a time; the rest one by one. For a checker hashing every name of every
/// indexed directory.
pub fn dx_hash4(version: u8, names: [&[u8]; 4], seed: &[u32; 4]) -> [Result<DxHash>; 4] {
    let half_md4 = matches!(
        version,
        hash_version::HALF_MD4 | hash_version::HALF_MD4_UNSIGNED
    );
    if !half_md4 || names.iter().any(|n| n.is_empty() || n.len() > 32) {
        return names.map(|n| dx_hash(version, n, seed));
    }
    let signed = version == hash_version::HALF_MD4;
    let start = if seed.iter().any(|&w| w != 0) {
        *seed
    } else {
        DEFAULT_HASH_SEED
    };
    // Word `w` of name `k` at `x[w][k]`; the state's word `i` at `buf[i][k]`.
    let mut x = [[0u32; 4]; 8];
    for (k, name) in names.iter().enumerate() {
        let mut input = [0u32; 8];
        str2hashbuf(name, &mut input, signed);
        for (w, v) in input.into_iter().enumerate() {
            x[w][k] = v;
        }
    }
    let mut buf = start.map(|w| [w; 4]);
    half_md4_transform(&mut buf, &x);
    [0, 1, 2, 3].map(|k| {
        Ok(DxHash {
            major: finish_major(buf[1][k]),
            minor: buf[2][k],
        })
    })
}

/// Hashes a directory entry name as the kernel's `__ext4fs_dirhash` (and
/// e2fsprogs' `ext2fs_dirhash`) for a [`hash_version`] (use
/// [`effective_hash_version`] for the unsigned flavours). `seed` is
/// `s_hash_seed` as four words; all zero selects [`DEFAULT_HASH_SEED`].
///
/// Like the kernel, a major hash of 0xfffffffe (reserved as the 32-bit EOF
/// cookie) becomes 0xfffffffc; e2fsprogs 1.47 does not remap it.
///
/// # Errors
/// [`FormatError::Invalid`] for SipHash (it needs the encryption key) and
/// unknown versions.
pub fn dx_hash(version: u8, name: &[u8], seed: &[u32; 4]) -> Result<DxHash> {
    let mut buf = if seed.iter().any(|&w| w != 0) {
        *seed
    } else {
        DEFAULT_HASH_SEED
    };
    let (major, minor) = match version {
        hash_version::LEGACY | hash_version::LEGACY_UNSIGNED => {
            (legacy_hash(name, version == hash_version::LEGACY), 0)
        }
        hash_version::HALF_MD4 | hash_version::HALF_MD4_UNSIGNED => {
            let signed = version == hash_version::HALF_MD4;
            let mut input = [0u32; 8];
            let mut rest = name;
            while !rest.is_empty() {
                str2hashbuf(rest, &mut input, signed);
                half_md4_transform(&mut buf, &input);
                rest = rest.get(32..).unwrap_or(&[]);
            }
            (buf[1], buf[2])
        }
        hash_version::TEA | hash_version::TEA_UNSIGNED => {
            let signed = version == hash_version::TEA;
            let mut input = [0u32; 4];
            let mut rest = name;
            while !rest.is_empty() {
                str2hashbuf(rest, &mut input, signed);
                tea_transform(&mut buf, &input);
                rest = rest.get(16..).unwrap_or(&[]);
            }
            (buf[0], buf[1])
        }
        v => {
            return Err(FormatError::invalid(
                "hash_version",
                format!("unsupported directory hash {v}"),
            ))
        }
    };
    Ok(DxHash {
        major: finish_major(major),
        minor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inode::inode_csum_seed;
    use crate::inode::tests::{sample_fs_seed, sparse};
    use proptest::prelude::*;

    /// `-E hash_seed=c0ffee15-1234-5678-9abc-def012345678` as words.
    const SEED: [u32; 4] = [0x15ee_ffc0, 0x7856_3412, 0xf0de_bc9a, 0x7856_3412];
    const LONG: &str = "hello_world_this_is_a_long_file_name_over_32_bytes_long.txt";
    const ACCENTED: &str = "héllo-wörld";
    /// Names ending one short of, on, and one past a 32-byte block.
    const W31: &str = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    const W32: &str = "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy";
    const W33: &str = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz";

    /// Reference values from e2fsprogs 1.47:
    /// `debugfs -R 'dx_hash -h V -s c0ffee15-1234-5678-9abc-def012345678 NAME'`.
    #[test]
    fn hashes_match_debugfs() {
        let cases: &[(u8, &str, u32, u32)] = &[
            (0, "a", 0xe74b53e2, 0),
            (0, "lost+found", 0x5e2aba24, 0),
            (0, LONG, 0xb8acff06, 0),
            (0, ACCENTED, 0x030e0ffc, 0),
            (0, "0123456789abcdefX", 0xedfb511e, 0),
            (1, "a", 0x370753c2, 0x3d239bb7),
            (1, "lost+found", 0x1f784db0, 0x5ab5de60),
            (1, LONG, 0xcd26dba4, 0x7f171bb2),
            (1, ACCENTED, 0x273af342, 0xc57e7ab9),
            (1, "0123456789abcdefX", 0xe9044d38, 0x0cb34070),
            (2, "a", 0x0146c2e6, 0x27dd5bbc),
            (2, "lost+found", 0x59d9c78c, 0x330ff91d),
            (2, LONG, 0xd7c0a67e, 0x761ac5c8),
            (2, ACCENTED, 0x8d353e58, 0xa70a40dd),
            (2, "0123456789abcdefX", 0x96207464, 0xc92dbcdb),
            // Every place a name can end in str2hashbuf's words and
            // chunks: within a word, on a word's end, on a chunk's end
            // and one past it.
            (1, "abc", 0x625a125a, 0xa73d57a1),
            (1, "abcd", 0xb623b9a6, 0x8a4feb54),
            (1, "abcde", 0xec8e62b6, 0x0691b10f),
            (1, "12345678", 0x477462b6, 0x1ad5c512),
            (1, W31, 0x5418dfc4, 0x289da478),
            (1, W32, 0xae71467a, 0xb84a75b1),
            (1, W33, 0x5b197252, 0xa0a1ab28),
            (2, "abc", 0xac672b04, 0x33ff95a3),
            (2, "abcd", 0x6d7a1344, 0x8b8ef8d9),
            (2, "abcde", 0x5d430c2a, 0x22e26a49),
            (2, "12345678", 0x2d619822, 0x076c4431),
            (2, W31, 0xa3c8b8ae, 0xfddb86ef),
            (2, W32, 0x53fab22a, 0xfc5c23f0),
            (2, W33, 0x74b33cb6, 0x5bedff3c),
            (3, ACCENTED, 0xdc831620, 0),
            (3, "lost+found", 0x5e2aba24, 0),
            (4, ACCENTED, 0x6701a2c8, 0x063b2b7e),
            (4, LONG, 0xcd26dba4, 0x7f171bb2),
            (5, ACCENTED, 0xc44f9ade, 0x442ca733),
            (5, "0123456789abcdefX", 0x96207464, 0xc92dbcdb),
        ];
        for &(v, name, major, minor) in cases {
            let h = dx_hash(v, name.as_bytes(), &SEED).unwrap();
            assert_eq!(h, DxHash { major, minor }, "version {v} name {name}");
        }
    }

    /// Same tool, zero seed (the default seed applies).
    #[test]
    fn zero_seed_uses_the_default() {
        let z = [0u32; 4];
        let cases: &[(u8, &str, u32, u32)] = &[
            (1, "a", 0xd5fa7d7a, 0xacb48187),
            (1, "lost+found", 0x591de422, 0x6ffc56e0),
            (1, LONG, 0xa0ddb9fc, 0x6fd234db),
            (4, ACCENTED, 0xee31688a, 0x162efc42),
            (2, "lost+found", 0x2dbf9e80, 0xbfebee4f),
            (5, ACCENTED, 0x9999f404, 0x4b25f49c),
        ];
        for &(v, name, major, minor) in cases {
            assert_eq!(
                dx_hash(v, name.as_bytes(), &z).unwrap(),
                DxHash { major, minor },
                "version {v} name {name}"
            );
            assert_eq!(
                dx_hash(v, name.as_bytes(), &DEFAULT_HASH_SEED).unwrap(),
                DxHash { major, minor }
            );
        }
        assert!(dx_hash(hash_version::SIPHASH, b"a", &z).is_err());
        assert!(dx_hash(9, b"a", &z).is_err());
        assert_eq!(effective_hash_version(1, true), 4);
        assert_eq!(effective_hash_version(1, false), 1);
        assert_eq!(effective_hash_version(6, true), 6);
    }

    /// From `debugfs -R 'htree /big'` on the sample image (signed half-MD4,
    /// the same seed).
    #[test]
    fn real_leaf_hashes() {
        let h = dx_hash(1, b"file_with_a_longish_name_26", &SEED).unwrap();
        assert_eq!((h.major, h.minor), (0x02bf_6bbe, 0x49ba_5060));
        let h = dx_hash(1, b"file_with_a_longish_name_11", &SEED).unwrap();
        assert_eq!((h.major, h.minor), (0x3526_92bc, 0xc81d_94e3));
    }

    #[test]
    fn offsets_match_the_kernel() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(DxRoot, dotdot), 12);
        assert_eq!(offset_of!(DxRoot, info), 24);
        assert_eq!(offset_of!(DxRootInfo, hash_version), 4);
        assert_eq!(offset_of!(DxRootInfo, indirect_levels), 6);
        assert_eq!(offset_of!(DxTail, dt_checksum), 4);
        assert_eq!(dx_limit(1024, DX_ROOT_COUNT_OFFSET, true), 123);
        assert_eq!(dx_limit(1024, DX_NODE_COUNT_OFFSET, true), 126);
        assert_eq!(dx_limit(4096, DX_ROOT_COUNT_OFFSET, false), 508);
    }

    /// The root of `/big` in the sample image (inode 12, generation
    /// 0xb16b00b5) after `e2fsck -fD`: one level, four leaves.
    fn real_root() -> Vec<u8> {
        sparse(
            1024,
            &[
                (
                    0x0,
                    "0c0000000c0001022e00000002000000f40302022e2e000000000000010800007b0004000100\
                     00005cf0ff5402000000783e448903000000f887f8dd04",
                ),
                (0x3fc, "94f2d846"),
            ],
        )
    }

    #[test]
    fn real_root_parses_and_verifies() {
        let block = real_root();
        let r = parse_dx_root(&block).unwrap();
        assert_eq!(r.root.info.hash_version, hash_version::HALF_MD4);
        assert_eq!(r.root.info.indirect_levels, 0);
        assert_eq!(r.root.dot.inode.get(), 12);
        assert_eq!((r.entries.count(), r.entries.limit), (4, 123));
        let got: Vec<_> = r.entries.iter().collect();
        assert_eq!(
            got,
            vec![(0, 1), (0x54ff_f05c, 2), (0x8944_3e78, 3), (0xddf8_87f8, 4)]
        );
        let seed = inode_csum_seed(sample_fs_seed(), InodeNr(12), 0xb16b_00b5);
        assert_eq!(dx_checksum(seed, &block).unwrap(), 0x46d8_f294);
        verify_dx_checksum(seed, &block).unwrap();
        // Bytes past the used entries are not covered; used ones are.
        let mut b = block.clone();
        b[0x100] = 0x55;
        verify_dx_checksum(seed, &b).unwrap();
        b[0x30] ^= 1;
        assert!(verify_dx_checksum(seed, &b).is_err());

        // The builder reproduces it.
        let root = DxRoot::new(InodeNr(12), InodeNr(2), 1024, hash_version::HALF_MD4, 0).unwrap();
        let entries: Vec<DxEntry> = got.iter().map(|&(h, b)| DxEntry::new(h, b)).collect();
        let mut out = vec![0xEEu8; 1024];
        write_dx_root(&mut out, &root, &entries, true).unwrap();
        set_dx_checksum(seed, &mut out).unwrap();
        assert_eq!(out, block);
    }

    /// A two-level tree: `/d` (inode 12, generation 0x0d0d0d0d) of a second
    /// image with 2500 files; its root and the second interior node.
    #[test]
    fn real_interior_node_verifies() {
        let seed = inode_csum_seed(sample_fs_seed(), InodeNr(12), 0x0d0d_0d0d);
        let root = sparse(
            1024,
            &[
                (
                    0x0,
                    "0c0000000c0001022e00000002000000f40302022e2e000000000000010801007b000200d200\
                     00005c8c499ad3",
                ),
                (0x3fc, "7fab78ad"),
            ],
        );
        let r = parse_dx_root(&root).unwrap();
        assert_eq!(r.root.info.indirect_levels, 1);
        assert_eq!(r.entries.get(1), Some((0x9a49_8c5c, 211)));
        verify_dx_checksum(seed, &root).unwrap();

        let node = sparse(
            1024,
            &[
                (0x4, "00040000"),
                (
                    0x8,
                    "7e0053007f00000056464c9b800000006c206a9c8100000098cd969d82000000a45bd99e83000000c40175a084000000\
                     54bffaa185000000ccc075a38600000024df39a487000000444d50a6880000004c8519a789000000b254b5a78a000000\
                     f84603a98b000000f075c0a98c000000c200c9aa8d0000007066d8ab8e000000c2a417ad8f000000b01612ae90000000\
                     2eaf6daf91000000d055b0b0920000001a591eb29300000066b375b3940000006e596ab495000000963484b596000000\
                     98ba9db6970000006ede05b898000000e8974ab999000000585676ba9a0000000a4cc8bb9b00000054b2b6bc9c000000\
                     22159abd9d000000b86586bf9e000000ec0935c19f000000f6a954c2a0000000620df4c3a10000004cebf6c4a2000000\
                     d0ee0dc6a30000008c7320c7a4000000aaa755c8a50000003cdd3bc9a6000000d4d8c7caa70000001ce5eccba8000000\
                     ac5a62cda90000009e4ececeaa0000006a6120d0ab0000008a1b02d1ac0000001c00add2ad00000060855cd4ae000000\
                     6e8d4cd5af000000fc2e87d6b000000022dee2d7b1000000ec3798d9b200000088a68adab3000000e2a250dcb4000000\
                     7a29adddb500000036256bdeb600000026395be0b70000001c7c64e1b8000000506051e3b9000000f6be2ce5ba000000\
                     7ec4afe6bb000000a8fb5ae7bc0000003ae709e8bd000000362940e9be00000054fc77eabf00000058f7d9ebc0000000\
                     c0cd93ecc1000000c2322ceec200000088fdf8eec3000000d606c1efc40000004c8750f1c5000000ee9238f2c6000000\
                     28ce8df3c70000006c536cf4c8000000248c83f5c900000054b21ff7ca000000f216d6f7cb0000008a56d5f8cc000000\
                     08d568facd000000000bdbfbce000000fe4b65fdcf000000f6cf19fed0000000e0b951ffd1000000",
                ),
                (0x3fc, "d688ecb7"),
            ],
        );
        let n = parse_dx_node(&node).unwrap();
        assert_eq!((n.count(), n.limit), (83, 126));
        assert_eq!(n.get(0), Some((0, 127)));
        assert_eq!(n.get(82), Some((0xff51_b9e0, 209)));
        assert_eq!(n.get(83), None);
        // Hashes ascend, as the tree requires.
        let hashes: Vec<u32> = n.iter().skip(1).map(|(h, _)| h).collect();
        assert!(hashes.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(dx_checksum(seed, &node).unwrap(), 0xb7ec_88d6);
        verify_dx_checksum(seed, &node).unwrap();
        assert!(parse_dx_root(&node).is_err());
        assert!(parse_dx_node(&root).is_err());

        let entries: Vec<DxEntry> = n.iter().map(|(h, b)| DxEntry::new(h, b)).collect();
        let mut out = vec![0x11u8; 1024];
        write_dx_node(&mut out, &entries, true).unwrap();
        set_dx_checksum(seed, &mut out).unwrap();
        assert_eq!(out, node);
    }

    #[test]
    fn bounds_are_checked() {
        let mut block = real_root();
        assert!(parse_dx_root(&block[..20]).is_err());
        // count above limit.
        block[0x22] = 124;
        assert!(parse_dx_root(&block).is_err());
        // limit beyond the block.
        block[0x22] = 4;
        block[0x20] = 200;
        assert!(parse_dx_root(&block).is_err());
        assert!(dx_checksum(0, &block).is_err());
        // limit leaves no room for the tail.
        block[0x20] = 124;
        assert!(parse_dx_root(&block).is_ok());
        assert!(dx_checksum(0, &block).is_err());
        // info_length.
        block[0x20] = 123;
        block[29] = 12;
        assert!(parse_dx_root(&block).is_err());
        assert!(dx_checksum(0, &block).is_err());
        block[29] = 8;
        block[30] = 3;
        assert!(parse_dx_root(&block).is_err());
        // Too many entries to write.
        let root = DxRoot::new(InodeNr(2), InodeNr(2), 1024, 1, 0).unwrap();
        let many = vec![DxEntry::new(0, 1); 124];
        assert!(write_dx_root(&mut block, &root, &many, true).is_err());
        assert!(write_dx_root(&mut block, &root, &[], true).is_err());
        assert!(write_dx_root(&mut [0u8; 2048], &root, &many[..1], true).is_err());
    }

    proptest! {
        #[test]
        fn root_round_trip(bytes in proptest::collection::vec(any::<u8>(), 1024), count in 1u16..=123, levels in 0u8..=2) {
            let mut block = bytes;
            let root = DxRoot::new(InodeNr(7), InodeNr(2), 1024, 1, levels).unwrap();
            block[..32].copy_from_slice(root.as_bytes());
            block[32..34].copy_from_slice(&123u16.to_le_bytes());
            block[34..36].copy_from_slice(&count.to_le_bytes());
            let end = 32 + usize::from(count) * 8;
            block[end..].fill(0);
            let parsed = parse_dx_root(&block).unwrap();
            let entries: Vec<DxEntry> = parsed.entries.iter().map(|(h, b)| DxEntry::new(h, b)).collect();
            let mut out = vec![0u8; 1024];
            write_dx_root(&mut out, &parsed.root, &entries, true).unwrap();
            prop_assert_eq!(out, block);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1100)) {
            let _ = parse_dx_root(&bytes);
            let _ = parse_dx_node(&bytes);
            let _ = verify_dx_checksum(1, &bytes);
        }

        #[test]
        fn hashes_never_panic(name in proptest::collection::vec(any::<u8>(), 0..300), v in 0u8..6, seed: [u32; 4]) {
            let h = dx_hash(v, &name, &seed).unwrap();
            prop_assert_eq!(h.major & 1, 0);
            prop_assert!(h.major != 0xffff_fffe);
        }

        #[test]
        fn names_pack_as_the_kernels_byte_loop(
            name in proptest::collection::vec(any::<u8>(), 0..40),
            signed: bool,
            words in 4usize..=8,
        ) {
            // The kernel's str2hashbuf, a byte at a time.
            let mut want = vec![0u32; words];
            let len = name.len() as u32;
            let mut pad = len | (len << 8);
            pad |= pad << 16;
            let mut val = pad;
            let mut at = 0;
            for (i, &b) in name.iter().take(words * 4).enumerate() {
                val = char_val(b, signed).wrapping_add(val << 8);
                if i % 4 == 3 {
                    want[at] = val;
                    at += 1;
                    val = pad;
                }
            }
            if at < words {
                want[at] = val;
                at += 1;
            }
            want[at..].fill(pad);
            let mut got = vec![0u32; words];
            str2hashbuf(&name, &mut got, signed);
            prop_assert_eq!(got, want);
        }

        #[test]
        fn four_at_once_are_four_one_at_a_time(
            names in proptest::array::uniform4(proptest::collection::vec(any::<u8>(), 0..40)),
            v in 0u8..7,
            zero_seed: bool,
            seed: [u32; 4],
        ) {
            // Half the cases with names short enough to go side by side,
            // and the default seed (all zero) among them.
            let seed = if zero_seed { [0; 4] } else { seed };
            let names = names.each_ref().map(|n| &n[..n.len().min(if v % 2 == 0 { 32 } else { 40 })]);
            let four = dx_hash4(v, names, &seed);
            for (n, h) in names.iter().zip(four) {
                prop_assert_eq!(h.ok(), dx_hash(v, n, &seed).ok());
            }
        }

        #[test]
        fn structs_round_trip(bytes in proptest::collection::vec(any::<u8>(), 32)) {
            let r = DxRoot::read_from_bytes(&bytes).unwrap();
            prop_assert_eq!(r.as_bytes(), &bytes[..]);
            let t = DxTail::read_from_bytes(&bytes[..8]).unwrap();
            prop_assert_eq!(t.as_bytes(), &bytes[..8]);
            let e = DxEntry::read_from_bytes(&bytes[..8]).unwrap();
            prop_assert_eq!(e.as_bytes(), &bytes[..8]);
        }
    }
}
