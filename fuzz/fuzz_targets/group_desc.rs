//! Group descriptors: parse at every descriptor size, round-trip, read the
//! joined fields and compute both checksum kinds.
#![no_main]

use ext4r_format::group_desc::{GroupDesc, GroupDescCsum};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    // Mostly legal sizes, sometimes an arbitrary one (which must be refused).
    let desc_size = match sel % 8 {
        0 => 32,
        1..=6 => 32 << (sel % 8),
        _ => usize::from(sel),
    };
    let Ok(d) = GroupDesc::parse(rest, desc_size) else {
        return;
    };
    let mut out = vec![0xa5u8; desc_size];
    d.write(&mut out, desc_size).expect("write what parsed");
    let n = desc_size.min(64);
    assert_eq!(&out[..n], &rest[..n]);
    assert!(out[n..].iter().all(|&b| b == 0));
    assert_eq!(GroupDesc::parse(&out, desc_size).expect("re-parse"), d);

    for wide in [false, true] {
        let _ = (
            d.block_bitmap(wide),
            d.inode_bitmap(wide),
            d.inode_table(wide),
        );
        let _ = (d.free_blocks_count(wide), d.free_inodes_count(wide));
        let _ = (d.used_dirs_count(wide), d.itable_unused(wide), d.flags());
    }
    let group = u32::from(sel) << 8;
    let mut e = d;
    for csum in [
        GroupDescCsum::Crc32c { seed: 0x1234_5678 },
        GroupDescCsum::Crc16 { uuid: [sel; 16] },
    ] {
        let c = d
            .compute_checksum(group, desc_size, &csum)
            .expect("checksum");
        e.update_checksum(group, desc_size, &csum).expect("update");
        assert_eq!(e.bg_checksum.get(), c);
        assert_eq!(
            e.compute_checksum(group, desc_size, &csum).expect("again"),
            c
        );
    }
});
