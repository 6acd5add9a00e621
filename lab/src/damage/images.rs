//! The six populated base images, built once with the kernel through a
//! loop mount and cached in /dev/shm/ext4r-damage keyed by a recipe stamp
//! (the helper of `bench`'s filled images), each with the manifest of its
//! tree taken through the mount and, for journalled configurations, a live
//! snapshot: the backing file copied while still mounted, so that its
//! journal holds committed transactions that need replaying. Cases that
//! damage journal blocks start from the snapshot.
//!
//! Each image is checked before use: `e2fsck -fn` clean, and every file of
//! the manifest read back intact by the reader the campaign judges with (a
//! reader that disagreed with the kernel would invent losses).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, ensure, Context, Result};

use super::manifest::{self, Manifest};
use super::{populate, readback};
use crate::bench::filled;
use crate::util::{self, TempDir};

pub struct Config {
    pub name: &'static str,
    pub size_mib: u64,
    pub mkfs: &'static [&'static str],
    /// tune2fs options applied after the tree is written (features the
    /// kernel here cannot mount with, such as quota).
    pub tune: &'static [&'static str],
    pub block_size: u64,
    pub extents: bool,
    pub journal: bool,
}

/// Sizes give every configuration several groups and backup superblocks.
pub const CONFIGS: &[Config] = &[
    Config {
        name: "ext4",
        size_mib: 512,
        mkfs: &["-t", "ext4"],
        tune: &[],
        block_size: 4096,
        extents: true,
        journal: true,
    },
    Config {
        name: "ext4-nocsum",
        size_mib: 256,
        mkfs: &["-t", "ext4", "-O", "^metadata_csum,uninit_bg"],
        tune: &[],
        block_size: 1024,
        extents: true,
        journal: true,
    },
    Config {
        name: "ext3",
        size_mib: 256,
        mkfs: &["-t", "ext3"],
        tune: &[],
        block_size: 1024,
        extents: false,
        journal: true,
    },
    Config {
        name: "ext4-1k-inline",
        size_mib: 256,
        mkfs: &["-t", "ext4", "-b", "1024", "-O", "inline_data,orphan_file"],
        tune: &["-O", "quota"],
        block_size: 1024,
        extents: true,
        journal: true,
    },
    Config {
        name: "ext4-bigalloc",
        size_mib: 1024,
        mkfs: &["-t", "ext4", "-O", "bigalloc", "-C", "8192"],
        tune: &[],
        block_size: 4096,
        extents: true,
        journal: true,
    },
    Config {
        name: "ext2",
        size_mib: 512,
        mkfs: &["-t", "ext2", "-b", "4096"],
        tune: &[],
        block_size: 4096,
        extents: false,
        journal: false,
    },
];

pub fn config(name: &str) -> Option<&'static Config> {
    CONFIGS.iter().find(|c| c.name == name)
}

/// A ready base image.
pub struct Base {
    pub cfg: &'static Config,
    pub img: PathBuf,
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    /// The live snapshot (journal needing recovery), when one was usable.
    pub snap: Option<PathBuf>,
}

const BUILD: &str = "build v1: mount -t ext4 -o loop,noatime,noinit_itable; \
     syncfs; manifest; snapshot while mounted; umount; tune2fs";

pub fn prepare(cache: &Path, cfg: &'static Config, rebuild: bool) -> Result<Base> {
    let recipe = format!(
        "damage {}: {} MiB, mke2fs {}, then tune2fs {}; {BUILD}; {}",
        cfg.name,
        cfg.size_mib,
        cfg.mkfs.join(" "),
        cfg.tune.join(" "),
        populate::RECIPE
    );
    let manifest_path = cache.join(format!("{}.manifest", cfg.name));
    let snap = cache.join(format!("{}.snap.img", cfg.name));
    let mut again = rebuild;
    for _ in 0..2 {
        let img = filled::cached(cache, cfg.name, &recipe, again, |tmp, cache| {
            build(cfg, tmp, cache, &manifest_path, &snap)
        })?;
        if manifest_path.is_file() {
            let manifest = manifest::load(&manifest_path)?;
            return Ok(Base {
                cfg,
                img,
                manifest,
                manifest_path,
                snap: snap.is_file().then(|| snap.clone()),
            });
        }
        again = true;
    }
    bail!("{}: the manifest was not written", cfg.name)
}

fn quiet(cmd: &mut Command) -> Result<i32> {
    let st = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| util::display_cmd(cmd))?;
    Ok(st.code().unwrap_or(-1))
}

