//! Narrowing integer conversions, each named for what it means.
//!
//! ext4 splits wide values over several narrow fields (a 48-bit block
//! number over `_lo: u32` and `_hi: u16`, a 64-bit count over two `u32`),
//! and memory holds on-disk quantities as `usize`. The workspace lints
//! `clippy::cast_possible_truncation`, so a narrowing `as` is never
//! silent: a value is either split on purpose with the functions here,
//! converted with a check (`u16::try_from(len)`), or carries an `allow`
//! with the reason the cast cannot lose bits.
//!
//! This module is where truncation is the point, and so the one place
//! that casts without a check.

#![allow(clippy::cast_possible_truncation)]

/// Bits 0–31 of `v`: the `_lo` half of a value split over two 32-bit fields.
#[inline]
#[must_use]
pub const fn lo32(v: u64) -> u32 {
    v as u32
}

/// Bits 32–63 of `v`: the `_hi` half of a value split over two 32-bit fields.
#[inline]
#[must_use]
pub const fn hi32(v: u64) -> u32 {
    (v >> 32) as u32
}

/// Bits 32–47 of `v`: the `_hi` field of a 48-bit block number (extent
/// starts, extent index leaves, `i_file_acl`, `i_blocks`).
#[inline]
#[must_use]
pub const fn hi16_of_48(v: u64) -> u16 {
    (v >> 32) as u16
}

/// Bits 0–15 of `v`: the `_lo` half of a value split over two 16-bit fields
/// (group descriptor counts, `i_uid`/`i_gid`, bitmap checksums).
#[inline]
#[must_use]
pub const fn lo16(v: u32) -> u16 {
    v as u16
}

/// Bits 16–31 of `v`: the `_hi` half of a value split over two 16-bit fields.
#[inline]
#[must_use]
pub const fn hi16(v: u32) -> u16 {
    (v >> 16) as u16
}

/// Bits 0–7 of `v`: a low byte stored on its own (a name length known to
/// fit, a flags byte).
#[inline]
#[must_use]
pub const fn lo8(v: u32) -> u8 {
    v as u8
}

/// `v` as an in-memory index or length; a value wider than the address
/// space (only possible on 32-bit targets) becomes `usize::MAX`, so that
/// the slice or `Vec` access it feeds fails its bounds check instead of
/// wrapping to a wrong offset.
#[inline]
#[must_use]
pub fn index(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// `v` as `u32`, saturating at `u32::MAX`: for counts and sizes that an
/// on-disk field caps (a directory entry's `rec_len` is checked against the
/// block size after this, so a saturated value is refused there).
#[inline]
#[must_use]
pub fn sat_u32(v: impl TryInto<u32>) -> u32 {
    v.try_into().unwrap_or(u32::MAX)
}

/// `v` as `u16`, saturating at `u16::MAX`.
#[inline]
#[must_use]
pub fn sat_u16(v: impl TryInto<u16>) -> u16 {
    v.try_into().unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_rejoin() {
        let v = 0x0000_abcd_1234_5678_u64;
        assert_eq!(lo32(v), 0x1234_5678);
        assert_eq!(hi16_of_48(v), 0xabcd);
        assert_eq!(u64::from(hi16_of_48(v)) << 32 | u64::from(lo32(v)), v);
        let w = 0xdead_beef_0000_0001_u64;
        assert_eq!(u64::from(hi32(w)) << 32 | u64::from(lo32(w)), w);
        assert_eq!((lo16(0x1234_5678), hi16(0x1234_5678)), (0x5678, 0x1234));
        assert_eq!(lo8(0x1ff), 0xff);
    }

    #[test]
    fn saturating_conversions_never_wrap() {
        assert_eq!(index(7), 7);
        assert_eq!(sat_u32(u64::MAX), u32::MAX);
        assert_eq!(sat_u32(5usize), 5);
        assert_eq!(sat_u16(70_000u32), u16::MAX);
        assert_eq!(sat_u16(-1i32), u16::MAX);
    }
}
