//! Helpers shared by the integration tests: temp dirs, the oracles
//! (e2fsck, dumpe2fs, mke2fs), and loop mounts that always clean up.
#![allow(dead_code)]

pub mod corpus;
pub mod mount;
pub mod tree;

#[allow(unused_imports)] // not every test binary copies images
pub use ext4r_txn::testutil::copy_sparse;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Fixed identity so that our image and mke2fs's can be compared.
pub const UUID: &str = "01234567-89ab-cdef-0123-456789abcdef";
pub const HASH_SEED: &str = "hash_seed=fedcba98-7654-3210-fedc-ba9876543210";
pub const FAKE_TIME: &str = "1700000000";

/// A directory removed on drop. Big sparse images go to /dev/shm, whose
/// tmpfs takes files larger than the host filesystem allows.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let p = base.join(format!("ext4r-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether a program is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether we run as root (loop mounts need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Splits a config's arguments, pulling out its -E list so that the fixed
/// hash seed can be merged in (mke2fs keeps only the last -E).
fn with_identity(args: &[&str]) -> Vec<String> {
    let mut out = vec!["-q".to_string(), "-F".into(), "-U".into(), UUID.into()];
    let mut ext = String::new();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "-E" && i + 1 < args.len() {
            ext = format!("{},", args[i + 1]);
            i += 2;
        } else {
            out.push(args[i].to_string());
            i += 1;
        }
    }
    out.push("-E".into());
    out.push(format!("{ext}{HASH_SEED}"));
    out
}

/// The command that makes "our" image: `ext4r mkfs`, or `EXT4R_MKFS_CMD`.
pub fn ours_cmd() -> Command {
    match std::env::var("EXT4R_MKFS_CMD") {
        Ok(c) => Command::new(c),
        Err(_) => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_ext4r"));
            c.arg("mkfs");
            c
        }
    }
}

pub fn make_image(cmd: Command, args: &[&str], img: &Path, size: &str) -> Result<(), String> {
    let (rc, out) = try_make_image(cmd, args, img, size)?;
    if rc == 0 {
        Ok(())
    } else {
        Err(out)
    }
}

