//! The progress of a defragmentation run on a terminal: an indicatif bar
//! of files done below the per-file lines (printed above it as they come).
//! Off a terminal there is no bar, and the lines are printed as they are.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar when stdout is a terminal.
pub(crate) struct Bar(Option<ProgressBar>);

impl Bar {
    pub(crate) fn new() -> Self {
        if !std::io::stdout().is_terminal() {
            return Bar(None);
        }
        let style = ProgressStyle::with_template("{pos}/{len} files |{bar:40}| {elapsed}")
            .map(|s| s.progress_chars("== "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stdout());
        b.set_style(style);
        Bar(Some(b))
    }

    /// File `i` of `n` done; `line`, when there is one, printed above the
    /// bar.
    pub(crate) fn step(&self, i: usize, n: usize, line: Option<String>) {
        match &self.0 {
            Some(b) => {
                b.set_length(n as u64);
                b.set_position(i as u64);
                if let Some(l) = line {
                    b.println(l);
                }
            }
            None => {
                if let Some(l) = line {
                    println!("{l}");
                }
            }
        }
    }

    /// Takes the bar off the screen (before the summary).
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}
