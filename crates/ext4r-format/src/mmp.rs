//! The multiple-mount protection block (`struct mmp_struct`): 1024 bytes at
//! the start of block `s_mmp_block`, little-endian, rewritten periodically by
//! whoever has the filesystem open so that another node can see it is busy.
//!
//! Only `mmp_seq` decides whether the filesystem is in use; time, node and
//! device names are for the administrator (see e2fsprogs' `ext2_fs.h`).

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::crc32c;
use crate::error::{need, FormatError, Result};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Size of the MMP structure.
pub const MMP_SIZE: usize = 1024;
/// `mmp_magic` ("MMP").
pub const MMP_MAGIC: u32 = 0x004D_4D50;
/// `mmp_seq` after a clean unmount.
pub const MMP_SEQ_CLEAN: u32 = 0xFF4D_4D50;
/// `mmp_seq` while e2fsck has the filesystem.
pub const MMP_SEQ_FSCK: u32 = 0xE24D_4D50;
/// Largest `mmp_seq` a mounted filesystem uses; above it, only the two
/// special values have a meaning.
pub const MMP_SEQ_MAX: u32 = 0xE24D_4D4F;
/// Default `s_mmp_update_interval`, in seconds.
pub const MMP_UPDATE_INTERVAL: u16 = 5;
/// Largest `s_mmp_update_interval`, in seconds.
pub const MMP_MAX_UPDATE_INTERVAL: u16 = 300;
/// Smallest `mmp_check_interval`, in seconds.
pub const MMP_MIN_CHECK_INTERVAL: u16 = 5;
/// Offset of `mmp_checksum`: the checksum covers the bytes before it.
const CHECKSUM_OFFSET: usize = MMP_SIZE - 4;

/// The MMP structure exactly as on disk.
#[derive(Clone, FromBytes, IntoBytes, KnownLayout, Immutable, PartialEq, Eq)]
#[repr(C)]
#[allow(missing_docs)] // Field names are e2fsprogs'; see ext2_fs.h.
pub struct MmpStruct {
    pub mmp_magic: U32,
    pub mmp_seq: U32,
    pub mmp_time: U64,
    pub mmp_nodename: [u8; 64],
    pub mmp_bdevname: [u8; 32],
    pub mmp_check_interval: U16,
    pub mmp_pad1: U16,
    pub mmp_pad2: [U32; 226],
    pub mmp_checksum: U32,
}

const _: () = assert!(core::mem::size_of::<MmpStruct>() == MMP_SIZE);

/// What `mmp_seq` says about the filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmpState {
    /// Cleanly unmounted: free to use.
    Clean,
    /// e2fsck is running on it: not safe to use, however old the time.
    Fsck,
    /// Possibly in use: the sequence must not change over a check interval
    /// before the filesystem may be taken.
    InUse(u32),
    /// A value above [`MMP_SEQ_MAX`] that is neither special value: treat as
    /// not safe.
    Unknown(u32),
}

impl MmpStruct {
    /// An all-zero structure.
    pub fn zeroed() -> Self {
        <Self as zerocopy::FromZeros>::new_zeroed()
    }

    /// A structure with the magic and these fields; names longer than their
    /// fields are cut, shorter ones NUL-padded.
    pub fn new(seq: u32, time: u64, nodename: &[u8], bdevname: &[u8], check_interval: u16) -> Self {
        let mut m = Self::zeroed();
        m.mmp_magic.set(MMP_MAGIC);
        m.mmp_seq.set(seq);
        m.mmp_time.set(time);
        copy_name(&mut m.mmp_nodename, nodename);
        copy_name(&mut m.mmp_bdevname, bdevname);
        m.mmp_check_interval.set(check_interval);
        m
    }

    /// Reads the structure from the first 1024 bytes of `bytes` (an MMP
    /// block), checking the magic.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] or [`FormatError::BadMagic`].
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        need("mmp block", bytes, MMP_SIZE)?;
        let m = Self::read_from_bytes(&bytes[..MMP_SIZE])
            .map_err(|_| FormatError::invalid("mmp block", "unreadable"))?;
        if m.mmp_magic.get() != MMP_MAGIC {
            return Err(FormatError::BadMagic {
                what: "mmp block",
                found: m.mmp_magic.get(),
                expected: MMP_MAGIC,
            });
        }
        Ok(m)
    }

    /// The structure's bytes.
    pub fn to_bytes(&self) -> [u8; MMP_SIZE] {
        let mut out = [0u8; MMP_SIZE];
        out.copy_from_slice(self.as_bytes());
        out
    }

    /// What the sequence number says.
    pub fn state(&self) -> MmpState {
        match self.mmp_seq.get() {
            MMP_SEQ_CLEAN => MmpState::Clean,
            MMP_SEQ_FSCK => MmpState::Fsck,
            s if s <= MMP_SEQ_MAX => MmpState::InUse(s),
            s => MmpState::Unknown(s),
        }
    }

    /// The node name up to the first NUL (it need not have one).
    pub fn nodename(&self) -> &[u8] {
        until_nul(&self.mmp_nodename)
    }

    /// The device name up to the first NUL (it need not have one).
    pub fn bdevname(&self) -> &[u8] {
        until_nul(&self.mmp_bdevname)
    }

    /// The checksum: CRC32C from the filesystem seed (see
    /// [`crate::superblock::Superblock::csum_seed`]) over the bytes before
    /// `mmp_checksum`. Only meaningful with metadata_csum.
    pub fn compute_checksum(&self, fs_seed: u32) -> u32 {
        crc32c(fs_seed, &self.as_bytes()[..CHECKSUM_OFFSET])
    }

    /// Stores the checksum; callers do this only with metadata_csum.
    pub fn update_checksum(&mut self, fs_seed: u32) {
        let c = self.compute_checksum(fs_seed);
        self.mmp_checksum.set(c);
    }

    /// Checks the stored checksum; callers do this only with metadata_csum.
    ///
    /// # Errors
    /// [`FormatError::BadChecksum`] on mismatch.
    pub fn verify_checksum(&self, fs_seed: u32) -> Result<()> {
        let computed = self.compute_checksum(fs_seed);
        let stored = self.mmp_checksum.get();
        if computed != stored {
            return Err(FormatError::BadChecksum {
                what: "mmp block",
                stored,
                computed,
            });
        }
        Ok(())
    }
}

