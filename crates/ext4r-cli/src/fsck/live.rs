//! fsck's output as the check runs: e2fsck's pass headings when a pass
//! starts, each problem with what is done about it, the "check forced"
//! reason, and the `-C` progress (a bar on the terminal through
//! indicatif, drawn below what has been printed, or e2fsck's
//! "pass done total device" lines on another descriptor).

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use ext4r_fsck::{Action, Forced, JournalRecovered, Observer, Problem, ProblemCode};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// e2fsck's pass headings.
pub(crate) fn heading(pass: u8) -> Option<&'static str> {
    Some(match pass {
        1 => "Pass 1: Checking inodes, blocks, and sizes",
        2 => "Pass 2: Checking directory structure",
        3 => "Pass 3: Checking directory connectivity",
        4 => "Pass 4: Checking reference counts",
        5 => "Pass 5: Checking group summary information",
        _ => return None,
    })
}

/// Where each pass starts and ends on the bar, in per mille: e2fsck's
/// weights (pass 1 is most of the work).
const WEIGHTS: [u64; 6] = [0, 700, 900, 920, 950, 1000];

/// How the run shows problems.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// `-n`: each with "<prompt>? no".
    Check,
    /// `-y` and interactive runs: headings, and each problem as fixed,
    /// asked or left.
    Repair,
    /// `-p`: no headings; what was fixed is listed once decided.
    Preen,
    /// `--json`: nothing while running.
    Silent,
}

/// What progress is shown.
pub(crate) enum Meter {
    None,
    Bar(ProgressBar),
    /// `-C fd`: e2fsck's machine-readable lines.
    Fd(std::fs::File),
}

impl Meter {
    /// The meter `-C fd` asks for: 0 a bar when stdout is a terminal,
    /// another descriptor its lines (as e2fsck writes them for fsck(8)
    /// and systemd-fsckd).
    pub(crate) fn new(fd: Option<i32>, dev: &str, tty: bool) -> Meter {
        match fd {
            Some(0) if tty => {
                let style = ProgressStyle::with_template("{prefix}: |{bar:50}| {percent:>3}%")
                    .map(|s| s.progress_chars("== "))
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
                let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stdout())
                    .with_style(style)
                    .with_prefix(dev.to_string());
                Meter::Bar(bar)
            }
            // A descriptor inherited from the caller, opened through
            // /proc so that no ownership claim on a raw descriptor is needed.
            Some(n) if n > 0 => std::fs::OpenOptions::new()
                .write(true)
                .open(format!("/proc/self/fd/{n}"))
                .map_or(Meter::None, Meter::Fd),
            _ => Meter::None,
        }
    }

    pub(crate) fn bar(&self) -> Option<&ProgressBar> {
        match self {
            Meter::Bar(b) => Some(b),
            _ => None,
        }
    }
}

/// Prints `text` on stdout, above the bar when there is one.
pub(crate) fn out(bar: Option<&ProgressBar>, text: &str) {
    let write = || {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(text.as_bytes());
        let _ = o.flush();
    };
    match bar {
        Some(b) => b.suspend(write),
        None => write(),
    }
}

/// The question word e2fsck puts after a problem.
pub(crate) fn question(p: &Problem) -> String {
    match ext4r_fsck::prompt(p.code) {
        // PROMPT_NULL: the message is the question.
        "" => p.message.clone(),
        word => match ext4r_fsck::question_spacing(p.code) {
            // "Inode 2 ref count is 9, should be 3.  Fix? no"
            Some(n) => format!("{}{}{word}", p.message.trim_end(), " ".repeat(n)),
            None => format!("{}\n{word}", p.message),
        },
    }
}

/// The observer that prints.
pub(crate) struct Printer {
    /// The filesystem's name in what is printed: the path given until the
    /// filesystem is opened, then e2fsck's `device_name` (see
    /// [`device_name`]).
    pub dev: String,
    /// The name was taken from the opened filesystem.
    pub named: bool,
    pub style: Style,
    pub timing: bool,
    pub meter: Meter,
    /// Problems printed (see [`ext4r_fsck::Seen`]).
    pub printed: ext4r_fsck::Seen<()>,
    /// `-v`: also what a journal recovery replayed.
    pub verbose: bool,
    /// The latch questions asked, by latch code: the message of the run
    /// in progress.
    pub latches: HashMap<ProblemCode, String>,
}

impl Printer {
    fn say(&self, text: &str) {
        if self.style != Style::Silent {
            out(self.meter.bar(), text);
        }
    }

