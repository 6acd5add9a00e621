//! Which files of the original tree an image still holds, read with the
//! engine's read path (the code behind `ext4r extract`), checksums
//! verified as the kernel verifies them: a file whose metadata the kernel
//! would refuse is not intact. Runs in a child process (`cargo xtask
//! damage --readback IMG --manifest FILE`) under a time limit, so that a
//! reader stuck on a repaired image cannot stop the campaign.
//!
//! A file whose size differs is lost without reading it: a repair that
//! leaves a 2 TiB `i_size` costs nothing here.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use anyhow::Result;
use ext4r::device::{FileDevice, OpenMode};
use ext4r::fs::{Filesystem, OpenOptions};
use ext4r_format::InodeNr;

use super::manifest::{hash_reader, Manifest};

/// Directory entries looked at before giving up (a repaired image holds
/// about 5,000; a cycle or an exploded directory must not run away).
const MAX_ENTRIES: usize = 1_000_000;
const MAX_DEPTH: usize = 64;

/// Expected paths not found intact, with the reason.
pub fn lost(img: &Path, expected: &Manifest) -> Vec<(String, String)> {
    let fs = match open(img) {
        Ok(fs) => fs,
        Err(e) => {
            let why = format!("image does not open: {e:#}");
            return expected.keys().map(|p| (p.clone(), why.clone())).collect();
        }
    };
    let names = walk(&fs);
    let mut out = Vec::new();
    for (path, want) in expected {
        let why = match names.get(path.as_str()) {
            None => "missing".to_string(),
            Some(&ino) => match differs(&fs, ino, want) {
                Ok(None) => continue,
                Ok(Some(why)) => why,
                Err(e) => format!("unreadable: {e:#}"),
            },
        };
        out.push((path.clone(), why));
    }
    out
}

fn open(img: &Path) -> Result<Filesystem> {
    let dev = FileDevice::open(img, OpenMode::default())?;
    let mut opts = OpenOptions::default();
    opts.verify_checksums = true;
    Ok(Filesystem::open_with(dev, opts)?)
}

/// Path -> inode for everything reachable from the root.
fn walk(fs: &Filesystem) -> BTreeMap<String, InodeNr> {
    let mut names = BTreeMap::new();
    let mut seen = HashSet::new();
    let mut stack = vec![(String::new(), InodeNr(2), 0usize)];
    while let Some((path, ino, depth)) = stack.pop() {
        if depth > MAX_DEPTH || names.len() > MAX_ENTRIES || !seen.insert(ino.0) {
            continue;
        }
        let Ok(info) = fs.inode(ino) else { continue };
        if !info.inode.is_dir() {
            continue;
        }
        let Ok(entries) = fs.read_dir(&info) else {
            continue;
        };
        for e in entries {
            if e.is_dot() {
                continue;
            }
            // Descend by the inode's mode, as a path lookup does, not by
            // the entry's file type.
            let child = format!("{path}/{}", e.name_lossy());
            if !names.contains_key(&child) {
                names.insert(child.clone(), e.ino);
                stack.push((child, e.ino, depth + 1));
            }
        }
    }
    names
}

/// Why inode `ino` is not `want`, or `None` when it is exactly that.
fn differs(fs: &Filesystem, ino: InodeNr, want: &super::manifest::Entry) -> Result<Option<String>> {
    let info = fs.inode(ino)?;
    let inode = &info.inode;
    let kind = if inode.is_dir() {
        'd'
    } else if inode.is_reg() {
        'f'
    } else if inode.is_symlink() {
        'l'
    } else {
        '?'
    };
    if kind != want.kind {
        return Ok(Some(format!("type {kind}, was {}", want.kind)));
    }
    match kind {
        'f' => {
            if inode.size() != want.size {
                return Ok(Some(format!("size {}, was {}", inode.size(), want.size)));
            }
            let mut r = fs.open_file(&info)?;
            let (n, hash) = hash_reader(&mut r)?;
            if n != want.size || hash != want.hash {
                return Ok(Some("contents differ".to_string()));
            }
        }
        'l' => {
            let t = fs.read_link(&info)?;
            if t != want.target {
                return Ok(Some(format!(
                    "link target {:?}, was {:?}",
                    String::from_utf8_lossy(&t),
                    String::from_utf8_lossy(&want.target)
                )));
            }
        }
        _ => {}
    }
    Ok(None)
}

/// The child's side: prints `lost\tPATH\tREASON` lines, then `done`.
pub fn main(img: &Path, manifest: &Path) -> Result<()> {
    let expected = super::manifest::load(manifest)?;
    let lost = lost(img, &expected);
    let mut out = String::new();
    for (p, why) in &lost {
        out.push_str(&format!("lost\t{p}\t{}\n", why.replace(['\t', '\n'], " ")));
    }
    out.push_str("done\n");
    use std::io::Write as _;
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(())
}
