//! Helpers for tests that need temp dirs, external tools, loop devices and
//! mounts (also for the tests of the crates above, through the `test-util`
//! feature). Everything they make is removed on drop, also when a test
//! fails.
#![allow(missing_docs, clippy::unwrap_used, clippy::missing_panics_doc)]
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
        std::fs::create_dir_all(&p).unwrap();
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

/// The full path of an external tool, looked for in PATH and the sbin
/// directories (root's tools may be outside a test's PATH).
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs a tool; its stdout, or why it failed.
pub fn run(name: &str, args: &[&str]) -> Result<String, String> {
    let exe = tool(name).ok_or_else(|| format!("{name} not found"))?;
    let out = Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| format!("{name}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{name} {args:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why loop devices cannot be used here, if they cannot.
pub fn loop_unavailable() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/loop-control".into());
    }
    ["losetup", "mount", "umount"]
        .iter()
        .find(|t| tool(t).is_none())
        .map(|t| format!("{t} not found"))
}

/// A loop device attached to an image we made; detached on drop.
pub struct LoopDev(pub PathBuf);

impl LoopDev {
    pub fn attach(img: &Path) -> Result<Self, String> {
        let img = img.to_str().ok_or("non-UTF-8 path")?;
        // Another test (or engineer) may take the free device first.
        let mut last = String::new();
        for _ in 0..5 {
            match run("losetup", &["-f", "--show", img]) {
                Ok(out) => return Ok(LoopDev(PathBuf::from(out.trim()))),
                Err(e) => last = e,
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Err(last)
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        if let Some(p) = self.0.to_str() {
            let _ = run("losetup", &["-d", p]);
        }
    }
}

/// A mount of a device we attached on a directory we made; unmounted
/// on drop.
pub struct Mount(pub PathBuf);

impl Mount {
    pub fn new(dev: &Path, dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let (d, m) = (dev.to_str().ok_or("path")?, dir.to_str().ok_or("path")?);
        run("mount", &[d, m])?;
        Ok(Mount(dir.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(p) = self.0.to_str() {
            if run("umount", &[p]).is_err() {
                let _ = run("umount", &["-l", p]);
            }
        }
    }
}

/// Copies file `src` to `dst` keeping its holes, as `cp --sparse` does.
/// `std::fs::copy` on tmpfs writes every hole of an image out as zero
/// pages: 0.3 s and 512 MiB of memory for an empty 512 MiB image, where
/// this copies the few blocks mke2fs wrote.
pub fn copy_sparse(src: impl AsRef<Path>, dst: impl AsRef<Path>) -> std::io::Result<u64> {
    use rustix::fs::{seek, SeekFrom};
    use std::os::unix::fs::FileExt;
    let (src, dst) = (src.as_ref(), dst.as_ref());
    let from = std::fs::File::open(src)?;
    let len = from.metadata()?.len();
    let to = std::fs::File::create(dst)?;
    to.set_len(len)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < len {
        let data = match seek(&from, SeekFrom::Data(at)) {
            Ok(d) => d,
            // ENXIO: nothing but a hole past `at`.
            Err(rustix::io::Errno::NXIO) => break,
            Err(e) => return Err(e.into()),
        };
        if data >= len {
            break;
        }
        let hole = seek(&from, SeekFrom::Hole(data))?.min(len);
        let mut off = data;
        while off < hole {
            let n = usize::try_from(hole - off).map_or(buf.len(), |n| n.min(buf.len()));
            from.read_exact_at(&mut buf[..n], off)?;
            to.write_all_at(&buf[..n], off)?;
            off += n as u64;
        }
        at = hole;
    }
    Ok(len)
}

/// A memory device that records the read-ahead hints it is given
/// ([`crate::device::BlockDevice::will_need`]), for tests of who announces
/// what.
pub struct HintRecorder {
    /// The device behind it.
    pub dev: crate::device::MemDevice,
    /// `(offset, len)` of every hint, in order.
    pub hints: std::sync::Mutex<Vec<(u64, u64)>>,
    /// What [`crate::device::BlockDevice::resident`] answers for every
    /// range (`None`, memory's answer, unless a test sets it).
    pub resident: Option<bool>,
}

impl HintRecorder {
    /// A recorder over a zeroed memory device of `size` bytes.
    pub fn new(size: u64) -> Self {
        HintRecorder {
            dev: crate::device::MemDevice::new(size),
            hints: std::sync::Mutex::new(Vec::new()),
            resident: None,
        }
    }

    /// The hints so far.
    pub fn hints(&self) -> Vec<(u64, u64)> {
        self.hints.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

impl crate::device::BlockDevice for HintRecorder {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> crate::error::Result<()> {
        self.dev.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> crate::error::Result<()> {
        self.dev.write_at(buf, offset)
    }
    fn flush(&self) -> crate::error::Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.dev.size()
    }
    fn will_need(&self, offset: u64, len: u64) {
        if let Ok(mut h) = self.hints.lock() {
            h.push((offset, len));
        }
    }
    fn resident(&self, _offset: u64, _len: u64) -> Option<bool> {
        self.resident
    }
    fn stats(&self) -> crate::device::IoStats {
        self.dev.stats()
    }
}
