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

/// One entry of an ACL: its tag (`ACL_USER_OBJ` ...), permission bits
/// (read 4, write 2, execute 1) and, for named users and groups, the id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclEntry {
    /// The tag.
    pub tag: u16,
    /// The permission bits.
    pub perm: u16,
    /// The user or group id (`u32::MAX` where the tag has none).
    pub id: u32,
}

/// An ACL as a list of entries, with the rules by which the kernel ties
/// an ACL to a file's mode (its fs/posix_acl.c): what a new file takes
/// from its directory's default ACL, what `chmod` does to an access ACL,
/// and when an access ACL says no more than the mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosixAcl {
    /// The entries, in the order they were given.
    pub entries: Vec<AclEntry>,
}

/// Permission bits of the owner, group and others in a mode.
const RWX_USER: u16 = 0o700;
const RWX_GROUP: u16 = 0o070;
const RWX_OTHER: u16 = 0o007;

impl PosixAcl {
    /// An ACL in the form `setxattr` takes and `getxattr` gives.
    ///
    /// # Errors
    /// [`FormatError`] for a value that is not a version-2 ACL of whole
    /// entries with known tags.
    pub fn from_vfs(vfs: &[u8]) -> Result<PosixAcl> {
        if u32_at(vfs, 0)? != VFS_VERSION || (vfs.len() - 4) % 8 != 0 {
            return Err(bad("not a version 2 ACL of 8-byte entries"));
        }
        let mut entries = Vec::with_capacity((vfs.len() - 4) / 8);
        for at in (4..vfs.len()).step_by(8) {
            let t = u16_at(vfs, at)?;
            has_id(t)?;
            entries.push(AclEntry {
                tag: t,
                perm: u16_at(vfs, at + 2)?,
                id: u32_at(vfs, at + 4)?,
            });
        }
        Ok(PosixAcl { entries })
    }

    /// An ACL as ext4 stores it.
    ///
    /// # Errors
    /// As [`acl_from_disk`].
    pub fn from_disk(disk: &[u8]) -> Result<PosixAcl> {
        PosixAcl::from_vfs(&acl_from_disk(disk)?)
    }

