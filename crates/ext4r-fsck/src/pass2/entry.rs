//! One directory entry's checks in pass 2, in e2fsck's order (its
//! check_dir_block per entry): `.` and `..`, the inode number, the name,
//! the target's use and file type, the encryption policy, and a second
//! name of a directory.

use crate::codes::ProblemCode;
use ext4r::fs::FileKind;
use ext4r_format::dir::ft;
use ext4r_format::features::Incompat;
use ext4r_format::inode::ino as special;
use ext4r_format::InodeNr;

use crate::ctx::{Ctx, DirBlock};
use crate::problem::Subject;

/// Checks one entry. `slot` is its position among the directory's
/// entries (0 and 1 must be `.` and `..`). The checks run in e2fsck's
/// order; under `-n` most go on past a problem (see [`bad_entry`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn entry(
    c: &mut Ctx,
    d: usize,
    slot: usize,
    b: &DirBlock,
    name: &[u8],
    target: u32,
    ftype: u8,
    off: usize,
) {
    let e = EntryAt {
        d,
        slot,
        b,
        name,
        target,
        off,
        dir: c.dirs()[d].ino,
    };
    c.met_in(target, e.dir);
    if !dot_entries(c, &e) || target == 0 || !target_number(c, &e) {
        return;
    }
    crate::encoded_name::check(c, d, slot, b, off, name);
    name_chars(c, &e);
    let Some(kind) = c.inodes().kind(target) else {
        unused_target(c, &e);
        return;
    };
    if !c.group_csum() {
        // Pass 1 read the whole table: the descriptor's word against an
        // inode in use is tested for every entry (e2fsck's order: before
        // the file type).
        crate::gdesc::inode_reference(c, e.dir, e.name, target, e.subject());
    }
    entry_filetype(c, &e, ftype, kind);
    if slot > 1 && !(encryption_policy(c, &e, kind) && dir_link(c, &e, kind)) {
        return;
    }
    c.name_found(target);
}

/// One directory entry under check, and where it is.
struct EntryAt<'a> {
    /// The directory's index in `c.dirs()`.
    d: usize,
    /// Its position among the directory's entries.
    slot: usize,
    b: &'a DirBlock,
    name: &'a [u8],
    target: u32,
    /// Its offset in the block (or inline area).
    off: usize,
    /// The directory's inode.
    dir: u32,
}

impl EntryAt<'_> {
    /// The entry as e2fsck names it in a message. Built only when
    /// something is reported: the checks run for every entry.
    fn place(&self, c: &Ctx) -> String {
        format!(
            "Entry '{}' in {} ({})",
            crate::pathname::safe(self.name),
            crate::pathname::dir_path(c.fs(), self.dir),
            self.dir
        )
    }

    /// The entry as what a problem is about.
    fn subject(&self) -> Subject {
        self.b.entry_at(self.off)
    }

    /// Reports the entry as one that must go (see [`bad_entry`]).
    fn bad(&self, c: &mut Ctx, code: ProblemCode, msg: String) {
        bad_entry(c, self.d, self.b, self.off, code, msg);
    }
}

