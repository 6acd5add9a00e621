use super::new_uuid::time_uuid;
use super::*;

#[test]
fn c_numbers_parse_like_strtoul() {
    assert_eq!(parse_c_ulong("10"), Some(10));
    assert_eq!(parse_c_ulong("0x10"), Some(16));
    assert_eq!(parse_c_ulong("010"), Some(8));
    assert_eq!(parse_c_ulong("0"), Some(0));
    assert_eq!(parse_c_ulong("1x"), None);
    assert_eq!(parse_c_ulong(""), None);
}

#[test]
fn percent_g_formats_like_c() {
    assert_eq!(fmt_g(5.0), "5");
    assert_eq!(fmt_g(0.5), "0.5");
    assert_eq!(fmt_g(2.25), "2.25");
    assert_eq!(fmt_g(0.00001), "1e-05");
    assert_eq!(fmt_g(12.3456789), "12.3457");
}

#[test]
fn mount_option_edits() {
    let mut m = 0x0c;
    edit_mntopts("^acl,journal_data", &mut m).unwrap();
    assert_eq!(m, 0x24);
    edit_mntopts("journal_data_writeback", &mut m).unwrap();
    assert_eq!(m, 0x64);
    assert!(edit_mntopts("frob", &mut m).is_err());
}

#[test]
fn time_uuids_are_version_1() {
    let u = time_uuid(1_700_000_000, [7; 16]);
    assert_eq!(u[6] >> 4, 1);
    assert_eq!(u[8] & 0xc0, 0x80);
}

/// A fresh in-memory filesystem with 128-byte inodes, as `mke2fs -t
/// fs_type -I 128` makes it.
fn small_fs(fs_type: &str) -> std::sync::Arc<dyn BlockDevice> {
    use crate::device::MemDevice;
    use crate::mkfs::{format, MkfsOptions};
    let dev = MemDevice::new(32 << 20);
    let opts = MkfsOptions {
        size_bytes: 32 << 20,
        now: 1_700_000_000,
        fs_type: Some(fs_type.into()),
        inode_size: Some(128),
        block_size: Some(1024),
        ..Default::default()
    };
    format(&dev, &opts, true).unwrap();
    std::sync::Arc::new(dev)
}

fn superblock(dev: &dyn BlockDevice) -> Superblock {
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET).unwrap();
    Superblock::parse(&buf).unwrap()
}

#[test]
fn inode_size_grows_on_flex_bg_and_the_tree_reads_back() {
    for fs_type in ["ext4", "ext2"] {
        let dev = small_fs(fs_type);
        let t = TuneOptions {
            inode_size: Some(256),
            ..Default::default()
        };
        let out = tune(dev.clone(), &t, &mut TuneEnv::new("img", 1_700_000_100)).unwrap();
        assert_eq!(out.status, 0, "{fs_type}: {}{}", out.out, out.err);
        assert_eq!(out.out, "Setting inode size 256\n");
        let sb = superblock(dev.as_ref());
        assert_eq!(sb.inode_size(), 256);
        let fs = Filesystem::open(dev.clone()).unwrap();
        let names: Vec<_> = fs
            .read_dir_path("/")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert!(names.iter().any(|n| n == b"lost+found"), "{fs_type}");
        // Refused the second time: the size is already 256.
        let out = tune(dev.clone(), &t, &mut TuneEnv::new("img", 1_700_000_200)).unwrap();
        assert_eq!(
            (out.status, out.err.as_str()),
            (1, "The inode size is already 256\n")
        );
    }
}

