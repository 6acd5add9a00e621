//! The internal journal as e2fsck's `e2fsck_check_ext3_journal` judges it
//! before pass 1 (e2fsck/journal.c): first the inode (a regular file in
//! use, at least `JBD2_MIN_JOURNAL_BLOCKS` long, mapped to its size; when
//! it is not, the copy of its block map the superblock keeps in
//! `s_jnl_blocks`), then the journal superblock (`e2fsck_journal_load`),
//! then the superblock's journal flags.
//!
//! What each finding costs follows e2fsck: a journal that cannot be found
//! (no magic, a bad inode with no usable backup) is deleted (and made anew
//! at the end of the repair); a superblock that is corrupt otherwise is
//! reset to an empty log of the inode's length; fields e2fsck does not
//! read before deciding to replay are left alone, unless the kernel's jbd2
//! would refuse the log (`s_first` too close to `s_maxlen`).

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r::fs::InodeInfo;
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::inode::{ino, Inode, InodeFlags};
use ext4r_format::jbd2::{
    block_type, JournalCompat, JournalIncompat, JournalSuperblock, JBD2_MAGIC, MIN_JOURNAL_BLOCKS,
};
use ext4r_format::superblock::Superblock;
use ext4r_format::InodeNr;

use crate::ctx::Ctx;
use crate::fix::Fix;

/// `s_jnl_backup_type` when `s_jnl_blocks` holds the journal's `i_block`.
const JNL_BACKUP_BLOCKS: u8 = 1;

pub(crate) fn check(c: &mut Ctx) {
    let sb = c.sb().clone();
    let has = sb.has_compat(Compat::HAS_JOURNAL);
    let recover = sb.has_incompat(Incompat::RECOVER);
    let inum = sb.s_journal_inum.get();
    if !has && !recover && inum == 0 && sb.s_journal_dev.get() == 0 && sb.s_journal_uuid == [0; 16]
    {
        return;
    }
    if sb.s_journal_uuid != [0; 16] {
        external(c, has, recover);
        return;
    }
    let (info, from_backup) = match journal_inode(c, &sb, inum) {
        Ok(found) => found,
        Err(why) => {
            // The superblock may name the wrong inode: the reserved one
            // holding the journal the superblock's copy describes is the
            // evidence (rebuilding the named inode from the copy would
            // overwrite whatever file it is, as e2fsck would).
            match reserved_journal(c, &sb, inum) {
                Some(info) => {
                    c.report(Subject::Journal).error_fix(
                        0,
                        ProblemCode::EXT4R_0_JOURNAL_INUM,
                        format!(
                            "Superblock names inode {inum} as the journal ({why}); the journal \
                             is inode {}.",
                            ino::JOURNAL
                        ),
                        Fix::JournalInum(ino::JOURNAL),
                    );
                    c.journal_is_reserved_inode();
                    (info, false)
                }
                None => return bad_inode(c, has, recover, inum, &why),
            }
        }
    };
    if from_backup {
        // e2fsck takes the copy without a word and writes it back; pass 1
        // then judges the inode as restored, its blocks claimed here.
        c.journal_from_backup();
        // Its indirect or tree blocks too (pass 1 does not walk it).
        for (b, n) in crate::dup::mapped_blocks(c.fs(), &info.inode) {
            c.claim(b, n, inum);
        }
        // Silent in a repair, as e2fsck's; a read-only check leaves the
        // bad inode where it is, and e2fsck -n then finds it ("Journal is
        // not regular file", and more): an error, not a remark.
        let msg = format!("Journal inode {inum} is invalid; its copy in the superblock is used.");
        let fix = Fix::RestoreJournalInode(inum);
        if c.repairing() {
            c.report(Subject::Journal).harmless_fix(
                0,
                ProblemCode::EXT4R_0_JOURNAL_INODE_BACKUP,
                msg,
                fix,
            );
        } else {
            c.report(Subject::Journal).error_fix(
                0,
                ProblemCode::EXT4R_0_JOURNAL_INODE_BACKUP,
                msg,
                fix,
            );
        }
    }
    if inum != ino::JOURNAL && inum >= sb.first_ino() {
        // A journal in an ordinary inode number is legal but unusual.
        c.note(format!("Journal is in inode {inum}."));
    }
    if c.repairing() && has && !from_backup {
        backup(c, &sb, &info);
        crate::journal_move::check(c, inum, info.inode.links_count());
    }
    superblock(c, &sb, &info, has, recover);
    // Said once the journal is found good (after e2fsck's journal check).
    // (A repair replays a journal it can use before the check, and one it
    // cannot it resets: there is no read-only check to speak of.)
    if recover && !c.failed_in_journal() && !c.repairing() {
        c.note(
            "Warning: skipping journal recovery because doing a read-only filesystem check."
                .to_string(),
        );
    }
}

