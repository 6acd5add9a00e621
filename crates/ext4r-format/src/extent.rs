//! Extent tree nodes: a 12-byte header (`struct ext4_extent_header`) then
//! `eh_max` slots of 12-byte entries, which are index entries
//! (`struct ext4_extent_idx`) in interior nodes and extents
//! (`struct ext4_extent`) in leaves. The root lives in the inode's 60-byte
//! `i_block` (4 slots); other nodes fill a block and end with a 4-byte
//! checksum tail (`struct ext4_extent_tail`) right after the last slot.
//!
//! See the kernel's `fs/ext4/ext4_extents.h` and
//! `Documentation/filesystems/ext4/ifork.rst`.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::crc32c;
use crate::error::{need, FormatError, Result};
use crate::num;
use crate::types::BlockNr;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `eh_magic`.
pub const EXTENT_MAGIC: u16 = 0xF30A;
/// Size of the header and of each entry.
pub const EXTENT_ENTRY_SIZE: usize = 12;
/// Deepest tree the kernel accepts (`EXT4_MAX_EXTENT_DEPTH`).
pub const MAX_EXTENT_DEPTH: u16 = 5;
/// Longest initialised extent (`EXT_INIT_MAX_LEN`); a stored `ee_len`
/// above this marks an unwritten extent of `ee_len - 32768` blocks.
pub const EXT_INIT_MAX_LEN: u16 = 1 << 15;
/// Longest unwritten extent (`EXT_UNWRITTEN_MAX_LEN`).
pub const EXT_UNWRITTEN_MAX_LEN: u16 = EXT_INIT_MAX_LEN - 1;
/// Size of the checksum tail of a non-root node.
pub const EXTENT_TAIL_SIZE: usize = 4;

/// `struct ext4_extent_header`.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct ExtentHeader {
    /// [`EXTENT_MAGIC`].
    pub eh_magic: U16,
    /// Valid entries following the header.
    pub eh_entries: U16,
    /// Capacity of the node in entries.
    pub eh_max: U16,
    /// Height above the leaves: 0 for a leaf.
    pub eh_depth: U16,
    /// Generation of the tree (unused by Linux).
    pub eh_generation: U32,
}

/// `struct ext4_extent_idx`: an interior entry pointing at a lower node.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct ExtentIdx {
    /// First logical block covered by the subtree.
    pub ei_block: U32,
    /// Low 32 bits of the child node's block.
    pub ei_leaf_lo: U32,
    /// High 16 bits of the child node's block.
    pub ei_leaf_hi: U16,
    /// Unused.
    pub ei_unused: U16,
}

/// `struct ext4_extent`: a run of contiguous blocks.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct Extent {
    /// First logical block.
    pub ee_block: U32,
    /// Length, plus 32768 when unwritten (see [`Extent::len`]).
    pub ee_len: U16,
    /// High 16 bits of the first physical block.
    pub ee_start_hi: U16,
    /// Low 32 bits of the first physical block.
    pub ee_start_lo: U32,
}

/// `struct ext4_extent_tail`.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq, Debug)]
#[repr(C)]
pub struct ExtentTail {
    /// See [`extent_block_checksum`].
    pub et_checksum: U32,
}

const _: () = assert!(core::mem::size_of::<ExtentHeader>() == EXTENT_ENTRY_SIZE);
const _: () = assert!(core::mem::size_of::<ExtentIdx>() == EXTENT_ENTRY_SIZE);
const _: () = assert!(core::mem::size_of::<Extent>() == EXTENT_ENTRY_SIZE);
const _: () = assert!(core::mem::size_of::<ExtentTail>() == EXTENT_TAIL_SIZE);

impl ExtentHeader {
    /// A header for an empty node of `max` slots at `depth`.
    pub fn new(max: u16, depth: u16) -> Self {
        ExtentHeader {
            eh_magic: EXTENT_MAGIC.into(),
            eh_entries: 0.into(),
            eh_max: max.into(),
            eh_depth: depth.into(),
            eh_generation: 0.into(),
        }
    }
}