/// Runs a mkfs command on a fresh sparse image of `size`: its exit code
/// and (with the command line) its output.
pub fn try_make_image(
    mut cmd: Command,
    args: &[&str],
    img: &Path,
    size: &str,
) -> Result<(i32, String), String> {
    let _ = std::fs::remove_file(img);
    let t = run(Command::new("truncate").args(["-s", size]).arg(img));
    if !t.status.success() {
        return Err(format!("truncate -s {size} failed"));
    }
    cmd.env("E2FSPROGS_FAKE_TIME", FAKE_TIME)
        .env("MKE2FS_SKIP_CHECK_MSG", "1")
        .args(with_identity(args))
        .arg(img);
    let o = run(&mut cmd);
    Ok((
        o.status.code().unwrap_or(-1),
        format!(
            "{cmd:?} exit {:?}: {}{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    ))
}

/// `e2fsck -fn`: exit code and output.
pub fn e2fsck_fn(img: &Path) -> (i32, String) {
    let o = run(Command::new("e2fsck").arg("-fn").arg(img));
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// dumpe2fs with what legitimately differs masked: UUID and hash seed
/// (fixed anyway), times, lifetime writes and checksums.
pub fn normalized_dumpe2fs(img: &Path) -> String {
    let o = run(Command::new("dumpe2fs").arg(img));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let masked_keys = [
        "Filesystem UUID",
        "Directory Hash Seed",
        "Filesystem created",
        "Last mount time",
        "Last write time",
        "Last checked",
        "Lifetime writes",
        "Checksum",
        "Journal checksum",
    ];
    text.lines()
        .map(|l| {
            if let Some((k, _)) = l.split_once(':') {
                if masked_keys.contains(&k.trim()) {
                    return format!("{k}: <masked>");
                }
            }
            mask_csums(l)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Replaces every `csum 0x...` value in a group line.
fn mask_csums(l: &str) -> String {
    let mut out = String::new();
    let mut rest = l;
    while let Some(i) = rest.find("csum 0x") {
        out.push_str(&rest[..i + 5]);
        let tail = &rest[i + 5..];
        let end = tail[2..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .map_or(tail.len(), |e| e + 2);
        out.push('X');
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The first few differing lines of two texts.
pub fn first_diffs(a: &str, b: &str, n: usize) -> String {
    let (al, bl): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    let mut shown = 0;
    for i in 0..al.len().max(bl.len()) {
        let (x, y) = (
            al.get(i).copied().unwrap_or(""),
            bl.get(i).copied().unwrap_or(""),
        );
        if x != y {
            out += &format!("  line {i}:\n    ours:   {x}\n    mke2fs: {y}\n");
            shown += 1;
            if shown == n {
                break;
            }
        }
    }
    out
}

/// A loop device attached to an image and mounted; both undone on drop,
/// also when a test panics.
pub struct LoopMount {
    pub dev: String,
    pub dir: PathBuf,
    mounted: bool,
}

impl LoopMount {
    pub fn new(img: &Path, dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let o = run(Command::new("losetup").args(["-f", "--show"]).arg(img));
        if !o.status.success() {
            return Err(format!("losetup: {}", String::from_utf8_lossy(&o.stderr)));
        }
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let mut lm = LoopMount {
            dev,
            dir: dir.to_path_buf(),
            mounted: false,
        };
        lm.mount()?;
        Ok(lm)
    }
    pub fn mount(&mut self) -> Result<(), String> {
        let o = run(Command::new("mount").arg(&self.dev).arg(&self.dir));
        if !o.status.success() {
            return Err(format!("mount: {}", String::from_utf8_lossy(&o.stderr)));
        }
        self.mounted = true;
        Ok(())
    }
    pub fn umount(&mut self) -> Result<(), String> {
        if self.mounted {
            umount_retrying(&self.dir)?;
            self.mounted = false;
        }
        Ok(())
    }
}

/// `umount DIR`, tried again while it says the mount is busy: that can be
/// passing, as a child another test thread forks holds this thread's open
/// files until it execs.
pub fn umount_retrying(dir: &Path) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..20 {
        let o = run(Command::new("umount").arg(dir));
        if o.status.success() {
            return Ok(());
        }
        last = String::from_utf8_lossy(&o.stderr).into_owned();
        if !last.contains("busy") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50 * (attempt + 1)));
    }
    Err(format!("umount: {last}"))
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let _ = self.umount();
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).output();
    }
}

/// Where two images differ, byte for byte, except the fields mke2fs
/// cannot be matched on: in each superblock copy (a 1 KiB chunk with the
/// ext2 magic in both images) the lifetime-writes counter
/// (`s_kbytes_written`, 0x178) and the checksum (0x3FC). Only the ranges
/// holding data in either file are read (holes read as zeros), so sparse
/// terabyte images cost what their metadata costs. Returns the number of
/// differing bytes and the first few offsets.
pub fn image_diffs(a: &Path, b: &Path, keep: usize) -> Result<(u64, Vec<u64>), String> {
    use std::os::unix::fs::FileExt;
    let fa = std::fs::File::open(a).map_err(|e| format!("{}: {e}", a.display()))?;
    let fb = std::fs::File::open(b).map_err(|e| format!("{}: {e}", b.display()))?;
    let len = fa
        .metadata()
        .map_err(|e| e.to_string())?
        .len()
        .max(fb.metadata().map_err(|e| e.to_string())?.len());
    let mut segs = data_segments(&fa, len);
    segs.extend(data_segments(&fb, len));
    segs.sort_unstable();
    // Merge, widened to whole KiB so that superblock chunks are whole.
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in segs {
        let (s, e) = (s & !1023, (e + 1023) & !1023);
        match merged.last_mut() {
            Some((_, le)) if s <= *le => *le = (*le).max(e),
            _ => merged.push((s, e)),
        }
    }
    let read = |f: &std::fs::File, off: u64, buf: &mut [u8]| {
        buf.fill(0);
        let mut done = 0;
        while done < buf.len() {
            match f.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => done += n,
            }
        }
    };
    const CHUNK: usize = 1 << 20;
    let (mut ba, mut bb) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let mut count = 0u64;
    let mut first = Vec::new();
    for (s, e) in merged {
        let mut off = s;
        while off < e.min(len) {
            let n = ((e.min(len) - off) as usize).min(CHUNK);
            read(&fa, off, &mut ba[..n]);
            read(&fb, off, &mut bb[..n]);
            if ba[..n] != bb[..n] {
                for k in (0..n).step_by(1024) {
                    let end = (k + 1024).min(n);
                    let (x, y) = (&mut ba[k..end], &mut bb[k..end]);
                    if x == y {
                        continue;
                    }
                    let magic = |c: &[u8]| c.len() == 1024 && c[0x38] == 0x53 && c[0x39] == 0xEF;
                    if magic(x) && magic(y) {
                        for c in [&mut *x, &mut *y] {
                            c[0x178..0x180].fill(0);
                            c[0x3FC..0x400].fill(0);
                        }
                    }
                    for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
                        if p != q {
                            count += 1;
                            if first.len() < keep {
                                first.push(off + (k + i) as u64);
                            }
                        }
                    }
                }
            }
            off += n as u64;
        }
    }
    Ok((count, first))
}

/// `[start, end)` ranges of a file that hold data (SEEK_DATA/SEEK_HOLE);
/// the whole file when the filesystem cannot tell.
fn data_segments(f: &std::fs::File, len: u64) -> Vec<(u64, u64)> {
    use rustix::fs::{seek, SeekFrom};
    let mut out = Vec::new();
    let mut off = 0;
    while off < len {
        let Ok(s) = seek(f, SeekFrom::Data(off)) else {
            break;
        };
        let e = seek(f, SeekFrom::Hole(s)).unwrap_or(len);
        if e <= s {
            return vec![(0, len)];
        }
        out.push((s, e));
        off = e;
    }
    out
}

/// `ext4r tune`, this build's binary.
pub fn ours_tune() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ext4r"));
    c.arg("tune");
    c
}

/// Runs a tune command (ours or tune2fs) on `img` at a fixed time, in UTC
/// (for `-l`), without e2fsprogs' undo files: exit code and stdout+stderr.
pub fn tune_at(cmd: &mut Command, img: &Path) -> (i32, String) {
    let o = run(cmd
        .env("E2FSPROGS_FAKE_TIME", "1700000500")
        .env("TZ", "UTC")
        .env("E2FSPROGS_UNDO_DIR", "none")
        .arg(img));
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}