fn build(cfg: &Config, img: &Path, cache: &Path, manifest_path: &Path, snap: &Path) -> Result<()> {
    ensure!(
        rustix::process::geteuid().is_root(),
        "building damage images needs root (loop mounts)"
    );
    let _ = std::fs::remove_file(manifest_path);
    let _ = std::fs::remove_file(snap);
    File::create(img)?.set_len(cfg.size_mib << 20)?;
    util::run_step(
        &format!("mke2fs ({})", cfg.name),
        Command::new("mke2fs")
            .args(["-F", "-q"])
            .args(cfg.mkfs)
            .arg(img),
    )?;
    let mnt = TempDir::new_in(cache, "mnt-")?;
    let snap_partial = snap.with_extension("img.partial");
    let shape = populate::Shape {
        block_size: cfg.block_size,
        extents: cfg.extents,
    };
    let tree = with_mount(img, mnt.path(), || {
        populate::populate(mnt.path(), &shape)?;
        syncfs(mnt.path())?;
        let tree = manifest::of_dir(mnt.path())?;
        if cfg.journal {
            syncfs(mnt.path())?;
            sparse_copy(img, &snap_partial)?;
        }
        Ok(tree)
    })?;
    if !cfg.tune.is_empty() {
        util::run_step("tune2fs", Command::new("tune2fs").args(cfg.tune).arg(img))?;
    }
    let e2 = quiet(Command::new("e2fsck").arg("-fn").arg(img))?;
    ensure!(
        e2 == 0,
        "{}: e2fsck -fn exits {e2} on the fresh image",
        cfg.name
    );
    let lost = readback::lost(img, &tree);
    if let Some((p, why)) = lost.first() {
        bail!(
            "{}: the reader finds {} of {} files not intact on the fresh image, e.g. {p}: {why}",
            cfg.name,
            lost.len(),
            tree.len()
        );
    }
    if cfg.journal {
        match check_snapshot(&snap_partial, &tree, cache) {
            Ok(()) => std::fs::rename(&snap_partial, snap)?,
            Err(e) => {
                println!("{}: no live snapshot: {e:#}", cfg.name);
                let _ = std::fs::remove_file(&snap_partial);
            }
        }
    }
    manifest::save(&tree, manifest_path)?;
    println!(
        "{}: {} objects in the tree{}",
        cfg.name,
        tree.len(),
        if snap.is_file() {
            ", live snapshot kept"
        } else {
            ""
        }
    );
    Ok(())
}

/// The snapshot must need recovery, and replayed by e2fsck be clean and
/// hold the whole tree.
fn check_snapshot(snap: &Path, tree: &Manifest, cache: &Path) -> Result<()> {
    let out = Command::new("dumpe2fs")
        .arg("-h")
        .arg(snap)
        .stderr(Stdio::null())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(
        text.contains("needs_recovery"),
        "its journal needs no recovery"
    );
    let start = text
        .lines()
        .find_map(|l| l.strip_prefix("Journal start:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    ensure!(
        start != "0" && !start.is_empty(),
        "its journal is empty (start {start:?})"
    );
    let dir = TempDir::new_in(cache, "snapcheck-")?;
    let copy = dir.path().join("replayed.img");
    sparse_copy(snap, &copy)?;
    let fy = quiet(Command::new("e2fsck").arg("-fy").arg(&copy))?;
    let fnc = quiet(Command::new("e2fsck").arg("-fn").arg(&copy))?;
    ensure!(
        fy <= 1 && fnc == 0,
        "after e2fsck's replay: -fy exit {fy}, -fn exit {fnc}"
    );
    let lost = readback::lost(&copy, tree);
    ensure!(
        lost.is_empty(),
        "{} files not intact after replay",
        lost.len()
    );
    Ok(())
}

fn syncfs(dir: &Path) -> Result<()> {
    let f = File::open(dir)?;
    // SAFETY: a plain syscall on a descriptor we own.
    let r = unsafe { libc::syncfs(f.as_raw_fd()) };
    ensure!(r == 0, "syncfs: {}", std::io::Error::last_os_error());
    Ok(())
}

/// Mounts `img` (a loop device attached by mount itself), runs `f`,
/// unmounts also when `f` fails.
fn with_mount<T>(img: &Path, mnt: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let code = quiet(
        Command::new("mount")
            .args(["-t", "ext4", "-o", "loop,noatime,noinit_itable"])
            .arg(img)
            .arg(mnt),
    )?;
    ensure!(code == 0, "the kernel refused to mount {}", img.display());
    let r = f();
    for _ in 0..50 {
        if quiet(Command::new("umount").arg(mnt))? == 0 {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = quiet(Command::new("umount").arg("-l").arg(mnt));
    bail!("umount {} stayed busy (detached lazily)", mnt.display())
}

/// Copies an image keeping its holes (tmpfs would otherwise fill them).
pub fn sparse_copy(src: &Path, dst: &Path) -> Result<()> {
    ext4r_txn::testutil::copy_sparse(src, dst)
        .with_context(|| format!("cannot copy {} to {}", src.display(), dst.display()))?;
    Ok(())
}

/// A hash of the whole image's contents (holes hash as the zeros they read
/// as), to prove that a `-n` run wrote nothing.
pub fn hash_image(path: &Path) -> Result<u64> {
    use std::os::unix::fs::FileExt;
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = f.metadata()?.len();
    let mut h = manifest::Hasher::new();
    let zeros = vec![0u8; 1 << 20];
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    let feed_zeros = |h: &mut manifest::Hasher, mut n: u64| {
        while n > 0 {
            let k = n.min(zeros.len() as u64) as usize;
            h.update(&zeros[..k]);
            n -= k as u64;
        }
    };
    for (s, e) in util::data_runs(&f, len) {
        feed_zeros(&mut h, s - pos);
        let mut off = s;
        while off < e {
            let n = ((e - off) as usize).min(buf.len());
            f.read_exact_at(&mut buf[..n], off)?;
            h.update(&buf[..n]);
            off += n as u64;
        }
        pos = e;
    }
    feed_zeros(&mut h, len - pos);
    Ok(h.finish() ^ len)
}
