//! Changing a filesystem's tunable parameters, as tune2fs does: the
//! superblock fields (label, UUID, mount counts, check interval, reserved
//! blocks, error behaviour, default mount options, RAID hints, hash
//! algorithm, flags) and the feature toggles that are a matter of
//! superblock bits.
//!
//! [`tune`] follows tune2fs 1.47 (misc/tune2fs.c) step by step: the same
//! order of the changes, the same messages, the same refusals, the same
//! bytes written (see [`write`] for what goes to the backups). A failing
//! step writes nothing: changes are made on a copy of the superblock that
//! is flushed only at the end, as tune2fs exits before `ext2fs_close`.
//!
//! Checksum changes that tune2fs makes by rewriting metadata (turning
//! metadata_csum or uninit_bg on or off, a new UUID on a metadata_csum
//! filesystem without metadata_csum_seed, dir_index off under
//! metadata_csum) are made by `csum`, a group at a time. Adding or
//! removing the internal journal (`journal`) and quota files (`quota`)
//! change bitmaps, descriptors and inodes (`meta`), written before the
//! superblock. Changing the inode size (`inode_size`) moves file blocks
//! and writes larger inode tables before that commit.
//!
//! ```
//! use ext4r::device::MemDevice;
//! use ext4r::mkfs::{format, MkfsOptions};
//! use ext4r::tune::{tune, TuneEnv, TuneOptions};
//!
//! let dev = MemDevice::new(16 << 20);
//! let opts = MkfsOptions { size_bytes: 16 << 20, now: 1_700_000_000, ..Default::default() };
//! format(&dev, &opts, true).unwrap();
//! let mut t = TuneOptions::default();
//! t.label = Some(b"data".to_vec());
//! let dev: std::sync::Arc<dyn ext4r::device::BlockDevice> = std::sync::Arc::new(dev);
//! let out = tune(dev, &t, &mut TuneEnv::new("img", 1_700_000_100)).unwrap();
//! assert_eq!(out.status, 0);
//! assert!(out.wrote);
//! ```

mod csum;
mod dirblock;
mod extended;
mod features;
mod inode_size;
mod isize_fixed;
mod isize_move;
mod isize_place;
mod isize_table;
mod journal;
pub mod list;
mod new_uuid;
mod parse;
mod quota;

use crate::device::BlockDevice;
use crate::error::{Error, Result};
use crate::fs::{Filesystem, OpenOptions};
use crate::journal::{Journal, JournalLocation};
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::GroupDesc;
use ext4r_format::num;
use ext4r_format::superblock::{
    Superblock, STATE_ERROR, STATE_VALID, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE,
};
use ext4r_format::{BlockNr, InodeNr};
use ext4r_txn::mmp::{MmpBusy, MmpClaim, MmpOptions};
use std::fmt::Write as _;
use std::sync::Arc;

use extended::Late;
pub use journal::{parse_journal_opts, JournalRequest, JOURNAL_USAGE};
pub use list::list_super;
use new_uuid::uuid_seed;
pub use parse::parse_c_ulong;
use parse::{edit_mntopts, fmt_g, until_nul};
pub use quota::{parse_quota_opts, QuotaRequest, QUOTA_USAGE};

/// `-c`: a maximal mount count, or `random` (20 to 39, as tune2fs picks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxMounts {
    /// This count (`-1`: never check by count).
    Count(i32),
    /// A random count from 20 to 39.
    Random,
}

