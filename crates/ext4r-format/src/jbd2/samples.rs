//! Journal blocks written by e2fsprogs 1.47.0, for tests.
//!
//! Made with `mke2fs -t ext4 -O metadata_csum -U <uuid>` on image files, then
//! `debugfs -w` with `jo -c` (checksum v3; `jo -c -v 2` for v2),
//! `jw -b 100,101,5000 -r 200,201[,202] <data>` and `jc`, and read back with
//! `dd` at the blocks `debugfs -R 'bmap <8> N'` names. Blocks are stored
//! sparsely as (offset, hex) runs; everything else is zero.
//!
//! Image "E": 256 MiB, 4 KiB blocks, 64bit, journal checksum v3.
//! Image "F": 32 MiB, 1 KiB blocks, ^64bit, journal checksum v2.
//! The fresh superblocks come from the same mke2fs runs before debugfs, and
//! from a 64 MiB image with 1 KiB blocks.
//!
//! debugfs 1.47.0 writes the first tag's UUID 16 tag-*structs* past the tag
//! (`jdbt + tag_bytes` on a `journal_block_tag_t *`), so the UUID slot that
//! follows the tag is zero and a stray copy sits further on; both are kept as
//! written. It also stores the commit time with `cpu_to_be32` into the
//! 64-bit `h_commit_sec`.

#[allow(unused_imports)]
use crate::prelude::*;

use super::{JournalIncompat, JournalLayout};

/// UUID of image E (also the fresh-journal samples).
pub(super) const UUID_E: [u8; 16] = [
    0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55,
];
/// UUID of image F.
pub(super) const UUID_F: [u8; 16] = [
    0x66, 0x66, 0x66, 0x66, 0x77, 0x77, 0x88, 0x88, 0x99, 0x99, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa,
];

/// A sparse block: (offset, hex bytes).
pub(super) type Sparse = &'static [(usize, &'static str)];

/// Journal superblock of a fresh 256 MiB, 4 KiB-block filesystem.
pub(super) const FRESH_SB_4K: Sparse = &[
    (0x000, "c03b399800000004"),
    (0x00c, "000010000000100000000001000000010000000000000000"),
    (0x030, "1111111122223333444455555555555500000001"),
];
/// Journal superblock of a fresh 64 MiB, 1 KiB-block filesystem.
pub(super) const FRESH_SB_1K: Sparse = &[
    (0x000, "c03b399800000004"),
    (0x00c, "00000400000010000000000100000001"),
    (0x030, "1111111122223333444455555555555500000001"),
];

/// Image E's journal superblock after `jo -c`: revoke, 64bit, csum v3.
pub(super) const CSUM_V3_SB: Sparse = &[
    (0x000, "c03b399800000004"),
    (0x00c, "0000100000001000000000010000000100000001"),
    (0x028, "00000013"),
    (0x030, "1111111122223333444455555555555500000001"),
    (0x050, "04000000"),
    (0x0fc, "4c323564"),
];
/// Image E: descriptor block of transaction 1 (journal block 1).
pub(super) const E_DESCRIPTOR: Sparse = &[
    (0x000, "c03b3998000000010000000100000064"),
    (0x018, "cc3a806c"),
    (0x02c, "0000006500000002"),
    (0x038, "489020d9000013880000000b"),
    (0x048, "b1f154e0"),
    (0x0cc, "11111111222233334444555555555555"),
    (0xffc, "403deadf"),
];
/// Image E: revoke block (journal block 5), 64-bit records.
pub(super) const E_REVOKE: Sparse = &[
    (0x000, "c03b3998000000050000000100000020"),
    (0x014, "000000c8"),
    (0x01c, "000000c9"),
    (0xffc, "1589e1c4"),
];
/// Image E: commit block (journal block 6).
pub(super) const E_COMMIT: Sparse = &[
    (0x000, "c03b39980000000200000001"),
    (0x010, "3cfecbce"),
    (0x030, "6b037e9c"),
    (0x038, "20db7fc0"),
];

/// Image F's journal superblock after `jo -c -v 2`: revoke, csum v2.
pub(super) const CSUM_V2_SB: Sparse = &[
    (0x000, "c03b399800000004"),
    (0x00c, "0000040000001000000000010000000100000001"),
    (0x028, "00000009"),
    (0x030, "66666666777788889999aaaaaaaaaaaa00000001"),
    (0x050, "04000000"),
    (0x0fc, "4ad730e0"),
];
/// Image F: descriptor block, 10-byte tags.
pub(super) const F_DESCRIPTOR: Sparse = &[
    (0x000, "c03b3998000000010000000100000064a55c0000"),
    (0x028, "0065511d000200000000138871e7000b"),
    (0x084, "66666666777788889999aaaaaaaaaaaa"),
    (0x3fc, "5417b675"),
];
/// Image F: revoke block, 32-bit records.
pub(super) const F_REVOKE: Sparse = &[
    (
        0x000,
        "c03b399800000005000000010000001c000000c8000000c9000000ca",
    ),
    (0x3fc, "400bc21e"),
];
/// Image F: commit block.
pub(super) const F_COMMIT: Sparse = &[
    (0x000, "c03b39980000000200000001"),
    (0x010, "19fdeb9f"),
    (0x030, "6b037e9c"),
    (0x038, "21fd3f88"),
];

/// Image E's journal layout.
pub(super) fn layout_e() -> JournalLayout {
    JournalLayout::new(JournalIncompat::REVOKE | JournalIncompat::BIT64 | JournalIncompat::CSUM_V3)
}

/// Image F's journal layout.
pub(super) fn layout_f() -> JournalLayout {
    JournalLayout::new(JournalIncompat::REVOKE | JournalIncompat::CSUM_V2)
}

/// Expands a sparse sample into a block of `size` bytes.
pub(super) fn sparse(size: usize, runs: Sparse) -> Vec<u8> {
    let mut b = vec![0u8; size];
    for &(at, hex) in runs {
        for (i, pair) in hex.as_bytes().chunks_exact(2).enumerate() {
            let s = core::str::from_utf8(pair).unwrap();
            b[at + i] = u8::from_str_radix(s, 16).unwrap();
        }
    }
    b
}

/// Data block `k` of the transaction as it sits in the journal: the file
/// given to `jw` held `(j * 31 + k * 17) % 251` at byte `j` of block `k`, and
/// block 2 began with the jbd2 magic, which the journal copy has escaped to
/// zero.
pub(super) fn data_block(k: usize, size: usize) -> Vec<u8> {
    let mut b: Vec<u8> = (0..size).map(|j| ((j * 31 + k * 17) % 251) as u8).collect();
    if k == 2 {
        b[..4].fill(0);
    }
    b
}
