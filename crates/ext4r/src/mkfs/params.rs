//! From what the user asked for to the exact numbers of a filesystem, the
//! way mke2fs 1.47 resolves its options against its stock mke2fs.conf,
//! which is built in here so that no configuration file is needed.

use super::notice::{Notice, Notices};
use crate::error::{Error, Result};
use ext4r_format::features::{Compat, Features, Incompat, RoCompat};
use ext4r_format::num;

/// What the caller asks for; `None`/zero means "mke2fs's default".
///
/// [`MkfsOptions::default`] is what mke2fs does when nothing is asked: a
/// random UUID and hash seed, and the current time as the creation time.
/// [`MkfsOptions::reproducible`] gives the same bytes for the same epoch
/// on any machine (the CLI uses it under `SOURCE_DATE_EPOCH`).
#[derive(Debug, Clone)]
pub struct MkfsOptions {
    /// `-t`: ext2, ext3 or ext4 (default ext4, as for `mkfs.ext4`).
    pub fs_type: Option<String>,
    /// `-T`: comma-separated usage types (default from the size).
    pub usage_types: Option<String>,
    /// `-b`: block size in bytes.
    pub block_size: Option<u32>,
    /// `-C`: cluster size in bytes (bigalloc).
    pub cluster_size: Option<u32>,
    /// `-i`: bytes per inode.
    pub inode_ratio: Option<u32>,
    /// `-I`: inode size.
    pub inode_size: Option<u16>,
    /// `-N`: number of inodes.
    pub num_inodes: Option<u64>,
    /// `-m`: reserved blocks percentage.
    pub reserved_ratio: Option<f64>,
    /// `-g`: blocks per group.
    pub blocks_per_group: Option<u32>,
    /// `-G`: groups per flex group.
    pub flex_bg_size: Option<u32>,
    /// `-O`: feature edits, in order given.
    pub features: Vec<String>,
    /// `-j` / `-J size=`: journal size in MiB (`Some(0)` = default size).
    pub journal_size_mib: Option<u32>,
    /// `-J fast_commit_size=`: the fast-commit area in KiB, added to the
    /// journal when the filesystem has fast_commit (default: a 64th of
    /// the journal, as mke2fs).
    pub journal_fc_size_kib: Option<u32>,
    /// `-e`: continue, remount-ro or panic.
    pub errors: Option<String>,
    /// `-o`: creator OS.
    pub creator_os: Option<String>,
    /// `-L`.
    pub label: Option<String>,
    /// `-M`.
    pub last_mounted: Option<String>,
    /// `-U`: a UUID, `null`/`clear`, `random`, `time`.
    pub uuid: Option<String>,
    /// `-r`: revision (0 or 1).
    pub revision: Option<u32>,
    /// `-E` settings.
    pub extended: Extended,
    /// Filesystem size in bytes (from the device, or the SIZE argument).
    pub size_bytes: u64,
    /// Logical sector size of the device.
    pub sector_size: u32,
    /// Creation time (seconds since the epoch).
    pub now: i64,
    /// The UUID and hash seed used when `uuid` and `-E hash_seed=` do not
    /// give them (`None`: all zeros, which no filesystem should carry).
    pub random_uuids: Option<([u8; 16], [u8; 16])>,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        MkfsOptions {
            fs_type: None,
            usage_types: None,
            block_size: None,
            cluster_size: None,
            inode_ratio: None,
            inode_size: None,
            num_inodes: None,
            reserved_ratio: None,
            blocks_per_group: None,
            flex_bg_size: None,
            features: Vec::new(),
            journal_size_mib: None,
            journal_fc_size_kib: None,
            errors: None,
            creator_os: None,
            label: None,
            last_mounted: None,
            uuid: None,
            revision: None,
            extended: Extended::default(),
            size_bytes: 0,
            sector_size: 512,
            now,
            random_uuids: Some((
                *uuid::Uuid::new_v4().as_bytes(),
                *uuid::Uuid::new_v4().as_bytes(),
            )),
        }
    }
}

impl MkfsOptions {
    /// Options that make the same filesystem, byte for byte, on every run
    /// with the same `epoch`: the creation time is `epoch`, and the UUID
    /// and hash seed follow from it ([`reproducible_ids`]).
    pub fn reproducible(epoch: i64) -> Self {
        MkfsOptions {
            now: epoch,
            random_uuids: Some(reproducible_ids(epoch)),
            ..MkfsOptions::default()
        }
    }
}