/// The mover on a hand-made depth-1 extent tree: a window over the leaf
/// block and one block of the first extent moves the leaf and that whole
/// extent (data copied, entries and checksums rewritten), leaves the
/// second extent alone, and frees the old extent's blocks outside the
/// window.
#[test]
fn mover_moves_whole_extents_and_tree_blocks() {
    use super::isize_move::Mover;
    use crate::meta::Meta;
    use ext4r_format::extent::{verify_extent_block_checksum, ExtentNode};
    use ext4r_format::inode::{inode_csum_seed, Inode};
    use ext4r_txn::alloc::{BlockAlloc, FreeSpace, UsedBlocks};
    let dev = small_fs("ext4");
    let sb = superblock(dev.as_ref());
    let seed = sb.csum_seed();
    let mut meta = Meta::load(&dev, &sb).unwrap();
    let bs = 1024usize;
    // Blocks: leaf L, extent E1 = [d1, d1+4), extent E2 = [d2, d2+3).
    let base = meta.get_free_blocks(3000, 0, 64).unwrap();
    let (leaf, d1, d2) = (base, base + 10, base + 20);
    meta.take_range(base, 64).unwrap();
    for b in d1..d1 + 4 {
        dev.write_at(&vec![b as u8; bs], b * bs as u64).unwrap();
    }
    let ino = 12u32;
    let gen = 7u32;
    let iseed = inode_csum_seed(seed, InodeNr(ino), gen);
    let mut lb = vec![0u8; bs];
    lb[0..2].copy_from_slice(&0xF30Au16.to_le_bytes());
    lb[2..4].copy_from_slice(&2u16.to_le_bytes());
    lb[4..6].copy_from_slice(&84u16.to_le_bytes());
    for (k, (logical, start, len)) in [(0u32, d1, 4u16), (4, d2, 3)].into_iter().enumerate() {
        let e = &mut lb[12 + 12 * k..24 + 12 * k];
        e[0..4].copy_from_slice(&logical.to_le_bytes());
        e[4..6].copy_from_slice(&len.to_le_bytes());
        e[8..12].copy_from_slice(&(start as u32).to_le_bytes());
    }
    ext4r_format::extent::set_extent_block_checksum(iseed, &mut lb).unwrap();
    dev.write_at(&lb, leaf * bs as u64).unwrap();
    let mut rec = vec![0u8; 128];
    rec[0..2].copy_from_slice(&0x81a4u16.to_le_bytes());
    rec[0x1A..0x1C].copy_from_slice(&1u16.to_le_bytes());
    rec[0x20..0x24].copy_from_slice(&0x0008_0000u32.to_le_bytes());
    rec[0x64..0x68].copy_from_slice(&gen.to_le_bytes());
    let root = &mut rec[0x28..0x64];
    root[0..2].copy_from_slice(&0xF30Au16.to_le_bytes());
    root[2..4].copy_from_slice(&1u16.to_le_bytes());
    root[4..6].copy_from_slice(&4u16.to_le_bytes());
    root[6..8].copy_from_slice(&1u16.to_le_bytes());
    root[16..20].copy_from_slice(&(leaf as u32).to_le_bytes());
    let mut window = UsedBlocks::new(1, meta.geo.blocks_count, 1);
    window.mark(leaf, 1);
    window.mark(d1 + 1, 1);
    let mut mover = Mover::new(&mut meta, &window);
    if mover.plan(ino, &rec).is_err() {
        panic!("plan failed");
    }
    assert_eq!(mover.moved, 5, "the leaf and the whole first extent");
    mover.write().unwrap();
    // The record went to inode 12's slot, on disk after the flush.
    let (blk, off) = {
        let ipg = meta.geo.inodes_per_group as usize;
        let table = meta.descs()[0].inode_table(meta.wide);
        let isz = meta.geo.inode_size as usize;
        let byte = ((ino as usize - 1) % ipg) * isz;
        (table + (byte / bs) as u64, byte % bs)
    };
    let mut tb = vec![0u8; bs];
    dev.read_at(&mut tb, blk * bs as u64).unwrap();
    let isz = meta.geo.inode_size as usize;
    let out = tb[off..off + isz].to_vec();
    let root = Inode::parse(&out).unwrap().i_block;
    let new_leaf = ExtentNode::parse(&root).unwrap().indexes().unwrap()[0]
        .leaf()
        .0;
    assert_ne!(new_leaf, leaf);
    let mut nl = vec![0u8; bs];
    dev.read_at(&mut nl, new_leaf * bs as u64).unwrap();
    verify_extent_block_checksum(iseed, &nl).unwrap();
    let leaf_extents = ExtentNode::parse(&nl).unwrap().extents().unwrap();
    let (e1, e2) = (leaf_extents[0].start().0, leaf_extents[1].start().0);
    assert_ne!(e1, d1);
    assert_eq!(e2, d2, "an extent outside the window stays");
    for k in 0..4 {
        let mut b = vec![0u8; bs];
        dev.read_at(&mut b, (e1 + k) * bs as u64).unwrap();
        assert_eq!(b, vec![(d1 + k) as u8; bs], "block {k} of the moved extent");
    }
    ext4r_format::inode::verify_inode_checksum(seed, InodeNr(ino), &out).unwrap();
    // The old extent's blocks outside the window are free again; the
    // window's stay taken (the new tables go there).
    let used = |b: u64| meta.first_used(b, b).unwrap().is_some();
    assert!(!used(d1) && !used(d1 + 3));
    assert!(used(d1 + 1) && used(leaf));
}

