//! Savepoints: a rollback undoes exactly what changed after the savepoint
//! (blocks, data, inode records, bitmaps, counts, the superblock), keeps
//! what changed before it, and the commit then writes the same image as a
//! transaction that never made the undone changes.
#![allow(clippy::unwrap_used)]

use ext4r_txn::csum::BlockKind;
use ext4r_txn::device::{BlockDevice, MemDevice};
use ext4r_txn::testutil::{run, tool, TempDir};
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Volume, VolumeOptions};
use std::sync::Arc;

fn image(dir: &TempDir) -> Option<Vec<u8>> {
    tool("mke2fs")?;
    let img = dir.join("sp.img");
    run(
        "mke2fs",
        &["-q", "-F", "-t", "ext4", "-b", "1024", img.to_str()?, "16M"],
    )
    .ok()?;
    std::fs::read(img).ok()
}

fn volume(bytes: &[u8]) -> (Arc<MemDevice>, Volume) {
    let dev = Arc::new(MemDevice::new(bytes.len() as u64));
    dev.write_at(bytes, 0).unwrap();
    let mut o = VolumeOptions::default();
    o.now = Some(1_700_000_000);
    let vol = Volume::open(dev.clone(), o).unwrap();
    (dev, vol)
}

fn contents(dev: &MemDevice) -> Vec<u8> {
    let mut b = vec![0; dev.size() as usize];
    dev.read_at(&mut b, 0).unwrap();
    b
}

/// The changes kept in both runs.
fn before(t: &mut Transaction<Volume>) -> u64 {
    let (b, _) = t.alloc_run(3000, 4).unwrap().unwrap();
    t.write_data(b, vec![7; 1024]).unwrap();
    t.write_block(b + 1, BlockKind::Plain, vec![8; 1024])
        .unwrap();
    let ino = t.alloc_inode(2, false).unwrap();
    let mut r = t.read_inode(ino).unwrap();
    r[0] = 0xa4;
    r[1] = 0x81;
    t.write_inode(ino, r).unwrap();
    b
}

#[test]
fn rollback_undoes_exactly_what_followed_the_savepoint() {
    let dir = TempDir::new("txn-savepoint");
    let Some(bytes) = image(&dir) else {
        eprintln!("skipped: mke2fs not found");
        return;
    };

    // Reference: only the kept changes, then a commit in place.
    let (ref_dev, vol) = volume(&bytes);
    let mut t = Transaction::owned(vol);
    let b = before(&mut t);
    t.commit(Commit::InPlace).unwrap();
    let want = contents(&ref_dev);

    let (dev, vol) = volume(&bytes);
    let mut t = Transaction::owned(vol);
    assert_eq!(before(&mut t), b);
    let counts = (t.groups().free_blocks(), t.groups().free_inodes());
    let kept_block = t.read_block(b + 1).unwrap();
    t.savepoint();
    // Changes to undo: over what the kept changes touched and beyond, in
    // another group too.
    t.write_data(b, vec![9; 1024]).unwrap();
    t.block_mut(b + 1, BlockKind::Plain).unwrap()[0] = 1;
    t.free_blocks(b + 2, 2).unwrap();
    let far = t.geometry().group_first_block(1) + 600;
    t.alloc_run(far, 8).unwrap().unwrap();
    t.write_block(far, BlockKind::Plain, vec![3; 1024]).unwrap();
    t.zero_blocks(far + 1, 2).unwrap();
    let ino2 = t.alloc_inode(2, true).unwrap();
    // A new inode gets a whole record (its old bytes are a free slot's,
    // not verified), as the write API writes one.
    let mut rec = vec![0u8; t.geometry().inode_size as usize];
    rec[0] = 0xed;
    t.write_inode(ino2, rec).unwrap();
    t.superblock_mut().s_volume_name = *b"changed!changed!";
    t.set_free_counts(1, 1);
    t.rollback_to_savepoint();

    assert_eq!((t.groups().free_blocks(), t.groups().free_inodes()), counts);
    assert_eq!(t.read_block(b + 1).unwrap(), kept_block);
    assert_eq!(t.read_block(b).unwrap(), vec![7; 1024]);
    assert!(!t.groups().is_inode_used(ino2).unwrap());
    t.commit(Commit::InPlace).unwrap();
    let got = contents(&dev);
    let diff = want.iter().zip(&got).position(|(a, b)| a != b);
    assert!(diff.is_none(), "images differ at byte {diff:?}");

    // A rollback without a savepoint does nothing; a released savepoint
    // keeps what followed it.
    let (_, vol) = volume(&got);
    let mut t = Transaction::owned(vol);
    t.rollback_to_savepoint();
    t.savepoint();
    let (x, _) = t.alloc_run(5000, 1).unwrap().unwrap();
    t.release_savepoint();
    t.rollback_to_savepoint();
    assert!(t.groups().is_block_used(x).unwrap());
}

/// Blocks the committed filesystem has in use, freed by a transaction, are
/// not allocated again before it commits (a file's data goes to its
/// blocks ahead of the commit block: handed on at once, a power cut
/// before the commit would leave the old owner the new owner's bytes).
/// Blocks the transaction took itself may be taken again at once; after
/// the commit, the freed ones may be too.
#[test]
fn freed_blocks_wait_for_the_commit() {
    let dir = TempDir::new("txn-held");
    let Some(bytes) = image(&dir) else {
        eprintln!("skipped: mke2fs not found");
        return;
    };
    let (_dev, mut vol) = volume(&bytes);
    let mut t = vol.begin();
    let (a, n) = t.alloc_run(5000, 8).unwrap().unwrap();
    assert_eq!(n, 8);
    t.commit(Commit::Auto).unwrap();
    // Committed in use: freed, then asked for at the same place.
    t.free_blocks(a, 8).unwrap();
    let (b, _) = t.alloc_run(a, 8).unwrap().unwrap();
    assert!(
        b >= a + 8 || b + 8 <= a,
        "freed blocks {a}.. given again at {b} before the commit"
    );
    assert_ne!(t.alloc_block(a).unwrap(), a);
    // Taken by this transaction: given back and taken again at once.
    t.free_blocks(b, 8).unwrap();
    assert_eq!(t.alloc_run(b, 8).unwrap(), Some((b, 8)));
    t.commit(Commit::Auto).unwrap();
    // Committed free now.
    assert_eq!(t.alloc_run(a, 8).unwrap(), Some((a, 8)));
}
