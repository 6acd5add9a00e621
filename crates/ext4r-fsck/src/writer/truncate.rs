//! Finishing the truncation of an orphan still linked, as e2fsck's
//! `release_inode_blocks` does when it releases the orphan list (and the
//! kernel's orphan cleanup, which truncates such an inode to `i_size`):
//! every block mapped at or past logical block `ceil(i_size / block
//! size)` is freed — a block map walked whole, past `i_size`; every
//! extent, unwritten ones too — and the mapping blocks no longer needed
//! with them. The mapping is stored again by the write layer's one
//! mapping editor (`ext4r_txn::map::store`), which reuses the old tree or
//! indirect blocks and frees the rest; `i_blocks` is counted anew.
//!
//! Two deliberate differences from e2fsck 1.47.0: its xattr block is
//! kept (e2fsck drops a truncated orphan's xattr block as it does a
//! deleted one's; the kernel keeps it), and with bigalloc a cluster that
//! still holds a kept block stays in use (e2fsck frees it and its pass 5
//! marks it used again).

use ext4r::Result;
use ext4r_format::features::RoCompat;
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_txn::map::{self, Run};
use ext4r_txn::txn::Transaction;
use ext4r_txn::volume::Volume;

use super::guard;

/// Truncates orphan `ino` to its size in `txn`; false when there is
/// nothing to do or its mapping cannot be edited safely (damaged, or
/// reaching into the filesystem's metadata `meta`): the check judges it
/// as it stands then.
pub(super) fn truncate(
    txn: &mut Transaction<Volume>,
    ino: u32,
    meta: &[(u64, u64)],
) -> Result<bool> {
    let rec = txn.read_inode(ino)?;
    let Ok(mut i) = Inode::parse(&rec) else {
        return Ok(false);
    };
    if i.links_count() == 0 || !holds_blocks(&i) {
        return Ok(false);
    }
    let geo = txn.geometry().clone();
    let bs = u64::from(geo.block_size);
    let keep = i.size().div_ceil(bs);
    let Ok(runs) = map::runs_whole(txn, ino, &i, false) else {
        return Ok(false);
    };
    let Ok(all) = map::all_blocks(txn, ino, &i) else {
        return Ok(false);
    };
    if all.iter().any(|&b| guard::covers(meta, b)) {
        return Ok(false);
    }
    let mut kept: Vec<Run> = Vec::new();
    let mut gone: Vec<Run> = Vec::new();
    for r in runs {
        if r.end() <= keep {
            kept.push(r);
        } else if r.logical >= keep {
            gone.push(r);
        } else {
            let k = keep - r.logical;
            kept.push(Run { len: k, ..r });
            gone.push(Run {
                logical: keep,
                physical: r.physical + k,
                len: r.len - k,
                unwritten: r.unwritten,
            });
        }
    }
    if gone.is_empty() {
        return Ok(false);
    }
    // Whole clusters go, but the one still holding the last kept block.
    let ratio = geo.cluster_ratio();
    let kept_cluster = kept
        .iter()
        .map(|r| (r.physical + r.len - 1) & !(ratio - 1))
        .max();
    let mut freed = std::collections::BTreeSet::new();
    for g in &gone {
        let mut c = g.physical & !(ratio - 1);
        while c < g.physical + g.len {
            if Some(c) != kept_cluster && freed.insert(c) {
                txn.free_blocks(c, ratio)?;
            }
            c += ratio;
        }
    }
    let goal = kept.last().map_or(0, |r| r.physical + r.len);
    let tree = map::store(txn, ino, &mut i, &kept, goal)?;
    let huge = txn.superblock().has_ro_compat(RoCompat::HUGE_FILE);
    let acl = u64::from(i.i_file_acl_lo.get() != 0 || i.l_i_file_acl_high.get() != 0);
    let blocks = (clusters(&kept, ratio) + tree + acl) * ratio;
    if i.set_blocks_count(blocks * (bs / 512), huge, geo.block_size)
        .is_err()
    {
        return Ok(false);
    }
    let mut rec = rec;
    if i.write(&mut rec).is_err() {
        return Ok(false);
    }
    txn.write_inode(ino, rec)?;
    Ok(true)
}

/// Whether the inode maps blocks at all (e2fsck's
/// `ext2fs_inode_has_valid_blocks2`): a file, a directory, a symlink
/// whose target is not in `i_block`; not inline data.
fn holds_blocks(i: &Inode) -> bool {
    if i.flags().contains(InodeFlags::INLINE_DATA) {
        return false;
    }
    let fast_symlink = i.is_symlink() && !i.flags().contains(InodeFlags::EXTENTS) && i.size() < 60;
    i.is_reg() || i.is_dir() || (i.is_symlink() && !fast_symlink)
}

/// Distinct logical clusters the runs map (each lies in one physical
/// cluster), runs in logical order.
fn clusters(runs: &[Run], ratio: u64) -> u64 {
    let mut n = 0u64;
    let mut last: Option<u64> = None;
    for r in runs {
        let (a, b) = (r.logical / ratio, (r.end() - 1) / ratio);
        let from = match last {
            Some(l) if l >= a => l + 1,
            _ => a,
        };
        if b >= from {
            n += b - from + 1;
        }
        last = Some(last.map_or(b, |l| l.max(b)));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logical: u64, physical: u64, len: u64) -> Run {
        Run {
            logical,
            physical,
            len,
            unwritten: false,
        }
    }

    #[test]
    fn clusters_are_counted_once() {
        assert_eq!(clusters(&[run(0, 100, 5), run(5, 300, 3)], 1), 8);
        // Blocks 0-4 and 5-7 with 4 blocks a cluster: clusters 0 and 1.
        assert_eq!(clusters(&[run(0, 100, 5), run(5, 305, 3)], 4), 2);
        assert_eq!(clusters(&[], 16), 0);
    }
}
