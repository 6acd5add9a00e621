//! `fsck.ext4r`: check an ext2/3/4 filesystem, e2fsck-compatible options
//! and exit codes (fsck(8): 0 clean, 4 errors left, 8 operational error,
//! 16 usage error).

mod ask;
mod cancel;
mod json;
mod live;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use ext4r::device::{FileDevice, OpenMode};
use ext4r_fsck::{check, Options, ProblemCode, Report, Severity, Summary};

use crate::errors::{message, os_error};
use live::{Meter, Printer, Style};

const EXIT_OK: u8 = 0;
const EXIT_UNCORRECTED: u8 = 4;
const EXIT_ERROR: u8 = 8;
const EXIT_USAGE: u8 = 16;
const EXIT_CANCELLED: u8 = 32;

/// Check an ext2/ext3/ext4 filesystem.
#[derive(Parser, Debug)]
#[command(name = "fsck.ext4r", version, disable_help_flag = true)]
pub(crate) struct Args {
    /// Open the filesystem read-only and answer "no" to every question.
    #[arg(short = 'n')]
    no: bool,
    /// Repair automatically what is safe; stop on anything else.
    #[arg(short = 'p', visible_short_alias = 'a')]
    preen: bool,
    /// Repair everything this version can.
    #[arg(short = 'y')]
    yes: bool,
    /// Check even if the filesystem seems clean.
    #[arg(short = 'f')]
    force: bool,
    /// Optimize directories: rebuild every directory's hash index.
    #[arg(short = 'D')]
    optimize_dirs: bool,
    /// Verbose: statistics after the check.
    #[arg(short = 'v')]
    verbose: bool,
    /// Progress to this file descriptor (0: a bar on the terminal).
    #[arg(short = 'C', value_name = "fd")]
    progress_fd: Option<i32>,
    /// Use this superblock copy (block number).
    #[arg(short = 'b', value_name = "superblock")]
    superblock: Option<u64>,
    /// Block size to look for the superblock copy with.
    #[arg(short = 'B', value_name = "blocksize")]
    block_size: Option<u32>,
    /// External journal device: checked against the filesystem, and
    /// replayed before a repair.
    #[arg(short = 'j', value_name = "external_journal")]
    journal: Option<PathBuf>,
    /// Extended options: journal_only (replay the journal and stop).
    #[arg(short = 'E', value_name = "extended-options")]
    extended: Vec<String>,
    /// Print timing per pass.
    #[arg(short = 't')]
    timing: bool,
    /// Threads for the passes (0: the available cores; 1: one thread). The
    /// findings and repairs are the same whatever the number. (`-j` is
    /// e2fsck's external journal; `-m` is the parallel e2fsck patches'.)
    #[arg(
        short = 'm',
        long = "threads",
        value_name = "threads",
        default_value_t = 0
    )]
    threads: usize,
    /// Print the result as JSON (problems, counts, time per pass).
    #[arg(long)]
    json: bool,
    /// Print help.
    #[arg(short = 'h', long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// The device or image file.
    device: PathBuf,
}

/// The command line's definition (for man pages and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// Runs fsck.ext4r with `args` (args[0] is the program name).
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let a = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) if e.kind() == clap::error::ErrorKind::ValueValidation => {
            // As e2fsck's sscanf_err: a number that is not one is not a
            // usage error but exit 1.
            let arg = e
                .get(clap::error::ContextKind::InvalidArg)
                .map(|v| v.to_string())
                .unwrap_or_default();
            let value = e
                .get(clap::error::ContextKind::InvalidValue)
                .map(|v| v.to_string())
                .unwrap_or_default();
            let flag = arg.split_whitespace().next().unwrap_or("");
            eprintln!("\nInvalid non-numeric argument to {flag} (\"{value}\")\n");
            return ExitCode::from(1);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_OK });
        }
    };
    ExitCode::from(run(&a))
}

/// What `-E` asks of this checker.
#[derive(Clone, Copy, Default)]
struct Extended {
    /// `journal_only`: replay the journal and stop.
    journal_only: bool,
    /// `no_optimize_extents` or `fixes_only`, unless a later
    /// `optimize_extents` (e2fsck reads the list in order; `fixes_only`
    /// also keeps it from judging the trees' shape).
    no_optimize_extents: bool,
}

