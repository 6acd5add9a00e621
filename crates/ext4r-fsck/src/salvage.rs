//! Salvaging a directory block at a record that does not parse, in
//! e2fsck's order of preference (its `salvage_directory`): close an
//! 8-byte hole by moving the rest up; shorten a record that overruns the
//! block when its name still fits; let the previous record absorb a bad
//! record whose length is sound; else give the rest of the block to the
//! previous record, or to an empty record here.

use ext4r_format::dir::{rec_len_for_name, rec_len_from_disk, rec_len_to_disk};

/// Bytes of a record header.
const HEADER: usize = 8;

fn get_len(blk: &[u8], off: usize, bs: u32) -> usize {
    blk.get(off + 4..off + 6).map_or(0, |x| {
        rec_len_from_disk(u16::from_le_bytes([x[0], x[1]]), bs) as usize
    })
}

fn set_len(blk: &mut [u8], off: usize, len: usize, bs: u32) {
    if let (Ok(raw), Some(x)) = (
        rec_len_to_disk(ext4r_format::num::sat_u32(len), bs),
        blk.get_mut(off + 4..off + 6),
    ) {
        x.copy_from_slice(&raw.to_le_bytes());
    }
}

/// Salvages the record at `off` of a block whose records end at `end`
/// (before a checksum tail); `prev` is the record before it, if any;
/// `max_ino` the filesystem's inode count.
pub(crate) fn salvage(
    blk: &mut [u8],
    off: usize,
    prev: Option<usize>,
    end: usize,
    bs: u32,
    max_ino: u32,
) {
    if off >= end || end > blk.len() {
        return;
    }
    let room = end - off;
    let (name_len, rec_len) = if room < HEADER {
        (0, room)
    } else {
        (usize::from(blk[off + 6]), get_len(blk, off, bs))
    };
    let left = room as i64 - rec_len as i64;
    let shift = room
        .checked_sub(rec_len)
        .filter(|&l| l >= rec_len_for_name(1));
    if let (HEADER, Some(left)) = (rec_len, shift) {
        blk.copy_within(off + HEADER..off + HEADER + left, off);
        blk[off + left..off + left + HEADER].fill(0);
        return;
    }
    if left < 0 && room > HEADER && rec_len_for_name(name_len) <= room {
        let ino = u32::from_le_bytes([blk[off], blk[off + 1], blk[off + 2], blk[off + 3]]);
        let name = blk
            .get(off + HEADER..off + HEADER + name_len)
            .unwrap_or(&[]);
        if ino <= max_ino && !name.contains(&0) && name.len() == name_len {
            set_len(blk, off, room, bs);
            return;
        }
    }
    if let Some(p) = prev {
        if rec_len != 0 && rec_len % 4 == 0 && rec_len <= room {
            let pl = get_len(blk, p, bs);
            set_len(blk, p, pl + rec_len, bs);
            return;
        }
        let pl = get_len(blk, p, bs);
        set_len(blk, p, pl + room, bs);
        return;
    }
    if room >= HEADER {
        set_len(blk, off, room, bs);
        blk[off..off + 4].fill(0);
        blk[off + 6] = 0;
        blk[off + 7] = 0;
    }
}

/// The first record of a block (records up to its end) that e2fsck
/// would find corrupted, with the record before it.
pub(crate) fn first_bad(blk: &[u8], bs: u32) -> Option<(usize, Option<usize>)> {
    let end = blk.len();
    let mut off = 0usize;
    let mut prev = None;
    while off < end {
        if off + HEADER > end {
            return Some((off, prev));
        }
        let rec = get_len(blk, off, bs);
        let name_len = usize::from(blk[off + 6]);
        if rec < 12 || rec % 4 != 0 || off + rec > end || rec_len_for_name(name_len) > rec {
            return Some((off, prev));
        }
        prev = Some(off);
        off += rec;
    }
    None
}

/// Whether a leaf block has a checksum tail, as e2fsck decides
/// (`ext2fs_dirent_has_tail`): the last 12 bytes form a tail and the
/// record chain ends exactly where it starts. A chain too damaged to
/// follow counts as having one (the damage is reported instead).
pub(crate) fn has_tail(blk: &[u8], bs: u32) -> bool {
    let Some(top) = blk.len().checked_sub(12) else {
        return false;
    };
    let mut off = 0usize;
    while off < top {
        let rec = get_len(blk, off, bs);
        if rec < HEADER || rec % 4 != 0 {
            return true;
        }
        off += rec;
    }
    if off > blk.len() {
        return true;
    }
    off == top && ext4r_format::dir::DirEntryTail::find(blk).is_some()
}

/// [`has_tail`] for a block whose records all parse (as `DirBlockIter`
/// reads them, stopping at a tail), the last ending at `end`: the chain
/// reaches the tail's start exactly when the records end there, so this
/// needs no second walk.
pub(crate) fn has_tail_parsed(blk: &[u8], end: usize) -> bool {
    blk.len().checked_sub(12) == Some(end) && ext4r_format::dir::DirEntryTail::find(blk).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overrunning_record_whose_name_fits_is_shortened() {
        let mut b = vec![0u8; 1024];
        b[4..6].copy_from_slice(&12u16.to_le_bytes());
        b[12..16].copy_from_slice(&2u32.to_le_bytes());
        b[16..18].copy_from_slice(&1024u16.to_le_bytes());
        b[18] = 2;
        b[20..22].copy_from_slice(b"..");
        salvage(&mut b, 12, Some(0), 1012, 1024, 100);
        assert_eq!(get_len(&b, 12, 1024), 1000);
        assert_eq!(get_len(&b, 0, 1024), 12);
    }

    #[test]
    fn a_hopeless_record_goes_to_the_previous_one() {
        let mut b = vec![0u8; 1024];
        b[4..6].copy_from_slice(&12u16.to_le_bytes());
        b[16..18].copy_from_slice(&3u16.to_le_bytes());
        salvage(&mut b, 12, Some(0), 1024, 1024, 100);
        assert_eq!(get_len(&b, 0, 1024), 1024);
    }
}
