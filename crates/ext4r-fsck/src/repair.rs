//! Repair runs (`-y`, `-p`, interactive): replay the journal, then check
//! and apply the fixes the problems carry, round after round, until a
//! check finds nothing more this version can fix; then mark the
//! filesystem checked.

use crate::codes::ProblemCode;
use std::sync::Arc;

use ext4r::device::BlockDevice;
use ext4r::fs::{Filesystem, OpenOptions};
use ext4r::journal::Journal;
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::superblock::Superblock;

use crate::check::check_kept;
use crate::error::Error;
use crate::fix::Fix;
use crate::observe::{Action, Forced, Observer, Quiet};
use crate::options::Options;
use crate::problem::{Problem, Seen};
use crate::report::Report;
use crate::writer;

/// Rounds of check-and-fix before giving up on convergence.
const MAX_ROUNDS: usize = 7;

/// How much to repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `-y`: everything this version knows how to fix.
    Yes,
    /// `-p`: only what e2fsck fixes without asking; anything else stops the
    /// run ("UNEXPECTED INCONSISTENCY").
    Preen,
}

/// The answer to one repair question, as e2fsck's `ask_yn` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Fix this problem.
    Yes,
    /// Leave it: nothing is written for it, and an error left counts.
    No,
    /// Fix this one and every later one without asking (e2fsck's "a").
    All,
}

/// Decides, problem by problem, whether to fix it: the interactive run's
/// questions, asked by the caller (a terminal, or a script in tests).
pub type Ask<'a> = &'a mut dyn FnMut(&Problem) -> Answer;

/// Who decides which fixes are made.
enum Policy<'a> {
    Yes,
    Preen,
    Ask(Ask<'a>),
}

/// The outcome of a repair run.
#[derive(Debug)]
pub struct RepairReport {
    /// The journal was replayed (its transaction range).
    pub journal_replayed: Option<(u32, u32)>,
    /// What the replay did, fast commits included (the first replay of
    /// the run).
    pub journal: Option<crate::observe::JournalRecovered>,
    /// Orphan inodes released before the check (deleted or taken off
    /// the orphan list), as e2fsck's "Clearing orphaned inode".
    pub orphans_released: Vec<u32>,
    /// The problems that were fixed, in the order found.
    pub fixed: Vec<Problem>,
    /// The problems whose fix was declined (interactive runs), in the
    /// order asked; nothing was written for them.
    pub declined: Vec<Problem>,
    /// The final check (what is left).
    pub last: Report,
    /// A preen run stopped at a problem it may not fix alone.
    pub preen_stopped: Option<Problem>,
    /// The superblock said "not clean" and now says clean (e2fsck counts
    /// that as a change: exit 1).
    pub marked_valid: bool,
    /// The run stopped because [`Options::cancel`] was set (e2fsck's
    /// SIGINT/SIGTERM): what earlier rounds fixed stays, nothing of the
    /// round cut short is applied, and the superblock's state, check time
    /// and mount count are left as they were.
    pub cancelled: bool,
    /// The superblock's state says errors (`EXT2_ERROR_FS`) as the run
    /// leaves it: set by the kernel and not cleared (a run that did not
    /// finish), or set by a preen run that stopped.
    pub errors_flagged: bool,
    /// A journal found invalid was deleted and a new one made: its size
    /// in blocks, or why it could not be made.
    pub journal_recreated: Option<std::result::Result<u64, ext4r::journal_create::JournalError>>,
    /// Directories whose hash index was rebuilt (pass 3A: those whose
    /// index was cleared, or all of them under `-D`).
    pub rehashed: Vec<u32>,
}

impl RepairReport {
    /// fsck(8)'s exit code: 0 nothing to do, 1 fixed, 4 errors left (also
    /// when some were fixed: e2fsck drops the "modified" bit then), 8 the
    /// check stopped (12 with errors left), 32
    /// cancelled (with 4 when the superblock says errors or a fix was
    /// declined, as e2fsck's "still has errors" after a cancel).
    pub fn exit_code(&self) -> u8 {
        let changed = self.modified();
        if self.cancelled {
            let left = self.errors_flagged || !self.declined.is_empty();
            32 | if left { 4 } else { 0 }
        } else if self.last.fatal.is_some() {
            // As e2fsck's fatal_error: 4 more when what stopped it is
            // an error left.
            8 | if self.last.has_errors() { 4 } else { 0 }
        } else if self.last.has_errors() || self.preen_stopped.is_some() {
            4
        } else {
            u8::from(changed)
        }
    }

    /// Whether e2fsck would say "***** FILE SYSTEM WAS MODIFIED *****":
    /// its filesystem handle was marked changed after the last (re)open,
    /// by a fix that writes (not the descriptor fixes made while the
    /// superblock is checked, see [`RepairReport::modified`]), a released
    /// orphan, a rebuilt directory or a new journal. A journal replay
    /// alone does not count (e2fsck reopens the filesystem after it), nor
    /// does marking the filesystem valid (exit 1 without the message).
    pub fn changed(&self) -> bool {
        !self.rehashed.is_empty()
            || !self.orphans_released.is_empty()
            || self.journal_recreated.is_some()
            || self.fixed.iter().any(|p| p.fix.is_some() && !quiet_fix(p))
    }