/// e2fsck's `-E` list, read into [`Extended`]. Options
/// that only tune how e2fsck does its work (read-ahead, discard, memory
/// layout, not optimizing) change nothing here and are accepted; those
/// that ask for work this version does not do are refused (exit 8), and
/// an unknown one gets e2fsck's list and exit 1.
fn extended_options(list: &[String]) -> Result<Extended, u8> {
    let mut ext = Extended::default();
    let mut unknown = false;
    for opt in list
        .iter()
        .flat_map(|e| e.split(','))
        .filter(|o| !o.is_empty())
    {
        let (name, value) = opt
            .split_once('=')
            .map_or((opt, None), |(n, v)| (n, Some(v)));
        match (name, value) {
            ("journal_only", None) => ext.journal_only = true,
            ("no_optimize_extents" | "fixes_only", None) => ext.no_optimize_extents = true,
            ("optimize_extents", None) => ext.no_optimize_extents = false,
            ("readahead_kb", Some(v)) if v.parse::<u64>().is_ok() => {}
            ("ea_ver", Some("2")) => {}
            ("discard" | "nodiscard" | "inode_count_fullmap" | "no_inode_count_fullmap", None) => {}
            ("ea_ver" | "fragcheck" | "bmap2extent" | "unshare_blocks" | "check_encoding", _) => {
                eprintln!(
                    "fsck.ext4r: the extended option '{opt}' is not supported by this version"
                );
                return Err(EXIT_ERROR);
            }
            _ => {
                eprintln!("Unknown extended option: {opt}");
                unknown = true;
            }
        }
    }
    if unknown {
        eprintln!(
            "\nExtended options are separated by commas, and may take an argument which\n\
             is set off by an equals ('=') sign.  Valid extended options are:\n\n\
             \tea_ver=<ea_version (1 or 2)>\n\tfragcheck\n\tjournal_only\n\tdiscard\n\
             \tnodiscard\n\toptimize_extents\n\tno_optimize_extents\n\
             \tinode_count_fullmap\n\tno_inode_count_fullmap\n\treadahead_kb=<buffer size>\n\
             \tbmap2extent\n\tunshare_blocks\n\tfixes_only\n\tcheck_encoding\n"
        );
        return Err(1);
    }
    Ok(ext)
}

/// The journal device given with `-j`, opened for writing when the run
/// may replay it.
fn external_journal(a: &Args, write: bool) -> Result<Option<ext4r_fsck::ExternalJournal>, u8> {
    let Some(path) = &a.journal else {
        return Ok(None);
    };
    let mode = OpenMode {
        write,
        ..OpenMode::default()
    };
    match FileDevice::open(path, mode) {
        Ok(d) => Ok(Some(ext4r_fsck::ExternalJournal(std::sync::Arc::new(d)))),
        Err(e) => {
            eprintln!(
                "fsck.ext4r: {} while checking journal for {}",
                message(&e),
                a.device.display()
            );
            Err(EXIT_ERROR)
        }
    }
}

/// e2fsck's words for a device that could not be opened: the system
/// error, then its hint.
fn open_failed(dev_name: &str, e: &ext4r::Error) {
    // The path is said after "while trying to open", not before.
    let what = match e {
        ext4r::Error::Open { source, .. } => message(source),
        e => message(e),
    };
    eprintln!("fsck.ext4r: {what} while trying to open {dev_name}");
    let hint = match os_error(e) {
        Some(2) => "Possibly non-existent device?",
        Some(6) => "Possibly non-existent or swap device?",
        Some(16) => "Filesystem mounted or opened exclusively by another program?",
        Some(1 | 13) => "You must have r/w access to the filesystem or be root",
        Some(30) => {
            "Disk write-protected; use the -n option to do a read-only\ncheck of the device."
        }
        _ => return,
    };
    println!("{hint}");
}

/// Whether a block device is held open exclusively by someone else (a
/// mount, another fsck): an exclusive open of it fails with EBUSY, as
/// libext2fs's `ext2fs_check_if_mounted` finds out.
fn busy(path: &std::path::Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let is_block = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device());
    is_block
        && std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::EXCL.bits() as i32)
            .open(path)
            .is_err_and(|e| e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()))
}

