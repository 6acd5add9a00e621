//! Inline directories read record by record, so that their damage can be
//! repaired where it is: the parent in the first 4 bytes of `i_block`,
//! then records in the rest of `i_block` (area 0) and in the value of the
//! in-inode `system.data` attribute (area 1). Offsets are within an area.

/// The records after the parent in `i_block`.
pub(crate) const AREA_IBLOCK: u64 = 0;
/// The records in the `system.data` value.
pub(crate) const AREA_DATA: u64 = 1;
/// The parent (`..`) word.
pub(crate) const AREA_PARENT: u64 = 2;

/// `i_block` in an inode record.
const I_BLOCK: usize = 0x28;

/// Where the `system.data` value lies in an inode record: (start, len).
pub(crate) fn data_range(rec: &[u8]) -> Option<(usize, usize)> {
    data_entry(rec).map(|(_, s, n)| (s, n))
}

/// The `system.data` entry of an inode record: (where the entry is, where
/// its value starts, the value's length).
fn data_entry(rec: &[u8]) -> Option<(usize, usize, usize)> {
    let x = rec.get(0x80..0x82)?;
    let start = 128 + usize::from(u16::from_le_bytes([x[0], x[1]]));
    if rec.get(start..start + 4)? != 0xEA02_0000u32.to_le_bytes() {
        return None;
    }
    let first = start + 4;
    let mut off = first;
    while off + 16 <= rec.len() && rec[off..off + 4] != [0; 4] {
        let name_len = usize::from(rec[off]);
        let index = rec[off + 1];
        let value_offs = usize::from(u16::from_le_bytes([rec[off + 2], rec[off + 3]]));
        let inum = u32::from_le_bytes([rec[off + 4], rec[off + 5], rec[off + 6], rec[off + 7]]);
        let size = u32::from_le_bytes([rec[off + 8], rec[off + 9], rec[off + 10], rec[off + 11]]);
        let name = rec.get(off + 16..off + 16 + name_len)?;
        if index == 7 && ext4r_format::xattr::xattr_name_is(name, b"data") && inum == 0 {
            let s = first + value_offs;
            let len = size as usize;
            return (s + len <= rec.len()).then_some((off, s, len));
        }
        off += (16 + name_len + 3) & !3;
    }
    None
}

/// e2fsck's rule for the size of an inline directory (`i_block` and the
/// `system.data` value, in bytes): a multiple of 4, and when the value is
/// not empty, room in it for one record. The size to make it (e2fsck's
/// `fix_inline_dir_size`): the value dropped when it cannot hold a record,
/// else rounded up to the next multiple of 4 (which the value's padding
/// always has room for).
pub(crate) fn bad_size(size: usize) -> Option<usize> {
    const MIN: usize = 60;
    // EXT2_DIR_REC_LEN(1): the smallest record.
    const ONE_RECORD: usize = 12;
    let short = size > MIN && size < MIN + ONE_RECORD;
    if short {
        Some(MIN)
    } else if size % 4 != 0 {
        Some(size + (4 - size % 4))
    } else {
        None
    }
}

/// Gives the `system.data` value of an inode record `len` bytes (the
/// added bytes zeroed, the entry's hash recomputed); false when the
/// record has no such value or no room for it.
pub(crate) fn set_data_len(rec: &mut [u8], len: usize) -> bool {
    let Some((entry, start, old)) = data_entry(rec) else {
        return false;
    };
    // Values are padded to 4 bytes: what a value may grow into in place.
    let room = (old + 3) & !3;
    if len > room.max(old) || start + len > rec.len() {
        return false;
    }
    if len > old {
        rec[start + old..start + len].fill(0);
    } else {
        let end = (start + room).min(rec.len());
        rec[start + len..end].fill(0);
    }
    rec[entry + 8..entry + 12].copy_from_slice(&ext4r_format::num::sat_u32(len).to_le_bytes());
    // Over the name as stored (e2fsck hashes e_name_len bytes, NULs too).
    let name_len = usize::from(rec[entry]);
    let name = rec[entry + 16..entry + 16 + name_len].to_vec();
    let hash = ext4r_format::xattr::xattr_entry_hash(&name, &rec[start..start + len], false);
    rec[entry + 12..entry + 16].copy_from_slice(&hash.to_le_bytes());
    true
}

