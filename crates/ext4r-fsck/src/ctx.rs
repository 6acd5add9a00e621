//! The check's context, which every pass is given: the check's fixed
//! facts (read only), the run's status (verbs: report, note, fail, stop,
//! restart) and what one pass finds for the next — [`GroupFindings`] from
//! pass 0, the inodes and directories from pass 1 with what passes 2 and 3
//! add, the blocks claimed. None of it is a public field: each is written
//! through a verb saying what was found, and read through a method.
//! Sized by what is in use, not by the volume: bitmaps of the in-use
//! inodes (allocated where they are in use), a sorted list of directories,
//! a list of claimed block runs.

use ext4r_txn::alloc::UsedBlocks;
use std::collections::BTreeMap;

use ext4r::fs::Filesystem;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::superblock::Superblock;

use crate::problem::Problems;
use crate::report::Summary;
use ext4r::fs::FileKind;

pub(crate) use crate::inode_map::Inodes;

/// Progress callback the passes call: (pass number 1–5, done, total).
pub(crate) type Progress<'a> = &'a mut dyn FnMut(u8, u64, u64);

/// A directory as pass 1 found it, fixed from then on (pass 2's htree
/// checks aside, before its walk): shared by pass 2's reader threads
/// ([`Ctx::shared_dirs`] is an `Arc`), so they need no copy of their own. 12
/// bytes; what passes 2 and 3 learn of it is its [`DirLinks`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct DirInfo {
    pub ino: u32,
    /// Its `i_generation` (with `ino`, its checksum seed and [`Owner`]).
    ///
    /// [`Owner`]: crate::fix::Owner
    pub generation: u32,
    /// [`DirInfo::INLINE`] and the other flags.
    flags: u8,
}

impl DirInfo {
    /// Data is inline in the inode.
    pub(crate) const INLINE: u8 = 1;
    /// Has the htree flag.
    pub(crate) const HTREE: u8 = 2;
    /// Names are encrypted (their hashes cannot be checked, and they are
    /// at least 16 bytes).
    pub(crate) const ENCRYPTED: u8 = 4;
    /// Names are compared case-folded (hashes not checked here).
    pub(crate) const CASEFOLD: u8 = 8;
    /// Pass 1 repairs its block map or extent tree this round (what it
    /// maps is settled in the next).
    pub(crate) const MAP_BAD: u8 = 16;

    /// Directory `ino` of generation `generation` with `flags` (the
    /// constants above, or'ed).
    pub(crate) fn new(ino: u32, generation: u32, flags: u8) -> Self {
        DirInfo {
            ino,
            generation,
            flags,
        }
    }

    /// See [`Self::INLINE`].
    pub(crate) fn inline(&self) -> bool {
        self.flags & Self::INLINE != 0
    }

    /// See [`Self::HTREE`].
    pub(crate) fn htree(&self) -> bool {
        self.flags & Self::HTREE != 0
    }

    /// Read as the linear directory it becomes (its index cleared).
    pub(crate) fn clear_htree(&mut self) {
        self.flags &= !Self::HTREE;
    }

    /// See [`Self::ENCRYPTED`].
    pub(crate) fn encrypted(&self) -> bool {
        self.flags & Self::ENCRYPTED != 0
    }

    /// See [`Self::CASEFOLD`].
    pub(crate) fn casefold(&self) -> bool {
        self.flags & Self::CASEFOLD != 0
    }

    /// See [`Self::MAP_BAD`].
    pub(crate) fn map_bad(&self) -> bool {
        self.flags & Self::MAP_BAD != 0
    }

    /// The directory, as the write layer stamps its blocks.
    pub(crate) fn owner(&self) -> crate::fix::Owner {
        crate::fix::Owner::new(self.ino, self.generation)
    }

    /// Its blocks' checksum seed (metadata_csum), from the filesystem's.
    pub(crate) fn seed(&self, fs_seed: u32) -> u32 {
        self.owner().seed(fs_seed)
    }
}

/// What passes 2 and 3 learn of a directory: who names it and what its
/// `..` says, and where. Index-aligned with [`Ctx::dirs`]; 16 bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DirLinks {
    /// What its `..` entry says (0: not seen).
    pub dotdot: u32,
    /// The directory whose entry names it (0: none found yet).
    pub parent: u32,
    /// Where its `..` entry is (see [`Self::dotdot_at`]): the block's
    /// low 32 and high 16 bits (block numbers are 48-bit; 0 is never a
    /// directory's), and the offset in it (under 64 KiB).
    at_lo: u32,
    at_hi: u16,
    at_off: u16,
}

impl DirLinks {
    /// Where its `..` entry is: (block, offset), once pass 2 has read it.
    pub(crate) fn dotdot_at(&self) -> Option<(u64, usize)> {
        let block = u64::from(self.at_hi) << 32 | u64::from(self.at_lo);
        (block != 0).then_some((block, usize::from(self.at_off)))
    }

    /// Records where its `..` entry is; one that cannot be (a block past
    /// 48 bits, an offset past 64 KiB) is recorded as not known.
    pub(crate) fn set_dotdot_at(&mut self, block: u64, offset: usize) {
        let lo = u32::try_from(block & 0xffff_ffff).unwrap_or(0);
        let (lo, hi, off) = match (u16::try_from(block >> 32), u16::try_from(offset)) {
            (Ok(hi), Ok(off)) => (lo, hi, off),
            _ => (0, 0, 0),
        };
        (self.at_lo, self.at_hi, self.at_off) = (lo, hi, off);
    }
}

/// A directory block to read in pass 2: one per directory block, so
/// packed to 20 bytes (24 with the `u64`s aligned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(C, packed(4))]
pub(crate) struct DirBlock {
    pub phys: u64,
    pub ino: u32,
    pub lblk: u64,
}

impl DirBlock {
    /// The entry at byte `off` of this block, as what a problem is about.
    pub(crate) fn entry_at(&self, off: usize) -> crate::problem::Subject {
        crate::problem::Subject::Entry {
            dir: self.ino,
            lblk: self.lblk,
            offset: u32::try_from(off).unwrap_or(u32::MAX),
        }
    }
}

/// A shared xattr block: what its header says and how many inodes use it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct XattrBlock {
    pub refcount: u32,
    pub counted: u32,
    pub valid: bool,
    /// Found bad (the problem's code): every inode naming it has it
    /// cleared, as e2fsck re-judges it for each.
    pub bad: Option<crate::codes::ProblemCode>,
    /// The hash of the entry found bad (e2fsck's `%N` in PR_1_ATTR_HASH).
    pub bad_hash: u32,
}

/// What the passes take a group's descriptor to say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GroupState {
    /// The block bitmap is not initialised (computed, not read).
    pub block_uninit: bool,
    /// No inode of the group is in use (its table is not read).
    pub inode_uninit: bool,
    /// Inodes at the end of the table never used (not read).
    pub itable_unused: u32,
    /// The descriptor's checksum does not match: libext2fs then reads its
    /// bitmaps from disk whatever its flags say.
    pub csum_bad: bool,
    /// Without uninit_bg or metadata_csum: the `INODE_UNINIT` flag and the
    /// unused-inode count as a read-only check leaves them. Nothing obeys
    /// them (pass 1 reads the whole table), but e2fsck's pass 2 still holds
    /// an entry naming an inode they cover against them (see
    /// [`crate::gdesc::inode_reference`]).
    pub unobeyed_inode_uninit: bool,
    /// See [`GroupState::unobeyed_inode_uninit`].
    pub unobeyed_itable_unused: u32,
}