    /// Whether the run counts as having modified the filesystem (exit 1),
    /// as e2fsck counts it. A journal replay alone does not (e2fsck
    /// restarts on the recovered filesystem), nor do descriptor fixes made
    /// while the superblock is checked: e2fsck changes those in memory
    /// without marking the filesystem changed, and they reach the disk
    /// with the final superblock write. Nor does a directory rebuilt in
    /// pass 3A alone: e2fsck's exit 1 needs a problem fixed
    /// (`E2F_FLAG_PROBLEMS_FIXED`), and its pass 3A asks nothing; it says
    /// "FILE SYSTEM WAS MODIFIED" and exits 0 (see [`RepairReport::changed`]).
    ///
    /// Nor do pass 1E's extent trees rebuilt for their shape alone
    /// (e2fsck's PR_NOT_A_FIX: "FILE SYSTEM WAS MODIFIED", exit 0).
    pub fn modified(&self) -> bool {
        self.marked_valid
            || self
                .fixed
                .iter()
                .any(|p| p.fix.is_some() && !quiet_fix(p) && !not_a_fix(p.code))
    }
}

/// Problems e2fsck marks PR_NOT_A_FIX: answering yes does not count as a
/// problem fixed (its exit code).
fn not_a_fix(code: ProblemCode) -> bool {
    matches!(
        code,
        ProblemCode::PR_1E_CAN_COLLAPSE_EXTENT_TREE | ProblemCode::PR_1E_CAN_NARROW_EXTENT_TREE
    )
}

/// Fixes that e2fsck's `check_super_block` makes to a group descriptor
/// (flags, unused inode count, then its checksum) without marking the
/// filesystem changed; and the superblock's touch-ups, but for the
/// journal's backup in it, which e2fsck makes once the superblock is
/// checked (`e2fsck_move_ext3_journal`) and marks as a change.
///
/// And the fixes pass 1 makes inside a block of a file's map alone (an
/// extent block's checksum or an entry other than its first removed, an
/// indirect block's pointer cleared): libext2fs writes those through the
/// I/O channel, which does not mark the filesystem changed, where an
/// inode write or a bitmap or superblock made dirty does. Removing a
/// node's first entry moves its parent's start, up to the inode.
fn quiet_fix(p: &Problem) -> bool {
    let code = p.code;
    match p.fix {
        Some(Fix::ExtentBlockChecksum(..) | Fix::IndirectEntry(..)) => return true,
        Some(Fix::ExtentRemove(_, Some(_), i, _)) if i > 0 => return true,
        _ => {}
    }
    matches!(
        code,
        ProblemCode::PR_0_GDT_CSUM
            | ProblemCode::PR_0_GDT_UNINIT
            | ProblemCode::PR_0_BB_UNINIT_LAST
            | ProblemCode::PR_0_GDT_ITABLE_UNUSED
            | ProblemCode::PR_0_FREE_INODE_COUNT
            | ProblemCode::PR_0_FREE_BLOCK_COUNT
    ) || (crate::super_rules::cosmetic(code) && code != ProblemCode::PR_0_BACKUP_JNL)
}

/// Problems e2fsck fixes under `-p` without stopping (see
/// [`crate::codes::preen_ok`]).
fn preen_ok(code: ProblemCode) -> bool {
    crate::codes::preen_ok(code)
}

/// Repairs the filesystem on `dev`. An `mmp` filesystem is taken under
/// multiple-mount protection first, as e2fsck takes it (see
/// `ext4r_txn::mmp`): the run waits twice the check interval and a
/// second, holds e2fsck's sequence in the MMP block while it works, and
/// writes the clean one at the end. A damaged MMP block is not taken but
/// repaired by the check (e2fsck then takes it in a second open; this
/// run goes on unprotected).
///
/// # Errors
/// [`Error::Open`] when the filesystem cannot be opened at all — with
/// `ext4r::Error::MmpInUse` when another host, a mount or e2fsck holds it
/// — or an I/O error while writing.
pub fn repair(
    dev: Arc<dyn BlockDevice>,
    opts: &Options,
    mode: Mode,
    journal_only: bool,
    obs: &mut dyn Observer,
) -> Result<RepairReport, Error> {
    let policy = match mode {
        Mode::Yes => Policy::Yes,
        Mode::Preen => Policy::Preen,
    };
    run(dev, opts, policy, journal_only, obs)
}

/// Marks the filesystem on `dev` as having errors (`EXT2_ERROR_FS` in the
/// superblock's state, nothing else changed), as e2fsck's `preenhalt`
/// does when a preen run stops before its passes (a filesystem larger
/// than its device): the next boot's check then is a full one. A preen
/// run that stops in its passes does this itself.
///
/// # Errors
/// The filesystem cannot be opened, or an I/O error writing it.
pub fn preen_halt(dev: Arc<dyn BlockDevice>, now: i64) -> Result<(), Error> {
    state::flag_errors(&dev, now)
}

