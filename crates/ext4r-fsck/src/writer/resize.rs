//! Writing the recreated resize inode: the record and blocks come from the
//! engine's mke2fs layout; the block bitmap is the check's (pass 5 counts
//! the new double-indirect block in use in the same round).

use ext4r::Result;
use ext4r_format::features::Compat;
use ext4r_format::inode::ino::RESIZE;

use super::{BlockKind, Writer};

impl Writer<'_> {
    pub(super) fn recreate_resize_inode(&mut self, dind: u64) -> Result<()> {
        let geo = self.fs.geometry().clone();
        let now = i64::from(self.now);
        let made = ext4r::mkfs::resize_inode::build(&geo, geo.inode_size as usize, dind, now);
        for (b, data) in made.blocks {
            *self.block(b, BlockKind::Plain)? = data;
            self.meta_writes.insert(b);
        }
        let rec = self.inode(RESIZE)?;
        let n = rec.len().min(made.inode.len());
        rec.fill(0);
        rec[..n].copy_from_slice(&made.inode[..n]);
        Ok(())
    }
}

impl Writer<'_> {
    /// No resize inode: the feature off and no reserved GDT blocks (their
    /// blocks are freed by pass 5 of the next round).
    pub(super) fn drop_resize_feature(&mut self) {
        let compat = self.sb.s_feature_compat.get() & !Compat::RESIZE_INODE.bits();
        self.sb.s_feature_compat.set(compat);
        self.sb.s_reserved_gdt_blocks.set(0);
        self.sb_dirty = true;
    }
}
