//! The checksums ext4 and jbd2 use.
//!
//! ext4's metadata_csum uses CRC32C (Castagnoli) *without* the final
//! inversion: the kernel's `ext4_chksum(seed, data)` returns the raw register,
//! chained from a per-filesystem seed. The older gdt_csum (uninit_bg) feature
//! protects group descriptors with CRC16 (polynomial 0x8005, reflected,
//! initial value 0xffff), see the kernel's `ext4_group_desc_csum`.

#[allow(unused_imports)]
use crate::prelude::*;

/// Raw CRC32C register update as the kernel's `crc32c_le(seed, data)`:
/// no pre- or post-inversion beyond what the seed carries.
///
/// ext4 starts chains from `!0` (see [`fs_csum_seed`]).
pub fn crc32c(seed: u32, data: &[u8]) -> u32 {
    #[cfg(feature = "std")]
    {
        // crc32c::crc32c_append inverts on entry and exit; undo both so
        // the register value flows through unchanged, as the kernel's does.
        // It uses the CPU's CRC32 instruction where there is one.
        !crc32c::crc32c_append(!seed, data)
    }
    #[cfg(not(feature = "std"))]
    {
        crc32c_portable(seed, data)
    }
}

/// CRC32C (Castagnoli, reflected 0x1EDC6F41) with no initial or final
/// inversion: the raw register, as [`crc32c`] computes it.
const CRC32C_RAW: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::Algorithm {
    width: 32,
    poly: 0x1EDC_6F41,
    init: 0,
    refin: true,
    refout: true,
    xorout: 0,
    check: 0,
    residue: 0,
});

/// [`crc32c()`] by table, without `std` (the crc32c crate, which uses the
/// CPU's instruction, needs it).
pub fn crc32c_portable(seed: u32, data: &[u8]) -> u32 {
    // As for crc16 below: the crate takes a reflected algorithm's initial
    // value written out, so the register is reflected first.
    let mut d = CRC32C_RAW.digest_with_initial(seed.reverse_bits());
    d.update(data);
    d.finalize()
}

/// The per-filesystem checksum seed: `crc32c(~0, uuid)`, or
/// `s_checksum_seed` when the metadata_csum_seed feature stores it.
pub fn fs_csum_seed(uuid: &[u8; 16]) -> u32 {
    crc32c(!0, uuid)
}

/// CRC-16/ARC: the reflected 0x8005 polynomial, no final XOR.
const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_ARC);

/// CRC-32/MPEG-2: the MSB-first 0x04C11DB7 polynomial, no reflection, no
/// final XOR.
const CRC32_BE: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_MPEG_2);

/// CRC16 as used by gdt_csum, continued from `seed` over `data`.
///
/// This is the kernel's `crc16(crc, buf, len)`: the reflected 0x8005
/// polynomial, no final XOR, so a chain continues by passing the last value
/// as the next seed.
pub fn crc16(seed: u16, data: &[u8]) -> u16 {
    // The crc crate reflects a custom initial value for a reflected
    // algorithm (it takes it in the algorithm's written-out form); the
    // kernel's seed is already the register, so reflect it first to
    // cancel that. With refin = refout and no XOR, finalize returns the
    // register unchanged, ready to chain.
    let mut d = CRC16.digest_with_initial(seed.reverse_bits());
    d.update(data);
    d.finalize()
}

/// Big-endian (MSB-first, unreflected) CRC32 continued from `seed`, as the
/// kernel's `crc32_be(crc, buf, len)`: no inversions, so chains continue by
/// passing the last value. jbd2's checksum v1 (`JBD2_FEATURE_COMPAT_CHECKSUM`)
/// runs it from `~0` over each transaction's descriptor and data blocks.
pub fn crc32_be(seed: u32, data: &[u8]) -> u32 {
    let mut d = CRC32_BE.digest_with_initial(seed);
    d.update(data);
    d.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_portable_crc32c_is_the_kernels() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for seed in [0u32, !0, 0x1234_5678, 0xdead_beef] {
            for n in [0, 1, 3, 4, 5, 15, 16, 17, 255, 1000] {
                assert_eq!(
                    crc32c_portable(seed, &data[..n]),
                    !crc32c::crc32c_append(!seed, &data[..n]),
                    "seed {seed:#x}, {n} bytes"
                );
            }
        }
    }

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
