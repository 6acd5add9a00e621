//! A directory leaf block (or an inline directory's region) as a mutable
//! view: reading its records, adding one where a record has slack, taking
//! one out or pointing it elsewhere, building a block from a list. Every
//! change is made only to a block whose records tile it; the checksum tail
//! (metadata_csum) is kept in place and never counted as an entry, and its
//! checksum is left for the writer to stamp.

#[allow(unused_imports)]
use crate::prelude::*;

use super::{
    rec_len_from_disk, rec_len_to_disk, DirEntry2, DirEntryTail, DIR_ENTRY_HEADER_SIZE,
    DIR_TAIL_SIZE,
};
use crate::num;
use zerocopy::{FromBytes, IntoBytes};

/// One record of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    /// Byte offset in the block.
    pub off: usize,
    /// `rec_len`.
    pub rec_len: usize,
    /// `inode` (0: unused).
    pub ino: u32,
    /// `file_type`.
    pub ftype: u8,
    /// The name.
    pub name: Vec<u8>,
}

/// The record header at `off`, to change in place.
fn header_mut(b: &mut [u8], off: usize) -> Option<&mut DirEntry2> {
    DirEntry2::mut_from_prefix(b.get_mut(off..)?)
        .ok()
        .map(|(h, _)| h)
}

/// Bytes a record with a name of `len` bytes takes.
pub fn needed(len: usize) -> usize {
    (8 + len + 3) & !3
}

/// One record of a block, borrowed: walking a block allocates nothing
/// (lookups and inserts run once per name created).
#[derive(Debug, Clone, Copy)]
pub struct RecRef<'a> {
    /// Byte offset in the block.
    pub off: usize,
    /// `rec_len`, decoded.
    pub rec_len: usize,
    /// `inode` (0: unused).
    pub ino: u32,
    /// `file_type`.
    pub ftype: u8,
    /// The name (empty for an unused record).
    pub name: &'a [u8],
}

impl RecRef<'_> {
    fn used(&self) -> usize {
        if self.ino == 0 {
            0
        } else {
            needed(self.name.len())
        }
    }
}

/// Calls `f` with each record of a leaf block, the tail left out, until it
/// returns `Some`; `None` (and `f` perhaps called for the records before)
/// when the records do not tile the block.
fn walk<'a, T>(b: &'a [u8], mut f: impl FnMut(RecRef<'a>) -> Option<T>) -> Option<Option<T>> {
    let bs = u32::try_from(b.len()).ok()?;
    let mut off = 0;
    while off < b.len() {
        let (h, rest) = DirEntry2::ref_from_prefix(&b[off..]).ok()?;
        let rec = rec_len_from_disk(h.rec_len.get(), bs) as usize;
        if rec < DIR_ENTRY_HEADER_SIZE || rec % 4 != 0 || off + rec > b.len() {
            return None;
        }
        let ino = h.inode.get();
        let nlen = usize::from(h.name_len);
        let is_tail = ino == 0
            && rec == DIR_TAIL_SIZE
            && h.file_type == super::ft::DIR_CSUM
            && off + rec == b.len();
        if !is_tail {
            if ino != 0 && DIR_ENTRY_HEADER_SIZE + nlen > rec {
                return None;
            }
            let name = if ino != 0 { &rest[..nlen] } else { &[][..] };
            let r = RecRef {
                off,
                rec_len: rec,
                ino,
                ftype: h.file_type,
                name,
            };
            if let Some(v) = f(r) {
                return Some(Some(v));
            }
        }
        off += rec;
    }
    Some(None)
}

/// The records of a leaf block, the tail left out; `None` when they do not
/// tile the block (a damaged block: the caller refuses to change it).
pub fn records(b: &[u8]) -> Option<Vec<Rec>> {
    let mut out = Vec::new();
    walk(b, |r| {
        out.push(Rec {
            off: r.off,
            rec_len: r.rec_len,
            ino: r.ino,
            ftype: r.ftype,
            name: r.name.to_vec(),
        });
        None::<()>
    })?;
    Some(out)
}

/// The `.` and `..` records that open block 0 of a directory, found as the
/// kernel finds them (`ext4_get_first_dir_block`): `.` first, `..` where
/// `.`'s `rec_len` leads, in a linear block and an htree root alike (the
/// root's `..` record spans the index after it). Only these two records
/// are read, so damage further on does not hide the parent. `None` when
/// the block does not open with them.
pub fn dots(b: &[u8]) -> Option<[RecRef<'_>; 2]> {
    let mut first = None;
    let found = walk(b, |r| match first {
        None => {
            first = Some(r);
            None
        }
        Some(dot) => Some([dot, r]),
    })??;
    let [dot, dotdot] = found;
    (dot.off == 0 && dot.ino != 0 && dot.name == b"." && dotdot.ino != 0 && dotdot.name == b"..")
        .then_some(found)
}

