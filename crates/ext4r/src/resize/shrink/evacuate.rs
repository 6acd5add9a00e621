//! Moving an inode's blocks out of the part that goes: new clusters below
//! the new end, the data copied there ahead of the commit (it is free on
//! disk until the commit points at it), the mapping rebuilt in fresh
//! blocks, the old blocks freed. Extended attribute blocks move with every
//! inode that shares them.

use super::scan::fast_symlink;
use super::Mover;
use crate::error::Error;
use crate::resize::error::Result;
use ext4r_format::extent::write_leaf;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::num;
use ext4r_format::BlockNr;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::map::{self, Run};

/// Bytes copied per read: bounds a copy's memory whatever the file.
const COPY_BYTES: u64 = 4 << 20;

/// What to copy of a moved inode's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Copy {
    /// Every block.
    All,
    /// Nothing (a dry run's regular file: its bytes decide nothing).
    Nothing,
    /// The first block only (a dry run's journal: its superblock).
    First,
}

/// `(old, new, len)`: where moved blocks went, sorted by old.
type Pieces = Vec<(u64, u64, u64)>;

/// `runs` with every block of `pieces` at its new place, coalesced.
fn translate(runs: &[Run], pieces: &Pieces) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for r in runs {
        let (mut p, mut l) = (r.physical, r.logical);
        let end = r.physical + r.len;
        while p < end {
            // The piece holding p, or the next one after it.
            let i = pieces.partition_point(|&(o, _, n)| o + n <= p);
            let (len, phys) = match pieces.get(i) {
                Some(&(o, nw, n)) if o <= p => ((o + n).min(end) - p, nw + (p - o)),
                Some(&(o, _, _)) => (o.min(end) - p, p),
                None => (end - p, p),
            };
            map::push_run(
                &mut out,
                Run {
                    logical: l,
                    physical: phys,
                    len,
                    unwritten: r.unwritten,
                },
            );
            p += len;
            l += len;
        }
    }
    out
}