/// `-E` extended options.
#[derive(Debug, Clone, Default)]
pub struct Extended {
    /// RAID stride in blocks.
    pub stride: Option<u32>,
    /// RAID stripe width in blocks.
    pub stripe_width: Option<u32>,
    /// Do not zero inode tables.
    pub lazy_itable_init: Option<bool>,
    /// Do not zero the journal.
    pub lazy_journal_init: Option<bool>,
    /// Discard the device first (default on).
    pub discard: Option<bool>,
    /// Owner of the root directory.
    pub root_owner: Option<(u32, u32)>,
    /// Directory hash seed (a UUID).
    pub hash_seed: Option<[u8; 16]>,
    /// sparse_super2 backups: 0, 1 or 2.
    pub num_backup_sb: Option<u32>,
    /// Put all metadata at the start of the device.
    pub packed_meta_blocks: bool,
    /// Set the test_fs flag.
    pub test_fs: bool,
    /// Reserved GDT blocks for resize up to this many blocks.
    pub resize: Option<u64>,
    /// Orphan file size in bytes.
    pub orphan_file_size: Option<u64>,
    /// Assume the device reads back zeros.
    pub assume_storage_prezeroed: bool,
    /// Filename encoding for casefolded directories (`utf8`, `utf8-12.1`);
    /// setting it turns on the casefold feature, as with mke2fs.
    pub encoding: Option<String>,
    /// Encoding flags: `strict` or `nostrict`, joined with `-`.
    pub encoding_flags: Option<String>,
    /// Quota types for the quota feature (`usrquota:grpquota:prjquota`);
    /// default user and group.
    pub quota_types: Option<String>,
    /// `-d`: the owner every copied file gets, whatever the source's
    /// (`uid=`, `gid=`): images built without root.
    pub populate_uid: Option<u32>,
    /// As `populate_uid`, for the group.
    pub populate_gid: Option<u32>,
    /// `-d`: leave extended attributes out (`no_copy_xattrs`, as mke2fs).
    pub no_copy_xattrs: bool,
}

/// The resolved numbers the layout is built from.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub features: Features,
    pub log_block_size: u32,
    pub log_cluster_size: u32,
    pub blocks_count: u64,
    pub r_blocks_count: u64,
    pub blocks_per_group: Option<u32>,
    pub clusters_per_group: Option<u32>,
    pub inodes_count: u64,
    pub inode_size: u16,
    pub rev_level: u32,
    pub log_groups_per_flex: u8,
    pub backup_bgs: [u32; 2],
    pub reserved_gdt_blocks: Option<u32>,
    pub raid_stride: u32,
    pub raid_stripe_width: u32,
    pub errors: u16,
    pub default_mount_opts: u32,
    pub creator_os: u32,
    pub s_flags: u32,
    pub now: i64,
    pub uuid: [u8; 16],
    pub hash_seed: [u8; 16],
    pub label: Vec<u8>,
    pub last_mounted: Vec<u8>,
    /// Journal blocks wanted: `None` = no journal, `Some(0)` = default;
    /// after layout, the whole journal (fast-commit area included).
    pub journal_blocks: Option<u64>,
    /// `-J fast_commit_size=` in blocks (rounded down), when given.
    pub journal_fc_request: Option<u64>,
    /// Blocks of the journal's fast-commit area (0 without fast_commit).
    pub journal_fc_blocks: u64,
    pub root_owner: (u32, u32),
    pub lazy_itable_init: bool,
    pub lazy_journal_init: bool,
    pub discard: bool,
    pub packed_meta_blocks: bool,
    pub orphan_file_size: Option<u64>,
    pub fs_type: String,
    pub usage_types: Vec<String>,
    /// What mke2fs said on the way (warnings, and what it asked).
    pub notices: Vec<Notice>,
    pub assume_prezeroed: bool,
    /// `s_encoding` and `s_encoding_flags` (casefold).
    pub encoding: (u16, u16),
    /// Quota files to make with the quota feature (`quota::USR` ...).
    pub quota_types: u8,
}

/// The stock mke2fs.conf of e2fsprogs 1.47, as data.
struct Profile {
    name: &'static str,
    features: &'static str,
    blocksize: Option<i32>,
    inode_ratio: Option<u32>,
    inode_size: Option<u16>,
}

const PROFILE: &[Profile] = &[
    Profile {
        name: "ext2",
        features: "",
        blocksize: None,
        inode_ratio: None,
        inode_size: None,
    },
    Profile {
        name: "ext3",
        features: "has_journal",
        blocksize: None,
        inode_ratio: None,
        inode_size: None,
    },
    Profile {
        name: "ext4",
        features: "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize",
        blocksize: None,
        inode_ratio: None,
        inode_size: None,
    },
    Profile {
        name: "small",
        features: "",
        blocksize: Some(1024),
        inode_ratio: Some(4096),
        inode_size: None,
    },
    Profile {
        name: "floppy",
        features: "",
        blocksize: Some(1024),
        inode_ratio: Some(8192),
        inode_size: None,
    },
    Profile {
        name: "big",
        features: "",
        blocksize: None,
        inode_ratio: Some(32768),
        inode_size: None,
    },
    Profile {
        name: "huge",
        features: "",
        blocksize: None,
        inode_ratio: Some(65536),
        inode_size: None,
    },
    Profile {
        name: "news",
        features: "",
        blocksize: None,
        inode_ratio: Some(4096),
        inode_size: None,
    },
    Profile {
        name: "largefile",
        features: "",
        blocksize: Some(-1),
        inode_ratio: Some(1048576),
        inode_size: None,
    },
    Profile {
        name: "largefile4",
        features: "",
        blocksize: Some(-1),
        inode_ratio: Some(4194304),
        inode_size: None,
    },
    Profile {
        name: "hurd",
        features: "",
        blocksize: Some(4096),
        inode_ratio: None,
        inode_size: Some(128),
    },
];
const BASE_FEATURES: &str = "sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr";
const DEFAULT_BLOCKSIZE: i32 = 4096;
const DEFAULT_INODE_SIZE: u16 = 256;
const DEFAULT_INODE_RATIO: u32 = 16384;
const PAGE_SIZE: u32 = 4096;
/// `EXT2_LABEL_LEN`: the superblock's volume name field.
const LABEL_LEN: usize = 16;

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

