//! A change to the primary superblock, as the superblock checks plan it.

use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::superblock::Superblock;

/// One change to the primary superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuperEdit {
    /// A new UUID (the descriptors' checksums follow it).
    Uuid([u8; 16]),
    /// Set `s_mtime` (true) or `s_wtime` to this time.
    Time(bool, i64),
    /// Set these `s_flags` bits and clear those.
    Flags(u32, u32),
    /// Turn off metadata_csum_seed and zero `s_checksum_seed`.
    NoCsumSeed,
    /// Turn off meta_bg and zero `s_first_meta_bg`.
    NoMetaBg,
    /// Make a revision 0 superblock dynamic (`ext2fs_update_dynamic_rev`).
    DynamicRev,
    /// Point at a new MMP block.
    MmpBlock(u64),
    /// Turn off orphan_file (and orphan_present).
    NoOrphanFile,
    /// The journal inode's `i_block` and size (high, low) as the backup
    /// `s_jnl_blocks` keeps them.
    JournalBackup([u32; 17]),
    /// Set the external journal's device hint (`s_journal_dev`).
    JournalDev(u32),
    /// Clear the valid flag of `s_state`, so that the next check is a
    /// full one (as e2fsck after a release of orphans that went wrong).
    NotValid,
}

impl SuperEdit {
    /// Applies the edit; true when every descriptor must be rewritten
    /// (their checksums depend on what changed).
    pub(crate) fn apply(&self, sb: &mut Superblock) -> bool {
        match self {
            SuperEdit::Uuid(u) => {
                sb.s_uuid = *u;
                return true;
            }
            SuperEdit::Time(true, t) => sb.set_mtime(*t),
            SuperEdit::Time(false, t) => sb.set_wtime(*t),
            SuperEdit::Flags(set, clear) => sb.s_flags.set((sb.s_flags.get() | set) & !clear),
            SuperEdit::NoCsumSeed => {
                let f = sb.s_feature_incompat.get() & !Incompat::CSUM_SEED.bits();
                sb.s_feature_incompat.set(f);
                sb.s_checksum_seed.set(0);
            }
            SuperEdit::NoMetaBg => {
                let f = sb.s_feature_incompat.get() & !Incompat::META_BG.bits();
                sb.s_feature_incompat.set(f);
                sb.s_first_meta_bg.set(0);
            }
            SuperEdit::DynamicRev => {
                if sb.s_rev_level.get() == 0 {
                    sb.s_rev_level.set(1);
                    sb.s_first_ino.set(11);
                    sb.s_inode_size.set(128);
                }
            }
            SuperEdit::MmpBlock(b) => sb.s_mmp_block.set(*b),
            SuperEdit::NoOrphanFile => {
                let c = sb.s_feature_compat.get() & !Compat::ORPHAN_FILE.bits();
                sb.s_feature_compat.set(c);
                let r = sb.s_feature_ro_compat.get() & !RoCompat::ORPHAN_PRESENT.bits();
                sb.s_feature_ro_compat.set(r);
            }
            SuperEdit::JournalBackup(words) => {
                for (w, v) in sb.s_jnl_blocks.iter_mut().zip(words) {
                    w.set(*v);
                }
                sb.s_jnl_backup_type = 1;
            }
            SuperEdit::JournalDev(d) => sb.s_journal_dev.set(*d),
            SuperEdit::NotValid => {
                let st = sb.s_state.get() & !ext4r_format::superblock::STATE_VALID;
                sb.s_state.set(st);
            }
        }
        false
    }
}
