//! The few objects a new filesystem holds — reserved inodes, the root and
//! lost+found directories, the resize inode, the journal inode — encoded the
//! way mke2fs writes them (Documentation/filesystems/ext4/inodes.rst,
//! directory.rst, ifork.rst), checksums included.

use ext4r_format::num;

/// `i_flags`: the inode uses an extent tree.
pub(crate) const EXTENTS_FL: u32 = 0x0008_0000;
/// `i_flags`: immutable (quota files are).
pub(crate) const IMMUTABLE_FL: u32 = 0x0000_0010;
const EXTENT_MAGIC: u16 = 0xF30A;
/// Directory entry file type of a directory.
const FT_DIR: u8 = 2;

/// A raw inode record being filled in.
pub(crate) struct InodeBuf {
    pub bytes: Vec<u8>,
}

fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

impl InodeBuf {
    pub(crate) fn new(inode_size: usize) -> Self {
        InodeBuf {
            bytes: vec![0; inode_size],
        }
    }

    /// The fields `ext2fs_write_new_inode` fills: the three times, and with
    /// large inodes `i_extra_isize` and the creation time.
    pub(crate) fn new_file(inode_size: usize, mode: u16, links: u16, now: i64) -> Self {
        let mut i = InodeBuf::new(inode_size);
        i.set_mode(mode);
        i.set_links(links);
        i.set_times(now);
        if inode_size > 128 {
            put16(&mut i.bytes, 0x80, 32);
            put32(&mut i.bytes, 0x90, num::lo32(now as u64));
            // Epoch bits of crtime live in i_crtime_extra's low two bits.
            put32(&mut i.bytes, 0x94, ((now >> 32) as u32) & 3);
        }
        i
    }

    pub(crate) fn set_mode(&mut self, m: u16) {
        put16(&mut self.bytes, 0x00, m);
    }
    pub(crate) fn set_owner(&mut self, uid: u32, gid: u32) {
        put16(&mut self.bytes, 0x02, num::lo16(uid));
        put16(&mut self.bytes, 0x18, num::lo16(gid));
        put16(&mut self.bytes, 0x78, num::hi16(uid));
        put16(&mut self.bytes, 0x7A, num::hi16(gid));
    }
    pub(crate) fn set_size(&mut self, s: u64) {
        put32(&mut self.bytes, 0x04, num::lo32(s));
        put32(&mut self.bytes, 0x6C, num::hi32(s));
    }
    /// atime, ctime and mtime (the 32-bit parts; the epoch bits go to the
    /// `_extra` fields of large inodes).
    pub(crate) fn set_times(&mut self, now: i64) {
        for off in [0x08, 0x0C, 0x10] {
            put32(&mut self.bytes, off, num::lo32(now as u64));
        }
        if self.bytes.len() > 128 && (now >> 32) != 0 {
            for off in [0x84, 0x88, 0x8C] {
                put32(&mut self.bytes, off, ((now >> 32) as u32) & 3);
            }
        }
    }
    pub(crate) fn set_links(&mut self, n: u16) {
        put16(&mut self.bytes, 0x1A, n);
    }
    /// `i_blocks` in 512-byte units.
    pub(crate) fn set_sectors(&mut self, n: u64) {
        put32(&mut self.bytes, 0x1C, num::lo32(n));
        put16(&mut self.bytes, 0x74, num::hi16_of_48(n));
    }
    pub(crate) fn set_flags(&mut self, f: u32) {
        put32(&mut self.bytes, 0x20, f);
    }
    /// The 60 bytes of `i_block`.
    pub(crate) fn set_i_block(&mut self, data: &[u8; 60]) {
        self.bytes[0x28..0x28 + 60].copy_from_slice(data);
    }
    pub(crate) fn i_block(&self) -> [u8; 60] {
        let mut out = [0u8; 60];
        out.copy_from_slice(&self.bytes[0x28..0x28 + 60]);
        out
    }
}

/// An extent-tree root in `i_block` holding `extents` (at most four) as
/// `(logical, physical, len)`; or, with `leaf`, an index to that leaf.
pub(crate) fn extent_root(extents: &[(u64, u64, u64)], leaf: Option<u64>) -> [u8; 60] {
    let mut b = [0u8; 60];
    put16(&mut b, 0, EXTENT_MAGIC);
    put16(&mut b, 4, 4);
    match leaf {
        None => {
            // At most four, by this function's contract.
            put16(&mut b, 2, num::sat_u16(extents.len()));
            for (i, e) in extents.iter().enumerate() {
                put_extent(&mut b[12 + 12 * i..], *e);
            }
        }
        Some(l) => {
            // libext2fs splits a full root by copying it to the new leaf
            // and rewriting only the header and the first slot: slots 1-3
            // keep the second to fourth extents. mke2fs's journal inode
            // carries them, so ours does too.
            for (i, e) in extents.iter().enumerate().take(4).skip(1) {
                put_extent(&mut b[12 + 12 * i..], *e);
            }
            put16(&mut b, 2, 1);
            put16(&mut b, 6, 1);
            // ei_block 0, ei_leaf_lo, ei_leaf_hi.
            put32(&mut b, 12, 0);
            put32(&mut b, 16, num::lo32(l));
            put16(&mut b, 20, num::hi16_of_48(l));
        }
    }
    b
}

