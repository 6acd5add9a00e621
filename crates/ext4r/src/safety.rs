//! Checks before destroying data: is the target mounted or in use, and what
//! does it hold now (for mke2fs's "contains a ext4 file system" question).

use crate::device::BlockDevice;
use crate::error::Result;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Where a device or image is mounted (or that it is active swap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPoint {
    /// The mount point (or "swap").
    pub mountpoint: String,
    /// The loop device in between, for an image file.
    pub via_loop: Option<String>,
}

/// Whether `path` (a block device or an image file) is mounted or used as
/// swap. An image counts as mounted when a loop device backed by it is.
///
/// # Errors
/// Only when `/proc/self/mountinfo` cannot be read.
pub fn mounted(path: &Path) -> Result<Option<MountPoint>> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|source| crate::Error::Open {
            path: "/proc/self/mountinfo".into(),
            source,
        })?;
    let is_blk =
        rustix::fs::FileType::from_raw_mode(meta.mode()) == rustix::fs::FileType::BlockDevice;
    let mut devs: Vec<(u64, Option<String>)> = Vec::new();
    if is_blk {
        devs.push((meta.rdev(), None));
    } else {
        // Loop devices whose backing file is this file.
        if let Ok(rd) = std::fs::read_dir("/sys/block") {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !name.starts_with("loop") {
                    continue;
                }
                let Ok(back) = std::fs::read_to_string(e.path().join("loop/backing_file")) else {
                    continue;
                };
                let back = back.trim_end_matches('\n');
                let same = std::fs::metadata(back)
                    .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
                if !same {
                    continue;
                }
                if let Ok(d) = std::fs::read_to_string(e.path().join("dev")) {
                    if let Some((ma, mi)) = d.trim().split_once(':') {
                        if let (Ok(ma), Ok(mi)) = (ma.parse::<u64>(), mi.parse::<u64>()) {
                            devs.push((makedev(ma, mi), Some(format!("/dev/{name}"))));
                        }
                    }
                }
            }
        }
    }
    for line in mountinfo.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 5 {
            continue;
        }
        let Some((ma, mi)) = f[2].split_once(':') else {
            continue;
        };
        let (Ok(ma), Ok(mi)) = (ma.parse::<u64>(), mi.parse::<u64>()) else {
            continue;
        };
        let dev = makedev(ma, mi);
        if let Some((_, via)) = devs.iter().find(|(d, _)| *d == dev) {
            return Ok(Some(MountPoint {
                mountpoint: unescape(f[4]),
                via_loop: via.clone(),
            }));
        }
    }
    if is_blk {
        if let Ok(swaps) = std::fs::read_to_string("/proc/swaps") {
            for l in swaps.lines().skip(1) {
                if let Some(p) = l.split_whitespace().next() {
                    if std::fs::metadata(p).is_ok_and(|m| m.rdev() == meta.rdev()) {
                        return Ok(Some(MountPoint {
                            mountpoint: "swap".into(),
                            via_loop: None,
                        }));
                    }
                }
            }
        }
    }
    Ok(None)
}

fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff)
}

/// mountinfo escapes spaces and friends as `\040`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a device already holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// An ext2/3/4 filesystem.
    Ext {
        /// "ext2", "ext3" or "ext4".
        kind: &'static str,
        /// Volume label.
        label: String,
        /// Last mount point.
        last_mounted: String,
        /// Creation time.
        created: i64,
        /// Last mount time.
        mtime: i64,
    },
    /// Another known signature (xfs, btrfs, swap, a partition table...).
    Other(&'static str),
}

impl Existing {
    /// mke2fs-like words for the question before overwriting.
    pub fn describe(&self) -> String {
        match self {
            Existing::Ext {
                kind,
                label,
                last_mounted,
                created,
                mtime,
            } => {
                let mut s = format!("contains a {kind} file system");
                if !label.is_empty() {
                    s += &format!(" labelled '{label}'");
                }
                if *mtime != 0 {
                    s += &format!("\n\tlast mounted on {last_mounted} at {}", ctime(*mtime));
                } else if *created != 0 {
                    s += &format!("\n\tcreated on {}", ctime(*created));
                }
                s
            }
            Existing::Other(what) => format!("contains {what}"),
        }
    }
}

