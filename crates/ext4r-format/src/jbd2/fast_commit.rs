//! Fast commits: the logical log the kernel (5.10 and later) writes after
//! the journal proper on filesystems with the `fast_commit` feature
//! (`Documentation/filesystems/ext4/journal.rst`, "Fast commits";
//! `fs/ext4/fast_commit.h`).
//!
//! A fast commit does not copy blocks. It records what changed as a stream
//! of tag-length-value records (little-endian, unlike the rest of jbd2):
//! extents added to or removed from an inode, directory entries created,
//! linked and unlinked, and raw inode records. Each `fsync` appends records
//! ending with a tail that carries the id of the running jbd2 transaction
//! and a CRC32C of every record since the previous tail; the first record
//! of the area is a head with the same transaction id. Records never cross
//! a block boundary, and a tail always fills its block.
//!
//! Only the fast commits of the transaction that was running when the
//! system stopped are valid: the head's and tails' ids must equal the id
//! after the last transaction the full log replays. [`FastCommitScan`] is
//! the kernel's scan pass (`ext4_fc_replay_scan`): it checks lengths, ids
//! and CRCs block by block and counts the records up to the last good tail;
//! the replay then applies exactly those.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::crc32c;
use crate::error::{FormatError, Result};
use crate::extent::Extent;
use crate::num;
use zerocopy::FromBytes;

/// Tag numbers (`EXT4_FC_TAG_*`).
pub mod tag {
    /// Blocks added to an inode: [`super::FcTag::AddRange`].
    pub const ADD_RANGE: u16 = 1;
    /// Logical blocks removed from an inode: [`super::FcTag::DelRange`].
    pub const DEL_RANGE: u16 = 2;
    /// A directory entry for a new inode: [`super::FcTag::Create`].
    pub const CREAT: u16 = 3;
    /// A directory entry for an existing inode: [`super::FcTag::Link`].
    pub const LINK: u16 = 4;
    /// A directory entry removed: [`super::FcTag::Unlink`].
    pub const UNLINK: u16 = 5;
    /// A raw inode record: [`super::FcTag::Inode`].
    pub const INODE: u16 = 6;
    /// Padding to the end of a block.
    pub const PAD: u16 = 7;
    /// The end of one fast commit: transaction id and CRC.
    pub const TAIL: u16 = 8;
    /// The start of the fast-commit area: features and transaction id.
    pub const HEAD: u16 = 9;
}

/// Bytes of a record's tag and length (`EXT4_FC_TAG_BASE_LEN`).
pub const FC_TAG_BASE_LEN: usize = 4;
/// Head features this format knows (`EXT4_FC_SUPPORTED_FEATURES`): none.
pub const FC_SUPPORTED_FEATURES: u32 = 0;
/// The longest name a dentry record may carry (`EXT4_NAME_LEN`).
pub const FC_NAME_MAX: usize = 255;
/// The shortest inode record (`EXT4_GOOD_OLD_INODE_SIZE`).
pub const FC_INODE_MIN: usize = 128;

/// A dentry record's value: parent directory, inode and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FcDentry<'a> {
    /// The directory holding the entry.
    pub parent: u32,
    /// The inode the entry names.
    pub ino: u32,
    /// The entry's name (1 to 255 bytes, not NUL-terminated).
    pub name: &'a [u8],
}

