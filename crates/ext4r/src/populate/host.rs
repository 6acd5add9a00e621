//! Copying from the host's filesystem: one path, or a directory's
//! contents in sorted order.

use super::{join, Attrs, Copier, Kind, PopulateError, Result};
use ext4r_format::inode::{mode, Timestamp};
use ext4r_format::num;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

fn source(path: &Path) -> impl FnOnce(std::io::Error) -> PopulateError + '_ {
    move |e| PopulateError::Source {
        path: path.to_path_buf(),
        source: e,
    }
}

impl Copier<'_> {
    /// Copies host path `src` as `name` in directory `parent` (`path` is
    /// that name's path in the filesystem, for messages), a directory with
    /// everything in it. With `follow` a symlink `src` is copied as what it
    /// points at and anything that is not a directory as a regular file of
    /// its contents (cp without -r).
    ///
    /// # Errors
    /// The first failure when the options do not keep going.
    pub fn copy_path(
        &mut self,
        src: &Path,
        parent: u32,
        name: &[u8],
        path: &str,
        follow: bool,
    ) -> Result<()> {
        match self.copy_one(src, parent, name, path, follow) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    /// Copies the entries of host directory `src` into directory `dir`
    /// (whose path is `path`), names in byte order, each with its subtree.
    ///
    /// # Errors
    /// As [`Copier::copy_path`].
    pub fn copy_dir_contents(&mut self, src: &Path, dir: u32, path: &str) -> Result<()> {
        let mut names: Vec<Vec<u8>> = match std::fs::read_dir(src) {
            Ok(rd) => {
                let mut v = Vec::new();
                for e in rd {
                    match e {
                        Ok(e) => v.push(e.file_name().as_bytes().to_vec()),
                        Err(e) => return self.fail(source(src)(e)),
                    }
                }
                v
            }
            Err(e) => return self.fail(source(src)(e)),
        };
        // Byte order, not readdir's: the same tree gives the same image.
        names.sort_unstable();
        for n in names {
            let child = src.join(OsStr::from_bytes(&n));
            let p = join(path, &n);
            self.copy_path(&child, dir, &n, &p, false)?;
        }
        Ok(())
    }

    /// Copies what `r` yields (standard input for `cp -`) as regular file
    /// `name` in directory `parent` (`path` is its path in the
    /// filesystem), made as a shell's `> FILE` makes one: mode 0666 less
    /// the umask (0666 when modes are kept), the default owner, the time
    /// of the copy. A regular file already there is emptied and rewritten.
    /// `what` names the source in messages.
    ///
    /// # Errors
    /// As [`Copier::copy_path`].
    pub fn copy_reader(
        &mut self,
        r: &mut dyn Read,
        what: &Path,
        parent: u32,
        name: &[u8],
        path: &str,
    ) -> Result<()> {
        if self.verbose.is_some() {
            self.src_now = Some(what.to_path_buf());
        }
        let (uid, gid) = self.opts.default_owner;
        let a = Attrs {
            kind: Kind::File,
            perm: 0o666,
            uid,
            gid,
            atime: self.now,
            mtime: self.now,
            xattrs: Vec::new(),
        };
        let r = self
            .place(parent, name, &a, path, true)
            .and_then(|(ino, existed)| {
                let end = self.write_stream(ino, r, 0, u64::MAX, what, path)?;
                self.set_size(ino, end, path)?;
                self.finish(ino, &a, path, existed)
            });
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    /// Sets directory `dir`'s extended attributes from host directory
    /// `src` (mke2fs -d does this for the root).
    ///
    /// # Errors
    /// As [`Copier::copy_path`].
    pub fn copy_dir_xattrs(&mut self, src: &Path, dir: u32, path: &str) -> Result<()> {
        let r = host_xattrs(src, self.opts.xattrs)
            .map_err(source(src))
            .and_then(|x| self.set_xattrs(dir, &x, path));
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn copy_one(
        &mut self,
        src: &Path,
        parent: u32,
        name: &[u8],
        path: &str,
        follow: bool,
    ) -> Result<()> {
        let md = if follow {
            std::fs::metadata(src)
        } else {
            std::fs::symlink_metadata(src)
        }
        .map_err(source(src))?;
        if self.verbose.is_some() {
            self.src_now = Some(src.to_path_buf());
        }
        let ft = md.file_type();
        let kind = if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() || follow {
            Kind::File
        } else if ft.is_symlink() {
            let t = std::fs::read_link(src).map_err(source(src))?;
            Kind::Symlink(t.as_os_str().as_bytes().to_vec())
        } else if ft.is_char_device() {
            let d = md.rdev();
            Kind::Char(rustix::fs::major(d), rustix::fs::minor(d))
        } else if ft.is_block_device() {
            let d = md.rdev();
            Kind::Block(rustix::fs::major(d), rustix::fs::minor(d))
        } else if ft.is_fifo() {
            Kind::Fifo
        } else if ft.is_socket() {
            Kind::Socket
        } else {
            return Err(PopulateError::Source {
                path: src.to_path_buf(),
                source: std::io::Error::other("unknown file type"),
            });
        };
        // A second name of a file copied already becomes a hard link.
        let key = (md.dev(), md.ino());
        let linked = self.opts.hard_links && kind != Kind::Dir && md.nlink() > 1;
        if linked {
            if let Some(&ino) = self.links.get(&key) {
                return self.link_to(ino, parent, name, path);
            }
        }
        let a = attrs(
            &md,
            kind,
            host_xattrs(src, self.opts.xattrs).map_err(source(src))?,
        );
        let (ino, existed) = self
            .place(parent, name, &a, path, true)
            .map_err(|e| match e {
                PopulateError::Overwrite { path, dir_over, .. } => PopulateError::Overwrite {
                    path,
                    dir_over,
                    from: Some(src.to_path_buf()),
                },
                other => other,
            })?;
        if linked {
            self.links.insert(key, ino);
        }
        match a.kind {
            Kind::File => self.copy_contents(src, ino, &md, path, follow)?,
            Kind::Dir => self.copy_dir_contents(src, ino, path)?,
            _ => {}
        }
        self.finish(ino, &a, path, existed)
    }

    /// Writes a regular file's contents: only the ranges SEEK_DATA finds
    /// (where the host can say; otherwise the whole file).
    fn copy_contents(
        &mut self,
        src: &Path,
        ino: u32,
        md: &Metadata,
        path: &str,
        stream: bool,
    ) -> Result<()> {
        let mut f = File::open(src).map_err(source(src))?;
        if stream && !md.file_type().is_file() {
            // A device or FIFO read for its contents (cp without -r).
            let end = self.write_stream(ino, &mut f, 0, u64::MAX, src, path)?;
            return self.set_size(ino, end, path);
        }
        let size = md.len();
        for (at, len) in data_ranges(&f, size).map_err(source(src))? {
            f.seek(SeekFrom::Start(at)).map_err(source(src))?;
            self.write_stream(ino, &mut f, at, len, src, path)?;
        }
        self.set_size(ino, size, path)
    }
}

/// The attributes of a host file.
fn attrs(md: &Metadata, kind: Kind, xattrs: Vec<(Vec<u8>, Vec<u8>)>) -> Attrs {
    let ts = |s: i64, ns: i64| Timestamp {
        secs: s,
        nsecs: ns.clamp(0, 999_999_999) as u32,
    };
    Attrs {
        kind,
        perm: num::lo16(md.mode()) & mode::PERM_MASK,
        uid: md.uid(),
        gid: md.gid(),
        atime: ts(md.atime(), md.atime_nsec()),
        mtime: ts(md.mtime(), md.mtime_nsec()),
        xattrs,
    }
}

/// The data ranges of an open file of `size` bytes, as (offset, length):
/// SEEK_DATA / SEEK_HOLE, or the whole file where the host does not
/// support them.
fn data_ranges(f: &File, size: u64) -> std::io::Result<Vec<(u64, u64)>> {
    use rustix::fs::{seek, SeekFrom as S};
    let mut out = Vec::new();
    let mut at = 0u64;
    while at < size {
        let data = match seek(f, S::Data(at)) {
            Ok(d) => d,
            // ENXIO: no data past `at`.
            Err(rustix::io::Errno::NXIO) => break,
            Err(rustix::io::Errno::INVAL) if at == 0 => return Ok(vec![(0, size)]),
            Err(e) => return Err(e.into()),
        };
        if data >= size {
            break;
        }
        let hole = seek(f, S::Hole(data))
            .map_err(std::io::Error::from)?
            .min(size);
        out.push((data, hole - data));
        at = hole;
    }
    Ok(out)
}

/// The extended attributes of host path `p` (not following a symlink),
/// when `wanted`; none where the host has no support for them.
fn host_xattrs(p: &Path, wanted: bool) -> std::io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if !wanted {
        return Ok(Vec::new());
    }
    let n = match rustix::fs::llistxattr_query(p) {
        Ok(n) => n,
        Err(rustix::io::Errno::NOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut list = vec![0u8; n];
    let got = rustix::fs::llistxattr(p, &mut list[..])?;
    list.truncate(got);
    let mut out = Vec::new();
    for name in list.split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let cname = std::ffi::OsStr::from_bytes(name);
        let len = match rustix::fs::lgetxattr_query(p, cname) {
            Ok(l) => l,
            // Removed between the list and now.
            Err(rustix::io::Errno::NODATA) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut v = vec![0u8; len];
        let got = if len == 0 {
            0
        } else {
            rustix::fs::lgetxattr(p, cname, &mut v[..])?
        };
        v.truncate(got);
        out.push((name.to_vec(), v));
    }
    // Sorted, for a fixed order whatever the host lists.
    out.sort();
    Ok(out)
}
