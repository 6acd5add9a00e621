//! Block-mapped (ext2/ext3) files as mkfs creates them: blocks handed out
//! one after another, with the indirect blocks allocated at the moment the
//! map first needs them, the order `ext2fs_bmap2(BMAP_ALLOC)` follows.
use ext4r_format::num;

/// Direct pointers in `i_block`.
const NDIR: u64 = 12;

/// A block number as a 32-bit block-map pointer.
///
/// mkfs writes block pointers only where every block number is below 2^32:
/// block-mapped files exist only without `64bit` (mkfs demands extents
/// with it), a filesystem without `64bit` has fewer than 2^32 blocks (mkfs
/// refuses a bigger one), and the resize inode is dropped past 2^32 blocks.
#[allow(clippy::cast_possible_truncation)] // block numbers < 2^32 where pointers are written
pub(crate) fn ptr(b: u64) -> u32 {
    b as u32
}

/// A block-mapped file's blocks.
#[derive(Debug, Clone, Default)]
pub(crate) struct MappedFile {
    /// Data blocks by logical number.
    pub data: Vec<u64>,
    /// Single-indirect blocks: (block, logical first data block it maps).
    pub ind: Vec<(u64, u64)>,
    /// The double-indirect block, if any, with its child indirect blocks in
    /// order.
    pub dind: Option<(u64, Vec<u64>)>,
}

impl MappedFile {
    /// Allocates `count` data blocks with `alloc(goal)`, indirect blocks
    /// included, starting from `goal`.
    pub(crate) fn allocate<E>(
        count: u64,
        apb: u64,
        goal: u64,
        mut alloc: impl FnMut(u64) -> Result<u64, E>,
    ) -> Result<Self, E> {
        let mut f = MappedFile::default();
        let mut last = goal;
        for l in 0..count {
            if l >= NDIR && l < NDIR + apb && l == NDIR {
                last = alloc(last)?;
                f.ind.push((last, l));
            } else if l >= NDIR + apb {
                let rel = l - NDIR - apb;
                if rel >= apb * apb {
                    // Triple-indirect files are far beyond what mkfs makes
                    // (journals are at most 10,240,000 blocks).
                    break;
                }
                if rel == 0 {
                    last = alloc(last)?;
                    f.dind = Some((last, Vec::new()));
                }
                if rel % apb == 0 {
                    last = alloc(last)?;
                    if let Some((_, kids)) = f.dind.as_mut() {
                        kids.push(last);
                    }
                }
            }
            last = alloc(last)?;
            f.data.push(last);
        }
        Ok(f)
    }

    /// Every block the file occupies (data and mapping), for i_blocks.
    pub(crate) fn total_blocks(&self) -> u64 {
        self.data.len() as u64
            + self.ind.len() as u64
            + self
                .dind
                .as_ref()
                .map_or(0, |(_, kids)| 1 + kids.len() as u64)
    }

    /// The 15 `i_block` pointers.
    pub(crate) fn i_block(&self) -> [u32; 15] {
        let mut ib = [0u32; 15];
        for (i, b) in self.data.iter().take(num::index(NDIR)).enumerate() {
            ib[i] = ptr(*b);
        }
        if let Some((b, _)) = self.ind.first() {
            ib[12] = ptr(*b);
        }
        if let Some((b, _)) = &self.dind {
            ib[13] = ptr(*b);
        }
        ib
    }

    /// The indirect blocks and their contents (little-endian pointers).
    pub(crate) fn mapping_blocks(&self, apb: u64) -> Vec<(u64, Vec<u32>)> {
        let mut out = Vec::new();
        let ptrs = |from: u64| -> Vec<u32> {
            let end = (from + apb).min(self.data.len() as u64);
            (from..end).map(|l| ptr(self.data[num::index(l)])).collect()
        };
        if let Some((b, first)) = self.ind.first() {
            out.push((*b, ptrs(*first)));
        }
        if let Some((d, kids)) = &self.dind {
            out.push((*d, kids.iter().map(|&k| ptr(k)).collect()));
            for (i, k) in kids.iter().enumerate() {
                out.push((*k, ptrs(NDIR + apb + i as u64 * apb)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indirect_blocks_interleave_like_ext3() {
        let mut next = 786u64;
        let f = MappedFile::allocate(12 + 256 + 300, 256, 786, |_| -> Result<u64, ()> {
            next += 1;
            Ok(next)
        })
        .unwrap();
        // (0-11):787-798, (IND):799, (12-267):800-1055, (DIND):1056,
        // (IND):1057, (268-523):1058-1313 as debugfs shows for mke2fs's.
        assert_eq!(f.data[0], 787);
        assert_eq!(f.data[11], 798);
        assert_eq!(f.ind[0].0, 799);
        assert_eq!(f.data[12], 800);
        assert_eq!(f.dind.as_ref().unwrap().0, 1056);
        assert_eq!(f.dind.as_ref().unwrap().1[0], 1057);
        assert_eq!(f.data[268], 1058);
        assert_eq!(f.total_blocks(), 12 + 256 + 300 + 1 + 1 + 2);
    }
}
