//! Orphan file blocks: parse, list entries, rebuild, checksum.
#![no_main]

use ext4r_format::orphan::{
    default_orphan_file_blocks, init_orphan_block, inodes_per_orphan_block,
    set_orphan_block_checksum, set_orphan_slot, OrphanBlock,
};
use ext4r_format::types::{BlockNr, InodeNr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 9 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&data[..8]);
        let blocks = u64::from_le_bytes(w);
        let _ = default_orphan_file_blocks(blocks, 1u64 << (data[8] % 64));
    }
    let Ok(ob) = OrphanBlock::parse(data) else {
        return;
    };
    let slots: Vec<u32> = ob.slots().collect();
    assert_eq!(slots.len(), inodes_per_orphan_block(data.len()));
    let entries: Vec<_> = ob.entries().collect();
    assert_eq!(entries.len(), slots.iter().filter(|&&s| s != 0).count());
    for &(i, ino) in &entries {
        assert_eq!(slots[i], ino.0);
    }
    let _ = ob.verify_checksum(7, InodeNr(12), 0, BlockNr(2328));

    let mut out = vec![0xffu8; data.len()];
    init_orphan_block(&mut out).expect("init");
    for (i, &s) in slots.iter().enumerate() {
        set_orphan_slot(&mut out, i, s).expect("slot in range");
    }
    let n = slots.len() * 4;
    assert_eq!(&out[..n], &data[..n]);
    set_orphan_block_checksum(&mut out, 7, InodeNr(12), 0, BlockNr(2328)).expect("csum");
    let again = OrphanBlock::parse(&out).expect("re-parse");
    assert!(again
        .verify_checksum(7, InodeNr(12), 0, BlockNr(2328))
        .is_ok());
    assert_eq!(again.entries().count(), entries.len());
});
