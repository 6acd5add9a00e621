//! The per-record work a check of a full volume repeats millions of
//! times: an inode record's checksum (every inode in use) and a name's
//! directory hash (every name in an indexed directory).
//!
//! `cargo bench -p ext4r-format`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ext4r_format::htree::{dx_hash, hash_version};
use ext4r_format::inode::inode_checksum;
use ext4r_format::InodeNr;

/// Names as `cp -r` of a source tree or a mail spool leave them: 4 to 40
/// bytes, across str2hashbuf's word and chunk ends.
fn names() -> Vec<Vec<u8>> {
    (0..256u32)
        .map(|i| {
            let len = 4 + (i as usize * 7) % 37;
            (0..len)
                .map(|k| b'a' + ((i as usize + k * 3) % 26) as u8)
                .collect()
        })
        .collect()
}

fn hashes(c: &mut Criterion) {
    let names = names();
    let seed = [0x15ee_ffc0, 0x7856_3412, 0xf0de_bc9a, 0x7856_3412];
    let mut g = c.benchmark_group("dx_hash");
    g.throughput(Throughput::Elements(names.len() as u64));
    for (label, version) in [
        ("half_md4", hash_version::HALF_MD4),
        ("tea", hash_version::TEA),
    ] {
        g.bench_function(label, |b| {
            b.iter(|| {
                for n in &names {
                    black_box(dx_hash(version, black_box(n), &seed).ok());
                }
            })
        });
    }
    g.finish();
}

fn inode_checksums(c: &mut Criterion) {
    // 256-byte records as mke2fs makes them, with some bytes set.
    let records: Vec<[u8; 256]> = (0..256u32)
        .map(|i| {
            let mut r = [0u8; 256];
            r[0x80] = 32; // i_extra_isize
            r[..4].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_le_bytes());
            r
        })
        .collect();
    let mut g = c.benchmark_group("inode_checksum");
    g.throughput(Throughput::Elements(records.len() as u64));
    g.bench_function("256", |b| {
        b.iter(|| {
            for (k, r) in records.iter().enumerate() {
                black_box(inode_checksum(0x1234_5678, InodeNr(k as u32 + 12), black_box(r)).ok());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, hashes, inode_checksums);
criterion_main!(benches);
