//! Descriptor blocks: a [`JournalHeader`] followed by block tags, one per
//! data block that follows the descriptor in the journal, each naming the
//! filesystem block the data belongs to. A tag without `SAME_UUID` is
//! followed by a 16-byte UUID. The last tag carries `LAST_TAG`; under
//! checksum v2/v3 the block ends with a [`super::JournalBlockTail`].

#[allow(unused_imports)]
use crate::prelude::*;

use super::{
    block_type, data_block_checksum, set_block_tail_checksum, verify_block_tail_checksum,
    JournalHeader, JournalIncompat, JournalLayout, HEADER_SIZE,
};
use crate::error::{need, FormatError, Result};
use crate::num;
use crate::types::BlockNr;
use bitflags::bitflags;
use zerocopy::big_endian::{U16, U32};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// `journal_block_tag3_t`, the tag of checksum v3 journals.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, PartialEq, Eq, Debug)]
#[repr(C)]
#[allow(missing_docs)] // Field names are the kernel's; see jbd2.h.
pub struct JournalBlockTag3 {
    pub t_blocknr: U32,
    pub t_flags: U32,
    pub t_blocknr_high: U32,
    pub t_checksum: U32,
}

/// `journal_block_tag_t`, the tag of other journals; only the first
/// [`JournalLayout::tag_bytes`] bytes are on disk.
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout, PartialEq, Eq, Debug)]
#[repr(C)]
#[allow(missing_docs)] // Field names are the kernel's; see jbd2.h.
pub struct JournalBlockTag {
    pub t_blocknr: U32,
    pub t_checksum: U16,
    pub t_flags: U16,
    pub t_blocknr_high: U32,
}

const _: () = assert!(core::mem::size_of::<JournalBlockTag3>() == 16);
const _: () = assert!(core::mem::size_of::<JournalBlockTag>() == 12);

/// Where the low byte of the flags sits in both tag formats: the kernel
/// reads every tag through `journal_block_tag_t`, whose 16-bit `t_flags`
/// (bytes 6-7) overlaps the low half of the v3 tag's 32-bit `t_flags`.
const FLAGS_LOW_BYTE: usize = 7;

bitflags! {
    /// Tag flags (`JBD2_FLAG_*`), the low 16 bits of `t_flags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct TagFlags: u16 {
        /// The block began with the jbd2 magic, zeroed in the journal copy;
        /// replay must restore it.
        const ESCAPE = 1;
        /// No UUID follows this tag: same as the previous one.
        const SAME_UUID = 2;
        /// The block was deleted by this transaction (unused by jbd2).
        const DELETED = 4;
        /// The last tag of the descriptor block.
        const LAST_TAG = 8;
    }
}

/// One tag, decoded with every bit it had on disk, so that encoding it again
/// gives the same bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct DescriptorTag {
    /// `t_blocknr`: low 32 bits of the filesystem block.
    pub t_blocknr: u32,
    /// `t_blocknr_high`: high 32 bits, meaningful only with 64bit (and only
    /// stored whole with 64bit or checksum v3).
    pub t_blocknr_high: u32,
    /// `t_flags`: 32 bits in v3 tags, 16 otherwise.
    pub t_flags: u32,
    /// `t_checksum`: 32 bits in v3 tags, 16 in others (unused without v2).
    pub t_checksum: u32,
    /// The 2 bytes past `journal_block_tag_t` in 14-byte tags (checksum v2
    /// with 64bit): `journal_tag_bytes()` counts them, nothing uses them.
    pub t_padding: u16,
    /// The UUID that follows a tag without `SAME_UUID`, when it fits in the
    /// block.
    pub uuid: Option<[u8; 16]>,
}

