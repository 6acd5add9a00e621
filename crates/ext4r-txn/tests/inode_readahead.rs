//! Inode tables are read ahead as the kernel reads them
//! (`inode_readahead_blks`): the first read of an inode announces to the
//! device the window of 32 table blocks around its record, once per
//! window; a walk over neighbouring inodes then waits for the disk once.
#![allow(clippy::unwrap_used)]

use ext4r_txn::device::BlockDevice;
use ext4r_txn::testutil::{run, tool, HintRecorder, TempDir};
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::{Volume, VolumeOptions};
use std::sync::Arc;

/// A 64 MiB ext4 of 4 KiB blocks with 8,192 inodes per group (an inode
/// table of 512 blocks per group), in a recording device.
fn recorder(dir: &TempDir) -> Option<Arc<HintRecorder>> {
    tool("mke2fs")?;
    let img = dir.join("ahead.img");
    run(
        "mke2fs",
        &[
            "-q",
            "-F",
            "-t",
            "ext4",
            "-b",
            "4096",
            "-N",
            "16384",
            "-E",
            "lazy_itable_init=0",
            img.to_str()?,
            "64M",
        ],
    )
    .ok()?;
    let bytes = std::fs::read(img).ok()?;
    let dev = Arc::new(HintRecorder::new(bytes.len() as u64));
    dev.write_at(&bytes, 0).unwrap();
    Some(dev)
}

#[test]
fn an_inode_read_announces_its_table_window_once() {
    let dir = TempDir::new("inode-ahead");
    let Some(dev) = recorder(&dir) else {
        eprintln!("skipped: mke2fs not found");
        return;
    };
    let mut o = VolumeOptions::default();
    o.now = Some(1_700_000_000);
    let vol = Volume::open(dev.clone(), o).unwrap();
    let bs = u64::from(vol.geometry().block_size);
    let ipg = vol.geometry().inodes_per_group;
    let per_block = (bs / u64::from(vol.geometry().inode_size)) as u32;
    let table = vol
        .groups()
        .desc(0)
        .unwrap()
        .inode_table(vol.groups().wide());
    let told = dev.hints().len();

    // Inode 12's record lies in the table's first block: the window is
    // the first 32 blocks of group 0's table.
    vol.read_inode(12).unwrap();
    let hints = dev.hints()[told..].to_vec();
    assert_eq!(hints, vec![(table * bs, 32 * bs)]);

    // Its neighbours, and the last inode of the window, say nothing more.
    for ino in [13, 40, 32 * per_block] {
        vol.read_inode(ino).unwrap();
    }
    assert_eq!(dev.hints().len(), told + 1);

    // The next window, through a transaction, is announced once.
    let txn = Transaction::owned(vol);
    txn.read_inode(32 * per_block + 1).unwrap();
    txn.read_inode(32 * per_block + 2).unwrap();
    let hints = dev.hints()[told..].to_vec();
    assert_eq!(hints.len(), 2);
    assert_eq!(hints[1], ((table + 32) * bs, 32 * bs));

    // The last window of a table stops at its end.
    let blocks = u64::from(vol_blocks_per_table(ipg, per_block));
    let last = ipg; // group 0's last inode
    txn.read_inode(last).unwrap();
    let start = table + (blocks - 1) / 32 * 32;
    let end = table + blocks;
    assert_eq!(
        *dev.hints().last().unwrap(),
        (start * bs, (end - start) * bs)
    );
}

fn vol_blocks_per_table(ipg: u32, per_block: u32) -> u32 {
    ipg.div_ceil(per_block)
}
