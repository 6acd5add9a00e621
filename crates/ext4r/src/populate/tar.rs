//! Copying from a tar archive (ustar, GNU and pax; GNU sparse members,
//! old-style and pax 0.0, 0.1 and 1.0, written with their holes), read as
//! a stream: `mkfs.ext4r -d -` takes
//! one on standard input.
//!
//! Members are placed in archive order: the same archive gives the same
//! image. Directories a member needs and the archive does not hold are
//! made (mode 0755); a directory's own attributes are set once the whole
//! archive is in, since members placed in it later change its times.
//! Owners are the archive's numbers (as `tar --numeric-owner`); a member
//! without an access time gets its modification time.

use super::tar_sparse::PaxSparse;
use super::{Attrs, Copier, Kind, PopulateError, Result};
use crate::write::ROOT_INO;
use ext4r_format::inode::{mode, Timestamp};
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use tar::EntryType;

fn archive_error(e: std::io::Error) -> PopulateError {
    PopulateError::Archive(format!("reading the tar archive: {e}"))
}

/// A member name as components: leading `/` and `./` dropped, `.` and
/// empty components skipped; `..` refused (it would leave the tree).
fn components(name: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for c in name.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                return Err(PopulateError::Archive(format!(
                    "{}: member name contains '..'; skipped",
                    String::from_utf8_lossy(name)
                )))
            }
            _ => out.push(c.to_vec()),
        }
    }
    Ok(out)
}

fn shown(comps: &[Vec<u8>]) -> String {
    let mut s = String::new();
    for c in comps {
        s.push('/');
        s.push_str(&String::from_utf8_lossy(c));
    }
    if s.is_empty() {
        s.push('/');
    }
    s
}

/// A pax time (`1700000000.25`) as a timestamp.
fn pax_time(v: &str) -> Option<Timestamp> {
    let (s, frac) = v.split_once('.').unwrap_or((v, ""));
    let secs: i64 = s.parse().ok()?;
    let digits: String = frac.chars().take(9).collect();
    let mut nsecs: u32 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    for _ in digits.len()..9 {
        nsecs = nsecs.saturating_mul(10);
    }
    // "-1.5" is 1.5 s before the epoch.
    if secs < 0 && nsecs > 0 {
        return Some(Timestamp {
            secs: secs - 1,
            nsecs: 1_000_000_000 - nsecs,
        });
    }
    Some(Timestamp { secs, nsecs })
}

/// State of one archive's copy.
struct TarCopy {
    /// Directories placed or made, by path: parents of later members.
    dirs: HashMap<Vec<Vec<u8>>, u32>,
    /// Directories whose attributes are set at the end.
    deferred: Vec<(u32, Attrs, String)>,
}

