//! Checks before destroying data: is the target mounted or in use, and what
//! does it hold now (for mke2fs's "contains a ext4 file system" question).
//!
//! A block device claimed by the kernel some other way (md, dm, a mount in
//! another namespace) is caught by opening it with `O_EXCL`
//! ([`OpenMode::exclusive`](crate::device::OpenMode::exclusive)), which
//! fails with [`Error::InUse`].

use crate::device::BlockDevice;
use crate::error::{Error, Result};
use crate::localtime::ctime;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::num;
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use rustix::fs::FileType;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Where a device or image is mounted, or that it is active swap.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MountPoint {
    /// The mount point, or `<swap>` (as e2fsprogs says) for swap.
    pub mountpoint: String,
    /// The loop device in between, for an image file.
    pub via_loop: Option<String>,
    /// The mount source as the kernel lists it (a partition of the device,
    /// the loop device, or the swap file's path).
    pub source: String,
    /// The file system type (`swap` for swap).
    pub fstype: String,
    /// Whether this is swap in use rather than a mount.
    pub swap: bool,
}

/// Devices whose mounts count: the device itself or the loop devices backed
/// by the image, and their partitions.
struct Targets {
    /// (device number, loop device name when reached through one).
    blocks: Vec<(u64, Option<String>)>,
    /// (st_dev, st_ino) of an image file.
    file: Option<(u64, u64)>,
}

impl Targets {
    fn block(&self, rdev: u64) -> Option<&Option<String>> {
        self.blocks.iter().find(|(d, _)| *d == rdev).map(|(_, v)| v)
    }

    /// Whether `path` names one of the targets (by device number, or by
    /// inode for an image file), and through which loop device.
    fn names(&self, path: &str) -> Option<Option<String>> {
        let m = std::fs::metadata(path).ok()?;
        match FileType::from_raw_mode(m.mode()) {
            FileType::BlockDevice => self.block(m.rdev()).cloned(),
            FileType::RegularFile => (self.file == Some((m.dev(), m.ino()))).then_some(None),
            _ => None,
        }
    }
}

/// Whether `path` (a block device or an image file) is mounted or used as
/// swap. An image counts as mounted when a loop device backed by it is; a
/// device counts as mounted when one of its partitions is. Only mounts in
/// this process's mount namespace are seen. A path that does not exist is
/// not mounted.
///
/// # Errors
/// [`Error::Open`] when `/proc/self/mountinfo` cannot be read.
pub fn mounted(path: &Path) -> Result<Option<MountPoint>> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|source| Error::Open {
            path: "/proc/self/mountinfo".into(),
            source,
        })?;
    let mut t = Targets {
        blocks: Vec::new(),
        file: None,
    };
    match FileType::from_raw_mode(meta.mode()) {
        FileType::BlockDevice => t.blocks.push((meta.rdev(), None)),
        FileType::RegularFile => {
            t.file = Some((meta.dev(), meta.ino()));
            t.blocks = loops_backed_by(&meta);
        }
        _ => return Ok(None),
    }
    let parts: Vec<_> = t
        .blocks
        .iter()
        .flat_map(|(d, via)| partitions(*d).into_iter().map(|p| (p, via.clone())))
        .collect();
    t.blocks.extend(parts);
    if let Some(m) = mountinfo.lines().find_map(|l| mount_of(l, &t)) {
        return Ok(Some(m));
    }
    Ok(swap_of(&t))
}

/// The mount a mountinfo line describes, if it is of a target. Fields:
/// `id parent major:minor root mountpoint options [optional...] - fstype
/// source superoptions` (proc(5)).
fn mount_of(line: &str, t: &Targets) -> Option<MountPoint> {
    let f: Vec<&str> = line.split(' ').collect();
    let sep = f.iter().skip(6).position(|&x| x == "-")? + 6;
    let (fstype, source) = (*f.get(sep + 1)?, unescape_mount_field(f.get(sep + 2)?));
    let (ma, mi) = f.get(2)?.split_once(':')?;
    let dev = rustix::fs::makedev(ma.parse().ok()?, mi.parse().ok()?);
    // btrfs and friends report an anonymous device number: fall back on
    // what the source names.
    let via = match t.block(dev) {
        Some(v) => v.clone(),
        None if source.starts_with('/') => t.names(&source)?,
        None => return None,
    };
    Some(MountPoint {
        mountpoint: unescape_mount_field(f.get(4)?),
        via_loop: via,
        source,
        fstype: fstype.to_string(),
        swap: false,
    })
}

