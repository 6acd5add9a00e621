//! Directory blocks (entries, checksum tails, inline directories) and
//! htree index blocks (the dx root and interior nodes).

use std::mem::offset_of;

use anyhow::Result;
use ext4r_format::dir::{DirEntry2 as De, DirEntryTail as Tail};
use ext4r_format::htree::{DxCountLimit as Cl, DxEntry, DxNode, DxRoot, DxRootInfo};
use ext4r_format::inode::Inode;
use zerocopy::FromBytes;

use super::{Ctx, Stamp};
use crate::damage::layout::Ino;
use crate::damage::mutate::inode::describe;

/// Bytes of an entry before its name.
const ENTRY: usize = size_of::<De>();
/// Offset of `i_block` in an inode record.
const I_BLOCK: u64 = offset_of!(Inode, i_block) as u64;

/// The records of a directory block: (offset, inode, rec_len, name_len).
fn records(block: &[u8]) -> Vec<(usize, u32, usize, usize)> {
    let mut out = Vec::new();
    let mut off = 0;
    while let Some(Ok((d, _))) = block.get(off..).map(De::ref_from_prefix) {
        let raw = usize::from(d.rec_len.get());
        // rec_len 0 or 65535 stands for a whole 64 KiB block.
        let rec = if raw == 0 || raw == 65535 {
            block.len()
        } else {
            raw
        };
        out.push((off, d.inode.get(), rec, usize::from(d.name_len)));
        if rec < 8 {
            break;
        }
        off += rec;
    }
    out
}

/// Inode numbers worth writing into an entry: none, the bad-blocks
/// inode, one past the end, a free inode, a directory (a second link to
/// it), another file.
fn ino_candidates(c: &mut Ctx<'_>, not: u32) -> Vec<u64> {
    let l = c.l;
    let count = u64::from(l.sb.s_inodes_count.get());
    let mut v = vec![0, 1, count + 1, count];
    let used = |n: u32| l.by_ino.contains_key(&n);
    if let Some(free) = (l.sb.first_ino()..l.sb.s_inodes_count.get()).find(|&n| !used(n)) {
        v.push(u64::from(free + c.rng.below(50) as u32));
    }
    let dirs: Vec<u32> = l
        .inodes
        .iter()
        .filter(|i| i.inode.is_dir() && i.ino != not)
        .map(|i| i.ino)
        .collect();
    if let Some(&d) = c.rng.pick(&dirs) {
        v.push(u64::from(d));
    }
    if let Some(i) = c.rng.pick(&l.inodes) {
        v.push(u64::from(i.ino));
    }
    v
}

pub fn dir(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let pool: Vec<&Ino> = l
        .inodes
        .iter()
        .filter(|i| i.inode.is_dir() && (i.paths > 0 || i.ino == 2))
        .collect();
    // Half the cases in the big htree directory's leaves.
    let htree_dirs: Vec<&Ino> = pool.iter().copied().filter(|i| i.htree()).collect();
    let pick = if !htree_dirs.is_empty() && c.rng.chance(1, 3) {
        c.rng.pick(&htree_dirs).copied()
    } else {
        c.rng.pick(&pool).copied()
    };
    let Some(i) = pick else { return Ok(None) };
    if i.inline() {
        return inline_dir(c, i).map(Some);
    }
    let blocks: Vec<(u64, u64)> = i.blocks().collect();
    // Not the dx root or a dx node: those are the htree kind's.
    let mut chosen = None;
    for _ in 0..10 {
        let Some(&(lblk, pblk)) = c.rng.pick(&blocks) else {
            break;
        };
        let blk = c.img.block(pblk)?;
        let recs = records(&blk);
        let dx = i.htree() && (lblk == 0 || (recs.len() == 1 && recs[0].1 == 0));
        if !dx {
            chosen = Some((lblk, pblk, blk, recs));
            break;
        }
    }
    let Some((lblk, pblk, blk, recs)) = chosen else {
        return Ok(None);
    };
    let base = pblk * l.bs;
    let head = format!("{} block {lblk} (block {pblk})", describe(i));
    if c.rng.chance(1, 4) {
        let what = if c.rng.chance(1, 8) {
            c.img.put_block(pblk, &vec![0u8; blk.len()])?;
            "zeroed".to_string()
        } else {
            c.scribble(base, blk.len())?
        };
        return Ok(Some(format!("{head}: {what}")));
    }
    let restamp = c.restamp_chosen();
    let tail_len = size_of::<Tail>();
    let tail =
        l.csum && blk.len() >= tail_len && recs.last().is_some_and(|r| r.0 == blk.len() - tail_len);
    let what = if tail && c.rng.chance(1, 6) {
        let t = base + (blk.len() - tail_len) as u64;
        let ((name, off, width), extra) = match c.rng.below(4) {
            0 => (field!(Tail, det_reserved_zero1), vec![2]),
            1 => (field!(Tail, det_rec_len), vec![8, 16]),
            2 => (field!(Tail, det_reserved_ft), vec![0, 2]),
            _ => (field!(Tail, det_checksum), vec![]),
        };
        format!("checksum tail {name}: {}", c.field(t + off, width, &extra)?)
    } else {
        let live: Vec<&(usize, u32, usize, usize)> = recs.iter().filter(|r| r.1 != 0).collect();
        let Some(&&(off, ino, rec, nlen)) = c.rng.pick(&live) else {
            return Ok(None);
        };
        let e = base + off as u64;
        let name = String::from_utf8_lossy(&blk[off + ENTRY..(off + ENTRY + nlen).min(blk.len())])
            .into_owned();
        let at =
            |c: &mut Ctx<'_>, (name, off, width): (&'static str, u64, usize), extra: &[u64]| {
                c.field(e + off, width, extra).map(|what| (name, what))
            };
        let (field, what) = match c.rng.below(5) {
            0 | 1 => {
                let extra = ino_candidates(c, ino);
                at(c, field!(De, inode), &extra)?
            }
            2 => {
                let r = rec as u64;
                let extra = vec![
                    0,
                    4,
                    8,
                    12,
                    r + 4,
                    r.saturating_sub(4),
                    r + 1,
                    l.bs,
                    l.bs + 4,
                ];
                at(c, field!(De, rec_len), &extra)?
            }
            3 => {
                let n = nlen as u64;
                let extra = vec![
                    0,
                    255,
                    n + 1,
                    n.saturating_sub(1),
                    (rec as u64).saturating_sub(7),
                ];
                at(c, field!(De, name_len), &extra)?
            }
            _ => {
                if c.rng.chance(1, 2) || nlen == 0 {
                    at(c, field!(De, file_type), &[0, 1, 2, 3, 7, 8])?
                } else {
                    let k = c.rng.below(nlen as u64);
                    let b = *c.rng.pick(b"/\0.\xff").unwrap_or(&b'/');
                    c.img.write(e + ENTRY as u64 + k, &[b])?;
                    ("name", format!("byte {k} -> {b:#04x}"))
                }
            }
        };
        format!("entry {name:?} at +{off} {field}: {what}")
    };
    let note = c.finish(Stamp::DirBlock(pblk, i.ino), restamp)?;
    Ok(Some(format!("{head}: {what}{note}")))
}

