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
        if index == 7 && name == b"data" && inum == 0 {
            let s = first + value_offs;
            let len = size as usize;
            return (s + len <= rec.len()).then_some((s, len));
        }
        off += (16 + name_len + 3) & !3;
    }
    None
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
