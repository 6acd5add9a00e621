//! `ext4r cp IMAGE:/SRC... DEST`: files out of an image, through the read
//! path and the tree writer `ext4r extract` uses.

use super::cp::{Args, TOOL};
use super::{copy_name, dirname, join, same_image, split_image, strerror};
use crate::extract::{copy_out, Item, OutOptions};
use ext4r::fs::{Filesystem, InodeInfo};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;

/// Copies the image paths of `a` to host path `dest`.
pub(crate) fn run(a: &Args, dest: &OsStr) -> ExitCode {
    let srcs: Vec<_> = a.paths.iter().filter_map(|p| split_image(p)).collect();
    let image = match same_image(&srcs) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            return ExitCode::from(1);
        }
    };
    let fs = match crate::read::open_fs(&image) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{TOOL}: {}", crate::errors::message(e.as_ref()));
            return ExitCode::from(1);
        }
    };
    let dest = Path::new(dest);
    let into_dir = dest.is_dir();
    if srcs.len() > 1 && !into_dir {
        // cp's words: why the target is no directory.
        let why = match std::fs::metadata(dest) {
            Ok(_) => "Not a directory".to_string(),
            Err(e) => crate::errors::message(&e),
        };
        eprintln!("{TOOL}: target '{}': {why}", dest.display());
        return ExitCode::from(1);
    }
    let mut ok = true;
    let mut items = Vec::new();
    for (_, src) in &srcs {
        let info = match lookup(&fs, src, !a.recursive) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("{TOOL}: cannot stat '{src}': {}", strerror(&e));
                ok = false;
                continue;
            }
        };
        if info.inode.is_dir() && !a.recursive {
            eprintln!("{TOOL}: -r not specified; omitting directory '{src}'");
            ok = false;
            continue;
        }
        let item = match (into_dir, copy_name(src.as_bytes())) {
            (true, Some(b)) => Item {
                info,
                target: dest.join(OsStr::from_bytes(b)),
                contents_only: false,
            },
            // The root, "dir/." or ".." into a directory: what it holds
            // goes there.
            (true, None) => Item {
                info,
                target: dest.to_path_buf(),
                contents_only: true,
            },
            (false, _) => Item {
                info,
                target: dest.to_path_buf(),
                contents_only: false,
            },
        };
        items.push(item);
    }
    let o = OutOptions {
        tool: TOOL,
        preserve: a.preserve,
        xattrs: a.archive,
        sockets: true,
        links: a.archive,
        verbose: a.verbose,
    };
    if !items.is_empty() && !copy_out(&fs, items, &o) {
        ok = false;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The inode at `path`; with `follow` a final symlink is followed too.
fn lookup(fs: &Filesystem, path: &str, follow: bool) -> ext4r::Result<InodeInfo> {
    let mut p = path.to_string();
    for _ in 0..40 {
        let info = fs.resolve(&p)?;
        if !(follow && info.inode.is_symlink()) {
            return Ok(info);
        }
        let t = String::from_utf8_lossy(&fs.read_link(&info)?).into_owned();
        p = if t.starts_with('/') {
            t
        } else {
            join(&dirname(&p), &t)
        };
    }
    Err(ext4r::Error::InvalidArgument(format!(
        "{path}: too many levels of symbolic links"
    )))
}