/// Under `-n` a journal e2fsck may not repair stops its check: its
/// e2fsck_check_ext3_journal fails with `why` ("while checking journal
/// for DEV"), before anything else is checked.
fn stop(c: &mut Ctx, why: &str) {
    if !c.repairing() {
        c.fail_in_journal(why.to_string());
    }
}

/// e2fsck's PR_0_JOURNAL_BAD_SUPER, then (under `-n`) the stop.
fn bad_super(c: &mut Ctx, at: u64, total: u32) {
    c.report(Subject::Journal).error_fix(
        0,
        ProblemCode::PR_0_JOURNAL_BAD_SUPER,
        "Journal superblock is corrupt.".into(),
        Fix::ResetJournalSuper(at, total),
    );
    stop(c, CORRUPT);
}

/// libext2fs's words for EXT2_ET_CORRUPT_JOURNAL_SB.
const CORRUPT: &str = "The journal superblock is corrupt";

/// e2fsck's `e2fsck_move_ext3_journal`: the superblock keeps a copy of
/// the journal inode's block map (`s_jnl_blocks`), written when missing
/// or stale, so that a damaged journal inode can be rebuilt.
fn backup(c: &mut Ctx, sb: &Superblock, info: &InodeInfo) {
    let mut words = [0u32; 17];
    words[..15].copy_from_slice(&info.inode.block_words());
    let size = info.inode.size();
    words[15] = ext4r_format::num::hi32(size);
    words[16] = ext4r_format::num::lo32(size);
    let stale = sb.s_jnl_backup_type == 0
        || (sb.s_jnl_backup_type == JNL_BACKUP_BLOCKS
            && sb
                .s_jnl_blocks
                .iter()
                .take(15)
                .zip(&words)
                .any(|(a, &b)| a.get() != b));
    if stale {
        c.report(Subject::Journal).harmless_fix(
            0,
            ProblemCode::PR_0_BACKUP_JNL,
            "Backing up journal inode block information.".into(),
            Fix::Superblock(crate::fix::super_edit::SuperEdit::JournalBackup(words)),
        );
    }
}

/// e2fsck's `e2fsck_journal_fix_bad_inode` (`why` the inode is no
/// journal, which e2fsck does not say); under `-n` the check stops.
fn bad_inode(c: &mut Ctx, has: bool, recover: bool, inum: u32, why: &str) {
    let _ = why;
    if has || inum != 0 {
        c.report(Subject::Journal).error_fix(
            0,
            ProblemCode::PR_0_JOURNAL_BAD_INODE,
            format!("Superblock has an invalid journal (inode {inum})."),
            Fix::DeleteJournal,
        );
        stop(c, CORRUPT);
    } else if recover {
        c.report(Subject::Journal).error_fix(
            0,
            ProblemCode::PR_0_JOURNAL_RECOVER_SET,
            "Superblock needs_recovery flag is set, but no journal is present.".into(),
            Fix::DeleteJournal,
        );
        stop(c, "Filesystem has unsupported feature(s)");
    }
}

