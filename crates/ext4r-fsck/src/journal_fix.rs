//! Repairs of the internal journal, as e2fsck makes them before pass 1:
//! a journal whose inode or magic is bad is deleted (the superblock stops
//! pointing at it; pass 1 then clears the inode); a journal superblock
//! that is corrupt in another way is reset to an empty journal of the
//! inode's length; stray v2 fields in a v1 superblock are zeroed.
//!
//! A journal found bad is never replayed, by e2fsck either, so nothing
//! that e2fsck would keep is dropped. A deleted journal is made anew at
//! the end of the repair, as e2fsck's "Recreate journal", by the engine's
//! [`ext4r::journal_create::add_journal`] (see `repair.rs`).

use ext4r_format::features::{Compat, Incompat};
use ext4r_format::jbd2::{block_type, JBD2_MAGIC};
use ext4r_format::superblock::Superblock;

/// Bytes of a version 1 journal superblock (header, block size, length,
/// first block, sequence, start, errno); e2fsck's `V1_SB_SIZE`.
const V1_SB_SIZE: usize = 0x24;

/// Makes the superblock forget its journal: no `has_journal`, no
/// `needs_recovery`, no journal inode or block backup.
pub(crate) fn delete_journal(sb: &mut Superblock) {
    let f = sb.s_feature_compat.get() & !Compat::HAS_JOURNAL.bits();
    sb.s_feature_compat.set(f);
    let f = sb.s_feature_incompat.get() & !Incompat::RECOVER.bits();
    sb.s_feature_incompat.set(f);
    sb.s_journal_inum.set(0);
    for w in sb.s_jnl_blocks.iter_mut() {
        w.set(0);
    }
}

/// Rewrites a journal superblock block as an empty journal of `maxlen`
/// blocks: a valid v1 signature is kept, anything else becomes v2; every
/// other field is zero (no features, so no checksum), the sequence a fresh
/// number so that old transactions in the log cannot be taken as valid.
pub(crate) fn reset_super(block: &mut [u8], block_size: u32, maxlen: u32, sequence: u32) {
    if block.len() < V1_SB_SIZE {
        return;
    }
    let be = |b: &[u8], at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let v1 = be(block, 0) == JBD2_MAGIC && be(block, 4) == block_type::SUPERBLOCK_V1;
    if !v1 {
        block[0..4].copy_from_slice(&JBD2_MAGIC.to_be_bytes());
        block[4..8].copy_from_slice(&block_type::SUPERBLOCK_V2.to_be_bytes());
    }
    // The header's sequence field and everything after it.
    block[8..].fill(0);
    block[12..16].copy_from_slice(&block_size.to_be_bytes());
    block[16..20].copy_from_slice(&maxlen.to_be_bytes());
    block[20..24].copy_from_slice(&1u32.to_be_bytes());
    block[24..28].copy_from_slice(&sequence.to_be_bytes());
}

/// Zeroes what follows the v1 fields of a journal superblock.
pub(crate) fn clear_v2_fields(block: &mut [u8]) {
    if let Some(rest) = block.get_mut(V1_SB_SIZE..) {
        rest.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_gives_an_empty_v2_journal_superblock() {
        let mut b = vec![0xabu8; 1024];
        reset_super(&mut b, 1024, 2048, 7);
        let sb = ext4r_format::jbd2::JournalSuperblock::parse(&b).ok();
        let sb = sb.as_ref();
        assert_eq!(sb.map(|s| s.s_maxlen.get()), Some(2048));
        assert_eq!(sb.map(|s| s.s_first.get()), Some(1));
        assert_eq!(sb.map(|s| s.s_start.get()), Some(0));
        assert_eq!(sb.map(|s| s.s_feature_incompat.get()), Some(0));
    }
}