/// A filesystem with features the checker does not check, refused as
/// e2fsck refuses it: exit 8 when the open itself fails (an unknown
/// incompat feature, or ro_compat when writing), else 12 (the open
/// filesystem is left unchecked: "still has errors"). Nothing was written.
/// `json`: stdout carries only the report.
fn unsupported(dev_name: &str, u: &ext4r_fsck::Unsupported, writing: bool, json: bool) -> u8 {
    eprintln!(
        "{dev_name} has unsupported feature(s): {}
fsck.ext4r: Get a newer version of fsck.ext4r!",
        u.names.join(" ")
    );
    if u.open_fails(writing) {
        return EXIT_ERROR;
    }
    if !json {
        println!("\n{dev_name}: ********** WARNING: Filesystem still has errors **********\n");
    }
    EXIT_ERROR | EXIT_UNCORRECTED
}

/// e2fsck's words when no superblock could be used: the error "while
/// trying to open", then its advice (PR_0_SB_CORRUPT, on stdout as
/// e2fsck's problem reports, after the device's name when preening; on
/// stderr with `--json`, whose stdout carries only the report).
fn cannot_open(dev_name: &str, e: &ext4r_fsck::Error, preen: bool, json: bool) -> u8 {
    // A superblock value out of e2fsck's ranges is one of its problem
    // reports (stdout), not an error of the open.
    let said = match e {
        ext4r_fsck::Error::CorruptSuperblock(_) if preen => format!("{dev_name}: {e}\n"),
        ext4r_fsck::Error::CorruptSuperblock(_) => format!("{e}\n"),
        _ => {
            eprintln!("fsck.ext4r: {} while trying to open {dev_name}", message(e));
            String::new()
        }
    };
    let advice = format!(
        "{said}{}",
        superblock_advice(if preen { dev_name } else { "" })
    );
    if json {
        eprintln!("{advice}");
    } else {
        println!("{advice}");
    }
    EXIT_ERROR
}

/// PR_0_SB_CORRUPT's advice, after the device's name when preening.
fn superblock_advice(dev_name: &str) -> String {
    format!(
        "{}\nThe superblock could not be read or does not describe a valid ext2/ext3/ext4\n\
         filesystem.  If the device is valid and it really contains an ext2/ext3/ext4\n\
         filesystem (and not swap or ufs or something else), then the superblock\n\
         is corrupt, and you might try running fsck.ext4r with an alternate superblock:\n    \
         fsck.ext4r -b 8193 <device>\n or\n    fsck.ext4r -b 32768 <device>\n",
        if dev_name.is_empty() {
            String::new()
        } else {
            format!("{dev_name}: ")
        }
    )
}

