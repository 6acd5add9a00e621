//! The resize inode (inode 7), judged as e2fsck's `check_resize_inode`:
//! with the resize_inode feature it maps only its double-indirect block,
//! whose entries name the primary reserved GDT blocks, each listing its
//! copies in the backup groups; without the feature its block map is
//! empty. An invalid one is recreated as mke2fs lays it out
//! ("Resize inode not valid.  Recreate"), once pass 1 knows every block
//! in use, as e2fsck does at the end of its pass 1.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::inode::{ino::RESIZE, Inode, InodeFlags};

use crate::ctx::Ctx;
use crate::fix::Fix;

/// `i_block` slot of the double-indirect block.
const DIND_SLOT: usize = 13;

/// The resize inode's pointer in `block` (None: its `i_block`) at
/// `index`, as what a problem is about.
fn slot(block: Option<u64>, index: usize) -> Subject {
    Subject::Pointer {
        ino: RESIZE,
        block,
        index,
    }
}
/// `S_IFREG`, tested as a bit as e2fsck does.
const S_IFREG: u16 = 0o100_000;

/// Tells the device the blocks [`check`] will read (inode 7's
/// double-indirect block and the reserved GDT blocks after the primary
/// descriptors), before pass 1 announces its first window of inode
/// tables: asked for after that window, on a cold cache, the first of
/// them waited behind all of it (27 ms of a 0.9 s check of 2M files) and
/// the rest came one block at a time. A hint only: a record that cannot
/// be read announces nothing and `check` reports what it finds.
pub(crate) fn announce(c: &Ctx) {
    let sb = c.sb();
    let reserved = u64::from(sb.s_reserved_gdt_blocks.get());
    if !sb.has_compat(Compat::RESIZE_INODE) || sb.has_incompat(Incompat::META_BG) || reserved == 0 {
        return;
    }
    let geo = c.geo();
    let bs = u64::from(geo.block_size);
    let first = superblock_block(geo) + 1 + u64::from(geo.desc_blocks());
    let dev = c.fs().device();
    if c.valid_range(first, reserved) {
        dev.will_need(first * bs, reserved * bs);
    }
    let Ok(rec) = c.fs().inode_record(ext4r_format::types::InodeNr(RESIZE)) else {
        return;
    };
    if let Ok(inode) = Inode::parse(&rec) {
        let dind = u64::from(inode.block_words()[DIND_SLOT]);
        if dind != 0 && c.valid_range(dind, 1) {
            dev.will_need(dind * bs, bs);
        }
    }
}

/// Pass 1's look at inode 7. The superblock-level findings (feature off
/// with a reserve or a non-empty inode, meta_bg with the feature) leave
/// e2fsck -n's exit at 0: they are harmless here, and fixed on repair.
///
/// `xattr_blocks`: what its extended attribute block adds to `i_blocks`
/// (0 or 1), as pass 1 counted it (e2fsck's `check_blocks` reads inode
/// 7's `i_file_acl` as any inode's).
pub(crate) fn check(c: &mut Ctx, inode: &Inode, xattr_blocks: u64) {
    let words = inode.block_words();
    let has = c.sb().has_compat(Compat::RESIZE_INODE);
    if has && c.sb().has_incompat(Incompat::META_BG) {
        // meta_bg places descriptors where resizing needs no reserve.
        c.report(Subject::Filesystem).harmless_fix(
            0,
            ProblemCode::PR_0_DISABLE_RESIZE_INODE,
            "Resize_inode and meta_bg features are enabled. Those features are\n\
             not compatible. Resize inode should be disabled."
                .into(),
            Fix::DropResizeFeature,
        );
        return;
    }
    let reserved = c.sb().s_reserved_gdt_blocks.get();
    if !has && reserved != 0 {
        c.report(Subject::Filesystem).harmless_fix(
            0,
            ProblemCode::PR_0_NONZERO_RESERVED_GDT_BLOCKS,
            format!(
                "Filesystem does not have resize_inode enabled, but s_reserved_gdt_blocks\n\
                 is {reserved}; should be zero."
            ),
            Fix::DropResizeFeature,
        );
    }
    if !has {
        if words.iter().any(|&w| w != 0) {
            c.report(Subject::Inode(RESIZE)).harmless_fix(
                0,
                ProblemCode::PR_0_CLEAR_RESIZE_INODE,
                "Resize_inode not enabled, but the resize inode is non-zero.".into(),
                Fix::ZeroInode(RESIZE),
            );
        }
        return;
    }
    let dind = u64::from(words[DIND_SLOT]);
    if valid(c, inode, &words) {
        c.claim(dind, 1, RESIZE);
        block_numbers(c, inode, &words, xattr_blocks);
    } else {
        // Reported with its new place once every block in use is known.
        c.recreate_resize_inode();
        if !c.repairing() {
            // e2fsck -n keeps the invalid inode and walks it in pass 1,
            // which counts its double-indirect block in use (its
            // process_block marks that one block of inode 7's).
            if dind != 0 && c.valid_range(dind, 1) {
                c.claim(dind, 1, RESIZE);
            }
            block_numbers(c, inode, &words, xattr_blocks);
        }
    }
}

