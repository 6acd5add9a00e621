//! The bad block list (inode 1) against the filesystem's metadata, as
//! e2fsck judges it: the primary superblock or descriptors on the list
//! cannot be bad if the filesystem opened, so they leave the list; a
//! bitmap on the list is relocated; inode table blocks and backup copies
//! may be on it (the inodes there are unusable and pass 1 skips them).
//! Listed blocks that are metadata are not counted twice.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::inode::Inode;
use ext4r_format::InodeNr;
use ext4r_txn::map::walk::{self, Ptr, Step, Visitor};

use crate::claims::Claim;
use crate::ctx::Ctx;
use crate::fix::plan::{Meta, PtrAt};
use crate::fix::Fix;

/// The data blocks of the bad block inode, sorted (pass 1 skips inodes
/// stored in them).
pub(crate) fn list(c: &Ctx) -> Vec<u64> {
    // Read raw: the inode has no mode, so the engine does not map it. A
    // list is short: direct, single and double indirect blocks suffice.
    let Some(inode) = c
        .fs()
        .inode_record(InodeNr(ext4r_format::inode::ino::BAD))
        .ok()
        .and_then(|r| Inode::parse(&r).ok())
    else {
        return Vec::new();
    };
    if bad_inode_invalid(&inode) {
        return Vec::new();
    }
    let mut v = BadList { c, out: Vec::new() };
    let mut root = inode.i_block;
    let Ok(_) = walk::block_map(&mut root, c.geo().block_size, &mut v);
    let mut v = v.out;
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether the list names the inode table block holding the bad block
/// inode itself (e2fsck's PR_1_BADBLOCKS_IN_BADBLOCKS): a list read from
/// a bad block cannot be trusted. As e2fsck, the inode is cleared (its
/// block map too, or the next check would find the same list) and the
/// list is not used for the rest of the check; its blocks are freed in
/// the next round.
pub(crate) fn lists_itself(c: &mut Ctx) -> bool {
    let bad = ext4r_format::inode::ino::BAD;
    if !inode_in_bad_block(c, bad) {
        return false;
    }
    c.report(Subject::Inode(bad)).error_fix(
        1,
        ProblemCode::PR_1_BADBLOCKS_IN_BADBLOCKS,
        "Bad block list says the bad block list inode is bad.".into(),
        Fix::ZeroInode(bad),
    );
    true
}

/// Whether the list was found naming its own inode's block: its blocks
/// are then no one's in this round.
pub(crate) fn distrusted(c: &Ctx) -> bool {
    c.problems()
        .list()
        .iter()
        .any(|p| p.code == ProblemCode::PR_1_BADBLOCKS_IN_BADBLOCKS)
}

/// The walk of the bad block inode's map: its valid data pointers, from
/// the direct, single and double indirect slots (a list is short; an
/// indirect block that cannot be read lists nothing).
struct BadList<'a> {
    c: &'a Ctx,
    out: Vec<u64>,
}

impl Visitor for BadList<'_> {
    type Error = std::convert::Infallible;

    fn pointer(&mut self, p: &Ptr) -> Result<Step, Self::Error> {
        // The triple indirect block is not read.
        let top = p.slot.block.is_none() && p.levels == 3;
        if top || !self.c.valid_range(p.physical, 1) {
            return Ok(Step::Next);
        }
        if p.levels == 0 {
            self.out.push(p.physical);
            return Ok(Step::Next);
        }
        Ok(Step::Descend)
    }

    fn enter(&mut self, p: &Ptr) -> Result<Option<Vec<u8>>, Self::Error> {
        let bs = self.c.geo().block_size as usize;
        let mut buf = vec![0u8; bs];
        let read = self
            .c
            .fs()
            .device()
            .read_at(&mut buf, p.physical * bs as u64);
        Ok(read.is_ok().then_some(buf))
    }
}

/// Whether the bad block inode holds what it may not (e2fsck's
/// PR_1_INVALID_BAD_INODE): a mode, owner, links, inline data or xattrs.
pub(crate) fn bad_inode_invalid(i: &Inode) -> bool {
    i.mode() != 0
        || i.i_uid.get() != 0
        || i.i_gid.get() != 0
        || i.links_count() != 0
        || i.flags()
            .contains(ext4r_format::inode::InodeFlags::INLINE_DATA)
        || i.i_file_acl_lo.get() != 0
}

