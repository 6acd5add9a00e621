//! Journal recovery against e2fsck 1.47: journals written by `debugfs`
//! (every checksum version, 64bit and not, 1 KiB and 4 KiB blocks, ext3,
//! revokes, escaped blocks, uncommitted transactions, a wrapped log) are
//! replayed by `e2fsck -y -E journal_only` on one copy and by
//! `recover_filesystem` on another; the images must be byte-identical.
//!
//! Two superblock fields are made deterministic first: `s_kbytes_written`
//! is zeroed (e2fsck only accounts its own writes when it is non-zero) and
//! `s_wtime` is set by us to the `E2FSCK_TIME` e2fsck is given (every
//! superblock write of libext2fs stamps it; our library leaves it to the
//! writer).
//!
//! A second test does the same with journals the kernel leaves (a mounted
//! filesystem copied after a commit, before the checkpoint).
//!
//! Skipped, with a message, when e2fsprogs (or, for the kernel test, root)
//! is missing.

mod common;

use common::*;
use ext4r::device::BlockDevice;
use ext4r::journal::{recover_filesystem, Journal, JournalLocation};
use ext4r_format::jbd2::{JournalSuperblock, JBD2_MAGIC};
use ext4r_format::BlockNr;
use std::path::Path;

/// One debugfs-made journal.
struct Case {
    name: &'static str,
    mkfs: &'static [&'static str],
    size: &'static str,
    open: &'static str,
    /// Move the log so that it wraps round the end of the journal.
    rotate: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "ext4 4k csum v3",
        mkfs: &["-t", "ext4", "-b", "4096"],
        size: "64M",
        open: "jo -c",
        rotate: false,
    },
    Case {
        name: "ext4 4k no csum",
        mkfs: &["-t", "ext4", "-b", "4096"],
        size: "64M",
        open: "jo",
        rotate: false,
    },
    Case {
        name: "ext4 4k csum v2 ^64bit",
        mkfs: &["-t", "ext4", "-b", "4096", "-O", "^64bit"],
        size: "64M",
        open: "jo -c -v 2",
        rotate: false,
    },
    Case {
        name: "ext4 4k csum v1",
        mkfs: &["-t", "ext4", "-b", "4096", "-O", "^metadata_csum"],
        size: "64M",
        open: "jo -c",
        rotate: false,
    },
    Case {
        name: "ext4 4k ^64bit no csum",
        mkfs: &["-t", "ext4", "-b", "4096", "-O", "^metadata_csum,^64bit"],
        size: "64M",
        open: "jo",
        rotate: false,
    },
    Case {
        name: "ext4 1k csum v3",
        mkfs: &["-t", "ext4", "-b", "1024"],
        size: "32M",
        open: "jo -c",
        rotate: false,
    },
    Case {
        name: "ext4 1k csum v2 64bit",
        mkfs: &["-t", "ext4", "-b", "1024"],
        size: "32M",
        open: "jo -c -v 2",
        rotate: false,
    },
    Case {
        name: "ext3 4k",
        mkfs: &["-t", "ext3", "-b", "4096"],
        size: "64M",
        open: "jo",
        rotate: false,
    },
    Case {
        name: "ext3 1k csum v1",
        mkfs: &["-t", "ext3", "-b", "1024"],
        size: "32M",
        open: "jo -c",
        rotate: false,
    },
    Case {
        name: "ext4 1k csum v3 wrapped",
        mkfs: &["-t", "ext4", "-b", "1024"],
        size: "32M",
        open: "jo -c",
        rotate: true,
    },
    Case {
        name: "ext4 4k csum v1 wrapped",
        mkfs: &["-t", "ext4", "-b", "4096", "-O", "^metadata_csum"],
        size: "64M",
        open: "jo -c",
        rotate: true,
    },
    Case {
        name: "ext3 1k no csum wrapped",
        mkfs: &["-t", "ext3", "-b", "1024"],
        size: "32M",
        open: "jo",
        rotate: true,
    },
];

