//! POSIX ACLs (`system.posix_acl_access`, `system.posix_acl_default`) as
//! ext4 stores them and as the system calls pass them. The two differ: the
//! kernel's xattr interface (`getxattr`, `setxattr`) uses version 2 with
//! every entry 8 bytes (tag, permissions, id), while ext4 keeps version 1
//! with the id left out of the entries that have none — the owner, the
//! owning group, the mask and other take 4 bytes (the kernel's
//! fs/ext4/acl.h, `ext4_acl_entry_short`). Copying an ACL between a host
//! and an image converts it; written unconverted, the kernel would refuse
//! to read it back.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::error::{FormatError, Result};

/// The version word of the system-call format.
const VFS_VERSION: u32 = 2;
/// The version word of ext4's format.
const DISK_VERSION: u32 = 1;

/// Entry tags (`ACL_USER_OBJ` ... `ACL_OTHER`).
mod tag {
    pub(super) const USER_OBJ: u16 = 0x01;
    pub(super) const USER: u16 = 0x02;
    pub(super) const GROUP_OBJ: u16 = 0x04;
    pub(super) const GROUP: u16 = 0x08;
    pub(super) const MASK: u16 = 0x10;
    pub(super) const OTHER: u16 = 0x20;
}

fn bad(detail: &str) -> FormatError {
    FormatError::invalid("POSIX ACL", detail.to_string())
}

fn u16_at(b: &[u8], at: usize) -> Result<u16> {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| bad("truncated entry"))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| bad("truncated entry"))
}

/// Whether entries with tag `t` carry an id.
fn has_id(t: u16) -> Result<bool> {
    match t {
        tag::USER | tag::GROUP => Ok(true),
        tag::USER_OBJ | tag::GROUP_OBJ | tag::MASK | tag::OTHER => Ok(false),
        _ => Err(bad("unknown entry tag")),
    }
}

/// An ACL as `setxattr` takes it, in ext4's on-disk form.
///
/// # Errors
/// [`FormatError`] for a value that is not a version-2 ACL of whole
/// entries with known tags.
pub fn acl_to_disk(vfs: &[u8]) -> Result<Vec<u8>> {
    if u32_at(vfs, 0)? != VFS_VERSION || (vfs.len() - 4) % 8 != 0 {
        return Err(bad("not a version 2 ACL of 8-byte entries"));
    }
    let mut out = Vec::with_capacity(vfs.len());
    out.extend_from_slice(&DISK_VERSION.to_le_bytes());
    for e in vfs[4..].chunks_exact(8) {
        let t = u16_at(e, 0)?;
        out.extend_from_slice(&e[..4]);
        if has_id(t)? {
            out.extend_from_slice(&e[4..8]);
        }
    }
    Ok(out)
}

/// An ACL as ext4 stores it, in the form `getxattr` gives.
///
/// # Errors
/// [`FormatError`] for a value that is not a version-1 ACL of whole
/// entries with known tags.
pub fn acl_from_disk(disk: &[u8]) -> Result<Vec<u8>> {
    if u32_at(disk, 0)? != DISK_VERSION {
        return Err(bad("not a version 1 ACL"));
    }
    let mut out = Vec::with_capacity(disk.len() * 2);
    out.extend_from_slice(&VFS_VERSION.to_le_bytes());
    let mut at = 4;
    while at < disk.len() {
        let t = u16_at(disk, at)?;
        let perm = u16_at(disk, at + 2)?;
        // Entries without an id read as "undefined" (-1), as the kernel's.
        let id = if has_id(t)? {
            let id = u32_at(disk, at + 4)?;
            at += 8;
            id
        } else {
            at += 4;
            u32::MAX
        };
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    Ok(out)
}

/// Whether the full xattr name is one of the two ACLs.
pub fn is_acl_name(name: &[u8]) -> bool {
    name == b"system.posix_acl_access" || name == b"system.posix_acl_default"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(t: u16, perm: u16, id: u32) -> Vec<u8> {
        let mut v = t.to_le_bytes().to_vec();
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v
    }

    #[test]
    fn round_trip_and_short_entries() {
        let mut vfs = VFS_VERSION.to_le_bytes().to_vec();
        for (t, p, id) in [
            (tag::USER_OBJ, 6, u32::MAX),
            (tag::USER, 4, 1000),
            (tag::GROUP_OBJ, 4, u32::MAX),
            (tag::GROUP, 5, 70_000),
            (tag::MASK, 7, u32::MAX),
            (tag::OTHER, 0, u32::MAX),
        ] {
            vfs.extend(entry(t, p, id));
        }
        let disk = acl_to_disk(&vfs).expect("valid");
        // Four short entries, two long, the header.
        assert_eq!(disk.len(), 4 + 4 * 4 + 2 * 8);
        assert_eq!(&disk[..4], &DISK_VERSION.to_le_bytes());
        assert_eq!(acl_from_disk(&disk).expect("valid"), vfs);
    }

    #[test]
    fn damaged_values_are_refused() {
        assert!(acl_to_disk(&[]).is_err());
        assert!(acl_to_disk(&[1, 0, 0, 0]).is_err());
        let mut v = VFS_VERSION.to_le_bytes().to_vec();
        v.extend(entry(0x40, 0, 0));
        assert!(acl_to_disk(&v).is_err());
        v.truncate(7);
        assert!(acl_to_disk(&v).is_err());
        // A long entry cut short on disk.
        let mut d = DISK_VERSION.to_le_bytes().to_vec();
        d.extend_from_slice(&tag::USER.to_le_bytes());
        d.extend_from_slice(&[4, 0, 1]);
        assert!(acl_from_disk(&d).is_err());
        assert!(is_acl_name(b"system.posix_acl_default"));
        assert!(!is_acl_name(b"user.x"));
    }
}
