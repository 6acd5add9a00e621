//! `ext4r mount [-o OPTIONS] IMAGE MOUNTPOINT` (also `mount.ext4r`, the
//! name `mount -t ext4r` runs) and `ext4r umount MOUNTPOINT`: the ext4
//! driver in userspace, over FUSE (see the `ext4r-mount` crate).
//!
//! As fuse2fs, the driver goes to the background once the mount is in
//! place and the command returns; `-f` keeps it in the foreground until
//! the filesystem is unmounted (or SIGINT/SIGTERM unmounts it).

use clap::Parser;
use ext4r_mount::{MountError, Options};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// mount(8)'s helper convention: incorrect invocation.
const EXIT_USAGE: u8 = 1;
/// mount(8)'s helper convention: mount failure.
const EXIT_FAIL: u8 = 32;

const EXIT_STATUS: &str = "Exit status (as mount(8)): 0 mounted (or, with -f, served and \
     unmounted cleanly), 1 for a usage error, 32 when the mount failed.";

/// The environment variable that tells a background driver to report on
/// stdout when the mount is in place (set by the command that starts it).
const NOTIFY_ENV: &str = "EXT4R_MOUNT_NOTIFY_READY";

/// Mount an ext2/ext3/ext4 image or device with a driver in userspace
/// (FUSE): damage in the image meets this program, not the kernel.
#[derive(Parser, Debug)]
#[command(name = "ext4r mount", version, after_help = EXIT_STATUS)]
struct Args {
    /// Mount options, comma-separated: ro, rw, allow_other, allow_root,
    /// offset=BYTES (a partition inside a disk image),
    /// errors=continue|remount-ro|panic (default: the superblock's, see
    /// tune2fs -e), acl (the default) or noacl, uid=N and gid=N (every
    /// file shown as theirs; the image unchanged), nosuid, nodev, noexec,
    /// noatime, sync, dirsync, and fstab's defaults, noauto, nofail, x-*.
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Stay in the foreground until unmounted, instead of going to the
    /// background once mounted.
    #[arg(short = 'f')]
    foreground: bool,
    /// Accepted from mount(8) and ignored: sloppy options, no mtab,
    /// verbose.
    #[arg(short = 's', hide = true)]
    sloppy: bool,
    #[arg(short = 'n', hide = true)]
    no_mtab: bool,
    #[arg(short = 'v', hide = true)]
    verbose: bool,
    /// The type mount(8) passes with -t (ext4r, fuse.ext4r).
    #[arg(short = 't', hide = true)]
    fstype: Option<String>,
    /// Image file or block device.
    image: PathBuf,
    /// Directory to mount it on.
    mountpoint: PathBuf,
}

/// `ext4r mount`'s command line (for the man page and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

fn parse<A: Parser>(args: Vec<OsString>) -> Result<A, ExitCode> {
    A::try_parse_from(args).map_err(|e| {
        let _ = e.print();
        ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 })
    })
}

/// Runs `ext4r mount`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let tool = args
        .first()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_else(|| "ext4r mount".into());
    let a = match parse::<Args>(args.clone()) {
        Ok(a) => a,
        Err(c) => return c,
    };
    let opts = match Options::parse(&a.options.join(",")) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{tool}: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if !a.foreground && std::env::var_os(NOTIFY_ENV).is_none() {
        return start_background(&tool, &args);
    }
    let notify = std::env::var_os(NOTIFY_ENV).is_some();
    let mountpoint = a.mountpoint.clone();
    // SIGINT, SIGTERM and SIGHUP unmount (and so end the session cleanly)
    // instead of killing the driver with the filesystem mounted.
    unmount_on_signals(&mountpoint);
    let ready = || {
        if notify {
            tell_ready();
        }
    };
    match ext4r_mount::mount(&a.image, &a.mountpoint, &opts, ready) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let what = match &e {
                MountError::Open(_) => format!("{}", a.image.display()),
                MountError::Fuse(_) => format!("{}", a.mountpoint.display()),
                _ => format!("{}", a.image.display()),
            };
            eprintln!("{tool}: {what}: {e}");
            ExitCode::from(EXIT_FAIL)
        }
    }
}

/// Starts this command again as a background driver, and returns once it
/// says the mount is in place (0) or has failed (its message is already
/// on stderr; its status).
fn start_background(tool: &str, args: &[OsString]) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{tool}: cannot find this program to start the driver: {e}");
            return ExitCode::from(EXIT_FAIL);
        }
    };
    let mut child = match Command::new(exe)
        .arg("mount")
        .args(&args[1..])
        .env(NOTIFY_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // Its own process group: the terminal's ^C is not for it.
        .process_group(0)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{tool}: cannot start the driver: {e}");
            return ExitCode::from(EXIT_FAIL);
        }
    };
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    if line.trim() == "ready" {
        return ExitCode::SUCCESS;
    }
    match child.wait() {
        Ok(s) => ExitCode::from(
            s.code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(EXIT_FAIL),
        ),
        Err(_) => ExitCode::from(EXIT_FAIL),
    }
}

/// Tells the starting command the mount is in place, then lets go of its
/// stdout and stderr (which it, or whoever started it, may be waiting on
/// to close).
fn tell_ready() {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(&null);
        let _ = rustix::stdio::dup2_stderr(&null);
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and so in every
/// thread started after) and unmounts `mountpoint` when one arrives.
fn unmount_on_signals(mountpoint: &Path) {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    if set.thread_block().is_err() {
        return;
    }
    let mp = mountpoint.to_path_buf();
    let _ = std::thread::Builder::new()
        .name("ext4r-signals".into())
        .spawn(move || {
            if set.wait().is_ok() {
                // Lazily: open files elsewhere must not keep the driver
                // (and the unwritten changes) alive.
                let _ = ext4r_mount::detach(&mp);
            }
        });
}

/// Unmount a filesystem mounted with `ext4r mount`, and wait until its
/// driver has written everything out.
#[derive(Parser, Debug)]
#[command(name = "ext4r umount", version, after_help = UMOUNT_STATUS)]
struct UmountArgs {
    /// Where it is mounted.
    mountpoint: PathBuf,
}

const UMOUNT_STATUS: &str = "Exit status: 0 unmounted and written out, 1 for a usage error, \
     32 when the unmount failed.";

/// `ext4r umount`'s command line.
pub(crate) fn umount_command() -> clap::Command {
    <UmountArgs as clap::CommandFactory>::command()
}

/// Runs `ext4r umount`.
pub(crate) fn umount_main(args: Vec<OsString>) -> ExitCode {
    let a = match parse::<UmountArgs>(args) {
        Ok(a) => a,
        Err(c) => return c,
    };
    match ext4r_mount::unmount(&a.mountpoint) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "ext4r umount: {}: {}",
                a.mountpoint.display(),
                crate::errors::message(&e)
            );
            ExitCode::from(EXIT_FAIL)
        }
    }
}