/// An inline directory: the parent number and first entry in i_block.
fn inline_dir(c: &mut Ctx<'_>, i: &Ino) -> Result<String> {
    let at = i.offset + I_BLOCK;
    let head = format!("inline {}", describe(i));
    if c.rng.chance(1, 4) {
        let len = ext4r_format::inode::I_BLOCK_SIZE;
        return Ok(format!("{head}: i_block {}", c.scribble(at, len)?));
    }
    let restamp = c.restamp_chosen();
    let extra = ino_candidates(c, i.ino);
    // i_block: the parent's number, then entries as in a block.
    let parent = size_of::<u32>() as u64;
    let first = |(_, off, width): (&str, u64, usize)| (parent + off, width);
    let (name, (off, width), extra) = match c.rng.below(5) {
        0 => ("parent inode", (0, size_of::<u32>()), extra),
        1 => ("first entry inode", first(field!(De, inode)), extra),
        2 => (
            "first entry rec_len",
            first(field!(De, rec_len)),
            vec![0, 4, 8, 60, 64],
        ),
        3 => (
            "first entry name_len",
            first(field!(De, name_len)),
            vec![0, 60, 255],
        ),
        _ => (
            "first entry file_type",
            first(field!(De, file_type)),
            vec![0, 2, 7],
        ),
    };
    let what = c.field(at + off, width, &extra)?;
    let note = c.finish(Stamp::Inode(i.ino), restamp)?;
    Ok(format!("{head} {name}: {what}{note}"))
}

