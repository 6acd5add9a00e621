//! The orphan file's shape, as e2fsck's `check_init_orphan_file` judges it
//! at the end of a check: its size must be whole blocks
//! (PR_6_ORPHAN_FILE_WRONG_SIZE) and every block up to it mapped
//! (PR_6_ORPHAN_FILE_HOLE). Either makes the file unusable
//! (PR_6_ORPHAN_FILE_CORRUPTED), and it is made anew: mke2fs's default
//! number of blocks, each an empty orphan block, mapped by an extent tree
//! (the blocks of the old file are no longer claimed and the next
//! round's pass 5 frees them). With bitmaps being relocated the new file
//! waits for the next round (PR_6_ORPHAN_FILE_BITMAP_INVALID), as
//! e2fsck, whose bitmaps cannot be trusted then, leaves it.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::extent::Extent;
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::orphan::default_orphan_file_blocks;
use ext4r_format::{BlockNr, InodeNr};

use crate::ctx::Ctx;
use crate::extent_rebuild::Collected;
use crate::fix::plan::{ExtentTree, NewOrphanFile};
use crate::fix::{Fix, Owner};

pub(crate) fn check(c: &mut Ctx) {
    let sb = c.sb().clone();
    let inum = sb.s_orphan_file_inum.get();
    if !sb.has_compat(Compat::ORPHAN_FILE)
        || !sb.has_compat(Compat::HAS_JOURNAL)
        || inum == 0
        || inum > sb.s_inodes_count.get()
    {
        return;
    }
    let Ok(info) = c.fs().inode(InodeNr(inum)) else {
        return;
    };
    let bs = u64::from(c.geo().block_size);
    let size = info.inode.size();
    if size % bs != 0 {
        c.report(Subject::Inode(inum)).harmless(
            5,
            ProblemCode::PR_6_ORPHAN_FILE_WRONG_SIZE,
            format!("Orphan file (inode {inum}) size is not multiple of block size."),
        );
    } else {
        let Ok(runs) = c.fs().runs(&info) else { return };
        let mut next = 0u64;
        let mut hole = None;
        let mut sorted: Vec<_> = runs.iter().map(|r| (r.logical, r.len)).collect();
        sorted.sort_unstable();
        for (l, n) in sorted {
            if l > next {
                hole = Some(next);
                break;
            }
            next = next.max(l + n);
        }
        let hole = hole.or((next < size / bs).then_some(next));
        // libext2fs's block iteration meets holes in block maps only: an
        // extent-mapped file with one passes, as in e2fsck.
        let hole = hole.filter(|_| {
            !info
                .inode
                .flags()
                .contains(ext4r_format::inode::InodeFlags::EXTENTS)
        });
        match hole {
            Some(h) if h < size / bs => c.report(Subject::InodeAt(inum, h)).harmless(
                5,
                ProblemCode::PR_6_ORPHAN_FILE_HOLE,
                format!("Orphan file (inode {inum}) contains hole at block {h}."),
            ),
            _ => return,
        }
    }
    let msg = "Failed to initialize orphan file.".to_string();
    if c.any_relocation() {
        c.report(Subject::Inode(inum))
            .error(5, ProblemCode::PR_6_ORPHAN_FILE_CORRUPTED, msg);
        c.report(Subject::Inode(inum)).harmless(
            5,
            ProblemCode::PR_6_ORPHAN_FILE_BITMAP_INVALID,
            "Cannot fix corrupted orphan file with invalid bitmaps.".into(),
        );
        return;
    }
    match plan(c, inum, &info.inode) {
        Some(f) => c.report(Subject::Inode(inum)).error_fix(
            5,
            ProblemCode::PR_6_ORPHAN_FILE_CORRUPTED,
            msg,
            f,
        ),
        None => {
            c.report(Subject::Inode(inum))
                .error(5, ProblemCode::PR_6_ORPHAN_FILE_CORRUPTED, msg)
        }
    }
}

/// Blocks and their map for a new orphan file of mke2fs's size.
fn plan(c: &mut Ctx, inum: u32, inode: &ext4r_format::inode::Inode) -> Option<Fix> {
    if c.geo().cluster_bits != 0 {
        return None;
    }
    let n = ext4r_format::num::index(default_orphan_file_blocks(c.geo().blocks_count, 1));
    let owner = Owner::of(inum, inode);
    let generation = inode.generation();
    if !c.sb().has_incompat(Incompat::EXTENTS) {
        return block_map(c, inum, owner, generation, n);
    }
    let blocks = crate::lost_found::reserve_blocks(c, n);
    if blocks.len() < n {
        return None;
    }
    let mut found = Collected::default();
    let mut i = 0usize;
    while i < blocks.len() {
        let mut j = i + 1;
        while j < blocks.len() && blocks[j] == blocks[j - 1] + 1 && j - i < 32_768 {
            j += 1;
        }
        let e = Extent::new(
            u32::try_from(i).ok()?,
            BlockNr(blocks[i]),
            u16::try_from(j - i).ok()?,
            false,
        )
        .ok()?;
        found.extents.push(e);
        i = j;
    }
    let Some(Fix::RebuildExtents(tree)) = crate::extent_rebuild::plan(c, inum, owner, found) else {
        return None;
    };
    let ExtentTree {
        root,
        blocks: nodes,
        ..
    } = *tree;
    Some(Fix::NewOrphanFile(Box::new(NewOrphanFile {
        ino: inum,
        owner,
        root,
        extents: true,
        nodes,
        blocks,
        generation,
    })))
}

/// A block map: the first blocks direct, the rest under one indirect
/// block (taken first, as libext2fs allocates it before what it maps).
fn block_map(c: &mut Ctx, inum: u32, owner: Owner, generation: u32, n: usize) -> Option<Fix> {
    let bs = c.geo().block_size as usize;
    let direct = 12usize;
    if n > direct + bs / 4 {
        return None;
    }
    let ind = usize::from(n > direct);
    let got = crate::lost_found::reserve_blocks(c, n + ind);
    if got.len() < n + ind {
        return None;
    }
    let mut words = [0u32; 15];
    let mut data = Vec::with_capacity(n);
    let mut nodes = Vec::new();
    let mut it = got.into_iter();
    for w in words.iter_mut().take(direct.min(n)) {
        let b = it.next()?;
        *w = u32::try_from(b).ok()?;
        data.push(b);
    }
    if ind == 1 {
        let ib = it.next()?;
        words[12] = u32::try_from(ib).ok()?;
        let mut buf = vec![0u8; bs];
        for (k, b) in it.enumerate() {
            buf[k * 4..k * 4 + 4].copy_from_slice(&u32::try_from(b).ok()?.to_le_bytes());
            data.push(b);
        }
        nodes.push((ib, buf));
    }
    let mut root = [0u8; 60];
    for (k, w) in words.iter().enumerate() {
        root[k * 4..k * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    Some(Fix::NewOrphanFile(Box::new(NewOrphanFile {
        ino: inum,
        owner,
        root,
        extents: false,
        nodes,
        blocks: data,
        generation,
    })))
}
