//! Recovery on logs built by [`super::testlog`]: every layout, revokes,
//! escapes, wrap-around, checksum failures, random corruption, and crashes
//! while applying.

use super::testlog::TestLog;
use super::*;
use crate::device::{BlockDevice, FaultDevice, MemDevice};
use ext4r_format::jbd2::{JournalCompat, JournalIncompat, JBD2_MAGIC};
use ext4r_format::superblock::{Superblock, STATE_ERROR, STATE_VALID};
use ext4r_format::BlockNr;
use proptest::prelude::*;
use std::collections::BTreeMap;

const BIT64: u32 = JournalIncompat::BIT64.bits();
const V2: u32 = JournalIncompat::CSUM_V2.bits();
const V3: u32 = JournalIncompat::CSUM_V3.bits();
const V1: u32 = JournalCompat::CHECKSUM.bits();
const ASYNC: u32 = JournalIncompat::ASYNC_COMMIT.bits();

/// (compat, incompat) of every layout recovery must read.
const LAYOUTS: [(u32, u32); 7] = [
    (0, 0),
    (0, BIT64),
    (V1, 0),
    (0, V2),
    (0, V2 | BIT64),
    (0, V3),
    (0, V3 | BIT64),
];

fn planned(r: &Recovery) -> BTreeMap<u64, Vec<u8>> {
    r.plan.iter().map(|(b, d)| (b.0, d.to_vec())).collect()
}

fn escaped_block(bs: u32) -> Vec<u8> {
    let mut b = vec![0x11; bs as usize];
    b[..4].copy_from_slice(&JBD2_MAGIC.to_be_bytes());
    b
}

#[test]
fn replays_every_layout_with_revokes_and_escapes() {
    for bs in [1024u32, 4096] {
        for (compat, incompat) in LAYOUTS {
            let mut t = TestLog::new(bs, 4096, 1024, compat, incompat);
            t.transaction(&[(100, t.block(1)), (101, t.block(2))], &[]);
            t.transaction(&[(102, escaped_block(bs))], &[101]);
            t.transaction(&[(100, t.block(3))], &[]);
            t.end();
            let r = t.journal().recover(4096, 256);
            let what = format!("bs {bs} compat {compat:#x} incompat {incompat:#x}");
            assert!(r.problem.is_none(), "{what}: {:?}", r.problem);
            assert_eq!((r.start_transaction, r.end_transaction), (1, 4), "{what}");
            assert_eq!(r.next_sequence, 5, "{what}");
            let want = BTreeMap::from([(100, t.block(3)), (102, escaped_block(bs))]);
            assert_eq!(planned(&r), want, "{what}");
            assert_eq!((r.replayed, r.revoke_hits, r.revoke_records), (3, 1, 1));
        }
    }
}

#[test]
fn revoke_cancels_only_earlier_or_same_transactions() {
    let mut t = TestLog::new(1024, 4096, 1024, 0, V3);
    t.transaction(&[(50, t.block(1))], &[]);
    t.transaction(&[(50, t.block(2))], &[50]); // revoked by itself
    t.transaction(&[(51, t.block(3))], &[]);
    t.transaction(&[(51, t.block(4))], &[]);
    t.transaction(&[], &[51]); // cancels both copies of 51
    t.transaction(&[(50, t.block(5))], &[]); // after the revoke: kept
    t.end();
    let r = t.journal().recover(4096, 256);
    assert!(r.problem.is_none());
    assert_eq!(planned(&r), BTreeMap::from([(50, t.block(5))]));
}

#[test]
fn the_log_wraps_at_its_end() {
    for (compat, incompat) in LAYOUTS {
        let mut t = TestLog::new(1024, 4096, 1024, compat, incompat);
        t.start_at(1020, 77);
        let blocks: Vec<_> = (0..6).map(|k| (200 + k, t.block(k as u8 + 1))).collect();
        t.transaction(&blocks, &[]);
        t.transaction(&[(300, t.block(9))], &[]);
        assert!(t.next < 1020, "the log wrapped");
        t.end();
        let r = t.journal().recover(4096, 256);
        assert!(r.problem.is_none(), "{:?}", r.problem);
        assert_eq!(r.end_transaction, 79);
        assert_eq!(r.plan.len(), 7);
        assert_eq!(r.plan.get(BlockNr(205)), Some(&t.block(6)[..]));
    }
}

#[test]
fn fast_commit_area_is_not_log() {
    let fc = JournalIncompat::FAST_COMMIT.bits();
    let mut t = TestLog::new(1024, 8192, 2048, 0, V3 | fc);
    assert_eq!(t.sb.log_end(), Some(2048 - 64));
    t.start_at(1980, 5);
    t.transaction(&[(10, t.block(1)), (11, t.block(2))], &[]);
    t.transaction(&[(12, t.block(3))], &[]);
    t.end();
    let r = t.journal().recover(8192, 256);
    assert!(r.problem.is_none(), "{:?}", r.problem);
    // The area after the log holds no head: no fast commits.
    assert!(r.fast_commit.is_none());
    assert_eq!(r.plan.len(), 3);
}