/// One record of the fast-commit stream, its value decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FcTag<'a> {
    /// Logical blocks of `ino` mapped to the extent's physical blocks
    /// (`struct ext4_fc_add_range`); the extent's unwritten flag applies.
    AddRange {
        /// The inode.
        ino: u32,
        /// The mapping, as an on-disk extent.
        extent: Extent,
    },
    /// `len` logical blocks of `ino` from `lblk` unmapped
    /// (`struct ext4_fc_del_range`).
    DelRange {
        /// The inode.
        ino: u32,
        /// First logical block.
        lblk: u32,
        /// Number of blocks (the kernel writes up to 2^31 - 1).
        len: u32,
    },
    /// An entry created for a new inode.
    Create(FcDentry<'a>),
    /// An entry added for an existing inode (link, or rename's new name).
    Link(FcDentry<'a>),
    /// An entry removed (unlink, or rename's old name).
    Unlink(FcDentry<'a>),
    /// The first `raw.len()` bytes of inode `ino`'s record
    /// (`struct ext4_fc_inode`): 128 plus its `i_extra_isize`.
    Inode {
        /// The inode.
        ino: u32,
        /// The record as it was in memory at the fast commit.
        raw: &'a [u8],
    },
    /// Padding.
    Pad,
    /// The end of a fast commit (`struct ext4_fc_tail`).
    Tail {
        /// The running transaction's id.
        tid: u32,
        /// CRC32C of the records since the previous tail, and of this
        /// tail's tag, length and `tid`.
        crc: u32,
    },
    /// The start of the area (`struct ext4_fc_head`).
    Head {
        /// Required features (none are defined).
        features: u32,
        /// The running transaction's id.
        tid: u32,
    },
}

/// A record as it lies in its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FcRecord<'a> {
    /// The tag number.
    pub tag: u16,
    /// The value, `fc_len` bytes.
    pub value: &'a [u8],
    /// Tag, length and value: what the CRC covers (all of it but a tail's
    /// CRC field).
    pub bytes: &'a [u8],
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_le_bytes)
}

/// Whether `block` (or its first bytes) starts with a HEAD record: the
/// first fast-commit block of an area that holds fast commits.
pub fn starts_with_head(block: &[u8]) -> bool {
    block.len() >= 2 && le16(block, 0) == tag::HEAD
}

/// Whether `len` is a valid value length for `tag` in a filesystem with
/// inodes of `inode_size` bytes (the kernel's `ext4_fc_value_len_isvalid`).
/// Unknown tags have no valid length.
pub fn value_len_valid(tag: u16, len: usize, inode_size: usize) -> bool {
    match tag {
        tag::ADD_RANGE => len == 16,
        tag::DEL_RANGE => len == 12,
        tag::CREAT | tag::LINK | tag::UNLINK => {
            (1..=FC_NAME_MAX).contains(&len.saturating_sub(8)) && len > 8
        }
        tag::INODE => len > 4 && (FC_INODE_MIN..=inode_size).contains(&(len - 4)),
        tag::PAD => true,
        tag::TAIL => len >= 8,
        tag::HEAD => len == 8,
        _ => false,
    }
}

/// The records of one fast-commit block, in order. Iteration ends at the
/// block's end, or with an error at the first record whose length runs
/// past the block or is not valid for its tag (after which the block is
/// not read further).
#[derive(Debug, Clone)]
pub struct FcRecords<'a> {
    block: &'a [u8],
    at: usize,
    inode_size: usize,
    failed: bool,
}

/// The records of `block` (see [`FcRecords`]).
pub fn records(block: &[u8], inode_size: usize) -> FcRecords<'_> {
    FcRecords {
        block,
        at: 0,
        inode_size,
        failed: false,
    }
}

impl<'a> Iterator for FcRecords<'a> {
    type Item = Result<FcRecord<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at + FC_TAG_BASE_LEN > self.block.len() {
            return None;
        }
        let tag = le16(self.block, self.at);
        let len = usize::from(le16(self.block, self.at + 2));
        let val = self.at + FC_TAG_BASE_LEN;
        if len > self.block.len() - val || !value_len_valid(tag, len, self.inode_size) {
            self.failed = true;
            return Some(Err(FormatError::invalid(
                "fast-commit record",
                format!(
                    "tag {tag} with length {len} at byte {} of its block",
                    self.at
                ),
            )));
        }
        let rec = FcRecord {
            tag,
            value: &self.block[val..val + len],
            bytes: &self.block[self.at..val + len],
        };
        self.at = val + len;
        Some(Ok(rec))
    }
}

