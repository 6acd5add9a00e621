//! The uninit flags and unused-inode counts of the group descriptors, as
//! e2fsck's `check_super_block` judges them before anything reads an
//! inode table: the state the later passes go by.
//!
//! A descriptor whose checksum fails cannot be trusted to say that its
//! group is unused: a repair clears its `INODE_UNINIT`/`BLOCK_UNINIT` flags
//! and its unused-inode count, so that pass 1 reads the whole inode table
//! and pass 5 the bitmaps (evidence before destruction: a bit flip in
//! `bg_flags` must not make every inode of the group vanish). Flags
//! without the feature that gives them meaning, a last group with an
//! uninitialised block bitmap, and an unused count beyond the group's free
//! inodes are cleared the same way. A read-only check goes by what the
//! descriptors say, as e2fsck -n does when it answers "no".
//!
//! Pass 2 adds the other half of e2fsck's rule: a directory entry naming
//! an inode in a group flagged unused (or in the unused tail of its table)
//! is evidence that the descriptor is wrong, not the entry; see
//! [`inode_reference`].

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};

use crate::ctx::{Ctx, GroupState};
use crate::fix::Fix;

/// Judges group `g`'s flags and unused count; records the problems and the
/// state the later passes use. `csum_ok` is whether its checksum matched
/// (true without a descriptor checksum). Returns the repair of a bad
/// checksum: the descriptor rewritten, with the clearing it needs.
pub(crate) fn judge(c: &mut Ctx, g: u32, d: &GroupDesc, csum_ok: bool) -> Fix {
    let wide = c.wide();
    let group_csum = c.group_csum();
    let ipg = c.geo().inodes_per_group;
    let flags = d.flags();
    // Without uninit_bg/metadata_csum the flags and the count mean nothing
    // to the kernel or to libext2fs: they are never obeyed.
    let mut s = GroupState {
        block_uninit: group_csum && flags & BG_BLOCK_UNINIT != 0,
        inode_uninit: group_csum && flags & BG_INODE_UNINIT != 0,
        itable_unused: if group_csum { d.itable_unused(wide) } else { 0 },
        csum_bad: !csum_ok,
        // A repair clears them (PR_0_GDT_UNINIT below).
        unobeyed_inode_uninit: !group_csum && !c.repairing() && flags & BG_INODE_UNINIT != 0,
        unobeyed_itable_unused: if group_csum || c.repairing() {
            0
        } else {
            d.itable_unused(wide)
        },
    };
    // What a repair (answering yes) makes of the descriptor.
    let mut clear: u16 = 0;
    let mut unused: Option<u32> = None;
    if !csum_ok && (flags & (BG_BLOCK_UNINIT | BG_INODE_UNINIT) != 0 || s.itable_unused != 0) {
        clear |= BG_BLOCK_UNINIT | BG_INODE_UNINIT;
        unused = Some(0);
    }
    if !group_csum
        && (flags & (BG_BLOCK_UNINIT | BG_INODE_UNINIT) != 0 || d.itable_unused(wide) != 0)
    {
        c.report(Subject::Group(g)).error_fix(
            0,
            ProblemCode::PR_0_GDT_UNINIT,
            format!("Group descriptor {g} marked uninitialized without feature set."),
            Fix::GroupDescFlags(g, BG_BLOCK_UNINIT | BG_INODE_UNINIT, Some(0)),
        );
    }
    let last = g + 1 == c.geo().group_count;
    if last && flags & BG_BLOCK_UNINIT != 0 && clear & BG_BLOCK_UNINIT == 0 {
        c.report(Subject::Group(g)).error_fix(
            0,
            ProblemCode::PR_0_BB_UNINIT_LAST,
            format!("Last group block bitmap uninitialized.  (group {g})"),
            Fix::GroupDescFlags(g, BG_BLOCK_UNINIT, None),
        );
        clear |= BG_BLOCK_UNINIT;
    }
    // A repair's checksum fix has zeroed the count already; e2fsck -n
    // left it, and goes on to say what it holds (harmless then: the
    // checksum fix a repair makes takes care of it).
    let zeroed = unused.is_some();
    let left = if zeroed && c.repairing() {
        0
    } else {
        s.itable_unused
    };
    if group_csum && (left > d.free_inodes_count(wide) || left > ipg) {
        let msg = format!("Group descriptor {g} has invalid unused inodes count {left}.");
        let fix = Fix::GroupDescFlags(g, 0, Some(0));
        if zeroed {
            c.report(Subject::Group(g)).harmless_fix(
                0,
                ProblemCode::PR_0_GDT_ITABLE_UNUSED,
                msg,
                fix,
            );
        } else {
            c.report(Subject::Group(g))
                .error_fix(0, ProblemCode::PR_0_GDT_ITABLE_UNUSED, msg, fix);
        }
        unused = Some(0);
    }
    if c.repairing() {
        if clear & BG_BLOCK_UNINIT != 0 {
            s.block_uninit = false;
        }
        if clear & BG_INODE_UNINIT != 0 {
            s.inode_uninit = false;
        }
        if let Some(u) = unused {
            s.itable_unused = u;
        }
    } else if s.itable_unused > ipg {
        // libext2fs' inode scan reads nothing of such a group.
        s.itable_unused = ipg;
    }
    c.set_group_state(g, s);
    // The checksum's own repair carries the clearing (a descriptor
    // rewritten with its flags as they are would keep a group that holds
    // inodes marked unused).
    if clear != 0 || unused.is_some() {
        Fix::GroupDescFlags(g, clear, unused)
    } else {
        Fix::GroupDescChecksum(g)
    }
}

