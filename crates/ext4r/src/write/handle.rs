//! File handles and paths: the write API as `std::fs` users expect it.
//!
//! [`WriteFs::create_file`] and [`WriteFs::open_file`] name a file by its
//! absolute path and give a [`File`] that implements [`std::io::Read`],
//! [`std::io::Write`] and [`std::io::Seek`]; [`WriteFs::create_dir_all`]
//! is `mkdir -p`. Each `write` call is an operation of its own (one
//! transaction, or several for a large buffer, as
//! [`WriteFs::write`]); [`Write::flush`] commits and writes home as
//! [`WriteFs::sync`] does.

use ext4r_format::num;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_txn::map::{self, Run};

use super::{inline, NewNode, WriteFs, ROOT_INO};
use crate::error::{Error, Result};

/// A path's bytes.
fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

/// Splits an absolute path into its parent's path and its last name.
fn split(path: &[u8]) -> Result<(&[u8], &[u8])> {
    let end = path.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    let trimmed = &path[..end];
    if path.first() != Some(&b'/') || trimmed.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "'{}' is not an absolute path to a file",
            String::from_utf8_lossy(path)
        )));
    }
    let at = trimmed.iter().rposition(|&b| b == b'/').unwrap_or(0);
    let parent: &[u8] = if at == 0 { b"/" } else { &trimmed[..at] };
    Ok((parent, &trimmed[at + 1..]))
}

impl WriteFs {
    /// Reads from byte `offset` of regular file `ino` into `buf`, as
    /// pread(2): returns the bytes read, fewer than asked at the end of the
    /// file, 0 at or past it. Holes and unwritten extents read as zeros.
    ///
    /// # Errors
    /// [`Error::IsADirectory`], [`Error::InvalidArgument`] for another
    /// kind of inode, [`Error::Unsupported`] for an encrypted file,
    /// [`Error::Corrupt`] for a damaged map, read errors.
    pub fn read(&self, ino: u32, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let i = self.readable_inode(ino)?;
        let runs = self.data_runs(ino, &i)?;
        self.read_with(ino, &i, &runs, offset, buf)
    }

    /// The inode of a regular file whose data can be read (and, by
    /// `file_inode`, written): not a directory or another kind, not
    /// encrypted.
    pub(super) fn readable_inode(&self, ino: u32) -> Result<Inode> {
        let i = self.stat(ino)?;
        if i.is_dir() {
            return Err(Error::IsADirectory(format!("inode {ino}")));
        }
        if !i.is_reg() {
            return Err(Error::InvalidArgument(format!(
                "inode {ino} is not a regular file"
            )));
        }
        if i.flags().contains(InodeFlags::ENCRYPT) {
            return Err(Error::Unsupported(format!(
                "inode {ino} is encrypted (feature encrypt): its data cannot be read or written without its key"
            )));
        }
        Ok(i)
    }

    /// The data runs of file `ino` (none for an inline file).
    fn data_runs(&self, ino: u32, i: &Inode) -> Result<Vec<Run>> {
        if i.flags().contains(InodeFlags::INLINE_DATA) {
            return Ok(Vec::new());
        }
        map::runs(&self.txn, ino, i, false)
    }

    /// [`WriteFs::read`] with the inode and its runs already in hand.
    fn read_with(
        &self,
        ino: u32,
        i: &Inode,
        runs: &[Run],
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        let size = i.size();
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = num::index((size - offset).min(buf.len() as u64));
        let out = &mut buf[..n];
        if i.flags().contains(InodeFlags::INLINE_DATA) {
            let data = inline::inline_file(&self.txn, ino, i)?;
            let from = num::index(offset).min(data.len());
            let have = data.len().saturating_sub(from).min(n);
            out[..have].copy_from_slice(&data[from..from + have]);
            out[have..].fill(0);
            return Ok(n);
        }
        out.fill(0);
        let bs = self.shape.bs as u64;
        let end = offset + n as u64;
        let (first, last) = (offset / bs, (end - 1) / bs);
        for r in runs {
            if r.unwritten || r.logical + r.len <= first || r.logical > last {
                continue;
            }
            let lo = r.logical.max(first);
            let hi = (r.logical + r.len - 1).min(last);
            let mut blocks = vec![0u8; num::index((hi - lo + 1) * bs)];
            self.txn
                .read_blocks(r.physical + (lo - r.logical), &mut blocks)?;
            // The bytes of these blocks that fall in offset..end.
            let from = (lo * bs).max(offset);
            let to = ((hi + 1) * bs).min(end);
            let src = &blocks[num::index(from - lo * bs)..num::index(to - lo * bs)];
            out[num::index(from - offset)..num::index(to - offset)].copy_from_slice(src);
        }
        Ok(n)
    }

