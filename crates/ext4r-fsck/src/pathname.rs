//! Directory paths in messages, as e2fsck prints them ("Entry 'f20' in
//! /d1/d2 (13)"): walked up through each directory's `..` entry and
//! looked up by name in its parent, on disk, as libext2fs's
//! `ext2fs_get_pathname` does. Only built when a problem is reported.

use ext4r::fs::Filesystem;
use ext4r_format::InodeNr;

/// Levels walked before giving up with "..." (e2fsck's depth limit).
const MAX_DEPTH: u32 = 32;
const ROOT: u32 = 2;

/// The path of directory `dir`: "/" for the root, "???" when a
/// directory on the way cannot be read, "<N>" for an inode that is not
/// a directory.
pub(crate) fn dir_path(fs: &Filesystem, dir: u32) -> String {
    walk(fs, dir, 0, MAX_DEPTH).unwrap_or_else(|| "???".into())
}

/// The path of `ino` as named in directory `dir` (its parent): the
/// parent's path, then the name `dir` gives it ("???" when none does).
pub(crate) fn path_in(fs: &Filesystem, dir: u32, ino: u32) -> String {
    walk(fs, dir, ino, MAX_DEPTH).unwrap_or_else(|| "???".into())
}

/// `ext2fs_get_pathname_int`'s rule: `None` for an unreadable directory.
fn walk(fs: &Filesystem, dir: u32, ino: u32, depth: u32) -> Option<String> {
    if dir == ino || ino == 0 && dir == ROOT {
        return Some(if dir == ROOT { "/".into() } else { ".".into() });
    }
    if dir == 0 || depth == 0 {
        return Some("...".into());
    }
    let info = fs.inode(InodeNr(dir)).ok()?;
    if !info.inode.is_dir() {
        return Some(if ino != 0 {
            format!("<{dir}>/<{ino}>")
        } else {
            format!("<{dir}>")
        });
    }
    let entries = fs.read_dir(&info).ok()?;
    let parent = entries
        .iter()
        .find(|e| e.name == b"..")
        .map_or(0, |e| e.ino.0);
    let name = (ino != 0)
        .then(|| {
            entries
                .iter()
                .find(|e| e.ino.0 == ino && !e.is_dot())
                .map(|e| e.name_lossy())
        })
        .flatten();
    let parent_path = walk(fs, parent, dir, depth - 1)?;
    if ino == 0 {
        return Some(parent_path);
    }
    let head = if parent_path == "/" { "" } else { &parent_path };
    Some(format!("{head}/{}", name.as_deref().unwrap_or("???")))
}