fn run(a: &Args) -> u8 {
    // e2fsck's fatal_error for these: exit 8, not a usage error.
    if (a.no as u8 + a.preen as u8 + a.yes as u8) > 1 {
        eprintln!("fsck.ext4r: Only one of the options -p/-a, -n or -y may be specified.");
        return EXIT_ERROR;
    }
    if a.no && a.optimize_dirs {
        eprintln!("fsck.ext4r: The -n and -D options are incompatible.");
        return EXIT_ERROR;
    }
    let dev_name = a.device.display().to_string();
    let ext = match extended_options(&a.extended) {
        Ok(e) => e,
        Err(code) => return code,
    };
    // As e2fsck: the version on stderr, except when preening.
    if !a.preen && !a.json {
        eprintln!("fsck.ext4r {}", env!("CARGO_PKG_VERSION"));
    }
    // Without -n/-p/-y e2fsck asks before each fix (JSON output stays a
    // read-only report: there is nobody to ask).
    let interactive = !a.no && !a.preen && !a.yes && !a.json;
    if a.preen || a.yes || interactive || ext.journal_only && !a.no {
        return repair_run(a, &dev_name, ext);
    }
    let dev = match FileDevice::open(&a.device, OpenMode::default()) {
        Ok(d) => d,
        Err(e) => {
            open_failed(&dev_name, &e);
            return EXIT_ERROR;
        }
    };
    if !a.json && busy(&a.device) {
        // As e2fsck -n: a read-only check goes on, with a warning.
        println!("Warning!  {dev_name} is in use.");
    } else if let Some(w) = ext4r::device::writer_of(&a.device).filter(|_| !a.json) {
        // One of our writers has it (readers take no lock, see
        // ext4r::device::lock): what it has half written may be reported.
        println!("Warning!  {dev_name} is in use by {w}.");
    }
    let mismatch = ext4r_fsck::size_mismatch(&dev, a.superblock, a.block_size);
    if let Some(m) = mismatch {
        // As e2fsck -n: said, answered no, and the check goes on.
        if a.json {
            eprintln!("{}", m.message());
        } else {
            println!("{}\nAbort? no\n", m.message());
        }
    }
    let mut opts = Options::default();
    opts.no_optimize_extents = ext.no_optimize_extents;
    opts.force = a.force;
    opts.superblock = a.superblock;
    opts.block_size = a.block_size;
    opts.now = now();
    opts.clock_insane = clock_insane(opts.now);
    opts.threads = a.threads;
    opts.cancel = Some(cancel::install());
    opts.external_journal = match external_journal(a, false) {
        Ok(j) => j,
        Err(code) => return code,
    };
    let started = Instant::now();
    let mut printer = Printer {
        dev: dev_name.clone(),
        named: false,
        style: if a.json { Style::Silent } else { Style::Check },
        timing: a.timing,
        meter: Meter::new(
            a.progress_fd.filter(|_| !a.json),
            &dev_name,
            std::io::stdout().is_terminal(),
        ),
        printed: Default::default(),
        verbose: a.verbose,
        latches: HashMap::new(),
    };
    let result = check(dev, &opts, &mut printer);
    printer.finish();
    let mut report = match result {
        Ok(r) => r,
        Err(ext4r_fsck::Error::Unsupported(u)) => return unsupported(&dev_name, &u, false, a.json),
        Err(e) => return cannot_open(&dev_name, &e, false, a.json),
    };
    // Cancelled: every problem found so far was answered no, so they
    // count as e2fsck's "still has errors", as a flag the kernel set does.
    let code = if report.cancelled {
        let left = report.has_errors() || report.errors_flagged;
        EXIT_CANCELLED | if left { EXIT_UNCORRECTED } else { EXIT_OK }
    } else if report.fatal.is_some() {
        // e2fsck's fatal_error: 8, and 4 when the filesystem is not
        // valid (errors left, or stopped in the journal check before
        // e2fsck marked it valid).
        let invalid = report.fatal_journal || report.has_errors();
        EXIT_ERROR | if invalid { EXIT_UNCORRECTED } else { EXIT_OK }
    } else if report.has_errors() {
        EXIT_UNCORRECTED
    } else {
        EXIT_OK
    };
    // From the open on, e2fsck names the filesystem by its label.
    let name = &printer.dev;
    if report.cancelled && !a.json {
        return cancel::report(name, code);
    }
    if a.json {
        // The report lists it with the rest (the text run printed it).
        if let Some(m) = mismatch {
            m.record(&mut report.problems);
        }
        println!(
            "{}",
            json::render(&dev_name, &report, code, started.elapsed().as_secs_f64())
        );
    } else {
        print_text(name, a, &report);
    }
    code
}

