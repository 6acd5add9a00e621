//! `cargo xtask zoo --fast-commit`: fast_commit filesystems cut by the
//! kernel in the middle of fsync-heavy workloads, then recovered four
//! ways on copies of the cut image, and the trees compared:
//!
//! - the kernel: a loop mount replays the journal and its fast commits;
//! - ours: `ext4r fsck -fy`, after which `e2fsck -fn` and our `-fn` must
//!   be clean;
//! - the library: `ext4r extract` of the cut image, which replays in
//!   memory and must leave the image as it was;
//! - e2fsck: `e2fsck -fy`.
//!
//! Ours must equal the kernel's tree (names, kinds, modes, owners, link
//! counts of non-directories, sizes, contents, file times, user xattrs),
//! and the library's view must equal the kernel's in names, kinds, sizes
//! and contents. Where e2fsck's tree differs from the kernel's, the
//! difference is listed, not failed (e2fsck 1.47.0's replay loses new
//! directories, for one). Every file whose last change was followed by
//! its fsync must be there with the content it had then.
//!
//! `--sample` runs the fixed CI matrix: every workload kind with and
//! without fsync over 1 KiB and 4 KiB blocks, 32- and 64-bit, with and
//! without metadata_csum (the cut right after the last operation, so each
//! case is reproducible), plus the example (50 fsync'd files).
//! Without it, `--count` random cases: mixed workloads cut while a second
//! thread keeps writing.

use super::workload::Rng;
use super::{status, with_mount};
use crate::util::TempDir;
use anyhow::{bail, Context, Result};
use ext4r_txn::testutil::copy_sparse;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `_IOR('X', 125, __u32)` (fs/ext4/ext4.h).
const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587D;
/// Shut down without flushing the journal: a power cut.
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;

/// One mke2fs configuration with fast_commit.
#[derive(Clone, Debug)]
pub struct FcConfig {
    pub name: String,
    pub opts: String,
    pub block_size: u64,
}

/// The configurations: 1 KiB and 4 KiB blocks, 32- and 64-bit, with and
/// without metadata_csum.
pub fn configs() -> Vec<FcConfig> {
    let mut out = Vec::new();
    for bs in [4096u64, 1024] {
        for wide in [true, false] {
            for csum in [true, false] {
                let mut o = vec!["fast_commit"];
                if !wide {
                    o.push("^64bit");
                }
                if !csum {
                    o.push("^metadata_csum,uninit_bg");
                }
                out.push(FcConfig {
                    name: format!(
                        "{}k{}{}",
                        bs / 1024,
                        if wide { "-64bit" } else { "-32bit" },
                        if csum { "-csum" } else { "-nocsum" }
                    ),
                    opts: o.join(","),
                    block_size: bs,
                });
            }
        }
    }
    out
}

/// What a workload mostly does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    Create,
    Append,
    Overwrite,
    Truncate,
    Unlink,
    Rename,
    Link,
    Xattr,
    Mkdir,
    Fallocate,
    Mixed,
    /// The example: a directory synced, then 50 files written and
    /// each fsync'd.
    Fifty,
}

const LOADS: [Load; 10] = [
    Load::Create,
    Load::Append,
    Load::Overwrite,
    Load::Truncate,
    Load::Unlink,
    Load::Rename,
    Load::Link,
    Load::Xattr,
    Load::Mkdir,
    Load::Fallocate,
];

/// One case of the matrix.
#[derive(Clone, Debug)]
pub struct Case {
    pub cfg: FcConfig,
    pub load: Load,
    /// fsync after each operation.
    pub fsync: bool,
    /// Keep writing on a second thread while the cut is made.
    pub racing: bool,
    pub seed: u64,
}

impl Case {
    pub fn name(&self) -> String {
        format!(
            "{}-{:?}{}{}",
            self.cfg.name,
            self.load,
            if self.fsync { "-fsync" } else { "" },
            if self.racing { "-racing" } else { "" }
        )
        .to_lowercase()
    }
}

/// The CI matrix: every load with and without fsync (the configurations
/// cycled so that each load meets both block sizes and both checksum
/// settings), mixed loads on every configuration (with and without
/// fsync), two mixed loads cut while another thread writes, and the
/// issue's example.
pub fn sample() -> Vec<Case> {
    let cfgs = configs();
    let mut out = Vec::new();
    let mut k = 0usize;
    for load in LOADS {
        for fsync in [true, false] {
            out.push(Case {
                cfg: cfgs[(k + k / 2) % cfgs.len()].clone(),
                load,
                fsync,
                racing: false,
                seed: 1000 + k as u64,
            });
            k += 1;
        }
    }
    for (i, cfg) in cfgs.iter().enumerate() {
        out.push(Case {
            cfg: cfg.clone(),
            load: Load::Mixed,
            fsync: i % 4 != 3,
            racing: false,
            seed: 2000 + i as u64,
        });
    }
    for (i, cfg) in [&cfgs[0], &cfgs[5]].into_iter().enumerate() {
        out.push(Case {
            cfg: cfg.clone(),
            load: Load::Mixed,
            fsync: true,
            racing: true,
            seed: 2500 + i as u64,
        });
    }
    out.push(Case {
        cfg: cfgs[0].clone(),
        load: Load::Fifty,
        fsync: true,
        racing: false,
        seed: 3000,
    });
    out
}

/// A random case for the long run.
pub fn random(i: usize, seed: u64) -> Case {
    let cfgs = configs();
    let mut r = Rng::new(seed);
    let load = if r.below(3) == 0 {
        LOADS[r.below(LOADS.len() as u64) as usize]
    } else {
        Load::Mixed
    };
    Case {
        cfg: cfgs[i % cfgs.len()].clone(),
        load,
        fsync: r.below(4) != 0,
        racing: r.below(2) == 0,
        seed,
    }
}

