//! Repairs of a directory's `.` and `..` records, as e2fsck's
//! `check_dot` and `check_dotdot` make them: the first record of block 0
//! becomes `.` (keeping 12 bytes and leaving the rest of its space as an
//! empty record), the second becomes `..` pointing at the root until
//! pass 3 sets the real parent. Whatever the records held before is
//! overwritten, as e2fsck does; pass 3 and 4 reconnect what was named
//! there.

use ext4r_format::dir::{rec_len_from_disk, rec_len_to_disk};

/// Bytes of a `.` or `..` record.
const DOT_LEN: usize = 12;

fn rec_len(blk: &[u8], off: usize, bs: u32) -> Option<usize> {
    let raw = blk.get(off + 4..off + 6)?;
    Some(rec_len_from_disk(u16::from_le_bytes([raw[0], raw[1]]), bs) as usize)
}

fn set_rec_len(blk: &mut [u8], off: usize, len: usize, bs: u32) {
    if let Ok(raw) = rec_len_to_disk(ext4r_format::num::sat_u32(len), bs) {
        blk[off + 4..off + 6].copy_from_slice(&raw.to_le_bytes());
    }
}

fn write_name(blk: &mut [u8], off: usize, ino: u32, name: &[u8], ft: u8) {
    blk[off..off + 4].copy_from_slice(&ino.to_le_bytes());
    #[allow(clippy::cast_possible_truncation)] // only "." and ".."
    let name_len = name.len() as u8;
    blk[off + 6] = name_len;
    blk[off + 7] = ft;
    blk[off + 8..off + 12].fill(0);
    blk[off + 8..off + 8 + name.len()].copy_from_slice(name);
}

/// Makes the first record `.` for directory `dir` and splits off what it
/// holds past 12 bytes as an empty record, unless a `..` follows there.
pub(crate) fn make_dot(blk: &mut [u8], dir: u32, ft: u8, bs: u32) {
    let Some(len) = rec_len(blk, 0, bs) else {
        return;
    };
    if len < DOT_LEN || len > blk.len() {
        return;
    }
    write_name(blk, 0, dir, b".", ft);
    let rest = len - DOT_LEN;
    if rest > DOT_LEN {
        set_rec_len(blk, 0, DOT_LEN, bs);
        let next = DOT_LEN;
        if !dotdot_follows(blk, bs) {
            set_rec_len(blk, next, rest, bs);
            blk[next..next + 4].fill(0);
            blk[next + 6] = 0;
            blk[next + 7] = 0;
        }
    }
}

/// Whether a sound `..` record starts 12 bytes into the block, where a
/// split `.` leaves it for check_dotdot, as e2fsck keeps it; one whose
/// length is not sound is not kept, or it would stand in the way of every
/// later record again (e2fsck loops there).
pub(crate) fn dotdot_follows(blk: &[u8], bs: u32) -> bool {
    let next = DOT_LEN;
    let sound =
        rec_len(blk, next, bs).is_some_and(|l| l >= DOT_LEN && l % 4 == 0 && next + l <= blk.len());
    sound && blk[next + 6] == 2 && &blk[next + 8..next + 10] == b".."
}

/// A `.` at the start of `blk` holding more than its 12 bytes, cut to
/// them, when a `..` follows at 12: what the split leaves, to read the
/// records after it as e2fsck's check_dot goes on to read them.
pub(crate) fn split_view(blk: &[u8], bs: u32) -> Option<Vec<u8>> {
    let len = rec_len(blk, 0, bs)?;
    if len <= 2 * DOT_LEN || len > blk.len() || !dotdot_follows(blk, bs) {
        return None;
    }
    let mut v = blk.to_vec();
    set_rec_len(&mut v, 0, DOT_LEN, bs);
    Some(v)
}

/// Makes the record at `off` a `..` naming the root (pass 3 corrects
/// the parent).
pub(crate) fn make_dotdot(blk: &mut [u8], off: usize, ft: u8, bs: u32) {
    let Some(len) = rec_len(blk, off, bs) else {
        return;
    };
    if len < DOT_LEN || off + len > blk.len() {
        return;
    }
    write_name(blk, off, ext4r_format::inode::ino::ROOT, b"..", ft);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_dot_is_made_and_the_rest_split_off() {
        let bs = 1024u32;
        let mut b = vec![0u8; 1024];
        // One record over the block naming inode 11 "X".
        b[0..4].copy_from_slice(&11u32.to_le_bytes());
        b[4..6].copy_from_slice(&1024u16.to_le_bytes());
        b[6] = 1;
        b[8] = b'X';
        make_dot(&mut b, 12, 2, bs);
        assert_eq!(u32::from_le_bytes([b[0], b[1], b[2], b[3]]), 12);
        assert_eq!(rec_len(&b, 0, bs), Some(12));
        assert_eq!(&b[8..9], b".");
        assert_eq!(rec_len(&b, 12, bs), Some(1012));
        assert_eq!(&b[12..16], &[0; 4]);
        make_dotdot(&mut b, 12, 2, bs);
        assert_eq!(u32::from_le_bytes([b[12], b[13], b[14], b[15]]), 2);
        assert_eq!(&b[20..22], b"..");
    }
}
