//! `tune.ext4r`: change the tunable parameters of an ext2/3/4 filesystem,
//! with tune2fs's options, messages and exit codes (0 done, 1 refused or
//! failed or a usage error). Beyond tune2fs, as the other ext4r tools:
//! `-h`/`--help` prints the options and `-V`/`--version` the version,
//! both with exit 0 (tune2fs has neither and refuses both as invalid
//! options; no script can rely on that).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::sync::Arc;

use crate::errors::message;
use ext4r::device::{BlockDevice, FileDevice, OpenMode};
use ext4r::tune::{
    parse_c_ulong, parse_journal_opts, parse_quota_opts, tune, JournalRequest, MaxMounts, TuneEnv,
    TuneOptions,
};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

const USAGE: &str = "Usage: %s [-c max_mounts_count] [-e errors_behavior] [-f] [-g group]\n\
\t[-i interval[d|m|w]] [-j] [-J journal_options] [-l]\n\
\t[-m reserved_blocks_percent] [-o [^]mount_options[,...]]\n\
\t[-r reserved_blocks_count] [-u user] [-C mount_count]\n\
\t[-L volume_label] [-M last_mounted_dir]\n\
\t[-O [^]feature[,...]] [-Q quota_options]\n\
\t[-E extended-option[,...]] [-T last_check_time] [-U UUID]\n\
\t[-I new_inode_size] [-z undo_file] device\n";

/// Options that take an argument, as tune2fs's getopt string.
const WITH_ARG: &[u8] = b"cegimorsuCEIJLMOTUzQ";
const FLAGS: &[u8] = b"fjl";
/// Options tune2fs does not have: -h (help, as our other tools) and -V
/// (the version, as mke2fs and e2fsck), both also spelled long.
const ANSWERED: &[u8] = b"hV";

struct Usage;

/// Runs tune.ext4r with `args` (args[0] is the program name).
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let prog = "tune.ext4r";
    match answer(&args) {
        Some(b'h') => {
            print!("{}", command().render_long_help());
            return ExitCode::SUCCESS;
        }
        Some(_) => {
            println!("tune.ext4r {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        None => {}
    }
    let json = args.iter().skip(1).any(|a| a == "--json");
    if !json {
        println!("tune.ext4r {}", env!("CARGO_PKG_VERSION"));
    }
    let (opts, device) = match parse(prog, &args) {
        Ok(v) => v,
        Err(Usage) => {
            eprint!("{}", USAGE.replace("%s", prog));
            return ExitCode::from(1);
        }
    };
    let name = device.to_string_lossy().into_owned();
    let writes = opts.writes();
    let path = std::path::Path::new(&device);
    let mount = match ext4r::safety::mounted(path) {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "ext2fs_check_mount_point: {} while determining whether {name} is mounted.",
                message(&e)
            );
            return ExitCode::from(1);
        }
    };
    // The very block device the kernel mounted (not a partition of it, not an
    // image behind a loop device, not swap): superblock fields may change
    // through it, and the kernel refuses an exclusive open.
    let rdev = |p: &std::path::Path| {
        std::fs::metadata(p)
            .ok()
            .filter(|m| m.file_type().is_block_device())
            .map(|m| m.rdev())
    };
    let mounted_device = mount.as_ref().is_some_and(|m| {
        !m.swap
            && m.via_loop.is_none()
            && m.fstype.starts_with("ext")
            && rdev(path).is_some()
            && rdev(std::path::Path::new(&m.source)) == rdev(path)
    });
    let mounted = mount.map(|m| m.mountpoint);
    let mode = OpenMode {
        write: writes,
        exclusive: writes && mounted.is_none(),
        ..OpenMode::default()
    };
    let dev: Arc<dyn BlockDevice> = match FileDevice::open(&device, mode) {
        Ok(d) => Arc::new(d),
        Err(ext4r::Error::Locked { holder, .. }) => {
            // As tune2fs says "Device or resource busy while trying to
            // open"; the superblock is not in question.
            eprintln!("{prog}: in use by {holder} while trying to open {name}");
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("{prog}: {} while trying to open {name}", message(&e));
            eprintln!("Couldn't find valid filesystem superblock.");
            return ExitCode::from(1);
        }
    };
    let mut env = TuneEnv::new(&name, now());
    env.mounted = mounted;
    env.mounted_device = mounted_device;
    env.user_name = Box::new(user_name);
    env.group_name = Box::new(group_name);
    env.program = prog.to_string();
    let bar = Rewrites::default();
    env.progress = Box::new(move |what, done, total| bar.update(what, done, total));
    match tune(dev, &opts, &mut env) {
        Ok(o) if json && o.status == 0 => {
            println!("{}", listing_json(&o.out));
            eprint!("{}", o.err);
            ExitCode::SUCCESS
        }
        Ok(o) => {
            print!("{}", o.out);
            eprint!("{}", o.err);
            ExitCode::from(o.status)
        }
        Err(e) => {
            eprintln!("{prog}: {} while trying to open {name}", message(&e));
            eprintln!("Couldn't find valid filesystem superblock.");
            ExitCode::from(1)
        }
    }
}