/// What to change; every field `None` (or false) leaves that part alone.
/// The parsing of the command line (numbers, suffixes, names) is the
/// caller's; the values here are tune2fs's after parsing.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TuneOptions {
    /// `-l`: list the superblock (after the changes above, before `-E
    /// stride`/`stripe_width`/`mount_opts`, as tune2fs orders them).
    pub list: bool,
    /// `-f` count.
    pub force: u32,
    /// `-c`.
    pub max_mount_count: Option<MaxMounts>,
    /// `-C`.
    pub mount_count: Option<u32>,
    /// `-e`: 1 continue, 2 remount-ro, 3 panic.
    pub errors: Option<u16>,
    /// `-g`: the group id (tune2fs keeps the low 16 bits).
    pub resgid: Option<u64>,
    /// `-i`: seconds.
    pub interval: Option<u64>,
    /// `-m`: percent.
    pub reserved_ratio: Option<f64>,
    /// `-r`: blocks.
    pub reserved_blocks: Option<u64>,
    /// `-T`: seconds since the epoch.
    pub last_check: Option<i64>,
    /// `-u`: the user id (low 16 bits kept).
    pub resuid: Option<u64>,
    /// `-L`.
    pub label: Option<Vec<u8>>,
    /// `-M`.
    pub last_mounted: Option<Vec<u8>>,
    /// `-o`: default mount options edit list.
    pub mount_opts: Option<String>,
    /// `-O`: feature edit list.
    pub features: Option<String>,
    /// `-E`: extended options.
    pub extended: Option<String>,
    /// `-U`: a UUID, `clear`/`null`, `random` or `time`.
    pub uuid: Option<String>,
    /// `-j` / `-J`: a journal to add.
    pub journal: Option<JournalRequest>,
    /// `-Q`: quota files to add or remove.
    pub quota: Option<QuotaRequest>,
    /// `-I`: the new inode size (larger only, as tune2fs; flex_bg too).
    pub inode_size: Option<u64>,
}

impl TuneOptions {
    /// Whether the options include a change that needs the filesystem
    /// unmounted: features, the UUID, the journal, quotas, the casefold
    /// encoding. The rest are superblock fields, which tune2fs also changes
    /// under a mounted filesystem.
    pub fn needs_unmounted(&self) -> bool {
        self.features.is_some()
            || self.uuid.is_some()
            || self.journal.is_some()
            || self.quota.is_some()
            || self.inode_size.is_some()
            || self
                .extended
                .as_deref()
                .is_some_and(|e| e.contains("encoding"))
    }

    /// Whether the options change anything (tune2fs opens read-write).
    pub fn writes(&self) -> bool {
        self.max_mount_count.is_some()
            || self.mount_count.is_some()
            || self.errors.is_some()
            || self.resgid.is_some()
            || self.interval.is_some()
            || self.reserved_ratio.is_some()
            || self.reserved_blocks.is_some()
            || self.last_check.is_some()
            || self.resuid.is_some()
            || self.label.is_some()
            || self.last_mounted.is_some()
            || self.mount_opts.is_some()
            || self.features.is_some()
            || self.extended.is_some()
            || self.uuid.is_some()
            || self.journal.is_some()
            || self.quota.is_some()
            || self.inode_size.is_some()
    }
}

/// The surroundings of a run: names, time, randomness, mount state.
pub struct TuneEnv<'a> {
    /// The device name as given (for messages).
    pub device_name: String,
    /// The time written to `s_wtime` (tune2fs: `E2FSPROGS_FAKE_TIME` or now).
    pub now: i64,
    /// Where the filesystem is mounted, if it is.
    pub mounted: Option<String>,
    /// The device given is the mounted block device itself, not an image
    /// file behind a loop device: the kernel's copy of the superblock lives
    /// in the same page cache, so a change to superblock fields reaches it
    /// (what tune2fs relies on for a mounted filesystem).
    pub mounted_device: bool,
    /// 16 random bytes per call (UUIDs, hash seeds, `-c random`).
    pub random: Box<dyn FnMut() -> [u8; 16] + 'a>,
    /// User names for `-l`.
    pub user_name: Box<dyn Fn(u32) -> Option<String> + 'a>,
    /// Group names for `-l`.
    pub group_name: Box<dyn Fn(u32) -> Option<String> + 'a>,
    /// The name messages begin with (the tool's, "tune.ext4r").
    pub program: String,
    /// Progress of the long rewrites (every group's metadata, the inode
    /// tables): (what, done, total), `done == total` at the end.
    pub progress: Box<dyn FnMut(&'static str, u64, u64) + 'a>,
    /// The waits of multiple-mount protection (`std::thread::sleep`; see
    /// `ext4r_txn::mmp`): a change to an `mmp` filesystem waits twice its
    /// check interval and a second, as tune2fs does.
    pub mmp_sleep: Box<dyn FnMut(std::time::Duration) + 'a>,
}