/// The first two entries must be `.` (naming the directory) and `..`
/// (whose target is recorded for pass 3). False when the entry's checks
/// end here.
fn dot_entries(c: &mut Ctx, e: &EntryAt<'_>) -> bool {
    let (d, b, off, dir, target) = (e.d, e.b, e.off, e.dir, e.target);
    match e.slot {
        0 => {
            if e.name != b"." || target == 0 {
                let (code, msg) = if target == 0 {
                    (
                        ProblemCode::PR_2_MISSING_DOT,
                        format!("Missing '.' in directory inode {dir}."),
                    )
                } else {
                    (
                        ProblemCode::PR_2_1ST_NOT_DOT,
                        format!("First entry in directory inode {dir} should be '.'"),
                    )
                };
                let fix = (b.phys != 0 && off == 0)
                    .then(|| crate::fix::Fix::DirMakeDot(b.phys, dir, c.dirs()[d].owner()));
                c.report(e.subject()).error_or_fix(2, code, msg, fix);
                // The record is '.' once repaired: its old target is gone.
                return false;
            } else if target != dir {
                let msg = format!("Bad inode number for '.' in directory inode {dir}.");
                if b.phys != 0 {
                    let f = crate::fix::Fix::DirEntryInode(b.phys, off, dir, c.dirs()[d].owner());
                    c.report(e.subject())
                        .error_fix(2, ProblemCode::PR_2_BAD_INODE_DOT, msg, f);
                } else {
                    c.report(e.subject())
                        .error(2, ProblemCode::PR_2_BAD_INODE_DOT, msg);
                }
                return false;
            }
        }
        1 => {
            if e.name != b".." || target == 0 {
                let (code, msg) = if target == 0 {
                    (
                        ProblemCode::PR_2_MISSING_DOT_DOT,
                        format!("Missing '..' in directory inode {dir}."),
                    )
                } else {
                    (
                        ProblemCode::PR_2_2ND_NOT_DOT_DOT,
                        format!("Second entry in directory inode {dir} should be '..'"),
                    )
                };
                let fix = (b.phys != 0)
                    .then(|| crate::fix::Fix::DirMakeDotDot(b.phys, off, c.dirs()[d].owner()));
                c.report(e.subject()).error_or_fix(2, code, msg, fix);
                return false;
            }
            c.found_dotdot(d, target, b.phys, off);
        }
        _ => {}
    }
    true
}

/// What the entry's inode number may be: e2fsck's order, a link to the
/// directory itself first; then at most one of an invalid inode number, a
/// duplicate '.' or '..', a link to the root and an empty name. False when
/// the entry's checks end here.
fn target_number(c: &mut Ctx, e: &EntryAt<'_>) -> bool {
    let (slot, name, target, dir) = (e.slot, e.name, e.target, e.dir);
    if slot > 1 && target == dir {
        let msg = format!("{} is a link to '.'", e.place(c));
        e.bad(c, ProblemCode::PR_2_LINK_DOT, msg);
        if c.repairing() {
            return false;
        }
    }
    let max = c.sb().s_inodes_count.get();
    // e2fsck's rule: also the quota and orphan file inodes, which no name
    // may reach (a visible quota file a repair hides first).
    let hidden = [
        c.sb().s_usr_quota_inum.get(),
        c.sb().s_grp_quota_inum.get(),
        c.sb().s_prj_quota_inum.get(),
        c.sb().s_orphan_file_inum.get(),
    ];
    let (code, msg) = if target > max
        || (target < c.sb().first_ino() && target != special::ROOT)
        || hidden.contains(&target)
    {
        let msg = format!("{} has invalid inode #: {target}.", e.place(c));
        e.bad(c, ProblemCode::PR_2_BAD_INO, msg);
        return false;
    } else if slot > 1 && (name == b"." || name == b"..") {
        let msg = format!(
            "{} is duplicate '{}' entry.",
            e.place(c),
            crate::pathname::safe(name)
        );
        let code = if name == b"." {
            ProblemCode::PR_2_DUP_DOT
        } else {
            ProblemCode::PR_2_DUP_DOT_DOT
        };
        (Some(code), msg)
    } else if slot > 1 && target == special::ROOT {
        (
            Some(ProblemCode::PR_2_LINK_ROOT),
            format!("{} is a link to the root inode.", e.place(c)),
        )
    } else if slot > 1 && name.is_empty() {
        // As e2fsck: a name of no bytes is no name; the entry goes.
        let msg = format!(
            "Entry '' in {} ({dir}) has a zero-length name.",
            crate::pathname::dir_path(c.fs(), dir)
        );
        (Some(ProblemCode::PR_2_NULL_NAME), msg)
    } else {
        (None, String::new())
    };
    if let Some(code) = code {
        e.bad(c, code, msg);
        if c.repairing() {
            return false;
        }
    }
    true
}

