//! Quota files left visible (`/aquota.user`, `/aquota.group`, as quota
//! tools once made them) under the quota feature, which keeps them in
//! the reserved inodes 3 and 4: e2fsck's `e2fsck_hide_quota`, in a repair
//! only (PR_0_HIDE_QUOTA). The inode is copied to the reserved one as a
//! new inode (one link, mode 0600, immutable), the superblock points
//! there, the name goes from the root and the old inode is freed. The
//! project quota inode has no reserved number and is never moved.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::features::RoCompat;
use ext4r_format::inode::ino;
use ext4r_format::InodeNr;

use crate::ctx::Ctx;
use crate::fix::plan::HideQuota;
use crate::fix::{Fix, Owner};

/// The hiding of visible quota inodes, as e2fsck decides it at the end
/// of its superblock checks. A round that hides one stops after pass 0:
/// e2fsck hides them before pass 1 reads anything.
pub(crate) fn check(c: &mut Ctx) {
    let sb = c.sb().clone();
    if !c.repairing() || !sb.has_ro_compat(RoCompat::QUOTA) {
        return;
    }
    let max = sb.s_inodes_count.get();
    let names: [(&str, &[u8], u32, u32); 2] = [
        (
            "user",
            b"aquota.user",
            sb.s_usr_quota_inum.get(),
            ino::USR_QUOTA,
        ),
        (
            "group",
            b"aquota.group",
            sb.s_grp_quota_inum.get(),
            ino::GRP_QUOTA,
        ),
    ];
    for ((what, name, from, to), qtype) in names.into_iter().zip(0u8..) {
        // A number pass 0 calls invalid is cleared instead (e2fsck
        // validates before it hides).
        let invalid = from > max || (from < sb.first_ino() && from != to);
        if from == 0 || from == to || invalid {
            continue;
        }
        // e2fsck's guess for the directory: the root.
        let path = crate::pathname::path_in(c.fs(), ino::ROOT, from);
        let fix = Fix::HideQuota(Box::new(HideQuota {
            qtype,
            from,
            to,
            entry: entry(c, name, from),
        }));
        c.report(Subject::Quota(qtype)).error_fix(
            0,
            ProblemCode::PR_0_HIDE_QUOTA,
            format!("Hiding {what} quota inode {from} ({path})."),
            fix,
        );
        c.stop_after_pass();
    }
}

/// The root's entry `name` for inode `inum`: (block, offset, the root).
fn entry(c: &Ctx, name: &[u8], inum: u32) -> Option<(u64, usize, Owner)> {
    let root = c.fs().inode(InodeNr(ino::ROOT)).ok()?;
    let owner = Owner::of(ino::ROOT, &root.inode);
    let bs = u64::from(c.geo().block_size);
    let mut buf = vec![0u8; ext4r_format::num::index(bs)];
    for r in &c.fs().runs(&root).ok()? {
        for k in 0..r.len.min(1 << 16) {
            let b = r.physical + k;
            c.fs().device().read_at(&mut buf, b * bs).ok()?;
            for e in ext4r_format::dir::DirBlockIter::new(&buf).flatten() {
                if e.inode.0 == inum && e.name == name {
                    return Some((b, e.offset, owner));
                }
            }
        }
    }
    None
}
