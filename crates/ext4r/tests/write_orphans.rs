//! Files of more runs than one transaction frees are deleted and shortened
//! over several transactions through the orphan list. A power cut at any
//! write of that leaves a filesystem that each of our open, `e2fsck -fy`
//! and a kernel mount brings to the state before the operation or after
//! it (the name gone and every block free, or the size set and the blocks
//! past it free), e2fsck-clean.
#![allow(clippy::unwrap_used)]

mod common;

use common::{copy_sparse, missing_tools, run, TempDir};
use ext4r::device::{apply_cut, covers_superblock, Cut, MemDevice, Recorder};
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use ext4r_txn::testutil::{loop_unavailable, LoopDev, Mount};
use std::path::Path;
use std::sync::Arc;

const PIECES: u64 = 300;
/// Extent-tree blocks a finished truncate may keep (see the truncate check).
const TREE_SLACK: u64 = 2;

fn options(sync: bool) -> WriteOptions {
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_000, 0));
    o.sync_every_op = sync;
    o
}

/// An image with `/frag`: one 512-byte piece in every other block.
fn fragmented(dir: &TempDir, mkfs: &str) -> (MemDevice, u64) {
    let img = dir.join("base.img");
    let mut args = vec!["-q", "-F"];
    args.extend(mkfs.split_whitespace());
    args.extend([img.to_str().unwrap(), "64M"]);
    run("mke2fs", &args, &[("E2FSPROGS_FAKE_TIME", "1700000000")]).unwrap();
    let dev = Arc::new(MemDevice::from_bytes(&std::fs::read(&img).unwrap()));
    let mut fs = WriteFs::open(dev.clone(), options(false)).unwrap();
    let free_before = fs.free_blocks();
    let f = fs.create(ROOT_INO, b"frag", &NewNode::file(0o644)).unwrap();
    let bs = fs.block_size();
    for k in 0..PIECES {
        fs.write(f, k * 2 * bs, &[k as u8 | 1; 512]).unwrap();
    }
    fs.close().unwrap();
    (dev.snapshot(), free_before)
}

/// The free blocks and whether `/frag` is there, and its size.
fn look(img: &Path) -> (u64, Option<u64>) {
    let fs =
        ext4r::fs::Filesystem::open(MemDevice::from_bytes(&std::fs::read(img).unwrap())).unwrap();
    let free = fs.superblock().free_blocks_count();
    let size = fs.resolve("/frag").ok().map(|i| i.inode.size());
    (free, size)
}

fn clean(img: &Path, what: &str) {
    let (code, out, _) =
        common::run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[]).unwrap();
    assert_eq!(code, 0, "{what}: e2fsck -fn:\n{out}");
}

/// Recovers a cut image. A torn primary superblock no open or mount
/// accepts (the kernel's own writes of it tear alike): those must refuse
/// it, and e2fsck then repairs it from a backup.
fn recover(who: &str, img: &Path, dir: &TempDir, what: &str, torn_sb: bool) {
    let e2fsck = || {
        let (code, out, _) =
            common::run_status("e2fsck", &["-fy", img.to_str().unwrap()], &[]).unwrap();
        assert!(code <= 1, "{what}: e2fsck -fy exit {code}:\n{out}");
    };
    match who {
        "ours" => match WriteFs::open_path(img, options(false)) {
            Ok(fs) => fs.close().unwrap(),
            Err(e) if torn_sb => {
                e2fsck();
                WriteFs::open_path(img, options(false))
                    .unwrap_or_else(|e2| panic!("{what}: {e2} (first {e})"))
                    .close()
                    .unwrap();
            }
            Err(e) => panic!("{what}: our open: {e}"),
        },
        "e2fsck" => e2fsck(),
        _ => {
            let lo = LoopDev::attach(img).unwrap();
            let mut m = Mount::new(&lo.0, &dir.join("mnt"));
            if m.is_err() && torn_sb {
                drop(lo);
                e2fsck();
                let lo = LoopDev::attach(img).unwrap();
                m = Mount::new(&lo.0, &dir.join("mnt"));
                drop(m);
                return;
            }
            if let Err(e) = m {
                let keep = std::env::temp_dir().join("ext4r-orphan-failed.img");
                let _ = copy_sparse(img, &keep);
                panic!("{what}: {e} (image kept as {})", keep.display());
            }
        }
    }
}