/// Values wider than the superblock field they go to are refused, with
/// nothing written, instead of being cut to their low bits.
#[test]
fn values_wider_than_their_fields_are_refused() {
    use crate::device::MemDevice;
    use crate::mkfs::{format, MkfsOptions};
    // 64 KiB blocks allow an inode size of 65536, which s_inode_size
    // (16 bits) cannot hold.
    let dev = MemDevice::new(64 << 20);
    let opts = MkfsOptions {
        size_bytes: 64 << 20,
        now: 1_700_000_000,
        fs_type: Some("ext4".into()),
        block_size: Some(65536),
        ..Default::default()
    };
    format(&dev, &opts, true).unwrap();
    let dev: std::sync::Arc<dyn BlockDevice> = std::sync::Arc::new(dev);
    let before = superblock(dev.as_ref());
    let wide = [
        TuneOptions {
            inode_size: Some(65536),
            ..Default::default()
        },
        TuneOptions {
            extended: Some("stride=65536".into()),
            ..Default::default()
        },
        TuneOptions {
            extended: Some("stripe_width=4294967296".into()),
            ..Default::default()
        },
        TuneOptions {
            mount_count: Some(65536),
            ..Default::default()
        },
        TuneOptions {
            max_mount_count: Some(MaxMounts::Count(40_000)),
            ..Default::default()
        },
    ];
    for t in &wide {
        let out = tune(dev.clone(), t, &mut TuneEnv::new("img", 1_700_000_100)).unwrap();
        assert_ne!(out.status, 0, "{t:?} was accepted: {}", out.out);
        assert!(!out.err.is_empty(), "{t:?}: no message");
        let sb = superblock(dev.as_ref());
        assert_eq!(
            (
                sb.inode_size(),
                sb.s_raid_stride.get(),
                sb.s_raid_stripe_width.get()
            ),
            (before.inode_size(), 0, 0),
            "{t:?}"
        );
        assert_eq!(
            (sb.s_mnt_count.get(), sb.s_max_mnt_count.get()),
            (before.s_mnt_count.get(), before.s_max_mnt_count.get()),
            "{t:?}"
        );
    }
    // The widest values that fit are taken as they are.
    let t = TuneOptions {
        extended: Some("stride=65535,stripe_width=4294967295".into()),
        ..Default::default()
    };
    let out = tune(dev.clone(), &t, &mut TuneEnv::new("img", 1_700_000_200)).unwrap();
    assert_eq!(out.status, 0, "{}", out.err);
    let sb = superblock(dev.as_ref());
    assert_eq!(
        (sb.s_raid_stride.get(), sb.s_raid_stripe_width.get()),
        (65535, u32::MAX)
    );
}