impl DescriptorTag {
    /// A tag for `block`; the UUID is written (and `SAME_UUID` cleared) when
    /// given, otherwise `SAME_UUID` is set. The checksum is left zero: see
    /// [`DescriptorTag::set_checksum`].
    pub fn new(
        layout: JournalLayout,
        block: BlockNr,
        flags: TagFlags,
        uuid: Option<[u8; 16]>,
    ) -> Self {
        let mut flags = flags;
        flags.set(TagFlags::SAME_UUID, uuid.is_none());
        let high = if layout.is_64bit() {
            num::hi32(block.0)
        } else {
            0
        };
        DescriptorTag {
            t_blocknr: num::lo32(block.0),
            t_blocknr_high: high,
            t_flags: u32::from(flags.bits()),
            t_checksum: 0,
            t_padding: 0,
            uuid,
        }
    }

    /// The filesystem block; the high half counts only with 64bit.
    pub fn blocknr(&self, layout: JournalLayout) -> BlockNr {
        let hi = if layout.is_64bit() {
            u64::from(self.t_blocknr_high) << 32
        } else {
            0
        };
        BlockNr(u64::from(self.t_blocknr) | hi)
    }

    /// The flags jbd2 acts on (the low 16 bits of `t_flags`).
    pub fn flags(&self) -> TagFlags {
        TagFlags::from_bits_retain(num::lo16(self.t_flags))
    }

    /// Stores a data block checksum ([`data_block_checksum`]): all 32 bits
    /// under v3, the low 16 under v2, nothing otherwise.
    pub fn set_checksum(&mut self, layout: JournalLayout, csum: u32) {
        self.t_checksum = Self::stored_checksum(layout, csum);
    }

    /// Whether the tag's checksum matches a data block checksum (always true
    /// without checksum v2/v3).
    pub fn checksum_matches(&self, layout: JournalLayout, csum: u32) -> bool {
        !layout.has_csum_v2or3() || self.t_checksum == Self::stored_checksum(layout, csum)
    }

    /// Checks the tag against the data block it describes, as written in
    /// transaction `sequence`, with the journal seed `seed`.
    ///
    /// # Errors
    /// [`FormatError::BadChecksum`] on mismatch.
    pub fn verify_data(
        &self,
        layout: JournalLayout,
        seed: u32,
        sequence: u32,
        data: &[u8],
    ) -> Result<()> {
        let computed = data_block_checksum(seed, sequence, data);
        if !self.checksum_matches(layout, computed) {
            return Err(FormatError::BadChecksum {
                what: "journal data block",
                stored: self.t_checksum,
                computed: Self::stored_checksum(layout, computed),
            });
        }
        Ok(())
    }

    fn stored_checksum(layout: JournalLayout, csum: u32) -> u32 {
        if layout.incompat.contains(JournalIncompat::CSUM_V3) {
            csum
        } else if layout.incompat.contains(JournalIncompat::CSUM_V2) {
            csum & 0xffff
        } else {
            0
        }
    }

    /// Bytes the tag takes in a descriptor block, UUID included.
    pub fn encoded_len(&self, layout: JournalLayout) -> usize {
        layout.tag_bytes() + if self.uuid.is_some() { 16 } else { 0 }
    }

    /// Writes the tag (and its UUID, if any) at the start of `out`,
    /// returning the bytes written.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] when `out` is too short.
    pub fn encode(&self, layout: JournalLayout, out: &mut [u8]) -> Result<usize> {
        let n = layout.tag_bytes();
        need("journal block tag", out, self.encoded_len(layout))?;
        if n == core::mem::size_of::<JournalBlockTag3>() {
            let t = JournalBlockTag3 {
                t_blocknr: U32::new(self.t_blocknr),
                t_flags: U32::new(self.t_flags),
                t_blocknr_high: U32::new(self.t_blocknr_high),
                t_checksum: U32::new(self.t_checksum),
            };
            out[..n].copy_from_slice(t.as_bytes());
        } else {
            let t = JournalBlockTag {
                t_blocknr: U32::new(self.t_blocknr),
                t_checksum: U16::new(num::lo16(self.t_checksum)),
                t_flags: U16::new(num::lo16(self.t_flags)),
                t_blocknr_high: U32::new(self.t_blocknr_high),
            };
            // 8 or 10 bytes keep none or half of t_blocknr_high; 14 add
            // the padding.
            let m = n.min(core::mem::size_of::<JournalBlockTag>());
            out[..m].copy_from_slice(&t.as_bytes()[..m]);
            out[m..n].copy_from_slice(&self.t_padding.to_be_bytes()[..n - m]);
        }
        if let Some(u) = &self.uuid {
            out[n..n + 16].copy_from_slice(u);
        }
        Ok(self.encoded_len(layout))
    }

