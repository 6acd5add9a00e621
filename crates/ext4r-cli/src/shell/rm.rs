//! `ext4r rm [-r] [-f] [-d] IMAGE:/PATH...`

use super::{basename, image_arg, join, parent_of, same_image, strerror, Run};
use crate::read::{parse, EXIT_STATUS};
use clap::Parser;
use ext4r::Error;
use std::ffi::OsString;
use std::process::ExitCode;

/// Remove files or directories from an ext2/3/4 image (as rm(1)).
#[derive(Parser, Debug)]
#[command(name = "ext4r rm", version, after_help = EXIT_STATUS)]
struct Args {
    /// Remove directories and their contents.
    #[arg(short = 'r', short_alias = 'R', long = "recursive")]
    recursive: bool,
    /// Ignore names that do not exist.
    #[arg(short = 'f', long = "force")]
    force: bool,
    /// Remove empty directories.
    #[arg(short = 'd', long = "dir")]
    dir: bool,
    /// Print a message for each thing removed.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// What to remove, as IMAGE:/PATH.
    #[arg(required = true, value_name = "IMAGE:/PATH")]
    paths: Vec<OsString>,
}

/// The command line's definition (for the man page and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

const TOOL: &str = "ext4r rm";

/// Runs `ext4r rm`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let a = match parse::<Args>(args) {
        Ok(a) => a,
        Err(c) => return c,
    };
    let targets = match a
        .paths
        .iter()
        .map(|p| image_arg(p))
        .collect::<anyhow::Result<Vec<_>>>()
        .and_then(|t| same_image(&t).map(|i| (i, t)))
    {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            return ExitCode::from(1);
        }
    };
    let (image, targets) = targets;
    super::with_image(TOOL, &image, |run| {
        for (_, path) in &targets {
            remove_arg(run, &a, path);
        }
    })
}

fn remove_arg(run: &mut Run, a: &Args, path: &str) {
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if basename(path).is_none() {
        if a.recursive {
            run.fail("it is dangerous to operate recursively on '/'");
        } else {
            run.fail("cannot remove '/': Is a directory");
        }
        return;
    }
    if last == "." || last == ".." {
        run.fail(format!(
            "refusing to remove '.' or '..' directory: skipping '{path}'"
        ));
        return;
    }
    let (parent, name) = match parent_of(&run.fs, path) {
        Ok(x) => x,
        Err(Error::NotFound(_)) if a.force => return,
        Err(e) => {
            run.fail(format!("cannot remove '{path}': {}", strerror(&e)));
            return;
        }
    };
    let ino = match run.fs.lookup(parent, &name) {
        Ok(Some(i)) => i,
        Ok(None) if a.force => return,
        Ok(None) => {
            run.fail(format!("cannot remove '{path}': No such file or directory"));
            return;
        }
        Err(e) => {
            run.fail(format!("cannot remove '{path}': {}", strerror(&e)));
            return;
        }
    };
    let is_dir = match run.fs.stat(ino) {
        Ok(i) => i.is_dir(),
        Err(e) => {
            run.fail(format!("cannot remove '{path}': {}", strerror(&e)));
            return;
        }
    };
    if is_dir && !a.recursive && !a.dir {
        run.fail(format!("cannot remove '{path}': Is a directory"));
        return;
    }
    if is_dir && a.recursive {
        remove_tree(run, ino, path, a.verbose);
    }
    let r = if is_dir {
        run.fs.rmdir(parent, &name)
    } else {
        run.fs.unlink(parent, &name)
    };
    match r {
        Ok(()) => {
            run.changed();
            if a.verbose {
                let what = if is_dir {
                    "removed directory"
                } else {
                    "removed"
                };
                println!("{what} '{path}'");
            }
        }
        // The contents could not all go: said already.
        Err(Error::DirectoryNotEmpty(_)) if a.recursive => {}
        Err(e) => run.fail(format!("cannot remove '{path}': {}", strerror(&e))),
    }
}

/// Removes everything in directory `dir` (at `path`), depth first.
fn remove_tree(run: &mut Run, dir: u32, path: &str, verbose: bool) {
    let entries = match run.fs.read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            run.fail(format!("cannot remove '{path}': {}", strerror(&e)));
            return;
        }
    };
    for e in entries.iter().filter(|e| !e.is_dot()) {
        let child = join(path, &e.name_lossy());
        let is_dir = match run.fs.stat(e.ino.0) {
            Ok(i) => i.is_dir(),
            Err(err) => {
                run.fail(format!("cannot remove '{child}': {}", strerror(&err)));
                continue;
            }
        };
        if is_dir {
            remove_tree(run, e.ino.0, &child, verbose);
        }
        let r = if is_dir {
            run.fs.rmdir(dir, &e.name)
        } else {
            run.fs.unlink(dir, &e.name)
        };
        match r {
            Ok(()) => {
                run.changed();
                if verbose {
                    let what = if is_dir {
                        "removed directory"
                    } else {
                        "removed"
                    };
                    println!("{what} '{child}'");
                }
            }
            Err(Error::DirectoryNotEmpty(_)) => {}
            Err(err) => run.fail(format!("cannot remove '{child}': {}", strerror(&err))),
        }
    }
}