fn put_extent(b: &mut [u8], (l, p, n): (u64, u64, u64)) {
    #[allow(clippy::cast_possible_truncation)] // mkfs's files end far below 2^32 blocks
    put32(b, 0, l as u32);
    #[allow(clippy::cast_possible_truncation)] // journal runs cut at 32768, others tiny
    put16(b, 4, n as u16);
    put16(b, 6, num::hi16_of_48(p));
    put32(b, 8, num::lo32(p));
}

/// A depth-0 extent leaf block (its checksum tail, where the filesystem
/// has one, is stamped by the writer).
pub(crate) fn extent_leaf(block_size: usize, extents: &[(u64, u64, u64)]) -> Vec<u8> {
    let mut b = vec![0u8; block_size];
    let max = (block_size - 12) / 12;
    put16(&mut b, 0, EXTENT_MAGIC);
    // Both at most (65536 - 12) / 12.
    put16(&mut b, 2, num::sat_u16(extents.len()));
    put16(&mut b, 4, num::sat_u16(max));
    for (i, e) in extents.iter().enumerate() {
        put_extent(&mut b[12 + 12 * i..], *e);
    }
    b
}

/// One directory entry to lay out.
pub(crate) struct Entry<'a> {
    pub ino: u32,
    pub name: &'a [u8],
}

/// A directory block holding `entries` (the last one takes the remaining
/// space); with `tail` room for the checksum tail, which the writer
/// stamps.
/// An empty `entries` gives the "empty block" mke2fs uses to grow a
/// directory: one unused entry spanning the block.
pub(crate) fn dir_block(
    block_size: usize,
    entries: &[Entry<'_>],
    filetype: bool,
    tail: bool,
) -> Vec<u8> {
    let mut b = vec![0u8; block_size];
    let end = if tail { block_size - 12 } else { block_size };
    let mut off = 0;
    if entries.is_empty() {
        put16(&mut b, 4, rec_len_disk(end));
    }
    for (i, e) in entries.iter().enumerate() {
        let need = (8 + e.name.len() + 3) & !3;
        let rec = if i + 1 == entries.len() {
            end - off
        } else {
            need
        };
        put32(&mut b, off, e.ino);
        put16(&mut b, off + 4, rec_len_disk(rec));
        #[allow(clippy::cast_possible_truncation)] // mkfs's own names: ".", "..", "lost+found"
        let name_len = e.name.len() as u8;
        b[off + 6] = name_len;
        b[off + 7] = if filetype && e.ino != 0 { FT_DIR } else { 0 };
        b[off + 8..off + 8 + e.name.len()].copy_from_slice(e.name);
        off += rec;
    }
    if tail {
        // ext4_dir_entry_tail: inode 0, rec_len 12, name_len 0, type 0xDE.
        put16(&mut b, end + 4, 12);
        b[end + 7] = 0xDE;
    }
    b
}

/// rec_len on disk: 65536 is stored as 65535 (EXT4_MAX_REC_LEN) for 64 KiB
/// blocks, everything else as is.
fn rec_len_disk(len: usize) -> u16 {
    num::sat_u16(len)
}

/// The first block of the journal: a version-2 jbd2 superblock (big-endian)
/// as `ext2fs_create_journal_superblock2` makes it for an internal journal
/// (version 1 on request), `fc_blocks` of its `maxlen` blocks being the
/// fast-commit area.
pub(crate) fn journal_superblock(
    block_size: u32,
    maxlen: u32,
    uuid: &[u8; 16],
    fc_blocks: u32,
    v1: bool,
) -> Vec<u8> {
    let mut b = vec![0u8; block_size as usize];
    let be = |b: &mut [u8], off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_be_bytes());
    be(&mut b, 0x00, 0xC03B_3998);
    // JBD2_SUPERBLOCK_V1 / _V2.
    be(&mut b, 0x04, if v1 { 3 } else { 4 });
    be(&mut b, 0x0C, block_size);
    be(&mut b, 0x10, maxlen);
    be(&mut b, 0x14, 1);
    be(&mut b, 0x18, 1);
    b[0x30..0x40].copy_from_slice(uuid);
    be(&mut b, 0x40, 1);
    be(&mut b, 0x54, fc_blocks);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_block_layout() {
        let b = dir_block(
            1024,
            &[
                Entry { ino: 2, name: b"." },
                Entry {
                    ino: 2,
                    name: b"..",
                },
                Entry {
                    ino: 11,
                    name: b"lost+found",
                },
            ],
            true,
            true,
        );
        assert_eq!(&b[0..8], &[2, 0, 0, 0, 12, 0, 1, 2]);
        assert_eq!(u16::from_le_bytes([b[16], b[17]]), 12);
        assert_eq!(u16::from_le_bytes([b[28], b[29]]), 1024 - 24 - 12);
        assert_eq!(b[1024 - 12 + 7], 0xDE);
    }

    #[test]
    fn extent_root_with_leaf_is_an_index() {
        let r = extent_root(&[], Some(0x1_0000_0005));
        assert_eq!(u16::from_le_bytes([r[6], r[7]]), 1);
        assert_eq!(u32::from_le_bytes([r[16], r[17], r[18], r[19]]), 5);
        assert_eq!(u16::from_le_bytes([r[20], r[21]]), 1);
    }
}