    /// Decodes the `tag_bytes` bytes of one tag (the UUID is read apart).
    fn decode(raw: &[u8]) -> Self {
        if raw.len() == core::mem::size_of::<JournalBlockTag3>() {
            let mut t = JournalBlockTag3::new_zeroed();
            t.as_mut_bytes().copy_from_slice(raw);
            DescriptorTag {
                t_blocknr: t.t_blocknr.get(),
                t_blocknr_high: t.t_blocknr_high.get(),
                t_flags: t.t_flags.get(),
                t_checksum: t.t_checksum.get(),
                t_padding: 0,
                uuid: None,
            }
        } else {
            let mut t = JournalBlockTag::new_zeroed();
            let n = raw.len().min(core::mem::size_of::<JournalBlockTag>());
            t.as_mut_bytes()[..n].copy_from_slice(&raw[..n]);
            let pad = raw[n..]
                .iter()
                .fold(0u16, |acc, &b| (acc << 8) | u16::from(b));
            DescriptorTag {
                t_blocknr: t.t_blocknr.get(),
                t_blocknr_high: t.t_blocknr_high.get(),
                t_flags: u32::from(t.t_flags.get()),
                // Kept even without v2 (an unused slot then) so that
                // encoding reproduces the bytes.
                t_checksum: u32::from(t.t_checksum.get()),
                t_padding: pad,
                uuid: None,
            }
        }
    }
}

/// A parsed descriptor block: the header checked, the tags read lazily.
#[derive(Clone, Copy, Debug)]
pub struct DescriptorBlock<'a> {
    block: &'a [u8],
    layout: JournalLayout,
    header: JournalHeader,
}

impl<'a> DescriptorBlock<'a> {
    /// Checks the header of a descriptor block; `block` is the whole journal
    /// block (its length is the journal block size).
    ///
    /// # Errors
    /// [`FormatError::Truncated`] when the block cannot hold the header and
    /// tail, [`FormatError::BadMagic`], or [`FormatError::Invalid`] for
    /// another block type.
    pub fn parse(block: &'a [u8], layout: JournalLayout) -> Result<Self> {
        need("descriptor block", block, HEADER_SIZE + layout.tail_bytes())?;
        let header = JournalHeader::parse_as("descriptor block", block, block_type::DESCRIPTOR)?;
        Ok(DescriptorBlock {
            block,
            layout,
            header,
        })
    }

    /// The header.
    pub fn header(&self) -> JournalHeader {
        self.header
    }

    /// The tags, in order, exactly as the kernel's recovery walks them: the
    /// number of tags is the number of data blocks that follow the block.
    pub fn tags(&self) -> TagIter<'a> {
        TagIter {
            block: self.block,
            tag_bytes: self.layout.tag_bytes(),
            off: HEADER_SIZE,
            end: HEADER_SIZE,
            limit: self.block.len() - self.layout.tail_bytes(),
            done: false,
        }
    }

    /// Checks the tail checksum (checksum v2/v3 only).
    ///
    /// # Errors
    /// [`FormatError::BadChecksum`] on mismatch.
    pub fn verify_checksum(&self, seed: u32) -> Result<()> {
        if !self.layout.has_csum_v2or3() {
            return Ok(());
        }
        verify_block_tail_checksum(seed, self.block)
    }
}

