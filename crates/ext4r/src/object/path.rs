//! Paths and symlinks: resolving a path from the root (or a directory),
//! symlinks followed on the way as the kernel's path walk follows them.

use ext4r_format::inode::ino;
use ext4r_format::{FormatError, InodeNr};
use ext4r_txn::error::Location;

use super::data::read_small;
use super::dir;
use super::source::{InodeInfo, Source};
use crate::error::{Error, Result};

/// Symlinks followed in one lookup before giving up (the kernel's
/// `MAXSYMLINKS`, which also counts the whole lookup).
const MAX_SYMLINKS: u32 = 40;
/// Longest symlink target read (`PATH_MAX`).
const MAX_TARGET: u64 = 4096;

fn shown(comps: &[&[u8]]) -> String {
    String::from_utf8_lossy(&comps.join(&b'/')).into_owned()
}

/// The inode `path` names, from the root when it starts with `/` or from
/// directory `start` otherwise; symlinks followed in every component but
/// the last. `..` is the stored entry, as the kernel reads it after a
/// symlink; `.` and empty components are skipped. `names` is asked
/// about each directory before a name is looked up in it (a face that
/// cannot match some directories' names refuses them there).
///
/// # Errors
/// [`Error::NotFound`] and [`Error::NotADirectory`] naming the path up
/// to the component; [`Error::InvalidArgument`] past 40 symlinks; errors
/// reading the directories on the way.
pub(crate) fn resolve(
    src: &(impl Source + ?Sized),
    start: InodeNr,
    path: &[u8],
    names: &dyn Fn(&InodeInfo) -> Result<()>,
) -> Result<InodeInfo> {
    let mut links = 0;
    resolve_in(src, start, path, names, &mut links)
}

/// [`resolve`], counting in `links` the symlinks followed in the whole
/// lookup, nested or not: a per-depth limit would let targets of many
/// components, each a symlink with such a target, cost 2000^40 lookups.
fn resolve_in(
    src: &(impl Source + ?Sized),
    start: InodeNr,
    path: &[u8],
    names: &dyn Fn(&InodeInfo) -> Result<()>,
    links: &mut u32,
) -> Result<InodeInfo> {
    let comps: Vec<&[u8]> = path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect();
    let mut cur = src.inode(if path.first() == Some(&b'/') {
        InodeNr(ino::ROOT)
    } else {
        start
    })?;
    for (i, c) in comps.iter().enumerate() {
        if !cur.inode.is_dir() {
            return Err(Error::NotADirectory(shown(&comps[..i])));
        }
        names(&cur)?;
        let Some((n, _)) = dir::lookup(src, &cur, c)? else {
            return Err(Error::NotFound(shown(&comps[..=i])));
        };
        let next = src.inode(InodeNr(n))?;
        if next.inode.is_symlink() && i + 1 < comps.len() {
            *links += 1;
            if *links > MAX_SYMLINKS {
                return Err(Error::InvalidArgument(format!(
                    "{}: too many levels of symbolic links",
                    shown(&comps[..=i])
                )));
            }
            let target = read_link(src, &next)?;
            cur = resolve_in(src, cur.ino, &target, names, links)?;
            continue;
        }
        cur = next;
    }
    Ok(cur)
}

/// The target of a symlink: in `i_block` for a fast symlink, inline data,
/// or its data blocks.
///
/// # Errors
/// [`Error::InvalidArgument`] for something that is not a symlink;
/// [`Error::Corrupt`] when the target is longer than `PATH_MAX` or cannot
/// be read.
pub(crate) fn read_link(src: &(impl Source + ?Sized), info: &InodeInfo) -> Result<Vec<u8>> {
    if !info.inode.is_symlink() {
        return Err(Error::InvalidArgument(format!(
            "inode {} is not a symbolic link",
            info.ino.0
        )));
    }
    let size = info.inode.size();
    if size > MAX_TARGET {
        return Err(Error::corrupt(
            Location::inode(info.ino.0).of("symlink"),
            FormatError::invalid("symlink", format!("target length {size}")),
        ));
    }
    read_small(src, info)
}