/// `E2FSPROGS_FAKE_TIME` (as libext2fs reads it) or the clock.
fn now() -> i64 {
    if let Some(t) = std::env::var("E2FSPROGS_FAKE_TIME")
        .ok()
        .and_then(|s| parse_c_ulong(&s))
    {
        return t as i64;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The `-l` listing ("Field name:   value" lines) as one JSON object,
/// the fields in tune2fs's order.
fn listing_json(text: &str) -> String {
    let mut map = serde_json::Map::new();
    let mut last: Option<String> = None;
    for line in text.lines() {
        match line.split_once(':') {
            Some((k, v)) if !k.starts_with([' ', '\t']) => {
                let key = k.trim().to_string();
                map.insert(key.clone(), serde_json::Value::from(v.trim()));
                last = Some(key);
            }
            // A line that continues the field before it.
            _ => {
                if let Some(serde_json::Value::String(v)) =
                    last.as_ref().and_then(|k| map.get_mut(k))
                {
                    v.push('\n');
                    v.push_str(line.trim());
                }
            }
        }
    }
    serde_json::Value::Object(map).to_string()
}

/// A bar on stderr for tune's long rewrites, when stderr is a terminal.
#[derive(Default)]
struct Rewrites {
    bar: std::cell::RefCell<Option<indicatif::ProgressBar>>,
}

impl Rewrites {
    fn update(&self, what: &'static str, done: u64, total: u64) {
        use std::io::IsTerminal;
        let mut bar = self.bar.borrow_mut();
        if done >= total {
            if let Some(b) = bar.take() {
                b.finish_and_clear();
            }
            return;
        }
        if bar.is_none() && std::io::stderr().is_terminal() {
            let style =
                indicatif::ProgressStyle::with_template("{msg}: |{bar:40}| {pos}/{len} groups")
                    .map(|s| s.progress_chars("== "))
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            *bar = Some(
                indicatif::ProgressBar::new(total)
                    .with_style(style)
                    .with_message(what),
            );
        }
        if let Some(b) = bar.as_ref() {
            b.set_length(total);
            b.set_message(what);
            b.set_position(done);
        }
    }
}

/// The options as tune.ext4r takes them, for its man page and shell
/// completions. The parser itself stays getopt's (`parse`), which keeps
/// tune2fs's messages and exit codes for every mistake; a test keeps the
/// two lists of letters equal.
pub(crate) fn command() -> clap::Command {
    use clap::{Arg, ArgAction, Command};
    let opt = |c: char, name: &'static str, help: &'static str| {
        Arg::new(name)
            .short(c)
            .value_name(name)
            .action(ArgAction::Append)
            .help(help)
    };
    let flag = |c: char, id: &'static str, help: &'static str| {
        Arg::new(id).short(c).action(ArgAction::Count).help(help)
    };
    Command::new("tune.ext4r")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Change tunable parameters of an ext2/ext3/ext4 filesystem, as tune2fs(8)")
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(opt(
            'c',
            "max_mounts",
            "Mounts between checks (0 or -1: none; random)",
        ))
        .arg(opt('C', "mount_count", "Set the mount count"))
        .arg(opt(
            'e',
            "errors_behavior",
            "On errors: continue, remount-ro or panic",
        ))
        .arg(flag(
            'f',
            "force",
            "Force the change (twice: also after errors)",
        ))
        .arg(opt(
            'g',
            "group",
            "Group (name or number) that may use reserved blocks",
        ))
        .arg(opt('i', "interval", "Time between checks: N[d|w|m|s]"))
        .arg(flag('j', "journal", "Add a journal (ext2 to ext3)"))
        .arg(opt(
            'J',
            "journal_options",
            "Journal options: size=MiB, location=",
        ))
        .arg(flag('l', "list", "List the superblock, as tune2fs -l"))
        .arg(opt('L', "volume_label", "Set the volume label"))
        .arg(opt(
            'm',
            "reserved_blocks_percent",
            "Reserved blocks, in percent",
        ))
        .arg(opt(
            'M',
            "last_mounted_dir",
            "Set the last mounted directory",
        ))
        .arg(opt(
            'o',
            "mount_options",
            "Default mount options: [^]option,...",
        ))
        .arg(opt(
            'O',
            "feature",
            "Features to set or (with ^) clear: [^]feature,...",
        ))
        .arg(opt(
            'Q',
            "quota_options",
            "Quotas: [^]usrquota,[^]grpquota,[^]prjquota",
        ))
        .arg(opt(
            'r',
            "reserved_blocks_count",
            "Reserved blocks, as a count",
        ))
        .arg(opt(
            's',
            "sparse_flag",
            "Sparse superblocks (not supported; refused)",
        ))
        .arg(opt(
            'E',
            "extended_options",
            "Extended options: stride=, stripe_width=, ...",
        ))
        .arg(opt(
            'T',
            "last_check_time",
            "Last check time: YYYYMMDD[HH[MM[SS]]] or now",
        ))
        .arg(opt(
            'u',
            "user",
            "User (name or number) that may use reserved blocks",
        ))
        .arg(opt('U', "UUID", "New UUID: a UUID, clear, random or time"))
        .arg(opt(
            'I',
            "new_inode_size",
            "New inode size (a larger power of two)",
        ))
        .arg(opt('z', "undo_file", "Undo file (not supported; refused)"))
        .arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::SetTrue)
                .help("With -l alone: the listing as one JSON object"),
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
                .help("Print the version"),
        )
        .arg(
            Arg::new("device")
                .required(true)
                .value_hint(clap::ValueHint::FilePath)
                .help("The device or image file"),
        )
}