impl<'a> FcRecord<'a> {
    /// The record's value decoded. Only records that [`records`] returned
    /// (lengths checked) are expected; others give an error.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] for an unknown tag or a value too short.
    pub fn decode(&self) -> Result<FcTag<'a>> {
        let v = self.value;
        let short = || {
            FormatError::invalid(
                "fast-commit record",
                format!("tag {} value of {} bytes", self.tag, v.len()),
            )
        };
        let dentry = || -> Result<FcDentry<'a>> {
            if v.len() <= 8 {
                return Err(short());
            }
            Ok(FcDentry {
                parent: le32(v, 0),
                ino: le32(v, 4),
                name: &v[8..],
            })
        };
        Ok(match self.tag {
            tag::ADD_RANGE => {
                let ext = v
                    .get(4..16)
                    .and_then(|b| Extent::read_from_bytes(b).ok())
                    .ok_or_else(short)?;
                FcTag::AddRange {
                    ino: le32(v, 0),
                    extent: ext,
                }
            }
            tag::DEL_RANGE if v.len() >= 12 => FcTag::DelRange {
                ino: le32(v, 0),
                lblk: le32(v, 4),
                len: le32(v, 8),
            },
            tag::CREAT => FcTag::Create(dentry()?),
            tag::LINK => FcTag::Link(dentry()?),
            tag::UNLINK => FcTag::Unlink(dentry()?),
            tag::INODE if v.len() > 4 => FcTag::Inode {
                ino: le32(v, 0),
                raw: &v[4..],
            },
            tag::PAD => FcTag::Pad,
            tag::TAIL if v.len() >= 8 => FcTag::Tail {
                tid: le32(v, 0),
                crc: le32(v, 4),
            },
            tag::HEAD if v.len() >= 8 => FcTag::Head {
                features: le32(v, 0),
                tid: le32(v, 4),
            },
            _ => return Err(short()),
        })
    }
}

/// Why a fast-commit area is refused as a whole. The kernel fails the
/// journal's recovery (and the mount) on these; they can only happen when
/// the area's first fast commit is damaged or from a newer kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FcScanError {
    /// The head requires features this format does not know (`EOPNOTSUPP`).
    #[error("fast-commit head requires unknown features {0:#x}")]
    UnknownFeatures(u32),
    /// The first fast commit's tail has the wrong transaction id or CRC
    /// (`EFSBADCRC`).
    #[error("the first fast commit's tail fails its CRC or transaction id (block {block})")]
    BadTail {
        /// The fast-commit block (0 = the area's first).
        block: u32,
    },
    /// A record that is not valid before the first good tail
    /// (`ECANCELED`).
    #[error("an invalid fast-commit record before the first complete fast commit (block {block})")]
    BadRecord {
        /// The fast-commit block.
        block: u32,
    },
}

/// What [`FastCommitScan::feed`] says about the next block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FcStep {
    /// Feed the next block.
    Continue,
    /// The valid part of the area has ended: [`FastCommitScan::tags`]
    /// records are to be replayed.
    Stop,
    /// The area is refused (see [`FcScanError`]); the kernel fails the
    /// recovery.
    Failed(FcScanError),
}

/// The kernel's scan of a fast-commit area (`ext4_fc_replay_scan`), fed one
/// block at a time from the area's first block.
///
/// An area whose first record is not a head has no fast commits. A head
/// with another transaction id is stale (left from a transaction the full
/// log has since committed): nothing is replayed. Otherwise records are
/// counted and their CRC chained until a tail; a tail with the expected id
/// and CRC makes every record up to it valid. The first record that is
/// invalid, unknown or a bad tail ends the valid part; before any good
/// tail that is an error.
#[derive(Debug, Clone)]
pub struct FastCommitScan {
    expected_tid: u32,
    inode_size: usize,
    next_block: u32,
    cur_tag: u64,
    valid_tags: u64,
    crc: u32,
    done: bool,
}

