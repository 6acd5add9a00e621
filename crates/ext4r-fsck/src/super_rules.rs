//! The rest of e2fsck's `check_super_block` (e2fsck/super.c) and the
//! superblock fixes unix.c makes around it: feature combinations that
//! cannot be, times in the future, a missing UUID or hash hint, the test
//! flag, a revision 0 superblock with features, an MMP block out of range.
//! Each repair is a [`SuperEdit`] of the superblock the fix writer holds.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::superblock::{FLAGS_SIGNED_HASH, FLAGS_TEST_FS, FLAGS_UNSIGNED_HASH};

use crate::ctx::Ctx;
use crate::fix::super_edit::SuperEdit;
use crate::fix::Fix;

/// Touch-ups e2fsck makes to the superblock without counting the
/// filesystem as changed or forcing a check of one marked clean.
pub(crate) fn cosmetic(code: ProblemCode) -> bool {
    matches!(
        code,
        ProblemCode::PR_0_ADD_UUID
            | ProblemCode::PR_0_DIRHASH_HINT
            | ProblemCode::PR_0_CLEAR_TESTFS_FLAG
            | ProblemCode::PR_0_FUTURE_SB_LAST_MOUNT
            | ProblemCode::PR_0_FUTURE_SB_LAST_WRITE
            | ProblemCode::PR_0_FUTURE_SB_LAST_MOUNT_FUDGED
            | ProblemCode::PR_0_FUTURE_SB_LAST_WRITE_FUDGED
            | ProblemCode::PR_0_BACKUP_JNL
            | ProblemCode::PR_0_MOVE_JOURNAL
            | ProblemCode::PR_0_HIDE_QUOTA
    )
}

/// How far in the future a superblock time may be before it is more than
/// a wrong clock (e2fsck's default `accept_time_fudge`).
const TIME_FUDGE: i64 = 86_400;

pub(crate) fn check(c: &mut Ctx) {
    let sb = c.sb().clone();
    let csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
    if sb.has_incompat(Incompat::BIT64) && !sb.has_incompat(Incompat::EXTENTS) {
        c.report(Subject::Filesystem).harmless_fix(
            0,
            ProblemCode::PR_0_64BIT_WITHOUT_EXTENTS,
            "Superblock 64bit filesystem needs extents to access the whole disk.".into(),
            Fix::SetIncompat(Incompat::EXTENTS.bits()),
        );
    }
    if !csum && sb.has_incompat(Incompat::CSUM_SEED) {
        c.report(Subject::Filesystem).harmless_fix(
            0,
            ProblemCode::PR_0_CSUM_SEED_WITHOUT_META_CSUM,
            "Superblock metadata_csum_seed is not necessary without metadata_csum.".into(),
            Fix::Superblock(SuperEdit::NoCsumSeed),
        );
    }
    let desc_blocks = c.geo().desc_blocks();
    if sb.has_incompat(Incompat::META_BG) && sb.s_first_meta_bg.get() > desc_blocks {
        c.report(Subject::Filesystem).error_fix(
            0,
            ProblemCode::PR_0_FIRST_META_BG_TOO_BIG,
            format!(
                "First_meta_bg is too big.  ({}, max value {desc_blocks}).",
                sb.s_first_meta_bg.get()
            ),
            Fix::Superblock(SuperEdit::NoMetaBg),
        );
    }
    // What e2fsck changes only when it may write.
    if !c.repairing() {
        return;
    }
    if sb.s_uuid == [0; 16] && !csum {
        let uuid = new_uuid(c.now());
        c.report(Subject::Filesystem).harmless_fix(
            0,
            ProblemCode::PR_0_ADD_UUID,
            "Filesystem did not have a UUID; generating one.".into(),
            Fix::Superblock(SuperEdit::Uuid(uuid)),
        );
    }
    let hash_flags = FLAGS_SIGNED_HASH | FLAGS_UNSIGNED_HASH;
    if sb.has_compat(Compat::DIR_INDEX) && sb.s_flags.get() & hash_flags == 0 {
        // The hash the checker has used all along for a filesystem
        // without the hint (x86's signed char; e2fsck picks its host's).
        c.report(Subject::Filesystem).harmless_fix(
            0,
            ProblemCode::PR_0_DIRHASH_HINT,
            "Adding dirhash hint to filesystem.".into(),
            Fix::Superblock(SuperEdit::Flags(FLAGS_SIGNED_HASH, 0)),
        );
    }
    if sb.s_flags.get() & FLAGS_TEST_FS != 0 && ext4_available() {
        c.report(Subject::Filesystem).harmless_fix(
            0,
            ProblemCode::PR_0_CLEAR_TESTFS_FLAG,
            "The test_fs flag is set (and ext4 is available).".into(),
            Fix::Superblock(SuperEdit::Flags(0, FLAGS_TEST_FS)),
        );
    }
    if sb.s_rev_level.get() == 0
        && (sb.s_feature_compat.get() | sb.s_feature_ro_compat.get() | sb.s_feature_incompat.get())
            != 0
    {
        c.report(Subject::Filesystem).error_fix(
            0,
            ProblemCode::PR_0_FS_REV_LEVEL,
            "Filesystem has feature flag(s) set, but is a revision 0 filesystem.".into(),
            Fix::Superblock(SuperEdit::DynamicRev),
        );
    }
    // Times in the future, with -f or a check interval (e2fsck's rule).
    if c.now() > 0 && (c.forced() || sb.s_checkinterval.get() != 0) {
        for (mount, code, fudged, what, t) in [
            (
                true,
                ProblemCode::PR_0_FUTURE_SB_LAST_MOUNT,
                ProblemCode::PR_0_FUTURE_SB_LAST_MOUNT_FUDGED,
                "mount",
                sb.mtime(),
            ),
            (
                false,
                ProblemCode::PR_0_FUTURE_SB_LAST_WRITE,
                ProblemCode::PR_0_FUTURE_SB_LAST_WRITE_FUDGED,
                "write",
                sb.wtime(),
            ),
        ] {
            let now = c.now();
            if t > now {
                let code = if t <= now + TIME_FUDGE { fudged } else { code };
                c.report(Subject::Filesystem).harmless_fix(
                    0,
                    code,
                    format!("Superblock last {what} time is in the future."),
                    Fix::Superblock(SuperEdit::Time(mount, now)),
                );
            }
        }
    }
    let mmp = sb.s_mmp_block.get();
    if sb.has_incompat(Incompat::MMP)
        && (mmp <= c.geo().first_data_block || mmp >= c.geo().blocks_count)
    {
        // e2fsck zeroes the field (and finds it again next time); a new
        // block, reset by the next round, leaves a usable MMP.
        if let Some(b) = crate::lost_found::reserve_block(c) {
            c.report(Subject::Filesystem).error_fix(
                0,
                ProblemCode::PR_0_MMP_INVALID_BLK,
                "Superblock has invalid MMP block.".into(),
                Fix::Superblock(SuperEdit::MmpBlock(b)),
            );
        }
    }
}

/// Whether the running kernel has ext4 (e2fsck's `fs_proc_check`).
fn ext4_available() -> bool {
    std::fs::read_to_string("/proc/filesystems").is_ok_and(|s| {
        s.lines()
            .any(|l| l.split_whitespace().last() == Some("ext4"))
    })
}

/// A random (version 4) UUID; from the clock when the system has no
/// randomness to give.
fn new_uuid(now: i64) -> [u8; 16] {
    let mut u = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut u))
        .is_ok();
    if !random {
        let seed = (now as u128) << 64 | u128::from(std::process::id());
        u = seed.to_le_bytes();
    }
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}
