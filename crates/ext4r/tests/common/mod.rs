//! Helpers for the journal oracle tests: temp dirs, running e2fsprogs,
//! superblock edits, image comparison.
#![allow(dead_code)]

#[path = "../../../../tests/common/corpus.rs"]
pub mod corpus;

#[allow(unused_imports)] // not every test binary copies images
pub use ext4r_txn::testutil::copy_sparse;

use ext4r::device::{BlockDevice, FileDevice, OpenMode};
use ext4r_format::superblock::Superblock;
use ext4r_format::BlockNr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("ext4r-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

pub fn missing_tools(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|t| tool(t).is_none())
        .map(|t| format!("{t} not found"))
}

/// Runs a tool; its stdout, or why it failed (exit status 0 required).
pub fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let (code, out, err) = run_status(name, args, env)?;
    if code == 0 {
        Ok(out)
    } else {
        Err(format!("{name} {args:?}: exit {code}: {}", err.trim()))
    }
}

/// Runs a tool; (exit code, stdout, stderr).
pub fn run_status(
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(i32, String, String), String> {
    let exe = tool(name).ok_or_else(|| format!("{name} not found"))?;
    let out = Command::new(exe)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("{name}: {e}"))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

pub fn open_rw(img: &Path) -> Result<FileDevice, String> {
    FileDevice::open(
        img,
        OpenMode {
            write: true,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())
}

pub fn read_sb(img: &Path) -> Result<Superblock, String> {
    let bytes = std::fs::read(img).map_err(|e| e.to_string())?;
    Superblock::parse(bytes.get(1024..2048).ok_or("short image")?).map_err(|e| e.to_string())
}

pub fn edit_sb(img: &Path, f: impl FnOnce(&mut Superblock)) -> Result<(), String> {
    let dev = open_rw(img)?;
    let mut b = [0u8; 1024];
    dev.read_at(&mut b, 1024).map_err(|e| e.to_string())?;
    let mut sb = Superblock::parse(&b).map_err(|e| e.to_string())?;
    f(&mut sb);
    sb.update_checksum();
    dev.write_at(&sb.to_bytes(), 1024)
        .map_err(|e| e.to_string())
}

/// e2fsck adds its writes to `s_kbytes_written` only when it is not zero.
pub fn zero_kbytes_written(img: &Path) -> Result<(), String> {
    edit_sb(img, |sb| sb.s_kbytes_written.set(0))
}

pub fn stamp_wtime(img: &Path, t: i64) -> Result<(), String> {
    edit_sb(img, |sb| sb.set_wtime(t))
}

/// The journal inode's blocks, in logical order, from `debugfs -R stat`:
/// its `(L1-L2):P1-P2` runs, skipping the `(IND)`/`(ETB0)`-style entries
/// of mapping metadata (`debugfs blocks` would list those too).
pub fn journal_blocks(img: &Path) -> Result<Vec<BlockNr>, String> {
    let out = run(
        "debugfs",
        &["-R", "stat <8>", img.to_str().ok_or("path")?],
        &[],
    )?;
    let body = out
        .split_once("BLOCKS:")
        .or_else(|| out.split_once("EXTENTS:"))
        .ok_or("no block list in stat output")?
        .1;
    let body = body.split("TOTAL").next().unwrap_or("");
    let range = |s: &str| -> Result<(u64, u64), String> {
        let bad = || format!("bad range {s:?}");
        match s.split_once('-') {
            Some((a, b)) => Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?)),
            None => {
                let a = s.parse().map_err(|_| bad())?;
                Ok((a, a))
            }
        }
    };
    let mut map = Vec::new();
    for item in body.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (logical, physical) = item
            .split_once(':')
            .ok_or_else(|| format!("bad item {item:?}"))?;
        let logical = logical.trim_start_matches('(').trim_end_matches(')');
        if !logical.starts_with(|c: char| c.is_ascii_digit()) {
            continue; // (IND), (DIND), (ETB0): mapping metadata
        }
        let (l1, l2) = range(logical)?;
        let (p1, _) = range(physical.trim())?;
        if l1 as usize != map.len() {
            return Err(format!("journal has a hole at {}", map.len()));
        }
        map.extend((0..=l2 - l1).map(|k| BlockNr(p1 + k)));
    }
    Ok(map)
}

