//! Pass 3 (every directory reachable from the root, `..` agreeing with the
//! parent, lost+found present) and pass 4 (link counts, unattached inodes).

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r::fs::FileKind;
use ext4r_format::features::RoCompat;
use ext4r_format::inode::ino as special;

use crate::ctx::Ctx;
use crate::ctx::Progress;

/// Most links a directory's count can show before dir_nlink's "1".
const LINK_MAX: u32 = 65_000;

pub(crate) fn run_pass3(c: &mut Ctx, _progress: Progress<'_>) {
    let Some(root) = c.dir_idx(special::ROOT) else {
        let msg = "Root inode not allocated.".to_string();
        // As e2fsck: a new root (its inode table must be readable; a
        // table being relocated gets the root in the next round). The
        // rest of the tree is judged once it exists; pass 5 still runs.
        let table_ok = !c.groups().table_unusable(0);
        match table_ok
            .then(|| crate::lost_found::reserve_block(c))
            .flatten()
        {
            Some(b) => {
                c.report(Subject::Inode(special::ROOT)).error_fix(
                    3,
                    ProblemCode::PR_3_NO_ROOT_INODE,
                    msg,
                    crate::fix::Fix::MakeRoot(b),
                );
            }
            None => c.report(Subject::Inode(special::ROOT)).error(
                3,
                ProblemCode::PR_3_NO_ROOT_INODE,
                msg,
            ),
        }
        c.skip_to_pass5();
        return;
    };
    // The root's parent is itself.
    c.found_parent(root, special::ROOT);
    // Reachability: follow parents upward; a chain that does not reach the
    // root (or loops) is unconnected. State: 0 unknown, 1 on the current
    // path, 2 reaches root, 3 does not.
    let n = c.dirs().len();
    let mut state = vec![0u8; n];
    state[root] = 2;
    for start in 0..n {
        let mut path = Vec::new();
        let mut cur = start;
        let verdict = loop {
            match state[cur] {
                2 => break 2,
                1 | 3 => break 3,
                _ => {}
            }
            state[cur] = 1;
            path.push(cur);
            match c.dir_idx(c.links(cur).parent) {
                Some(p) if c.links(cur).parent != 0 => cur = p,
                _ => break 3,
            }
        };
        for &d in &path {
            state[d] = verdict;
        }
    }
    // The top of each unconnected chain: a directory no entry names, or
    // one directory of each loop.
    let mut reported = vec![false; n];
    for d in 0..n {
        if state[d] != 3 || reported[d] {
            continue;
        }
        let mut seen = Vec::new();
        let mut cur = d;
        // (the top, whether it closes a loop)
        let top = loop {
            if reported[cur] {
                break None;
            }
            if seen.contains(&cur) {
                break Some((cur, true));
            }
            seen.push(cur);
            match c.dir_idx(c.links(cur).parent) {
                Some(p) if c.links(cur).parent != 0 => cur = p,
                _ => break Some((cur, false)),
            }
        };
        for &s in &seen {
            reported[s] = true;
        }
        if let Some((t, looped)) = top {
            let r = c.dirs()[t];
            c.note_reconnect(format!("#{}", r.ino).len());
            let (code, msg) = if looped {
                (
                    ProblemCode::PR_3_LOOPED_DIR,
                    format!(
                        "Recursively looped directory inode {} ({})",
                        r.ino,
                        crate::pathname::dir_path(c.fs(), r.ino)
                    ),
                )
            } else {
                // "%q": the directory its '..' names, by its path.
                (
                    ProblemCode::PR_3_UNCONNECTED_DIR,
                    format!(
                        "Unconnected directory inode {} (was in {})",
                        r.ino,
                        crate::pathname::dir_path(c.fs(), c.links(t).dotdot)
                    ),
                )
            };
            c.report(Subject::Inode(r.ino)).error_fix(
                3,
                code,
                msg,
                crate::fix::Fix::Reconnect(r.ino, ext4r_format::dir::ft::DIR),
            );
        }
    }
    for d in 0..n {
        let (r, l) = (c.dirs()[d], c.links(d));
        if r.ino != special::ROOT && l.parent != 0 && l.dotdot != l.parent {
            match l.dotdot_at() {
                Some((blk, off)) => {
                    let msg = bad_dotdot(c.fs(), r.ino, &l);
                    c.report(Subject::Inode(r.ino)).error_fix(
                        3,
                        ProblemCode::PR_3_BAD_DOT_DOT,
                        msg,
                        crate::fix::Fix::DirEntryInode(blk, off, l.parent, r.owner()),
                    );
                }
                None => {
                    let msg = bad_dotdot(c.fs(), r.ino, &l);
                    if r.inline() {
                        let f = crate::fix::Fix::InlineParent(r.ino, l.parent);
                        c.report(Subject::Inode(r.ino)).error_fix(
                            3,
                            ProblemCode::PR_3_BAD_DOT_DOT,
                            msg,
                            f,
                        );
                    } else {
                        c.report(Subject::Inode(r.ino)).error(
                            3,
                            ProblemCode::PR_3_BAD_DOT_DOT,
                            msg,
                        );
                    }
                }
            }
        }
    }
    lost_and_found(c);
}

