//! `ext4r cp`, `mkdir`, `rm`, `mv`, `ln`: coreutils' commands on an image
//! or device that is not mounted, through the write API. Paths inside an
//! image are written `IMAGE:/PATH`; messages are coreutils' ("cannot
//! create directory '/a/b': No such file or directory"), exit status 0 when
//! everything was done, 1 otherwise, 2 for a usage error (as `ext4r ls`,
//! `cat` and `extract`; see `read::EXIT_USAGE`). A command that changed
//! nothing leaves the image byte-identical: it is only closed (superblock
//! written) after a change.

pub(crate) mod cp;
mod cp_in;
mod cp_out;
pub(crate) mod ln;
pub(crate) mod mkdir;
mod mode;
pub(crate) mod mv;
pub(crate) mod rm;

use anyhow::{bail, Result};
use ext4r::write::{WriteFs, WriteOptions};
use ext4r::Error;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `IMAGE:PATH` split at the first colon whose left side exists (an image
/// file or device); `None` when no prefix names an existing file.
pub(crate) fn split_image(arg: &OsStr) -> Option<(PathBuf, String)> {
    let b = arg.as_bytes();
    for (i, _) in b.iter().enumerate().filter(|(_, &c)| c == b':') {
        let img = Path::new(OsStr::from_bytes(&b[..i]));
        if i > 0 && img.exists() {
            let rest = String::from_utf8_lossy(&b[i + 1..]).into_owned();
            return Some((img.to_path_buf(), rest));
        }
    }
    None
}

/// `IMAGE:PATH` where one is required: split at the first colon even when
/// the image does not exist (opening it then says so).
pub(crate) fn image_arg(arg: &OsStr) -> Result<(PathBuf, String)> {
    if let Some(x) = split_image(arg) {
        return Ok(x);
    }
    let b = arg.as_bytes();
    match b.iter().position(|&c| c == b':') {
        Some(i) if i > 0 => Ok((
            PathBuf::from(OsStr::from_bytes(&b[..i])),
            String::from_utf8_lossy(&b[i + 1..]).into_owned(),
        )),
        _ => bail!(
            "'{}': not IMAGE:PATH (an image file or device, a colon, a path in it)",
            arg.to_string_lossy()
        ),
    }
}

/// The one image of a command's `IMAGE:PATH` arguments.
pub(crate) fn same_image(args: &[(PathBuf, String)]) -> Result<PathBuf> {
    let first = args.first().map(|a| a.0.clone()).unwrap_or_default();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    for (img, _) in args {
        if canon(img) != canon(&first) {
            bail!(
                "'{}' and '{}' are different images; one command works in one image",
                first.display(),
                img.display()
            );
        }
    }
    Ok(first)
}

/// Why `image` could not be opened for changing, in a command's words.
pub(crate) fn open_failure(image: &Path, e: &anyhow::Error) -> String {
    match e.downcast_ref::<Error>() {
        // As coreutils on a read-only mount; the reason after it.
        Some(Error::ReadOnly(why)) if why.contains("Read-only file system") => {
            format!("cannot change '{}': Read-only file system", image.display())
        }
        Some(Error::ReadOnly(why)) => format!(
            "cannot change '{}': Read-only file system: {why}",
            image.display()
        ),
        // Another writer (ext4r cp, fsck.ext4r -y, ...) has the image:
        // two at once would lose each other's changes.
        Some(Error::Locked { holder, .. }) => {
            format!("cannot change '{}': in use by {holder}", image.display())
        }
        Some(Error::Mounted { mountpoint, .. }) => format!(
            "{} is mounted on {mountpoint}; change it through the mount, or unmount it first",
            image.display()
        ),
        _ => crate::errors::message(e.as_ref()),
    }
}

/// Opens `image` for changing; a mounted one is refused as the other tools
/// refuse it (changing it under the kernel would corrupt it).
pub(crate) fn open(image: &Path) -> Result<WriteFs> {
    if let Some(m) = ext4r::safety::mounted(image)? {
        bail!(
            "{} is mounted on {}{}; change it through the mount, or unmount it first",
            image.display(),
            m.mountpoint,
            m.via_loop
                .map(|l| format!(" (through {l})"))
                .unwrap_or_default()
        );
    }
    Ok(WriteFs::open_path(image, WriteOptions::default())?)
}

/// The words `strerror` has for the write API's errors.
pub(crate) fn strerror(e: &Error) -> String {
    match e {
        Error::NotFound(_) => "No such file or directory".into(),
        Error::AlreadyExists(_) => "File exists".into(),
        Error::NotADirectory(_) => "Not a directory".into(),
        Error::IsADirectory(_) => "Is a directory".into(),
        Error::DirectoryNotEmpty(_) => "Directory not empty".into(),
        Error::InvalidName(n) if n.len() > 255 => "File name too long".into(),
        Error::InvalidName(_) => "Invalid argument".into(),
        // ENOSPC either way, as the kernel says it.
        Error::NoSpace | Error::NoFreeInodes => "No space left on device".into(),
        Error::ReadOnly(_) => "Read-only file system".into(),
        Error::TooManyLinks(_) => "Too many links".into(),
        other => crate::errors::message(other),
    }
}

/// Components of a path in an image (`.` dropped; `..` kept: the write
/// API resolves it).
pub(crate) fn components(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect()
}

/// The directory part of `path` ("/" for a name at the top).
pub(crate) fn dirname(path: &str) -> String {
    let c = components(path);
    match c.split_last() {
        Some((_, rest)) if !rest.is_empty() => format!("/{}", rest.join("/")),
        _ => "/".into(),
    }
}

/// The last component of `path` (`None` for the root).
pub(crate) fn basename(path: &str) -> Option<&str> {
    components(path).last().copied()
}

/// The name a source gets in a destination directory, as cp(1) takes it:
/// the last component, trailing slashes aside; none for `.` and `..`
/// (`cp -r src/. dst` copies what is in src into dst) nor for the root.
pub(crate) fn copy_name(path: &[u8]) -> Option<&[u8]> {
    let end = path.iter().rposition(|&c| c != b'/').map_or(0, |i| i + 1);
    let trimmed = &path[..end];
    let last = trimmed.rsplit(|&c| c == b'/').next()?;
    (!matches!(last, b"" | b"." | b"..")).then_some(last)
}

/// `dir/name`.
pub(crate) fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// The directory holding `path`'s last component, and that component.
pub(crate) fn parent_of(fs: &WriteFs, path: &str) -> ext4r::Result<(u32, Vec<u8>)> {
    let name = basename(path).ok_or_else(|| Error::InvalidArgument("the root".into()))?;
    let parent = fs.lookup_path(dirname(path))?;
    if !fs.stat(parent)?.is_dir() {
        return Err(Error::NotADirectory(dirname(path)));
    }
    Ok((parent, name.as_bytes().to_vec()))
}

/// The inode `path` names, symlinks followed, the last one too.
pub(crate) fn resolve_follow(fs: &WriteFs, path: &str) -> ext4r::Result<u32> {
    let mut p = path.to_string();
    for _ in 0..40 {
        let ino = fs.lookup_path(&p)?;
        if !fs.stat(ino)?.is_symlink() {
            return Ok(ino);
        }
        let t = String::from_utf8_lossy(&fs.read_link(ino)?).into_owned();
        p = if t.starts_with('/') {
            t
        } else {
            join(&dirname(&p), &t)
        };
    }
    Err(Error::InvalidArgument(format!(
        "{path}: too many levels of symbolic links"
    )))
}

/// Whether `path` names a directory (symlinks followed); otherwise why
/// not, in coreutils' words for a target that must be one ("target 'x':
/// Not a directory", "... No such file or directory").
pub(crate) fn target_dir(fs: &WriteFs, path: &str) -> std::result::Result<(), String> {
    match resolve_follow(fs, path).and_then(|i| fs.stat(i)) {
        Ok(i) if i.is_dir() => Ok(()),
        Ok(_) => Err(format!("target '{path}': Not a directory")),
        Err(e) => Err(format!("target '{path}': {}", strerror(&e))),
    }
}

/// The process umask (read by setting it, the only way, and restoring it).
pub(crate) fn umask() -> u16 {
    let m = rustix::process::umask(rustix::fs::Mode::empty());
    rustix::process::umask(m);
    (m.bits() & 0o777) as u16
}

/// Who new files belong to: the caller, as on a mounted filesystem.
pub(crate) fn caller() -> (u32, u32) {
    (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    )
}

/// One command's run on one image: messages, the exit status, and the
/// close that makes the changes durable (skipped when nothing changed, so
/// that the image stays byte-identical).
pub(crate) struct Run {
    tool: &'static str,
    pub fs: WriteFs,
    ok: bool,
    changed: bool,
}

impl Run {
    pub(crate) fn new(tool: &'static str, fs: WriteFs) -> Self {
        Run {
            tool,
            fs,
            ok: true,
            changed: false,
        }
    }

    /// Prints `tool: msg` and marks the run failed.
    pub(crate) fn fail(&mut self, msg: impl std::fmt::Display) {
        eprintln!("{}: {msg}", self.tool);
        self.ok = false;
    }

    /// Marks the run failed (the message was printed already).
    pub(crate) fn fail_quietly(&mut self) {
        self.ok = false;
    }

    /// Something was changed: the image must be closed.
    pub(crate) fn changed(&mut self) {
        self.changed = true;
    }

    /// Closes (when anything changed) and gives the exit status.
    pub(crate) fn finish(self) -> ExitCode {
        let Run {
            tool,
            fs,
            mut ok,
            changed,
        } = self;
        if changed {
            if let Err(e) = fs.close() {
                eprintln!("{tool}: {}", crate::errors::message(&e));
                ok = false;
            }
        }
        if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}

/// Runs a command body that needs the image open; an image that cannot be
/// opened is one message and exit 1.
pub(crate) fn with_image(
    tool: &'static str,
    image: &Path,
    body: impl FnOnce(&mut Run),
) -> ExitCode {
    match open(image) {
        Ok(fs) => {
            let mut run = Run::new(tool, fs);
            body(&mut run);
            run.finish()
        }
        Err(e) => {
            eprintln!("{tool}: {}", open_failure(image, &e));
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split() {
        assert_eq!(components("/a//b/./c/"), vec!["a", "b", "c"]);
        assert_eq!(dirname("/a/b"), "/a");
        assert_eq!(dirname("/a"), "/");
        assert_eq!(dirname("a/b/"), "/a");
        assert_eq!(basename("/a/b/"), Some("b"));
        assert_eq!(basename("/"), None);
        assert_eq!(join("/", "x"), "/x");
        assert_eq!(join("/a/", "x"), "/a/x");
    }

    #[test]
    fn copy_names_as_cp_takes_them() {
        let n = |p: &str| copy_name(p.as_bytes()).map(|b| String::from_utf8_lossy(b).into_owned());
        assert_eq!(n("src").as_deref(), Some("src"));
        assert_eq!(n("a/src/").as_deref(), Some("src"));
        assert_eq!(n("/a/src//").as_deref(), Some("src"));
        for none in ["src/.", "src/./", ".", "..", "a/..", "/", "//", ""] {
            assert_eq!(n(none), None, "{none}");
        }
    }

    #[test]
    fn image_arguments() {
        let dir = std::env::temp_dir().join(format!("ext4r-shell-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let img = dir.join("a:b.img");
        std::fs::write(&img, b"").expect("image");
        let arg = format!("{}:/x:y", img.display());
        let (i, p) = split_image(OsStr::new(&arg)).expect("split");
        assert_eq!((i, p.as_str()), (img.clone(), "/x:y"));
        assert!(split_image(OsStr::new("/nonexistent.img:/x")).is_none());
        assert!(image_arg(OsStr::new("/nonexistent.img:/x")).is_ok());
        assert!(image_arg(OsStr::new("plain")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
