// The walk shared by the `fs_walk` fuzz target (fuzz/fuzz_targets/fs_walk.rs,
// which `include!`s this file) and the regression tests
// (tests/fs_regressions.rs), so that a saved crash input is replayed through
// exactly the calls that found it. Plain comments only: `include!` takes no
// inner doc comments or attributes.
//
// Input format ("sparse image"): a u32 LE header, then records of a u32 LE
// chunk index and up to 1024 bytes written at `index * 1024` on an otherwise
// zero device. Header bits 0..=30 are the device size in KiB (clamped to
// 1..=MAX_IMAGE_KIB), bit 31 asks to open with `verify_checksums`. A short
// last record writes what it has; records past the device end are ignored.
//
// Why not the raw image: a 256 KiB image is 95% zeros, so most of
// libFuzzer's mutations would land in unused space and every run would copy
// the whole image. Leaving the zero chunks out keeps inputs at a few dozen
// KiB of almost nothing but metadata, so mutations hit superblocks, inodes,
// extent nodes, directory and xattr blocks; and moving a record (changing its
// index) relocates a whole metadata block, a mutation byte flips rarely
// find. Any raw image converts to this form (fuzz/seeds/).

#[allow(unused_imports)]
use std::collections::{HashSet, VecDeque};
#[allow(unused_imports)]
use std::io::{Read, Seek, SeekFrom};

#[allow(unused_imports)]
use ext4r::device::{BlockDevice, MemDevice};
#[allow(unused_imports)]
use ext4r::fs::{FileKind, Filesystem, OpenOptions};
#[allow(unused_imports)]
use ext4r_format::InodeNr;

/// Bytes per record of the sparse input.
pub const SPARSE_CHUNK: usize = 1024;
/// Largest device an input may ask for. The device is sparse, so this costs
/// nothing by itself; it bounds how much a correct walk may legitimately
/// read, keeping runs fast.
pub const MAX_IMAGE_KIB: u32 = 64 * 1024;
/// Inodes visited per walk (the seeds have well under a hundred).
pub const MAX_INODES: usize = 512;
/// Bytes read from one file before switching to sampled seeks.
pub const MAX_READ_PER_FILE: u64 = 256 * 1024;
/// Bytes read in one walk, all files together.
pub const MAX_READ_TOTAL: u64 = 8 << 20;
/// Path resolutions per walk (each may follow 40 symlinks).
pub const MAX_RESOLVES: usize = 128;

/// Decodes a sparse input into a device and open options.
#[allow(dead_code)]
pub fn sparse_device(data: &[u8]) -> Option<(MemDevice, OpenOptions)> {
    let (head, mut rest) = data.split_at_checked(4)?;
    let head = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let kib = (head & 0x7fff_ffff).clamp(1, MAX_IMAGE_KIB);
    let mut opts = OpenOptions::default();
    opts.verify_checksums = head & 0x8000_0000 != 0;
    let size = u64::from(kib) * 1024;
    let dev = MemDevice::new(size);
    while rest.len() > 4 {
        let (idx, tail) = rest.split_at(4);
        let idx = u32::from_le_bytes([idx[0], idx[1], idx[2], idx[3]]);
        let n = tail.len().min(SPARSE_CHUNK);
        let off = u64::from(idx) * SPARSE_CHUNK as u64;
        if off < size {
            let m = n.min(usize::try_from(size - off).unwrap_or(usize::MAX));
            dev.write_at(&tail[..m], off).ok()?;
        }
        rest = &tail[n..];
    }
    Some((dev, opts))
}

/// Encodes a raw image as a sparse input (zero chunks left out).
#[allow(dead_code)]
pub fn sparse_from_image(img: &[u8], verify_checksums: bool) -> Vec<u8> {
    let kib = u32::try_from(img.len().div_ceil(1024)).unwrap_or(u32::MAX) & 0x7fff_ffff;
    let head = kib | if verify_checksums { 0x8000_0000 } else { 0 };
    let mut out = head.to_le_bytes().to_vec();
    for (i, c) in img.chunks(SPARSE_CHUNK).enumerate() {
        if c.iter().any(|&b| b != 0) {
            out.extend_from_slice(&u32::try_from(i).unwrap_or(u32::MAX).to_le_bytes());
            out.extend_from_slice(c);
            out.resize(out.len() + SPARSE_CHUNK - c.len(), 0);
        }
    }
    out
}

/// What a walk saw. Errors are expected on damaged images; they are
/// counted (and their messages kept) so tests can tell a pristine image
/// walks cleanly.
#[derive(Debug, Default)]
#[allow(dead_code)]
pub struct WalkStats {
    pub inodes: usize,
    pub entries: usize,
    pub bytes_read: u64,
    pub links: usize,
    pub xattrs: usize,
    pub errors: Vec<String>,
    /// Lookups that failed without corruption (a symlink to a file, a
    /// dangling or looping symlink): expected on any image.
    pub lookup_failures: usize,
}

impl WalkStats {
    /// Notes a path lookup: only corruption counts as an error.
    fn lookup<T>(&mut self, r: ext4r::Result<T>) {
        match r {
            Err(e @ ext4r::Error::Corrupt { .. }) => {
                self.note::<T, _>(Err(e));
            }
            Err(_) => self.lookup_failures += 1,
            Ok(_) => {}
        }
    }