    /// A handle on the regular file `ino`, at offset 0.
    ///
    /// # Errors
    /// As [`WriteFs::read`] for an inode that is not a readable file.
    pub fn file(&mut self, ino: u32) -> Result<File<'_>> {
        self.readable_inode(ino)?;
        Ok(File {
            fs: self,
            ino,
            pos: 0,
            map: None,
        })
    }

    /// Opens the regular file at `path` (absolute) for reading and writing,
    /// at offset 0, as `OpenOptions::new().read(true).write(true)`.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::NotADirectory`] on the way,
    /// [`Error::IsADirectory`], read errors.
    pub fn open_file(&mut self, path: impl AsRef<Path>) -> Result<File<'_>> {
        let ino = self.lookup_path(path)?;
        self.file(ino)
    }

    /// Creates the regular file at `path` (absolute; its parent must
    /// exist) with permissions `perm`, or truncates it when it exists, as
    /// [`std::fs::File::create`].
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing parent, [`Error::IsADirectory`]
    /// when `path` is a directory, the errors of [`WriteFs::create`].
    pub fn create_file(&mut self, path: impl AsRef<Path>, perm: u16) -> Result<File<'_>> {
        let (parent, name) = split(bytes(path.as_ref()))?;
        let dir = self.lookup_path(std::ffi::OsStr::from_bytes(parent))?;
        let ino = match self.lookup(dir, name)? {
            Some(ino) => {
                self.readable_inode(ino)?;
                self.truncate(ino, 0)?;
                ino
            }
            None => self.create(dir, name, &NewNode::file(perm))?,
        };
        self.file(ino)
    }

    /// Makes directory `path` and the parents it lacks, each with
    /// permissions `perm`, as `mkdir -p` and [`std::fs::create_dir_all`];
    /// returns its inode. Directories that exist are left as they are.
    ///
    /// # Errors
    /// [`Error::NotADirectory`] when a component exists and is not a
    /// directory, the errors of [`WriteFs::mkdir`].
    pub fn create_dir_all(&mut self, path: impl AsRef<Path>, perm: u16) -> Result<u32> {
        let path = bytes(path.as_ref());
        let shown = || String::from_utf8_lossy(path).into_owned();
        if path.first() != Some(&b'/') {
            return Err(Error::InvalidArgument(format!(
                "'{}' is not an absolute path",
                shown()
            )));
        }
        let mut dir = ROOT_INO;
        for name in path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
        {
            dir = match self.lookup(dir, name)? {
                Some(ino) if self.stat(ino)?.is_dir() => ino,
                Some(_) => {
                    return Err(Error::NotADirectory(format!(
                        "'{}' in '{}'",
                        String::from_utf8_lossy(name),
                        shown()
                    )));
                }
                None => self.mkdir(dir, name, &NewNode::dir(perm))?,
            };
        }
        Ok(dir)
    }

    /// The entries of the directory at `path`, in on-disk order (`.` and
    /// `..` included), as [`WriteFs::read_dir`].
    ///
    /// # Errors
    /// As [`WriteFs::lookup_path`] and [`WriteFs::read_dir`].
    pub fn read_dir_path(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<Vec<crate::object::dir::DirEntryInfo>> {
        let dir = self.lookup_path(path)?;
        self.read_dir(dir)
    }
}

/// An open regular file of a [`WriteFs`]: [`Read`], [`Write`] and [`Seek`]
/// at a position of its own, as [`std::fs::File`]. It borrows the
/// filesystem, so it is the one thing changing it while it lives.
pub struct File<'a> {
    fs: &'a mut WriteFs,
    ino: u32,
    pos: u64,
    /// The inode and its runs as last read, kept while only reads come
    /// (each write may change them).
    map: Option<(Inode, Vec<Run>)>,
}

impl File<'_> {
    /// The file's inode number.
    pub fn ino(&self) -> u32 {
        self.ino
    }

    /// Its size in bytes now.
    ///
    /// # Errors
    /// Read errors.
    pub fn len(&self) -> Result<u64> {
        Ok(self.fs.stat(self.ino)?.size())
    }

    /// Its inode as it stands: size, mode, owner, times, link count, as
    /// [`std::fs::File::metadata`].
    ///
    /// # Errors
    /// Read errors.
    pub fn metadata(&self) -> Result<Inode> {
        self.fs.stat(self.ino)
    }

    /// Commits everything written so far and writes it home, as
    /// [`std::fs::File::sync_all`] ([`WriteFs::sync`]: the whole
    /// filesystem's pending operations, not only this file's).
    ///
    /// # Errors
    /// As [`WriteFs::sync`].
    pub fn sync_all(&mut self) -> Result<()> {
        self.fs.sync()
    }

    /// Whether it is empty.
    ///
    /// # Errors
    /// Read errors.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Sets its size, as [`std::fs::File::set_len`]: cut short, or grown
    /// with a hole.
    ///
    /// # Errors
    /// The errors of [`WriteFs::truncate`].
    pub fn set_len(&mut self, size: u64) -> Result<()> {
        self.map = None;
        self.fs.truncate(self.ino, size)
    }
}