/// A name holds no '/' or NUL, and is not empty. An encrypted directory's
/// names are ciphertext, any byte may occur (e2fsck checks names only
/// where the directory is not encrypted; its encrypted names are judged
/// by length, PR_2_BAD_ENCRYPTED_NAME).
fn name_chars(c: &mut Ctx, e: &EntryAt<'_>) {
    let (b, name, off) = (e.b, e.name, e.off);
    if e.slot > 1
        && !c.dirs()[e.d].encrypted()
        && (name.contains(&b'/') || name.contains(&0) || name.is_empty())
    {
        let msg = format!("{} has illegal characters in its name.", e.place(c));
        // As e2fsck: each '/' or NUL becomes '.' (an empty name stays).
        if b.phys != 0 && !name.is_empty() {
            let f = crate::fix::Fix::DirNameFix(b.phys, off, c.dirs()[e.d].owner());
            c.report(e.subject())
                .error_fix(2, ProblemCode::PR_2_BAD_NAME, msg, f);
        } else if b.phys == 0 && b.lblk != crate::inline_dir::AREA_PARENT && !name.is_empty() {
            // A record of an inline directory, mended in its area.
            let f = crate::fix::Fix::InlineNameFix(b.ino, b.lblk, off);
            c.report(e.subject())
                .error_fix(2, ProblemCode::PR_2_BAD_NAME, msg, f);
        } else {
            c.report(e.subject())
                .error(2, ProblemCode::PR_2_BAD_NAME, msg);
        }
    }
}

/// An entry whose inode pass 1 did not find in use: the entry goes,
/// unless a descriptor that says the inode cannot be in use is what is
/// wrong (a repair clears it and checks again, the entry kept).
fn unused_target(c: &mut Ctx, e: &EntryAt<'_>) {
    let target = e.target;
    if crate::gdesc::inode_reference(c, e.dir, e.name, target, e.subject()) {
        return;
    }
    if crate::badblocks::inode_in_bad_block(c, target) {
        let msg = format!(
            "{} points to inode ({target}) located in a bad block.",
            e.place(c)
        );
        e.bad(c, ProblemCode::PR_2_BB_INODE, msg);
        return;
    }
    let msg = format!("{} has deleted/unused inode {target}.", e.place(c));
    e.bad(c, ProblemCode::PR_2_UNUSED_INODE, msg);
}

/// The entry's file type against its inode's kind; as e2fsck, '.' and
/// '..' have theirs checked too.
fn entry_filetype(c: &mut Ctx, e: &EntryAt<'_>, ftype: u8, kind: FileKind) {
    let off = e.off;
    let (phys, dino, area, owner) = (e.b.phys, e.b.ino, e.b.lblk, c.dirs()[e.d].owner());
    let fix = move |t: u8| {
        use crate::inline_dir::AREA_PARENT;
        if phys != 0 {
            Some(crate::fix::Fix::DirEntryFiletype(phys, off, t, owner))
        } else if area != AREA_PARENT {
            Some(crate::fix::Fix::InlineEntryFiletype(dino, area, off, t))
        } else {
            None
        }
    };
    check_filetype(c, &|c: &Ctx| e.place(c), e.subject(), ftype, kind, &fix);
}

/// In an encrypted directory every file, directory and symlink is
/// encrypted too (e2fsck's check_encryption_policy,
/// PR_2_UNENCRYPTED_FILE), with the directory's policy; other kinds carry
/// no policy. False when the entry's checks end here.
fn encryption_policy(c: &mut Ctx, e: &EntryAt<'_>, kind: FileKind) -> bool {
    let (dir, target) = (e.dir, e.target);
    if c.dirs()[e.d].encrypted()
        && matches!(
            kind,
            FileKind::Regular | FileKind::Directory | FileKind::Symlink
        )
        && c.fs().inode(InodeNr(target)).is_ok_and(|i| {
            !i.inode
                .flags()
                .contains(ext4r_format::inode::InodeFlags::ENCRYPT)
        })
    {
        let msg = format!(
            "Encrypted {} references unencrypted inode {target}.",
            e.place(c).replacen("Entry", "entry", 1)
        );
        e.bad(c, ProblemCode::PR_2_UNENCRYPTED_FILE, msg);
        if c.repairing() {
            return false;
        }
    }
    if c.dirs()[e.d].encrypted() {
        let (mine, its) = (c.policy_of(dir), c.policy_of(target));
        if let (Some(mine), Some(its)) = (mine, its) {
            if mine != its {
                let msg = format!(
                    "Encrypted {} references inode {target}, which has a different \
                     encryption policy.",
                    e.place(c).replacen("Entry", "entry", 1)
                );
                e.bad(c, ProblemCode::PR_2_INCONSISTENT_ENCRYPTION_POLICY, msg);
                if c.repairing() {
                    return false;
                }
            }
        }
    }
    true
}