fn copy_name(field: &mut [u8], name: &[u8]) {
    let n = name.len().min(field.len());
    field[..n].copy_from_slice(&name[..n]);
    field[n..].fill(0);
}

fn until_nul(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

impl core::fmt::Debug for MmpStruct {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MmpStruct")
            .field("state", &self.state())
            .field("time", &self.mmp_time.get())
            .field("nodename", &String::from_utf8_lossy(self.nodename()))
            .field("bdevname", &String::from_utf8_lossy(self.bdevname()))
            .field("check_interval", &self.mmp_check_interval.get())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::fs_csum_seed;
    use proptest::prelude::*;

    const UUID: [u8; 16] = [
        0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55,
        0x55,
    ];

    /// The MMP block of `mke2fs -t ext4 -b 1024 -O mmp,metadata_csum
    /// -U 11111111-2222-3333-4444-555555555555` (e2fsprogs 1.47.0) on an
    /// image named m.img on host "vm"; the rest of the block is zero.
    fn sample() -> Vec<u8> {
        let mut b = vec![0u8; MMP_SIZE];
        b[..16].copy_from_slice(&[
            0x50, 0x4d, 0x4d, 0x00, 0x50, 0x4d, 0x4d, 0xff, 0xab, 0x7e, 0x03, 0x6b, 0, 0, 0, 0,
        ]);
        b[0x10..0x12].copy_from_slice(b"vm");
        b[0x50..0x55].copy_from_slice(b"m.img");
        b[0x70] = 5;
        b[0x3fc..].copy_from_slice(&[0x01, 0x8b, 0x94, 0x89]);
        b
    }

    #[test]
    fn offsets_match_ext2_fs_h() {
        let m = MmpStruct::zeroed();
        let base = m.as_bytes().as_ptr() as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(at(m.mmp_time.as_bytes().as_ptr()), 8);
        assert_eq!(at(m.mmp_nodename.as_ptr()), 0x10);
        assert_eq!(at(m.mmp_bdevname.as_ptr()), 0x50);
        assert_eq!(at(m.mmp_check_interval.as_bytes().as_ptr()), 0x70);
        assert_eq!(at(m.mmp_checksum.as_bytes().as_ptr()), CHECKSUM_OFFSET);
    }

    #[test]
    fn mke2fs_sample() {
        let b = sample();
        let m = MmpStruct::parse(&b).unwrap();
        assert_eq!(m.state(), MmpState::Clean);
        assert_eq!(m.nodename(), b"vm");
        assert_eq!(m.bdevname(), b"m.img");
        assert_eq!(m.mmp_time.get(), 1_795_391_147);
        let seed = fs_csum_seed(&UUID);
        m.verify_checksum(seed).unwrap();
        assert!(m.verify_checksum(seed ^ 1).is_err());
        let built = MmpStruct::new(MMP_SEQ_CLEAN, 1_795_391_147, b"vm", b"m.img", 5);
        let mut built = built;
        built.update_checksum(seed);
        assert_eq!(&built.to_bytes()[..], &b[..]);
    }

    #[test]
    fn states_and_names() {
        let st = |s| MmpStruct::new(s, 0, b"", b"", 5).state();
        assert_eq!(st(MMP_SEQ_FSCK), MmpState::Fsck);
        assert_eq!(st(7), MmpState::InUse(7));
        assert_eq!(st(MMP_SEQ_MAX), MmpState::InUse(MMP_SEQ_MAX));
        assert_eq!(st(MMP_SEQ_FSCK + 1), MmpState::Unknown(MMP_SEQ_FSCK + 1));
        let long = [b'x'; 100];
        let m = MmpStruct::new(1, 0, &long, &long, 5);
        assert_eq!(m.nodename().len(), 64);
        assert_eq!(m.bdevname().len(), 32);
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(matches!(
            MmpStruct::parse(&[0u8; 1023]),
            Err(FormatError::Truncated { .. })
        ));
        assert!(matches!(
            MmpStruct::parse(&[0u8; 4096]),
            Err(FormatError::BadMagic { .. })
        ));
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), MMP_SIZE)) {
            let mut bytes = bytes;
            bytes[..4].copy_from_slice(&MMP_MAGIC.to_le_bytes());
            let mut m = MmpStruct::parse(&bytes).unwrap();
            prop_assert_eq!(&m.to_bytes()[..], &bytes[..]);
            let _ = (m.state(), m.nodename(), m.bdevname(), format!("{m:?}"));
            m.update_checksum(42);
            prop_assert!(m.verify_checksum(42).is_ok());
        }
    }
}
