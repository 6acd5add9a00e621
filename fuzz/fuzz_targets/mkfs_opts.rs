//! mkfs's options as a user types them, through the same parsers the CLI
//! uses (`parse_size`, `Extended::parse`), then the whole plan, and for
//! small sizes the format itself on a memory device: any input gives a
//! typed error or a filesystem, never a panic, a hang or a huge
//! allocation.
//!
//! The input is text, one field per line: size, -E list, -O list, -t,
//! -T, -b, -I, -i, -N, -m, -g, -G, -C, -J size, -r, -L.
#![no_main]

use ext4r::device::MemDevice;
use ext4r::mkfs::{format, parse_size, plan, Extended, MkfsOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut f = text.split('\n');
    let mut next = || f.next().filter(|s| !s.is_empty());
    let Some(size) = next().and_then(|s| parse_size(s, 1024).ok()) else {
        return;
    };
    let Ok(extended) = Extended::parse(&next().map(str::to_string).into_iter().collect::<Vec<_>>())
    else {
        return;
    };
    let features = next().map(|s| vec![s.to_string()]).unwrap_or_default();
    let fs_type = next().map(str::to_string);
    let usage_types = next().map(str::to_string);
    let num = |s: Option<&str>| s.and_then(|s| parse_size(s, 1).ok());
    let block_size = num(next()).and_then(|n| u32::try_from(n).ok());
    let inode_size = num(next()).and_then(|n| u16::try_from(n).ok());
    let inode_ratio = num(next()).and_then(|n| u32::try_from(n).ok());
    let num_inodes = num(next());
    let reserved_ratio = next().and_then(|s| s.parse::<f64>().ok());
    let blocks_per_group = num(next()).and_then(|n| u32::try_from(n).ok());
    let flex_bg_size = num(next()).and_then(|n| u32::try_from(n).ok());
    let cluster_size = num(next()).and_then(|n| u32::try_from(n).ok());
    let journal_size_mib = num(next()).and_then(|n| u32::try_from(n).ok());
    let revision = num(next()).and_then(|n| u32::try_from(n).ok());
    let label = next().map(str::to_string);
    let opts = MkfsOptions {
        fs_type,
        usage_types,
        block_size,
        cluster_size,
        inode_ratio,
        inode_size,
        num_inodes,
        reserved_ratio,
        blocks_per_group,
        flex_bg_size,
        features,
        journal_size_mib,
        revision,
        label,
        extended,
        size_bytes: size,
        now: 1_700_000_000,
        random_uuids: Some(([7; 16], [9; 16])),
        ..Default::default()
    };
    // The plan keeps a few words per block group, as libext2fs keeps each
    // group's descriptor: a 14 PiB request legitimately needs gigabytes
    // (mke2fs more), and seconds per input under the sanitizer. Bound the
    // groups, not the parsers: past 256 Ki groups of the smallest geometry
    // the options allow, only the parsing is fuzzed (the library's
    // proptest plans sizes up to 16 TiB).
    let min_block = u64::from(opts.block_size.unwrap_or(1024).max(1024));
    let min_group = u64::from(opts.blocks_per_group.unwrap_or(256).max(256)) * min_block;
    if size / min_group > 256 << 10 {
        return;
    }
    let Ok(p) = plan(&opts) else { return };
    let _ = p.summary();
    if size <= 16 << 20 {
        let dev = MemDevice::new(size);
        let _ = format(&dev, &opts, true);
    }
});
