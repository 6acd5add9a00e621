//! `ext4r mkdir [-p] [-m MODE] IMAGE:/PATH...`

use super::{components, image_arg, parent_of, resolve_follow, same_image, strerror, Run};
use crate::read::{parse, EXIT_STATUS};
use clap::Parser;
use ext4r::write::NewNode;
use ext4r::Error;
use std::ffi::OsString;
use std::process::ExitCode;

/// Make directories in an ext2/3/4 image (as mkdir(1)).
#[derive(Parser, Debug)]
#[command(name = "ext4r mkdir", version, after_help = EXIT_STATUS)]
struct Args {
    /// Make parent directories as needed; no error if a directory exists.
    #[arg(short = 'p', long = "parents")]
    parents: bool,
    /// Permissions of the new directories (octal or symbolic, as chmod),
    /// not the umask's.
    #[arg(short = 'm', long = "mode", value_name = "MODE")]
    mode: Option<String>,
    /// Print a message for each directory made.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Directories to make, as IMAGE:/PATH.
    #[arg(required = true, value_name = "IMAGE:/PATH")]
    paths: Vec<OsString>,
}

/// The command line's definition (for the man page and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

const TOOL: &str = "ext4r mkdir";

/// Runs `ext4r mkdir`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let a = match parse::<Args>(args) {
        Ok(a) => a,
        Err(c) => return c,
    };
    let umask = super::umask();
    let (targets, mode) = match (|| {
        let t = a
            .paths
            .iter()
            .map(|p| image_arg(p))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mode = a
            .mode
            .as_deref()
            .map(|m| super::mode::parse_mode(m, umask))
            .transpose()?
            .unwrap_or(0o777 & !umask);
        Ok::<_, anyhow::Error>((t, mode))
    })() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            return ExitCode::from(1);
        }
    };
    let image = match same_image(&targets) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            return ExitCode::from(1);
        }
    };
    // Parents made by -p: as coreutils, the umask's mode with u+wx.
    let parent_mode = (0o777 & !umask) | 0o300;
    super::with_image(TOOL, &image, |run| {
        for (_, path) in &targets {
            let r = if a.parents {
                make_parents(run, path, mode, parent_mode, a.verbose)
            } else {
                make_one(run, path, mode, a.verbose)
            };
            if let Err((p, e)) = r {
                run.fail(format!("cannot create directory '{p}': {}", strerror(&e)));
            }
        }
    })
}

fn node(mode: u16) -> NewNode {
    let (uid, gid) = super::caller();
    NewNode::dir(mode).owned_by(uid, gid)
}

/// Makes `path`; its parent must exist.
fn make_one(run: &mut Run, path: &str, mode: u16, verbose: bool) -> Result<(), (String, Error)> {
    let fail = |e| (path.to_string(), e);
    if components(path).is_empty() {
        return Err(fail(Error::AlreadyExists("/".into())));
    }
    let (parent, name) = parent_of(&run.fs, path).map_err(fail)?;
    run.fs.mkdir(parent, &name, &node(mode)).map_err(fail)?;
    run.changed();
    if verbose {
        println!("{TOOL}: created directory '{path}'");
    }
    Ok(())
}

/// Makes `path` and the directories above it that are missing; a
/// directory already there (or a symlink to one) is no error.
fn make_parents(
    run: &mut Run,
    path: &str,
    mode: u16,
    parent_mode: u16,
    verbose: bool,
) -> Result<(), (String, Error)> {
    let comps = components(path);
    let mut cur = ext4r::write::ROOT_INO;
    let mut shown = String::new();
    for (k, c) in comps.iter().enumerate() {
        shown.push('/');
        shown.push_str(c);
        let last = k + 1 == comps.len();
        let fail = |e| (shown.clone(), e);
        match run.fs.lookup(cur, c.as_bytes()).map_err(fail)? {
            Some(_) => {
                let ino = resolve_follow(&run.fs, &shown).map_err(fail)?;
                if !run.fs.stat(ino).map_err(fail)?.is_dir() {
                    let e = if last {
                        Error::AlreadyExists(shown.clone())
                    } else {
                        Error::NotADirectory(shown.clone())
                    };
                    return Err(fail(e));
                }
                cur = ino;
            }
            None => {
                let m = if last { mode } else { parent_mode };
                cur = run.fs.mkdir(cur, c.as_bytes(), &node(m)).map_err(fail)?;
                run.changed();
                if verbose {
                    println!("{TOOL}: created directory '{shown}'");
                }
            }
        }
    }
    Ok(())
}