    /// The form `getxattr` gives.
    pub fn to_vfs(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 8 * self.entries.len());
        out.extend_from_slice(&VFS_VERSION.to_le_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.tag.to_le_bytes());
            out.extend_from_slice(&e.perm.to_le_bytes());
            out.extend_from_slice(&e.id.to_le_bytes());
        }
        out
    }

    /// The form ext4 stores.
    pub fn to_disk(&self) -> Vec<u8> {
        // The entries' tags were checked when they were read.
        acl_to_disk(&self.to_vfs()).unwrap_or_default()
    }

    /// A new file's access ACL from its directory's default ACL (this
    /// one), and the file's mode masked by it, as the kernel's
    /// `posix_acl_create_masq`: the owner, group (or mask) and other
    /// entries keep only what `mode` grants, and the mode only what they
    /// grant. Returns whether the ACL says more than the mode (named
    /// users or groups, a mask): only then is it stored.
    ///
    /// # Errors
    /// [`FormatError`] for an ACL with neither a mask nor a group entry.
    pub fn create_masq(&mut self, mode: &mut u16) -> Result<bool> {
        let mut m = *mode;
        let mut not_equiv = false;
        let (mut group, mut mask) = (None, None);
        for (k, e) in self.entries.iter_mut().enumerate() {
            match e.tag {
                tag::USER_OBJ => {
                    e.perm &= (m >> 6) | !RWX_OTHER;
                    m &= (e.perm << 6) | !RWX_USER;
                }
                tag::USER | tag::GROUP => not_equiv = true,
                tag::GROUP_OBJ => group = Some(k),
                tag::OTHER => {
                    e.perm &= m | !RWX_OTHER;
                    m &= e.perm | !RWX_OTHER;
                }
                tag::MASK => {
                    mask = Some(k);
                    not_equiv = true;
                }
                _ => return Err(bad("unknown entry tag")),
            }
        }
        let k = mask.or(group).ok_or_else(|| bad("no group entry"))?;
        let e = &mut self.entries[k];
        e.perm &= (m >> 3) | !RWX_OTHER;
        m &= (e.perm << 3) | !RWX_GROUP;
        *mode = (*mode & !0o777) | (m & 0o777);
        Ok(not_equiv)
    }

    /// The ACL after a `chmod` to `mode`, as the kernel's
    /// `posix_acl_chmod`: the owner and other entries take the mode's
    /// bits, and the mask (or, without one, the group entry) the group's.
    pub fn chmod(&mut self, mode: u16) {
        let mut group_at = None;
        let mut has_mask = false;
        for (k, e) in self.entries.iter_mut().enumerate() {
            match e.tag {
                tag::USER_OBJ => e.perm = (mode & RWX_USER) >> 6,
                tag::OTHER => e.perm = mode & RWX_OTHER,
                tag::MASK => {
                    e.perm = (mode & RWX_GROUP) >> 3;
                    has_mask = true;
                }
                tag::GROUP_OBJ => group_at = Some(k),
                _ => {}
            }
        }
        if let (false, Some(k)) = (has_mask, group_at) {
            self.entries[k].perm = (mode & RWX_GROUP) >> 3;
        }
    }

    /// The permission bits this ACL gives the mode, and whether it says
    /// no more than they do (then the kernel stores no ACL, only the
    /// mode), as `posix_acl_equiv_mode`.
    pub fn equiv_mode(&self) -> (u16, bool) {
        let mut m = 0u16;
        let mut mask = None;
        let mut equiv = true;
        for e in &self.entries {
            match e.tag {
                tag::USER_OBJ => m |= (e.perm & 7) << 6,
                tag::GROUP_OBJ => m |= (e.perm & 7) << 3,
                tag::OTHER => m |= e.perm & 7,
                tag::MASK => {
                    mask = Some(e.perm);
                    equiv = false;
                }
                _ => equiv = false,
            }
        }
        if let Some(p) = mask {
            m = (m & !RWX_GROUP) | ((p & 7) << 3);
        }
        (m, equiv)
    }
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

    fn acl(entries: &[(u16, u16, u32)]) -> PosixAcl {
        PosixAcl {
            entries: entries
                .iter()
                .map(|&(tag, perm, id)| AclEntry { tag, perm, id })
                .collect(),
        }
    }

    #[test]
    fn a_default_acl_masks_the_new_mode_as_the_kernel() {
        // setfacl -d -m g:55:rx on a directory: u::rwx g::r-x g:55:r-x
        // m::r-x o::r-x. A file created with mode 0666 gets 0644 and an
        // ACL with its mask cut to r--.
        let mut a = acl(&[
            (tag::USER_OBJ, 7, u32::MAX),
            (tag::GROUP_OBJ, 5, u32::MAX),
            (tag::GROUP, 5, 55),
            (tag::MASK, 5, u32::MAX),
            (tag::OTHER, 5, u32::MAX),
        ]);
        let mut mode = 0o100_666;
        assert_eq!(a.create_masq(&mut mode).ok(), Some(true));
        assert_eq!(mode, 0o100_644);
        assert_eq!(a.entries[0].perm, 6);
        assert_eq!(a.entries[3].perm, 4);
        assert_eq!(a.entries[4].perm, 4);
        // Only the three base entries: equivalent to the mode.
        let mut b = acl(&[
            (tag::USER_OBJ, 7, u32::MAX),
            (tag::GROUP_OBJ, 0, u32::MAX),
            (tag::OTHER, 0, u32::MAX),
        ]);
        let mut mode = 0o040_755;
        assert_eq!(b.create_masq(&mut mode).ok(), Some(false));
        assert_eq!(mode, 0o040_700);
    }

    #[test]
    fn chmod_and_equivalence() {
        let mut a = acl(&[
            (tag::USER_OBJ, 6, u32::MAX),
            (tag::USER, 6, 1234),
            (tag::GROUP_OBJ, 4, u32::MAX),
            (tag::MASK, 6, u32::MAX),
            (tag::OTHER, 4, u32::MAX),
        ]);
        assert_eq!(a.equiv_mode(), (0o664, false));
        a.chmod(0o751);
        assert_eq!(a.equiv_mode(), (0o751, false));
        // The named user's entry and the group entry stay.
        assert_eq!((a.entries[1].perm, a.entries[2].perm), (6, 4));
        let b = acl(&[
            (tag::USER_OBJ, 7, u32::MAX),
            (tag::GROUP_OBJ, 5, u32::MAX),
            (tag::OTHER, 1, u32::MAX),
        ]);
        assert_eq!(b.equiv_mode(), (0o751, true));
        let back = PosixAcl::from_vfs(&a.to_vfs()).expect("valid");
        assert_eq!(back, a);
        assert_eq!(PosixAcl::from_disk(&a.to_disk()).expect("valid"), a);
    }
}
