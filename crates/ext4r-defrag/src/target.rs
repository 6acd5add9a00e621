//! What a command-line argument names, decided as e4defrag decides it
//! (a block device, a directory or a regular file on a mounted ext4), plus
//! what e4defrag cannot take: an unmounted device, or an image file holding
//! an ext2/3/4 filesystem, which are read through the engine instead.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::source::LostFound;
use crate::stat::{strerror, ArgKind};

/// `statfs` magic of ext2, ext3 and ext4.
const EXT4_SUPER_MAGIC: i64 = 0xEF53;

/// A resolved argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Something on a mounted ext4 filesystem.
    Mounted(MountedTarget),
    /// An image file or a device that is not mounted.
    Unmounted(PathBuf),
}

/// A target on a mounted filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountedTarget {
    /// What the argument named.
    pub kind: ArgKind,
    /// Where the walk starts, as printed: the mount point for a device,
    /// the canonical path of a directory, the argument as given for a file.
    pub root: Vec<u8>,
    /// The mount point.
    pub mountpoint: PathBuf,
    /// The device mounted there.
    pub device: PathBuf,
    /// e4defrag's lost+found rule for this argument.
    pub lost_found: LostFound,
}

/// A mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub mountpoint: PathBuf,
    pub fstype: String,
    pub source: PathBuf,
}

/// Resolves `arg`. With `image`, a regular file is taken as an image even
/// when it lies on a mounted ext4.
///
/// # Errors
/// [`Error::InvalidArgument`] carrying e4defrag's message (a missing path,
/// an irregular file, lost+found), [`Error::NotExt4`].
pub fn resolve(arg: &OsStr, image: bool) -> Result<Target> {
    let path = Path::new(arg);
    let lmeta = std::fs::symlink_metadata(path).map_err(|e| {
        Error::InvalidArgument(format!(
            "Failed to get file information: {}\n \"{}\"",
            strerror(&e),
            path.display()
        ))
    })?;
    let mut meta = lmeta.clone();
    if lmeta.file_type().is_symlink() {
        // A symlink to a block device (LVM names) is the device.
        if let Ok(m) = std::fs::metadata(path) {
            if m.file_type().is_block_device() {
                meta = m;
            }
        }
    }
    let ft = meta.file_type();
    if ft.is_block_device() || (ft.is_file() && image) {
        return device_or_image(path);
    }
    if !ft.is_dir() && !ft.is_file() {
        return Err(Error::InvalidArgument(format!(
            "File is not regular file\n \"{}\"",
            path.display()
        )));
    }
    let on_ext4 = rustix::fs::statfs(path)
        .map(|s| s.f_type == EXT4_SUPER_MAGIC)
        .unwrap_or(false);
    if !on_ext4 {
        if ft.is_file() && holds_ext_superblock(path) {
            return device_or_image(path);
        }
        return Err(Error::NotExt4(path.to_path_buf()));
    }
    let real = std::fs::canonicalize(path).map_err(|e| {
        Error::InvalidArgument(format!(
            "Couldn't get full path: {}\n \"{}\"",
            strerror(&e),
            path.display()
        ))
    })?;
    let mount = mount_of(meta.dev(), &real)?
        .filter(|m| m.fstype == "ext4")
        .ok_or_else(|| Error::NotExt4(path.to_path_buf()))?;
    let mnt = mount.mountpoint.as_os_str().as_bytes().to_vec();
    let real_b = real.as_os_str().as_bytes().to_vec();
    let lf_refused = || {
        Error::InvalidArgument(format!(
            "Can not process \"lost+found\"\n \"{}\"",
            path.display()
        ))
    };
    let (kind, root, lost_found) = if ft.is_dir() {
        if let Err(e) = rustix::fs::access(path, rustix::fs::Access::READ_OK) {
            return Err(Error::InvalidArgument(format!(
                "{}: {}",
                path.display(),
                strerror(&e.into())
            )));
        }
        let mut lf = mnt.clone();
        lf.extend_from_slice(b"/lost+found");
        if real_b.len() > mnt.len() {
            // A directory below the mount point: refused inside lost+found,
            // else no lost+found test at all.
            if real_b.starts_with(&lf) && matches!(real_b.get(lf.len()), None | Some(b'/')) {
                return Err(lf_refused());
            }
            (ArgKind::Directory, real_b, LostFound(None))
        } else {
            (ArgKind::Directory, real_b, LostFound(Some(lf)))
        }
    } else {
        let mut lf = mnt.clone();
        lf.extend_from_slice(b"/lost+found/");
        if real_b.starts_with(&lf) {
            return Err(lf_refused());
        }
        (ArgKind::File, arg.as_bytes().to_vec(), LostFound(Some(lf)))
    };
    Ok(Target::Mounted(MountedTarget {
        kind,
        root,
        mountpoint: mount.mountpoint,
        device: mount.source,
        lost_found,
    }))
}