/// A journal kept on another device (`s_journal_uuid` set).
fn external(c: &mut Ctx, has: bool, recover: bool) {
    if !has {
        if recover {
            c.report(Subject::Journal).error_fix(
                0,
                ProblemCode::PR_0_JOURNAL_RECOVER_SET,
                "Superblock needs_recovery flag is set, but no journal is present.".into(),
                Fix::DeleteJournal,
            );
        }
        return;
    }
    // As e2fsck: the UUID names the journal's device whatever inode the
    // superblock also names (the kernel goes by the inode; which of the two
    // is stray is not for a check to guess).
    if let Some(ext) = c.external_journal() {
        crate::external_journal::check(c, &ext);
    } else {
        // As e2fsck without -j: the journal cannot be found.
        c.report(Subject::Journal).error(
            0,
            ProblemCode::PR_0_CANT_FIND_JOURNAL,
            "Can't find external journal; the filesystem cannot be fully checked.".into(),
        );
    }
}

/// The journal inode if it can serve as one (e2fsck's
/// `e2fsck_get_journal`), else the one rebuilt from the superblock's copy
/// of its block map (second value true); else why neither serves.
fn journal_inode(c: &Ctx, sb: &Superblock, inum: u32) -> Result<(InodeInfo, bool), String> {
    if inum == 0 || inum > sb.s_inodes_count.get() {
        return Err("inode number out of range".into());
    }
    let own = c
        .fs()
        .inode(InodeNr(inum))
        .map_err(|e| ext4r::error::chain(&e))
        .and_then(|info| usable(c, &info).map(|()| info));
    match own {
        Ok(info) => Ok((info, false)),
        Err(why) => {
            // Only an inode that is the journal's own, or one nothing
            // uses, is rebuilt from the copy.
            let free = c
                .fs()
                .inode(InodeNr(inum))
                .is_ok_and(|i| i.inode.links_count() == 0);
            let backup = (sb.s_jnl_backup_type == JNL_BACKUP_BLOCKS
                && (inum == ino::JOURNAL || free))
                .then(|| from_backup(c, sb, inum))
                .flatten()
                .filter(|info| usable(c, info).is_ok());
            backup.map(|info| (info, true)).ok_or(why)
        }
    }
}

/// The reserved journal inode, when the superblock names another one
/// that cannot serve and inode 8 is a usable journal whose block map is
/// the superblock's copy of the journal's.
fn reserved_journal(c: &Ctx, sb: &Superblock, inum: u32) -> Option<InodeInfo> {
    if inum == ino::JOURNAL || sb.s_jnl_backup_type != JNL_BACKUP_BLOCKS {
        return None;
    }
    let info = c.fs().inode(InodeNr(ino::JOURNAL)).ok()?;
    usable(c, &info).ok()?;
    let words = info.inode.block_words();
    let same = sb
        .s_jnl_blocks
        .iter()
        .take(15)
        .zip(words.iter())
        .all(|(a, &b)| a.get() == b);
    same.then_some(info)
}

/// What e2fsck asks of a journal inode: a regular, unencrypted file in
/// use, at least the minimum journal length, its blocks mapped up to its
/// size.
fn usable(c: &Ctx, info: &InodeInfo) -> Result<(), String> {
    let i = &info.inode;
    if i.links_count() == 0 || !i.is_reg() || i.flags().contains(InodeFlags::ENCRYPT) {
        return Err("not a regular file in use".into());
    }
    let bs = u64::from(c.geo().block_size);
    if i.size() / bs < u64::from(MIN_JOURNAL_BLOCKS) {
        return Err("too small".into());
    }
    let runs = c.fs().runs(info).map_err(|e| ext4r::error::chain(&e))?;
    let mut next = 0u64;
    for r in &runs {
        if r.logical != next {
            return Err(format!("hole at block {next}"));
        }
        next = r.logical + r.len;
    }
    if next * bs < i.size() {
        return Err("blocks do not reach its size".into());
    }
    Ok(())
}