/// What pass 1 found on a worker thread for a stretch of inodes (see
/// [`Ctx::worker`]).
pub(crate) struct Found {
    p: Problems,
    found: InodeFindings,
    claims: crate::claims::Claims,
    large_files: u64,
    large_dirs: u64,
    htree_tails: Vec<(u32, u64, u64)>,
    ea_flag_missing: Vec<u32>,
    stats: Summary,
    quota: crate::quota_usage::Counters,
    planned_blocks: Vec<(u64, bool)>,
}

/// What pass 0 finds of the groups' metadata, read by the later passes
/// (through [`Ctx::groups`]). Pass 0 makes it; pass 2 changes a group's
/// [`GroupState`] when an entry shows its flags wrong.
#[derive(Debug, Clone)]
pub(crate) struct GroupFindings {
    /// Groups whose inode table is unusable (outside where it may be):
    /// their inodes are not read, as e2fsck's scan skips a table it found
    /// invalid.
    unusable_table: Vec<bool>,
    /// Groups whose (block bitmap, inode bitmap) is unusable: pass 5 does
    /// not compare it (it is relocated and written anew). The group's
    /// inodes are still read: a misplaced bitmap says nothing about them,
    /// and skipping them would leave their blocks looking free to the
    /// relocation itself.
    unusable_bitmaps: Vec<(bool, bool)>,
    /// Some group's inode table is outside where it may be.
    table_misplaced: bool,
    /// Each group's uninit flags and unused inodes as the passes take
    /// them (see [`crate::gdesc`]).
    states: Vec<GroupState>,
}

impl GroupFindings {
    /// Nothing found yet in `groups` groups.
    fn new(groups: usize) -> Self {
        GroupFindings {
            unusable_table: vec![false; groups],
            unusable_bitmaps: vec![(false, false); groups],
            table_misplaced: false,
            states: vec![GroupState::default(); groups],
        }
    }

    /// Whether group `g`'s inode table is unusable (a group out of range
    /// has none).
    pub(crate) fn table_unusable(&self, g: u32) -> bool {
        self.unusable_table.get(g as usize).copied().unwrap_or(true)
    }

    /// Whether some group's inode table is outside where it may be.
    pub(crate) fn any_table_misplaced(&self) -> bool {
        self.table_misplaced
    }

    /// Whether some group's inode table or bitmap is outside where it may
    /// be (to be relocated).
    pub(crate) fn any_metadata_misplaced(&self) -> bool {
        self.table_misplaced || self.unusable_bitmaps.iter().any(|&(b, i)| b || i)
    }

    /// Whether group `g`'s (block bitmap, inode bitmap) is unusable.
    pub(crate) fn bitmaps_unusable(&self, g: u32) -> (bool, bool) {
        self.unusable_bitmaps[g as usize]
    }

    /// Each group's (block bitmap, inode bitmap) unusable, for pass 5.
    pub(crate) fn unusable_bitmaps(&self) -> &[(bool, bool)] {
        &self.unusable_bitmaps
    }

    /// Each group's uninit flags and unused inodes as the passes take them
    /// (see [`crate::gdesc`]).
    pub(crate) fn states(&self) -> &[GroupState] {
        &self.states
    }

    /// The state of group `g` (all initialised when out of range).
    pub(crate) fn state(&self, g: u32) -> GroupState {
        self.states.get(g as usize).copied().unwrap_or_default()
    }
}

/// What pass 1 finds of the inodes and directories, handed on to the later
/// passes, with what passes 2 and 3 learn of the directories (their
/// [`DirLinks`], the names counted, the directories to rebuild). A pass-1
/// worker fills one of its own for a stretch of inodes, added to the
/// check's in inode order ([`InodeFindings::append`]).
#[derive(Default)]
struct InodeFindings {
    /// The in-use inodes (see [`crate::inode_map`]).
    inodes: Inodes,
    /// The directories, by inode number (see [`DirInfo`]).
    dirs: std::sync::Arc<Vec<DirInfo>>,
    /// What passes 2 and 3 learn of each of [`Self::dirs`].
    dir_links: Vec<DirLinks>,
    /// Every directory block, for pass 2 to read (and those of the
    /// directories to rebuild, for pass 3A to read again).
    dir_blocks: Vec<DirBlock>,
    /// In-use inodes outside the tree (journal, quota, orphan file) at or
    /// past `s_first_ino`, for the inode bitmap.
    extra_used: Vec<u32>,
    /// Directories to rebuild in pass 3A (e2fsck's `dirs_to_hash`): those
    /// whose index is cleared, those with a name twice in a block, leaves
    /// without room for a checksum, and (repairing) linear directories of
    /// three blocks or more. See [`crate::pass3a`].
    rehash_dirs: std::collections::BTreeSet<u32>,
    /// EA inodes some xattr keeps a value in (sorted after pass 1).
    ea_refs: Vec<u32>,
}

impl InodeFindings {
    /// Adds what was found for later inodes (all of `later`'s are past
    /// these).
    fn append(&mut self, later: InodeFindings) {
        let InodeFindings {
            inodes,
            dirs,
            dir_links,
            dir_blocks,
            extra_used,
            rehash_dirs,
            ea_refs,
        } = later;
        self.inodes.append(inodes);
        let dirs = std::sync::Arc::try_unwrap(dirs).unwrap_or_else(|d| (*d).clone());
        std::sync::Arc::make_mut(&mut self.dirs).extend(dirs);
        self.dir_links.extend(dir_links);
        self.dir_blocks.extend(dir_blocks);
        self.extra_used.extend(extra_used);
        self.rehash_dirs.extend(rehash_dirs);
        self.ea_refs.extend(ea_refs);
    }
}

