//! Free-space figures: the largest free extent and e2freefrag's histogram
//! of free extent sizes (misc/e2freefrag.c: power-of-two buckets, the last
//! one open-ended). On an unmounted filesystem the extents come from the
//! block bitmaps, as `e2freefrag` reads them offline (runs continue across
//! group boundaries); on a mounted one from `FS_IOC_GETFSMAP`, as it reads
//! them online (the kernel reports them group by group).

use std::fmt::Write as _;

use ext4r::fs::Filesystem;
use ext4r_format::features::RoCompat;
use ext4r_format::group_desc::BG_BLOCK_UNINIT;
use ext4r_format::GroupNr;

/// Histogram buckets (`MAX_HIST`).
const MAX_HIST: usize = 32;

/// Free extents of a filesystem, summarised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeSpace {
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks in the filesystem.
    pub total_blocks: u64,
    /// Free blocks counted.
    pub free_blocks: u64,
    /// Number of free extents.
    pub extents: u64,
    /// Smallest and largest free extent, in blocks (0 when none).
    pub min: u64,
    /// Largest free extent, in blocks.
    pub max: u64,
    /// Per bucket: (extents, blocks); bucket `i` holds sizes in
    /// `[2^(i-1), 2^i)` blocks.
    pub hist: [(u64, u64); MAX_HIST],
}

impl FreeSpace {
    /// An empty summary.
    pub fn new(block_size: u32, total_blocks: u64) -> Self {
        FreeSpace {
            block_size,
            total_blocks,
            free_blocks: 0,
            extents: 0,
            min: 0,
            max: 0,
            hist: [(0, 0); MAX_HIST],
        }
    }

    /// Counts one free extent of `len` blocks (e2freefrag's
    /// `update_chunk_stats`: bucket `log2(len) + 1`).
    pub fn add(&mut self, len: u64) {
        if len == 0 {
            return;
        }
        let idx = ((63 - len.leading_zeros()) as usize + 1).min(MAX_HIST - 1);
        self.hist[idx].0 += 1;
        self.hist[idx].1 += len;
        self.min = if self.extents == 0 {
            len
        } else {
            self.min.min(len)
        };
        self.max = self.max.max(len);
        self.extents += 1;
        self.free_blocks += len;
    }

    /// Free extents of an unmounted filesystem from its block bitmaps.
    /// Groups with `BLOCK_UNINIT` hold only their own superblock copy,
    /// descriptors and group tables, as libext2fs computes them.
    ///
    /// # Errors
    /// Reading a bitmap block fails, or a descriptor points outside the
    /// filesystem.
    pub fn from_bitmaps(fs: &Filesystem) -> ext4r::Result<Self> {
        let geo = fs.geometry().clone();
        let sb = fs.superblock();
        let wide = geo.desc_size >= 64 && sb.has_incompat(ext4r_format::features::Incompat::BIT64);
        let csum =
            sb.has_ro_compat(RoCompat::METADATA_CSUM) || sb.has_ro_compat(RoCompat::GDT_CSUM);
        let ratio = geo.cluster_ratio();
        let mut out = FreeSpace::new(geo.block_size, geo.blocks_count);
        let bs = u64::from(geo.block_size);
        let mut run = 0u64;
        let mut bitmap = vec![0u8; geo.block_size as usize];
        for g in 0..geo.group_count {
            let d = fs.group_desc(GroupNr(g))?;
            let blocks = geo.group_blocks(g);
            let clusters = blocks.div_ceil(ratio).min(bs * 8);
            if csum && d.flags() & BG_BLOCK_UNINIT != 0 {
                uninit_bitmap(fs, g, wide, &mut bitmap);
            } else {
                let at = d.block_bitmap(wide);
                if at < geo.first_data_block || at >= geo.blocks_count {
                    return Err(ext4r::Error::corrupt(
                        format!("group {g}"),
                        ext4r_format::FormatError::invalid(
                            "block bitmap",
                            format!("at block {at}, outside the filesystem"),
                        ),
                    ));
                }
                fs.device().read_at(&mut bitmap, at * bs)?;
            }
            for c in 0..clusters {
                let used = bitmap[(c / 8) as usize] & (1 << (c % 8)) != 0;
                if used {
                    out.add(run);
                    run = 0;
                } else {
                    // The last cluster of the last group may run past the end.
                    run += ratio.min(blocks - (c * ratio).min(blocks));
                }
            }
        }
        out.add(run);
        Ok(out)
    }