/// Repairs the filesystem on `dev`, asking `ask` before each fix (e2fsck
/// without `-n`/`-p`/`-y`). A question is asked once per problem; a
/// problem declined stays (and its fix is not written); [`Answer::All`]
/// fixes it and everything after without asking. Problems this version
/// cannot fix are not asked about: they are in the final report.
///
/// # Errors
/// As [`repair`].
pub fn repair_interactive(
    dev: Arc<dyn BlockDevice>,
    opts: &Options,
    journal_only: bool,
    obs: &mut dyn Observer,
    ask: Ask<'_>,
) -> Result<RepairReport, Error> {
    run(dev, opts, Policy::Ask(ask), journal_only, obs)
}

fn run(
    dev: Arc<dyn BlockDevice>,
    opts: &Options,
    policy: Policy<'_>,
    journal_only: bool,
    obs: &mut dyn Observer,
) -> Result<RepairReport, Error> {
    if opts.superblock.is_none() {
        // Before anything is replayed or written.
        crate::backup::refuse_unsupported_primary(&dev)?;
    }
    // Held to the end of the run; dropping it writes the clean sequence.
    let _mmp = claim_mmp(&dev, opts)?;
    let start = start(&dev, opts, &policy, journal_only, obs)?;
    let mut forced = opts.clone();
    forced.full = true;
    forced.repairing = true;
    let mut s = Session {
        dev,
        opts,
        forced,
        obs,
        policy,
        answers: Seen::default(),
        declined: Vec::new(),
        shown: Seen::default(),
        fixed: start.fixed,
        preen_stopped: None,
        journal_replayed: start.journal_replayed,
        current: None,
    };
    let mut forced_why = (start.counts_bad && !opts.force).then_some(Forced::Errors);
    // Without -f a filesystem marked clean is neither checked nor repaired,
    // as e2fsck decides at boot. This first look stops as soon as it knows
    // a full check is due (except for a journal-only run, whose report is
    // the result).
    if journal_only || !opts.force && !start.counts_bad {
        match s.first_look(journal_only)? {
            FirstLook::Ends(last) => {
                return Ok(RepairReport {
                    journal_replayed: s.journal_replayed,
                    journal: start.journal,
                    orphans_released: start.orphans_released,
                    fixed: s.fixed,
                    declined: s.declined,
                    cancelled: last.cancelled,
                    errors_flagged: last.errors_flagged,
                    last: *last,
                    preen_stopped: s.preen_stopped,
                    marked_valid: false,
                    journal_recreated: None,
                    rehashed: Vec::new(),
                });
            }
            FirstLook::Forced(why) => forced_why = why,
        }
    }
    if let Some(why) = &forced_why {
        s.obs.check_forced(why);
    }
    let (mut last, rehashed) = s.check_and_fix()?;
    let journal_recreated = s.recreate_journal(&mut last)?;
    // A stop asked for after the last check still leaves the state alone
    // (e2fsck looks at its cancel flag again before its bookkeeping).
    let cancelled = last.cancelled || state::cancel_requested(opts);
    let end = if cancelled {
        state::End::Cancelled
    } else if last.fatal.is_some() {
        state::End::Aborted
    } else if s.preen_stopped.is_some() {
        state::End::Halted
    } else {
        state::End::Checked {
            valid: !last.has_errors(),
        }
    };
    let recorded = state::record(s.take_current(), end, opts)?;
    Ok(RepairReport {
        journal_replayed: s.journal_replayed,
        journal: start.journal,
        orphans_released: start.orphans_released,
        fixed: s.fixed,
        declined: s.declined,
        errors_flagged: recorded.errors_flagged,
        last,
        preen_stopped: s.preen_stopped,
        marked_valid: recorded.marked_valid,
        journal_recreated,
        rehashed,
        cancelled,
    })
}

/// What a run does before its first check.
struct Start {
    /// What the replay did (the first replay of the run).
    journal: Option<crate::observe::JournalRecovered>,
    journal_replayed: Option<(u32, u32)>,
    /// The summary counts are beyond the totals: the check is forced.
    counts_bad: bool,
    /// Problems fixed so far: an external journal's checksum, orphans.
    fixed: Vec<Problem>,
    orphans_released: Vec<u32>,
}