/// The inodes stored in listed blocks: in use for the inode bitmap (as
/// e2fsck marks them) and never handed out.
pub(crate) fn inodes_in_bad_blocks(c: &Ctx) -> Vec<u32> {
    let mut out = Vec::new();
    if c.bad_blocks().is_empty() {
        return out;
    }
    let per = u64::from(c.geo().block_size / c.geo().inode_size);
    let itb = u64::from(c.geo().inode_blocks_per_group());
    let ipg = u64::from(c.geo().inodes_per_group);
    for g in 0..c.geo().group_count {
        let Ok(d) = c.fs().group_desc(ext4r_format::GroupNr(g)) else {
            break;
        };
        let t = d.inode_table(c.wide());
        for &b in c.bad_blocks() {
            if b >= t && b < t + itb {
                let first = (b - t) * per;
                for k in first..(first + per).min(ipg) {
                    // Inode numbers past u32 (a damaged geometry) name no inode.
                    out.extend(u32::try_from(u64::from(g) * ipg + k + 1).ok());
                }
            }
        }
    }
    out
}

/// Whether inode `ino` is stored in a listed block. Without a list (most
/// filesystems) answered inline: pass 1 asks for every inode.
#[inline]
pub(crate) fn inode_in_bad_block(c: &Ctx, ino: u32) -> bool {
    !c.bad_blocks().is_empty() && in_listed_block(c, ino)
}

/// [`inode_in_bad_block`] with a list to look in.
#[inline(never)]
fn in_listed_block(c: &Ctx, ino: u32) -> bool {
    let ipg = c.geo().inodes_per_group;
    let (g, idx) = ((ino - 1) / ipg, u64::from((ino - 1) % ipg));
    let Ok(d) = c.fs().group_desc(ext4r_format::GroupNr(g)) else {
        return false;
    };
    let b = d.inode_table(c.wide())
        + idx * u64::from(c.geo().inode_size) / u64::from(c.geo().block_size);
    c.bad_blocks().binary_search(&b).is_ok()
}

/// A backup superblock or descriptor block on the bad block list: only a
/// warning (e2fsck's PR_1_BAD_SUPERBLOCK, PR_1_BAD_GROUP_DESCRIPTORS); the
/// primary copies serve.
fn backup_copy(c: &mut Ctx, b: u64) {
    for g in 1..c.geo().group_count {
        let m = c.geo().group_meta(g);
        if m.super_block == Some(b) {
            c.report(Subject::Block(b)).harmless(
                1,
                ProblemCode::PR_1_BAD_SUPERBLOCK,
                format!("Warning: Group {g}'s superblock ({b}) is bad."),
            );
            return;
        }
        let in_desc =
            m.old_desc.is_some_and(|(f, n)| b >= f && b < f + n) || m.meta_desc == Some(b);
        if in_desc {
            c.report(Subject::Block(b)).harmless(
                1,
                ProblemCode::PR_1_BAD_GROUP_DESCRIPTORS,
                format!(
                    "Warning: Group {g}'s copy of the group descriptors has a bad block ({b})."
                ),
            );
            return;
        }
    }
}

/// A piece of metadata: blocks `[0, 1)`, the group's bitmap it is (if
/// one), whether it is the primary superblock or descriptors.
type MetaSpan = (u64, u64, Option<(u32, Meta)>, bool);

