//! `mkfs.ext4r -d SOURCE`: the new filesystem filled from a directory, a
//! tar archive, or a tar archive on standard input (`-`), through the
//! write API once the filesystem is made.

use anyhow::{bail, Context, Result};
use ext4r::device::{BlockDevice, FileDevice};
use ext4r::mkfs::Extended;
use ext4r::populate::{Copier, CopyOptions, PopulateError};
use ext4r::write::{WriteFs, WriteOptions, ROOT_INO};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the files come from.
#[derive(Debug)]
pub(crate) enum Source {
    Dir(PathBuf),
    Tar(PathBuf),
    Stdin,
}

/// Leading bytes of compressed streams, which we do not unpack.
const COMPRESSED: &[(&[u8], &str, &str)] = &[
    (&[0x1f, 0x8b], "gzip", "zcat"),
    (b"BZh", "bzip2", "bzcat"),
    (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz", "xzcat"),
    (&[0x28, 0xb5, 0x2f, 0xfd], "zstd", "zstdcat"),
];

impl Source {
    /// What `-d ARG` names, checked before the device is touched.
    pub(crate) fn check(arg: &Path) -> Result<Source> {
        if arg.as_os_str() == "-" {
            return Ok(Source::Stdin);
        }
        let md = std::fs::metadata(arg).with_context(|| format!("{}", arg.display()))?;
        if md.is_dir() {
            // Listing it now fails early on a directory we cannot read.
            std::fs::read_dir(arg).with_context(|| format!("{}", arg.display()))?;
            return Ok(Source::Dir(arg.to_path_buf()));
        }
        if !md.is_file() {
            bail!("{}: neither a directory nor a tar archive", arg.display());
        }
        let mut head = [0u8; 6];
        let n = std::fs::File::open(arg)
            .and_then(|mut f| f.read(&mut head))
            .with_context(|| format!("{}", arg.display()))?;
        for (magic, what, cat) in COMPRESSED {
            if n >= magic.len() && head.starts_with(magic) {
                bail!(
                    "{}: a {what}-compressed archive; decompress it first, e.g. \
                     `{cat} {} | mkfs.ext4r -d - ...`",
                    arg.display(),
                    arg.display()
                );
            }
        }
        Ok(Source::Tar(arg.to_path_buf()))
    }
}

/// Fills the filesystem just made on `dev` from `src`. With
/// `SOURCE_DATE_EPOCH` (`epoch`) every time written is at most it and the
/// write API's clock is pinned to it.
pub(crate) fn populate(
    dev: FileDevice,
    src: &Source,
    ext: &Extended,
    epoch: Option<i64>,
) -> Result<()> {
    let mut wo = WriteOptions::default();
    wo.now = epoch.map(|e| (e, 0));
    // Each block of a new filesystem is written once and seldom read
    // again: a cache of blocks read would only add to the peak memory.
    wo.cached_blocks = 0;
    let real = Arc::new(dev);
    let dev: Arc<dyn BlockDevice> = Arc::new(ext4r::device::Unflushed(Arc::clone(&real)));
    let mut fs = WriteFs::open(dev, wo)?;
    let mut opts = CopyOptions::mkfs();
    opts.force_uid = ext.populate_uid;
    opts.force_gid = ext.populate_gid;
    opts.clamp = epoch;
    opts.xattrs = !ext.no_copy_xattrs;
    let mut c = Copier::new(&mut fs, opts);
    fill(&mut c, src)?;
    drop(c);
    fs.close()?;
    real.flush()?;
    Ok(())
}

fn fill(c: &mut Copier<'_>, src: &Source) -> ext4r::populate::Result<()> {
    match src {
        Source::Dir(d) => {
            c.copy_dir_xattrs(d, ROOT_INO, "/")?;
            c.copy_dir_contents(d, ROOT_INO, "/")?;
        }
        Source::Tar(p) => {
            let f = std::fs::File::open(p).map_err(|e| PopulateError::Source {
                path: p.clone(),
                source: e,
            })?;
            c.copy_tar(std::io::BufReader::with_capacity(1 << 20, f), ROOT_INO, "/")?;
        }
        Source::Stdin => {
            let stdin = std::io::stdin();
            c.copy_tar(
                std::io::BufReader::with_capacity(1 << 20, stdin.lock()),
                ROOT_INO,
                "/",
            )?;
        }
    }
    Ok(())
}
