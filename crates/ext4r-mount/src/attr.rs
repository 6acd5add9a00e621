//! Inodes as FUSE attributes, and the inode numbers FUSE and ext4 use.

use ext4r::format::inode::mode;
use ext4r::format::num;
use ext4r::write::WriteFs;
use ext4r::{Inode, Timestamp};
use fuser::{FileAttr, FileType, INodeNo};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// ext4's root directory inode.
const EXT4_ROOT: u32 = 2;

/// The FUSE node id of ext4 inode `ino`: the same number, but the root is
/// FUSE's 1. Inode 1 (the bad blocks inode) is never in a directory of a
/// sound filesystem; `None` for it, and callers answer as for damage.
pub(crate) fn to_fuse(ino: u32) -> Option<INodeNo> {
    match ino {
        0 | 1 => None,
        EXT4_ROOT => Some(INodeNo::ROOT),
        n => Some(INodeNo(u64::from(n))),
    }
}

/// The ext4 inode of FUSE node id `n`.
pub(crate) fn to_ext4(n: INodeNo) -> u32 {
    if n == INodeNo::ROOT {
        EXT4_ROOT
    } else {
        // Node ids are only those `to_fuse` handed out: ext4 numbers.
        u32::try_from(n.0).unwrap_or(0)
    }
}

/// An on-disk time as a `SystemTime` (before the epoch too).
pub(crate) fn system_time(t: Timestamp) -> SystemTime {
    let nsecs = t.nsecs.min(999_999_999);
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::new(t.secs as u64, nsecs)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.secs.unsigned_abs())
            + Duration::from_nanos(u64::from(nsecs))
    }
}

/// A `SystemTime` as an on-disk time.
pub(crate) fn timestamp(t: SystemTime) -> Timestamp {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timestamp {
            secs: d.as_secs() as i64,
            nsecs: d.subsec_nanos(),
        },
        Err(e) => {
            // Before the epoch: whole seconds down, nanoseconds up.
            let d = e.duration();
            let mut secs = -(d.as_secs() as i64);
            let mut nsecs = 0;
            if d.subsec_nanos() != 0 {
                secs -= 1;
                nsecs = 1_000_000_000 - d.subsec_nanos();
            }
            Timestamp { secs, nsecs }
        }
    }
}

/// The FUSE file type of an `i_mode`.
pub(crate) fn file_type(m: u16) -> FileType {
    match m & mode::S_IFMT {
        mode::S_IFDIR => FileType::Directory,
        mode::S_IFLNK => FileType::Symlink,
        mode::S_IFCHR => FileType::CharDevice,
        mode::S_IFBLK => FileType::BlockDevice,
        mode::S_IFIFO => FileType::NamedPipe,
        mode::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// The device number of a device inode in the kernel's `new_encode_dev`
/// form, which FUSE carries: the old 16-bit encoding in `i_block[0]` when
/// set, else the new one in `i_block[1]` (as the kernel's ext4 reads it).
pub(crate) fn rdev(i: &Inode) -> u32 {
    let kind = i.mode() & mode::S_IFMT;
    if kind != mode::S_IFCHR && kind != mode::S_IFBLK {
        return 0;
    }
    let w = i.block_words();
    if w[0] != 0 {
        let (major, minor) = ((w[0] >> 8) & 0xff, w[0] & 0xff);
        encode_dev(major, minor)
    } else {
        w[1]
    }
}

/// `new_encode_dev`: minor's low byte, major, minor's upper bits.
pub(crate) fn encode_dev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

/// `new_decode_dev`: (major, minor).
pub(crate) fn decode_dev(dev: u32) -> (u32, u32) {
    ((dev & 0xfff00) >> 8, (dev & 0xff) | ((dev >> 12) & 0xfff00))
}

/// The attributes of ext4 inode `ino` (record `i`).
pub(crate) fn file_attr(fs: &WriteFs, ino: u32, i: &Inode) -> FileAttr {
    let crtime = i.crtime().map_or(UNIX_EPOCH, system_time);
    FileAttr {
        ino: to_fuse(ino).unwrap_or(INodeNo(u64::from(ino))),
        size: i.size(),
        blocks: fs.sectors(i),
        atime: system_time(i.atime()),
        mtime: system_time(i.mtime()),
        ctime: system_time(i.ctime()),
        crtime,
        kind: file_type(i.mode()),
        perm: i.mode() & 0o7777,
        nlink: u32::from(i.links_count()),
        uid: i.uid(),
        gid: i.gid(),
        rdev: rdev(i),
        blksize: num::sat_u32(fs.block_size()),
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_fuses_one() {
        assert_eq!(to_fuse(2), Some(INodeNo::ROOT));
        assert_eq!(to_ext4(INodeNo::ROOT), 2);
        assert_eq!(to_fuse(12), Some(INodeNo(12)));
        assert_eq!(to_ext4(INodeNo(12)), 12);
        assert_eq!(to_fuse(1), None);
        assert_eq!(to_fuse(0), None);
    }

    #[test]
    fn device_numbers_round_trip() {
        for (ma, mi) in [(8, 1), (259, 0), (1, 300), (4095, 0xfffff)] {
            assert_eq!(decode_dev(encode_dev(ma, mi)), (ma, mi));
        }
    }

    #[test]
    fn times_round_trip() {
        for t in [
            Timestamp { secs: 0, nsecs: 0 },
            Timestamp {
                secs: 1_700_000_000,
                nsecs: 123,
            },
            Timestamp {
                secs: -5,
                nsecs: 250_000_000,
            },
        ] {
            assert_eq!(timestamp(system_time(t)), t);
        }
    }
}
