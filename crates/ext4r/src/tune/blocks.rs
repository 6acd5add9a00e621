//! The blocks an inode holds, data and mapping blocks alike, as
//! `ext2fs_block_iterate3` visits them: what tune frees when it removes
//! the journal or a quota file. Extent trees and ext2/3 block maps of any
//! depth; blocks are read through [`Meta`] so that changes not yet
//! written are seen.

use super::meta::{corrupt, get16, get32, Meta};
use crate::device::BlockDevice;
use crate::error::Result;

const I_FLAGS: usize = 0x20;
const I_BLOCK: usize = 0x28;
/// `EXT4_EXTENTS_FL`.
const EXTENTS_FL: u32 = 0x0008_0000;
/// `EXT4_INLINE_DATA_FL`.
const INLINE_DATA_FL: u32 = 0x1000_0000;
/// Deepest extent tree walked (the format allows 5 levels).
const MAX_DEPTH: u32 = 5;

impl Meta {
    /// Every block an inode holds, mapping blocks included (in no
    /// particular order: each is freed the same way).
    pub(crate) fn inode_blocks(&self, dev: &dyn BlockDevice, record: &[u8]) -> Result<Vec<u64>> {
        let flags = get32(record, I_FLAGS);
        let mut out = Vec::new();
        if flags & INLINE_DATA_FL != 0 {
            return Ok(out);
        }
        let ib = &record[I_BLOCK..I_BLOCK + 60];
        if flags & EXTENTS_FL != 0 {
            self.extent_blocks(dev, ib, 0, &mut out)?;
        } else {
            for k in 0..12 {
                let b = u64::from(get32(ib, 4 * k));
                if b != 0 {
                    self.take(b, 1, &mut out)?;
                }
            }
            for (k, depth) in [(12, 1), (13, 2), (14, 3)] {
                let b = u64::from(get32(ib, 4 * k));
                if b != 0 {
                    self.indirect_blocks(dev, b, depth, &mut out)?;
                }
            }
        }
        Ok(out)
    }

    /// Adds `[start, start+len)` to the list, refusing blocks outside the
    /// filesystem and lists longer than the filesystem (a map that points
    /// at the same blocks over and over).
    fn take(&self, start: u64, len: u64, out: &mut Vec<u64>) -> Result<()> {
        let end = start.saturating_add(len);
        if start < self.geo.first_data_block || end > self.geo.blocks_count {
            return Err(corrupt(
                "block map",
                format!("blocks {start}..{end} outside the filesystem"),
            ));
        }
        if out.len() as u64 + len > self.geo.blocks_count {
            return Err(corrupt("block map", "more blocks than the filesystem has"));
        }
        out.extend(start..end);
        Ok(())
    }

    fn indirect_blocks(
        &self,
        dev: &dyn BlockDevice,
        b: u64,
        depth: u32,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        self.take(b, 1, out)?;
        let buf = self.read_block(dev, b)?;
        for k in 0..buf.len() / 4 {
            let c = u64::from(get32(&buf, 4 * k));
            if c == 0 {
                continue;
            }
            if depth == 1 {
                self.take(c, 1, out)?;
            } else {
                self.indirect_blocks(dev, c, depth - 1, out)?;
            }
        }
        Ok(())
    }

    fn extent_blocks(
        &self,
        dev: &dyn BlockDevice,
        node: &[u8],
        level: u32,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        if get16(node, 0) != 0xF30A || level > MAX_DEPTH {
            return Err(corrupt("extent tree", "bad header"));
        }
        let entries = get16(node, 2) as usize;
        let depth = get16(node, 6);
        if 12 + 12 * entries > node.len() {
            return Err(corrupt("extent tree", "too many entries"));
        }
        for k in 0..entries {
            let e = &node[12 + 12 * k..24 + 12 * k];
            if depth == 0 {
                let len = u64::from(get16(e, 4));
                // Above 32768: an unwritten extent.
                let len = if len > 32768 { len - 32768 } else { len };
                let start = u64::from(get32(e, 8)) | (u64::from(get16(e, 6)) << 32);
                self.take(start, len, out)?;
            } else {
                let child = u64::from(get32(e, 4)) | (u64::from(get16(e, 8)) << 32);
                self.take(child, 1, out)?;
                let buf = self.read_block(dev, child)?;
                self.extent_blocks(dev, &buf, level + 1, out)?;
            }
        }
        Ok(())
    }
}
