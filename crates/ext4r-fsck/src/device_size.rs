//! e2fsck's `PR_0_FS_SIZE_WRONG`: a superblock that claims more blocks than
//! the device holds. Either the superblock or the partition table is wrong,
//! and neither a journal replay nor a repair may write before someone has
//! decided which: e2fsck asks "Abort?" (yes under -y, a stop under -p, no
//! under -n), before it touches anything.

use crate::codes::ProblemCode;
use ext4r::device::BlockDevice;
use ext4r_format::superblock::Superblock;

/// A filesystem larger than its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeMismatch {
    /// Blocks according to the superblock.
    pub fs_blocks: u64,
    /// Whole blocks the device holds.
    pub device_blocks: u64,
}

impl SizeMismatch {
    /// Files it among a check's problems (e2fsck's PR_0_FS_SIZE_WRONG),
    /// for reports that list problems rather than print them: harmless
    /// here, since the caller has already stopped a repair or, reading
    /// only, gone on as e2fsck -n does (its exit code is unchanged).
    pub fn record(&self, problems: &mut crate::problem::Problems) {
        problems.on(crate::problem::Subject::Filesystem).harmless(
            0,
            ProblemCode::PR_0_FS_SIZE_WRONG,
            self.message(),
        );
    }

    /// e2fsck's words for it.
    pub fn message(&self) -> String {
        format!(
            "The filesystem size (according to the superblock) is {} blocks\n\
             The physical size of the device is {} blocks\n\
             Either the superblock or the partition table is likely to be corrupt!",
            self.fs_blocks, self.device_blocks
        )
    }
}

/// Compares the superblock at `superblock` (a block number in blocks of
/// `block_size`, as `-b`/`-B`; the primary when `None`) with the device's
/// size. `None` when they agree, or when there is no superblock to judge
/// by there (the check proper reports that).
pub fn size_mismatch(
    dev: &dyn BlockDevice,
    superblock: Option<u64>,
    block_size: Option<u32>,
) -> Option<SizeMismatch> {
    let offset = match superblock {
        Some(b) => b.checked_mul(u64::from(block_size.unwrap_or(1024)))?,
        None => 1024,
    };
    let mut buf = vec![0u8; 1024];
    dev.read_at(&mut buf, offset).ok()?;
    let sb = Superblock::parse(&buf).ok()?;
    // e2fsck judges the size by the superblock it checks with: a primary
    // that libext2fs refuses (bad geometry, a checksum that does not
    // match) is replaced by a backup first, whose size is the one to
    // compare. A damaged s_blocks_count_hi must not stop a repair that
    // the backup makes possible.
    if superblock.is_none() && (sb.validate().is_err() || sb.verify_checksum().is_err()) {
        return None;
    }
    let bs = u64::from(sb.block_size()?);
    let fs_blocks = sb.blocks_count();
    let device_blocks = dev.size() / bs;
    (device_blocks < fs_blocks).then_some(SizeMismatch {
        fs_blocks,
        device_blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r::device::MemDevice;
    use ext4r::mkfs::{format, MkfsOptions};

    #[test]
    fn a_truncated_device_is_found_and_a_whole_one_is_not() {
        let opts = MkfsOptions {
            size_bytes: 8 << 20,
            now: 1_700_000_000,
            ..Default::default()
        };
        let dev = MemDevice::new(8 << 20);
        format(&dev, &opts, true).expect("mkfs");
        assert_eq!(size_mismatch(&dev, None, None), None);
        let half = MemDevice::from_bytes(&dev.to_vec().expect("bytes")[..4 << 20]);
        let m = size_mismatch(&half, None, None).expect("mismatch");
        assert_eq!((m.fs_blocks, m.device_blocks), (8192, 4096));
        assert!(m
            .message()
            .contains("physical size of the device is 4096 blocks"));
        // No superblock at all: nothing to say here.
        assert_eq!(size_mismatch(&MemDevice::new(4096), None, None), None);
        // A primary the check will not use (its geometry does not add up)
        // is not judged: the backup's size is the one that counts.
        let mut bytes = half.to_vec().expect("bytes");
        bytes[1024 + 0x150..1024 + 0x154].copy_from_slice(&[0xff; 4]);
        assert_eq!(
            size_mismatch(&MemDevice::from_bytes(&bytes), None, None),
            None
        );
    }
}