/// Before the check: the label said, preen's refusal of a primary it
/// cannot open, the journal replayed (an external one first), and the
/// orphans released (said as they go, except by preen).
fn start(
    dev: &Arc<dyn BlockDevice>,
    opts: &Options,
    policy: &Policy<'_>,
    journal_only: bool,
    obs: &mut dyn Observer,
) -> Result<Start, Error> {
    // Opened once before the replay, and once more only when a replay
    // changed the device.
    let opened = open(dev);
    // The label as found before the replay: e2fsck names the filesystem
    // by it from its first open on.
    if let Ok(fs) = &opened {
        obs.opened(&String::from_utf8_lossy(fs.superblock().volume_name()));
    }
    if matches!(policy, Policy::Preen) && opts.superblock.is_none() {
        // e2fsck -p never goes looking for a backup superblock: a primary
        // it cannot open stops the run (exit 8).
        let mut oo = OpenOptions::default();
        // A checker reads what fails its checksum, to report it.
        oo.verify_checksums = false;
        oo.allow_encrypted = true;
        oo.skip_journal_replay = true;
        if let Err(e) = Filesystem::open_with(dev.clone(), oo) {
            return Err(Error::NoFilesystem(e));
        }
    }
    let mut ext_said = Vec::new();
    let journal_replayed = match (&opts.external_journal, &opened) {
        (Some(ext), Ok(fs)) => {
            ext_said.extend(crate::external_journal::fix_checksum(fs.superblock(), ext)?);
            crate::external_journal::replay(dev, fs.superblock(), ext, opts.now)?
        }
        _ => None,
    };
    // e2fsck's PR_0_JOURNAL_RUN: a journal with data but no
    // needs_recovery flag (a writer cut between its checkpoint and its
    // flag) is run anyway under -y; -p stops on it, as e2fsck does.
    let run_anyway = matches!(policy, Policy::Yes);
    // The filesystem as the device holds it now: the first open's, unless
    // a replay wrote the device since.
    let (journal, current) = match journal_replayed {
        Some(r) => (Some(r), None),
        None => {
            let fs = opened?;
            let replayed = replay_journal(dev, &fs, run_anyway, opts.now)?;
            let current = replayed.is_none().then_some(fs);
            (replayed, current)
        }
    };
    if let Some(j) = &journal {
        obs.journal_recovered(j);
    }
    let journal_replayed = journal.as_ref().map(|j| (j.first, j.end));
    let current = match current {
        Some(fs) => Ok(fs),
        None => open(dev),
    };
    // e2fsck judges the summary counts before the orphans are released
    // (which count on from them): beyond the totals, the check is forced.
    let counts_bad = !opts.force && current.as_ref().is_ok_and(counts_beyond_totals);
    let mut fixed = ext_said;
    let orphans_released = match &current {
        // Not openable at all: the check reports why.
        Ok(fs) if !journal_only => release_orphans(fs, &mut fixed, opts.now)?,
        _ => Vec::new(),
    };
    // Said as they are released, before the check (e2fsck releases them
    // while it checks the superblock); preen prints them from the report.
    if !matches!(policy, Policy::Preen) {
        for p in &fixed {
            obs.note(&p.message);
        }
    }
    Ok(Start {
        journal,
        journal_replayed,
        counts_bad,
        fixed,
        orphans_released,
    })
}

/// How the first look of a run not forced ends.
enum FirstLook {
    /// The run ends with this check: a clean filesystem, or a
    /// journal-only run.
    Ends(Box<Report>),
    /// A full check is due, for this reason.
    Forced(Option<Forced>),
}

/// One repair run's conversation with its user and its device: the
/// policy and the answers given, the problems shown, fixed and declined,
/// and where preen stopped.
struct Session<'a, 'o> {
    dev: Arc<dyn BlockDevice>,
    opts: &'o Options,
    /// The options of the rounds' checks: full, repairing.
    forced: Options,
    obs: &'o mut dyn Observer,
    policy: Policy<'a>,
    /// Answers given, by problem: a problem seen again in a later round is
    /// not asked about twice.
    answers: Seen<bool>,
    declined: Vec<Problem>,
    /// Problems already shown (and asked about), by problem: each is
    /// shown once, in the round that first finds it.
    shown: Seen<()>,
    fixed: Vec<Problem>,
    preen_stopped: Option<Problem>,
    journal_replayed: Option<(u32, u32)>,
    /// The filesystem as the last check opened it, while nothing has been
    /// written since: what the round's fixes and the run's bookkeeping are
    /// written through, so that a round opens the device once.
    current: Option<Arc<Filesystem>>,
}

impl Session<'_, '_> {
    /// Keeps the filesystem a check opened as the current one. A check
    /// opened as the options say (a superblock or block size given) is
    /// not the filesystem a repair writes through: then there is none.
    fn checked(&mut self, fs: Arc<Filesystem>) {
        let as_repair = self.opts.superblock.is_none() && self.opts.block_size.is_none();
        self.current = as_repair.then_some(fs);
    }

    /// The filesystem to write through, as the device holds it now: the
    /// last check's, or opened anew. Whoever writes through it makes it
    /// stale: it is no longer current.
    fn take_current(&mut self) -> Result<Arc<Filesystem>, Error> {
        match self.current.take() {
            Some(fs) => Ok(fs),
            None => open(&self.dev).map(Arc::new),
        }
    }