/// The cluster ranges (in blocks, cluster-aligned, merged) holding the
/// blocks of `runs` to move: those in the region, or all with `whole`.
fn to_move(m: &Mover<'_>, runs: &[Run], whole: bool, ratio: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for r in runs {
        let parts = if whole {
            vec![(r.physical, r.physical + r.len)]
        } else {
            m.region_part(r.physical, r.len)
        };
        for (s, e) in parts {
            out.push((s / ratio * ratio, e.div_ceil(ratio) * ratio));
        }
    }
    out.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in out {
        match merged.last_mut() {
            Some(l) if s <= l.1 => l.1 = l.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Copies `len` blocks from `from` to `to`, in bounded chunks written
/// ahead of the commit.
pub(crate) fn copy_blocks(m: &mut Mover<'_>, from: u64, to: u64, len: u64) -> Result<()> {
    let bs = u64::from(m.t.geometry().block_size);
    let chunk = (COPY_BYTES / bs).max(1);
    let mut buf = Vec::new();
    let mut done = 0;
    while done < len {
        let n = chunk.min(len - done);
        buf.resize(num::index(n * bs), 0);
        m.t.read_blocks(from + done, &mut buf)?;
        for (k, b) in buf.chunks_exact(num::index(bs)).enumerate() {
            m.t.write_data(to + done + k as u64, b.to_vec())?;
        }
        m.t.write_data_early()?;
        done += n;
    }
    Ok(())
}

/// Moves inode `ino`'s blocks in the region (see [`relocate`]); `Ok(false)`
/// when the room below the new end is short.
pub(crate) fn move_inode(m: &mut Mover<'_>, ino: u32) -> Result<bool> {
    let rec = m.t.read_inode(ino)?;
    let inode = Inode::parse(&rec).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
    let copy = if m.dry && inode.is_reg() {
        Copy::Nothing
    } else {
        Copy::All
    };
    if relocate(m, ino, false, copy)? {
        return Ok(true);
    }
    // Short: blocks freed by the running transaction (or, without a
    // journal, frees waiting for its commit) may be what is missing.
    if m.has_pending_frees() {
        m.commit()?;
        return relocate(m, ino, false, copy);
    }
    Ok(false)
}

/// Moves inode `ino`'s data and mapping blocks: those in the region, or
/// every one with `whole` (the journal). The data goes to new clusters
/// below the new end (each at the same offset in its cluster), copied as
/// `copy` says; the mapping is rebuilt in fresh blocks; `i_blocks` follows
/// the mapping blocks' count. Nothing else of the inode changes (its times
/// stay: nothing a reader sees changed). `Ok(false)` when the room below
/// the new end is short: nothing of the inode changed then.
pub(crate) fn relocate(m: &mut Mover<'_>, ino: u32, whole: bool, copy: Copy) -> Result<bool> {
    let sb = m.t.superblock().clone();
    let huge = sb.has_ro_compat(RoCompat::HUGE_FILE);
    let geo = m.t.geometry().clone();
    let bs = geo.block_size;
    let ratio = geo.cluster_ratio();
    let cluster = u64::from(bs) * ratio;
    let rec = m.t.read_inode(ino)?;
    let mut inode = Inode::parse(&rec).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
    let fast = fast_symlink(&inode, huge, bs, cluster);
    let (runs, nodes) = map::runs_and_nodes(&m.t, ino, &inode, fast)?;
    let moving = to_move(m, &runs, whole, ratio);
    let nodes_moving = whole || nodes.iter().any(|&b| m.in_region(b));
    if moving.is_empty() && !nodes_moving {
        return Ok(true);
    }
    // New places, as few runs as the free space gives, near the data
    // before the first moved range (or the inode's group).
    let need: u64 = moving.iter().map(|&(s, e)| e - s).sum();
    let goal = {
        let g = (ino - 1) / geo.inodes_per_group;
        let first = geo.group_first_block(g);
        if first < m.end {
            first
        } else {
            geo.first_data_block
        }
    };
    let mut pieces: Pieces = Vec::new();
    if need > 0 {
        let Some(got) = m.alloc_data(goal, need)? else {
            return Ok(false);
        };
        // Lay the moved ranges into the new runs in order.
        let mut gi = got.into_iter();
        let mut cur = gi.next();
        for &(s, e) in &moving {
            let mut o = s;
            while o < e {
                let Some((ns, nl)) = cur else {
                    return Err(Error::InvalidArgument("allocation came short".into()).into());
                };
                let n = nl.min(e - o);
                pieces.push((o, ns, n));
                o += n;
                cur = if n < nl {
                    Some((ns + n, nl - n))
                } else {
                    gi.next()
                };
            }
        }
    }
    // Copy: every run's moved part that holds written data.
    let mut copied_first = false;
    for r in &runs {
        if r.unwritten || copy == Copy::Nothing {
            continue;
        }
        for t in translate(std::slice::from_ref(r), &pieces) {
            if t.physical == r.physical + (t.logical - r.logical) {
                continue;
            }
            let old = r.physical + (t.logical - r.logical);
            let len = if copy == Copy::First {
                if copied_first || t.logical != 0 {
                    continue;
                }
                copied_first = true;
                1
            } else {
                t.len
            };
            copy_blocks(m, old, t.physical, len)?;
        }
    }
    let new_runs = translate(&runs, &pieces);
    // The mapping, rebuilt in fresh blocks: the old tree is never
    // rewritten in place.
    let extents = inode.flags().contains(InodeFlags::EXTENTS);
    if extents {
        let mut root = [0u8; 60];
        write_leaf(&mut root, &[]).map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
        inode.i_block = root;
    } else {
        inode.set_block_words(&[0; 15]);
    }
    let mgoal = pieces.first().map_or(goal, |p| p.1);
    let tree = match map::store(&mut m.t, ino, &mut inode, &new_runs, mgoal) {
        Ok(n) => n,
        Err(ext4r_txn::Error::NoSpace) => {
            // Give back what this inode took; the caller stops.
            for &(_, n, l) in &pieces {
                m.t.free_blocks(n, l)?;
            }
            return Ok(false);
        }
        Err(e) => return Err(e.into()),
    };
    for &b in &nodes {
        m.free(b, 1)?;
    }
    for &(o, _, l) in &pieces {
        m.free(o, l)?;
    }
    // i_blocks: the data stays as it was; the mapping blocks are counted
    // anew (a cluster each).
    let per = ratio * u64::from(bs / 512);
    let sectors = inode
        .blocks_count(huge, bs)
        .saturating_sub(nodes.len() as u64 * per)
        + tree * per;
    inode
        .set_blocks_count(sectors, huge, bs)
        .map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
    let r = m.t.inode_mut(ino)?;
    inode
        .write(r)
        .map_err(|e| Error::corrupt(format!("inode {ino}"), e))?;
    m.moved.blocks += need + nodes.iter().filter(|&&b| m.in_region(b)).count() as u64;
    Ok(true)
}

/// Moves the extended attribute block `block` (in the region) to a new
/// block below the new end, for every inode in `owners`. `Ok(false)` when
/// no block is free there.
pub(crate) fn move_xattr(m: &mut Mover<'_>, block: u64, owners: &[u32]) -> Result<bool> {
    let wide = m.t.superblock().has_incompat(Incompat::BIT64);
    let goal = owners.first().map_or(0, |&o| {
        let geo = m.t.geometry();
        let g = (o - 1) / geo.inodes_per_group;
        if geo.group_first_block(g) < m.end {
            geo.group_first_block(g)
        } else {
            0
        }
    });
    let new = match m.t.alloc_block(goal) {
        Ok(b) => b,
        // Frees waiting for the running transaction's commit may be what
        // is missing.
        Err(ext4r_txn::Error::NoSpace) if m.has_pending_frees() => {
            m.commit()?;
            match m.t.alloc_block(goal) {
                Ok(b) => b,
                Err(ext4r_txn::Error::NoSpace) => return Ok(false),
                Err(e) => return Err(e.into()),
            }
        }
        Err(ext4r_txn::Error::NoSpace) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let data = m.t.read_block(block)?;
    m.t.write_block(new, BlockKind::Xattr, data)?;
    for &o in owners {
        let rec = m.t.inode_mut(o)?;
        let mut inode = Inode::parse(rec).map_err(|e| Error::corrupt(format!("inode {o}"), e))?;
        if inode.file_acl(wide).0 != block {
            continue;
        }
        inode.set_file_acl(BlockNr(new));
        inode
            .write(rec)
            .map_err(|e| Error::corrupt(format!("inode {o}"), e))?;
    }
    m.free(block, 1)?;
    m.moved.blocks += 1;
    Ok(true)
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
    fn translate_moves_only_the_pieces() {
        let runs = [run(0, 100, 10), run(10, 500, 10)];
        let pieces = vec![(105, 50, 3), (500, 53, 10)];
        let out = translate(&runs, &pieces);
        assert_eq!(
            out,
            [
                run(0, 100, 5),
                run(5, 50, 3),
                run(8, 108, 2),
                // 50..53 then 53..63 continue each other: one run.
                run(10, 53, 10),
            ]
        );
    }
}
