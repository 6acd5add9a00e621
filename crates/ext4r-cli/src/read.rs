//! `ext4r ls`, `ext4r cat`: look inside an image without mounting it.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use ext4r::device::{FileDevice, OpenMode};
use ext4r::fs::{DirEntryInfo, FileKind, Filesystem, InodeInfo, Metadata};
use ext4r_format::inode::Timestamp;

/// Opens an image or device read-only.
pub(crate) fn open_fs(image: &std::path::Path) -> Result<Filesystem> {
    let dev = FileDevice::open(image, OpenMode::default())
        .with_context(|| format!("cannot open {}", image.display()))?;
    Filesystem::open(dev).with_context(|| format!("{}", image.display()))
}

/// Runs a tool body and maps its result to an exit code: 0, or 1 with the
/// message on stderr (`tool: message`).
pub(crate) fn finish(tool: &str, r: Result<bool>) -> ExitCode {
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("{tool}: {}", crate::errors::message(e.as_ref()));
            ExitCode::from(1)
        }
    }
}

/// The shell-style commands' (ls, cat, extract, cp, mkdir, rm, mv, ln)
/// exit status for a usage error: 2, as ls(1), grep(1), diff(1) and
/// clap's own convention, distinct from 1 (something failed). fsck's 16
/// belongs to fsck(8)'s bit mask, which these commands' callers do not
/// read; coreutils' cp, mkdir, rm, mv, ln and cat use 1 for both.
pub(crate) const EXIT_USAGE: u8 = 2;

/// The exit status rule, at the end of each shell-style command's --help.
pub(crate) const EXIT_STATUS: &str =
    "Exit status: 0 if everything was done, 1 if anything failed, 2 for a usage error.";

/// Parses a shell-style command's arguments; a mistake is clap's message
/// and [`EXIT_USAGE`], --help and --version exit 0.
pub(crate) fn parse<A: Parser>(args: Vec<OsString>) -> std::result::Result<A, ExitCode> {
    A::try_parse_from(args).map_err(|e| {
        let _ = e.print();
        ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 })
    })
}

/// List a directory of an ext2/3/4 image.
#[derive(Parser, Debug)]
#[command(name = "ext4r ls", version, after_help = EXIT_STATUS)]
struct LsArgs {
    /// Long listing: mode, links, owner, group, size, time, name.
    #[arg(short = 'l')]
    long: bool,
    /// List subdirectories recursively.
    #[arg(short = 'R')]
    recursive: bool,
    /// Show `.` and `..`.
    #[arg(short = 'a')]
    all: bool,
    /// Image file or block device.
    image: std::path::PathBuf,
    /// Directory (or file) inside the image.
    #[arg(default_value = "/")]
    path: String,
}

/// `ext4r ls`'s command line (for its man page and completions).
pub(crate) fn ls_command() -> clap::Command {
    <LsArgs as clap::CommandFactory>::command()
}

/// `ext4r cat`'s command line.
pub(crate) fn cat_command() -> clap::Command {
    <CatArgs as clap::CommandFactory>::command()
}

/// Runs `ext4r ls`.
pub(crate) fn ls_main(args: Vec<OsString>) -> ExitCode {
    match parse::<LsArgs>(args) {
        Ok(a) => finish("ext4r ls", ls(&a)),
        Err(c) => c,
    }
}

fn ls(a: &LsArgs) -> Result<bool> {
    let fs = open_fs(&a.image)?;
    let info = fs.resolve(&a.path)?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    if !info.inode.is_dir() {
        let name = a.path.rsplit('/').find(|s| !s.is_empty()).unwrap_or("/");
        print_entry(&fs, &mut out, a.long, name.as_bytes(), &info)?;
        return Ok(true);
    }
    let mut ok = true;
    let mut queue = vec![(a.path.clone(), info)];
    let mut seen = std::collections::HashSet::new();
    let mut first = true;
    while let Some((path, dir)) = queue.pop() {
        if !seen.insert(dir.ino.0) {
            continue;
        }
        if a.recursive {
            if !first {
                writeln!(out)?;
            }
            writeln!(out, "{path}:")?;
        }
        first = false;
        let entries = match fs.read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("ext4r ls: {path}: {}", crate::errors::message(&e));
                ok = false;
                continue;
            }
        };
        let mut subdirs = Vec::new();
        for e in &entries {
            if e.is_dot() && !a.all {
                continue;
            }
            match fs.inode(e.ino) {
                Ok(child) => {
                    print_entry(&fs, &mut out, a.long, &e.name, &child)?;
                    if a.recursive && !e.is_dot() && child.inode.is_dir() {
                        subdirs.push((join(&path, e), child));
                    }
                }
                Err(err) => {
                    eprintln!(
                        "ext4r ls: {}: {}",
                        join(&path, e),
                        crate::errors::message(&err)
                    );
                    ok = false;
                }
            }
        }
        // Depth first, in directory order.
        queue.extend(subdirs.into_iter().rev());
    }
    out.flush()?;
    Ok(ok)
}