/// Active swap on a target, from `/proc/swaps`.
fn swap_of(t: &Targets) -> Option<MountPoint> {
    let swaps = std::fs::read_to_string("/proc/swaps").ok()?;
    swaps.lines().skip(1).find_map(|l| {
        let name = unescape_mount_field(l.split_whitespace().next()?);
        let via = t.names(&name)?;
        Some(MountPoint {
            mountpoint: "<swap>".into(),
            via_loop: via,
            source: name,
            fstype: "swap".into(),
            swap: true,
        })
    })
}

/// Loop devices whose backing file is the file `meta` describes (compared by
/// inode, since the recorded path may name it differently).
fn loops_backed_by(meta: &std::fs::Metadata) -> Vec<(u64, Option<String>)> {
    let Ok(rd) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("loop") {
                return None;
            }
            let back = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            let m = std::fs::metadata(back.trim_end_matches('\n')).ok()?;
            if (m.dev(), m.ino()) != (meta.dev(), meta.ino()) {
                return None;
            }
            let dev = sysfs_dev(&e.path().join("dev"))?;
            Some((dev, Some(format!("/dev/{name}"))))
        })
        .collect()
}

/// Device numbers of the partitions of block device `rdev`.
fn partitions(rdev: u64) -> Vec<u64> {
    let (ma, mi) = (rustix::fs::major(rdev), rustix::fs::minor(rdev));
    let Ok(rd) = std::fs::read_dir(format!("/sys/dev/block/{ma}:{mi}")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.path().join("partition").exists())
        .filter_map(|e| sysfs_dev(&e.path().join("dev")))
        .collect()
}

/// A sysfs `dev` file's `major:minor`.
fn sysfs_dev(path: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(path).ok()?;
    let (ma, mi) = s.trim().split_once(':')?;
    Some(rustix::fs::makedev(ma.parse().ok()?, mi.parse().ok()?))
}