/// `name`'s inode and file type in a leaf block: `Some(None)` when it is
/// not there, `None` for a block whose records do not tile it.
pub fn find(b: &[u8], name: &[u8]) -> Option<Option<(u32, u8)>> {
    walk(b, |r| {
        (r.ino != 0 && r.name == name).then_some((r.ino, r.ftype))
    })
}

fn put(b: &mut [u8], off: usize, rec_len: usize, ino: u32, ftype: u8, name: &[u8]) -> bool {
    let Ok(name_len) = u8::try_from(name.len()) else {
        return false;
    };
    let Ok(raw) = rec_len_to_disk(num::sat_u32(rec_len), num::sat_u32(b.len())) else {
        return false;
    };
    let Some(Ok((h, rest))) = b.get_mut(off..).map(DirEntry2::mut_from_prefix) else {
        return false;
    };
    h.inode.set(ino);
    h.rec_len.set(raw);
    h.name_len = name_len;
    h.file_type = ftype;
    rest[..name.len()].copy_from_slice(name);
    true
}

/// Adds an entry to the block where a record has room; false when none has.
pub fn insert(b: &mut [u8], name: &[u8], ino: u32, ftype: u8) -> bool {
    // A name `name_len` cannot hold is refused before the block changes.
    if u8::try_from(name.len()).is_err() {
        return false;
    }
    let need = needed(name.len());
    // The first record with room, found without changing the block (a
    // damaged block is left alone).
    let Some(Some((off, rec_len, keep))) = walk(b, |r| {
        (r.rec_len - r.used() >= need).then_some((r.off, r.rec_len, r.used()))
    }) else {
        return false;
    };
    // Only a block whose every record is sound is changed.
    if walk(b, |_| None::<()>).is_none() {
        return false;
    }
    if keep == 0 {
        return put(b, off, rec_len, ino, ftype, name);
    }
    let rest = rec_len - keep;
    let Ok(raw) = rec_len_to_disk(num::sat_u32(keep), num::sat_u32(b.len())) else {
        return false;
    };
    let Some(h) = header_mut(b, off) else {
        return false;
    };
    h.rec_len.set(raw);
    put(b, off + keep, rest, ino, ftype, name)
}

/// Takes the entry named `name` out of the block (its space joins the
/// record before it, or it is marked unused when it is the first); returns
/// its inode.
pub fn remove(b: &mut [u8], name: &[u8]) -> Option<u32> {
    let recs = records(b)?;
    let k = recs.iter().position(|r| r.ino != 0 && r.name == name)?;
    let r = &recs[k];
    if k == 0 {
        header_mut(b, r.off)?.inode.set(0);
    } else {
        let p = &recs[k - 1];
        let raw =
            rec_len_to_disk(num::sat_u32(p.rec_len + r.rec_len), num::sat_u32(b.len())).ok()?;
        header_mut(b, p.off)?.rec_len.set(raw);
    }
    Some(r.ino)
}

/// Points the entry named `name` at another inode (and file type).
pub fn retarget(b: &mut [u8], name: &[u8], ino: u32, ftype: u8) -> bool {
    let Some(recs) = records(b) else {
        return false;
    };
    match recs.iter().find(|r| r.ino != 0 && r.name == name) {
        Some(r) => match header_mut(b, r.off) {
            Some(h) => {
                h.inode.set(ino);
                h.file_type = ftype;
                true
            }
            None => false,
        },
        None => false,
    }
}

/// Points the record at `off` (an offset [`records`] or [`dots`] gave) at
/// inode `ino`, keeping its name and type; `false` when no record header
/// fits there.
pub fn set_inode_at(b: &mut [u8], off: usize, ino: u32) -> bool {
    match header_mut(b, off) {
        Some(h) => {
            h.inode.set(ino);
            true
        }
        None => false,
    }
}

/// A block holding `entries` (name, inode, type) packed from the start,
/// the last taking the rest; with `tail` room for the checksum tail. An
/// empty list gives one unused record over the block.
pub fn build(bs: usize, entries: &[(Vec<u8>, u32, u8)], tail: bool) -> Option<Vec<u8>> {
    let mut b = vec![0u8; bs];
    let end = if tail { bs - DIR_TAIL_SIZE } else { bs };
    if entries.is_empty() {
        put(&mut b, 0, end, 0, 0, b"");
    }
    let mut off = 0;
    for (k, (name, ino, ft)) in entries.iter().enumerate() {
        let need = needed(name.len());
        let rec = if k + 1 == entries.len() {
            end - off
        } else {
            need
        };
        if off + need > end || !put(&mut b, off, rec, *ino, *ft, name) {
            return None;
        }
        off += rec;
    }
    if tail {
        DirEntryTail::new().write_to(&mut b[end..]).ok()?;
    }
    Some(b)
}