impl FastCommitScan {
    /// A scan for fast commits of transaction `expected_tid` (the first id
    /// the full log did not commit) on a filesystem with `inode_size`-byte
    /// inodes.
    pub fn new(expected_tid: u32, inode_size: usize) -> Self {
        FastCommitScan {
            expected_tid,
            inode_size,
            next_block: 0,
            cur_tag: 0,
            valid_tags: 0,
            crc: 0,
            done: false,
        }
    }

    /// Records to replay so far: those up to the last good tail, counted
    /// from the area's first (head, pads and tails included).
    pub fn tags(&self) -> u64 {
        self.valid_tags
    }

    /// Scans the area's next block.
    pub fn feed(&mut self, block: &[u8]) -> FcStep {
        if self.done {
            return FcStep::Stop;
        }
        let here = self.next_block;
        self.next_block = self.next_block.saturating_add(1);
        if here == 0 && le16(block, 0) != tag::HEAD {
            self.done = true;
            return FcStep::Stop;
        }
        let step = self.scan_block(here, block);
        if step != FcStep::Continue {
            self.done = true;
        }
        step
    }

    /// Stop when something has been replayed, else fail with `e`.
    fn end(&self, e: FcScanError) -> FcStep {
        if self.valid_tags > 0 {
            FcStep::Stop
        } else {
            FcStep::Failed(e)
        }
    }

    fn scan_block(&mut self, here: u32, block: &[u8]) -> FcStep {
        for rec in records(block, self.inode_size) {
            let Ok(rec) = rec else {
                return self.end(FcScanError::BadRecord { block: here });
            };
            match rec.tag {
                tag::ADD_RANGE
                | tag::DEL_RANGE
                | tag::LINK
                | tag::UNLINK
                | tag::CREAT
                | tag::INODE
                | tag::PAD => {
                    self.cur_tag += 1;
                    self.crc = crc32c(self.crc, rec.bytes);
                }
                tag::TAIL => {
                    self.cur_tag += 1;
                    // The CRC covers the tail's tag, length and id.
                    let covered = &rec.bytes[..FC_TAG_BASE_LEN + 4];
                    self.crc = crc32c(self.crc, covered);
                    let (tid, crc) = (le32(rec.value, 0), le32(rec.value, 4));
                    if tid == self.expected_tid && crc == self.crc {
                        self.valid_tags = self.cur_tag;
                    } else {
                        return self.end(FcScanError::BadTail { block: here });
                    }
                    self.crc = 0;
                }
                tag::HEAD => {
                    let features = le32(rec.value, 0);
                    if features & !FC_SUPPORTED_FEATURES != 0 {
                        return FcStep::Failed(FcScanError::UnknownFeatures(features));
                    }
                    if le32(rec.value, 4) != self.expected_tid {
                        return FcStep::Stop;
                    }
                    self.cur_tag += 1;
                    self.crc = crc32c(self.crc, rec.bytes);
                }
                _ => return self.end(FcScanError::BadRecord { block: here }),
            }
        }
        FcStep::Continue
    }
}