pub(crate) struct Ctx {
    /// The filesystem checked (read through [`Ctx::fs`]).
    fs: std::sync::Arc<Filesystem>,
    /// Its superblock as the passes take it (see [`Ctx::sb`]).
    sb: Superblock,
    geo: Geometry,
    /// What the passes found (see [`Ctx::report`]).
    p: Problems,
    /// Words said along the way, not problems (see [`Ctx::note`]).
    notes: Vec<String>,
    /// Stop after this pass (nothing more can be checked sensibly).
    abort: bool,
    /// The caller's stop request ([`crate::options::Options::cancel`]); workers
    /// have none (the merging thread looks).
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The stop request was seen: the check ends early.
    cancelled: bool,
    /// Why the check cannot be completed at all (e2fsck's exit 8).
    fatal: Option<String>,
    /// It stopped while the journal was checked, before the superblock
    /// (see [`crate::report::Report::fatal_journal`]).
    fatal_journal: bool,
    /// The bad block inode's tree looked corrupted (see `bb_tree`).
    bb_corrupt: bool,
    /// What pass 0 finds of the groups' metadata (see [`Ctx::groups`]).
    groups: GroupFindings,
    /// Encrypted inodes' encryption policies (as numbers, one per distinct
    /// policy; see [`crate::pass1_rules::encryption_context`]).
    enc_policy: std::collections::HashMap<u32, u32>,
    enc_policy_ids: std::collections::HashMap<Vec<u8>, u32>,
    /// The time of the check (seconds since the epoch; 0: unknown).
    now: i64,
    /// The check was forced (`-f`).
    forced: bool,
    /// The journal's inode as pass 0 found it (`s_journal_inum`, or the
    /// reserved inode when the superblock names a wrong one).
    journal_ino: u32,
    /// The journal inode is bad and its copy in the superblock serves
    /// (its blocks are claimed by pass 0; pass 1 leaves the inode alone).
    journal_backup: bool,
    /// A repair must check again from the start before fixing more (a
    /// descriptor said unused where inodes are in use).
    restart: bool,
    /// What pass 1 finds of the inodes and directories, and what passes 2
    /// and 3 add.
    found: InodeFindings,
    xattr_blocks: BTreeMap<u64, XattrBlock>,
    /// Who claims which blocks, and their union (see [`crate::claims`]).
    claims: crate::claims::Claims,
    /// Free blocks a repair planned in this check takes (lost+found's),
    /// kept from later plans.
    reserved: Vec<u64>,
    /// A pass-1 worker's context ([`Ctx::worker`]): it knows the claims of
    /// the inodes it checked only.
    worker: bool,
    /// Pass 3 makes a new /lost+found in this round (or unlinks the one
    /// on disk): the one on disk is not the one reconnections will use.
    lost_found_replaced: bool,
    /// Blocks (`true`: taken, `false`: freed) and inodes (taken or freed,
    /// a directory or not) the repairs planned in this check take or
    /// free with e2fsck's allocation statistics (`ext2fs_block_alloc_stats2`,
    /// `ext2fs_inode_alloc_stats2`): pass 5 counts them as the repair
    /// leaves them, in what is in use and in what is stored.
    planned_blocks: Vec<(u64, bool)>,
    planned_inodes: Vec<(u32, bool, bool)>,
    /// Regular files of 2 GiB or more (they need the large_file feature).
    large_files: u64,
    /// Indexed directories of 2 GiB or more (they need the large_dir
    /// feature, e2fsck's `ctx->large_dirs`).
    large_dirs: u64,
    /// Indexed block-mapped directories whose illegal pointers past their
    /// last block a repair clears: (inode, blocks mapped, the highest
    /// illegal logical block plus one). See `pass2::htree_tails`.
    htree_tails: Vec<(u32, u64, u64)>,
    /// Links pass 3A takes from inodes' counts with the entries it clears
    /// (e2fsck's `e2fsck_adjust_inode_count`): pass 4 compares the count
    /// less these.
    link_drops: std::collections::HashMap<u32, u16>,
    /// See [`Ctx::add_link`].
    link_adds: std::collections::HashMap<u32, u16>,
    /// Inodes named as EA inodes that lack the EA_INODE flag (pass 1 found
    /// them; pass 4 counts them as EA inodes, as e2fsck does once its pass
    /// 1 has set the flag).
    ea_flag_missing: Vec<u32>,
    /// Name lengths of the entries passes 3 and 4 add to lost+found.
    reconnects: Vec<usize>,
    /// Group metadata pass 0 found out of place, to move in pass 5; with
    /// `true` where the old place is to be copied (a conflict or a bad
    /// block: e2fsck's "Relocating ... from X to Y").
    relocate: Vec<(u32, crate::fix::plan::Meta, bool)>,
    /// Pass 4 has nothing sound to count (no root): go on with pass 5.
    skip_to_pass5: bool,
    /// Inode 7 is invalid: recreated at the end of pass 1.
    resize_recreate: bool,
    /// The journal device given with `-j`.
    external_journal: Option<crate::options::ExternalJournal>,
    /// The check serves a repair run (answers "yes"): some dead ends of a
    /// read-only check are repairable then.
    repairing: bool,
    /// The bad block list (inode 1's data blocks), sorted.
    bad_blocks: Vec<u64>,
    /// The summary's counts (see [`Ctx::summary`]).
    stats: Summary,
    /// Usage counted per quota type and id, for each quota file the
    /// superblock names (see [`crate::quota`]).
    quota: crate::quota_usage::Counters,
    /// Threads the passes may use (at least 1; see [`crate::options::Options`]).
    threads: usize,
    /// Extent trees that could be shorter or narrower are said (and
    /// rebuilt in a repair), as e2fsck without `no_optimize_extents`.
    optimize_extents: bool,
    /// For each inode a pass-1 finding names by its path (e2fsck's `%Q`
    /// in `process_bad_inode`, see [`crate::pathname::q`]): the
    /// directory pass 2 first meets it in, 0 until then.
    q_dirs: std::collections::HashMap<u32, u32>,
    /// Pass 1: the inode being checked fails its checksum, said once its
    /// other checks are done.
    csum_due: bool,
}

/// What a check is asked to do, fixed for its length: the time, whether
/// it was forced, whether it serves a repair, how many threads it may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub repairing: bool,
    pub now: i64,
    pub forced: bool,
    pub threads: usize,
    pub optimize_extents: bool,
}

impl Ctx {
    pub(crate) fn new(fs: Filesystem, settings: Settings) -> Self {
        let Settings {
            repairing,
            now,
            forced,
            threads,
            optimize_extents,
        } = settings;
        let sb = fs.superblock().clone();
        let journal_ino = sb.s_journal_inum.get();
        let geo = fs.geometry().clone();
        let groups = geo.group_count as usize;
        let quota = crate::quota_usage::counters(&sb);
        Ctx {
            fs: std::sync::Arc::new(fs),
            sb,
            geo,
            p: Problems::default(),
            notes: Vec::new(),
            abort: false,
            cancel: None,
            cancelled: false,
            fatal: None,
            fatal_journal: false,
            bb_corrupt: false,
            groups: GroupFindings::new(groups),
            restart: false,
            journal_backup: false,
            journal_ino,
            now,
            forced,
            enc_policy: std::collections::HashMap::new(),
            enc_policy_ids: std::collections::HashMap::new(),
            found: InodeFindings::default(),
            xattr_blocks: BTreeMap::new(),
            claims: crate::claims::Claims::default(),
            reserved: Vec::new(),
            worker: false,
            lost_found_replaced: false,
            planned_blocks: Vec::new(),
            planned_inodes: Vec::new(),
            large_files: 0,
            large_dirs: 0,
            htree_tails: Vec::new(),
            link_drops: std::collections::HashMap::new(),
            link_adds: std::collections::HashMap::new(),
            ea_flag_missing: Vec::new(),
            reconnects: Vec::new(),
            relocate: Vec::new(),
            skip_to_pass5: false,
            resize_recreate: false,
            external_journal: None,
            repairing,
            bad_blocks: Vec::new(),
            stats: Summary::default(),
            quota,
            threads,
            optimize_extents,
            q_dirs: std::collections::HashMap::new(),
            csum_due: false,
        }
    }

    /// The filesystem checked.
    pub(crate) fn fs(&self) -> &Filesystem {
        &self.fs
    }

    /// The filesystem checked, as a handle for another thread or for the
    /// caller once the check is done.
    pub(crate) fn shared_fs(&self) -> std::sync::Arc<Filesystem> {
        self.fs.clone()
    }

    /// The superblock as the passes take it: as read, but for what a
    /// fix judged in memory changes (see [`Ctx::judge_without_filetype`]).
    pub(crate) fn sb(&self) -> &Superblock {
        &self.sb
    }

    /// Pass 0 clears the filetype feature (the Hurd does not support
    /// it) in the superblock the later passes judge by, as e2fsck clears
    /// it in memory before pass 2: entries are judged as the repair
    /// leaves the superblock.
    pub(crate) fn judge_without_filetype(&mut self) {
        let f = self.sb.s_feature_incompat.get() & !Incompat::FILETYPE.bits();
        self.sb.s_feature_incompat.set(f);
    }