fn profile(name: &str) -> Option<&'static Profile> {
    PROFILE.iter().find(|p| p.name == name)
}

fn log2(v: u64) -> u32 {
    63 - v.max(1).leading_zeros()
}

impl MkfsOptions {
    /// Resolves the options as mke2fs's `PRS` does, telling `notices`
    /// what mke2fs would say on the way, in its order.
    pub(crate) fn resolve(&self, notices: &mut Notices<'_>) -> Result<Params> {
        // mke2fs warns about these while it reads its arguments.
        if let Some(b) = self.block_size.filter(|&b| b > 4096) {
            notices.say(Notice::BlockSizeUnusual(b))?;
        }
        if let Some(l) = self.label.as_deref().filter(|l| l.len() > LABEL_LEN) {
            let cut = String::from_utf8_lossy(&l.as_bytes()[..LABEL_LEN]).into_owned();
            notices.say(Notice::LabelTruncated(cut))?;
        }
        let hurd = self
            .creator_os
            .as_deref()
            .is_some_and(|o| o.eq_ignore_ascii_case("hurd") || o.eq_ignore_ascii_case("gnu"));
        let fs_type =
            self.fs_type.clone().unwrap_or_else(
                || {
                    if hurd {
                        "ext2".into()
                    } else {
                        "ext4".into()
                    }
                },
            );
        // mke2fs takes any type its profile defines (and ext2, which the
        // stock one does not); another stops it unless forced, and then
        // only the defaults apply.
        if profile(&fs_type).is_none() {
            notices.say(Notice::UndefinedFsType(fs_type.clone()))?;
        }
        // Sizes are in 1 KiB units until the block size is known.
        // mke2fs takes any -b within 1 KiB..64 KiB and uses the power of
        // two at or below it.
        let req_block_size = match self.block_size {
            Some(b) if !(1024..=65536).contains(&b) => {
                return Err(bad(format!("invalid block size - {b}")));
            }
            Some(b) => Some(1024u32 << log2(u64::from(b >> 10))),
            None => None,
        };
        let size_units: u64 = u64::from(req_block_size.unwrap_or(1024));
        let mut fs_blocks = self.size_bytes / size_units;
        let meg = (1024 * 1024) / size_units;
        let size_type = if fs_blocks < 3 * meg {
            "floppy"
        } else if fs_blocks < 512 * meg {
            "small"
        } else if fs_blocks < 4 * 1024 * 1024 * meg {
            "default"
        } else if fs_blocks < 16 * 1024 * 1024 * meg {
            "big"
        } else {
            "huge"
        };
        let usage = self.usage_types.clone().unwrap_or_else(|| size_type.into());
        let mut types = vec![fs_type.clone()];
        for t in usage.split(',').filter(|t| !t.is_empty()) {
            if profile(t).is_some() && !matches!(t, "ext2" | "ext3" | "ext4") {
                types.push(t.to_string());
            } else if t != "default" {
                // mke2fs warns and goes on without it.
                notices.say(Notice::UnknownUsageType(t.to_string()))?;
            }
        }
        if hurd {
            types.push("hurd".into());
        }
        // The matching profiles; the last one that sets a value wins.
        let profiles: Vec<&Profile> = types.iter().filter_map(|t| profile(t)).collect();

        let mut features = Features::default();
        let rev = self.revision.unwrap_or(1);
        if rev > 1 {
            return Err(bad(format!("bad revision level - {rev}")));
        }
        if rev >= 1 {
            features
                .edit(BASE_FEATURES)
                .map_err(|e| bad(e.to_string()))?;
            for t in &types {
                if let Some(p) = profile(t) {
                    if !p.features.is_empty() {
                        features.edit(p.features).map_err(|e| bad(e.to_string()))?;
                    }
                }
            }
        }
        if hurd {
            features.incompat.remove(Incompat::FILETYPE);
            features
                .ro_compat
                .remove(RoCompat::HUGE_FILE | RoCompat::METADATA_CSUM);
            features
                .incompat
                .remove(Incompat::EA_INODE | Incompat::CASEFOLD);
        }
        let default_orphan = features.compat.contains(Compat::ORPHAN_FILE);
        let default_csum_seed = features.incompat.contains(Incompat::CSUM_SEED);
        for f in &self.features {
            features.edit(f).map_err(|e| bad(e.to_string()))?;
        }
        if self.journal_size_mib.is_some() {
            if rev == 0 {
                return Err(bad("Journals not supported with revision 0 filesystems"));
            }
            features.compat.insert(Compat::HAS_JOURNAL);
        }
        if default_orphan && !features.compat.contains(Compat::HAS_JOURNAL) {
            features.compat.remove(Compat::ORPHAN_FILE);
        }
        if default_csum_seed && !features.ro_compat.contains(RoCompat::METADATA_CSUM) {
            features.incompat.remove(Incompat::CSUM_SEED);
        }
        if rev == 0
            && (features.compat.bits() | features.incompat.bits() | features.ro_compat.bits()) != 0
        {
            return Err(bad(
                "Filesystem features not supported with revision 0 filesystems",
            ));
        }

        // Block size.
        let mut blocksize: u32;
        if let Some(b) = req_block_size {
            blocksize = b;
            if b < self.sector_size {
                return Err(bad("while setting blocksize; too small for device"));
            }
        } else {
            let mut use_bsize = profiles
                .iter()
                .rev()
                .find_map(|p| p.blocksize)
                .unwrap_or(DEFAULT_BLOCKSIZE);
            if use_bsize == -1 {
                use_bsize = PAGE_SIZE as i32;
            }
            if self.sector_size != 0 && (use_bsize as u32) < self.sector_size {
                use_bsize = self.sector_size as i32;
            }
            blocksize = use_bsize as u32;
            fs_blocks /= u64::from(blocksize / 1024);
        }
        let log_block_size = log2(u64::from(blocksize >> 10));
        blocksize = 1024 << log_block_size;

        const MAX_32: u64 = (1 << 32) - 1;
        if fs_blocks > MAX_32 && features.incompat.contains(Incompat::BIT64) {
            features.compat.remove(Compat::RESIZE_INODE);
        }
        if fs_blocks > MAX_32 && !features.incompat.contains(Incompat::BIT64) {
            return Err(bad(format!(
                "Size of device ({fs_blocks:#x} blocks) too big to be expressed in 32 bits \
                 using a blocksize of {blocksize}."
            )));
        }
        if fs_blocks > (1u64 << (log_block_size + 10 + 3 + 32)) - 1 {
            return Err(bad(format!(
                "Size of device ({fs_blocks:#x} blocks) too big to create a filesystem \
                 using a blocksize of {blocksize}."
            )));
        }
        if features.incompat.contains(Incompat::BIT64)
            && !features.incompat.contains(Incompat::EXTENTS)
        {
            return Err(bad(
                "Extents MUST be enabled for a 64-bit filesystem.  Pass -O extents to rectify.",
            ));
        }
        let reserved_ratio = self.reserved_ratio.unwrap_or(5.0);
        if !(0.0..=50.0).contains(&reserved_ratio) {
            return Err(bad(format!(
                "invalid reserved blocks percent - {reserved_ratio}"
            )));
        }

        let encoding = resolve_encoding(&mut features, &self.extended)?;
        // -E quotatype= starts from no types; asking for project quota
        // turns the project feature on, and the feature always brings its
        // quota file.
        let mut quota_types = super::quota::USR | super::quota::GRP;
        if let Some(q) = &self.extended.quota_types {
            quota_types = super::quota::parse_types(q).map_err(|w| {
                bad(format!(
                    "Failed to parse quota type at {w}\nBad option(s) specified: quotatype"
                ))
            })?;
        }
        if quota_types & super::quota::PRJ != 0 {
            features.ro_compat.insert(RoCompat::PROJECT);
        }
        if features.ro_compat.contains(RoCompat::PROJECT) {
            quota_types |= super::quota::PRJ;
        }
        let bigalloc = features.ro_compat.contains(RoCompat::BIGALLOC);
        if let Some(cs) = self.cluster_size {
            // mke2fs's -C check: above 1 KiB, at most 512 MiB.
            if cs <= 1024 || cs > 1 << 29 {
                return Err(bad(format!("invalid cluster size - {cs}")));
            }
        }
        let mut log_cluster_size = log_block_size;
        if bigalloc {
            // The stock profile has no cluster_size: 16 blocks. Any size
            // is taken down to a power of two, as for -b.
            let cs = self.cluster_size.unwrap_or(blocksize * 16);
            log_cluster_size = log2(u64::from(cs >> 10));
            if log_cluster_size < log_block_size {
                return Err(bad(
                    "The cluster size may not be smaller than the block size.",
                ));
            }
        } else if self.cluster_size.is_some() {
            return Err(bad(
                "specifying a cluster size requires the bigalloc feature",
            ));
        }
        let cluster_bytes = 1024u32 << log_cluster_size;
        // The kernel maps a block into one page: past the page size it
        // cannot mount the filesystem on this system. mke2fs asks.
        // A page larger than 4 GiB would exceed every block size anyway.
        let page_size = num::sat_u32(rustix::param::page_size());
        if blocksize > page_size {
            notices.say(Notice::BlockSizeAbovePage {
                block_size: blocksize,
                page_size,
            })?;
        }

        let mut inode_ratio = match self.inode_ratio {
            Some(r) => {
                if !(1024..=65536 * 1024).contains(&r) {
                    return Err(bad(format!(
                        "invalid inode ratio {r} (min 1024/max 67108864)"
                    )));
                }
                r
            }
            None => {
                let r = profiles
                    .iter()
                    .rev()
                    .find_map(|p| p.inode_ratio)
                    .unwrap_or(DEFAULT_INODE_RATIO);
                r.max(blocksize).max(cluster_bytes)
            }
        };
        if self.inode_ratio.is_none() {
            inode_ratio = inode_ratio.max(blocksize);
        }

        // Extended options.
        let ext = &self.extended;
        let mut backup_bgs = [0u32; 2];
        let num_backups = ext.num_backup_sb.unwrap_or(2);
        if num_backups > 2 {
            return Err(bad(format!(
                "Invalid # of backup superblocks: {num_backups}"
            )));
        }
        let stride = ext.stride.unwrap_or(0);
        let stripe_width = ext.stripe_width.unwrap_or(0);
        if stride != 0 && stripe_width % stride != 0 {
            notices.say(Notice::StripeNotMultiple {
                stride,
                stripe_width,
            })?;
        }
        // -g is judged as mke2fs parses it, before anything divides by it.
        if let Some(g) = self.blocks_per_group {
            if g % 8 != 0 {
                return Err(bad("blocks per group must be multiple of 8"));
            }
            if g < 256 || g > 8 * blocksize {
                return Err(bad("blocks per group count out of range"));
            }
        }
        let mut reserved_gdt_blocks = None;
        if let Some(resize) = ext.resize {
            if resize <= fs_blocks {
                return Err(bad(
                    "The resize maximum must be greater than the filesystem size.",
                ));
            }
            let bpg = u64::from(self.blocks_per_group.unwrap_or(blocksize * 8));
            let gdpb = u64::from(blocksize)
                / if features.incompat.contains(Incompat::BIT64) {
                    64
                } else {
                    32
                };
            let groups = fs_blocks.div_ceil(bpg);
            let desc_blocks = groups.div_ceil(gdpb);
            let rsv_groups = resize.div_ceil(bpg);
            let rsv = rsv_groups.div_ceil(gdpb).saturating_sub(desc_blocks);
            let rsv = rsv.min(u64::from(blocksize / 4));
            if rsv > 0 {
                features.compat.insert(Compat::RESIZE_INODE);
                reserved_gdt_blocks = Some(num::sat_u32(rsv)); // at most blocksize / 4
            }
        }
        if features.ro_compat.contains(RoCompat::METADATA_CSUM) {
            features.ro_compat.remove(RoCompat::GDT_CSUM);
        }
        if bigalloc && !features.incompat.contains(Incompat::EXTENTS) {
            return Err(bad(
                "Can't support bigalloc feature without extents feature",
            ));
        }
        if features.incompat.contains(Incompat::META_BG)
            && features.compat.contains(Compat::RESIZE_INODE)
        {
            return Err(bad(
                "The resize_inode and meta_bg features are not compatible.\n\
                 They can not be both enabled simultaneously.",
            ));
        }
        if bigalloc && cluster_bytes > 16 * blocksize {
            notices.say(Notice::LargeCluster)?;
        }
        if features.compat.contains(Compat::RESIZE_INODE)
            && !features.ro_compat.contains(RoCompat::SPARSE_SUPER)
        {
            return Err(bad(
                "reserved online resize blocks not supported on non-sparse filesystem",
            ));
        }
        let (blocks_per_group, clusters_per_group) = if bigalloc {
            (None, self.blocks_per_group)
        } else {
            (self.blocks_per_group, None)
        };

        let mut inode_size = match self.inode_size {
            Some(s) => s,
            None => profiles
                .iter()
                .rev()
                .find_map(|p| p.inode_size)
                .unwrap_or(DEFAULT_INODE_SIZE),
        };
        if features.ro_compat.contains(RoCompat::PROJECT) && inode_size < 256 {
            if self.inode_size == Some(128) {
                return Err(bad("128 byte inodes are too small for project quota"));
            }
            inode_size = 256;
        }
        let mut log_groups_per_flex = 0u8;
        let flex = match self.flex_bg_size {
            Some(f) => {
                if f == 0 || !f.is_power_of_two() {
                    return Err(bad("flex_bg size must be a power of 2"));
                }
                if !features.incompat.contains(Incompat::FLEX_BG) {
                    return Err(bad(
                        "Flex_bg feature not enabled, so flex_bg size may not be specified",
                    ));
                }
                Some(f)
            }
            None => features.incompat.contains(Incompat::FLEX_BG).then_some(16),
        };
        if let Some(f) = flex {
            // A log2 of a u64 is below 64.
            log_groups_per_flex = num::lo8(log2(u64::from(f)));
        }
        if rev >= 1
            && (inode_size < 128
                || u32::from(inode_size) > blocksize
                || !inode_size.is_power_of_two())
        {
            return Err(bad(format!(
                "invalid inode size {inode_size} (min 128/max {blocksize})"
            )));
        }
        if features.incompat.contains(Incompat::INLINE_DATA) && inode_size == 128 {
            return Err(bad(
                "128 byte inodes are too small for inline data; specify larger size",
            ));
        }
        // The stock profile's warn_y2038_dates is off only for the Hurd.
        if inode_size == 128 && !types.iter().any(|t| t == "hurd") {
            notices.say(Notice::SmallInodes)?;
        }
        let blocks_param = fs_blocks;
        let num_inodes = match self.num_inodes {
            Some(n) if n > MAX_32 => {
                return Err(bad(format!("too many inodes ({n}), specify < 2^32 inodes")));
            }
            Some(n) => n,
            None => {
                let n = blocks_param * u64::from(blocksize) / u64::from(inode_ratio);
                if n > MAX_32 {
                    if features.incompat.contains(Incompat::BIT64) {
                        MAX_32
                    } else {
                        return Err(bad(format!("too many inodes ({n}), raise inode ratio?")));
                    }
                } else {
                    n
                }
            }
        };
        let isz = if rev >= 1 { u64::from(inode_size) } else { 128 };
        if num_inodes * isz >= blocks_param * u64::from(blocksize) {
            return Err(bad(format!(
                "inode_size ({isz}) * inodes_count ({num_inodes}) too big for a\n\t\
                 filesystem with {blocks_param} blocks, specify higher inode_ratio (-i)\n\t\
                 or lower inode count (-N).\n"
            )));
        }
        #[allow(clippy::cast_possible_truncation)] // a percentage (checked <= 50) of a u64 count
        let r_blocks_count = (reserved_ratio * blocks_param as f64 / 100.0) as u64;
        if features.compat.contains(Compat::SPARSE_SUPER2) {
            if num_backups >= 1 {
                backup_bgs[0] = 1;
            }
            if num_backups >= 2 {
                backup_bgs[1] = u32::MAX;
            }
        }
        if features.incompat.contains(Incompat::CSUM_SEED)
            && !features.ro_compat.contains(RoCompat::METADATA_CSUM)
        {
            return Err(bad(
                "The metadata_csum_seed feature requires the metadata_csum feature.",
            ));
        }
        if features.compat.contains(Compat::ORPHAN_FILE)
            && !features.compat.contains(Compat::HAS_JOURNAL)
        {
            return Err(bad("cannot set orphan_file feature without a journal."));
        }
        let errors = match self.errors.as_deref() {
            None => 0,
            Some("continue") => 1,
            Some("remount-ro") => 2,
            Some("panic") => 3,
            Some(e) => return Err(bad(format!("bad error behavior - {e}"))),
        };
        let creator_os = match self.creator_os.as_deref().map(str::to_ascii_lowercase) {
            None => 0,
            Some(o) if o == "linux" => 0,
            Some(o) if o == "hurd" || o == "gnu" => 1,
            Some(o) if o == "masix" => 2,
            Some(o) if o == "freebsd" => 3,
            Some(o) if o == "lites" => 4,
            Some(o) => match o.parse::<u32>() {
                Ok(n) if n <= 4 => n,
                _ => return Err(bad(format!("unknown os - {o}"))),
            },
        };
        if creator_os == 1 {
            features.incompat.remove(Incompat::FILETYPE);
        }
        let (rand_uuid, rand_seed) = self.random_uuids.unwrap_or(([0; 16], [0; 16]));
        let uuid = match self.uuid.as_deref() {
            None | Some("random") | Some("time") => rand_uuid,
            Some(u) if u.eq_ignore_ascii_case("null") || u.eq_ignore_ascii_case("clear") => [0; 16],
            Some(u) => parse_uuid(u).ok_or_else(|| bad(format!("could not parse UUID: {u}")))?,
        };
        let hash_seed = ext.hash_seed.filter(|s| *s != [0; 16]).unwrap_or(rand_seed);
        let journal_blocks = if features.compat.contains(Compat::HAS_JOURNAL) {
            match self.journal_size_mib {
                Some(m) if m > 0 => Some(u64::from(m) * 1024 / u64::from(blocksize / 1024)),
                _ => Some(0),
            }
        } else {
            None
        };
        let mut label = self.label.clone().unwrap_or_default().into_bytes();
        label.truncate(LABEL_LEN);
        let mut last_mounted = self.last_mounted.clone().unwrap_or_default().into_bytes();
        last_mounted.truncate(64);
        Ok(Params {
            features,
            log_block_size,
            log_cluster_size,
            blocks_count: blocks_param,
            r_blocks_count,
            blocks_per_group,
            clusters_per_group,
            inodes_count: num_inodes,
            inode_size,
            rev_level: rev,
            log_groups_per_flex,
            backup_bgs,
            reserved_gdt_blocks,
            raid_stride: stride,
            raid_stripe_width: stripe_width,
            errors,
            default_mount_opts: if rev >= 1 { 0x0004 | 0x0008 } else { 0 },
            creator_os,
            s_flags: ext4r_format::superblock::FLAGS_SIGNED_HASH
                | if ext.test_fs {
                    ext4r_format::superblock::FLAGS_TEST_FS
                } else {
                    0
                },
            now: self.now,
            uuid,
            hash_seed,
            label,
            last_mounted,
            journal_blocks,
            journal_fc_request: self
                .journal_fc_size_kib
                .map(|k| u64::from(k) * 1024 / u64::from(blocksize)),
            journal_fc_blocks: 0,
            root_owner: ext.root_owner.unwrap_or((0, 0)),
            lazy_itable_init: ext.lazy_itable_init.unwrap_or(true),
            lazy_journal_init: ext.lazy_journal_init.unwrap_or(false),
            discard: ext.discard.unwrap_or(true),
            packed_meta_blocks: ext.packed_meta_blocks,
            orphan_file_size: ext.orphan_file_size,
            fs_type,
            usage_types: types,
            notices: Vec::new(),
            assume_prezeroed: ext.assume_storage_prezeroed,
            encoding,
            quota_types,
        })
    }
}