/// A case of the kind the sample races (mixed, fsync'd, cut while a
/// writer thread runs), for repeating just those: `--racing`.
pub fn racing(i: usize, seed: u64) -> Case {
    let cfgs = configs();
    Case {
        cfg: cfgs[i % cfgs.len()].clone(),
        load: Load::Mixed,
        fsync: true,
        racing: true,
        seed,
    }
}

/// What one case found.
#[derive(Debug, Default)]
pub struct CaseResult {
    /// Operations done before the cut.
    pub ops: u64,
    /// Fast-commit records in the cut image's area (from our scan), when
    /// the area was valid.
    pub fc_records: usize,
    /// Failures: ours differs from the kernel, a file lost, an unclean
    /// result, a changed image.
    pub failures: Vec<String>,
    /// Files the kernel's replay has and ours has not (or with other
    /// contents).
    pub lost: usize,
    /// Where e2fsck's recovery differs from the kernel's (listed only).
    pub e2fsck_differs: Vec<String>,
    /// The kernel refused to replay the cut image.
    pub kernel_refused: bool,
    /// Where the kernel refused the image and e2fsck's recovery stands
    /// in for it: what ours keeps beyond e2fsck's (more names, other link
    /// counts or times with the same contents), listed only. e2fsck's
    /// fast-commit replay keeps less than the kernel's; fsync'd files are
    /// checked against the workload's model either way.
    pub beyond_e2fsck: Vec<String>,
    /// The kernel refused the image because its fast-commit scan ran off
    /// the journal (see [`Overrun`]); the reference is then the kernel's
    /// replay of a copy whose area ends after its valid fast commits, or
    /// none when no such copy could be made. How, for the report.
    pub fc_overrun: Option<&'static str>,
}

/// Whether a difference from the reference loses something: a name only
/// the reference has, or another kind, mode, size or contents (the link
/// count and times aside). With `strict` (the reference is the kernel's
/// own replay) every difference does.
fn loses(x: &str, strict: bool) -> bool {
    if strict || x.contains("only in the first") {
        return true;
    }
    // "PATH: REFERENCE / OURS"; a name only ours has loses nothing.
    let Some((reference, ours)) = x.split_once(" / ") else {
        return false;
    };
    let reference = reference.split_once(": ").map_or(reference, |r| r.1);
    let kept = |d: &str| -> Vec<String> {
        d.split(' ')
            .filter(|w| !w.starts_with("nlink=") && !w.starts_with("mtime="))
            .map(String::from)
            .collect()
    };
    kept(reference) != kept(ours)
}

/// The model of what the workload wrote: contents of every file it made,
/// and the files whose last change was followed by their own fsync.
#[derive(Default)]
pub(crate) struct Model {
    files: BTreeMap<String, Vec<u8>>,
    synced: BTreeMap<String, u64>,
    dirs: Vec<String>,
    next: u64,
}

impl Model {
    fn changed(&mut self, p: &str) {
        self.synced.remove(p);
    }
    fn fsynced(&mut self, p: &str) {
        if let Some(d) = self.files.get(p) {
            self.synced.insert(p.to_string(), fnv(d));
        }
    }
    fn pick(&self, r: &mut Rng) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let k = r.below(self.files.len() as u64) as usize;
        self.files.keys().nth(k).cloned()
    }
    fn fresh(&mut self, r: &mut Rng) -> String {
        self.next += 1;
        let d = &self.dirs[r.below(self.dirs.len() as u64) as usize];
        format!("{d}/f{}", self.next)
    }
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn bytes(r: &mut Rng, n: usize) -> Vec<u8> {
    let b = r.next() as u8;
    (0..n).map(|i| b.wrapping_add((i / 97) as u8)).collect()
}

fn fsync_path(p: &Path) -> Result<()> {
    fs::File::open(p)?.sync_all()?;
    Ok(())
}

/// Builds the files the workload starts from, then syncs (a full commit).
fn prefill(mnt: &Path, m: &mut Model, r: &mut Rng, bs: u64) -> Result<()> {
    for d in ["d", "d/s", "e"] {
        fs::create_dir(mnt.join(d))?;
        m.dirs.push(d.to_string());
    }
    for (k, blocks) in [1u64, 3, 40, 300, 0, 7].iter().enumerate() {
        let p = format!("d/p{k}");
        let data = bytes(r, (blocks * bs) as usize + (k * 37));
        fs::write(mnt.join(&p), &data)?;
        m.files.insert(p, data);
    }
    for k in 0..5 {
        let p = format!("d/s/q{k}");
        let data = bytes(r, 500 * (k + 1));
        fs::write(mnt.join(&p), &data)?;
        m.files.insert(p, data);
    }
    rustix::fs::sync();
    Ok(())
}