    /// The first look of a run not forced: a check that stops as soon as
    /// it knows a full one is due. On a clean filesystem it makes the
    /// superblock's own touch-ups and ends the run.
    fn first_look(&mut self, journal_only: bool) -> Result<FirstLook, Error> {
        let unforced = Options {
            force: false,
            repairing: true,
            ..self.opts.clone()
        };
        let (mut last, fs) = check_kept(self.dev.clone(), &unforced, &mut Quiet, !journal_only)?;
        self.checked(fs);
        let why = last.check_forced.clone();
        if !journal_only && last.skipped_clean.is_some() {
            // As e2fsck's check_super_block and check_if_skip on a clean
            // filesystem: the superblock's own touch-ups, and its counts
            // taken from the descriptors (the kernel leaves them stale),
            // made without forcing a check.
            let fs = self.take_current()?;
            let mut made: Vec<Problem> = last
                .problems
                .list()
                .iter()
                .filter(|p| p.fix.is_some() && crate::super_rules::cosmetic(p.code))
                .cloned()
                .collect();
            made.extend(descriptor_counts(&fs));
            let fixes: Vec<Fix> = made.iter().filter_map(|p| p.fix.clone()).collect();
            if !fixes.is_empty() {
                writer::apply_at(&fs, &fixes, self.opts.now)?;
                self.fixed.extend(made);
                let (again, fs) = check_kept(self.dev.clone(), &unforced, &mut Quiet, false)?;
                self.checked(fs);
                last = again;
            } else {
                self.current = Some(fs);
            }
        }
        if journal_only || last.skipped_clean.is_some() {
            return Ok(FirstLook::Ends(Box::new(last)));
        }
        Ok(FirstLook::Forced(why))
    }

    /// Rounds of check and fix until a check finds nothing more to fix,
    /// then pass 3A's rebuilt indexes and a check after them (run once
    /// more if the rebuild left errors). Returns the last check and the
    /// directories rebuilt.
    fn check_and_fix(&mut self) -> Result<(Report, Vec<u32>), Error> {
        let mut first_round = true;
        let mut rehashed = Vec::new();
        let mut last;
        // A rebuilt index may bring two entries of one name into one block,
        // found only then (e2fsck renames them during its rehash): the rounds
        // run once more after a rehash that left errors.
        let mut rehash_done = false;
        // The directories the checks found for pass 3A (see `crate::pass3a`).
        let mut scheduled: Vec<u32> = Vec::new();
        loop {
            if let Some(cut) = self.rounds(&mut first_round, &mut scheduled)? {
                last = cut;
                break;
            }
            last = self.check_later()?;
            if last.cancelled
                || rehash_done
                || last.has_errors()
                || last.fatal.is_some()
                || self.preen_stopped.is_some()
            {
                break;
            }
            rehash_done = true;
            scheduled.extend(&last.rehash);
            let fs = self.take_current()?;
            rehashed = rehash(
                &fs,
                self.opts.rehash,
                &self.fixed,
                &scheduled,
                self.opts.now,
            )?;
            if rehashed.is_empty() {
                self.current = Some(fs);
                break;
            }
            // e2fsck counts fragmented files in pass 1, before its pass 3A
            // rebuilds directories: the summary keeps that count.
            let fragmented = last.summary.fragmented;
            last = self.check_later()?;
            last.summary.fragmented = fragmented;
            if last.cancelled || !last.has_errors() || last.fatal.is_some() {
                break;
            }
        }
        Ok((last, rehashed))
    }

    /// Up to [`MAX_ROUNDS`] rounds of check, choose and fix, until a round
    /// has nothing to fix, finds a fatal problem or preen stops; a journal
    /// a round made replayable is replayed before the next. Returns the
    /// check of a round that was cancelled (nothing of it is applied).
    fn rounds(
        &mut self,
        first_round: &mut bool,
        scheduled: &mut Vec<u32>,
    ) -> Result<Option<Report>, Error> {
        for _ in 0..MAX_ROUNDS {
            let report = {
                let mut live = Live {
                    inner: &mut *self.obs,
                    policy: &mut self.policy,
                    answers: &mut self.answers,
                    declined: &mut self.declined,
                    shown: &mut self.shown,
                    headings: *first_round,
                };
                let (report, fs) = check_kept(self.dev.clone(), &self.forced, &mut live, false)?;
                self.checked(fs);
                report
            };
            if report.cancelled {
                // Nothing of a check cut short is applied.
                return Ok(Some(report));
            }
            scheduled.extend(&report.rehash);
            // A round that hid quota inodes stopped before pass 1, as
            // e2fsck hides them before it reads anything: the passes'
            // headings come with the next. After a restart e2fsck heads
            // every pass again.
            *first_round = report.restarted
                || report
                    .problems
                    .list()
                    .iter()
                    .any(|p| p.code == ProblemCode::PR_0_HIDE_QUOTA);
            if report.fatal.is_some() {
                break;
            }
            let fixes = self.choose(&report);
            if fixes.is_empty() {
                break;
            }
            let fs = self.take_current()?;
            let left = writer::apply_at(&fs, &fixes, self.opts.now)?;
            if self.preen_stopped.is_some() {
                break;
            }
            // A journal the round found holding data ("Run journal
            // anyway", its flag set by the fix) is replayed before the
            // next check, as e2fsck does; the device is opened for it only
            // when the superblock the fixes left (unknown after a quota
            // rewrite) flags one.
            if left.as_ref().is_none_or(journal_flagged) {
                let fs = open(&self.dev)?;
                if let Some(r) = replay_journal(&self.dev, &fs, false, self.opts.now)? {
                    self.obs.journal_recovered(&r);
                    self.journal_replayed.get_or_insert((r.first, r.end));
                }
            }
        }
        Ok(None)
    }

