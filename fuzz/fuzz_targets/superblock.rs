//! The ext4 superblock: parse, round-trip, validate, checksum, and (when it
//! validates) the geometry derived from it.
//!
//! The raw input is parsed as is (short and garbage input must give errors);
//! then it is zero-padded to 1024 bytes and given the magic, so that the
//! fuzzer spends its time in the fields rather than in finding 1024 bytes
//! with 0xEF53 at 0x38.
#![no_main]

use ext4r_format::geometry::Geometry;
use ext4r_format::superblock::{Superblock, EXT4_MAGIC, SUPERBLOCK_SIZE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = Superblock::parse(data) {
        assert_eq!(&sb.to_bytes()[..], &data[..SUPERBLOCK_SIZE]);
    }
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    let n = data.len().min(SUPERBLOCK_SIZE);
    buf[..n].copy_from_slice(&data[..n]);
    buf[0x38..0x3a].copy_from_slice(&EXT4_MAGIC.to_le_bytes());
    let sb = Superblock::parse(&buf).expect("magic is set");
    assert_eq!(sb.to_bytes(), buf);
    let again = Superblock::parse(&sb.to_bytes()).expect("re-parse");
    assert_eq!(again.to_bytes(), sb.to_bytes());

    let _ = sb.verify_checksum();
    let mut fixed = sb.clone();
    fixed.update_checksum();
    assert!(fixed.verify_checksum().is_ok());
    let _ = (
        sb.block_size(),
        sb.cluster_size(),
        sb.group_count(),
        sb.csum_seed(),
    );
    let _ = (
        sb.blocks_count(),
        sb.r_blocks_count(),
        sb.free_blocks_count(),
    );
    let _ = (
        sb.desc_size(),
        sb.inode_size(),
        sb.first_ino(),
        sb.hash_seed(),
    );
    let _ = (sb.volume_name(), sb.last_mounted(), sb.features().names());
    let _ = (sb.mkfs_time(), sb.wtime(), sb.mtime(), sb.lastcheck());
    let _ = format!("{sb:?}");

    if sb.validate().is_err() {
        return;
    }
    let Ok(g) = Geometry::from_superblock(&sb) else {
        return;
    };
    let _ = (
        g.descs_per_block(),
        g.desc_blocks(),
        g.inode_blocks_per_group(),
    );
    let _ = (g.cluster_ratio(), g.old_desc_blocks());
    let last = g.group_count - 1;
    for grp in [0, 1, 2, last / 2, last.saturating_sub(1), last] {
        let grp = grp.min(last);
        let _ = (
            g.group_first_block(grp),
            g.group_last_block(grp),
            g.group_blocks(grp),
        );
        let _ = (
            g.has_super(grp),
            g.group_meta(grp),
            g.super_and_desc_blocks(grp),
        );
        let _ = g.group_of_block(g.group_first_block(grp));
    }
    for i in 0..g.desc_blocks().min(4) {
        let _ = g.desc_block_loc(i);
    }
    let _ = g.backup_groups().take(64).count();
});