const NOW: &str = "1700000000";

#[test]
fn debugfs_journals_replay_like_e2fsck() {
    if let Some(why) = missing_tools(&["mke2fs", "debugfs", "e2fsck"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = TempDir::new("jr-oracle");
    let mut same = 0;
    let mut report = Vec::new();
    for case in CASES {
        match run_case(&dir, case) {
            Ok(()) => same += 1,
            Err(e) => report.push(format!("{}: {e}", case.name)),
        }
    }
    eprintln!(
        "{same}/{} debugfs-made journals byte-identical to e2fsck's replay",
        CASES.len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
}

fn run_case(dir: &TempDir, case: &Case) -> Result<(), String> {
    let tag = case.name.replace(' ', "_");
    let img = dir.join(&format!("{tag}.img"));
    let img_s = img.to_str().ok_or("path")?;
    let mut args = vec!["-q", "-F"];
    args.extend_from_slice(case.mkfs);
    args.extend_from_slice(&[img_s, case.size]);
    run("mke2fs", &args, &[])?;
    let sb = read_sb(&img)?;
    let bs = sb.block_size().ok_or("block size")?;
    let journal = journal_blocks(&img)?;
    // Targets at the end of the filesystem, clear of the journal.
    let top = sb.blocks_count() - 400;
    let t = |k: u64| top + k;
    for k in 0..40 {
        if journal.contains(&BlockNr(t(k))) {
            return Err(format!("target {} is in the journal", t(k)));
        }
    }
    let files: Vec<String> = (0..3u8)
        .map(|n| {
            let p = dir.join(&format!("{tag}.data{n}"));
            let mut data = Vec::new();
            for k in 0..16u8 {
                let mut b = vec![n.wrapping_mul(40).wrapping_add(k); bs as usize];
                b[100] = k;
                if k == 2 {
                    // A block that starts with the jbd2 magic must be escaped.
                    b[..4].copy_from_slice(&JBD2_MAGIC.to_be_bytes());
                }
                data.extend_from_slice(&b);
            }
            std::fs::write(&p, data).map(|()| p.to_string_lossy().into_owned())
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let script = format!(
        "{open}\n\
         jw -b {a},{b},{c} {f0}\n\
         jw -b {d}-{e} {f1}\n\
         jw -r {b}\n\
         jw -b {c},{g} {f2}\n\
         jw -r {d},{h}\n\
         jw -b {h},{i} {f0}\n\
         jw -b {j} -c {f1}\n\
         jc\n",
        open = case.open,
        a = t(0),
        b = t(1),
        c = t(2),
        d = t(3),
        e = t(8),
        g = t(9),
        h = t(10),
        i = t(11),
        j = t(12),
        f0 = files[0],
        f1 = files[1],
        f2 = files[2],
    );
    let cmds = dir.join(&format!("{tag}.cmds"));
    std::fs::write(&cmds, script).map_err(|e| e.to_string())?;
    run(
        "debugfs",
        &["-w", "-f", cmds.to_str().ok_or("path")?, img_s],
        &[],
    )?;
    if case.rotate {
        rotate_log(&img, &journal, bs)?;
    }
    zero_kbytes_written(&img)?;

    let a = dir.join(&format!("{tag}.e2fsck"));
    let b = dir.join(&format!("{tag}.ours"));
    copy_sparse(&img, &a).map_err(|e| e.to_string())?;
    copy_sparse(&img, &b).map_err(|e| e.to_string())?;
    let (code, out) = e2fsck_replay(&a)?;
    let rec = our_replay(&b, &journal, bs)?;
    if rec.plan.is_empty() {
        return Err("nothing replayed".into());
    }
    eprintln!(
        "{}: {} blocks, transactions {}..{}, failed commit {:?}",
        case.name,
        rec.plan.len(),
        rec.start_transaction,
        rec.end_transaction,
        rec.failed_commit
    );
    compare_images(&a, &b, bs).map_err(|e| {
        format!(
            "{e}\n  ours: {:?}\n  e2fsck (exit {code}): {out}",
            rec.plan.iter().map(|(b, _)| b.0).collect::<Vec<_>>()
        )
    })
}

/// Replays with the library, as the fsck caller would, stamping `s_wtime`.
fn our_replay(
    img: &Path,
    journal: &[BlockNr],
    bs: u32,
) -> Result<ext4r::journal::Recovery, String> {
    let dev = open_rw(img)?;
    let j = Journal::open(&dev, JournalLocation::internal(journal.to_vec()), bs)
        .map_err(|e| e.to_string())?;
    let rec = recover_filesystem(&dev, &j).map_err(|e| e.to_string())?;
    if let Some(p) = &rec.problem {
        return Err(format!("recovery problem: {p}"));
    }
    drop(j);
    drop(dev);
    stamp_wtime(img, NOW.parse().map_err(|_| "time")?)?;
    Ok(rec)
}

/// Moves the log (from `s_first`) so that it starts a few blocks before
/// the end of the journal and wraps, as a long-running journal does.
fn rotate_log(img: &Path, journal: &[BlockNr], bs: u32) -> Result<(), String> {
    let dev = open_rw(img)?;
    let rd = |jb: u64| -> Result<Vec<u8>, String> {
        let mut b = vec![0u8; bs as usize];
        dev.read_at(&mut b, journal[jb as usize].0 * u64::from(bs))
            .map_err(|e| e.to_string())?;
        Ok(b)
    };
    let mut sbb = rd(0)?;
    let mut jsb = JournalSuperblock::parse(&sbb).map_err(|e| e.to_string())?;
    let (first, last) = (u64::from(jsb.s_first.get()), u64::from(jsb.s_maxlen.get()));
    if jsb.s_start.get() as u64 != first {
        return Err("log does not start at s_first".into());
    }
    let used = 40u64;
    let start = last - 7;
    let blocks: Vec<Vec<u8>> = (0..used).map(|i| rd(first + i)).collect::<Result<_, _>>()?;
    for i in 0..used {
        dev.write_at(
            &vec![0u8; bs as usize],
            journal[(first + i) as usize].0 * u64::from(bs),
        )
        .map_err(|e| e.to_string())?;
    }
    for (i, b) in blocks.iter().enumerate() {
        let mut at = start + i as u64;
        if at >= last {
            at = at - last + first;
        }
        dev.write_at(b, journal[at as usize].0 * u64::from(bs))
            .map_err(|e| e.to_string())?;
    }
    jsb.s_start.set(start as u32);
    jsb.update_checksum();
    sbb[..1024].copy_from_slice(&jsb.to_bytes());
    dev.write_at(&sbb, journal[0].0 * u64::from(bs))
        .map_err(|e| e.to_string())
}

/// A loop device attached to an image and mounted; unmounted and detached
/// on drop, also when the test fails.
struct Mounted {
    dev: String,
    dir: std::path::PathBuf,
}

impl Mounted {
    fn new(img: &Path, dir: &Path, opts: &str) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let dev = run(
            "losetup",
            &["-f", "--show", img.to_str().ok_or("path")?],
            &[],
        )?
        .trim()
        .to_string();
        let m = Mounted {
            dev,
            dir: dir.to_path_buf(),
        };
        run(
            "mount",
            &["-o", opts, &m.dev, m.dir.to_str().ok_or("path")?],
            &[],
        )?;
        Ok(m)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = run("umount", &[self.dir.to_str().unwrap_or("")], &[]);
        let _ = run("losetup", &["-d", &self.dev], &[]);
    }
}

/// Journals the kernel leaves: a mounted filesystem is written to, its
/// journal committed, and the image file copied while still mounted
/// (before the kernel checkpoints), which is what a power cut leaves.
/// Each copy is replayed by e2fsck and by us; the results must be equal.
#[test]
fn kernel_journals_replay_like_e2fsck() {
    if let Some(why) = missing_tools(&["mke2fs", "e2fsck", "losetup", "mount"]) {
        eprintln!("skipped: {why}");
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: loop mounts need root");
        return;
    }
    let dir = TempDir::new("jr-kernel");
    let cases: &[(&str, &[&str], &str)] = &[
        ("ext4 4k", &["-t", "ext4", "-b", "4096"], "commit=1"),
        ("ext4 1k", &["-t", "ext4", "-b", "1024"], "commit=1"),
        (
            "ext4 ^metadata_csum",
            &["-t", "ext4", "-O", "^metadata_csum"],
            "commit=1",
        ),
        (
            "ext3 data=journal",
            &["-t", "ext3"],
            "commit=1,data=journal",
        ),
    ];
    let (mut same, mut report) = (0, Vec::new());
    for (name, mkfs, opts) in cases {
        match kernel_case(&dir, name, mkfs, opts) {
            Ok(()) => same += 1,
            Err(e) => report.push(format!("{name}: {e}")),
        }
    }
    eprintln!(
        "{same}/{} kernel-left journals byte-identical to e2fsck's replay",
        cases.len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
}

fn kernel_case(dir: &TempDir, name: &str, mkfs: &[&str], opts: &str) -> Result<(), String> {
    let tag = name.replace([' ', '=', '^'], "_");
    let img = dir.join(&format!("{tag}.img"));
    let img_s = img.to_str().ok_or("path")?;
    let mut args = vec!["-q", "-F"];
    args.extend_from_slice(mkfs);
    args.extend_from_slice(&[img_s, "64M"]);
    run("mke2fs", &args, &[])?;
    let mnt = dir.join(&format!("{tag}.mnt"));
    let snap = dir.join(&format!("{tag}.snap"));
    {
        let m = Mounted::new(&img, &mnt, opts)?;
        let root = &m.dir;
        for d in 0..8 {
            let sub = root.join(format!("d{d}"));
            std::fs::create_dir(&sub).map_err(|e| e.to_string())?;
            for f in 0..60 {
                let data = vec![(d * 60 + f) as u8; 100 + 517 * f];
                std::fs::write(sub.join(format!("file-{f}")), data).map_err(|e| e.to_string())?;
            }
        }
        // Deletions leave revoke records in the journal.
        for d in 0..4 {
            std::fs::remove_dir_all(root.join(format!("d{d}"))).map_err(|e| e.to_string())?;
        }
        std::fs::rename(root.join("d5"), root.join("renamed")).map_err(|e| e.to_string())?;
        // Let jbd2 commit (commit=1), but copy before writeback and the
        // checkpoint bring the final locations up to date.
        std::thread::sleep(std::time::Duration::from_millis(2500));
        copy_sparse(&img, &snap).map_err(|e| e.to_string())?;
    }
    let sb = read_sb(&snap)?;
    if !sb.has_incompat(ext4r_format::features::Incompat::RECOVER) {
        return Err("the copy's journal needs no recovery: nothing to compare".into());
    }
    let bs = sb.block_size().ok_or("block size")?;
    let journal = journal_blocks(&snap)?;
    zero_kbytes_written(&snap)?;
    let a = dir.join(&format!("{tag}.e2fsck"));
    let b = dir.join(&format!("{tag}.ours"));
    copy_sparse(&snap, &a).map_err(|e| e.to_string())?;
    copy_sparse(&snap, &b).map_err(|e| e.to_string())?;
    let (code, out) = e2fsck_replay(&a)?;
    let rec = our_replay(&b, &journal, bs)?;
    eprintln!(
        "{name}: {} blocks, transactions {}..{}",
        rec.plan.len(),
        rec.start_transaction,
        rec.end_transaction
    );
    compare_images(&a, &b, bs).map_err(|e| format!("{e}\n  e2fsck (exit {code}): {out}"))
}