#[test]
fn bad_data_checksum_skips_the_block_and_fails_recovery() {
    for incompat in [V2, V3] {
        let mut t = TestLog::new(1024, 4096, 1024, 0, incompat);
        t.transaction(&[(60, t.block(1))], &[]);
        t.transaction(&[(60, t.block(2)), (61, t.block(3))], &[]);
        t.end();
        // Corrupt the data block of 60 in transaction 2 (log block 5).
        let at = t.map[5].0 * 1024 + 100;
        t.dev.write_at(&[0xff], at).unwrap();
        let r = t.journal().recover(4096, 256);
        assert!(r.problem.is_some());
        // Said as e2fsck says it: the block, and EFSBADCRC.
        assert_eq!(r.bad_copies, [60]);
        assert!(r.checksum_error);
        assert_eq!(r.next_sequence, 1, "a failed recovery keeps s_sequence");
        assert_eq!(
            planned(&r),
            BTreeMap::from([(60, t.block(1)), (61, t.block(3))])
        );
    }
}

#[test]
fn bad_commit_checksum_ends_the_log_unless_async() {
    for (compat, incompat) in [(V1, 0), (0, V3), (V1, ASYNC), (0, V3 | ASYNC)] {
        let mut t = TestLog::new(1024, 4096, 1024, compat, incompat);
        t.transaction(&[(70, t.block(1))], &[]);
        let c = t.transaction(&[(71, t.block(2))], &[]);
        t.transaction(&[(72, t.block(3))], &[]);
        t.end();
        t.dev
            .write_at(&[0xee], t.map[c as usize].0 * 1024 + 18)
            .unwrap();
        let r = t.journal().recover(4096, 256);
        assert!(r.problem.is_none(), "{:?}", r.problem);
        // With async commit the scan goes on past the bad commit; only v1
        // then names it failed, at the next commit.
        let failed = (incompat != V3 | ASYNC).then_some(2);
        assert_eq!(r.failed_commit, failed, "{compat:#x} {incompat:#x}");
        assert_eq!(r.end_transaction, 2);
        assert_eq!(planned(&r), BTreeMap::from([(70, t.block(1))]));
    }
}

#[test]
fn bad_descriptor_checksum_fails_unless_stale() {
    let mut t = TestLog::new(1024, 4096, 1024, 0, V3);
    t.transaction(&[(80, t.block(1))], &[]);
    t.transaction(&[(81, t.block(2))], &[]);
    t.end();
    // Descriptor of transaction 2 at log block 4.
    t.dev.write_at(&[0xee], t.map[4].0 * 1024 + 40).unwrap();
    let r = t.journal().recover(4096, 256);
    assert!(r.problem.is_some());
    assert!(r.checksum_error && r.bad_copies.is_empty());
    assert!(r.plan.is_empty(), "a failed scan replays nothing");

    // The same with a commit time older than the one before: stale blocks
    // of an earlier use of the journal, the end of the log.
    let mut t = TestLog::new(1024, 4096, 1024, 0, V3);
    t.transaction(&[(80, t.block(1))], &[]);
    t.time = 10;
    t.transaction(&[(81, t.block(2))], &[]);
    t.end();
    t.dev.write_at(&[0xee], t.map[4].0 * 1024 + 40).unwrap();
    let r = t.journal().recover(4096, 256);
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert!(!r.checksum_error);
    assert_eq!(r.end_transaction, 2);
    assert_eq!(planned(&r), BTreeMap::from([(80, t.block(1))]));
}

#[test]
fn clean_journal_and_bad_superblocks() {
    let mut t = TestLog::new(1024, 4096, 1024, 0, V3);
    t.start_at(0, 9);
    let r = t.journal().recover(4096, 256);
    assert!(r.problem.is_none() && r.plan.is_empty());
    assert_eq!(r.next_sequence, 10);
    let loc = || JournalLocation::internal(t.map.clone());
    assert!(Journal::open(&t.dev, loc(), 4096).is_err(), "block size");
    assert!(Journal::open(
        &t.dev,
        JournalLocation::internal(t.map[..10].to_vec()),
        1024
    )
    .is_err());
    t.sb.s_checksum.set(1);
    let at = t.map[0].0 * 1024;
    t.dev.write_at(&t.sb.to_bytes(), at).unwrap();
    assert!(Journal::open(&t.dev, loc(), 1024).is_err(), "checksum");
}

#[test]
fn overlay_reads_the_recovered_filesystem() {
    let mut t = TestLog::new(1024, 4096, 1024, 0, V3);
    t.transaction(&[(100, t.block(1)), (101, t.block(2))], &[]);
    t.end();
    let r = t.journal().recover(4096, 256);
    let o = JournalOverlay::recovered(&t.dev, r).unwrap();
    let mut buf = vec![0u8; 3000];
    o.read_at(&mut buf, 100 * 1024 - 500).unwrap();
    assert!(buf[..500].iter().all(|&b| b == 0));
    assert!(buf[500..1524].iter().all(|&b| b == 1));
    assert!(buf[1524..2548].iter().all(|&b| b == 2));
    let mut sb = [0u8; 1024];
    o.read_at(&mut sb, 1024).unwrap();
    let sb = Superblock::parse(&sb).unwrap();
    assert_eq!(sb.s_feature_incompat.get() & 4, 0, "needs_recovery cleared");
    assert!(o.write_at(&[0], 0).is_err());
    assert!(o.zeroout(0, 1).is_err());
    assert!(o.read_at(&mut buf, 4096 * 1024 - 10).is_err());
}