/// Pass 1's walk of inode 7's block map, as e2fsck's `check_blocks` makes
/// it for every inode: `check_resize_inode` looks at only the first
/// quarter of the reserve, so a bad number anywhere else in the
/// double-indirect block or in a reserved GDT block's list of copies is
/// found here. Each is an illegal block, cleared on repair, and `i_blocks`
/// must then count what is left. (The blocks themselves are claimed as
/// group metadata, not by the inode.)
fn block_numbers(c: &mut Ctx, inode: &Inode, words: &[u32; 15], xattr_blocks: u64) {
    /// e2fsck asks "Too many illegal blocks ... Clear inode?" at the
    /// twelfth one, before reporting it.
    const TOO_MANY: usize = 12;
    let dind = u64::from(words[DIND_SLOT]);
    if dind == 0 {
        return;
    }
    let apb = u64::from(c.geo().block_size / 4);
    // Logical block of entry 0 of the double-indirect block.
    let dind_base = 12 + apb;
    let mut illegal: Vec<(Subject, String, Fix)> = Vec::new();
    let mut blocks = 0u64;
    if c.valid_range(dind, 1) {
        blocks += 1;
        let entries = read_words(c, dind).unwrap_or_default();
        'walk: for (i, &ind) in entries.iter().enumerate() {
            let ind = u64::from(ind);
            if ind == 0 {
                continue;
            }
            if !c.valid_range(ind, 1) {
                illegal.push((
                    slot(Some(dind), i),
                    format!("Illegal indirect block ({ind}) in inode {RESIZE}."),
                    Fix::IndirectEntry(dind, i),
                ));
                if illegal.len() >= TOO_MANY {
                    break;
                }
                continue;
            }
            blocks += 1;
            for (j, &b) in read_words(c, ind).unwrap_or_default().iter().enumerate() {
                let b = u64::from(b);
                if b == 0 {
                    continue;
                }
                if c.valid_range(b, 1) {
                    blocks += 1;
                    continue;
                }
                let lblk = dind_base + i as u64 * apb + j as u64;
                illegal.push((
                    slot(Some(ind), j),
                    format!("Illegal block #{lblk} ({b}) in inode {RESIZE}."),
                    Fix::ReservedGdtEntry(ind, j),
                ));
                if illegal.len() >= TOO_MANY {
                    break 'walk;
                }
            }
        }
    } else {
        illegal.push((
            slot(None, DIND_SLOT),
            format!("Illegal double indirect block ({dind}) in inode {RESIZE}."),
            Fix::InodeBlockSlot(RESIZE, DIND_SLOT),
        ));
    }
    if illegal.len() >= TOO_MANY {
        // Cleared whole; the next look finds it invalid and recreates it.
        c.report(Subject::Inode(RESIZE)).error_fix(
            1,
            ProblemCode::PR_1_TOO_MANY_BAD_BLOCKS,
            format!("Too many illegal blocks in inode {RESIZE}."),
            Fix::ZeroInode(RESIZE),
        );
        return;
    }
    let dind_illegal = matches!(illegal.first(), Some((_, _, Fix::InodeBlockSlot(..))));
    for (at, what, fix) in illegal {
        c.report(at)
            .error_fix(1, ProblemCode::PR_1_ILLEGAL_BLOCK_NUM, what, fix);
        c.latch_last(
            ProblemCode::PR_1_INODE_BLOCK_LATCH,
            format!("Inode {RESIZE} has illegal block(s)."),
        );
    }
    if dind_illegal {
        // Without a double-indirect block the inode is recreated.
        return;
    }
    // e2fsck counts every block of inode 7 (its walk does not merge
    // blocks of one cluster as it does for other files), and then
    // multiplies by the cluster ratio as for any inode on bigalloc. As
    // for any inode, with huge_file the count has 48 bits (the high word
    // was left out here: a damaged one went unseen, and a repair stamped
    // the checksum over it), and HUGE_FILE_FL counts blocks, not sectors.
    let blocks = blocks + xattr_blocks;
    let cluster_bits = c.geo().cluster_bits;
    let bs = u64::from(c.geo().block_size);
    let huge = c.sb().has_ro_compat(RoCompat::HUGE_FILE);
    let in_fs_blocks = huge && inode.flags().contains(InodeFlags::HUGE_FILE);
    let want = if in_fs_blocks {
        blocks << cluster_bits
    } else {
        (blocks * (bs / 512)) << cluster_bits
    };
    let have =
        inode.blocks_count(huge, c.geo().block_size) / if in_fs_blocks { bs / 512 } else { 1 };
    if have != want {
        c.report(Subject::Inode(RESIZE)).error_fix(
            1,
            ProblemCode::PR_1_BAD_I_BLOCKS,
            format!("Inode {RESIZE}, i_blocks is {have}, should be {want}."),
            Fix::InodeBlocks(RESIZE, blocks << cluster_bits),
        );
    }
}

