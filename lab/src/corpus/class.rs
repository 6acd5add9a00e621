//! Sorting a checker's exit into verdict classes (fsck(8) exit codes, DESIGN.md §5).

use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// What a checker's run says about an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Exit 0.
    Clean,
    /// Exit 1, 2 or 3: errors corrected (a verdict of -y/-p runs, not of -n).
    Fixed,
    /// Bit 4 set: errors left uncorrected. e2fsck's 12 (4|8, found errors, then
    /// aborted) is here: the image was judged damaged.
    Errors,
    /// Exit 8: operational error.
    OpError,
    /// Bit 16: usage error (e.g. an option we do not take yet).
    Usage,
    /// Bit 32: cancelled by request.
    Cancelled,
    /// An exit code that fits none of the above.
    Other,
    /// Killed by a signal, a Rust panic (exit 101), or e2fsck's own crash
    /// handler (exit 8 after printing `Signal (N) SIG…`).
    Crash,
    /// Killed by the harness after the time limit.
    Timeout,
}

impl Class {
    /// The class of a plain exit code. 124 is `timeout(1)`'s code, which is how
    /// verdicts.tsv records a timed-out e2fsck.
    pub fn of_code(code: i32) -> Class {
        match code {
            0 => Class::Clean,
            101 => Class::Crash,
            124 => Class::Timeout,
            c if !(0..64).contains(&c) => Class::Other,
            c if c & 16 != 0 => Class::Usage,
            c if c & 32 != 0 => Class::Cancelled,
            c if c & 4 != 0 => Class::Errors,
            c if c & 8 != 0 => Class::OpError,
            c if c & 3 != 0 => Class::Fixed,
            _ => Class::Other,
        }
    }

    /// Short lower-case name, also the token in caches and JSON.
    pub fn token(self) -> &'static str {
        match self {
            Class::Clean => "clean",
            Class::Fixed => "fixed",
            Class::Errors => "errors",
            Class::OpError => "operr",
            Class::Usage => "usage",
            Class::Cancelled => "cancelled",
            Class::Other => "other",
            Class::Crash => "crash",
            Class::Timeout => "timeout",
        }
    }

    pub fn from_token(t: &str) -> Option<Class> {
        [
            Class::Clean,
            Class::Fixed,
            Class::Errors,
            Class::OpError,
            Class::Usage,
            Class::Cancelled,
            Class::Other,
            Class::Crash,
            Class::Timeout,
        ]
        .into_iter()
        .find(|c| c.token() == t)
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// One classified run: the class and the raw fact behind it ("exit 12", "signal 11").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub class: Class,
    pub detail: String,
}

impl Outcome {
    /// Classifies a finished run. `stderr` is only looked at for e2fsck's crash
    /// handler, which catches SIGSEGV/SIGBUS, prints a backtrace starting with
    /// `Signal (11) SIGSEGV` and exits 8: that is a crash, not a verdict.
    pub fn of_run(status: ExitStatus, timed_out: bool, stderr: &str, limit_secs: u64) -> Outcome {
        if timed_out {
            return Outcome {
                class: Class::Timeout,
                detail: format!("killed after {limit_secs}s"),
            };
        }
        if let Some(sig) = status.signal() {
            return Outcome {
                class: Class::Crash,
                detail: format!("signal {sig}{}", signal_name(sig)),
            };
        }
        let code = status.code().unwrap_or(-1);
        if code == 8 {
            if let Some(line) = stderr.lines().find(|l| l.starts_with("Signal (")) {
                let what = line
                    .split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ");
                return Outcome {
                    class: Class::Crash,
                    detail: format!("exit 8 after e2fsck's crash handler: {what}"),
                };
            }
        }
        let class = match code {
            // Here a real exit, not timeout(1)'s marker.
            124 => Class::Other,
            c => Class::of_code(c),
        };
        let detail = if code == 101 {
            "exit 101 (panic)".to_string()
        } else {
            format!("exit {code}")
        };
        Outcome { class, detail }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGILL => " (SIGILL)",
        libc::SIGFPE => " (SIGFPE)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Class::of_code(0), Class::Clean);
        assert_eq!(Class::of_code(1), Class::Fixed);
        assert_eq!(Class::of_code(3), Class::Fixed);
        assert_eq!(Class::of_code(4), Class::Errors);
        assert_eq!(Class::of_code(12), Class::Errors);
        assert_eq!(Class::of_code(8), Class::OpError);
        assert_eq!(Class::of_code(16), Class::Usage);
        assert_eq!(Class::of_code(32), Class::Cancelled);
        assert_eq!(Class::of_code(101), Class::Crash);
        assert_eq!(Class::of_code(124), Class::Timeout);
        assert_eq!(Class::of_code(200), Class::Other);
        for c in [Class::Clean, Class::Errors, Class::Timeout, Class::OpError] {
            assert_eq!(Class::from_token(c.token()), Some(c));
        }
        assert_eq!(Class::from_token("nope"), None);
    }

    #[test]
    fn runs() {
        let o = Outcome::of_run(exited(12), false, "", 60);
        assert_eq!((o.class, o.detail.as_str()), (Class::Errors, "exit 12"));
        assert_eq!(
            Outcome::of_run(exited(101), false, "", 60).class,
            Class::Crash
        );
        assert_eq!(
            Outcome::of_run(exited(124), false, "", 60).class,
            Class::Other
        );
        // A raw wait status of 11 = killed by SIGSEGV.
        let o = Outcome::of_run(ExitStatus::from_raw(11), false, "", 60);
        assert_eq!(
            (o.class, o.detail.as_str()),
            (Class::Crash, "signal 11 (SIGSEGV)")
        );
        let o = Outcome::of_run(ExitStatus::from_raw(9), true, "", 60);
        assert_eq!(o.class, Class::Timeout);
        let handler = "e2fsck 1.47.0 (5-Feb-2023)\nSignal (11) SIGSEGV si_code=SEGV_MAPERR\n";
        assert_eq!(
            Outcome::of_run(exited(8), false, handler, 60).class,
            Class::Crash
        );
        assert_eq!(
            Outcome::of_run(exited(8), false, "e2fsck 1.47.0\n", 60).class,
            Class::OpError
        );
    }
}