    /// The filesystem's geometry.
    pub(crate) fn geo(&self) -> &Geometry {
        &self.geo
    }

    /// The time of the check (seconds since the epoch; 0: unknown).
    pub(crate) fn now(&self) -> i64 {
        self.now
    }

    /// Whether the check was forced (`-f`).
    pub(crate) fn forced(&self) -> bool {
        self.forced
    }

    /// Whether the check serves a repair run (answers "yes"): some dead
    /// ends of a read-only check are repairable then.
    pub(crate) fn repairing(&self) -> bool {
        self.repairing
    }

    /// Whether extent trees are judged for their shape (see
    /// [`crate::options::Options::no_optimize_extents`]).
    pub(crate) fn optimize_extents(&self) -> bool {
        self.optimize_extents
    }

    /// Threads the passes may use (at least 1).
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Reports a finding about `subject` (the problems found are the
    /// check's, whichever pass finds them).
    pub(crate) fn report(&mut self, subject: crate::problem::Subject) -> crate::problem::On<'_> {
        self.p.on(subject)
    }

    /// What was found so far, in the order it is said.
    pub(crate) fn problems(&self) -> &Problems {
        &self.p
    }

    /// Block `b` read whole; None when it lies outside the filesystem or
    /// the read fails.
    pub(crate) fn read_block(&self, b: u64) -> Option<Vec<u8>> {
        if !self.valid_range(b, 1) {
            return None;
        }
        let bs = self.geo().block_size;
        let mut buf = vec![0u8; bs as usize];
        self.fs()
            .device()
            .read_at(&mut buf, b * u64::from(bs))
            .ok()?;
        Some(buf)
    }

    /// The entries of directory `dir` a fix found so far clears: (block,
    /// offset). In a repair they are gone for what comes after, as the
    /// entries e2fsck clears are when it writes them at once.
    pub(crate) fn entries_cleared(&self, dir: u32) -> Vec<(u64, usize)> {
        self.p
            .list()
            .iter()
            .filter_map(|p| match &p.fix {
                Some(crate::fix::Fix::DirEntryClear(b, off, o)) if o.ino == dir => Some((*b, *off)),
                _ => None,
            })
            .collect()
    }

    /// What was found so far, to put in the order e2fsck says it (passes
    /// that find things in another order than e2fsck's move them) or to
    /// drop what a restart finds again.
    pub(crate) fn reorder_problems(&mut self) -> &mut Problems {
        &mut self.p
    }

    /// Puts the last problem reported under latch `code`, asked as
    /// `message` (see [`crate::problem::Latch`]).
    pub(crate) fn latch_last(&mut self, code: crate::codes::ProblemCode, message: String) {
        self.p.latch_last(code, message);
    }

    /// What was found, taken once the check is over.
    pub(crate) fn take_problems(&mut self) -> Problems {
        std::mem::take(&mut self.p)
    }

    /// Says `words` along the way (not a problem: e2fsck's messages
    /// outside its problem table).
    pub(crate) fn note(&mut self, words: impl Into<String>) {
        self.notes.push(words.into());
    }

    /// What [`Ctx::note`] said so far.
    pub(crate) fn notes(&self) -> &[String] {
        &self.notes
    }

    /// What [`Ctx::note`] said, taken once the check is over.
    pub(crate) fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Nothing more can be checked sensibly: the check stops once this
    /// pass is over.
    pub(crate) fn stop_after_pass(&mut self) {
        self.abort = true;
    }

    /// Whether the check stops once this pass is over
    /// ([`Ctx::stop_after_pass`], [`Ctx::fail`], a stop request).
    pub(crate) fn stopping(&self) -> bool {
        self.abort
    }

    /// The check cannot be completed at all, for reason `why` (e2fsck's
    /// exit 8): it stops once this pass is over.
    pub(crate) fn fail(&mut self, why: impl Into<String>) {
        self.fatal = Some(why.into());
        self.abort = true;
    }

    /// As [`Ctx::fail`], while the journal is checked, before the
    /// superblock (see [`crate::report::Report::fatal_journal`]).
    pub(crate) fn fail_in_journal(&mut self, why: impl Into<String>) {
        self.fail(why);
        self.fatal_journal = true;
    }

    /// The journal's failure is not the journal's alone: under `-n`,
    /// e2fsck finds a journal without its magic and then the superblock
    /// corrupt before it stops (the failure stands, its place is not the
    /// journal check's).
    pub(crate) fn failure_not_journals_alone(&mut self) {
        self.fatal_journal = false;
    }

    /// Whether [`Ctx::fail`] (or [`Ctx::fail_in_journal`]) was called.
    pub(crate) fn failed(&self) -> bool {
        self.fatal.is_some()
    }

    /// Whether the check failed while the journal was checked.
    pub(crate) fn failed_in_journal(&self) -> bool {
        self.fatal_journal
    }

    /// Why the check failed, taken once it is over.
    pub(crate) fn take_failure(&mut self) -> Option<String> {
        self.fatal.take()
    }

    /// A repair must check again from the start before fixing more (a
    /// descriptor said unused where inodes are in use).
    pub(crate) fn must_restart(&mut self) {
        self.restart = true;
    }

    /// Whether [`Ctx::must_restart`] was called.
    pub(crate) fn restarting(&self) -> bool {
        self.restart
    }

    /// Adds one inode's (or one stretch's) counts to the summary's.
    pub(crate) fn add_to_summary(&mut self, counts: &Summary) {
        add_counts(&mut self.stats, counts);
    }

    pub(crate) fn wide(&self) -> bool {
        self.sb.has_incompat(Incompat::BIT64)
    }

    pub(crate) fn csum(&self) -> bool {
        self.sb.has_ro_compat(RoCompat::METADATA_CSUM)
    }

    /// gdt_csum or metadata_csum: the uninit flags and itable_unused count.
    pub(crate) fn group_csum(&self) -> bool {
        self.csum() || self.sb.has_ro_compat(RoCompat::GDT_CSUM)
    }

    /// Adds a directory pass 1 found (in inode order).
    pub(crate) fn add_dir(&mut self, info: DirInfo) {
        std::sync::Arc::make_mut(&mut self.found.dirs).push(info);
        self.found.dir_links.push(DirLinks::default());
    }

    /// Directory `d` to change: only before pass 2's readers share
    /// [`Self::dirs`] (else this would copy them all).
    pub(crate) fn dir_mut(&mut self, d: usize) -> &mut DirInfo {
        debug_assert_eq!(std::sync::Arc::strong_count(&self.found.dirs), 1);
        &mut std::sync::Arc::make_mut(&mut self.found.dirs)[d]
    }

    pub(crate) fn dir_idx(&self, ino: u32) -> Option<usize> {
        self.found.dirs.binary_search_by_key(&ino, |r| r.ino).ok()
    }

    /// Whether `count` blocks from `b` lie inside the filesystem's data
    /// area.
    pub(crate) fn valid_range(&self, b: u64, count: u64) -> bool {
        count > 0
            && b >= self.geo.first_data_block
            && b.checked_add(count)
                .is_some_and(|e| e <= self.geo.blocks_count)
    }