fn ctime(t: i64) -> String {
    // Days-from-civil without a time zone database: UTC, as dumpe2fs -h
    // prints when TZ is unset.
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    let (y, m, d) = civil(days);
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MO: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        WD[days.rem_euclid(7) as usize],
        MO[(m - 1) as usize],
        d,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        y
    )
}

fn civil(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Looks for an existing filesystem or other signature, reading a few small
/// areas only.
///
/// # Errors
/// Read errors from the device.
pub fn probe(dev: &dyn BlockDevice) -> Result<Option<Existing>> {
    let size = dev.size();
    let read = |off: u64, len: usize| -> Result<Option<Vec<u8>>> {
        if off + len as u64 > size {
            return Ok(None);
        }
        let mut b = vec![0u8; len];
        dev.read_at(&mut b, off)?;
        Ok(Some(b))
    };
    if let Some(b) = read(SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE)? {
        if let Ok(sb) = Superblock::parse(&b) {
            let kind = if sb.has_incompat(Incompat::EXTENTS)
                || sb.has_incompat(Incompat::FLEX_BG)
                || sb.has_incompat(Incompat::BIT64)
                || sb.has_ro_compat(RoCompat::HUGE_FILE | RoCompat::METADATA_CSUM)
            {
                "ext4"
            } else if sb.has_compat(Compat::HAS_JOURNAL) {
                "ext3"
            } else {
                "ext2"
            };
            return Ok(Some(Existing::Ext {
                kind,
                label: String::from_utf8_lossy(sb.volume_name()).into_owned(),
                last_mounted: String::from_utf8_lossy(sb.last_mounted()).into_owned(),
                created: sb.mkfs_time(),
                mtime: sb.mtime(),
            }));
        }
    }
    let sigs: &[(u64, &[u8], &'static str)] = &[
        (0, b"XFSB", "a xfs file system"),
        (65600, b"_BHRfS_M", "a btrfs file system"),
        (4086, b"SWAPSPACE2", "a swap area"),
        (0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
        (32769, b"CD001", "an iso9660 file system"),
        (512, b"EFI PART", "a GPT partition table"),
        (82, b"FAT32   ", "a vfat file system"),
        (54, b"FAT16   ", "a vfat file system"),
        (54, b"FAT12   ", "a vfat file system"),
    ];
    for (off, magic, what) in sigs {
        if let Some(b) = read(*off, magic.len())? {
            if b == *magic {
                return Ok(Some(Existing::Other(what)));
            }
        }
    }
    if let Some(b) = read(0, 512)? {
        let has_part = (0..4).any(|i| {
            let e = &b[446 + 16 * i..446 + 16 * (i + 1)];
            e[4] != 0
        });
        if b[510] == 0x55 && b[511] == 0xAA && has_part {
            return Ok(Some(Existing::Other("a DOS partition table")));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    #[test]
    fn dates_print_like_ctime() {
        assert_eq!(ctime(1_700_000_000), "Tue Nov 14 22:13:20 2023");
        assert_eq!(ctime(0), "Thu Jan  1 00:00:00 1970");
    }

    #[test]
    fn probe_finds_signatures() {
        let d = MemDevice::new(1 << 20);
        assert_eq!(probe(&d).unwrap(), None);
        d.write_at(b"SWAPSPACE2", 4086).unwrap();
        assert_eq!(probe(&d).unwrap(), Some(Existing::Other("a swap area")));
    }

    #[test]
    fn unmounted_temp_file_is_not_mounted() {
        let p = std::env::temp_dir().join(format!("ext4r-safety-{}", std::process::id()));
        std::fs::write(&p, b"x").unwrap();
        assert_eq!(mounted(&p).unwrap(), None);
        std::fs::remove_file(&p).unwrap();
    }
}