/// One operation of `load`; fsyncs what it touched when `fsync`.
fn step(mnt: &Path, m: &mut Model, r: &mut Rng, load: Load, fsync: bool, bs: u64) -> Result<()> {
    let load = if load == Load::Mixed {
        LOADS[r.below(LOADS.len() as u64) as usize]
    } else {
        load
    };
    match load {
        Load::Create | Load::Fifty | Load::Mixed => {
            let p = m.fresh(r);
            let n = r.below(3 * bs) as usize;
            let data = bytes(r, n);
            let mut f = fs::File::create(mnt.join(&p))?;
            f.write_all(&data)?;
            m.files.insert(p.clone(), data);
            if fsync {
                f.sync_all()?;
                m.fsynced(&p);
            }
        }
        Load::Append | Load::Overwrite | Load::Truncate | Load::Fallocate => {
            let Some(p) = m.pick(r) else { return Ok(()) };
            let mut f = fs::OpenOptions::new().write(true).open(mnt.join(&p))?;
            let data = m.files.get_mut(&p).context("model")?;
            match load {
                Load::Append => {
                    let more = {
                        let n = 1 + r.below(2 * bs) as usize;
                        bytes(r, n)
                    };
                    f.seek(SeekFrom::End(0))?;
                    f.write_all(&more)?;
                    data.extend_from_slice(&more);
                }
                Load::Overwrite => {
                    let at = r.below(data.len() as u64 + 1) as usize;
                    let more = {
                        let n = 1 + r.below(bs) as usize;
                        bytes(r, n)
                    };
                    f.seek(SeekFrom::Start(at as u64))?;
                    f.write_all(&more)?;
                    let end = at + more.len();
                    if data.len() < end {
                        data.resize(end, 0);
                    }
                    data[at..end].copy_from_slice(&more);
                }
                Load::Truncate => {
                    let to = if r.below(3) == 0 {
                        data.len() as u64 + r.below(4 * bs)
                    } else {
                        r.below(data.len() as u64 + 1)
                    };
                    f.set_len(to)?;
                    data.resize(to as usize, 0);
                }
                _ => {
                    // Unwritten extents past the end, then a write into
                    // the middle of them.
                    let len = 8 * bs + r.below(8 * bs);
                    let start = data.len() as u64;
                    rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), start, len)?;
                    data.resize((start + len) as usize, 0);
                    let at = start + r.below(len);
                    let more = bytes(r, 100);
                    f.seek(SeekFrom::Start(at))?;
                    f.write_all(&more)?;
                    let end = (at as usize + more.len()).max(data.len());
                    data.resize(end, 0);
                    data[at as usize..at as usize + more.len()].copy_from_slice(&more);
                }
            }
            m.changed(&p);
            if fsync {
                f.sync_all()?;
                m.fsynced(&p);
            }
        }
        Load::Unlink => {
            let Some(p) = m.pick(r) else { return Ok(()) };
            fs::remove_file(mnt.join(&p))?;
            m.files.remove(&p);
            m.synced.remove(&p);
            // The unlink reaches the log with the next fast commit.
            let q = m.fresh(r);
            let data = bytes(r, 10);
            fs::write(mnt.join(&q), &data)?;
            m.files.insert(q.clone(), data);
            if fsync {
                fsync_path(&mnt.join(&q))?;
                m.fsynced(&q);
            }
        }
        Load::Rename => {
            let Some(p) = m.pick(r) else { return Ok(()) };
            // Over an existing file now and then.
            let q = if r.below(3) == 0 {
                m.pick(r).filter(|q| *q != p).unwrap_or_else(|| m.fresh(r))
            } else {
                m.fresh(r)
            };
            fs::rename(mnt.join(&p), mnt.join(&q))?;
            let data = m.files.remove(&p).context("model")?;
            m.synced.remove(&p);
            m.synced.remove(&q);
            m.files.insert(q.clone(), data);
            if fsync {
                fsync_path(&mnt.join(&q))?;
                m.fsynced(&q);
            }
        }
        Load::Link => {
            let Some(p) = m.pick(r) else { return Ok(()) };
            let q = m.fresh(r);
            fs::hard_link(mnt.join(&p), mnt.join(&q))?;
            // A later write through one name changes both: the model keeps
            // the second name out of the content checks.
            if fsync {
                fsync_path(&mnt.join(&q))?;
            }
        }
        Load::Xattr => {
            let Some(p) = m.pick(r) else { return Ok(()) };
            let v = {
                let n = 1 + r.below(200) as usize;
                bytes(r, n)
            };
            rustix::fs::setxattr(
                mnt.join(&p).as_path(),
                format!("user.k{}", r.below(4)).as_str(),
                &v,
                rustix::fs::XattrFlags::empty(),
            )?;
            if fsync {
                fsync_path(&mnt.join(&p))?;
            }
        }
        Load::Mkdir => {
            m.next += 1;
            let parent = m.dirs[r.below(m.dirs.len() as u64) as usize].clone();
            let d = format!("{parent}/m{}", m.next);
            fs::create_dir(mnt.join(&d))?;
            m.dirs.push(d.clone());
            let p = format!("{d}/inner");
            let data = {
                let n = 1 + r.below(bs) as usize;
                bytes(r, n)
            };
            let mut f = fs::File::create(mnt.join(&p))?;
            f.write_all(&data)?;
            m.files.insert(p.clone(), data);
            if fsync {
                f.sync_all()?;
                m.fsynced(&p);
            }
        }
    }
    Ok(())
}

