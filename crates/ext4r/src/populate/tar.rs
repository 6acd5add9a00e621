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

use super::tar_read::{ty, Member, Sparse, TarReader};
use super::{Attrs, Copier, Kind, PopulateError, Result};
use crate::write::ROOT_INO;
use ext4r_format::inode::mode;
use ext4r_format::num;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

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
        let mut ar = TarReader::new(r);
        // An archive may hold a name twice: always look.
        self.fresh_ok = false;
        let mut st = TarCopy {
            dirs: HashMap::new(),
            deferred: Vec::new(),
        };
        st.dirs.insert(Vec::new(), root);
        // A damaged archive ends the copy (nothing after it can be trusted
        // to be where it seems); a member that cannot be placed is skipped
        // when the options keep going.
        while let Some(m) = ar.next()? {
            if let Err(err) = self.member(m, &mut ar, &mut st, path) {
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
        mut m: Member,
        ar: &mut TarReader<R>,
        st: &mut TarCopy,
        base: &str,
    ) -> Result<()> {
        // A pax sparse member's header name is made up; its own is a record.
        let name = match &mut m.sparse {
            Sparse::Pax(p) => p.name.take().unwrap_or(std::mem::take(&mut m.name)),
            _ => std::mem::take(&mut m.name),
        };
        let comps = components(&name)?;
        let mut a = self.member_attrs(&m, &name)?;
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
        if m.ty == ty::LINK {
            let target = components(&m.link)?;
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
            let mut data = ar.data();
            let (runs, size) = match &m.sparse {
                Sparse::No => (vec![(0, m.size)], m.size),
                Sparse::Runs(r, real) => (r.clone(), *real),
                Sparse::Pax(p) => (p.runs(&mut data)?, p.real_size.unwrap_or(0)),
            };
            // The stored runs follow each other in the member's data.
            for (at, len) in runs {
                let end = self.write_stream(ino, &mut data, at, len, src, &path)?;
                if end < at + len {
                    return Err(PopulateError::Archive(
                        "reading the tar archive: it ends inside a member".into(),
                    ));
                }
            }
            self.set_size(ino, size, &path)?;
        }
        self.finish(ino, &a, &path, existed)
    }

    /// A member's attributes.
    fn member_attrs(&self, m: &Member, name: &[u8]) -> Result<Attrs> {
        let bad = |what: &str| {
            PopulateError::Archive(format!(
                "{}: bad {what} in the tar header",
                String::from_utf8_lossy(name)
            ))
        };
        let kind = match m.ty {
            ty::REGULAR | ty::REGULAR_OLD | ty::CONTIGUOUS | ty::GNU_SPARSE => Kind::File,
            ty::DIR => Kind::Dir,
            // Resolved by the caller.
            ty::LINK => Kind::File,
            ty::SYMLINK => Kind::Symlink(m.link.clone()),
            ty::CHAR => Kind::Char(m.dev.0, m.dev.1),
            ty::BLOCK => Kind::Block(m.dev.0, m.dev.1),
            ty::FIFO => Kind::Fifo,
            other => {
                return Err(PopulateError::Archive(format!(
                    "{}: tar member type {:?} not supported; skipped",
                    String::from_utf8_lossy(name),
                    other as char
                )))
            }
        };
        let mut xattrs = if self.opts.xattrs {
            m.xattrs.clone()
        } else {
            Vec::new()
        };
        xattrs.sort();
        Ok(Attrs {
            kind,
            perm: num::lo16(m.mode) & mode::PERM_MASK,
            uid: u32::try_from(m.uid).map_err(|_| bad("uid"))?,
            gid: u32::try_from(m.gid).map_err(|_| bad("gid"))?,
            // A member without an access time gets its modification time.
            atime: m.atime.unwrap_or(m.mtime),
            mtime: m.mtime,
            xattrs,
        })
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
    fn names() {
        assert_eq!(
            components(b"./a//b/./c").ok(),
            Some(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])
        );
        assert!(components(b"a/../b").is_err());
        assert_eq!(components(b"/").ok(), Some(vec![]));
    }
}