/// The dx root (logical block 0) or an interior dx node of an htree
/// directory.
pub fn htree(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let pool: Vec<&Ino> = l.inodes.iter().filter(|i| i.htree()).collect();
    let Some(&i) = c.rng.pick(&pool) else {
        return Ok(None);
    };
    let Some(root) = i.physical(0) else {
        return Ok(None);
    };
    let rblk = c.img.block(root)?;
    let Ok((dx_root, after)) = DxRoot::ref_from_prefix(&rblk) else {
        return Ok(None);
    };
    let levels = dx_root.info.indirect_levels;
    // The entries follow the header; the first's hash is count and limit.
    let (rentries, _) = <[DxEntry]>::ref_from_prefix(after).unwrap_or_default();
    let rcount = Cl::ref_from_prefix(after).map_or(0, |(cl, _)| usize::from(cl.count.get()));
    // Interior nodes: what the root points at, when it has two levels.
    let mut nodes = Vec::new();
    if levels > 0 {
        for e in rentries.iter().take(rcount) {
            let lb = e.block.get();
            if let Some(p) = i.physical(u64::from(lb)) {
                nodes.push((lb, p));
            }
        }
    }
    let (root_hdr, node_hdr) = (size_of::<DxRoot>(), size_of::<DxNode>());
    let (pblk, what_blk, cl) = match c.rng.pick(&nodes) {
        Some(&(lb, p)) if c.rng.chance(1, 2) => {
            (p, format!("dx node (logical {lb}, block {p})"), node_hdr)
        }
        _ => (root, format!("dx root (block {root})"), root_hdr),
    };
    let is_root = cl == root_hdr;
    let blk = c.img.block(pblk)?;
    let base = pblk * l.bs;
    let head = format!("{} {what_blk}", describe(i));
    let (count, limit) = blk
        .get(cl..)
        .and_then(|b| Cl::ref_from_prefix(b).ok())
        .map_or((0, 0), |(x, _)| {
            (u64::from(x.count.get()), u64::from(x.limit.get()))
        });
    let dx = size_of::<DxEntry>();
    if c.rng.chance(1, 4) {
        // From the root's info (or the node's fake entry's end) to the
        // last entry.
        let start = if is_root {
            offset_of!(DxRoot, info)
        } else {
            node_hdr
        };
        let len = (cl + dx * count as usize - start).min(blk.len() - start);
        return Ok(Some(format!(
            "{head}: {}",
            c.scribble(base + start as u64, len)?
        )));
    }
    let restamp = c.restamp_chosen();
    let k = c.rng.range(1, count.max(2) - 1);
    let e = (cl + dx * k as usize) as u64;
    let prev = e - dx as u64;
    let size_blocks = i.inode.size() / l.bs;
    let (_, hash_at, hash_w) = field!(DxEntry, hash);
    let (_, block_at, block_w) = field!(DxEntry, block);
    let prev_hash = c.get_le(base + prev + hash_at, hash_w)?;
    let info =
        |(n, off, w): (&'static str, u64, usize)| (n, offset_of!(DxRoot, info) as u64 + off, w);
    let (_, dotdot_ino, w) = field!(De, inode);
    let root_only: &[(&str, u64, usize)] = &[
        info(field!(DxRootInfo, hash_version)),
        info(field!(DxRootInfo, info_length)),
        info(field!(DxRootInfo, indirect_levels)),
        info(field!(DxRootInfo, unused_flags)),
        info(field!(DxRootInfo, reserved_zero)),
        (
            "'..' inode",
            offset_of!(DxRoot, dotdot) as u64 + dotdot_ino,
            w,
        ),
    ];
    let pick = c.rng.below(if is_root { 7 } else { 5 });
    let (_, limit_at, limit_w) = field!(Cl, limit);
    let (_, count_at, count_w) = field!(Cl, count);
    let (name, off, width, extra): (String, u64, usize, Vec<u64>) = match pick {
        0 => (
            "limit".into(),
            cl as u64 + limit_at,
            limit_w,
            vec![limit + 1, limit.saturating_sub(1), 0, 508],
        ),
        1 => (
            "count".into(),
            cl as u64 + count_at,
            count_w,
            vec![0, limit + 1, count + 1, count.saturating_sub(1)],
        ),
        2 | 3 => (
            format!("entry {k} hash"),
            e + hash_at,
            hash_w,
            vec![0, 0xffff_ffff, prev_hash.saturating_sub(1), prev_hash | 1],
        ),
        4 => (
            format!("entry {k} block"),
            e + block_at,
            block_w,
            vec![
                size_blocks + 10,
                0,
                count + 1,
                c.get_le(base + prev + block_at, block_w)?,
            ],
        ),
        _ => {
            let &(n, off, w) = c.rng.pick(root_only).unwrap_or(&root_only[0]);
            let extra = match n {
                "hash_version" => vec![0, 1, 2, 3, 4, 5, 6, 0xff],
                "info_length" => vec![0, 16, 255],
                "indirect_levels" => vec![1, 2, 3, 8],
                _ => vec![1, 2, 0xff],
            };
            let n = if n.starts_with('\'') {
                n.to_string()
            } else {
                format!("dx_root_info.{n}")
            };
            (n, off, w, extra)
        }
    };
    let what = c.field(base + off, width, &extra)?;
    let note = c.finish(Stamp::DxBlock(pblk, i.ino), restamp)?;
    Ok(Some(format!("{head} {name}: {what}{note}")))
}

#[cfg(test)]
mod tests {
    use super::records;

    #[test]
    fn records_follow_rec_len_and_stop_on_garbage() {
        let mut b = vec![0u8; 64];
        // "." at 0 (rec_len 12), then one record spanning the rest.
        b[0..4].copy_from_slice(&5u32.to_le_bytes());
        b[4..6].copy_from_slice(&12u16.to_le_bytes());
        b[6] = 1;
        b[12..16].copy_from_slice(&7u32.to_le_bytes());
        b[16..18].copy_from_slice(&52u16.to_le_bytes());
        b[18] = 3;
        assert_eq!(records(&b), vec![(0, 5, 12, 1), (12, 7, 52, 3)]);
        // A rec_len below 8 ends the walk instead of looping.
        b[16..18].copy_from_slice(&4u16.to_le_bytes());
        assert_eq!(records(&b).len(), 2);
    }
}