/// Recomputes the hash of the `system.data` entry after its value changed.
pub(crate) fn rehash_data(rec: &mut [u8]) {
    if let Some((_, _, len)) = data_entry(rec) {
        set_data_len(rec, len);
    }
}

/// The bytes of `area` in an inode record.
pub(crate) fn area_mut(rec: &mut [u8], area: u64) -> Option<&mut [u8]> {
    match area {
        AREA_IBLOCK => rec.get_mut(I_BLOCK + 4..I_BLOCK + 60),
        AREA_DATA => {
            let (s, n) = data_range(rec)?;
            rec.get_mut(s..s + n)
        }
        _ => rec.get_mut(I_BLOCK..I_BLOCK + 4),
    }
}

/// One record of an area.
pub(crate) struct Rec<'a> {
    pub offset: usize,
    pub inode: u32,
    pub file_type: u8,
    pub name: &'a [u8],
}

/// The records of an area, and where it goes wrong: (offset, previous
/// record) of the first bad record, as e2fsck judges records.
pub(crate) fn records(area: &[u8]) -> (Vec<Rec<'_>>, Option<(usize, Option<usize>)>) {
    let mut out = Vec::new();
    let mut off = 0usize;
    let mut prev = None;
    while off < area.len() {
        if off + 8 > area.len() {
            return (out, Some((off, prev)));
        }
        let rec = usize::from(u16::from_le_bytes([area[off + 4], area[off + 5]]));
        let name_len = usize::from(area[off + 6]);
        let need = (8 + name_len + 3) & !3;
        if rec < 12 || rec % 4 != 0 || off + rec > area.len() || need > rec {
            return (out, Some((off, prev)));
        }
        out.push(Rec {
            offset: off,
            inode: u32::from_le_bytes([area[off], area[off + 1], area[off + 2], area[off + 3]]),
            file_type: area[off + 7],
            name: &area[off + 8..off + 8 + name_len],
        });
        prev = Some(off);
        off += rec;
    }
    (out, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_judged_as_e2fsck_judges_them() {
        assert_eq!(bad_size(60), None);
        assert_eq!(bad_size(72), None);
        assert_eq!(bad_size(76), None);
        // Past i_block but too short for one record: the value goes.
        assert_eq!(bad_size(64), Some(60));
        assert_eq!(bad_size(66), Some(60));
        // Not a multiple of 4: rounded up.
        assert_eq!(bad_size(74), Some(76));
        assert_eq!(bad_size(61), Some(60));
    }

    /// A 256-byte inode record whose in-inode xattr area holds
    /// `system.data` with `value`.
    fn record(value: &[u8]) -> Vec<u8> {
        let mut rec = vec![0u8; 256];
        rec[0x80..0x82].copy_from_slice(&32u16.to_le_bytes());
        let ibody = 128 + 32;
        rec[ibody..ibody + 4].copy_from_slice(&0xEA02_0000u32.to_le_bytes());
        let first = ibody + 4;
        // One entry (16 + "data" = 20 bytes), then 4 zero bytes; the
        // value after them.
        let value_offs = 24u16;
        rec[first] = 4;
        rec[first + 1] = 7;
        rec[first + 2..first + 4].copy_from_slice(&value_offs.to_le_bytes());
        rec[first + 8..first + 12].copy_from_slice(&(value.len() as u32).to_le_bytes());
        rec[first + 16..first + 20].copy_from_slice(b"data");
        let s = first + usize::from(value_offs);
        rec[s..s + value.len()].copy_from_slice(value);
        rec
    }

    #[test]
    fn values_are_resized_in_place_with_their_hash() {
        let mut rec = record(b"ab");
        assert!(set_data_len(&mut rec, 4));
        let (s, n) = data_range(&rec).unwrap();
        assert_eq!(&rec[s..s + n], b"ab\0\0");
        let hash = u32::from_le_bytes(rec[164 + 12..164 + 16].try_into().unwrap());
        let want = ext4r_format::xattr::xattr_entry_hash(b"data", b"ab\0\0", false);
        assert_eq!(hash, want);
        assert!(set_data_len(&mut rec, 0));
        assert_eq!(data_range(&rec).map(|r| r.1), Some(0));
        // No growing past the value's padding.
        assert!(!set_data_len(&mut rec, 8));
    }
}
