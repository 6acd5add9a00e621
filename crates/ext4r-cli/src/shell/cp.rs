//! `ext4r cp [-r] [-p] [-a] [-v] SRC... IMAGE:/DEST` (into an image) and
//! `ext4r cp [-r] [-p] [-a] IMAGE:/SRC... DEST` (out of one).

use super::split_image;
use crate::read::{parse, EXIT_STATUS};
use clap::Parser;
use std::ffi::OsString;
use std::process::ExitCode;

/// Copy files into or out of an ext2/3/4 image (as cp(1)).
///
/// Into an image when the last argument is IMAGE:/DEST, out of one when
/// the sources are IMAGE:/SRC; `-` as the source copies standard input to
/// IMAGE:/FILE. As cp(1), a directory copied into an existing directory
/// goes in under its name, and `SRC/.` puts what SRC holds there instead.
/// Holes stay holes; with -a hard links among the files copied stay hard
/// links (otherwise each name is a copy, as cp -r makes them). Copies
/// from one image to another (or inside one) are not supported.
#[derive(Parser, Debug)]
#[command(name = "ext4r cp", version, after_help = EXIT_STATUS)]
pub(crate) struct Args {
    /// Copy directories and everything in them (symlinks as symlinks).
    #[arg(short = 'r', short_alias = 'R', long = "recursive")]
    pub recursive: bool,
    /// Keep modes, owners and times.
    #[arg(short = 'p')]
    pub preserve: bool,
    /// -r and -p, and hard links kept as hard links and extended
    /// attributes copied (as cp -a).
    #[arg(short = 'a', long = "archive")]
    pub archive: bool,
    /// Print each path copied.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// Sources, then the destination; IMAGE:/PATH on one side (a source of
    /// `-` is standard input).
    #[arg(required = true, num_args = 2.., value_name = "PATH")]
    pub paths: Vec<OsString>,
}

/// The command line's definition (for the man page and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

pub(crate) const TOOL: &str = "ext4r cp";

/// Runs `ext4r cp`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let mut a = match parse::<Args>(args) {
        Ok(a) => a,
        Err(c) => return c,
    };
    if a.archive {
        a.recursive = true;
        a.preserve = true;
    }
    let Some(dest) = a.paths.pop() else {
        return ExitCode::from(crate::read::EXIT_USAGE);
    };
    if let Some((image, path)) = split_image(&dest) {
        // A source that is IMAGE:/PATH (and no host file of that name)
        // would have to be read from an image: not this command's work.
        if let Some((src, from)) = a
            .paths
            .iter()
            .filter(|p| !std::path::Path::new(p).exists())
            .find_map(|p| Some((p, split_image(p)?.0)))
        {
            let canon = |p: &std::path::Path| std::fs::canonicalize(p).ok();
            let what = if canon(&from) == canon(&image) {
                "copies inside an image are not supported"
            } else {
                "copies between images are not supported"
            };
            eprintln!(
                "{TOOL}: '{}' to '{}': {what}; copy out to the host, then in",
                src.to_string_lossy(),
                dest.to_string_lossy()
            );
            return ExitCode::from(1);
        }
        return super::cp_in::run(&a, &image, &path);
    }
    if a.paths.iter().all(|p| split_image(p).is_some()) {
        return super::cp_out::run(&a, &dest);
    }
    eprintln!(
        "{TOOL}: no image named: the destination, or every source, must be \
         IMAGE:/PATH (an existing image file or device, a colon, a path in it)"
    );
    ExitCode::from(crate::read::EXIT_USAGE)
}