/// `-p`/`-y`, interactive (and `-E journal_only`): open for writing,
/// exclusively, refuse a mounted filesystem, replay the journal and repair.
fn repair_run(a: &Args, dev_name: &str, ext: Extended) -> u8 {
    let journal_only = ext.journal_only;
    let interactive = !a.preen && !a.yes;
    match ext4r::safety::mounted(&a.device) {
        Ok(Some(m)) => {
            eprintln!(
                "{dev_name} is mounted on {}.\nfsck.ext4r: Cannot continue, aborting.",
                m.mountpoint
            );
            return EXIT_ERROR;
        }
        Ok(None) => {}
        Err(e) => {
            eprintln!(
                "fsck.ext4r: {} while determining whether {dev_name} is mounted.",
                message(&e)
            );
            return EXIT_ERROR;
        }
    }
    // As e2fsck: questions need a terminal on both ends (its
    // E2FSCK_FORCE_INTERACTIVE lets a script answer them instead).
    let forced = std::env::var_os("E2FSCK_FORCE_INTERACTIVE").is_some();
    if interactive
        && !forced
        && !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal())
    {
        eprintln!("fsck.ext4r: need terminal for interactive repairs");
        return EXIT_ERROR;
    }
    let mode = OpenMode {
        write: true,
        exclusive: true,
        ..OpenMode::default()
    };
    let dev = match FileDevice::open(&a.device, mode) {
        Ok(d) => d,
        Err(ext4r::Error::InUse(_)) => {
            // Held open exclusively by someone else (another fsck, a
            // mount in another namespace, a device mapper): e2fsck's
            // check_mount words.
            println!("{dev_name} is in use.");
            eprintln!("fsck.ext4r: Cannot continue, aborting.\n");
            return EXIT_ERROR;
        }
        Err(ext4r::Error::Locked { holder, .. }) => {
            // Another of our writers (ext4r cp, tune.ext4r, another
            // fsck): the same words, and who it is.
            println!("{dev_name} is in use by {holder}.");
            eprintln!("fsck.ext4r: Cannot continue, aborting.\n");
            return EXIT_ERROR;
        }
        Err(e) => {
            open_failed(dev_name, &e);
            return EXIT_ERROR;
        }
    };
    let tty = std::io::stdout().is_terminal();
    let mut asker = ask::Asker::new(None);
    // Before a replay or a repair writes anything: a filesystem larger
    // than its device means the superblock or the partition table is
    // wrong, and e2fsck stops unless told to go on.
    if let Some(m) = ext4r_fsck::size_mismatch(&dev, a.superblock, a.block_size) {
        if a.preen {
            println!(
                "{dev_name}: {}\n\n{dev_name}: UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY.\n\t\
                 (i.e., without -a or -p options)",
                m.message()
            );
            // As e2fsck's preenhalt: the superblock says errors, so that
            // the next boot does not take the filesystem for clean.
            if let Err(e) = ext4r_fsck::preen_halt(std::sync::Arc::new(dev), now()) {
                eprintln!(
                    "fsck.ext4r: {} while marking {dev_name} as having errors",
                    message(&e)
                );
            }
            return EXIT_UNCORRECTED;
        }
        println!("{}", m.message());
        if a.yes {
            println!("Abort? yes\n");
            return EXIT_ERROR;
        }
        if asker.ask("Abort") != ext4r_fsck::Answer::No {
            return EXIT_ERROR;
        }
    }
    let mut opts = Options::default();
    opts.no_optimize_extents = ext.no_optimize_extents;
    opts.force = a.force;
    opts.superblock = a.superblock;
    opts.block_size = a.block_size;
    opts.now = now();
    opts.clock_insane = clock_insane(opts.now);
    opts.rehash = a.optimize_dirs;
    opts.threads = a.threads;
    opts.device_name = dev_name.to_string();
    opts.cancel = Some(cancel::install());
    opts.external_journal = match external_journal(a, true) {
        Ok(j) => j,
        Err(code) => return code,
    };
    let how = if a.preen {
        ext4r_fsck::Mode::Preen
    } else {
        ext4r_fsck::Mode::Yes
    };
    let mut printer = Printer {
        dev: dev_name.to_string(),
        named: false,
        style: if a.preen { Style::Preen } else { Style::Repair },
        timing: a.timing,
        meter: Meter::new(a.progress_fd, dev_name, tty),
        printed: Default::default(),
        verbose: a.verbose,
        latches: HashMap::new(),
    };
    asker.bar = printer.meter.bar().cloned();
    let dev = std::sync::Arc::new(dev);
    let result = if interactive {
        let mut ask = |p: &ext4r_fsck::Problem| asker.problem(p);
        ext4r_fsck::repair_interactive(dev, &opts, journal_only, &mut printer, &mut ask)
    } else {
        ext4r_fsck::repair(dev, &opts, how, journal_only, &mut printer)
    };
    printer.finish();
    let r = match result {
        Ok(r) => r,
        Err(ext4r_fsck::Error::Unsupported(u)) => return unsupported(dev_name, &u, true, false),
        Err(
            e @ (ext4r_fsck::Error::UnknownChecksum
            | ext4r_fsck::Error::NoFilesystem(_)
            | ext4r_fsck::Error::CorruptSuperblock(_)),
        ) => return cannot_open(dev_name, &e, a.preen, false),
        Err(ext4r_fsck::Error::Open(ext4r::Error::MmpInUse { why, info })) => {
            // e2fsck_check_mmp's words; nothing was written.
            eprintln!("fsck.ext4r: MMP: {why} while checking MMP block");
            if why != ext4r::mmp::MmpBusy::Active {
                println!(
                    "MMP check failed: If you are sure the filesystem is not in use on any \
                     node, run:\n'tune.ext4r -f -E clear_mmp {dev_name}'\n"
                );
            }
            println!(
                "MMP error info: node: {}, device: {}, updated: {}",
                info.node,
                info.device,
                ext4r::localtime::ctime(info.time as i64)
            );
            return EXIT_ERROR;
        }
        Err(e) => {
            eprintln!("fsck.ext4r: {} while checking {dev_name}", message(&e));
            return EXIT_ERROR;
        }
    };
    // From the open on, e2fsck names the filesystem by its label.
    let dev_name = printer.dev.as_str();
    if r.cancelled {
        return cancel::report(dev_name, r.exit_code());
    }
    // What was only said (released orphans), before anything else, as
    // e2fsck says it while it checks the superblock (the other runs were
    // told it live).
    for p in r.fixed.iter().filter(|p| a.preen && p.fix.is_none()) {
        println!("{dev_name}: {}", p.message);
    }
    if r.last.skipped_clean.is_some() {
        let s = &r.last.summary;
        println!(
            "{dev_name}: clean, {}/{} files, {}/{} blocks",
            s.inodes_used, s.inodes_count, s.blocks_used, s.blocks_count
        );
        return r.exit_code();
    }
    // -y and interactive runs showed each problem as it was found; preen
    // lists what it fixed once each round was decided.
    // As e2fsck -p: bitmaps and counts silently, the others with the word
    // for what was done ("CLEARED", "RECONNECTED"), where the question
    // would have gone.
    for p in r
        .fixed
        .iter()
        .filter(|p| a.preen && p.fix.is_some() && !ext4r_fsck::preen_silent(p.code))
    {
        if ext4r_fsck::no_prompt(p.code) {
            // Nothing asked, nothing answered: the message alone.
            println!("{dev_name}: {}", p.message.trim_end());
            continue;
        }
        let done = ext4r_fsck::preen_word(ext4r_fsck::prompt(p.code));
        let gap = match ext4r_fsck::question_spacing(p.code) {
            Some(n) => " ".repeat(n),
            None => "\n".to_string(),
        };
        println!("{dev_name}: {}{gap}{done}.", p.message.trim_end());
    }
    // The heading was said after pass 3 when the check found directories
    // to rebuild, as e2fsck says it; here only for those it did not (-D).
    let heading_said = printer.printed.any_of(ProblemCode::PR_3A_PASS_HEADER);
    if !r.rehashed.is_empty() && !a.preen && !heading_said {
        println!("Pass 3A: Optimizing directories\n");
    }
    if let Some(made) = &r.journal_recreated {
        // Interactive runs asked the question already.
        if a.preen {
            println!("{dev_name}: Recreate journal.");
        } else if a.yes {
            println!("Recreate journal? yes\n");
        }
        match made {
            Ok(n) => println!(
                "Creating journal ({n} blocks):  Done.\n\n*** journal has been regenerated ***"
            ),
            Err(why) => println!("Creating journal: {why}: while trying to create journal"),
        }
    }
    if let Some(p) = &r.preen_stopped {
        println!(
            "\n{dev_name}: {}\n\n{dev_name}: UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY.\n\t\
             (i.e., without -a or -p options)",
            p.message
        );
        return r.exit_code();
    }
    // Errors left that were not shown while the checks ran (a journal-only
    // run's, those found by the last check alone).
    for p in r
        .last
        .problems
        .list()
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .filter(|p| printer.printed.get(p).is_none())
        .filter(|p| !r.declined.iter().any(|d| d.is_same(p)))
    {
        println!(
            "{}? no (not repairable by this version)\n",
            live::question(p)
        );
    }
    // e2fsck -p never says so; see RepairReport::changed for when the
    // others do.
    if r.changed() && !a.preen {
        println!("\n{dev_name}: ***** FILE SYSTEM WAS MODIFIED *****");
    }
    if r.last.has_errors() {
        println!("\n{dev_name}: ********** WARNING: Filesystem still has errors **********\n");
    }
    println!("{}", summary_line(dev_name, &r.last.summary));
    r.exit_code()
}

