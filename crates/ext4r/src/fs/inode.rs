//! Loading inodes and describing them.

use ext4r_format::features::RoCompat;
use ext4r_format::inode::{
    mode, verify_inode_checksum, Inode, InodeFlags, Timestamp, GOOD_OLD_INODE_SIZE,
};
use ext4r_format::num;
use ext4r_format::{FormatError, InodeNr};

use super::volume::Filesystem;
use crate::error::{Error, Result};
use crate::object::dir::FileKind;

pub use crate::object::InodeInfo;

/// What `stat` would say about an inode.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metadata {
    /// The inode number.
    pub ino: u32,
    /// The file type.
    pub kind: FileKind,
    /// Permission bits, setuid/setgid/sticky included (`mode & 0o7777`).
    pub perm: u16,
    /// Owner, with the high 16 bits.
    pub uid: u32,
    /// Group, with the high 16 bits.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Hard link count.
    pub links: u16,
    /// Space used, in 512-byte sectors.
    pub sectors: u64,
    /// Last access.
    pub atime: Timestamp,
    /// Last change of contents.
    pub mtime: Timestamp,
    /// Last change of the inode.
    pub ctime: Timestamp,
    /// Creation, when the inode records it.
    pub crtime: Option<Timestamp>,
    /// `i_flags`.
    pub flags: InodeFlags,
    /// Device number of a character or block device (`major`, `minor`).
    pub rdev: Option<(u32, u32)>,
    /// Generation number.
    pub generation: u32,
    /// Project id (0 when not recorded).
    pub projid: u32,
}

impl Filesystem {
    /// Loads inode `ino`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode number outside the filesystem, an
    /// inode table outside it, a bad `i_extra_isize`, or (with
    /// `verify_checksums`) a checksum mismatch.
    pub fn inode(&self, ino: InodeNr) -> Result<InodeInfo> {
        let sb = &self.sb;
        let where_ = || format!("inode {}", ino.0);
        if ino.0 == 0 || ino.0 > sb.s_inodes_count.get() {
            return Err(Error::corrupt(
                where_(),
                FormatError::invalid(
                    "inode number",
                    format!("outside 1..={}", sb.s_inodes_count.get()),
                ),
            ));
        }
        let ipg = self.geo.inodes_per_group;
        let group = (ino.0 - 1) / ipg;
        let index = u64::from((ino.0 - 1) % ipg);
        let isize = u64::from(self.geo.inode_size);
        let desc = self.group_desc(ext4r_format::GroupNr(group))?;
        let table = desc.inode_table(self.is_64bit());
        let bs = u64::from(self.geo.block_size);
        let byte = index * isize;
        let what = format!("inode table of group {group}");
        // The descriptor's table address is unchecked disk data: it may
        // overflow when offset; check_blocks then bounds block * bs.
        let block = table.checked_add(byte / bs).ok_or_else(|| {
            Error::corrupt(
                &what,
                FormatError::invalid("inode table", format!("block {table} out of range")),
            )
        })?;
        self.check_blocks(block, 1, &what)?;
        let mut record = vec![0u8; num::index(isize)];
        self.read_inode_record(group, table, byte, &mut record)?;
        let inode = Inode::parse(&record).map_err(|e| Error::corrupt(where_(), e))?;
        if num::index(isize) > GOOD_OLD_INODE_SIZE {
            inode
                .check_extra_isize(num::index(isize))
                .map_err(|e| Error::corrupt(where_(), e))?;
        }
        if self.verify() {
            verify_inode_checksum(self.csum_seed(), ino, &record)
                .map_err(|e| Error::corrupt(where_(), e))?;
        }
        Ok(InodeInfo { ino, inode, record })
    }

