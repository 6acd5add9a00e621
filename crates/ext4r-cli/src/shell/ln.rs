//! `ext4r ln [-s] [-f] IMAGE:TARGET IMAGE:/NAME`

use super::{basename, image_arg, join, parent_of, resolve_follow, split_image, strerror, Run};
use crate::read::{parse, EXIT_STATUS};
use clap::Parser;
use ext4r::Error;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

/// Make links inside an ext2/3/4 image (as ln(1)).
#[derive(Parser, Debug)]
#[command(name = "ext4r ln", version, after_help = EXIT_STATUS)]
struct Args {
    /// Make a symbolic link (TARGET is its text, IMAGE: prefix optional).
    #[arg(short = 's', long = "symbolic")]
    symbolic: bool,
    /// Remove an existing NAME first.
    #[arg(short = 'f', long = "force")]
    force: bool,
    /// Print a message for each link made.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// What the link points at, as IMAGE:PATH.
    #[arg(value_name = "IMAGE:TARGET")]
    target: OsString,
    /// The link to make, as IMAGE:/PATH (a directory: the link goes in it).
    #[arg(value_name = "IMAGE:/NAME")]
    name: OsString,
}

/// The command line's definition (for the man page and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

const TOOL: &str = "ext4r ln";

/// Runs `ext4r ln`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let a = match parse::<Args>(args) {
        Ok(a) => a,
        Err(c) => return c,
    };
    let (image, name) = match image_arg(&a.name) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            return ExitCode::from(1);
        }
    };
    // The target in the same image; a symlink's may be plain text.
    let target = match split_image(&a.target) {
        Some((img, t)) if same_file(&img, &image) => t,
        Some((img, _)) if !a.symbolic => {
            eprintln!(
                "{TOOL}: '{}' and '{}' are different images; a hard link stays in one",
                img.display(),
                image.display()
            );
            return ExitCode::from(1);
        }
        _ => a.target.to_string_lossy().into_owned(),
    };
    super::with_image(TOOL, &image, |run| link(run, &a, &target, &name))
}

fn same_file(a: &Path, b: &Path) -> bool {
    let c = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    c(a) == c(b)
}

fn link(run: &mut Run, a: &Args, target: &str, name: &str) {
    // NAME naming a directory: the link goes inside, named as the target.
    let into = resolve_follow(&run.fs, name)
        .and_then(|i| run.fs.stat(i))
        .is_ok_and(|i| i.is_dir());
    let name = match (into, basename(target)) {
        (true, Some(b)) => join(name, b),
        _ => name.to_string(),
    };
    let what = if a.symbolic {
        "symbolic link"
    } else {
        "hard link"
    };
    let ino = if a.symbolic {
        None
    } else {
        // A hard link to what TARGET names itself (a symlink is linked, as
        // ln -P, the default on Linux).
        let found = parent_of(&run.fs, target).and_then(|(p, n)| {
            run.fs
                .lookup(p, &n)?
                .ok_or_else(|| Error::NotFound(target.into()))
        });
        match found {
            Ok(i) if run.fs.stat(i).is_ok_and(|s| s.is_dir()) => {
                run.fail(format!("{target}: hard link not allowed for directory"));
                return;
            }
            Ok(i) => Some(i),
            Err(e) => {
                run.fail(format!("failed to access '{target}': {}", strerror(&e)));
                return;
            }
        }
    };
    let (parent, leaf) = match parent_of(&run.fs, &name) {
        Ok(x) => x,
        Err(e) => {
            run.fail(format!(
                "failed to create {what} '{name}': {}",
                strerror(&e)
            ));
            return;
        }
    };
    match run.fs.lookup(parent, &leaf) {
        // Without -f a name that exists is just that (ln says "File
        // exists" then, whatever it names). With -f, NAME being TARGET's
        // own entry is refused; another name of the same inode is already
        // what was asked (ln replaces it with an equal link).
        Ok(Some(old)) if a.force && Some(old) == ino => {
            let same_entry = parent_of(&run.fs, target).is_ok_and(|t| t == (parent, leaf.clone()));
            if same_entry {
                run.fail(format!("'{target}' and '{name}' are the same file"));
            }
            return;
        }
        Ok(Some(old)) if a.force => {
            if run.fs.stat(old).is_ok_and(|i| i.is_dir()) {
                run.fail(format!("{name}: cannot overwrite directory"));
                return;
            }
            if let Err(e) = run.fs.unlink(parent, &leaf) {
                run.fail(format!("cannot remove '{name}': {}", strerror(&e)));
                return;
            }
            run.changed();
        }
        Ok(Some(_)) => {
            run.fail(format!("failed to create {what} '{name}': File exists"));
            return;
        }
        Ok(None) => {}
        Err(e) => {
            run.fail(format!(
                "failed to create {what} '{name}': {}",
                strerror(&e)
            ));
            return;
        }
    }
    let (uid, gid) = super::caller();
    let r = match ino {
        Some(i) => run.fs.link(i, parent, &leaf),
        None => run
            .fs
            .symlink(parent, &leaf, target.as_bytes(), uid, gid)
            .map(|_| ()),
    };
    match r {
        Ok(()) => {
            run.changed();
            if a.verbose {
                let arrow = if a.symbolic { "->" } else { "=>" };
                println!("'{name}' {arrow} '{target}'");
            }
        }
        Err(e) if ino.is_some() => run.fail(format!(
            "failed to create hard link '{name}' => '{target}': {}",
            strerror(&e)
        )),
        Err(e) => run.fail(format!(
            "failed to create symbolic link '{name}': {}",
            strerror(&e)
        )),
    }
}