/// A directory has one name besides its own '.' and its children's '..':
/// the first entry naming it makes its parent, a second is a hard link to
/// a directory. False when the entry's checks end here.
fn dir_link(c: &mut Ctx, e: &EntryAt<'_>, kind: FileKind) -> bool {
    let target = e.target;
    if kind == FileKind::Directory {
        if let Some(td) = c.dir_idx(target) {
            let parent = c.links(td).parent;
            if parent != 0 {
                // Named as its first parent names it (e2fsck's %P).
                let msg = format!(
                    "{} is a link to directory {} ({target}).",
                    e.place(c),
                    crate::pathname::path_in(c.fs(), parent, target)
                );
                e.bad(c, ProblemCode::PR_2_LINK_DIR, msg);
                if c.repairing() {
                    return false;
                }
            } else {
                c.found_parent(td, e.dir);
            }
        }
    }
    true
}

/// Reports an entry that must go; its repair clears it (in an inline
/// directory, in the inode: a bad parent becomes 0 for pass 3 to set).
/// Under `-n` the entry stays, and e2fsck goes on checking it and counts
/// it as a link to its inode (the callers go on unless repairing; an
/// invalid inode number ends the entry's checks in both).
pub(super) fn bad_entry(
    c: &mut Ctx,
    d: usize,
    b: &DirBlock,
    off: usize,
    code: ProblemCode,
    msg: String,
) {
    let fix = if b.phys != 0 {
        crate::fix::Fix::DirEntryClear(b.phys, off, c.dirs()[d].owner())
    } else if b.lblk == crate::inline_dir::AREA_PARENT {
        crate::fix::Fix::InlineParent(b.ino, 0)
    } else {
        crate::fix::Fix::InlineEntryClear(b.ino, b.lblk, off)
    };
    c.report(b.entry_at(off)).error_fix(2, code, msg, fix);
}

fn check_filetype(
    c: &mut Ctx,
    place: &dyn Fn(&Ctx) -> String,
    subject: Subject,
    ftype: u8,
    kind: FileKind,
    fix: &dyn Fn(u8) -> Option<crate::fix::Fix>,
) {
    let should = kind.dirent_type();
    if !c.sb().has_incompat(Incompat::FILETYPE) {
        if ftype != 0 {
            let msg = format!("{} has filetype set.", place(c));
            c.report(subject)
                .error_or_fix(2, ProblemCode::PR_2_CLEAR_FILETYPE, msg, fix(0));
        }
        return;
    }
    if ftype == ft::UNKNOWN {
        // e2fsck's "@E" mid-sentence: "entry", not "Entry".
        let entry = place(c);
        let entry = entry
            .strip_prefix('E')
            .map_or(entry.clone(), |e| format!("e{e}"));
        let msg = format!("Setting filetype for {entry} to {should}.");
        c.report(subject)
            .harmless_or_fix(2, ProblemCode::PR_2_SET_FILETYPE, msg, fix(should));
    } else if ftype != should {
        let msg = format!(
            "{} has an incorrect filetype (was {ftype}, should be {should}).",
            place(c)
        );
        c.report(subject)
            .error_or_fix(2, ProblemCode::PR_2_BAD_FILETYPE, msg, fix(should));
    }
}
