//! `ext4r cp SRC... IMAGE:/DEST`: host files into an image, through
//! `ext4r::populate`.

use super::cp::{Args, TOOL};
use super::{copy_name, join, parent_of, strerror};
use ext4r::populate::{Copier, CopyOptions, Op, PopulateError};
use std::cell::Cell;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;

/// A copy failure in cp's words.
pub(crate) fn describe(e: &PopulateError) -> String {
    match e {
        PopulateError::Source { path, source } => {
            format!(
                "cannot read '{}': {}",
                path.display(),
                crate::errors::message(source)
            )
        }
        PopulateError::Image { op, path, source } => {
            let what = match op {
                Op::CreateFile => "cannot create regular file",
                Op::CreateDir => "cannot create directory",
                Op::CreateSymlink => "cannot create symbolic link",
                Op::CreateSpecial => "cannot create special file",
                Op::Link => "cannot create hard link",
                Op::Write => "error writing",
                Op::Attributes => "preserving attributes for",
                Op::Xattrs => "preserving extended attributes for",
                Op::Replace => "cannot remove",
                _ => "cannot copy to",
            };
            format!("{what} '{path}': {}", strerror(source))
        }
        other => other.to_string(),
    }
}

/// Copies the host paths of `a` into `image` at `dest`.
pub(crate) fn run(a: &Args, image: &Path, dest: &str) -> ExitCode {
    super::with_image(TOOL, image, |run| {
        let into_dir = super::target_dir(&run.fs, dest);
        if a.paths.len() > 1 {
            if let Err(m) = into_dir {
                run.fail(m);
                return;
            }
        }
        let into_dir = into_dir.is_ok();
        let failed = Cell::new(false);
        let (changed, top_failures) = {
            let mut opts = CopyOptions::cp(a.preserve, super::umask(), super::caller());
            opts.hard_links = a.archive;
            // cp -p keeps modes, owners and times; -a the xattrs too.
            opts.xattrs = a.archive;
            let mut c = Copier::new(&mut run.fs, opts);
            c.on_error(|e| {
                eprintln!("{TOOL}: {}", describe(e));
                failed.set(true);
            });
            if a.verbose {
                // cp's words: 'SOURCE' -> 'DEST'.
                c.on_copied(|src, p| match src {
                    Some(s) => println!("'{}' -> '{p}'", s.display()),
                    None => println!("-> '{p}'"),
                });
            }
            let mut top = Vec::new();
            for src in &a.paths {
                if let Err(msg) = copy_arg(&mut c, a, Path::new(src), dest, into_dir) {
                    top.push(msg);
                }
            }
            (c.changed(), top)
        };
        for m in top_failures {
            run.fail(m);
        }
        if failed.get() {
            run.fail_quietly();
        }
        if changed {
            run.changed();
        }
    })
}

/// One command-line source: checked as cp checks it, then copied.
fn copy_arg(
    c: &mut Copier<'_>,
    a: &Args,
    src: &Path,
    dest: &str,
    into_dir: bool,
) -> Result<(), String> {
    let shown = src.display();
    if src.as_os_str() == "-" {
        return copy_stdin(c, dest, into_dir);
    }
    // Without -r a symlink argument is followed; with it, copied as one.
    let md = if a.recursive {
        std::fs::symlink_metadata(src)
    } else {
        std::fs::metadata(src)
    }
    .map_err(|e| format!("cannot stat '{shown}': {}", crate::errors::message(&e)))?;
    if md.is_dir() && !a.recursive {
        return Err(format!("-r not specified; omitting directory '{shown}'"));
    }
    // A source without a last name ("src/.", "..") lands on DEST itself:
    // its contents go into a directory there is.
    let last = copy_name(src.as_os_str().as_bytes());
    let target = match (into_dir, last) {
        (true, Some(n)) => join(dest, &String::from_utf8_lossy(n)),
        _ => dest.to_string(),
    };
    if super::basename(&target).is_none() {
        // The root itself: a directory's contents go into it.
        if !md.is_dir() {
            return Err(format!(
                "cannot overwrite directory '{target}' with non-directory"
            ));
        }
        let _ = c.copy_dir_contents(src, ext4r::write::ROOT_INO, "/");
        return Ok(());
    }
    let what = if md.is_dir() {
        "cannot create directory"
    } else {
        "cannot create regular file"
    };
    let (parent, name) =
        parent_of(c.fs(), &target).map_err(|e| format!("{what} '{target}': {}", strerror(&e)))?;
    // The host name's bytes, not a lossy copy.
    let name = match (into_dir, last) {
        (true, Some(n)) => n.to_vec(),
        _ => name,
    };
    // Failures inside are reported and counted by the copier.
    let _ = c.copy_path(src, parent, &name, &target, !a.recursive);
    Ok(())
}

/// `cp - IMAGE:/FILE`: standard input becomes the file (a directory gives
/// it no name: refused).
fn copy_stdin(c: &mut Copier<'_>, dest: &str, into_dir: bool) -> Result<(), String> {
    if into_dir {
        return Err(format!(
            "cannot copy standard input into directory '{dest}': name the file to write"
        ));
    }
    let (parent, name) = parent_of(c.fs(), dest)
        .map_err(|e| format!("cannot create regular file '{dest}': {}", strerror(&e)))?;
    // Failures are reported and counted by the copier.
    let _ = c.copy_reader(
        &mut std::io::stdin().lock(),
        Path::new("-"),
        parent,
        &name,
        dest,
    );
    Ok(())
}
