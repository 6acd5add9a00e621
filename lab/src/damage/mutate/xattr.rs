//! Extended attributes: xattr blocks (header, entries, values) and the
//! xattrs stored in the inode past `i_extra_isize`.

use anyhow::Result;

use super::{Ctx, Stamp};
use crate::damage::mutate::inode::describe;

/// Entries starting at `start` of `area`: (offset, name_len, value_offs,
/// value_size).
fn entries(area: &[u8], start: usize) -> Vec<(usize, usize, usize, usize)> {
    let mut out = Vec::new();
    let mut off = start;
    while off + 16 <= area.len() && area[off..off + 4] != [0, 0, 0, 0] && out.len() < 200 {
        let nlen = area[off] as usize;
        let voff = u16::from_le_bytes([area[off + 2], area[off + 3]]) as usize;
        let vsize =
            u32::from_le_bytes([area[off + 8], area[off + 9], area[off + 10], area[off + 11]])
                as usize;
        out.push((off, nlen, voff, vsize));
        off += (16 + nlen + 3) & !3;
    }
    out
}

pub fn xattr(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let in_block: Vec<_> = l.inodes.iter().filter(|i| i.xattr_block != 0).collect();
    let in_inode: Vec<_> = l.inodes.iter().filter(|i| i.ibody_xattrs).collect();
    let use_block = !in_block.is_empty() && (in_inode.is_empty() || c.rng.chance(3, 5));
    let (i, base, len, first, value_base, stamp, head) = if use_block {
        let Some(&i) = c.rng.pick(&in_block) else {
            return Ok(None);
        };
        let b = i.xattr_block;
        (
            i,
            b * l.bs,
            l.bs as usize,
            32,
            0,
            Stamp::XattrBlock(b),
            format!(
                "xattr block {b} of {} ({} owners)",
                describe(i),
                in_block.iter().filter(|x| x.xattr_block == b).count()
            ),
        )
    } else {
        let Some(&i) = c.rng.pick(&in_inode) else {
            return Ok(None);
        };
        let extra = u64::from(i.inode.i_extra_isize.get());
        let start = 128 + extra;
        (
            i,
            i.offset + start,
            (u64::from(l.geo.inode_size) - start) as usize,
            4,
            4,
            Stamp::Inode(i.ino),
            format!("in-inode xattrs of {}", describe(i)),
        )
    };
    let area = c.img.read(base, len)?;
    if c.rng.chance(1, 4) {
        return Ok(Some(format!("{head}: {}", c.scribble(base, len)?)));
    }
    let restamp = c.restamp_chosen();
    let ents = entries(&area, first);
    let header = ents.is_empty() || c.rng.chance(1, 4);
    let what = if header && use_block {
        let owners = in_block
            .iter()
            .filter(|x| x.xattr_block == i.xattr_block)
            .count() as u64;
        let (name, off, extra) = match c.rng.below(5) {
            0 => ("h_magic", 0, vec![0xEA02_0001, 0]),
            1 | 2 => (
                "h_refcount",
                4,
                vec![0, owners + 1, owners.saturating_sub(1), 1, 65535],
            ),
            3 => ("h_blocks", 8, vec![0, 2]),
            _ => ("h_hash", 12, vec![0]),
        };
        format!("{name}: {}", c.field(base + off, 4, &extra)?)
    } else if header {
        format!("h_magic: {}", c.field(base, 4, &[0, 0xEA02_0001])?)
    } else {
        let k = c.rng.index(ents.len());
        let (off, nlen, voff, vsize) = ents[k];
        let e = base + off as u64;
        let name = String::from_utf8_lossy(&area[off + 16..(off + 16 + nlen).min(area.len())])
            .into_owned();
        let live = l
            .inodes
            .iter()
            .filter(|x| x.inode.is_reg() && x.ino > 11)
            .nth(c.rng.index(50))
            .map_or(12, |x| u64::from(x.ino));
        let count = u64::from(l.sb.s_inodes_count.get());
        let (field, what) = match c.rng.below(7) {
            0 => ("e_name_len", c.field(e, 1, &[0, nlen as u64 + 1, 255])?),
            1 => ("e_name_index", c.field(e + 1, 1, &[0, 7, 99])?),
            2 => {
                let v = voff as u64;
                (
                    "e_value_offs",
                    c.field(e + 2, 2, &[v + 4, 0, l.bs, v + 1, v.saturating_sub(4)])?,
                )
            }
            3 => {
                let s = vsize as u64;
                (
                    "e_value_size",
                    c.field(e + 8, 4, &[0, s + 1, l.bs, 0xffff_ffff])?,
                )
            }
            4 => ("e_value_inum", c.field(e + 4, 4, &[live, count + 1, 11])?),
            5 => ("e_hash", c.field(e + 12, 4, &[0])?),
            _ => {
                // A value byte: the entry hash no longer matches.
                let within = (value_base + voff) as u64 + c.rng.below(vsize.max(1) as u64);
                let at = base + within.min(len as u64 - 1);
                let old = c.img.read(at, 1)?[0];
                c.img.write(at, &[old ^ 0x20])?;
                ("value", format!("a byte {old:#04x} -> {:#04x}", old ^ 0x20))
            }
        };
        format!("entry {name:?} {field}: {what}")
    };
    let note = c.finish(stamp, restamp)?;
    Ok(Some(format!("{head} {what}{note}")))
}

#[cfg(test)]
mod tests {
    use super::entries;

    #[test]
    fn entries_are_found_until_the_zero_word() {
        let mut area = vec![0u8; 128];
        // One entry at 32: name "ab", value at 100, 5 bytes.
        area[32] = 2;
        area[33] = 1;
        area[34..36].copy_from_slice(&100u16.to_le_bytes());
        area[40..44].copy_from_slice(&5u32.to_le_bytes());
        area[48..50].copy_from_slice(b"ab");
        assert_eq!(entries(&area, 32), vec![(32, 2, 100, 5)]);
        assert!(entries(&area, 60).is_empty());
    }
}