impl ExtentIdx {
    /// An index entry.
    pub fn new(first_logical: u32, leaf: BlockNr) -> Self {
        let mut e = ExtentIdx {
            ei_block: first_logical.into(),
            ei_leaf_lo: 0.into(),
            ei_leaf_hi: 0.into(),
            ei_unused: 0.into(),
        };
        e.set_leaf(leaf);
        e
    }

    /// The child node's block (48 bits).
    pub fn leaf(&self) -> BlockNr {
        BlockNr(u64::from(self.ei_leaf_lo.get()) | u64::from(self.ei_leaf_hi.get()) << 32)
    }

    /// Sets the child node's block (the low 48 bits are stored).
    pub fn set_leaf(&mut self, b: BlockNr) {
        self.ei_leaf_lo.set(num::lo32(b.0));
        self.ei_leaf_hi.set(num::hi16_of_48(b.0));
    }
}

impl Extent {
    /// An extent of `len` blocks at `start`.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when `len` is 0 or too long for its kind.
    pub fn new(first_logical: u32, start: BlockNr, len: u16, unwritten: bool) -> Result<Self> {
        let mut e = Extent {
            ee_block: first_logical.into(),
            ee_len: 0.into(),
            ee_start_hi: 0.into(),
            ee_start_lo: 0.into(),
        };
        e.set_start(start);
        e.set_len(len, unwritten)?;
        Ok(e)
    }

    /// First physical block (48 bits).
    pub fn start(&self) -> BlockNr {
        BlockNr(u64::from(self.ee_start_lo.get()) | u64::from(self.ee_start_hi.get()) << 32)
    }

    /// Sets the first physical block (the low 48 bits are stored).
    pub fn set_start(&mut self, b: BlockNr) {
        self.ee_start_lo.set(num::lo32(b.0));
        self.ee_start_hi.set(num::hi16_of_48(b.0));
    }

    /// Whether the extent is unwritten (allocated, reads as zeros):
    /// `ee_len > 32768`, as the kernel's `ext4_ext_is_unwritten`.
    pub fn is_unwritten(&self) -> bool {
        self.ee_len.get() > EXT_INIT_MAX_LEN
    }

    /// Length in blocks (`ext4_ext_get_actual_len`): `ee_len`, less 32768
    /// for unwritten extents; exactly 32768 is an initialised extent.
    pub fn len(&self) -> u16 {
        let l = self.ee_len.get();
        if l <= EXT_INIT_MAX_LEN {
            l
        } else {
            l - EXT_INIT_MAX_LEN
        }
    }

    /// Whether the extent covers no blocks (`ee_len == 0`, which is invalid
    /// on disk).
    pub fn is_empty(&self) -> bool {
        self.ee_len.get() == 0
    }

    /// Stores the length and the unwritten mark.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when `len` is 0 or above 32768 (32767 for
    /// unwritten extents).
    pub fn set_len(&mut self, len: u16, unwritten: bool) -> Result<()> {
        let max = if unwritten {
            EXT_UNWRITTEN_MAX_LEN
        } else {
            EXT_INIT_MAX_LEN
        };
        if len == 0 || len > max {
            return Err(FormatError::invalid(
                "ee_len",
                format!("{len} blocks (unwritten: {unwritten})"),
            ));
        }
        self.ee_len.set(if unwritten {
            len + EXT_INIT_MAX_LEN
        } else {
            len
        });
        Ok(())
    }

    /// One past the last logical block, as u64 so it cannot overflow.
    pub fn end_logical(&self) -> u64 {
        u64::from(self.ee_block.get()) + u64::from(self.len())
    }
}