/// Whether `entries` fit in one block.
pub fn fits(bs: usize, entries: &[(Vec<u8>, u32, u8)], tail: bool) -> bool {
    let end = if tail { bs - DIR_TAIL_SIZE } else { bs };
    entries
        .iter()
        .map(|(n, _, _)| needed(n.len()))
        .sum::<usize>()
        <= end
}

/// The offsets of the last two records, when the records tile the block
/// (lengths at least 8, multiples of 4, inside the block); names are not
/// looked at.
fn last_two(b: &[u8]) -> Option<(Option<usize>, usize)> {
    let bs = u32::try_from(b.len()).ok()?;
    let (mut pos, mut prev, mut last) = (0usize, None, None);
    while pos < b.len() {
        let (h, _) = DirEntry2::ref_from_prefix(&b[pos..]).ok()?;
        let len = rec_len_from_disk(h.rec_len.get(), bs) as usize;
        if len < DIR_ENTRY_HEADER_SIZE || len % 4 != 0 || pos + len > b.len() {
            return None;
        }
        prev = last;
        last = Some(pos);
        pos += len;
    }
    Some((prev, last?))
}

/// Sets the `rec_len` of the record at `off`; false when it cannot be
/// stored.
fn set_rec_len(b: &mut [u8], off: usize, len: usize) -> bool {
    let Ok(raw) = rec_len_to_disk(num::sat_u32(len), num::sat_u32(b.len())) else {
        return false;
    };
    match header_mut(b, off) {
        Some(h) => {
            h.rec_len.set(raw);
            true
        }
        None => false,
    }
}

/// Why a leaf block cannot take or give up its checksum tail; such a
/// block is left for `e2fsck -fD` (as tune2fs leaves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailError {
    /// The records do not tile the block.
    Damaged,
    /// The last record has no slack for the 12-byte tail.
    NoRoom,
}

/// Makes room for the checksum tail in a leaf block and writes it (checksum
/// zero), as tune2fs's `rewrite_dir_block` does when metadata_csum is
/// turned on: an empty 12-byte last record becomes the tail; otherwise the
/// tail comes out of the last record's slack.
///
/// # Errors
/// [`TailError`]: the block is unchanged.
pub fn add_tail(b: &mut [u8]) -> Result<(), TailError> {
    let (_, last) = last_two(b).ok_or(TailError::Damaged)?;
    let bs = num::sat_u32(b.len());
    let h = header_mut(b, last).ok_or(TailError::Damaged)?;
    let rec_len = rec_len_from_disk(h.rec_len.get(), bs) as usize;
    if h.inode.get() == 0 && rec_len == DIR_TAIL_SIZE {
        h.name_len = 0;
        h.file_type = super::ft::DIR_CSUM;
        return Ok(());
    }
    let name = usize::from(h.name_len).next_multiple_of(4);
    if rec_len <= DIR_ENTRY_HEADER_SIZE + name + DIR_TAIL_SIZE
        || !set_rec_len(b, last, rec_len - DIR_TAIL_SIZE)
    {
        return Err(TailError::NoRoom);
    }
    let end = b.len();
    DirEntryTail::new()
        .write_to(&mut b[end - DIR_TAIL_SIZE..])
        .map_err(|_| TailError::Damaged)
}

