//! The checksums ext4 and jbd2 use.
//!
//! ext4's metadata_csum uses CRC32C (Castagnoli) *without* the final
//! inversion: the kernel's `ext4_chksum(seed, data)` returns the raw register,
//! chained from a per-filesystem seed. The older gdt_csum (uninit_bg) feature
//! protects group descriptors with CRC16 (polynomial 0x8005, reflected,
//! initial value 0xffff), see the kernel's `ext4_group_desc_csum`.

/// Raw CRC32C register update as the kernel's `crc32c_le(seed, data)`:
/// no pre- or post-inversion beyond what the seed carries.
///
/// ext4 starts chains from `!0` (see [`fs_csum_seed`]).
pub fn crc32c(seed: u32, data: &[u8]) -> u32 {
    // crc32c::crc32c_append inverts on entry and exit; undo both so the
    // register value flows through unchanged, as the kernel's does.
    !crc32c::crc32c_append(!seed, data)
}

/// The per-filesystem checksum seed: `crc32c(~0, uuid)`, or
/// `s_checksum_seed` when the metadata_csum_seed feature stores it.
pub fn fs_csum_seed(uuid: &[u8; 16]) -> u32 {
    crc32c(!0, uuid)
}

/// The reflected 0x8005 polynomial's table (CRC-16/ARC), built at compile time.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u16;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xa001
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16 as used by gdt_csum, continued from `seed` over `data`.
///
/// This is the kernel's `crc16(crc, buf, len)`: the reflected 0x8005
/// polynomial, no final XOR, so a chain continues by passing the last value
/// as the next seed. (The `crc` crate's digests re-reflect a custom initial
/// value, which makes chaining awkward; the table is 256 entries.)
pub fn crc16(seed: u16, data: &[u8]) -> u16 {
    data.iter().fold(seed, |crc, &b| {
        (crc >> 8) ^ CRC16_TABLE[usize::from((crc as u8) ^ b)]
    })
}

/// The MSB-first 0x04C11DB7 polynomial's table, built at compile time.
const CRC32_BE_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u32) << 24;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000_0000 != 0 {
                (crc << 1) ^ 0x04c1_1db7
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// Big-endian (MSB-first, unreflected) CRC32 continued from `seed`, as the
/// kernel's `crc32_be(crc, buf, len)`: no inversions, so chains continue by
/// passing the last value. jbd2's checksum v1 (`JBD2_FEATURE_COMPAT_CHECKSUM`)
/// runs it from `~0` over each transaction's descriptor and data blocks.
pub fn crc32_be(seed: u32, data: &[u8]) -> u32 {
    data.iter().fold(seed, |crc, &b| {
        (crc << 8) ^ CRC32_BE_TABLE[usize::from((crc >> 24) as u8 ^ b)]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_standard_check_value() {
        // The standard CRC-32C of "123456789" is 0xe3069283 (with inversions).
        assert_eq!(!crc32c(!0, b"123456789"), 0xe306_9283);
    }

    #[test]
    fn crc32c_chains() {
        let whole = crc32c(!0, b"hello world");
        let parts = crc32c(crc32c(!0, b"hello "), b"world");
        assert_eq!(whole, parts);
    }

    #[test]
    fn crc32_be_matches_mpeg2_check_value() {
        // CRC-32/MPEG-2 (init ~0, unreflected, no final XOR) of "123456789".
        assert_eq!(crc32_be(!0, b"123456789"), 0x0376_e6e7);
        assert_eq!(crc32_be(crc32_be(!0, b"1234"), b"56789"), 0x0376_e6e7);
    }

    #[test]
    fn crc16_matches_modbus_check_value() {
        assert_eq!(crc16(0xffff, b"123456789"), 0x4b37);
        assert_eq!(crc16(crc16(0xffff, b"1234"), b"56789"), 0x4b37);
    }
}