/// Slots a node of `bytes` bytes can hold: 4 for the 60-byte `i_block`,
/// `(block_size - 12) / 12` for a block (`ext4_ext_space_root` and
/// `ext4_ext_space_block`); the tail always fits after them.
pub fn max_entries(bytes: usize) -> u16 {
    let n = bytes.saturating_sub(EXTENT_ENTRY_SIZE) / EXTENT_ENTRY_SIZE;
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// Offset of the tail for a node with `eh_max` slots (`EXT4_EXTENT_TAIL_OFFSET`).
pub fn tail_offset(eh_max: u16) -> usize {
    EXTENT_ENTRY_SIZE * (1 + usize::from(eh_max))
}

/// The entries of a node, by kind.
#[derive(Clone, Copy, Debug)]
pub enum ExtentEntries<'a> {
    /// A leaf (depth 0).
    Leaf(&'a [Extent]),
    /// An interior node (depth above 0).
    Index(&'a [ExtentIdx]),
}

/// A parsed extent tree node borrowing its buffer.
#[derive(Clone, Copy, Debug)]
pub struct ExtentNode<'a> {
    /// The header.
    pub header: ExtentHeader,
    /// The `eh_entries` valid entries.
    pub entries: ExtentEntries<'a>,
}

impl<'a> ExtentNode<'a> {
    /// Parses a node from `i_block` (60 bytes) or a whole block, checking
    /// the magic, `eh_depth <= 5`, `eh_entries <= eh_max`, and that `eh_max`
    /// slots fit in the buffer. Whether `eh_max` is the exact capacity, and
    /// the order of the entries, are for the caller (fsck) to judge.
    ///
    /// # Errors
    /// [`FormatError::Truncated`], [`FormatError::BadMagic`] or
    /// [`FormatError::Invalid`].
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        need("extent header", buf, EXTENT_ENTRY_SIZE)?;
        let header = ExtentHeader::read_from_bytes(&buf[..EXTENT_ENTRY_SIZE])
            .map_err(|_| FormatError::invalid("extent header", "unreadable"))?;
        if header.eh_magic.get() != EXTENT_MAGIC {
            return Err(FormatError::BadMagic {
                what: "extent header",
                found: header.eh_magic.get().into(),
                expected: EXTENT_MAGIC.into(),
            });
        }
        let (entries, max, depth) = (
            header.eh_entries.get(),
            header.eh_max.get(),
            header.eh_depth.get(),
        );
        if depth > MAX_EXTENT_DEPTH {
            return Err(FormatError::invalid(
                "eh_depth",
                format!("{depth} exceeds {MAX_EXTENT_DEPTH}"),
            ));
        }
        if max > max_entries(buf.len()) {
            return Err(FormatError::invalid(
                "eh_max",
                format!("{max} entries do not fit in {} bytes", buf.len()),
            ));
        }
        if entries > max {
            return Err(FormatError::invalid(
                "eh_entries",
                format!("{entries} exceeds eh_max {max}"),
            ));
        }
        let body = &buf[EXTENT_ENTRY_SIZE..tail_offset(entries)];
        let entries = if depth == 0 {
            ExtentEntries::Leaf(
                <[Extent]>::ref_from_bytes(body)
                    .map_err(|_| FormatError::invalid("extent node", "unreadable entries"))?,
            )
        } else {
            ExtentEntries::Index(
                <[ExtentIdx]>::ref_from_bytes(body)
                    .map_err(|_| FormatError::invalid("extent node", "unreadable entries"))?,
            )
        };
        Ok(ExtentNode { header, entries })
    }

    /// Tree depth of this node (0 for a leaf).
    pub fn depth(&self) -> u16 {
        self.header.eh_depth.get()
    }

    /// The extents, if this is a leaf.
    pub fn extents(&self) -> Option<&'a [Extent]> {
        match self.entries {
            ExtentEntries::Leaf(e) => Some(e),
            ExtentEntries::Index(_) => None,
        }
    }

    /// The index entries, if this is an interior node.
    pub fn indexes(&self) -> Option<&'a [ExtentIdx]> {
        match self.entries {
            ExtentEntries::Index(i) => Some(i),
            ExtentEntries::Leaf(_) => None,
        }
    }

    /// Writes the header and entries into `out` (the same kind of buffer
    /// the node came from); slots past `eh_entries` and the tail are left
    /// alone.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] when the entries exceed `eh_max`, `eh_max`
    /// does not fit in `out`, or the depth is above 5.
    pub fn write(&self, out: &mut [u8]) -> Result<()> {
        match self.entries {
            ExtentEntries::Leaf(e) => write_node(
                out,
                self.header.eh_max.get(),
                self.depth(),
                self.header.eh_generation.get(),
                e.as_bytes(),
            ),
            ExtentEntries::Index(i) => write_node(
                out,
                self.header.eh_max.get(),
                self.depth(),
                self.header.eh_generation.get(),
                i.as_bytes(),
            ),
        }
    }
}