/// Takes the bad block inode's claims on metadata out of `claims`, with
/// the repairs e2fsck makes for them.
pub(crate) fn sort_out(c: &mut Ctx, claims: &mut Vec<Claim>) {
    if c.bad_blocks().is_empty() {
        return;
    }
    let wide = c.wide();
    let itb = u64::from(c.geo().inode_blocks_per_group());
    // (start, end, which bitmap, a primary copy) of all metadata.
    let mut meta: Vec<MetaSpan> = Vec::new();
    for g in 0..c.geo().group_count {
        let m = c.geo().group_meta(g);
        let primary = g == 0;
        if let Some(s) = m.super_block {
            meta.push((s, s + 1, None, primary));
        }
        if let Some((f, n)) = m.old_desc {
            meta.push((f, f + n, None, primary));
        }
        if let Some(b) = m.meta_desc {
            meta.push((b, b + 1, None, false));
        }
        if let Ok(d) = c.fs().group_desc(ext4r_format::GroupNr(g)) {
            let (bb, ib, it) = (
                d.block_bitmap(wide),
                d.inode_bitmap(wide),
                d.inode_table(wide),
            );
            meta.push((bb, bb + 1, Some((g, Meta::BlockBitmap)), false));
            meta.push((ib, ib + 1, Some((g, Meta::InodeBitmap)), false));
            meta.push((it, it + itb, None, false));
        }
    }
    let find = |b: u64| meta.iter().find(|m| b >= m.0 && b < m.1).copied();
    let mut unlist: Vec<u64> = Vec::new();
    let mut on_meta: Vec<u64> = Vec::new();
    for b in c.bad_blocks().to_vec() {
        let m = find(b);
        if m.is_some() {
            on_meta.push(b);
        }
        match m {
            None => {}
            Some((_, _, Some((g, what)), _)) => {
                let (name, code) = if what == Meta::BlockBitmap {
                    ("block", ProblemCode::PR_1_BB_BAD_BLOCK)
                } else {
                    ("inode", ProblemCode::PR_1_IB_BAD_BLOCK)
                };
                c.report(Subject::Block(b)).error(
                    1,
                    code,
                    format!("Group {g}'s {name} bitmap ({b}) is bad."),
                );
                if !c.relocating(g, what) {
                    c.relocate_later(g, what, true);
                }
            }
            Some((_, _, None, true)) => unlist.push(b),
            Some((_, _, None, false)) => backup_copy(c, b),
        }
    }
    // The bad block inode's own claims give way to metadata's.
    let bad_ino = ext4r_format::inode::ino::BAD;
    let mut out = Vec::with_capacity(claims.len());
    for cl in claims.drain(..) {
        if cl.owner != bad_ino {
            out.push(cl);
            continue;
        }
        for b in cl.start..cl.start + cl.len {
            if !on_meta.contains(&b) {
                out.push(Claim {
                    start: b,
                    len: 1,
                    owner: bad_ino,
                });
            }
        }
    }
    *claims = out;
    let pointers = crate::dup::pointers(c.fs(), ext4r_format::inode::ino::BAD)
        .map(|p| p.1)
        .unwrap_or_default();
    for &b in &unlist {
        let (code, msg) = if b == c.geo().group_meta(0).super_block.unwrap_or(u64::MAX) {
            (
                ProblemCode::PR_1_BAD_PRIMARY_SUPERBLOCK,
                format!("The primary superblock ({b}) is on the bad block list."),
            )
        } else {
            (
                ProblemCode::PR_1_BAD_PRIMARY_GROUP_DESCRIPTOR,
                format!("Block {b} in the primary group descriptors is on the bad block list"),
            )
        };
        let at = pointers.iter().find(|p| p.1 == b).map(|p| p.0);
        let fix = match at {
            Some(PtrAt::InodeSlot(s)) => {
                Some(Fix::InodeBlockSlot(ext4r_format::inode::ino::BAD, s))
            }
            Some(PtrAt::Indirect(blk, i)) => Some(Fix::IndirectEntry(blk, i)),
            _ => None,
        };
        c.report(Subject::Block(b)).error_or_fix(1, code, msg, fix)
    }
    if !unlist.is_empty() {
        // Its block count follows the list (pointers include indirect
        // blocks).
        let n = pointers.iter().filter(|p| !unlist.contains(&p.1)).count() as u64;
        c.report(Subject::Inode(ext4r_format::inode::ino::BAD))
            .error_fix(
                1,
                ProblemCode::PR_1_BAD_I_BLOCKS,
                format!("Inode 1, i_blocks follows its list ({n} blocks)."),
                Fix::InodeBlocks(ext4r_format::inode::ino::BAD, n),
            );
    }
}
