//! `ext4r`: one binary, several tools. Invoked as `mkfs.ext4r` (or
//! `ext4r mkfs`) it makes a filesystem; the name it is called by picks the
//! tool, as e2fsprogs' mke2fs is also mkfs.ext4.

// Unsafe code is allowed only where a signal disposition is set (here and
// in `fsck::cancel`), each block with its SAFETY comment.
#![deny(unsafe_code)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::cast_possible_truncation))]

mod defrag;
mod defrag_bar;
mod defrag_json;
mod defrag_offline;
mod defrag_online;
mod errors;
mod extract;
mod fsck;
mod generate;
mod mkfs;
mod mount;
mod populate;
mod read;
mod resize;
mod shell;
mod tune;

use std::ffi::OsString;
use std::process::ExitCode;

/// One tool of the binary.
pub(crate) struct Tool {
    /// The subcommand: `ext4r mkfs`.
    pub sub: &'static str,
    /// The name it is installed under, when it has one (`mkfs.ext4r`).
    pub link: Option<&'static str>,
    /// What it does, for `ext4r --help`.
    pub what: &'static str,
    /// Its command line, for the man page and the completions.
    pub command: fn() -> clap::Command,
    pub main: fn(Vec<OsString>) -> ExitCode,
}

/// The tools this binary provides.
pub(crate) const TOOLS: &[Tool] = &[
    Tool {
        sub: "mkfs",
        link: Some("mkfs.ext4r"),
        what: "make an ext2/ext3/ext4 filesystem (also installed as mkfs.ext4r)",
        command: mkfs::command,
        main: mkfs::main,
    },
    Tool {
        sub: "fsck",
        link: Some("fsck.ext4r"),
        what: "check and repair an ext2/ext3/ext4 filesystem (also installed as fsck.ext4r)",
        command: fsck::command,
        main: fsck::main,
    },
    Tool {
        sub: "tune",
        link: Some("tune.ext4r"),
        what: "change tunable parameters of a filesystem, as tune2fs (also installed as \
               tune.ext4r)",
        command: tune::command,
        main: tune::main,
    },
    Tool {
        sub: "resize",
        link: Some("resize.ext4r"),
        what: "grow or shrink an ext2/ext3/ext4 filesystem, as resize2fs (also installed as \
               resize.ext4r)",
        command: resize::command,
        main: resize::main,
    },
    Tool {
        sub: "e4defrag",
        link: Some("e4defrag-r"),
        what: "score fragmentation as e4defrag -c, defragment online or offline, place \
               trees in read order, gather free space (also installed as e4defrag-r)",
        command: defrag::command,
        main: defrag::main,
    },
    Tool {
        sub: "mount",
        link: Some("mount.ext4r"),
        what: "mount an image or device with a userspace driver (FUSE), for images you do not \
               trust (also installed as mount.ext4r, for mount -t ext4r)",
        command: mount::command,
        main: mount::main,
    },
    Tool {
        sub: "umount",
        link: None,
        what: "unmount what ext4r mount mounted, once its driver has written everything out",
        command: mount::umount_command,
        main: mount::umount_main,
    },
    Tool {
        sub: "ls",
        link: None,
        what: "list a directory of an image without mounting it",
        command: read::ls_command,
        main: read::ls_main,
    },
    Tool {
        sub: "cat",
        link: None,
        what: "print a file of an image",
        command: read::cat_command,
        main: read::cat_main,
    },
    Tool {
        sub: "extract",
        link: None,
        what: "copy a tree out of an image, like debugfs rdump",
        command: extract::command,
        main: extract::main,
    },
    Tool {
        sub: "cp",
        link: None,
        what: "copy files into or out of an image (IMAGE:/PATH), as cp",
        command: shell::cp::command,
        main: shell::cp::main,
    },
    Tool {
        sub: "mkdir",
        link: None,
        what: "make directories in an image, as mkdir",
        command: shell::mkdir::command,
        main: shell::mkdir::main,
    },
    Tool {
        sub: "rm",
        link: None,
        what: "remove files or directories from an image, as rm",
        command: shell::rm::command,
        main: shell::rm::main,
    },
    Tool {
        sub: "mv",
        link: None,
        what: "rename or move files inside an image, as mv",
        command: shell::mv::command,
        main: shell::mv::main,
    },
    Tool {
        sub: "ln",
        link: None,
        what: "make hard or symbolic links inside an image, as ln",
        command: shell::ln::command,
        main: shell::ln::main,
    },
];

/// `ext4r --help`: the tools.
fn usage() -> String {
    let mut s = String::from("usage: ext4r <tool> [options]\n\ntools:\n");
    for t in TOOLS {
        s.push_str(&format!("  {:<8} {}\n", t.sub, t.what));
    }
    s.push_str("\nRun `ext4r <tool> -h` for a tool's options.\n");
    s
}

/// Output into a closed pipe (`fsck.ext4r -fn IMG | head`) ends the
/// program quietly, as it ends e2fsck: Rust starts programs with SIGPIPE
/// ignored, so the next print would fail and, with `panic = "abort"`,
/// abort with a panic message.
#[allow(unsafe_code)]
fn default_sigpipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: the first thing main does, before any thread exists, and
    // SIG_DFL installs no handler code of ours.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

fn main() -> ExitCode {
    default_sigpipe();
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(t) = TOOLS.iter().find(|t| t.link == Some(argv0.as_str())) {
        return (t.main)(args);
    }
    match args.get(1).map(|a| a.to_string_lossy().into_owned()) {
        Some(sub) if TOOLS.iter().any(|t| t.sub == sub) => {
            let prog = args.remove(0);
            args[0] = OsString::from(format!("{} {sub}", prog.to_string_lossy()));
            match TOOLS.iter().find(|t| t.sub == sub) {
                Some(t) => (t.main)(args),
                None => ExitCode::from(16),
            }
        }
        Some(h) if h == "-V" || h == "--version" => {
            println!("ext4r {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some(h) if h == "-h" || h == "--help" => {
            print!("{}", usage());
            ExitCode::SUCCESS
        }
        // Not for people: `cargo xtask install` asks for the man pages,
        // completions and link names from here, so that they come from
        // the same clap definitions the tools parse with.
        Some(g) if g == "--generate" => generate::main(&args[2..]),
        _ => {
            eprint!("{}", usage());
            ExitCode::from(16)
        }
    }
}
