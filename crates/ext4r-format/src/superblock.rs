//! The ext2/3/4 superblock (`struct ext4_super_block`), 1024 bytes at byte
//! offset 1024 of the device, with backups at the start of some groups.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::checksum::{crc32c, fs_csum_seed};
use crate::error::{need, FormatError, Result};
use crate::features::{Compat, Features, Incompat, RoCompat};
use crate::num;
use zerocopy::little_endian::{I16, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Byte offset of the primary superblock on the device.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// Size of the superblock structure.
pub const SUPERBLOCK_SIZE: usize = 1024;
/// `s_magic`.
pub const EXT4_MAGIC: u16 = 0xEF53;
/// `s_state`: cleanly unmounted.
pub const STATE_VALID: u16 = 0x0001;
/// `s_state`: errors detected.
pub const STATE_ERROR: u16 = 0x0002;
/// `s_state`: orphans being recovered.
pub const STATE_ORPHAN: u16 = 0x0004;
/// `s_errors`: continue.
pub const ERRORS_CONTINUE: u16 = 1;
/// `s_errors`: remount read-only.
pub const ERRORS_RO: u16 = 2;
/// `s_errors`: panic.
pub const ERRORS_PANIC: u16 = 3;
/// `s_{first,last}_error_errcode`: an I/O error.
pub const ERR_EIO: u8 = 2;
/// `s_{first,last}_error_errcode`: a checksum failed.
pub const ERR_EFSBADCRC: u8 = 4;
/// `s_{first,last}_error_errcode`: a structure is corrupt.
pub const ERR_EFSCORRUPTED: u8 = 5;
/// `s_rev_level` of dynamic-inode-size filesystems.
pub const DYNAMIC_REV: u32 = 1;
/// `s_checksum_type` for CRC32C.
pub const CHECKSUM_CRC32C: u8 = 1;
/// `s_flags`: signed directory hash in use.
pub const FLAGS_SIGNED_HASH: u32 = 0x0001;
/// `s_flags`: unsigned directory hash in use.
pub const FLAGS_UNSIGNED_HASH: u32 = 0x0002;
/// `s_flags`: development code under test.
pub const FLAGS_TEST_FS: u32 = 0x0004;
/// `s_creator_os` values.
pub const OS_LINUX: u32 = 0;
/// Largest block size exponent ext4 allows (64 KiB).
pub const MAX_LOG_BLOCK_SIZE: u32 = 6;

/// Directory hash versions (`s_def_hash_version`, `dx_root_info.hash_version`).
pub mod hash_version {
    /// Legacy hash.
    pub const LEGACY: u8 = 0;
    /// Half MD4.
    pub const HALF_MD4: u8 = 1;
    /// Tea.
    pub const TEA: u8 = 2;
}

/// Default mount options (`s_default_mount_opts`).
pub mod mount_opts {
    /// Print debugging info.
    pub const DEBUG: u32 = 0x0001;
    /// BSD group semantics.
    pub const BSDGROUPS: u32 = 0x0002;
    /// User extended attributes.
    pub const XATTR_USER: u32 = 0x0004;
    /// POSIX ACLs.
    pub const ACL: u32 = 0x0008;
    /// No 32-bit UIDs.
    pub const UID16: u32 = 0x0010;
    /// Journal all data.
    pub const JMODE_DATA: u32 = 0x0020;
    /// Ordered data.
    pub const JMODE_ORDERED: u32 = 0x0040;
    /// Writeback data.
    pub const JMODE_WBACK: u32 = 0x0060;
    /// No write barriers.
    pub const NOBARRIER: u32 = 0x0100;
    /// Block validity checking.
    pub const BLOCK_VALIDITY: u32 = 0x0200;
    /// Discard.
    pub const DISCARD: u32 = 0x0400;
    /// No delayed allocation.
    pub const NODELALLOC: u32 = 0x0800;
}

/// The superblock exactly as on disk.
#[derive(Clone, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
#[allow(missing_docs)] // field names are the kernel's; see ext4 documentation
pub struct Superblock {
    pub s_inodes_count: U32,
    pub s_blocks_count_lo: U32,
    pub s_r_blocks_count_lo: U32,
    pub s_free_blocks_count_lo: U32,
    pub s_free_inodes_count: U32,
    pub s_first_data_block: U32,
    pub s_log_block_size: U32,
    pub s_log_cluster_size: U32,
    pub s_blocks_per_group: U32,
    pub s_clusters_per_group: U32,
    pub s_inodes_per_group: U32,
    pub s_mtime: U32,
    pub s_wtime: U32,
    pub s_mnt_count: U16,
    pub s_max_mnt_count: I16,
    pub s_magic: U16,
    pub s_state: U16,
    pub s_errors: U16,
    pub s_minor_rev_level: U16,
    pub s_lastcheck: U32,
    pub s_checkinterval: U32,
    pub s_creator_os: U32,
    pub s_rev_level: U32,
    pub s_def_resuid: U16,
    pub s_def_resgid: U16,
    pub s_first_ino: U32,
    pub s_inode_size: U16,
    pub s_block_group_nr: U16,
    pub s_feature_compat: U32,
    pub s_feature_incompat: U32,
    pub s_feature_ro_compat: U32,
    pub s_uuid: [u8; 16],
    pub s_volume_name: [u8; 16],
    pub s_last_mounted: [u8; 64],
    pub s_algorithm_usage_bitmap: U32,
    pub s_prealloc_blocks: u8,
    pub s_prealloc_dir_blocks: u8,
    pub s_reserved_gdt_blocks: U16,
    pub s_journal_uuid: [u8; 16],
    pub s_journal_inum: U32,
    pub s_journal_dev: U32,
    pub s_last_orphan: U32,
    pub s_hash_seed: [U32; 4],
    pub s_def_hash_version: u8,
    pub s_jnl_backup_type: u8,
    pub s_desc_size: U16,
    pub s_default_mount_opts: U32,
    pub s_first_meta_bg: U32,
    pub s_mkfs_time: U32,
    pub s_jnl_blocks: [U32; 17],
    pub s_blocks_count_hi: U32,
    pub s_r_blocks_count_hi: U32,
    pub s_free_blocks_count_hi: U32,
    pub s_min_extra_isize: U16,
    pub s_want_extra_isize: U16,
    pub s_flags: U32,
    pub s_raid_stride: U16,
    pub s_mmp_update_interval: U16,
    pub s_mmp_block: U64,
    pub s_raid_stripe_width: U32,
    pub s_log_groups_per_flex: u8,
    pub s_checksum_type: u8,
    pub s_encryption_level: u8,
    pub s_reserved_pad: u8,
    pub s_kbytes_written: U64,
    pub s_snapshot_inum: U32,
    pub s_snapshot_id: U32,
    pub s_snapshot_r_blocks_count: U64,
    pub s_snapshot_list: U32,
    pub s_error_count: U32,
    pub s_first_error_time: U32,
    pub s_first_error_ino: U32,
    pub s_first_error_block: U64,
    pub s_first_error_func: [u8; 32],
    pub s_first_error_line: U32,
    pub s_last_error_time: U32,
    pub s_last_error_ino: U32,
    pub s_last_error_line: U32,
    pub s_last_error_block: U64,
    pub s_last_error_func: [u8; 32],
    pub s_mount_opts: [u8; 64],
    pub s_usr_quota_inum: U32,
    pub s_grp_quota_inum: U32,
    pub s_overhead_clusters: U32,
    pub s_backup_bgs: [U32; 2],
    pub s_encrypt_algos: [u8; 4],
    pub s_encrypt_pw_salt: [u8; 16],
    pub s_lpf_ino: U32,
    pub s_prj_quota_inum: U32,
    pub s_checksum_seed: U32,
    pub s_wtime_hi: u8,
    pub s_mtime_hi: u8,
    pub s_mkfs_time_hi: u8,
    pub s_lastcheck_hi: u8,
    pub s_first_error_time_hi: u8,
    pub s_last_error_time_hi: u8,
    pub s_first_error_errcode: u8,
    pub s_last_error_errcode: u8,
    pub s_encoding: U16,
    pub s_encoding_flags: U16,
    pub s_orphan_file_inum: U32,
    pub s_reserved: [U32; 94],
    pub s_checksum: U32,
}

const _: () = assert!(core::mem::size_of::<Superblock>() == SUPERBLOCK_SIZE);

/// Joins a `_lo`/`_hi` pair; the high half only counts with the 64bit feature.
fn join(lo: u32, hi: u32, bit64: bool) -> u64 {
    u64::from(lo) | if bit64 { u64::from(hi) << 32 } else { 0 }
}

/// Joins a 32-bit time with its 8-bit epoch extension (bits 32..40).
fn join_time(lo: u32, hi: u8) -> i64 {
    i64::from(lo) | (i64::from(hi) << 32)
}

fn split_time(t: i64) -> (u32, u8) {
    // Times before 1970 or after 2446 are clamped to the representable range.
    let t = t.clamp(0, (1i64 << 40) - 1).unsigned_abs();
    (num::lo32(t), num::lo8(num::hi32(t)))
}

impl Superblock {
    /// An all-zero superblock, the starting point for mkfs.
    pub fn zeroed() -> Self {
        <Self as zerocopy::FromZeros>::new_zeroed()
    }

    /// Reads a superblock from the first 1024 bytes of `bytes`, checking the
    /// magic number. Nothing else is validated here: see [`Superblock::validate`].
    ///
    /// # Errors
    /// [`FormatError::Truncated`] or [`FormatError::BadMagic`].
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        need("superblock", bytes, SUPERBLOCK_SIZE)?;
        let sb = Self::read_from_bytes(&bytes[..SUPERBLOCK_SIZE])
            .map_err(|_| FormatError::invalid("superblock", "unaligned"))?;
        if sb.s_magic.get() != EXT4_MAGIC {
            return Err(FormatError::BadMagic {
                what: "superblock",
                found: sb.s_magic.get().into(),
                expected: EXT4_MAGIC.into(),
            });
        }
        Ok(sb)
    }

    /// The superblock's bytes.
    pub fn to_bytes(&self) -> [u8; SUPERBLOCK_SIZE] {
        let mut out = [0u8; SUPERBLOCK_SIZE];
        out.copy_from_slice(self.as_bytes());
        out
    }

    /// The feature words.
    pub fn features(&self) -> Features {
        Features::from_raw(
            self.s_feature_compat.get(),
            self.s_feature_incompat.get(),
            self.s_feature_ro_compat.get(),
        )
    }

    /// Stores the feature words.
    pub fn set_features(&mut self, f: Features) {
        self.s_feature_compat.set(f.compat.bits());
        self.s_feature_incompat.set(f.incompat.bits());
        self.s_feature_ro_compat.set(f.ro_compat.bits());
    }

    /// Whether a compat feature is set.
    pub fn has_compat(&self, f: Compat) -> bool {
        Compat::from_bits_retain(self.s_feature_compat.get()).contains(f)
    }

    /// Whether an incompat feature is set.
    pub fn has_incompat(&self, f: Incompat) -> bool {
        Incompat::from_bits_retain(self.s_feature_incompat.get()).contains(f)
    }

    /// Whether a ro_compat feature is set.
    pub fn has_ro_compat(&self, f: RoCompat) -> bool {
        RoCompat::from_bits_retain(self.s_feature_ro_compat.get()).contains(f)
    }

    fn is_64bit(&self) -> bool {
        self.has_incompat(Incompat::BIT64)
    }

    /// Block size in bytes (`1024 << s_log_block_size`), or `None` when the
    /// exponent is out of range.
    pub fn block_size(&self) -> Option<u32> {
        let log = self.s_log_block_size.get();
        (log <= MAX_LOG_BLOCK_SIZE).then(|| 1024u32 << log)
    }

    /// Cluster size in bytes (bigalloc), or `None` when out of range.
    pub fn cluster_size(&self) -> Option<u64> {
        let log = self.s_log_cluster_size.get();
        (log <= 29).then(|| 1024u64 << log)
    }

    /// Total blocks.
    pub fn blocks_count(&self) -> u64 {
        join(
            self.s_blocks_count_lo.get(),
            self.s_blocks_count_hi.get(),
            self.is_64bit(),
        )
    }

    /// Sets total blocks (high half only with 64bit).
    pub fn set_blocks_count(&mut self, v: u64) {
        self.s_blocks_count_lo.set(num::lo32(v));
        self.s_blocks_count_hi
            .set(if self.is_64bit() { num::hi32(v) } else { 0 });
    }

    /// Reserved blocks.
    pub fn r_blocks_count(&self) -> u64 {
        join(
            self.s_r_blocks_count_lo.get(),
            self.s_r_blocks_count_hi.get(),
            self.is_64bit(),
        )
    }

    /// Sets reserved blocks.
    pub fn set_r_blocks_count(&mut self, v: u64) {
        self.s_r_blocks_count_lo.set(num::lo32(v));
        self.s_r_blocks_count_hi
            .set(if self.is_64bit() { num::hi32(v) } else { 0 });
    }

    /// Free blocks.
    pub fn free_blocks_count(&self) -> u64 {
        join(
            self.s_free_blocks_count_lo.get(),
            self.s_free_blocks_count_hi.get(),
            self.is_64bit(),
        )
    }

    /// Sets free blocks.
    pub fn set_free_blocks_count(&mut self, v: u64) {
        self.s_free_blocks_count_lo.set(num::lo32(v));
        self.s_free_blocks_count_hi
            .set(if self.is_64bit() { num::hi32(v) } else { 0 });
    }

    /// Group descriptor size: 32 without 64bit, else `s_desc_size`.
    pub fn desc_size(&self) -> u16 {
        if self.is_64bit() {
            self.s_desc_size.get()
        } else {
            32
        }
    }

    /// Inode size: 128 for revision 0, else `s_inode_size`.
    pub fn inode_size(&self) -> u16 {
        if self.s_rev_level.get() == 0 {
            128
        } else {
            self.s_inode_size.get()
        }
    }

    /// First non-reserved inode: 11 for revision 0, else `s_first_ino`.
    pub fn first_ino(&self) -> u32 {
        if self.s_rev_level.get() == 0 {
            11
        } else {
            self.s_first_ino.get()
        }
    }

    /// Number of block groups, or `None` when the geometry fields are unusable.
    pub fn group_count(&self) -> Option<u32> {
        let per = u64::from(self.s_blocks_per_group.get());
        let first = u64::from(self.s_first_data_block.get());
        let blocks = self.blocks_count().checked_sub(first)?;
        if per == 0 {
            return None;
        }
        u32::try_from(blocks.div_ceil(per)).ok()
    }

    /// The hash seed as four words.
    pub fn hash_seed(&self) -> [u32; 4] {
        self.s_hash_seed.map(|w| w.get())
    }

    /// Sets the hash seed from 16 bytes (a UUID, as mke2fs and tune2fs
    /// draw it): each word little-endian, as the kernel reads the field.
    pub fn set_hash_seed_bytes(&mut self, bytes: &[u8; 16]) {
        for (w, c) in self.s_hash_seed.iter_mut().zip(bytes.chunks_exact(4)) {
            if let Ok(v) = U32::read_from_bytes(c) {
                *w = v;
            }
        }
    }

    /// Volume label up to the first NUL.
    pub fn volume_name(&self) -> &[u8] {
        until_nul(&self.s_volume_name)
    }

    /// Last-mounted path up to the first NUL.
    pub fn last_mounted(&self) -> &[u8] {
        until_nul(&self.s_last_mounted)
    }

    /// Creation time in seconds since the epoch, with the high byte.
    pub fn mkfs_time(&self) -> i64 {
        join_time(self.s_mkfs_time.get(), self.s_mkfs_time_hi)
    }

    /// Sets creation time.
    pub fn set_mkfs_time(&mut self, t: i64) {
        let (lo, hi) = split_time(t);
        self.s_mkfs_time.set(lo);
        self.s_mkfs_time_hi = hi;
    }

    /// Last write time.
    pub fn wtime(&self) -> i64 {
        join_time(self.s_wtime.get(), self.s_wtime_hi)
    }

    /// Sets last write time.
    pub fn set_wtime(&mut self, t: i64) {
        let (lo, hi) = split_time(t);
        self.s_wtime.set(lo);
        self.s_wtime_hi = hi;
    }

    /// Last mount time.
    pub fn mtime(&self) -> i64 {
        join_time(self.s_mtime.get(), self.s_mtime_hi)
    }

    /// Sets last mount time.
    pub fn set_mtime(&mut self, t: i64) {
        let (lo, hi) = split_time(t);
        self.s_mtime.set(lo);
        self.s_mtime_hi = hi;
    }

    /// Last check time.
    pub fn lastcheck(&self) -> i64 {
        join_time(self.s_lastcheck.get(), self.s_lastcheck_hi)
    }

    /// Sets last check time.
    pub fn set_lastcheck(&mut self, t: i64) {
        let (lo, hi) = split_time(t);
        self.s_lastcheck.set(lo);
        self.s_lastcheck_hi = hi;
    }

    /// Forgets the errors the kernel recorded: `s_error_count` and the
    /// first and last error's time, inode, block, function and line, as
    /// e2fsck clears them after a check (its memset of `EXT4_S_ERR_START`
    /// up to `s_mount_opts`). The errors' `_hi` time bytes and error codes
    /// lie past that range and stay, as e2fsck leaves them.
    pub fn clear_error_record(&mut self) {
        self.s_error_count.set(0);
        self.s_first_error_time.set(0);
        self.s_first_error_ino.set(0);
        self.s_first_error_block.set(0);
        self.s_first_error_func = [0; 32];
        self.s_first_error_line.set(0);
        self.s_last_error_time.set(0);
        self.s_last_error_ino.set(0);
        self.s_last_error_line.set(0);
        self.s_last_error_block.set(0);
        self.s_last_error_func = [0; 32];
    }

    /// Records damage found while the filesystem is in use, as the
    /// kernel's `ext4_error` does: the state says errors were detected
    /// (so that the next boot's `e2fsck -p` checks it), the error count
    /// goes up, and the last error's time, inode, block, function name
    /// (cut to 32 bytes) and error code (`ERR_*`) are set, the first
    /// error's too when none was recorded.
    pub fn record_error(&mut self, time: i64, ino: u32, block: u64, func: &str, errcode: u8) {
        self.s_state.set(self.s_state.get() | STATE_ERROR);
        let (lo, hi) = split_time(time);
        let mut name = [0u8; 32];
        let n = func.len().min(name.len());
        name[..n].copy_from_slice(&func.as_bytes()[..n]);
        self.s_last_error_time.set(lo);
        self.s_last_error_time_hi = hi;
        self.s_last_error_ino.set(ino);
        self.s_last_error_block.set(block);
        self.s_last_error_func = name;
        self.s_last_error_line.set(0);
        self.s_last_error_errcode = errcode;
        if self.s_first_error_time.get() == 0 && self.s_first_error_time_hi == 0 {
            self.s_first_error_time.set(lo);
            self.s_first_error_time_hi = hi;
            self.s_first_error_ino.set(ino);
            self.s_first_error_block.set(block);
            self.s_first_error_func = name;
            self.s_first_error_line.set(0);
            self.s_first_error_errcode = errcode;
        }
        self.s_error_count
            .set(self.s_error_count.get().saturating_add(1));
    }

    /// The metadata checksum seed: `s_checksum_seed` with metadata_csum_seed,
    /// else derived from the UUID.
    pub fn csum_seed(&self) -> u32 {
        if self.has_incompat(Incompat::CSUM_SEED) {
            self.s_checksum_seed.get()
        } else {
            fs_csum_seed(&self.s_uuid)
        }
    }

    /// The superblock checksum: CRC32C (from `!0`) of the bytes before
    /// `s_checksum`.
    pub fn compute_checksum(&self) -> u32 {
        let bytes = self.as_bytes();
        crc32c(!0, &bytes[..SUPERBLOCK_SIZE - 4])
    }

    /// Stores the checksum when metadata_csum is on.
    pub fn update_checksum(&mut self) {
        if self.has_ro_compat(RoCompat::METADATA_CSUM) {
            let c = self.compute_checksum();
            self.s_checksum.set(c);
        }
    }

    /// Whether the stored checksum is the CRC32C of the superblock (always,
    /// without metadata_csum), whatever algorithm `s_checksum_type` names:
    /// libext2fs's two steps apart (see [`Self::verify_checksum`]).
    pub fn checksum_matches(&self) -> bool {
        !self.has_ro_compat(RoCompat::METADATA_CSUM)
            || self.compute_checksum() == self.s_checksum.get()
    }

    /// Checks the stored checksum when metadata_csum is on, and that it is
    /// one we can check ([`Self::checksum_type_known`]): what the kernel's
    /// mount checks before it reads anything else.
    ///
    /// # Errors
    /// [`FormatError::Invalid`] naming `s_checksum_type` for an unknown
    /// algorithm; [`FormatError::BadChecksum`] on mismatch.
    pub fn verify_checksum(&self) -> Result<()> {
        if !self.has_ro_compat(RoCompat::METADATA_CSUM) {
            return Ok(());
        }
        if !self.checksum_type_known() {
            return Err(FormatError::invalid(
                "s_checksum_type",
                format!("{} (unknown checksum algorithm)", self.s_checksum_type),
            ));
        }
        let computed = self.compute_checksum();
        let stored = self.s_checksum.get();
        if computed != stored {
            return Err(FormatError::BadChecksum {
                what: "superblock",
                stored,
                computed,
            });
        }
        Ok(())
    }

    /// Whether the checksum algorithm is one we know: with metadata_csum,
    /// `s_checksum_type` must name CRC32C. The kernel refuses to mount
    /// anything else ("unknown checksum algorithm") and libext2fs to open
    /// it: no checksum could be verified, and any written would be wrong.
    pub fn checksum_type_known(&self) -> bool {
        !self.has_ro_compat(RoCompat::METADATA_CSUM) || self.s_checksum_type == CHECKSUM_CRC32C
    }

    /// Checks the geometry fields that every other computation relies on, so
    /// that code reading the rest of the filesystem can trust them:
    /// block and cluster sizes, group sizes, counts and inode size. (The
    /// checksum algorithm is [`Self::verify_checksum`]'s: a reader that
    /// does not verify checksums can read past an unknown one.)
    ///
    /// # Errors
    /// [`FormatError::Invalid`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        let bad = |what, detail: String| Err(FormatError::invalid(what, detail));
        let Some(bs) = self.block_size() else {
            return bad(
                "s_log_block_size",
                format!("{}", self.s_log_block_size.get()),
            );
        };
        let bigalloc = self.has_ro_compat(RoCompat::BIGALLOC);
        let log_c = self.s_log_cluster_size.get();
        if (bigalloc && (log_c < self.s_log_block_size.get() || log_c > 29))
            || (!bigalloc && log_c != self.s_log_block_size.get())
        {
            return bad("s_log_cluster_size", format!("{log_c}"));
        }
        // libext2fs refuses more than 2^31 groups per flex group (a shift
        // of a 32-bit group number), flex_bg or not.
        if self.s_log_groups_per_flex > 31 {
            return bad(
                "s_log_groups_per_flex",
                format!("{}", self.s_log_groups_per_flex),
            );
        }
        let bpg = self.s_blocks_per_group.get();
        let cpg = self.s_clusters_per_group.get();
        let ratio = 1u32 << (log_c - self.s_log_block_size.get());
        if cpg == 0 || cpg > 8 * bs || u64::from(bpg) != u64::from(cpg) * u64::from(ratio) {
            return bad(
                "s_blocks_per_group",
                format!("{bpg} (clusters per group {cpg})"),
            );
        }
        let ipg = self.s_inodes_per_group.get();
        if ipg == 0 || ipg > 8 * bs {
            return bad("s_inodes_per_group", format!("{ipg}"));
        }
        let isz = self.inode_size();
        if isz < 128 || u32::from(isz) > bs || !isz.is_power_of_two() {
            return bad("s_inode_size", format!("{isz}"));
        }
        // The superblock's block when 1 KiB blocks are clusters, else 0
        // (e2fsck's check_super_block, the kernel's ext4_check_geometry):
        // any other value moves every group's start.
        let first = self.s_first_data_block.get();
        let should_be = u32::from(self.s_log_block_size.get() == 0 && ratio == 1);
        if u64::from(first) >= self.blocks_count() || first != should_be {
            return bad(
                "s_first_data_block",
                format!("{first}, should be {should_be}"),
            );
        }
        let Some(groups) = self.group_count() else {
            return bad("s_blocks_count", format!("{}", self.blocks_count()));
        };
        if u64::from(groups) * u64::from(ipg) != u64::from(self.s_inodes_count.get()) {
            return bad(
                "s_inodes_count",
                format!("{} != {groups} groups x {ipg}", self.s_inodes_count.get()),
            );
        }
        if self.is_64bit() {
            // EXT2_MIN_DESC_SIZE_64BIT: with 64bit the kernel and
            // libext2fs refuse descriptors under 64 bytes (e2fsck then
            // checks from a backup superblock); reading a table of 64-byte
            // descriptors 32 bytes apart would take garbage for groups.
            let ds = self.s_desc_size.get();
            if !(64..=1024).contains(&ds) || !ds.is_power_of_two() {
                return bad("s_desc_size", format!("{ds}"));
            }
        }
        if self.s_rev_level.get() > DYNAMIC_REV {
            return bad("s_rev_level", format!("{}", self.s_rev_level.get()));
        }
        if self.first_ino() < 11 || self.first_ino() > self.s_inodes_count.get() {
            return bad("s_first_ino", format!("{}", self.first_ino()));
        }
        Ok(())
    }
}