fn shutdown(mnt: &Path) -> Result<()> {
    let f = fs::File::open(mnt).with_context(|| format!("open {}", mnt.display()))?;
    let flags: u32 = EXT4_GOING_FLAGS_NOLOGFLUSH;
    // SAFETY: the ioctl reads one u32 from a pointer to a live local, on
    // an fd we own for the duration of the call.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), EXT4_IOC_SHUTDOWN, &flags as *const u32) };
    if rc != 0 {
        bail!("EXT4_IOC_SHUTDOWN: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the cut image of `case` at `img`; returns the model and the
/// operations done.
pub(crate) fn make(img: &Path, mnt: &Path, case: &Case) -> Result<(Model, u64)> {
    // A 16 MiB journal: a fast-commit area of 64 blocks, room for the
    // issue's 50 fsyncs (a smaller one fills, and the kernel falls back
    // to full commits).
    // 160 MiB: two groups with 4 KiB blocks, so that a backup superblock
    // exists (a torn primary has something to be repaired from).
    fs::File::create(img)?.set_len(160 << 20)?;
    let mut mk = Command::new("mke2fs");
    mk.args([
        "-q",
        "-F",
        "-t",
        "ext4",
        "-J",
        "size=16",
        "-E",
        "root_owner=0:0",
        "-b",
    ])
    .arg(case.cfg.block_size.to_string())
    .args(["-O", &case.cfg.opts])
    .arg(img);
    if status(&mut mk)? != 0 {
        bail!("mke2fs -O {} refused", case.cfg.opts);
    }
    let bs = case.cfg.block_size;
    let mut r = Rng::new(case.seed);
    with_mount(img, mnt, "", || {
        let mut m = Model::default();
        let mut ops = 0u64;
        if case.load == Load::Fifty {
            fs::create_dir(mnt.join("d"))?;
            m.dirs.push("d".into());
            rustix::fs::sync();
            for i in 0..50 {
                let p = format!("d/f{i}");
                let data = format!("x{i}").repeat(1000).into_bytes();
                let mut f = fs::File::create(mnt.join(&p))?;
                f.write_all(&data)?;
                f.sync_all()?;
                m.files.insert(p.clone(), data);
                m.fsynced(&p);
                ops += 1;
            }
            shutdown(mnt)?;
            return Ok((m, ops));
        }
        prefill(mnt, &mut m, &mut r, bs)?;
        let n = 15 + r.below(40);
        if case.racing {
            // Half the operations, then a writer thread that keeps going
            // while the cut is made at a random moment.
            for _ in 0..n / 2 {
                step(mnt, &mut m, &mut r, case.load, case.fsync, bs)?;
                ops += 1;
            }
            let seed = r.next();
            let dir = mnt.join("e");
            let stop = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| -> Result<()> {
                s.spawn(|| {
                    let mut w = Rng::new(seed);
                    for i in 0..10_000u64 {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let p = dir.join(format!("w{i}"));
                        let Ok(mut f) = fs::File::create(&p) else {
                            break;
                        };
                        if f.write_all(&vec![(i & 0xff) as u8; 1 + w.below(9000) as usize])
                            .is_err()
                        {
                            break;
                        }
                        if i % 3 == 0 && f.sync_all().is_err() {
                            break;
                        }
                    }
                });
                std::thread::sleep(std::time::Duration::from_millis(r.below(40)));
                let cut = shutdown(mnt);
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                cut
            })?;
            // What the racing writer made is not in the model: its
            // directory is compared between the recoveries only.
            return Ok((m, ops));
        }
        for _ in 0..n {
            step(mnt, &mut m, &mut r, case.load, case.fsync, bs)?;
            ops += 1;
        }
        shutdown(mnt)?;
        Ok((m, ops))
    })
    .map_err(|e| e.context(format!("building {}", case.name())))
}

/// path -> what can be seen of it through a mount: kind, mode, owner,
/// link count (not of directories: the kernel's replay leaves those
/// short), size, contents, mtime of non-directories, user xattrs.
fn mounted_tree(root: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir)? {
            let p = e?.path();
            let rel = p.strip_prefix(root)?.display().to_string();
            if rel == "lost+found" {
                continue;
            }
            let md = fs::symlink_metadata(&p)?;
            let ft = md.file_type();
            let mut d = format!("mode={:o} uid={} gid={}", md.mode(), md.uid(), md.gid());
            if ft.is_dir() {
                stack.push(p.clone());
            } else {
                d += &format!(
                    " nlink={} mtime={}.{:09}",
                    md.nlink(),
                    md.mtime(),
                    md.mtime_nsec()
                );
                if ft.is_symlink() {
                    d += &format!(" -> {}", fs::read_link(&p)?.display());
                } else if ft.is_file() {
                    let data = fs::read(&p)?;
                    d += &format!(" size={} hash={:x}", data.len(), fnv(&data));
                }
                let mut names = vec![0u8; 4096];
                let n = rustix::fs::llistxattr(&p, &mut names[..]).unwrap_or(0);
                for name in names[..n]
                    .split(|b| *b == 0)
                    .filter(|s| s.starts_with(b"user."))
                {
                    let name = String::from_utf8_lossy(name).into_owned();
                    let mut v = vec![0u8; 65536];
                    let vn = rustix::fs::lgetxattr(&p, name.as_str(), &mut v[..]).unwrap_or(0);
                    d += &format!(" {name}={:x}", fnv(&v[..vn]));
                }
            }
            out.insert(rel, d);
        }
    }
    Ok(out)
}

/// The part of a tree an extracted copy keeps: kind, size, contents.
fn lite(tree: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    tree.iter()
        .map(|(p, d)| {
            let kind = if d.contains(" -> ") {
                d.split(" -> ").nth(1).map(|t| format!("-> {t}"))
            } else {
                d.split(' ')
                    .filter(|w| w.starts_with("size=") || w.starts_with("hash="))
                    .map(String::from)
                    .reduce(|a, b| format!("{a} {b}"))
            };
            (p.clone(), kind.unwrap_or_else(|| "dir".into()))
        })
        .collect()
}

/// Each path that differs between `a` and `b`, with both sides.
fn diffs(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (p, d) in a {
        match b.get(p) {
            None => out.push(format!("{p}: only in the first ({d})")),
            Some(e) if e != d => out.push(format!("{p}: {d} / {e}")),
            _ => {}
        }
    }
    for (p, d) in b {
        if !a.contains_key(p) {
            out.push(format!("{p}: only in the second ({d})"));
        }
    }
    out
}

/// The tree after mounting `img` (a replay when it needs one); `None`
/// when the kernel refuses it.
fn tree_after_mount(img: &Path, mnt: &Path) -> Result<Option<BTreeMap<String, String>>> {
    match with_mount(img, mnt, "", || mounted_tree(mnt)) {
        Ok(t) => Ok(Some(t)),
        Err(e) if format!("{e:#}").contains("refused to mount") => Ok(None),
        Err(e) => Err(e),
    }
}

/// Builds, cuts and recovers one case.
/// With `keep`, the cut image of a failed case, or of one the kernel
/// refused, is copied there as `<seed>-<name>.img`.
pub fn run_case(
    bin: &OsString,
    work: &Path,
    case: &Case,
    keep: Option<&Path>,
) -> Result<CaseResult> {
    let dir = TempDir::new_in(work, &format!("fc{}-", case.seed))?;
    let img = dir.path().join("cut.img");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt)?;
    let (model, ops) = make(&img, &mnt, case)?;
    let res = judge_cut(bin, dir.path(), &img, &mnt, model, ops);
    if let Some(k) = keep {
        let kept = res
            .as_ref()
            .map_or(true, |r| !r.failures.is_empty() || r.kernel_refused);
        if kept {
            let to = k.join(format!("{}-{}.img", case.seed, case.name()));
            copy_sparse(&img, &to)?;
            println!("    cut image kept: {}", to.display());
        }
    }
    res
}