impl Read for File<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.map.is_none() {
            let i = self.fs.readable_inode(self.ino)?;
            let runs = self.fs.data_runs(self.ino, &i)?;
            self.map = Some((i, runs));
        }
        let Some((i, runs)) = &self.map else {
            unreachable!("filled above")
        };
        let n = self.fs.read_with(self.ino, i, runs, self.pos, buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for File<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.map = None;
        let n = self.fs.write(self.ino, self.pos, buf)?;
        self.pos += n as u64;
        Ok(n)
    }

    /// Commits what was written and writes it home ([`WriteFs::sync`]).
    fn flush(&mut self) -> io::Result<()> {
        Ok(self.fs.sync()?)
    }
}

impl Seek for File<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let (base, delta) = match to {
            SeekFrom::Start(at) => {
                self.pos = at;
                return Ok(at);
            }
            SeekFrom::Current(d) => (self.pos, d),
            SeekFrom::End(d) => (self.len()?, d),
        };
        match base.checked_add_signed(delta) {
            Some(at) => {
                self.pos = at;
                Ok(at)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing position",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;
    use crate::mkfs::{format, MkfsOptions};
    use crate::write::WriteOptions;
    use std::sync::Arc;

    fn fresh(features: &str) -> WriteFs {
        let dev = Arc::new(MemDevice::new(32 << 20));
        let mut o = MkfsOptions::reproducible(1_700_000_000);
        o.size_bytes = 32 << 20;
        if !features.is_empty() {
            o.features = vec![features.to_string()];
        }
        format(dev.as_ref(), &o, true).unwrap();
        WriteFs::open(dev, WriteOptions::default()).unwrap()
    }

    #[test]
    fn split_paths() {
        assert_eq!(split(b"/a").unwrap(), (&b"/"[..], &b"a"[..]));
        assert_eq!(split(b"/a/b/").unwrap(), (&b"/a"[..], &b"b"[..]));
        assert!(split(b"a/b").is_err());
        assert!(split(b"/").is_err());
    }

    #[test]
    fn write_seek_read_back() {
        let mut fs = fresh("");
        fs.create_dir_all("/var/log/app", 0o755).unwrap();
        assert_eq!(
            fs.create_dir_all("/var/log", 0o700).unwrap(),
            fs.lookup_path("/var/log").unwrap()
        );
        let mut f = fs.create_file("/var/log/app/x.log", 0o644).unwrap();
        f.write_all(b"hello").unwrap();
        f.seek(SeekFrom::Start(100_000)).unwrap(); // a hole
        f.write_all(b"world").unwrap();
        assert_eq!(f.len().unwrap(), 100_005);
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut all = Vec::new();
        f.read_to_end(&mut all).unwrap();
        assert_eq!(all.len(), 100_005);
        assert_eq!(&all[..5], b"hello");
        assert!(all[5..100_000].iter().all(|&b| b == 0));
        assert_eq!(&all[100_000..], b"world");
        f.seek(SeekFrom::End(-3)).unwrap();
        let mut tail = String::new();
        f.read_to_string(&mut tail).unwrap();
        assert_eq!(tail, "rld");
        assert!(f.seek(SeekFrom::Current(-1_000_000)).is_err());
        drop(f);
        // create_file truncates an existing file.
        let f = fs.create_file("/var/log/app/x.log", 0o644).unwrap();
        assert!(f.is_empty().unwrap());
        assert!(matches!(
            fs.open_file("/var/log"),
            Err(Error::IsADirectory(_))
        ));
        assert!(matches!(
            fs.create_dir_all("/var/log/app/x.log/y", 0o755),
            Err(Error::NotADirectory(_))
        ));
        // Names need not be UTF-8.
        use std::os::unix::ffi::OsStrExt;
        let odd = std::ffi::OsStr::from_bytes(b"/var/caf\xe9");
        fs.create_dir_all(odd, 0o755).unwrap();
        let mut f = fs
            .create_file(Path::new(odd).join("n\u{e9}e"), 0o600)
            .unwrap();
        f.write_all(b"x").unwrap();
        f.sync_all().unwrap();
        assert_eq!(f.metadata().unwrap().size(), 1);
        drop(f);
        let names: Vec<Vec<u8>> = fs
            .read_dir_path(odd)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert!(names.contains(&"n\u{e9}e".as_bytes().to_vec()), "{names:?}");
    }

    #[test]
    fn reads_match_pread_on_every_boundary() {
        for features in ["", "inline_data"] {
            let mut fs = fresh(features);
            let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
            for len in [0usize, 1, 60, 100, 4095, 4096, 4097, 20_000] {
                let path = format!("/f{len}");
                let mut f = fs.create_file(&path, 0o600).unwrap();
                f.write_all(&data[..len]).unwrap();
                let ino = f.ino();
                for (off, n) in [(0, 7), (1, 4096), (4095, 2), (len as u64, 10), (0, 30_000)] {
                    let mut buf = vec![0xAAu8; n];
                    let got = fs.read(ino, off, &mut buf).unwrap();
                    let want = len.saturating_sub(off as usize).min(n);
                    assert_eq!(got, want, "{features} len {len} off {off}");
                    assert_eq!(&buf[..got], &data[off as usize..off as usize + got]);
                }
            }
        }
    }
}