impl TuneEnv<'_> {
    /// An environment with OS randomness, no name lookups, not mounted.
    pub fn new(device_name: &str, now: i64) -> Self {
        TuneEnv {
            device_name: device_name.to_string(),
            now,
            mounted: None,
            mounted_device: false,
            random: Box::new(|| uuid::Uuid::new_v4().into_bytes()),
            user_name: Box::new(|_| None),
            group_name: Box::new(|_| None),
            program: "tune.ext4r".to_string(),
            progress: Box::new(|_, _, _| {}),
            mmp_sleep: Box::new(std::thread::sleep),
        }
    }
}

/// What a run printed and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// Text for standard output (tune2fs's messages and `-l`).
    pub out: String,
    /// Text for standard error.
    pub err: String,
    /// 0 done, 1 refused or failed (tune2fs's exit codes).
    pub status: u8,
    /// Whether anything was written.
    pub wrote: bool,
}

/// A refusal: the messages are in the outcome already.
struct Refused;

type Step = std::result::Result<(), Refused>;

struct Run<'e, 'a> {
    sb: Superblock,
    env: &'e mut TuneEnv<'a>,
    out: String,
    err: String,
    dirty: bool,
    /// The descriptor table must be rewritten (its checksums changed).
    descs: Option<Vec<u8>>,
    fsck_requested: bool,
    /// tune2fs's `enabling_casefold`: `-O casefold` turned it on in this run.
    enabling_casefold: bool,
    /// libext2fs's `EXT2_FLAG_MASTER_SB_ONLY`: leave the backups alone.
    master_only: bool,
    /// Metadata to rewrite for a checksum change (see [`csum`]).
    csum: csum::Plan,
    /// The filesystem had group descriptor checksums before this run.
    orig_group_csum: bool,
    /// Its checksum seed before this run.
    orig_seed: u32,
    /// Bitmaps, descriptors and inodes being changed (journal, quota).
    meta: Option<Box<crate::meta::Meta>>,
    /// The journal to add (`-O has_journal` asks for the default size).
    journal: JournalRequest,
    /// tune2fs's `Q_flag` and `quota_enable`.
    q_flag: bool,
    quota_enable: QuotaRequest,
}

