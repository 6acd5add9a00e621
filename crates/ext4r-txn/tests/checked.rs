//! A checker's volume (`Volume::open_checked`): commits in place keep
//! `needs_recovery` as the checker's superblock says, a block that cannot
//! carry its checksum is refused unless the transaction tolerates it, and
//! the dispatcher verifies bitmap checksums the way it stamps them.
#![allow(clippy::unwrap_used)]

use ext4r_format::features::Incompat;
use ext4r_format::geometry::Geometry;
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ext4r_txn::csum::{BlockKind, Checksums};
use ext4r_txn::device::{BlockDevice, MemDevice};
use ext4r_txn::groups::read_descs;
use ext4r_txn::testutil::{run, tool, TempDir};
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Volume, VolumeOptions};
use std::sync::Arc;

fn image(dir: &TempDir) -> Option<Vec<u8>> {
    tool("mke2fs")?;
    let img = dir.join("checked.img");
    run(
        "mke2fs",
        &["-q", "-F", "-t", "ext4", "-b", "1024", img.to_str()?, "16M"],
    )
    .ok()?;
    std::fs::read(img).ok()
}

fn device(bytes: &[u8]) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(bytes.len() as u64));
    dev.write_at(bytes, 0).unwrap();
    dev
}

fn superblock(dev: &MemDevice) -> Superblock {
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET).unwrap();
    Superblock::parse(&buf).unwrap()
}

/// A volume over the superblock `sb` and the descriptors on disk.
fn checked(dev: &Arc<MemDevice>, sb: Superblock) -> Volume {
    let geo = Geometry::from_superblock(&sb).unwrap();
    let descs = read_descs(dev.as_ref(), &geo, geo.first_data_block).unwrap();
    let mut o = VolumeOptions::default();
    o.now = Some(1_700_000_000);
    Volume::open_checked(dev.clone(), sb, descs, o).unwrap()
}

/// A free block, the last of group 1's.
fn spare_block(vol: &Volume) -> u64 {
    let last = vol.geometry().group_first_block(2) - 1;
    (last - 4000..=last)
        .rev()
        .find(|&b| !vol.groups().is_block_used(b).unwrap())
        .unwrap()
}

#[test]
fn needs_recovery_stays_as_the_checker_set_it() {
    let dir = TempDir::new("txn-checked-recover");
    let Some(bytes) = image(&dir) else {
        eprintln!("skipped: mke2fs not found");
        return;
    };
    let dev = device(&bytes);
    let mut sb = superblock(&dev);
    let inc = sb.s_feature_incompat.get() | Incompat::RECOVER.bits();
    sb.s_feature_incompat.set(inc);
    let mut t = Transaction::owned(checked(&dev, sb.clone()));
    t.set_superblock(sb);
    t.commit(Commit::InPlace).unwrap();
    assert!(superblock(&dev).has_incompat(Incompat::RECOVER));

    // An ordinary volume's in-place commit says what the disk holds: no
    // journal to recover.
    let dev = device(&bytes);
    let vol = Volume::open_with_superblock(dev.clone(), superblock(&dev), VolumeOptions::default())
        .unwrap();
    let mut t = Transaction::owned(vol);
    let mut sb = t.superblock().clone();
    sb.s_feature_incompat.set(inc);
    t.set_superblock(sb);
    t.commit(Commit::InPlace).unwrap();
    assert!(!superblock(&dev).has_incompat(Incompat::RECOVER));
}

#[test]
fn an_unstampable_block_is_refused_unless_tolerated() {
    let dir = TempDir::new("txn-checked-lenient");
    let Some(bytes) = image(&dir) else {
        eprintln!("skipped: mke2fs not found");
        return;
    };
    // An extent block whose header is garbage: no place for a tail.
    let garbage = vec![0xa5u8; 1024];
    let kind = BlockKind::Extent {
        ino: 12,
        generation: 7,
    };

    let dev = device(&bytes);
    let sb = superblock(&dev);
    let mut t = Transaction::owned(checked(&dev, sb.clone()));
    let b = spare_block(t.volume());
    t.write_block(b, kind, garbage.clone()).unwrap();
    assert!(t.commit(Commit::InPlace).is_err());
    let mut on_disk = vec![0u8; 1024];
    dev.read_at(&mut on_disk, b * 1024).unwrap();
    assert_ne!(on_disk, garbage, "a refused commit wrote the block");

    let mut t = Transaction::owned(checked(&dev, sb));
    t.tolerate_unstampable();
    t.write_block(b, kind, garbage.clone()).unwrap();
    t.commit(Commit::InPlace).unwrap();
    dev.read_at(&mut on_disk, b * 1024).unwrap();
    assert_eq!(on_disk, garbage, "written as it is");
}

#[test]
fn bitmap_checksums_verify_as_they_are_stamped() {
    let dir = TempDir::new("txn-checked-bitmaps");
    let Some(bytes) = image(&dir) else {
        eprintln!("skipped: mke2fs not found");
        return;
    };
    let dev = device(&bytes);
    let sb = superblock(&dev);
    let cs = Checksums::new(&sb);
    assert!(cs.metadata_csum());
    let vol = checked(&dev, sb);
    let wide = vol.groups().wide();
    let d = *vol.groups().desc(0).unwrap();
    let mut bb = vec![0u8; 1024];
    dev.read_at(&mut bb, d.block_bitmap(wide) * 1024).unwrap();
    let mut ib = vec![0u8; 1024];
    dev.read_at(&mut ib, d.inode_bitmap(wide) * 1024).unwrap();
    assert!(cs.block_bitmap_ok(&d, &bb));
    assert!(cs.inode_bitmap_ok(&d, &ib));
    bb[3] ^= 0x10;
    ib[0] ^= 0x80;
    assert!(!cs.block_bitmap_ok(&d, &bb));
    assert!(!cs.inode_bitmap_ok(&d, &ib));
    // Stamped into a copy of the descriptor, the changed bitmaps verify.
    let mut d2 = d;
    cs.stamp_bitmaps(&mut d2, Some(&bb), Some(&ib));
    assert!(cs.block_bitmap_ok(&d2, &bb) && cs.inode_bitmap_ok(&d2, &ib));
}

#[test]
fn a_checker_edits_single_bits_and_keeps_the_counts_itself() {
    let dir = TempDir::new("txn-checked-edit-map");
    let Some(bytes) = image(&dir) else {
        eprintln!("skipped: mke2fs not found");
        return;
    };
    let dev = device(&bytes);
    let sb = superblock(&dev);
    let mut t = Transaction::owned(checked(&dev, sb));
    let b = spare_block(t.volume());
    let g = t.geometry().group_of_block(b);
    let bit = u32::try_from(b - t.geometry().group_first_block(g)).unwrap();
    let free_before = t.groups().desc(g).unwrap().free_blocks_count(false);
    let changed = t
        .edit_map(g, true, |m| {
            let was = m.get(bit);
            m.set_range(bit, 1, true);
            !was
        })
        .unwrap();
    assert!(changed, "the spare block was free");
    // Only the bit: the descriptor's count is the caller's to keep.
    assert_eq!(
        t.groups().desc(g).unwrap().free_blocks_count(false),
        free_before
    );
    assert!(t.groups().is_block_used(b).unwrap());
    t.commit(Commit::InPlace).unwrap();
    let vol = checked(&dev, superblock(&dev));
    assert!(
        vol.groups().is_block_used(b).unwrap(),
        "the bit reached the disk"
    );
}