/// `EXT4_ENC_UTF8_12_1`, the only encoding there is.
const ENC_UTF8_12_1: u16 = 1;
/// `EXT4_ENC_STRICT_MODE_FL`: reject names that are not valid UTF-8.
const ENC_STRICT_MODE_FL: u16 = 1;

/// The casefold encoding fields, as mke2fs settles them: `-E encoding=`
/// turns the feature on; with the feature the encoding defaults to utf8
/// (the stock profile) with its default flags (none), and
/// `-E encoding_flags=` edits those; flags without the feature are refused.
fn resolve_encoding(features: &mut Features, ext: &Extended) -> Result<(u16, u16)> {
    if let Some(e) = &ext.encoding {
        if !matches!(e.as_str(), "utf8" | "utf8-12.1") {
            return Err(bad(format!("Invalid encoding: {e}")));
        }
        features.incompat.insert(Incompat::CASEFOLD);
    }
    if !features.incompat.contains(Incompat::CASEFOLD) {
        if ext.encoding_flags.is_some() {
            return Err(bad(
                "error: An encoding must be explicitly specified when passing encoding-flags",
            ));
        }
        return Ok((0, 0));
    }
    let mut flags = 0u16;
    if let Some(list) = &ext.encoding_flags {
        for f in list.split('-').filter(|f| !f.is_empty()) {
            match f {
                "strict" => flags |= ENC_STRICT_MODE_FL,
                "nostrict" => flags &= !ENC_STRICT_MODE_FL,
                _ => return Err(bad(format!("error: Invalid encoding flag: {list}"))),
            }
        }
    }
    Ok((ENC_UTF8_12_1, flags))
}