/// Where the root names `name`: (block, offset, the root as owner).
fn root_entry(
    c: &Ctx,
    root: &ext4r::fs::InodeInfo,
    name: &[u8],
) -> Option<(u64, usize, crate::fix::Owner)> {
    let owner = c.dirs()[c.dir_idx(special::ROOT)?].owner();
    let bs = c.geo().block_size as usize;
    let mut buf = vec![0u8; bs];
    for r in c.fs().runs(root).ok()? {
        for k in 0..r.len {
            let b = r.physical + k;
            c.fs().device().read_at(&mut buf, b * bs as u64).ok()?;
            for e in ext4r_format::dir::DirBlockIter::new(&buf).flatten() {
                if e.inode.0 != 0 && e.name == name {
                    return Some((b, e.offset, owner));
                }
            }
        }
    }
    None
}

fn lost_and_found(c: &mut Ctx) {
    let root = match c.fs().inode(ext4r_format::InodeNr(special::ROOT)) {
        Ok(r) => r,
        Err(_) => return,
    };
    let mut found = c.fs().lookup(&root, b"lost+found");
    // A repair has cleared the name in pass 2 (an inode number no entry
    // may hold, say): e2fsck's pass 3 then finds no lost+found and makes
    // one, where the name on disk would be "not a directory" to unlink.
    if c.repairing() {
        let cleared = c.entries_cleared(special::ROOT);
        if root_entry(c, &root, b"lost+found")
            .is_some_and(|(blk, off, _)| cleared.contains(&(blk, off)))
        {
            found = Ok(None);
        }
    }
    match found {
        Ok(Some(ino)) => {
            let is_dir = c.inodes().is_dir(ino.0);
            let encrypted = is_dir
                && c.fs().inode(ino).is_ok_and(|i| {
                    i.inode
                        .flags()
                        .contains(ext4r_format::inode::InodeFlags::ENCRYPT)
                });
            // As e2fsck: the name is cleared and a new lost+found made
            // in a later round (what the old one held is reconnected).
            let unlink = root_entry(c, &root, b"lost+found")
                .map(|(blk, off, owner)| crate::fix::Fix::DirEntryClear(blk, off, owner));
            let inline = is_dir
                && c.fs().inode(ino).is_ok_and(|i| {
                    i.inode
                        .flags()
                        .contains(ext4r_format::inode::InodeFlags::INLINE_DATA)
                });
            let (code, msg) = if !is_dir {
                (
                    ProblemCode::PR_3_LPF_NOTDIR,
                    "/lost+found is not a directory",
                )
            } else if inline {
                (
                    ProblemCode::PR_3_LPF_INLINE_DATA,
                    "/lost+found has inline data",
                )
            } else if encrypted {
                (ProblemCode::PR_3_LPF_ENCRYPTED, "/lost+found is encrypted")
            } else {
                return;
            };
            if c.repairing() {
                c.lost_found_replaced();
            }
            c.report(Subject::Inode(ino.0))
                .error_or_fix(3, code, msg.into(), unlink)
        }
        // As e2fsck: a read-only check does not miss it (only a repair
        // creates it, or a reconnection needs it).
        Ok(None) if !c.repairing() => {}
        Ok(None) => {
            c.lost_found_replaced();
            let msg = "/lost+found not found.".to_string();
            match crate::lost_found::plan(c) {
                Some(n) => {
                    // Its `..` names the root: one more link, on disk and
                    // counted, as e2fsck adjusts both when it makes it.
                    c.name_found(special::ROOT);
                    c.add_link(special::ROOT);
                    c.report(Subject::Filesystem).error_fix(
                        3,
                        ProblemCode::PR_3_NO_LF_DIR,
                        msg,
                        crate::fix::Fix::MakeLostFound(n),
                    )
                }
                // As e2fsck: with no free block or inode for it, the
                // creation is given up (its "yes" changes nothing), the
                // lost files are to go to the root instead, and the
                // user is told to make room. A full filesystem is not an
                // inconsistency: nothing is left to fix.
                None => {
                    c.report(Subject::Filesystem)
                        .harmless(3, ProblemCode::PR_3_NO_LF_DIR, msg);
                    c.report(Subject::Filesystem).harmless(
                        3,
                        ProblemCode::PR_3_LPF_NO_SPACE,
                        "Cannot allocate space for /lost+found.\n\
                         Place lost files in root directory instead"
                            .into(),
                    );
                    c.report(Subject::Filesystem).harmless(
                        3,
                        ProblemCode::PR_3_NO_SPACE_TO_RECOVER,
                        "Insufficient space to recover lost files!\n\
                         Move data off the filesystem and re-run e2fsck.\n"
                            .into(),
                    );
                }
            }
        }
        Err(_) => {}
    }
}