/// Iterator over the tags of a [`DescriptorBlock`].
///
/// Mirrors the loop of the kernel's `count_tags()` and `do_one_pass()`: a tag
/// is read while it fits before the tail; its UUID, when `SAME_UUID` is
/// clear, is skipped whether or not it fits; `LAST_TAG` ends the walk. Each
/// step advances at least 8 bytes, so at most `block.len() / 8` tags come out.
#[derive(Clone, Debug)]
pub struct TagIter<'a> {
    block: &'a [u8],
    tag_bytes: usize,
    off: usize,
    end: usize,
    limit: usize,
    done: bool,
}

impl TagIter<'_> {
    /// The byte offset just past the last tag returned, including its UUID
    /// when that was present: the part of the block that encoding the
    /// returned tags again reproduces.
    pub fn end_offset(&self) -> usize {
        self.end
    }
}

impl Iterator for TagIter<'_> {
    type Item = DescriptorTag;

    fn next(&mut self) -> Option<DescriptorTag> {
        let n = self.tag_bytes;
        if self.done || self.off + n > self.limit {
            self.done = true;
            return None;
        }
        let mut tag = DescriptorTag::decode(&self.block[self.off..self.off + n]);
        self.off += n;
        self.end = self.off;
        if !tag.flags().contains(TagFlags::SAME_UUID) {
            if self.off + 16 <= self.limit {
                let mut u = [0u8; 16];
                u.copy_from_slice(&self.block[self.off..self.off + 16]);
                tag.uuid = Some(u);
                self.end = self.off + 16;
            }
            self.off += 16;
        }
        if tag.flags().contains(TagFlags::LAST_TAG) {
            self.done = true;
        }
        Some(tag)
    }
}

/// Builds a descriptor block in place.
#[derive(Debug)]
pub struct DescriptorWriter<'a> {
    block: &'a mut [u8],
    layout: JournalLayout,
    off: usize,
    last: Option<usize>,
    count: usize,
}

impl<'a> DescriptorWriter<'a> {
    /// Zeroes `block` (a whole journal block) and writes a descriptor header
    /// for transaction `sequence`.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] when the block cannot hold header and tail.
    pub fn new(block: &'a mut [u8], layout: JournalLayout, sequence: u32) -> Result<Self> {
        need("descriptor block", block, HEADER_SIZE + layout.tail_bytes())?;
        block.fill(0);
        block[..HEADER_SIZE]
            .copy_from_slice(&JournalHeader::new(block_type::DESCRIPTOR, sequence).to_bytes());
        Ok(DescriptorWriter {
            block,
            layout,
            off: HEADER_SIZE,
            last: None,
            count: 0,
        })
    }

    /// Appends a tag; `Ok(false)` when it does not fit (start a new block).
    ///
    /// # Errors
    /// None in practice; encoding errors are passed on.
    pub fn push(&mut self, tag: &DescriptorTag) -> Result<bool> {
        let limit = self.block.len() - self.layout.tail_bytes();
        if self.off + tag.encoded_len(self.layout) > limit {
            return Ok(false);
        }
        let n = tag.encode(self.layout, &mut self.block[self.off..limit])?;
        self.last = Some(self.off);
        self.off += n;
        self.count += 1;
        Ok(true)
    }

