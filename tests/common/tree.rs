//! Describing a tree as the host sees it, to compare two views of the
//! same files (the kernel's and an extracted copy, or before and after).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// FNV-1a, to compare contents without keeping them.
pub fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A file's length and a hash of its contents that does not depend on
/// where its holes are: FNV-1a over each 4 KiB piece that holds a non-zero
/// byte, with the piece's offset. Holes are skipped (SEEK_DATA), so a 1 GiB
/// sparse file costs what its data costs, not a debug-built loop over a
/// gibibyte of zeros.
pub fn fnv_file(p: &Path) -> (u64, u64) {
    use std::os::unix::fs::FileExt;
    const PIECE: usize = 4096;
    let f = fs::File::open(p).unwrap();
    let len = f.metadata().unwrap().len();
    let mut buf = vec![0u8; 1 << 20];
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let fold = |h: u64, bytes: &[u8]| {
        bytes
            .iter()
            .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
    };
    let mut at = 0u64;
    while at < len {
        // The next data at or after `at`; none left (ENXIO): done.
        let data = match rustix::fs::seek(&f, rustix::fs::SeekFrom::Data(at)) {
            Ok(d) => d,
            Err(rustix::io::Errno::NXIO) => break,
            // No SEEK_DATA here: read everything.
            Err(_) => at,
        };
        let start = data - data % PIECE as u64;
        let n = f.read_at(&mut buf, start).unwrap();
        if n == 0 {
            break;
        }
        for (k, piece) in buf[..n].chunks(PIECE).enumerate() {
            if piece.iter().any(|&b| b != 0) {
                let off = start + (k * PIECE) as u64;
                h = fold(h, &off.to_le_bytes());
                h = fold(h, piece);
            }
        }
        at = start + n as u64;
    }
    (len, h)
}

/// path -> everything observable about it, as the host sees it.
pub fn manifest(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == "lost+found" {
                continue;
            }
            let m = fs::symlink_metadata(&p).unwrap();
            let mut d = format!(
                "mode={:o} uid={} gid={} nlink={}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.nlink()
            );
            let ft = m.file_type();
            if ft.is_symlink() {
                d += &format!(" -> {}", fs::read_link(&p).unwrap().display());
            } else {
                d += &format!(" mtime={}.{:09}", m.mtime(), m.mtime_nsec());
                if m.is_dir() {
                    stack.push(p.clone());
                } else if m.is_file() {
                    let (len, hash) = fnv_file(&p);
                    d += &format!(" size={len} hash={hash:x}");
                } else {
                    d += &format!(" rdev={:x}", m.rdev());
                }
                let mut names = vec![0u8; 4096];
                let n = rustix::fs::llistxattr(&p, &mut names[..]).unwrap_or(0);
                for name in names[..n]
                    .split(|b| *b == 0)
                    .filter(|s| s.starts_with(b"user."))
                {
                    let name = String::from_utf8_lossy(name).into_owned();
                    let mut v = vec![0u8; 65536];
                    let vn = rustix::fs::lgetxattr(&p, name.as_str(), &mut v[..]).unwrap();
                    d += &format!(" {name}={:x}", fnv(&v[..vn]));
                }
            }
            out.insert(rel, d);
        }
    }
    out
}