/// Lays the inode record a fast commit carries (`fc_raw`, 128 bytes plus
/// its extra fields) over the record on disk (`disk`, `s_inode_size`
/// bytes), as the kernel's replay does (`ext4_fc_replay_inode`): every
/// byte of `fc_raw` is taken but `i_block`, which keeps the mapping on
/// disk (the add-range and del-range records rebuild it), except that an
/// inline-data inode takes `fc_raw`'s `i_block` (it holds data), and an
/// extent-mapped inode whose kept `i_block` has no extent header gets an
/// empty root. Bytes of `disk` past `fc_raw`'s length (in-inode extended
/// attributes) are kept. The checksum is the caller's to set.
pub fn merge_inode_record(disk: &mut [u8], fc_raw: &[u8]) {
    use crate::extent::{ExtentHeader, EXTENT_MAGIC};
    use crate::inode::{Inode, InodeFlags};
    use zerocopy::IntoBytes;
    let i_block = core::mem::offset_of!(Inode, i_block);
    let i_generation = core::mem::offset_of!(Inode, i_generation);
    let n = fc_raw.len().min(disk.len());
    if n < i_generation {
        return;
    }
    disk[..i_block].copy_from_slice(&fc_raw[..i_block]);
    disk[i_generation..n].copy_from_slice(&fc_raw[i_generation..n]);
    let flags = InodeFlags::from_bits_retain(le32(fc_raw, core::mem::offset_of!(Inode, i_flags)));
    if flags.contains(InodeFlags::INLINE_DATA) {
        disk[i_block..i_generation].copy_from_slice(&fc_raw[i_block..i_generation]);
    } else if flags.contains(InodeFlags::EXTENTS) && le16(disk, i_block) != EXTENT_MAGIC {
        let root = &mut disk[i_block..i_generation];
        root.fill(0);
        let max = crate::extent::max_entries(root.len());
        root[..12].copy_from_slice(ExtentHeader::new(max, 0).as_bytes());
    }
}

/// Builds fast-commit blocks as the kernel writes them (records packed,
/// padding where a record does not fit, each tail filling its block); for
/// tests and for crafting areas.
#[derive(Debug, Clone)]
pub struct FcWriter {
    block_size: usize,
    blocks: Vec<Vec<u8>>,
    crc: u32,
}

impl FcWriter {
    /// A writer for `block_size`-byte blocks, starting with a head for
    /// transaction `tid`. A size above 64 KiB, the largest ext4 block, is
    /// taken as 64 KiB, so that every record length fits its 16-bit field.
    pub fn new(block_size: usize, tid: u32) -> Self {
        let mut w = FcWriter {
            block_size: block_size.min(1 << 16),
            blocks: Vec::new(),
            crc: 0,
        };
        let mut v = [0u8; 8];
        v[4..].copy_from_slice(&tid.to_le_bytes());
        w.record(tag::HEAD, &v);
        w
    }

    fn room(&self) -> usize {
        self.blocks.last().map_or(0, |b| self.block_size - b.len())
    }

    /// Appends a record, padding to a new block when it does not fit.
    /// Values longer than a block less the header are cut.
    pub fn record(&mut self, tag: u16, value: &[u8]) {
        // Record lengths below are under the block size, at most 64 KiB:
        // they fit their u16 fields without saturating.
        let value = &value[..value.len().min(self.block_size - FC_TAG_BASE_LEN)];
        let need = FC_TAG_BASE_LEN + value.len();
        if self.room() < need {
            self.pad();
        }
        let mut bytes = Vec::with_capacity(need);
        bytes.extend_from_slice(&tag.to_le_bytes());
        bytes.extend_from_slice(&num::sat_u16(value.len()).to_le_bytes());
        bytes.extend_from_slice(value);
        self.crc = crc32c(self.crc, &bytes);
        self.push(&bytes);
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.room() < bytes.len() {
            self.blocks.push(Vec::with_capacity(self.block_size));
        }
        if let Some(b) = self.blocks.last_mut() {
            b.extend_from_slice(bytes);
        }
    }

    /// Fills the rest of the current block with a pad record (or zeros
    /// when fewer than a record header's bytes are left).
    fn pad(&mut self) {
        let room = self.room();
        if room >= FC_TAG_BASE_LEN {
            let len = room - FC_TAG_BASE_LEN;
            let mut bytes = vec![0u8; room];
            bytes[..2].copy_from_slice(&tag::PAD.to_le_bytes());
            bytes[2..4].copy_from_slice(&num::sat_u16(len).to_le_bytes());
            self.crc = crc32c(self.crc, &bytes);
            self.push(&bytes);
        } else if room > 0 {
            self.push(&vec![0u8; room]);
        }
    }

