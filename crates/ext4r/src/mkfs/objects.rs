//! The few objects a new filesystem holds — reserved inodes, the root and
//! lost+found directories, the resize inode, the journal inode — encoded the
//! way mke2fs writes them (Documentation/filesystems/ext4/inodes.rst,
//! directory.rst, ifork.rst), checksums included.

use crate::error::{Error, Result};
use ext4r_format::dir::{ft, DirBlockBuilder};
use ext4r_format::extent::{self, Extent, ExtentIdx};
use ext4r_format::inode::Inode;
use ext4r_format::jbd2::{block_type, JournalHeader, JournalSuperblock};
use ext4r_format::{num, BlockNr, InodeNr};

/// `i_flags`: the inode uses an extent tree.
pub(crate) const EXTENTS_FL: u32 = 0x0008_0000;
/// `i_flags`: immutable (quota files are).
pub(crate) const IMMUTABLE_FL: u32 = 0x0000_0010;

/// A raw inode record being filled in, through the format crate's
/// [`Inode`] view of its first 160 bytes.
pub(crate) struct InodeBuf {
    pub bytes: Vec<u8>,
}

impl InodeBuf {
    /// A zeroed record of `inode_size` bytes (`s_inode_size`, at least 128).
    pub(crate) fn new(inode_size: usize) -> Self {
        InodeBuf {
            bytes: vec![0; inode_size],
        }
    }

    /// Changes fields through the [`Inode`] view. The record holds at
    /// least the 128 bytes the view needs (mkfs's inode sizes start there),
    /// so neither the read nor the write back can fail.
    fn edit(&mut self, f: impl FnOnce(&mut Inode)) {
        if let Ok(mut inode) = Inode::parse(&self.bytes) {
            f(&mut inode);
            let _ = inode.write(&mut self.bytes);
        }
    }

    /// Whether the record has the large inode's extra fields.
    fn large(&self) -> bool {
        self.bytes.len() > 128
    }

    /// The fields `ext2fs_write_new_inode` fills: the three times, and with
    /// large inodes `i_extra_isize` and the creation time.
    pub(crate) fn new_file(inode_size: usize, mode: u16, links: u16, now: i64) -> Self {
        let mut i = InodeBuf::new(inode_size);
        i.set_mode(mode);
        i.set_links(links);
        i.set_times(now);
        if i.large() {
            i.edit(|i| {
                i.i_extra_isize.set(32);
                i.i_crtime.set(num::lo32(now as u64));
                // Epoch bits of crtime live in i_crtime_extra's low two bits.
                i.i_crtime_extra.set(((now >> 32) as u32) & 3);
            });
        }
        i
    }

    pub(crate) fn set_mode(&mut self, m: u16) {
        self.edit(|i| i.set_mode(m));
    }
    pub(crate) fn set_owner(&mut self, uid: u32, gid: u32) {
        self.edit(|i| {
            i.set_uid(uid);
            i.set_gid(gid);
        });
    }
    pub(crate) fn set_size(&mut self, s: u64) {
        self.edit(|i| i.set_size(s));
    }
    /// atime, ctime and mtime (the 32-bit parts; the epoch bits go to the
    /// `_extra` fields of large inodes, as libext2fs puts them: the high
    /// bits of the time, not the kernel's signed encoding).
    pub(crate) fn set_times(&mut self, now: i64) {
        let large = self.large();
        self.edit(|i| {
            let base = num::lo32(now as u64);
            i.i_atime.set(base);
            i.i_ctime.set(base);
            i.i_mtime.set(base);
            if large && (now >> 32) != 0 {
                let epoch = ((now >> 32) as u32) & 3;
                i.i_ctime_extra.set(epoch);
                i.i_mtime_extra.set(epoch);
                i.i_atime_extra.set(epoch);
            }
        });
    }
    pub(crate) fn set_links(&mut self, n: u16) {
        self.edit(|i| i.set_links_count(n));
    }
    /// `i_blocks` in 512-byte units, 48 bits as huge_file stores them (no
    /// file mkfs makes needs the HUGE_FILE flag's unit).
    pub(crate) fn set_sectors(&mut self, n: u64) {
        self.edit(|i| {
            i.i_blocks_lo.set(num::lo32(n));
            i.l_i_blocks_high.set(num::hi16_of_48(n));
        });
    }
    pub(crate) fn set_flags(&mut self, f: u32) {
        self.edit(|i| i.i_flags.set(f));
    }
    /// The 60 bytes of `i_block`.
    pub(crate) fn set_i_block(&mut self, data: &[u8; 60]) {
        self.edit(|i| i.i_block = *data);
    }
    /// `i_block` as a block map's fifteen pointers.
    pub(crate) fn set_block_words(&mut self, words: &[u32; 15]) {
        self.edit(|i| i.set_block_words(words));
    }
    pub(crate) fn i_block(&self) -> [u8; 60] {
        Inode::parse(&self.bytes).map_or([0; 60], |i| i.i_block)
    }
}

/// A `(logical, physical, len)` run as an extent. mkfs's files end far
/// below 2^32 blocks and its runs are cut at 32768 blocks.
fn extent_of(&(l, p, n): &(u64, u64, u64)) -> Result<Extent> {
    let (Ok(l), Ok(n)) = (u32::try_from(l), u16::try_from(n)) else {
        return Err(Error::InvalidArgument(format!(
            "extent of {n} blocks at logical {l}: too large for one extent"
        )));
    };
    Extent::new(l, BlockNr(p), n, false).map_err(|e| Error::corrupt("new extent", e))
}

