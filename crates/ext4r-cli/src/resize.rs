//! `resize.ext4r`: grow or shrink an ext2/3/4 filesystem, with resize2fs's
//! command line, messages and exit codes (0 done or nothing to do, 1
//! refused, failed or a usage error): `DEVICE [NEW_SIZE]`, the size a
//! block count or with a `s` (512-byte sectors), `K`, `M`, `G` or `T`
//! suffix, the device's size when left out; `-M` shrinks to the minimum,
//! `-P` prints it; `-f` skips the consistency check; `-F`, `-d`, `-S` are
//! taken and change nothing; `-p` prints the passes. A mounted filesystem
//! is grown by the kernel (shrinking it is refused). Beyond resize2fs, as
//! the other ext4r tools: `-h`/`--help` and `-V`/`--version`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::sync::Arc;

use crate::errors::message;
use ext4r::device::{BlockDevice, FileDevice, OpenMode};
use ext4r::resize::{NewSize, Refusal, ResizeError, ResizeOptions};

const PROG: &str = "resize.ext4r";

/// Options that take an argument, as resize2fs's getopt string
/// `d:fFhMPpS:bsz:`.
const WITH_ARG: &[u8] = b"dSz";
const FLAGS: &[u8] = b"fFhMPpbsV";

/// The command line, for the man page and completions (the parsing is
/// getopt's, below).
pub(crate) fn command() -> clap::Command {
    use clap::{Arg, ArgAction, Command};
    let flag = |c: char, id: &'static str, help: &'static str| {
        Arg::new(id).short(c).action(ArgAction::SetTrue).help(help)
    };
    Command::new(PROG)
        .version(env!("CARGO_PKG_VERSION"))
        .about(
            "Grow or shrink an ext2/ext3/ext4 filesystem, as resize2fs(8): offline through \
             the journal, every step crash-safe; a mounted filesystem is grown by the kernel",
        )
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(
            Arg::new("debug_flags")
                .short('d')
                .value_name("debug_flags")
                .help("resize2fs's debugging flags (taken, no effect)"),
        )
        .arg(flag(
            'f',
            "force",
            "Resize without checking that the filesystem was checked",
        ))
        .arg(flag(
            'F',
            "flush",
            "Flush the device's buffers first (no effect)",
        ))
        .arg(flag(
            'M',
            "minimize",
            "Shrink to the smallest size that holds the files",
        ))
        .arg(flag(
            'P',
            "print_min",
            "Print the smallest size -M reaches, and change nothing",
        ))
        .arg(flag('p', "progress", "Print each pass as it starts"))
        .arg(
            Arg::new("stride")
                .short('S')
                .value_name("RAID-stride")
                .help("RAID stride (taken, no effect)"),
        )
        .arg(flag(
            'b',
            "64bit",
            "Turn on 64bit (not supported yet: refused)",
        ))
        .arg(flag(
            's',
            "32bit",
            "Turn off 64bit (not supported yet: refused)",
        ))
        .arg(
            Arg::new("undo")
                .short('z')
                .value_name("undo_file")
                .help("Undo file (not written: every step of a resize is crash-safe instead)"),
        )
        .arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::Help)
                .help("Print help"),
        )
        .arg(
            Arg::new("version")
                .short('V')
                .long("version")
                .action(ArgAction::Version)
                .help("Print version"),
        )
        .arg(
            Arg::new("device")
                .value_name("DEVICE")
                .required(true)
                .value_hint(clap::ValueHint::FilePath)
                .help("The block device or image file"),
        )
        .arg(
            Arg::new("new_size")
                .value_name("NEW_SIZE")
                .help("Blocks, or with a suffix: s (512-byte sectors), K, M, G, T"),
        )
}

/// What the command line asks.
#[derive(Debug, Default)]
struct Args {
    force: bool,
    minimize: bool,
    print_min: bool,
    progress: bool,
    enable64: bool,
    disable64: bool,
    device: Option<OsString>,
    size: Option<OsString>,
}

enum Parsed {
    Run(Args),
    Help,
    Version,
    Usage,
}