    /// Ends a fast commit with a tail for `tid` that fills its block.
    pub fn tail(&mut self, tid: u32) {
        if self.room() < FC_TAG_BASE_LEN + 8 {
            self.pad();
        }
        let room = if self.room() == 0 {
            self.block_size
        } else {
            self.room()
        };
        let mut bytes = vec![0u8; room];
        bytes[..2].copy_from_slice(&tag::TAIL.to_le_bytes());
        bytes[2..4].copy_from_slice(&num::sat_u16(room - FC_TAG_BASE_LEN).to_le_bytes());
        bytes[4..8].copy_from_slice(&tid.to_le_bytes());
        let crc = crc32c(self.crc, &bytes[..8]);
        bytes[8..12].copy_from_slice(&crc.to_le_bytes());
        self.crc = 0;
        self.push(&bytes);
    }

    /// The blocks written so far, the last one zero-filled to its end.
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        if let Some(b) = self.blocks.last_mut() {
            b.resize(self.block_size, 0);
        }
        self.blocks
    }
}

/// The value of an add-range record.
pub fn add_range_value(ino: u32, extent: &Extent) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..4].copy_from_slice(&ino.to_le_bytes());
    v[4..].copy_from_slice(zerocopy::IntoBytes::as_bytes(extent));
    v
}

/// The value of a del-range record.
pub fn del_range_value(ino: u32, lblk: u32, len: u32) -> [u8; 12] {
    let mut v = [0u8; 12];
    v[..4].copy_from_slice(&ino.to_le_bytes());
    v[4..8].copy_from_slice(&lblk.to_le_bytes());
    v[8..].copy_from_slice(&len.to_le_bytes());
    v
}

/// The value of a create, link or unlink record.
pub fn dentry_value(parent: u32, ino: u32, name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + name.len());
    v.extend_from_slice(&parent.to_le_bytes());
    v.extend_from_slice(&ino.to_le_bytes());
    v.extend_from_slice(name);
    v
}