/// Recovers the cut image `img` four ways (copies in `dir`) and compares.
fn judge_cut(
    bin: &OsString,
    dir: &Path,
    img: &Path,
    mnt: &Path,
    model: Model,
    ops: u64,
) -> Result<CaseResult> {
    let mut res = CaseResult {
        ops,
        ..CaseResult::default()
    };
    res.fc_records = fc_records(img).unwrap_or(0);
    let copy = |tag: &str| -> Result<PathBuf> {
        let p = dir.join(format!("{tag}.img"));
        copy_sparse(img, &p)?;
        Ok(p)
    };
    // The kernel.
    let mut k_img = copy("kernel")?;
    let mut kernel = tree_after_mount(&k_img, mnt)?;
    res.kernel_refused = kernel.is_none();
    let overrun = if kernel.is_none() {
        fc_overrun(img)?
    } else {
        None
    };
    if let Some(o) = &overrun {
        // jbd2 refuses this journal for reading one block past it (see
        // `Overrun`). On a copy whose area ends right after its valid
        // fast commits, its scan stops there and replays exactly those
        // commits: that replay stands for the kernel's.
        res.fc_overrun = Some(match (o.writes.is_empty(), o.widened) {
            (true, _) => "no copy it replays could be made, no reference",
            (false, false) => {
                "compared with its replay of a copy with the block after the valid commits zeroed"
            }
            (false, true) => {
                "compared with its replay of a copy with the area moved one block down, \
                 one block longer"
            }
        });
        if !o.writes.is_empty() {
            let z = copy("kernel-area-ended")?;
            let f = fs::OpenOptions::new().write(true).open(&z)?;
            for (at, bytes) in &o.writes {
                rustix::io::pwrite(&f, bytes, *at)?;
            }
            drop(f);
            kernel = tree_after_mount(&z, mnt)?;
            k_img = z;
            if kernel.is_none() {
                // The premise of `Overrun` does not hold: say so.
                res.failures.push(
                    "the kernel refused the copy whose fast-commit area ends after its \
                     valid commits too"
                        .into(),
                );
            }
        }
    }
    // No false alarm on what the kernel's replay leaves, where e2fsck
    // finds it clean.
    if kernel.is_some() && status(Command::new("e2fsck").arg("-fn").arg(&k_img))? == 0 {
        let ours = status(Command::new(bin).args(["fsck", "-fn"]).arg(&k_img))?;
        if ours != 0 {
            res.failures.push(format!(
                "false alarm: after the kernel's replay ext4r fsck -fn exit {ours}, e2fsck -fn 0"
            ));
        }
    }
    // Ours.
    let o_img = copy("ours")?;
    let fy = status(Command::new(bin).args(["fsck", "-fy"]).arg(&o_img))?;
    if fy != 0 && fy != 1 {
        res.failures.push(format!("ext4r fsck -fy exit {fy}"));
    }
    let e2 = status(Command::new("e2fsck").arg("-fn").arg(&o_img))?;
    if e2 != 0 {
        res.failures
            .push(format!("after ext4r fsck -fy: e2fsck -fn exit {e2}"));
    }
    let again = status(Command::new(bin).args(["fsck", "-fn"]).arg(&o_img))?;
    if again != 0 {
        res.failures
            .push(format!("after ext4r fsck -fy: ext4r fsck -fn exit {again}"));
    }
    let ours = tree_after_mount(&o_img, mnt)?.context("the kernel refused our recovered image")?;
    // e2fsck.
    let e_img = copy("e2fsck")?;
    status(Command::new("e2fsck").arg("-fy").arg(&e_img))?;
    let e2fsck = tree_after_mount(&e_img, mnt)?;
    // The library, reading the cut image itself.
    let before = fs::read(img)?;
    let out = dir.join("extract");
    let ex = Command::new(bin)
        .arg("extract")
        .arg(img)
        .arg(&out)
        .output()
        .context("ext4r extract")?;
    if !ex.status.success() {
        res.failures.push(format!(
            "ext4r extract exit {:?}: {}",
            ex.status.code(),
            String::from_utf8_lossy(&ex.stderr).trim()
        ));
    } else if fs::read(img)? != before {
        res.failures
            .push("ext4r extract changed the image it read".into());
    }
    let library = if ex.status.success() {
        Some(mounted_tree(&out)?)
    } else {
        None
    };
    // The reference: the kernel's tree, or e2fsck's where the kernel
    // refused the image. Not e2fsck's where the kernel refused it for
    // running off the fast-commit area: e2fsck 1.47 shares jbd2's
    // recovery.c, fails the same way ("JBD2: corrupted journal
    // superblock", "Journal corrupted") and then discards the whole
    // journal, committed transactions and all, so its tree is the
    // unreplayed image. Without a reference, ours is judged by the
    // checks above and the fsync'd files below.
    let reference = match (&kernel, &e2fsck) {
        (Some(k), _) => k.clone(),
        (None, _) if overrun.is_some() => ours.clone(),
        (None, Some(e)) => e.clone(),
        (None, None) => bail!("neither the kernel nor e2fsck's result mounts"),
    };
    let strict = kernel.is_some();
    let (d, beyond): (Vec<String>, Vec<String>) = diffs(&reference, &ours)
        .into_iter()
        .partition(|x| loses(x, strict));
    res.beyond_e2fsck
        .extend(beyond.iter().map(|x| format!("ours: {x}")));
    for x in &d {
        if x.contains("only in the first") || x.contains(" / ") {
            res.lost += 1;
        }
    }
    for x in d.iter().take(8) {
        res.failures.push(format!("ours vs kernel: {x}"));
    }
    if d.len() > 8 {
        res.failures
            .push(format!("ours vs kernel: {} more differences", d.len() - 8));
    }
    if let Some(lib) = &library {
        let mut lib = lite(lib);
        lib.remove("lost+found");
        let (d, beyond): (Vec<String>, Vec<String>) = diffs(&lite(&reference), &lib)
            .into_iter()
            .partition(|x| loses(x, strict));
        res.beyond_e2fsck
            .extend(beyond.iter().map(|x| format!("library: {x}")));
        for x in d.iter().take(8) {
            res.failures.push(format!("library vs kernel: {x}"));
        }
    }
    if let (Some(k), Some(e), None) = (&kernel, &e2fsck, &overrun) {
        res.e2fsck_differs = diffs(k, e);
    }
    for (p, h) in &model.synced {
        let found = ours.get(p).and_then(|d| {
            d.split(' ')
                .find_map(|w| w.strip_prefix("hash="))
                .map(String::from)
        });
        if found.as_deref() != Some(&format!("{h:x}")) {
            res.failures.push(format!(
                "{p}: fsync'd, but {}",
                found.map_or("missing".into(), |f| format!("hash {f}"))
            ));
            res.lost += 1;
        }
    }
    Ok(res)
}