    /// The on-disk record of inode `ino`, unvalidated (a checker repairs
    /// what [`Filesystem::inode`] would refuse).
    ///
    /// # Errors
    /// [`Error::Corrupt`] for an inode number or inode table outside the
    /// filesystem; I/O errors.
    pub fn inode_record(&self, ino: InodeNr) -> Result<Vec<u8>> {
        let ipg = self.geo.inodes_per_group;
        if ino.0 == 0 || ino.0 > self.sb.s_inodes_count.get() {
            return Err(Error::corrupt(
                format!("inode {}", ino.0),
                FormatError::invalid("inode number", "out of range"),
            ));
        }
        let group = (ino.0 - 1) / ipg;
        let index = u64::from((ino.0 - 1) % ipg);
        let isize = u64::from(self.geo.inode_size);
        let table = self
            .group_desc(ext4r_format::GroupNr(group))?
            .inode_table(self.is_64bit());
        let bs = u64::from(self.geo.block_size);
        let what = format!("inode table of group {group}");
        // The table address is disk data: add with a check, then bound the
        // block (which also bounds block * bs, see open).
        let block = table.checked_add(index * isize / bs).ok_or_else(|| {
            Error::corrupt(
                &what,
                FormatError::invalid("inode table", format!("block {table} out of range")),
            )
        })?;
        self.check_blocks(block, 1, &what)?;
        let mut record = vec![0u8; num::index(isize)];
        self.dev
            .read_at(&mut record, block * bs + index * isize % bs)?;
        Ok(record)
    }

    /// The `stat` view of an inode.
    pub fn metadata(&self, info: &InodeInfo) -> Metadata {
        let i = &info.inode;
        let kind = FileKind::from_mode(i.mode());
        let rdev = matches!(kind, FileKind::CharDevice | FileKind::BlockDevice)
            .then(|| decode_rdev(&i.block_words()));
        let huge = self.sb.has_ro_compat(RoCompat::HUGE_FILE);
        Metadata {
            ino: info.ino.0,
            kind,
            perm: i.mode() & mode::PERM_MASK,
            uid: i.uid(),
            gid: i.gid(),
            size: i.size(),
            links: i.links_count(),
            sectors: i.blocks_count(huge, self.geo.block_size),
            atime: i.atime(),
            mtime: i.mtime(),
            ctime: i.ctime(),
            crtime: i.crtime(),
            flags: i.flags(),
            rdev,
            generation: i.generation(),
            projid: i.projid(),
        }
    }
}

/// Inode table bytes read at once: neighbouring inodes (a directory's
/// files, mostly) then come from memory.
const ITABLE_CHUNK: u64 = 64 << 10;

impl Filesystem {
    /// Copies the record at `byte` into the inode table of `group`
    /// (starting at block `table`) into `out`, through a one-chunk cache.
    fn read_inode_record(&self, group: u32, table: u64, byte: u64, out: &mut [u8]) -> Result<()> {
        let bs = u64::from(self.geo.block_size);
        let table_bytes = u64::from(self.geo.inode_blocks_per_group()) * bs;
        let start = table * bs;
        let chunk_off = byte - byte % ITABLE_CHUNK;
        let len = ITABLE_CHUNK.min(table_bytes.saturating_sub(chunk_off));
        let at = start + chunk_off;
        if len < byte - chunk_off + out.len() as u64
            || self
                .check_blocks(
                    table + chunk_off / bs,
                    len.div_ceil(bs),
                    &format!("inode table of group {group}"),
                )
                .is_err()
        {
            // A table that does not fit: read just the record.
            return self.dev.read_at(out, start + byte);
        }
        let Ok(mut cache) = self.itable_cache.lock() else {
            return self.dev.read_at(out, start + byte);
        };
        let hit = matches!(&*cache, Some((o, b)) if *o == at && b.len() as u64 == len);
        if !hit {
            let mut buf = vec![0u8; num::index(len)];
            self.dev.read_at(&mut buf, at)?;
            *cache = Some((at, buf));
        }
        if let Some((_, b)) = &*cache {
            let i = num::index(byte - chunk_off);
            out.copy_from_slice(&b[i..i + out.len()]);
        }
        Ok(())
    }
}

/// A device number as the kernel stores it: the old 8:8 encoding in
/// `i_block[0]` when it fits, else the new 12:20 one in `i_block[1]`.
fn decode_rdev(words: &[u32; 15]) -> (u32, u32) {
    if words[0] != 0 {
        let old = words[0];
        ((old >> 8) & 0xff, old & 0xff)
    } else {
        let new = words[1];
        ((new & 0xfff00) >> 8, (new & 0xff) | ((new >> 12) & 0xfff00))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_decode_both_encodings() {
        let mut w = [0u32; 15];
        w[0] = (8 << 8) | 1;
        assert_eq!(decode_rdev(&w), (8, 1));
        let mut w = [0u32; 15];
        // major 259, minor 300: new encoding (minor low byte, major, minor high bits)
        w[1] = (300 & 0xff) | (259 << 8) | ((300 & !0xff) << 12);
        assert_eq!(decode_rdev(&w), (259, 300));
    }
}