/// Writes a node: header with `eh_entries` from `entries` (the raw bytes of
/// an `&[Extent]` or `&[ExtentIdx]`, whose kind must agree with `depth`),
/// then the entries.
///
/// # Errors
/// [`FormatError::Invalid`] when the entries exceed `max`, `max` does not
/// fit in `out`, or `depth` is above 5.
fn write_node(out: &mut [u8], max: u16, depth: u16, generation: u32, entries: &[u8]) -> Result<()> {
    let count = entries.len() / EXTENT_ENTRY_SIZE;
    if depth > MAX_EXTENT_DEPTH || max > max_entries(out.len()) || count > usize::from(max) {
        return Err(FormatError::invalid(
            "extent node",
            format!(
                "{count} entries, eh_max {max}, depth {depth} in {} bytes",
                out.len()
            ),
        ));
    }
    let mut h = ExtentHeader::new(max, depth);
    // count <= max, a u16, was checked above.
    h.eh_entries.set(num::sat_u16(count));
    h.eh_generation.set(generation);
    out[..EXTENT_ENTRY_SIZE].copy_from_slice(h.as_bytes());
    out[EXTENT_ENTRY_SIZE..EXTENT_ENTRY_SIZE + entries.len()].copy_from_slice(entries);
    Ok(())
}

/// Lays out a leaf node in `out` (`i_block` or a block): capacity is
/// [`max_entries`] of the buffer, unused slots are zeroed, the tail (for a
/// block) is left for [`set_extent_block_checksum`].
///
/// # Errors
/// [`FormatError::Invalid`] when the extents do not fit.
pub fn write_leaf(out: &mut [u8], extents: &[Extent]) -> Result<()> {
    let max = max_entries(out.len());
    write_node(out, max, 0, 0, extents.as_bytes())?;
    out[tail_offset(num::sat_u16(extents.len()))..tail_offset(max)].fill(0);
    Ok(())
}

/// Lays out an interior node at `depth` (1..=5) in `out`, as [`write_leaf`].
///
/// # Errors
/// [`FormatError::Invalid`] when the entries do not fit or `depth` is 0 or
/// above 5.
pub fn write_index(out: &mut [u8], depth: u16, indexes: &[ExtentIdx]) -> Result<()> {
    if depth == 0 {
        return Err(FormatError::invalid("eh_depth", "index node at depth 0"));
    }
    let max = max_entries(out.len());
    write_node(out, max, depth, 0, indexes.as_bytes())?;
    out[tail_offset(num::sat_u16(indexes.len()))..tail_offset(max)].fill(0);
    Ok(())
}

/// Makes a node an index node over one child without touching its other
/// slots: the header gets `depth` and one entry, slot 0 becomes `idx`,
/// `eh_max` and the bytes of slots 1.. stay as they were. libext2fs splits a
/// full root this way (it copies the root to the new child, then rewrites
/// only the header and the first slot), so mke2fs's journal inode keeps
/// its second to fourth extents in the root's unused slots.
///
/// # Errors
/// [`FormatError::Truncated`] when `out` holds less than the header and one
/// slot, [`FormatError::Invalid`] when `depth` is 0 or above 5.
pub fn point_at_child(out: &mut [u8], depth: u16, idx: ExtentIdx) -> Result<()> {
    if depth == 0 || depth > MAX_EXTENT_DEPTH {
        return Err(FormatError::invalid(
            "eh_depth",
            format!("{depth} for an index node"),
        ));
    }
    need("extent node", out, 2 * EXTENT_ENTRY_SIZE)?;
    let (head, rest) = out.split_at_mut(EXTENT_ENTRY_SIZE);
    let mut h = ExtentHeader::read_from_bytes(head)
        .map_err(|_| FormatError::invalid("extent node", "header"))?;
    h.eh_magic.set(EXTENT_MAGIC);
    h.eh_entries.set(1);
    h.eh_depth.set(depth);
    head.copy_from_slice(h.as_bytes());
    rest[..EXTENT_ENTRY_SIZE].copy_from_slice(idx.as_bytes());
    Ok(())
}