/// getopt's parse of `d:fFhMPpS:bsz:` (options before the operands, as
/// glibc permutes them anywhere), with `--help` and `--version`.
fn parse(argv: &[OsString]) -> Parsed {
    let mut a = Args::default();
    let mut operands = Vec::new();
    let mut i = 1;
    let mut only_operands = false;
    while i < argv.len() {
        let arg = argv[i].as_bytes();
        i += 1;
        if only_operands || arg.len() < 2 || arg[0] != b'-' {
            operands.push(OsString::from(std::ffi::OsStr::from_bytes(arg)));
            continue;
        }
        match arg {
            b"--" => {
                only_operands = true;
                continue;
            }
            b"--help" => return Parsed::Help,
            b"--version" => return Parsed::Version,
            _ if arg.starts_with(b"--") => return Parsed::Usage,
            _ => {}
        }
        let mut k = 1;
        while k < arg.len() {
            let c = arg[k];
            k += 1;
            if WITH_ARG.contains(&c) {
                if k < arg.len() {
                    k = arg.len();
                } else if i < argv.len() {
                    i += 1;
                } else {
                    return Parsed::Usage;
                }
                continue;
            }
            if !FLAGS.contains(&c) {
                return Parsed::Usage;
            }
            match c {
                b'h' => return Parsed::Help,
                b'V' => return Parsed::Version,
                b'f' => a.force = true,
                b'M' => a.minimize = true,
                b'P' => a.print_min = true,
                b'p' => a.progress = true,
                b'b' => a.enable64 = true,
                b's' => a.disable64 = true,
                _ => {}
            }
        }
    }
    let mut ops = operands.into_iter();
    a.device = ops.next();
    a.size = ops.next();
    if a.device.is_none() || ops.next().is_some() {
        return Parsed::Usage;
    }
    Parsed::Run(a)
}

fn usage() -> ExitCode {
    eprint!(
        "Usage: {PROG} [-d debug_flags] [-f] [-F] [-M] [-P] [-p] device [-b|-s|new_size] \
         [-S RAID-stride] [-z undo_file]\n\n"
    );
    ExitCode::from(1)
}

/// e2p's `parse_num_blocks2`: a number (C `strtoull` base 0) with at most
/// one suffix character; 0 when it does not parse.
fn parse_num_blocks(arg: &str, log_block_size: u32) -> u64 {
    let s = arg.trim_start();
    let (digits, rest) = split_number(s);
    let Some(mut num) = digits else {
        return 0;
    };
    if rest.len() > 1 {
        return 0;
    }
    let shift = |n: u64, by: u32| n.checked_shl(by).filter(|v| v >> by == n).unwrap_or(0);
    match rest.chars().next() {
        Some(c) if "TtGgMmKk".contains(c) => {
            let ups = match c {
                'T' | 't' => 3,
                'G' | 'g' => 2,
                'M' | 'm' => 1,
                _ => 0,
            };
            for _ in 0..ups {
                num = shift(num, 10);
            }
            num >> log_block_size
        }
        Some('s') => num >> (1 + log_block_size),
        None => num,
        Some(_) => 0,
    }
}

/// `strtoull(s, &end, 0)`: hex with 0x, octal with a leading 0, else
/// decimal; the value (None when no digit) and the rest.
fn split_number(s: &str) -> (Option<u64>, &str) {
    let (radix, body) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, h)
    } else if s.starts_with('0') && s.len() > 1 {
        (8, &s[1..])
    } else {
        (10, s)
    };
    let end = body
        .char_indices()
        .find(|(_, c)| !c.is_digit(radix))
        .map_or(body.len(), |(i, _)| i);
    if end == 0 {
        if radix == 8 {
            return (Some(0), body);
        }
        return (None, s);
    }
    let v = u64::from_str_radix(&body[..end], radix).unwrap_or(u64::MAX);
    (Some(v), &body[end..])
}