    /// The fixes a round makes of what its check found: preen's first
    /// the superblock and journal's, and up to a problem it may not fix
    /// alone; the answers given or asked for; past the report's cap, the
    /// rest where every fix is wanted. Records what is fixed.
    fn choose(&mut self, report: &Report) -> Vec<Fix> {
        // e2fsck -p repairs the superblock and journal before pass 1
        // looks at anything, and then sees their effect (a deleted
        // journal's inode is "not in use, but contains data", not full
        // of illegal blocks): a preen round with pass-0 repairs makes
        // only those.
        let all = report.problems.list();
        let preen = matches!(self.policy, Policy::Preen);
        let pass0_first = preen && all.iter().any(|p| p.pass == 0 && p.fix.is_some());
        let mut considered: Vec<&Problem> =
            all.iter().filter(|p| !pass0_first || p.pass == 0).collect();
        if preen {
            let stop = considered.iter().position(|p| {
                p.severity == crate::problem::Severity::Error
                    && (p.fix.is_none() || !preen_ok(p.code))
            });
            if let Some(at) = stop {
                // e2fsck -p fixes what it finds until it meets what
                // it may not fix alone (preenhalt): the fixes found
                // before that one are made, those after it are not.
                self.preen_stopped = Some(considered[at].clone());
                considered.truncate(at);
            }
        }
        let mut fixes: Vec<Fix> = Vec::new();
        for p in considered {
            let Some(f) = &p.fix else { continue };
            if self.wanted(p) {
                if !fixes.contains(f) {
                    fixes.push(f.clone());
                }
                self.fixed.push(p.clone());
            }
        }
        // Past the report's cap the problems have no words to ask
        // about: their fixes go only where every fix is wanted.
        if !matches!(self.policy, Policy::Ask(_)) && !pass0_first && self.preen_stopped.is_none() {
            for f in report.problems.overflow_fixes() {
                if !fixes.contains(f) {
                    fixes.push(f.clone());
                }
            }
        }
        fixes
    }

    /// Whether problem `p`'s fix is made: as answered before, by the
    /// policy, or by asking now (a "yes to all" makes the policy yes).
    fn wanted(&mut self, p: &Problem) -> bool {
        match (self.answers.get(p), &mut self.policy) {
            // A "no" stands, also after a later "yes to all".
            (Some(yes), _) => yes,
            (None, Policy::Yes | Policy::Preen) => true,
            // What e2fsck does without a question is not asked.
            (None, Policy::Ask(_)) if crate::codes::no_prompt(p.code) => true,
            (None, Policy::Ask(ask)) => {
                let yes = match ask(p) {
                    Answer::Yes => true,
                    Answer::No => false,
                    Answer::All => {
                        self.policy = Policy::Yes;
                        true
                    }
                };
                if !yes {
                    self.declined.push(p.clone());
                }
                self.answers.insert(p, yes);
                yes
            }
        }
    }

    /// A journal the repair deleted is made anew once the filesystem is
    /// otherwise clean (asked first, as e2fsck does), and the result
    /// checked again into `last`.
    fn recreate_journal(
        &mut self,
        last: &mut Report,
    ) -> Result<Option<std::result::Result<u64, ext4r::journal_create::JournalError>>, Error> {
        if journal_deleted(&self.fixed)
            && !last.cancelled
            && !last.has_errors()
            && last.fatal.is_none()
            && self.preen_stopped.is_none()
            && recreate_wanted(&mut self.policy)
        {
            self.current = None;
            let made = ext4r::journal_create::add_journal(self.dev.clone(), self.opts.now)?;
            *last = self.check_later()?;
            return Ok(Some(made));
        }
        Ok(None)
    }

    /// A check after the first round: no headings, only problems not shown
    /// before.
    fn check_later(&mut self) -> Result<Report, Error> {
        let mut live = Live {
            inner: &mut *self.obs,
            policy: &mut self.policy,
            answers: &mut self.answers,
            declined: &mut self.declined,
            shown: &mut self.shown,
            headings: false,
        };
        let (report, fs) = check_kept(self.dev.clone(), &self.forced, &mut live, false)?;
        self.checked(fs);
        Ok(report)
    }
}

/// What a repair run's checks report through: the caller's observer sees
/// the headings and progress of the first full check, each problem once
/// (in the round that first finds it) with what is done about it, and
/// interactive questions are asked as the problems are found, as e2fsck
/// asks them. Preen runs show what they fixed once a round is decided
/// (a problem preen may not fix stops the round unfixed).
struct Live<'r, 'a> {
    inner: &'r mut dyn Observer,
    policy: &'r mut Policy<'a>,
    answers: &'r mut Seen<bool>,
    declined: &'r mut Vec<Problem>,
    shown: &'r mut Seen<()>,
    headings: bool,
}

impl Observer for Live<'_, '_> {
    fn pass_started(&mut self, pass: u8) {
        if self.headings {
            self.inner.pass_started(pass);
        }
    }

