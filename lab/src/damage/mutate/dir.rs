//! Directory blocks (entries, checksum tails, inline directories) and
//! htree index blocks (the dx root and interior nodes).

use anyhow::Result;

use super::{Ctx, Stamp};
use crate::damage::layout::Ino;
use crate::damage::mutate::inode::describe;

/// The records of a directory block: (offset, inode, rec_len, name_len).
fn records(block: &[u8]) -> Vec<(usize, u32, usize, usize)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 8 <= block.len() {
        let ino = u32::from_le_bytes([block[off], block[off + 1], block[off + 2], block[off + 3]]);
        let raw = u16::from_le_bytes([block[off + 4], block[off + 5]]) as usize;
        // rec_len 0 or 65535 stands for a whole 64 KiB block.
        let rec = if raw == 0 || raw == 65535 {
            block.len()
        } else {
            raw
        };
        out.push((off, ino, rec, block[off + 6] as usize));
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
    let tail = l.csum && blk.len() >= 12 && recs.last().is_some_and(|r| r.0 == blk.len() - 12);
    let what = if tail && c.rng.chance(1, 6) {
        let t = base + blk.len() as u64 - 12;
        let (name, off, width, extra) = match c.rng.below(4) {
            0 => ("det_reserved_zero1", 0, 4, vec![2]),
            1 => ("det_rec_len", 4, 2, vec![8, 16]),
            2 => ("det_reserved_ft", 7, 1, vec![0, 2]),
            _ => ("det_checksum", 8, 4, vec![]),
        };
        format!("checksum tail {name}: {}", c.field(t + off, width, &extra)?)
    } else {
        let live: Vec<&(usize, u32, usize, usize)> = recs.iter().filter(|r| r.1 != 0).collect();
        let Some(&&(off, ino, rec, nlen)) = c.rng.pick(&live) else {
            return Ok(None);
        };
        let e = base + off as u64;
        let name =
            String::from_utf8_lossy(&blk[off + 8..(off + 8 + nlen).min(blk.len())]).into_owned();
        let (field, what) = match c.rng.below(5) {
            0 | 1 => {
                let extra = ino_candidates(c, ino);
                ("inode", c.field(e, 4, &extra)?)
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
                ("rec_len", c.field(e + 4, 2, &extra)?)
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
                ("name_len", c.field(e + 6, 1, &extra)?)
            }
            _ => {
                if c.rng.chance(1, 2) || nlen == 0 {
                    ("file_type", c.field(e + 7, 1, &[0, 1, 2, 3, 7, 8])?)
                } else {
                    let k = c.rng.below(nlen as u64);
                    let b = *c.rng.pick(b"/\0.\xff").unwrap_or(&b'/');
                    c.img.write(e + 8 + k, &[b])?;
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
    let at = i.offset + 40;
    let head = format!("inline {}", describe(i));
    if c.rng.chance(1, 4) {
        return Ok(format!("{head}: i_block {}", c.scribble(at, 60)?));
    }
    let restamp = c.restamp_chosen();
    let extra = ino_candidates(c, i.ino);
    let (name, off, width, extra) = match c.rng.below(5) {
        0 => ("parent inode", 0, 4, extra),
        1 => ("first entry inode", 4, 4, extra),
        2 => ("first entry rec_len", 8, 2, vec![0, 4, 8, 60, 64]),
        3 => ("first entry name_len", 10, 1, vec![0, 60, 255]),
        _ => ("first entry file_type", 11, 1, vec![0, 2, 7]),
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
    let levels = rblk[30];
    let rcount = u16::from_le_bytes([rblk[34], rblk[35]]) as usize;
    // Interior nodes: what the root points at, when it has two levels.
    let mut nodes = Vec::new();
    if levels > 0 {
        for k in 0..rcount.min(((rblk.len() - 32) / 8).max(1)) {
            let at = 36 + 8 * k;
            let lb = u32::from_le_bytes([rblk[at], rblk[at + 1], rblk[at + 2], rblk[at + 3]]);
            if let Some(p) = i.physical(u64::from(lb)) {
                nodes.push((lb, p));
            }
        }
    }
    let (pblk, what_blk, cl) = match c.rng.pick(&nodes) {
        Some(&(lb, p)) if c.rng.chance(1, 2) => {
            (p, format!("dx node (logical {lb}, block {p})"), 8usize)
        }
        _ => (root, format!("dx root (block {root})"), 32usize),
    };
    let blk = c.img.block(pblk)?;
    let base = pblk * l.bs;
    let head = format!("{} {what_blk}", describe(i));
    let count = u16::from_le_bytes([blk[cl + 2], blk[cl + 3]]) as u64;
    let limit = u16::from_le_bytes([blk[cl], blk[cl + 1]]) as u64;
    if c.rng.chance(1, 4) {
        let start = if cl == 32 { 24 } else { 8 };
        let len = (cl + 8 * count as usize - start).min(blk.len() - start);
        return Ok(Some(format!(
            "{head}: {}",
            c.scribble(base + start as u64, len)?
        )));
    }
    let restamp = c.restamp_chosen();
    let k = c.rng.range(1, count.max(2) - 1);
    let e = (cl + 8 * k as usize) as u64;
    let size_blocks = i.inode.size() / l.bs;
    let prev_hash = c.get_le(base + (cl as u64) + 8 * (k - 1), 4)?;
    let root_only: &[(&str, u64, usize)] = &[
        ("dx_root_info.hash_version", 28, 1),
        ("dx_root_info.info_length", 29, 1),
        ("dx_root_info.indirect_levels", 30, 1),
        ("dx_root_info.unused_flags", 31, 1),
        ("dx_root_info.reserved_zero", 24, 4),
        ("'..' inode", 12, 4),
    ];
    let pick = c.rng.below(if cl == 32 { 7 } else { 5 });
    let (name, off, width, extra): (String, u64, usize, Vec<u64>) = match pick {
        0 => (
            "limit".into(),
            cl as u64,
            2,
            vec![limit + 1, limit.saturating_sub(1), 0, 508],
        ),
        1 => (
            "count".into(),
            cl as u64 + 2,
            2,
            vec![0, limit + 1, count + 1, count.saturating_sub(1)],
        ),
        2 | 3 => (
            format!("entry {k} hash"),
            e,
            4,
            vec![0, 0xffff_ffff, prev_hash.saturating_sub(1), prev_hash | 1],
        ),
        4 => (
            format!("entry {k} block"),
            e + 4,
            4,
            vec![
                size_blocks + 10,
                0,
                count + 1,
                c.get_le(base + e + 4 - 8, 4)?,
            ],
        ),
        _ => {
            let &(n, off, w) = c.rng.pick(root_only).unwrap_or(&root_only[0]);
            let extra = match n {
                "dx_root_info.hash_version" => vec![0, 1, 2, 3, 4, 5, 6, 0xff],
                "dx_root_info.info_length" => vec![0, 16, 255],
                "dx_root_info.indirect_levels" => vec![1, 2, 3, 8],
                _ => vec![1, 2, 0xff],
            };
            (n.to_string(), off, w, extra)
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