#[test]
fn cuts_while_freeing_a_fragmented_file_recover_to_before_or_after() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let kernel = loop_unavailable().is_none();
    let all_ways = std::env::var("EXT4R_ORPHAN_CUTS").is_ok_and(|v| v == "all");
    let ways = if kernel { 3 } else { 2 };
    let dir = TempDir::new("write-orphans");
    for (name, mkfs) in [("ext4", "-t ext4"), ("ext3", "-t ext3 -b 1024")] {
        let (base, free_empty) = fragmented(&dir, mkfs);
        for (op, keep) in [("unlink", None), ("truncate", Some(3000u64))] {
            let rec = Arc::new(Recorder::new(base.snapshot()));
            let mut fs = WriteFs::open(rec.clone(), options(true)).unwrap();
            let free_full = fs.free_blocks();
            match keep {
                None => fs.unlink(ROOT_INO, b"frag").unwrap(),
                Some(n) => {
                    let f = fs.lookup_path("/frag").unwrap();
                    fs.truncate(f, n).unwrap();
                }
            }
            let free_after = fs.free_blocks();
            fs.close().unwrap();
            let log = rec.log();
            let total = rec.writes();
            // The operation's own commits (each one transaction) and the
            // orphan steps between them: several, or there is no test.
            let commits = log
                .iter()
                .filter(|o| matches!(o, ext4r::device::Op::Flush))
                .count();
            assert!(commits > 6, "{name} {op}: only {commits} flushes");
            // CI cuts at 20 points of the run, EXT4R_ORPHAN_CUTS=all at 40.
            let step = (total / if all_ways { 40 } else { 20 }).max(1);
            let mut checked = 0;
            for (k, cut) in (0..=total).step_by(step).enumerate() {
                for (variant, who) in ["ours", "e2fsck", "kernel"].iter().enumerate() {
                    if *who == "kernel" && !kernel {
                        continue;
                    }
                    // CI recovers each cut one way, the three in turn (every
                    // recoverer still sees cuts all along the run);
                    // EXT4R_ORPHAN_CUTS=all recovers every cut all three ways.
                    if !all_ways && k % ways != variant {
                        continue;
                    }
                    let disk = base.snapshot();
                    let stats = apply_cut(
                        &disk,
                        &log,
                        Cut {
                            writes: cut,
                            drop_unflushed: variant % 2 == 1,
                            tear: variant == 2,
                            seed: cut as u64 * 7 + variant as u64,
                        },
                    )
                    .unwrap();
                    let torn_sb = stats.torn_at.is_some_and(|(o, l)| covers_superblock(o, l));
                    let img = dir.join("cut.img");
                    disk.save(&img).unwrap();
                    let what = format!("{name} {op} cut {cut}/{total} by {who}");
                    recover(who, &img, &dir, &what, torn_sb);
                    clean(&img, &what);
                    let (free, size) = look(&img);
                    if torn_sb {
                        // e2fsck repaired from a backup superblock, which
                        // holds no orphan list: the half-freed file stays
                        // with what it still maps (e2fsck grows i_size over
                        // it), consistent but neither before nor after.
                        assert!(keep.is_none() || size >= keep, "{what}: size {size:?}");
                        checked += 1;
                        continue;
                    }
                    match keep {
                        None => assert!(
                            (size.is_some() && free == free_full)
                                || (size.is_none() && free == free_empty),
                            "{what}: size {size:?}, {free} blocks free (full {free_full}, empty {free_empty})"
                        ),
                        // A truncate finished by the kernel's orphan code keeps
                        // the extent tree's depth (one leaf block stays where our
                        // own truncate folds the tree back into the inode):
                        // e2fsck judges both clean, so allow those tree blocks.
                        Some(n) => assert!(
                            (size != Some(n) && free == free_full)
                                || (size == Some(n)
                                    && free <= free_after
                                    && free + TREE_SLACK >= free_after),
                            "{what}: size {size:?}, {free} blocks free (before {free_full}, after {free_after})"
                        ),
                    }
                    checked += 1;
                }
            }
            println!("{name} {op}: {total} writes, {commits} flushes, {checked} cut recoveries all before or after");
        }
    }
}

#[test]
fn an_orphan_left_by_the_kernel_is_finished_by_our_open() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck", "debugfs"]) {
        eprintln!("skipped: {m}");
        return;
    }
    let dir = TempDir::new("write-orphans-kernel");
    let (base, free_empty) = fragmented(&dir, "-t ext4");
    let img = dir.join("o.img");
    base.save(&img).unwrap();
    // What an unlink cut after its first transaction leaves: no name, no
    // links, on the list; the blocks still taken.
    let ino = {
        let fs = ext4r::fs::Filesystem::open(MemDevice::from_bytes(&std::fs::read(&img).unwrap()))
            .unwrap();
        fs.resolve("/frag").unwrap().ino.0
    };
    let s = img.to_str().unwrap();
    run("debugfs", &["-w", "-R", "unlink /frag", s], &[]).unwrap();
    run(
        "debugfs",
        &[
            "-w",
            "-R",
            &format!("set_inode_field <{ino}> links_count 0"),
            s,
        ],
        &[],
    )
    .unwrap();
    run(
        "debugfs",
        &["-w", "-R", &format!("ssv last_orphan {ino}"), s],
        &[],
    )
    .unwrap();
    let fs = WriteFs::open_path(&img, options(false)).unwrap();
    assert_eq!(fs.free_blocks(), free_empty);
    fs.close().unwrap();
    clean(&img, "after our open");
    assert_eq!(look(&img), (free_empty, None));
}