/// The journal inode as `s_jnl_blocks` describes it.
fn from_backup(c: &Ctx, sb: &Superblock, inum: u32) -> Option<InodeInfo> {
    let mut rec = c.fs().inode_record(InodeNr(inum)).ok()?;
    backup_record(sb, &mut rec)?;
    let inode = Inode::parse(&rec).ok()?;
    Some(InodeInfo {
        ino: InodeNr(inum),
        inode,
        record: rec,
    })
}

/// Rewrites the base of an inode record as e2fsck rebuilds a journal inode
/// from `s_jnl_blocks`: zeroed, then `i_block`, the size (words 15 and
/// 16), one link, a regular file of mode 0600; the extents flag when the
/// copy holds an extent tree (e2fsck sets it in pass 1 then).
pub(crate) fn backup_record(sb: &Superblock, rec: &mut [u8]) -> Option<()> {
    let words: Vec<u32> = sb.s_jnl_blocks.iter().map(|w| w.get()).collect();
    // The whole record: what lay past 128 bytes is as untrustworthy as
    // the rest (e2fsck's copy lives in memory; this one is written), with
    // the extra size a new inode gets.
    rec.fill(0);
    if rec.len() > 128 {
        let want = sb.s_want_extra_isize.get().max(32);
        let extra = want.min(u16::try_from(rec.len() - 128).unwrap_or(u16::MAX)) & !3;
        rec[128..130].copy_from_slice(&extra.to_le_bytes());
    }
    let mut inode = Inode::parse(rec).ok()?;
    let mut iblock = [0u8; 60];
    for (k, w) in words.iter().take(15).enumerate() {
        iblock[k * 4..k * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    inode.i_block = iblock;
    inode.i_mode.set(0o100600);
    inode.i_links_count.set(1);
    inode.set_size(u64::from(*words.get(15)?) << 32 | u64::from(*words.get(16)?));
    let extents = iblock[..2] == ext4r_format::extent::EXTENT_MAGIC.to_le_bytes();
    if extents {
        inode.set_flags(InodeFlags::EXTENTS);
    }
    // i_blocks as e2fsck's pass 1 then counts it: the journal's blocks
    // and, for a block map, its indirect blocks (a tree deeper than the
    // inode is left to pass 1).
    if let Some(bs) = sb.block_size() {
        let n = inode.size().div_ceil(u64::from(bs));
        let depth = u16::from_le_bytes([iblock[6], iblock[7]]);
        let total = if !extents {
            Some(n + map_overhead(n, u64::from(bs / 4)))
        } else {
            (depth == 0).then_some(n)
        };
        if let Some(t) = total {
            let huge = sb.has_ro_compat(ext4r_format::features::RoCompat::HUGE_FILE);
            let _ = inode.set_blocks_count(t * u64::from(bs / 512), huge, bs);
        }
    }
    inode.write(rec).ok()
}

/// Indirect blocks a block map of `n` blocks needs (`apb` pointers per
/// block).
fn map_overhead(n: u64, apb: u64) -> u64 {
    let mut rest = n.saturating_sub(12);
    let mut m = 0;
    let single = rest.min(apb);
    if single > 0 {
        m += 1;
        rest -= single;
    }
    let double = rest.min(apb * apb);
    if double > 0 {
        m += 1 + double.div_ceil(apb);
        rest -= double;
    }
    if rest > 0 {
        m += 1 + rest.div_ceil(apb * apb) + rest.div_ceil(apb);
    }
    m
}

/// e2fsck's `e2fsck_journal_load` and what follows it.
fn superblock(c: &mut Ctx, sb: &Superblock, info: &InodeInfo, has: bool, recover: bool) {
    let inum = info.ino.0;
    let bs = c.geo().block_size;
    let Ok(runs) = c.fs().runs(info) else {
        return bad_inode(c, has, recover, inum, "unreadable block map");
    };
    let Some(first) = runs.first().copied() else {
        return bad_inode(c, has, recover, inum, "no blocks");
    };
    let mut buf = vec![0u8; bs as usize];
    if c.fs()
        .device()
        .read_at(&mut buf, first.physical * u64::from(bs))
        .is_err()
    {
        return bad_inode(c, has, recover, inum, "superblock unreadable");
    }
    // The inode's length in blocks: what a reset journal spans.
    let total = ext4r_format::num::sat_u32(info.inode.size() / u64::from(bs));
    let be = |at: usize| u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
    // e2fsck's e2fsck_journal_fix_corrupt_super.
    let corrupt = |c: &mut Ctx, why: &str| {
        if has {
            bad_super(c, first.physical, total);
        } else {
            bad_inode(c, has, recover, inum, why);
        }
    };
    if be(0) != JBD2_MAGIC {
        // No magic: not a journal at all (e2fsck deletes it). Under -n,
        // e2fsck then finds the superblock corrupt too before it stops.
        bad_inode(c, has, recover, inum, "no journal magic");
        if !c.repairing() && (has || inum != 0) {
            c.failure_not_journals_alone();
            corrupt(c, "no journal magic");
        }
        return;
    }
    let bt = be(4);
    if bt != block_type::SUPERBLOCK_V1 && bt != block_type::SUPERBLOCK_V2 {
        // Log blocks where the superblock should be are corruption to
        // e2fsck; an unknown type it leaves to the user (abort). Either
        // way a journal that is not replayed loses nothing when reset.
        return corrupt(c, &format!("block type {bt}"));
    }
    let Ok(jsb) = JournalSuperblock::parse(&buf) else {
        return corrupt(c, "unreadable");
    };
    let v2_fields = if bt == block_type::SUPERBLOCK_V1 {
        jsb.s_feature_compat.get() != 0
            || jsb.s_feature_incompat.get() != 0
            || jsb.s_feature_ro_compat.get() != 0
            || jsb.s_nr_users.get() != 0
    } else {
        // An internal journal serves one filesystem.
        jsb.s_nr_users.get() > 1 && sb.s_journal_uuid == [0; 16]
    };
    if v2_fields {
        c.report(Subject::Journal).error_fix(
            0,
            ProblemCode::PR_0_CLEAR_V2_JOURNAL,
            "Found invalid V2 journal superblock fields (from V1 journal).\nClearing fields \
             beyond the V1 journal superblock..."
                .into(),
            Fix::ClearV2JournalFields(first.physical),
        );
        if !c.repairing() && bt == block_type::SUPERBLOCK_V2 {
            // -n leaves the fields, and e2fsck's PR_FATAL follows.
            c.report(Subject::Journal).error(
                0,
                ProblemCode::PR_0_JOURNAL_UNSUPP_MULTIFS,
                "External journal has multiple filesystem users (unsupported).".into(),
            );
            return stop(c, "");
        }
        // What e2fsck goes on with: the fields from 0x24 on zeroed.
        return flags(c, has, recover, 0);
    }
    if bt == block_type::SUPERBLOCK_V2 && jsb.unknown_incompat() != 0 {
        c.report(Subject::Journal).error(
            0,
            ProblemCode::PR_0_JOURNAL_UNSUPP_INCOMPAT,
            "Journal superblock has an unknown incompatible feature flag set.".into(),
        );
        // -n answers no to its "Abort", and the superblock is then
        // corrupt to e2fsck.
        if !c.repairing() {
            corrupt(c, "unknown incompatible feature");
        }
        return;
    }
    if bt == block_type::SUPERBLOCK_V2 && jsb.unknown_ro_compat() != 0 {
        // e2fsck stops here (abort): a journal it cannot read safely.
        c.report(Subject::Journal).error(
            0,
            ProblemCode::PR_0_JOURNAL_UNSUPP_ROCOMPAT,
            "Journal superblock has an unknown read-only feature flag set.".into(),
        );
        if !c.repairing() {
            corrupt(c, "unknown read-only feature");
        }
        return;
    }
    let inc = jsb.incompat();
    let v2or3 = jsb.layout().has_csum_v2or3();
    if inc.contains(JournalIncompat::CSUM_V2 | JournalIncompat::CSUM_V3)
        || v2or3 && jsb.compat().contains(JournalCompat::CHECKSUM)
        || v2or3 && jsb.s_checksum_type != ext4r_format::jbd2::checksum_type::CRC32C
    {
        return corrupt(c, "checksum features");
    }
    if v2or3 && jsb.compute_checksum() != jsb.s_checksum.get() {
        return bad_super(c, first.physical, total);
    }
    if jsb.s_blocksize.get() != bs {
        return corrupt(c, "block size");
    }
    let maxlen = jsb.s_maxlen.get();
    if maxlen > total {
        return corrupt(c, "journal too short");
    }
    let log_end = if inc.contains(JournalIncompat::FAST_COMMIT) {
        maxlen.checked_sub(jsb.num_fc_blocks())
    } else {
        Some(maxlen)
    };
    let Some(log_end) = log_end.filter(|&e| e >= MIN_JOURNAL_BLOCKS) else {
        return corrupt(c, "log length");
    };
    // The kernel's jbd2 (journal_reset) needs JBD2_MIN_JOURNAL_BLOCKS
    // from s_first to the end of the log; e2fsck does not look at it.
    let first_log = jsb.s_first.get();
    if first_log == 0
        || u64::from(first_log) + u64::from(MIN_JOURNAL_BLOCKS) > u64::from(log_end) + 1
    {
        return corrupt(c, "first log block");
    }
    flags(c, has, recover, jsb.s_start.get());
}

/// The superblock's journal flags against a journal that loads (the end
/// of e2fsck's `e2fsck_check_ext3_journal`); `start` is the log's
/// `s_start`.
fn flags(c: &mut Ctx, has: bool, recover: bool, start: u32) {
    if !has {
        if recover {
            c.report(Subject::Journal).error_fix(
                0,
                ProblemCode::PR_0_JOURNAL_RECOVER_SET,
                "Superblock needs_recovery flag is set, but no journal is present.".into(),
                Fix::DeleteJournal,
            );
        }
        // Declined, it leaves e2fsck -n's exit at 0: the journal checks
        // run before unix.c marks the filesystem valid, and the passes
        // then treat the inode as the journal it is.
        c.report(Subject::Journal).harmless_fix(
            0,
            ProblemCode::PR_0_JOURNAL_HAS_JOURNAL,
            "Superblock has_journal flag is clear, but a journal is present.".into(),
            Fix::DeleteJournal,
        );
        return;
    }
    if !recover && start != 0 {
        // As e2fsck's "Run journal anyway": the flag is set and the
        // repair replays what the log holds (nothing, when s_start is a
        // flipped bit: no transaction has the sequence it then looks for).
        c.report(Subject::Journal).error_fix(
            0,
            ProblemCode::PR_0_JOURNAL_RUN,
            "Superblock needs_recovery flag is clear, but journal has data.".into(),
            Fix::SetIncompat(Incompat::RECOVER.bits()),
        );
    }
}

#[cfg(test)]
mod overhead_tests {
    #[test]
    fn a_4096_block_journal_on_1k_blocks_has_17_indirect_blocks() {
        // e2fsck: "i_blocks is 0, should be 8226" (4113 KiB blocks).
        assert_eq!(super::map_overhead(4096, 256), 17);
        assert_eq!(super::map_overhead(12, 256), 0);
        assert_eq!(super::map_overhead(13, 256), 1);
    }
}
