//! `ext4r`: one binary, several tools. Invoked as `mkfs.ext4r` (or
//! `ext4r mkfs`) it makes a filesystem; the name it is called by picks the
//! tool, as e2fsprogs' mke2fs is also mkfs.ext4.

mod defrag;
mod defrag_online;
mod extract;
mod fsck;
mod mkfs;
mod read;
mod tune;

use std::ffi::OsString;
use std::process::ExitCode;

/// The tools this binary provides: (subcommand, link name, summary).
const TOOLS: &[(&str, Option<&str>, &str)] = &[
    (
        "mkfs",
        Some("mkfs.ext4r"),
        "make an ext2/ext3/ext4 filesystem (also installed as mkfs.ext4r)",
    ),
    (
        "fsck",
        Some("fsck.ext4r"),
        "check an ext2/ext3/ext4 filesystem (also installed as fsck.ext4r)",
    ),
    (
        "tune",
        Some("tune.ext4r"),
        "change tunable parameters of a filesystem, as tune2fs (also installed as tune.ext4r)",
    ),
    (
        "e4defrag",
        Some("e4defrag-r"),
        "score fragmentation as e4defrag -c, defragment online (also installed as e4defrag-r)",
    ),
    (
        "ls",
        None,
        "list a directory of an image without mounting it",
    ),
    ("cat", None, "print a file of an image"),
    (
        "extract",
        None,
        "copy a tree out of an image, like debugfs rdump",
    ),
];

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tool = if let Some((sub, _, _)) = TOOLS.iter().find(|(_, link, _)| *link == Some(&argv0)) {
        sub.to_string()
    } else {
        match args.get(1).map(|a| a.to_string_lossy().into_owned()) {
            Some(sub) if TOOLS.iter().any(|(s, _, _)| *s == sub) => {
                let prog = args.remove(0);
                args[0] = OsString::from(format!("{} {sub}", prog.to_string_lossy()));
                sub
            }
            Some(h) if h == "-V" || h == "--version" => {
                println!("ext4r {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("usage: ext4r <tool> [options]\n\ntools:");
                for (sub, _, what) in TOOLS {
                    eprintln!("  {sub:<9} {what}");
                }
                eprintln!("\nRun `ext4r <tool> -h` for a tool's options.");
                return ExitCode::from(16);
            }
        }
    };
    match tool.as_str() {
        "mkfs" => mkfs::main(args),
        "fsck" => fsck::main(args),
        "tune" => tune::main(args),
        "e4defrag" => defrag::main(args),
        "ls" => read::ls_main(args),
        "cat" => read::cat_main(args),
        "extract" => extract::main(args),
        _ => ExitCode::from(16),
    }
}
