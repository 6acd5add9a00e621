//! Interactive repair with scripted answers: what is declined stays and is
//! not written, "all" stops the questions; what a run records in the
//! superblock when it ends, declines, is cancelled or finds nothing.

use super::*;
use crate::check::check_shared;
use ext4r::device::MemDevice;
use ext4r::mkfs::{format, MkfsOptions};
use ext4r_format::superblock::STATE_VALID;

/// A fresh 32 MiB ext2 (1 KiB blocks, four groups, 32-byte descriptors
/// at block 2) with three group counts made wrong.
fn damaged() -> Arc<dyn BlockDevice> {
    let dev = MemDevice::new(32 << 20);
    let opts = MkfsOptions {
        size_bytes: 32 << 20,
        now: 1_700_000_000,
        fs_type: Some("ext2".into()),
        block_size: Some(1024),
        uuid: Some("01234567-89ab-cdef-0123-456789abcdef".into()),
        ..Default::default()
    };
    format(&dev, &opts, true).expect("mkfs");
    // (group, offset in its descriptor: 12 free blocks, 14 free inodes).
    for (group, field) in [(0u64, 12u64), (1, 12), (2, 14)] {
        let at = 2048 + group * 32 + field;
        let mut b = [0u8; 2];
        dev.read_at(&mut b, at).expect("read");
        let v = u16::from_le_bytes(b).wrapping_sub(3);
        dev.write_at(&v.to_le_bytes(), at).expect("write");
    }
    Arc::new(dev)
}

fn opts() -> Options {
    Options {
        force: true,
        now: 1_700_000_100,
        ..Options::default()
    }
}

fn no_progress(_: u8, _: u64, _: u64) {}

/// The group problems of a check, as what names them.
fn group_problems(dev: &Arc<dyn BlockDevice>) -> Vec<crate::problem::Key> {
    let r = check_shared(dev.clone(), &opts(), &mut no_progress).expect("check");
    r.problems
        .list()
        .iter()
        .filter(|p| p.code.name().ends_with("_GROUP"))
        .map(Problem::key)
        .collect()
}

#[test]
fn declined_problems_stay_and_the_rest_is_fixed() {
    let dev = damaged();
    let before = group_problems(&dev);
    assert_eq!(before.len(), 3, "{before:?}");
    let mut asked = Vec::new();
    let mut ask = |p: &Problem| {
        asked.push(p.key());
        // No to the second group problem, yes to everything else.
        if p.key() == before[1] {
            Answer::No
        } else {
            Answer::Yes
        }
    };
    let r = repair_interactive(dev.clone(), &opts(), false, &mut no_progress, &mut ask)
        .expect("repair");
    // Each problem asked about once, although the declined one is found
    // again by the later rounds.
    let unique: std::collections::HashSet<_> = asked.iter().collect();
    assert_eq!(unique.len(), asked.len(), "{asked:?}");
    assert_eq!(r.declined.len(), 1);
    assert_eq!(r.declined[0].key(), before[1]);
    assert!(r.last.has_errors());
    assert_eq!(r.exit_code(), 4);
    // Only the declined one is left on disk.
    assert_eq!(group_problems(&dev), vec![before[1].clone()]);
}

fn image(d: &Arc<dyn BlockDevice>) -> Vec<u8> {
    let mut b = vec![0u8; 32 << 20];
    d.read_at(&mut b, 0).expect("read");
    b
}

/// The superblock's (state, mount count, last check, error count).
fn bookkeeping(d: &Arc<dyn BlockDevice>) -> (u16, u16, i64, u32) {
    let fs = super::open(d).expect("open");
    let sb = fs.superblock();
    (
        sb.s_state.get(),
        sb.s_mnt_count.get(),
        sb.lastcheck(),
        sb.s_error_count.get(),
    )
}

/// Marks the superblock as the kernel leaves it after errors: mounted
/// a few times, an error counted.
fn with_history(dev: &Arc<dyn BlockDevice>) {
    let fs = super::open(dev).expect("open");
    let mut sb = fs.superblock().clone();
    sb.s_mnt_count.set(5);
    sb.s_error_count.set(2);
    writer::write_superblock(&fs, sb, 1_700_000_050).expect("write");
}

#[test]
fn no_to_everything_writes_only_the_bookkeeping() {
    let dev = damaged();
    with_history(&dev);
    let was = image(&dev);
    let mut ask = |_: &Problem| Answer::No;
    let r = repair_interactive(dev.clone(), &opts(), false, &mut no_progress, &mut ask)
        .expect("repair");
    assert!(r.fixed.is_empty());
    assert!(!r.declined.is_empty());
    assert_eq!(r.exit_code(), 4);
    // As e2fsck after a run answered "no": not valid, checked now, the
    // mount count and the error record reset; nothing else written (the
    // superblock is block 1).
    assert_eq!(
        bookkeeping(&dev),
        (0, 0, opts().now, 0),
        "state, mounts, last check, errors"
    );
    let now = image(&dev);
    assert!(
        was[..1024] == now[..1024] && was[2048..] == now[2048..],
        "a run that fixed nothing wrote more than its superblock"
    );
}

#[test]
fn a_cancelled_run_applies_and_records_nothing() {
    let dev = damaged();
    with_history(&dev);
    let was = image(&dev);
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let o = Options {
        cancel: Some(flag),
        ..opts()
    };
    let r = repair(dev.clone(), &o, Mode::Yes, false, &mut no_progress).expect("repair");
    assert!(r.cancelled);
    assert!(r.fixed.is_empty(), "{:?}", r.fixed);
    assert_eq!(r.exit_code(), 32);
    assert!(was == image(&dev), "a cancelled run wrote");
}

#[test]
fn a_clean_forced_run_records_the_check() {
    let dev = damaged();
    let r = repair(dev.clone(), &opts(), Mode::Yes, false, &mut no_progress).expect("repair");
    assert_eq!(r.exit_code(), 1);
    with_history(&dev);
    let r = repair(dev.clone(), &opts(), Mode::Yes, false, &mut no_progress).expect("repair");
    assert_eq!(r.exit_code(), 0, "{:?}", r.fixed);
    assert_eq!(bookkeeping(&dev), (STATE_VALID, 0, opts().now, 0));
}

#[test]
fn all_answers_yes_to_the_rest_without_asking() {
    let dev = damaged();
    let before = group_problems(&dev);
    let mut asked = 0;
    let mut ask = |_: &Problem| {
        asked += 1;
        if asked == 1 {
            Answer::No
        } else {
            Answer::All
        }
    };
    let r = repair_interactive(dev.clone(), &opts(), false, &mut no_progress, &mut ask)
        .expect("repair");
    assert_eq!(asked, 2, "questions after 'all'");
    assert_eq!(r.declined.len(), 1);
    // The first "no" still stands after the "all".
    assert_eq!(group_problems(&dev), vec![before[0].clone()]);
    assert_eq!(r.exit_code(), 4);
}