    /// Tags written so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no tag was written.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Marks the last tag with `LAST_TAG` and, under checksum v2/v3, stores
    /// the tail checksum from the journal seed `seed`. Returns the number of
    /// tags.
    ///
    /// # Errors
    /// None in practice; checksum errors are passed on.
    pub fn finish(self, seed: u32) -> Result<usize> {
        if let Some(at) = self.last {
            self.block[at + FLAGS_LOW_BYTE] |= num::lo8(u32::from(TagFlags::LAST_TAG.bits()));
        }
        if self.layout.has_csum_v2or3() {
            set_block_tail_checksum(seed, self.block)?;
        }
        Ok(self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{journal_csum_seed, samples};
    use super::*;
    use proptest::prelude::*;

    fn check_sample(block: &[u8], layout: JournalLayout, uuid: &[u8; 16], csums: [u32; 3]) {
        let d = DescriptorBlock::parse(block, layout).unwrap();
        assert_eq!(d.header().sequence(), 1);
        let seed = journal_csum_seed(uuid);
        d.verify_checksum(seed).unwrap();
        let tags: Vec<_> = d.tags().collect();
        let blocks: Vec<u64> = tags.iter().map(|t| t.blocknr(layout).0).collect();
        assert_eq!(blocks, [100, 101, 5000]);
        let flags: Vec<u16> = tags.iter().map(|t| t.flags().bits()).collect();
        assert_eq!(flags, [0, 2, 0xb]);
        // debugfs's misplaced UUID leaves the slot after the first tag zero.
        assert_eq!(tags[0].uuid, Some([0; 16]));
        assert_eq!(tags[1].uuid, None);
        for (k, t) in tags.iter().enumerate() {
            assert_eq!(t.t_checksum, csums[k]);
            let data = samples::data_block(k, block.len());
            t.verify_data(layout, seed, 1, &data).unwrap();
            assert!(t.verify_data(layout, seed, 2, &data).is_err());
            let mut again = *t;
            again.set_checksum(layout, data_block_checksum(seed, 1, &data));
            assert_eq!(again, *t);
        }
        let mut bad = block.to_vec();
        bad[20] ^= 0x80;
        let d = DescriptorBlock::parse(&bad, layout).unwrap();
        assert!(d.verify_checksum(seed).is_err());
    }

    #[test]
    fn csum_v3_sample_from_debugfs() {
        let b = samples::sparse(4096, samples::E_DESCRIPTOR);
        let c = [0xcc3a_806c, 0x4890_20d9, 0xb1f1_54e0];
        check_sample(&b, samples::layout_e(), &samples::UUID_E, c);
    }

    #[test]
    fn csum_v2_sample_from_debugfs() {
        let b = samples::sparse(1024, samples::F_DESCRIPTOR);
        let c = [0xa55c, 0x511d, 0x71e7];
        check_sample(&b, samples::layout_f(), &samples::UUID_F, c);
    }

    #[test]
    fn writer_reproduces_the_sample() {
        for (size, sample, layout, uuid) in [
            (
                4096,
                samples::E_DESCRIPTOR,
                samples::layout_e(),
                samples::UUID_E,
            ),
            (
                1024,
                samples::F_DESCRIPTOR,
                samples::layout_f(),
                samples::UUID_F,
            ),
        ] {
            let seed = journal_csum_seed(&uuid);
            let mut want = samples::sparse(size, sample);
            let d = DescriptorBlock::parse(&want, layout).unwrap();
            let mut block = vec![0xffu8; size];
            let mut w = DescriptorWriter::new(&mut block, layout, 1).unwrap();
            for mut t in d.tags() {
                t.t_flags &= !u32::from(TagFlags::LAST_TAG.bits());
                assert!(w.push(&t).unwrap());
            }
            assert_eq!(w.finish(seed).unwrap(), 3);
            // Everything but debugfs's stray UUID copy.
            let stray = 12 + 12 * layout.tag_bytes();
            want[stray..stray + 16].fill(0);
            set_block_tail_checksum(seed, &mut want).unwrap();
            assert_eq!(block, want);
        }
    }

    #[test]
    fn sixty_four_bit_numbers_and_full_blocks() {
        let layout = JournalLayout::new(JournalIncompat::BIT64);
        let mut block = vec![0u8; 1024];
        let mut w = DescriptorWriter::new(&mut block, layout, 9).unwrap();
        let big = BlockNr(0x1_2345_6789);
        let first = DescriptorTag::new(layout, big, TagFlags::empty(), Some([7; 16]));
        assert!(w.push(&first).unwrap());
        let mut n = 1;
        while w
            .push(&DescriptorTag::new(
                layout,
                BlockNr(n),
                TagFlags::empty(),
                None,
            ))
            .unwrap()
        {
            n += 1;
        }
        assert_eq!(w.len() as u64, n);
        assert_eq!(w.finish(0).unwrap() as u64, n);
        // (1024 - 12 - 28) / 12 tags after the first.
        assert_eq!(n, 1 + 82);
        let d = DescriptorBlock::parse(&block, layout).unwrap();
        let tags: Vec<_> = d.tags().collect();
        assert_eq!(tags.len() as u64, n);
        assert_eq!(tags[0].blocknr(layout), big);
        assert_eq!(tags[0].uuid, Some([7; 16]));
        assert!(tags[n as usize - 1].flags().contains(TagFlags::LAST_TAG));
        // Without 64bit the high half is ignored.
        assert_eq!(
            tags[0].blocknr(JournalLayout::default()),
            BlockNr(0x2345_6789)
        );
    }

    #[test]
    fn garbage_is_rejected_or_bounded() {
        let layout = samples::layout_e();
        assert!(DescriptorBlock::parse(&[0u8; 15], layout).is_err());
        let mut b = vec![0u8; 64];
        assert!(matches!(
            DescriptorBlock::parse(&b, layout),
            Err(FormatError::BadMagic { .. })
        ));
        b[..12].copy_from_slice(&JournalHeader::new(block_type::COMMIT, 1).to_bytes());
        assert!(DescriptorBlock::parse(&b, layout).is_err());
        b[..12].copy_from_slice(&JournalHeader::new(block_type::DESCRIPTOR, 1).to_bytes());
        // All-zero tags lack SAME_UUID: each takes 16 + 16 bytes, and the
        // second one's UUID would cross the tail.
        let d = DescriptorBlock::parse(&b, layout).unwrap();
        let tags: Vec<_> = d.tags().collect();
        assert_eq!(tags.len(), 2);
        assert_eq!(tags[1].uuid, None);
        // A header-only block has no tags.
        let d = DescriptorBlock::parse(&b[..16], layout).unwrap();
        assert_eq!(d.tags().count(), 0);
    }

    fn layouts() -> impl Strategy<Value = JournalLayout> {
        (0u32..64).prop_map(|bits| JournalLayout::new(JournalIncompat::from_bits_truncate(bits)))
    }

    proptest! {
        #[test]
        fn raw_tag_structs_round_trip(b in proptest::array::uniform16(any::<u8>())) {
            let t3 = JournalBlockTag3::read_from_bytes(&b[..]).unwrap();
            prop_assert_eq!(t3.as_bytes(), &b[..]);
            let t = JournalBlockTag::read_from_bytes(&b[..12]).unwrap();
            prop_assert_eq!(t.as_bytes(), &b[..12]);
        }

        #[test]
        fn block_round_trip(
            layout in layouts(),
            size in prop_oneof![Just(1024usize), Just(64), Just(100), Just(16)],
            body in proptest::collection::vec(any::<u8>(), 1024),
        ) {
            let mut block = body[..size].to_vec();
            block[..12].copy_from_slice(&JournalHeader::new(block_type::DESCRIPTOR, 3).to_bytes());
            let d = DescriptorBlock::parse(&block, layout).unwrap();
            let mut it = d.tags();
            let tags: Vec<_> = it.by_ref().collect();
            prop_assert!(tags.len() <= size / 8);
            let end = it.end_offset();
            let mut out = vec![0u8; size];
            let mut off = HEADER_SIZE;
            for t in &tags {
                off += t.encode(layout, &mut out[off..]).unwrap();
            }
            // Only the last tag can have a UUID that did not fit, and the
            // bytes skipped for it lie past `end`.
            prop_assert_eq!(off, end);
            prop_assert_eq!(&out[HEADER_SIZE..end], &block[HEADER_SIZE..end]);
            let _ = d.verify_checksum(1);
        }
    }
}
