//! Inode table blocks that hold garbage, as libext2fs's inode scan judges
//! them for e2fsck (`check_inode_block_sanity`): walking a block's
//! records in order, one is "insane" when its checksum fails, or (its
//! checksum good) its extents flag is set over an invalid extent header,
//! or it is an in-use file, directory or long symlink with more than half
//! of its fifteen block pointers outside the filesystem. Once more than
//! half a block's records have been insane, the whole block is garbage,
//! and e2fsck clears each in-use inode of it (`PR_1_INODE_IS_GARBAGE`)
//! rather than check it field by field: a torn or misdirected write
//! would otherwise become files over random blocks.
//!
//! One deliberate difference: with metadata_csum an inode whose checksum
//! verifies is kept (its record is what was written for it); e2fsck
//! clears those too.

use ext4r_format::extent::EXTENT_MAGIC;

const S_IFMT: u16 = 0o170000;
const S_IFREG: u16 = 0o100000;
const S_IFDIR: u16 = 0o040000;
const S_IFLNK: u16 = 0o120000;
const EXTENTS_FL: u32 = 0x0008_0000;
const INLINE_DATA_FL: u32 = 0x1000_0000;

fn le16(r: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([r[at], r[at + 1]])
}

fn le32(r: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]])
}

/// libext2fs's `ext2fs_extent_header_verify` on the 60 bytes of `i_block`.
fn extent_header_bad(r: &[u8]) -> bool {
    let h = &r[40..100];
    if le16(h, 0) != EXTENT_MAGIC {
        return true;
    }
    let (entries, max) = (le16(h, 2), le16(h, 4));
    if entries > max {
        return true;
    }
    // 12-byte entries at either depth; up to two spare at the end.
    let fit = (60 - 12) / 12;
    max > fit || max < fit - 2
}

/// Whether a record with a good checksum still looks insane.
fn looks_insane(r: &[u8], first_data_block: u64, blocks_count: u64) -> bool {
    let flags = le32(r, 32);
    if flags & EXTENTS_FL != 0 {
        return extent_header_bad(r);
    }
    if flags & INLINE_DATA_FL != 0 {
        return false;
    }
    let mode = le16(r, 0) & S_IFMT;
    if mode != S_IFREG && mode != S_IFDIR && mode != S_IFLNK {
        return false;
    }
    let size = u64::from(le32(r, 4)) | (u64::from(le32(r, 108)) << 32);
    if mode == S_IFLNK && size <= 60 {
        return false;
    }
    if le16(r, 26) == 0 {
        return false;
    }
    let bad = (0..15)
        .map(|k| u64::from(le32(r, 40 + 4 * k)))
        .filter(|&b| b != 0 && (b < first_data_block || b >= blocks_count))
        .count();
    bad > 15 / 2
}

/// For each record of `buf` (inode table blocks from a block boundary,
/// `bad_csum` saying whose checksum failed), whether its block is
/// garbage.
pub(crate) fn garbage_blocks(
    buf: &[u8],
    isize: usize,
    block_size: usize,
    bad_csum: impl Fn(usize) -> bool,
    first_data_block: u64,
    blocks_count: u64,
) -> Vec<bool> {
    let n = buf.len() / isize;
    let per_block = block_size / isize;
    let mut out = vec![false; n];
    if per_block < 2 {
        return out;
    }
    let mut start = 0;
    while start < n {
        let end = (start + per_block).min(n);
        let mut badness = 0;
        for k in start..end {
            let r = &buf[k * isize..(k + 1) * isize];
            if bad_csum(k) || looks_insane(r, first_data_block, blocks_count) {
                badness += 1;
            }
            if badness > per_block / 2 {
                out[start..end].fill(true);
                break;
            }
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_of_bad_checksums_is_garbage_and_one_bad_record_is_not() {
        let buf = vec![0u8; 4096];
        let all = garbage_blocks(&buf, 256, 4096, |_| true, 0, 1000);
        assert!(all.iter().all(|&g| g));
        let one = garbage_blocks(&buf, 256, 4096, |k| k == 3, 0, 1000);
        assert!(one.iter().all(|&g| !g));
        // Exactly half is not more than half.
        let half = garbage_blocks(&buf, 256, 4096, |k| k < 8, 0, 1000);
        assert!(half.iter().all(|&g| !g));
        let nine = garbage_blocks(&buf, 256, 4096, |k| k < 9, 0, 1000);
        assert!(nine.iter().all(|&g| g));
    }

    #[test]
    fn block_maps_out_of_range_are_insane() {
        let mut r = vec![0u8; 256];
        r[0..2].copy_from_slice(&(S_IFREG | 0o644).to_le_bytes());
        r[26] = 1;
        for k in 0..8 {
            r[40 + 4 * k..44 + 4 * k].copy_from_slice(&5000u32.to_le_bytes());
        }
        assert!(looks_insane(&r, 0, 1000));
        r[40..44].copy_from_slice(&5u32.to_le_bytes());
        assert!(!looks_insane(&r, 0, 1000));
    }
}