/// Pass 2's rule for an entry naming inode `target`, which pass 1 did not
/// find in use: when the descriptors say its group or its place in the
/// table is unused, the descriptor is wrong (e2fsck's
/// `PR_2_INOREF_BG_INO_UNINIT`, `PR_2_INOREF_IN_UNUSED`). A repair clears
/// the flag or the count and checks again from the start (the entry is
/// left alone meanwhile); a read-only check reports it. Returns whether a
/// restart was asked for.
///
/// As e2fsck, a repair takes the descriptor as fixed at once: a later entry
/// into the same group is not reported again (one whose group had
/// `INODE_UNINIT` may still find itself in the unused tail, the count
/// being a second fix), and no entry naming an unused inode is cleared
/// once a restart is due: pass 1 has not read those inodes yet.
///
/// Without uninit_bg or metadata_csum, pass 1 read every inode, so the
/// rule holds for every entry, whatever its target: e2fsck tests the
/// descriptor as it stands (a read-only check leaves `INODE_UNINIT` or a
/// count nothing obeys, and each entry into such a group is an error).
pub(crate) fn inode_reference(
    c: &mut Ctx,
    dir: u32,
    name: &[u8],
    target: u32,
    subject: Subject,
) -> bool {
    let ipg = c.geo().inodes_per_group;
    let Some(i) = target.checked_sub(1) else {
        return c.restarting();
    };
    let g = i / ipg;
    let mut s = c.group_state(g);
    let (uninit, unused) = if c.group_csum() {
        (s.inode_uninit, s.itable_unused)
    } else {
        (s.unobeyed_inode_uninit, s.unobeyed_itable_unused)
    };
    // e2fsck's first inode of the unused tail, in its arithmetic (a count
    // beyond the table wraps past every inode: none is in the tail).
    let first_unused = g
        .wrapping_mul(ipg)
        .wrapping_add(1)
        .wrapping_add(ipg)
        .wrapping_sub(unused);
    if !uninit && target < first_unused {
        return c.restarting();
    }
    let name = crate::pathname::safe(name);
    let path = crate::pathname::dir_path(c.fs(), dir);
    let (code, msg, fix) = if uninit {
        s.inode_uninit = false;
        s.unobeyed_inode_uninit = false;
        (
            ProblemCode::PR_2_INOREF_BG_INO_UNINIT,
            format!(
                "Entry '{name}' in {path} ({dir}) references inode {target} in group {g} where \
                 _INODE_UNINIT is set."
            ),
            Fix::GroupDescFlags(g, BG_INODE_UNINIT, None),
        )
    } else {
        s.itable_unused = 0;
        s.unobeyed_itable_unused = 0;
        (
            ProblemCode::PR_2_INOREF_IN_UNUSED,
            format!(
                "Entry '{name}' in {path} ({dir}) references inode {target} found in group {g}'s \
                 unused inodes area."
            ),
            Fix::GroupDescFlags(g, 0, Some(0)),
        )
    };
    if c.repairing() {
        c.report(subject.clone()).error_fix(2, code, msg, fix);
        c.set_group_state(g, s);
        c.must_restart();
        true
    } else {
        c.report(subject).error(2, code, msg);
        false
    }
}
