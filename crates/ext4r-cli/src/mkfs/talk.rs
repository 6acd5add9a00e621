//! What mkfs.ext4r says and asks on the way, where and as mke2fs says and
//! asks it: warnings on standard error, questions on standard output
//! answered by a line on standard input, `-F` to go on without asking.

use ext4r::mkfs::Notice;
use std::io::Write;
use std::path::{Path, PathBuf};

/// mke2fs's proceed_question: "Proceed anyway? (y,N) " on standard
/// output, then a line from standard input. Only a line starting with `y`
/// or `Y` goes on; anything else, end of input too (no terminal, no
/// answer), ends the line and the answer is no.
pub(super) fn proceed() -> bool {
    let _ = std::io::stderr().flush();
    print!("Proceed anyway? (y,N) ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let yes = std::io::stdin().read_line(&mut line).is_ok() && line.starts_with(['y', 'Y']);
    if !yes {
        println!();
    }
    yes
}

/// Says `n` where mke2fs says it and, where mke2fs stops unless forced,
/// asks or refuses: `force` is the number of `-F`s. Whether to go on.
pub(super) fn notice(n: &Notice, force: u8, quiet: bool) -> bool {
    match n {
        Notice::BlockSizeAbovePage { .. } => {
            if force == 0 {
                eprintln!("mkfs.ext4r: {n}");
                if !proceed() {
                    return false;
                }
            }
            if let Some(m) = n.forced_message() {
                eprintln!("{m}");
            }
            true
        }
        Notice::UndefinedFsType(_) => {
            // mke2fs says this on standard output, with a blank line after
            // its advice to update mke2fs.conf.
            println!("\n{n}");
            if n.to_string().contains('\n') {
                println!();
            }
            if force == 0 {
                println!("Aborting...");
                return false;
            }
            true
        }
        Notice::LargeCluster if quiet => true,
        Notice::LargeCluster | Notice::NoJournal => {
            eprintln!("\n{n}");
            true
        }
        Notice::SmallInodes => {
            println!("{n}");
            true
        }
        Notice::LabelTruncated(_) => {
            eprintln!("{n}\n");
            true
        }
        Notice::UnknownUsageType(_) | Notice::StripeNotMultiple { .. } => {
            eprintln!("\n{n}\n");
            true
        }
        _ => {
            eprintln!("{n}");
            true
        }
    }
}

/// An image file this run created: removed again when the run ends
/// without [`Created::keep`], so that a refused or failed mkfs leaves no
/// file behind (mke2fs leaves an empty or partial one).
pub(super) struct Created(Option<PathBuf>);

impl Created {
    /// Creates `path`, which must not exist (`O_EXCL`: a file someone else
    /// made meanwhile is never taken for ours), empty, with mode 0666 less
    /// the umask, as mke2fs creates an image.
    pub(super) fn new(path: &Path) -> std::io::Result<Created> {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Created(Some(path.to_path_buf())))
    }

    /// The run succeeded: the file stays.
    pub(super) fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A refusal whose words were said already: the run ends with exit 1 and
/// nothing more is printed. mke2fs says some refusals without its name in
/// front ("IMG is mounted; will not make a filesystem here!").
#[derive(Debug)]
pub(super) struct Said;

impl std::fmt::Display for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for Said {}

/// Says `msg` on standard error as it stands, and refuses.
pub(super) fn refuse(msg: impl std::fmt::Display) -> anyhow::Error {
    eprintln!("{msg}");
    Said.into()
}