    /// The blocks this check knows to be in use as the write layer's
    /// usage map: the `[start, end)` ranges given (what the inodes and
    /// metadata claim) and the blocks other repairs of this check took.
    /// Every search for free blocks in a repair runs the one allocator's
    /// searches (`ext4r_txn::alloc`) over it, as e2fsck searches its
    /// `block_found_map` with libext2fs' — the on-disk bitmaps cannot be
    /// trusted here. With bigalloc a cluster holding any used block is
    /// used as a whole.
    pub(crate) fn usage_map(&self, used: impl IntoIterator<Item = (u64, u64)>) -> UsedBlocks {
        UsedBlocks::from_runs(
            self.geo.first_data_block,
            self.geo.blocks_count,
            self.geo.cluster_ratio(),
            used.into_iter()
                .map(|(s, e)| (s, e.saturating_sub(s)))
                .chain(self.reserved.iter().map(|&b| (b, 1))),
        )
    }

    /// [`Ctx::usage_map`] over every claim.
    pub(crate) fn claimed_map(&self) -> UsedBlocks {
        self.usage_map(self.claims.runs())
    }

    pub(crate) fn claim(&mut self, start: u64, len: u64, owner: u32) {
        self.claims.push(start, len, owner);
    }

    /// The journal device given with `-j`, for pass 0.
    pub(crate) fn set_external_journal(&mut self, ext: Option<crate::options::ExternalJournal>) {
        self.external_journal = ext;
    }

    /// The journal device given with `-j`.
    pub(crate) fn external_journal(&self) -> Option<crate::options::ExternalJournal> {
        self.external_journal.clone()
    }

    /// Pass 0: the journal is the reserved inode (the superblock named a
    /// wrong one).
    pub(crate) fn journal_is_reserved_inode(&mut self) {
        self.journal_ino = ext4r_format::inode::ino::JOURNAL;
    }

    /// Pass 0: the journal inode is bad and its copy in the superblock
    /// serves (pass 1 leaves the inode alone).
    pub(crate) fn journal_from_backup(&mut self) {
        self.journal_backup = true;
    }

    /// The journal's inode as pass 0 found it.
    pub(crate) fn journal_ino(&self) -> u32 {
        self.journal_ino
    }

    /// Whether `ino` is the journal inode whose copy in the superblock
    /// serves ([`Ctx::journal_from_backup`]).
    pub(crate) fn journal_backup_serves(&self, ino: u32) -> bool {
        self.journal_backup && ino == self.journal_ino
    }

    /// Pass 1: an indexed block-mapped directory whose illegal pointers
    /// past its last block a repair clears (inode, blocks mapped, highest
    /// illegal logical block plus one), for pass 2.
    pub(crate) fn note_htree_tail(&mut self, tail: (u32, u64, u64)) {
        self.htree_tails.push(tail);
    }

    /// What [`Ctx::note_htree_tail`] noted, taken (pass 2).
    pub(crate) fn take_htree_tails(&mut self) -> Vec<(u32, u64, u64)> {
        std::mem::take(&mut self.htree_tails)
    }

    /// Links pass 3A took from inode `ino`'s count with the entries it
    /// cleared.
    pub(crate) fn link_drops(&self, ino: u32) -> u16 {
        self.link_drops.get(&ino).copied().unwrap_or(0)
    }

    /// Links a repair of this check adds to inode `ino`'s stored count
    /// before pass 4's (lost+found's `..` in the root, as e2fsck's
    /// `e2fsck_adjust_inode_count`).
    pub(crate) fn link_adds(&self, ino: u32) -> u16 {
        self.link_adds.get(&ino).copied().unwrap_or(0)
    }

    /// A repair of this check adds a link to inode `ino`'s stored count.
    pub(crate) fn add_link(&mut self, ino: u32) {
        *self.link_adds.entry(ino).or_insert(0) += 1;
    }

    /// Whether pass 3A took a link from inode `ino`'s count.
    pub(crate) fn link_dropped(&self, ino: u32) -> bool {
        self.link_drops.contains_key(&ino)
    }

    /// Pass 3A takes one more link from inode `ino`'s count.
    pub(crate) fn drop_link(&mut self, ino: u32) {
        *self.link_drops.entry(ino).or_insert(0) += 1;
    }

    /// Pass 1: inode `ino` is named as an EA inode but lacks the flag.
    pub(crate) fn note_ea_flag_missing(&mut self, ino: u32) {
        self.ea_flag_missing.push(ino);
    }

    /// Whether inode `ino` was named as an EA inode lacking the flag.
    pub(crate) fn ea_flag_missing(&self, ino: u32) -> bool {
        self.ea_flag_missing.contains(&ino)
    }

    /// Whether pass 4 counts every inode as it is: no link taken by pass
    /// 3A or added by a repair (lost+found's `..`), no EA inode lacking
    /// its flag.
    pub(crate) fn counts_as_found(&self) -> bool {
        self.ea_flag_missing.is_empty() && self.link_drops.is_empty() && self.link_adds.is_empty()
    }

    /// The encryption policy of inode `ino` (see [`Ctx::set_policy`]).
    pub(crate) fn policy_of(&self, ino: u32) -> Option<u32> {
        self.enc_policy.get(&ino).copied()
    }

    /// Pass 1: inode `ino` is encrypted with policy `key`.
    pub(crate) fn set_policy(&mut self, ino: u32, key: Vec<u8>) {
        let id = self.policy_id(key);
        self.enc_policy.insert(ino, id);
    }

    /// Pass 2 notes where it first meets each of `inodes` (the inodes
    /// pass 1's findings name by path).
    pub(crate) fn want_q_dirs(&mut self, inodes: Vec<u32>) {
        self.q_dirs = inodes.into_iter().map(|i| (i, 0)).collect();
    }

    /// Pass 2 meets inode `target` in directory `dir`: noted when it is
    /// wanted and met for the first time.
    pub(crate) fn met_in(&mut self, target: u32, dir: u32) {
        if !self.q_dirs.is_empty() {
            if let Some(first) = self.q_dirs.get_mut(&target).filter(|f| **f == 0) {
                *first = dir;
            }
        }
    }

    /// Where pass 2 first met each wanted inode (0: not met), taken.
    pub(crate) fn take_q_dirs(&mut self) -> std::collections::HashMap<u32, u32> {
        std::mem::take(&mut self.q_dirs)
    }

    /// Whether some quota type's usage is counted.
    pub(crate) fn counts_quota(&self) -> bool {
        self.quota.iter().any(Option::is_some)
    }

    /// The usage counted for quota type `t`, when it is counted.
    pub(crate) fn quota_usage(
        &mut self,
        t: usize,
    ) -> Option<&mut BTreeMap<u32, ext4r::quota::Usage>> {
        self.quota.get_mut(t).and_then(Option::as_mut)
    }

    /// The usage counted for quota type `t`, taken.
    pub(crate) fn take_quota_usage(
        &mut self,
        t: usize,
    ) -> Option<BTreeMap<u32, ext4r::quota::Usage>> {
        self.quota.get_mut(t).and_then(Option::take)
    }

    /// The shared xattr block `blk` as met so far.
    pub(crate) fn xattr_block(&self, blk: u64) -> Option<&XattrBlock> {
        self.xattr_blocks.get(&blk)
    }

    /// The shared xattr block `blk`, to count one more user.
    pub(crate) fn xattr_block_mut(&mut self, blk: u64) -> Option<&mut XattrBlock> {
        self.xattr_blocks.get_mut(&blk)
    }

    /// Pass 1 meets xattr block `blk` for the first time.
    pub(crate) fn add_xattr_block(&mut self, blk: u64, x: XattrBlock) {
        self.xattr_blocks.insert(blk, x);
    }