/// Runs resize.ext4r with `argv` (argv[0] is the program name).
pub(crate) fn main(argv: Vec<OsString>) -> ExitCode {
    let a = match parse(&argv) {
        Parsed::Help => {
            print!("{}", command().render_long_help());
            return ExitCode::SUCCESS;
        }
        Parsed::Version => {
            println!("{PROG} {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Parsed::Usage => {
            eprintln!("{PROG} {}", env!("CARGO_PKG_VERSION"));
            return usage();
        }
        Parsed::Run(a) => a,
    };
    eprintln!("{PROG} {}", env!("CARGO_PKG_VERSION"));
    match run(&a) {
        Ok(code) => code,
        Err(code) => code,
    }
}

fn fail() -> ExitCode {
    ExitCode::from(1)
}

fn run(a: &Args) -> Result<ExitCode, ExitCode> {
    let device = a.device.clone().unwrap_or_default();
    let name = device.to_string_lossy().into_owned();
    let path = std::path::Path::new(&device);
    let mount = match ext4r::safety::mounted(path) {
        Ok(m) => m.filter(|m| !m.swap),
        Err(e) => {
            eprintln!(
                "ext2fs_check_mount_point: {} while determining whether {name} is mounted.",
                message(&e)
            );
            return Err(fail());
        }
    };
    let meta = std::fs::metadata(path).map_err(|e| {
        eprintln!("open: {} while opening {name}", message(&e));
        fail()
    })?;
    let regular = meta.is_file();
    // Read what is there (read-only: the writers' lock is the resize's).
    let dev = FileDevice::open(path, OpenMode::default()).map_err(|e| {
        eprintln!("open: {} while opening {name}", message(&e));
        fail()
    })?;
    let sb = match ext4r::resize::superblock(&dev) {
        Ok(sb) => sb,
        Err(e) => {
            eprintln!("{PROG}: {} while trying to open {name}", message(&e));
            println!("Couldn't find valid filesystem superblock.");
            return Err(fail());
        }
    };
    let bs = sb.block_size().unwrap_or(1024);
    let k = bs / 1024;
    if !a.force && mount.is_none() {
        if let Some(_why) = ext4r::resize::needs_check(&sb, a.print_min) {
            eprint!("Please run 'e2fsck -f {name}' first.\n\n");
            return Err(fail());
        }
    }
    let opts = ResizeOptions::default();
    let mut opts = opts;
    opts.force = a.force;
    if a.print_min {
        return match ext4r::resize::minimum_size(Arc::new(dev), &opts) {
            Ok(min) => {
                println!("Estimated minimum size of the filesystem: {min}");
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                report(&e, &name, bs);
                Err(fail())
            }
        };
    }
    if a.enable64 || a.disable64 {
        if a.enable64 && a.disable64 {
            eprintln!("Cannot set and unset 64bit feature.");
        } else {
            eprintln!(
                "{PROG}: changing the 64bit feature is not supported by this version; \
                 nothing was changed"
            );
        }
        return Err(fail());
    }
    let device_blocks = dev.size() / u64::from(bs);
    let log = sb.s_log_block_size.get();
    let size = if a.minimize {
        NewSize::Minimum
    } else if let Some(s) = &a.size {
        let n = parse_num_blocks(&s.to_string_lossy(), log);
        if n == 0 {
            eprintln!("{PROG}: Invalid new size: {}\n", s.to_string_lossy());
            return Err(fail());
        }
        NewSize::Blocks(n)
    } else {
        NewSize::Device
    };
    if let Some(m) = mount {
        return online(&name, &m.mountpoint, &sb, size, device_blocks, k);
    }
    opts.extendable = regular;
    let probe: Arc<dyn BlockDevice> = Arc::new(dev);
    let plan = match ext4r::resize::plan(&probe, size, &opts) {
        Ok(p) => p,
        Err(e) => {
            if let ResizeError::Engine(err) = &e {
                // Planning writes nothing: no repair to ask for.
                eprintln!(
                    "{PROG}: {} while trying to resize {name} (nothing was written)",
                    message(err)
                );
            } else {
                report(&e, &name, bs);
            }
            return Err(code_of(&e));
        }
    };
    drop(probe);
    let n = plan.new_blocks();
    println!("Resizing the filesystem on {name} to {n} ({k}k) blocks.");
    let bytes = n * u64::from(bs);
    let mode = OpenMode {
        write: true,
        exclusive: !regular,
        create_size: regular.then_some(bytes),
        ..OpenMode::default()
    };
    let result = match FileDevice::open(path, mode) {
        Ok(d) => plan.apply(Arc::new(d)),
        Err(e) => Err(ResizeError::Engine(e)),
    };
    match result {
        Ok(r) => {
            print!(
                "The filesystem on {name} is now {} ({k}k) blocks long.\n\n",
                r.new_blocks
            );
            if regular && meta.len() > bytes {
                // As resize2fs: an image file ends where its filesystem does.
                if let Err(e) = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|f| f.set_len(bytes))
                {
                    eprintln!("{PROG}: {} while trying to truncate {name}", message(&e));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            report(&e, &name, bs);
            Err(code_of(&e))
        }
    }
}

/// Exit status for an error: 0 for "nothing to do", else 1.
fn code_of(e: &ResizeError) -> ExitCode {
    match e {
        ResizeError::Refused(Refusal::NothingToDo { .. }) => ExitCode::SUCCESS,
        _ => fail(),
    }
}

/// Says why, in resize2fs's words where it has them.
fn report(e: &ResizeError, name: &str, bs: u32) {
    let k = bs / 1024;
    match e {
        ResizeError::Refused(r) => match r {
            Refusal::NeedsCheck(_) => eprint!("Please run 'e2fsck -f {name}' first.\n\n"),
            Refusal::BelowMinimum { minimum } => {
                eprintln!("{PROG}: New size smaller than minimum ({minimum})\n");
            }
            Refusal::DeviceTooSmall {
                device_blocks,
                requested,
            } => eprint!(
                "The containing partition (or device) is only {device_blocks} ({k}k) blocks.\n\
                 You requested a new size of {requested} blocks.\n\n"
            ),
            Refusal::NothingToDo { blocks } => eprint!(
                "The filesystem is already {blocks} ({k}k) blocks long.  Nothing to do!\n\n"
            ),
            Refusal::TooLarge(why) => eprintln!("{PROG}: {why}"),
            Refusal::StableInodes | Refusal::MountedShrink => eprintln!("{r}"),
            Refusal::Unsupported(why) => {
                eprintln!("{PROG}: {why} while trying to resize {name}");
            }
            _ => eprintln!("{PROG}: {r}"),
        },
        ResizeError::Engine(err) => {
            eprintln!("{PROG}: {} while trying to resize {name}", message(err));
            eprint!(
                "Please run 'e2fsck -fy {name}' to fix the filesystem\n\
                 after the aborted resize operation.\n"
            );
        }
        _ => eprintln!("{PROG}: {e}"),
    }
}

/// A mounted filesystem: the kernel grows it; shrinking is refused.
fn online(
    name: &str,
    mountpoint: &str,
    sb: &ext4r_format::superblock::Superblock,
    size: NewSize,
    device_blocks: u64,
    k: u32,
) -> Result<ExitCode, ExitCode> {
    println!("Filesystem at {name} is mounted on {mountpoint}; on-line resizing required");
    let blocks = sb.blocks_count();
    let want = match size {
        NewSize::Blocks(n) => n,
        NewSize::Device => {
            let page_blocks = (4096 / (k * 1024)).max(1) as u64;
            device_blocks & !(page_blocks - 1)
        }
        NewSize::Minimum | NewSize::Bytes(_) => 0,
    };
    if want < blocks {
        eprintln!("{PROG}: On-line shrinking not supported");
        return Err(fail());
    }
    if want > device_blocks {
        eprint!(
            "The containing partition (or device) is only {device_blocks} ({k}k) blocks.\n\
             You requested a new size of {want} blocks.\n\n"
        );
        return Err(fail());
    }
    if want == blocks {
        eprint!("The filesystem is already {blocks} ({k}k) blocks long.  Nothing to do!\n\n");
        return Ok(ExitCode::SUCCESS);
    }
    match ext4r::resize::online_grow(std::path::Path::new(mountpoint), want) {
        Ok(()) => {
            print!("The filesystem on {name} is now {want} ({k}k) blocks long.\n\n");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let text = message(&e);
            if text.contains("Operation not permitted") {
                eprintln!("{PROG}: Permission denied to resize filesystem");
            } else {
                eprintln!("{PROG}: {text} While checking for on-line resizing support");
            }
            Err(fail())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_resize2fs_parses_them() {
        // 4 KiB blocks: log 2.
        assert_eq!(parse_num_blocks("1000", 2), 1000);
        assert_eq!(parse_num_blocks("4K", 2), 1);
        assert_eq!(parse_num_blocks("1M", 2), 256);
        assert_eq!(parse_num_blocks("1G", 2), 262_144);
        assert_eq!(parse_num_blocks("1T", 2), 268_435_456);
        assert_eq!(parse_num_blocks("16s", 2), 2);
        assert_eq!(parse_num_blocks("0x10", 2), 16);
        assert_eq!(parse_num_blocks("010", 2), 8);
        assert_eq!(parse_num_blocks("1MB", 2), 0);
        assert_eq!(parse_num_blocks("x", 2), 0);
        // 1 KiB blocks: log 0.
        assert_eq!(parse_num_blocks("1M", 0), 1024);
        assert_eq!(parse_num_blocks("2s", 0), 1);
    }

    #[test]
    fn options_are_getopts() {
        let v = |s: &[&str]| -> Vec<OsString> { s.iter().map(OsString::from).collect() };
        let Parsed::Run(a) = parse(&v(&["r", "-fp", "img", "10G"])) else {
            panic!("not a run");
        };
        assert!(a.force && a.progress);
        assert_eq!(a.size.as_deref(), Some(std::ffi::OsStr::new("10G")));
        assert!(matches!(
            parse(&v(&["r", "-d", "8", "img"])),
            Parsed::Run(_)
        ));
        assert!(matches!(
            parse(&v(&["r", "-d8", "-M", "img"])),
            Parsed::Run(_)
        ));
        assert!(matches!(parse(&v(&["r", "-x", "img"])), Parsed::Usage));
        assert!(matches!(parse(&v(&["r"])), Parsed::Usage));
        assert!(matches!(parse(&v(&["r", "a", "b", "c"])), Parsed::Usage));
    }
}
