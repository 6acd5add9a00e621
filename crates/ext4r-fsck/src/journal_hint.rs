//! The superblock's hint for where its external journal lives
//! (`s_journal_dev`, a device number), set right as e2fsck's
//! `e2fsck_fix_ext3_journal_hint` does (PR_0_EXTERNAL_JOURNAL_HINT): the
//! device holding the journal's UUID is looked up as libblkid looks it up
//! by UUID, and its device number is the hint.
//!
//! libblkid reads its cache and, when the cache does not know the UUID,
//! probes every block device of the system. Only the cache and the loop
//! devices are read here: a checker opening every disk of the machine
//! for one hint is more than the hint is worth. A device is believed only
//! when the ext2 superblock on it carries the UUID.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use ext4r_format::features::Compat;
use ext4r_format::superblock::Superblock;

use crate::ctx::Ctx;
use crate::fix::super_edit::SuperEdit;
use crate::fix::Fix;

pub(crate) fn check(c: &mut Ctx) {
    let sb = c.sb();
    let uuid = sb.s_journal_uuid;
    if !sb.has_compat(Compat::HAS_JOURNAL) || uuid == [0; 16] {
        return;
    }
    let Some(rdev) = find(&uuid).and_then(|p| std::fs::metadata(p).ok().map(|m| m.rdev())) else {
        return;
    };
    if rdev == u64::from(sb.s_journal_dev.get()) {
        return;
    }
    // A no stands without making the filesystem count as damaged (e2fsck
    // marks it valid again after its superblock checks).
    c.report(Subject::Journal).harmless_fix(
        0,
        ProblemCode::PR_0_EXTERNAL_JOURNAL_HINT,
        format!("Superblock hint for external superblock should be {rdev:#x}."),
        // dev_t cut to the field's 32 bits, as e2fsck stores it.
        Fix::Superblock(SuperEdit::JournalDev(ext4r_format::num::lo32(rdev))),
    );
}

/// The device whose superblock has `uuid`: the ones blkid's cache names
/// first, then the loop devices.
fn find(uuid: &[u8; 16]) -> Option<PathBuf> {
    let text = format_uuid(uuid);
    let cached: Vec<PathBuf> = cache_files()
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|s| cached_devices(&s, &text))
        .collect();
    cached
        .into_iter()
        .chain(loop_devices())
        .find(|p| has_uuid(p, uuid))
}

/// Where libblkid keeps its cache: `$BLKID_FILE`, else its run-time
/// file, else the old one under /etc.
fn cache_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::env::var_os("BLKID_FILE")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    v.push("/run/blkid/blkid.tab".into());
    v.push("/etc/blkid.tab".into());
    v
}

/// The devices of a blkid cache whose `UUID` is `uuid` (lines such as
/// `<device DEVNO="0x0700" UUID="…" TYPE="jbd">/dev/loop0</device>`).
fn cached_devices(cache: &str, uuid: &str) -> Vec<PathBuf> {
    cache
        .lines()
        .filter_map(|l| {
            let (attrs, rest) = l.trim().strip_prefix("<device ")?.split_once('>')?;
            let dev = rest.strip_suffix("</device>")?;
            let want = format!("UUID=\"{uuid}\"");
            attrs
                .split(' ')
                .any(|a| a.eq_ignore_ascii_case(&want))
                .then(|| PathBuf::from(dev))
        })
        .collect()
}

/// The loop devices in use (a size above 0).
fn loop_devices() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name.strip_prefix("loop")?;
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let size = std::fs::read_to_string(e.path().join("size")).ok()?;
            (size.trim() != "0").then(|| Path::new("/dev").join(&name))
        })
        .collect();
    v.sort();
    v
}

/// Whether the ext2 superblock on `dev` has `uuid`.
fn has_uuid(dev: &Path, uuid: &[u8; 16]) -> bool {
    let mut buf = [0u8; 1024];
    std::fs::File::open(dev)
        .and_then(|f| f.read_exact_at(&mut buf, 1024))
        .is_ok()
        && Superblock::parse(&buf).is_ok_and(|s| s.s_uuid == *uuid)
}

/// A UUID as blkid writes it (lower-case, hyphenated).
fn format_uuid(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_lines_name_devices_by_uuid_not_loguuid() {
        let cache = "<device DEVNO=\"0x0700\" UUID=\"8cb2fa05-0576-4a67-9379-18e2aa3954b9\" \
                     TYPE=\"jbd\">/dev/loop0</device>\n\
                     <device DEVNO=\"0x0701\" LOGUUID=\"11111111-0576-4a67-9379-18e2aa3954b9\" \
                     TYPE=\"ext4\">/dev/loop1</device>\n";
        assert_eq!(
            cached_devices(cache, "8cb2fa05-0576-4a67-9379-18e2aa3954b9"),
            vec![PathBuf::from("/dev/loop0")]
        );
        assert!(cached_devices(cache, "11111111-0576-4a67-9379-18e2aa3954b9").is_empty());
    }

    #[test]
    fn uuids_are_written_as_blkid_writes_them() {
        let u = [
            0x8c, 0xb2, 0xfa, 0x05, 0x05, 0x76, 0x4a, 0x67, 0x93, 0x79, 0x18, 0xe2, 0xaa, 0x39,
            0x54, 0xb9,
        ];
        assert_eq!(format_uuid(&u), "8cb2fa05-0576-4a67-9379-18e2aa3954b9");
    }
}