    /// Every xattr block met, by block.
    pub(crate) fn xattr_blocks(&self) -> impl Iterator<Item = (&u64, &XattrBlock)> {
        self.xattr_blocks.iter()
    }

    /// Every claim made, for pass 5 to sort out (none are left).
    pub(crate) fn take_claims(&mut self) -> crate::claims::Claims {
        std::mem::take(&mut self.claims)
    }

    /// Watches `flag`, the caller's stop request (see
    /// [`Ctx::poll_cancel`]).
    pub(crate) fn watch_cancel(
        &mut self,
        flag: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) {
        self.cancel = flag;
    }

    /// The stop request was seen: the check ended early.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancelled
    }

    /// The bad block inode's tree looked corrupted (see `bb_tree`).
    pub(crate) fn mark_bb_corrupt(&mut self) {
        self.bb_corrupt = true;
    }

    /// Whether [`Ctx::mark_bb_corrupt`] was called.
    pub(crate) fn bb_corrupt(&self) -> bool {
        self.bb_corrupt
    }

    /// The number standing for encryption policy `key` (one per distinct
    /// policy, in the order met).
    pub(crate) fn policy_id(&mut self, key: Vec<u8>) -> u32 {
        // At most one per inode: below 2^32.
        let next = ext4r_format::num::sat_u32(self.enc_policy_ids.len());
        *self.enc_policy_ids.entry(key).or_insert(next)
    }

    /// Pass 1 met a regular file of 2 GiB or more.
    pub(crate) fn count_large_file(&mut self) {
        self.large_files += 1;
    }

    /// Pass 1 met an indexed directory of 2 GiB or more.
    pub(crate) fn count_large_dir(&mut self) {
        self.large_dirs += 1;
    }

    /// Whether pass 1 met (large files, large directories).
    pub(crate) fn any_large(&self) -> (bool, bool) {
        (self.large_files > 0, self.large_dirs > 0)
    }

    /// Pass 1: the inode being checked fails its checksum, said once its
    /// other checks are done ([`Ctx::take_csum_due`]).
    pub(crate) fn csum_due(&mut self) {
        self.csum_due = true;
    }

    /// Whether [`Ctx::csum_due`] was said for the inode, cleared.
    pub(crate) fn take_csum_due(&mut self) -> bool {
        std::mem::take(&mut self.csum_due)
    }

    /// Inode 7 is invalid: recreated at the end of pass 1.
    pub(crate) fn recreate_resize_inode(&mut self) {
        self.resize_recreate = true;
    }

    /// Whether [`Ctx::recreate_resize_inode`] was asked for.
    pub(crate) fn resize_recreate(&self) -> bool {
        self.resize_recreate
    }

    /// Pass 3 found nothing sound for pass 4 to count (no root).
    pub(crate) fn skip_to_pass5(&mut self) {
        self.skip_to_pass5 = true;
    }

    /// Whether pass 4 is skipped ([`Ctx::skip_to_pass5`]).
    pub(crate) fn skips_pass4(&self) -> bool {
        self.skip_to_pass5
    }

    /// An entry named `len` bytes long goes into lost+found (passes 3
    /// and 4).
    pub(crate) fn note_reconnect(&mut self, len: usize) {
        self.reconnects.push(len);
    }

    /// The name lengths [`Ctx::note_reconnect`] noted, taken.
    pub(crate) fn take_reconnects(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.reconnects)
    }

    /// Whether the check is to stop because the caller asked (e2fsck's
    /// `E2F_FLAG_CANCEL`, looked at where its passes look): once seen, the
    /// pass in progress stops as on an abort and no later pass runs.
    pub(crate) fn poll_cancel(&mut self) -> bool {
        if !self.cancelled
            && self
                .cancel
                .as_ref()
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
        {
            self.cancelled = true;
            self.abort = true;
        }
        self.cancelled
    }

    /// A context for a pass-1 worker thread: this check's filesystem and
    /// settings, nothing found yet. Its findings for a stretch of inodes
    /// are taken with [`Ctx::take_found`] and added here with
    /// [`Ctx::absorb`]; the state that one inode's check leaves for the
    /// next (shared xattr blocks, encryption policies, the bad block list)
    /// stays here, as pass 1 checks the inodes that touch it itself.
    pub(crate) fn worker(&self) -> Ctx {
        Ctx {
            fs: self.fs.clone(),
            sb: self.sb.clone(),
            geo: self.geo.clone(),
            p: Problems::uncapped(),
            notes: Vec::new(),
            abort: false,
            cancel: None,
            cancelled: false,
            fatal: None,
            fatal_journal: false,
            bb_corrupt: self.bb_corrupt,
            groups: self.groups.clone(),
            enc_policy: std::collections::HashMap::new(),
            enc_policy_ids: std::collections::HashMap::new(),
            now: self.now,
            forced: self.forced,
            journal_ino: self.journal_ino,
            journal_backup: self.journal_backup,
            restart: false,
            found: InodeFindings::default(),
            xattr_blocks: BTreeMap::new(),
            claims: crate::claims::Claims::default(),
            reserved: self.reserved.clone(),
            worker: true,
            lost_found_replaced: self.lost_found_replaced,
            planned_blocks: Vec::new(),
            planned_inodes: Vec::new(),
            large_files: 0,
            large_dirs: 0,
            htree_tails: Vec::new(),
            link_adds: std::collections::HashMap::new(),
            link_drops: std::collections::HashMap::new(),
            ea_flag_missing: Vec::new(),
            reconnects: Vec::new(),
            relocate: Vec::new(),
            skip_to_pass5: false,
            resize_recreate: false,
            external_journal: None,
            repairing: self.repairing,
            bad_blocks: self.bad_blocks.clone(),
            stats: Summary::default(),
            quota: crate::quota_usage::counters(&self.sb),
            threads: 1,
            optimize_extents: self.optimize_extents,
            q_dirs: std::collections::HashMap::new(),
            csum_due: false,
        }
    }

    /// What a worker context found since the last call (see
    /// [`Ctx::worker`]).
    pub(crate) fn take_found(&mut self) -> Found {
        // Whatever else a check of an inode may touch is the merging
        // thread's (the inodes that touch it are checked there).
        debug_assert!(
            self.xattr_blocks.is_empty()
                && self.enc_policy.is_empty()
                && self.relocate.is_empty()
                && self.notes.is_empty()
                && !self.abort
                && !self.restart
                && !self.resize_recreate
                && self.fatal.is_none(),
            "a pass-1 worker touched state shared between inodes"
        );
        Found {
            p: std::mem::replace(&mut self.p, Problems::uncapped()),
            found: std::mem::take(&mut self.found),
            claims: std::mem::take(&mut self.claims),
            large_files: std::mem::take(&mut self.large_files),
            large_dirs: std::mem::take(&mut self.large_dirs),
            htree_tails: std::mem::take(&mut self.htree_tails),
            ea_flag_missing: std::mem::take(&mut self.ea_flag_missing),
            stats: std::mem::take(&mut self.stats),
            quota: std::mem::replace(&mut self.quota, crate::quota_usage::counters(&self.sb)),
            planned_blocks: std::mem::take(&mut self.planned_blocks),
        }
    }

    /// Adds what a worker found for a stretch of inodes, as if this
    /// context had checked them (in inode order, after everything it has
    /// checked so far).
    pub(crate) fn absorb(&mut self, f: Found) {
        self.p.absorb(f.p);
        self.found.append(f.found);
        self.claims.absorb(f.claims);
        self.large_files += f.large_files;
        self.large_dirs += f.large_dirs;
        self.htree_tails.extend(f.htree_tails);
        self.ea_flag_missing.extend(f.ea_flag_missing);
        self.planned_blocks.extend(f.planned_blocks);
        add_counts(&mut self.stats, &f.stats);
        for (mine, theirs) in self.quota.iter_mut().zip(f.quota) {
            if let (Some(m), Some(t)) = (mine, theirs) {
                for (id, u) in t {
                    let e = m.entry(id).or_default();
                    e.space = e.space.wrapping_add(u.space);
                    e.inodes = e.inodes.wrapping_add(u.inodes);
                }
            }
        }
    }

    /// The summary as e2fsck's show_stats gives it: files and blocks in
    /// use as the superblock says (what a repair has set, the counts as
    /// found under `-n`, which pass 5 reports when they are wrong), the
    /// rest as counted.
    pub(crate) fn summary(&self) -> Summary {
        let mut s = self.stats.clone();
        let sb = sb_used(&self.sb);
        s.inodes_count = sb.inodes_count;
        s.inodes_used = sb.inodes_used;
        s.blocks_count = sb.blocks_count;
        s.blocks_used = sb.blocks_used;
        s
    }
}