    /// Keeps an error with its causes (the library says each once, in
    /// the chain).
    fn note<T, E: std::error::Error + 'static>(&mut self, r: Result<T, E>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                if self.errors.len() < 64 {
                    self.errors.push(ext4r::error::chain(&e));
                }
                None
            }
        }
    }
}

/// Opens the filesystem in a sparse input and walks it; `None` when it does
/// not open.
#[allow(dead_code)]
pub fn walk_input(data: &[u8]) -> Option<WalkStats> {
    let (dev, opts) = sparse_device(data)?;
    let fs = Filesystem::open_with(dev, opts).ok()?;
    Some(walk(&fs))
}

/// [`walk_input`] with checksums not verified, whatever the input asks:
/// the salvage reader goes as deep as the damage lets it.
#[allow(dead_code)]
pub fn walk_input_unverified(data: &[u8]) -> Option<WalkStats> {
    let (dev, mut opts) = sparse_device(data)?;
    opts.verify_checksums = false;
    let fs = Filesystem::open_with(dev, opts).ok()?;
    Some(walk(&fs))
}

/// Walks the tree from the root breadth-first, and the reserved inodes
/// (journal, resize inode, ...): for each inode `metadata`, `runs`,
/// `xattrs`, the contents through `open_file`, `read_dir` for directories,
/// `read_link` and path resolution through symlinks. Bounded: each inode
/// is visited once (directory loops and hard links end there), at most
/// MAX_INODES, and reads stop at MAX_READ_TOTAL.
#[allow(dead_code)]
pub fn walk(fs: &Filesystem) -> WalkStats {
    let mut st = WalkStats::default();
    let mut seen = HashSet::new();
    let mut queue: VecDeque<(u32, Option<String>)> = VecDeque::new();
    queue.push_back((2, Some(String::new())));
    seen.insert(2u32);
    let first_ino = fs.superblock().s_first_ino.get().min(16);
    for ino in (1..first_ino).filter(|&i| i != 2) {
        seen.insert(ino);
        queue.push_back((ino, None));
    }
    let mut resolves = 0usize;
    while let Some((ino, path)) = queue.pop_front() {
        if st.inodes >= MAX_INODES {
            break;
        }
        st.inodes += 1;
        let Some(info) = st.note(fs.inode(InodeNr(ino))) else {
            continue;
        };
        let meta = fs.metadata(&info);
        let _ = st.note(fs.runs(&info));
        if let Some(x) = st.note(fs.xattrs(&info)) {
            st.xattrs += x.len();
        }
        read_contents(fs, &info, &mut st);
        match meta.kind {
            FileKind::Directory => {
                let Some(entries) = st.note(fs.read_dir(&info)) else {
                    continue;
                };
                for e in entries {
                    st.entries += 1;
                    if e.is_dot() || !seen.insert(e.ino.0) {
                        continue;
                    }
                    let child = path
                        .as_ref()
                        .map(|p| format!("{p}/{}", e.name_lossy().replace('/', "_")));
                    if resolves < MAX_RESOLVES {
                        if let Some(c) = &child {
                            resolves += 1;
                            st.lookup(fs.resolve(c));
                        }
                    }
                    queue.push_back((e.ino.0, child));
                }
            }
            FileKind::Symlink => {
                if st.note(fs.read_link(&info)).is_some() {
                    st.links += 1;
                }
                if let Some(p) = &path {
                    if resolves < MAX_RESOLVES {
                        // A component that is not the last: followed.
                        resolves += 1;
                        st.lookup(fs.resolve(&format!("{p}/x")));
                    }
                }
            }
            _ => {}
        }
    }
    st
}

/// Reads a file's contents: all of it when small, else the start, the
/// middle, the end, the start of its first runs, and a read past the end.
fn read_contents(fs: &Filesystem, info: &ext4r::fs::InodeInfo, st: &mut WalkStats) {
    let Some(mut r) = st.note(fs.open_file(info)) else {
        return;
    };
    let size = r.size();
    let bs = u64::from(fs.block_size());
    let mut spots = vec![(0u64, MAX_READ_PER_FILE)];
    if size > MAX_READ_PER_FILE {
        spots.push((size / 2, 64 << 10));
        spots.push((size.saturating_sub(64 << 10), 64 << 10));
        for run in r.runs().iter().take(8) {
            spots.push((run.logical.saturating_mul(bs), 8 << 10));
        }
    }
    spots.push((size.saturating_add(1), 16));
    let mut buf = vec![0u8; 64 << 10];
    for (at, len) in spots {
        if st.note(r.seek(SeekFrom::Start(at))).is_none() {
            continue;
        }
        let mut left = len;
        while left > 0 && st.bytes_read < MAX_READ_TOTAL {
            let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
            match r.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => {
                    st.bytes_read += n as u64;
                    left = left.saturating_sub(n as u64);
                }
                Err(e) => {
                    st.note::<(), _>(Err(e));
                    break;
                }
            }
        }
    }
}