    /// Takes the bar off the screen at the end.
    pub(crate) fn finish(&self) {
        if let Some(b) = self.meter.bar() {
            b.finish_and_clear();
        }
    }
}

/// e2fsck's `device_name`: the volume label when there is one, else the
/// path given, with blanks and colons made underscores (so that the
/// "NAME: message" lines of preen mode parse).
pub(crate) fn device_name(label: &str, path: &str) -> String {
    let name = if label.is_empty() { path } else { label };
    name.chars()
        .map(|c| {
            if c.is_whitespace() || c == ':' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

impl Printer {
    /// A latched problem as e2fsck's fix_problem says it: the latch's
    /// question first when a run starts (answered for the run), then the
    /// problem with the run's answer ("IGNORED.", or what was done).
    fn latched(&mut self, p: &Problem, l: &ext4r_fsck::Latch, yes: bool) -> String {
        let mut text = String::new();
        if self.latches.get(&l.code) != Some(&l.message) {
            self.latches.insert(l.code, l.message.clone());
            let silent = matches!(
                l.code,
                ProblemCode::PR_5_BLOCK_BITMAP_HEADER | ProblemCode::PR_5_INODE_BITMAP_HEADER
            ) || ext4r_fsck::no_prompt(l.code);
            if silent {
                text += &l.message;
            } else {
                let q = Problem {
                    message: l.message.clone(),
                    code: l.code,
                    latch: None,
                    ..p.clone()
                };
                text += &format!("{}? {}\n\n", question(&q), if yes { "yes" } else { "no" });
            }
        }
        let done = if yes {
            ext4r_fsck::preen_word(ext4r_fsck::prompt(p.code))
        } else {
            "IGNORED"
        };
        match ext4r_fsck::question_spacing(p.code) {
            Some(n) => text += &format!("{}{}{done}.\n", p.message.trim_end(), " ".repeat(n)),
            None => text += &format!("{}\n{done}.\n", p.message.trim_end_matches('\n')),
        }
        text
    }
}

impl Observer for Printer {
    fn opened(&mut self, label: &str) {
        if !self.named {
            self.named = true;
            self.dev = device_name(label, &self.dev);
        }
    }

    fn pass_started(&mut self, pass: u8) {
        // The heading first, then the bar below it, as e2fsck draws.
        if matches!(self.style, Style::Check | Style::Repair) {
            if let Some(h) = heading(pass) {
                self.say(&format!("{h}\n"));
            }
        }
        if let Some(b) = self.meter.bar() {
            b.set_position(WEIGHTS[usize::from(pass.saturating_sub(1)).min(5)]);
        }
    }

    fn progress(&mut self, pass: u8, done: u64, total: u64) {
        match &mut self.meter {
            Meter::Bar(b) if total > 0 && (1..=5).contains(&pass) => {
                let lo = WEIGHTS[usize::from(pass - 1)];
                let hi = WEIGHTS[usize::from(pass)];
                b.set_position(lo + (hi - lo) * done.min(total) / total);
            }
            Meter::Fd(f) => {
                let _ = writeln!(f, "{pass} {done} {total} {}", self.dev);
            }
            _ => {}
        }
    }

    fn pass_finished(&mut self, pass: u8, elapsed: Duration) {
        if self.timing && self.style == Style::Check {
            self.say(&format!("  ({:.3}s)\n", elapsed.as_secs_f64()));
        }
        let _ = pass;
    }

    fn problem(&mut self, p: &Problem, action: Action) {
        self.printed.insert(p, ());
        if self.style == Style::Check && ext4r_fsck::no_nomsg(p.code) {
            return;
        }
        if let Some(l) = &p.latch {
            if matches!(action, Action::Report | Action::Fix | Action::Unfixable)
                && matches!(self.style, Style::Check | Style::Repair)
            {
                let text = self.latched(p, l, action == Action::Fix);
                self.say(&text);
                return;
            }
        }
        let q = question(p);
        let text = match action {
            // PROMPT_NONE: e2fsck says what it does (or would do), and
            // asks nothing.
            Action::Report | Action::Fix if ext4r_fsck::no_prompt(p.code) => format!(
                "{}{}",
                p.message.trim_end_matches('\n'),
                "\n".repeat(ext4r_fsck::trailing_newlines(p.code))
            ),
            // A harmless one (PR_NO_OK) declined reads the same; only the
            // exit code differs, as in e2fsck.
            Action::Report => format!("{q}? no\n\n"),
            // e2fsck_journal_fix_bad_inode says what it did to a journal
            // the superblock named (journal inode 0: nothing to delete).
            Action::Fix
                if p.code == ProblemCode::PR_0_JOURNAL_BAD_INODE
                    && !p.message.contains("(inode 0)") =>
            {
                format!("{q}? yes\n\n*** journal has been deleted ***\n\n")
            }
            Action::Fix => format!("{q}? yes\n\n"),
            Action::Unfixable => format!("{q}? no (not repairable by this version)\n\n"),
            // e2fsck says yes to creating lost+found on a full filesystem,
            // and then tells why nothing was made.
            // And pass 1E's heading when it rebuilds extent trees.
            Action::Left
                if ext4r_fsck::no_prompt(p.code)
                    && (p.pass == 3
                        || orphan_file(p.code)
                        || p.code == ProblemCode::PR_1E_PASS_HEADER) =>
            {
                format!("{}\n", p.message.trim_end_matches('\n'))
            }
            // Said under -y as under -n: the directory goes on the list
            // pass 3A rebuilds.
            Action::Left if p.code == ProblemCode::PR_2_REPORT_DUP_DIRENT => format!(
                "{}{}",
                p.message.trim_end_matches('\n'),
                "\n".repeat(ext4r_fsck::trailing_newlines(p.code))
            ),
            Action::Left
                if matches!(
                    p.code,
                    ProblemCode::PR_3_NO_LF_DIR | ProblemCode::PR_3_LPF_NO_SPACE
                ) =>
            {
                format!("{q}? yes\n\n")
            }
            // Asked: the question and its answer are on the screen.
            _ => return,
        };
        if matches!(self.style, Style::Check | Style::Repair) {
            self.say(&text);
        }
    }

    fn note(&mut self, note: &str) {
        if matches!(self.style, Style::Check | Style::Repair) {
            self.say(&format!("{note}\n"));
        }
    }

    fn check_forced(&mut self, why: &Forced) {
        self.say(&format!("{} {why}, check forced.\n", self.dev));
    }

    fn journal_recovered(&mut self, j: &JournalRecovered) {
        // Where e2fsck says it: before the passes.
        self.say(&format!("{}: recovering journal\n", self.dev));
        // What e2fsck's recovery prints as it replays.
        for b in &j.bad_copies {
            self.say(&format!(
                "JBD2: Invalid checksum recovering data block {b} in log\n"
            ));
        }
        // e2fsck's word for a recovery that returned EFSBADCRC.
        if j.checksum_error {
            self.say(&format!("Journal checksum error found in {}\n", self.dev));
        }
        if j.invalid_argument {
            // e2fsck's com_err for the EINVAL its recovery returned.
            eprintln!(
                "fsck.ext4r: Invalid argument while recovering journal of {}",
                self.dev
            );
        }
        // e2fsck's PR_0_JNL_TXN_CORRUPT.
        if let Some(t) = j.failed_commit {
            self.say(&format!(
                "Journal transaction {t} was corrupt, replay was aborted.\n"
            ));
        }
        if self.verbose {
            let mut text = format!(
                "{}: replayed transactions {} to {}",
                self.dev,
                j.first,
                j.end.wrapping_sub(1)
            );
            if j.fast_commit_records > 0 {
                text += &format!(
                    " and {} fast commit{} of transaction {} ({} records)",
                    j.fast_commits,
                    if j.fast_commits == 1 { "" } else { "s" },
                    j.end,
                    j.fast_commit_records
                );
            }
            if let Some(p) = &j.problem {
                text += &format!("; incomplete: {p}");
            }
            self.say(&format!("{text}\n"));
        }
    }
}

/// e2fsck's problems of the orphan file said after the passes.
fn orphan_file(code: ProblemCode) -> bool {
    matches!(
        code,
        ProblemCode::PR_6_ORPHAN_FILE_WITHOUT_JOURNAL
            | ProblemCode::PR_6_ORPHAN_FILE_TRUNC_FAILED
            | ProblemCode::PR_6_ORPHAN_FILE_CORRUPTED
            | ProblemCode::PR_6_ORPHAN_FILE_BITMAP_INVALID
            | ProblemCode::PR_6_ORPHAN_FILE_CREATE_FAILED
            | ProblemCode::PR_6_ORPHAN_FILE_WRONG_SIZE
            | ProblemCode::PR_6_ORPHAN_FILE_HOLE
    )
}
