//! `e4defrag-r` (`ext4r e4defrag`): e4defrag's options and report over
//! `ext4r-defrag`.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use clap::Parser;
use ext4r_defrag::image::ImageFs;
use ext4r_defrag::mounted::{DirOrder, MountedFs};
use ext4r_defrag::source::{LostFound, Source};
use ext4r_defrag::stat::{statistic, ArgKind, StatOptions, StatTarget};
use ext4r_defrag::target::{resolve, Target};

/// Defragment files of a mounted ext4 filesystem (online) or of an
/// unmounted device or image (offline), or score fragmentation (-c).
#[derive(Parser, Debug)]
#[command(version, name = "e4defrag-r")]
struct Args {
    /// Only report fragmentation, as `e4defrag -c`.
    #[arg(short = 'c')]
    check: bool,
    /// Verbose: every file, skip reasons, the free-space histogram.
    #[arg(short = 'v')]
    verbose: bool,
    /// With -c: the figures of each target as one JSON object on stdout,
    /// instead of e4defrag's text.
    #[arg(long, requires = "check")]
    json: bool,
    /// Stop starting new work after this many seconds (a file being moved
    /// stops at its next range).
    #[arg(short = 't', value_name = "SECONDS")]
    time_limit: Option<f64>,
    /// Relevant-file mode: place the files under each DIRECTORY one after
    /// another in the order they are read.
    #[arg(short = 'r')]
    relevant: bool,
    /// Read order for -r: readdir (as find, tar, cp -r), name (as ls,
    /// rsync) or inode (as tar --sort=inode).
    #[arg(long, value_enum, default_value = "readdir")]
    order: Order,
    /// Free-space defragmentation (offline): move file blocks out of the
    /// way so that the free space forms one large run.
    #[arg(short = 'f', conflicts_with_all = ["check", "relevant"])]
    free_space: bool,
    /// Offline: also give block-mapped (ext3) files an extent tree (the
    /// filesystem must have the extent feature).
    #[arg(long)]
    to_extents: bool,
    /// Offline: work on this file or directory inside the image (default:
    /// the whole filesystem; with -r, the directory to place).
    #[arg(long, value_name = "PATH")]
    path: Option<String>,
    /// Take regular files as filesystem images, even on a mounted ext4.
    #[arg(long)]
    image: bool,
    /// Files, directories, mounted devices; unmounted devices and images
    /// (offline).
    #[arg(required = true, value_name = "TARGET")]
    targets: Vec<OsString>,
}

/// The read orders of -r.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Order {
    Readdir,
    Name,
    Inode,
}

impl From<Order> for DirOrder {
    fn from(o: Order) -> Self {
        match o {
            Order::Readdir => DirOrder::Readdir,
            Order::Name => DirOrder::Name,
            Order::Inode => DirOrder::Inode,
        }
    }
}

/// What the online modes need from the command line.
pub(crate) struct OnlineArgs {
    pub verbose: bool,
    pub relevant: bool,
    pub free_space: bool,
    pub to_extents: bool,
    pub path: Option<String>,
    pub order: DirOrder,
    pub image: bool,
    pub deadline: Option<std::time::Instant>,
    pub targets: Vec<OsString>,
}

/// Runs `e4defrag-r`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let a = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            // e4defrag exits 1 after its usage text.
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    if !a.json {
        println!("e4defrag-r {} (ext4r)", env!("CARGO_PKG_VERSION"));
    }
    // The check for writers takes a lease that a writer's open breaks with
    // SIGIO; ignored, that signal cannot end the run.
    if let Err(e) = ext4r_defrag::online::ignore_sigio() {
        eprintln!("e4defrag-r: cannot ignore SIGIO ({e}): files open elsewhere may not be noticed");
    }
    let ok = if a.check {
        check(&a)
    } else {
        match a.time_limit {
            Some(t) if !(t.is_finite() && t >= 0.0) => {
                eprintln!("e4defrag-r: -t {t}: not a number of seconds");
                return ExitCode::from(1);
            }
            _ => {}
        }
        crate::defrag_online::run(&OnlineArgs {
            verbose: a.verbose,
            relevant: a.relevant,
            free_space: a.free_space,
            to_extents: a.to_extents,
            path: a.path.clone(),
            order: a.order.into(),
            image: a.image,
            deadline: a
                .time_limit
                .map(|t| std::time::Instant::now() + std::time::Duration::from_secs_f64(t)),
            targets: a.targets.clone(),
        })
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `-c` over every target; true when some target scored a file (e4defrag's
/// exit status).
fn check(a: &Args) -> bool {
    let uid = rustix::process::getuid();
    let opts = StatOptions {
        verbose: a.verbose,
        root: uid.is_root(),
        uid: uid.as_raw(),
    };
    let stdout = std::io::stdout();
    // --json: e4defrag's text goes nowhere, the figures into `report`.
    let mut out: Box<dyn Write> = if a.json {
        Box::new(std::io::sink())
    } else {
        Box::new(std::io::BufWriter::new(stdout.lock()))
    };
    let mut report = crate::defrag_json::Report::default();
    let mut err = std::io::stderr();
    let mut success = false;
    for (i, arg) in a.targets.iter().enumerate() {
        if i > 0 {
            let _ = writeln!(out);
        }
        let _ = out.flush();
        let (src, target): (Box<dyn Source>, StatTarget<'_>) = match resolve(arg, a.image) {
            Err(e) => {
                eprintln!("{}", crate::errors::message(&e));
                continue;
            }
            Ok(Target::Unmounted(path)) => match ImageFs::open(&path) {
                Ok(fs) => (
                    Box::new(fs),
                    StatTarget {
                        arg: arg.as_bytes(),
                        kind: ArgKind::Device,
                        lost_found: LostFound(Some(b"/lost+found/".to_vec())),
                    },
                ),
                Err(e) => {
                    eprintln!("e4defrag-r: {}", crate::errors::message(&e));
                    continue;
                }
            },
            Ok(Target::Mounted(t)) => match MountedFs::new(&t.root, &t.mountpoint, &t.device) {
                Ok((fs, warning)) => {
                    if let (Some(w), true) = (warning, a.verbose) {
                        eprintln!("Warning: {w}");
                    }
                    (
                        Box::new(fs),
                        StatTarget {
                            arg: arg.as_bytes(),
                            kind: t.kind,
                            lost_found: t.lost_found,
                        },
                    )
                }
                Err(e) => {
                    eprintln!("e4defrag-r: {}", crate::errors::message(&e));
                    continue;
                }
            },
        };
        match statistic(src.as_ref(), &target, &opts, &mut out, &mut err) {
            Ok(s) => {
                success |= s.scored != 0 || (!opts.root && !a.verbose);
                if a.json {
                    report.targets.push(crate::defrag_json::Target::new(
                        target.arg,
                        target.kind,
                        src.as_ref(),
                        &s,
                    ));
                }
            }
            Err(e) => {
                let _ = out.flush();
                eprintln!("e4defrag-r: {}", crate::errors::message(&e));
                return false;
            }
        }
    }
    let _ = out.flush();
    if a.json {
        println!("{}", report.render());
    }
    success
}

/// The command line, for the man page and the completions.
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}