/// Gives a trailing checksum tail's 12 bytes back to the record before it,
/// as tune2fs does when metadata_csum is turned off. `Ok(false)` when the
/// block has no tail (an empty last record of 12 bytes) to remove.
///
/// # Errors
/// [`TailError::Damaged`] when the records do not tile the block or the
/// merged length cannot be stored: the block is unchanged.
pub fn remove_tail(b: &mut [u8]) -> Result<bool, TailError> {
    let (prev, last) = last_two(b).ok_or(TailError::Damaged)?;
    let Some(prev) = prev else {
        return Ok(false);
    };
    let bs = num::sat_u32(b.len());
    let (h, _) = DirEntry2::ref_from_prefix(&b[last..]).map_err(|_| TailError::Damaged)?;
    let is_tail = h.inode.get() == 0
        && h.name_len == 0
        && rec_len_from_disk(h.rec_len.get(), bs) as usize == DIR_TAIL_SIZE;
    if !is_tail {
        return Ok(false);
    }
    let (p, _) = DirEntry2::ref_from_prefix(&b[prev..]).map_err(|_| TailError::Damaged)?;
    let prev_len = rec_len_from_disk(p.rec_len.get(), bs) as usize;
    if set_rec_len(b, prev, prev_len + DIR_TAIL_SIZE) {
        Ok(true)
    } else {
        Err(TailError::Damaged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_repointed_by_offset() {
        let mut b = build(1024, &[(b".".to_vec(), 5, 2), (b"..".to_vec(), 2, 2)], true).unwrap();
        let dotdot = dots(&b).unwrap()[1].off;
        assert!(set_inode_at(&mut b, dotdot, 9));
        let d = dots(&b).unwrap();
        assert_eq!(
            (d[0].ino, d[1].ino, d[1].name, d[1].ftype),
            (5, 9, &b".."[..], 2)
        );
        assert!(!set_inode_at(&mut b, 1020, 9));
    }

    #[test]
    fn insert_remove_round_trip() {
        for tail in [false, true] {
            let mut b =
                build(1024, &[(b".".to_vec(), 2, 2), (b"..".to_vec(), 2, 2)], tail).unwrap();
            let mut names = Vec::new();
            for i in 0.. {
                let n = format!("file-{i}").into_bytes();
                if !insert(&mut b, &n, 100 + i, 1) {
                    break;
                }
                names.push(n);
            }
            assert!(names.len() > 40, "{}", names.len());
            let recs = records(&b).unwrap();
            assert_eq!(recs.len(), names.len() + 2);
            assert_eq!(remove(&mut b, &names[3]), Some(103));
            assert_eq!(remove(&mut b, &names[3]), None);
            assert!(insert(&mut b, b"again", 7, 1));
            let recs = records(&b).unwrap();
            assert!(recs.iter().any(|r| r.name == b"again"));
            assert_eq!(
                records(&b)
                    .unwrap()
                    .iter()
                    .map(|r| r.rec_len)
                    .sum::<usize>()
                    + if tail { 12 } else { 0 },
                1024
            );
        }
    }

    #[test]
    fn a_name_too_long_for_name_len_is_refused_unchanged() {
        let mut b = build(
            4096,
            &[(b".".to_vec(), 2, 2), (b"..".to_vec(), 2, 2)],
            false,
        )
        .unwrap();
        let before = b.clone();
        assert!(!insert(&mut b, &[b'a'; 256], 12, 1));
        assert_eq!(b, before);
        assert!(insert(&mut b, &[b'a'; 255], 12, 1));
        assert_eq!(find(&b, &[b'a'; 255]), Some(Some((12, 1))));
    }

    #[test]
    fn dots_open_block_0_linear_or_htree_root() {
        let mut b = build(
            1024,
            &[(b".".to_vec(), 12, 2), (b"..".to_vec(), 34, 2)],
            true,
        )
        .unwrap();
        assert!(insert(&mut b, b"x", 99, 1));
        let [d, dd] = dots(&b).unwrap();
        assert_eq!((d.ino, dd.ino, dd.off, dd.ftype), (12, 34, 12, 2));
        // Damage after `..` does not hide it.
        let x = records(&b).unwrap()[2].off;
        b[x + 4..x + 6].copy_from_slice(&3u16.to_le_bytes());
        assert!(records(&b).is_none());
        assert_eq!(dots(&b).unwrap()[1].ino, 34);
        // An htree root: `..` spans the rest, dx_root_info and entries in it.
        let mut root = vec![0u8; 1024];
        root[..4].copy_from_slice(&12u32.to_le_bytes());
        root[4..6].copy_from_slice(&12u16.to_le_bytes());
        root[6] = 1;
        root[8] = b'.';
        root[12..16].copy_from_slice(&56u32.to_le_bytes());
        root[16..18].copy_from_slice(&1012u16.to_le_bytes());
        root[18] = 2;
        root[20..22].copy_from_slice(b"..");
        root[24..32].copy_from_slice(&[0, 0, 0, 0, 1, 8, 0, 0]);
        assert_eq!(dots(&root).unwrap()[1].ino, 56);
        // `.` with a longer rec_len: `..` is where it leads.
        let mut wide = build(
            1024,
            &[(b".".to_vec(), 12, 2), (b"..".to_vec(), 7, 2)],
            false,
        )
        .unwrap();
        wide[4..6].copy_from_slice(&16u16.to_le_bytes());
        wide.copy_within(12..24, 16);
        wide[20..22].copy_from_slice(&1008u16.to_le_bytes());
        assert_eq!(dots(&wide).unwrap()[1].off, 16);
        // Not a block 0.
        let other = build(
            1024,
            &[(b"a".to_vec(), 5, 1), (b"..".to_vec(), 7, 2)],
            false,
        )
        .unwrap();
        assert!(dots(&other).is_none());
        let swapped = build(
            1024,
            &[(b"..".to_vec(), 5, 2), (b".".to_vec(), 7, 2)],
            false,
        )
        .unwrap();
        assert!(dots(&swapped).is_none());
    }
}
