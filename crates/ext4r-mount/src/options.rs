//! Mount options as `-o` and fstab give them.

use ext4r::write::OnError;
use fuser::MountOption;

/// What `-o` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// `ro`: never write to the image.
    pub read_only: bool,
    /// `allow_other`: users other than the one mounting may use it.
    pub allow_other: bool,
    /// `allow_root`: root may use it too.
    pub allow_root: bool,
    /// `offset=BYTES`: the filesystem starts this far into the image (a
    /// partition of a disk image).
    pub offset: u64,
    /// `errors=continue|remount-ro|panic`: what to do when an operation
    /// meets damage; `None` does what the superblock says (`s_errors`),
    /// as the kernel does.
    pub errors: Option<OnError>,
    /// `acl` (the default, as on the kernel's ext4) or `noacl`: POSIX
    /// ACLs are read, enforced, inherited and set.
    pub acl: bool,
    /// `uid=N`: every file and directory is shown as owned by user N
    /// (as vfat's and iso9660's `uid=`), so that the kernel's permission
    /// checks treat N as the owner. Nothing on the image changes: new
    /// files are stored as owned by their creator and `chown` stores what
    /// it is given.
    pub uid: Option<u32>,
    /// `gid=N`: as `uid=`, for the group.
    pub gid: Option<u32>,
    /// Flags for the kernel's side of the mount (nosuid, noexec, ...).
    pub kernel: Vec<MountOption>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            read_only: false,
            allow_other: false,
            allow_root: false,
            offset: 0,
            errors: None,
            acl: true,
            uid: None,
            gid: None,
            kernel: Vec::new(),
        }
    }
}

impl Options {
    /// Parses a comma-separated option list (several `-o` are joined with
    /// commas first); later options win (`ro,rw` is read-write).
    ///
    /// # Errors
    /// The option that is unknown or malformed, in words.
    pub fn parse(list: &str) -> Result<Options, String> {
        let mut o = Options::default();
        o.add(list)?;
        Ok(o)
    }

    /// Adds the options of `list` to these.
    ///
    /// # Errors
    /// As [`Options::parse`].
    pub fn add(&mut self, list: &str) -> Result<(), String> {
        use MountOption as M;
        for opt in list.split(',').filter(|s| !s.is_empty()) {
            let (key, value) = match opt.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (opt, None),
            };
            match (key, value) {
                ("ro", None) => self.read_only = true,
                ("rw", None) => self.read_only = false,
                ("allow_other", None) => self.allow_other = true,
                ("allow_root", None) => self.allow_root = true,
                ("offset", Some(v)) => {
                    self.offset =
                        parse_size(v).ok_or_else(|| format!("offset={v}: not a size in bytes"))?;
                    if self.offset % 512 != 0 {
                        return Err(format!("offset={v}: not a multiple of 512 bytes"));
                    }
                }
                ("errors", Some("continue")) => self.errors = Some(OnError::Continue),
                ("errors", Some("remount-ro")) => self.errors = Some(OnError::RemountReadOnly),
                ("errors", Some("panic")) => self.errors = Some(OnError::Panic),
                ("errors", Some(v)) => {
                    return Err(format!(
                        "errors={v}: not one of continue, remount-ro, panic"
                    ))
                }
                ("uid", Some(v)) => {
                    self.uid = Some(v.parse().map_err(|_| format!("uid={v}: not a user id"))?);
                }
                ("gid", Some(v)) => {
                    self.gid = Some(v.parse().map_err(|_| format!("gid={v}: not a group id"))?);
                }
                ("acl", None) => self.acl = true,
                ("noacl", None) => self.acl = false,
                ("suid", None) => self.kernel.push(M::Suid),
                ("nosuid", None) => self.kernel.push(M::NoSuid),
                ("dev", None) => self.kernel.push(M::Dev),
                ("nodev", None) => self.kernel.push(M::NoDev),
                ("exec", None) => self.kernel.push(M::Exec),
                ("noexec", None) => self.kernel.push(M::NoExec),
                ("atime", None) => self.kernel.push(M::Atime),
                ("noatime", None) => self.kernel.push(M::NoAtime),
                ("sync", None) => self.kernel.push(M::Sync),
                ("async", None) => self.kernel.push(M::Async),
                ("dirsync", None) => self.kernel.push(M::DirSync),
                // What mount(8) and fstab pass along that concerns them,
                // not the filesystem; and what is the default here anyway
                // (permissions are always the kernel's to check; access
                // times are never updated on reads).
                (
                    "defaults"
                    | "auto"
                    | "noauto"
                    | "nofail"
                    | "_netdev"
                    | "user"
                    | "users"
                    | "nouser"
                    | "default_permissions"
                    | "relatime"
                    | "strictatime"
                    | "nodiratime"
                    | "loop",
                    None,
                ) => {}
                (k, _) if k.starts_with("x-") || k.starts_with("comment=") => {}
                _ => return Err(format!("unknown mount option '{opt}'")),
            }
        }
        Ok(())
    }
}

/// A byte count: decimal, 0x hex, or with a K/M/G suffix (powers of 1024).
fn parse_size(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n = match digits.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => digits.parse().ok()?,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let o = Options::parse("ro,allow_other,offset=1M,nosuid,defaults,x-systemd.automount")
            .unwrap_or_default();
        assert!(o.read_only && o.allow_other);
        assert_eq!(o.offset, 1 << 20);
        assert_eq!(o.kernel, vec![MountOption::NoSuid]);
        assert!(!Options::parse("ro,rw").unwrap_or_default().read_only);
        assert_eq!(
            Options::parse("offset=0x100000").map(|o| o.offset),
            Ok(1 << 20)
        );
        assert!(Options::parse("offset=100").is_err());
        assert!(Options::parse("bogus").is_err());
        assert_eq!(
            Options::parse("errors=panic").map(|o| o.errors),
            Ok(Some(OnError::Panic))
        );
        assert_eq!(
            Options::parse("errors=remount-ro,errors=continue").map(|o| o.errors),
            Ok(Some(OnError::Continue))
        );
        assert!(Options::parse("errors=stop").is_err());
        let ids = Options::parse("uid=1000,gid=100").unwrap_or_default();
        assert_eq!((ids.uid, ids.gid), (Some(1000), Some(100)));
        assert!(Options::parse("uid=alice").is_err());
        assert!(o.acl && !Options::parse("noacl").unwrap_or_default().acl);
    }
}