/// Where the tail of a non-root node sits, from its header.
fn tail_range(block: &[u8]) -> Result<core::ops::Range<usize>> {
    let node = ExtentNode::parse(block)?;
    let off = tail_offset(node.header.eh_max.get());
    need("extent tail", block, off + EXTENT_TAIL_SIZE)?;
    Ok(off..off + EXTENT_TAIL_SIZE)
}

/// The checksum of a non-root extent node, as the kernel's
/// `ext4_extent_block_csum`: CRC32C from the inode's seed
/// ([`crate::inode::inode_csum_seed`]) over the bytes before the tail,
/// i.e. the header and all `eh_max` slots.
///
/// # Errors
/// As [`ExtentNode::parse`], or [`FormatError::Truncated`] when the tail
/// does not fit.
pub fn extent_block_checksum(inode_seed: u32, block: &[u8]) -> Result<u32> {
    let tail = tail_range(block)?;
    Ok(crc32c(inode_seed, &block[..tail.start]))
}

/// Checks the tail checksum of a non-root extent node.
///
/// # Errors
/// As [`extent_block_checksum`], or [`FormatError::BadChecksum`].
pub fn verify_extent_block_checksum(inode_seed: u32, block: &[u8]) -> Result<()> {
    let tail = tail_range(block)?;
    let computed = crc32c(inode_seed, &block[..tail.start]);
    let t = &block[tail];
    let stored = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    if stored != computed {
        return Err(FormatError::BadChecksum {
            what: "extent block",
            stored,
            computed,
        });
    }
    Ok(())
}

