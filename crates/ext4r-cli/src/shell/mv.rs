//! `ext4r mv IMAGE:/SRC... IMAGE:/DEST`

use super::{basename, image_arg, join, parent_of, same_image, strerror, Run};
use crate::read::{parse, EXIT_STATUS};
use clap::Parser;
use ext4r::Error;
use std::ffi::OsString;
use std::process::ExitCode;

/// Rename or move files inside an ext2/3/4 image (as mv(1)).
#[derive(Parser, Debug)]
#[command(name = "ext4r mv", version, after_help = EXIT_STATUS)]
struct Args {
    /// Print a message for each thing moved.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Treat DEST as a name even when it is a directory.
    #[arg(short = 'T', long = "no-target-directory")]
    no_target_dir: bool,
    /// What to move, then where, as IMAGE:/PATH (one image).
    #[arg(required = true, num_args = 2.., value_name = "IMAGE:/PATH")]
    paths: Vec<OsString>,
}

/// The command line's definition (for the man page and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

const TOOL: &str = "ext4r mv";

/// Runs `ext4r mv`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let a = match parse::<Args>(args) {
        Ok(a) => a,
        Err(c) => return c,
    };
    let parsed = a
        .paths
        .iter()
        .map(|p| image_arg(p))
        .collect::<anyhow::Result<Vec<_>>>()
        .and_then(|t| same_image(&t).map(|i| (i, t)));
    let (image, mut args) = match parsed {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            return ExitCode::from(1);
        }
    };
    let Some((_, dest)) = args.pop() else {
        return ExitCode::from(crate::read::EXIT_USAGE);
    };
    super::with_image(TOOL, &image, |run| {
        let into_dir = super::target_dir(&run.fs, &dest);
        if args.len() > 1 {
            if let Err(m) = into_dir {
                run.fail(m);
                return;
            }
        }
        let into_dir = !a.no_target_dir && into_dir.is_ok();
        for (_, src) in &args {
            let target = match (into_dir, basename(src)) {
                (true, Some(b)) => join(&dest, b),
                _ => dest.clone(),
            };
            move_one(run, src, &target, a.verbose);
        }
    })
}

fn move_one(run: &mut Run, src: &str, target: &str, verbose: bool) {
    let fail = |run: &mut Run, e: &Error| {
        run.fail(format!(
            "cannot move '{src}' to '{target}': {}",
            strerror(e)
        ));
    };
    if basename(src).is_none() {
        run.fail(format!(
            "cannot move '{src}' to '{target}': Device or resource busy"
        ));
        return;
    }
    // The source, not followed: a symlink is moved as itself.
    let (sp, sname) = match parent_of(&run.fs, src) {
        Ok(x) => x,
        Err(e) => {
            run.fail(format!("cannot stat '{src}': {}", strerror(&e)));
            return;
        }
    };
    let sino = match run.fs.lookup(sp, &sname) {
        Ok(Some(i)) => i,
        Ok(None) => {
            run.fail(format!("cannot stat '{src}': No such file or directory"));
            return;
        }
        Err(e) => {
            run.fail(format!("cannot stat '{src}': {}", strerror(&e)));
            return;
        }
    };
    let (tp, tname) = match parent_of(&run.fs, target) {
        Ok(x) => x,
        Err(e) => return fail(run, &e),
    };
    let s_dir = run.fs.stat(sino).is_ok_and(|i| i.is_dir());
    let existing = match run.fs.lookup(tp, &tname) {
        Ok(t) => t,
        Err(e) => return fail(run, &e),
    };
    if let Some(t) = existing {
        if t == sino {
            run.fail(format!("'{src}' and '{target}' are the same file"));
            return;
        }
        let t_dir = run.fs.stat(t).is_ok_and(|i| i.is_dir());
        if s_dir && !t_dir {
            run.fail(format!(
                "cannot overwrite non-directory '{target}' with directory '{src}'"
            ));
            return;
        }
        if !s_dir && t_dir {
            run.fail(format!(
                "cannot overwrite directory '{target}' with non-directory"
            ));
            return;
        }
    }
    match run.fs.rename(sp, &sname, tp, &tname) {
        Ok(()) => {
            run.changed();
            if verbose {
                println!("renamed '{src}' -> '{target}'");
            }
        }
        Err(Error::MoveIntoItself(_)) => run.fail(format!(
            "cannot move '{src}' to a subdirectory of itself, '{target}'"
        )),
        Err(e) => fail(run, &e),
    }
}