    /// Free extents of a mounted filesystem, through `FS_IOC_GETFSMAP` on
    /// any open file or directory of it.
    ///
    /// # Errors
    /// The ioctl fails (kernels before 4.12, other filesystems).
    pub fn from_fsmap(
        fd: impl std::os::fd::AsFd,
        block_size: u32,
        total_blocks: u64,
    ) -> std::io::Result<Self> {
        let mut out = FreeSpace::new(block_size, total_blocks);
        for (_, len) in crate::sys::getfsmap_free(fd)? {
            out.add(len / u64::from(block_size));
        }
        Ok(out)
    }

    /// e2freefrag's histogram section, as it prints it.
    pub fn histogram(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "HISTOGRAM OF FREE EXTENT SIZES:");
        let _ = writeln!(
            s,
            "Extent Size Range :  {:>12}  {:>12}  {:>7}",
            "Free extents", "Free Blocks", "Percent"
        );
        let bits = self.block_size.trailing_zeros() as i64;
        let units = b"KMGTPEZY";
        let mut unit = 0usize;
        let mut shift = 10i64;
        let mut start = 0u64;
        for (i, &(n, blocks)) in self.hist.iter().enumerate() {
            let e = i as i64 + bits - shift;
            let end = if e >= 0 { 1u64 << e } else { 0 };
            if n != 0 {
                let u = units.get(unit).copied().unwrap_or(b'?') as char;
                let end_str = if i == MAX_HIST - 1 {
                    "max ".to_string()
                } else {
                    format!("{end:5}{u}-")
                };
                let pct = if self.free_blocks == 0 {
                    0.0
                } else {
                    blocks as f64 * 100.0 / self.free_blocks as f64
                };
                let _ = writeln!(
                    s,
                    "{start:5}{u}...{end_str:>7}  :  {n:12}  {blocks:12}  {pct:6.2}%"
                );
            }
            start = end;
            if start == 1 << 10 {
                start = 1;
                shift += 10;
                unit += 1;
            }
        }
        s
    }
}

/// The block bitmap of a `BLOCK_UNINIT` group: its superblock copy and
/// descriptor blocks, and its own bitmaps and inode table where they lie
/// inside it (libext2fs's `mark_uninit_bg_group_blocks`).
fn uninit_bitmap(fs: &Filesystem, g: u32, wide: bool, bitmap: &mut [u8]) {
    bitmap.fill(0);
    let geo = fs.geometry();
    let first = geo.group_first_block(g);
    let blocks = geo.group_blocks(g);
    let ratio = geo.cluster_ratio();
    let mut mark = |b: u64, n: u64| {
        for x in b..b.saturating_add(n) {
            if x >= first && x - first < blocks {
                let c = (x - first) / ratio;
                if let Some(byte) = bitmap.get_mut((c / 8) as usize) {
                    *byte |= 1 << (c % 8);
                }
            }
        }
    };
    let m = geo.group_meta(g);
    if let Some(b) = m.super_block {
        mark(b, 1);
    }
    if let Some((b, n)) = m.old_desc {
        mark(b, n);
    }
    if let Some(b) = m.meta_desc {
        mark(b, 1);
    }
    if let Ok(d) = fs.group_desc(GroupNr(g)) {
        mark(d.block_bitmap(wide), 1);
        mark(d.inode_bitmap(wide), 1);
        mark(d.inode_table(wide), u64::from(geo.inode_blocks_per_group()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_e2freefrags() {
        let mut f = FreeSpace::new(4096, 1000);
        for len in [1, 2, 3, 4, 100] {
            f.add(len);
        }
        assert_eq!(f.hist[1], (1, 1));
        assert_eq!(f.hist[2], (2, 5));
        assert_eq!(f.hist[3], (1, 4));
        assert_eq!(f.hist[7], (1, 100));
        assert_eq!((f.min, f.max, f.extents, f.free_blocks), (1, 100, 5, 110));
        let h = f.histogram();
        // e2freefrag 1.47.0's lines for 4 KiB blocks.
        assert!(
            h.contains("    4K...    8K-  :             1             1    0.91%"),
            "{h}"
        );
        assert!(
            h.contains("    8K...   16K-  :             2             5    4.55%"),
            "{h}"
        );
        assert!(
            h.contains("  256K...  512K-  :             1           100   90.91%"),
            "{h}"
        );
    }
}
