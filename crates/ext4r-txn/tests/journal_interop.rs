//! Transactions our writer committed to the journal but did not write home
//! are replayed by `e2fsck -fy`, by a kernel mount and by our own recovery
//! to the same filesystem.
#![allow(clippy::unwrap_used)]

use ext4r_txn::device::{FileDevice, OpenMode};
use ext4r_txn::testutil::{copy_sparse, loop_unavailable, run, tool, LoopDev, Mount, TempDir};
use ext4r_txn::txn::Commit;
use ext4r_txn::volume::{Checkpoint, Volume, VolumeOptions};
use std::path::Path;
use std::sync::Arc;

fn mke2fs(img: &Path, args: &[&str], size: &str) -> bool {
    if tool("mke2fs").is_none() || tool("e2fsck").is_none() {
        eprintln!("skipped: e2fsprogs not found");
        return false;
    }
    let img = img.to_str().unwrap();
    let mut a = vec!["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"];
    a.extend_from_slice(args);
    a.extend_from_slice(&[img, size]);
    run("mke2fs", &a).unwrap();
    true
}

fn open(img: &Path, checkpoint: Checkpoint, recover: bool) -> Volume {
    let dev = FileDevice::open(
        img,
        OpenMode {
            write: true,
            ..Default::default()
        },
    )
    .unwrap();
    let mut o = VolumeOptions::default();
    o.checkpoint = checkpoint;
    o.now = Some(1_700_000_000);
    o.recover = recover;
    Volume::open(Arc::new(dev), o).unwrap()
}

/// Changes that keep the filesystem consistent: the label, the root
/// directory's times, and blocks taken and given back in one transaction
/// (their bitmap block is logged unchanged).
fn workload(vol: &mut Volume, rounds: u32) -> Vec<u32> {
    let mut seqs = Vec::new();
    for r in 0..rounds {
        let mut t = vol.begin();
        let label = format!("round-{r}");
        let sb = t.superblock_mut();
        sb.s_volume_name = [0; 16];
        sb.s_volume_name[..label.len()].copy_from_slice(label.as_bytes());
        let root = t.inode_mut(2).unwrap();
        // i_atime and i_mtime.
        root[8..12].copy_from_slice(&(1_000_000 + r).to_le_bytes());
        root[16..20].copy_from_slice(&(2_000_000 + r).to_le_bytes());
        let (s, n) = t.alloc_run(0, 8 + u64::from(r)).unwrap().unwrap();
        t.free_blocks(s, n).unwrap();
        seqs.push(t.commit(Commit::Auto).unwrap().sequence.unwrap());
    }
    seqs
}

fn e2fsck(img: &Path, args: &str) -> i32 {
    std::process::Command::new(tool("e2fsck").unwrap())
        .args(args.split(' '))
        .arg(img)
        .output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}

fn label(img: &Path) -> String {
    let out = run("dumpe2fs", &["-h", img.to_str().unwrap()]).unwrap();
    out.lines()
        .find_map(|l| l.strip_prefix("Filesystem volume name:"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn committed_transactions_replay_the_same_everywhere() {
    for (name, args, size) in [
        ("ext4", &["-t", "ext4"][..], "64M"),
        (
            "ext4-1k-nocsum",
            &["-t", "ext4", "-b", "1024", "-O", "^metadata_csum"][..],
            "32M",
        ),
        ("ext3", &["-t", "ext3"][..], "32M"),
        (
            "ext4-64bit-4k",
            &["-t", "ext4", "-O", "64bit", "-b", "4096"][..],
            "128M",
        ),
    ] {
        let dir = TempDir::new("jinterop");
        let img = dir.join("a.img");
        if !mke2fs(&img, args, size) {
            return;
        }
        let mut vol = open(&img, Checkpoint::Deferred, false);
        let seqs = workload(&mut vol, 5);
        assert_eq!(seqs.len(), 5);
        // Left uncheckpointed: the "crash" is dropping the volume.
        drop(vol);
        assert_eq!(label(&img), "<none>", "{name}: nothing written home yet");
        let twins: Vec<_> = ["e2fsck", "ours", "kernel"]
            .iter()
            .map(|t| {
                let p = dir.join(&format!("{t}.img"));
                copy_sparse(&img, &p).unwrap();
                p
            })
            .collect();
        // e2fsck's replay (-fy: replay, then a full check must find nothing
        // else: exit 1 for the replay's own changes at most).
        let code = e2fsck(&twins[0], "-fy");
        assert!(code <= 1, "{name}: e2fsck -fy exit {code}");
        assert_eq!(
            e2fsck(&twins[0], "-fn"),
            0,
            "{name}: e2fsck -fn after its replay"
        );
        assert_eq!(label(&twins[0]), "round-4", "{name}");
        // Ours.
        drop(open(&twins[1], Checkpoint::EachCommit, true));
        assert_eq!(
            e2fsck(&twins[1], "-fn"),
            0,
            "{name}: e2fsck -fn after our replay"
        );
        assert_eq!(label(&twins[1]), "round-4", "{name}");
        // The kernel's.
        if let Some(why) = loop_unavailable() {
            eprintln!("kernel replay skipped: {why}");
        } else {
            let ld = LoopDev::attach(&twins[2]).unwrap();
            let mnt = dir.join("mnt");
            let m = Mount::new(&ld.0, &mnt).unwrap();
            drop(m);
            drop(ld);
            assert_eq!(
                e2fsck(&twins[2], "-fn"),
                0,
                "{name}: e2fsck -fn after the kernel's replay"
            );
            assert_eq!(label(&twins[2]), "round-4", "{name}");
        }
        // The replays wrote the same blocks home: the images differ at most
        // in the primary superblock and the journal superblock, which each
        // tool stamps with its own times, counters and sequence.
        let a = std::fs::read(&twins[0]).unwrap();
        for other in &twins[1..] {
            let b = std::fs::read(other).unwrap();
            assert_eq!(a.len(), b.len());
            let diff: Vec<usize> = (0..a.len() / 1024)
                .filter(|&k| a[k * 1024..(k + 1) * 1024] != b[k * 1024..(k + 1) * 1024])
                .collect();
            assert!(
                diff.len() <= 2,
                "{name}: {} differs from e2fsck's replay in 1 KiB chunks {diff:?}",
                other.display()
            );
        }
        eprintln!("{name}: replayed alike by e2fsck, ours and the kernel");
    }
}