/// A log of several transactions (wrapping), as a fresh image.
fn crash_image() -> TestLog {
    let mut t = TestLog::new(1024, 4096, 1024, 0, V3 | BIT64);
    t.start_at(1015, 40);
    for k in 0..5u8 {
        let w: Vec<_> = (0..3)
            .map(|i| (300 + u64::from(k * 5 + i), t.block(k * 10 + i)))
            .collect();
        t.transaction(&w, &[]);
    }
    t.end();
    t
}

#[test]
fn replay_after_a_crash_at_every_write_converges() {
    let t = crash_image();
    let pristine = t.dev.to_vec().unwrap();
    let reference = MemDevice::from_bytes(&pristine);
    let r = recover_filesystem(&reference, &t_journal(&reference, &t)).unwrap();
    assert!(r.problem.is_none());
    let want = reference.to_vec().unwrap();
    let probe = FaultDevice::new(MemDevice::from_bytes(&pristine));
    recover_filesystem(&probe, &t_journal_on(&probe, &t)).unwrap();
    let total = probe.writes();
    assert!(total >= 7, "{total} writes");
    for n in 0..total {
        let dev = FaultDevice::new(MemDevice::from_bytes(&pristine));
        dev.fail_after(n);
        let journal = t_journal_on(&dev, &t);
        assert!(recover_filesystem(&dev, &journal).is_err(), "cut at {n}");
        let after = dev.into_inner();
        let again = recover_filesystem(&after, &t_journal(&after, &t)).unwrap();
        assert!(again.problem.is_none());
        assert!(
            after.to_vec().unwrap() == want,
            "cut after write {n} diverged"
        );
    }
    let mut sb = [0u8; 1024];
    reference.read_at(&mut sb, 1024).unwrap();
    let sb = Superblock::parse(&sb).unwrap();
    assert_eq!(sb.s_feature_incompat.get() & 4, 0);
    assert_eq!(sb.s_state.get() & (STATE_VALID | STATE_ERROR), STATE_VALID);
}

fn t_journal<'a>(dev: &'a MemDevice, t: &TestLog) -> Journal<&'a MemDevice> {
    Journal::open(dev, JournalLocation::internal(t.map.clone()), t.bs).unwrap()
}

fn t_journal_on<'a>(
    dev: &'a FaultDevice<MemDevice>,
    t: &TestLog,
) -> Journal<&'a FaultDevice<MemDevice>> {
    Journal::open(dev, JournalLocation::internal(t.map.clone()), t.bs).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random damage to the log's blocks: recovery ends (the walk is
    /// bounded by the journal's length), without panicking, with a plan
    /// no larger than the log.
    #[test]
    fn random_corruption_never_panics(
        layout in 0usize..LAYOUTS.len(),
        edits in proptest::collection::vec((1u64..24, 0usize..1024, any::<u8>()), 1..40),
        start in prop_oneof![Just(1u64), 1000u64..1023],
    ) {
        let (compat, incompat) = LAYOUTS[layout];
        let mut t = TestLog::new(1024, 2048, 1024, compat, incompat);
        t.start_at(start, 3);
        for k in 0..4u8 {
            let w: Vec<_> = (0..2).map(|i| (100 + u64::from(k + i), t.block(k + i))).collect();
            t.transaction(&w, &[u64::from(k) + 101]);
        }
        for (blk, off, val) in edits {
            let idx = (start + blk - 1) % 1023 + 1;
            t.dev.write_at(&[val], t.map[idx as usize].0 * 1024 + off as u64).unwrap();
        }
        let r = t.journal().recover(2048, 256);
        prop_assert!(r.plan.len() <= 1023);
        let _ = r.plan.apply(&t.dev);
    }

    /// Garbage where the log should be, including self-referencing
    /// descriptors: still bounded.
    #[test]
    fn garbage_logs_end(fill in proptest::collection::vec(any::<u8>(), 64), seq in any::<u32>()) {
        let mut t = TestLog::new(1024, 2048, 1024, 0, 0);
        t.start_at(1, seq);
        for i in 1..1024u64 {
            let mut b = t.block(0);
            for (k, x) in b.iter_mut().enumerate() {
                *x = fill[k % 64];
            }
            b[..12].copy_from_slice(&ext4r_format::jbd2::JournalHeader::new(1, seq).to_bytes());
            t.dev.write_at(&b, t.map[i as usize].0 * 1024).unwrap();
        }
        let r = t.journal().recover(2048, 256);
        prop_assert!(r.plan.len() <= 1023);
    }
}
