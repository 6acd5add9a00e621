//! Writing the recreated resize inode: the record and blocks come from the
//! engine's mke2fs layout; the block bitmap is the check's (pass 5 counts
//! the new double-indirect block in use in the same round).

use ext4r::Result;
use ext4r_format::inode::ino::RESIZE;

use super::{BlockKind, Writer};

impl Writer<'_> {
    pub(super) fn recreate_resize_inode(&mut self, dind: u64) -> Result<()> {
        let geo = self.fs.geometry().clone();
        let now = i64::from(self.now);
        let made = ext4r::mkfs::resize_inode::build(&geo, geo.inode_size as usize, dind, now);
        for (b, data) in made.blocks {
            self.allow_meta_write(b)?;
            *self.block(b, BlockKind::Plain)? = data;
        }
        let rec = self.inode(RESIZE)?;
        let n = rec.len().min(made.inode.len());
        rec.fill(0);
        rec[..n].copy_from_slice(&made.inode[..n]);
        Ok(())
    }
}