fn until_nul(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

impl core::fmt::Debug for Superblock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Superblock")
            .field("blocks_count", &self.blocks_count())
            .field("inodes_count", &self.s_inodes_count.get())
            .field("block_size", &self.block_size())
            .field("features", &self.features())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Superblock {
        let mut sb = Superblock::zeroed();
        sb.s_magic.set(EXT4_MAGIC);
        sb.s_log_block_size.set(2);
        sb.s_log_cluster_size.set(2);
        sb.s_blocks_per_group.set(32768);
        sb.s_clusters_per_group.set(32768);
        sb.s_inodes_per_group.set(8192);
        sb.s_rev_level.set(DYNAMIC_REV);
        sb.s_inode_size.set(256);
        sb.s_first_ino.set(11);
        sb.s_feature_incompat.set(Incompat::BIT64.bits());
        sb.s_desc_size.set(64);
        sb.set_blocks_count(0x1_0000_0000);
        sb.s_inodes_count.set(8192 * 131072);
        sb
    }

    #[test]
    fn offsets_match_the_kernel() {
        let sb = Superblock::zeroed();
        let base = sb.as_bytes().as_ptr() as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(at(sb.s_magic.as_bytes().as_ptr()), 0x38);
        assert_eq!(at(sb.s_uuid.as_ptr()), 0x68);
        assert_eq!(at(sb.s_journal_uuid.as_ptr()), 0xd0);
        assert_eq!(at(sb.s_hash_seed.as_bytes().as_ptr()), 0xec);
        assert_eq!(at(sb.s_jnl_blocks.as_bytes().as_ptr()), 0x10c);
        assert_eq!(at(sb.s_mmp_block.as_bytes().as_ptr()), 0x168);
        assert_eq!(at(sb.s_kbytes_written.as_bytes().as_ptr()), 0x178);
        assert_eq!(at(sb.s_mount_opts.as_ptr()), 0x200);
        assert_eq!(at(sb.s_checksum_seed.as_bytes().as_ptr()), 0x270);
        assert_eq!(at(sb.s_orphan_file_inum.as_bytes().as_ptr()), 0x280);
        assert_eq!(at(sb.s_checksum.as_bytes().as_ptr()), 0x3fc);
    }

    /// e2fsck zeroes bytes 0x194 (`s_error_count`) up to 0x200
    /// (`s_mount_opts`): exactly those, nothing around them.
    #[test]
    fn error_record_is_e2fscks_range() {
        let mut bytes = [0xa5u8; SUPERBLOCK_SIZE];
        bytes[0x38] = 0x53;
        bytes[0x39] = 0xef;
        let mut sb = Superblock::parse(&bytes).unwrap();
        sb.clear_error_record();
        let out = sb.to_bytes();
        for (i, (&b, &a)) in out.iter().zip(bytes.iter()).enumerate() {
            let want = if (0x194..0x200).contains(&i) { 0 } else { a };
            assert_eq!(b, want, "byte {i:#x}");
        }
    }

    #[test]
    fn sample_validates_and_joins_64bit_counts() {
        let sb = sample();
        sb.validate().unwrap();
        assert_eq!(sb.blocks_count(), 0x1_0000_0000);
        assert_eq!(sb.group_count(), Some(131072));
    }

    #[test]
    fn only_crc32c_is_a_known_checksum_algorithm_with_metadata_csum() {
        for (csum, ty, ok) in [
            (true, CHECKSUM_CRC32C, true),
            (true, 0, false),
            (true, 2, false),
            (true, 255, false),
            // Without metadata_csum the field means nothing.
            (false, 0, true),
            (false, 2, true),
        ] {
            let mut sb = sample();
            if csum {
                sb.s_feature_ro_compat.set(RoCompat::METADATA_CSUM.bits());
            }
            sb.s_checksum_type = ty;
            sb.update_checksum();
            assert_eq!(sb.checksum_type_known(), ok, "type {ty}, csum {csum}");
            assert!(sb.checksum_matches(), "type {ty}, csum {csum}");
            assert_eq!(sb.verify_checksum().is_ok(), ok, "type {ty}, csum {csum}");
            // The geometry is sound either way: an unverifying reader
            // reads on.
            sb.validate().unwrap();
        }
    }

    #[test]
    fn the_first_data_block_is_1_only_where_1_kib_blocks_are_clusters() {
        // (log block size, log cluster size, first data block, sound)
        for (lb, lc, first, ok) in [
            (0u32, 0u32, 1u32, true),
            (0, 0, 0, false),
            (2, 2, 0, true),
            (2, 2, 1, false),
            // bigalloc on 1 KiB blocks: the superblock's block is in
            // cluster 0.
            (0, 4, 0, true),
            (0, 4, 1, false),
        ] {
            let mut sb = sample();
            sb.s_feature_incompat.set(0);
            if lc != lb {
                sb.s_feature_ro_compat.set(RoCompat::BIGALLOC.bits());
            }
            sb.s_log_block_size.set(lb);
            sb.s_log_cluster_size.set(lc);
            sb.s_blocks_per_group.set(8192);
            sb.s_clusters_per_group.set(8192 >> (lc - lb));
            sb.s_inodes_per_group.set(2048);
            sb.s_blocks_count_lo.set(65536);
            sb.s_blocks_count_hi.set(0);
            sb.s_r_blocks_count_lo.set(0);
            sb.s_first_data_block.set(first);
            let groups = sb.group_count().unwrap();
            sb.s_inodes_count.set(groups * 2048);
            assert_eq!(
                sb.validate().is_ok(),
                ok,
                "{lb} {lc} {first}: {:?}",
                sb.validate()
            );
        }
    }

    #[test]
    fn descriptors_under_64_bytes_are_refused_with_64bit() {
        for (ds, ok) in [
            (0u16, false),
            (32, false),
            (48, false),
            (64, true),
            (128, true),
            (2048, false),
        ] {
            let mut sb = sample();
            sb.s_desc_size.set(ds);
            assert_eq!(sb.validate().is_ok(), ok, "s_desc_size {ds}");
        }
    }

    #[test]
    fn bad_magic_is_reported() {
        let bytes = [0u8; 1024];
        assert!(matches!(
            Superblock::parse(&bytes),
            Err(FormatError::BadMagic { .. })
        ));
        assert!(matches!(
            Superblock::parse(&bytes[..10]),
            Err(FormatError::Truncated { .. })
        ));
    }

    #[test]
    fn checksum_round_trip() {
        let mut sb = sample();
        sb.s_feature_ro_compat.set(RoCompat::METADATA_CSUM.bits());
        sb.s_checksum_type = CHECKSUM_CRC32C;
        sb.update_checksum();
        sb.verify_checksum().unwrap();
        sb.s_inodes_count.set(1);
        assert!(sb.verify_checksum().is_err());
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 1024)) {
            let mut bytes = bytes;
            bytes[0x38] = 0x53;
            bytes[0x39] = 0xef;
            let sb = Superblock::parse(&bytes).unwrap();
            prop_assert_eq!(&sb.to_bytes()[..], &bytes[..]);
            // Validation and the derived values never panic on any bytes.
            let _ = sb.validate();
            let _ = (sb.group_count(), sb.block_size(), sb.cluster_size(), sb.csum_seed());
        }

        #[test]
        fn times_round_trip(t in 0i64..(1i64 << 40)) {
            let mut sb = Superblock::zeroed();
            sb.set_mkfs_time(t);
            prop_assert_eq!(sb.mkfs_time(), t);
        }
    }
}
