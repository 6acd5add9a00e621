//! Whether the in-inode xattr area's pieces overlap, as e2fsck's
//! `check_ea_in_inode` finds with its region allocator: the 4-byte magic,
//! each entry header with its name, each value (rounded to 4 bytes) and
//! the terminating 4 bytes must not share a byte. An overlap is
//! "allocation collision"; e2fsck clears the area.

/// Bytes of an xattr entry header before its name.
const ENTRY: usize = 16;

fn round4(n: usize) -> usize {
    (n + 3) & !3
}

/// Whether the area after the fixed inode fields (`area`, starting with
/// the magic) has overlapping pieces. Other damage (a name or value too
/// long) ends the scan with `false`: it is reported by other checks.
pub(crate) fn collides(area: &[u8]) -> bool {
    let size = area.len();
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let mut take = |at: usize, len: usize| -> bool {
        let end = at.saturating_add(len);
        if end > size || taken.iter().any(|&(s, e)| at < e && s < end) {
            return true;
        }
        taken.push((at, end));
        false
    };
    if take(0, 4) {
        return true;
    }
    let mut off = 4usize;
    let mut remain = size.saturating_sub(4);
    while remain >= ENTRY && off + ENTRY <= size && area[off..off + 4] != [0; 4] {
        let name_len = usize::from(area[off]);
        if take(off, round4(ENTRY + name_len)) {
            return true;
        }
        remain -= ENTRY;
        if round4(name_len) > remain {
            return false;
        }
        remain -= round4(name_len);
        let u16_at = |i: usize| usize::from(u16::from_le_bytes([area[i], area[i + 1]]));
        let u32_at =
            |i: usize| u32::from_le_bytes([area[i], area[i + 1], area[i + 2], area[i + 3]]);
        let value_offs = u16_at(off + 2);
        let inum = u32_at(off + 4);
        let value_size = u32_at(off + 8) as usize;
        if inum == 0 {
            if value_size > remain {
                return false;
            }
            if value_size > 0 && take(4 + value_offs, round4(value_size)) {
                return true;
            }
        }
        off += round4(ENTRY + name_len);
    }
    take(off, 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(area: &mut [u8], at: usize, name: &[u8], offs: u16, size: u32) {
        area[at] = name.len() as u8;
        area[at + 1] = 1;
        area[at + 2..at + 4].copy_from_slice(&offs.to_le_bytes());
        area[at + 8..at + 12].copy_from_slice(&size.to_le_bytes());
        area[at + 16..at + 16 + name.len()].copy_from_slice(name);
    }

    #[test]
    fn two_values_in_one_place_collide() {
        let mut a = vec![0u8; 96];
        a[..4].copy_from_slice(&0xEA02_0000u32.to_le_bytes());
        entry(&mut a, 4, b"a", 60, 4);
        entry(&mut a, 24, b"b", 68, 4);
        assert!(!collides(&a));
        entry(&mut a, 24, b"b", 60, 4);
        assert!(collides(&a));
    }
}