/// A user's name by number, through the C library's NSS lookup
/// (`getpwuid_r`: files, LDAP, SSSD... as nsswitch.conf says), as tune2fs
/// asks.
fn user_name(id: u32) -> Option<String> {
    nix::unistd::User::from_uid(id.into()).ok()?.map(|u| u.name)
}

/// A group's name by number (`getgrgid_r`).
fn group_name(id: u32) -> Option<String> {
    nix::unistd::Group::from_gid(id.into())
        .ok()?
        .map(|g| g.name)
}

/// A user's number by name (`getpwnam_r`).
fn user_id(name: &str) -> Option<u64> {
    nix::unistd::User::from_name(name)
        .ok()?
        .map(|u| u.uid.as_raw().into())
}

/// A group's number by name (`getgrnam_r`).
fn group_id(name: &str) -> Option<u64> {
    nix::unistd::Group::from_name(name)
        .ok()?
        .map(|g| g.gid.as_raw().into())
}

fn bad(prog: &str, what: &str, arg: &str) -> Usage {
    eprintln!("{prog}: {what} - {arg}");
    Usage
}

/// Whether the command line asks for help (`h`: -h, --help) or the
/// version (`V`: -V, --version). Read as getopt reads it: an option's
/// value is never taken for an option (`-L -h` sets the label "-h"), and
/// the walk ends at the first option tune2fs does not know, which
/// [`parse`] then reports.
fn answer(args: &[OsString]) -> Option<u8> {
    let mut k = 1;
    while k < args.len() {
        let a = args[k].as_bytes();
        k += 1;
        match a {
            b"--help" => return Some(b'h'),
            b"--version" => return Some(b'V'),
            b"--" => return None,
            b"--json" => continue,
            _ if a.len() < 2 || a[0] != b'-' => continue,
            _ => {}
        }
        for (j, &c) in a.iter().enumerate().skip(1) {
            if ANSWERED.contains(&c) {
                return Some(c);
            }
            if WITH_ARG.contains(&c) {
                // The value is the rest of this word, or the next word.
                if j + 1 == a.len() {
                    k += 1;
                }
                break;
            }
            if !FLAGS.contains(&c) {
                return None;
            }
        }
    }
    None
}

