//! The mapping editor against e2fsck, debugfs and the kernel: a file given
//! a fragmented mapping (extent trees of depth 0 to 2, block maps through
//! triple indirect blocks), then shortened, reads back as written and
//! leaves the filesystem clean.
#![allow(clippy::unwrap_used)]

use ext4r_format::inode::Inode;
use ext4r_txn::device::{FileDevice, OpenMode};
use ext4r_txn::map::{self, Run};
use ext4r_txn::testutil::{loop_unavailable, run, tool, LoopDev, Mount, TempDir};
use ext4r_txn::txn::Commit;
use ext4r_txn::volume::{Volume, VolumeOptions};
use std::path::Path;
use std::sync::Arc;

fn open(img: &Path) -> Volume {
    let dev = FileDevice::open(
        img,
        OpenMode {
            write: true,
            ..Default::default()
        },
    )
    .unwrap();
    let mut o = VolumeOptions::default();
    o.now = Some(1_700_000_000);
    Volume::open(Arc::new(dev), o).unwrap()
}

/// The pattern of logical block `l` of the test file.
fn block_data(l: u64, bs: usize) -> Vec<u8> {
    let mut b = vec![(l % 251) as u8; bs];
    b[..8].copy_from_slice(&l.to_le_bytes());
    b
}

/// Gives inode `ino` `count` blocks, every `stride`-th logical block
/// mapped (holes between), each in a block of its own run; then commits.
fn give(vol: &mut Volume, ino: u32, count: u64, stride: u64) -> Vec<Run> {
    let bs = vol.geometry().block_size as usize;
    let mut t = vol.begin();
    let rec = t.read_inode(ino).unwrap();
    let mut inode = Inode::parse(&rec).unwrap();
    // The file's old data blocks go back.
    let old = map::runs(&t, ino, &inode, false).unwrap();
    for r in &old {
        t.free_blocks(r.physical, r.len).unwrap();
    }
    let mut runs = Vec::new();
    let mut gaps = Vec::new();
    let mut goal = 0;
    for k in 0..count {
        // One block, then a gap of one taken block: never contiguous.
        let (b, _) = t.alloc_run(goal, 1).unwrap().unwrap();
        let (gap, _) = t.alloc_run(b + 1, 1).unwrap().unwrap();
        goal = gap + 1;
        gaps.push(gap);
        let l = k * stride;
        t.write_data(b, block_data(l, bs)).unwrap();
        runs.push(Run {
            logical: l,
            physical: b,
            len: 1,
            unwritten: false,
        });
    }
    let tree = map::store(&mut t, ino, &mut inode, &runs, 0).unwrap();
    let last = runs.last().map_or(0, |r| r.end());
    inode.set_size(last * bs as u64);
    let sectors = (count + tree) * (bs as u64 / 512);
    inode.set_blocks_count(sectors, true, bs as u32).unwrap();
    let mut rec = rec;
    inode.write(&mut rec).unwrap();
    t.write_inode(ino, rec).unwrap();
    // The gap blocks were taken only to fragment the file (not always
    // right after its block: the old data blocks freed above are not
    // taken again before the commit).
    for g in gaps {
        t.free_blocks(g, 1).unwrap();
    }
    t.commit(Commit::Auto).unwrap();
    runs
}

fn e2fsck_clean(img: &Path) -> (bool, String) {
    let out = std::process::Command::new(tool("e2fsck").unwrap())
        .arg("-fn")
        .arg(img)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn check_contents(file: &[u8], runs: &[Run], bs: usize) {
    let mapped: std::collections::BTreeSet<u64> = runs.iter().map(|r| r.logical).collect();
    let blocks = file.len() / bs;
    for l in 0..blocks as u64 {
        let got = &file[l as usize * bs..(l as usize + 1) * bs];
        if mapped.contains(&l) {
            assert_eq!(got, block_data(l, bs).as_slice(), "block {l}");
        } else {
            assert!(got.iter().all(|&b| b == 0), "hole at {l}");
        }
    }
}

#[test]
fn stored_mappings_read_back_everywhere() {
    if tool("mke2fs").is_none() || tool("debugfs").is_none() {
        eprintln!("skipped: e2fsprogs not found");
        return;
    }
    // (mkfs args, size, blocks, stride): depth 0/1/2 extent trees, block
    // maps through the double and triple indirect ranges (1 KiB blocks:
    // 12 direct, 256 indirect, 65536 double).
    let cases: &[(&str, &[&str], &str, u64, u64)] = &[
        ("ext4-depth0", &["-t", "ext4"], "64M", 3, 1),
        ("ext4-depth1", &["-t", "ext4"], "64M", 200, 1),
        (
            "ext4-depth2-1k",
            &["-t", "ext4", "-b", "1024"],
            "64M",
            3000,
            2,
        ),
        ("ext3-dind", &["-t", "ext3", "-b", "1024"], "64M", 400, 3),
        ("ext3-tind", &["-t", "ext3", "-b", "1024"], "64M", 70, 1000),
    ];
    for (name, args, size, count, stride) in cases {
        let dir = TempDir::new("mapstore");
        let img = dir.join("a.img");
        let p = img.to_str().unwrap();
        let mut a = vec!["-q", "-F"];
        a.extend_from_slice(args);
        a.extend_from_slice(&[p, size]);
        run("mke2fs", &a).unwrap();
        run("debugfs", &["-w", "-R", "write /dev/null f", p]).unwrap();
        let stat = run("debugfs", &["-R", "stat /f", p]).unwrap();
        let ino: u32 = stat
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap();
        let mut vol = open(&img);
        let bs = vol.geometry().block_size as usize;
        let runs = give(&mut vol, ino, *count, *stride);
        vol.close().unwrap();
        let (ok, out) = e2fsck_clean(&img);
        assert!(ok, "{name}: e2fsck -fn after storing:\n{out}");
        let dumped = dir.join("f.out");
        run(
            "debugfs",
            &["-R", &format!("dump /f {}", dumped.to_str().unwrap()), p],
        )
        .unwrap();
        check_contents(&std::fs::read(&dumped).unwrap(), &runs, bs);
        // Shorter: the tree shrinks, its blocks go back.
        let mut vol = open(&img);
        let runs = give(&mut vol, ino, (*count / 7).max(1), *stride);
        vol.close().unwrap();
        let (ok, out) = e2fsck_clean(&img);
        assert!(ok, "{name}: e2fsck -fn after shrinking:\n{out}");
        if loop_unavailable().is_none() {
            let ld = LoopDev::attach(&img).unwrap();
            let m = Mount::new(&ld.0, &dir.join("mnt")).unwrap();
            let file = std::fs::read(dir.join("mnt").join("f")).unwrap();
            check_contents(&file, &runs, bs);
            drop(m);
            drop(ld);
        }
        eprintln!("{name}: {count} blocks stored, read back by debugfs and the kernel");
    }
}
