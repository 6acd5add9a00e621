//! e2fsck's questions at the terminal: one key, read with the terminal
//! out of line mode and without echo (rustix's termios), the answer
//! written out in words.

use std::io::Write;
use std::os::fd::AsFd;

use ext4r_fsck::{Answer, Problem};
use indicatif::ProgressBar;
use rustix::termios::{self, LocalModes, OptionalActions, SpecialCodeIndex};

/// What a key means.
enum Key {
    Yes,
    No,
    All,
    /// Enter, space or Escape: the default.
    Default,
    /// Ctrl-C (read as a key: signals are off while asking).
    Cancel,
    /// End of input: the default, as e2fsck takes it.
    Eof,
    Other,
}

/// Reads one key from stdin. On a terminal, canonical mode, echo and
/// signal keys are off meanwhile (and restored before returning), so a
/// key counts without Enter, as e2fsck's `ask_yn` reads it; Ctrl-C comes
/// as a key, so that the terminal is never left raw by a signal.
fn read_key() -> Key {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let saved = termios::tcgetattr(fd).ok();
    if let Some(t) = &saved {
        let mut raw = t.clone();
        raw.local_modes
            .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
        raw.special_codes[SpecialCodeIndex::VMIN] = 1;
        raw.special_codes[SpecialCodeIndex::VTIME] = 0;
        let _ = termios::tcsetattr(fd, OptionalActions::Now, &raw);
    }
    let mut b = [0u8; 1];
    let key = loop {
        match rustix::io::read(fd, &mut b) {
            Ok(1) => break Some(b[0]),
            Err(rustix::io::Errno::INTR) => continue,
            _ => break None,
        }
    };
    if let Some(t) = &saved {
        let _ = termios::tcsetattr(fd, OptionalActions::Now, t);
    }
    match key {
        None => Key::Eof,
        Some(b'y' | b'Y') => Key::Yes,
        Some(b'n' | b'N') => Key::No,
        Some(b'a' | b'A') => Key::All,
        Some(b'\n' | b'\r' | b' ' | 27) => Key::Default,
        Some(3) => Key::Cancel,
        Some(_) => Key::Other,
    }
}

/// Asks questions as e2fsck does, remembering the run of "yes" answers
/// to offer yes-to-all after nine of them.
pub(crate) struct Asker {
    pub bar: Option<ProgressBar>,
    yes_run: i32,
}

/// fsck(8)'s exit code for a run the user cancelled.
pub(crate) const EXIT_CANCELLED: i32 = 32;

impl Asker {
    pub(crate) fn new(bar: Option<ProgressBar>) -> Self {
        Asker { bar, yes_run: 0 }
    }

    /// `question<y>? ` and one key; yes is the default. Returns the answer
    /// (yes to all as [`Answer::All`]).
    pub(crate) fn ask(&mut self, question: &str) -> Answer {
        let mut ask = || {
            // e2fsck's hint, after more than eight yeses in a row (and
            // not again after a dozen).
            let hint = if self.yes_run > 12 {
                self.yes_run = -1;
                ""
            } else if self.yes_run > 8 {
                " ('a' enables 'yes' to all) "
            } else {
                ""
            };
            let mut o = std::io::stdout();
            let _ = write!(o, "{question}{hint}<y>? ");
            let _ = o.flush();
            let answer = loop {
                match read_key() {
                    Key::Yes => {
                        if self.yes_run >= 0 {
                            self.yes_run += 1;
                        }
                        break Answer::Yes;
                    }
                    Key::No => {
                        self.yes_run = -1;
                        break Answer::No;
                    }
                    Key::All => {
                        self.yes_run = -1;
                        break Answer::All;
                    }
                    Key::Default => {
                        self.yes_run = -1;
                        break Answer::Yes;
                    }
                    Key::Eof => break Answer::Yes,
                    Key::Cancel => {
                        let _ = writeln!(o, "cancelled!");
                        let _ = o.flush();
                        std::process::exit(EXIT_CANCELLED);
                    }
                    Key::Other => continue,
                }
            };
            let word = match answer {
                Answer::All => "yes to all",
                Answer::No => "no",
                _ => "yes",
            };
            let _ = writeln!(o, "{word}");
            let _ = o.flush();
            answer
        };
        match self.bar.clone() {
            Some(b) => b.suspend(ask),
            None => ask(),
        }
    }

    /// A problem's question (its message, then e2fsck's prompt word).
    pub(crate) fn problem(&mut self, p: &Problem) -> Answer {
        self.ask(&super::live::question(p))
    }
}