/// A filesystem opened without replaying its journal, that journal, and
/// where it lies.
type Unreplayed = (
    ext4r::fs::Filesystem,
    ext4r::journal::Journal<std::sync::Arc<dyn ext4r::device::BlockDevice>>,
    ext4r::journal::JournalLocation,
);

/// The cut image opened without replaying its journal, and that journal;
/// `None` when the filesystem has no journal.
fn unreplayed(img: &Path) -> Result<Option<Unreplayed>> {
    use ext4r::device::{FileDevice, OpenMode};
    let dev = FileDevice::open(img, OpenMode::default())?;
    let mut o = ext4r::fs::OpenOptions::default();
    o.skip_journal_replay = true;
    let fs = ext4r::fs::Filesystem::open_with(dev, o)?;
    let Some(loc) = fs.journal_location()? else {
        return Ok(None);
    };
    let j = ext4r::journal::Journal::open(fs.device_shared(), loc.clone(), fs.block_size())?;
    Ok(Some((fs, j, loc)))
}

/// Records in the cut image's fast-commit area, by our own scan.
pub(crate) fn fc_records(img: &Path) -> Result<usize> {
    let Some((fs, j, _)) = unreplayed(img)? else {
        return Ok(0);
    };
    let r = j.recover(
        fs.geometry().blocks_count,
        fs.geometry().inode_size as usize,
    );
    Ok(r.fast_commit.map_or(0, |l| l.records.len()))
}

/// A fast-commit area that jbd2's recovery (the kernel's, and e2fsck
/// 1.47's copy of it) runs off. `fc_do_one_pass` (fs/jbd2/recovery.c)
/// reads blocks `j_fc_first..=j_fc_last` while the callback says
/// "continue", and `j_fc_last` is `s_maxlen`, one past the journal's last
/// block; `jbd2_fc_get_buf` (fs/jbd2/journal.c) only ever hands out
/// blocks below `j_fc_last`. `ext4_fc_replay_scan` (fs/ext4/fast_commit.c)
/// says "continue" for a block whose records all parse (each commit's
/// tail, or a pad, fills its last block). So when every block of the area
/// up to its last scans so, the next read is past the journal, `jread`
/// fails ("JBD2: corrupted journal superblock", EFSCORRUPTED) and the
/// whole recovery with it: the mount is refused. The writer gets there
/// whenever fast commits fill the area to its last block before the full
/// commit that resets it. ext4_fc_replay_scan's rule is that the records
/// up to the last tail with the expected transaction id and CRC are
/// replayed; that is what ext4r replays (the journal crate's scan ends at
/// the area's end).
pub(crate) struct Overrun {
    /// Writes (byte offset, bytes) that make a copy of the image one the
    /// kernel replays exactly as the area's valid fast commits say, or
    /// none when there is no such copy. When the block after the valid
    /// commits is in the area, it is zeroed: jbd2's scan stops there (a
    /// zero record after a valid commit; block 0 without a head means no
    /// fast commits). When the valid commits fill the area, the area is
    /// moved one block down into the unused block before it and made one
    /// block longer (`s_num_fc_blks` + 1) with its last block zeroed,
    /// which takes one block from the end of the log proper: only when
    /// the log does not wrap and ends before that block.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// The area was moved and made longer (the second way above).
    pub widened: bool,
}

/// Whether jbd2 would run off the cut image's fast-commit area (see
/// [`Overrun`]), by our own scan of it.
pub(crate) fn fc_overrun(img: &Path) -> Result<Option<Overrun>> {
    use ext4r_format::jbd2::fast_commit::{FastCommitScan, FcStep};
    let Some((fs, j, loc)) = unreplayed(img)? else {
        return Ok(None);
    };
    let jsb = j.superblock().clone();
    let fc = u64::from(jsb.num_fc_blocks());
    let maxlen = u64::from(jsb.s_maxlen.get());
    let start = u64::from(jsb.s_start.get());
    if fc < 2 || fc >= maxlen || start == 0 || fs.superblock().s_feature_incompat.get() & 0x4 == 0 {
        return Ok(None);
    }
    let inode_size = fs.geometry().inode_size as usize;
    let r = j.recover(fs.geometry().blocks_count, inode_size);
    if r.problem.is_some() {
        return Ok(None);
    }
    let bs = u64::from(fs.block_size());
    // jbd2's j_last (one past the log proper) and j_fc_first.
    let last = maxlen - fc;
    let first = last + 1;
    let at = |idx: u64| loc.device_block(idx).map(|b| b.0 * bs);
    let mut scan = FastCommitScan::new(r.end_transaction, inode_size);
    let mut area = Vec::new();
    for idx in first..maxlen {
        let Some(off) = at(idx) else {
            return Ok(None);
        };
        let mut buf = vec![0u8; bs as usize];
        fs.device().read_at(&mut buf, off)?;
        if scan.feed(&buf) != FcStep::Continue {
            return Ok(None);
        }
        area.push(buf);
    }
    // Every block said "continue": jbd2 reads block `maxlen` next.
    let after = r
        .fast_commit
        .as_ref()
        .and_then(|l| l.records.last())
        .map_or(0, |rec| u64::from(rec.block) + 1);
    let zero = vec![0u8; bs as usize];
    if first + after < maxlen {
        let writes = at(first + after).map(|o| (o, zero)).into_iter().collect();
        return Ok(Some(Overrun {
            writes,
            widened: false,
        }));
    }
    // The valid commits fill the area. The log proper loses its last
    // block (`last - 1`) to the widened area's gap: the log must neither
    // wrap nor reach it (its scan reads the block at `log_head`).
    let mut writes = Vec::new();
    // jbd2 wants a log of at least JBD2_MIN_JOURNAL_BLOCKS (1024) beside
    // the area (journal_check_superblock).
    let fits = r.log_head >= start && r.log_head + 1 < last && maxlen - fc > 1024;
    let jsb_at = at(0);
    if let (true, Some(jsb_at)) = (fits, jsb_at) {
        for (k, b) in area.into_iter().enumerate() {
            if let Some(o) = at(last + k as u64) {
                writes.push((o, b));
            }
        }
        if let Some(o) = at(maxlen - 1) {
            writes.push((o, zero));
        }
        let mut wider = jsb;
        wider.s_num_fc_blks.set(fc as u32 + 1);
        wider.update_checksum();
        writes.push((jsb_at, wider.to_bytes().to_vec()));
        if writes.len() as u64 != fc + 1 {
            writes.clear();
        }
    }
    Ok(Some(Overrun {
        widened: !writes.is_empty(),
        writes,
    }))
}