/// getopt-style parsing of tune2fs's options.
fn parse(prog: &str, args: &[OsString]) -> Result<(TuneOptions, OsString), Usage> {
    let mut o = TuneOptions::default();
    let mut device: Option<OsString> = None;
    let mut any = false;
    let mut k = 1;
    let mut operands = Vec::new();
    let mut json = false;
    while k < args.len() {
        let a = args[k].as_bytes();
        k += 1;
        if a == b"--json" {
            // Only for a listing: the fields of -l as one JSON object.
            json = true;
            continue;
        }
        if a == b"--" {
            operands.extend(args[k..].iter().cloned());
            break;
        }
        if a.len() < 2 || a[0] != b'-' {
            operands.push(OsString::from(std::ffi::OsStr::from_bytes(a)));
            continue;
        }
        let mut j = 1;
        while j < a.len() {
            let c = a[j];
            j += 1;
            let arg: Vec<u8> = if WITH_ARG.contains(&c) {
                if j < a.len() {
                    let v = a[j..].to_vec();
                    j = a.len();
                    v
                } else if k < args.len() {
                    k += 1;
                    args[k - 1].as_bytes().to_vec()
                } else {
                    eprintln!("{prog}: option requires an argument -- '{}'", c as char);
                    return Err(Usage);
                }
            } else if FLAGS.contains(&c) {
                Vec::new()
            } else {
                eprintln!("{prog}: invalid option -- '{}'", c as char);
                return Err(Usage);
            };
            let s = String::from_utf8_lossy(&arg).into_owned();
            match c {
                b'c' => {
                    any = true;
                    if s == "random" {
                        o.max_mount_count = Some(MaxMounts::Random);
                        continue;
                    }
                    let n = parse_c_long(&s).ok_or_else(|| bad(prog, "bad mounts count", &s))?;
                    let n = i32::try_from(n)
                        .ok()
                        .filter(|n| (-16000..=16000).contains(n))
                        .ok_or_else(|| bad(prog, "bad mounts count", &s))?;
                    o.max_mount_count = Some(MaxMounts::Count(if n == 0 { -1 } else { n }));
                }
                b'C' => {
                    any = true;
                    let n = parse_c_ulong(&s).ok_or_else(|| bad(prog, "bad mounts count", &s))?;
                    let n = u32::try_from(n)
                        .ok()
                        .filter(|&n| n <= 16000)
                        .ok_or_else(|| bad(prog, "bad mounts count", &s))?;
                    o.mount_count = Some(n);
                }
                b'e' => {
                    any = true;
                    o.errors = Some(match s.as_str() {
                        "continue" => 1,
                        "remount-ro" => 2,
                        "panic" => 3,
                        _ => return Err(bad(prog, "bad error behavior", &s)),
                    });
                }
                b'E' => {
                    any = true;
                    o.extended = Some(s);
                }
                b'f' => o.force += 1,
                b'g' => {
                    any = true;
                    let id = parse_c_ulong(&s)
                        .or_else(|| group_id(&s))
                        .ok_or_else(|| bad(prog, "bad gid/group name", &s))?;
                    o.resgid = Some(id);
                }
                b'u' => {
                    any = true;
                    let id = parse_c_ulong(&s)
                        .or_else(|| user_id(&s))
                        .ok_or_else(|| bad(prog, "bad uid/user name", &s))?;
                    o.resuid = Some(id);
                }
                b'i' => {
                    any = true;
                    o.interval =
                        Some(parse_interval(&s).ok_or_else(|| bad(prog, "bad interval", &s))?);
                }
                b'l' => o.list = true,
                b'L' => {
                    any = true;
                    o.label = Some(arg);
                }
                b'm' => {
                    any = true;
                    let r: f64 = s
                        .trim()
                        .parse()
                        .ok()
                        .filter(|r| (0.0..=50.0).contains(r))
                        .ok_or_else(|| bad(prog, "bad reserved block ratio", &s))?;
                    o.reserved_ratio = Some(r);
                }
                b'M' => {
                    any = true;
                    o.last_mounted = Some(arg);
                }
                b'o' => {
                    any = true;
                    if o.mount_opts.is_some() {
                        eprintln!("{prog}: -o may only be specified once");
                        return Err(Usage);
                    }
                    o.mount_opts = Some(s);
                }
                b'O' => {
                    any = true;
                    if o.features.is_some() {
                        eprintln!("{prog}: -O may only be specified once");
                        return Err(Usage);
                    }
                    o.features = Some(s);
                }
                b'r' => {
                    any = true;
                    o.reserved_blocks = Some(
                        parse_c_ulong(&s)
                            .ok_or_else(|| bad(prog, "bad reserved blocks count", &s))?,
                    );
                }
                b'T' => {
                    any = true;
                    o.last_check = Some(parse_time(&s).ok_or_else(|| {
                        eprintln!("{prog}: Couldn't parse date/time specifier: {s}");
                        Usage
                    })?);
                }
                b'U' => {
                    any = true;
                    o.uuid = Some(s);
                }
                b'j' => {
                    any = true;
                    let j = o.journal.get_or_insert_with(JournalRequest::default);
                    if j.size == 0 {
                        j.size = -1;
                    }
                }
                b'J' => {
                    any = true;
                    let j = o.journal.get_or_insert_with(JournalRequest::default);
                    if let Err(msg) = parse_journal_opts(&s, j) {
                        eprint!("{msg}");
                        std::process::exit(1);
                    }
                }
                b'Q' => {
                    any = true;
                    let q = o.quota.get_or_insert_with(Default::default);
                    if let Err(msg) = parse_quota_opts(&s, q) {
                        eprint!("{msg}");
                        std::process::exit(1);
                    }
                }
                b'I' => {
                    any = true;
                    // tune2fs: strtoul, then a power of two (0 passes, and is
                    // then refused as shrinking).
                    let n = parse_c_ulong(&s).ok_or_else(|| bad(prog, "bad inode size", &s))?;
                    if n & n.wrapping_sub(1) != 0 {
                        eprintln!("{prog}: Inode size must be a power of two- {s}");
                        return Err(Usage);
                    }
                    o.inode_size = Some(n);
                }
                b's' | b'z' => {
                    eprintln!(
                        "{prog}: -{} is not supported yet (it needs block allocation or \
                         rewriting metadata); nothing was changed.",
                        c as char
                    );
                    std::process::exit(1);
                }
                _ => return Err(Usage),
            }
        }
    }
    if operands.len() != 1 {
        return Err(Usage);
    }
    device = device.or_else(|| operands.pop());
    if !any && !o.list {
        return Err(Usage);
    }
    if json && (any || !o.list) {
        eprintln!("{prog}: --json goes with -l alone");
        return Err(Usage);
    }
    device.map(|d| (o, d)).ok_or(Usage)
}