/// e2fsck's summary line: "IMG: 11/4096 files (0.0% non-contiguous),
/// 2325/16384 blocks", the share rounded to a tenth as e2fsck rounds it.
fn summary_line(dev: &str, s: &Summary) -> String {
    let tenths = (10_000 * s.fragmented)
        .checked_div(s.inodes_used)
        .map_or(0, |permyriad| (permyriad + 5) / 10);
    format!(
        "{dev}: {}/{} files ({}.{}% non-contiguous), {}/{} blocks",
        s.inodes_used,
        s.inodes_count,
        tenths / 10,
        tenths % 10,
        s.blocks_used,
        s.blocks_count
    )
}

/// The check's clock: `E2FSCK_TIME` (seconds since the epoch) when set to
/// a number, as e2fsck reads it, so that runs can be compared byte for
/// byte (deletion times, the superblock's write and check times); else now.
fn now() -> i64 {
    if let Some(t) = std::env::var("E2FSCK_TIME")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
    {
        return t;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// e2fsck's `E2F_FLAG_TIME_INSANE`: the system clock (not `E2FSCK_TIME`)
/// says a time before 2010, so a repair does not record it as the check
/// time.
fn clock_insane(now: i64) -> bool {
    const JAN_1_2010: i64 = 1_262_322_000;
    std::env::var_os("E2FSCK_TIME").is_none() && now < JAN_1_2010
}

/// The end of a read-only check's output: problems and headings were
/// printed as the passes ran.
fn print_text(dev: &str, a: &Args, r: &Report) {
    let s = &r.summary;
    if r.skipped_clean.is_some() {
        println!(
            "{dev}: clean, {}/{} files, {}/{} blocks",
            s.inodes_used, s.inodes_count, s.blocks_used, s.blocks_count
        );
        return;
    }
    if let Some(f) = &r.fatal {
        // As e2fsck's fatal_error: why on stderr, the warning when the
        // filesystem is not valid, and no summary.
        if r.fatal_journal {
            if !f.is_empty() {
                eprintln!("fsck.ext4r: {f} while checking journal for {dev}");
                eprintln!("fsck.ext4r: Cannot proceed with file system check");
            }
        } else {
            eprintln!("fsck.ext4r: {f}");
        }
        if r.fatal_journal || r.has_errors() {
            println!("\n{dev}: ********** WARNING: Filesystem still has errors **********\n");
        }
        return;
    }
    if r.problems.dropped() > 0 {
        println!("... and {} more problems not shown.", r.problems.dropped());
    }
    if r.has_errors() {
        println!("\n{dev}: ********** WARNING: Filesystem still has errors **********\n");
    }
    if a.verbose {
        println!(
            "\n{:>12} inodes used ({:.2}%, out of {})\n{:>12} non-contiguous files\n\
             {:>12} blocks used ({:.2}%, out of {})\n\n{:>12} regular files\n{:>12} directories\n\
             {:>12} character/block device files\n{:>12} fifos\n{:>12} symbolic links \
             ({} fast symbolic links)\n{:>12} sockets\n{:>12} multiply-linked files",
            s.inodes_used,
            s.inodes_used as f64 * 100.0 / s.inodes_count.max(1) as f64,
            s.inodes_count,
            s.fragmented,
            s.blocks_used,
            s.blocks_used as f64 * 100.0 / s.blocks_count.max(1) as f64,
            s.blocks_count,
            s.regular,
            s.directories,
            s.devices,
            s.fifos,
            s.symlinks,
            s.fast_symlinks,
            s.sockets,
            s.multiply_linked,
        );
    } else {
        println!("{}", summary_line(dev, s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_rounds_as_e2fsck() {
        let s = Summary {
            inodes_used: 3,
            inodes_count: 100,
            fragmented: 1,
            blocks_used: 7,
            blocks_count: 9,
            ..Summary::default()
        };
        // 1/3 = 33.33% -> 33.3
        assert_eq!(
            summary_line("d", &s),
            "d: 3/100 files (33.3% non-contiguous), 7/9 blocks"
        );
        let s = Summary {
            inodes_used: 0,
            ..s
        };
        assert!(summary_line("d", &s).contains("(0.0% non-contiguous)"));
    }
}
