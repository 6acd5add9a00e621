//! The check: open the filesystem, decide whether it needs a full check,
//! run the passes in order and hand their findings to the observer.

use crate::problem::Subject;
use std::time::Instant;

use ext4r::device::BlockDevice;
use ext4r::fs::{Filesystem, OpenOptions};
use ext4r_format::features::Incompat;
use ext4r_format::superblock::{STATE_ERROR, STATE_VALID};

use crate::codes::ProblemCode;
use crate::ctx::{self, Progress};
use crate::error::Error;
use crate::fix::Fix;
use crate::observe::{Action, Forced, Observer};
use crate::options::Options;
use crate::problem::{Problem, Problems, Severity};
use crate::report::{Report, Summary};
use crate::{
    backup, features, pass0, pass1, pass2, pass34, pass3a, pass5, pathname, quota, super_rules,
};

/// One pass over the shared state.
type PassFn = fn(&mut ctx::Ctx, Progress<'_>);

/// Checks the filesystem on `dev` without writing anything, telling `obs`
/// what happens as it happens (pass starts, progress, each problem with
/// [`Action::Report`]).
///
/// # Errors
/// [`Error::Open`] when no usable superblock and descriptor table is found.
pub fn check(
    dev: impl BlockDevice + 'static,
    opts: &Options,
    obs: &mut dyn Observer,
) -> Result<Report, Error> {
    check_shared(std::sync::Arc::new(dev), opts, obs)
}

/// [`check`] on a device the caller keeps using (a repair run).
///
/// # Errors
/// As [`check`].
pub fn check_shared(
    dev: std::sync::Arc<dyn BlockDevice>,
    opts: &Options,
    obs: &mut dyn Observer,
) -> Result<Report, Error> {
    check_with(dev, opts, obs, false)
}

/// Hands a check's findings to the observer: notes first, then problems
/// in the order found, each when the pass it belongs to has run (pass 0
/// finds some of pass 1's).
struct Emitter {
    notes: usize,
    next: usize,
    held: Vec<usize>,
}

impl Emitter {
    fn flush(&mut self, c: &ctx::Ctx, upto: u8, obs: &mut dyn Observer) {
        for n in c.notes().iter().skip(self.notes) {
            obs.note(n);
        }
        self.notes = c.notes().len();
        let list = c.problems().list();
        self.held.extend(self.next..list.len());
        self.next = list.len();
        self.held.retain(|&i| match list.get(i) {
            Some(p) if p.pass <= upto && pathname::q_wanted(&p.message).next().is_some() => {
                // Pass 2 did not run to name the inode: as e2fsck's %Q
                // without a directory.
                let mut p = p.clone();
                p.message = pathname::fill_q(c.fs(), &p.message, |_| 0);
                obs.problem(&p, Action::Report);
                false
            }
            Some(p) if p.pass <= upto => {
                obs.problem(p, Action::Report);
                false
            }
            Some(_) => true,
            None => false,
        });
    }
}

/// The check; with `probe`, a filesystem that needs a full check is not
/// checked further than deciding so (the report then has neither
/// `skipped_clean` nor passes): a repair run's first look.
pub(crate) fn check_with(
    dev: std::sync::Arc<dyn BlockDevice>,
    opts: &Options,
    obs: &mut dyn Observer,
    probe: bool,
) -> Result<Report, Error> {
    check_kept(dev, opts, obs, probe).map(|(report, _)| report)
}

/// [`check_with`], also handing back the filesystem as the check opened
/// it: a repair round writes its fixes through it (nothing is written
/// while it checks), so that the round opens the device once.
pub(crate) fn check_kept(
    dev: std::sync::Arc<dyn BlockDevice>,
    opts: &Options,
    obs: &mut dyn Observer,
    probe: bool,
) -> Result<(Report, std::sync::Arc<Filesystem>), Error> {
    let Opened {
        fs,
        notes,
        backup_used,
        bad_checksum,
    } = open_for_check(&dev, opts)?;
    let sb = fs.superblock();
    let label = String::from_utf8_lossy(sb.volume_name()).into_owned();
    obs.opened(&label);
    let mut report = Report {
        label,
        problems: Problems::default(),
        summary: Summary::default(),
        skipped_clean: None,
        notes: Vec::new(),
        pass_times: Vec::new(),
        fatal: None,
        fatal_journal: false,
        check_forced: None,
        cancelled: false,
        errors_flagged: sb.s_state.get() & STATE_ERROR != 0,
        rehash: Vec::new(),
        restarted: false,
    };
    let verdict = if !opts.force && !opts.full && !backup_used {
        clean_verdict(&fs, opts.now, opts.repairing)
    } else {
        Err(None)
    };
    let summary_if_clean = verdict.is_ok().then(|| ctx::summary_from_superblock(&fs));
    let mut c = ctx::Ctx::new(
        fs,
        ctx::Settings {
            repairing: opts.repairing,
            now: opts.now,
            forced: opts.force,
            threads: opts.thread_count(),
            optimize_extents: !opts.no_optimize_extents,
        },
    );
    c.set_external_journal(opts.external_journal.clone());
    c.watch_cancel(opts.cancel.clone());
    for n in notes {
        c.note(n);
    }
    let mut emit = Emitter {
        notes: 0,
        next: 0,
        held: Vec::new(),
    };
    let mut first_pass = 0;
    match (verdict, summary_if_clean) {
        (Ok(()), Some(summary)) => {
            // As e2fsck: the superblock and descriptors are always checked;
            // a problem there (fixed, under a repair) forces the full check.
            let t = Instant::now();
            let from = c.problems().mark();
            pass0::run(&mut c, &mut |p, d, n| obs.progress(p, d, n));
            report
                .pass_times
                .push(("pass 0: superblock and group descriptors", t.elapsed()));
            // Pass 1's findings made early (metadata blocks in conflict)
            // are not looked for by e2fsck on a clean filesystem: they
            // force nothing, and are dropped when the check stops here.
            let early = |p: &Problem| p.code.is_e2fsck() && p.code.section() == "1";
            let forced = c.problems().list().iter().any(|p| {
                !early(p)
                    && !super_rules::cosmetic(p.code)
                    && (p.severity == Severity::Error || opts.repairing && p.fix.is_some())
            }) || c.problems().dropped() > 0;
            if !forced {
                c.reorder_problems().retain(|p| !early(p));
                report.summary = summary;
                report.skipped_clean = Some("clean".to_string());
                report.notes = c.take_notes();
                let fs = c.shared_fs();
                report.problems = c.take_problems();
                return Ok((report, fs));
            }
            if probe {
                return Ok((report, c.shared_fs()));
            }
            forgive_pass0(&mut c, from);
            emit.flush(&c, 0, obs);
            first_pass = 1;
        }
        (Err(why), _) => {
            report.check_forced = why.clone();
            if probe {
                return Ok((report, c.shared_fs()));
            }
            if let Some(why) = &why {
                obs.check_forced(why);
            }
        }
        // A clean verdict always comes with its summary.
        (Ok(()), None) => {}
    }
    primary_fixes(&mut c, bad_checksum, backup_used);
    run_passes(&mut c, first_pass, &mut emit, obs, &mut report);
    if !c.stopping() && !c.restarting() && !c.failed() {
        quota::check(&mut c, &mut |c| emit.flush(c, 6, obs));
    }
    emit.flush(&c, u8::MAX, obs);
    report.summary = c.summary();
    report.rehash = c.rehash_dirs().iter().copied().collect();
    report.notes = c.take_notes();
    report.fatal = c.take_failure();
    report.fatal_journal = c.failed_in_journal();
    report.cancelled = c.cancelled();
    let fs = c.shared_fs();
    report.problems = c.take_problems();
    Ok((report, fs))
}

/// What opening the filesystem for a check found.
struct Opened {
    fs: Filesystem,
    /// What the opening says (the backup superblock it used).
    notes: Vec<String>,
    /// A backup superblock stood in for the primary.
    backup_used: bool,
    /// The primary opened but its checksum is bad.
    bad_checksum: bool,
}

/// Opens the filesystem as e2fsck does: the primary superblock, or a
/// backup when it is unusable (unless a superblock is given), reading what
/// fails its checksum and with no journal replayed.
fn open_for_check(dev: &std::sync::Arc<dyn BlockDevice>, opts: &Options) -> Result<Opened, Error> {
    let mut oo = OpenOptions::default();
    // A checker reads what fails its checksum, to report it.
    oo.verify_checksums = false;
    oo.superblock = opts.superblock;
    oo.block_size = opts.block_size;
    oo.allow_encrypted = true;
    // As e2fsck -n: the journal is not replayed, the disk is checked as is.
    oo.skip_journal_replay = true;
    let mut notes = Vec::new();
    let mut backup_used = false;
    let mut bad_checksum = false;
    let fs = if opts.superblock.is_none() {
        let (fs, why) = backup::open_as_e2fsck(dev, &oo)?;
        match why {
            backup::Fallback::None => {}
            backup::Fallback::Backup(note) => {
                notes.push(note);
                backup_used = true;
            }
            backup::Fallback::BadChecksum => bad_checksum = true,
        }
        fs
    } else {
        let fs = Filesystem::open_with(dev.clone(), oo.clone())?;
        // The copy asked for is opened as libext2fs opens it: an unknown
        // checksum algorithm stops the run (no other copy is tried).
        if !fs.superblock().checksum_type_known() {
            return Err(Error::UnknownChecksum);
        }
        if let Some(u) = features::unsupported(fs.superblock()) {
            return Err(Error::Unsupported(u));
        }
        // The copy asked for is held to e2fsck's ranges too; no other is
        // tried in its place.
        if let Some(why) = backup::out_of_range(fs.superblock()) {
            return Err(Error::CorruptSuperblock(why));
        }
        fs
    };
    Ok(Opened {
        fs,
        notes,
        backup_used,
        bad_checksum,
    })
}

/// What the superblock check asks for before the passes: a primary whose
/// checksum alone is bad, or one a backup stood in for, is written again.
fn primary_fixes(c: &mut ctx::Ctx, bad_checksum: bool, backup_used: bool) {
    if bad_checksum {
        // No backup to take over: the superblock, which opened and is
        // judged field by field below, gets its checksum again.
        c.report(Subject::Superblock).error_fix(
            0,
            ProblemCode::EXT4R_0_SB_CSUM_INVALID,
            "Superblock checksum does not match superblock.".into(),
            Fix::RestorePrimary,
        );
    }
    if backup_used {
        c.report(Subject::Superblock).error_fix(
            0,
            ProblemCode::PR_0_SB_CORRUPT,
            "The primary superblock or group descriptors are unusable; the check used a \
             backup."
                .into(),
            Fix::RestorePrimary,
        );
    }
}

/// Passes `first_pass` to 5 in order, each headed, timed and its problems
/// shown as it ends, with pass 3A's settling before pass 2 and its run
/// after pass 3. A pass that asks for a restart ends the run of them
/// (`report.restarted`); so does a cancel.
fn run_passes(
    c: &mut ctx::Ctx,
    first_pass: usize,
    emit: &mut Emitter,
    obs: &mut dyn Observer,
    report: &mut Report,
) {
    let passes: [(&'static str, PassFn); 6] = [
        ("pass 0: superblock and group descriptors", pass0::run),
        ("pass 1: inodes, blocks and sizes", pass1::run),
        ("pass 2: directory structure", pass2::run),
        ("pass 3: directory connectivity", pass34::run_pass3),
        ("pass 4: reference counts", pass34::run_pass4),
        ("pass 5: group summary information", pass5::run),
    ];
    for ((name, f), pass) in passes.into_iter().zip(0u8..).skip(first_pass) {
        if pass > 0 {
            obs.pass_started(pass);
        }
        let t = Instant::now();
        let from = c.problems().mark();
        if pass == 2 {
            pass3a::settle(c);
        }
        f(c, &mut |p, d, n| obs.progress(p, d, n));
        if pass == 1 && !c.restarting() && !c.stopping() {
            pass1e_heading(c, from);
        }
        if pass == 3 && !c.restarting() && !c.stopping() {
            pass3a::run(c);
        }
        if pass == 0 {
            forgive_pass0(c, from);
        }
        let took = t.elapsed();
        report.pass_times.push((name, took));
        if c.restarting() {
            restart(c, emit, pass, obs);
            obs.pass_finished(pass, took);
            report.restarted = true;
            break;
        }
        emit.flush(c, pass, obs);
        obs.pass_finished(pass, took);
        c.poll_cancel();
        if c.stopping() {
            break;
        }
    }
}

/// e2fsck's "Pass 1E: Optimizing extent trees" after pass 1, when a
/// repair rebuilds an extent tree there (its pass 1E does).
fn pass1e_heading(c: &mut ctx::Ctx, from: usize) {
    let rebuilds = c.repairing()
        && c.problems().list().get(from..).is_some_and(|said| {
            said.iter()
                .any(|p| matches!(p.fix, Some(crate::fix::Fix::RebuildExtents(_))))
        });
    if rebuilds {
        c.report(crate::problem::Subject::Filesystem).harmless(
            1,
            ProblemCode::PR_1E_PASS_HEADER,
            "Pass 1E: Optimizing extent trees".into(),
        );
    }
}

/// After a pass that asks for a restart: e2fsck's restart, said.
fn restart(c: &mut ctx::Ctx, emit: &mut Emitter, pass: u8, obs: &mut dyn Observer) {
    // As e2fsck's restart: what was found from pass 2 on rests on
    // inodes pass 1 did not read; only the descriptor fixes that
    // make it read them are kept, the rest is found again. What
    // was shown so far is all kept (passes 0 and 1), so the
    // emitter goes on after it.
    let shown = emit.next - emit.held.len();
    c.reorder_problems().retain(|p| {
        p.pass < 2
            || matches!(
                p.code,
                ProblemCode::PR_2_INOREF_BG_INO_UNINIT | ProblemCode::PR_2_INOREF_IN_UNUSED
            )
    });
    emit.next = shown;
    emit.held.clear();
    emit.flush(c, pass, obs);
    // e2fsck says so once the pass that asked for it is over, and
    // then runs (and heads) every pass again.
    c.note("Restarting e2fsck from the beginning...");
    emit.flush(c, pass, obs);
}

/// e2fsck marks the filesystem valid after its superblock, descriptor and
/// journal checks ("'til proven otherwise"): under `-n` what it found
/// there and left (e2fsck's own PR_0_ codes) does not count for the exit
/// code. A repair fixes them anyway. What stops e2fsck (`PR_FATAL`: an
/// external journal it cannot find) is not forgiven: its run ends there,
/// with errors.
fn forgive_pass0(c: &mut ctx::Ctx, from: usize) {
    if !c.repairing() {
        c.reorder_problems().forgive_from(from, |p| {
            p.pass == 0
                && p.code.is_e2fsck()
                && p.code.section() == "0"
                && !crate::codes::fatal(p.code)
        });
    }
}

/// Whether a filesystem needs no full check, as e2fsck decides without
/// `-f`: cleanly unmounted, no errors recorded, no journal to recover, mount
/// count and check interval not exceeded. `Err` with e2fsck's reason
/// when it needs a check (`None` where e2fsck says none).
fn clean_verdict(fs: &Filesystem, now: i64, repairing: bool) -> Result<(), Option<Forced>> {
    let sb = fs.superblock();
    let state = sb.s_state.get();
    if state & STATE_ERROR != 0 {
        return Err(Some(Forced::Errors));
    }
    if state & STATE_VALID == 0 {
        return Err(Some(Forced::NotClean));
    }
    if sb.has_incompat(Incompat::RECOVER) || sb.s_last_orphan.get() != 0 {
        return Err(None);
    }
    // Summary counts beyond the totals make e2fsck's check_super_block
    // mark the filesystem invalid: "contains a file system with errors".
    // (A repair judges them before releasing orphans, which moves them.)
    if !repairing
        && (sb.free_blocks_count() > sb.blocks_count()
            || sb.s_free_inodes_count.get() > sb.s_inodes_count.get())
    {
        return Err(Some(Forced::Errors));
    }
    let max = sb.s_max_mnt_count.get();
    let mounts = sb.s_mnt_count.get();
    if max > 0 && mounts >= max as u16 {
        return Err(Some(Forced::MountCount(mounts.into())));
    }
    let interval = i64::from(sb.s_checkinterval.get());
    // e2fsck forgives a last check up to a day ahead of the clock (its
    // accept_time_fudge, on by default): clocks set from local time.
    const TIME_FUDGE: i64 = 86_400;
    let mut last = sb.lastcheck();
    if last > now {
        last -= TIME_FUDGE;
    }
    if interval > 0 && now < last {
        return Err(Some(Forced::FutureLastCheck));
    }
    if interval > 0 && now >= last + interval {
        let days = (now - sb.lastcheck()) / 86_400;
        return Err(Some(Forced::Interval(days.max(0) as u64)));
    }
    Ok(())
}