/// e2fsck's check_ea_inode: an EA inode's stored reference count
/// (`i_ctime` << 32 | `l_i_version`) is the number of xattr entries naming
/// it (an xattr block's entries once, however many inodes share it).
/// Lustre's old EA inodes keep no count; their `i_ctime` equals `i_atime`.
fn ea_inode_refs(c: &mut Ctx, ino: u32) {
    let lo = c.ea_refs().partition_point(|&x| x < ino);
    let hi = c.ea_refs().partition_point(|&x| x <= ino);
    let actual = (hi - lo) as u64;
    let Ok(info) = c.fs().inode(ext4r_format::InodeNr(ino)) else {
        return;
    };
    let i = &info.inode;
    let stored = u64::from(i.i_ctime.get()) << 32 | u64::from(i.l_i_version.get());
    if stored != actual && i.i_ctime.get() != i.i_atime.get() {
        c.report(Subject::Inode(ino)).error_fix(
            4,
            ProblemCode::PR_4_EA_INODE_REF_COUNT,
            format!("Extended attribute inode {ino} ref count is {stored}, should be {actual}."),
            crate::fix::Fix::EaInodeRefCount(ino, actual),
        );
    }
}

pub(crate) fn run_pass4(c: &mut Ctx, _progress: Progress<'_>) {
    if c.skips_pass4() {
        return;
    }
    let mut dir_nlink = c.sb().has_ro_compat(RoCompat::DIR_NLINK);
    // Files with one link and one name, nearly all, have nothing here:
    // they are passed over 64 at a time (a lookup per inode was most of
    // this pass). EA inodes the flag is missing on are looked at one by one.
    // So are those pass 3A took a link from (their count is no longer
    // the one recorded).
    let skip = c.counts_as_found();
    let mut next = c.inodes().next(0);
    while let Some(ino) = next {
        let w = ino / 64;
        let left = if skip {
            c.inodes().unsettled(w) & (!0u64 << (ino % 64))
        } else {
            !0u64 << (ino % 64)
        };
        if left == 0 {
            next = (w + 1).checked_mul(64).and_then(|i| c.inodes().next(i));
            continue;
        }
        let ino = w * 64 + left.trailing_zeros();
        next = ino.checked_add(1).and_then(|i| c.inodes().next(i));
        let Some(mut r) = c.inodes().get(ino) else {
            continue;
        };
        r.links = r.links.saturating_sub(c.link_drops(ino));
        // A link a repair of this check adds first (lost+found's `..` in
        // the root), as e2fsck's `e2fsck_adjust_inode_count` does: on
        // disk unless the count is at its maximum, and counted.
        let adds = c.link_adds(ino);
        if adds > 0 && r.links < u16::MAX {
            r.links = r.links.saturating_add(adds);
        }
        // An EA inode is counted by the xattrs naming it; one no xattr
        // names is an ordinary unattached inode (as e2fsck 1.47.0).
        let ea_inode = r.ea_inode || c.ea_flag_missing(r.ino);
        if ea_inode && c.ea_refs().binary_search(&r.ino).is_ok() {
            ea_inode_refs(c, r.ino);
            continue;
        }
        let mut counted = r.counted;
        if counted == 0 {
            if r.kind == FileKind::Regular && zero_length(c, r.ino) {
                // Nothing to save: e2fsck offers to delete it instead.
                // Cleared and freed with the allocation statistics, as
                // e2fsck's `disconnect_inode`: pass 5 counts it free.
                if c.repairing() {
                    c.plan_inode(r.ino, false, false);
                }
                c.report(Subject::Inode(r.ino)).error_fix(
                    4,
                    ProblemCode::PR_4_ZERO_LEN_INODE,
                    format!("Unattached zero-length inode {}.", r.ino),
                    crate::fix::Fix::Each(vec![
                        crate::fix::Fix::ClearInode(r.ino),
                        crate::fix::Fix::FreeInode(r.ino, false),
                    ]),
                );
                // Declined (only -n here), e2fsck goes on to offer the
                // reconnection.
                if c.repairing() {
                    continue;
                }
            }
            if r.kind != FileKind::Directory {
                c.note_reconnect(format!("#{}", r.ino).len());
                let reconnect = crate::fix::Fix::Reconnect(r.ino, r.kind.dirent_type());
                // A count pass 3A took to 0 with the inode's last entry
                // is 1 again with the new one (e2fsck adjusts it by one
                // each way), and nothing more is said.
                let fix = if c.repairing() && r.links == 0 && c.link_dropped(r.ino) {
                    crate::fix::Fix::Each(vec![reconnect, crate::fix::Fix::InodeLinks(r.ino, 1)])
                } else {
                    reconnect
                };
                c.report(Subject::Inode(r.ino)).error_fix(
                    4,
                    ProblemCode::PR_4_UNATTACHED_INODE,
                    format!("Unattached inode {}", r.ino),
                    fix,
                );
                // e2fsck's reconnection adds one to the stored count too
                // (e2fsck_adjust_inode_count), then finds it one entry
                // high: "ref count is 2, should be 1" for a file that
                // had one link. (Declined under -n, the count is not
                // looked at.)
                if c.repairing() && r.links != 0 {
                    c.report(Subject::Inode(r.ino)).error_fix(
                        4,
                        ProblemCode::PR_4_BAD_REF_COUNT,
                        format!(
                            "Inode {} ref count is {}, should be 1.",
                            r.ino,
                            u32::from(r.links) + 1
                        ),
                        crate::fix::Fix::InodeLinks(r.ino, 1),
                    );
                }
            }
            // A directory without entries was reported in pass 3.
            continue;
        }
        if r.kind == FileKind::Directory && counted > LINK_MAX {
            if !dir_nlink {
                // As e2fsck: the feature is turned on at the first such
                // directory, which settles it for the others.
                dir_nlink = true;
                c.report(Subject::Filesystem).error_fix(
                    4,
                    ProblemCode::PR_4_DIR_NLINK_FEATURE,
                    "Directory exceeds max links, but no DIR_NLINK feature in superblock.".into(),
                    crate::fix::Fix::SetRoCompat(RoCompat::DIR_NLINK.bits()),
                );
            }
            counted = 1;
        }
        let htree =
            r.kind == FileKind::Directory && c.dir_idx(r.ino).is_some_and(|d| c.dirs()[d].htree());
        if htree && counted > 1 && r.links == 1 {
            // A count that once overflowed and no longer does: set again,
            // and not an error (e2fsck only mends it when it may write).
            if c.repairing() {
                c.report(Subject::Inode(r.ino)).harmless_fix(
                    4,
                    ProblemCode::PR_4_DIR_OVERFLOW_REF_COUNT,
                    format!(
                        "Directory inode {} ref count set to overflow but could be exact \
                         value {counted}.",
                        r.ino
                    ),
                    crate::fix::Fix::InodeLinks(r.ino, ext4r_format::num::sat_u16(counted)),
                );
            }
            continue;
        }
        if u32::from(r.links) != counted {
            c.report(Subject::Inode(r.ino)).error_fix(
                4,
                ProblemCode::PR_4_BAD_REF_COUNT,
                format!(
                    "Inode {} ref count is {}, should be {counted}.",
                    r.ino, r.links
                ),
                crate::fix::Fix::InodeLinks(r.ino, ext4r_format::num::sat_u16(counted)),
            );
        }
    }
    let names = c.take_reconnects();
    if let Some((lpf, blocks)) = crate::lost_found::plan_expand(c, &names) {
        c.report(Subject::Inode(lpf)).error_fix(
            3,
            ProblemCode::PR_3_EXPAND_LF_DIR,
            "No room in lost+found directory.".into(),
            crate::fix::Fix::ExpandDir(lpf, blocks),
        );
    }
}

/// An unattached file with nothing in it, as e2fsck's `disconnect_inode`
/// sees it: no blocks, and no in-inode xattrs (which might be worth
/// keeping, so it goes to lost+found instead).
fn zero_length(c: &Ctx, ino: u32) -> bool {
    let Ok(info) = c.fs().inode(ext4r_format::InodeNr(ino)) else {
        return false;
    };
    if info.inode.i_blocks_lo.get() != 0 {
        return false;
    }
    ext4r_format::xattr::ibody_entries_at(&info.record).is_none()
}

/// e2fsck's PR_3_BAD_DOT_DOT words: the directory by its path in the
/// parent that names it, the `..` it has and the one it should have by
/// their paths.
fn bad_dotdot(fs: &ext4r::fs::Filesystem, ino: u32, l: &crate::ctx::DirLinks) -> String {
    use crate::pathname::{dir_path, path_in};
    format!(
        "'..' in {} ({}) is {} ({}), should be {} ({}).",
        path_in(fs, l.parent, ino),
        ino,
        dir_path(fs, l.dotdot),
        l.dotdot,
        dir_path(fs, l.parent),
        l.parent
    )
}