fn join(dir: &str, e: &DirEntryInfo) -> String {
    let dir = dir.trim_end_matches('/');
    format!("{dir}/{}", e.name_lossy())
}

fn print_entry(
    fs: &Filesystem,
    out: &mut impl Write,
    long: bool,
    name: &[u8],
    info: &InodeInfo,
) -> Result<()> {
    let name = String::from_utf8_lossy(name);
    if !long {
        writeln!(out, "{name}")?;
        return Ok(());
    }
    let m = fs.metadata(info);
    let size = match m.rdev {
        Some((maj, min)) => format!("{maj}, {min}"),
        None => m.size.to_string(),
    };
    let mut line = format!(
        "{} {:>3} {:>5} {:>5} {:>10} {} {name}",
        mode_string(&m),
        m.links,
        m.uid,
        m.gid,
        size,
        time_string(m.mtime),
    );
    if m.kind == FileKind::Symlink {
        match fs.read_link(info) {
            Ok(t) => line.push_str(&format!(" -> {}", String::from_utf8_lossy(&t))),
            Err(e) => line.push_str(&format!(" -> <{}>", crate::errors::message(&e))),
        }
    }
    writeln!(out, "{line}")?;
    Ok(())
}

/// `ls -l`'s ten-character mode.
pub(crate) fn mode_string(m: &Metadata) -> String {
    let p = m.perm;
    let mut s = String::with_capacity(10);
    s.push(m.kind.letter());
    for (shift, special, lower, upper) in [
        (6, 0o4000, 's', 'S'),
        (3, 0o2000, 's', 'S'),
        (0, 0o1000, 't', 'T'),
    ] {
        let bits = (p >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        let x = bits & 1 != 0;
        s.push(match (p & special != 0, x) {
            (true, true) => lower,
            (true, false) => upper,
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// A time as `YYYY-MM-DD HH:MM` in the local zone, as `ls -l` prints it.
pub(crate) fn time_string(t: Timestamp) -> String {
    ext4r::localtime::short(t.secs)
}

/// Print a file of an ext2/3/4 image to standard output.
#[derive(Parser, Debug)]
#[command(name = "ext4r cat", version, after_help = EXIT_STATUS)]
struct CatArgs {
    /// Image file or block device.
    image: std::path::PathBuf,
    /// File inside the image (symlinks are followed).
    path: String,
}

/// Runs `ext4r cat`.
pub(crate) fn cat_main(args: Vec<OsString>) -> ExitCode {
    match parse::<CatArgs>(args) {
        Ok(a) => finish("ext4r cat", cat(&a)),
        Err(c) => c,
    }
}

fn cat(a: &CatArgs) -> Result<bool> {
    let fs = open_fs(&a.image)?;
    let mut info = fs.resolve(&a.path)?;
    let mut hops = 0;
    while info.inode.is_symlink() {
        hops += 1;
        anyhow::ensure!(hops <= 40, "{}: too many levels of symbolic links", a.path);
        let t = String::from_utf8_lossy(&fs.read_link(&info)?).into_owned();
        let parent = a.path.rsplit_once('/').map_or("/", |(p, _)| p);
        let full = if t.starts_with('/') {
            t
        } else {
            format!("{parent}/{t}")
        };
        info = fs.resolve(&full)?;
    }
    anyhow::ensure!(!info.inode.is_dir(), "{}: is a directory", a.path);
    let mut r = fs.open_file(&info)?;
    let mut buf = vec![0u8; 1 << 20];
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    loop {
        let n =
            std::io::Read::read(&mut r, &mut buf).with_context(|| format!("reading {}", a.path))?;
        if n == 0 {
            break;
        }
        if let Err(e) = out.write_all(&buf[..n]) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(true);
            }
            return Err(e.into());
        }
    }
    out.flush()?;
    Ok(true)
}
