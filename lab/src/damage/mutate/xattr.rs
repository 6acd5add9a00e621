//! Extended attributes: xattr blocks (header, entries, values) and the
//! xattrs stored in the inode past `i_extra_isize`.

use anyhow::Result;
use ext4r_format::xattr::{XattrEntry, XattrHeader, XattrIbodyHeader, XATTR_MAGIC};
use zerocopy::FromBytes;

use super::{Ctx, Stamp};
use crate::damage::mutate::inode::describe;

/// Bytes of an entry before its name.
const ENTRY: usize = size_of::<XattrEntry>();

/// Entries starting at `start` of `area`: (offset, name_len, value_offs,
/// value_size). The walk stops at the four zero bytes that end the list,
/// as the kernel's `IS_LAST_ENTRY`, or where an entry would not fit.
fn entries(area: &[u8], start: usize) -> Vec<(usize, usize, usize, usize)> {
    let mut out = Vec::new();
    let mut off = start;
    while out.len() < 200 {
        let Some(Ok((e, _))) = area.get(off..).map(XattrEntry::ref_from_prefix) else {
            break;
        };
        if e.e_name_len == 0 && e.e_name_index == 0 && e.e_value_offs.get() == 0 {
            break;
        }
        let nlen = usize::from(e.e_name_len);
        out.push((
            off,
            nlen,
            usize::from(e.e_value_offs.get()),
            e.e_value_size.get() as usize,
        ));
        off += (ENTRY + nlen + 3) & !3;
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
            size_of::<XattrHeader>(),
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
            size_of::<XattrIbodyHeader>(),
            size_of::<XattrIbodyHeader>(),
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
        let ((name, off, width), extra) = match c.rng.below(5) {
            0 => (
                field!(XattrHeader, h_magic),
                vec![u64::from(XATTR_MAGIC) + 1, 0],
            ),
            1 | 2 => (
                field!(XattrHeader, h_refcount),
                vec![0, owners + 1, owners.saturating_sub(1), 1, 65535],
            ),
            3 => (field!(XattrHeader, h_blocks), vec![0, 2]),
            _ => (field!(XattrHeader, h_hash), vec![0]),
        };
        format!("{name}: {}", c.field(base + off, width, &extra)?)
    } else if header {
        let (name, off, width) = field!(XattrIbodyHeader, h_magic);
        let wrong = [0, u64::from(XATTR_MAGIC) + 1];
        format!("{name}: {}", c.field(base + off, width, &wrong)?)
    } else {
        let k = c.rng.index(ents.len());
        let (off, nlen, voff, vsize) = ents[k];
        let e = base + off as u64;
        let name =
            String::from_utf8_lossy(&area[off + ENTRY..(off + ENTRY + nlen).min(area.len())])
                .into_owned();
        let live = l
            .inodes
            .iter()
            .filter(|x| x.inode.is_reg() && x.ino > 11)
            .nth(c.rng.index(50))
            .map_or(12, |x| u64::from(x.ino));
        let count = u64::from(l.sb.s_inodes_count.get());
        let (v, s) = (voff as u64, vsize as u64);
        let target = match c.rng.below(7) {
            0 => Some((
                field!(XattrEntry, e_name_len),
                vec![0, nlen as u64 + 1, 255],
            )),
            1 => Some((field!(XattrEntry, e_name_index), vec![0, 7, 99])),
            2 => Some((
                field!(XattrEntry, e_value_offs),
                vec![v + 4, 0, l.bs, v + 1, v.saturating_sub(4)],
            )),
            3 => Some((
                field!(XattrEntry, e_value_size),
                vec![0, s + 1, l.bs, 0xffff_ffff],
            )),
            4 => Some((field!(XattrEntry, e_value_inum), vec![live, count + 1, 11])),
            5 => Some((field!(XattrEntry, e_hash), vec![0])),
            _ => None,
        };
        let (field, what) = match target {
            Some(((name, off, width), extra)) => (name, c.field(e + off, width, &extra)?),
            None => {
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