/// Whether inode 7 is what `ext2fs_create_resize_inode` leaves: the tests
/// of e2fsck, which reads only the first quarter of the reserved GDT
/// blocks' lists.
fn valid(c: &Ctx, inode: &Inode, words: &[u32; 15]) -> bool {
    let dind = u64::from(words[DIND_SLOT]);
    let layout_ok = words
        .iter()
        .enumerate()
        .all(|(i, &w)| i == DIND_SLOT || w == 0);
    if !layout_ok
        || dind == 0
        || inode.links_count() == 0
        || inode.mode() & S_IFREG == 0
        || !c.valid_range(dind, 1)
    {
        return false;
    }
    let Some(dind_buf) = read_words(c, dind) else {
        return false;
    };
    let geo = c.geo();
    let apb = u64::from(geo.block_size / 4);
    let desc_blocks = u64::from(geo.desc_blocks());
    let sb_blk = superblock_block(geo);
    // The groups with a superblock copy, found once rather than by a
    // scan of every group per reserved block.
    let backups: Vec<u32> = (1..geo.group_count).filter(|&g| geo.has_super(g)).collect();
    for i in 0..u64::from(c.sb().s_reserved_gdt_blocks.get() / 4) {
        let pblk = sb_blk + 1 + desc_blocks + i;
        let off = ext4r_format::num::index((desc_blocks + i) % apb);
        if u64::from(dind_buf[off]) != pblk {
            return false;
        }
        let Some(ind) = read_words(c, pblk) else {
            return false;
        };
        for (k, &g) in backups.iter().enumerate() {
            // A backup past 2^32 cannot be listed in a 32-bit word.
            let expect = u32::try_from(pblk + u64::from(g) * geo.blocks_per_group).ok();
            if expect.is_none() || ind.get(k) != expect.as_ref() {
                return false;
            }
        }
    }
    true
}

/// The block of the primary superblock, which the descriptors and then
/// the reserved GDT blocks follow (block 1 of 1 KiB blocks, where the
/// superblock's 1024 bytes are a whole block, even with a first data
/// block of 0 under bigalloc).
fn superblock_block(geo: &ext4r_format::geometry::Geometry) -> u64 {
    if geo.block_size == 1024 && geo.first_data_block == 0 {
        1
    } else {
        geo.first_data_block
    }
}

/// A block read as little-endian 32-bit words.
fn read_words(c: &Ctx, b: u64) -> Option<Vec<u32>> {
    let buf = c.read_block(b)?;
    Some(
        buf.chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect(),
    )
}

/// End of pass 1: an invalid resize inode gets a new double-indirect
/// block, the first free one from mke2fs's goal (wrapping to the start),
/// as `ext2fs_create_resize_inode` allocates it from the blocks pass 1
/// found in use. A repairing check counts the block in use, so that pass
/// 5's bitmaps agree with the recreated inode.
pub(crate) fn finish(c: &mut Ctx) {
    if !c.resize_recreate() {
        return;
    }
    let msg = "Resize inode not valid.".to_string();
    let goal = ext4r::mkfs::resize_inode::dind_goal(c.geo());
    match free_block_from(c, goal) {
        Some(b) => {
            let fix = Fix::RecreateResizeInode(b);
            let repairing = c.repairing();
            let p = c.report(Subject::Inode(RESIZE));
            if repairing {
                p.error_fix(0, ProblemCode::PR_0_RESIZE_INODE_INVALID, msg, fix);
                c.claim(b, 1, RESIZE);
            } else {
                // e2fsck asks before its pass 1, and leaving the inode
                // does not make the check fail (its walk in pass 1 counts
                // the double-indirect block, so the bitmaps agree).
                p.harmless_fix(0, ProblemCode::PR_0_RESIZE_INODE_INVALID, msg, fix);
            }
        }
        None => {
            c.report(Subject::Inode(RESIZE))
                .error(0, ProblemCode::PR_0_RESIZE_INODE_INVALID, msg)
        }
    }
}

/// The first block at or after `goal` (then from the first data block)
/// that no claim covers and no other repair of this check took
/// (`ext2fs_new_block2` over e2fsck's map of found blocks).
fn free_block_from(c: &Ctx, goal: u64) -> Option<u64> {
    c.claimed_map().new_block(goal)
}
