//! CRC32C of three buffers side by side. One CRC instruction waits for
//! the one before it (three cycles), so a single 256-byte inode record
//! leaves the unit idle two cycles in three; pass 1 checks millions of
//! records and runs three at once.
//!
//! The one use of `unsafe` in the checker: entering a function compiled
//! for SSE 4.2 after asking the CPU whether it has it.
#![allow(unsafe_code)]

use ext4r_format::checksum::crc32c;

/// The raw CRC32C registers (as [`crc32c`]) of `heads[k]` (8 bytes,
/// little-endian) then `bufs[k]`, each run from `seed`: an inode record's
/// number and generation, then the record. Buffers of one length, a
/// multiple of 8 bytes, go side by side; others one after the other.
pub(crate) fn crc32c_x3(seed: u32, heads: [u64; 3], bufs: [&[u8]; 3]) -> [u32; 3] {
    #[cfg(target_arch = "x86_64")]
    {
        let len = bufs[0].len();
        if len % 8 == 0
            && bufs.iter().all(|b| b.len() == len)
            && std::arch::is_x86_feature_detected!("sse4.2")
        {
            // SAFETY: `x86::side_by_side` needs SSE 4.2, which the CPU
            // has (asked just above).
            return unsafe { x86::side_by_side(seed, heads, bufs) };
        }
    }
    [0, 1, 2].map(|k| crc32c(crc32c(seed, &heads[k].to_le_bytes()), bufs[k]))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use ext4r_format::num;
    use std::arch::x86_64::_mm_crc32_u64;

    /// Three CRC chains, a word of each per step.
    ///
    /// # Safety
    /// The CPU must have SSE 4.2. (An `unsafe fn` because Rust 1.85, the
    /// minimum we support, takes `target_feature` on no other; from 1.86
    /// the intrinsic is safe to call in here, hence the allowed
    /// `unused_unsafe`.)
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn side_by_side(
        seed: u32,
        heads: [u64; 3],
        [a, b, c]: [&[u8]; 3],
    ) -> [u32; 3] {
        #[inline(always)]
        fn word(s: &[u8]) -> u64 {
            u64::from_le_bytes(s.try_into().unwrap_or_default())
        }
        let s = u64::from(seed);
        // SAFETY: as in the loop below. (No closure: one may not share
        // this function's target features on older compilers.)
        #[allow(unused_unsafe)]
        let (mut x, mut y, mut z) = unsafe {
            (
                _mm_crc32_u64(s, heads[0]),
                _mm_crc32_u64(s, heads[1]),
                _mm_crc32_u64(s, heads[2]),
            )
        };
        for ((p, q), r) in a
            .chunks_exact(8)
            .zip(b.chunks_exact(8))
            .zip(c.chunks_exact(8))
        {
            // SAFETY: this function is compiled for SSE 4.2, which its
            // caller checked the CPU has.
            #[allow(unused_unsafe)]
            unsafe {
                x = _mm_crc32_u64(x, word(p));
                y = _mm_crc32_u64(y, word(q));
                z = _mm_crc32_u64(z, word(r));
            }
        }
        // A CRC32 fills the low 32 bits only.
        [num::lo32(x), num::lo32(y), num::lo32(z)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn same_as_one_at_a_time(
            seed: u32,
            heads: [u64; 3],
            words in 0usize..40,
            bytes in proptest::collection::vec(any::<u8>(), 960),
            odd in 0usize..3,
        ) {
            let len = words * 8;
            let (a, b, c) = (&bytes[..len], &bytes[320..320 + len], &bytes[640..640 + len]);
            // One at a time, over the head's bytes and the buffer joined.
            let one = |bufs: [&[u8]; 3]| {
                [0, 1, 2].map(|k| {
                    let mut joined = heads[k].to_le_bytes().to_vec();
                    joined.extend_from_slice(bufs[k]);
                    crc32c(seed, &joined)
                })
            };
            prop_assert_eq!(crc32c_x3(seed, heads, [a, b, c]), one([a, b, c]));
            // Lengths that cannot go side by side.
            let d = &bytes[..len + odd];
            prop_assert_eq!(crc32c_x3(seed, heads, [d, b, c]), one([d, b, c]));
        }
    }
}