/// Adds `theirs` to `mine`, count by count (named one by one, so that a
/// new count cannot be left out).
fn add_counts(mine: &mut Summary, theirs: &Summary) {
    let Summary {
        inodes_used,
        inodes_count,
        blocks_used,
        blocks_count,
        regular,
        directories,
        symlinks,
        fast_symlinks,
        devices,
        fifos,
        sockets,
        multiply_linked,
        fragmented,
        deep_extents,
    } = *theirs;
    let s = mine;
    for (mine, theirs) in [
        (&mut s.inodes_used, inodes_used),
        (&mut s.inodes_count, inodes_count),
        (&mut s.blocks_used, blocks_used),
        (&mut s.blocks_count, blocks_count),
        (&mut s.regular, regular),
        (&mut s.directories, directories),
        (&mut s.symlinks, symlinks),
        (&mut s.fast_symlinks, fast_symlinks),
        (&mut s.devices, devices),
        (&mut s.fifos, fifos),
        (&mut s.sockets, sockets),
        (&mut s.multiply_linked, multiply_linked),
        (&mut s.fragmented, fragmented),
        (&mut s.deep_extents, deep_extents),
    ] {
        *mine += theirs;
    }
}

/// The summary line's counts from the superblock alone (for a filesystem
/// found clean without a check).
pub(crate) fn summary_from_superblock(fs: &Filesystem) -> Summary {
    sb_used(fs.superblock())
}

/// Files and blocks in use as the superblock's counts say, subtracted as
/// e2fsck subtracts them (in 32 and 64 bits, wrapping: a free count past
/// the total shows as a huge number in use, as e2fsck shows it).
fn sb_used(sb: &ext4r_format::superblock::Superblock) -> Summary {
    let inodes = sb.s_inodes_count.get();
    Summary {
        inodes_used: u64::from(inodes.wrapping_sub(sb.s_free_inodes_count.get())),
        inodes_count: u64::from(inodes),
        blocks_used: sb.blocks_count().wrapping_sub(sb.free_blocks_count()),
        blocks_count: sb.blocks_count(),
        ..Summary::default()
    }
}

/// What pass 0 finds of the groups' metadata, for the later passes.
impl Ctx {
    /// Pass 0: group `g`'s `meta` lies outside the group: it is relocated
    /// (without copying the old place); a misplaced bitmap is not compared
    /// in pass 5, a misplaced inode table is not read.
    pub(crate) fn misplaced(&mut self, g: u32, meta: crate::fix::plan::Meta) {
        use crate::fix::plan::Meta;
        self.relocate.push((g, meta, false));
        let slot = &mut self.groups.unusable_bitmaps[g as usize];
        match meta {
            Meta::BlockBitmap => slot.0 = true,
            Meta::InodeBitmap => slot.1 = true,
            Meta::InodeTable => self.groups.table_misplaced = true,
        }
    }

    /// Pass 0: group `g`'s inode table is unusable: its inodes are not
    /// read, as e2fsck's scan skips a table it found invalid.
    pub(crate) fn mark_table_unusable(&mut self, g: u32) {
        self.groups.unusable_table[g as usize] = true;
    }

    /// What pass 0 found of the groups' metadata.
    pub(crate) fn groups(&self) -> &GroupFindings {
        &self.groups
    }

    /// Group `g`'s flags and unused inodes are taken as `s` from now on
    /// (a fix changes them, or they cannot be obeyed).
    pub(crate) fn set_group_state(&mut self, g: u32, s: GroupState) {
        if let Some(slot) = self.groups.states.get_mut(g as usize) {
            *slot = s;
        }
    }

    /// Group `g`'s `meta` is to be moved in pass 5, its old place copied
    /// when `copy` (a conflict or a bad block: e2fsck's "Relocating ...
    /// from X to Y").
    pub(crate) fn relocate_later(&mut self, g: u32, meta: crate::fix::plan::Meta, copy: bool) {
        self.relocate.push((g, meta, copy));
    }

    /// Whether group `g`'s `meta` is already to be moved.
    pub(crate) fn relocating(&self, g: u32, meta: crate::fix::plan::Meta) -> bool {
        self.relocate.iter().any(|r| (r.0, r.1) == (g, meta))
    }

    /// Whether anything is to be moved.
    pub(crate) fn any_relocation(&self) -> bool {
        !self.relocate.is_empty()
    }

    /// What is to be moved, taken to plan the moves.
    pub(crate) fn take_relocations(&mut self) -> Vec<(u32, crate::fix::plan::Meta, bool)> {
        std::mem::take(&mut self.relocate)
    }

    /// Whether this is a pass-1 worker's context ([`Ctx::worker`]), whose
    /// claims are those of its own inodes: a block free by them may be
    /// another worker's, so it plans no new block (see
    /// `lost_found::reserve_blocks`).
    pub(crate) fn is_worker(&self) -> bool {
        self.worker
    }

    /// Free blocks a repair planned in this check takes: kept from later
    /// plans (see [`Ctx::usage_map`]).
    pub(crate) fn reserve(&mut self, blocks: impl IntoIterator<Item = u64>) {
        self.reserved.extend(blocks);
    }

    /// A repair of this check takes (`used`) or frees block `b` with the
    /// allocation statistics (bit and free counts, whatever the bit was),
    /// as the writer's `alloc_stats_block` does it.
    pub(crate) fn plan_block(&mut self, b: u64, used: bool) {
        self.planned_blocks.push((b, used));
    }

    /// What [`Ctx::plan_block`] planned.
    pub(crate) fn planned_blocks(&self) -> &[(u64, bool)] {
        &self.planned_blocks
    }

    /// A repair of this check takes (`used`) or frees inode `ino` (a
    /// directory: `dir`) with the allocation statistics.
    pub(crate) fn plan_inode(&mut self, ino: u32, used: bool, dir: bool) {
        self.planned_inodes.push((ino, used, dir));
    }

    /// What [`Ctx::plan_inode`] planned.
    pub(crate) fn planned_inodes(&self) -> &[(u32, bool, bool)] {
        &self.planned_inodes
    }

    /// Pass 3: the /lost+found on disk is unlinked or a new one made in
    /// this round's repair.
    pub(crate) fn lost_found_replaced(&mut self) {
        self.lost_found_replaced = true;
    }

