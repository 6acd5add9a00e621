//! A journal made visible as a file in the root directory (`/.journal`,
//! as `tune2fs -j` on a mounted ext3 once left it) moves to the reserved
//! journal inode, as e2fsck's `e2fsck_move_ext3_journal` does in a
//! repair (PR_0_MOVE_JOURNAL): the inode is copied to inode 8, the
//! superblock points there, the name goes and the old inode is freed.
//! Only a journal inode with one link, named under one of e2fsck's names
//! in the root, is moved; a read-only check leaves it be, as e2fsck.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::inode::ino;
use ext4r_format::InodeNr;

use crate::ctx::Ctx;
use crate::fix::{Fix, Owner};

/// The names e2fsck looks for, in its order.
const NAMES: [&[u8]; 4] = [b".journal", b"journal", b".journal.dat", b"journal.dat"];

/// The move of the journal in inode `inum`, when it is one to move.
pub(crate) fn check(c: &mut Ctx, inum: u32, links: u16) {
    if !c.repairing() || inum == ino::JOURNAL || inum == 0 || links != 1 {
        return;
    }
    let Some((name, blk, off, owner)) = entry(c, inum) else {
        return;
    };
    c.report(Subject::Journal).error_fix(
        0,
        ProblemCode::PR_0_MOVE_JOURNAL,
        format!(
            "Moving journal from /{} to hidden inode.\n",
            String::from_utf8_lossy(name)
        ),
        Fix::MoveJournal(inum, blk, off, owner),
    );
}

/// The root directory's entry naming the journal: (name, block, offset,
/// the root as owner).
fn entry(c: &Ctx, inum: u32) -> Option<(&'static [u8], u64, usize, Owner)> {
    let root = c.fs().inode(InodeNr(ino::ROOT)).ok()?;
    let owner = Owner::of(ino::ROOT, &root.inode);
    let bs = u64::from(c.geo().block_size);
    let mut buf = vec![0u8; ext4r_format::num::index(bs)];
    let runs = c.fs().runs(&root).ok()?;
    'names: for name in NAMES {
        for r in &runs {
            for k in 0..r.len.min(1 << 16) {
                let b = r.physical + k;
                c.fs().device().read_at(&mut buf, b * bs).ok()?;
                for e in ext4r_format::dir::DirBlockIter::new(&buf).flatten() {
                    if e.inode.0 != 0 && e.name == name {
                        // The first entry of the name decides, as a
                        // lookup; another inode: the next name.
                        if e.inode.0 == inum {
                            return Some((name, b, e.offset, owner));
                        }
                        continue 'names;
                    }
                }
            }
        }
    }
    None
}