fn extents_of(runs: &[(u64, u64, u64)]) -> Result<Vec<Extent>> {
    runs.iter().map(extent_of).collect()
}

/// An extent-tree root in `i_block` holding `extents` (at most four) as
/// `(logical, physical, len)`; or, with `leaf`, an index to that leaf.
pub(crate) fn extent_root(extents: &[(u64, u64, u64)], leaf: Option<u64>) -> Result<[u8; 60]> {
    let mut b = [0u8; 60];
    let bad = |e| Error::corrupt("new extent root", e);
    match leaf {
        None => extent::write_leaf(&mut b, &extents_of(extents)?).map_err(bad)?,
        Some(l) => {
            // libext2fs splits a full root by copying it to the new leaf
            // and rewriting only the header and the first slot: slots 1-3
            // keep the second to fourth extents. mke2fs's journal inode
            // carries them, so ours does too.
            let first_four = &extents[..extents.len().min(4)];
            extent::write_leaf(&mut b, &extents_of(first_four)?).map_err(bad)?;
            extent::point_at_child(&mut b, 1, ExtentIdx::new(0, BlockNr(l))).map_err(bad)?;
        }
    }
    Ok(b)
}

/// A depth-0 extent leaf block (its checksum tail, where the filesystem
/// has one, is stamped by the writer).
pub(crate) fn extent_leaf(block_size: usize, extents: &[(u64, u64, u64)]) -> Result<Vec<u8>> {
    let mut b = vec![0u8; block_size];
    extent::write_leaf(&mut b, &extents_of(extents)?)
        .map_err(|e| Error::corrupt("new extent leaf", e))?;
    Ok(b)
}

/// One directory entry to lay out (mkfs's entries are all directories).
pub(crate) struct Entry<'a> {
    pub ino: u32,
    pub name: &'a [u8],
}

/// A directory block holding `entries` (the last one takes the remaining
/// space, or with `unused_rest` they keep their minimal lengths and an
/// unused entry spans the rest); with `tail` room for the checksum tail,
/// which the writer stamps.
/// An empty `entries` gives the "empty block" mke2fs uses to grow a
/// directory: one unused entry spanning the block.
pub(crate) fn dir_block(
    block_size: usize,
    entries: &[Entry<'_>],
    filetype: bool,
    tail: bool,
    unused_rest: bool,
) -> Result<Vec<u8>> {
    let bad = |e| Error::corrupt("new directory block", e);
    let mut b = DirBlockBuilder::new(num::sat_u32(block_size), tail).map_err(bad)?;
    let kind = if filetype { ft::DIR } else { ft::UNKNOWN };
    for e in entries {
        b.push(InodeNr(e.ino), e.name, kind).map_err(bad)?;
    }
    if unused_rest {
        b.finish_with_unused_rest()
    } else {
        b.finish()
    }
    .map_err(bad)
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
    let mut sb = JournalSuperblock::zeroed();
    let version = if v1 {
        block_type::SUPERBLOCK_V1
    } else {
        block_type::SUPERBLOCK_V2
    };
    sb.s_header = JournalHeader::new(version, 0);
    sb.s_blocksize.set(block_size);
    sb.s_maxlen.set(maxlen);
    sb.s_first.set(1);
    sb.s_sequence.set(1);
    sb.s_uuid = *uuid;
    sb.s_nr_users.set(1);
    sb.s_num_fc_blks.set(fc_blocks);
    let mut b = sb.to_bytes().to_vec();
    b.resize(block_size as usize, 0);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r_format::dir::DirBlockIter;
    use ext4r_format::extent::ExtentNode;

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
            false,
        )
        .unwrap();
        assert_eq!(&b[0..8], &[2, 0, 0, 0, 12, 0, 1, 2]);
        let e: Vec<_> = DirBlockIter::new(&b).map(|e| e.unwrap()).collect();
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].rec_len, 12);
        assert_eq!(e[2].rec_len, 1024 - 24 - 12);
        assert_eq!(b[1024 - 12 + 7], 0xDE);
    }

    #[test]
    fn extent_root_with_leaf_is_an_index() {
        let r = extent_root(&[], Some(0x1_0000_0005)).unwrap();
        let node = ExtentNode::parse(&r).unwrap();
        assert_eq!(node.depth(), 1);
        assert_eq!(node.indexes().unwrap()[0].leaf(), BlockNr(0x1_0000_0005));
    }

    #[test]
    fn new_inode_fields() {
        let mut i = InodeBuf::new_file(256, 0o100600, 1, 1 << 32 | 7);
        i.set_sectors(8);
        i.set_owner(0x1_0002, 3);
        let v = Inode::parse(&i.bytes).unwrap();
        assert_eq!(
            (v.mode(), v.links_count(), v.uid(), v.gid()),
            (0o100600, 1, 0x1_0002, 3)
        );
        assert_eq!(v.i_extra_isize.get(), 32);
        assert_eq!((v.i_mtime.get(), v.i_mtime_extra.get()), (7, 1));
        assert_eq!((v.i_crtime.get(), v.i_crtime_extra.get()), (7, 1));
        assert_eq!(v.blocks_count(true, 4096), 8);
        let small = InodeBuf::new_file(128, 0o100600, 1, 7);
        assert_eq!(small.bytes.len(), 128);
    }
}
