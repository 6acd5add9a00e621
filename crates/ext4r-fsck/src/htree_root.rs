//! Pass 1's look at an indexed directory's root block, as e2fsck's
//! `handle_htree`: the dx root info after `.` and `..` must be sound
//! (reserved word zero, info length 8 at least, a known hash, no
//! incompatible flag, a sane depth), else the index is dropped ("Clear
//! HTree index") and the directory is read as a linear one.

use crate::codes::ProblemCode;
use crate::ctx::Ctx;

/// Why the root of indexed directory `ino` (first block at `blk`, inode
/// flags `inode_flags`) is unusable: (e2fsck's problem code, message); None when it is sound.
pub(crate) fn bad_root(
    c: &Ctx,
    ino: u32,
    inode_flags: Option<ext4r_format::inode::InodeFlags>,
    blk: Option<u64>,
    nblocks: u64,
) -> Option<(ProblemCode, String)> {
    let bad = || {
        Some((
            ProblemCode::PR_1_HTREE_BADROOT,
            format!("HTREE directory inode {ino} has an invalid root node."),
        ))
    };
    let Some(blk) = blk.filter(|&b| c.valid_range(b, 1)) else {
        return bad();
    };
    let bs = c.geo().block_size as usize;
    let mut buf = vec![0u8; bs];
    if c.fs().device().read_at(&mut buf, blk * bs as u64).is_err() {
        return bad();
    }
    let info = &buf[24..32];
    let reserved = u32::from_le_bytes([info[0], info[1], info[2], info[3]]);
    let (hash, len, levels, flags) = (info[4], info[5], info[6], info[7]);
    if reserved != 0 || len < 8 {
        return bad();
    }
    // Legacy, half MD4, TEA, SipHash.
    if !matches!(hash, 0 | 1 | 2 | 6) {
        return Some((
            ProblemCode::PR_1_HTREE_HASHV,
            format!("HTREE directory inode {ino} has an unsupported hash version ({hash})"),
        ));
    }
    // SipHash is for directories both encrypted and case-folded, and only
    // for them (e2fsck's PR_1_HTREE_NEEDS_SIPHASH / _CANNOT_SIPHASH).
    // The inode's flags as pass 1 read them (`None` where the inode does
    // not load); read again from disk, they cost a read per directory.
    if let Some(f) = inode_flags {
        use ext4r_format::inode::InodeFlags;
        let needs = f.contains(InodeFlags::ENCRYPT) && f.contains(InodeFlags::CASEFOLD);
        if needs && hash != 6 {
            return Some((
                ProblemCode::PR_1_HTREE_NEEDS_SIPHASH,
                format!("HTREE directory inode {ino} uses hash version ({hash}), but should use SipHash (6)"),
            ));
        }
        if !needs && hash == 6 {
            return Some((
                ProblemCode::PR_1_HTREE_CANNOT_SIPHASH,
                format!("HTREE directory inode {ino} uses SipHash, but should not."),
            ));
        }
    }
    if flags & 1 != 0 {
        return Some((
            ProblemCode::PR_1_HTREE_INCOMPAT,
            format!("HTREE directory inode {ino} uses an incompatible htree root node flag."),
        ));
    }
    // e2fsck's ext2_dir_htree_level: 3 levels with largedir, else 2;
    // pass 1 refuses more, pass 2 that many.
    let max = if c
        .sb()
        .has_incompat(ext4r_format::features::Incompat::LARGEDIR)
    {
        3
    } else {
        2
    };
    if levels > max {
        return Some((
            ProblemCode::PR_1_HTREE_DEPTH,
            format!("HTREE directory inode {ino} has a tree depth ({levels}) which is too big"),
        ));
    }
    if levels == max {
        return Some((
            ProblemCode::PR_2_HTREE_BAD_ROOT,
            format!("Problem in HTREE directory inode {ino}: root node is invalid"),
        ));
    }
    // The index entries after the info: count and limit in the first
    // slot, e2fsck's parse_int_node on block 0.
    let at = 24 + usize::from(len);
    let word = |i: usize| buf.get(i..i + 2).map(|x| u16::from_le_bytes([x[0], x[1]]));
    let (Some(limit), Some(count)) = (word(at), word(at + 2)) else {
        return bad();
    };
    let tail = usize::from(c.csum());
    let expect = (bs.saturating_sub(at) / 8).saturating_sub(tail);
    let node = |code: ProblemCode, what: String| {
        Some((
            code,
            format!("Problem in HTREE directory inode {ino}: block #0 has {what}"),
        ))
    };
    if usize::from(limit) != expect {
        return node(
            ProblemCode::PR_2_HTREE_BAD_LIMIT,
            format!("invalid limit ({limit})"),
        );
    }
    if usize::from(count) > expect {
        return node(
            ProblemCode::PR_2_HTREE_BAD_COUNT,
            format!("invalid count ({count})"),
        );
    }
    for i in 0..usize::from(count) {
        let p = at + i * 8 + 4;
        let Some(b) = buf.get(p..p + 4) else { break };
        let b = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & 0x0fff_ffff;
        if u64::from(b) >= nblocks {
            return Some((
                ProblemCode::PR_2_HTREE_BADBLK,
                format!("Problem in HTREE directory inode {ino}: bad block number {b}."),
            ));
        }
    }
    None
}