/// Whether the cut image's fast-commit area starts with a head that the
/// scan finds stale (its transaction committed since): e2fsck 1.47 fails
/// its whole recovery on such an area ("Invalid argument while recovering
/// journal"), which the kernel leaves after any full commit that follows
/// fast commits.
pub(crate) fn stale_fc_head(img: &Path) -> Result<bool> {
    if fc_records(img)? > 0 {
        return Ok(false);
    }
    let Some((fs, j, loc)) = unreplayed(img)? else {
        return Ok(false);
    };
    let sb = j.superblock();
    let fc = u64::from(sb.num_fc_blocks());
    if fc == 0 || fs.superblock().s_feature_incompat.get() & 0x4 == 0 {
        return Ok(false);
    }
    // The area's first block; an area as long as the journal is nonsense.
    let Some(b) = u64::from(sb.s_maxlen.get())
        .checked_sub(fc)
        .and_then(|l| loc.device_block(l + 1))
    else {
        return Ok(false);
    };
    let mut head = [0u8; 2];
    fs.device()
        .read_at(&mut head, b.0 * u64::from(fs.block_size()))?;
    Ok(u16::from_le_bytes(head) == ext4r_format::jbd2::fast_commit::tag::HEAD)
}

#[cfg(test)]
mod tests {
    use super::{fc_overrun, loses};
    use ext4r::device::{BlockDevice, MemDevice};
    use ext4r_format::jbd2::fast_commit::{tag, FcWriter};
    use ext4r_format::jbd2::{JournalIncompat, JournalSuperblock, JOURNAL_SUPERBLOCK_SIZE};
    use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
    use std::path::Path;

    const BS: u64 = 4096;
    const TID: u32 = 40;

    /// Saves to `img` a fresh fast_commit filesystem whose journal needs
    /// recovery with an empty log (next transaction `TID`) and whose
    /// fast-commit area holds what `area` makes for its length in blocks.
    /// Returns the byte offset of each area block in the image.
    fn armed(img: &Path, area: impl Fn(usize) -> Vec<Vec<u8>>) -> Vec<u64> {
        let dev = MemDevice::new(64 << 20);
        let opts = ext4r::mkfs::MkfsOptions {
            size_bytes: 64 << 20,
            now: 1_700_000_000,
            block_size: Some(BS as u32),
            features: vec!["fast_commit".into()],
            // Room for a log of jbd2's least 1024 blocks beside an area
            // one block longer.
            journal_size_mib: Some(16),
            ..Default::default()
        };
        ext4r::mkfs::format(&dev, &opts, true).unwrap();
        let fs = ext4r::fs::Filesystem::open(dev.snapshot()).unwrap();
        let loc = fs.journal_location().unwrap().unwrap();
        drop(fs);
        let jsb_at = loc.device_block(0).unwrap().0 * BS;
        let mut raw = [0u8; JOURNAL_SUPERBLOCK_SIZE];
        dev.read_at(&mut raw, jsb_at).unwrap();
        let mut jsb = JournalSuperblock::parse(&raw).unwrap();
        jsb.s_feature_incompat
            .set(jsb.s_feature_incompat.get() | JournalIncompat::FAST_COMMIT.bits());
        jsb.s_start.set(jsb.s_first.get());
        jsb.s_sequence.set(TID);
        dev.write_at(&jsb.to_bytes(), jsb_at).unwrap();
        let log = loc.device_block(u64::from(jsb.s_first.get())).unwrap();
        dev.write_at(&vec![0u8; BS as usize], log.0 * BS).unwrap();
        let maxlen = u64::from(jsb.s_maxlen.get());
        let first = maxlen - u64::from(jsb.num_fc_blocks()) + 1;
        let offsets: Vec<u64> = (first..maxlen)
            .map(|i| loc.device_block(i).unwrap().0 * BS)
            .collect();
        for (b, at) in area(offsets.len()).iter().zip(&offsets) {
            dev.write_at(b, *at).unwrap();
        }
        let mut raw = [0u8; SUPERBLOCK_SIZE];
        dev.read_at(&mut raw, SUPERBLOCK_OFFSET).unwrap();
        let mut sb = Superblock::parse(&raw).unwrap();
        sb.s_feature_incompat
            .set(sb.s_feature_incompat.get() | ext4r_format::features::Incompat::RECOVER.bits());
        ext4r_txn::csum::Checksums::stamp_superblock(&mut sb);
        dev.write_at(&sb.to_bytes(), SUPERBLOCK_OFFSET).unwrap();
        dev.save(img).unwrap();
        offsets
    }