/// As libext2fs's open for tune2fs: features outside what e2fsprogs
/// supports in the incompat word refuse any access, in the ro_compat word
/// any change (a writer that does not know a feature cannot keep its data
/// true); unknown compat features are left alone.
fn refuse_unsupported(sb: &Superblock, writes: bool) -> Result<()> {
    let beyond = sb
        .features()
        .outside(&ext4r_format::features::E2FSPROGS_SUPPORTED);
    let mut refused = beyond;
    refused.compat = Default::default();
    if !writes {
        refused.ro_compat = Default::default();
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(Error::Unsupported(refused.names().join(", ")))
}

/// Applies `opts` to the filesystem on `dev`, as `tune2fs` would.
///
/// # Errors
/// I/O errors and unreadable superblocks; refusals are not errors but an
/// [`Outcome`] with status 1 and tune2fs's message.
pub fn tune(
    dev: Arc<dyn BlockDevice>,
    opts: &TuneOptions,
    env: &mut TuneEnv<'_>,
) -> Result<Outcome> {
    let mut buf = [0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET)?;
    let sb = Superblock::parse(&buf).map_err(|e| Error::corrupt("superblock", e))?;
    sb.verify_checksum()
        .map_err(|e| Error::corrupt("superblock", e))?;
    sb.validate().map_err(|e| Error::corrupt("superblock", e))?;
    refuse_unsupported(&sb, opts.writes())?;
    let mut run = Run {
        sb,
        env,
        out: String::new(),
        err: String::new(),
        dirty: false,
        descs: None,
        fsck_requested: false,
        enabling_casefold: false,
        master_only: false,
        csum: csum::Plan::default(),
        orig_group_csum: false,
        orig_seed: 0,
        meta: None,
        journal: opts.journal.clone().unwrap_or_default(),
        q_flag: opts.quota.is_some(),
        quota_enable: opts.quota.unwrap_or_default(),
    };
    run.orig_seed = run.sb.csum_seed();
    run.orig_group_csum =
        run.sb.has_ro_compat(RoCompat::GDT_CSUM) || run.sb.has_ro_compat(RoCompat::METADATA_CSUM);
    if run.sb.has_incompat(Incompat::JOURNAL_DEV) {
        run.err.push_str("Cannot modify a journal device.\n");
        return Ok(run.finish(1, false));
    }
    if let Some(n) = opts.inode_size {
        if run.check_inode_size(n).is_err() {
            return Ok(run.finish(1, false));
        }
    }
    let writes = opts.writes();
    let mut mmp = None;
    if writes {
        // Every write would reach past a device shorter than the
        // filesystem (libext2fs's flush would grow an image file or fail
        // on a block device half way through the backups): refuse first.
        let bs = u64::from(run.sb.block_size().unwrap_or(1024));
        let device_blocks = dev.size() / bs;
        if device_blocks < run.sb.blocks_count() {
            let _ = writeln!(
                run.err,
                "The filesystem size (according to the superblock) is {} blocks\n\
                 The physical size of the device is {device_blocks} blocks\n\
                 Either the superblock or the partition table is likely to be corrupt!\n\
                 Nothing was changed; run e2fsck on {}.",
                run.sb.blocks_count(),
                run.env.device_name
            );
            return Ok(run.finish(1, false));
        }
        if let Some(mp) = run.env.mounted.clone() {
            if !run.env.mounted_device {
                let _ = writeln!(
                    run.err,
                    "{} is mounted on {mp} through a loop device; tune.ext4r changes it \
                     only unmounted, or through that device (the kernel keeps its copy of \
                     the superblock in the device's cache, not the image file's).",
                    run.env.device_name
                );
                return Ok(run.finish(1, false));
            }
            if opts.needs_unmounted() {
                let _ = writeln!(
                    run.err,
                    "{} is mounted on {mp}; this change needs the filesystem unmounted \
                     (only superblock fields such as the label, counts, intervals, \
                     reserved blocks and error behaviour change while it is mounted).",
                    run.env.device_name
                );
                return Ok(run.finish(1, false));
            }
        }
        // Multiple-mount protection, as tune2fs's open for writing: taken
        // before anything is read for a change (the journal replayed
        // below included), given back after the last write; -f skips it
        // (and is what clear_mmp needs).
        if opts.force == 0 {
            let o = MmpOptions {
                device_name: &run.env.device_name,
                now: u64::try_from(run.env.now).unwrap_or(0),
                sleep: &mut *run.env.mmp_sleep,
            };
            match MmpClaim::start(&dev, &run.sb, o) {
                Ok(c) => mmp = c,
                Err(e) => {
                    run.mmp_refused(e)?;
                    return Ok(run.finish(1, false));
                }
            }
        }
        // A mounted filesystem's journal belongs to the kernel.
        if run.env.mounted.is_none()
            && run.sb.has_compat(Compat::HAS_JOURNAL)
            && run.sb.has_incompat(Incompat::RECOVER)
        {
            run.out.push_str("Recovering journal.\n");
            match recover_journal(&dev, &run.sb) {
                Ok(()) => {}
                Err(e) => {
                    let _ = writeln!(
                        run.err,
                        "{}: {} while recovering journal.",
                        run.env.program,
                        crate::error::chain(&e)
                    );
                    let _ = writeln!(run.out, "Please run e2fsck -fy {}.", run.env.device_name);
                    return Ok(run.finish(1, false));
                }
            };
            dev.read_at(&mut buf, SUPERBLOCK_OFFSET)?;
            run.sb = Superblock::parse(&buf).map_err(|e| Error::corrupt("superblock", e))?;
            // As tune2fs's ext2fs_run_ext3_journal: a replayed journal means
            // the filesystem was mounted since its last check; the reopened
            // filesystem writes its primary superblock only.
            // tune2fs also adds the bytes its recovery wrote to
            // s_kbytes_written; that count is not reproduced here.
            let mtime = run.sb.s_mtime.get();
            if run.sb.s_lastcheck.get() >= mtime {
                run.sb.s_lastcheck.set(mtime.wrapping_sub(1));
            }
            run.dirty = true;
            run.master_only = true;
        }
    }
    if run.apply(&dev, opts)?.is_err() {
        return Ok(run.finish(1, false));
    }
    if run.dirty {
        let mut sb = run.sb.clone();
        if let Some(m) = run.meta.take() {
            run.descs = Some(m.flush(&mut sb)?);
        }
        ext4r_txn::flush::flush_super(
            dev.as_ref(),
            &mut sb,
            run.descs.as_deref(),
            run.env.now,
            run.master_only,
        )?;
        run.sb = sb;
    }
    let wrote = run.dirty;
    if let Some(c) = mmp {
        if let Err(e) = c.stop() {
            // ext2fs_close's error: what was written stays written.
            let _ = writeln!(
                run.err,
                "{}: {} while writing out and closing file system",
                run.env.program,
                crate::error::chain(&e)
            );
            return Ok(run.finish(1, wrote));
        }
    }
    Ok(run.finish(0, wrote))
}

/// Replays the internal journal in place, as tune2fs does before a change
/// (`ext2fs_run_ext3_journal`).
fn recover_journal(dev: &Arc<dyn BlockDevice>, sb: &Superblock) -> Result<()> {
    if sb.s_journal_inum.get() == 0 {
        return Err(Error::Unsupported(
            "recovering an external journal".to_string(),
        ));
    }
    let o = OpenOptions {
        skip_journal_replay: true,
        allow_encrypted: true,
        verify_checksums: false,
        ..OpenOptions::default()
    };
    let fs = Filesystem::open_with(dev.clone(), o)?;
    let info = fs.inode(InodeNr(sb.s_journal_inum.get()))?;
    let runs = fs.runs(&info)?;
    let len = runs.last().map_or(0, |r| r.end());
    let len = usize::try_from(len).map_err(|_| Error::Unsupported("huge journal".into()))?;
    let mut blocks = vec![BlockNr(0); len];
    for r in &runs {
        for k in 0..r.len {
            blocks[num::index(r.logical + k)] = BlockNr(r.physical + k);
        }
    }
    let journal = Journal::open(
        dev.clone(),
        JournalLocation::internal(blocks),
        fs.block_size(),
    )?;
    crate::write::recover_journal(dev, &journal, None)?;
    Ok(())
}

impl Run<'_, '_> {
    /// Says why multiple-mount protection kept the change out, in
    /// tune2fs's words; errors other than "in use" and a damaged block go
    /// to the caller.
    fn mmp_refused(&mut self, e: Error) -> Result<()> {
        let (prog, dev) = (&self.env.program, &self.env.device_name);
        match &e {
            Error::MmpInUse { why, info } => {
                let _ = writeln!(self.err, "{prog}: MMP: {why} while trying to open {dev}");
                if *why != MmpBusy::Active {
                    let _ = writeln!(
                        self.out,
                        "MMP check failed: If you are sure the filesystem is not in use on \
                         any node, run:\n'tune.ext4r -f -E clear_mmp {dev}'\n"
                    );
                }
                let _ = writeln!(
                    self.out,
                    "MMP error info: node: {}, device: {}, updated: {}",
                    info.node,
                    info.device,
                    crate::localtime::ctime(info.time as i64)
                );
                Ok(())
            }
            Error::Corrupt { .. } => {
                let _ = writeln!(
                    self.err,
                    "{prog}: {} while trying to open {dev}\nMMP block magic is bad. Try to \
                     fix it by running:\n'e2fsck -f {dev}'",
                    crate::error::chain(&e)
                );
                Ok(())
            }
            _ => Err(e),
        }
    }

    fn finish(self, status: u8, wrote: bool) -> Outcome {
        Outcome {
            out: self.out,
            err: self.err,
            status,
            wrote,
        }
    }

    fn refuse(&mut self, msg: &str) -> Step {
        self.err.push_str(msg);
        Err(Refused)
    }

    /// tune2fs's `check_fsck_needed`: only a freshly checked, valid
    /// filesystem may have its metadata rewritten.
    fn check_fsck_needed(&mut self) -> Step {
        let sb = &self.sb;
        let state = sb.s_state.get();
        if state & STATE_VALID == 0
            || state & STATE_ERROR != 0
            || sb.s_lastcheck.get() < sb.s_mtime.get()
        {
            self.out.push_str(
                "\nThis operation requires a freshly checked filesystem.\n\n\
                 Please run e2fsck -f on the filesystem.\n\n",
            );
            return Err(Refused);
        }
        Ok(())
    }

    /// tune2fs's `rewrite_metadata_checksums` and the descriptor rewrites
    /// of `enable_uninit_bg`/`disable_uninit_bg`, as planned.
    fn rewrite_metadata(&mut self, dev: &Arc<dyn BlockDevice>) -> Result<Step> {
        if self.sb.has_incompat(Incompat::EA_INODE) && self.sb.csum_seed() != self.orig_seed {
            // xattr inodes are found by a hash seeded with it.
            return Ok(self.refuse(
                "tune.ext4r: this change alters the checksum seed, which on an ea_inode \
                 filesystem means rehashing every xattr inode; tune.ext4r does not do that \
                 yet. Nothing was changed.\n",
            ));
        }
        let progress = &mut self.env.progress;
        let done = csum::execute(
            dev,
            &self.sb,
            self.orig_group_csum,
            &self.csum,
            &mut |d, n| progress("Rewriting metadata", d, n),
        )?;
        progress("Rewriting metadata", 1, 1);
        self.descs = Some(done.table);
        // As ext2fs_close: what went to the device before the flush, and the
        // superblock and descriptors it writes (fewer than tune2fs's count,
        // which includes blocks rewritten unchanged).
        let kb = self.sb.s_kbytes_written.get();
        if kb != 0 && done.bytes_written != 0 {
            let geo =
                Geometry::from_superblock(&self.sb).map_err(|e| Error::corrupt("superblock", e))?;
            let meta = u64::from(geo.desc_blocks() + 1) / u64::from(geo.block_size / 1024);
            // A u64 that wraps, as libext2fs's does.
            self.sb
                .s_kbytes_written
                .set(kb.wrapping_add(done.bytes_written >> 10).wrapping_add(meta));
        }
        if self.csum.rewrite != 0 {
            // EXT2_CRC32C_CHKSUM, or none.
            self.sb.s_checksum_type = u8::from(self.sb.has_ro_compat(RoCompat::METADATA_CSUM));
        }
        if done.dir_fsck {
            self.sb.s_state.set(self.sb.s_state.get() & !STATE_VALID);
            self.out.push_str(
                "\nThis operation requires a freshly checked filesystem.\n\n\
                 Please run e2fsck -fD on the filesystem.\n\n",
            );
        }
        self.dirty = true;
        Ok(Ok(()))
    }

    fn request_fsck(&mut self) {
        if self.fsck_requested {
            return;
        }
        self.fsck_requested = true;
        self.sb.s_state.set(self.sb.s_state.get() & !STATE_VALID);
        self.out
            .push_str("\nPlease run e2fsck -f on the filesystem.\n\n");
    }

    fn apply(&mut self, dev_arc: &Arc<dyn BlockDevice>, o: &TuneOptions) -> Result<Step> {
        let dev = dev_arc.as_ref();
        if let Some(c) = o.max_mount_count {
            let n = match c {
                MaxMounts::Count(n) => n,
                MaxMounts::Random => 20 + i32::from((self.env.random)()[0] % 20),
            };
            let Ok(n16) = i16::try_from(n) else {
                let _ = writeln!(self.err, "{}: bad mounts count - {n}", self.env.program);
                return Ok(Err(Refused));
            };
            self.sb.s_max_mnt_count.set(n16);
            self.dirty = true;
            let _ = writeln!(self.out, "Setting maximal mount count to {n}");
        }
        if let Some(n) = o.mount_count {
            let Ok(n16) = u16::try_from(n) else {
                let _ = writeln!(self.err, "{}: bad mounts count - {n}", self.env.program);
                return Ok(Err(Refused));
            };
            self.sb.s_mnt_count.set(n16);
            self.dirty = true;
            let _ = writeln!(self.out, "Setting current mount count to {n}");
        }
        if let Some(e) = o.errors {
            self.sb.s_errors.set(e);
            self.dirty = true;
            let _ = writeln!(self.out, "Setting error behavior to {e}");
        }
        if let Some(g) = o.resgid {
            // tune2fs keeps the low 16 bits.
            self.sb.s_def_resgid.set(num::lo16(num::lo32(g)));
            self.dirty = true;
            let _ = writeln!(self.out, "Setting reserved blocks gid to {g}");
        }
        if let Some(i) = o.interval {
            let Ok(secs) = u32::try_from(i) else {
                let _ = writeln!(
                    self.err,
                    "{}: interval between checks is too big ({i})",
                    self.env.program
                );
                return Ok(Err(Refused));
            };
            self.sb.s_checkinterval.set(secs);
            self.dirty = true;
            let _ = writeln!(self.out, "Setting interval between checks to {i} seconds");
        }
        if let Some(r) = o.reserved_ratio {
            // tune2fs computes in double and truncates.
            #[allow(clippy::cast_possible_truncation)] // a percentage of a u64 count
            let v = (r * self.sb.blocks_count() as f64 / 100.0) as u64;
            self.sb.set_r_blocks_count(v);
            self.dirty = true;
            let _ = writeln!(
                self.out,
                "Setting reserved blocks percentage to {}% ({} blocks)",
                fmt_g(r),
                self.sb.r_blocks_count()
            );
        }
        if let Some(r) = o.reserved_blocks {
            if r > self.sb.blocks_count() / 2 {
                let _ = writeln!(
                    self.err,
                    "{}: reserved blocks count is too big ({r})",
                    self.env.program
                );
                return Ok(Err(Refused));
            }
            self.sb.set_r_blocks_count(r);
            self.dirty = true;
            let _ = writeln!(self.out, "Setting reserved blocks count to {r}");
        }
        if let Some(t) = o.last_check {
            // tune2fs stores the 32-bit field only.
            self.sb.s_lastcheck.set(num::lo32(t as u64));
            self.dirty = true;
            let _ = writeln!(
                self.out,
                "Setting time filesystem last checked to {}",
                list::ctime(t)
            );
        }
        if let Some(u) = o.resuid {
            // tune2fs keeps the low 16 bits.
            self.sb.s_def_resuid.set(num::lo16(num::lo32(u)));
            self.dirty = true;
            let _ = writeln!(self.out, "Setting reserved blocks uid to {u}");
        }
        if let Some(l) = &o.label {
            let l = until_nul(l);
            if l.len() > 16 {
                self.err.push_str("Warning: label too long, truncating.\n");
            }
            self.sb.s_volume_name = [0; 16];
            let n = l.len().min(16);
            self.sb.s_volume_name[..n].copy_from_slice(&l[..n]);
            self.dirty = true;
        }
        if let Some(m) = &o.last_mounted {
            let m = until_nul(m);
            self.sb.s_last_mounted = [0; 64];
            let n = m.len().min(64);
            self.sb.s_last_mounted[..n].copy_from_slice(&m[..n]);
            self.dirty = true;
        }
        if let Some(mo) = &o.mount_opts {
            let mut mask = self.sb.s_default_mount_opts.get();
            if edit_mntopts(mo, &mut mask).is_err() {
                let _ = writeln!(self.err, "Invalid mount option set: {mo}");
                return Ok(Err(Refused));
            }
            self.sb.s_default_mount_opts.set(mask);
            self.dirty = true;
        }
        if let Some(f) = &o.features {
            if self.update_features(dev_arc, f, o.force)?.is_err() {
                return Ok(Err(Refused));
            }
        }
        let mut late = Late::default();
        if let Some(e) = &o.extended {
            if self.extended(e, &mut late).is_err() {
                return Ok(Err(Refused));
            }
        }
        if late.clear_mmp {
            if o.force == 0 {
                self.err
                    .push_str("Error in using clear_mmp. It must be used with -f\n");
                return Ok(Err(Refused));
            }
            // tune2fs goes straight to closing: nothing after -E is done.
            if self.sb.has_incompat(Incompat::MMP) {
                ext4r_txn::mmp::reset(dev, &self.sb, &self.env.device_name)?;
            }
            return Ok(Ok(()));
        }
        if (self.journal.size != 0 || self.journal.device.is_some())
            && self.add_journal(dev_arc)?.is_err()
        {
            return Ok(Err(Refused));
        }
        if self.q_flag && self.handle_quota(dev_arc)?.is_err() {
            return Ok(Err(Refused));
        }
        if let Some(u) = &o.uuid {
            if self.set_uuid(dev, u)?.is_err() {
                return Ok(Err(Refused));
            }
        }
        if let Some(n) = o.inode_size {
            // check_inode_size kept n within the block size.
            if self.change_inode_size(dev_arc, num::sat_u32(n))?.is_err() {
                return Ok(Err(Refused));
            }
        }
        if !self.csum.is_empty() && self.rewrite_metadata(dev_arc)?.is_err() {
            return Ok(Err(Refused));
        }
        if o.list {
            let text = list::list_super(&self.sb, &*self.env.user_name, &*self.env.group_name);
            self.out.push_str(&text);
        }
        if let Some(s) = late.stride {
            // The -E parser refused a stride past 16 bits.
            self.sb.s_raid_stride.set(num::sat_u16(s));
            self.dirty = true;
            let _ = writeln!(self.out, "Setting stride size to {s}");
        }
        if let Some(s) = late.stripe_width {
            // The -E parser refused a stripe width past 32 bits.
            self.sb.s_raid_stripe_width.set(num::sat_u32(s));
            self.dirty = true;
            let _ = writeln!(self.out, "Setting stripe width to {s}");
        }
        if let Some(m) = late.mount_opts {
            self.sb.s_mount_opts = [0; 64];
            let n = m.len().min(63);
            self.sb.s_mount_opts[..n].copy_from_slice(&m.as_bytes()[..n]);
            self.dirty = true;
            let _ = writeln!(self.out, "Setting extended default mount options to '{m}'");
        }
        Ok(Ok(()))
    }
}

/// The primary descriptor table as raw bytes (whole blocks) and parsed.
fn read_desc_table(dev: &dyn BlockDevice, sb: &Superblock) -> Result<(Vec<u8>, Vec<GroupDesc>)> {
    let geo = Geometry::from_superblock(sb).map_err(|e| Error::corrupt("superblock", e))?;
    let bs = geo.block_size as usize;
    let mut table = vec![0u8; geo.desc_blocks() as usize * bs];
    for i in 0..geo.desc_blocks() {
        let off = i as usize * bs;
        dev.read_at(&mut table[off..off + bs], geo.desc_block_loc(i) * bs as u64)?;
    }
    let dsize = geo.desc_size as usize;
    let descs = (0..geo.group_count as usize)
        .map(|g| GroupDesc::parse(&table[g * dsize..(g + 1) * dsize], dsize))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::corrupt("group descriptors", e))?;
    Ok((table, descs))
}

#[cfg(test)]
mod tests;