/// The value of an inode record.
pub fn inode_value(ino: u32, raw: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + raw.len());
    v.extend_from_slice(&ino.to_le_bytes());
    v.extend_from_slice(raw);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BlockNr;

    fn scan(blocks: &[Vec<u8>], tid: u32) -> (FcStep, u64) {
        let mut s = FastCommitScan::new(tid, 256);
        let mut last = FcStep::Continue;
        for b in blocks {
            last = s.feed(b);
            if last != FcStep::Continue {
                break;
            }
        }
        (last, s.tags())
    }

    fn two_commits(bs: usize) -> Vec<Vec<u8>> {
        let mut w = FcWriter::new(bs, 7);
        w.record(tag::INODE, &inode_value(12, &[0u8; 160]));
        let e = Extent::new(0, BlockNr(1000), 3, false).unwrap();
        w.record(tag::ADD_RANGE, &add_range_value(12, &e));
        w.record(tag::CREAT, &dentry_value(2, 12, b"file"));
        w.tail(7);
        w.record(tag::DEL_RANGE, &del_range_value(12, 1, 2));
        w.tail(7);
        w.finish()
    }

    #[test]
    fn good_area_counts_every_record_to_the_last_tail() {
        let blocks = two_commits(1024);
        assert_eq!(blocks.len(), 2, "each tail fills its block");
        // head, inode, add, creat, tail, del, tail; then zeros: a tag 0.
        let mut s = FastCommitScan::new(7, 256);
        assert_eq!(s.feed(&blocks[0]), FcStep::Continue);
        assert_eq!(s.tags(), 5);
        assert_eq!(s.feed(&blocks[1]), FcStep::Continue);
        assert_eq!(s.tags(), 7);
        assert_eq!(s.feed(&[0u8; 1024]), FcStep::Stop);
    }

    #[test]
    fn stale_head_replays_nothing_without_error() {
        assert_eq!(scan(&two_commits(1024), 8), (FcStep::Stop, 0));
    }

    #[test]
    fn no_head_means_no_fast_commits() {
        let mut blocks = two_commits(1024);
        blocks[0][0] = tag::PAD as u8;
        assert_eq!(scan(&blocks, 7), (FcStep::Stop, 0));
        assert_eq!(scan(&[vec![0u8; 1024]], 7), (FcStep::Stop, 0));
    }

    #[test]
    fn torn_second_commit_keeps_the_first() {
        let mut blocks = two_commits(1024);
        // Flip a byte of the del-range record: the second tail fails.
        blocks[1][6] ^= 1;
        assert_eq!(scan(&blocks, 7), (FcStep::Stop, 5));
    }

    #[test]
    fn torn_first_commit_is_an_error() {
        let mut blocks = two_commits(1024);
        blocks[0][20] ^= 1;
        assert_eq!(
            scan(&blocks, 7).0,
            FcStep::Failed(FcScanError::BadTail { block: 0 })
        );
        let mut blocks = two_commits(1024);
        // An unknown tag right after the head.
        blocks[0][12] = 0x55;
        assert_eq!(
            scan(&blocks, 7).0,
            FcStep::Failed(FcScanError::BadRecord { block: 0 })
        );
    }

    #[test]
    fn lengths_past_the_block_or_wrong_for_the_tag_end_the_scan() {
        let mut blocks = two_commits(1024);
        // The inode record's length now runs past the block.
        blocks[0][14..16].copy_from_slice(&2000u16.to_le_bytes());
        assert!(matches!(scan(&blocks, 7).0, FcStep::Failed(_)));
        assert!(!value_len_valid(tag::ADD_RANGE, 15, 256));
        assert!(!value_len_valid(tag::INODE, 4 + 127, 256));
        assert!(!value_len_valid(tag::INODE, 4 + 257, 256));
        assert!(value_len_valid(tag::INODE, 4 + 256, 256));
        assert!(!value_len_valid(tag::CREAT, 8, 256));
        assert!(!value_len_valid(tag::LINK, 8 + 256, 256));
        assert!(value_len_valid(tag::UNLINK, 8 + 255, 256));
        assert!(!value_len_valid(0, 0, 256));
    }

    #[test]
    fn unknown_head_features_are_refused() {
        let mut blocks = two_commits(1024);
        blocks[0][4] = 1;
        assert_eq!(
            scan(&blocks, 7).0,
            FcStep::Failed(FcScanError::UnknownFeatures(1))
        );
    }

    #[test]
    fn decode_round_trips_the_writer() {
        let blocks = two_commits(4096);
        let tags: Vec<_> = records(&blocks[0], 256)
            .map(|r| r.unwrap().decode().unwrap())
            .collect();
        assert!(matches!(
            tags[0],
            FcTag::Head {
                features: 0,
                tid: 7
            }
        ));
        assert!(matches!(tags[1], FcTag::Inode { ino: 12, raw } if raw.len() == 160));
        match tags[2] {
            FcTag::AddRange { ino: 12, extent } => {
                assert_eq!(extent.start(), BlockNr(1000));
                assert_eq!(extent.len(), 3);
            }
            ref t => panic!("{t:?}"),
        }
        assert_eq!(
            tags[3],
            FcTag::Create(FcDentry {
                parent: 2,
                ino: 12,
                name: b"file"
            })
        );
        assert!(matches!(tags[4], FcTag::Tail { tid: 7, .. }));
    }

    proptest::proptest! {
        #[test]
        fn scan_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000), tid in 0u32..4) {
            let mut s = FastCommitScan::new(tid, 256);
            for b in bytes.chunks(1024) {
                if s.feed(b) != FcStep::Continue { break; }
            }
            for r in records(&bytes, 256).flatten() {
                let _ = r.decode();
            }
        }
    }
}