    fn progress(&mut self, pass: u8, done: u64, total: u64) {
        if self.headings {
            self.inner.progress(pass, done, total);
        }
    }

    fn pass_finished(&mut self, pass: u8, elapsed: std::time::Duration) {
        if self.headings {
            self.inner.pass_finished(pass, elapsed);
        }
    }

    fn opened(&mut self, label: &str) {
        self.inner.opened(label);
    }

    fn note(&mut self, note: &str) {
        // The quota comparison waits for the round without other fixes;
        // its warnings go with its question, whichever round that is.
        if self.headings
            || note.starts_with("[QUOTA WARNING]")
            || note.starts_with("Restarting e2fsck")
        {
            self.inner.note(note);
        }
    }

    fn problem(&mut self, p: &Problem, _: Action) {
        if matches!(self.policy, Policy::Preen) {
            return;
        }
        if !self.shown.insert(p, ()) {
            return;
        }
        if p.fix.is_none() {
            let action = if p.severity == crate::problem::Severity::Error {
                Action::Unfixable
            } else {
                Action::Left
            };
            self.inner.problem(p, action);
            return;
        }
        match (self.answers.get(p), &mut *self.policy) {
            (Some(_), _) | (None, Policy::Preen) => {}
            (None, Policy::Yes) => self.inner.problem(p, Action::Fix),
            // What e2fsck does without a question is not asked.
            (None, Policy::Ask(_)) if crate::codes::no_prompt(p.code) => {
                self.inner.problem(p, Action::Fix)
            }
            (None, Policy::Ask(ask)) => {
                let yes = match ask(p) {
                    Answer::Yes => true,
                    Answer::No => false,
                    Answer::All => {
                        *self.policy = Policy::Yes;
                        true
                    }
                };
                if !yes {
                    self.declined.push(p.clone());
                }
                self.answers.insert(p, yes);
                self.inner.problem(p, Action::Asked);
            }
        }
    }
}

/// Pass 3A on a filesystem the check found clean: the directories whose
/// index the repair cleared get a new one, as e2fsck rebuilds them (all
/// directories with `all`, its `-D`). Returns those rebuilt.
fn rehash(
    fs: &Filesystem,
    all: bool,
    fixed: &[Problem],
    scheduled: &[u32],
    now: i64,
) -> Result<Vec<u32>, Error> {
    let mut dirs: Vec<u32> = if all {
        crate::rehash::all_dirs(fs)
    } else {
        fixed
            .iter()
            .filter_map(|p| match p.fix {
                Some(Fix::ClearIndexFlag(ino)) => Some(ino),
                _ => None,
            })
            .chain(scheduled.iter().copied())
            .collect()
    };
    dirs.sort_unstable();
    dirs.dedup();
    let mut fixes = Vec::new();
    let mut done = Vec::new();
    let lost_found = crate::rehash::lost_found(fs);
    for ino in dirs {
        if let Some(r) = crate::rehash::plan(fs, ino, lost_found) {
            fixes.push(Fix::RehashDir(Box::new(r)));
            done.push(ino);
        }
    }
    if !fixes.is_empty() {
        writer::apply_at(fs, &fixes, now)?;
    }
    Ok(done)
}

/// Whether the repair deleted a journal it found invalid: e2fsck then
/// offers to make a new one at the end ("Recreate journal").
fn journal_deleted(fixed: &[Problem]) -> bool {
    fixed
        .iter()
        .any(|p| p.code == ProblemCode::PR_0_JOURNAL_BAD_INODE && p.fix == Some(Fix::DeleteJournal))
}

/// e2fsck's `PR_6_RECREATE_JOURNAL`: made without asking under -y and -p
/// (it is preen-safe), asked about otherwise.
fn recreate_wanted(policy: &mut Policy<'_>) -> bool {
    match policy {
        Policy::Yes | Policy::Preen => true,
        Policy::Ask(ask) => {
            let question = Problem {
                pass: 6,
                code: ProblemCode::PR_6_RECREATE_JOURNAL,
                severity: crate::problem::Severity::Harmless,
                message: "Recreate journal".into(),
                subject: crate::problem::Subject::Journal,
                fix: None,
                latch: None,
            };
            ask(&question) != Answer::No
        }
    }
}

/// Opens the filesystem to write fixes; when the primary superblock is
/// unusable, through the backup the check used (whose fix then rewrites
/// the primary from it).
/// Multiple-mount protection for the run, when the primary superblock
/// (checksum good) asks for it; `None` without it, or with an MMP block
/// the check will repair.
fn claim_mmp(
    dev: &Arc<dyn BlockDevice>,
    opts: &Options,
) -> Result<Option<ext4r_txn::mmp::MmpClaim>, Error> {
    let Some(sb) = crate::backup::primary(dev).filter(|sb| sb.verify_checksum().is_ok()) else {
        return Ok(None);
    };
    let mut sleep = opts.mmp_sleep.unwrap_or(std::thread::sleep);
    let o = ext4r_txn::mmp::MmpOptions {
        device_name: &opts.device_name,
        now: u64::try_from(opts.now).unwrap_or(0),
        sleep: &mut sleep,
    };
    match ext4r_txn::mmp::MmpClaim::start(dev, &sb, o) {
        Ok(c) => Ok(c),
        // Bad magic, checksum or place: pass 0 finds and resets it.
        Err(ext4r::Error::Corrupt { .. }) => Ok(None),
        Err(e) => Err(Error::Open(e)),
    }
}