/// `strtol(s, &end, 0)` that must consume everything.
fn parse_c_long(s: &str) -> Option<i64> {
    let t = s.trim_start();
    match t.strip_prefix('-') {
        Some(rest) => parse_c_ulong(rest)
            .and_then(|v| i64::try_from(v).ok())
            .map(|v| -v),
        None => parse_c_ulong(t).and_then(|v| i64::try_from(v).ok()),
    }
}

/// `-i`: a number with an optional unit: `s` seconds, `d` (default) days,
/// `w` weeks, `m` months of 30 days.
fn parse_interval(s: &str) -> Option<u64> {
    let split = s
        .find(|c: char| !(c.is_ascii_hexdigit() || c == 'x' || c == 'X'))
        .unwrap_or(s.len());
    // "0x" hex digits include d: take the longest prefix strtoul accepts.
    let (num, unit) = (0..=split)
        .rev()
        .find_map(|i| parse_c_ulong(&s[..i]).map(|v| (v, &s[i..])))?;
    let mult: u64 = match unit {
        "s" => 1,
        "" | "d" | "D" => 86400,
        "m" | "M" => 86400 * 30,
        "w" | "W" => 86400 * 7,
        _ => return None,
    };
    Some(num.wrapping_mul(mult))
}

/// `-T`: `now` or `YYYYMMDD[HH[MM[SS]]]` in the local time zone, as
/// tune2fs reads it with `mktime`.
fn parse_time(s: &str) -> Option<i64> {
    if s == "now" {
        return Some(now());
    }
    let field = |r: std::ops::Range<usize>| -> Option<i64> {
        match s.get(r) {
            Some(t) if !t.is_empty() => t.parse().ok(),
            _ => None,
        }
    };
    let y = field(0..4)?;
    let mo = field(4..6)?;
    let d = field(6..8)?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let h = field(8..10).unwrap_or(0);
    let mi = field(10..12).unwrap_or(0);
    let se = field(12..14).unwrap_or(0);
    ext4r::localtime::from_local(
        i32::try_from(y).ok()?,
        u32::try_from(mo).ok()?,
        u32::try_from(d).ok()?,
        u32::try_from(h).ok()?,
        u32::try_from(mi).ok()?,
        u32::try_from(se).ok()?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_options_are_the_parsed_ones() {
        let cmd = command();
        let mut documented: Vec<u8> = cmd
            .get_arguments()
            .filter_map(|a| a.get_short())
            .map(|c| c as u8)
            .collect();
        documented.sort_unstable();
        let mut parsed: Vec<u8> = WITH_ARG
            .iter()
            .chain(FLAGS)
            .chain(ANSWERED)
            .copied()
            .collect();
        parsed.sort_unstable();
        assert_eq!(
            String::from_utf8_lossy(&documented),
            String::from_utf8_lossy(&parsed)
        );
        for a in cmd.get_arguments().filter(|a| a.get_short().is_some()) {
            let c = a.get_short().map(|c| c as u8).unwrap_or(0);
            assert_eq!(
                a.get_action().takes_values(),
                WITH_ARG.contains(&c),
                "-{}",
                c as char
            );
        }
    }

    #[test]
    fn help_and_version_are_found_as_getopt_reads() {
        let a = |v: &[&str]| {
            let args: Vec<OsString> = std::iter::once("tune.ext4r")
                .chain(v.iter().copied())
                .map(OsString::from)
                .collect();
            answer(&args).map(char::from)
        };
        assert_eq!(a(&["-h"]), Some('h'));
        assert_eq!(a(&["--help"]), Some('h'));
        assert_eq!(a(&["-V"]), Some('V'));
        assert_eq!(a(&["-l", "img", "--version"]), Some('V'));
        assert_eq!(a(&["-fV"]), Some('V'));
        // Values are not options.
        assert_eq!(a(&["-L", "-h", "img"]), None);
        assert_eq!(a(&["-L-h", "img"]), None);
        assert_eq!(a(&["-c", "5", "img"]), None);
        // Stops at what tune2fs does not know, and after "--".
        assert_eq!(a(&["-x", "-h"]), None);
        assert_eq!(a(&["--", "-h"]), None);
    }

    #[test]
    fn listing_becomes_an_object_in_order() {
        let text = "Filesystem volume name:   <none>\n\
                    Last write time:          Tue Nov 14 22:13:20 2023\n\
                    Journal backup:           inode blocks\n";
        let v: serde_json::Value = serde_json::from_str(&listing_json(text)).unwrap();
        assert_eq!(v["Filesystem volume name"], "<none>");
        assert_eq!(v["Last write time"], "Tue Nov 14 22:13:20 2023");
        assert_eq!(v["Journal backup"], "inode blocks");
    }
}