    /// `n` one-block fast commits (the first with the area's head), each
    /// tail filling its block, as the kernel writes them.
    fn commits(n: usize) -> Vec<Vec<u8>> {
        let mut w = FcWriter::new(BS as usize, TID);
        for _ in 0..n {
            w.record(tag::PAD, &[0u8; 16]);
            w.tail(TID);
        }
        w.finish()
    }

    /// A block of a commit cut before its tail: records that all parse
    /// (a pad filling the block), which jbd2's scan reads past.
    fn untailed() -> Vec<u8> {
        let mut b = vec![0u8; BS as usize];
        b[..2].copy_from_slice(&tag::PAD.to_le_bytes());
        b[2..4].copy_from_slice(&(BS as u16 - 4).to_le_bytes());
        b
    }

    fn apply(img: &Path, writes: &[(u64, Vec<u8>)]) {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
        for (at, b) in writes {
            f.write_all_at(b, *at).unwrap();
        }
    }

    /// The fast-commit records our recovery of `img` would replay (tag
    /// and value), and the area blocks its scan read.
    fn replayed(img: &Path) -> (Vec<(u16, Vec<u8>)>, u32) {
        use ext4r::device::{FileDevice, OpenMode};
        let mut o = ext4r::fs::OpenOptions::default();
        o.skip_journal_replay = true;
        let dev = FileDevice::open(img, OpenMode::default()).unwrap();
        let fs = ext4r::fs::Filesystem::open_with(dev, o).unwrap();
        let loc = fs.journal_location().unwrap().unwrap();
        let j = ext4r::journal::Journal::open(fs.device_shared(), loc, fs.block_size()).unwrap();
        let r = j.recover(
            fs.geometry().blocks_count,
            fs.geometry().inode_size as usize,
        );
        assert!(r.problem.is_none(), "{:?}", r.problem);
        let log = r.fast_commit.unwrap_or_default();
        (
            log.records
                .iter()
                .map(|r| (r.tag, r.value.clone()))
                .collect(),
            log.blocks_read,
        )
    }

    #[test]
    fn a_fast_commit_area_jbd2_runs_off_is_told_apart() {
        let dir = crate::util::TempDir::new_in(&std::env::temp_dir(), "fc-overrun-").unwrap();
        let img = dir.path().join("img");

        // Commits up to the area's last block but one, and an untailed
        // commit in the last (the image CI caught): jbd2 reads past the
        // journal. Zeroing the last block ends the scan there, and then
        // nothing runs off.
        let offsets = armed(&img, |n| {
            let mut v = commits(n - 1);
            v.push(untailed());
            v
        });
        let o = fc_overrun(&img).unwrap().expect("runs off");
        assert!(!o.widened);
        assert_eq!(
            o.writes,
            [(offsets[offsets.len() - 1], vec![0u8; BS as usize])]
        );
        let before = replayed(&img);
        apply(&img, &o.writes);
        assert!(fc_overrun(&img).unwrap().is_none());
        assert_eq!(replayed(&img), before);

        // Valid commits in every block: the area moves one block down and
        // grows by one, its last block zero; the same records replayed.
        let offsets = armed(&img, commits);
        let before = replayed(&img);
        assert_eq!(before.1, offsets.len() as u32);
        let o = fc_overrun(&img).unwrap().expect("runs off");
        assert!(o.widened);
        assert_eq!(o.writes.len(), offsets.len() + 2);
        apply(&img, &o.writes);
        assert!(fc_overrun(&img).unwrap().is_none());
        let after = replayed(&img);
        assert_eq!(after.0, before.0);
        assert!(after.1 > before.1, "the scan now reads the zero block too");

        // No complete commit at all, the area full of records: block 0 is
        // the one to zero (no head, no fast commits, as what is replayed).
        let offsets = armed(&img, |n| {
            let mut w = FcWriter::new(BS as usize, TID);
            w.record(tag::PAD, &[0u8; 16]);
            let mut v = w.finish();
            v[0] = untailed();
            v[0][..2].copy_from_slice(&tag::HEAD.to_le_bytes());
            v[0][2..4].copy_from_slice(&8u16.to_le_bytes());
            v[0][8..12].copy_from_slice(&TID.to_le_bytes());
            v[0][12..14].copy_from_slice(&tag::PAD.to_le_bytes());
            v[0][14..16].copy_from_slice(&(BS as u16 - 16).to_le_bytes());
            v[0][16..].fill(0);
            v.extend((1..n).map(|_| untailed()));
            v
        });
        let o = fc_overrun(&img).unwrap().expect("runs off");
        assert_eq!(o.writes, [(offsets[0], vec![0u8; BS as usize])]);

        // Commits that end before the area does: the scan stops on the
        // zeros after them, as the kernel's does.
        armed(&img, |_| commits(3));
        assert!(fc_overrun(&img).unwrap().is_none());
    }

    #[test]
    fn against_e2fsck_only_lost_names_and_other_contents_count() {
        let only_ref = "d/f: only in the first (mode=100644 size=3 hash=ab)";
        let only_ours = "e/f1: only in the second (mode=100644 size=3 hash=ab)";
        let links = "d/s/f3: mode=100644 nlink=1 mtime=5.0 size=9 hash=cd / mode=100644 nlink=2 mtime=5.0 size=9 hash=cd";
        let data =
            "e/f14: mode=100644 nlink=1 size=26 hash=c3 / mode=100644 nlink=1 size=68608 hash=e9";
        for x in [only_ref, only_ours, links, data] {
            // The kernel's own replay is the reference: every difference.
            assert!(loses(x, true), "{x}");
        }
        assert!(loses(only_ref, false));
        assert!(!loses(only_ours, false));
        assert!(!loses(links, false));
        assert!(loses(data, false));
    }
}