/// `e2fsck -y -E journal_only` (no -f: with it, journal_only is ignored),
/// at a fixed time. Returns its exit code and output.
pub fn e2fsck_replay(img: &Path) -> Result<(i32, String), String> {
    let (code, out, err) = run_status(
        "e2fsck",
        &["-y", "-E", "journal_only", img.to_str().ok_or("path")?],
        &[
            ("E2FSCK_TIME", "1700000000"),
            ("E2FSCK_CONFIG", "/dev/null"),
        ],
    )?;
    if code >= 8 {
        return Err(format!("e2fsck exit {code}: {out}{err}"));
    }
    Ok((code, format!("{out}{err}")))
}

/// Byte comparison; the error names the first differing blocks and, in
/// the superblock, the differing offsets.
pub fn compare_images(a: &Path, b: &Path, bs: u32) -> Result<(), String> {
    let x = std::fs::read(a).map_err(|e| e.to_string())?;
    let y = std::fs::read(b).map_err(|e| e.to_string())?;
    if x.len() != y.len() {
        return Err(format!("sizes differ: {} vs {}", x.len(), y.len()));
    }
    if x == y {
        return Ok(());
    }
    let bs = bs as usize;
    let blocks: Vec<usize> = (0..x.len() / bs)
        .filter(|&k| x[k * bs..(k + 1) * bs] != y[k * bs..(k + 1) * bs])
        .collect();
    let sb_diff: Vec<usize> = (1024..2048).filter(|&i| x[i] != y[i]).collect();
    Err(format!(
        "{} blocks differ, first {:?}; superblock bytes differ at {:x?}",
        blocks.len(),
        &blocks[..blocks.len().min(8)],
        sb_diff
    ))
}

/// The tree of the image at `img` as the library reads it (a journal that
/// needs recovery replayed in memory, fast commits included): path ->
/// kind, mode, size, link count of non-directories, and a hash of the
/// contents or link target. `lost+found` is left out.
pub fn library_tree(img: &Path) -> Result<std::collections::BTreeMap<String, String>, String> {
    use ext4r::fs::{FileKind, Filesystem};
    use std::io::Read;
    let dev = FileDevice::open(img, OpenMode::default()).map_err(|e| e.to_string())?;
    let fs = Filesystem::open(dev).map_err(|e| e.to_string())?;
    let mut out = std::collections::BTreeMap::new();
    let root = fs.resolve("/").map_err(|e| e.to_string())?;
    let mut stack = vec![(String::new(), root)];
    while let Some((path, dir)) = stack.pop() {
        for e in fs.read_dir(&dir).map_err(|e| e.to_string())? {
            if e.is_dot() || (path.is_empty() && e.name == b"lost+found") {
                continue;
            }
            let p = format!("{path}/{}", e.name_lossy());
            let info = fs.inode(e.ino).map_err(|e| format!("{p}: {e}"))?;
            let i = &info.inode;
            let kind = FileKind::from_mode(i.mode());
            let mut d = format!("{} mode={:o}", kind.letter(), i.mode() & 0o7777);
            match kind {
                FileKind::Directory => stack.push((p.clone(), info.clone())),
                FileKind::Regular => {
                    let mut data = Vec::new();
                    let mut f = fs.open_file(&info).map_err(|e| format!("{p}: {e}"))?;
                    f.read_to_end(&mut data).map_err(|e| format!("{p}: {e}"))?;
                    d += &format!(
                        " nlink={} size={} hash={:x}",
                        i.links_count(),
                        data.len(),
                        fnv(&data)
                    );
                }
                FileKind::Symlink => {
                    let t = fs.read_link(&info).map_err(|e| format!("{p}: {e}"))?;
                    d += &format!(" nlink={} -> {:x}", i.links_count(), fnv(&t));
                }
                _ => d += &format!(" nlink={}", i.links_count()),
            }
            out.insert(p, d);
        }
    }
    Ok(out)
}

/// FNV-1a.
pub fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}