impl Copier<'_> {
    /// Copies the members of the tar archive `r` into directory `root`
    /// (whose path is `path`).
    ///
    /// # Errors
    /// An unreadable archive; otherwise the first failure when the options
    /// do not keep going.
    pub fn copy_tar(&mut self, r: impl Read, root: u32, path: &str) -> Result<()> {
        let mut ar = tar::Archive::new(r);
        // An archive may hold a name twice: always look.
        self.fresh_ok = false;
        let mut st = TarCopy {
            dirs: HashMap::new(),
            deferred: Vec::new(),
        };
        st.dirs.insert(Vec::new(), root);
        let entries = ar.entries().map_err(archive_error)?;
        for e in entries {
            let mut e = e.map_err(archive_error)?;
            let r = self.member(&mut e, &mut st, path);
            if let Err(err) = r {
                if matches!(err, PopulateError::Archive(ref m) if m.starts_with("reading")) {
                    return Err(err);
                }
                self.fail(err)?;
            }
        }
        // Deepest last placed first: nothing written after a directory's
        // times are set changes them.
        while let Some((ino, a, p)) = st.deferred.pop() {
            if let Err(e) = self.finish(ino, &a, &p, true) {
                self.fail(e)?;
            }
        }
        Ok(())
    }

    fn member<R: Read>(
        &mut self,
        e: &mut tar::Entry<'_, R>,
        st: &mut TarCopy,
        base: &str,
    ) -> Result<()> {
        let name = e.path_bytes().into_owned();
        let h = e.header().clone();
        let ty = h.entry_type();
        let link = e.link_name_bytes().map(|l| l.into_owned());
        let (mut a, sparse) = self.member_attrs(e, &h, ty, link.as_deref(), &name)?;
        // A pax sparse member's header name is made up; its own is a record.
        let name = sparse.name.clone().unwrap_or(name);
        let comps = components(&name)?;
        let path = if base == "/" {
            shown(&comps)
        } else {
            format!("{}{}", base.trim_end_matches('/'), shown(&comps))
        };
        let Some((last, parents)) = comps.split_last() else {
            // The archive's root ("./"): only its xattrs, as mke2fs -d
            // takes only the root's xattrs from a directory.
            let root = st.dirs.get(&Vec::new()).copied().unwrap_or(ROOT_INO);
            let x = std::mem::take(&mut a.xattrs);
            return self.set_xattrs(root, &x, &path);
        };
        let parent = self.tar_dir(st, parents, base)?;
        if ty == EntryType::Link {
            let target = components(link.as_deref().unwrap_or_default())?;
            let ino = self.tar_resolve(st, &target)?.ok_or_else(|| {
                PopulateError::Archive(format!(
                    "{path}: hard link to '{}', which is not in the archive before it",
                    shown(&target)
                ))
            })?;
            return self.link_to(ino, parent, last, &path);
        }
        // (A directory is never replaced: placing a non-directory over one
        // is refused, so `st.dirs` stays true.)
        let is_dir = a.kind == Kind::Dir;
        let (ino, existed) = self.place(parent, last, &a, &path, false)?;
        if is_dir {
            st.dirs.insert(comps.clone(), ino);
            st.deferred.push((ino, a, path));
            return Ok(());
        }
        if a.kind == Kind::File {
            let src = Path::new(std::ffi::OsStr::new(&path));
            let (runs, size) = if sparse.is_sparse() {
                (sparse.runs(e)?, sparse.real_size.unwrap_or(0))
            } else {
                (vec![(0, e.size())], e.size())
            };
            // The stored runs follow each other in the member's data.
            for (at, len) in runs {
                let end = self.write_stream(ino, e, at, len, src, &path)?;
                if end < at + len {
                    return Err(archive_error(std::io::Error::from(
                        std::io::ErrorKind::UnexpectedEof,
                    )));
                }
            }
            self.set_size(ino, size, &path)?;
        }
        self.finish(ino, &a, &path, existed)
    }

    /// A member's attributes: the header's, pax records over them; and
    /// what the pax records say of a sparse member.
    fn member_attrs<R: Read>(
        &self,
        e: &mut tar::Entry<'_, R>,
        h: &tar::Header,
        ty: EntryType,
        link: Option<&[u8]>,
        name: &[u8],
    ) -> Result<(Attrs, PaxSparse)> {
        let bad = |what: &str| {
            PopulateError::Archive(format!(
                "{}: bad {what} in the tar header",
                String::from_utf8_lossy(name)
            ))
        };
        let dev = |h: &tar::Header| -> Result<(u32, u32)> {
            let ma = h.device_major().map_err(|_| bad("device number"))?;
            let mi = h.device_minor().map_err(|_| bad("device number"))?;
            Ok((ma.unwrap_or(0), mi.unwrap_or(0)))
        };
        let kind = match ty {
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => Kind::File,
            EntryType::Directory => Kind::Dir,
            // Resolved by the caller.
            EntryType::Link => Kind::File,
            EntryType::Symlink => Kind::Symlink(link.unwrap_or_default().to_vec()),
            EntryType::Char => {
                let (ma, mi) = dev(h)?;
                Kind::Char(ma, mi)
            }
            EntryType::Block => {
                let (ma, mi) = dev(h)?;
                Kind::Block(ma, mi)
            }
            EntryType::Fifo => Kind::Fifo,
            other => {
                return Err(PopulateError::Archive(format!(
                    "{}: tar member type {:?} not supported; skipped",
                    String::from_utf8_lossy(name),
                    other.as_byte() as char
                )))
            }
        };
        let mtime = Timestamp {
            secs: i64::try_from(h.mtime().map_err(|_| bad("time"))?).map_err(|_| bad("time"))?,
            nsecs: 0,
        };
        let atime = h
            .as_gnu()
            .and_then(|g| g.atime().ok())
            .filter(|&t| t != 0)
            .and_then(|t| i64::try_from(t).ok())
            .map(|secs| Timestamp { secs, nsecs: 0 });
        let mut a = Attrs {
            kind,
            perm: (h.mode().map_err(|_| bad("mode"))? as u16) & mode::PERM_MASK,
            uid: u32::try_from(h.uid().map_err(|_| bad("uid"))?).map_err(|_| bad("uid"))?,
            gid: u32::try_from(h.gid().map_err(|_| bad("gid"))?).map_err(|_| bad("gid"))?,
            atime: atime.unwrap_or(mtime),
            mtime,
            xattrs: Vec::new(),
        };
        let mut pax_atime = false;
        let mut sparse = PaxSparse::default();
        if let Some(exts) = e.pax_extensions().map_err(archive_error)? {
            for x in exts {
                let x = x.map_err(archive_error)?;
                let Ok(key) = x.key() else { continue };
                if sparse.record(key, x.value_bytes())? {
                    continue;
                }
                let text = x.value().ok();
                match key {
                    "mtime" => a.mtime = text.and_then(pax_time).ok_or_else(|| bad("pax mtime"))?,
                    "atime" => {
                        a.atime = text.and_then(pax_time).ok_or_else(|| bad("pax atime"))?;
                        pax_atime = true;
                    }
                    "uid" => {
                        a.uid = text
                            .and_then(|t| t.parse().ok())
                            .ok_or_else(|| bad("pax uid"))?
                    }
                    "gid" => {
                        a.gid = text
                            .and_then(|t| t.parse().ok())
                            .ok_or_else(|| bad("pax gid"))?
                    }
                    k if k.starts_with("SCHILY.xattr.") => {
                        a.xattrs.push((
                            k.as_bytes()["SCHILY.xattr.".len()..].to_vec(),
                            x.value_bytes().to_vec(),
                        ));
                    }
                    _ => {}
                }
            }
        }
        if !pax_atime && atime.is_none() {
            a.atime = a.mtime;
        }
        if !self.opts.xattrs {
            a.xattrs.clear();
        }
        a.xattrs.sort();
        Ok((a, sparse))
    }

    /// The directory at `comps` below the archive's root, made (mode
    /// 0755, the default owner, now) where the archive did not hold it.
    fn tar_dir(&mut self, st: &mut TarCopy, comps: &[Vec<u8>], base: &str) -> Result<u32> {
        if let Some(&ino) = st.dirs.get(comps) {
            return Ok(ino);
        }
        let mut cur = st.dirs.get(&Vec::new()).copied().unwrap_or(ROOT_INO);
        for k in 1..=comps.len() {
            let here = &comps[..k];
            if let Some(&ino) = st.dirs.get(here) {
                cur = ino;
                continue;
            }
            let path = format!("{}{}", base.trim_end_matches('/'), shown(here));
            let a = Attrs {
                kind: Kind::Dir,
                perm: 0o755,
                uid: self.opts.default_owner.0,
                gid: self.opts.default_owner.1,
                atime: self.now,
                mtime: self.now,
                xattrs: Vec::new(),
            };
            let (ino, _) = self.place(cur, &comps[k - 1], &a, &path, false)?;
            st.dirs.insert(here.to_vec(), ino);
            cur = ino;
        }
        Ok(cur)
    }

    /// The inode at `comps` below the archive's root, looked up name by
    /// name (no symlink followed: a hard link names a member).
    fn tar_resolve(&mut self, st: &TarCopy, comps: &[Vec<u8>]) -> Result<Option<u32>> {
        let mut cur = st.dirs.get(&Vec::new()).copied().unwrap_or(ROOT_INO);
        for c in comps {
            let next = self
                .fs
                .lookup(cur, c)
                .map_err(|e| PopulateError::image(super::Op::Link, &shown(comps), e))?;
            match next {
                Some(n) => cur = n,
                None => return Ok(None),
            }
        }
        Ok(Some(cur))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_times() {
        assert_eq!(
            components(b"./a//b/./c").ok(),
            Some(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])
        );
        assert!(components(b"a/../b").is_err());
        assert_eq!(components(b"/").ok(), Some(vec![]));
        assert_eq!(
            pax_time("1700000000.25"),
            Some(Timestamp {
                secs: 1_700_000_000,
                nsecs: 250_000_000
            })
        );
        assert_eq!(
            pax_time("-1.5"),
            Some(Timestamp {
                secs: -2,
                nsecs: 500_000_000
            })
        );
        assert_eq!(pax_time("x"), None);
    }
}
