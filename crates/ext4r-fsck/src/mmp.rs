//! The multiple-mount-protection block, as e2fsck's `e2fsck_check_mmp`
//! judges it: the block is filesystem metadata (claimed, so that pass 5
//! keeps it in the bitmap), its magic and (with metadata_csum) checksum
//! must hold, and a bad one is rewritten as `ext2fs_mmp_reset` makes it:
//! clean sequence, time 0, this host's name, the superblock's interval.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::mmp::{MmpStruct, MMP_MAGIC, MMP_MIN_CHECK_INTERVAL, MMP_SEQ_CLEAN, MMP_SIZE};

use crate::ctx::Ctx;
use crate::fix::Fix;

pub(crate) fn check(c: &mut Ctx) {
    if !c.sb().has_incompat(Incompat::MMP) {
        return;
    }
    let b = c.sb().s_mmp_block.get();
    if b <= c.geo().first_data_block || b >= c.geo().blocks_count {
        // e2fsck: "MMP block ... is beyond the end"; not claimed.
        return;
    }
    c.claim(b, 1, 0);
    let mut buf = vec![0u8; MMP_SIZE];
    if c.fs()
        .device()
        .read_at(&mut buf, b * u64::from(c.geo().block_size))
        .is_err()
    {
        return;
    }
    let magic = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if magic != MMP_MAGIC {
        c.report(Subject::Filesystem).error_fix(
            0,
            ProblemCode::PR_0_MMP_INVALID_MAGIC,
            "Superblock has invalid MMP magic.".into(),
            Fix::ResetMmp(b),
        );
        return;
    }
    let Ok(m) = MmpStruct::parse(&buf) else {
        return;
    };
    if c.sb().has_ro_compat(RoCompat::METADATA_CSUM)
        && m.verify_checksum(c.sb().csum_seed()).is_err()
    {
        c.report(Subject::Filesystem).error_fix(
            0,
            ProblemCode::PR_0_MMP_CSUM_INVALID,
            "Superblock MMP block checksum does not match.".into(),
            Fix::ResetMmp(b),
        );
    }
}

/// The block `ext2fs_mmp_reset` writes (its checksum, with metadata_csum,
/// is stamped by the write layer).
pub(crate) fn reset_block(update_interval: u16, block_size: usize) -> Vec<u8> {
    let host = rustix::system::uname();
    let interval = update_interval.max(MMP_MIN_CHECK_INTERVAL);
    let m = MmpStruct::new(MMP_SEQ_CLEAN, 0, host.nodename().to_bytes(), b"", interval);
    let mut out = vec![0u8; block_size];
    out[..MMP_SIZE].copy_from_slice(&m.to_bytes());
    out
}