/// Parses `01234567-89ab-cdef-0123-456789abcdef`, the one form libuuid's
/// The filesystem UUID and directory hash seed a reproducible build uses
/// for `SOURCE_DATE_EPOCH` = `epoch`: name-based (version 5) UUIDs of the
/// epoch, one per purpose, so that two builds with the same epoch agree on
/// any machine and a build with another epoch differs. Give `-U` to tell
/// images of the same epoch apart.
pub fn reproducible_ids(epoch: i64) -> ([u8; 16], [u8; 16]) {
    // A namespace of our own: the v5 UUID of "ext4r" in the URL namespace.
    let ns = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, b"ext4r");
    let id = |what: &str| {
        *uuid::Uuid::new_v5(&ns, format!("SOURCE_DATE_EPOCH={epoch}:{what}").as_bytes()).as_bytes()
    };
    (id("uuid"), id("hash_seed"))
}

/// `uuid_parse` (mke2fs `-U`, `-E hash_seed=`, tune2fs `-U`) accepts: 36
/// characters with the dashes in place. The `uuid` crate also takes the
/// simple, braced and URN forms, which e2fsprogs refuses; only the
/// hyphenated one is 36 characters long.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    if s.len() != 36 {
        return None;
    }
    uuid::Uuid::try_parse(s).ok().map(|u| *u.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resolves as `mke2fs -F` would: every question answered yes.
    fn resolve(o: &MkfsOptions) -> Result<Params> {
        o.resolve(&mut Notices::new(&mut |_| true))
    }

    /// What resolving `o` says, with every question answered no.
    fn said(o: &MkfsOptions) -> (Vec<Notice>, bool) {
        let mut no = |_: &Notice| false;
        let mut n = Notices::new(&mut no);
        let ok = o.resolve(&mut n).is_ok();
        (n.said, ok)
    }

    #[test]
    fn notices_in_mke2fs_order() {
        let mut o = opts(64 << 20);
        o.label = Some("abcdefghijklmnopqrstuvwxyz".into());
        o.inode_size = Some(128);
        o.extended.stride = Some(3);
        o.extended.stripe_width = Some(8);
        let (n, ok) = said(&o);
        assert!(ok);
        assert_eq!(
            n,
            vec![
                Notice::LabelTruncated("abcdefghijklmnop".into()),
                Notice::StripeNotMultiple {
                    stride: 3,
                    stripe_width: 8
                },
                Notice::SmallInodes,
            ]
        );
        assert_eq!(resolve(&o).unwrap().label, b"abcdefghijklmnop");
        // The Hurd's profile does not warn about 128-byte inodes.
        let mut o = opts(64 << 20);
        o.creator_os = Some("hurd".into());
        assert_eq!(said(&o), (vec![], true));
        // 64 KiB blocks: a warning at -b, then the question, and a no ends it.
        let mut o = opts(256 << 20);
        o.block_size = Some(65536);
        let (n, ok) = said(&o);
        assert!(!ok);
        assert_eq!(n[0], Notice::BlockSizeUnusual(65536));
        assert!(matches!(
            n[1],
            Notice::BlockSizeAbovePage {
                block_size: 65536,
                ..
            }
        ));
        assert!(resolve(&o).is_ok());
        // An undefined -t stops unless forced; forced, only the defaults apply.
        let mut o = opts(64 << 20);
        o.fs_type = Some("foo".into());
        assert_eq!(
            said(&o),
            (vec![Notice::UndefinedFsType("foo".into())], false)
        );
        let p = resolve(&o).unwrap();
        assert!(!p.features.compat.contains(Compat::HAS_JOURNAL));
        // Clusters of more than 16 blocks are experimental.
        let mut o = opts(256 << 20);
        o.features.push("bigalloc".into());
        o.cluster_size = Some(16 << 10);
        assert_eq!(said(&o), (vec![], true));
        o.cluster_size = Some(64 << 10);
        assert_eq!(said(&o), (vec![Notice::LargeCluster], true));
    }

    fn opts(size: u64) -> MkfsOptions {
        MkfsOptions {
            size_bytes: size,
            sector_size: 512,
            ..MkfsOptions::default()
        }
    }

    #[test]
    fn reproducible_ids_follow_the_epoch() {
        let a = reproducible_ids(1_700_000_000);
        assert_eq!(a, reproducible_ids(1_700_000_000));
        assert_ne!(a.0, a.1);
        assert_ne!(a, reproducible_ids(1_700_000_001));
        // A version 5 UUID, RFC 4122 variant.
        assert_eq!(a.0[6] >> 4, 5);
        assert_eq!(a.0[8] >> 6, 2);
    }

    #[test]
    fn small_images_get_1k_blocks_and_ratio_4096() {
        let p = resolve(&opts(64 << 20)).unwrap();
        assert_eq!(p.log_block_size, 0);
        assert_eq!(p.blocks_count, 65536);
        assert_eq!(p.inodes_count, 16384);
    }

    #[test]
    fn default_ext4_features() {
        let p = resolve(&opts(1 << 30)).unwrap();
        let names = p.features.names().join(" ");
        for f in [
            "has_journal",
            "extent",
            "64bit",
            "flex_bg",
            "metadata_csum",
            "resize_inode",
        ] {
            assert!(names.contains(f), "{names}");
        }
        assert_eq!(p.log_groups_per_flex, 4);
    }

    #[test]
    fn uuid_parsing() {
        assert_eq!(
            parse_uuid("01234567-89ab-cdef-0123-456789abcdef").unwrap()[..2],
            [1, 0x23]
        );
        assert!(parse_uuid("xyz").is_none());
        // Dashes anywhere but their places, the simple, braced and URN
        // forms: refused, as libuuid refuses them.
        for bad in [
            "0123456789ab-cdef-0123-456789abcdef",
            "01234567-89abc-def0-123-456789abcdef",
            "0123456789abcdef0123456789abcdef",
            "{01234567-89ab-cdef-0123-456789abcdef}",
            "urn:uuid:01234567-89ab-cdef-0123-456789abcdef",
            "0123456789abcdef0123456789abcdef----",
        ] {
            assert!(parse_uuid(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn bigalloc_cluster_sizes_as_mke2fs_takes_them() {
        let mut o = opts(1 << 30);
        o.features.push("bigalloc".into());
        assert_eq!(resolve(&o).unwrap().log_cluster_size, 6); // 16 blocks
        o.cluster_size = Some(100_000);
        assert_eq!(resolve(&o).unwrap().log_cluster_size, 6); // down to 64K
        o.cluster_size = Some(2048);
        assert!(resolve(&o).is_err()); // below the block size
        o.cluster_size = Some(1024);
        assert!(resolve(&o).is_err());
        o.features.push("^bigalloc".into());
        o.cluster_size = Some(65536);
        assert!(resolve(&o).is_err()); // -C needs bigalloc
    }

    #[test]
    fn conflicting_features_are_refused() {
        let mut o = opts(1 << 30);
        o.features.push("meta_bg".into());
        assert!(resolve(&o).is_err());
        o.features.push("^resize_inode".into());
        assert!(resolve(&o).is_ok());
    }
}