/// A block device or image file: mounted (then the whole mount is the
/// target) or not.
fn device_or_image(path: &Path) -> Result<Target> {
    let m = ext4r::safety::mounted(path).map_err(|source| Error::Engine {
        path: path.to_path_buf(),
        source,
    })?;
    let Some(m) = m else {
        return Ok(Target::Unmounted(path.to_path_buf()));
    };
    if m.swap || m.fstype != "ext4" {
        return Err(Error::NotExt4(path.to_path_buf()));
    }
    let mnt = m.mountpoint.as_bytes().to_vec();
    let mut lf = mnt.clone();
    lf.extend_from_slice(b"/lost+found/");
    Ok(Target::Mounted(MountedTarget {
        kind: ArgKind::Device,
        root: mnt,
        mountpoint: PathBuf::from(&m.mountpoint),
        device: PathBuf::from(m.via_loop.as_deref().unwrap_or(&m.source)),
        lost_found: LostFound(Some(lf)),
    }))
}

/// Whether a file starts like an ext2/3/4 filesystem (magic 0xEF53 at byte
/// 1080): an image, which on a mounted ext4 is still taken as a file
/// unless `--image` says otherwise.
pub fn holds_ext_superblock(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut magic = [0u8; 2];
    f.read_exact_at(&mut magic, 1024 + 0x38).is_ok() && magic == [0x53, 0xEF]
}

/// The mount holding a file of device `dev` at canonical path `real`: of
/// the mounts of that device, the one with the longest mount point that is
/// a prefix of the path (bind mounts list a device more than once).
pub(crate) fn mount_of(dev: u64, real: &Path) -> Result<Option<Mount>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(Error::io("/proc/self/mountinfo", "read"))?;
    let major = rustix::fs::major(dev);
    let minor = rustix::fs::minor(dev);
    let want = format!("{major}:{minor}");
    let mut best: Option<Mount> = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.get(2) != Some(&want.as_str()) {
            continue;
        }
        let Some(sep) = f.iter().skip(6).position(|&x| x == "-").map(|p| p + 6) else {
            continue;
        };
        let (Some(mp), Some(fstype), Some(source)) = (f.get(4), f.get(sep + 1), f.get(sep + 2))
        else {
            continue;
        };
        let mp = PathBuf::from(unescape(mp));
        if !real.starts_with(&mp) {
            continue;
        }
        if best
            .as_ref()
            .is_some_and(|b| b.mountpoint.as_os_str().len() >= mp.as_os_str().len())
        {
            continue;
        }
        best = Some(Mount {
            mountpoint: mp,
            fstype: (*fstype).to_string(),
            source: PathBuf::from(unescape(source)),
        });
    }
    Ok(best)
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> std::ffi::OsString {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    std::ffi::OsString::from(OsStr::from_bytes(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(
            unescape(r"/mnt/a\040b"),
            std::ffi::OsString::from("/mnt/a b")
        );
        assert_eq!(unescape(r"/x\"), std::ffi::OsString::from(r"/x\"));
    }

    #[test]
    fn missing_path_says_so_as_e4defrag() {
        let e = resolve(OsStr::new("/nonexistent/ext4r-defrag"), false).unwrap_err();
        assert_eq!(
            ext4r::error::chain(&e),
            "Failed to get file information: No such file or directory\n \"/nonexistent/ext4r-defrag\""
        );
    }
}
