//! Fixes of the journal: its inode, its superblock, and the superblock's journal fields.

use super::super::*;

impl Writer<'_> {
    /// Fixes of the journal: its inode, its superblock, and the superblock's journal fields.
    pub(in crate::writer) fn add_journal(&mut self, f: &Fix) -> Result<()> {
        let bs = self.fs.block_size();
        match f {
            Fix::MoveJournal(from, b, off, owner) => {
                let rec = self.inode(*from)?.clone();
                let to = self.inode(ext4r_format::inode::ino::JOURNAL)?;
                let n = to.len().min(rec.len());
                to[..n].copy_from_slice(&rec[..n]);
                self.add(&Fix::DirEntryClear(*b, *off, *owner))?;
                self.add(&Fix::JournalInum(ext4r_format::inode::ino::JOURNAL))?;
                self.add(&Fix::ClearInode(*from))?;
                self.add(&Fix::FreeInode(*from, false))?;
            }
            Fix::DeleteJournal => {
                crate::journal_fix::delete_journal(&mut self.sb);
                self.sb_dirty = true;
            }
            Fix::ResetJournalSuper(b, maxlen) => {
                // A sequence number unlike any the old log could hold.
                let seq = self.now ^ num::lo32(*b).rotate_left(16) ^ 0x5a5a_0001;
                let blk = self.block(*b, BlockKind::Plain)?;
                crate::journal_fix::reset_super(blk, bs, *maxlen, seq);
                let f = self.sb.s_feature_incompat.get() & !Incompat::RECOVER.bits();
                self.sb.s_feature_incompat.set(f);
                self.sb_dirty = true;
            }
            Fix::JournalInum(ino) => {
                self.sb.s_journal_inum.set(*ino);
                self.sb_dirty = true;
            }
            Fix::RestoreJournalInode(ino) => {
                let sb = self.sb.clone();
                let rec = self.inode(*ino)?;
                let _ = crate::journal_check::backup_record(&sb, rec);
            }
            Fix::ClearV2JournalFields(b) => {
                crate::journal_fix::clear_v2_fields(self.block(*b, BlockKind::Plain)?);
            }
            _ => unreachable!("Writer::add routes {f:?} elsewhere"),
        }
        Ok(())
    }
}