fn open(dev: &Arc<dyn BlockDevice>) -> Result<Filesystem, Error> {
    let mut oo = OpenOptions::default();
    // A checker reads what fails its checksum, to report it.
    oo.verify_checksums = false;
    oo.allow_encrypted = true;
    oo.skip_journal_replay = true;
    // The same choice as the check's.
    crate::backup::open_as_e2fsck(dev, &oo).map(|(fs, _)| fs)
}

/// Replays an internal journal that needs recovery, as e2fsck does before
/// checking (with `run_anyway` also one that has data although the flag is
/// clear); returns the transaction range replayed.
fn replay_journal(
    dev: &Arc<dyn BlockDevice>,
    fs: &Filesystem,
    run_anyway: bool,
    now: i64,
) -> Result<Option<crate::observe::JournalRecovered>, Error> {
    let sb = fs.superblock();
    if !(journal_flagged(sb) || run_anyway && journal_present(sb)) {
        return Ok(None);
    }
    // A journal that cannot be found or opened is not replayed, as with
    // e2fsck: the check reports it and its repair deletes or resets it.
    let Ok(Some(location)) = fs.journal_location() else {
        return Ok(None);
    };
    let Ok(journal) = Journal::open(dev.clone(), location, fs.block_size()) else {
        return Ok(None);
    };
    if !sb.has_incompat(Incompat::RECOVER) && !journal.needs_recovery() {
        return Ok(None);
    }
    let r = ext4r::write::recover_journal(dev, &journal, Some((now, 0)))?;
    Ok(Some(crate::observe::JournalRecovered::of(&r)))
}

/// Whether superblock `sb` has an internal journal.
fn journal_present(sb: &Superblock) -> bool {
    sb.has_compat(Compat::HAS_JOURNAL) && sb.s_journal_inum.get() != 0
}

/// Whether superblock `sb` has an internal journal flagged as needing
/// recovery.
fn journal_flagged(sb: &Superblock) -> bool {
    sb.has_incompat(Incompat::RECOVER) && journal_present(sb)
}

/// Releases the orphan inodes (see [`crate::orphan`]); returns them, and
/// adds what was said about them to `said`.
fn release_orphans(fs: &Filesystem, said: &mut Vec<Problem>, now: i64) -> Result<Vec<u32>, Error> {
    let r = crate::orphan::plan(fs);
    if !r.fixes.is_empty() {
        writer::apply_at(fs, &r.fixes, now)?;
    }
    said.extend(r.said);
    Ok(r.inodes)
}

/// Whether the superblock's free counts exceed its totals.
fn counts_beyond_totals(fs: &Filesystem) -> bool {
    let sb = fs.superblock();
    sb.free_blocks_count() > sb.blocks_count()
        || sb.s_free_inodes_count.get() > sb.s_inodes_count.get()
}

/// The superblock's free counts as the group descriptors add up, where
/// they differ (e2fsck's PR_0_FREE_INODE_COUNT and PR_0_FREE_BLOCK_COUNT,
/// which it fixes without a word under -p).
fn descriptor_counts(fs: &Filesystem) -> Vec<Problem> {
    let g = fs.geometry();
    let wide = fs.superblock().has_incompat(Incompat::BIT64);
    let (mut blocks, mut inodes) = (0u64, 0u64);
    for group in 0..g.group_count {
        let Ok(d) = fs.group_desc(ext4r_format::GroupNr(group)) else {
            return Vec::new();
        };
        blocks += u64::from(d.free_blocks_count(wide));
        inodes += u64::from(d.free_inodes_count(wide));
    }
    let blocks = blocks << g.cluster_bits;
    let sb = fs.superblock();
    let fix = Fix::SuperblockCounts(blocks, inodes);
    let mut out = Vec::new();
    let mut note = |code: ProblemCode, message: String| {
        out.push(Problem {
            pass: 0,
            code,
            severity: crate::problem::Severity::Harmless,
            message,
            subject: crate::problem::Subject::Filesystem,
            fix: Some(fix.clone()),
            latch: None,
        });
    };
    if u64::from(sb.s_free_inodes_count.get()) != inodes {
        note(
            ProblemCode::PR_0_FREE_INODE_COUNT,
            format!(
                "Setting free inodes count to {inodes} (was {})",
                sb.s_free_inodes_count.get()
            ),
        );
    }
    if sb.free_blocks_count() != blocks {
        note(
            ProblemCode::PR_0_FREE_BLOCK_COUNT,
            format!(
                "Setting free blocks count to {blocks} (was {})",
                sb.free_blocks_count()
            ),
        );
    }
    out
}

mod state;

#[cfg(test)]
mod tests;