/// A field of `/proc/self/mountinfo` or `/proc/swaps` with its octal
/// escapes undone (the kernel writes a space as `\040`); a backslash not
/// followed by three octal digits naming a byte stays as it is.
pub fn unescape_mount_field(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let (b'\\', Some(d)) = (b[i], octal) {
            let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
            if let Ok(v) = u8::try_from(v) {
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

/// An ext2/3/4 file system found on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtInfo {
    /// "ext2", "ext3", "ext4" or "jbd" (an external journal), decided from
    /// the features as blkid does.
    pub kind: &'static str,
    /// Volume label.
    pub label: String,
    /// Last mount point.
    pub last_mounted: String,
    /// Creation time (seconds since the epoch; 0 when unknown).
    pub created: i64,
    /// Last mount time.
    pub mtime: i64,
    /// Last write time.
    pub wtime: i64,
}

/// What a device already holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Existing {
    /// An ext2/3/4 file system.
    Ext(ExtInfo),
    /// Another file system or signature, by blkid's type name (`xfs`,
    /// `btrfs`, `swap`, `vfat`, `crypto_LUKS`, `iso9660`).
    Other {
        /// blkid's type name.
        kind: &'static str,
        /// The label, empty when none.
        label: String,
    },
    /// A partition table (`dos` or `gpt`) and no file system.
    PartitionTable(&'static str),
}

impl Existing {
    /// blkid's type name (`ext4`, `xfs`, `dos`...).
    pub fn kind(&self) -> &'static str {
        match self {
            Existing::Ext(e) => e.kind,
            Existing::Other { kind, .. } | Existing::PartitionTable(kind) => kind,
        }
    }

    /// mke2fs's words for the question before overwriting, to follow the
    /// device name: `contains a ext4 file system labelled 'x'` and, for
    /// ext2/3/4, a tab-indented line with the last mount or creation time.
    /// Times are printed in UTC.
    pub fn describe(&self) -> String {
        let labelled = |label: &str| {
            if label.is_empty() {
                String::new()
            } else {
                format!(" labelled '{label}'")
            }
        };
        match self {
            Existing::Ext(e) => {
                let mut s = format!("contains a {} file system{}", e.kind, labelled(&e.label));
                if e.mtime != 0 {
                    s += "\n\tlast mounted on ";
                    if !e.last_mounted.is_empty() {
                        s += &format!("{} on ", e.last_mounted);
                    }
                    s += &ctime(e.mtime);
                } else if e.created != 0 {
                    s += &format!("\n\tcreated on {}", ctime(e.created));
                } else if e.wtime != 0 {
                    s += &format!("\n\tlast modified on {}", ctime(e.wtime));
                }
                s
            }
            Existing::Other { kind, label } => {
                format!("contains a {kind} file system{}", labelled(label))
            }
            Existing::PartitionTable(kind) => format!("contains a {kind} partition table"),
        }
    }
}

/// How much of the device start [`probe`] reads: up to btrfs's superblock
/// at 64 KiB, the farthest signature it knows.
const PROBE_LEN: u64 = 0x11000;

/// Looks for an existing file system or other signature in one read of the
/// device's first 68 KiB. File systems win over partition tables, as in
/// blkid (a whole-disk ext4 keeps a stale MBR in its boot sector).
///
/// # Errors
/// Read errors from the device.
pub fn probe(dev: &dyn BlockDevice) -> Result<Option<Existing>> {
    let mut buf = vec![0u8; dev.size().min(PROBE_LEN) as usize];
    dev.read_at(&mut buf, 0)?;
    Ok(probe_bytes(&buf, dev.logical_sector_size()))
}

fn probe_bytes(b: &[u8], sector: u32) -> Option<Existing> {
    let at = |off: usize, len: usize| b.get(off..off.checked_add(len)?);
    let has = |off: usize, magic: &[u8]| at(off, magic.len()) == Some(magic);
    let label = |off: usize, len: usize| at(off, len).map(text).unwrap_or_default();
    let other = |kind, label| Some(Existing::Other { kind, label });

    if let Some(e) = at(num::index(SUPERBLOCK_OFFSET), SUPERBLOCK_SIZE).and_then(ext_info) {
        return Some(Existing::Ext(e));
    }
    if has(0, b"XFSB") {
        return other("xfs", label(108, 12));
    }
    if has(65600, b"_BHRfS_M") {
        return other("btrfs", label(65536 + 299, 256));
    }
    for page in [4096usize, 8192, 16384, 65536] {
        if has(page - 10, b"SWAPSPACE2") || has(page - 10, b"SWAP-SPACE") {
            return other("swap", label(1024 + 28, 16));
        }
    }
    if has(0, b"LUKS\xba\xbe") {
        return other("crypto_LUKS", String::new());
    }
    if has(32769, b"CD001") {
        return other("iso9660", label(32768 + 40, 32));
    }
    let boot_sig = has(510, &[0x55, 0xAA]);
    let fat_label = |off| Some(label(off, 11)).filter(|l| l != "NO NAME");
    if boot_sig && has(82, b"FAT32   ") {
        return other("vfat", fat_label(71).unwrap_or_default());
    }
    if boot_sig && (has(54, b"FAT16   ") || has(54, b"FAT12   ")) {
        return other("vfat", fat_label(43).unwrap_or_default());
    }
    // The GPT header is in the second logical sector.
    if has(512, b"EFI PART") || has(sector as usize, b"EFI PART") {
        return Some(Existing::PartitionTable("gpt"));
    }
    // An MBR: the signature and a partition entry with a type.
    if boot_sig && (0..4).any(|i| at(446 + 16 * i + 4, 1).is_some_and(|t| t[0] != 0)) {
        return Some(Existing::PartitionTable("dos"));
    }
    None
}

/// The ext2/3/4 superblock's description, if `sb` is one.
fn ext_info(sb: &[u8]) -> Option<ExtInfo> {
    let sb = Superblock::parse(sb).ok()?;
    sb.block_size()?;
    let f = sb.features();
    // blkid's rule: what ext3 (and ext2 without a journal) would refuse
    // makes it ext4.
    let ext3_incompat = Incompat::FILETYPE | Incompat::RECOVER | Incompat::META_BG;
    let ext3_ro = RoCompat::SPARSE_SUPER | RoCompat::LARGE_FILE | RoCompat::BTREE_DIR;
    let old = f.incompat.difference(ext3_incompat).is_empty()
        && f.ro_compat.difference(ext3_ro).is_empty();
    let kind = if f.incompat.contains(Incompat::JOURNAL_DEV) {
        "jbd"
    } else if !old {
        "ext4"
    } else if f.compat.contains(Compat::HAS_JOURNAL) {
        "ext3"
    } else if f.incompat.contains(Incompat::RECOVER) {
        "ext4"
    } else {
        "ext2"
    };
    Some(ExtInfo {
        kind,
        label: text(sb.volume_name()),
        last_mounted: text(sb.last_mounted()),
        created: sb.mkfs_time(),
        mtime: sb.mtime(),
        wtime: sb.wtime(),
    })
}

/// A label field: up to the first NUL, trailing blanks dropped.
fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{FileDevice, MemDevice, OpenMode};
    use ext4r_txn::testutil::{loop_unavailable, run, tool, LoopDev, Mount, TempDir};
    use std::path::PathBuf;

    #[test]
    fn mount_fields_are_unescaped() {
        assert_eq!(unescape_mount_field(r"/mnt/a\040b\011c"), "/mnt/a b\tc");
        assert_eq!(unescape_mount_field(r"\04"), r"\04");
        assert_eq!(unescape_mount_field(r"x\777"), r"x\777");
        assert_eq!(unescape_mount_field(r"\+12"), r"\+12");
    }

    #[test]
    fn mountinfo_lines_match_by_device_number() {
        let t = Targets {
            blocks: vec![(rustix::fs::makedev(7, 3), Some("/dev/loop3".into()))],
            file: None,
        };
        let line = r"99 27 7:3 / /tmp/my\040mnt rw,relatime shared:5 - ext4 /dev/loop3 rw";
        let m = mount_of(line, &t).unwrap();
        assert_eq!(m.mountpoint, "/tmp/my mnt");
        assert_eq!(m.via_loop.as_deref(), Some("/dev/loop3"));
        assert_eq!(
            (m.fstype.as_str(), m.source.as_str()),
            ("ext4", "/dev/loop3")
        );
        assert!(!m.swap);
        assert_eq!(mount_of("99 27 7:4 / /x rw - ext4 none rw", &t), None);
        assert_eq!(mount_of("garbage", &t), None);
        assert_eq!(mount_of("1 2 7:3 / /x", &t), None);
    }

    fn superblock_bytes(compat: u32, incompat: u32, ro: u32) -> Vec<u8> {
        let mut sb = Superblock::zeroed();
        sb.s_magic.set(ext4r_format::superblock::EXT4_MAGIC);
        sb.set_features(ext4r_format::features::Features::from_raw(
            compat, incompat, ro,
        ));
        sb.s_volume_name[..4].copy_from_slice(b"data");
        sb.s_last_mounted[..4].copy_from_slice(b"/srv");
        sb.set_mkfs_time(1_700_000_000);
        sb.to_bytes().to_vec()
    }

    #[test]
    fn ext_kind_follows_blkid() {
        let kind = |c, i, r| ext_info(&superblock_bytes(c, i, r)).unwrap().kind;
        assert_eq!(kind(0, 0x2, 0x3), "ext2");
        assert_eq!(kind(0x4, 0x2, 0x3), "ext3");
        assert_eq!(kind(0x4, 0x2 | 0x40, 0x3), "ext4");
        assert_eq!(kind(0, 0x40, 0), "ext4");
        assert_eq!(kind(0, 0x8, 0), "jbd");
        let mut bad = superblock_bytes(0, 0, 0);
        bad[24] = 99; // s_log_block_size out of range
        assert_eq!(ext_info(&bad), None);
    }

    #[test]
    fn describe_reads_like_mke2fs() {
        let d = MemDevice::new(1 << 20);
        d.write_at(&superblock_bytes(0x4, 0x2, 0x3), 1024).unwrap();
        let e = probe(&d).unwrap().unwrap();
        assert_eq!(e.kind(), "ext3");
        assert_eq!(
            e.describe(),
            "contains a ext3 file system labelled 'data'\n\tcreated on Tue Nov 14 22:13:20 2023"
        );
        let Existing::Ext(mut info) = e else {
            panic!("not ext")
        };
        info.mtime = 1_700_000_060;
        assert_eq!(
            Existing::Ext(info.clone()).describe(),
            "contains a ext3 file system labelled 'data'\n\tlast mounted on /srv on Tue Nov 14 22:14:20 2023"
        );
        info.last_mounted.clear();
        info.label.clear();
        assert_eq!(
            Existing::Ext(info).describe(),
            "contains a ext3 file system\n\tlast mounted on Tue Nov 14 22:14:20 2023"
        );
    }

    #[test]
    fn probe_finds_signatures() {
        let found = |writes: &[(u64, &[u8])]| {
            let d = MemDevice::new(1 << 20);
            for (off, bytes) in writes {
                d.write_at(bytes, *off).unwrap();
            }
            probe(&d).unwrap()
        };
        let other = |kind, label: &str| {
            Some(Existing::Other {
                kind,
                label: label.into(),
            })
        };
        assert_eq!(found(&[]), None);
        assert_eq!(
            found(&[(4086, b"SWAPSPACE2"), (1052, b"sw\0")]),
            other("swap", "sw")
        );
        assert_eq!(found(&[(0, b"XFSB"), (108, b"x1")]), other("xfs", "x1"));
        assert_eq!(found(&[(65600, b"_BHRfS_M")]), other("btrfs", ""));
        assert_eq!(found(&[(0, b"LUKS\xba\xbe")]), other("crypto_LUKS", ""));
        assert_eq!(
            found(&[(32769, b"CD001"), (32808, b"DISC   ")]),
            other("iso9660", "DISC")
        );
        let sig: &[u8] = &[0x55, 0xAA];
        assert_eq!(
            found(&[(82, b"FAT32   "), (510, sig), (71, b"NO NAME    ")]),
            other("vfat", "")
        );
        assert_eq!(
            found(&[(54, b"FAT16   "), (510, sig), (43, b"BOOT       ")]),
            other("vfat", "BOOT")
        );
        assert_eq!(found(&[(54, b"FAT16   ")]), None);
        assert_eq!(
            found(&[(512, b"EFI PART")]),
            Some(Existing::PartitionTable("gpt"))
        );
        assert_eq!(found(&[(510, sig)]), None);
        let dos = found(&[(510, sig), (446 + 16 + 4, &[0x83])]);
        assert_eq!(
            dos.as_ref().map(Existing::describe).as_deref(),
            Some("contains a dos partition table")
        );
        // A file system wins over a stale MBR.
        let both = found(&[(510, sig), (446 + 4, &[0x83]), (0, b"XFSB")]);
        assert_eq!(both.map(|e| e.kind()), Some("xfs"));
        // Tiny devices are probed without reading past their end.
        let tiny = MemDevice::new(100);
        assert_eq!(probe(&tiny).unwrap(), None);
        // 4 KiB sectors put the GPT header at 4096.
        let d = MemDevice::new(1 << 20).with_sector_size(4096);
        d.write_at(b"EFI PART", 4096).unwrap();
        assert_eq!(probe(&d).unwrap(), Some(Existing::PartitionTable("gpt")));
    }

    /// Makes an image with an external tool; `None` (and a printed reason)
    /// when the tool is missing.
    fn image(dir: &TempDir, name: &str, size: u64, cmd: &str, args: &[&str]) -> Option<PathBuf> {
        if tool(cmd).is_none() {
            println!("skipped {name}: {cmd} not found");
            return None;
        }
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().set_len(size).unwrap();
        let mut a = args.to_vec();
        a.push(p.to_str().unwrap());
        run(cmd, &a).unwrap();
        Some(p)
    }

    fn probe_file(p: &Path) -> Option<Existing> {
        probe(&FileDevice::open(p, OpenMode::default()).unwrap()).unwrap()
    }

    #[test]
    fn probe_recognises_real_tools_output() {
        let dir = TempDir::new("probe");
        for (t, want) in [("ext4", "ext4"), ("ext3", "ext3"), ("ext2", "ext2")] {
            let args = ["-F", "-q", "-t", t, "-L", "lbl"];
            let Some(p) = image(&dir, t, 8 << 20, "mke2fs", &args) else {
                break;
            };
            let e = probe_file(&p).unwrap();
            assert_eq!(e.kind(), want);
            let text = e.describe();
            let head = format!("contains a {want} file system labelled 'lbl'\n\tcreated on ");
            assert!(text.starts_with(&head), "{text}");
        }
        if let Some(p) = image(&dir, "swap", 1 << 20, "mkswap", &["-L", "swp"]) {
            let e = probe_file(&p).unwrap();
            assert_eq!(e.describe(), "contains a swap file system labelled 'swp'");
        }
        for (fat, size) in [("12", 8u64 << 20), ("16", 16 << 20), ("32", 64 << 20)] {
            let args = ["-F", fat, "-n", "VLBL"];
            if let Some(p) = image(&dir, &format!("fat{fat}"), size, "mkfs.vfat", &args) {
                let e = probe_file(&p).unwrap();
                assert_eq!(e.describe(), "contains a vfat file system labelled 'VLBL'");
            }
        }
    }

    #[test]
    fn unmounted_temp_file_is_not_mounted() {
        let dir = TempDir::new("safety");
        let p = dir.join("img");
        std::fs::write(&p, b"x").unwrap();
        assert_eq!(mounted(&p).unwrap(), None);
        assert_eq!(mounted(&dir.join("missing")).unwrap(), None);
    }

    #[test]
    fn loop_mounted_image_is_detected() {
        if let Some(why) = loop_unavailable() {
            println!("skipped: {why}");
            return;
        }
        let dir = TempDir::new("mounted");
        let args = ["-F", "-q", "-t", "ext4", "-L", "lbl"];
        let Some(img) = image(&dir, "img", 8 << 20, "mke2fs", &args) else {
            return;
        };
        let lo = LoopDev::attach(&img).unwrap();
        // Attached but not mounted: mke2fs would go ahead, and so do we.
        assert_eq!(mounted(&img).unwrap(), None);
        assert_eq!(mounted(&lo.0).unwrap(), None);
        let mnt = dir.join("mnt");
        let _m = Mount::new(&lo.0, &mnt).unwrap();
        let loop_name = lo.0.to_str().unwrap().to_string();
        let mnt_name = mnt.to_str().unwrap().to_string();

        let by_img = mounted(&img).unwrap().unwrap();
        assert_eq!(by_img.mountpoint, mnt_name);
        assert_eq!(by_img.via_loop.as_deref(), Some(loop_name.as_str()));
        assert_eq!(by_img.fstype, "ext4");
        assert!(!by_img.swap);
        let by_dev = mounted(&lo.0).unwrap().unwrap();
        assert_eq!(by_dev.mountpoint, mnt_name);
        assert_eq!(by_dev.via_loop, None);
        // The kernel holds the mounted device: an exclusive open is refused.
        let excl = OpenMode {
            write: true,
            exclusive: true,
            ..OpenMode::default()
        };
        assert!(matches!(
            FileDevice::open(&lo.0, excl),
            Err(Error::InUse(_))
        ));
    }

    #[test]
    fn swap_on_a_loop_device_is_detected() {
        if let Some(why) = loop_unavailable() {
            println!("skipped: {why}");
            return;
        }
        let dir = TempDir::new("swap");
        let Some(img) = image(&dir, "img", 1 << 20, "mkswap", &[]) else {
            return;
        };
        let lo = LoopDev::attach(&img).unwrap();
        let Ok(_on) = SwapOn::new(&lo.0) else {
            println!("skipped: swapon refused here");
            return;
        };
        for p in [&img, &lo.0] {
            let m = mounted(p).unwrap().unwrap();
            assert!(m.swap);
            assert_eq!(m.mountpoint, "<swap>");
        }
        assert_eq!(
            mounted(&img).unwrap().unwrap().via_loop.as_deref(),
            lo.0.to_str()
        );
    }

    /// Swap we turned on; turned off on drop.
    struct SwapOn(PathBuf);

    impl SwapOn {
        fn new(dev: &Path) -> Result<Self, String> {
            run("swapon", &[dev.to_str().ok_or("path")?])?;
            Ok(SwapOn(dev.to_path_buf()))
        }
    }

    impl Drop for SwapOn {
        fn drop(&mut self) {
            if let Some(p) = self.0.to_str() {
                let _ = run("swapoff", &[p]);
            }
        }
    }
}