/// Computes and stores the tail checksum of a non-root extent node.
///
/// # Errors
/// As [`extent_block_checksum`].
pub fn set_extent_block_checksum(inode_seed: u32, block: &mut [u8]) -> Result<()> {
    let tail = tail_range(block)?;
    let crc = crc32c(inode_seed, &block[..tail.start]);
    block[tail].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inode::tests::{sample_fs_seed, sparse};
    use crate::inode::{inode_csum_seed, Inode};
    use crate::types::InodeNr;
    use proptest::prelude::*;

    #[test]
    fn offsets_match_the_kernel() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(ExtentHeader, eh_depth), 6);
        assert_eq!(offset_of!(ExtentHeader, eh_generation), 8);
        assert_eq!(offset_of!(ExtentIdx, ei_leaf_hi), 8);
        assert_eq!(offset_of!(Extent, ee_len), 4);
        assert_eq!(offset_of!(Extent, ee_start_hi), 6);
        assert_eq!(offset_of!(Extent, ee_start_lo), 8);
        assert_eq!(max_entries(60), 4);
        assert_eq!(max_entries(1024), 84);
        assert_eq!(max_entries(4096), 340);
        assert_eq!(tail_offset(340) + EXTENT_TAIL_SIZE, 4096);
    }

    /// `i_block` of a kernel-made file (fallocate 8 KiB then a 1 KiB write
    /// at 2 KiB): blocks 0-1 and 3-7 stay unwritten.
    #[test]
    fn real_root_leaf_with_unwritten_extents() {
        let inode = sparse(
            128,
            &[
                (0x28, "0af3030004"),
                (
                    0x38,
                    "028000003305000002000000010000003505000003000000058000003605",
                ),
            ],
        );
        let ino = Inode::parse(&inode).unwrap();
        let node = ExtentNode::parse(&ino.i_block).unwrap();
        let ext = node.extents().unwrap();
        assert_eq!(ext.len(), 3);
        assert!(ext[0].is_unwritten());
        assert_eq!((ext[0].len(), ext[0].start()), (2, BlockNr(1331)));
        assert!(!ext[1].is_unwritten());
        assert_eq!((ext[1].ee_block.get(), ext[1].len()), (2, 1));
        assert!(ext[2].is_unwritten());
        assert_eq!((ext[2].len(), ext[2].end_logical()), (5, 8));
        let mut out = ino.i_block;
        node.write(&mut out).unwrap();
        assert_eq!(out, ino.i_block);
    }

    /// A depth-1 tree from mke2fs -d: the root (inode 95 of the sample
    /// image, generation 0x0badf00d) points at block 1419, whose leaf holds
    /// ten one-block extents. Stale extents past `eh_entries` in the root
    /// are ignored.
    #[test]
    fn real_extent_block_checksum() {
        let root = sparse(
            60,
            &[(
                0x0,
                "0af301000400010000000000030000008b050000000000000600000001000000870500\
                 000900000001000000880500000c0000000100000089050000",
            )],
        );
        let node = ExtentNode::parse(&root[..60]).unwrap();
        let idx = node.indexes().unwrap();
        assert_eq!(idx.len(), 1);
        assert_eq!(idx[0].leaf(), BlockNr(1419));
        assert_eq!(idx[0].ei_block.get(), 3);

        let block = sparse(
            1024,
            &[
                (
                    0x0,
                    "0af30a0054000000000000000300000001000000860500000600000001000000870500\
                     000900000001000000880500000c00000001000000890500000f000000010000008a05\
                     000012000000010000008c05000015000000010000008d05000018000000010000008e\
                     0500001b000000010000008f0500001e000000010000009005",
                ),
                (0x3fc, "607cd6ee"),
            ],
        );
        let leaf = ExtentNode::parse(&block).unwrap();
        let ext = leaf.extents().unwrap();
        assert_eq!(ext.len(), 10);
        assert_eq!(ext[9].start(), BlockNr(1424));
        let seed = inode_csum_seed(sample_fs_seed(), InodeNr(95), 0x0bad_f00d);
        assert_eq!(extent_block_checksum(seed, &block).unwrap(), 0xeed6_7c60);
        verify_extent_block_checksum(seed, &block).unwrap();
        let mut bad = block.clone();
        bad[100] ^= 0x40;
        assert!(matches!(
            verify_extent_block_checksum(seed, &bad),
            Err(FormatError::BadChecksum { .. })
        ));
        set_extent_block_checksum(seed, &mut bad).unwrap();
        verify_extent_block_checksum(seed, &bad).unwrap();
    }

    #[test]
    fn pointing_a_root_at_a_child_keeps_its_other_slots() {
        let mut root = [0u8; 60];
        let runs: Vec<Extent> = (0..4u32)
            .map(|i| Extent::new(i * 10, BlockNr(100 + u64::from(i) * 10), 10, false).unwrap())
            .collect();
        write_leaf(&mut root, &runs).unwrap();
        point_at_child(&mut root, 1, ExtentIdx::new(0, BlockNr(0x1_0000_0005))).unwrap();
        let node = ExtentNode::parse(&root).unwrap();
        assert_eq!((node.depth(), node.header.eh_max.get()), (1, 4));
        let idx = node.indexes().unwrap();
        assert_eq!(idx.len(), 1);
        assert_eq!(idx[0].leaf(), BlockNr(0x1_0000_0005));
        assert_eq!(&root[24..], runs[1..].as_bytes());
        let first = idx[0];
        assert!(point_at_child(&mut root, 0, first).is_err());
        assert!(point_at_child(&mut [0u8; 20], 1, ExtentIdx::new(0, BlockNr(1))).is_err());
    }

    #[test]
    fn bounds_are_checked() {
        let mut b = [0u8; 60];
        b[..12].copy_from_slice(ExtentHeader::new(4, 0).as_bytes());
        ExtentNode::parse(&b).unwrap();
        assert!(matches!(
            ExtentNode::parse(&b[..8]),
            Err(FormatError::Truncated { .. })
        ));
        // eh_max too large for the buffer.
        b[4] = 5;
        assert!(ExtentNode::parse(&b).is_err());
        // entries above max.
        b[4] = 4;
        b[2] = 5;
        assert!(ExtentNode::parse(&b).is_err());
        // depth above 5.
        b[2] = 0;
        b[6] = 6;
        assert!(ExtentNode::parse(&b).is_err());
        // magic.
        b[6] = 0;
        b[0] = 0;
        assert!(matches!(
            ExtentNode::parse(&b),
            Err(FormatError::BadMagic { .. })
        ));
        // A root has no room for a tail.
        b[0] = 0x0a;
        assert!(extent_block_checksum(0, &b).is_err());
    }

    #[test]
    fn lengths() {
        let mut e = Extent::new(0, BlockNr(0x1234_5678_9abc), 32768, false).unwrap();
        assert!(!e.is_unwritten());
        assert_eq!(e.len(), 32768);
        assert_eq!(e.start(), BlockNr(0x1234_5678_9abc));
        assert!(e.set_len(32768, true).is_err());
        e.set_len(32767, true).unwrap();
        assert_eq!((e.len(), e.is_unwritten()), (32767, true));
        assert!(e.set_len(0, false).is_err());
    }

    #[test]
    fn write_leaf_and_index() {
        let mut blk = vec![0xFFu8; 1024];
        let ext = [
            Extent::new(0, BlockNr(100), 4, false).unwrap(),
            Extent::new(10, BlockNr(200), 2, true).unwrap(),
        ];
        write_leaf(&mut blk, &ext).unwrap();
        set_extent_block_checksum(7, &mut blk).unwrap();
        verify_extent_block_checksum(7, &blk).unwrap();
        let node = ExtentNode::parse(&blk).unwrap();
        assert_eq!(node.header.eh_max.get(), 84);
        assert_eq!(node.extents().unwrap(), &ext);
        let mut root = [0u8; 60];
        write_index(&mut root, 1, &[ExtentIdx::new(0, BlockNr(77))]).unwrap();
        let node = ExtentNode::parse(&root).unwrap();
        assert_eq!(node.indexes().unwrap()[0].leaf(), BlockNr(77));
        assert!(write_index(&mut root, 0, &[]).is_err());
        let five = [ext[0]; 5];
        assert!(write_leaf(&mut root, &five).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(
            depth in 0u16..=5,
            buf_len in prop_oneof![Just(60usize), Just(1024usize), Just(4096usize)],
            body in proptest::collection::vec(any::<u8>(), 0..4096),
            entries_seed: u16,
            gen: u32,
        ) {
            let max = max_entries(buf_len);
            let entries = entries_seed % (max + 1);
            let mut bytes = vec![0u8; buf_len];
            let mut h = ExtentHeader::new(max, depth);
            h.eh_entries.set(entries);
            h.eh_generation.set(gen);
            bytes[..12].copy_from_slice(h.as_bytes());
            let end = tail_offset(entries);
            let n = (end - 12).min(body.len());
            bytes[12..12 + n].copy_from_slice(&body[..n]);
            let node = ExtentNode::parse(&bytes).unwrap();
            let mut out = vec![0u8; buf_len];
            node.write(&mut out).unwrap();
            prop_assert_eq!(out, bytes);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut bytes = bytes;
            if bytes.len() >= 2 {
                bytes[0] = 0x0a;
                bytes[1] = 0xf3;
            }
            if let Ok(node) = ExtentNode::parse(&bytes) {
                let _ = (node.extents(), node.indexes());
            }
            let _ = extent_block_checksum(1, &bytes);
            let _ = verify_extent_block_checksum(1, &bytes);
        }

        #[test]
        fn structs_round_trip(bytes in proptest::collection::vec(any::<u8>(), 12)) {
            let e = Extent::read_from_bytes(&bytes).unwrap();
            prop_assert_eq!(e.as_bytes(), &bytes[..]);
            let i = ExtentIdx::read_from_bytes(&bytes).unwrap();
            prop_assert_eq!(i.as_bytes(), &bytes[..]);
            let h = ExtentHeader::read_from_bytes(&bytes).unwrap();
            prop_assert_eq!(h.as_bytes(), &bytes[..]);
            prop_assert!(e.len() <= EXT_INIT_MAX_LEN);
        }
    }
}
