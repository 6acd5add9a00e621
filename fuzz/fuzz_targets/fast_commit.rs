//! Fast-commit replay on crafted areas: the input is a stream of records
//! (tag: u16, length: u8, value bytes) written into the fast-commit area
//! of a small fixed filesystem (a directory and two files) with a head
//! and a good tail, so that whatever the records say reaches the replay;
//! when the first input byte is odd the raw input bytes are the area
//! instead (the scan's own checks). The journal is marked as needing
//! recovery and recovered through the engine. A refusal, an error or a
//! replay that stops is fine; a panic, hang or unbounded allocation is a
//! bug, and the filesystem must still open afterwards.
//!
//! ```text
//! cargo +nightly fuzz run fast_commit -- -max_total_time=600
//! ```
#![no_main]

use ext4r::device::{BlockDevice, MemDevice};
use ext4r::fs::Filesystem;
use ext4r::journal::{Journal, JournalLocation};
use ext4r::mkfs::{format, MkfsOptions};
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use ext4r_format::jbd2::fast_commit::{tag, FcWriter};
use ext4r_format::jbd2::{JournalIncompat, JournalSuperblock, JOURNAL_SUPERBLOCK_SIZE};
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

const BS: u64 = 1024;
const TID: u32 = 9;

struct Base {
    image: Vec<u8>,
    loc: JournalLocation,
}

fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let dev = Arc::new(MemDevice::new(8 << 20));
        let opts = MkfsOptions {
            size_bytes: 8 << 20,
            now: 1_700_000_000,
            block_size: Some(BS as u32),
            features: vec!["fast_commit".into()],
            ..Default::default()
        };
        format(&*dev, &opts, true).expect("mkfs");
        let mut w = WriteFs::open(dev.clone(), WriteOptions::default()).expect("open");
        let d = w.mkdir(ROOT_INO, b"d", &NewNode::dir(0o755)).expect("mkdir");
        let a = w.create(d, b"a", &NewNode::file(0o644)).expect("create");
        w.write(a, 0, &[1; 3000]).expect("write");
        let b = w.create(ROOT_INO, b"b", &NewNode::file(0o600)).expect("create");
        w.write(b, 0, &[2; 40]).expect("write");
        w.close().expect("close");
        let fs = Filesystem::open(dev.snapshot()).expect("reopen");
        let loc = fs.journal_location().expect("journal").expect("journal");
        Base {
            image: dev.to_vec().expect("image"),
            loc,
        }
    })
}

/// Writes `blocks` as the fast-commit area and leaves the journal needing
/// recovery with an empty log whose next transaction is `TID`.
fn arm(dev: &MemDevice, loc: &JournalLocation, blocks: &[Vec<u8>]) -> Option<()> {
    let mut b = [0u8; JOURNAL_SUPERBLOCK_SIZE];
    let at = loc.device_block(0)?.0 * BS;
    dev.read_at(&mut b, at).ok()?;
    let mut sb = JournalSuperblock::parse(&b).ok()?;
    sb.s_feature_incompat
        .set(sb.s_feature_incompat.get() | JournalIncompat::FAST_COMMIT.bits());
    let first = u64::from(sb.s_first.get());
    sb.s_start.set(first as u32);
    sb.s_sequence.set(TID);
    dev.write_at(&sb.to_bytes(), at).ok()?;
    dev.write_at(&[0u8; BS as usize], loc.device_block(first)?.0 * BS)
        .ok()?;
    let fc0 = u64::from(sb.s_maxlen.get()) - u64::from(sb.num_fc_blocks()) + 1;
    for (k, blk) in blocks.iter().enumerate() {
        let Some(d) = loc.device_block(fc0 + k as u64) else {
            break;
        };
        dev.write_at(blk, d.0 * BS).ok()?;
    }
    let mut raw = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut raw, SUPERBLOCK_OFFSET).ok()?;
    let mut fsb = Superblock::parse(&raw).ok()?;
    fsb.s_feature_incompat
        .set(fsb.s_feature_incompat.get() | ext4r_format::features::Incompat::RECOVER.bits());
    ext4r_txn::csum::Checksums::stamp_superblock(&mut fsb);
    dev.write_at(&fsb.to_bytes(), SUPERBLOCK_OFFSET).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some(&mode) = data.first() else {
        return;
    };
    let base = base();
    let blocks: Vec<Vec<u8>> = if mode & 1 == 1 {
        data[1..]
            .chunks(BS as usize)
            .take(64)
            .map(|c| {
                let mut b = c.to_vec();
                b.resize(BS as usize, 0);
                b
            })
            .collect()
    } else {
        let mut w = FcWriter::new(BS as usize, TID);
        let mut rest = &data[1..];
        let mut n = 0;
        while rest.len() >= 3 && n < 200 {
            let t = u16::from_le_bytes([rest[0], rest[1]]) % 10;
            let len = usize::from(rest[2]).min(rest.len() - 3);
            let value = &rest[3..3 + len];
            rest = &rest[3 + len..];
            if t == tag::TAIL || t == tag::HEAD {
                w.tail(TID);
            } else {
                w.record(t, value);
            }
            n += 1;
        }
        w.tail(TID);
        w.finish()
    };
    let dev = Arc::new(MemDevice::from_bytes(&base.image));
    if arm(&dev, &base.loc, &blocks).is_none() {
        return;
    }
    let shared: Arc<dyn BlockDevice> = dev.clone();
    let Ok(j) = Journal::open(shared.clone(), base.loc.clone(), BS as u32) else {
        return;
    };
    let _ = ext4r::write::recover_journal(&shared, &j, Some((1_700_000_100, 0)));
    // Whatever was replayed, the filesystem still opens and reads.
    if let Ok(fs) = Filesystem::open(dev.snapshot()) {
        for p in ["/", "/d"] {
            let _ = fs.read_dir_path(p);
        }
    }
});
