//! Unlinking a file that is still open: as the kernel does, the last
//! name goes but the inode stays, with no links, on the orphan list,
//! until its last user lets go ([`WriteFs::release_kept`]). A crash in
//! between leaves it on the list, and the next open (ours, e2fsck's, the
//! kernel's mount) frees it: every step is a consistent filesystem.
//!
//! A driver that serves open files to others (a FUSE mount) needs this:
//! [`WriteFs::unlink`] frees the inode at once, so reads through a
//! descriptor opened before it would fail, and the inode number could be
//! handed to a new file while the old one is still in use.

use super::dir::{self, check_name};
use super::orphan::Pending;
use super::WriteFs;
use crate::error::{Error, Result};

impl WriteFs {
    /// Removes name `name` from `parent` as [`WriteFs::unlink`] does,
    /// except that an inode losing its last name is not freed: it keeps
    /// its data with a link count of 0 on the orphan list, and its number
    /// is returned, to be given to [`WriteFs::release_kept`] when the
    /// caller is done with it. `None` when the inode has other names.
    ///
    /// # Errors
    /// As [`WriteFs::unlink`].
    pub fn unlink_keep(&mut self, parent: u32, name: &[u8]) -> Result<Option<u32>> {
        self.op(|w| {
            check_name(name)?;
            let Some((ino, _)) = dir::lookup(&w.txn, parent, name)? else {
                return Err(Error::NotFound(String::from_utf8_lossy(name).into_owned()));
            };
            let mut i = w.inode(ino)?;
            if i.is_dir() {
                return Err(Error::IsADirectory(
                    String::from_utf8_lossy(name).into_owned(),
                ));
            }
            w.dir_remove(parent, name)?;
            let n = i.links_count().saturating_sub(1);
            i.i_links_count.set(n);
            i.set_ctime(w.now());
            let kept = if n == 0 {
                w.orphan_add(ino, &mut i);
                Some(ino)
            } else {
                None
            };
            w.put_inode(ino, &i)?;
            w.touch_dir(parent, 0)?;
            Ok(kept)
        })
    }

    /// Frees inode `ino` that [`WriteFs::unlink_keep`] kept: its blocks
    /// (over several operations for a large file), then the inode, and
    /// takes it off the orphan list. Nothing is done for an inode that is
    /// not an unlinked orphan (already released, or recovered meanwhile).
    ///
    /// # Errors
    /// Read errors, [`Error::Corrupt`] for a damaged map.
    pub fn release_kept(&mut self, ino: u32) -> Result<()> {
        let i = self.inode(ino)?;
        if i.links_count() != 0 || i.mode() == 0 || !self.is_listed_orphan(ino)? {
            return Ok(());
        }
        self.finish_orphan(Pending::Delete(ino), true)
    }

    /// Whether `ino` is on the superblock's orphan list (a list that
    /// loops back on itself ends where it does).
    fn is_listed_orphan(&self, ino: u32) -> Result<bool> {
        let mut cur = self.txn.superblock().s_last_orphan.get();
        let mut seen = std::collections::HashSet::new();
        while cur != 0 && seen.insert(cur) {
            if cur == ino {
                return Ok(true);
            }
            cur = self.inode(cur)?.i_dtime.get();
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use crate::device::MemDevice;
    use crate::mkfs::{format, MkfsOptions};
    use crate::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
    use std::sync::Arc;

    /// A fresh 32 MiB filesystem in memory.
    fn small_fs() -> crate::Result<Arc<MemDevice>> {
        let dev = Arc::new(MemDevice::new(32 << 20));
        let opts = MkfsOptions {
            size_bytes: 32 << 20,
            now: 1_700_000_000,
            ..Default::default()
        };
        format(&*dev, &opts, true)?;
        Ok(dev)
    }

    #[test]
    fn a_kept_file_reads_until_released() -> crate::Result<()> {
        let dev = small_fs()?;
        let mut fs = WriteFs::open(dev.clone(), WriteOptions::default())?;
        let (blocks, inodes) = (fs.free_blocks(), fs.free_inodes());
        let f = fs.create(ROOT_INO, b"open", &NewNode::file(0o644))?;
        fs.write(f, 0, &[5u8; 100_000])?;
        let g = fs.create(ROOT_INO, b"linked", &NewNode::file(0o644))?;
        fs.link(g, ROOT_INO, b"other")?;
        // Another name left: nothing kept.
        assert_eq!(fs.unlink_keep(ROOT_INO, b"linked")?, None);
        assert_eq!(fs.unlink_keep(ROOT_INO, b"open")?, Some(f));
        assert_eq!(fs.lookup(ROOT_INO, b"open")?, None);
        assert_eq!(fs.stat(f)?.links_count(), 0);
        let mut buf = vec![0u8; 10];
        assert_eq!(fs.read(f, 99_995, &mut buf)?, 5);
        assert_eq!(&buf[..5], &[5u8; 5]);
        // Committed with the orphan listed: a crash here leaves it to
        // whoever opens the filesystem next.
        fs.sync()?;
        fs.release_kept(f)?;
        // Released twice: nothing more happens.
        fs.release_kept(f)?;
        fs.unlink(ROOT_INO, b"other")?;
        assert_eq!((fs.free_blocks(), fs.free_inodes()), (blocks, inodes));
        fs.close()?;
        Ok(())
    }

    #[test]
    fn open_finishes_what_a_crash_left_kept() -> crate::Result<()> {
        let dev = small_fs()?;
        let mut fs = WriteFs::open(dev.clone(), WriteOptions::default())?;
        let inodes = fs.free_inodes();
        let f = fs.create(ROOT_INO, b"f", &NewNode::file(0o644))?;
        fs.write(f, 0, b"data")?;
        fs.unlink_keep(ROOT_INO, b"f")?;
        fs.sync()?;
        // The driver dies with the file kept: dropped, not closed.
        drop(fs);
        let fs = WriteFs::open(dev, WriteOptions::default())?;
        assert_eq!(fs.free_inodes(), inodes);
        fs.close()?;
        Ok(())
    }
}