    /// Whether [`Ctx::lost_found_replaced`] was said: the directory on
    /// disk is not the one to plan room in.
    pub(crate) fn is_lost_found_replaced(&self) -> bool {
        self.lost_found_replaced
    }
}

/// What pass 1 finds for the later passes, and what pass 2 adds to it.
impl Ctx {
    /// Pass 1: the bad block list (inode 1's data blocks), sorted.
    pub(crate) fn set_bad_blocks(&mut self, list: Vec<u64>) {
        self.bad_blocks = list;
    }

    /// The bad block list, sorted.
    pub(crate) fn bad_blocks(&self) -> &[u64] {
        &self.bad_blocks
    }

    /// The in-use inodes pass 1 found, with the names found for them so
    /// far (see [`crate::inode_map`]).
    pub(crate) fn inodes(&self) -> &Inodes {
        &self.found.inodes
    }

    /// The names counted for the in-use inodes, to count more on other
    /// threads (pass 2's readers; pass 1 is over).
    pub(crate) fn name_counts(&mut self) -> std::sync::Arc<crate::inode_map::Names> {
        self.found.inodes.names()
    }

    /// Pass 1: inode `ino` is in use (counted 0 names).
    pub(crate) fn add_inode(&mut self, ino: u32, links: u16, kind: FileKind, ea_inode: bool) {
        self.found.inodes.insert(ino, links, kind, ea_inode);
    }

    /// An entry naming inode `target` is found (counted for pass 4).
    pub(crate) fn name_found(&mut self, target: u32) {
        self.found.inodes.add_name(target);
    }

    /// A name counted for inode `target` is taken back (its entry is
    /// cleared, or counted again).
    pub(crate) fn name_dropped(&mut self, target: u32) {
        self.found.inodes.remove_name(target);
    }

    /// Pass 1: in-use inode `ino` lies outside the tree (journal, quota,
    /// orphan file) at or past `s_first_ino`, for the inode bitmap.
    pub(crate) fn note_extra_used(&mut self, ino: u32) {
        self.found.extra_used.push(ino);
    }

    /// What [`Ctx::note_extra_used`] noted.
    pub(crate) fn extra_used(&self) -> &[u32] {
        &self.found.extra_used
    }

    /// Pass 1: the EA inodes an inode's xattrs keep values in (repeats
    /// kept: pass 4 counts the references to each).
    pub(crate) fn add_ea_refs(&mut self, refs: Vec<u32>) {
        self.found.ea_refs.extend(refs);
    }

    /// Pass 1 is over: the EA inode references are sorted for lookups.
    pub(crate) fn sort_ea_refs(&mut self) {
        self.found.ea_refs.sort_unstable();
    }

    /// The EA inode references (sorted once pass 1 is over).
    pub(crate) fn ea_refs(&self) -> &[u32] {
        &self.found.ea_refs
    }

    /// The directories pass 1 found, by inode number.
    pub(crate) fn dirs(&self) -> &[DirInfo] {
        &self.found.dirs
    }

    /// [`Ctx::dirs`], shared with pass 2's reader threads.
    pub(crate) fn shared_dirs(&self) -> std::sync::Arc<Vec<DirInfo>> {
        self.found.dirs.clone()
    }

    /// What passes 2 and 3 learnt of directory `d` (an index in
    /// [`Ctx::dirs`]).
    pub(crate) fn links(&self, d: usize) -> DirLinks {
        self.found.dir_links[d]
    }

    /// Directory `d`'s `..` entry names `target`; the entry is at
    /// (`block`, `offset`).
    pub(crate) fn found_dotdot(&mut self, d: usize, target: u32, block: u64, offset: usize) {
        let l = &mut self.found.dir_links[d];
        l.dotdot = target;
        l.set_dotdot_at(block, offset);
    }

    /// Directory `d` is named by an entry of directory `parent`.
    pub(crate) fn found_parent(&mut self, d: usize, parent: u32) {
        self.found.dir_links[d].parent = parent;
    }

    /// Pass 1: a directory block for pass 2 to read.
    pub(crate) fn add_dir_block(&mut self, b: DirBlock) {
        self.found.dir_blocks.push(b);
    }

    /// The directory blocks to read, taken (pass 2, then pass 3A).
    pub(crate) fn take_dir_blocks(&mut self) -> Vec<DirBlock> {
        std::mem::take(&mut self.found.dir_blocks)
    }

    /// Pass 2: the blocks of the directories to rebuild, for pass 3A to
    /// read again.
    pub(crate) fn keep_dir_blocks(&mut self, blocks: Vec<DirBlock>) {
        self.found.dir_blocks = blocks;
    }

    /// Directory `ino` is to be rebuilt in pass 3A.
    pub(crate) fn rehash(&mut self, ino: u32) {
        self.found.rehash_dirs.insert(ino);
    }

    /// Whether directory `ino` is to be rebuilt in pass 3A.
    pub(crate) fn rehashes(&self, ino: u32) -> bool {
        self.found.rehash_dirs.contains(&ino)
    }

    /// The directories to rebuild in pass 3A (e2fsck's `dirs_to_hash`),
    /// in inode order.
    pub(crate) fn rehash_dirs(&self) -> &std::collections::BTreeSet<u32> {
        &self.found.rehash_dirs
    }

    /// Keeps to rebuild only the directories `keep` says yes to.
    pub(crate) fn rehash_only(&mut self, keep: impl FnMut(&u32) -> bool) {
        self.found.rehash_dirs.retain(keep);
    }

    /// Keeps to rebuild only what pass 1 found to be a directory; the
    /// directories left, in inode order.
    pub(crate) fn rehash_only_dirs(&mut self) -> Vec<u32> {
        let inodes = &self.found.inodes;
        self.found.rehash_dirs.retain(|&ino| inodes.is_dir(ino));
        self.found.rehash_dirs.iter().copied().collect()
    }
}

impl Ctx {
    /// The state of group `g` (all initialised when out of range).
    pub(crate) fn group_state(&self, g: u32) -> GroupState {
        self.groups.state(g)
    }

    /// How many inodes of group `g`'s table are read (from its start).
    pub(crate) fn inodes_to_read(&self, g: u32) -> u32 {
        let s = self.group_state(g);
        if s.inode_uninit {
            0
        } else {
            self.geo.inodes_per_group.saturating_sub(s.itable_unused)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DirLinks;

    /// Passes 2 and 3 keep one of each per directory (e2fsck's dir_info
    /// is 12 bytes; ours carries what pass 2 needs to read the blocks
    /// too), and pass 2 one block record per directory block.
    #[test]
    fn dir_record_sizes() {
        assert_eq!(std::mem::size_of::<super::DirInfo>(), 12);
        assert_eq!(std::mem::size_of::<DirLinks>(), 16);
        assert_eq!(std::mem::size_of::<super::DirBlock>(), 20);
    }

    #[test]
    fn dotdot_places_round_trip_and_the_impossible_are_unknown() {
        let mut l = DirLinks::default();
        assert_eq!(l.dotdot_at(), None);
        for (block, off) in [(1, 0), (0xffff_ffff, 12), (0xffff_ffff_ffff, 65_532)] {
            l.set_dotdot_at(block, off);
            assert_eq!(l.dotdot_at(), Some((block, off)));
        }
        for (block, off) in [(0, 12), (1 << 48, 12), (7, 65_536)] {
            l.set_dotdot_at(block, off);
            assert_eq!(l.dotdot_at(), None, "{block} {off}");
        }
    }
}
