//! An external journal device (`-j`): a device formatted with the
//! `journal_dev` feature whose ext2 superblock carries the UUID the
//! filesystem names in `s_journal_uuid`, and whose JBD2 superblock follows
//! it. Checked as e2fsck's `e2fsck_get_journal` does before trusting it,
//! then replayed before the check as e2fsck replays it.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use std::sync::Arc;

use ext4r::device::BlockDevice;
use ext4r::journal::{Journal, JournalLocation, EXTERNAL_SB_OFFSET};
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::jbd2::JournalSuperblock;
use ext4r_format::superblock::Superblock;

use crate::ctx::Ctx;
use crate::options::ExternalJournal;

/// Why the external journal cannot serve this filesystem: e2fsck's
/// message for it.
#[derive(Debug)]
pub(crate) struct Unusable(pub &'static str, pub ProblemCode);

const BAD_SUPER: Unusable = Unusable(
    "External journal has bad superblock",
    ProblemCode::PR_0_EXT_JOURNAL_BAD_SUPER,
);
const BAD_UUID: Unusable = Unusable(
    "External journal does not support this filesystem",
    ProblemCode::PR_0_JOURNAL_BAD_UUID,
);
const MULTIFS: Unusable = Unusable(
    "External journal has multiple filesystem users (unsupported)",
    ProblemCode::PR_0_JOURNAL_UNSUPP_MULTIFS,
);

/// Whether the filesystem keeps its journal on a device of its own.
pub(crate) fn wanted(sb: &Superblock) -> bool {
    sb.has_compat(Compat::HAS_JOURNAL)
        && sb.s_journal_inum.get() == 0
        && sb.s_journal_uuid != [0; 16]
}

/// Opens the journal on `ext` for the filesystem of superblock `sb`: the
/// device's ext2 superblock must have the journal_dev feature (else "bad
/// superblock") and the UUID the filesystem names (else "does not
/// support this filesystem"), in e2fsck's order; then its JBD2
/// superblock must load.
pub(crate) fn open(
    sb: &Superblock,
    ext: &ExternalJournal,
) -> Result<Journal<Arc<dyn BlockDevice>>, Unusable> {
    let bs = sb.block_size().ok_or(BAD_SUPER)?;
    let mut buf = [0u8; 1024];
    ext.0
        .read_at(&mut buf, EXTERNAL_SB_OFFSET)
        .map_err(|_| BAD_SUPER)?;
    let jsb = Superblock::parse(&buf).map_err(|_| BAD_SUPER)?;
    if !jsb.has_incompat(Incompat::JOURNAL_DEV) {
        return Err(BAD_SUPER);
    }
    if jsb.s_uuid != sb.s_journal_uuid {
        return Err(BAD_UUID);
    }
    let location = JournalLocation::external(ext.0.as_ref(), bs, Some(&sb.s_journal_uuid))
        .map_err(|_| BAD_SUPER)?;
    // As e2fsck, before the rest of the JBD2 superblock is judged (its
    // checksum too): a journal shared by several filesystems is not
    // supported.
    let mut jbuf = vec![0u8; bs as usize];
    if ext
        .0
        .read_at(&mut jbuf, location.superblock_index() * u64::from(bs))
        .is_ok()
    {
        if let Ok(j) = JournalSuperblock::parse(&jbuf) {
            if j.version() >= 2 && j.s_nr_users.get() > 1 {
                return Err(MULTIFS);
            }
        }
    }
    Journal::open(ext.0.clone(), location, bs).map_err(|_| BAD_SUPER)
}

/// The journal device's own superblock, when it is this filesystem's
/// journal device (journal_dev, the UUID the filesystem names) with
/// metadata_csum and a checksum that does not match (e2fsck's
/// PR_0_EXT_JOURNAL_SUPER_CSUM_INVALID): that superblock.
fn bad_checksum(sb: &Superblock, ext: &ExternalJournal) -> Option<Superblock> {
    let mut buf = [0u8; 1024];
    ext.0.read_at(&mut buf, EXTERNAL_SB_OFFSET).ok()?;
    let jsb = Superblock::parse(&buf).ok()?;
    let ours = jsb.has_incompat(Incompat::JOURNAL_DEV) && jsb.s_uuid == sb.s_journal_uuid;
    if !ours
        || !jsb.has_ro_compat(ext4r_format::features::RoCompat::METADATA_CSUM)
        || jsb.verify_checksum().is_ok()
    {
        return None;
    }
    Some(jsb)
}

const CSUM_MSG: &str = "External journal superblock checksum does not match superblock.";

/// In a repair, before the journal is replayed: the journal device's
/// superblock checksum set right, as e2fsck does while it loads the
/// journal (a write to the journal device only: the filesystem does not
/// count as changed). What was done, as e2fsck says it.
///
/// # Errors
/// I/O errors of the journal device.
pub(crate) fn fix_checksum(
    sb: &Superblock,
    ext: &ExternalJournal,
) -> ext4r::Result<Option<crate::problem::Problem>> {
    let Some(mut fixed) = bad_checksum(sb, ext) else {
        return Ok(None);
    };
    ext4r_txn::journal::write_external_superblock(ext.0.as_ref(), &mut fixed)?;
    Ok(Some(crate::problem::Problem {
        pass: 0,
        code: ProblemCode::PR_0_EXT_JOURNAL_SUPER_CSUM_INVALID,
        severity: crate::problem::Severity::Harmless,
        message: format!("{CSUM_MSG}  Fix? yes\n"),
        subject: crate::problem::Subject::Journal,
        fix: None,
        latch: None,
    }))
}

/// Pass 0 with `-j`: a journal device that cannot serve stops the check,
/// as e2fsck stops ("Filesystem still has errors").
pub(crate) fn check(c: &mut Ctx, ext: &ExternalJournal) {
    // e2fsck -n says so and goes on (exit 0); a repair has set it right
    // before the check (see `fix_checksum`).
    if bad_checksum(c.sb(), ext).is_some() {
        c.report(Subject::Journal).harmless(
            0,
            ProblemCode::PR_0_EXT_JOURNAL_SUPER_CSUM_INVALID,
            CSUM_MSG.into(),
        );
    }
    match open(c.sb(), ext) {
        Err(Unusable(why, code)) => {
            // e2fsck's PR_FATAL: reported, and the check stops.
            c.report(Subject::Journal).error(0, code, format!("{why}."));
            c.fail(why.to_string());
        }
        Ok(_) if c.sb().has_incompat(Incompat::RECOVER) => c.note(
            "Warning: skipping journal recovery because doing a read-only filesystem check."
                .to_string(),
        ),
        Ok(_) => {}
    }
}

/// Replays the external journal into the filesystem on `dev` when the
/// superblock asks for recovery: the first and last transactions
/// replayed. A journal that cannot serve is left to the check.
///
/// # Errors
/// I/O errors of either device.
pub(crate) fn replay(
    dev: &Arc<dyn BlockDevice>,
    sb: &Superblock,
    ext: &ExternalJournal,
    now: i64,
) -> ext4r::Result<Option<crate::observe::JournalRecovered>> {
    if !wanted(sb) || !sb.has_incompat(Incompat::RECOVER) {
        return Ok(None);
    }
    let Ok(journal) = open(sb, ext) else {
        return Ok(None);
    };
    let r = ext4r::write::recover_journal(dev, &journal, Some((now, 0)))?;
    Ok(Some(crate::observe::JournalRecovered::of(&r)))
}
